use super::*;
use crate::config::{FleetConfig, parse_database_config};
use crate::fleet::database::ADMIN_CALL_TIMEOUT;

fn settings(toml: &str) -> crate::config::DatabaseSettings {
    let fleet = FleetConfig::default();
    fleet.resolve_database(&parse_database_config(&fleet, toml).unwrap())
}

/// The outside-compactor check's time limit counts from when the look
/// permit is held, not from when the task asked for it: with every
/// permit held for longer than the limit, and a store that takes
/// 10 s a request, the check still answers (here: no database). The
/// controls: timed from the request, it failed with a timeout (and at
/// 1,000 databases on a slow store most tasks' first checks did); so
/// did a `timeout` built before the permit and polled after it, which
/// passed this test while the store answered at once.
#[tokio::test(start_paused = true)]
async fn the_outside_compactor_check_is_timed_from_its_permit() {
    use crate::fleet::root::FleetRoot;
    use crate::testing::{Faults, FaultyStore};
    let store = Arc::new(object_store::memory::InMemory::new());
    let faults = Faults::new();
    let reply_after = Duration::from_secs(10);
    faults.slow_down("", reply_after);
    let slow = Arc::new(FaultyStore::new(store.clone(), faults));
    let permits = Arc::new(tokio::sync::Semaphore::new(1));
    let db = DatabaseHandle::from_parts("memory:///db".into(), slow, "db".into())
        .with_look_limit(permits.clone());
    let root = FleetRoot::from_parts("memory:///fleet".into(), store, "fleet".into());
    let records = EpochRecords::new(root, "n");
    let outside = settings("").outside_compactor;
    let held = permits.clone().acquire_owned().await.unwrap();
    let queued = ADMIN_CALL_TIMEOUT * 2;
    tokio::spawn(async move {
        tokio::time::sleep(queued).await;
        drop(held);
    });
    let asked = tokio::time::Instant::now();
    let result = db.may_compact(&records, &outside).await;
    assert!(
        asked.elapsed() >= queued + reply_after,
        "it waited for the permit, then the store"
    );
    assert!(
        matches!(
            result,
            Err(ServiceError::Database(DatabaseError::NotADatabase { .. }))
        ),
        "{result:?}"
    );
}

#[test]
fn options_map_from_resolved_defaults() {
    let s = settings("");
    let gc = gc_options(&s.gc, true);
    let manifest = gc.manifest_options.unwrap();
    assert_eq!(manifest.interval, Some(Duration::from_secs(60)));
    assert_eq!(manifest.min_age, Duration::from_secs(300));
    assert!(!manifest.dry_run);
    assert!(gc.wal_fence_options.unwrap().dry_run);
    assert_eq!(
        gc.detach_options.unwrap().interval,
        Some(Duration::from_secs(60))
    );
    assert!(gc.boundary_files_enabled);
    assert!(
        !gc_options(&s.gc, false).boundary_files_enabled,
        "file:// cannot If-Match"
    );

    let c = coordinator_options(&s.coordinator);
    assert!(c.worker.is_none(), "never an embedded worker");
    assert_eq!(c.poll_interval, Duration::from_secs(5));
    assert_eq!(c.scheduler_options["max_compaction_sources"], "8");
    assert_eq!(c.checkpoint_lifetime, Duration::from_secs(900));

    let w = worker_options(&s.workers);
    assert_eq!(w.heartbeat_interval, Duration::from_secs(10));
    assert_eq!(w.max_sst_size, 256 * 1024 * 1024);
    assert!(w.compression_codec.is_none());
}

#[test]
fn disabled_directories_and_overrides_map_through() {
    let s = settings(
        r#"[gc]
        boundary_files = true
        [gc.compacted]
        enabled = false
        [gc.detach]
        enabled = false
        [compaction-workers]
        compression_codec = "lz4""#,
    );
    let gc = gc_options(&s.gc, false);
    assert!(gc.compacted_options.is_none());
    assert!(gc.detach_options.is_none());
    assert!(gc.boundary_files_enabled, "explicit setting wins");
    assert!(matches!(
        worker_options(&s.workers).compression_codec,
        Some(slatedb::config::CompressionCodec::Lz4)
    ));
}
