//! The driver: starts the fleet, injects the fault mix from the seed,
//! stops the faults, lets the fleet settle and judges it.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::check::{self, PANIC, Running, Violation};
use super::clock::{SimClock, Skew};
use super::store::{FaultLevels, NodeStore, PauseGate, SimStore};
use super::trace::Trace;
use super::{Fault, FaultMix};
use crate::Fleet;
use crate::daemon::{DatabaseOpener, NodeOptions};
use crate::fleet::database::DatabaseHandle;
use crate::fleet::root::FleetRoot;
use crate::model::placement::fnv1a;
use crate::model::planted::{Planted, plant};
use crate::model::registry::canonicalize_database_url;
use crate::observe::metrics::Metrics;
use crate::observe::probes::NodeProbes;
use crate::testing::Chaos;

/// How long after the last fault ownership must have converged, at the
/// default timings: a dead node's heartbeat ages out (30 s), every node
/// ticks and lists again (10 s), a config change is read (60 s), with a
/// tick to spare.
pub const CONVERGENCE_BOUND: Duration = Duration::from_secs(120);

/// The fleet root's URL, and the bucket every database lives in. Nothing
/// leaves the process: every node opens them on the simulated store.
const ROOT_URL: &str = "s3://sim-root/fleet";
const DATA_BUCKET: &str = "s3://sim-data";

/// One simulated run.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub seed: u64,
    /// Simulated time in all: faults for all but the last
    /// [`CONVERGENCE_BOUND`] and a little, then the settling and checks.
    pub minutes: u64,
    pub nodes: usize,
    pub databases: usize,
    pub faults: FaultMix,
    /// Keep every trace event for printing, not only the last ones.
    pub trace: bool,
    pub planted: Vec<Planted>,
}

impl SimOptions {
    /// A run of `seed` with every fault: 3 nodes, 10 databases, 10
    /// simulated minutes.
    pub fn new(seed: u64) -> SimOptions {
        SimOptions {
            seed,
            minutes: 10,
            nodes: 3,
            databases: 10,
            faults: FaultMix::all(),
            trace: false,
            planted: Vec::new(),
        }
    }
}

impl SimOptions {
    /// Refuses options no run can honour, naming the option.
    pub fn validate(&self) -> Result<(), String> {
        if self.minutes < 3 {
            return Err(format!(
                "--minutes {} leaves no time for faults: a run needs at least 3 (2.5 to settle)",
                self.minutes
            ));
        }
        if !(3..=5).contains(&self.nodes) {
            return Err(format!(
                "--nodes {}: a simulated fleet has 3 to 5 nodes",
                self.nodes
            ));
        }
        if self.databases == 0 {
            return Err("--databases 0: a fleet needs at least one database".into());
        }
        Ok(())
    }
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct SimReport {
    pub seed: u64,
    /// The trace's hash: the same for the same seed and options.
    pub hash: String,
    pub events: u64,
    pub violations: Vec<Violation>,
    /// The last trace events, oldest first.
    pub last_events: Vec<String>,
    /// Every event, when asked for.
    pub all_events: Option<Vec<String>>,
}

impl SimReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Runs one seed on a fresh single-threaded runtime with paused time. A
/// panic anywhere (the simulator's or a node's) is a violation of the
/// seed, reported with the trace's last events, never a crashed run.
pub fn run(options: &SimOptions) -> SimReport {
    let _planted = plant(&options.planted);
    let trace = Arc::new(if options.trace {
        Trace::keeping_all()
    } else {
        Trace::default()
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(simulate(options, trace.clone()))
    }));
    let violations = match outcome {
        Ok(violations) => violations,
        Err(panic) => vec![Violation {
            name: PANIC,
            detail: format!("the simulation panicked: {}", panic_text(&*panic)),
        }],
    };
    // Whatever is left (a node's tasks after a panic) goes with the runtime.
    runtime.shutdown_background();
    SimReport {
        seed: options.seed,
        hash: trace.hash(),
        events: trace.count(),
        violations,
        last_events: trace.last(),
        all_events: trace.all(),
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(not a string)".to_string())
}

/// One simulated node: what survives its crashes (id, clock) and what
/// does not (its task, pause and probes).
struct SimNode {
    id: String,
    skew: Arc<Skew>,
    run: Option<NodeRun>,
}

struct NodeRun {
    handle: JoinHandle<Result<(), crate::Error>>,
    shutdown: CancellationToken,
    pause: Arc<PauseGate>,
    probes: Arc<NodeProbes>,
}

struct World {
    clock: SimClock,
    store: Arc<SimStore>,
    trace: Arc<Trace>,
    chaos: Chaos,
    seed: u64,
    /// Node starts so far: each gets its own draws.
    starts: u64,
    /// The checker's root: no faults, no pause.
    root: FleetRoot,
    /// Registered databases by index, with their registry files.
    databases: BTreeMap<usize, String>,
    next_database: usize,
    /// Whether the config now limits databases to GC and coordinator.
    narrowed: bool,
}

impl World {
    fn note(&self, event: impl AsRef<str>) {
        self.trace
            .record(self.clock.millis(), format!("sim {}", event.as_ref()));
    }

