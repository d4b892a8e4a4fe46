//! Object names inside a SlateDB root, and the closure of a manifest: every
//! object a reader of that manifest may touch. A frozen format shared with
//! sleet 0.1.0 (`manifest/<id:020>.manifest`, `wal/<id:020>.sst`,
//! `compacted/<ULID>.sst`, the `sleet-mirror:<target>` pin name).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use slatedb::VersionedManifest;

/// Sub-directories of a database root.
pub const MANIFEST_DIR: &str = "manifest";
pub const WAL_DIR: &str = "wal";
pub const COMPACTED_DIR: &str = "compacted";

/// `manifest/<id:020>.manifest`.
pub fn manifest_name(id: u64) -> String {
    format!("{MANIFEST_DIR}/{id:020}.manifest")
}

/// `wal/<id:020>.sst` (a zero-byte object is a writer's fence).
pub fn wal_name(id: u64) -> String {
    format!("{WAL_DIR}/{id:020}.sst")
}

/// `compacted/<ULID>.sst`.
pub fn compacted_name(ulid: &impl std::fmt::Display) -> String {
    format!("{COMPACTED_DIR}/{ulid}.sst")
}

/// The manifest id of a `manifest/` file name (`00000000000000000042.manifest`).
pub fn parse_manifest_file(file: &str) -> Option<u64> {
    parse_id(file.strip_suffix(".manifest")?)
}

/// The WAL id of a `wal/` file name (`00000000000000000007.sst`).
pub fn parse_wal_file(file: &str) -> Option<u64> {
    parse_id(file.strip_suffix(".sst")?)
}

/// Whether a `compacted/` file name is a SlateDB SST: 26 alphanumerics + `.sst`.
pub fn is_compacted_file(file: &str) -> bool {
    file.strip_suffix(".sst")
        .is_some_and(|stem| stem.len() == 26 && stem.bytes().all(|b| b.is_ascii_alphanumeric()))
}

fn parse_id(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The name of the checkpoint a mirror pass pins its source with.
pub fn pin_name(target: &str) -> String {
    format!("sleet-mirror:{target}")
}

/// A data object a manifest references, with the least size it can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectFloor {
    /// Compacted SSTs end at least at their index block; WAL objects
    /// (including zero-byte fences) have no recorded size.
    pub min_size: u64,
}

/// The data objects one manifest references, by root-relative name: every
/// SST view of the root tree and every segment (deduplicated by SST id),
/// and the WAL ids strictly between `replay_after_wal_id` and
/// `next_wal_sst_id` (the window a reader replays).
pub fn manifest_objects(manifest: &VersionedManifest) -> BTreeMap<String, ObjectFloor> {
    let mut objects = BTreeMap::new();
    for view in manifest.all_sst_views() {
        objects.insert(
            compacted_name(&view.sst.id.value()),
            ObjectFloor {
                min_size: view.sst.estimate_size(),
            },
        );
    }
    for id in wal_window(manifest) {
        objects.insert(wal_name(id), ObjectFloor { min_size: 0 });
    }
    objects
}

/// WAL ids a reader of `manifest` replays.
pub fn wal_window(manifest: &VersionedManifest) -> std::ops::Range<u64> {
    let first = manifest.replay_after_wal_id().saturating_add(1);
    first..manifest.next_wal_sst_id().max(first)
}

/// Whether a checkpoint still protects its manifest at `now`.
pub fn checkpoint_live(checkpoint: &slatedb::Checkpoint, now: DateTime<Utc>) -> bool {
    checkpoint.expire_time.is_none_or(|expires| expires > now)
}

/// How far the clocks of whoever writes a destination (a pass, a prune)
/// and whoever later reads it (a restore, a verify) may disagree. A
/// checkpoint's expiry is a wall-clock time, so a pass on a node whose
/// clock runs ahead would judge a checkpoint expired that a restore
/// moments later still finds live, and refuse the restore point for the
/// manifest it pins (found by the S3 chaos suite with one clock 2 s
/// ahead). Writers keep what checkpoints pin for this long after they
/// expire; readers judge by their own clock.
pub const CLOCK_MARGIN: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// The manifests a writer of the destination keeps for `head`: pinned by
/// checkpoints live at `now` or expired within [`CLOCK_MARGIN`].
pub fn kept_pins(head: &VersionedManifest, now: DateTime<Utc>) -> BTreeSet<u64> {
    live_pins(head, now - CLOCK_MARGIN)
}

/// The manifests pinned by `head`'s live checkpoints, other than itself.
pub fn live_pins(head: &VersionedManifest, now: DateTime<Utc>) -> BTreeSet<u64> {
    head.checkpoints()
        .iter()
        .filter(|c| checkpoint_live(c, now) && c.manifest_id != head.id())
        .map(|c| c.manifest_id)
        .collect()
}

/// Why a byte copy cannot serve a source, if it cannot.
pub fn unsupported_source(manifest: &VersionedManifest) -> Option<&'static str> {
    if !manifest.external_dbs().is_empty() {
        return Some("it is a clone (external_dbs is set)");
    }
    if manifest.wal_object_store_uri().is_some() {
        return Some("it uses a separate WAL object store");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_frozen_layout() {
        assert_eq!(manifest_name(42), "manifest/00000000000000000042.manifest");
        assert_eq!(
            manifest_name(u64::MAX),
            "manifest/18446744073709551615.manifest"
        );
        assert_eq!(wal_name(7), "wal/00000000000000000007.sst");
        assert_eq!(
            compacted_name(&"01J79C21YKR31J2BS1EFXJZ7MR"),
            "compacted/01J79C21YKR31J2BS1EFXJZ7MR.sst"
        );
        assert_eq!(pin_name("dr"), "sleet-mirror:dr");
    }

    #[test]
    fn parsers_accept_only_real_names() {
        assert_eq!(
            parse_manifest_file("00000000000000000042.manifest"),
            Some(42)
        );
        assert_eq!(
            parse_manifest_file("18446744073709551615.manifest"),
            Some(u64::MAX)
        );
        assert_eq!(parse_manifest_file("x.manifest"), None);
        assert_eq!(
            parse_manifest_file("00000000000000000042.manifest.tmp"),
            None
        );
        assert_eq!(parse_wal_file("00000000000000000007.sst"), Some(7));
        assert_eq!(parse_wal_file("+7.sst"), None);
        assert!(is_compacted_file("01J79C21YKR31J2BS1EFXJZ7MR.sst"));
        assert!(
            !is_compacted_file("00000000000000000007.sst"),
            "a 20-digit WAL name is never a ULID"
        );
    }
}
