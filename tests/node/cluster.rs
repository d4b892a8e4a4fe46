//! Several nodes of one fleet in one process, over a `file://` root and
//! real SlateDB databases.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use slatedb::Db;
use sleet::daemon::DatabaseOpener;
use sleet::fleet::database::DatabaseHandle;
use sleet::fleet::root::FleetRoot;
use sleet::model::heartbeat::HeartbeatBody;
use sleet::model::placement::PlacementKey;
use sleet::testing::{CountingStore, Faults, FaultyStore};
use sleet::{CancellationToken, Fleet, NodeOptions, Service, StatusOptions, StatusResponse};
use tokio::task::JoinHandle;

use crate::common::{BUCKET, FAST_IDLE, FileRoot, endpoint, s3_store, test_store, unique_prefix};
use crate::db;

/// Fast node cadences (200ms ticks, 2s timeout) and compaction: a
/// compaction finishes within seconds of its L0 filling.
pub const FAST_NODE_AND_COMPACTION: &str = r#"
[node]
heartbeat_interval = "200ms"
heartbeat_timeout = "2s"
config_poll = "400ms"

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

/// Fast GC: every kind of object collected a second after it is
/// unreferenced (shorter than the docs recommend, for fast tests).
const FAST_GC: &str = r#"
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
"#;

/// Fast node, compaction and GC cadences with fast idle looks:
/// convergence takes seconds.
pub fn fast_fleet() -> String {
    format!("{FAST_NODE_AND_COMPACTION}{FAST_GC}{FAST_IDLE}")
}

/// L0 SSTs have become a sorted run, leaving fewer than the scheduler's
/// `min_compaction_sources` (2) behind.
pub fn compacted(l0: usize, runs: usize) -> bool {
    runs > 0 && l0 < 2
}

/// The node that owns a database's coordinator, by placement.
pub fn coordinator_owner<'a>(url: &str, live: &[&'a str]) -> &'a str {
    owner(url, Service::CompactorCoordinator, live)
}

/// The node that owns one service of a database (the first, for workers),
/// by placement.
pub fn owner<'a>(url: &str, service: Service, live: &[&'a str]) -> &'a str {
    let canonical = sleet::model::registry::canonicalize_database_url(url).unwrap();
    let key = sleet::model::placement::PlacementKey::Service {
        database: &canonical,
        service,
    };
    key.owners(live.iter().copied(), 1)[0]
}

const RUNNABLE: [Service; 3] = [
    Service::Gc,
    Service::CompactorCoordinator,
    Service::CompactionWorkers,
];

/// Polls `check` every 100ms until it returns `Some`, or panics after `limit`.
pub async fn poll_until<T, F, Fut>(limit: Duration, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    poll_until_or(limit, what, check, String::new).await
}

/// Like [`poll_until`], adding `context()` (logs, say) to the panic.
pub async fn poll_until_or<T, F, Fut>(
    limit: Duration,
    what: &str,
    mut check: F,
    context: impl Fn() -> String,
) -> T
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
            "timed out after {limit:?} waiting for {what}\n{}",
            context()
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
    /// The root's directory, for a `file://` cluster.
    files: Option<FileRoot>,
    /// Where the databases live: a directory or an S3 prefix URL.
    data_url: String,
    _data_dir: Option<tempfile::TempDir>,
    /// The fleet as tools see it: status, register.
    pub fleet: Fleet,
    /// The fleet as nodes see it (through injected faults, if any).
    node_fleet: Fleet,
    faults: Option<Arc<Faults>>,
    /// Counts every request nodes send to the databases (S3 clusters).
    counting: Option<Arc<CountingStore>>,
    nodes: BTreeMap<String, RunningNode>,
}

impl Cluster {
    /// A cluster over a `file://` root, with databases in a temporary directory.
    pub fn new(fleet_toml: &str) -> Cluster {
        crate::debug_log::init();
        let files = FileRoot::new();
        files.write("sleet.toml", fleet_toml);
        let fleet = Fleet::open(&files.url()).unwrap();
        let data = tempfile::tempdir().unwrap();
        Cluster {
            data_url: format!("file://{}", data.path().display()),
            _data_dir: Some(data),
            files: Some(files),
            node_fleet: fleet.clone(),
            fleet,
            faults: None,
            counting: None,
            nodes: BTreeMap::new(),
        }
    }