    fn draw(&mut self, below: u64) -> u64 {
        self.chaos.draw() % below.max(1)
    }

    async fn write_config(&self) {
        let services = if self.narrowed {
            "services = [\"gc\", \"compactor-coordinator\"]\n"
        } else {
            ""
        };
        // The simulated stores are trusted: their checks run (and prove
        // the in-memory store's conditional writes) but the check's clock
        // probe reads the machine's clock, not the simulation's.
        let text = format!(
            "[stores.trusted]\n\"s3://sim-root\" = \"simulated\"\n\"{DATA_BUCKET}\" = \
             \"simulated\"\n\n[database]\n{services}"
        );
        let path = self.root.path(crate::fleet::root::CONFIG_FILE);
        self.root
            .store()
            .put(&path, PutPayload::from(text.into_bytes()))
            .await
            .expect("the checker's writes never fail");
    }

    async fn register(&mut self, index: usize) {
        let url = database_url(index);
        let registered = self
            .root
            .register(&url)
            .await
            .expect("the checker's writes never fail");
        self.databases.insert(index, registered.file);
        self.note(format!("register {url}"));
    }

    async fn remove(&mut self, index: usize) {
        let file = self
            .databases
            .remove(&index)
            .expect("a registered database");
        self.root
            .store()
            .delete(&self.root.path(&file))
            .await
            .expect("the checker's writes never fail");
        self.note(format!("remove {}", database_url(index)));
    }

