//! The driver: starts the fleet, injects the fault mix from the seed,
//! stops the faults, lets the fleet settle and judges it.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path;

use super::FaultMix;
use super::check::{self, PANIC, Running, Violation};
use super::clock::{SimClock, Skew};
use super::collect::collections;
use super::foreign;
use super::history::histories;
use super::inject::{crash, inject};
use super::mirror::Which;
use super::store::{FaultLevels, SimStore};
use super::swarm::Swarm;
use super::trace::Trace;
use super::world::{MIRROR_BUCKET, ROOT_URL, SimNode, World, database_path, database_url};
use crate::fleet::root::FleetRoot;
use crate::model::coverage::{self, Mark};
use crate::model::planted::{Planted, plant};
use crate::model::seams;
use crate::testing::Chaos;

/// How long after the last fault ownership must have converged, at the
/// default timings: a dead node's heartbeat ages out (30 s), every node
/// ticks and lists again (10 s), a config change is read (60 s), with a
/// tick to spare.
pub const CONVERGENCE_BOUND: Duration = Duration::from_secs(120);

/// The most nodes a swarm seed draws (and a fleet may have).
const MOST_NODES: usize = 5;

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
    /// One application writer per database (SlateDB's data, the writers'
    /// invariants); without them databases stay empty and only ownership
    /// is judged, about 50 times faster.
    pub writers: bool,
    /// Keep every trace event for printing, not only the last ones.
    pub trace: bool,
    pub planted: Vec<Planted>,
    /// Each seed draws its own fleet (3 to 5 nodes, 2 to `databases`
    /// databases), fault mix (out of `faults`), timings and seams
    /// (`swarm`); `nodes` is then not used. Off: the run is exactly as
    /// given.
    pub swarm: bool,
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
            writers: true,
            trace: false,
            planted: Vec::new(),
            swarm: true,
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
        if !(3..=MOST_NODES).contains(&self.nodes) {
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
    /// How often the run went through each coverage mark.
    pub marks: BTreeMap<Mark, u64>,
    /// What the seed's swarm drew, when it ran as one.
    pub swarm: Option<String>,
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
    let counting = coverage::count();
    let swarm = options
        .swarm
        .then(|| Swarm::draw(options.seed, &options.faults, MOST_NODES, options.databases));
    let faults_on = Rc::new(Cell::new(true));
    let _seams = swarm
        .as_ref()
        .map(|swarm| seams::install(swarm.seam_hook(options.seed, faults_on.clone())));
    let drawn = match &swarm {
        Some(swarm) => SimOptions {
            nodes: swarm.nodes,
            databases: swarm.databases,
            faults: swarm.faults.clone(),
            ..options.clone()
        },
        None => options.clone(),
    };
    let options = &drawn;
    let trace = Arc::new(if options.trace {
        Trace::keeping_all()
    } else {
        Trace::default()
    });
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all().start_paused(true);
    // tokio draws from its runtime's generator to pick an unbiased
    // `select!`'s first branch and a `watch` receiver's wake-up slot
    // (SlateDB uses both): seeded, the run replays. Without the flag
    // (.cargo/config.toml) runs differ and `--replay` says so.
    #[cfg(tokio_unstable)]
    builder.rng_seed(tokio::runtime::RngSeed::from_bytes(
        &options.seed.to_le_bytes(),
    ));
    let runtime = builder.build().expect("a current-thread runtime");
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(simulate(options, swarm.as_ref(), &faults_on, trace.clone()))
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
        marks: counting.hits(),
        swarm: swarm.as_ref().map(Swarm::describe),
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(not a string)".to_string())
}

