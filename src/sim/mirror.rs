//! The mirror invariant: every committed restore point of a database's
//! mirror restores, with sleet's own `restore`, into a database whose
//! contents are a consistent prefix of what the application wrote: it
//! holds every write acknowledged before the newest write it holds.
//!
//! Judged while faults run (the newest restore point of one database, now
//! and then) and at the end (each database's newest restore point and its
//! oldest the retention promises to keep). A point that cannot restore is
//! `restore-point-broken`; one that restores to a state the application
//! never had is `restore-point-not-a-prefix`.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::TimeDelta;
use object_store::ObjectStore;
use slatedb::DbReader;
use tokio_util::sync::CancellationToken;

use super::app::{KEYS, write_number};
use super::check::Violation;
use super::world::{MIRROR_KEEP, World, database_path, mirror_url};
use crate::fleet::database::{DatabaseHandle, Replay, derived_seed};
use crate::mirror::copier::CopyProgress;
use crate::mirror::io::{list_dir, list_manifest_ids, read_manifest};
use crate::mirror::layout::{MANIFEST_DIR, live_pins, parse_manifest_file};
use crate::mirror::points::restore_points;
use crate::mirror::restore::{RestoreOutcome, RestorePoint, restore};
use crate::mirror::verify::verify;

/// A committed restore point did not restore.
pub const RESTORE_BROKEN: &str = "restore-point-broken";
/// A restore point restored to a state the application never had.
pub const NOT_A_PREFIX: &str = "restore-point-not-a-prefix";
/// A restore of the newest restore point, with the fleet settled, missed
/// a write acknowledged more than [`RECOVERY_BOUND`] before it started.
pub const RECOVERY_POINT_MISSED: &str = "recovery-point-missed";
/// `sleet mirror verify` finds a destination unsound at the end.
pub const DESTINATION_UNSOUND: &str = "destination-unsound";

/// What a continuous mirror promises once its node runs undisturbed: a
/// restore holds every write acknowledged this long before it starts.
/// The WAL tail looks every 500 ms while the writer is active, beside any
/// pass; the rest is the simulated store's latency and the restore's own
/// reads before it lists the WAL.
pub const RECOVERY_BOUND: TimeDelta = TimeDelta::seconds(5);

/// Which of a destination's restore points to restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Newest,
    /// The oldest the retention must still keep (younger than `keep`,
    /// with a margin for clock skew and a prune in flight).
    OldestKept,
}

/// How much younger than `keep` a restore point must be to count as kept.
const KEEP_MARGIN: TimeDelta = TimeDelta::seconds(15);

