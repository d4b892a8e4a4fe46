//! Property tests of the frozen formats and of placement stability.

use std::collections::BTreeSet;

use proptest::prelude::*;
use sleet::HumanDuration;
use sleet::Service;
use sleet::config::{DatabaseConfig, FleetConfig};
use sleet::model::placement::PlacementKey;
use sleet::model::registry::{
    canonicalize_database_url, canonicalize_url, file_name, parse_file_name,
};

fn segment() -> impl Strategy<Value = String> {
    prop::string::string_regex("[a-zA-Z0-9 _.~%µçü漢-]{1,12}").unwrap()
}

fn database_url() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["s3", "gs", "az", "file", "memory"]),
        prop::string::string_regex("[a-zA-Z0-9-]{1,10}").unwrap(),
        prop::collection::vec(segment(), 1..4),
    )
        .prop_map(|(scheme, host, path)| match scheme {
            "file" | "memory" => format!("{scheme}:///{host}/{}", path.join("/")),
            _ => format!("{scheme}://{host}/{}", path.join("/")),
        })
}

fn node_ids() -> impl Strategy<Value = BTreeSet<String>> {
    prop::collection::btree_set(prop::string::string_regex("[a-z0-9-]{1,8}").unwrap(), 1..12)
}

fn owner(db: &str, service: Service, nodes: &BTreeSet<String>) -> String {
    PlacementKey::Service {
        database: db,
        service,
    }
    .rank(nodes.iter().map(String::as_str))[0]
        .to_string()
}

proptest! {
    #[test]
    fn registry_names_roundtrip(url in database_url()) {
        if let Ok(canonical) = canonicalize_database_url(&url) {
            prop_assert_eq!(canonicalize_url(&canonical).unwrap(), canonical.clone(), "idempotent");
            let name = file_name(&canonical);
            prop_assert!(!name.contains('/'));
            prop_assert!(name.len() <= 900);
            prop_assert_eq!(parse_file_name(&name), Some(canonical));
        }
    }

    #[test]
    fn ranking_is_a_deterministic_permutation(db in database_url(), nodes in node_ids()) {
        let key = PlacementKey::Service { database: &db, service: Service::Gc };
        let forward = key.rank(nodes.iter().map(String::as_str));
        let backward = key.rank(nodes.iter().rev().map(String::as_str));
        prop_assert_eq!(&forward, &backward);
        let as_set: BTreeSet<String> = forward.iter().map(|s| s.to_string()).collect();
        prop_assert_eq!(as_set, nodes);
    }

    /// Picking owners by a bounded scan gives exactly the ranking's head,
    /// whatever the order of candidates, duplicates included.
    #[test]
    fn owners_are_the_head_of_the_ranking(
        db in database_url(),
        nodes in proptest::collection::vec("[a-d]{1,2}", 0..24),
        count in 0usize..12,
    ) {
        let key = PlacementKey::Service { database: &db, service: Service::CompactionWorkers };
        let mut ranked = key.rank(nodes.iter().map(String::as_str));
        ranked.truncate(count);
        prop_assert_eq!(key.owners(nodes.iter().map(String::as_str), count), ranked);
    }

    /// Adding a node moves only the pairs the new node wins; removing one
    /// moves only the pairs it owned.
    #[test]
    fn membership_changes_move_minimal_work(
        dbs in prop::collection::vec(database_url(), 1..20),
        nodes in node_ids(),
        newcomer in "[A-Z]{1,4}",
    ) {
        let mut grown = nodes.clone();
        grown.insert(newcomer.clone());
        let leaver = nodes.iter().next().unwrap().clone();
        let mut shrunk = nodes.clone();
        shrunk.remove(&leaver);
        for db in &dbs {
            for service in Service::ALL {
                let before = owner(db, service, &nodes);
                let after_join = owner(db, service, &grown);
                prop_assert!(after_join == before || after_join == newcomer);
                if !shrunk.is_empty() {
                    let after_leave = owner(db, service, &shrunk);
                    prop_assert!(after_leave == before || before == leaver);
                }
            }
        }
    }

    /// Worker sets (top `count`) change by at most the node that joined.
    #[test]
    fn worker_sets_are_stable(db in database_url(), nodes in node_ids(), count in 1usize..5, newcomer in "[A-Z]{1,4}") {
        let key = PlacementKey::Service { database: &db, service: Service::CompactionWorkers };
        let before: BTreeSet<&str> = key.owners(nodes.iter().map(String::as_str), count).into_iter().collect();
        let mut grown = nodes.clone();
        grown.insert(newcomer.clone());
        let after: BTreeSet<&str> = key.owners(grown.iter().map(String::as_str), count).into_iter().collect();
        for added in after.difference(&before) {
            prop_assert_eq!(*added, newcomer.as_str());
        }
        prop_assert!(before.difference(&after).count() <= 1);
    }

    /// Each field resolves to the database file's value, else the fleet's,
    /// else the built-in default.
    #[test]
    fn resolution_is_fieldwise_last_writer_wins(
        fleet_count in prop::option::of(1u32..9),
        db_count in prop::option::of(1u32..9),
        fleet_age in prop::option::of(0u64..900),
        db_age in prop::option::of(0u64..900),
        fleet_services in prop::option::of(prop::sample::subsequence(Service::ALL.to_vec(), 0..4)),
        db_services in prop::option::of(prop::sample::subsequence(Service::ALL.to_vec(), 0..4)),
    ) {
        let layer = |count: Option<u32>, age: Option<u64>, services: Option<Vec<Service>>| {
            let mut c = DatabaseConfig { services, ..DatabaseConfig::default() };
            c.compaction_workers.count = count;
            c.gc.manifest.min_age = age.map(HumanDuration::from_secs);
            c
        };
        let fleet = FleetConfig {
            database: layer(fleet_count, fleet_age, fleet_services.clone()),
            ..FleetConfig::default()
        };
        let resolved = fleet.resolve_database(&layer(db_count, db_age, db_services.clone()));
        prop_assert_eq!(resolved.workers.count, db_count.or(fleet_count).unwrap_or(1));
        prop_assert_eq!(resolved.gc.manifest.min_age.as_secs(), db_age.or(fleet_age).unwrap_or(300));
        prop_assert_eq!(resolved.services, db_services.or(fleet_services).unwrap_or(Service::ALL.to_vec()));
    }
}
