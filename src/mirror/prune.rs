//! Retention at a destination: the mirror is its only deleter (SlateDB GC
//! must never run there: it would write manifests and fork the history).
//!
//! Kept restore points are the latest manifest, every manifest younger
//! than `keep`, and the newest restore point however old (the latest is
//! none while an interrupted pass is not redone). A kept one keeps the manifests its live checkpoints pin
//! and every object any kept manifest references. Guards stop prune from
//! deleting what an in-flight pass (on this node or, during a brief double
//! run, another) is about to commit: manifests and objects the source
//! still references or pins are spared, and objects newer than the oldest
//! running pass's pin (less `min_age`) are left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use object_store::ObjectStoreExt;
use slatedb::VersionedManifest;

use super::MirrorError;
use super::io::{list_dir, read_latest, read_manifest};
use super::layout::{
    COMPACTED_DIR, MANIFEST_DIR, WAL_DIR, kept_pins, manifest_name, manifest_objects,
    parse_manifest_file, parse_wal_file, pin_name,
};
use super::pass::MirrorPair;
use super::points::newest_restore_point;
use crate::model::coverage::{self, Mark, Region};
use crate::model::planted::{Planted, planted};
use crate::model::seams::{self, Seam};
use crate::store::StoreRoot;

/// What a prune did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub kept_manifests: u64,
    pub deleted_manifests: u64,
    pub deleted_objects: u64,
    /// False when a guard could not be computed, so only manifests went.
    pub data_deletion_ran: bool,
}

/// Deletions run this many at a time.
const DELETE_PARALLELISM: usize = 16;

/// A listed object and when it was written.
type Listing = BTreeMap<String, DateTime<Utc>>;

/// What the source's latest manifest still references: the manifests its
/// checkpoints pin and the data objects of those and of itself.
#[derive(Debug, Default)]
struct Spared {
    manifests: BTreeSet<u64>,
    objects: BTreeSet<String>,
}

/// The listed manifests prune deletes: those it keeps not, and those the
/// source's checkpoints do not pin (a pass that read a newer source head
/// than the destination's latest commits them as its head's closure, and
/// may be writing them now). Without word from the source, only what is
/// kept stays.
fn doomed_manifests(
    listed: impl Iterator<Item = u64>,
    kept: &BTreeSet<u64>,
    spared: Option<&BTreeSet<u64>>,
) -> Vec<u64> {
    listed
        .filter(|id| {
            if kept.contains(id) {
                return false;
            }
            let spared = spared.is_some_and(|s| s.contains(id));
            if spared {
                coverage::hit(Mark::PruneSparedForSource);
            }
            !spared
        })
        .collect()
}

impl MirrorPair {
    /// Applies retention `keep` at the destination, as of `now`.
    pub async fn prune(
        &self,
        keep: Duration,
        min_age: Duration,
        now: DateTime<Utc>,
    ) -> Result<PruneReport, MirrorError> {
        // Only a destination proven this source's is pruned.
        match super::owner::judge(
            super::owner::read(&self.destination).await?.as_ref(),
            self.source.url(),
        ) {
            super::owner::Ownership::Theirs(owner) => {
                return Err(MirrorError::DestinationOwned {
                    destination: self.destination.url().to_string(),
                    owner,
                    source_url: self.source.url().to_string(),
                });
            }
            super::owner::Ownership::Ours => {}
            super::owner::Ownership::Unclaimed => return Ok(PruneReport::default()),
        }
        let destination = self.destination.root();
        // List the destination before reading the source: anything a pass
        // commits after these listings references objects the source
        // still holds, which the spared set below then covers.
        let manifests: BTreeMap<u64, DateTime<Utc>> = list_dated(&destination, MANIFEST_DIR)
            .await?
            .into_iter()
            .filter_map(|(name, at)| Some((parse_manifest_file(file_of(&name))?, at)))
            .collect();
        let Some((&latest, _)) = manifests.last_key_value() else {
            return Ok(PruneReport::default());
        };
        let compacted = list_dated(&destination, COMPACTED_DIR).await?;
        let wal = list_dated(&destination, WAL_DIR).await?;
        let spared = self.spared_by_source().await;
        let floor = self.pin_floor(min_age).await;

        let keep_window = chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX);
        let mut restore_points: BTreeSet<u64> = manifests
            .iter()
            .filter(|(id, at)| **id == latest || now - **at < keep_window)
            .map(|(id, _)| *id)
            .collect();
        // Below the latest while an interrupted pass is not redone: kept
        // however old, so the destination always holds a restore point.
        let listed: BTreeSet<u64> = manifests.keys().copied().collect();
        let newest_point = newest_restore_point(&self.destination, &listed, now, |_| true).await?;
        restore_points.extend(newest_point.as_ref().map(|m| m.id()));
        let decoded = newest_point.into_iter().map(|m| (m.id(), m)).collect();
        let (kept, kept_objects, tail_floor) = self
            .kept(&restore_points, decoded, &manifests, latest, now)
            .await?;