impl World {
    /// Restores `which` restore point of database `index`'s mirror into a
    /// scratch root and reads it whole: the violations found (none when
    /// the mirror holds no restore point yet).
    pub(super) async fn judge_restore_point(
        &mut self,
        index: usize,
        which: Which,
    ) -> Vec<Violation> {
        if self.foreign == Some(index) {
            return Vec::new();
        }
        let url = mirror_url(index);
        let backup = self.checker_handle(&url);
        let now = self.clock.now();
        let listed = match list_dir(&backup.root(), MANIFEST_DIR).await {
            Ok(listed) => listed,
            Err(e) => return vec![broken(&url, e.to_string())],
        };
        let mut pins = BTreeMap::new();
        let mut written = BTreeMap::new();
        for (name, meta) in &listed {
            let Some(id) = name.rsplit('/').next().and_then(parse_manifest_file) else {
                continue;
            };
            // Pruned since the listing: not a point to judge.
            if let Ok(Some(manifest)) = read_manifest(&backup, id).await {
                pins.insert(id, live_pins(&manifest, now));
                written.insert(id, meta.last_modified);
            }
        }
        let points = restore_points(&pins);
        let kept_since =
            now - TimeDelta::from_std(MIRROR_KEEP).expect("a short keep") + KEEP_MARGIN;
        let chosen = match which {
            Which::Newest => points.last().copied(),
            Which::OldestKept => points
                .iter()
                .copied()
                .find(|id| written.get(id).is_some_and(|at| *at > kept_since)),
        };
        let Some(id) = chosen else {
            return Vec::new();
        };
        let read = match self
            .restore_and_read(&backup, RestorePoint::Manifest(id))
            .await
        {
            Ok((_, read)) => read,
            // Retention may take a point that stopped being the newest
            // and is older than the keep window while the restore of it
            // was held (`Seam::BetweenRestorePointAndCopy`): sleet's
            // restore says so, and it is no broken point.
            Err(Unrestorable::Restore(_))
                if self.pruned_as_promised(&backup, id, written.get(&id)).await =>
            {
                self.note(format!(
                    "{url} restore point {id} pruned before it was judged"
                ));
                return Vec::new();
            }
            // The restore's own errors name the point.
            Err(Unrestorable::Restore(e)) => return vec![broken(&url, format!("{which:?}: {e}"))],
            Err(Unrestorable::Read(e)) => {
                let why = format!("{which:?} restore point {id} restored but cannot be read: {e}");
                return vec![broken(&url, why)];
            }
        };
        let acknowledged = self
            .apps
            .get(&index)
            .map(|app| app.acknowledged_writes())
            .unwrap_or_default();
        self.note(format!(
            "restored {url} manifest {id} ({which:?}): {} keys",
            read.len()
        ));
        match judge_prefix(&read, &acknowledged) {
            Some(why) => vec![Violation {
                name: NOT_A_PREFIX,
                detail: format!("{url} restore point {id} ({which:?}): {why}"),
            }],
            None => Vec::new(),
        }
    }

    /// Whether restore point `id` of `backup`, written at `written`, is
    /// gone now as retention may take it: older than the keep window, and
    /// a newer manifest committed since.
    async fn pruned_as_promised(
        &self,
        backup: &DatabaseHandle,
        id: u64,
        written: Option<&chrono::DateTime<chrono::Utc>>,
    ) -> bool {
        let kept_since = self.clock.now() - TimeDelta::from_std(MIRROR_KEEP).expect("a short keep");
        let old_enough = written.is_some_and(|at| *at < kept_since);
        let gone = matches!(read_manifest(backup, id).await, Ok(None));
        let newer = list_manifest_ids(&backup.root())
            .await
            .is_ok_and(|ids| ids.last().is_some_and(|&newest| newest > id));
        old_enough && gone && newer
    }

    /// `sleet mirror verify` of database `index`'s destination, as an
    /// operator runs it: every restore point's whole closure present and
    /// every other manifest's own objects. A pass that commits what
    /// another node's prune took meanwhile breaks a point that is neither
    /// the newest nor the oldest kept, which only this sees.
    pub(super) async fn judge_verify(&mut self, index: usize) -> Vec<Violation> {
        if self.foreign == Some(index) {
            return Vec::new();
        }
        let url = mirror_url(index);
        let unsound = |detail: String| {
            vec![Violation {
                name: DESTINATION_UNSOUND,
                detail,
            }]
        };
        match verify(&self.checker_handle(&url)).await {
            // Never mirrored (registered and removed between passes).
            Ok(report) if report.latest_manifest.is_none() => Vec::new(),
            Ok(report) => match report.problems.first() {
                None => Vec::new(),
                Some(first) => unsound(format!(
                    "{url}: mirror verify found {} problems, first: {first}",
                    report.problems.len()
                )),
            },
            Err(e) => unsound(format!("{url}: mirror verify failed: {e}")),
        }
    }

