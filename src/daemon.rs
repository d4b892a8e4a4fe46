//! A fleet node: heartbeat, compute ownership, supervise what it owns.
//!
//! Every `heartbeat_interval` a node overwrites its heartbeat, re-reads
//! the config when `config_poll` is due, lists `nodes/`, deletes stale
//! heartbeats, and reconciles its tasks to exactly the work it owns. There
//! is no leader: nodes that see the same heartbeats and config compute the
//! same assignment, and while views differ a task may briefly run twice,
//! which SlateDB's fencing and CAS make safe.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::compaction_code::CompactionCode;
use crate::config::{DatabaseSettings, NodeSettings};
use crate::copier::CopierOptions;
use crate::database::{DatabaseError, DatabaseHandle};
use crate::error::Error;
use crate::heartbeat::{
    self, HeartbeatBody, OutsideCompactor, ServiceTasks, TaskFailure, validate_node_id,
};
use crate::metrics::{Metrics, ServiceLabels, SlateDbRecorder};
use crate::mirror::run::{MirrorRuntime, MirrorSpec, PassHooks, run_mirror_task};
use crate::mirror::target::applied_targets;
use crate::outside_compactor::Sighting;
use crate::outside_compactor::records::EpochRecords;
use crate::ownership::{Assignment, LiveNode, database_assignments};
use crate::plugin::compaction::{CodeSpec, CompactionCodeSpec, FailureReport};
use crate::plugin::hook::{Clock, HookRunner, HookSpec, RunOutcome, Verdict, system_clock};
use crate::probes::{NodeProbes, NodeReport, TaskReport};
use crate::root::{
    ConfigPoller, FleetRoot, FleetView, HeartbeatObject, NODES_DIR, NodeSighting, node_view,
};
use crate::service::{Service, first_duplicate};
use crate::services::{ServiceError, ServiceSpec, run_service};

/// The first retry waits twice this; each failure doubles the wait.
const BACKOFF_START: Duration = Duration::from_secs(1);
/// The longest wait between retries of a failing task.
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A run that lasted this long was healthy: its failure starts the
/// backoff afresh instead of doubling an old one.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// How long a cancelled task may take to stop before it is abandoned.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// How long shutdown waits for every task before deleting the heartbeat,
/// unless `--shutdown-grace` says otherwise. Platforms must give the
/// process longer than this (Kubernetes' `terminationGracePeriodSeconds`).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// Heartbeats this many timeouts old are deleted by any node.
const DEAD_HEARTBEAT_TIMEOUTS: u32 = 10;
/// Failing tasks listed in a heartbeat body, at most.
const MAX_REPORTED_FAILURES: usize = 16;

/// Opens a database's store and admin handle. Tests swap in stores that
/// count requests or inject faults.
pub type DatabaseOpener = Arc<dyn Fn(&str) -> Result<DatabaseHandle, DatabaseError> + Send + Sync>;

/// The services a node runs; a node must never advertise work it would
/// not do.
pub const RUNNABLE_SERVICES: [Service; 4] = [
    Service::Gc,
    Service::CompactorCoordinator,
    Service::CompactionWorkers,
    Service::Mirror,
];

/// How to run a node.
#[derive(Clone)]
pub struct NodeOptions {
    /// 1-128 characters of `[A-Za-z0-9_-]`, unique in the fleet.
    pub node_id: String,
    /// The services this node offers (and so may be assigned).
    pub services: Vec<Service>,
    /// `--rclone`, for targets with `copier = "rclone"`.
    pub copiers: CopierOptions,
    /// `--max-mirror-jobs`: mirror passes and prunes at once (at least 1).
    pub max_mirror_jobs: usize,
    /// `--plugin-dir`: where WebAssembly plugins are loaded from.
    pub plugin_dirs: Vec<std::path::PathBuf>,
    /// `--plugin-cache`: compiled plugins; default `~/.cache/sleet/plugins`.
    pub plugin_cache: Option<std::path::PathBuf>,
    /// `--shutdown-grace`: how long a stopping node waits for its tasks.
    pub shutdown_grace: Duration,
    /// Where the node counts (served by `--listen` as `/metrics`).
    pub metrics: Arc<Metrics>,
    /// What `/healthz`, `/readyz` and `/status` answer from.
    pub probes: Arc<NodeProbes>,
    clock: Clock,
    opener: DatabaseOpener,
}

impl std::fmt::Debug for NodeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeOptions")
            .field("node_id", &self.node_id)
            .field("services", &self.services)
            .finish()
    }
}

impl NodeOptions {
    /// A node offering every service this build runs.
    pub fn new(node_id: impl Into<String>) -> Self {
        NodeOptions {
            node_id: node_id.into(),
            services: RUNNABLE_SERVICES.to_vec(),
            copiers: CopierOptions::default(),
            max_mirror_jobs: std::thread::available_parallelism().map_or(4, |n| n.get()),
            plugin_dirs: Vec::new(),
            plugin_cache: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            metrics: Arc::new(Metrics::default()),
            probes: Arc::new(NodeProbes::default()),
            clock: system_clock(),
            opener: Arc::new(|url: &str| DatabaseHandle::open(url)),
        }
    }

    /// The rclone binary for `copier = "rclone"` targets (default: PATH).
    pub fn with_rclone(mut self, binary: impl Into<std::path::PathBuf>) -> Self {
        self.copiers.rclone = Some(binary.into());
        self
    }

    /// Load WebAssembly plugins from `dirs`, caching native code in
    /// `cache` (default `~/.cache/sleet/plugins`).
    pub fn with_plugin_dirs(
        mut self,
        dirs: impl IntoIterator<Item = std::path::PathBuf>,
        cache: Option<std::path::PathBuf>,
    ) -> Self {
        self.plugin_dirs = dirs.into_iter().collect();
        self.plugin_cache = cache;
        self
    }

