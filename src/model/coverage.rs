//! Coverage marks: the guards and the rare paths they are there for,
//! counted when the simulator runs the real code (FoundationDB calls them
//! code probes). A clean simulated run says something about a guard only
//! if the run went through it; `scripts/simulate` prints how often each
//! mark was hit and fails a many-seed run in which one never was.
//!
//! Counting is off unless the simulator turns it on for its thread (it
//! runs a fleet on one thread), so a node pays one thread-local read per
//! mark and nothing else. Regions say what is under way (a mirror pass
//! on a destination, a pin on a source), so a mark can tell that two
//! pieces of work overlapped.

use std::cell::RefCell;
use std::collections::BTreeMap;

/// A place in the code the simulator must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mark {
    /// A peer's heartbeat aged out: its work moves.
    HeartbeatAgedOut,
    /// A node stopped a task it no longer owns.
    TaskStoppedOnHandover,
    /// A node read a changed config or registry.
    ConfigChangeRead,
    /// A stopped task's entry left the node's board.
    BoardEntryRemoved,
    /// The outside-compactor vet found a compactor outside the fleet and
    /// the coordinator stood down.
    OutsideCompactorStoodDown,
    /// A coordinator waited for the epoch's holder to hand over.
    CoordinatorHandoverWaited,
    /// A coordinator started on an epoch another node held.
    CoordinatorTookOverEpoch,
    /// A mirror pass claimed a new destination for its source.
    MirrorDestinationClaimed,
    /// A mirror pass was refused a destination another source claimed.
    MirrorDestinationRefused,
    /// A mirror pass pinned the source before copying.
    MirrorPinTaken,
    /// A mirror pass's pin lapsed before its commit, and it restarted.
    MirrorPinLapsed,
    /// Retention spared a manifest or an object the source still
    /// references or pins.
    PruneSparedForSource,
    /// Retention spared an object younger than its `min_age`.
    PruneSparedForAge,
    /// Retention spared an object written after a running pass's pin.
    PruneSparedForPin,
    /// The fleet's GC held WAL a continuous mirror still lacks.
    GcHeldWalForMirror,
    /// A restore brought a WAL run after its manifest.
    RestoreTookWalRun,
    /// A node checked a store before running anything on it.
    StoreChecked,
    /// Two nodes' mirror passes ran on one destination at once.
    MirrorPassesOverlapped,
    /// Retention ran on a destination while another node's pass did.
    PruneDuringPass,
    /// SlateDB's GC deleted from a source while a mirror pass had it
    /// pinned.
    GcWhilePinned,
    /// A coordinator of another node wrote a database's manifest while a
    /// compaction of the former coordinator's was still landing.
    HandoverMidCompaction,
    /// A conditional write was applied and its reply lost.
    LostReplyToConditionalWrite,
    /// A node whose clock is off the store's by a second or more was cut
    /// off past the heartbeat timeout: its peers aged it out by their
    /// clocks, and it came back judging them by its own.
    SkewedNodeAgedOut,
}

impl Mark {
    pub const ALL: [Mark; 23] = [
        Mark::HeartbeatAgedOut,
        Mark::TaskStoppedOnHandover,
        Mark::ConfigChangeRead,
        Mark::BoardEntryRemoved,
        Mark::OutsideCompactorStoodDown,
        Mark::CoordinatorHandoverWaited,
        Mark::CoordinatorTookOverEpoch,
        Mark::MirrorDestinationClaimed,
        Mark::MirrorDestinationRefused,
        Mark::MirrorPinTaken,
        Mark::MirrorPinLapsed,
        Mark::PruneSparedForSource,
        Mark::PruneSparedForAge,
        Mark::PruneSparedForPin,
        Mark::GcHeldWalForMirror,
        Mark::RestoreTookWalRun,
        Mark::StoreChecked,
        Mark::MirrorPassesOverlapped,
        Mark::PruneDuringPass,
        Mark::GcWhilePinned,
        Mark::HandoverMidCompaction,
        Mark::LostReplyToConditionalWrite,
        Mark::SkewedNodeAgedOut,
    ];

    /// Whether the simulator reaches the mark in fewer than one seed in
    /// 50 (measured): a run must be long to require it. Retention's spare
    /// for the source matters only when a pass under way elsewhere copied
    /// what no kept restore point holds (1 of 200 seeds, 2026-12-08).
    pub fn rare(self) -> bool {
        matches!(self, Mark::PruneSparedForSource)
    }

