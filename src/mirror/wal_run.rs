//! The WAL a restore point carries: a manifest's state plus the
//! contiguous run of WAL objects after its replay point.
//!
//! A quiet writer keeps its writes in the WAL until a 64 MiB memtable
//! fills, so a manifest alone can be minutes or hours behind the writes it
//! acknowledged. A SlateDB reader or writer opened on a root replays every
//! WAL object after the manifest's `replay_after_wal_id`, in id order, up
//! to the highest it finds; a missing id below the highest fails the open
//! (`WalTruncated`). So a restore point is a manifest and a WAL id `end`:
//! the restore copies the manifest's closure and WAL ids
//! `replay_after_wal_id + 1 ..= end`, all present (a run with a gap would
//! not be a prefix of the writer's history, and would not open).
//!
//! Pure functions of listings, with unit tests beside them.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

/// The highest WAL id `end` such that every id in `after + 1 ..= end` is in
/// `present`; `after` itself when `after + 1` is missing.
pub fn run_end(present: &BTreeSet<u64>, after: u64) -> u64 {
    let mut end = after;
    for &id in present.range(after.saturating_add(1)..) {
        if id != end + 1 {
            break;
        }
        end = id;
    }
    end
}

/// WAL ids in `present` above `end` that a restore cannot use: they come
/// after a gap (a WAL object source GC collected before the mirror copied
/// it, or one still in flight).
pub fn stranded(present: &BTreeSet<u64>, end: u64) -> Vec<u64> {
    present.range(end.saturating_add(1)..).copied().collect()
}

/// What a restore needs of one manifest to choose its WAL end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replay {
    /// The manifest's `replay_after_wal_id`.
    pub after: u64,
    /// The manifest's `next_wal_sst_id`: its own window ends below it.
    pub next: u64,
}

/// Where a manifest's replay starts and its window ends.
pub fn replay_of(manifest: &slatedb::VersionedManifest) -> Replay {
    Replay {
        after: manifest.replay_after_wal_id(),
        next: manifest.next_wal_sst_id(),
    }
}

impl Replay {
    /// The last WAL id of the manifest's own window (`after` when empty).
    pub fn window_end(self) -> u64 {
        self.next.saturating_sub(1).max(self.after)
    }
}

/// The WAL end of a restore of `manifest` "as late as the backup allows":
/// the whole contiguous run after its replay point, never less than its
/// own window (whose presence the restore point's closure check proves).
pub fn latest_end(manifest: Replay, present: &BTreeSet<u64>) -> u64 {
    run_end(present, manifest.after).max(manifest.window_end())
}

/// When each WAL object was written at the source (its `LastModified`
/// there), for the WAL ids a backup knows. Times only grow with the id:
/// a writer publishes its WAL in order, one object at a time.
pub type WalTimes = BTreeMap<u64, DateTime<Utc>>;

/// The newest WAL id written at or before `at`, among the ids `run`
/// holds; `None` when every one is newer (or none has a time).
///
/// An id without a recorded source time takes the time of the next id
/// that has one (or, past the last, is treated as unknown and left out):
/// the source wrote it no later than that.
pub fn newest_written_by(
    times: &WalTimes,
    run: std::ops::RangeInclusive<u64>,
    at: DateTime<Utc>,
) -> Option<u64> {
    let mut newest = None;
    for id in run {
        let Some(written) = written_by(times, id) else {
            break;
        };
        if written > at {
            break;
        }
        newest = Some(id);
    }
    newest
}

/// No later than when WAL `id` was written: its own source time, else
/// that of the next id with one (the source wrote them in order); `None`
/// when nothing from `id` on has a time.
pub fn written_by(times: &WalTimes, id: u64) -> Option<DateTime<Utc>> {
    times.range(id..).next().map(|(_, t)| *t)
}