    /// At most `jobs` mirror passes or prunes at once (0 counts as 1).
    pub fn with_max_mirror_jobs(mut self, jobs: usize) -> Self {
        self.max_mirror_jobs = jobs.max(1);
        self
    }

    /// Wait up to `grace` for tasks to stop on shutdown.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Count into `metrics` and report health to `probes` (shared with
    /// the endpoint that serves them).
    pub fn with_telemetry(mut self, metrics: Arc<Metrics>, probes: Arc<NodeProbes>) -> Self {
        self.metrics = metrics;
        self.probes = probes;
        self
    }

    /// Offer exactly these services (an empty list offers none).
    pub fn with_services(mut self, services: impl IntoIterator<Item = Service>) -> Self {
        self.services = services.into_iter().collect();
        self
    }

    /// The time hooks are told (tests drive it).
    #[doc(hidden)]
    pub fn with_hook_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    #[doc(hidden)]
    pub fn with_database_opener(mut self, opener: DatabaseOpener) -> Self {
        self.opener = opener;
        self
    }

    fn validate(&self) -> Result<(), Error> {
        validate_node_id(&self.node_id).map_err(Error::InvalidNodeId)?;
        if let Some(dup) = first_duplicate(&self.services) {
            return Err(Error::DuplicateService(dup));
        }
        Ok(())
    }
}

/// A task's settings: its service's, and the hooks around its runs. A
/// change to either restarts the task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    pub service: ServiceSpec,
    pub hooks: Vec<HookSpec>,
}

/// One unit of work a node may own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskKey {
    pub database: String,
    pub service: Service,
    pub target: Option<String>,
}

/// The tasks `node_id` owns, each with the settings it runs with.
///
/// The node always counts itself live with the services it offers, so a
/// node whose own heartbeat is missing from a listing (first tick, a slow
/// store) still takes its share rather than none.
pub fn owned_tasks(
    node_id: &str,
    offered: &[Service],
    sightings: &BTreeMap<String, NodeSighting>,
    view: &FleetView,
) -> BTreeMap<TaskKey, TaskSpec> {
    let mut live: Vec<LiveNode<'_>> = sightings
        .values()
        .filter(|s| s.live && s.node_id != node_id)
        .map(|s| LiveNode {
            id: &s.node_id,
            services: &s.services,
        })
        .collect();
    live.push(LiveNode {
        id: node_id,
        services: offered,
    });
    let hash = view.fleet.node.resolve().placement_hash;
    let mut owned = BTreeMap::new();
    for (url, file) in &view.databases {
        let settings = view.fleet.resolve_database(file);
        for assignment in database_assignments(url, &settings, &live, hash) {
            if !assignment.owners.iter().any(|o| o == node_id) {
                continue;
            }
            if let Some(service) = task_spec(&assignment, url, &settings, view) {
                let spec = TaskSpec {
                    hooks: crate::hooks::specs(assignment.service, &settings, &view.fleet),
                    service,
                };
                let key = TaskKey {
                    database: url.clone(),
                    service: assignment.service,
                    target: assignment.target,
                };
                owned.insert(key, spec);
            }
        }
    }
    owned
}

/// The compaction plugins a database names, with the limits the fleet
/// grants them.
fn compaction_code_spec(
    settings: &DatabaseSettings,
    fleet: &crate::config::FleetConfig,
) -> CompactionCodeSpec {
    use crate::plugin::PluginKind;
    let code = &settings.compaction_code;
    let spec = |code: &Option<crate::config::CodeSettings>, kind| {
        code.as_ref().map(|code| CodeSpec {
            plugin: code.plugin.clone(),
            config: code.config.clone(),
            limits: fleet.plugin_limits(&code.plugin, kind),
        })
    };
    CompactionCodeSpec {
        merge_operator: spec(&code.merge_operator, PluginKind::MergeOperator),
        compaction_filter: spec(&code.compaction_filter, PluginKind::CompactionFilter),
    }
}

fn task_spec(
    assignment: &Assignment,
    database: &str,
    settings: &DatabaseSettings,
    view: &FleetView,
) -> Option<ServiceSpec> {
    match assignment.service {
        Service::Gc => Some(ServiceSpec::Gc(
            settings.gc.clone(),
            settings
                .idle
                .for_gc(settings.gc.linger(), settings.gc.shortest_min_age()),
        )),
        Service::CompactorCoordinator => Some(ServiceSpec::Coordinator(
            settings.coordinator.clone(),
            settings.outside_compactor,
            settings.idle.for_coordinator(settings.gc.manifest.min_age),
            compaction_code_spec(settings, &view.fleet),
        )),
        Service::CompactionWorkers => Some(ServiceSpec::Workers(
            settings.workers.clone(),
            settings.outside_compactor,
            settings.idle.for_workers(settings.gc.compactions.min_age),
            compaction_code_spec(settings, &view.fleet),
        )),
        Service::Mirror => {
            let name = assignment.target.as_deref()?;
            let target = applied_targets(database, settings)
                .into_iter()
                .find(|t| t.name == name)?;
            Some(ServiceSpec::Mirror(MirrorSpec {
                target: name.to_string(),
                destination_registered: view.databases.contains_key(&target.destination),
                destination: target.destination,
                limits: crate::mirror_ops::target_limits(&view.fleet, target.settings),
                settings: target.settings.clone(),
            }))
        }
    }
}

// ---------------------------------------------------------------------------
// Task states, shared between supervisors and the heartbeat
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Running,
    Backoff,
    /// A compactor outside the fleet holds the database: the task waits
    /// to look again, and is neither running nor failing.
    StoodDown(Sighting),
}

#[derive(Debug, Clone)]
struct TaskState {
    /// Which supervisor wrote this, so a stopping one never erases the
    /// state of its replacement.
    instance: u64,
    phase: Phase,
    last_error: Option<String>,
}

