//! Settings that pass every rule yet can cost a database its compaction
//! or its writes. They are warnings, not errors (a test fleet may want
//! them), shown by `sleet config check` and `sleet status`.

use std::time::Duration;

use super::resolve::{DatabaseSettings, GcSettings};
use crate::model::duration::HumanDuration;
use crate::model::service::Service;

/// The shortest manifest GC `min_age` that is safe without GC boundary
/// files. Below it, SlateDB alone (no sleet, probed in
/// `tests/node/min_age.rs`) deletes manifests its compaction workers
/// still need: a worker finds its claimed job "invalid against the
/// post-claim manifest", releases it, claims it again, forever; L0 grows
/// until the writer blocks. At 1 s this happened in every probe on
/// `file://`; at 10 s and with boundary files on (S3) it never did.
pub const SAFE_MANIFEST_MIN_AGE: Duration = Duration::from_secs(60);

/// Whether SlateDB's GC boundary files are on for a database at `url`,
/// by the rule GC runs with; `None` when no URL is given and
/// `gc.boundary_files` is not set.
pub fn boundary_files_on(gc: &GcSettings, url: Option<&str>) -> Option<bool> {
    match url {
        Some(url) => Some(gc.boundary_files_for(crate::store::updates_in_place(url))),
        None => gc.boundary_files,
    }
}

/// The hazards in `settings` for the database at `url` (`None`: any
/// store the settings may apply to).
pub fn hazards(settings: &DatabaseSettings, url: Option<&str>) -> Vec<String> {
    let mut found = Vec::new();
    let gc = &settings.gc;
    let manifest = &gc.manifest;
    let gc_runs = settings.services.contains(&Service::Gc) && manifest.enabled && !manifest.dry_run;
    if gc_runs
        && manifest.min_age < SAFE_MANIFEST_MIN_AGE
        && boundary_files_on(gc, url) != Some(true)
    {
        let stores = match url {
            Some(url) => format!("{url} has no GC boundary files"),
            None => "on stores without GC boundary files (file://, http://, or gc.boundary_files = false)".into(),
        };
        found.push(format!(
            "gc.manifest.min_age = {} {stores}: SlateDB's manifest GC can delete manifests its \
             compaction workers still read, and compaction stalls until the writer blocks; \
             use at least {} (the default is 5m)",
            HumanDuration(manifest.min_age),
            HumanDuration(SAFE_MANIFEST_MIN_AGE),
        ));
    }
    found
}