    /// With the faults over and the fleet settled, restores the newest
    /// restore point of database `index`'s mirror with its WAL run (what
    /// `sleet mirror restore` does) while the writer goes on: it must hold
    /// every write acknowledged [`RECOVERY_BOUND`] before the restore
    /// began, and be a consistent prefix of the application's writes.
    pub(super) async fn judge_recovery_point(&mut self, index: usize) -> Vec<Violation> {
        if self.foreign == Some(index) {
            return Vec::new();
        }
        let url = mirror_url(index);
        let backup = self.checker_handle(&url);
        let began = self.clock.now();
        let (outcome, read) = match self.restore_and_read(&backup, RestorePoint::Latest).await {
            Ok(restored) => restored,
            Err(Unrestorable::Restore(e)) => {
                return vec![broken(&url, format!("latest with its WAL: {e}"))];
            }
            Err(Unrestorable::Read(e)) => {
                let why = format!("latest with its WAL restored but cannot be read: {e}");
                return vec![broken(&url, why)];
            }
        };
        let Some(app) = self.apps.get(&index) else {
            return Vec::new();
        };
        let due = app.acknowledged_by(began - RECOVERY_BOUND);
        let acknowledged = app.acknowledged_writes();
        self.note(format!(
            "restored {url} latest (manifest {}, WAL {}): {} keys, {} writes due",
            outcome.manifest_id,
            outcome.wal_end,
            read.len(),
            due.len()
        ));
        let mut found = Vec::new();
        if let Some(why) = judge_prefix(&read, &acknowledged) {
            found.push(Violation {
                name: NOT_A_PREFIX,
                detail: format!("{url} latest with its WAL: {why}"),
            });
        }
        if let Some(why) = judge_holds(&read, &due) {
            found.push(Violation {
                name: RECOVERY_POINT_MISSED,
                detail: format!(
                    "{url} latest (manifest {}, WAL {}), restored with the fleet settled: {why}",
                    outcome.manifest_id, outcome.wal_end
                ),
            });
        }
        found
    }

    /// Restores `at` of `backup` into a fresh scratch root, as `sleet
    /// mirror restore` does, and reads it whole.
    async fn restore_and_read(
        &mut self,
        backup: &DatabaseHandle,
        at: RestorePoint,
    ) -> Result<(RestoreOutcome, BTreeMap<String, String>), Unrestorable> {
        self.restores += 1;
        let scratch = self.checker_handle(&format!("s3://sim-restore/r{}", self.restores));
        let outcome = restore(
            backup,
            &scratch,
            at,
            false,
            CopyProgress::new(),
            &CancellationToken::new(),
        )
        .await
        .map_err(|e| Unrestorable::Restore(e.to_string()))?;
        let read = self.read_all(&scratch).await.map_err(Unrestorable::Read)?;
        Ok((outcome, read))
    }

    /// A handle on `url` through the checker's view (no faults), on the
    /// store's clock.
    fn checker_handle(&self, url: &str) -> DatabaseHandle {
        let store: Arc<dyn ObjectStore> = Arc::new(self.store.view("checker"));
        let replay = Replay {
            seed: derived_seed(self.seed, self.restores),
            clock: self.clock.slatedb(0),
            service_stores: None,
        };
        DatabaseHandle::replaying(url.to_string(), store, database_path(url), replay)
    }

    /// Every key of the database behind `handle`, by a fresh reader.
    async fn read_all(&self, handle: &DatabaseHandle) -> Result<BTreeMap<String, String>, String> {
        let store: Arc<dyn ObjectStore> = Arc::new(self.store.view("checker"));
        let reader = DbReader::builder(database_path(handle.url()), store)
            .with_seed(derived_seed(self.seed, self.restores))
            .with_system_clock(self.clock.slatedb(0))
            .build()
            .await
            .map_err(|e| e.to_string())?;
        let mut read = BTreeMap::new();
        let scanned = async {
            let mut iter = reader.scan(..).await?;
            while let Some(kv) = iter.next().await? {
                read.insert(
                    String::from_utf8_lossy(&kv.key).into_owned(),
                    String::from_utf8_lossy(&kv.value).into_owned(),
                );
            }
            Ok::<_, slatedb::Error>(())
        }
        .await;
        let _ = reader.close().await;
        scanned.map_err(|e| e.to_string())?;
        Ok(read)
    }
}

/// Why a restore the checker made could not be judged.
enum Unrestorable {
    /// `restore` refused or failed.
    Restore(String),
    /// It restored, but a fresh reader cannot read it.
    Read(String),
}

fn broken(url: &str, why: String) -> Violation {
    Violation {
        name: RESTORE_BROKEN,
        detail: format!("{url}: {why}"),
    }
}

