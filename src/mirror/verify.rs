//! `sleet mirror verify`: proves a mirror destination restorable without
//! writing to it. Every restore point (the latest manifest, and the
//! others no checkpoint keeps as support: [`restore_points`]) must have
//! its whole closure present; a
//! manifest kept only as another's checkpoint support needs its own
//! objects. Compacted SSTs must be at least as large as the index end
//! their manifest records.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use slatedb::VersionedManifest;

use super::MirrorError;
use super::layout::{
    COMPACTED_DIR, MANIFEST_DIR, ObjectFloor, WAL_DIR, live_pins, manifest_objects,
    parse_manifest_file,
};
use super::pass::{list_dir, read_manifest};
use crate::copier::CopyProgress;
use crate::database::DatabaseHandle;
use crate::store::StoreRoot;

/// What verify found; `problems` empty means the destination is sound.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct VerifyReport {
    pub url: String,
    /// The destination's latest manifest id.
    pub latest_manifest: Option<u64>,
    pub restore_points: u64,
    pub manifests_checked: u64,
    pub objects_checked: u64,
    /// One line per missing or short object, or unreadable manifest.
    pub problems: Vec<String>,
}

/// Checks the destination `target`.
pub async fn verify(target: &DatabaseHandle) -> Result<VerifyReport, MirrorError> {
    verify_tracked(target, &CopyProgress::new()).await
}

/// Checks the destination `target`, counting the manifests it reads (the
/// slow part: one GET each) into `progress` against the total it listed.
pub async fn verify_tracked(
    target: &DatabaseHandle,
    progress: &CopyProgress,
) -> Result<VerifyReport, MirrorError> {
    let root = target.root();
    let mut report = VerifyReport {
        url: target.url().to_string(),
        ..VerifyReport::default()
    };
    let listed: BTreeMap<u64, u64> = list_sizes(&root, MANIFEST_DIR)
        .await?
        .into_iter()
        .filter_map(|(name, size)| Some((parse_manifest_file(name.rsplit('/').next()?)?, size)))
        .collect();
    progress.expect(listed.len() as u64, listed.values().sum());
    let Some(&latest) = listed.keys().last() else {
        report
            .problems
            .push("no manifest: not a mirror of a SlateDB database".into());
        return Ok(report);
    };
    report.latest_manifest = Some(latest);
    let mut manifests = BTreeMap::new();
    for (&id, &size) in &listed {
        let read = read_manifest(target, id).await?;
        progress.record(1, size);
        match read {
            Some(m) => {
                manifests.insert(id, m);
            }
            None => report
                .problems
                .push(format!("manifest {id} vanished while verifying")),
        }
    }
    let sizes = data_sizes(&root).await?;

    let now = Utc::now();
    let pins: BTreeMap<u64, ManifestPins> = manifests
        .iter()
        .map(|(&id, m)| (id, ManifestPins::of(m, now)))
        .collect();
    let points = restore_points(&pins, latest);
    let mut needed: Needed = BTreeMap::new();
    let mut need = |manifest: &VersionedManifest, by: u64| {
        for (name, floor) in manifest_objects(manifest) {
            needed
                .entry(name)
                .or_insert((floor, BTreeSet::new()))
                .1
                .insert(by);
        }
    };
    for (&id, manifest) in &manifests {
        need(manifest, id);
        if !points.contains(&id) {
            continue;
        }
        report.restore_points += 1;
        for &pinned in &pins[&id].live {
            match manifests.get(&pinned) {
                Some(m) => need(m, id),
                None => report.problems.push(format!(
                    "manifest {id}: its live checkpoint pins manifest {pinned}, which is missing"
                )),
            }
        }
    }
    report.manifests_checked = manifests.len() as u64;
    report.objects_checked = needed.len() as u64;
    report.problems.extend(closure_problems(&needed, &sizes));
    Ok(report)
}

/// The checkpoints of one destination manifest, by the manifest each names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestPins {
    /// Named by a checkpoint live now (other than the manifest itself).
    pub live: BTreeSet<u64>,
    /// Named by any checkpoint, expired ones included.
    pub named: BTreeSet<u64>,
}

impl ManifestPins {
    fn of(manifest: &VersionedManifest, now: chrono::DateTime<Utc>) -> Self {
        ManifestPins {
            live: live_pins(manifest, now),
            named: manifest
                .checkpoints()
                .iter()
                .map(|c| c.manifest_id)
                .filter(|id| *id != manifest.id())
                .collect(),
        }
    }
}

