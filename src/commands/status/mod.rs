//! `sleet status`: the fleet as its root describes it.
//!
//! Status is derived, never stored: it re-reads the config and registry,
//! lists heartbeats, and ranks placement the same way nodes do, so what it
//! shows is what nodes that see the same root will run.

mod stores;
mod table;
mod text;

pub use table::table;
pub use text::{render_text, write_text};

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::error::Error;
use crate::fleet::database::DatabaseHandle;
use crate::fleet::mirror_targets::applied_targets;
use crate::fleet::ownership::{LiveNode, database_assignments};
use crate::fleet::root::{ConfigPoller, FleetRoot, FleetView, NodeSighting, node_view};
use crate::mirror::lag;
use crate::model::duration::HumanDuration;
use crate::model::heartbeat::HeartbeatBody;
use crate::model::response::{
    DatabaseStatus, MirrorStatus, NodeStatus, OutsideCompactorStatus, QueueStatus,
    ServicePlacement, StatusResponse,
};
use crate::model::service::Service;

/// Heartbeat bodies (or compaction queues) read at once.
const READS_IN_FLIGHT: usize = 16;

/// What `status` reads beyond the root itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusOptions {
    /// Read each database's compaction queue depth (one read per database).
    pub compactions: bool,
    /// Read each mirror target's lag, and check destinations for collisions.
    pub mirrors: bool,
}

impl StatusOptions {
    pub fn with_compactions(mut self, compactions: bool) -> Self {
        self.compactions = compactions;
        self
    }

    pub fn with_mirrors(mut self, mirrors: bool) -> Self {
        self.mirrors = mirrors;
        self
    }
}

/// How long one mirror's lag probe may take.
const LAG_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads the root and derives its status as of `now`. Only the `nodes/`
/// LIST is fatal; every other read failure becomes a warning.
pub async fn fleet_status(
    root: &FleetRoot,
    now: DateTime<Utc>,
    options: StatusOptions,
) -> Result<StatusResponse, Error> {
    let view = ConfigPoller::new().poll(root).await;
    let heartbeats = root.list_heartbeats().await?;
    let timeout = view.fleet.node.resolve().heartbeat_timeout;
    let sightings = node_view(&heartbeats, now, timeout);
    let bodies = read_bodies(root, &sightings).await;
    let mut status = derive_status(&view, &sightings, &bodies);
    status.warnings.extend(collision_warnings(&view));
    stores::add(&mut status, root, &view, now).await;
    if options.compactions {
        add_queues(&mut status).await;
    }
    if options.mirrors {
        add_mirrors(&mut status, &view).await;
    }
    Ok(status)
}

/// Every applied target's lag, plus warnings for destinations that
/// collide or are themselves registered, and databases no target covers.
async fn add_mirrors(status: &mut StatusResponse, view: &FleetView) {
    let mut mirrors = Vec::new();
    for (url, file) in view.databases.iter() {
        let settings = view.fleet.resolve_database(file);
        if !settings.services.contains(&Service::Mirror) {
            continue;
        }
        let targets = applied_targets(url, &settings);
        if targets.is_empty() {
            status
                .warnings
                .push(format!("{url} has mirror enabled but no applicable target"));
        }
        mirrors.extend(targets.into_iter().map(|t| MirrorStatus {
            database: url.clone(),
            target: t.name.to_string(),
            destination: t.destination,
            ..MirrorStatus::default()
        }));
    }
    status.warnings.extend(destination_warnings(&mirrors, view));
    status.mirrors = futures::stream::iter(mirrors)
        .map(|mut mirror| async move {
            let probed = tokio::time::timeout(LAG_PROBE_TIMEOUT, probe_lag(&mut mirror)).await;
            mirror.error = match probed {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(format!(
                    "lag read timed out after {}s",
                    LAG_PROBE_TIMEOUT.as_secs()
                )),
            };
            mirror
        })
        .buffered(READS_IN_FLIGHT)
        .collect()
        .await;
    status.warnings.sort();
}

async fn probe_lag(mirror: &mut MirrorStatus) -> Result<(), String> {
    let source = DatabaseHandle::open(&mirror.database).map_err(|e| e.to_string())?;
    let destination = DatabaseHandle::open(&mirror.destination).map_err(|e| e.to_string())?;
    lag::probe(&source, &destination, mirror)
        .await
        .map_err(|e| e.to_string())
}

/// Destinations shared by several (database, target) pairs, or equal to a
/// registered database: either way their history would fork.
fn destination_warnings(mirrors: &[MirrorStatus], view: &FleetView) -> Vec<String> {
    let destinations: std::collections::BTreeSet<&str> =
        mirrors.iter().map(|m| m.destination.as_str()).collect();
    destinations
        .into_iter()
        .filter(|destination| view.databases.contains_key(*destination))
        .map(|destination| format!(
            "mirror destination {destination} is itself a registered database; its services will fork the mirror's history"
        ))
        .collect()
}

