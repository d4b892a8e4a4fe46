//! Compatibility with sleet 0.1.0: its config files, heartbeat bodies,
//! registry names and placement scores, as files under `tests/corpus/`.
//! The expected values there were derived independently of this code.

use std::time::Duration;

use sleet::Service;
use sleet::config::{
    CompressionCodec, CopierKind, MirrorMode, parse_database_config, parse_fleet_config,
};
use sleet::model::heartbeat::HeartbeatBody;
use sleet::model::placement::PlacementKey;
use sleet::model::registry::{canonicalize_database_url, file_name, parse_file_name};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus/v0.1.0");

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{CORPUS}/{name}")).unwrap()
}

fn rows(name: &str) -> Vec<Vec<String>> {
    read(name)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn a_0_1_config_parses_and_resolves_unchanged() {
    let fleet = parse_fleet_config(&read("sleet.toml")).unwrap();
    let file = parse_database_config(&fleet, &read("db.toml")).unwrap();
    let fleet_db = fleet.resolve_database(&Default::default());
    assert_eq!(fleet_db.workers.count, 2);
    assert_eq!(
        fleet_db.workers.compression_codec,
        Some(CompressionCodec::Zstd)
    );
    assert!(!fleet_db.gc.compactions.enabled);
    assert_eq!(
        fleet_db.mirror_targets["dr"].source_prefix.as_deref(),
        Some("s3://user-data")
    );

    let db = fleet.resolve_database(&file);
    assert_eq!(db.services, [Service::Gc]);
    assert_eq!(db.gc.compacted.min_age, Duration::from_secs(1800));
    assert!(db.mirror_targets["dr"].disabled);
    let backup = &db.mirror_targets["backup"];
    assert_eq!(backup.mode, MirrorMode::Periodic);
    assert_eq!(backup.copier, CopierKind::Rclone);
    assert_eq!(backup.retention_keep, Some(Duration::from_secs(30 * 86400)));
}

#[test]
fn the_examples_load() {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let fleet =
        parse_fleet_config(&std::fs::read_to_string(format!("{examples}/sleet.toml")).unwrap())
            .unwrap();
    let db = parse_database_config(
        &fleet,
        &std::fs::read_to_string(format!("{examples}/db.toml")).unwrap(),
    )
    .unwrap();
    let resolved = fleet.resolve_database(&db);
    assert_eq!(resolved.services, [Service::Gc]);
    assert_eq!(resolved.workers.count, 2, "inherited from the fleet layer");
    assert_eq!(
        resolved.mirror_targets["backup"].interval,
        Duration::from_secs(86400)
    );
}

#[test]
fn a_0_1_heartbeat_body_parses() {
    let body: HeartbeatBody = serde_json::from_str(&read("heartbeat.json")).unwrap();
    assert_eq!((body.version, body.node_id.as_str()), (1, "sleet-1"));
    assert_eq!(body.services[0].service, Service::Gc);
    assert_eq!(
        (body.services[0].running, body.services[0].backoff),
        (12, 1)
    );
    assert_eq!(body.services[1].service, Service::CompactionWorkers);
}

#[test]
fn registry_names_are_byte_compatible() {
    let rows = rows("registry-names.tsv");
    assert_eq!(rows.len(), 5);
    for row in rows {
        let canonical = canonicalize_database_url(&row[0]).unwrap();
        assert_eq!(canonical, row[1], "canonical form of {}", row[0]);
        assert_eq!(file_name(&canonical), row[2], "file name of {canonical}");
        assert_eq!(
            parse_file_name(&row[2]).as_deref(),
            Some(canonical.as_str())
        );
    }
}

#[test]
fn placement_scores_are_byte_compatible() {
    let rows = rows("placement-scores.tsv");
    assert_eq!(rows.len(), 60);
    for row in rows {
        let (db, what, node) = (&row[0], &row[1], &row[2]);
        let key = match what.strip_prefix("mirror:") {
            Some(target) => PlacementKey::MirrorTarget {
                database: db,
                target,
            },
            None => PlacementKey::Service {
                database: db,
                service: what.parse().unwrap(),
            },
        };
        assert_eq!(
            format!("{:016x}", key.score(node)),
            row[3],
            "{db} {what} {node}"
        );
    }
}