/// Which destination manifests are restore points, and so must hold
/// everything their live checkpoints pin. The latest always is. Another is
/// closure support instead while a live checkpoint names it, or when a
/// later manifest's checkpoint named it and its own live pins are not all
/// at the destination: a pass copied it for that checkpoint's readers, and
/// the manifests its own checkpoints pinned were gone from the source by
/// then (restore refuses such a manifest as support, naming why).
pub fn restore_points(pins: &BTreeMap<u64, ManifestPins>, latest: u64) -> BTreeSet<u64> {
    let live_support: BTreeSet<u64> = pins.values().flat_map(|p| p.live.iter().copied()).collect();
    let named_later = |id: u64| pins.range(id + 1..).any(|(_, p)| p.named.contains(&id));
    let complete = |p: &ManifestPins| p.live.iter().all(|pinned| pins.contains_key(pinned));
    pins.iter()
        .filter(|(id, p)| {
            **id == latest || (!live_support.contains(id) && (complete(p) || !named_later(**id)))
        })
        .map(|(id, _)| *id)
        .collect()
}

/// The objects a closure needs, each with its size floor and the
/// manifests (restore points) that need it.
pub type Needed = BTreeMap<String, (ObjectFloor, BTreeSet<u64>)>;

/// One line per needed object that is missing from `sizes` or shorter
/// than its manifest records, naming the manifests it breaks.
pub fn closure_problems(needed: &Needed, sizes: &BTreeMap<String, u64>) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, (floor, by)) in needed {
        let users = by.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        match sizes.get(name) {
            None => problems.push(format!("{name} is missing (needed by manifest {users})")),
            Some(&size) if size < floor.min_size => problems.push(format!(
                "{name} is {size} bytes, shorter than the {} its manifest records (manifest {users})",
                floor.min_size
            )),
            Some(_) => {}
        }
    }
    problems
}

/// Sizes of every data object (`compacted/`, `wal/`) under a root.
pub async fn data_sizes(root: &StoreRoot) -> Result<BTreeMap<String, u64>, MirrorError> {
    let mut sizes = list_sizes(root, COMPACTED_DIR).await?;
    sizes.extend(list_sizes(root, WAL_DIR).await?);
    Ok(sizes)
}

/// Names under `dir/` with their sizes.
async fn list_sizes(root: &StoreRoot, dir: &str) -> Result<BTreeMap<String, u64>, MirrorError> {
    Ok(list_dir(root, dir)
        .await?
        .into_iter()
        .map(|(name, meta)| (name, meta.size))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins(live: &[u64], named: &[u64]) -> ManifestPins {
        ManifestPins {
            live: live.iter().copied().collect(),
            named: named.iter().chain(live).copied().collect(),
        }
    }

    #[test]
    fn a_manifest_a_live_checkpoint_names_is_support() {
        let all = BTreeMap::from([(3, pins(&[], &[])), (5, pins(&[3], &[]))]);
        assert_eq!(restore_points(&all, 5), BTreeSet::from([5]));
    }

    #[test]
    fn once_the_checkpoint_expires_a_complete_manifest_is_a_restore_point_again() {
        let all = BTreeMap::from([(3, pins(&[], &[])), (5, pins(&[], &[3]))]);
        assert_eq!(restore_points(&all, 5), BTreeSet::from([3, 5]));
    }

    /// Manifest 4 was copied for a checkpoint of 6 that has since expired;
    /// its own (longer-lived) checkpoint names 2, which the source had
    /// already collected. It is support, not a broken restore point.
    #[test]
    fn support_whose_own_pins_were_gone_stays_support() {
        let all = BTreeMap::from([(4, pins(&[2], &[])), (6, pins(&[], &[4]))]);
        assert_eq!(restore_points(&all, 6), BTreeSet::from([6]));
    }

    /// The same manifest that no later checkpoint ever named was committed
    /// as a pass's head: a missing pin there is a real problem.
    #[test]
    fn an_incomplete_manifest_nothing_named_is_still_a_restore_point() {
        let all = BTreeMap::from([(4, pins(&[2], &[])), (6, pins(&[], &[]))]);
        assert_eq!(restore_points(&all, 6), BTreeSet::from([4, 6]));
    }

    #[test]
    fn the_latest_is_always_a_restore_point() {
        let all = BTreeMap::from([(6, pins(&[2], &[]))]);
        assert_eq!(restore_points(&all, 6), BTreeSet::from([6]));
    }
}