        if coverage::under_way(Region::MirrorPass, self.destination.url()) > 0 {
            coverage::hit(Mark::PruneDuringPass);
        }
        seams::at(Seam::BetweenListAndDelete).await;
        let spared_manifests = spared.as_ref().ok().map(|s| &s.manifests);
        let doomed: Vec<String> =
            doomed_manifests(manifests.keys().copied(), &kept, spared_manifests)
                .into_iter()
                .map(manifest_name)
                .collect();
        let mut report = PruneReport {
            kept_manifests: kept.len() as u64,
            deleted_manifests: delete_all(&destination, doomed).await?,
            ..PruneReport::default()
        };
        let (
            Ok(Spared {
                objects: spared, ..
            }),
            Some(kept_objects),
        ) = (spared, kept_objects)
        else {
            tracing::info!(target = %self.target, deleted = report.deleted_manifests, "pruned manifests only");
            return Ok(report);
        };
        let min_age = chrono::Duration::from_std(min_age).unwrap_or(chrono::Duration::MAX);
        let young = |at: &DateTime<Utc>| {
            now - *at <= min_age && !planted_in_prune(Planted::PruneIgnoresMinAge)
        };
        let after_pin = |at: &DateTime<Utc>| floor.is_some_and(|f| *at >= f);
        // Which guard spares what kept restore points do not: marked, so
        // the simulator can tell each was reached.
        let deletable = |name: &String, at: &DateTime<Utc>| {
            if kept_objects.contains(name) {
                return false;
            }
            let spared_by = [
                (spared.contains(name), Mark::PruneSparedForSource),
                (young(at), Mark::PruneSparedForAge),
                (after_pin(at), Mark::PruneSparedForPin),
            ];
            let mut deletable = true;
            for (spares, mark) in spared_by {
                if spares {
                    coverage::hit(mark);
                    deletable = false;
                }
            }
            deletable
        };
        let mut doomed: Vec<String> = compacted
            .iter()
            .filter(|(name, at)| deletable(name, at))
            .map(|(name, _)| name.clone())
            .collect();
        doomed.extend(
            wal.iter()
                .filter(|(name, _)| parse_wal_file(file_of(name)).is_some_and(|id| id < tail_floor))
                .filter(|(name, at)| deletable(name, at))
                .map(|(name, _)| name.clone()),
        );
        report.deleted_objects = delete_all(&destination, doomed).await?;
        report.data_deletion_ran = true;
        // The source times of WAL no kept restore point replays.
        let records: Vec<String> = super::wal_times::list_spans(&destination)
            .await?
            .into_iter()
            .filter(|(_, span)| span.last < tail_floor)
            .map(|(name, _)| name)
            .collect();
        delete_all(&destination, records).await?;
        Ok(report)
    }

    /// The kept manifests (restore points and what their live checkpoints
    /// pin), the objects they reference (`None` if one is unreadable), and
    /// the lowest WAL id a kept restore point replays (WAL below it is
    /// history).
    /// `decoded` holds manifests already read.
    async fn kept(
        &self,
        restore_points: &BTreeSet<u64>,
        mut decoded: BTreeMap<u64, VersionedManifest>,
        listed: &BTreeMap<u64, DateTime<Utc>>,
        latest: u64,
        now: DateTime<Utc>,
    ) -> Result<(BTreeSet<u64>, Option<BTreeSet<String>>, u64), MirrorError> {
        let mut kept = restore_points.clone();
        for &id in restore_points {
            let manifest = match decoded.remove(&id) {
                Some(m) => Some(m),
                None => read_manifest(&self.destination, id).await?,
            };
            if let Some(manifest) = manifest {
                kept.extend(
                    kept_pins(&manifest, now)
                        .into_iter()
                        .filter(|pinned| listed.contains_key(pinned)),
                );
                decoded.insert(id, manifest);
            }
        }
        // Every restore point is a manifest and the WAL run after its
        // replay point (`wal_run`): the oldest kept one's replay point
        // bounds the WAL that restores by time may still need, the run
        // after the latest included.
        let tail_floor = restore_points
            .iter()
            .filter(|id| !planted(Planted::PruneKeepsLatestOnly) || **id == latest)
            .filter_map(|id| decoded.get(id))
            .map(|m| m.replay_after_wal_id().saturating_add(1))
            .min()
            .unwrap_or_else(|| decoded.get(&latest).map_or(0, |m| m.next_wal_sst_id()));
        let mut objects = BTreeSet::new();
        for &id in &kept {
            if planted(Planted::PruneKeepsLatestOnly) && id != latest {
                continue;
            }
            let manifest = match decoded.remove(&id) {
                Some(m) => m,
                None => match read_manifest(&self.destination, id).await? {
                    Some(m) => m,
                    None => {
                        tracing::warn!(target = %self.target, "kept manifest {id} unreadable; skipping data-object deletion");
                        return Ok((kept, None, tail_floor));
                    }
                },
            };
            objects.extend(manifest_objects(&manifest).into_keys());
        }
        Ok((kept, Some(objects), tail_floor))
    }

    /// The manifests the source's latest manifest pins with checkpoints
    /// (expired ones included), and the objects it or any of those still
    /// references.
    async fn spared_by_source(&self) -> Result<Spared, MirrorError> {
        if planted_in_prune(Planted::PruneIgnoresSource) {
            return Ok(Spared::default());
        }
        let result = async {
            let latest =
                read_latest(&self.source)
                    .await?
                    .ok_or_else(|| MirrorError::NotADatabase {
                        url: self.source.url().to_string(),
                    })?;
            let mut spared = Spared {
                objects: manifest_objects(&latest).into_keys().collect(),
                manifests: latest
                    .checkpoints()
                    .iter()
                    .map(|c| c.manifest_id)
                    .filter(|id| *id != latest.id())
                    .collect(),
            };
            for &id in &spared.manifests {
                if let Some(m) = read_manifest(&self.source, id).await? {
                    spared.objects.extend(manifest_objects(&m).into_keys());
                }
            }
            Ok(spared)
        }
        .await;
        if let Err(e) = &result {
            tracing::warn!(target = %self.target, "source unreachable ({e}); skipping data-object deletion, and sparing only kept manifests");
        }
        result
    }

    /// The oldest running pass's pin time less `min_age`: objects written
    /// after it may belong to a commit still to come.
    async fn pin_floor(&self, min_age: Duration) -> Option<DateTime<Utc>> {
        if planted_in_prune(Planted::PruneIgnoresPinFloor) {
            return None;
        }
        let name = pin_name(&self.target);
        let listed = self
            .source
            .bounded(
                "listing mirror pins",
                self.source.admin().list_checkpoints(Some(&name)),
            )
            .await;
        match listed {
            Ok(pins) => pins
                .iter()
                .map(|c| c.create_time - chrono::Duration::from_std(min_age).unwrap_or_default())
                .min(),
            Err(e) => {
                tracing::warn!(target = %self.target, "failed to list mirror pins ({e}); no pin floor");
                None
            }
        }
    }
}