    /// A cluster whose root and databases live under a fresh prefix of the
    /// local S3 server.
    pub async fn on_s3(fleet_toml: &str, endpoint: &str) -> Cluster {
        crate::debug_log::init();
        let prefix = unique_prefix("cluster");
        let root = FleetRoot::from_parts(
            format!("s3://{BUCKET}/{prefix}/root"),
            s3_store(endpoint),
            ObjectPath::from(format!("{prefix}/root")),
        );
        root.store()
            .put(&root.path("sleet.toml"), fleet_toml.to_string().into())
            .await
            .unwrap();
        let fleet = Fleet::from_root(root);
        Cluster {
            data_url: format!("s3://{BUCKET}/{prefix}/data"),
            _data_dir: None,
            files: None,
            node_fleet: fleet.clone(),
            fleet,
            faults: None,
            counting: None,
            nodes: BTreeMap::new(),
        }
    }

    /// Nodes spawned from now on reach the root and every database through
    /// a store that fails or delays requests as `faults` say.
    pub fn with_faults(mut self, faults: Arc<Faults>) -> Cluster {
        let wrapper = faults.clone();
        self.node_fleet = Fleet::from_root(
            self.fleet
                .root()
                .clone()
                .wrap_store(|store| Arc::new(FaultyStore::new(store, wrapper))),
        );
        self.faults = Some(faults);
        self
    }

    /// Nodes spawned from now on reach every database through one store
    /// that counts their requests (an S3 cluster's databases share a bucket).
    pub fn with_counting(mut self, endpoint: &str) -> (Cluster, Arc<CountingStore>) {
        let counting = Arc::new(CountingStore::new(s3_store(endpoint)));
        self.counting = Some(counting.clone());
        (self, counting)
    }

    /// Nodes spawned from now on reach every `file://` database through
    /// one store that counts their requests, each delayed up to `latency`
    /// (none for zero).
    pub fn with_counted_files(mut self, latency: Duration) -> (Cluster, Arc<CountingStore>) {
        let faults = Faults::new();
        faults.set(0, latency);
        let files = Arc::new(object_store::local::LocalFileSystem::new());
        let slowed = Arc::new(FaultyStore::new(files, faults));
        let counting = Arc::new(CountingStore::new(slowed));
        self.counting = Some(counting.clone());
        (self, counting)
    }

    /// The root's directory; only `file://` clusters have one.
    pub fn root(&self) -> &FileRoot {
        self.files.as_ref().expect("a file:// cluster")
    }

    pub fn db_url(&self, name: &str) -> String {
        format!("{}/{name}", self.data_url)
    }

    /// Opens databases the way the test helpers do (explicit S3 options),
    /// through the cluster's faults if it has them.
    fn opener(&self) -> DatabaseOpener {
        let faults = self.faults.clone();
        let counting = self.counting.clone();
        Arc::new(move |url: &str| {
            let (store, path) = test_store(url);
            let store: Arc<dyn ObjectStore> = match &counting {
                Some(counting) => counting.clone(),
                None => store,
            };
            let store: Arc<dyn ObjectStore> = match &faults {
                Some(faults) => Arc::new(FaultyStore::new(store, faults.clone())),
                None => store,
            };
            Ok(DatabaseHandle::from_parts(url.to_string(), store, path))
        })
    }

    pub fn spawn(&mut self, id: &str) {
        self.spawn_with(id, |options| options);
    }

    /// Spawns a node with plugins loaded from `dir`.
    pub fn spawn_with_plugins(&mut self, id: &str, dir: &std::path::Path) {
        let cache = dir.join(".cache");
        self.spawn_with(id, |options| {
            options.with_plugin_dirs([dir.to_path_buf()], Some(cache))
        });
    }