async fn simulate(
    options: &SimOptions,
    swarm: Option<&Swarm>,
    faults_on: &Cell<bool>,
    trace: Arc<Trace>,
) -> Vec<Violation> {
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
        apps: BTreeMap::new(),
        writers: options.writers,
        restores: 0,
        timings: swarm.map(|s| s.timings.clone()).unwrap_or_default(),
        foreign: (options.writers && swarm.is_some_and(|s| s.foreign_destination))
            .then_some(foreign::FOREIGN_INDEX),
        busy_writers: swarm.is_some_and(|s| s.busy_writers),
    };
    if let Some(swarm) = swarm {
        world.note(swarm.describe());
    }
    // A swarm seed draws its own longest gap, from 8 s: some seeds are
    // storms.
    let fault_gap_max = swarm.map_or(Duration::from_secs(40), |s| s.fault_gap_max);
    let fault_gap_min = Duration::from_secs(if swarm.is_some() { 2 } else { 5 });
    world.note(format!(
        "seed {} nodes {} databases {} faults {} writers {}",
        options.seed, options.nodes, options.databases, options.faults, options.writers
    ));
    world.write_config().await;
    if world.foreign.is_some() {
        foreign::claim_for_elsewhere(world.root.store().as_ref(), world.clock.now()).await;
        world.note("db000's destination belongs to s3://elsewhere/db000");
    }
    for index in 0..options.databases {
        world.register(index).await;
    }
    let mut nodes: Vec<SimNode> = (0..options.nodes)
        .map(|i| SimNode {
            id: format!("n{}", i + 1),
            skew: Arc::new(Skew::default()),
            run: None,
            paused_since: None,
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
    // Faults, one every 5-40 s of simulated time (a swarm seed's: 2 s to
    // its own longest gap).
    let spread = (fault_gap_max - fault_gap_min).as_millis() as u64;
    while started.elapsed() < faults_end && !options.faults.0.is_empty() {
        let wait = fault_gap_min + Duration::from_millis(world.draw(spread));
        tokio::time::sleep(wait).await;
        violations.extend(reap_panics(&mut world, &mut nodes).await);
        inject(&mut world, &mut nodes, &options.faults).await;
        // Now and then, one database's newest restore point, restored
        // while the faults go on: a point must restore from its commit on.
        if options.writers && world.draw(3) == 0 {
            let indexes: Vec<usize> = world.apps.keys().copied().collect();
            let index = indexes[world.draw(indexes.len() as u64) as usize];
            let found = world.judge_restore_point(index, Which::Newest).await;
            world.judged(found, &mut violations);
            // And its destination as `mirror verify` sees it then: a
            // manifest broken by a race is pruned away within minutes.
            let found = world.judge_verify(index).await;
            world.judged(found, &mut violations);
        }
    }
    // The faults stop: requests go through, paused nodes resume, and
    // crashed nodes either restart or stay gone.
    world.store.set_levels(FaultLevels::default());
    faults_on.set(false);
    // Some swarm seeds end their faults with a crash that stays: the
    // fleet must take the node's work over within the bound.
    let mut stays_gone = None;
    let running_nodes = nodes.iter().filter(|n| n.run.is_some()).count();
    if swarm.is_some_and(|s| s.last_crash) && running_nodes >= 2 {
        let which = world.draw(nodes.len() as u64) as usize;
        if crash(&world, &mut nodes[which]).await {
            stays_gone = Some(which);
        }
    }
    for (index, node) in nodes.iter_mut().enumerate() {
        if stays_gone == Some(index) {
            continue;
        }
        match &node.run {
            Some(run) => {
                run.pause.heal_root_cut();
                if run.pause.is_paused() {
                    node.toggle_pause(&world.timings);
                }
            }
            None => {
                if world.draw(2) == 0 {
                    world.start(node);
                }
            }
        }
    }
    // A fleet needs a node: if every one is down, the first comes back
    // (a fleet with none has nothing to judge but its absence).
    if nodes.iter().all(|n| n.run.is_none())
        && let Some(node) = nodes
            .iter_mut()
            .enumerate()
            .find(|(index, _)| stays_gone != Some(*index))
            .map(|(_, node)| node)
    {
        world.start(node);
    }
    // A narrowed config is a fault too: the full one comes back, and
    // the nodes must follow it (mirrors start again).
    if world.narrowed {
        world.narrowed = false;
        world.write_config().await;
        world.note("config narrowed=false");
    }
    world.note("faults stop");
    let until = faults_end.max(started.elapsed()) + CONVERGENCE_BOUND;
    tokio::time::sleep(until.saturating_sub(started.elapsed())).await;
    violations.extend(reap_panics(&mut world, &mut nodes).await);
    // Converged, and still so a few ticks later.
    for _ in 0..2 {
        let running = running(&nodes);
        let found = check::ownership(&world.root, world.clock.now(), &running).await;
        world.judged(found, &mut violations);
        if !violations.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(20)).await;
    }
    // With the fleet settled and the writers still going, each mirror's
    // newest restore point with its WAL run holds every write
    // acknowledged more than the tail's bound before the restore.
    if options.writers {
        // Removed databases' applications write on, unmirrored.
        let indexes: Vec<usize> = world.databases.keys().copied().collect();
        for index in indexes {
            let found = world.judge_recovery_point(index).await;
            world.judged(found, &mut violations);
        }
    }
    // Every acknowledged write reads back, by a fresh reader too.
    let apps: Vec<usize> = world.apps.keys().copied().collect();
    for index in apps {
        let app = world.apps.get_mut(&index).expect("an app");
        let found = app.finish().await;
        let acknowledged = app.acknowledged();
        world.note(format!(
            "app {} acknowledged {acknowledged}",
            database_url(index)
        ));
        world.judged(found, &mut violations);
    }
    // Each mirror's newest restore point, and its oldest kept.
    let indexes: Vec<usize> = world.apps.keys().copied().collect();
    for index in indexes {
        for which in [Which::Newest, Which::OldestKept] {
            let found = world.judge_restore_point(index, which).await;
            world.judged(found, &mut violations);
        }
        let found = world.judge_verify(index).await;
        world.judged(found, &mut violations);
    }
    // Every manifest written, judged by its epochs; every object deleted,
    // by the manifests of its moment (each history decoded once, for both).
    let manifests = world.store.manifests();
    let histories = histories(&manifests).await;
    let found = check::epochs(&histories);
    world.judged(found, &mut violations);
    let deletions = world.store.deletions();
    let mirrors = database_path(MIRROR_BUCKET);
    let at_mirrors = deletions
        .iter()
        .filter(|d| d.location.prefix_matches(&mirrors))
        .count();
    world.note(format!(
        "judging {} deletions, {at_mirrors} of them at mirrors",
        deletions.len()
    ));
    let found = collections(&histories, &deletions);
    world.judged(found, &mut violations);
    if world.foreign.is_some() {
        let found = foreign::judge(world.root.store().as_ref()).await;
        world.judged(found, &mut violations);
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