    fn start(&mut self, node: &mut SimNode) {
        self.starts += 1;
        let pause = Arc::new(PauseGate::default());
        let seed = self.seed ^ self.starts.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let store: Arc<dyn ObjectStore> = Arc::new(NodeStore::for_node(
            &self.store,
            &node.id,
            seed,
            pause.clone(),
        ));
        let root = FleetRoot::from_parts(
            ROOT_URL.to_string(),
            store.clone(),
            Path::from("sim-root/fleet"),
        );
        let opener: DatabaseOpener = Arc::new(move |url: &str| {
            let canonical = canonicalize_database_url(url)?;
            let path = Path::from(canonical.trim_start_matches("s3://"));
            let seed = seed ^ fnv1a(canonical.as_bytes());
            Ok(DatabaseHandle::seeded(canonical, store.clone(), path, seed))
        });
        let probes = Arc::new(NodeProbes::default());
        let options = NodeOptions::new(node.id.clone())
            .with_event_receiver(false)
            .with_max_mirror_jobs(1)
            .with_shutdown_grace(Duration::from_secs(5))
            .with_clock(self.clock.skewed(node.skew.clone()))
            .with_telemetry(Arc::new(Metrics::default()), probes.clone())
            .with_database_opener(opener);
        let shutdown = CancellationToken::new();
        let fleet = Fleet::from_root(root);
        let token = shutdown.clone();
        let handle = tokio::spawn(async move { fleet.run_node(options, token).await });
        node.run = Some(NodeRun {
            handle,
            shutdown,
            pause,
            probes,
        });
        self.note(format!("start {}", node.id));
    }
}

fn database_url(index: usize) -> String {
    format!("{DATA_BUCKET}/db{index:03}")
}

async fn simulate(options: &SimOptions, trace: Arc<Trace>) -> Vec<Violation> {
    let clock = SimClock::start();
    let store = SimStore::new(clock.clone(), trace.clone());
    let checker: Arc<dyn ObjectStore> = Arc::new(store.view("checker"));
    let root = FleetRoot::from_parts(ROOT_URL.to_string(), checker, Path::from("sim-root/fleet"));
    let mut world = World {
        clock,
        store,
        trace,
        chaos: Chaos::with_seed(options.seed),
        seed: options.seed,
        starts: 0,
        root,
        databases: BTreeMap::new(),
        next_database: options.databases,
        narrowed: false,
    };
    world.note(format!(
        "seed {} nodes {} databases {} faults {}",
        options.seed, options.nodes, options.databases, options.faults
    ));
    world.write_config().await;
    for index in 0..options.databases {
        world.register(index).await;
    }
    let mut nodes: Vec<SimNode> = (0..options.nodes)
        .map(|i| SimNode {
            id: format!("n{}", i + 1),
            skew: Arc::new(Skew::default()),
            run: None,
        })
        .collect();
    for node in nodes.iter_mut() {
        world.start(node);
    }
    let mut violations = Vec::new();
    let total = Duration::from_secs(options.minutes * 60);
    let settle = CONVERGENCE_BOUND + Duration::from_secs(30);
    let faults_end = total.saturating_sub(settle);
    let started = tokio::time::Instant::now();
    // Faults, one every 5-40 s of simulated time.
    while started.elapsed() < faults_end && !options.faults.0.is_empty() {
        let wait = Duration::from_millis(5_000 + world.draw(35_000));
        tokio::time::sleep(wait).await;
        violations.extend(reap_panics(&mut world, &mut nodes).await);
        inject(&mut world, &mut nodes, &options.faults).await;
    }
    // The faults stop: requests go through, paused nodes resume, and
    // crashed nodes either restart or stay gone.
    world.store.set_levels(FaultLevels::default());
    for node in nodes.iter_mut() {
        match &node.run {
            Some(run) => {
                run.pause.resume();
            }
            None => {
                if world.draw(2) == 0 {
                    world.start(node);
                }
            }
        }
    }
    world.note("faults stop");
    let until = faults_end.max(started.elapsed()) + CONVERGENCE_BOUND;
    tokio::time::sleep(until.saturating_sub(started.elapsed())).await;
    violations.extend(reap_panics(&mut world, &mut nodes).await);
    // Converged, and still so a few ticks later.
    for _ in 0..2 {
        let running = running(&nodes);
        let found = check::ownership(&world.root, world.clock.now(), &running).await;
        for violation in &found {
            world.note(format!("violation {violation}"));
        }
        violations.extend(found);
        if !violations.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(20)).await;
    }
    for node in nodes.iter_mut() {
        if let Some(run) = node.run.take() {
            run.shutdown.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(60), run.handle).await;
        }
    }
    violations
}

/// The running nodes and the tasks each reports.
fn running(nodes: &[SimNode]) -> Vec<Running> {
    nodes
        .iter()
        .filter_map(|node| {
            let run = node.run.as_ref()?;
            let report = run.probes.report();
            let tasks = report
                .tasks
                .iter()
                .map(|t| (t.database.clone(), t.service.clone(), t.target.clone()))
                .collect();
            Some(Running {
                node_id: node.id.clone(),
                services: crate::daemon::RUNNABLE_SERVICES.to_vec(),
                tasks,
            })
        })
        .collect()
}