/// Whether one of retention's in-flight guards is switched off, alone or
/// with the other two.
fn planted_in_prune(guard: Planted) -> bool {
    planted(guard) || planted(Planted::PruneIgnoresPassesInFlight)
}

fn file_of(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Names under `dir/` with their `LastModified`.
async fn list_dated(root: &StoreRoot, dir: &str) -> Result<Listing, MirrorError> {
    Ok(list_dir(root, dir)
        .await?
        .into_iter()
        .map(|(name, meta)| (name, meta.last_modified))
        .collect())
}

/// Deletes every name (a missing one counts as deleted); returns the count.
async fn delete_all(root: &StoreRoot, names: Vec<String>) -> Result<u64, MirrorError> {
    let results = futures::stream::iter(names)
        .map(|name| async move {
            match root.store.delete(&root.path(&name)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(MirrorError::Store {
                    action: "delete".into(),
                    location: format!("{}/{name}", root.url),
                    message: e.to_string(),
                }),
            }
        })
        .buffer_unordered(DELETE_PARALLELISM)
        .collect::<Vec<_>>()
        .await;
    let count = results.len() as u64;
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A destination whose latest is 12 (kept) while the source's latest
    /// pins 10 with a checkpoint: 10 stays, though the destination's
    /// latest does not pin it, because a pass of a newer head (on another
    /// node, during a double run) may be committing it right now, after
    /// this prune listed the destination. 9 goes.
    #[test]
    fn manifests_the_source_pins_are_spared() {
        let listed = [9, 10, 12];
        let kept = BTreeSet::from([12]);
        let source_pins = BTreeSet::from([10]);
        assert_eq!(
            doomed_manifests(listed.into_iter(), &kept, Some(&source_pins)),
            vec![9]
        );
        assert_eq!(
            doomed_manifests(listed.into_iter(), &kept, None),
            vec![9, 10],
            "without word from the source, only what is kept stays"
        );
    }
}
