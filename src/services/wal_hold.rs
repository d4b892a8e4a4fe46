//! The fleet's GC holds WAL a continuous mirror has not copied yet.
//!
//! SlateDB's WAL collector keeps every WAL object from the latest
//! manifest's replay point on; after a memtable flush moves that point,
//! the objects below it go once older than the WAL `min_age` (5 minutes).
//! A mirror's tail copies each object within a second, but a tail that is
//! away longer (its node down, its destination unreachable) would find
//! them gone: the newest restore point does not need them (the flush's
//! SSTs hold their writes), but restores by time between the two
//! manifests do. So the GC a node runs for a database with continuous
//! mirrors deletes a WAL object only once every such destination holds
//! it, or once it is [`HOLD_AT_MOST`] old: a mirror that never comes back
//! must not make the source's WAL grow without bound.
//!
//! A writer that runs its own collector (SlateDB's defaults) holds
//! nothing: only the fleet's GC carries this filter.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use slatedb::{GcFilter, ObjectMetadata};

use crate::fleet::database::DatabaseHandle;
use crate::model::coverage::{self, Mark};
use crate::model::planted::{Planted, planted};

/// How long past its creation GC holds a WAL object a mirror lacks.
pub const HOLD_AT_MOST: Duration = Duration::from_secs(3600);

/// A GC filter over the destinations of a database's continuous mirrors.
pub struct WalHold {
    /// The source, whose clock dates the candidates.
    source: DatabaseHandle,
    tails: Vec<DatabaseHandle>,
}

impl WalHold {
    pub fn new(source: DatabaseHandle, tails: Vec<DatabaseHandle>) -> WalHold {
        WalHold { source, tails }
    }

    /// The WAL ids above `after` that `tail` holds, or `None` when it
    /// cannot be listed (then nothing young enough is deleted).
    async fn copied(tail: &DatabaseHandle, after: u64) -> Option<BTreeSet<u64>> {
        let root = tail.root();
        let prefix = root.path("wal");
        let offset = root.path(&format!("wal/{after:020}.sst"));
        let mut listing = root.store.list_with_offset(Some(&prefix), &offset);
        let mut ids = BTreeSet::new();
        while let Some(meta) = listing.next().await {
            match meta {
                Ok(meta) => ids.extend(meta.location.filename().and_then(wal_id)),
                Err(e) => {
                    tracing::warn!(
                        "cannot list {}/wal ({e}); holding the source's WAL for it",
                        root.url
                    );
                    return None;
                }
            }
        }
        Some(ids)
    }
}

/// The id of a WAL object's file name (`00000000000000000007.sst`).
fn wal_id(file: &str) -> Option<u64> {
    let digits = file.strip_suffix(".sst")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The WAL id of a candidate for deletion, if it is a WAL object.
fn candidate_wal_id(candidate: &ObjectMetadata) -> Option<u64> {
    let mut parts = candidate.location.parts();
    let file = parts.next_back()?;
    let dir = parts.next_back()?;
    (dir.as_ref() == "wal")
        .then(|| wal_id(file.as_ref()))
        .flatten()
}

/// Which candidates may go: anything but WAL, and WAL every tail holds
/// (`copied`: the ids held by all of them) or that is older than
/// [`HOLD_AT_MOST`] at `now`.
pub fn releasable(
    candidates: HashSet<ObjectMetadata>,
    copied: &BTreeSet<u64>,
    now: chrono::DateTime<chrono::Utc>,
) -> HashSet<ObjectMetadata> {
    let hold = chrono::Duration::from_std(HOLD_AT_MOST).expect("an hour");
    candidates
        .into_iter()
        .filter(|c| match candidate_wal_id(c) {
            None => true,
            Some(id) => copied.contains(&id) || now - c.last_modified > hold,
        })
        .collect()
}

#[async_trait]
impl GcFilter for WalHold {
    async fn filter(&self, candidates: HashSet<ObjectMetadata>) -> HashSet<ObjectMetadata> {
        let Some(lowest) = candidates.iter().filter_map(candidate_wal_id).min() else {
            return candidates;
        };
        if planted(Planted::GcHoldsNoWal) {
            return candidates;
        }
        let mut everywhere: Option<BTreeSet<u64>> = None;
        for tail in &self.tails {
            let held = Self::copied(tail, lowest.saturating_sub(1))
                .await
                .unwrap_or_default();
            everywhere = Some(match everywhere {
                None => held,
                Some(all) => all.intersection(&held).copied().collect(),
            });
        }
        let copied = everywhere.unwrap_or_default();
        let kept = candidates.len();
        let released = releasable(candidates, &copied, self.source.now());
        if released.len() < kept {
            coverage::hit(Mark::GcHeldWalForMirror);
            tracing::debug!(
                source = %self.source.url(),
                held = kept - released.len(),
                "GC holds WAL a continuous mirror has not copied yet"
            );
        }
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use object_store::path::Path;

    fn object(location: &str, age_minutes: i64, now: DateTime<Utc>) -> ObjectMetadata {
        ObjectMetadata {
            location: Path::from(location),
            last_modified: now - chrono::Duration::minutes(age_minutes),
            size: 10,
            e_tag: None,
            version: None,
        }
    }

    /// WAL 7 is at every mirror, WAL 8 at none and 10 minutes old (held),
    /// WAL 9 at none but two hours old (the hold has a bound); anything
    /// that is not WAL is never held.
    #[test]
    fn wal_goes_once_every_mirror_holds_it_or_the_hold_runs_out() {
        let now = DateTime::from_timestamp(1_800_000_000, 0).expect("a time");
        let candidates: HashSet<ObjectMetadata> = [
            object("db/wal/00000000000000000007.sst", 10, now),
            object("db/wal/00000000000000000008.sst", 10, now),
            object("db/wal/00000000000000000009.sst", 120, now),
            object("db/compacted/01J79C21YKR31J2BS1EFXJZ7MR.sst", 10, now),
            object("db/manifest/00000000000000000003.manifest", 10, now),
        ]
        .into_iter()
        .collect();
        let released = releasable(candidates, &BTreeSet::from([7]), now);
        let mut names: Vec<String> = released.iter().map(|c| c.location.to_string()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "db/compacted/01J79C21YKR31J2BS1EFXJZ7MR.sst",
                "db/manifest/00000000000000000003.manifest",
                "db/wal/00000000000000000007.sst",
                "db/wal/00000000000000000009.sst",
            ]
        );
    }
}