#[derive(Debug, Default, Clone)]
struct TaskBoard {
    states: Arc<Mutex<HashMap<TaskKey, TaskState>>>,
    /// Runs or passes a hook deferred, with the reason.
    skips: Arc<Mutex<HashMap<TaskKey, String>>>,
    /// The latest failed compaction call of each compactor task, and when.
    compaction_failures: Arc<Mutex<HashMap<TaskKey, (Instant, String)>>>,
}

/// How long a failed compaction job stays in the heartbeat after the
/// last failure: SlateDB retries a failing job within seconds, so one
/// that stopped failing this long ago succeeded or is no longer tried.
const COMPACTION_FAILURE_SHOWN: Duration = Duration::from_secs(300);

impl TaskBoard {
    /// Records (or, with `None`, clears) a hook's deferral of a task.
    fn set_skip(&self, key: &TaskKey, reason: Option<String>) {
        let mut skips = self.skips.lock().expect("task board lock");
        match reason {
            Some(reason) => skips.insert(key.clone(), reason),
            None => skips.remove(key),
        };
    }

    /// Deferred tasks with the hook's reason, a bounded sample.
    fn skipped(&self) -> Vec<TaskFailure> {
        let skips = self.skips.lock().expect("task board lock");
        let mut skipped: Vec<TaskFailure> = skips
            .iter()
            .map(|(k, reason)| TaskFailure {
                database: k.database.clone(),
                service: k.service,
                target: k.target.clone(),
                error: reason.clone(),
            })
            .collect();
        skipped.sort_by(|a, b| (&a.database, a.service).cmp(&(&b.database, b.service)));
        skipped.truncate(MAX_REPORTED_FAILURES);
        skipped
    }

    /// Records a failed compaction call of `key`'s task.
    fn report_compaction_failure(&self, key: &TaskKey, message: String) {
        let mut failures = self.compaction_failures.lock().expect("task board lock");
        failures.insert(key.clone(), (Instant::now(), message));
    }

    /// Compactor tasks whose jobs failed lately, with the latest error, a
    /// bounded sample.
    fn failing_compactions(&self) -> Vec<TaskFailure> {
        let mut failures = self.compaction_failures.lock().expect("task board lock");
        failures.retain(|_, (at, _)| at.elapsed() < COMPACTION_FAILURE_SHOWN);
        let mut failing: Vec<TaskFailure> = failures
            .iter()
            .map(|(k, (_, message))| TaskFailure {
                database: k.database.clone(),
                service: k.service,
                target: None,
                error: message.clone(),
            })
            .collect();
        failing.sort_by(|a, b| (&a.database, a.service).cmp(&(&b.database, b.service)));
        failing.truncate(MAX_REPORTED_FAILURES);
        failing
    }

    /// A report that records a task's failed compaction calls.
    fn compaction_report(&self, key: &TaskKey) -> FailureReport {
        let (board, key) = (self.clone(), key.clone());
        Arc::new(move |message| board.report_compaction_failure(&key, message))
    }

    fn set(&self, key: &TaskKey, instance: u64, phase: Phase, last_error: Option<String>) {
        let mut states = self.states.lock().expect("task board lock");
        states.insert(
            key.clone(),
            TaskState {
                instance,
                phase,
                last_error,
            },
        );
    }

    /// Whether this supervisor's task last stood down for an outside
    /// compactor.
    fn is_stood_down(&self, key: &TaskKey, instance: u64) -> bool {
        let states = self.states.lock().expect("task board lock");
        states
            .get(key)
            .is_some_and(|s| s.instance == instance && matches!(s.phase, Phase::StoodDown(_)))
    }

    fn remove(&self, key: &TaskKey, instance: u64) {
        let mut states = self.states.lock().expect("task board lock");
        if states.get(key).is_some_and(|s| s.instance == instance) {
            states.remove(key);
            self.set_skip(key, None);
            let mut failures = self.compaction_failures.lock().expect("task board lock");
            failures.remove(key);
        }
    }

    /// Per-service counts for every offered service, and failing tasks.
    fn summary(&self, offered: &[Service]) -> (Vec<ServiceTasks>, Vec<TaskFailure>) {
        let states = self.states.lock().expect("task board lock");
        let counts = offered
            .iter()
            .map(|&service| {
                let of = |phase| {
                    states
                        .iter()
                        .filter(|(k, s)| k.service == service && s.phase == phase)
                        .count() as u64
                };
                ServiceTasks {
                    service,
                    running: of(Phase::Running),
                    backoff: of(Phase::Backoff),
                }
            })
            .collect();
        let mut failing: Vec<TaskFailure> = states
            .iter()
            .filter(|(_, s)| !matches!(s.phase, Phase::StoodDown(_)))
            .filter_map(|(k, s)| {
                Some(TaskFailure {
                    database: k.database.clone(),
                    service: k.service,
                    target: k.target.clone(),
                    error: s.last_error.clone()?,
                })
            })
            .collect();
        failing.sort_by(|a, b| (&a.database, a.service).cmp(&(&b.database, b.service)));
        failing.truncate(MAX_REPORTED_FAILURES);
        (counts, failing)
    }

