//! Which tasks a node owns, and the settings each runs with: a pure
//! function of the node's view of the fleet (live heartbeats, config), so
//! nodes that see the same things compute the same assignment.

use std::collections::BTreeMap;

use crate::config::DatabaseSettings;
use crate::fleet::mirror_targets::applied_targets;
use crate::fleet::ownership::{Assignment, LiveNode, database_assignments};
use crate::fleet::root::{FleetView, NodeSighting};
use crate::mirror::run::MirrorSpec;
use crate::model::service::Service;
use crate::plugin::compaction::{CodeSpec, CompactionCodeSpec};
use crate::plugin::hook::HookSpec;
use crate::services::ServiceSpec;

/// A task's settings: its work's, and the hooks around its runs. A
/// change to either restarts the task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    pub work: TaskWork,
    pub hooks: Vec<HookSpec>,
}

/// What a task runs: one of SlateDB's services, or one mirror target.
/// The two sit side by side; only a task's own settings restart it, so
/// editing a database's mirror target does not restart its compactor.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskWork {
    Service(ServiceSpec),
    Mirror(MirrorSpec),
}

impl TaskWork {
    /// How long a task that stood down for an outside compactor waits
    /// before it looks again (coordinator and workers only).
    pub fn outside_recheck(&self) -> Option<std::time::Duration> {
        match self {
            TaskWork::Service(spec) => spec.outside_recheck(),
            TaskWork::Mirror(_) => None,
        }
    }
}

/// One unit of work a node may own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskKey {
    pub database: String,
    pub service: Service,
    pub target: Option<String>,
}

/// The tasks `node_id` owns, each with the settings it runs with.
///
/// The node always counts itself live with the services it offers, so a
/// node whose own heartbeat is missing from a listing (first tick, a slow
/// store) still takes its share rather than none.
pub fn owned_tasks(
    node_id: &str,
    offered: &[Service],
    sightings: &BTreeMap<String, NodeSighting>,
    view: &FleetView,
) -> BTreeMap<TaskKey, TaskSpec> {
    let mut live: Vec<LiveNode<'_>> = sightings
        .values()
        .filter(|s| s.live && s.node_id != node_id)
        .map(|s| LiveNode {
            id: &s.node_id,
            services: &s.services,
        })
        .collect();
    live.push(LiveNode {
        id: node_id,
        services: offered,
    });
    let hash = view.fleet.node.resolve().placement_hash;
    let shared = std::cell::OnceCell::new();
    let mut owned = BTreeMap::new();
    for (url, file) in view.databases.iter() {
        let settings = view.fleet.resolve_database(file);
        for assignment in database_assignments(url, &settings, &live, hash) {
            if !assignment.owners.iter().any(|o| o == node_id) {
                continue;
            }
            let shared =
                || shared.get_or_init(|| crate::fleet::mirror_targets::shared_destinations(view));
            if let Some(work) = task_spec(&assignment, url, &settings, view, shared) {
                let spec = TaskSpec {
                    hooks: crate::services::hooks::specs(
                        assignment.service,
                        &settings,
                        &view.fleet,
                    ),
                    work,
                };
                let key = TaskKey {
                    database: url.clone(),
                    service: assignment.service,
                    target: assignment.target,
                };
                owned.insert(key, spec);
            }
        }
    }
    owned
}

/// The compaction plugins a database names, with the limits the fleet
/// grants them.
fn compaction_code_spec(
    settings: &DatabaseSettings,
    fleet: &crate::config::FleetConfig,
) -> CompactionCodeSpec {
    use crate::plugin::PluginKind;
    let code = &settings.compaction_code;
    let spec = |code: &Option<crate::config::CodeSettings>, kind| {
        code.as_ref().map(|code| CodeSpec {
            plugin: code.plugin.clone(),
            config: code.config.clone(),
            limits: fleet.plugin_limits(&code.plugin, kind),
        })
    };
    CompactionCodeSpec {
        merge_operator: spec(&code.merge_operator, PluginKind::MergeOperator),
        compaction_filter: spec(&code.compaction_filter, PluginKind::CompactionFilter),
    }
}

