//! Fleet benchmarks: placement cost, the idle request cost of a node, and
//! how long a coordinator handover takes.
//!
//! `cargo bench --bench fleet` runs placement and idle; `cargo bench
//! --bench fleet -- placement`, `-- idle`, `-- scale` or `-- handover`
//! runs one (see [`idle_bench`], [`scale_bench`] and [`handover_bench`]
//! for their knobs).
//! Figures go to stdout; docs/performance.md records a run.

#[path = "counted_opener.rs"]
mod counted_opener;
#[path = "fleet/scale_cli.rs"]
mod scale_cli;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::path::Path;
use sleet::config::DatabaseConfig;
use sleet::daemon::owned_tasks;
use sleet::fleet::root::{FleetView, NodeSighting};
use sleet::model::placement::{PlacementHash, PlacementKey};
use sleet::testing::{ALL_OPS, CountingStore};
use sleet::{CancellationToken, Fleet, NodeOptions, Service};

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f));
    // `SLEET_BENCH_LOG=<filter>` (e.g. `sleet::services::idle=trace`): the node's
    // log on standard error, to see what a figure is made of.
    if let Ok(filter) = std::env::var("SLEET_BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    if std::env::var_os("SLEET_BENCH_IDLE_S3").is_some() {
        let endpoint = std::env::var("SLEET_S3_ENDPOINT")
            .expect("SLEET_BENCH_IDLE_S3 needs the local S3 server: run under scripts/bench");
        // SAFETY: no other thread exists yet (no runtime has started).
        unsafe {
            for (name, value) in [
                ("AWS_ENDPOINT", endpoint.as_str()),
                ("AWS_ALLOW_HTTP", "true"),
                ("AWS_ACCESS_KEY_ID", "test"),
                ("AWS_SECRET_ACCESS_KEY", "test"),
                ("AWS_REGION", "us-east-1"),
            ] {
                std::env::set_var(name, value);
            }
        }
    }
    if wanted("placement") {
        placement_bench();
    }
    if wanted("idle") {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(idle_bench());
    }
    if filter.iter().any(|f| f == "scale") {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(scale_bench());
    }
    if filter.iter().any(|f| f == "scale-cli") {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(scale_cli::scale_cli_bench());
    }
    if filter.iter().any(|f| f == "look-floor") {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(look_floor_bench());
    }
    if filter.iter().any(|f| f == "handover") {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(handover_bench());
    }
    // One process per variant, so resident memory compares cleanly.
    for (name, listen) in [("metrics-off", false), ("metrics-on", true)] {
        if filter.iter().any(|f| f == name) {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            runtime.block_on(metrics_bench(listen));
        }
    }
}

/// CPU the bench's stand-ins for other nodes have used, in nanoseconds:
/// not the node's, so [`cpu_seconds`] leaves it out.
static STAND_IN_CPU_NANOS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// CPU seconds the node has used: this process's (user + system), less
/// what the bench's stand-ins for other nodes used.
fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let stand_ins = STAND_IN_CPU_NANOS.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e9;
    seconds(usage.ru_utime) + seconds(usage.ru_stime) - stand_ins
}

/// This process's user and system CPU seconds and minor page faults so
/// far (stand-ins included): where the node's CPU goes, the kernel's share
/// and how much of it is pages faulted back in.
fn cpu_split() -> (f64, f64, f64) {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        seconds(usage.ru_utime),
        seconds(usage.ru_stime),
        usage.ru_minflt as f64,
    )
}

