use super::*;
use crate::config::{DatabaseConfig, FleetConfig};
use std::time::Duration;

#[test]
fn an_empty_fleet_renders_two_headers() {
    let status = derive_status(&FleetView::default(), &BTreeMap::new(), &BTreeMap::new());
    assert_eq!(
        render_text(&status),
        "NODE  LIVE  HEARTBEAT  SERVICES  SLEET  SLATEDB\n\nDATABASE  SERVICE  NODES\n"
    );
    assert_eq!(
        serde_json::to_string(&status).unwrap(),
        r#"{"nodes":[],"databases":[]}"#
    );
}

#[test]
fn a_populated_fleet_renders_stably() {
    let sighting = NodeSighting {
        node_id: "sleet-1".into(),
        services: vec![Service::Gc, Service::CompactionWorkers],
        age: Duration::from_millis(2400),
        live: true,
        path: "nodes/sleet-1.gw.json".into(),
    };
    let sightings = BTreeMap::from([("sleet-1".to_string(), sighting)]);
    let mut body = HeartbeatBody::new("sleet-1", vec![]);
    body.sleet_version = "0.1.0".into();
    let bodies = BTreeMap::from([("sleet-1".to_string(), body)]);
    let view = FleetView {
        fleet: FleetConfig::default(),
        databases: std::sync::Arc::new(BTreeMap::from([(
            "s3://b/db".to_string(),
            DatabaseConfig {
                services: Some(vec![Service::Gc, Service::CompactorCoordinator]),
                ..DatabaseConfig::default()
            }
            .into(),
        )])),
        warnings: vec![],
    };
    let mut status = derive_status(&view, &sightings, &bodies);
    status.nodes[0].slatedb_version = None;
    status.databases[0].queue = Some(QueueStatus {
        claimable: 3,
        running: 1,
    });
    assert_eq!(
        render_text(&status),
        "NODE     LIVE  HEARTBEAT  SERVICES               SLEET  SLATEDB\n\
         sleet-1  yes   2s         gc,compaction-workers  0.1.0  -\n\
         \n\
         DATABASE   SERVICE                NODES    QUEUE\n\
         s3://b/db  gc                     sleet-1  3 waiting, 1 running\n\
         s3://b/db  compactor-coordinator  -        3 waiting, 1 running\n\
         \n\
         warning: no live node offers compactor-coordinator\n"
    );
}

#[test]
fn mirror_lag_renders_as_a_table_with_errors_after_it() {
    let mut status = derive_status(&FleetView::default(), &BTreeMap::new(), &BTreeMap::new());
    status.mirrors = vec![
        MirrorStatus {
            database: "s3://b/db".into(),
            target: "dr".into(),
            destination: "s3://dr/db".into(),
            manifests_behind: Some(2),
            wal_behind: Some(7),
            seconds_behind: Some(31),
            recovery_point_seconds: Some(0.4),
            ..MirrorStatus::default()
        },
        MirrorStatus {
            database: "s3://b/db".into(),
            target: "backup".into(),
            destination: "gs://backups/db".into(),
            error: Some("bucket unreachable".into()),
            ..MirrorStatus::default()
        },
    ];
    assert_eq!(
        render_text(&status),
        "NODE  LIVE  HEARTBEAT  SERVICES  SLEET  SLATEDB\n\n\
         DATABASE  SERVICE  NODES\n\n\
         DATABASE   TARGET  DESTINATION      MANIFESTS  WAL  SECONDS  RPO\n\
         s3://b/db  dr      s3://dr/db       2          7    31       0.4\n\
         s3://b/db  backup  gs://backups/db  -          -    -        -\n\
         error: s3://b/db target backup: bucket unreachable\n"
    );
}

#[test]
fn colliding_and_registered_destinations_warn() {
    let fleet =
        crate::config::parse_fleet_config("[database.mirror.targets.dr]\nurl = \"s3://dr/x\"\n")
            .unwrap();
    let view = FleetView {
        databases: std::sync::Arc::new(BTreeMap::from([
            ("s3://b/db1".to_string(), Default::default()),
            ("s3://b/db3".to_string(), Default::default()),
        ])),
        fleet,
        warnings: vec![],
    };
    assert_eq!(
        collision_warnings(&view),
        [
            "mirror destinations collide: s3://b/db1 target dr and s3://b/db3 target dr all map to s3://dr/x; none of them runs until each database has its own destination"
        ]
    );
    let mirror = |db: &str, target: &str, dest: &str| MirrorStatus {
        database: db.into(),
        target: target.into(),
        destination: dest.into(),
        ..MirrorStatus::default()
    };
    let registered = FleetView {
        databases: std::sync::Arc::new(BTreeMap::from([(
            "s3://b/db2".to_string(),
            Default::default(),
        )])),
        ..FleetView::default()
    };
    assert_eq!(
        destination_warnings(&[mirror("s3://b/db1", "loop", "s3://b/db2")], &registered),
        [
            "mirror destination s3://b/db2 is itself a registered database; its services will fork the mirror's history"
        ]
    );
}

fn warnings_for(service: Service) -> Vec<String> {
    let fleet = FleetConfig::default();
    let file = crate::config::parse_database_config(
        &fleet,
        "merge_operator = \"plugin:counter-merge\"\ncompaction_filter = \"plugin:ttl-filter\"\n",
    )
    .unwrap();
    let settings = fleet.resolve_database(&file);
    let assignment = crate::fleet::ownership::Assignment {
        service,
        target: None,
        owners: vec!["n1".into()],
    };
    let bodies = BTreeMap::from([("n1".to_string(), HeartbeatBody::new("n1", vec![]))]);
    plugin_warnings("db1", &settings, &[assignment], &fleet, &bodies)
}

/// A node that owns a database's compaction without its merge
/// operator or filter loaded is named; other services need neither.
#[test]
fn owners_of_compaction_are_warned_of_compaction_plugins_they_lack() {
    assert_eq!(
        warnings_for(Service::CompactionWorkers),
        [
            "merge_operator of compaction-workers of db1 needs plugin counter-merge, which node n1 has not loaded",
            "compaction_filter of compaction-workers of db1 needs plugin ttl-filter, which node n1 has not loaded",
        ]
    );
    assert_eq!(warnings_for(Service::CompactorCoordinator).len(), 2);
    assert!(warnings_for(Service::Gc).is_empty());
}