/// The destinations of `database`'s continuous mirrors, which its GC
/// waits for before it collects WAL (`services::wal_hold`).
fn continuous_mirrors(database: &str, settings: &DatabaseSettings) -> Vec<String> {
    if !settings.services.contains(&Service::Mirror) {
        return Vec::new();
    }
    applied_targets(database, settings)
        .into_iter()
        .filter(|t| t.settings.mode == crate::config::MirrorMode::Continuous)
        .map(|t| t.destination)
        .collect()
}

/// What one assignment runs. `shared` gives the destinations more than
/// one (database, target) copies to (computed only when a mirror task
/// asks).
pub(super) fn task_spec<'a>(
    assignment: &Assignment,
    database: &str,
    settings: &DatabaseSettings,
    view: &FleetView,
    shared: impl FnOnce() -> &'a BTreeMap<String, Vec<(String, String)>>,
) -> Option<TaskWork> {
    let service = |spec| Some(TaskWork::Service(spec));
    match assignment.service {
        Service::Gc => service(ServiceSpec::Gc(
            settings.gc.clone(),
            settings
                .idle
                .for_gc(settings.gc.linger(), settings.gc.shortest_min_age()),
            continuous_mirrors(database, settings),
        )),
        Service::CompactorCoordinator => service(ServiceSpec::Coordinator(
            settings.coordinator.clone(),
            settings.outside_compactor,
            settings.idle.for_coordinator(settings.gc.manifest.min_age),
            compaction_code_spec(settings, &view.fleet),
        )),
        Service::CompactionWorkers => service(ServiceSpec::Workers(
            settings.workers.clone(),
            settings.outside_compactor,
            settings.idle.for_workers(settings.gc.compactions.min_age),
            compaction_code_spec(settings, &view.fleet),
        )),
        Service::Mirror => {
            let name = assignment.target.as_deref()?;
            let target = applied_targets(database, settings)
                .into_iter()
                .find(|t| t.name == name)?;
            let shared_with = shared()
                .get(&target.destination)
                .map(|users| {
                    users
                        .iter()
                        .filter(|(db, t)| !(db == database && t == name))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            Some(TaskWork::Mirror(MirrorSpec {
                target: name.to_string(),
                shared_with,
                destination_registered: view.databases.contains_key(&target.destination),
                destination: target.destination,
                limits: crate::fleet::mirror_targets::target_limits(&view.fleet, target.settings),
                settings: target.settings.clone(),
            }))
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use object_store::path::Path;

    use super::*;
    use crate::config::{DatabaseConfig, FleetConfig, parse_database_config};
    use crate::daemon::RUNNABLE_SERVICES;

    fn sighting(id: &str, services: &[Service], live: bool) -> (String, NodeSighting) {
        (
            id.to_string(),
            NodeSighting {
                node_id: id.into(),
                services: services.to_vec(),
                age: Duration::ZERO,
                live,
                path: Path::from(format!("nodes/{id}.json")),
            },
        )
    }

    /// A view of `databases` (URL, registry file) under the default fleet
    /// config.
    pub(in crate::daemon) fn view(databases: &[(&str, &str)]) -> FleetView {
        let fleet = FleetConfig::default();
        FleetView {
            databases: std::sync::Arc::new(
                databases
                    .iter()
                    .map(|(url, toml)| {
                        (
                            url.to_string(),
                            parse_database_config(&fleet, toml).unwrap().into(),
                        )
                    })
                    .collect(),
            ),
            fleet,
            warnings: vec![],
        }
    }

    #[test]
    fn every_task_has_exactly_one_owner_among_live_nodes() {
        let all = RUNNABLE_SERVICES;
        let sightings: BTreeMap<_, _> = [
            sighting("a", &all, true),
            sighting("b", &all, true),
            sighting("c", &all, true),
            sighting("dead", &all, false),
        ]
        .into();
        let dbs: Vec<(String, &str)> = (0..30).map(|i| (format!("s3://b/db{i}"), "")).collect();
        let dbs: Vec<(&str, &str)> = dbs.iter().map(|(u, t)| (u.as_str(), *t)).collect();
        let v = view(&dbs);
        let mut owners: BTreeMap<TaskKey, Vec<&str>> = BTreeMap::new();
        for id in ["a", "b", "c"] {
            for key in owned_tasks(id, &all, &sightings, &v).into_keys() {
                owners.entry(key).or_default().push(id);
            }
        }
        assert_eq!(owners.len(), 30 * 3);
        assert!(owners.values().all(|o| o.len() == 1), "{owners:?}");
        let shares: Vec<usize> = ["a", "b", "c"]
            .iter()
            .map(|id| owners.values().filter(|o| o[0] == *id).count())
            .collect();
        assert!(shares.iter().all(|&n| n > 0), "work spreads: {shares:?}");
    }

    #[test]
    fn a_node_counts_itself_live_and_respects_roles() {
        let sightings = BTreeMap::from([sighting("peer", &[Service::CompactionWorkers], true)]);
        let v = view(&[("s3://b/db", "[compaction-workers]\ncount = 2")]);
        let owned = owned_tasks(
            "me",
            &[Service::Gc, Service::CompactionWorkers],
            &sightings,
            &v,
        );
        let services: Vec<_> = owned.keys().map(|k| k.service).collect();
        assert_eq!(
            services,
            [Service::Gc, Service::CompactionWorkers],
            "absent from the listing, still owns"
        );
        let peer = owned_tasks("peer", &[Service::CompactionWorkers], &sightings, &v);
        assert_eq!(peer.len(), 1, "count = 2 spans both nodes");
        assert!(owned_tasks("me", &[], &sightings, &v).is_empty());
        let disabled = view(&[("s3://b/db", "services = []")]);
        assert!(owned_tasks("me", &RUNNABLE_SERVICES, &sightings, &disabled).is_empty());
    }

    #[test]
    fn specs_change_only_with_their_own_settings() {
        let fleet = FleetConfig::default();
        let a = fleet.resolve_database(&DatabaseConfig::default());
        let b = fleet.resolve_database(
            &parse_database_config(&fleet, "[gc.manifest]\nmin_age = \"1m\"").unwrap(),
        );
        assert_ne!(spec(Service::Gc, None, &a), spec(Service::Gc, None, &b));
        assert_eq!(
            spec(Service::CompactorCoordinator, None, &a),
            spec(Service::CompactorCoordinator, None, &b),
            "a GC edit does not restart the coordinator"
        );
        let target = |poll: &str| {
            let toml = format!("[mirror.targets.dr]\nurl = \"s3://dr/db\"\npoll = \"{poll}\"");
            fleet.resolve_database(&parse_database_config(&fleet, &toml).unwrap())
        };
        let (fast, slow) = (target("1s"), target("9s"));
        assert_ne!(
            spec(Service::Mirror, Some("dr"), &fast),
            spec(Service::Mirror, Some("dr"), &slow)
        );
        assert_eq!(
            spec(Service::Gc, None, &fast),
            spec(Service::Gc, None, &slow),
            "a mirror target edit restarts only that target's task"
        );
        assert_eq!(spec(Service::Mirror, Some("gone"), &fast), None);
    }

    fn spec(
        service: Service,
        target: Option<&str>,
        settings: &DatabaseSettings,
    ) -> Option<TaskWork> {
        let assignment = Assignment {
            service,
            target: target.map(str::to_string),
            owners: vec![],
        };
        let none = BTreeMap::new();
        task_spec(
            &assignment,
            "s3://b/db",
            settings,
            &FleetView::default(),
            || &none,
        )
    }
}