    /// What `/status` shows of the tasks `owned`: each with its state
    /// (`starting` until its supervisor reports) and last error.
    fn reports<'a>(&self, owned: impl Iterator<Item = &'a TaskKey>) -> Vec<TaskReport> {
        let states = self.states.lock().expect("task board lock");
        let mut reports: Vec<TaskReport> = owned
            .map(|key| {
                let state = states.get(key);
                TaskReport {
                    database: key.database.clone(),
                    service: key.service.to_string(),
                    target: key.target.clone(),
                    state: match state.map(|s| &s.phase) {
                        None => "starting",
                        Some(Phase::Running) => "running",
                        Some(Phase::Backoff) => "backoff",
                        Some(Phase::StoodDown(_)) => "stood_down",
                    }
                    .to_string(),
                    last_error: state.and_then(|s| s.last_error.clone()),
                }
            })
            .collect();
        reports.sort_by(|a, b| {
            (&a.database, &a.service, &a.target).cmp(&(&b.database, &b.service, &b.target))
        });
        reports
    }

    /// Databases this node stands down for, one entry each (coordinator
    /// and workers may both report one): the count and a bounded sample.
    fn outside_compactors(&self) -> (u64, Vec<OutsideCompactor>) {
        let states = self.states.lock().expect("task board lock");
        let by_database: BTreeMap<&str, &Sighting> = states
            .iter()
            .filter_map(|(k, s)| match &s.phase {
                Phase::StoodDown(sighting) => Some((k.database.as_str(), sighting)),
                _ => None,
            })
            .collect();
        let count = by_database.len() as u64;
        let sample = by_database
            .into_iter()
            .take(MAX_REPORTED_FAILURES)
            .map(|(database, s)| OutsideCompactor {
                database: database.to_string(),
                compactor_epoch: s.compactor_epoch,
                writer_epoch: s.writer_epoch,
                since: s
                    .first_seen
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                evidence: s.evidence.as_str().to_string(),
            })
            .collect();
        (count, sample)
    }
}

// ---------------------------------------------------------------------------
// The node
// ---------------------------------------------------------------------------

struct RunningTask {
    spec: TaskSpec,
    token: CancellationToken,
    /// The supervisor's task: a stopped one may still be finishing after
    /// its replacement under the same key started.
    id: tokio::task::Id,
}

struct Node {
    root: FleetRoot,
    id: String,
    offered: Vec<Service>,
    heartbeat_path: Path,
    opener: DatabaseOpener,
    /// The compactor epochs the fleet took, and outside compactors seen.
    records: EpochRecords,
    /// Plugins loaded from `--plugin-dir`, if any.
    plugins: Option<Arc<crate::plugin::PluginSet>>,
    /// The time hooks are told.
    clock: Clock,
    mirror: MirrorRuntime,
    poller: ConfigPoller,
    view: FleetView,
    last_poll: Instant,
    running: HashMap<TaskKey, RunningTask>,
    task_keys: HashMap<tokio::task::Id, TaskKey>,
    tasks: JoinSet<()>,
    board: TaskBoard,
    next_instance: u64,
    metrics: Arc<Metrics>,
    probes: Arc<NodeProbes>,
    shutdown_grace: Duration,
    /// Whether the last config poll read the fleet root.
    config_read: bool,
}

/// Runs a node until `shutdown` is cancelled, then stops its tasks
/// (waiting a bounded time) and deletes its heartbeat so peers take over
/// at their next tick.
pub async fn run_node(
    root: FleetRoot,
    options: NodeOptions,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    options.validate()?;
    let mut node = Node::start(root, options).await?;
    loop {
        node.tick().await;
        let interval = node.settings().heartbeat_interval;
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
        }
    }
    node.shut_down().await;
    Ok(())
}

impl Node {
    async fn start(root: FleetRoot, options: NodeOptions) -> Result<Node, Error> {
        let name = heartbeat::object_name(&options.node_id, &options.services);
        let heartbeat_path = root.path(&format!("{NODES_DIR}/{name}"));
        info!(node_id = %options.node_id, root = %root.url(), heartbeat = %name, "sleet node starting");
        let mut poller = ConfigPoller::new();
        let view = poller.poll(&root).await;
        log_warnings(&view);
        let cache = options
            .plugin_cache
            .clone()
            .or_else(crate::plugin::PluginRuntime::default_cache_dir);
        let observer: crate::plugin::runtime::PluginObserver = {
            let metrics = options.metrics.clone();
            Arc::new(move |event| metrics.record_plugin(event))
        };
        let plugins = crate::plugin::load_dirs(
            &options.plugin_dirs,
            cache,
            view.fleet.plugin_pins(),
            Some(observer),
        )
        .await
        .map_err(Error::Plugins)?;
        let config_read = poller.read_root();
        if config_read {
            options.metrics.config_read();
        }
        let mut copiers = options.copiers;
        copiers.plugins = plugins.clone();
        copiers.node_id = options.node_id.clone();
        Ok(Node {
            records: EpochRecords::new(root.clone(), options.node_id.clone()),
            root,
            id: options.node_id,
            offered: options.services,
            heartbeat_path,
            opener: options.opener,
            plugins,
            clock: options.clock,
            mirror: MirrorRuntime::new(copiers, options.max_mirror_jobs)
                .with_metrics(options.metrics.clone()),
            poller,
            view,
            last_poll: Instant::now(),
            running: HashMap::new(),
            task_keys: HashMap::new(),
            tasks: JoinSet::new(),
            board: TaskBoard::default(),
            next_instance: 0,
            metrics: options.metrics,
            probes: options.probes,
            shutdown_grace: options.shutdown_grace,
            config_read,
        })
    }

    fn settings(&self) -> NodeSettings {
        self.view.fleet.node.resolve()
    }

