//! The invariants a simulated run is judged by, each failure with a name.
//!
//! Ownership: once faults stop, every running node runs exactly the tasks
//! placement gives it (computed by the same function the nodes use, over
//! the heartbeats in the store and the config as it is), its heartbeat
//! counts exactly those tasks (what peers and `sleet status` are told),
//! and no node that is gone is still live to the fleet. Epochs: every
//! manifest version written, in order, keeps its compactor and writer
//! epochs from going back, and one compactor writes under each compactor
//! epoch. The application's own invariants (every acknowledged write
//! reads back; a writer on SlateDB's defaults is never fenced) are judged
//! where it writes, in `app`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::history::Histories;

use crate::daemon::owned_tasks;
use crate::fleet::root::{ConfigPoller, FleetRoot, NodeSighting, node_view};
use crate::model::heartbeat::HeartbeatBody;
use crate::model::service::Service;

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant, as `scripts/simulate` names it.
    pub name: &'static str,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.detail)
    }
}

/// Ownership did not converge to placement.
pub const NOT_CONVERGED: &str = "ownership-did-not-converge";
/// A node that is gone is still live to its peers.
pub const GHOST_NODE: &str = "gone-node-still-live";
/// A node's heartbeat counts other tasks than placement gives it.
pub const MISCOUNTED: &str = "heartbeat-miscounts-tasks";
/// A write the application was told is durable does not read back.
pub const WRITE_LOST: &str = "acknowledged-write-lost";
/// A compactor epoch was taken over a writer on SlateDB's defaults
/// while it was open: the fleet fenced the writer's own compactor.
pub const DEFAULT_WRITER_FENCED: &str = "default-writer-fenced";
/// A node's task panicked, or the simulator itself did.
pub const PANIC: &str = "panic";

/// A task as placement and the probes both name it.
pub type Task = (String, String, Option<String>);

/// What one running node reports it runs.
#[derive(Debug, Clone)]
pub struct Running {
    pub node_id: String,
    pub services: Vec<Service>,
    pub tasks: BTreeSet<Task>,
}

/// Judges ownership at `now` (the store's clock): the running nodes'
/// tasks against placement over the live heartbeats.
pub async fn ownership(
    root: &FleetRoot,
    now: chrono::DateTime<chrono::Utc>,
    running: &[Running],
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let view = ConfigPoller::new().poll(root).await;
    let heartbeats = match root.list_heartbeats().await {
        Ok(heartbeats) => heartbeats,
        Err(e) => {
            return vec![Violation {
                name: NOT_CONVERGED,
                detail: format!("the checker could not list heartbeats: {e}"),
            }];
        }
    };
    let sightings: BTreeMap<String, NodeSighting> = node_view(
        &heartbeats,
        now,
        view.fleet.node.resolve().heartbeat_timeout,
    );
    let running_ids: BTreeSet<&str> = running.iter().map(|r| r.node_id.as_str()).collect();
    for sighting in sightings.values().filter(|s| s.live) {
        if !running_ids.contains(sighting.node_id.as_str()) {
            violations.push(Violation {
                name: GHOST_NODE,
                detail: format!(
                    "{} is gone but its heartbeat ({} s old) keeps it live, so its work is \
                     placed on nobody",
                    sighting.node_id,
                    sighting.age.as_secs()
                ),
            });
        }
    }
    for node in running {
        let expected: BTreeSet<Task> =
            owned_tasks(&node.node_id, &node.services, &sightings, &view)
                .into_keys()
                .map(|key| (key.database, key.service.to_string(), key.target))
                .collect();
        if let Some(sighting) = sightings.get(&node.node_id) {
            violations
                .extend(heartbeat_counts(root, &sighting.path, &node.node_id, &expected).await);
        }
        if expected != node.tasks {
            let extra: Vec<&Task> = node.tasks.difference(&expected).collect();
            let missing: Vec<&Task> = expected.difference(&node.tasks).collect();
            violations.push(Violation {
                name: NOT_CONVERGED,
                detail: format!(
                    "{} runs {} tasks where placement gives it {}: runs but should not {}; \
                     should but does not {}",
                    node.node_id,
                    node.tasks.len(),
                    expected.len(),
                    describe(&extra),
                    describe(&missing)
                ),
            });
        }
    }
    violations
}

