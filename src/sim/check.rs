//! The invariants a simulated run is judged by, each failure with a name.
//!
//! This step checks ownership: once faults stop, every running node runs
//! exactly the tasks placement gives it (computed by the same function
//! the nodes use, over the heartbeats in the store and the config as it
//! is), its heartbeat counts exactly those tasks (what peers and `sleet
//! status` are told), and no node that is gone is still live to the
//! fleet.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

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
    let mut found = Vec::new();
    for counted in &body.services {
        let placed = expected
            .iter()
            .filter(|(_, service, _)| *service == counted.service.to_string())
            .count() as u64;
        let reported = counted.running + counted.backoff;
        if reported != placed {
            found.push(Violation {
                name: MISCOUNTED,
                detail: format!(
                    "{node_id}'s heartbeat reports {reported} {} tasks where placement gives it \
                     {placed}",
                    counted.service
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