    /// One tick. Each store step is bounded by the heartbeat interval, so
    /// a store that hangs delays the loop, never stops it (the liveness
    /// probe depends on that).
    async fn tick(&mut self) {
        let started = Instant::now();
        let step = self.settings().heartbeat_interval;
        self.reap_finished();
        let heartbeat_written = bounded(step, self.put_heartbeat()).await == Some(true);
        if !heartbeat_written {
            self.metrics.node.heartbeat_put_failures.inc();
        }
        if !self.config_read || self.last_poll.elapsed() >= self.settings().config_poll {
            self.poll_config(step).await;
        }
        let live_nodes = match bounded(step, self.root.list_heartbeats()).await {
            Some(Ok(heartbeats)) => {
                let now = Utc::now();
                let sightings = node_view(&heartbeats, now, self.settings().heartbeat_timeout);
                bounded(step, self.delete_stale_heartbeats(&heartbeats, now)).await;
                let owned = owned_tasks(&self.id, &self.offered, &sightings, &self.view);
                self.reconcile(owned);
                let others = sightings
                    .values()
                    .filter(|s| s.live && s.node_id != self.id)
                    .count();
                Some(others as u64 + 1)
            }
            Some(Err(e)) => {
                warn!("{e}; keeping current assignments");
                None
            }
            None => {
                warn!("listing heartbeats took over {step:?}; keeping current assignments");
                None
            }
        };
        if live_nodes.is_none() {
            self.metrics.node.heartbeat_list_failures.inc();
        }
        self.publish(heartbeat_written, live_nodes);
        self.metrics.tick_took(started.elapsed());
    }

    /// Re-reads the config, within `step`; a poll that cannot read the
    /// root keeps the last good view and is retried at the next tick.
    async fn poll_config(&mut self, step: Duration) {
        self.last_poll = Instant::now();
        self.config_read = match bounded(step, self.poller.poll(&self.root)).await {
            Some(view) => {
                self.view = view;
                log_warnings(&self.view);
                self.poller.read_root()
            }
            None => {
                warn!("the config poll took over {step:?}; keeping the last good config");
                false
            }
        };
        if self.config_read {
            self.metrics.config_read();
        } else {
            self.metrics.node.config_poll_failures.inc();
        }
    }

    /// Shows this tick's outcome to the probes and the task gauges.
    fn publish(&self, heartbeat_written: bool, live_nodes: Option<u64>) {
        let tasks = self.board.reports(self.running.keys());
        if let Some(live) = live_nodes {
            self.metrics.node.live_nodes.set(live as i64);
        }
        for service in &self.offered {
            let service = service.to_string();
            let (owned, states) = crate::probes::task_states(&tasks, &service);
            self.metrics.record_tasks(&service, owned, &states);
        }
        let report = NodeReport {
            node_id: self.id.clone(),
            services: self.offered.iter().map(Service::to_string).collect(),
            live_nodes: live_nodes.unwrap_or(0),
            config_read: self.config_read,
            heartbeat_written,
            tasks,
        };
        self.probes
            .ticked(report, self.settings().heartbeat_interval);
    }

    /// Writes this node's heartbeat; false when the PUT failed.
    async fn put_heartbeat(&self) -> bool {
        let (counts, failing) = self.board.summary(&self.offered);
        let mut body = HeartbeatBody::new(&self.id, counts);
        body.failing = failing;
        body.plugins = self
            .plugins
            .as_ref()
            .map(|p| p.infos().iter().map(loaded_plugin).collect())
            .unwrap_or_default();
        body.skipped = self.board.skipped();
        body.failing_compactions = self.board.failing_compactions();
        (body.outside_compactor_count, body.outside_compactors) = self.board.outside_compactors();
        let bytes = serde_json::to_vec(&body).expect("heartbeat bodies serialize");
        match self
            .root
            .store()
            .put(&self.heartbeat_path, PutPayload::from(bytes))
            .await
        {
            Ok(_) => true,
            Err(e) => {
                warn!("failed to PUT heartbeat {}: {e}", self.heartbeat_path);
                false
            }
        }
    }

    /// Deletes this node's heartbeats under old names (it changed roles)
    /// and anyone's heartbeat dead for ten timeouts.
    async fn delete_stale_heartbeats(
        &self,
        heartbeats: &[HeartbeatObject],
        now: chrono::DateTime<Utc>,
    ) {
        let dead_after = self.settings().heartbeat_timeout * DEAD_HEARTBEAT_TIMEOUTS;
        for hb in heartbeats {
            let age = (now - hb.last_modified).to_std().unwrap_or_default();
            let renamed = hb.node_id == self.id && hb.path != self.heartbeat_path;
            if !renamed && age < dead_after {
                continue;
            }
            match self.root.store().delete(&hb.path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                    info!(heartbeat = %hb.path, "deleted a stale heartbeat")
                }
                Err(e) => warn!("failed to delete stale heartbeat {}: {e}", hb.path),
            }
        }
    }

    /// Forgets supervisors that have exited, so owned keys restart.
    fn reap_finished(&mut self) {
        while let Some(done) = self.tasks.try_join_next_with_id() {
            let id = match done {
                Ok((id, ())) => id,
                Err(e) => {
                    if e.is_panic() {
                        warn!("a task supervisor panicked: {e}");
                    }
                    e.id()
                }
            };
            // Only the supervisor that is still the key's: a replaced one
            // exiting must not orphan its replacement (which the next
            // reconcile would then start a second time, and shutdown
            // would never cancel).
            if let Some(key) = self.task_keys.remove(&id)
                && self.running.get(&key).is_some_and(|task| task.id == id)
            {
                self.running.remove(&key);
            }
        }
    }

    /// Stops tasks no longer owned or whose settings changed; starts owned
    /// ones that are not running.
    fn reconcile(&mut self, owned: BTreeMap<TaskKey, TaskSpec>) {
        self.running.retain(|key, task| {
            let keep = owned.get(key) == Some(&task.spec);
            if !keep {
                info!(database = %key.database, service = %key.service, "stopping task");
                task.token.cancel();
            }
            keep
        });
        for (key, spec) in owned {
            if !self.running.contains_key(&key) {
                self.spawn(key, spec);
            }
        }
    }

    fn spawn(&mut self, key: TaskKey, spec: TaskSpec) {
        info!(database = %key.database, service = %key.service, "starting task");
        let token = CancellationToken::new();
        self.next_instance += 1;
        let supervisor = Supervisor {
            key: key.clone(),
            spec: spec.service.clone(),
            hooks: HookRunner {
                hooks: spec.hooks.clone(),
                plugins: self.plugins.clone(),
                node_id: self.id.clone(),
                clock: self.clock.clone(),
            },
            instance: self.next_instance,
            board: self.board.clone(),
            opener: self.opener.clone(),
            records: self.records.clone(),
            mirror: self.mirror.clone(),
            metrics: self.metrics.clone(),
            fenced_wait: self.settings().heartbeat_interval,
        };
        let handle = self.tasks.spawn(supervisor.run(token.clone()));
        let id = handle.id();
        self.task_keys.insert(id, key.clone());
        self.running.insert(key, RunningTask { spec, token, id });
    }

    async fn shut_down(mut self) {
        info!("shutting down: stopping tasks and deleting heartbeat");
        for task in self.running.values() {
            task.token.cancel();
        }
        let drained = tokio::time::timeout(self.shutdown_grace, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(
                "{} tasks did not stop within {}s; abandoning them",
                self.tasks.len(),
                self.shutdown_grace.as_secs()
            );
            self.tasks.shutdown().await;
        }
        match self.root.store().delete(&self.heartbeat_path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => warn!("failed to delete heartbeat {}: {e}", self.heartbeat_path),
        }
    }
}