/// Compares what a node's heartbeat counts (running and backing off, per
/// service) with the tasks placement gives it.
async fn heartbeat_counts(
    root: &FleetRoot,
    path: &object_store::path::Path,
    node_id: &str,
    expected: &BTreeSet<Task>,
) -> Vec<Violation> {
    let body = match root.get_bytes(path).await {
        Ok(bytes) => serde_json::from_slice::<HeartbeatBody>(&bytes).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => {
            return vec![Violation {
                name: MISCOUNTED,
                detail: format!("{node_id}'s heartbeat {path} cannot be read: {e}"),
            }];
        }
    };
    // A coordinator or workers standing down for a compactor outside the
    // fleet is neither running nor backing off: the heartbeat lists its
    // database among the outside compactors instead.
    let stood_down: BTreeSet<&str> = body
        .outside_compactors
        .iter()
        .map(|o| o.database.as_str())
        .collect();
    if stood_down.len() as u64 != body.outside_compactor_count {
        return vec![Violation {
            name: MISCOUNTED,
            detail: format!(
                "{node_id}'s heartbeat counts {} outside compactors but lists {}",
                body.outside_compactor_count,
                stood_down.len()
            ),
        }];
    }
    let mut found = Vec::new();
    for counted in &body.services {
        let service = counted.service.to_string();
        let placed: Vec<&str> = expected
            .iter()
            .filter(|(_, s, _)| *s == service)
            .map(|(db, _, _)| db.as_str())
            .collect();
        // Of a listed database, the coordinator, the workers or both may
        // stand down (a task backing off from a failed look is counted
        // as backing off): each may be missing from the count, no more.
        let compacts = matches!(
            counted.service,
            Service::CompactorCoordinator | Service::CompactionWorkers
        );
        let may_stand_down = if compacts {
            placed.iter().filter(|db| stood_down.contains(*db)).count() as u64
        } else {
            0
        };
        let placed = placed.len() as u64;
        let reported = counted.running + counted.backoff;
        if reported > placed || reported + may_stand_down < placed {
            found.push(Violation {
                name: MISCOUNTED,
                detail: format!(
                    "{node_id}'s heartbeat reports {reported} {service} tasks where placement \
                     gives it {placed} (of them {may_stand_down} of databases it lists as \
                     standing down for an outside compactor)"
                ),
            });
        }
    }
    found
}

fn describe(tasks: &[&Task]) -> String {
    if tasks.is_empty() {
        return "none".to_string();
    }
    let shown: Vec<String> = tasks
        .iter()
        .take(4)
        .map(|(db, service, target)| match target {
            Some(t) => format!("{service} of {db} ({t})"),
            None => format!("{service} of {db}"),
        })
        .collect();
    let more = tasks.len().saturating_sub(shown.len());
    match more {
        0 => shown.join(", "),
        n => format!("{} and {n} more", shown.join(", ")),
    }
}

/// A compactor or writer wrote a manifest after a newer one had taken its
/// epoch: fenced, it still wrote.
pub const FENCED_WROTE: &str = "fenced-client-wrote";
/// Two compactors' manifest writes succeeded under one compactor epoch.
pub const TWO_COMPACTORS: &str = "two-compactors-one-epoch";

/// Judges every manifest version the run wrote, database by database, in
/// version order: the compactor and writer epochs never go back (a fenced
/// client writes nothing after), and the manifests the fleet's
/// coordinators wrote under one compactor epoch come from one node, and
/// from none if the epoch was taken by the application's own compactor.
/// (A writer's flushes and a collector's checkpoint removals carry
/// whatever compactor epoch holds, so they are judged by the first rule
/// only; a node's services write through views of their own, `n1/gc`,
/// `n1/coordinator`.)
pub fn epochs(histories: &Histories<'_>) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (database, decoded) in histories {
        match decoded {
            Ok(decoded) => {
                let versions: Vec<Version> = decoded
                    .iter()
                    .map(|v| Version {
                        id: v.id,
                        author: v.write.author.clone(),
                        compactor_epoch: v.manifest.compactor_epoch(),
                        writer_epoch: v.manifest.writer_epoch(),
                    })
                    .collect();
                violations.extend(judge_epochs(database, &versions));
            }
            Err(e) => violations.push(Violation {
                name: FENCED_WROTE,
                detail: format!("{database}: a manifest written cannot be read back: {e}"),
            }),
        }
    }
    violations
}