/// Why `read` (a restored database, key to value) is not a consistent
/// prefix of the application's writes, if it is not: every value must be
/// one the application wrote to that key, and every write acknowledged
/// before the newest write `read` holds (the application writes one at a
/// time, so those were durable before it was made) must be there or
/// overwritten by a later one.
pub fn judge_prefix(read: &BTreeMap<String, String>, acknowledged: &[u64]) -> Option<String> {
    let mut newest = 0;
    for (key, value) in read {
        let Some(number) = write_number(key, value) else {
            return Some(format!(
                "{key} reads {value:?}, which the application never wrote"
            ));
        };
        newest = newest.max(number);
    }
    let before = acknowledged.iter().copied().filter(|w| *w < newest);
    let (key, found, write) = first_missing(read, before)?;
    Some(format!(
        "it holds write {newest} but {key} reads {found}: write {write}, acknowledged \
         durable before write {newest} was made, is missing"
    ))
}

/// The first of `writes` that `read` neither holds nor overwrote with a
/// later write: its key, what that key reads, and the write.
fn first_missing(
    read: &BTreeMap<String, String>,
    writes: impl IntoIterator<Item = u64>,
) -> Option<(String, String, u64)> {
    writes.into_iter().find_map(|write| {
        let key = format!("k{:04}", write % KEYS);
        let holds = read.get(&key).and_then(|value| write_number(&key, value));
        holds.is_none_or(|n| n < write).then(|| {
            let found = holds.map_or("nothing".to_string(), |n| format!("write {n}"));
            (key, found, write)
        })
    })
}

/// Why `read` misses one of the writes `due`, if it does: each must be
/// there, or overwritten by a later write.
pub fn judge_holds(read: &BTreeMap<String, String>, due: &[u64]) -> Option<String> {
    let (key, found, write) = first_missing(read, due.iter().copied())?;
    Some(format!(
        "{key} reads {found}: write {write}, acknowledged more than {} s before the restore \
         began, is missing ({} writes were due)",
        RECOVERY_BOUND.num_seconds(),
        due.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(write: u64) -> (String, String) {
        let key = format!("k{:04}", write % KEYS);
        let value = format!("{key}={write}:{}", "v".repeat(64));
        (key, value)
    }

    /// Control: a restored state missing an acknowledged write older than
    /// its newest, or holding a value never written, is caught; a prefix
    /// (unacknowledged writes missing, later ones overwriting) passes.
    #[test]
    fn a_prefix_passes_and_a_gap_or_a_stranger_is_caught() {
        let acknowledged = [1, 2, 3, 5];
        let state = |writes: &[u64]| -> BTreeMap<String, String> {
            writes.iter().map(|w| value(*w)).collect()
        };
        assert_eq!(judge_prefix(&state(&[1, 2, 3]), &acknowledged), None);
        assert_eq!(judge_prefix(&state(&[1, 2, 3, 4, 5]), &acknowledged), None);
        assert_eq!(
            judge_prefix(&state(&[1, 2]), &acknowledged),
            None,
            "an older prefix"
        );
        assert_eq!(judge_prefix(&state(&[]), &acknowledged), None);
        // Write 401 overwrites write 1's key.
        assert_eq!(judge_prefix(&state(&[401, 2, 3, 5]), &acknowledged), None);
        let gap = judge_prefix(&state(&[1, 3, 5]), &acknowledged).expect("a gap");
        assert!(gap.contains("write 2, acknowledged"), "{gap}");
        // Control of the recovery point: a restore without write 5.
        assert_eq!(judge_holds(&state(&[1, 2, 3, 5]), &acknowledged), None);
        assert_eq!(judge_holds(&state(&[401, 2, 3, 5]), &acknowledged), None);
        let missed = judge_holds(&state(&[1, 2, 3]), &acknowledged).expect("a miss");
        assert!(missed.contains("write 5, acknowledged"), "{missed}");
        let mut stranger = state(&[1, 2]);
        stranger.insert("k0002".into(), "k0002=3:vv".into());
        assert!(judge_prefix(&stranger, &acknowledged).is_some());
    }
}