/// For a restore "as of `at`": the newest of `candidates` (manifests by
/// id, ascending, each a restore point whose closure is present) whose
/// data was all written by `at`, and the WAL end to restore with it: the
/// newest WAL id written by `at` in the contiguous run after its window.
/// `None` when no candidate can be dated by `at` (the caller falls back to
/// the source's sequence tracker).
///
/// A manifest's data is the WAL up to its replay point (and what its
/// memtable held of the next object when frozen), plus its window, which
/// a reader replays: so a manifest whose last window object (or, with an
/// empty window, whose replay point) was written by `at` holds only
/// writes acknowledged by `at`, within one WAL object. A database with no
/// WAL yet (replay point 0, empty window) holds nothing and always counts.
pub fn as_of(
    candidates: &[(u64, Replay)],
    present: &BTreeSet<u64>,
    times: &WalTimes,
    at: DateTime<Utc>,
) -> Option<(u64, u64)> {
    for &(id, replay) in candidates.iter().rev() {
        let window_end = replay.window_end();
        let dated = window_end == 0 || written_by(times, window_end).is_some_and(|w| w <= at);
        if !dated {
            continue;
        }
        let run = latest_end(replay, present);
        let end =
            newest_written_by(times, window_end.saturating_add(1)..=run, at).unwrap_or(window_end);
        return Some((id, end));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[u64]) -> BTreeSet<u64> {
        list.iter().copied().collect()
    }

    fn t(second: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + second, 0).expect("a time")
    }

    #[test]
    fn a_run_stops_at_the_first_gap() {
        assert_eq!(run_end(&ids(&[1, 2, 3, 5, 6]), 0), 3);
        assert_eq!(run_end(&ids(&[1, 2, 3, 5, 6]), 4), 6);
        assert_eq!(run_end(&ids(&[2, 3]), 0), 0, "id 1 missing: no run");
        assert_eq!(run_end(&ids(&[]), 7), 7);
        assert_eq!(stranded(&ids(&[1, 2, 3, 5, 6]), 3), vec![5, 6]);
    }

    #[test]
    fn the_latest_end_takes_the_whole_run_and_never_less_than_the_window() {
        let replay = Replay { after: 4, next: 7 };
        assert_eq!(latest_end(replay, &ids(&[5, 6, 7, 8, 10])), 8);
        // A window the listing lacks is the closure check's to report.
        assert_eq!(latest_end(replay, &ids(&[])), 6);
    }

    #[test]
    fn the_newest_written_by_a_time_counts_untimed_ids_by_the_next_timed_one() {
        let times = WalTimes::from([(1, t(10)), (2, t(20)), (4, t(40))]);
        assert_eq!(newest_written_by(&times, 1..=4, t(25)), Some(2));
        // 3 has no time of its own: written no later than 4, at 40.
        assert_eq!(newest_written_by(&times, 1..=4, t(39)), Some(2));
        assert_eq!(newest_written_by(&times, 1..=4, t(40)), Some(4));
        assert_eq!(newest_written_by(&times, 1..=4, t(5)), None);
        // 5 has no time and nothing after it: left out.
        assert_eq!(newest_written_by(&times, 1..=5, t(99)), Some(4));
    }

    /// Manifest 3 replays after WAL 2 (window 3..=4); manifest 9 after
    /// WAL 6 (window 7). WAL 1..=9 present, written at 10 s a step.
    #[test]
    fn as_of_a_time_picks_the_newest_manifest_whose_window_predates_it() {
        let present = ids(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let times: WalTimes = (1..=9).map(|id| (id, t(id as i64 * 10))).collect();
        let candidates = [
            (3, Replay { after: 2, next: 5 }),
            (9, Replay { after: 6, next: 8 }),
        ];
        assert_eq!(as_of(&candidates, &present, &times, t(85)), Some((9, 8)));
        assert_eq!(as_of(&candidates, &present, &times, t(70)), Some((9, 7)));
        // Manifest 9's window (WAL 7) was written at 70: too new at 65.
        assert_eq!(as_of(&candidates, &present, &times, t(65)), Some((3, 6)));
        assert_eq!(as_of(&candidates, &present, &times, t(45)), Some((3, 4)));
        assert_eq!(as_of(&candidates, &present, &times, t(35)), None);
    }

    #[test]
    fn as_of_never_restores_across_a_gap() {
        let present = ids(&[3, 4, 6, 7]);
        let times: WalTimes = (1..=7).map(|id| (id, t(id as i64 * 10))).collect();
        let candidates = [(3, Replay { after: 2, next: 5 })];
        assert_eq!(as_of(&candidates, &present, &times, t(99)), Some((3, 4)));
        // An empty window is dated by its replay point.
        let candidates = [(5, Replay { after: 4, next: 5 })];
        assert_eq!(as_of(&candidates, &present, &times, t(39)), None);
        assert_eq!(as_of(&candidates, &present, &times, t(40)), Some((5, 4)));
        // WAL 5 is missing: the run stops at the replay point.
        assert_eq!(as_of(&candidates, &present, &times, t(75)), Some((5, 4)));
    }
}