/// Destinations more than one (database, target) copies to: none of
/// their passes runs (every node refuses them), and status says so
/// whether or not `--mirrors` is asked for.
fn collision_warnings(view: &FleetView) -> Vec<String> {
    crate::fleet::mirror_targets::shared_destinations(view)
        .into_iter()
        .map(|(destination, users)| {
            format!(
                "mirror destinations collide: {} all map to {destination}; none of them runs \
                 until each database has its own destination",
                crate::fleet::mirror_targets::describe_users(&users)
            )
        })
        .collect()
}

/// Reads each database's `.compactions` queue; failures become warnings.
async fn add_queues(status: &mut StatusResponse) {
    let urls: Vec<String> = status.databases.iter().map(|d| d.url.clone()).collect();
    let queues: Vec<Result<QueueStatus, String>> = futures::stream::iter(urls)
        .map(|url| async move {
            let db = DatabaseHandle::open(&url).map_err(|e| e.to_string())?;
            db.queue_depth().await.map_err(|e| e.to_string())
        })
        .buffered(READS_IN_FLIGHT)
        .collect()
        .await;
    for (db, queue) in status.databases.iter_mut().zip(queues) {
        match queue {
            Ok(queue) => db.queue = Some(queue),
            Err(e) => status
                .warnings
                .push(format!("failed to read compactions for {}: {e}", db.url)),
        }
    }
    status.warnings.sort();
}

/// Each node's heartbeat body, where it is readable.
async fn read_bodies(
    root: &FleetRoot,
    sightings: &BTreeMap<String, NodeSighting>,
) -> BTreeMap<String, HeartbeatBody> {
    futures::stream::iter(sightings.values())
        .map(|s| async move {
            let body = root.get_bytes(&s.path).await.ok()?;
            let parsed = serde_json::from_slice::<HeartbeatBody>(&body).ok()?;
            Some((s.node_id.clone(), parsed))
        })
        .buffered(READS_IN_FLIGHT)
        .filter_map(|entry| async move { entry })
        .collect()
        .await
}

/// The status of a fleet from what was read: pure, so it can be tested
/// without a store.
pub fn derive_status(
    view: &FleetView,
    sightings: &BTreeMap<String, NodeSighting>,
    bodies: &BTreeMap<String, HeartbeatBody>,
) -> StatusResponse {
    let nodes = sightings
        .values()
        .map(|s| {
            let body = bodies.get(&s.node_id);
            NodeStatus {
                node_id: s.node_id.clone(),
                live: s.live,
                heartbeat_age: HumanDuration(s.age).whole_seconds(),
                services: s.services.clone(),
                sleet_version: body.map(|b| b.sleet_version.clone()),
                slatedb_version: body.map(|b| b.slatedb_version.clone()),
                clock: body.and_then(|b| b.clock),
                events: body.and_then(|b| b.events.clone()),
            }
        })
        .collect();
    let live: Vec<LiveNode<'_>> = sightings
        .values()
        .filter(|s| s.live)
        .map(|s| LiveNode {
            id: &s.node_id,
            services: &s.services,
        })
        .collect();
    let mut warnings = view.warnings.clone();
    let live_bodies = bodies
        .iter()
        .filter(|(node, _)| sightings.get(*node).is_some_and(|s| s.live));
    for (node, body) in live_bodies {
        if let Some(clock) = body.clock.filter(|c| c.beyond_bound()) {
            warnings.push(format!(
                "{node}'s clock is {:+.1} s off the fleet root's store, beyond the {:.1} s the \
                 fleet tolerates (GC min_age and heartbeat liveness compare the two): fix its \
                 time sync",
                -(clock.skew_ms as f64) / 1000.0,
                clock.bound_ms as f64 / 1000.0
            ));
        }
        if let Some(events) = body.events.as_ref().filter(|e| !e.flowing) {
            warnings.push(format!(
                "{node} receives no store events ({}): its idle databases are polled at the usual \
                 cadence until events flow again",
                events.problem.as_deref().unwrap_or("not yet received")
            ));
        }
        for f in &body.failing {
            warnings.push(format!(
                "{} of {} is failing on {node}: {}",
                task_name(f),
                f.database,
                f.error
            ));
        }
        for f in &body.failing_compactions {
            warnings.push(format!(
                "compactions of {} fail on {node} ({}): {}",
                f.database,
                task_name(f),
                f.error
            ));
        }
        for f in &body.skipped {
            warnings.push(format!(
                "{} of {} is deferred on {node}: {}",
                task_name(f),
                f.database,
                f.error
            ));
        }
        let unlisted = body
            .outside_compactor_count
            .saturating_sub(body.outside_compactors.len() as u64);
        if unlisted > 0 {
            warnings.push(format!(
                "{node} stands down for {unlisted} more databases that run their own compactor"
            ));
        }
    }
    let outside = outside_compactors(sightings, bodies);
    for (url, o) in &outside {
        warnings.push(format!(
            "{url} runs its own compactor (epoch {}, {} since {}): the fleet does not compact it; fix: {}",
            o.compactor_epoch, o.evidence, o.since, o.fix
        ));
    }
    let hash = view.fleet.node.resolve().placement_hash;
    let mut unserved: Vec<Service> = Vec::new();
    let databases = view
        .databases
        .iter()
        .map(|(url, file)| {
            let settings = view.fleet.resolve_database(file);
            warnings.extend(crate::config::hazards(&settings, Some(url)));
            let assignments = database_assignments(url, &settings, &live, hash);
            warnings.extend(plugin_warnings(
                url,
                &settings,
                &assignments,
                &view.fleet,
                bodies,
            ));
            let services = assignments
                .into_iter()
                .map(|a| {
                    if a.owners.is_empty() && !unserved.contains(&a.service) {
                        unserved.push(a.service);
                    }
                    ServicePlacement {
                        service: a.service,
                        target: a.target,
                        nodes: a.owners,
                    }
                })
                .collect();
            DatabaseStatus {
                url: url.clone(),
                services,
                queue: None,
                outside_compactor: outside.get(url).cloned(),
            }
        })
        .collect();
    warnings.extend(unserved.iter().map(|s| format!("no live node offers {s}")));
    warnings.sort();
    StatusResponse {
        nodes,
        databases,
        mirrors: Vec::new(),
        stores: Vec::new(),
        warnings,
    }
}

