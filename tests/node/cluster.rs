//! Several nodes of one fleet in one process, over a `file://` root and
//! real SlateDB databases.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use sleet::heartbeat::HeartbeatBody;
use sleet::placement::PlacementKey;
use sleet::{CancellationToken, Fleet, NodeOptions, Service, StatusOptions, StatusResponse};
use tokio::task::JoinHandle;

use crate::common::FileRoot;
use crate::db;

/// Fast cadences so convergence takes seconds: 200ms ticks, 2s timeout.
const FAST_FLEET: &str = r#"
[node]
heartbeat_interval = "200ms"
heartbeat_timeout = "2s"
config_poll = "400ms"

[database.gc.manifest]
interval = "300ms"
min_age = "1s"
[database.gc.wal]
interval = "300ms"
min_age = "1s"
[database.gc.compacted]
interval = "300ms"
min_age = "1s"
[database.gc.compactions]
interval = "300ms"
min_age = "1s"

[database.compactor-coordinator]
poll_interval = "100ms"
commit_compacted_interval = "100ms"
checkpoint_lifetime = "1s"
[database.compactor-coordinator.scheduler]
min_compaction_sources = 2

[database.compaction-workers]
count = 2
compactions_poll_interval = "100ms"
heartbeat_interval = "500ms"
min_filter_keys = 0
"#;

/// L0 SSTs have become a sorted run, leaving fewer than the scheduler's
/// `min_compaction_sources` (2) behind.
fn compacted(l0: usize, runs: usize) -> bool {
    runs > 0 && l0 < 2
}

const RUNNABLE: [Service; 3] = [
    Service::Gc,
    Service::CompactorCoordinator,
    Service::CompactionWorkers,
];

/// Polls `check` every 100ms until it returns `Some`, or panics after `limit`.
pub async fn poll_until<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct RunningNode {
    token: CancellationToken,
    handle: JoinHandle<Result<(), sleet::Error>>,
}

/// A fleet root, its databases, and nodes running in this process.
pub struct Cluster {
    pub root: FileRoot,
    pub data: tempfile::TempDir,
    pub fleet: Fleet,
    nodes: BTreeMap<String, RunningNode>,
}

/// Logs to the test's captured output, filtered by `RUST_LOG` (default: warnings).
fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

impl Cluster {
    pub fn new(fleet_toml: &str) -> Cluster {
        init_logs();
        let root = FileRoot::new();
        root.write("sleet.toml", fleet_toml);
        let fleet = Fleet::open(&root.url()).unwrap();
        Cluster {
            root,
            data: tempfile::tempdir().unwrap(),
            fleet,
            nodes: BTreeMap::new(),
        }
    }

    pub fn db_url(&self, name: &str) -> String {
        format!("file://{}/{name}", self.data.path().display())
    }

    pub fn spawn(&mut self, id: &str) {
        let token = CancellationToken::new();
        let fleet = self.fleet.clone();
        let options = NodeOptions::new(id).with_services(RUNNABLE);
        let child = token.clone();
        let handle = tokio::spawn(async move { fleet.run_node(options, child).await });
        self.nodes
            .insert(id.to_string(), RunningNode { token, handle });
    }

    /// Kills a node as a crash would: its heartbeat stays behind.
    pub fn kill(&mut self, id: &str) {
        self.nodes
            .remove(id)
            .expect("a running node")
            .handle
            .abort();
    }

    /// Stops a node cleanly and waits for it.
    pub async fn stop(&mut self, id: &str) {
        let node = self.nodes.remove(id).expect("a running node");
        node.token.cancel();
        node.handle
            .await
            .expect("the node task")
            .expect("a clean stop");
    }

    pub async fn status(&self) -> StatusResponse {
        self.fleet.status(StatusOptions::default()).await.unwrap()
    }

