//! Fleet benchmarks: placement cost and the idle request cost of a node.
//!
//! `cargo bench --bench fleet` runs both; `cargo bench --bench fleet --
//! placement` or `-- idle` runs one. `SLEET_BENCH_IDLE_SECS` sets the idle
//! measurement window (default 120 s, after a 20 s warm-up). Figures go to
//! stdout; docs/performance.md records a run.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::path::Path;
use sleet::config::DatabaseConfig;
use sleet::daemon::{DatabaseOpener, owned_tasks};
use sleet::database::DatabaseHandle;
use sleet::placement::{PlacementHash, PlacementKey};
use sleet::root::{FleetView, NodeSighting};
use sleet::testing::{CountingStore, Op};
use sleet::{CancellationToken, Fleet, NodeOptions, Service};

const ALL_OPS: [Op; 6] = [Op::Get, Op::Head, Op::Put, Op::List, Op::Delete, Op::Copy];

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f));
    if wanted("placement") {
        placement_bench();
    }
    if wanted("idle") {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(idle_bench());
    }
    // One process per variant, so resident memory compares cleanly.
    for (name, listen) in [("metrics-off", false), ("metrics-on", true)] {
        if filter.iter().any(|f| f == name) {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            runtime.block_on(metrics_bench(listen));
        }
    }
}