    /// Spawns a node whose options `configure` adjusts.
    pub fn spawn_with(&mut self, id: &str, configure: impl FnOnce(NodeOptions) -> NodeOptions) {
        let token = CancellationToken::new();
        let fleet = self.node_fleet.clone();
        let options = configure(
            NodeOptions::new(id)
                .with_services(RUNNABLE)
                .with_database_opener(self.opener()),
        );
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

    /// The ids of the nodes running now.
    pub fn running_ids(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    pub async fn status(&self) -> StatusResponse {
        self.fleet.status(StatusOptions::default()).await.unwrap()
    }

    /// A node's heartbeat body, if its heartbeat exists.
    pub async fn body(&self, id: &str) -> Option<HeartbeatBody> {
        let root = self.fleet.root();
        let bytes = root
            .get_bytes(&root.path(&format!("nodes/{id}.cgw.json")))
            .await
            .ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Running tasks per service, as the node's own heartbeat reports them.
    pub async fn running(&self, id: &str) -> Option<BTreeMap<Service, u64>> {
        self.tasks(id, false).await
    }

    /// Tasks per service; with `with_backoff`, also those waiting out a
    /// failure (what the node owns).
    pub async fn tasks(&self, id: &str, with_backoff: bool) -> Option<BTreeMap<Service, u64>> {
        let count = |s: &sleet::model::heartbeat::ServiceTasks| {
            s.running + if with_backoff { s.backoff } else { 0 }
        };
        Some(
            self.body(id)
                .await?
                .services
                .iter()
                .map(|s| (s.service, count(s)))
                .collect(),
        )
    }
}

/// Every live node runs exactly the tasks the frozen ranking gives it.
/// Returns the expected per-node, per-service counts when they match.
pub async fn placement_matches(
    cluster: &Cluster,
    live: &[&str],
    dbs: &BTreeMap<String, Vec<Service>>,
    workers: usize,
) -> bool {
    placement_is(cluster, live, dbs, workers, false).await
}

/// Like [`placement_matches`], counting tasks that wait out a failure as
/// owned: after injected faults, ownership converges before health does.
pub async fn ownership_matches(
    cluster: &Cluster,
    live: &[&str],
    dbs: &BTreeMap<String, Vec<Service>>,
    workers: usize,
) -> bool {
    placement_is(cluster, live, dbs, workers, true).await
}

async fn placement_is(
    cluster: &Cluster,
    live: &[&str],
    dbs: &BTreeMap<String, Vec<Service>>,
    workers: usize,
    with_backoff: bool,
) -> bool {
    let expected = expected_tasks(live, dbs, workers);
    for id in live {
        if cluster.tasks(id, with_backoff).await.as_ref() != Some(&expected[*id]) {
            return false;
        }
    }
    true
}

/// The tasks of each service each live node should run, by placement.
pub fn expected_tasks<'a>(
    live: &[&'a str],
    dbs: &BTreeMap<String, Vec<Service>>,
    workers: usize,
) -> BTreeMap<&'a str, BTreeMap<Service, u64>> {
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
    expected
}

/// Databases with data, registered in a cluster: all but the first are
/// seeded and closed; the first keeps a live writer.
pub struct Seeded {
    pub urls: Vec<String>,
    pub canonical: Vec<String>,
    /// The L0 SSTs each database started with, by URL.
    pub initial_ssts: BTreeMap<String, BTreeSet<String>>,
    pub writer: Db,
}

impl Seeded {
    pub async fn new(cluster: &Cluster, count: usize) -> Seeded {
        let urls: Vec<String> = (0..count)
            .map(|i| cluster.db_url(&format!("db{i}")))
            .collect();
        for url in &urls[1..] {
            db::seed(url, 4).await;
        }
        let writer = db::open_writer(&urls[0]).await;
        db::write_rounds(&writer, 0..4).await;
        let mut initial_ssts = BTreeMap::new();
        for url in &urls {
            let ssts = db::objects(url, "compacted").await;
            assert!(ssts.len() >= 4, "{url} starts with several L0 SSTs");
            initial_ssts.insert(url.clone(), ssts);
            assert!(cluster.fleet.register(url).await.unwrap().created);
        }
        let canonical = urls
            .iter()
            .map(|u| sleet::model::registry::canonicalize_database_url(u).unwrap())
            .collect();
        Seeded {
            urls,
            canonical,
            initial_ssts,
            writer,
        }
    }

    /// Every database with every runnable service, by canonical URL.
    pub fn placement(&self) -> BTreeMap<String, Vec<Service>> {
        self.canonical
            .iter()
            .map(|u| (u.clone(), RUNNABLE.to_vec()))
            .collect()
    }

    /// L0 SSTs become sorted runs under the fleet's coordinator and
    /// workers, and GC deletes the superseded ones once nothing pins them.
    pub async fn assert_compacted_and_collected(&self) {
        for url in &self.urls {
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
        for url in &self.urls {
            poll_until(
                Duration::from_secs(60),
                &format!("GC of {url}'s superseded SSTs"),
                || async {
                    let now = db::objects(url, "compacted").await;
                    (self.initial_ssts[url].difference(&now).count() > 0).then_some(())
                },
            )
            .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_compacts_collects_and_fails_over() {
    let _alone = crate::HEAVY.lock().await;
    // Manifests at GC's default `min_age`: one second on file:// is the
    // hazard `config check` warns of (docs/reliability.md, "The
    // `min_age = 1s` finding"), and this test is not about it. SSTs and
    // the WAL go after a second, so collection shows within the test.
    let fleet = fast_fleet().replace(
        "[database.gc.manifest]\ninterval = \"300ms\"\nmin_age = \"1s\"",
        "[database.gc.manifest]\ninterval = \"300ms\"",
    );
    assert_ne!(fleet, fast_fleet());
    let mut cluster = Cluster::new(&fleet);
    let seeded = Seeded::new(&cluster, 6).await;
    let (canonical, writer) = (&seeded.canonical, &seeded.writer);
    let mut dbs = seeded.placement();

    for id in ["n1", "n2", "n3"] {
        cluster.spawn(id);
    }

    // Placement: every (database, service) runs on exactly its ranked owners.
    poll_until(
        Duration::from_secs(30),
        "placement over three nodes",
        || async {
            placement_matches(&cluster, &["n1", "n2", "n3"], &dbs, 2)
                .await
                .then_some(())
        },
    )
    .await;
    let status = cluster.status().await;
    assert_eq!(status.nodes.iter().filter(|n| n.live).count(), 3);
    assert!(status.warnings.is_empty(), "{:?}", status.warnings);

    seeded.assert_compacted_and_collected().await;
    let queues = cluster
        .fleet
        .status(StatusOptions::default().with_compactions(true))
        .await
        .unwrap();
    assert!(
        queues.databases.iter().all(|d| d.queue.is_some()),
        "queue depth read for every database"
    );

    // More writes while the fleet runs; everything reads back.
    db::write_rounds(writer, 4..8).await;
    db::assert_all_keys(writer, 0..8).await;

    // Failover: a crashed node's work moves within the timeout plus a tick.
    cluster.kill("n1");
    let killed_at = Instant::now();
    poll_until(
        Duration::from_secs(15),
        "takeover after a crash",
        || async {
            placement_matches(&cluster, &["n2", "n3"], &dbs, 2)
                .await
                .then_some(())
        },
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
        cluster.body("n2").await.is_none(),
        "heartbeat deleted on a clean stop"
    );
    let stopped_at = Instant::now();
    poll_until(
        Duration::from_secs(10),
        "handoff after a clean stop",
        || async {
            placement_matches(&cluster, &["n3"], &dbs, 2)
                .await
                .then_some(())
        },
    )
    .await;
    assert!(
        stopped_at.elapsed() < Duration::from_secs(2),
        "no timeout wait: {:?}",
        stopped_at.elapsed()
    );

    // Config edits converge within config_poll plus a tick.
    cluster.spawn("n1");
    cluster.root().write(
        &format!("dbs/{}", sleet::model::registry::file_name(&canonical[1])),
        "services = [\"gc\"]\n",
    );
    std::fs::remove_file(cluster.root().path(&format!(
        "dbs/{}",
        sleet::model::registry::file_name(&canonical[2])
    )))
    .unwrap();
    dbs.insert(canonical[1].clone(), vec![Service::Gc]);
    dbs.remove(&canonical[2]);
    poll_until(
        Duration::from_secs(15),
        "config edits to converge",
        || async {
            placement_matches(&cluster, &["n1", "n3"], &dbs, 2)
                .await
                .then_some(())
        },
    )
    .await;

    seeded.writer.close().await.unwrap();
    for id in ["n1", "n3"] {
        cluster.stop(id).await;
    }
    assert!(
        cluster.status().await.nodes.is_empty(),
        "every heartbeat is gone"
    );
}

/// A registry that takes longer to list than a tick (100,000 databases
/// are 100 LIST pages on S3) still reaches a running node, and the node
/// keeps its heartbeat on time meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_slower_to_list_than_a_tick_still_reaches_the_node() {
    let faults = Faults::new();
    let mut cluster = Cluster::new(&fast_fleet()).with_faults(faults.clone());
    let registry = cluster.root().path("dbs");
    let registry = registry.to_str().unwrap().trim_start_matches('/');
    // Every LIST (and GET) of dbs/ takes 700 ms: three and a half ticks.
    faults.slow_down(registry, Duration::from_millis(700));
    cluster.spawn("solo");
    poll_until(Duration::from_secs(10), "the first heartbeat", || async {
        cluster.body("solo").await
    })
    .await;
    let later = cluster.db_url("registered-later");
    cluster.fleet.register(&later).await.unwrap();
    let heartbeat = cluster.root().path("nodes/solo.cgw.json");
    let oldest = std::sync::Mutex::new(Duration::ZERO);
    poll_until(
        Duration::from_secs(20),
        "the node to own the database registered while it runs",
        || async {
            let age = std::fs::metadata(&heartbeat)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| m.elapsed().ok())
                .unwrap_or_default();
            {
                let mut oldest = oldest.lock().unwrap();
                *oldest = (*oldest).max(age);
            }
            let owned: u64 = cluster.tasks("solo", true).await?.values().sum();
            (owned == 3).then_some(())
        },
    )
    .await;
    let oldest = *oldest.lock().unwrap();
    assert!(
        oldest < Duration::from_secs(1),
        "heartbeats every 200 ms: one was {oldest:?} old"
    );
    cluster.stop("solo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_while_running_keeps_the_node_on_its_last_good_view() {
    let _alone = crate::HEAVY.lock().await;
    let mut cluster = Cluster::new(&fast_fleet());
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
        || async { cluster.body("solo").await.filter(|b| b.failing.len() == 3) },
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
    let before = cluster.running("solo").await.unwrap();
    cluster
        .root()
        .write("sleet.toml", "[node\nheartbeat_interval = ");
    let good_file = format!(
        "dbs/{}",
        sleet::model::registry::file_name(
            &sleet::model::registry::canonicalize_database_url(&good).unwrap()
        )
    );
    cluster.root().write(&good_file, "services = 7\n");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let heartbeat = cluster.root().path("nodes/solo.cgw.json");
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
    assert_eq!(
        cluster.running("solo").await.unwrap(),
        before,
        "tasks unchanged"
    );
    let warnings = cluster.status().await.warnings;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("sleet.toml: failed to parse config")),
        "{warnings:?}"
    );
    cluster.stop("solo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_on_s3_compacts_and_collects() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let mut cluster = Cluster::on_s3(&fast_fleet(), &endpoint).await;
    let seeded = Seeded::new(&cluster, 3).await;
    let dbs = seeded.placement();
    for id in ["s1", "s2"] {
        cluster.spawn(id);
    }
    poll_until(
        Duration::from_secs(30),
        "placement over two nodes on S3",
        || async {
            placement_matches(&cluster, &["s1", "s2"], &dbs, 2)
                .await
                .then_some(())
        },
    )
    .await;
    seeded.assert_compacted_and_collected().await;
    db::write_rounds(&seeded.writer, 4..6).await;
    db::assert_all_keys(&seeded.writer, 0..6).await;
    for url in &seeded.urls[1..] {
        db::assert_reader_sees(url, 0..4).await;
    }
    seeded.writer.close().await.unwrap();
    for id in ["s1", "s2"] {
        cluster.stop(id).await;
    }
    assert!(
        cluster.status().await.nodes.is_empty(),
        "heartbeats deleted"
    );
}
