//! `sleet mirror verify`: proves a mirror destination restorable without
//! writing to it. Every restore point ([`super::points`]) must have its
//! whole closure present, and there must be one; every other manifest
//! needs its own objects. Compacted SSTs must be at least as large as the
//! index end their manifest records.

use std::collections::{BTreeMap, BTreeSet};

use slatedb::VersionedManifest;

use super::MirrorError;
use super::io::{list_sizes, read_manifest};
use super::layout::{
    COMPACTED_DIR, MANIFEST_DIR, ObjectFloor, live_pins, manifest_objects, parse_manifest_file,
};
use super::points::restore_points;
use super::wal_run::{latest_end, stranded};
use super::wal_times::WalListing;
use crate::fleet::database::DatabaseHandle;
use crate::mirror::copier::CopyProgress;

/// What verify found; `problems` empty means the destination is sound.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct VerifyReport {
    pub url: String,
    /// The source database the destination belongs to, from its
    /// `sleet-mirror-source.json` (absent for a destination no pass of
    /// this release has claimed yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The destination's latest manifest id.
    pub latest_manifest: Option<u64>,
    /// The newest restore point: below the latest manifest while a pass
    /// cut off between its support manifests and its head is not redone.
    pub latest_restore_point: Option<u64>,
    pub restore_points: u64,
    /// The newest WAL id a restore of the newest restore point carries:
    /// the end of the contiguous WAL run after its replay point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal_end: Option<u64>,
    /// When the source wrote that WAL object (as the mirror recorded it,
    /// else its copy's time, never earlier): the newest write a restore
    /// brings back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_restorable_write: Option<chrono::DateTime<chrono::Utc>>,
    /// WAL objects after a gap in that run, which no restore can use
    /// (source GC collected one before the mirror copied it; the next pass
    /// brings a manifest past the gap).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stranded_wal: u64,
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
    match super::owner::read(target).await {
        Ok(owner) => report.source = owner.map(|o| o.source),
        Err(e) => report.problems.push(e.to_string()),
    }
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
    // The WAL listed once: for the closures, and for the run below.
    let mut wal = WalListing::list(&root).await?;
    let mut sizes = list_sizes(&root, COMPACTED_DIR).await?;
    sizes.extend(wal.named_sizes());

    let now = target.now();
    let pins: BTreeMap<u64, BTreeSet<u64>> = manifests
        .iter()
        .map(|(&id, m)| (id, live_pins(m, now)))
        .collect();
    let points = restore_points(&pins);
    let mut needed: Needed = BTreeMap::new();
    for (&id, manifest) in &manifests {
        add_needs(&mut needed, manifest, id);
        if points.contains(&id) {
            for pinned in &pins[&id] {
                add_needs(&mut needed, &manifests[pinned], id);
            }
        }
    }
    report.restore_points = points.len() as u64;
    report.latest_restore_point = points.last().copied();
    if points.is_empty() {
        report.problems.push(format!(
            "no restore point: every manifest lacks a manifest its live checkpoints pin \
             (manifest {latest}: {})",
            missing_pins(&pins, latest)
        ));
    }
    if let Some(newest) = points.last().and_then(|id| manifests.get(id)) {
        check_wal_run(target, newest, &mut wal, &mut report).await?;
    }
    report.problems.extend(history_breaks(&manifests));
    report.manifests_checked = manifests.len() as u64;
    report.objects_checked = needed.len() as u64;
    report.problems.extend(closure_problems(&needed, &sizes));
    Ok(report)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The WAL run after the newest restore point's replay point: where it
/// ends, when the source wrote its end, what lies stranded after a gap,
/// and any object whose size is not what the source's was when copied.
async fn check_wal_run(
    target: &DatabaseHandle,
    newest: &VersionedManifest,
    wal: &mut WalListing,
    report: &mut VerifyReport,
) -> Result<(), MirrorError> {
    let replay = super::wal_run::replay_of(newest);
    let ids = wal.ids();
    let end = latest_end(replay, &ids);
    wal.date(&target.root(), |span| span.last > replay.after)
        .await?;
    report.wal_end = Some(end);
    report.newest_restorable_write = wal.times.get(&end).copied();
    report.stranded_wal = stranded(&ids, end).len() as u64;
    report.problems.append(&mut wal.disagreeing);
    Ok(())
}

/// One database's manifests never go back: its writer and compactor
/// epochs and its WAL position only grow with the manifest id. A
/// destination whose manifests go back holds more than one database's
/// history (two sources mirrored into it, or a writer opened on it).
pub fn history_breaks(manifests: &BTreeMap<u64, VersionedManifest>) -> Vec<String> {
    let mut breaks = Vec::new();
    for ((&before_id, before), (&after_id, after)) in manifests.iter().zip(manifests.iter().skip(1))
    {
        for (what, was, is) in [
            ("writer epoch", before.writer_epoch(), after.writer_epoch()),
            (
                "compactor epoch",
                before.compactor_epoch(),
                after.compactor_epoch(),
            ),
            (
                "next WAL id",
                before.next_wal_sst_id(),
                after.next_wal_sst_id(),
            ),
            (
                "WAL replay point",
                before.replay_after_wal_id(),
                after.replay_after_wal_id(),
            ),
        ] {
            if is < was {
                breaks.push(format!(
                    "manifest {after_id} goes back from manifest {before_id} ({what} {was} to \
                     {is}): the destination holds more than one database's history"
                ));
                break;
            }
        }
    }
    breaks
}

/// The manifests `id` pins that the destination lacks, for a message
/// (none when `id` itself vanished while verifying).
fn missing_pins(pins: &BTreeMap<u64, BTreeSet<u64>>, id: u64) -> String {
    let missing: Vec<String> = pins
        .get(&id)
        .into_iter()
        .flatten()
        .filter(|pinned| !pins.contains_key(pinned))
        .map(|pinned| format!("pins {pinned}, which is missing"))
        .collect();
    missing.join(", ")
}

/// The objects a closure needs, each with its size floor and the
/// manifests (restore points) that need it.
pub type Needed = BTreeMap<String, (ObjectFloor, BTreeSet<u64>)>;

/// Records that manifest `by` needs every object `manifest` references.
pub fn add_needs(needed: &mut Needed, manifest: &VersionedManifest, by: u64) {
    for (name, floor) in manifest_objects(manifest) {
        needed
            .entry(name)
            .or_insert((floor, BTreeSet::new()))
            .1
            .insert(by);
    }
}

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
