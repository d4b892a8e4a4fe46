//! A writer that runs SlateDB's embedded compactor and GC (the default
//! settings) beside a fleet: the fleet stands down instead of fencing it,
//! and takes over once the writer reopens without them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use slatedb::Db;
use slatedb::admin::AdminBuilder;
use slatedb::config::Settings;
use sleet::config::DatabaseConfig;
use sleet::fleet::database::DatabaseHandle;
use sleet::fleet::root::FleetRoot;
use sleet::services::outside_compactor::records::EpochRecords;
use sleet::services::{ServiceError, ServiceSpec, run_service};
use tokio_util::sync::CancellationToken;

use crate::cluster::poll_until;
use crate::common::{
    BUCKET, FAST_IDLE, endpoint, json, s3_env, s3_store, sleet_env, test_store, unique_prefix,
};
use crate::db;

/// Fast cadences; the fleet looks again every second while it stands down.
const FLEET: &str = r#"
[node]
heartbeat_interval = "300ms"
heartbeat_timeout = "3s"
config_poll = "500ms"

[database.compactor-coordinator]
poll_interval = "200ms"
commit_compacted_interval = "200ms"
[database.compactor-coordinator.scheduler]
min_compaction_sources = 2

[database.compaction-workers]
compactions_poll_interval = "200ms"
heartbeat_interval = "1s"
min_filter_keys = 0

[database.outside-compactor]
recheck = "1s"

"#;

/// SlateDB's defaults for the writer's own compactor and GC, with the
/// tests' small SSTs so L0 fills quickly.
fn writer_with_own_compactor() -> Settings {
    let defaults = Settings::default();
    assert!(defaults.compactor_options.is_some() && defaults.garbage_collector_options.is_some());
    Settings {
        compactor_options: defaults.compactor_options,
        garbage_collector_options: defaults.garbage_collector_options,
        ..db::tiny_settings()
    }
}

async fn open(url: &str, settings: Settings) -> Db {
    let (store, path) = test_store(url);
    Db::builder(path, store)
        .with_settings(settings)
        .build()
        .await
        .expect("a SlateDB writer")
}

/// Real `sleet run` processes on the local S3 server; killed on drop.
struct Nodes {
    children: Vec<(String, Child)>,
    logs: tempfile::TempDir,
}

impl Nodes {
    fn start(root: &str, endpoint: &str, ids: &[&str]) -> Nodes {
        let logs = tempfile::tempdir().unwrap();
        let children = ids
            .iter()
            .map(|id| {
                let log = std::fs::File::create(logs.path().join(format!("{id}.log"))).unwrap();
                let child = Command::new(env!("CARGO_BIN_EXE_sleet"))
                    .args(["run", root, "--node-id", id])
                    .envs(s3_env(endpoint))
                    .env("RUST_LOG", "info")
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .expect("sleet run starts");
                (id.to_string(), child)
            })
            .collect();
        Nodes { children, logs }
    }