/// Databases live nodes stand down for, from their heartbeats: the
/// newest sighting wins where nodes disagree, and every reporting node is
/// named.
fn outside_compactors(
    sightings: &BTreeMap<String, NodeSighting>,
    bodies: &BTreeMap<String, HeartbeatBody>,
) -> BTreeMap<String, OutsideCompactorStatus> {
    let mut by_database: BTreeMap<String, OutsideCompactorStatus> = BTreeMap::new();
    let live = bodies
        .iter()
        .filter(|(node, _)| sightings.get(*node).is_some_and(|s| s.live));
    for (node, body) in live {
        for o in &body.outside_compactors {
            let entry =
                by_database
                    .entry(o.database.clone())
                    .or_insert_with(|| OutsideCompactorStatus {
                        compactor_epoch: o.compactor_epoch,
                        since: o.since.clone(),
                        evidence: o.evidence.clone(),
                        nodes: Vec::new(),
                        fix: crate::services::outside_compactor::FIX.to_string(),
                    });
            if o.compactor_epoch > entry.compactor_epoch {
                entry.compactor_epoch = o.compactor_epoch;
                entry.since = o.since.clone();
                entry.evidence = o.evidence.clone();
            }
            entry.nodes.push(node.clone());
        }
    }
    by_database
}

fn task_name(f: &crate::model::heartbeat::TaskFailure) -> String {
    match &f.target {
        Some(target) => format!("{} target {target}", f.service),
        None => f.service.to_string(),
    }
}

/// Plugins a database's work needs (a target's copier, its hooks) that an
/// owning node has not loaded, or holds with a hash other than the pin.
fn plugin_warnings(
    database: &str,
    settings: &crate::config::DatabaseSettings,
    assignments: &[crate::fleet::ownership::Assignment],
    fleet: &crate::config::FleetConfig,
    bodies: &BTreeMap<String, HeartbeatBody>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for assignment in assignments {
        let mut needed: Vec<(String, String)> = settings
            .hooks
            .iter()
            .filter(|(_, h)| h.applies_to(assignment.service))
            .map(|(name, h)| (format!("hook {name}"), h.plugin.clone()))
            .collect();
        if let Some(target) = &assignment.target
            && let Some(t) = settings.mirror_targets.get(target)
            && let crate::config::CopierKind::Plugin(plugin) = &t.copier
        {
            needed.push((format!("mirror target {target}"), plugin.clone()));
        }
        if matches!(
            assignment.service,
            Service::CompactorCoordinator | Service::CompactionWorkers
        ) {
            for (role, _, code) in settings.compaction_code.roles() {
                let user = format!("{role} of {}", assignment.service);
                needed.push((user, code.plugin.clone()));
            }
        }
        for (user, plugin) in needed {
            let pin = fleet.plugins.get(&plugin).and_then(|g| g.sha256.clone());
            for node in &assignment.owners {
                let Some(body) = bodies.get(node) else {
                    continue;
                };
                match body.plugins.iter().find(|p| p.name == plugin) {
                    None => warnings.push(format!(
                        "{user} of {database} needs plugin {plugin}, which node {node} has not loaded"
                    )),
                    Some(p) if pin.as_ref().is_some_and(|pin| !pin.eq_ignore_ascii_case(&p.sha256)) => {
                        warnings.push(format!(
                            "{user} of {database}: node {node} holds plugin {plugin} with sha256 {}, but sleet.toml pins {}",
                            p.sha256,
                            pin.as_deref().unwrap_or_default()
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests;