/// CPU seconds this process has used (user + system).
fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// This process's resident memory, in MiB.
fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The node with 100 idle databases, with the endpoint off or on (and
/// then scraped every 5 s, three times Prometheus' usual rate): CPU
/// time per minute and resident memory. `cargo bench --bench fleet --
/// metrics-off`, then `-- metrics-on`.
async fn metrics_bench(listen: bool) {
    let window_secs = idle_window_secs();
    let idle = IdleFleet::seed().await;
    let fleet = idle.fleet.clone();
    let metrics = Arc::new(sleet::metrics::Metrics::default());
    let probes = Arc::new(sleet::probes::NodeProbes::default());
    let shutdown = CancellationToken::new();
    let mut scraped = 0u64;
    let scraper = if listen {
        let endpoint = sleet::endpoint::Endpoint::bind("127.0.0.1:0".parse().unwrap())
            .await
            .expect("a loopback port");
        let address = endpoint.local_addr().unwrap();
        endpoint.serve(metrics.clone(), probes.clone(), shutdown.child_token());
        Some(address)
    } else {
        None
    };
    let node = tokio::spawn({
        let (fleet, shutdown) = (fleet.clone(), shutdown.clone());
        let options = NodeOptions::new("metrics-node").with_telemetry(metrics, probes);
        async move { fleet.run_node(options, shutdown).await }
    });
    tokio::time::sleep(Duration::from_secs(20)).await;
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut bytes = 0usize;
    while started.elapsed() < Duration::from_secs(window_secs) {
        if let Some(address) = scraper {
            bytes = scrape(address).await;
            scraped += 1;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let cpu = (cpu_seconds() - cpu_before) / minutes;
    let rss = resident_mib();
    shutdown.cancel();
    node.await.expect("the node task").expect("a clean stop");
    println!(
        "metrics ({}): {IDLE_DATABASES} idle databases, {window_secs} s window: {cpu:.2} CPU s/min, \
         {rss:.1} MiB resident; {scraped} scrapes of {bytes} bytes",
        if listen {
            "endpoint on, scraped every 5 s"
        } else {
            "endpoint off"
        }
    );
}

/// One `GET /metrics`; the body's length.
async fn scrape(address: std::net::SocketAddr) -> usize {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("request");
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.expect("reply");
    reply.len()
}

/// Times `f` over `iterations` runs and returns the mean.
fn mean_time(iterations: u32, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    start.elapsed() / iterations
}

fn placement_bench() {
    const DATABASES: usize = 10_000;
    const NODES: usize = 100;
    let services = sleet::daemon::RUNNABLE_SERVICES.to_vec();
    let sightings: BTreeMap<String, NodeSighting> = (0..NODES)
        .map(|i| {
            let id = format!("node-{i:03}");
            let sighting = NodeSighting {
                node_id: id.clone(),
                services: services.clone(),
                age: Duration::ZERO,
                live: true,
                path: Path::from(format!("nodes/{id}.cgw.json")),
            };
            (id, sighting)
        })
        .collect();
    let view = FleetView {
        databases: (0..DATABASES)
            .map(|i| {
                (
                    format!("s3://bucket/tenant-{i:05}"),
                    DatabaseConfig::default(),
                )
            })
            .collect(),
        ..FleetView::default()
    };

    let mut owned = 0;
    let per_node = mean_time(5, || {
        owned = black_box(owned_tasks("node-042", &services, &sightings, &view)).len();
    });
    println!(
        "placement: owned tasks of one node, {DATABASES} databases x {NODES} nodes: \
         {:.1} ms per tick ({owned} tasks owned)",
        per_node.as_secs_f64() * 1e3,
    );

    // How evenly each hash spreads work over similar node ids.
    let assigned = DATABASES * 3; // gc, coordinator, one worker; no mirror targets
    for hash in [PlacementHash::Fnv1a, PlacementHash::Fnv1aMix] {
        let mut hashed = view.clone();
        hashed.fleet.node.placement_hash = Some(hash);
        let mut shares: Vec<usize> = sightings
            .keys()
            .map(|id| owned_tasks(id, &services, &sightings, &hashed).len())
            .collect();
        shares.sort_unstable();
        let idle = shares.iter().filter(|n| **n == 0).count();
        println!(
            "placement: {hash:?} tasks per node over {NODES} nodes: min {} median {} max {}, {idle} nodes idle (even share {})",
            shares[0],
            shares[NODES / 2],
            shares[NODES - 1],
            assigned / NODES
        );
    }

    let nodes: Vec<String> = (0..20).map(|i| format!("node-{i:02}")).collect();
    let keys: Vec<String> = (0..1000)
        .map(|i| format!("s3://bucket/tenant-{i:05}"))
        .collect();
    let rounds = 200u32;
    let per_round = mean_time(rounds, || {
        for database in &keys {
            let key = PlacementKey::Service {
                database,
                service: Service::Gc,
            };
            black_box(key.rank(nodes.iter().map(String::as_str)));
        }
    });
    println!(
        "placement: rankings of 20 nodes: {:.0} per second",
        keys.len() as f64 / per_round.as_secs_f64()
    );
}

/// Per-op counts, so a window's cost is `after - before`.
fn snapshot(store: &CountingStore) -> [u64; 6] {
    ALL_OPS.map(|op| store.count(op))
}

fn window(before: [u64; 6], after: [u64; 6], minutes: f64) -> String {
    let total: u64 = (0..6).map(|i| after[i] - before[i]).sum();
    let parts: Vec<String> = ALL_OPS
        .iter()
        .enumerate()
        .filter(|(i, _)| after[*i] > before[*i])
        .map(|(i, op)| {
            let per_minute = (after[i] - before[i]) as f64 / minutes;
            format!("{}={per_minute:.1}", format!("{op:?}").to_lowercase())
        })
        .collect();
    format!("{:.1}/min ({})", total as f64 / minutes, parts.join(" "))
}

/// Databases the idle benchmarks register.
const IDLE_DATABASES: usize = 100;

/// The measurement window: `SLEET_BENCH_IDLE_SECS`, default 120 s.
fn idle_window_secs() -> u64 {
    std::env::var("SLEET_BENCH_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120)
}

/// A `file://` fleet with [`IDLE_DATABASES`] small idle databases registered;
/// the directories live as long as it does.
struct IdleFleet {
    fleet: Fleet,
    _root: tempfile::TempDir,
    _data: tempfile::TempDir,
}

impl IdleFleet {
    async fn seed() -> IdleFleet {
        let root = tempfile::tempdir().expect("a temporary root");
        let data = tempfile::tempdir().expect("a temporary data dir");
        let fleet = Fleet::open(&format!("file://{}", root.path().display())).expect("the root");
        eprintln!("idle: seeding {IDLE_DATABASES} databases");
        for i in 0..IDLE_DATABASES {
            let url = format!("file://{}/db{i:03}", data.path().display());
            seed_idle_database(&url).await;
            fleet.register(&url).await.expect("register");
        }
        IdleFleet {
            fleet,
            _root: root,
            _data: data,
        }
    }
}

async fn idle_bench() {
    let window_secs = idle_window_secs();
    let idle = IdleFleet::seed().await;
    let plain = idle.fleet.clone();

    // Default cadences: an empty sleet.toml.
    let root_counts = Arc::new(CountingStore::new(plain.root().store().clone()));
    let counted = root_counts.clone();
    let fleet = Fleet::from_root(plain.root().clone().wrap_store(|_| counted));
    let local: Arc<dyn ObjectStore> = Arc::new(object_store::local::LocalFileSystem::new());
    let service_counts = Arc::new(CountingStore::new(local));
    let counted = service_counts.clone();
    let opener: DatabaseOpener = Arc::new(move |url: &str| {
        let (_, path) = sleet::store::open_url(url).map_err(|source| {
            sleet::database::DatabaseError::Store {
                url: url.to_string(),
                source,
            }
        })?;
        Ok(DatabaseHandle::from_parts(
            url.to_string(),
            counted.clone(),
            path,
        ))
    });
    let shutdown = CancellationToken::new();
    let node = tokio::spawn({
        let (fleet, shutdown) = (fleet.clone(), shutdown.clone());
        let options = NodeOptions::new("idle-node").with_database_opener(opener);
        async move { fleet.run_node(options, shutdown).await }
    });

    eprintln!("idle: warming up 20 s, then measuring {window_secs} s");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (root_before, service_before) = (snapshot(&root_counts), snapshot(&service_counts));
    let kinds_before = service_counts.by_kind();
    tokio::time::sleep(Duration::from_secs(window_secs)).await;
    let (root_after, service_after) = (snapshot(&root_counts), snapshot(&service_counts));
    let kinds_after = service_counts.by_kind();
    shutdown.cancel();
    node.await.expect("the node task").expect("a clean stop");

    let minutes = window_secs as f64 / 60.0;
    println!(
        "idle: one node owning {IDLE_DATABASES} idle databases x 3 services, default cadences, {window_secs} s window"
    );
    println!(
        "idle: fleet-root requests: {}",
        window(root_before, root_after, minutes)
    );
    println!(
        "idle: service requests:    {}",
        window(service_before, service_after, minutes)
    );
    for (kind, after) in &kinds_after {
        let during = after - kinds_before.get(kind).copied().unwrap_or(0);
        if during > 0 {
            println!(
                "idle:   {kind:<18} {:.1}/min per database",
                during as f64 / minutes / IDLE_DATABASES as f64
            );
        }
    }
    let service_total: u64 = (0..6).map(|i| service_after[i] - service_before[i]).sum();
    println!(
        "idle: service requests per database: {:.1}/min",
        service_total as f64 / minutes / IDLE_DATABASES as f64
    );
}

/// A small database, written once and closed: nothing for compaction to do.
async fn seed_idle_database(url: &str) {
    let (store, path) = sleet::store::open_url(url).expect("a store");
    let db = slatedb::Db::builder(path, store)
        .with_settings(sleet::demo::small_sst_writer_settings())
        .build()
        .await
        .expect("a writer");
    db.put(b"key", b"value").await.expect("put");
    db.close().await.expect("close");
}
