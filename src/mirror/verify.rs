//! `sleet mirror verify`: proves a mirror destination restorable without
//! writing to it. Every restore point (the latest manifest and every
//! manifest no other one pins) must have its whole closure present; a
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
    let root = target.root();
    let mut report = VerifyReport {
        url: target.url().to_string(),
        ..VerifyReport::default()
    };
    let ids: BTreeSet<u64> = list_sizes(&root, MANIFEST_DIR)
        .await?
        .keys()
        .filter_map(|name| parse_manifest_file(name.rsplit('/').next()?))
        .collect();
    let Some(&latest) = ids.last() else {
        report
            .problems
            .push("no manifest: not a mirror of a SlateDB database".into());
        return Ok(report);
    };
    report.latest_manifest = Some(latest);
    let mut manifests = BTreeMap::new();
    for &id in &ids {
        match read_manifest(target, id).await? {
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
    let support: BTreeSet<u64> = manifests
        .values()
        .flat_map(|m| live_pins(m, now))
        .filter(|id| *id != latest)
        .collect();
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
        if support.contains(&id) {
            continue;
        }
        report.restore_points += 1;
        for pinned in live_pins(manifest, now) {
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