    /// Every node's log, for a failing assertion.
    fn logs(&self) -> String {
        self.children
            .iter()
            .map(|(id, _)| {
                let text = std::fs::read_to_string(self.logs.path().join(format!("{id}.log")))
                    .unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                format!(
                    "--- {id} (last lines) ---\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Polls `check` until it returns `Some`; on timeout, fails with the
    /// nodes' logs.
    async fn wait<T, F, Fut>(&self, limit: Duration, what: &str, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        crate::cluster::poll_until_or(limit, what, check, || self.logs()).await
    }

    /// SIGTERM each node; each must exit 0.
    fn stop(mut self) {
        for (id, child) in &mut self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let status = child.wait().unwrap();
            assert!(status.success(), "{id} exited with {status:?}");
        }
        self.children.clear();
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn fleet_status(root: &str, endpoint: &str) -> serde_json::Value {
    let env = s3_env(endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = sleet_env(&["status", root, "--format", "json"], &env);
    assert!(
        out.status.success(),
        "status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&String::from_utf8_lossy(&out.stdout))
}

async fn compactor_epoch(url: &str) -> (u64, u64) {
    let (store, path) = test_store(url);
    let manifest = AdminBuilder::new(path, store)
        .build()
        .read_manifest(None)
        .await
        .unwrap()
        .unwrap();
    (manifest.writer_epoch(), manifest.compactor_epoch())
}

/// Writes one round of keys and flushes it into its own L0 SST; a fenced
/// writer fails here.
async fn write_round(db: &Db, round: usize) {
    for i in 0..32 {
        db.put(db::key(round, i), db::value(round, i))
            .await
            .unwrap_or_else(|e| panic!("the writer failed on round {round}: {e}"));
    }
    db.flush_with_options(slatedb::config::FlushOptions {
        flush_type: slatedb::config::FlushType::MemTable,
    })
    .await
    .unwrap_or_else(|e| panic!("the writer failed to flush round {round}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_writer_running_its_own_compactor_is_never_fenced() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let prefix = unique_prefix("outside");
    let root = format!("s3://{BUCKET}/{prefix}/root");
    let url = format!("s3://{BUCKET}/{prefix}/data/db");
    s3_store(&endpoint)
        .put(
            &ObjectPath::from(format!("{prefix}/root/sleet.toml")),
            format!("{FLEET}{FAST_IDLE}").into(),
        )
        .await
        .unwrap();
    let env = s3_env(&endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    // The fleet compacts a database whose writer runs no compactor.
    db::seed(&url, 4).await;
    let registered = json(&String::from_utf8_lossy(
        &sleet_env(&["register", &root, &url, "--format", "json"], &env).stdout,
    ));
    assert_eq!(registered["created"], true);
    assert!(registered.get("warnings").is_none(), "{registered}");
    let nodes = Nodes::start(&root, &endpoint, &["o1", "o2", "o3"]);
    nodes
        .wait(
            Duration::from_secs(60),
            "the fleet to compact L0",
            || async {
                let (l0, runs) = db::shape(&url).await;
                (runs > 0 && l0 < 2).then_some(())
            },
        )
        .await;
    let (_, fleet_epoch) = compactor_epoch(&url).await;

    // An application opens its writer with SlateDB's defaults: its compactor
    // fences the fleet's, and the fleet must stand down, not fence it back.
    let mut writer = open(&url, writer_with_own_compactor()).await;
    let started = Instant::now();
    let mut round = 4;
    let mut reopened = false;
    let mut seen_standing_down = false;
    while started.elapsed() < Duration::from_secs(62) {
        write_round(&writer, round).await;
        round += 1;
        if !reopened && started.elapsed() > Duration::from_secs(30) {
            // The application restarts, still with the defaults.
            writer.close().await.expect("close");
            writer = open(&url, writer_with_own_compactor()).await;
            reopened = true;
        }
        if round % 10 == 0 {
            let status = fleet_status(&root, &endpoint);
            seen_standing_down |= status["databases"][0].get("outside_compactor").is_some();
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(reopened);
    let (own_writer_epoch, own_epoch) = compactor_epoch(&url).await;
    assert!(
        own_epoch >= fleet_epoch + 2,
        "the writer's compactor took new epochs twice"
    );
    let records = EpochRecords::new(
        FleetRoot::from_parts(
            root.clone(),
            s3_store(&endpoint),
            ObjectPath::from(format!("{prefix}/root")),
        ),
        "test",
    );
    assert!(
        !records
            .fleet_took(&url, own_epoch, own_writer_epoch)
            .await
            .unwrap(),
        "the fleet never took the epoch back\n{}",
        nodes.logs()
    );
    db::assert_all_keys(&writer, 0..round).await;
    db::assert_reader_sees(&url, 0..round).await;

    // Status and register name the database and the fix.
    let status = fleet_status(&root, &endpoint);
    let outside = &status["databases"][0]["outside_compactor"];
    assert!(
        seen_standing_down,
        "status showed the stand-down while the writer ran"
    );
    assert_eq!(
        outside["compactor_epoch"],
        own_epoch,
        "{status:#}\n{}",
        nodes.logs()
    );
    assert_eq!(outside["evidence"], "active", "{status:#}");
    assert!(
        outside["fix"]
            .as_str()
            .unwrap()
            .contains("compactor_options: None")
    );
    assert!(
        status["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("runs its own compactor")),
        "{status:#}"
    );
    let again = json(&String::from_utf8_lossy(
        &sleet_env(&["register", &root, &url, "--format", "json"], &env).stdout,
    ));
    assert!(
        again["warnings"][0]
            .as_str()
            .unwrap()
            .contains("runs its own compactor"),
        "{again}"
    );

    // The application moves to the fleet: it reopens without its own
    // compactor and GC, and the fleet takes over within a few looks.
    writer.close().await.expect("close");
    let writer = open(&url, db::tiny_settings()).await;
    let reopened_at = Instant::now();
    let first_new = round;
    for _ in 0..4 {
        write_round(&writer, round).await;
        round += 1;
    }
    nodes
        .wait(
            Duration::from_secs(40),
            "the fleet to take over and compact L0",
            || async {
                let (l0, _) = db::shape(&url).await;
                let (writer_epoch, epoch) = compactor_epoch(&url).await;
                let ours = records.fleet_took(&url, epoch, writer_epoch).await.unwrap();
                (ours && epoch > own_epoch && l0 < 2).then_some(())
            },
        )
        .await;
    eprintln!(
        "outside compactor: {} keys written beside the writer's own compactor over {:?}; \
         the fleet compacted {:?} after the writer reopened without it",
        round * 32,
        Duration::from_secs(62),
        reopened_at.elapsed()
    );
    nodes
        .wait(
            Duration::from_secs(20),
            "status to clear the stand-down",
            || async {
                fleet_status(&root, &endpoint)["databases"][0]
                    .get("outside_compactor")
                    .is_none()
                    .then_some(())
            },
        )
        .await;
    db::assert_all_keys(&writer, 0..round).await;
    db::assert_reader_sees(&url, first_new..round).await;
    writer.close().await.unwrap();
    nodes.stop();
}

/// Two fleet coordinators on one database (placement views that briefly
/// disagree): one fences the other, the fenced one sees the epoch is the
/// fleet's and may run again, and nothing stands down.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fence_by_another_fleet_node_is_not_an_outside_compactor() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let prefix = unique_prefix("double");
    let root = FleetRoot::from_parts(
        format!("s3://{BUCKET}/{prefix}/root"),
        s3_store(&endpoint),
        ObjectPath::from(format!("{prefix}/root")),
    );
    let url = format!("s3://{BUCKET}/{prefix}/data/db");
    db::seed(&url, 3).await;
    let settings = DatabaseConfig::default().resolve();
    let spec = ServiceSpec::Coordinator(
        settings.coordinator.clone(),
        settings.outside_compactor,
        settings.idle.for_coordinator(settings.gc.manifest.min_age),
        Default::default(),
    );
    let handle = || {
        let (store, path) = test_store(&url);
        DatabaseHandle::from_parts(url.clone(), store, path)
    };
    let start = |node: &str| {
        let records = EpochRecords::new(root.clone(), node);
        let wakes = sleet::services::idle::wakes::WakeSignals::new(root.clone(), node);
        let db = handle();
        let spec = spec.clone();
        let token = CancellationToken::new();
        let run_token = token.clone();
        let task = tokio::spawn(async move {
            run_service(
                &db,
                &spec,
                None,
                &records,
                &wakes,
                &|| {},
                noop_recorder(),
                None,
                run_token,
            )
            .await
        });
        (token, task)
    };
    let records = EpochRecords::new(root.clone(), "checker");
    let recorded = || async {
        let (writer_epoch, epoch) = compactor_epoch(&url).await;
        records
            .fleet_took(&url, epoch, writer_epoch)
            .await
            .unwrap()
            .then_some(epoch)
    };
    let (token_a, a) = start("a");
    let epoch_a = poll_until(Duration::from_secs(20), "a's epoch recorded", recorded).await;
    let (token_b, b) = start("b");
    let a_result = tokio::time::timeout(Duration::from_secs(30), a)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&a_result, Err(e) if e.is_fenced()),
        "a is fenced by b: {a_result:?}"
    );
    let epoch_b = poll_until(Duration::from_secs(20), "b's epoch recorded", recorded).await;
    assert!(epoch_b > epoch_a);
    // The fenced node looks again: the epoch is the fleet's, so it may run.
    let look = handle()
        .may_compact(&records, &settings.outside_compactor)
        .await;
    assert!(
        matches!(look, Ok(Some(c)) if c.expected == epoch_b),
        "{look:?}"
    );
    drop(token_a);
    let (token_a, a) = start("a");
    let b_result = tokio::time::timeout(Duration::from_secs(30), b)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(&b_result, Err(e) if e.is_fenced()), "{b_result:?}");
    assert!(
        !matches!(b_result, Err(ServiceError::OutsideCompactor { .. })),
        "nothing stands down"
    );
    poll_until(
        Duration::from_secs(20),
        "a holds a newer recorded epoch",
        || async { recorded().await.filter(|e| *e > epoch_b) },
    )
    .await;
    token_a.cancel();
    token_b.cancel();
    assert!(a.await.unwrap().is_ok(), "a stops cleanly when cancelled");
    db::assert_reader_sees(&url, 0..3).await;
}

/// The fleet's GC beside a writer's embedded GC, both collecting every
/// few hundred milliseconds with a one-second `min_age` on S3 (boundary
/// files on), while the fleet compacts and the writer writes: every key
/// reads back, and garbage does get collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gcs_on_one_database_lose_nothing() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let mut cluster =
        crate::cluster::Cluster::on_s3(&crate::cluster::fast_fleet(), &endpoint).await;
    let url = cluster.db_url("twogc");
    let fast = slatedb::config::GarbageCollectorDirectoryOptions {
        interval: Some(Duration::from_millis(300)),
        min_age: Duration::from_secs(1),
        dry_run: false,
    };
    let embedded_gc = slatedb::config::GarbageCollectorOptions {
        manifest_options: Some(fast),
        wal_options: Some(fast),
        compacted_options: Some(fast),
        compactions_options: Some(fast),
        ..Default::default()
    };
    let writer = open(
        &url,
        Settings {
            garbage_collector_options: Some(embedded_gc),
            ..db::tiny_settings()
        },
    )
    .await;
    write_round(&writer, 0).await;
    cluster.fleet.register(&url).await.unwrap();
    cluster.spawn("g1");
    let started = Instant::now();
    let mut round = 1;
    while started.elapsed() < Duration::from_secs(10) {
        write_round(&writer, round).await;
        round += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db::assert_all_keys(&writer, 0..round).await;
    db::assert_reader_sees(&url, 0..round).await;
    let (_, compacted) = db::shape(&url).await;
    assert!(compacted > 0, "the fleet compacted beside the embedded GC");
    let manifests = db::objects(&url, "manifest").await;
    let newest: u64 = manifests
        .iter()
        .filter_map(|m| m.strip_suffix(".manifest")?.parse().ok())
        .max()
        .unwrap();
    assert!(
        (manifests.len() as u64) < newest / 2,
        "old manifests were collected: {} left of {newest}",
        manifests.len()
    );
    writer.close().await.unwrap();
    cluster.stop("g1").await;
}

fn noop_recorder() -> std::sync::Arc<dyn slatedb_common::metrics::MetricsRecorder> {
    std::sync::Arc::new(slatedb_common::metrics::NoopMetricsRecorder::new())
}
