//! The collection invariant: no deleter (SlateDB's collectors at a
//! database, the fleet's and a default writer's own; the mirror's prune at
//! a destination) deletes an object that the database's latest manifest
//! of that moment references, or that a manifest pinned by one of its live
//! checkpoints does (a mirror's pin, a writer's or the coordinator's
//! checkpoint). Judged at the end over every manifest version written and
//! every object deleted, each stamped with the store's time.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};

use super::check::Violation;
use super::history::Histories;
use super::store::Deletion;
use crate::mirror::layout::{manifest_name, manifest_objects};

/// An object was deleted while a manifest still referenced it.
pub const COLLECTED_REFERENCED: &str = "gc-deleted-referenced-object";

/// How far a deleter's clock may run ahead of the store's when it judges
/// a checkpoint expired: the fault mix skews clocks by up to 4 s.
const CLOCK_TOLERANCE: TimeDelta = TimeDelta::seconds(5);

/// What one manifest version keeps alive.
#[derive(Debug, Clone)]
pub struct Keeps {
    pub id: u64,
    /// When the store applied its write.
    pub written: DateTime<Utc>,
    /// The objects a reader of it touches, by root-relative name.
    pub objects: BTreeSet<String>,
    /// Its checkpoints: (expiry, the manifest each pins).
    pub checkpoints: Vec<(Option<DateTime<Utc>>, u64)>,
}

/// Judges every deletion under each database whose manifests the run wrote.
pub fn collections(histories: &Histories<'_>, deletions: &[Deletion]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (database, decoded) in histories {
        // An unreadable version is the epoch check's to report.
        let Ok(decoded) = decoded else {
            continue;
        };
        let versions: Vec<Keeps> = decoded
            .iter()
            .map(|v| Keeps {
                id: v.id,
                written: v.write.at,
                objects: manifest_objects(&v.manifest).into_keys().collect(),
                checkpoints: v
                    .manifest
                    .checkpoints()
                    .iter()
                    .map(|c| (c.expire_time, c.manifest_id))
                    .collect(),
            })
            .collect();
        let prefix = format!("{database}/");
        let deleted: Vec<(String, DateTime<Utc>, &str)> = deletions
            .iter()
            .filter_map(|d| {
                let name = d.location.as_ref().strip_prefix(&prefix)?;
                Some((name.to_string(), d.at, d.author.as_str()))
            })
            .collect();
        violations.extend(judge_collections(database, &versions, &deleted));
    }
    violations
}

/// The deletions (root-relative name, when, by whom) that removed an
/// object the latest version of the moment, or a version its live
/// checkpoints pin, still references. `versions` in any order.
pub fn judge_collections(
    database: &str,
    versions: &[Keeps],
    deleted: &[(String, DateTime<Utc>, &str)],
) -> Vec<Violation> {
    let by_id: BTreeMap<u64, &Keeps> = versions.iter().map(|v| (v.id, v)).collect();
    let mut violations = Vec::new();
    for (name, at, author) in deleted {
        // The newest version written by then: later ones cannot have
        // been read by the deleter.
        let Some(latest) = versions
            .iter()
            .filter(|v| v.written <= *at)
            .max_by_key(|v| v.id)
        else {
            continue;
        };
        let mut holders = vec![latest];
        for (expiry, pinned) in &latest.checkpoints {
            let live = expiry.is_none_or(|expires| expires > *at + CLOCK_TOLERANCE);
            if let (true, Some(version)) = (live, by_id.get(pinned)) {
                holders.push(version);
            }
        }
        let held_by = holders
            .iter()
            .find(|v| v.objects.contains(name) || manifest_name(v.id) == *name);
        if let Some(holder) = held_by {
            let how = if holder.id == latest.id {
                "the latest manifest".to_string()
            } else {
                format!("manifest {}, pinned by a live checkpoint of", holder.id)
            };
            violations.push(Violation {
                name: COLLECTED_REFERENCED,
                detail: format!(
                    "{author} deleted {database}/{name} at {at} while {how} manifest {} still \
                     referenced it",
                    latest.id
                ),
            });
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::seconds(second)
    }

    fn keeps(id: u64, written: i64, objects: &[&str], pins: &[(Option<i64>, u64)]) -> Keeps {
        Keeps {
            id,
            written: at(written),
            objects: objects.iter().map(|o| o.to_string()).collect(),
            checkpoints: pins.iter().map(|(e, m)| (e.map(at), *m)).collect(),
        }
    }

    /// Control: each deletion the rule forbids is caught (an object of
    /// the latest manifest, one a live checkpoint pins, a pinned manifest
    /// itself), and what collectors may delete passes (an object only an
    /// older manifest referenced, one an expired checkpoint pinned, one a
    /// manifest written after the deletion references).
    #[test]
    fn deletions_of_referenced_objects_are_caught_and_collection_passes() {
        let versions = vec![
            keeps(1, 0, &["compacted/a.sst", "wal/1.sst"], &[]),
            keeps(2, 10, &["compacted/b.sst"], &[(Some(100), 1)]),
            keeps(3, 200, &["compacted/c.sst"], &[(Some(150), 2)]),
        ];
        let judge = |name: &str, second: i64| {
            judge_collections("db", &versions, &[(name.to_string(), at(second), "n1/gc")])
        };
        assert_eq!(judge("compacted/b.sst", 20).len(), 1, "the latest's own");
        assert_eq!(
            judge("compacted/a.sst", 20).len(),
            1,
            "pinned by a live checkpoint"
        );
        assert_eq!(judge(&manifest_name(1), 20).len(), 1, "a pinned manifest");
        assert_eq!(judge("compacted/a.sst", 5).len(), 1, "the latest of then");
        assert!(judge("compacted/a.sst", 120).is_empty(), "the pin expired");
        assert!(
            judge("compacted/a.sst", 97).is_empty(),
            "expired to a clock 3 s ahead"
        );
        assert_eq!(
            judge("compacted/a.sst", 94).len(),
            1,
            "6 s before its expiry"
        );
        assert!(judge("compacted/c.sst", 199).is_empty(), "written after");
        assert!(
            judge("compacted/b.sst", 300).is_empty(),
            "pin expired, older manifest"
        );
    }
}