/// One manifest version: its id, author and epochs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub id: u64,
    pub author: String,
    pub compactor_epoch: u64,
    pub writer_epoch: u64,
}

/// Whether `author` is the application (its writer and, on SlateDB's
/// defaults, its compactor), which may take compactor epochs.
fn is_application(author: &str) -> bool {
    author.starts_with("app ")
}

/// Whether `author` is a fleet node's coordinator.
fn is_fleet_compactor(author: &str) -> bool {
    author.ends_with("/coordinator")
}

/// The epoch rules over one database's versions, in id order.
pub fn judge_epochs(database: &str, versions: &[Version]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut newest: Option<&Version> = None;
    // Per compactor epoch: who took it, and the nodes that wrote under it.
    let mut taken_by: BTreeMap<u64, &str> = BTreeMap::new();
    let mut node_authors: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    for version in versions {
        if let Some(before) = newest {
            for (what, was, now) in [
                ("compactor", before.compactor_epoch, version.compactor_epoch),
                ("writer", before.writer_epoch, version.writer_epoch),
            ] {
                if now < was {
                    violations.push(Violation {
                        name: FENCED_WROTE,
                        detail: format!(
                            "{database}: manifest {} by {} carries {what} epoch {now} after \
                             manifest {} by {} carried {was}",
                            version.id, version.author, before.id, before.author
                        ),
                    });
                }
            }
        }
        let claimed = newest.is_none_or(|b| version.compactor_epoch > b.compactor_epoch);
        if claimed {
            taken_by.insert(version.compactor_epoch, version.author.as_str());
        }
        if is_fleet_compactor(&version.author) {
            node_authors
                .entry(version.compactor_epoch)
                .or_default()
                .insert(version.author.as_str());
        }
        newest = Some(version);
    }
    for (epoch, nodes) in node_authors {
        let taker = taken_by.get(&epoch).copied().unwrap_or("nobody");
        let too_many = nodes.len() > 1 || (is_application(taker) && !nodes.is_empty());
        if too_many {
            violations.push(Violation {
                name: TWO_COMPACTORS,
                detail: format!(
                    "{database}: compactor epoch {epoch} (taken by {taker}) has manifest writes \
                     from {}",
                    nodes.into_iter().collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(id: u64, author: &str, compactor_epoch: u64, writer_epoch: u64) -> Version {
        Version {
            id,
            author: author.to_string(),
            compactor_epoch,
            writer_epoch,
        }
    }

    fn names(found: &[Violation]) -> Vec<&'static str> {
        found.iter().map(|v| v.name).collect()
    }

    #[test]
    fn the_epoch_rules_pass_a_handover_and_catch_what_fencing_forbids() {
        let app = "app s3://sim-data/db000#1";
        // The writer opens, the fleet's n1 takes the compactor, then n2
        // after a handover; the writer's flushes carry either epoch.
        let fine = [
            version(1, app, 0, 1),
            version(2, "n1/coordinator", 1, 1),
            version(3, app, 1, 1),
            version(4, "n2/coordinator", 2, 1),
            version(5, app, 2, 1),
            version(6, "reader s3://sim-data/db000", 2, 1),
            version(7, "n1/gc", 2, 1),
        ];
        assert!(judge_epochs("db", &fine).is_empty());
        // n1, fenced by n2, writes again under its old epoch.
        let mut went_back = fine.to_vec();
        went_back.push(version(8, "n1/coordinator", 1, 1));
        assert_eq!(names(&judge_epochs("db", &went_back)), [FENCED_WROTE]);
        // Two nodes both write under epoch 1.
        let two = [
            version(1, app, 0, 1),
            version(2, "n1/coordinator", 1, 1),
            version(3, "n2/coordinator", 1, 1),
        ];
        assert_eq!(names(&judge_epochs("db", &two)), [TWO_COMPACTORS]);
        // The writer's own compactor took epoch 1; a node writes under it.
        let over_app = [
            version(1, app, 0, 1),
            version(2, app, 1, 1),
            version(3, "n3/gc", 1, 1),
            version(4, "n1/coordinator", 1, 1),
        ];
        assert_eq!(names(&judge_epochs("db", &over_app)), [TWO_COMPACTORS]);
        // A writer fenced by a newer writer writes again.
        let writer_back = [version(1, app, 0, 2), version(2, app, 0, 1)];
        assert_eq!(names(&judge_epochs("db", &writer_back)), [FENCED_WROTE]);
    }
}