    /// A node's heartbeat body, if its heartbeat exists.
    pub fn body(&self, id: &str) -> Option<HeartbeatBody> {
        let path = self.root.path(&format!("nodes/{id}.cgw.json"));
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    /// Running tasks per service, as the node's own heartbeat reports them.
    pub fn running(&self, id: &str) -> Option<BTreeMap<Service, u64>> {
        Some(
            self.body(id)?
                .services
                .iter()
                .map(|s| (s.service, s.running))
                .collect(),
        )
    }
}

/// Every live node runs exactly the tasks the frozen ranking gives it.
/// Returns the expected per-node, per-service counts when they match.
fn placement_matches(
    cluster: &Cluster,
    live: &[&str],
    dbs: &BTreeMap<String, Vec<Service>>,
    workers: usize,
) -> bool {
    let mut expected: BTreeMap<&str, BTreeMap<Service, u64>> = live
        .iter()
        .map(|id| (*id, RUNNABLE.iter().map(|s| (*s, 0)).collect()))
        .collect();
    for (url, services) in dbs {
        for &service in services {
            let count = if service == Service::CompactionWorkers {
                workers
            } else {
                1
            };
            let key = PlacementKey::Service {
                database: url,
                service,
            };
            for owner in key.owners(live.iter().copied(), count) {
                *expected.get_mut(owner).unwrap().get_mut(&service).unwrap() += 1;
            }
        }
    }
    live.iter()
        .all(|id| cluster.running(id).as_ref() == Some(&expected[id]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_compacts_collects_and_fails_over() {
    let mut cluster = Cluster::new(FAST_FLEET);
    let names: Vec<String> = (0..6).map(|i| format!("db{i}")).collect();
    let urls: Vec<String> = names.iter().map(|n| cluster.db_url(n)).collect();
    for url in &urls[1..] {
        db::seed(url, 4).await;
    }
    // db0 keeps a live writer for the whole test.
    let writer = db::open_writer(&urls[0]).await;
    db::write_rounds(&writer, 0..4).await;
    let seeded: BTreeMap<String, BTreeSet<String>> = names
        .iter()
        .map(|n| {
            (
                n.clone(),
                db::files(&cluster.data.path().join(n), "compacted")
                    .into_iter()
                    .collect(),
            )
        })
        .collect();
    assert!(
        seeded.values().all(|s| s.len() >= 4),
        "each database starts with several L0 SSTs"
    );
    for url in &urls {
        assert!(cluster.fleet.register(url).await.unwrap().created);
    }
    let canonical: Vec<String> = urls
        .iter()
        .map(|u| sleet::registry::canonicalize_database_url(u).unwrap())
        .collect();
    let mut dbs: BTreeMap<String, Vec<Service>> = canonical
        .iter()
        .map(|u| (u.clone(), RUNNABLE.to_vec()))
        .collect();

    for id in ["n1", "n2", "n3"] {
        cluster.spawn(id);
    }

    // Placement: every (database, service) runs on exactly its ranked owners.
    poll_until(
        Duration::from_secs(30),
        "placement over three nodes",
        || async { placement_matches(&cluster, &["n1", "n2", "n3"], &dbs, 2).then_some(()) },
    )
    .await;
    let status = cluster.status().await;
    assert_eq!(status.nodes.iter().filter(|n| n.live).count(), 3);
    assert!(status.warnings.is_empty(), "{:?}", status.warnings);

    // Compaction: L0 SSTs become sorted runs under our coordinator and workers.
    for url in &urls {
        poll_until(
            Duration::from_secs(60),
            &format!("{url} to compact"),
            || async {
                let (l0, runs) = db::shape(url).await;
                compacted(l0, runs).then_some(())
            },
        )
        .await;
    }
    let queues = cluster
        .fleet
        .status(StatusOptions::default().with_compactions(true))
        .await
        .unwrap();
    assert!(
        queues.databases.iter().all(|d| d.queue.is_some()),
        "queue depth read for every database"
    );

    // GC: the superseded L0 SSTs are deleted once no checkpoint pins them.
    for name in &names {
        let dir = cluster.data.path().join(name);
        poll_until(
            Duration::from_secs(60),
            &format!("GC of {name}'s superseded SSTs"),
            || async {
                let now: BTreeSet<String> = db::files(&dir, "compacted").into_iter().collect();
                (seeded[name].difference(&now).count() > 0).then_some(())
            },
        )
        .await;
    }

    // More writes while the fleet runs; everything reads back.
    db::write_rounds(&writer, 4..8).await;
    db::assert_all_keys(&writer, 0..8).await;

    // Failover: a crashed node's work moves within the timeout plus a tick.
    cluster.kill("n1");
    let killed_at = Instant::now();
    poll_until(
        Duration::from_secs(15),
        "takeover after a crash",
        || async { placement_matches(&cluster, &["n2", "n3"], &dbs, 2).then_some(()) },
    )
    .await;
    let takeover = killed_at.elapsed();
    assert!(
        takeover >= Duration::from_millis(1500),
        "the dead heartbeat counts until it times out ({takeover:?})"
    );
    assert!(takeover < Duration::from_secs(8), "took {takeover:?}");

    // A clean stop deletes the heartbeat and hands off at the next tick.
    cluster.stop("n2").await;
    assert!(
        cluster.body("n2").is_none(),
        "heartbeat deleted on a clean stop"
    );
    let stopped_at = Instant::now();
    poll_until(
        Duration::from_secs(10),
        "handoff after a clean stop",
        || async { placement_matches(&cluster, &["n3"], &dbs, 2).then_some(()) },
    )
    .await;
    assert!(
        stopped_at.elapsed() < Duration::from_secs(2),
        "no timeout wait: {:?}",
        stopped_at.elapsed()
    );

    // Config edits converge within config_poll plus a tick.
    cluster.spawn("n1");
    cluster.root.write(
        &format!("dbs/{}", sleet::registry::file_name(&canonical[1])),
        "services = [\"gc\"]\n",
    );
    std::fs::remove_file(cluster.root.path(&format!(
        "dbs/{}",
        sleet::registry::file_name(&canonical[2])
    )))
    .unwrap();
    dbs.insert(canonical[1].clone(), vec![Service::Gc]);
    dbs.remove(&canonical[2]);
    poll_until(
        Duration::from_secs(15),
        "config edits to converge",
        || async { placement_matches(&cluster, &["n1", "n3"], &dbs, 2).then_some(()) },
    )
    .await;

    writer.close().await.unwrap();
    for id in ["n1", "n3"] {
        cluster.stop(id).await;
    }
    assert!(
        cluster.status().await.nodes.is_empty(),
        "every heartbeat is gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_while_running_keeps_the_node_on_its_last_good_view() {
    let mut cluster = Cluster::new(FAST_FLEET);
    let good = cluster.db_url("good");
    db::seed(&good, 3).await;
    let missing = cluster.db_url("never-created");
    cluster.fleet.register(&good).await.unwrap();
    cluster.fleet.register(&missing).await.unwrap();
    cluster.spawn("solo");

    // The database that does not exist backs off; the good one compacts.
    let body = poll_until(
        Duration::from_secs(30),
        "the missing database to back off",
        || async { cluster.body("solo").filter(|b| b.failing.len() == 3) },
    )
    .await;
    assert!(
        body.failing
            .iter()
            .all(|f| f.error.contains("is not a SlateDB database (no manifest)")),
        "{body:#?}"
    );
    poll_until(
        Duration::from_secs(60),
        "the good database to compact",
        || async {
            let (l0, runs) = db::shape(&good).await;
            compacted(l0, runs).then_some(())
        },
    )
    .await;
    let status = cluster.status().await;
    assert!(
        status
            .warnings
            .iter()
            .any(|w| w.starts_with("gc of ") && w.contains("never-created is failing on solo")),
        "{:?}",
        status.warnings
    );

    // A corrupted sleet.toml and registry file: the node keeps its last good view.
    let before = cluster.running("solo").unwrap();
    cluster
        .root
        .write("sleet.toml", "[node\nheartbeat_interval = ");
    let good_file = format!(
        "dbs/{}",
        sleet::registry::file_name(&sleet::registry::canonicalize_database_url(&good).unwrap())
    );
    cluster.root.write(&good_file, "services = 7\n");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let heartbeat = cluster.root.path("nodes/solo.cgw.json");
    let age = std::fs::metadata(&heartbeat)
        .unwrap()
        .modified()
        .unwrap()
        .elapsed()
        .unwrap();
    assert!(
        age < Duration::from_secs(1),
        "still ticking at 200ms: heartbeat {age:?} old"
    );
    assert_eq!(cluster.running("solo").unwrap(), before, "tasks unchanged");
    let warnings = cluster.status().await.warnings;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("sleet.toml: failed to parse config")),
        "{warnings:?}"
    );
    cluster.stop("solo").await;
}