/// `work` within `limit`; `None` when it took longer (and was dropped).
async fn bounded<T>(limit: Duration, work: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::time::timeout(limit, work).await.ok()
}

/// A loaded plugin as the heartbeat records it.
fn loaded_plugin(info: &crate::plugin::PluginInfo) -> heartbeat::LoadedPlugin {
    heartbeat::LoadedPlugin {
        name: info.name.clone(),
        sha256: info.sha256.clone(),
        kind: match info.kind {
            crate::plugin::PluginKind::Copier => heartbeat::LoadedPluginKind::Copier,
            crate::plugin::PluginKind::Hook => heartbeat::LoadedPluginKind::Hook,
            crate::plugin::PluginKind::MergeOperator => heartbeat::LoadedPluginKind::MergeOperator,
            crate::plugin::PluginKind::CompactionFilter => {
                heartbeat::LoadedPluginKind::CompactionFilter
            }
        },
    }
}

fn log_warnings(view: &FleetView) {
    for w in &view.warnings {
        warn!("{w}");
    }
}

// ---------------------------------------------------------------------------
// Supervision
// ---------------------------------------------------------------------------

/// Runs one task until it is cancelled, retrying failures with
/// exponential backoff.
struct Supervisor {
    key: TaskKey,
    spec: ServiceSpec,
    hooks: HookRunner,
    instance: u64,
    board: TaskBoard,
    opener: DatabaseOpener,
    records: EpochRecords,
    mirror: MirrorRuntime,
    metrics: Arc<Metrics>,
    /// A fenced coordinator waits one heartbeat interval, then reruns if
    /// this node still owns it (the views that disagreed have converged).
    /// The rerun first looks at who fenced it: a compactor outside the
    /// fleet is never fenced back.
    fenced_wait: Duration,
}