    /// The name the simulator prints.
    pub fn name(self) -> &'static str {
        match self {
            Mark::HeartbeatAgedOut => "heartbeat-aged-out",
            Mark::TaskStoppedOnHandover => "task-stopped-on-handover",
            Mark::ConfigChangeRead => "config-change-read",
            Mark::BoardEntryRemoved => "board-entry-removed",
            Mark::OutsideCompactorStoodDown => "outside-compactor-stood-down",
            Mark::CoordinatorHandoverWaited => "coordinator-handover-waited",
            Mark::CoordinatorTookOverEpoch => "coordinator-took-over-epoch",
            Mark::MirrorDestinationClaimed => "mirror-destination-claimed",
            Mark::MirrorDestinationRefused => "mirror-destination-refused",
            Mark::MirrorPinTaken => "mirror-pin-taken",
            Mark::MirrorPinLapsed => "mirror-pin-lapsed",
            Mark::PruneSparedForSource => "prune-spared-for-source",
            Mark::PruneSparedForAge => "prune-spared-for-age",
            Mark::PruneSparedForPin => "prune-spared-for-pin",
            Mark::GcHeldWalForMirror => "gc-held-wal-for-mirror",
            Mark::RestoreTookWalRun => "restore-took-wal-run",
            Mark::StoreChecked => "store-checked",
            Mark::MirrorPassesOverlapped => "mirror-passes-overlapped",
            Mark::PruneDuringPass => "prune-during-pass",
            Mark::GcWhilePinned => "gc-while-pinned",
            Mark::HandoverMidCompaction => "handover-mid-compaction",
            Mark::LostReplyToConditionalWrite => "lost-reply-to-conditional-write",
            Mark::SkewedNodeAgedOut => "skewed-node-aged-out",
        }
    }
}

/// Work under way that a mark may ask about, by the key it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Region {
    /// A mirror pass, keyed by its destination's URL.
    MirrorPass,
    /// A mirror pass's pin, keyed by its source's URL.
    MirrorPin,
}

#[derive(Default)]
struct Counts {
    marks: BTreeMap<Mark, u64>,
    regions: BTreeMap<(Region, String), u32>,
}

thread_local! {
    static COUNTS: RefCell<Option<Counts>> = const { RefCell::new(None) };
}

fn with_counts<T>(f: impl FnOnce(&mut Counts) -> T) -> Option<T> {
    COUNTS
        .try_with(|cell| cell.borrow_mut().as_mut().map(f))
        .ok()
        .flatten()
}

/// Counts a hit of `mark`, when this thread counts.
pub fn hit(mark: Mark) {
    with_counts(|counts| *counts.marks.entry(mark).or_default() += 1);
}

/// How many pieces of `region` work are under way on `key`.
pub fn under_way(region: Region, key: &str) -> u32 {
    with_counts(|counts| {
        counts
            .regions
            .get(&(region, key.to_string()))
            .copied()
            .unwrap_or(0)
    })
    .unwrap_or(0)
}

/// Enters `region` on `key` until the returned guard is dropped, and
/// returns how many were under way there before.
pub fn enter(region: Region, key: &str) -> (RegionGuard, u32) {
    let before = with_counts(|counts| {
        let count = counts.regions.entry((region, key.to_string())).or_default();
        *count += 1;
        *count - 1
    })
    .unwrap_or(0);
    let guard = RegionGuard {
        region,
        key: key.to_string(),
    };
    (guard, before)
}

/// Leaves its region when dropped.
#[derive(Debug)]
pub struct RegionGuard {
    region: Region,
    key: String,
}

impl Drop for RegionGuard {
    fn drop(&mut self) {
        let key = (self.region, std::mem::take(&mut self.key));
        with_counts(|counts| {
            if let Some(count) = counts.regions.get_mut(&key) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    counts.regions.remove(&key);
                }
            }
        });
    }
}

/// Counts marks on this thread, from zero, until the guard is dropped.
pub fn count() -> CountingGuard {
    COUNTS.with(|cell| *cell.borrow_mut() = Some(Counts::default()));
    CountingGuard
}

/// Stops counting when dropped; [`CountingGuard::hits`] reads the counts.
#[derive(Debug)]
pub struct CountingGuard;

impl CountingGuard {
    /// Every mark with its hits so far (zero for those never hit).
    pub fn hits(&self) -> BTreeMap<Mark, u64> {
        let counted = with_counts(|counts| counts.marks.clone()).unwrap_or_default();
        Mark::ALL
            .iter()
            .map(|mark| (*mark, counted.get(mark).copied().unwrap_or(0)))
            .collect()
    }
}

impl Drop for CountingGuard {
    fn drop(&mut self) {
        let _ = COUNTS.try_with(|cell| *cell.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_count_only_while_counting_and_regions_nest() {
        hit(Mark::StoreChecked);
        let (_outside, before) = enter(Region::MirrorPass, "d");
        assert_eq!(before, 0, "nothing is counted before counting starts");
        {
            let counting = count();
            hit(Mark::StoreChecked);
            hit(Mark::StoreChecked);
            let (first, before) = enter(Region::MirrorPass, "d");
            assert_eq!(before, 0);
            let (_second, before) = enter(Region::MirrorPass, "d");
            assert_eq!(before, 1, "a second pass on d overlaps the first");
            drop(first);
            assert_eq!(under_way(Region::MirrorPass, "d"), 1);
            assert_eq!(under_way(Region::MirrorPass, "e"), 0);
            let hits = counting.hits();
            assert_eq!(hits[&Mark::StoreChecked], 2);
            assert_eq!(hits[&Mark::GcWhilePinned], 0);
            assert_eq!(hits.len(), Mark::ALL.len());
        }
        hit(Mark::StoreChecked);
        assert_eq!(under_way(Region::MirrorPass, "d"), 0);
    }

    #[test]
    fn every_mark_has_its_own_name() {
        let names: std::collections::BTreeSet<&str> = Mark::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), Mark::ALL.len());
    }
}