/// CPU nanoseconds the calling thread has used.
fn thread_cpu_nanos() -> u64 {
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime writes into the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
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
    let idle = IdleFleet::seed(IDLE_DATABASES).await;
    let fleet = idle.fleet.clone();
    let metrics = Arc::new(sleet::observe::metrics::Metrics::default());
    let probes = Arc::new(sleet::observe::probes::NodeProbes::default());
    let shutdown = CancellationToken::new();
    let mut scraped = 0u64;
    let scraper = if listen {
        let endpoint = sleet::observe::endpoint::Endpoint::bind("127.0.0.1:0".parse().unwrap())
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
        databases: Arc::new(
            (0..DATABASES)
                .map(|i| {
                    (
                        format!("s3://bucket/tenant-{i:05}"),
                        Arc::new(DatabaseConfig::default()),
                    )
                })
                .collect(),
        ),
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

/// Databases the metrics benchmarks register.
const IDLE_DATABASES: usize = 100;

/// The measurement window: `SLEET_BENCH_IDLE_SECS`, default 120 s.
fn idle_window_secs() -> u64 {
    env_number("SLEET_BENCH_IDLE_SECS").unwrap_or(120)
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// A `file://` fleet with `count` small idle databases registered; the
/// directories live as long as it does.
struct IdleFleet {
    fleet: Fleet,
    urls: Vec<String>,
    /// How many of the registered databases exist.
    created: usize,
    _root: tempfile::TempDir,
    _data: tempfile::TempDir,
}

impl IdleFleet {
    /// Sets up an SQS queue on the local S3 server notified of the
    /// `sleet` bucket's new manifests, and names it in `sleet.toml`
    /// (`SLEET_BENCH_IDLE_EVENTS`, with `SLEET_BENCH_IDLE_S3`). Returns
    /// the queue, to delete at the end.
    async fn turn_events_on(&self) -> (sleet::services::events::sqs::Sqs, String) {
        use sleet::services::events::setup::{Endpoints, setup};
        let endpoint = std::env::var("SLEET_S3_ENDPOINT")
            .expect("SLEET_BENCH_IDLE_EVENTS needs the local S3 server: run under scripts/bench");
        assert!(
            std::env::var_os("SLEET_BENCH_IDLE_S3").is_some(),
            "SLEET_BENCH_IDLE_EVENTS needs SLEET_BENCH_IDLE_S3"
        );
        let at = Endpoints {
            calls: sleet::services::events::sqs::AwsCalls::from_env(None).expect("AWS settings"),
            endpoint: Some(endpoint.clone()),
        };
        let name = format!("idle-bench-{}", std::process::id());
        let buckets = std::collections::BTreeSet::from(["sleet".to_string()]);
        let report = setup(&at, &name, &buckets, false)
            .await
            .expect("events setup");
        self.write_config(&format!(
            "[events]\nsource = \"sqs\"\nqueue_url = \"{}\"\n",
            report.queue_url
        ))
        .await;
        (
            sleet::services::events::sqs::Sqs::new(at.calls, endpoint),
            report.queue_url,
        )
    }

    /// Turns `[idle]` off: every service runs all the time.
    async fn turn_idle_off(&self) {
        self.write_config("[database.idle]\nenabled = false\n")
            .await;
    }

    /// Sets the coordinator's `poll_interval` and the workers'
    /// `compactions_poll_interval` to `every` (`SLEET_BENCH_IDLE_POLL`,
    /// a duration such as `1s`): how fast an awake database's later
    /// compactions are scheduled and picked up.
    async fn set_polls(&self, every: &str) {
        self.write_config(&format!(
            "[database.compactor-coordinator]\npoll_interval = \"{every}\"\n\
             [database.compaction-workers]\ncompactions_poll_interval = \"{every}\"\n"
        ))
        .await;
    }

    /// Adds `toml` to the fleet's `sleet.toml`.
    async fn write_config(&self, toml: &str) {
        use object_store::ObjectStoreExt;
        let root = self.fleet.root();
        let path = root.path("sleet.toml");
        let mut text = match root.store().get(&path).await {
            Ok(found) => String::from_utf8(found.bytes().await.expect("sleet.toml").to_vec())
                .expect("sleet.toml in UTF-8"),
            Err(object_store::Error::NotFound { .. }) => String::new(),
            Err(e) => panic!("sleet.toml: {e}"),
        };
        text.push_str(toml);
        root.store()
            .put(&path, text.into())
            .await
            .expect("sleet.toml");
    }

    /// `count` copies of one small database written an hour ago (hard
    /// links of its files:
    /// nothing rewrites an object in place), each registered by writing
    /// its empty registry file as `sleet register --no-check` would.
    /// Only the databases `wanted` says a node may open are created; all
    /// `count` are registered.
    async fn copies(count: usize, wanted: impl Fn(&str) -> bool) -> IdleFleet {
        IdleFleet::copies_aged(count, Some(Duration::from_secs(3600)), wanted).await
    }

    /// [`IdleFleet::copies`] written `age` ago (`None`: just now).
    async fn copies_aged(
        count: usize,
        age: Option<Duration>,
        wanted: impl Fn(&str) -> bool,
    ) -> IdleFleet {
        let root = tempfile::tempdir().expect("a temporary root");
        let data = tempfile::tempdir().expect("a temporary data dir");
        let fleet = Fleet::open(&format!("file://{}", root.path().display())).expect("the root");
        eprintln!("idle: seeding {count} copies of one database");
        let original = data.path().join("original");
        seed_idle_database(&format!("file://{}", original.display())).await;
        // Written an hour ago: a node starting over databases long idle.
        if let Some(age) = age {
            backdate_tree(&original, age);
        }
        std::fs::create_dir_all(root.path().join("dbs")).expect("dbs/");
        let mut created = 0;
        let urls: Vec<String> = (0..count)
            .map(|i| {
                let dir = data.path().join(format!("db{i:06}"));
                let url = sleet::model::registry::canonicalize_database_url(&format!(
                    "file://{}",
                    dir.display()
                ))
                .expect("a database url");
                if wanted(&url) {
                    link_tree(&original, &dir);
                    created += 1;
                }
                let file = sleet::model::registry::file_name(&url);
                std::fs::write(root.path().join("dbs").join(file), "").expect("a registry file");
                url
            })
            .collect();
        IdleFleet {
            fleet,
            urls,
            created,
            _root: root,
            _data: data,
        }
    }

    /// `count` databases written moments ago, each registered; on the
    /// local S3 server (bucket `sleet`) with `SLEET_BENCH_IDLE_S3`, else
    /// under `file://` temporary directories.
    async fn seed(count: usize) -> IdleFleet {
        use futures::StreamExt;
        let root = tempfile::tempdir().expect("a temporary root");
        let data = tempfile::tempdir().expect("a temporary data dir");
        let (root_url, data_url) = if std::env::var_os("SLEET_BENCH_IDLE_S3").is_some() {
            let run = format!(
                "s3://sleet/idle-bench-{}-{}",
                std::process::id(),
                chrono::Utc::now().timestamp()
            );
            (format!("{run}/root"), run)
        } else {
            (
                format!("file://{}", root.path().display()),
                format!("file://{}", data.path().display()),
            )
        };
        let fleet = Fleet::open(&root_url).expect("the root");
        eprintln!("idle: seeding {count} databases under {data_url}");
        let urls: Vec<String> = (0..count).map(|i| format!("{data_url}/db{i:04}")).collect();
        futures::stream::iter(urls.clone())
            .map(|url| {
                let fleet = fleet.clone();
                async move {
                    seed_idle_database(&url).await;
                    fleet.register(&url).await.expect("register");
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<()>>()
            .await;
        IdleFleet {
            fleet,
            created: urls.len(),
            urls,
            _root: root,
            _data: data,
        }
    }
}

/// `-- scale`: one node owning `SLEET_BENCH_SCALE_DATABASES` (default
/// 10,000) idle `file://` databases at default settings, each a copy of
/// one small database registered by writing its registry file (the
/// bench's seeding is not what is measured). Resident memory before the
/// node starts, a minute in and after the warm-up
/// (`SLEET_BENCH_SCALE_WARMUP_SECS`, default 480 s); CPU and requests over
/// the window; how long `sleet status` takes.
/// `SLEET_BENCH_SCALE_EXIT_AFTER_WARMUP` ends the process right after the
/// warm-up, for a heap profiler to report what the running node holds.
async fn scale_bench() {
    let count = env_number("SLEET_BENCH_SCALE_DATABASES").map_or(10_000, |n| n as usize);
    let peers = env_number("SLEET_BENCH_SCALE_PEERS").unwrap_or(0) as usize;
    let warmup = Duration::from_secs(env_number("SLEET_BENCH_SCALE_WARMUP_SECS").unwrap_or(480));
    let window_secs = idle_window_secs();
    let peer_ids: Vec<String> = (0..peers).map(|i| format!("peer{i:03}")).collect();
    let mut nodes: Vec<&str> = peer_ids.iter().map(String::as_str).collect();
    nodes.push("scale-node");
    let services = [
        Service::Gc,
        Service::CompactorCoordinator,
        Service::CompactionWorkers,
    ];
    // The node opens only what it owns: only those databases exist.
    let owned_tasks = std::cell::Cell::new(0);
    let idle = IdleFleet::copies(count, |url| {
        let tasks = services
            .iter()
            .filter(|&&service| {
                let key = PlacementKey::Service {
                    database: url,
                    service,
                };
                key.owners_by(PlacementHash::Fnv1aMix, nodes.iter().copied(), 1)[0] == "scale-node"
            })
            .count();
        owned_tasks.set(owned_tasks.get() + tasks);
        tasks > 0
    })
    .await;
    // The even spread over similar node ids (0.1.0's hash favours some
    // of `peer000`..`peer098`): each node owns about its share.
    idle.write_config("[node]\nplacement_hash = \"fnv1a-mix\"\n")
        .await;
    let heartbeats = (peers > 0).then(|| PeerHeartbeats::start(&idle, peer_ids.clone()));
    let before = resident_mib();
    let node = CountedNode::start(&idle.fleet, "scale-node");
    let start_up = tokio::spawn(time_start_up(
        std::path::PathBuf::from(idle.fleet.root().url().trim_start_matches("file://")),
        owned_tasks.get(),
    ));
    eprintln!(
        "scale: node started; the {} s window begins after {} s",
        window_secs,
        warmup.as_secs()
    );
    let first_minute = Duration::from_secs(60).min(warmup);
    tokio::time::sleep(first_minute).await;
    let at_a_minute = resident_mib();
    tokio::time::sleep(warmup - first_minute).await;
    let owned = idle.created;
    if std::env::var_os("SLEET_BENCH_SCALE_EXIT_AFTER_WARMUP").is_some() {
        // Under heaptrack: whatever the node holds now is reported as
        // never freed, by the call site that allocated it.
        eprintln!("scale: exiting after the warm-up, the node running");
        std::process::exit(0);
    }
    let measured = node.measure(window_secs, owned).await;
    let per_database = |mib: f64| (mib - before) * 1024.0 / owned.max(1) as f64;
    println!(
        "scale: one node of {} owning {owned} of {count} idle databases, default settings, \
         {window_secs} s window",
        peers + 1
    );
    println!(
        "scale: resident {before:.1} MiB before the node, {at_a_minute:.1} MiB a minute in \
         ({:.1} KiB per database), {:.1} MiB after the warm-up ({:.1} KiB per database)",
        per_database(at_a_minute),
        measured.resident_mib,
        per_database(measured.resident_mib)
    );
    println!("{}", measured.report("scale", owned));
    match start_up.await.expect("the start-up timer") {
        Some((heartbeat, all)) => println!(
            "scale: first heartbeat {heartbeat:.1} s after start, all {} owned tasks started \
             (running or backing off) after {all:.1} s",
            owned_tasks.get()
        ),
        None => println!("scale: the node did not report all its tasks by the window's end"),
    }
    eprintln!("scale: the window is over; reading status");
    let started = Instant::now();
    let status = sleet::commands::status::fleet_status(
        idle.fleet.root(),
        chrono::Utc::now(),
        sleet::StatusOptions::default(),
    )
    .await
    .expect("status");
    let resident = resident_mib();
    println!(
        "scale: status of {} databases and {} node(s) in {:.2} s, resident {resident:.1} MiB after",
        status.databases.len(),
        status.nodes.len(),
        started.elapsed().as_secs_f64()
    );
    drop(heartbeats);
    node.stop().await;
}

/// Seconds from now to the node's first heartbeat and to the heartbeat
/// that first counts all `tasks` of its tasks, read from its heartbeat
/// body under the `file://` root at `root` twice a second (`None` if that
/// never happens within 20 minutes).
async fn time_start_up(root: std::path::PathBuf, tasks: usize) -> Option<(f64, f64)> {
    let name =
        sleet::model::heartbeat::object_name("scale-node", &sleet::daemon::RUNNABLE_SERVICES);
    let path = root.join("nodes").join(name);
    let started = Instant::now();
    let mut first = None;
    while started.elapsed() < Duration::from_secs(1200) {
        let body = std::fs::read(&path).ok().and_then(|b| {
            serde_json::from_slice::<sleet::model::heartbeat::HeartbeatBody>(&b).ok()
        });
        if let Some(body) = body {
            let at = started.elapsed().as_secs_f64();
            let first = *first.get_or_insert(at);
            let counted: u64 = body.services.iter().map(|s| s.running + s.backoff).sum();
            if counted as usize >= tasks {
                return Some((first, at));
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Heartbeats of nodes that are not there: written in the 0.1.0 format
/// under `nodes/` and refreshed every 5 s (the timeout is 30 s) until
/// dropped, so a real node shares the fleet with them.
struct PeerHeartbeats {
    stop: CancellationToken,
}

impl PeerHeartbeats {
    /// Writes from a thread of its own, whose CPU is left out of the
    /// node's figure.
    fn start(idle: &IdleFleet, ids: Vec<String>) -> PeerHeartbeats {
        let nodes = std::path::PathBuf::from(idle.fleet.root().url().trim_start_matches("file://"))
            .join("nodes");
        std::fs::create_dir_all(&nodes).expect("nodes/");
        let stop = CancellationToken::new();
        let write = move || {
            let started = thread_cpu_nanos();
            for id in &ids {
                let services = sleet::daemon::RUNNABLE_SERVICES;
                let name = sleet::model::heartbeat::object_name(id, &services);
                let body = sleet::model::heartbeat::HeartbeatBody::new(id, Vec::new());
                let json = serde_json::to_vec(&body).expect("a body");
                std::fs::write(nodes.join(name), json).expect("a heartbeat");
            }
            STAND_IN_CPU_NANOS.fetch_add(
                thread_cpu_nanos() - started,
                std::sync::atomic::Ordering::Relaxed,
            );
        };
        write();
        let token = stop.clone();
        std::thread::spawn(move || {
            while !token.is_cancelled() {
                std::thread::sleep(Duration::from_secs(5));
                write();
            }
        });
        PeerHeartbeats { stop }
    }
}

impl Drop for PeerHeartbeats {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A node running in this process with its requests counted: those to
/// the fleet root, and those its services make to the databases.
struct CountedNode {
    metrics: Arc<sleet::observe::metrics::Metrics>,
    root_counts: Arc<CountingStore>,
    service_counts: Arc<CountingStore>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), sleet::Error>>,
}

/// What a node did over a window.
struct Measured {
    window_secs: u64,
    root: String,
    /// Requests to the event queue per minute (the whole node's).
    queue_per_minute: f64,
    service: String,
    /// Requests per database-minute by kind of object.
    kinds: Vec<(String, f64)>,
    per_database: f64,
    cpu_per_minute: f64,
    /// User and system CPU seconds and minor page faults a minute.
    split_per_minute: (f64, f64, f64),
    resident_mib: f64,
}

impl Measured {
    fn report(&self, bench: &str, count: usize) -> String {
        let mut lines = vec![
            format!("{bench}: fleet-root requests: {}", self.root),
            format!("{bench}: service requests:    {}", self.service),
        ];
        if self.queue_per_minute > 0.0 {
            lines.push(format!(
                "{bench}: event queue requests: {:.1}/min (the whole node)",
                self.queue_per_minute
            ));
        }
        for (kind, per_minute) in &self.kinds {
            lines.push(format!(
                "{bench}:   {kind:<18} {per_minute:.2}/min per database"
            ));
        }
        lines.push(format!(
            "{bench}: service requests per database: {:.2}/min",
            self.per_database
        ));
        lines.push(format!(
            "{bench}: node CPU {:.2} s/min ({:.2}% of a core), resident {:.1} MiB, \
             {count} databases over {} s",
            self.cpu_per_minute,
            self.cpu_per_minute / 60.0 * 100.0,
            self.resident_mib,
            self.window_secs
        ));
        let (user, system, faults) = self.split_per_minute;
        lines.push(format!(
            "{bench}: of which user {user:.2} s/min, system {system:.2} s/min; \
             {faults:.0} minor page faults a minute"
        ));
        lines.join("\n")
    }
}

impl CountedNode {
    /// Tasks that failed and were restarted so far, every service's: a
    /// node whose tasks keep failing (timeouts on a saturated store)
    /// pays each restart's first looks again.
    fn task_failures(&self) -> u64 {
        sleet::model::service::Service::ALL
            .iter()
            .map(|service| {
                let labels = sleet::observe::metrics::ServiceLabels {
                    service: service.to_string(),
                };
                self.metrics.tasks.restarts.get_or_create(&labels).get()
            })
            .sum()
    }

    fn start(plain: &Fleet, id: &str) -> CountedNode {
        let root_counts = Arc::new(CountingStore::new(plain.root().store().clone()));
        let counted = root_counts.clone();
        let fleet = Fleet::from_root(plain.root().clone().wrap_store(|_| counted));
        // The databases live beside the root: in its bucket, or on the
        // local file system.
        let databases: Arc<dyn ObjectStore> = if plain.root().url().starts_with("s3://") {
            plain.root().store().clone()
        } else {
            Arc::new(object_store::local::LocalFileSystem::new())
        };
        let service_counts = Arc::new(CountingStore::new(databases));
        let opener = counted_opener::counted_opener(service_counts.clone());
        let shutdown = CancellationToken::new();
        let metrics = Arc::new(sleet::observe::metrics::Metrics::default());
        let task = tokio::spawn({
            let shutdown = shutdown.clone();
            let options = NodeOptions::new(id)
                .with_database_opener(opener)
                .with_telemetry(metrics.clone(), Arc::new(Default::default()));
            async move { fleet.run_node(options, shutdown).await }
        });
        CountedNode {
            metrics,
            root_counts,
            service_counts,
            shutdown,
            task,
        }
    }

    /// Requests, CPU and memory over the next `window_secs`.
    async fn measure(&self, window_secs: u64, count: usize) -> Measured {
        let root_before = snapshot(&self.root_counts);
        let service_before = snapshot(&self.service_counts);
        let kinds_before = self.service_counts.by_kind();
        let queue_before = self.metrics.node.event_queue_requests.get();
        let cpu_before = cpu_seconds();
        let split_before = cpu_split();
        tokio::time::sleep(Duration::from_secs(window_secs)).await;
        let cpu = cpu_seconds() - cpu_before;
        let split_after = cpu_split();
        let queue = self.metrics.node.event_queue_requests.get() - queue_before;
        let root_after = snapshot(&self.root_counts);
        let service_after = snapshot(&self.service_counts);
        let minutes = window_secs as f64 / 60.0;
        let kinds = self
            .service_counts
            .by_kind()
            .into_iter()
            .filter_map(|(kind, after)| {
                let during = after - kinds_before.get(&kind).copied().unwrap_or(0);
                (during > 0).then(|| (kind, during as f64 / minutes / count as f64))
            })
            .collect();
        let service_total: u64 = (0..6).map(|i| service_after[i] - service_before[i]).sum();
        Measured {
            window_secs,
            root: window(root_before, root_after, minutes),
            queue_per_minute: queue as f64 / minutes,
            service: window(service_before, service_after, minutes),
            kinds,
            per_database: service_total as f64 / minutes / count as f64,
            cpu_per_minute: cpu / minutes,
            split_per_minute: (
                (split_after.0 - split_before.0) / minutes,
                (split_after.1 - split_before.1) / minutes,
                (split_after.2 - split_before.2) / minutes,
            ),
            resident_mib: resident_mib(),
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task
            .await
            .expect("the node task")
            .expect("a clean stop");
    }
}

/// `-- handover`: `SLEET_BENCH_HANDOVER_DATABASES` (default 24) busy
/// databases (idle off, so every coordinator runs) on node h1 at the
/// default cadences (10 s heartbeats, 30 s timeout); node h2 joins and
/// gains about half of them. For each moved database: how long after the
/// join h1 recorded its coordinator stopped, and h2 set out to claim the
/// next epoch (which it does only after that record, or h1's timeout).
/// h2 joins just after one of h1's ticks, the slowest case (h1 notices
/// at its next tick), unless `SLEET_BENCH_HANDOVER_JOIN_DELAY_MS` moves
/// the join later into h1's interval.
async fn handover_bench() {
    let count = env_number("SLEET_BENCH_HANDOVER_DATABASES").map_or(24, |n| n as usize);
    let fleet = IdleFleet::seed(count).await;
    fleet.turn_idle_off().await;
    let root = fleet.fleet.root().clone();
    let root_dir = std::path::PathBuf::from(root.url().trim_start_matches("file://"));
    let services = [Service::CompactorCoordinator];
    let spawn = |id: &str| {
        let (fleet, token) = (fleet.fleet.clone(), CancellationToken::new());
        let options = NodeOptions::new(id).with_services(services.to_vec());
        let child = token.clone();
        (
            token,
            tokio::spawn(async move { fleet.run_node(options, child).await }),
        )
    };
    // Each database's compactor records: (epoch, name) -> modified.
    let records = |url: &str| {
        let canonical = sleet::model::registry::canonicalize_database_url(url).expect("a url");
        let dir = root_dir
            .join("compactors")
            .join(sleet::model::registry::encoded_name(&canonical));
        let mut found = BTreeMap::new();
        for epoch in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(epoch.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let modified = file.metadata().and_then(|m| m.modified()).ok();
                found.insert(
                    file.file_name().to_string_lossy().to_string(),
                    modified.expect("an mtime"),
                );
            }
        }
        found
    };
    let held_by = |node: &str, urls: &[String]| {
        urls.iter()
            .all(|url| records(url).contains_key(&format!("{node}.claimed")))
    };
    let (h1, _h1_task) = spawn("h1");
    while !held_by("h1", &fleet.urls) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let moving: Vec<String> = fleet
        .urls
        .iter()
        .filter(|url| {
            let canonical = sleet::model::registry::canonicalize_database_url(url).expect("a url");
            let key = PlacementKey::Service {
                database: &canonical,
                service: Service::CompactorCoordinator,
            };
            key.owners(["h1", "h2"], 1)[0] == "h2"
        })
        .cloned()
        .collect();
    // h1 claimed at a tick; the join lands this long after it.
    let delay = env_number("SLEET_BENCH_HANDOVER_JOIN_DELAY_MS").unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    let joined = std::time::SystemTime::now();
    let (h2, _h2_task) = spawn("h2");
    while !held_by("h2", &moving) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let since =
        |t: std::time::SystemTime| t.duration_since(joined).unwrap_or_default().as_secs_f64();
    let (mut released, mut claimed) = (Vec::new(), Vec::new());
    for url in &moving {
        let found = records(url);
        let first = |prefix: &str| {
            found
                .iter()
                .filter(|(name, _)| name.starts_with(prefix))
                .map(|(_, at)| *at)
                .min()
        };
        released.extend(first("h1.released").map(since));
        claimed.extend(first("h2.claiming-").map(since));
    }
    let spread = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        match v.as_slice() {
            [] => "none".to_string(),
            v => format!(
                "min {:.1} s, median {:.1} s, max {:.1} s",
                v[0],
                v[v.len() / 2],
                v[v.len() - 1]
            ),
        }
    };
    println!(
        "handover: {} of {count} databases moved to a joining node (heartbeat 10 s, timeout 30 s)",
        moving.len()
    );
    println!(
        "handover: the old holder recorded its coordinator stopped: {} after the join ({} of {})",
        spread(released.clone()),
        released.len(),
        moving.len()
    );
    println!(
        "handover: the new node set out to claim:                    {} after the join",
        spread(claimed)
    );
    h2.cancel();
    h1.cancel();
}

/// `-- idle`: one node owning `SLEET_BENCH_IDLE_DATABASES` (default 100)
/// idle databases at default settings, `[idle]` off when
/// `SLEET_BENCH_IDLE_OFF` is set. After a warm-up of
/// `SLEET_BENCH_IDLE_WARMUP_SECS` (default 400 s: GC sweeps every database
/// it starts on and lingers its `min_age` plus interval), requests per
/// database-minute by kind, the node's CPU and memory over the window; then
/// 20 databases are written until L0 reaches the trigger, and each one's
/// wait for its first compaction job. With `SLEET_BENCH_IDLE_S3` (under
/// `scripts/bench`) the root and databases are on the local S3 server and
/// every request the node sends it is counted. `SLEET_BENCH_IDLE_POLL`
/// sets the coordinator's and workers' polls (default 5 s).
async fn idle_bench() {
    let count = env_number("SLEET_BENCH_IDLE_DATABASES").map_or(IDLE_DATABASES, |n| n as usize);
    let idle_off = std::env::var_os("SLEET_BENCH_IDLE_OFF").is_some();
    let warmup = Duration::from_secs(env_number("SLEET_BENCH_IDLE_WARMUP_SECS").unwrap_or(400));
    let window_secs = idle_window_secs();
    let idle = IdleFleet::seed(count).await;
    let plain = idle.fleet.clone();
    if idle_off {
        idle.turn_idle_off().await;
    }
    let polls = std::env::var("SLEET_BENCH_IDLE_POLL").ok();
    if let Some(every) = &polls {
        idle.set_polls(every).await;
    }
    let events = std::env::var_os("SLEET_BENCH_IDLE_EVENTS").is_some();
    let queue = if events {
        Some(idle.turn_events_on().await)
    } else {
        None
    };

    let node = CountedNode::start(&plain, "idle-node");
    eprintln!(
        "idle: warming up {} s, then measuring {window_secs} s",
        warmup.as_secs()
    );
    warm_up(&node, warmup, count).await;
    let measured = node.measure(window_secs, count).await;
    let mode = match (idle_off, events) {
        (true, _) => "[idle] off",
        (false, true) => "default settings, [events] from an SQS queue",
        (false, false) => "default settings",
    };
    let polls = polls.map_or(String::new(), |every| {
        format!(", coordinator and worker polls every {every}")
    });
    println!(
        "idle: one node owning {count} idle databases x 3 services, {mode}{polls}, {window_secs} s window"
    );
    println!("{}", measured.report("idle", count));
    let [coordinators, workers, gc] = sleet::services::idle::awake_services();
    println!(
        "idle: awake at the window's end: {coordinators} coordinators, {workers} workers, {gc} GC; \
         {} task failures since the node started",
        node.task_failures()
    );

    let woken = &idle.urls[..WAKES.min(count)];
    let delays = wake_delays(woken).await;
    let (queued, compacted): (Vec<f64>, Vec<f64>) = delays.into_iter().unzip();
    for (what, delays) in [
        ("to the first compaction job", queued),
        ("to the first compaction finished", compacted),
    ] {
        println!(
            "idle: wake-up delay over {} databases (L0 at the trigger {what}): {}",
            delays.len(),
            spread(delays)
        );
    }
    let bursts = env_number("SLEET_BENCH_IDLE_BURSTS").map_or(STALLS, |n| n as usize);
    let stalled = &idle.urls[woken.len()..(woken.len() + bursts).min(count)];
    let stalls = futures::future::join_all(stalled.iter().enumerate().map(|(i, url)| async move {
        tokio::time::sleep(Duration::from_millis(i as u64 * 7000)).await;
        stalled_burst(url).await
    }))
    .await;
    if !stalls.is_empty() {
        println!(
            "idle: a burst of 16 flushes at SlateDB's default L0 limit (8), over {} databases: {}",
            stalls.len(),
            spread(stalls)
        );
    }
    node.stop().await;
    if let Some((sqs, url)) = queue {
        sqs.delete_queue(&url).await.expect("DeleteQueue");
    }
}

/// Waits out `warmup`, printing the requests per database-minute of
/// each 5 minutes of it: whether the node has settled when the window
/// opens shows in the trend.
async fn warm_up(node: &CountedNode, warmup: Duration, count: usize) {
    const STEP: u64 = 300;
    let mut left = warmup.as_secs();
    while left > 0 {
        let step = left.min(STEP);
        let measured = node.measure(step, count).await;
        left -= step;
        let mut kinds = measured.kinds.clone();
        kinds.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = kinds
            .iter()
            .take(4)
            .map(|(kind, rate)| format!("{kind} {rate:.2}"))
            .collect();
        let [coordinators, workers, gc] = sleet::services::idle::awake_services();
        eprintln!(
            "idle: warm-up, {} s to go: {:.2} requests per database-minute ({}), CPU {:.2} s/min; \
             awake: {coordinators} coordinators, {workers} workers, {gc} GC; {} task failures so far",
            left,
            measured.per_database,
            top.join(", "),
            measured.cpu_per_minute,
            node.task_failures()
        );
    }
}

/// `median M s, worst W s, all [...]` of some timings in seconds.
fn spread(mut seconds: Vec<f64>) -> String {
    seconds.sort_by(f64::total_cmp);
    format!(
        "median {:.1} s, worst {:.1} s, all {:?}",
        seconds[seconds.len() / 2],
        seconds[seconds.len() - 1],
        seconds
            .iter()
            .map(|d| format!("{d:.1}"))
            .collect::<Vec<_>>()
    )
}

/// Databases woken to measure the delay.
const WAKES: usize = 20;
/// Databases that take a stalling burst, 7 s apart (`SLEET_BENCH_IDLE_BURSTS`).
const STALLS: usize = 5;

/// Wakes each database (staggered over 40 s, so the wakes fall at every
/// point of the idle looks' back-off) and returns each one's delays to
/// its first compaction job and to its first compaction finished, in
/// seconds.
async fn wake_delays(urls: &[String]) -> Vec<(f64, f64)> {
    let wakes = urls.iter().enumerate().map(|(i, url)| async move {
        tokio::time::sleep(Duration::from_millis(i as u64 * 2000)).await;
        wake_delay(url).await
    });
    futures::future::join_all(wakes).await
}

/// Writes `url` until L0 holds the default trigger's SSTs, then polls its
/// `.compactions` (through its own, uncounted store) until a job appears,
/// and its manifest until the job's sorted run is in it: the moment a
/// writer stalled on L0 could go on.
async fn wake_delay(url: &str) -> (f64, f64) {
    let trigger = DatabaseConfig::default()
        .resolve()
        .coordinator
        .min_compaction_sources as usize;
    let (store, path) = sleet::store::open_url(url).expect("a store");
    let admin = slatedb::admin::AdminBuilder::new(path.clone(), store.clone()).build();
    let db = slatedb::Db::builder(path, store)
        .with_settings(sleet::commands::demo::small_sst_writer_settings())
        .build()
        .await
        .expect("a writer");
    let mut round = 0u32;
    loop {
        let manifest = admin.read_manifest(None).await.expect("a manifest");
        if manifest.is_some_and(|m| m.l0().len() >= trigger) {
            break;
        }
        write_round(&db, round).await;
        round += 1;
    }
    let reached = Instant::now();
    loop {
        let compactions = admin.read_compactions(None).await.expect(".compactions");
        if compactions.is_some_and(|c| c.recent_compactions().next().is_some()) {
            break;
        }
        // A job queued and finished between two polls leaves only its
        // sorted run (services that always run are that quick).
        let manifest = admin.read_manifest(None).await.expect("a manifest");
        if manifest.is_some_and(|m| !m.compacted().is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let queued = reached.elapsed().as_secs_f64();
    loop {
        let manifest = admin.read_manifest(None).await.expect("a manifest");
        if manifest.is_some_and(|m| !m.compacted().is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let compacted = reached.elapsed().as_secs_f64();
    db.close().await.expect("close");
    (queued, compacted)
}

/// Eight small keys and a memtable flush: one L0 SST.
async fn write_round(db: &slatedb::Db, round: u32) {
    for i in 0..8u32 {
        let key = format!("wake-{round}-{i}");
        db.put(key.as_bytes(), &[7u8; 512]).await.expect("put");
    }
    db.flush_with_options(slatedb::config::FlushOptions {
        flush_type: slatedb::config::FlushType::MemTable,
    })
    .await
    .expect("flush");
}

/// How long a writer at SlateDB's default L0 limit (8 SSTs) takes to
/// make 16 flushes into an idle `url`: it stalls at the limit until the
/// fleet compacts.
async fn stalled_burst(url: &str) -> f64 {
    let (store, path) = sleet::store::open_url(url).expect("a store");
    let db = slatedb::Db::builder(path, store)
        .with_settings(slatedb::config::Settings {
            l0_max_ssts: 8,
            ..sleet::commands::demo::small_sst_writer_settings()
        })
        .build()
        .await
        .expect("a writer");
    let started = Instant::now();
    for round in 0..16 {
        write_round(&db, round).await;
    }
    let took = started.elapsed().as_secs_f64();
    db.close().await.expect("close");
    took
}

/// Moves the modification time of every file under `dir` back by `age`.
fn backdate_tree(dir: &std::path::Path, age: Duration) {
    let then = std::time::SystemTime::now() - age;
    for entry in std::fs::read_dir(dir).expect("a directory").flatten() {
        if entry.file_type().expect("a file type").is_dir() {
            backdate_tree(&entry.path(), age);
        } else {
            let file = std::fs::File::options()
                .write(true)
                .open(entry.path())
                .expect("a file");
            file.set_modified(then).expect("an mtime");
        }
    }
}

/// `-- look-floor`: what an idle node's looks cost the store and the
/// runtime alone, without sleet: for `SLEET_BENCH_SCALE_DATABASES`
/// (default 10,000) databases, three tasks each that sleep the
/// services' idle intervals at the defaults (coordinator 20 s, workers
/// 60 s, GC 120 s: 4.5 looks a database-minute) and HEAD a missing
/// next manifest on one shared `file://` store, at most 64 at once, as
/// a node looks. The node's every-20th LIST is left out. CPU over 120 s
/// after a 130 s warm-up.
///
/// Each task starts at its own point of its interval, as a node's looks
/// spread out. `SLEET_BENCH_LOOK_GRID_MS` puts every look on that grid
/// instead (at most that much later), so looks due together wake the
/// runtime once.
async fn look_floor_bench() {
    use object_store::ObjectStoreExt;
    let count = env_number("SLEET_BENCH_SCALE_DATABASES").map_or(10_000, |n| n as usize);
    let data = tempfile::tempdir().expect("a temporary data dir");
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::local::LocalFileSystem::new());
    let gate = Arc::new(tokio::sync::Semaphore::new(sleet::daemon::LOOKS_AT_ONCE));
    let looks = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let grid = env_number("SLEET_BENCH_LOOK_GRID_MS").map(Duration::from_millis);
    let origin = tokio::time::Instant::now();
    for i in 0..count {
        let dir = data.path().join(format!("db{i:06}")).join("manifest");
        std::fs::create_dir_all(&dir).expect("a manifest dir");
        let next =
            Path::from_absolute_path(dir.join(format!("{:020}.manifest", 2))).expect("a path");
        for interval in [20, 60, 120] {
            let (store, gate, looks, next) =
                (store.clone(), gate.clone(), looks.clone(), next.clone());
            let interval = Duration::from_secs(interval);
            // Spread evenly: database i of count starts i/count into it.
            let mut due = origin + interval.mul_f64(i as f64 / count as f64);
            tokio::spawn(async move {
                loop {
                    let at = grid.map_or(due, |grid| {
                        sleet::services::idle::on_grid(due, origin, grid)
                    });
                    tokio::time::sleep_until(at).await;
                    due += interval;
                    let _permit = gate.acquire().await.expect("the gate");
                    let missing = store.head(&next).await;
                    assert!(matches!(missing, Err(object_store::Error::NotFound { .. })));
                    looks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    }
    eprintln!("look-floor: {count} databases' looks; warming up 130 s, then measuring 120 s");
    tokio::time::sleep(Duration::from_secs(130)).await;
    let (cpu, before) = (
        cpu_seconds(),
        looks.load(std::sync::atomic::Ordering::Relaxed),
    );
    tokio::time::sleep(Duration::from_secs(120)).await;
    let cpu = cpu_seconds() - cpu;
    let done = looks.load(std::sync::atomic::Ordering::Relaxed) - before;
    println!(
        "look-floor: {count} databases, {:.0} HEADs a minute: CPU {:.2} s/min ({:.2}% of a core), {:.1} µs a HEAD",
        done as f64 / 2.0,
        cpu / 2.0,
        cpu / 120.0 * 100.0,
        cpu / done as f64 * 1e6
    );
}

/// Recreates the directory tree `from` at `to`, hard-linking its files.
fn link_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("a directory");
    for entry in std::fs::read_dir(from).expect("a directory").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            link_tree(&entry.path(), &target);
        } else {
            // A file system allows so many links to one file (65,000
            // on ext4): past that, a copy.
            if std::fs::hard_link(entry.path(), &target).is_err() {
                std::fs::copy(entry.path(), &target).expect("a copy");
            }
        }
    }
}

/// A small database, written once and closed: nothing for compaction to do.
async fn seed_idle_database(url: &str) {
    let (store, path) = sleet::store::open_url(url).expect("a store");
    let db = slatedb::Db::builder(path, store)
        .with_settings(sleet::commands::demo::small_sst_writer_settings())
        .build()
        .await
        .expect("a writer");
    db.put(b"key", b"value").await.expect("put");
    db.close().await.expect("close");
}