impl Supervisor {
    async fn run(self, token: CancellationToken) {
        let mut backoff = BACKOFF_START;
        let mut attempt = 0;
        let mut last_error = None;
        loop {
            attempt += 1;
            let started = Instant::now();
            let result = match self.ask_hooks(attempt, last_error.clone()).await {
                HookGate::Skip => {
                    // Deferred: ask again at the next tick.
                    attempt -= 1;
                    tokio::select! {
                        _ = token.cancelled() => break,
                        _ = tokio::time::sleep(self.fenced_wait) => continue,
                    }
                }
                HookGate::Fail(reason) => Err(ServiceError::Hook(reason)),
                HookGate::Go(context) => {
                    // A task that stood down stays shown as standing down
                    // while it looks again; `run_task` marks it running
                    // once the service really starts.
                    if !self.board.is_stood_down(&self.key, self.instance) {
                        self.board
                            .set(&self.key, self.instance, Phase::Running, None);
                    }
                    let result = self.run_once(&token).await;
                    self.hooks
                        .after(context, run_outcome(&result, &token, started.elapsed()));
                    result
                }
            };
            if token.is_cancelled() {
                break;
            }
            let wait = match result {
                Ok(()) => {
                    info!(database = %self.key.database, service = %self.key.service,
                        "task ended; it restarts at the next tick if still owned");
                    break;
                }
                Err(e) if e.is_fenced() => {
                    self.count(&self.metrics.tasks.fences);
                    info!(database = %self.key.database, "coordinator fenced; looking at who holds the epoch after one heartbeat interval");
                    backoff = BACKOFF_START;
                    self.fenced_wait
                }
                Err(ref e @ ServiceError::OutsideCompactor { ref sighting, .. }) => {
                    let sighting = Sighting::clone(sighting);
                    warn!(database = %self.key.database, service = %self.key.service, "{e}");
                    backoff = BACKOFF_START;
                    self.board
                        .set(&self.key, self.instance, Phase::StoodDown(sighting), None);
                    self.spec.outside_recheck().unwrap_or(self.fenced_wait)
                }
                Err(e) => {
                    if started.elapsed() >= HEALTHY_RUN {
                        backoff = BACKOFF_START;
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    self.count(&self.metrics.tasks.restarts);
                    warn!(database = %self.key.database, service = %self.key.service,
                        "task failed: {e}; retrying in {}s", backoff.as_secs());
                    last_error = Some(e.to_string());
                    self.board.set(
                        &self.key,
                        self.instance,
                        Phase::Backoff,
                        Some(e.to_string()),
                    );
                    backoff
                }
            };
            tokio::select! {
                _ = token.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        self.board.remove(&self.key, self.instance);
    }

    fn count(
        &self,
        family: &prometheus_client::metrics::family::Family<
            ServiceLabels,
            prometheus_client::metrics::counter::Counter,
        >,
    ) {
        family
            .get_or_create(&ServiceLabels {
                service: self.key.service.to_string(),
            })
            .inc();
    }

    /// Asks the task's hooks whether this run may start, recording a
    /// deferral where the heartbeat (and so `status`) shows it.
    async fn ask_hooks(&self, attempt: u32, last_error: Option<String>) -> HookGate {
        let context = self.hooks.context(
            &self.key.database,
            self.key.service,
            self.key.target.as_deref(),
            "task",
            attempt,
            last_error,
        );
        if self.hooks.is_empty() {
            return HookGate::Go(context);
        }
        match self.hooks.before(&context).await {
            Verdict::Allow => {
                self.board.set_skip(&self.key, None);
                HookGate::Go(context)
            }
            Verdict::Skip(reason) => {
                info!(database = %self.key.database, service = %self.key.service, "run deferred: {reason}");
                self.board.set_skip(&self.key, Some(reason.clone()));
                self.hooks.after(
                    context,
                    RunOutcome {
                        status: "skipped",
                        error: Some(reason),
                        duration: Duration::ZERO,
                    },
                );
                HookGate::Skip
            }
            Verdict::Fail(reason) => HookGate::Fail(reason),
        }
    }

    /// One run of the service. Cancellation is passed to SlateDB, which
    /// stops cleanly; a run that does not stop within the grace period
    /// (a store that hangs during startup) is abandoned.
    async fn run_once(&self, token: &CancellationToken) -> Result<(), ServiceError> {
        let run = self.run_task(token.clone());
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => result,
            _ = token.cancelled() => match tokio::time::timeout(STOP_GRACE, &mut run).await {
                Ok(result) => result,
                Err(_) => {
                    warn!(database = %self.key.database, service = %self.key.service,
                        "task did not stop within {}s of cancellation; abandoning it", STOP_GRACE.as_secs());
                    Ok(())
                }
            },
        }
    }
}

impl Supervisor {
    /// The merge operator and filter the task's compactor runs, built
    /// from this node's plugins (coordinator and workers only).
    fn compaction_code(&self, spec: &ServiceSpec) -> Result<Option<CompactionCode>, ServiceError> {
        let Some(code) = spec.compaction_code() else {
            return Ok(None);
        };
        let built = CompactionCode::build(
            code,
            self.hooks.plugins.as_deref(),
            &self.hooks.node_id,
            &self.key.database,
            self.board.compaction_report(&self.key),
        );
        built
            .map(Some)
            .map_err(|e| ServiceError::Plugin(e.to_string()))
    }

    async fn run_task(&self, token: CancellationToken) -> Result<(), ServiceError> {
        let source = (self.opener)(&self.key.database)?;
        let started = || {
            self.board
                .set(&self.key, self.instance, Phase::Running, None)
        };
        match &self.spec {
            ServiceSpec::Mirror(spec) => {
                let destination = (self.opener)(&spec.destination)?;
                started();
                let (board, key) = (self.board.clone(), self.key.clone());
                let passes = PassHooks {
                    runner: self.hooks.clone(),
                    report_skip: Arc::new(move |reason| board.set_skip(&key, reason)),
                };
                Ok(
                    run_mirror_task(source, destination, spec, &self.mirror, &passes, &token)
                        .await?,
                )
            }
            spec => {
                let recorder = Arc::new(SlateDbRecorder::new(
                    self.metrics.clone(),
                    &self.key.database,
                ));
                let code = self.compaction_code(spec)?;
                let code = code.as_ref();
                run_service(
                    &source,
                    spec,
                    code,
                    &self.records,
                    &started,
                    recorder,
                    token,
                )
                .await
            }
        }
    }
}

/// What a task's hooks said before a run.
enum HookGate {
    Go(crate::plugin::hook::RunContext),
    Skip,
    Fail(String),
}

/// How a run ended, for its hooks.
fn run_outcome(
    result: &Result<(), ServiceError>,
    token: &CancellationToken,
    duration: Duration,
) -> RunOutcome {
    let (status, error) = match result {
        _ if token.is_cancelled() => ("cancelled", None),
        Ok(()) => ("ok", None),
        Err(e) if e.outside_compactor().is_some() => ("skipped", Some(e.to_string())),
        Err(e) => ("error", Some(e.to_string())),
    };
    RunOutcome {
        status,
        error,
        duration,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DatabaseConfig, FleetConfig, parse_database_config};

    fn sighting(id: &str, services: &[Service], live: bool) -> (String, NodeSighting) {
        (
            id.to_string(),
            NodeSighting {
                node_id: id.into(),
                services: services.to_vec(),
                age: Duration::ZERO,
                live,
                path: Path::from(format!("nodes/{id}.json")),
            },
        )
    }

    fn view(databases: &[(&str, &str)]) -> FleetView {
        let fleet = FleetConfig::default();
        FleetView {
            databases: databases
                .iter()
                .map(|(url, toml)| {
                    (
                        url.to_string(),
                        parse_database_config(&fleet, toml).unwrap(),
                    )
                })
                .collect(),
            fleet,
            warnings: vec![],
        }
    }

    #[test]
    fn every_task_has_exactly_one_owner_among_live_nodes() {
        let all = RUNNABLE_SERVICES;
        let sightings: BTreeMap<_, _> = [
            sighting("a", &all, true),
            sighting("b", &all, true),
            sighting("c", &all, true),
            sighting("dead", &all, false),
        ]
        .into();
        let dbs: Vec<(String, &str)> = (0..30).map(|i| (format!("s3://b/db{i}"), "")).collect();
        let dbs: Vec<(&str, &str)> = dbs.iter().map(|(u, t)| (u.as_str(), *t)).collect();
        let v = view(&dbs);
        let mut owners: BTreeMap<TaskKey, Vec<&str>> = BTreeMap::new();
        for id in ["a", "b", "c"] {
            for key in owned_tasks(id, &all, &sightings, &v).into_keys() {
                owners.entry(key).or_default().push(id);
            }
        }
        assert_eq!(owners.len(), 30 * 3);
        assert!(owners.values().all(|o| o.len() == 1), "{owners:?}");
        let shares: Vec<usize> = ["a", "b", "c"]
            .iter()
            .map(|id| owners.values().filter(|o| o[0] == *id).count())
            .collect();
        assert!(shares.iter().all(|&n| n > 0), "work spreads: {shares:?}");
    }

    #[test]
    fn a_node_counts_itself_live_and_respects_roles() {
        let sightings = BTreeMap::from([sighting("peer", &[Service::CompactionWorkers], true)]);
        let v = view(&[("s3://b/db", "[compaction-workers]\ncount = 2")]);
        let owned = owned_tasks(
            "me",
            &[Service::Gc, Service::CompactionWorkers],
            &sightings,
            &v,
        );
        let services: Vec<_> = owned.keys().map(|k| k.service).collect();
        assert_eq!(
            services,
            [Service::Gc, Service::CompactionWorkers],
            "absent from the listing, still owns"
        );
        let peer = owned_tasks("peer", &[Service::CompactionWorkers], &sightings, &v);
        assert_eq!(peer.len(), 1, "count = 2 spans both nodes");
        assert!(owned_tasks("me", &[], &sightings, &v).is_empty());
        let disabled = view(&[("s3://b/db", "services = []")]);
        assert!(owned_tasks("me", &RUNNABLE_SERVICES, &sightings, &disabled).is_empty());
    }

    #[test]
    fn specs_change_only_with_their_own_settings() {
        let fleet = FleetConfig::default();
        let a = fleet.resolve_database(&DatabaseConfig::default());
        let b = fleet.resolve_database(
            &parse_database_config(&fleet, "[gc.manifest]\nmin_age = \"1m\"").unwrap(),
        );
        assert_ne!(spec(Service::Gc, None, &a), spec(Service::Gc, None, &b));
        assert_eq!(
            spec(Service::CompactorCoordinator, None, &a),
            spec(Service::CompactorCoordinator, None, &b),
            "a GC edit does not restart the coordinator"
        );
        let target = |poll: &str| {
            let toml = format!("[mirror.targets.dr]\nurl = \"s3://dr/db\"\npoll = \"{poll}\"");
            fleet.resolve_database(&parse_database_config(&fleet, &toml).unwrap())
        };
        let (fast, slow) = (target("1s"), target("9s"));
        assert_ne!(
            spec(Service::Mirror, Some("dr"), &fast),
            spec(Service::Mirror, Some("dr"), &slow)
        );
        assert_eq!(
            spec(Service::Gc, None, &fast),
            spec(Service::Gc, None, &slow),
            "a mirror target edit restarts only that target's task"
        );
        assert_eq!(spec(Service::Mirror, Some("gone"), &fast), None);
    }

    fn spec(
        service: Service,
        target: Option<&str>,
        settings: &DatabaseSettings,
    ) -> Option<ServiceSpec> {
        let assignment = Assignment {
            service,
            target: target.map(str::to_string),
            owners: vec![],
        };
        task_spec(&assignment, "s3://b/db", settings, &FleetView::default())
    }

    #[test]
    fn options_are_validated() {
        assert!(matches!(
            NodeOptions::new("bad id").validate(),
            Err(Error::InvalidNodeId(_))
        ));
        let dup = NodeOptions::new("n").with_services([Service::Gc, Service::Gc]);
        assert!(matches!(
            dup.validate(),
            Err(Error::DuplicateService(Service::Gc))
        ));
        assert!(NodeOptions::new("n").with_services([]).validate().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn failing_tasks_back_off_and_report_their_error() {
        let board = TaskBoard::default();
        let key = TaskKey {
            database: "s3://b/db".into(),
            service: Service::Gc,
            target: None,
        };
        let opened = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = opened.clone();
        let metrics = Arc::new(Metrics::default());
        let supervisor = Supervisor {
            key: key.clone(),
            spec: spec(
                Service::Gc,
                None,
                &FleetConfig::default().resolve_database(&DatabaseConfig::default()),
            )
            .unwrap(),
            instance: 1,
            board: board.clone(),
            opener: Arc::new(move |_: &str| {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Err(DatabaseError::NotADatabase {
                    url: "s3://b/db".into(),
                })
            }),
            records: EpochRecords::new(
                FleetRoot::from_parts(
                    "memory:///fleet".into(),
                    Arc::new(object_store::memory::InMemory::new()),
                    Path::from("fleet"),
                ),
                "n",
            ),
            mirror: MirrorRuntime::default(),
            metrics: metrics.clone(),
            hooks: HookRunner::none("n"),
            fenced_wait: Duration::from_secs(7),
        };
        let token = CancellationToken::new();
        let task = tokio::spawn(supervisor.run(token.clone()));
        // Attempts at t=0, 2, 6, 14: the waits double from 2s.
        tokio::time::sleep(Duration::from_millis(14_500)).await;
        assert_eq!(opened.load(std::sync::atomic::Ordering::SeqCst), 4);
        let (counts, failing) = board.summary(&[Service::Gc]);
        assert_eq!((counts[0].running, counts[0].backoff), (0, 1));
        assert_eq!(
            failing[0].error,
            "s3://b/db is not a SlateDB database (no manifest)"
        );
        assert!(
            metrics
                .encode()
                .contains("sleet_task_restarts_total{service=\"gc\"} 4"),
            "every failed run is counted as a restart"
        );
        token.cancel();
        task.await.unwrap();
        assert_eq!(
            board.summary(&[Service::Gc]).0[0].backoff,
            0,
            "state cleared on exit"
        );
    }
}