/// Nodes whose run ended on its own: a panic is a violation; an error
/// (a node that could not start) is noted, and the node counts as gone.
async fn reap_panics(world: &mut World, nodes: &mut [SimNode]) -> Vec<Violation> {
    let mut found = Vec::new();
    for node in nodes.iter_mut() {
        let finished = node
            .run
            .as_ref()
            .is_some_and(|run| run.handle.is_finished());
        if !finished {
            continue;
        }
        let run = node.run.take().expect("a finished run");
        match run.handle.await {
            Err(e) if e.is_panic() => {
                let text = panic_text(&*e.into_panic());
                world.note(format!("{} panicked: {text}", node.id));
                found.push(Violation {
                    name: PANIC,
                    detail: format!("node {} panicked: {text}", node.id),
                });
            }
            Err(_) => world.note(format!("{} cancelled", node.id)),
            Ok(result) => world.note(format!("{} ended: {result:?}", node.id)),
        }
    }
    found
}

/// Injects one fault of the mix, chosen by the seed.
async fn inject(world: &mut World, nodes: &mut [SimNode], mix: &FaultMix) {
    let faults: Vec<Fault> = mix.0.iter().copied().collect();
    let fault = faults[world.draw(faults.len() as u64) as usize];
    let which = world.draw(nodes.len() as u64) as usize;
    match fault {
        Fault::Crash => match nodes[which].run.take() {
            Some(run) => {
                run.handle.abort();
                let _ = run.handle.await;
                world.note(format!("crash {}", nodes[which].id));
            }
            None => world.start(&mut nodes[which]),
        },
        Fault::Pause => {
            if let Some(run) = &nodes[which].run {
                let paused = run.pause.is_paused();
                if paused {
                    run.pause.resume();
                } else {
                    run.pause.pause();
                }
                let verb = if paused { "resume" } else { "pause" };
                world.note(format!("{verb} {}", nodes[which].id));
            }
        }
        Fault::Errors | Fault::LostReplies | Fault::Slow => {
            let mut levels = FaultLevels::default();
            match fault {
                Fault::Errors => levels.error_per_mille = 20 + world.draw(180),
                Fault::LostReplies => levels.lost_per_mille = 10 + world.draw(90),
                _ => levels.max_latency_ms = 200 + world.draw(4_800),
            }
            world.store.set_levels(levels);
            world.note(format!("levels {levels:?}"));
        }
        Fault::Skew => {
            // Within the store check's default bound, ahead or behind.
            let millis = world.draw(8_000) as i64 - 4_000;
            nodes[which].skew.set(millis);
            world.note(format!("skew {} {millis:+} ms", nodes[which].id));
        }
        Fault::Config => {
            world.narrowed = !world.narrowed;
            world.write_config().await;
            world.note(format!("config narrowed={}", world.narrowed));
        }
        Fault::Registry => {
            if world.draw(2) == 0 && world.databases.len() > 1 {
                let present: Vec<usize> = world.databases.keys().copied().collect();
                let index = present[world.draw(present.len() as u64) as usize];
                world.remove(index).await;
            } else {
                let index = world.next_database;
                world.next_database += 1;
                world.register(index).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_fleet_converges_and_a_seed_replays() {
        let mut options = SimOptions::new(7);
        options.minutes = 4;
        options.faults = FaultMix::none();
        let first = run(&options);
        assert!(first.passed(), "{:?}", first.violations);
        let again = run(&options);
        assert_eq!(first.hash, again.hash, "the same seed, the same trace");
        assert!(first.events > 100, "{} events", first.events);
    }

    #[test]
    fn a_panic_is_a_failing_seed_not_a_crashed_run() {
        let boom: Box<dyn std::any::Any + Send> = Box::new("boom");
        assert_eq!(panic_text(&*boom), "boom");
    }
}
