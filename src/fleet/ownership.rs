//! Who owns what: every database's work, assigned to live nodes.
//!
//! A pure function of the live nodes and the resolved config, so every
//! node (and `sleet status`) that sees the same heartbeats and config
//! computes the same assignment without coordination.

use crate::config::DatabaseSettings;
use crate::fleet::mirror_targets::applied_targets;
use crate::model::placement::{PlacementHash, PlacementKey};
use crate::model::service::Service;

/// A node that counts as live, with the services its heartbeat offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveNode<'a> {
    pub id: &'a str,
    pub services: &'a [Service],
}

/// One unit of work for a database and the nodes that should run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub service: Service,
    /// The mirror target, for mirror work (one assignment per target).
    pub target: Option<String>,
    /// The nodes that run it, best ranked first; empty when no live node
    /// offers the service.
    pub owners: Vec<String>,
}

/// The work of one database (a canonical URL), in `services` order.
///
/// Workers run on the top `compaction-workers.count` candidates; every
/// other service, and each applied mirror target, runs on exactly one.
pub fn database_assignments(
    database: &str,
    settings: &DatabaseSettings,
    live: &[LiveNode<'_>],
    hash: PlacementHash,
) -> Vec<Assignment> {
    let mut assignments = Vec::new();
    for &service in &settings.services {
        let candidates = || {
            live.iter()
                .filter(move |n| n.services.contains(&service))
                .map(|n| n.id)
        };
        let owned = |key: PlacementKey<'_>, count: usize| -> Vec<String> {
            key.owners_by(hash, candidates(), count)
                .into_iter()
                .map(str::to_string)
                .collect()
        };
        if service == Service::Mirror {
            for target in applied_targets(database, settings) {
                let key = PlacementKey::MirrorTarget {
                    database,
                    target: target.name,
                };
                assignments.push(Assignment {
                    service,
                    target: Some(target.name.to_string()),
                    owners: owned(key, 1),
                });
            }
            continue;
        }
        let count = match service {
            Service::CompactionWorkers => settings.workers.count as usize,
            _ => 1,
        };
        assignments.push(Assignment {
            service,
            target: None,
            owners: owned(PlacementKey::Service { database, service }, count),
        });
    }
    assignments
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FleetConfig, parse_database_config};

    fn settings(toml: &str) -> DatabaseSettings {
        let fleet = FleetConfig::default();
        fleet.resolve_database(&parse_database_config(&fleet, toml).unwrap())
    }

    #[test]
    fn assignments_follow_roles_counts_and_targets() {
        let all = Service::ALL;
        let gc_only = [Service::Gc];
        let live = [
            LiveNode {
                id: "a",
                services: &all,
            },
            LiveNode {
                id: "b",
                services: &all,
            },
            LiveNode {
                id: "c",
                services: &gc_only,
            },
        ];
        let s = settings(
            r#"[compaction-workers]
            count = 2
            [mirror.targets.dr]
            url = "s3://dr/x"
            [mirror.targets.backup]
            url = "s3://backup/x""#,
        );
        let got = database_assignments("s3://b/db", &s, &live, PlacementHash::Fnv1a);
        let shape: Vec<_> = got
            .iter()
            .map(|a| (a.service, a.target.as_deref(), a.owners.len()))
            .collect();
        assert_eq!(
            shape,
            [
                (Service::Gc, None, 1),
                (Service::CompactorCoordinator, None, 1),
                (Service::CompactionWorkers, None, 2),
                (Service::Mirror, Some("backup"), 1),
                (Service::Mirror, Some("dr"), 1),
            ]
        );
        for a in &got[1..] {
            assert!(!a.owners.contains(&"c".to_string()), "c offers only gc");
        }
        let gc_key = PlacementKey::Service {
            database: "s3://b/db",
            service: Service::Gc,
        };
        assert_eq!(got[0].owners, [gc_key.rank(["a", "b", "c"])[0]]);
    }

    #[test]
    fn nobody_owns_what_nobody_offers() {
        let gc_only = [Service::Gc];
        let live = [LiveNode {
            id: "a",
            services: &gc_only,
        }];
        let got = database_assignments("s3://b/db", &settings(""), &live, PlacementHash::Fnv1a);
        assert_eq!(got[0].owners, ["a"]);
        assert!(got[1..].iter().all(|a| a.owners.is_empty()));
        assert!(
            database_assignments(
                "s3://b/db",
                &settings("services = []"),
                &live,
                PlacementHash::Fnv1a
            )
            .is_empty()
        );
    }
}
