//! Double runs with data checks on the local S3 server: a compaction
//! worker killed (SIGKILL) while it holds a claimed job, whose job another
//! worker takes over once the coordinator reclaims it.

use std::time::Duration;

use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use slatedb::admin::AdminBuilder;
use slatedb::compactor::CompactionStatus;

use crate::cluster::poll_until;
use crate::common::{BUCKET, endpoint, s3_store, test_store, unique_prefix};
use crate::db;
use crate::proxy::FaultProxy;
use crate::s3_chaos::{Node, cli};

/// A coordinator that reclaims a silent worker's job after 3 s; workers
/// that claim quickly and heartbeat every 500 ms.
const FLEET: &str = r#"
[node]
heartbeat_interval = "300ms"
heartbeat_timeout = "3s"
config_poll = "500ms"

[database.compactor-coordinator]
poll_interval = "200ms"
commit_compacted_interval = "200ms"
worker_heartbeat_timeout = "3s"
[database.compactor-coordinator.scheduler]
min_compaction_sources = 2

[database.compaction-workers]
compactions_poll_interval = "200ms"
heartbeat_interval = "500ms"
min_filter_keys = 0
"#;

/// The ids of the jobs in `url`'s `.compactions` with `status`.
async fn jobs(url: &str, status: CompactionStatus) -> Vec<String> {
    let (store, path) = test_store(url);
    let Ok(Some(compactions)) = AdminBuilder::new(path, store)
        .build()
        .read_compactions(None)
        .await
    else {
        return Vec::new();
    };
    compactions
        .recent_compactions()
        .filter(|c| c.status() == status)
        .map(|c| c.id().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_holding_a_job_is_taken_over() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let prefix = unique_prefix("takeover");
    let root = format!("s3://{BUCKET}/{prefix}/root");
    s3_store(&endpoint)
        .put(
            &ObjectPath::from(format!("{prefix}/root/sleet.toml")),
            FLEET.to_string().into(),
        )
        .await
        .unwrap();
    let url = format!("s3://{BUCKET}/{prefix}/data/db");
    let writer = db::open_writer(&url).await;
    db::write_rounds(&writer, 0..8).await;
    let registered = cli(&["register", &root, &url], &endpoint);
    assert!(registered.status.success());

    let logs = tempfile::tempdir().unwrap();
    let node = |id: &str, services: &'static str, proxy: FaultProxy| Node {
        id: id.to_string(),
        proxy,
        services: Some(services),
        child: None,
        log: logs.path().join(format!("{id}.log")),
    };
    let mut coordinator = node(
        "coordinator",
        "compactor-coordinator",
        FaultProxy::start(&endpoint, 1).await,
    );
    // The first worker's store answers slowly, so its job is still
    // running when it dies.
    let slow = FaultProxy::start(&endpoint, 2).await;
    slow.faults.set(0, 0, Duration::from_millis(1500));
    let mut doomed = node("doomed", "compaction-workers", slow);
    coordinator.spawn(&root);
    doomed.spawn(&root);

    let held = poll_until(
        Duration::from_secs(60),
        "a job running on the doomed worker",
        || async {
            let running = jobs(&url, CompactionStatus::Running).await;
            (!running.is_empty()).then_some(running)
        },
    )
    .await;
    doomed.kill();
    let (l0_before, runs_before) = db::shape(&url).await;
    eprintln!("killed the worker holding {held:?} (L0 {l0_before}, runs {runs_before})");

    let mut survivor = node(
        "survivor",
        "compaction-workers",
        FaultProxy::start(&endpoint, 3).await,
    );
    survivor.spawn(&root);
    db::write_rounds(&writer, 8..12).await;
    poll_until(Duration::from_secs(60), "the survivor compacts", || async {
        let still_running = jobs(&url, CompactionStatus::Running).await;
        let (l0, runs) = db::shape(&url).await;
        let done = held.iter().all(|id| !still_running.contains(id)) && runs > 0 && l0 < 2;
        done.then_some(())
    })
    .await;
    assert!(coordinator.running() && survivor.running());
    db::assert_all_keys(&writer, 0..12).await;
    db::assert_reader_sees(&url, 0..12).await;
    writer.close().await.unwrap();
    let survivor_log = std::fs::read_to_string(&survivor.log).unwrap_or_default();
    assert!(
        !survivor_log.contains("ERROR"),
        "the survivor ran clean:\n{}",
        survivor.tail()
    );
}
