//! The tick loop: every `heartbeat_interval` a node writes its heartbeat,
//! re-reads the config when `config_poll` is due (beside the tick, see
//! [`super::config_polls`]), lists `nodes/`, deletes
//! stale heartbeats, and reconciles its supervisors to exactly the tasks
//! it owns. Each store step is bounded by the interval, so a store that
//! hangs slows the loop and never stops it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::board::TaskBoard;
use super::config_polls::{ConfigPolls, PollOutcome};
use super::error::NodeError;
use super::options::{DatabaseOpener, NodeOptions};
use super::owned::{TaskKey, TaskSpec, owned_tasks};
use super::stores::{StoreGate, admit, trust_label, written_url};
use crate::config::{NodeSettings, StoreSettings};
use crate::fleet::root::{ConfigPoller, FleetRoot, FleetView, NODES_DIR, node_view};
use crate::fleet::store_trust::skew_bound_for;
use crate::mirror::run::MirrorRuntime;
use crate::model::coverage::{self, Mark};
use crate::model::heartbeat::{self, ClockReading};
use crate::model::seams::{self, Seam};
use crate::model::service::Service;
use crate::observe::metrics::Metrics;
use crate::observe::probes::NodeProbes;
use crate::plugin::hook::Clock;
use crate::services::events::EventSource;
use crate::services::events::notification::DatabaseIndex;
use crate::services::idle::wakes::WakeSignals;
use crate::services::outside_compactor::records::EpochRecords;
use crate::store::check::ClockSample;

/// Heartbeats this many timeouts old are deleted by any node.
mod heartbeats;
mod tasks;

const DEAD_HEARTBEAT_TIMEOUTS: u32 = 10;

/// Heartbeat writes whose timing estimates the node's clock skew.
const CLOCK_SAMPLES: usize = 6;

/// How many looks at its databases a node runs at once (see
/// [`crate::fleet::database::DatabaseHandle::gated`]). A look takes a few requests; at 64 at
/// once a node starting over 10,000 databases has looked at each within
/// seconds on a local store, and within tens of seconds on S3.
pub const LOOKS_AT_ONCE: usize = 64;

/// `opener`, with every handle it opens sharing one node-wide limit on
/// looks.
fn with_look_limit(opener: DatabaseOpener) -> DatabaseOpener {
    let looks = Arc::new(tokio::sync::Semaphore::new(LOOKS_AT_ONCE));
    Arc::new(move |url: &str| Ok(opener(url)?.with_look_limit(looks.clone())))
}

/// A database's store as `opener` opens it, for the event canaries.
fn store_of(opener: DatabaseOpener) -> crate::services::events::StoreOf {
    Arc::new(move |url: &str| opener(url).ok().map(|db| db.store().clone()))
}

/// Everything a tick's owned tasks and their admission are computed
/// from. A tick whose inputs equal the last reconciled tick's would
/// reconcile to the same tasks, so it skips the work: at 10,000
/// databases, rebuilding, admitting and comparing 30,000 task specs every
/// heartbeat was most of an idle node's CPU.
#[derive(Debug, PartialEq)]
struct ReconcileInputs {
    /// Bumped whenever a config poll returns a different view.
    view: u64,
    /// The live nodes, and what each offers.
    live: Vec<(String, Vec<Service>)>,
    /// Bumped whenever a task ends: it restarts at the next reconcile.
    ended: u64,
    /// Each store's trust.
    trusts: Vec<(String, crate::fleet::store_trust::Trust)>,
}

/// Task reports as `/status` shows them, shared with the probes.
type SharedReports = Arc<Vec<crate::observe::probes::TaskReport>>;

struct RunningTask {
    /// Shared with the task's supervisor.
    spec: Arc<TaskSpec>,
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
    /// Coordinators' wakes, told to the workers (`idle::wakes`).
    wakes: WakeSignals,
    /// The store's events, when `[events]` names a source.
    events: EventSource,
    /// The view generation the event source last followed.
    events_generation: Option<u64>,
    /// Plugins loaded from `--plugin-dir`, if any.
    plugins: Option<Arc<crate::plugin::PluginSet>>,
    /// The time hooks are told.
    clock: Clock,
    mirror: MirrorRuntime,
    /// What every task shares, as the last spawn built it.
    task_shared: Option<Arc<crate::daemon::supervisor::TaskShared>>,
    polls: ConfigPolls,
    view: FleetView,
    running: BTreeMap<TaskKey, RunningTask>,
    task_keys: BTreeMap<tokio::task::Id, TaskKey>,
    tasks: JoinSet<()>,
    board: TaskBoard,
    next_instance: u64,
    metrics: Arc<Metrics>,
    probes: Arc<NodeProbes>,
    shutdown_grace: Duration,
    /// Whether the last config poll read the fleet root.
    config_read: bool,
    /// Which stores the node may write to.
    stores: StoreGate,
    /// Tasks refused at the last reconcile because of their store.
    refused: BTreeSet<TaskKey>,
    /// What the last reconcile was computed from; `None` forces one.
    reconciled: Option<ReconcileInputs>,
    view_generation: u64,
    tasks_ended: u64,
    /// Bumped whenever a task starts, stops or ends.
    running_changes: u64,
    /// The task reports last published, and the board and running
    /// changes they were built at.
    published: Option<((u64, u64), SharedReports)>,
    /// Recent heartbeat PUTs, timed against their `LastModified`.
    clock_samples: VecDeque<ClockSample>,
    clock_reading: Option<ClockReading>,
    /// The largest clock skew the fleet tolerates, from the config.
    skew_bound: Duration,
    /// Hands freed memory back once a minute (`daemon::memory`).
    trimmer: crate::daemon::memory::Trimmer,
}

/// Runs a node until `shutdown` is cancelled, then stops its tasks
/// (waiting a bounded time) and deletes its heartbeat so peers take over
/// at their next tick.
pub async fn run_node(
    root: FleetRoot,
    options: NodeOptions,
    shutdown: CancellationToken,
) -> Result<(), NodeError> {
    options.validate()?;
    let mut node = Node::start(root, options).await?;
    loop {
        node.tick().await;
        let interval = node.settings().heartbeat_interval;
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
        }
    }
    node.shut_down().await;
    Ok(())
}

impl Node {
    async fn start(root: FleetRoot, options: NodeOptions) -> Result<Node, NodeError> {
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
        .map_err(NodeError::Plugins)?;
        let config_read = poller.read_root();
        if config_read {
            options.metrics.config_read();
        }
        let mut copiers = options.copiers;
        copiers.plugins = plugins.clone();
        copiers.node_id = options.node_id.clone();
        // Nothing is written to the root before its store is known.
        let skew_bound = skew_bound_for(&view);
        let mut stores = StoreGate::new(root.clone(), options.opener.clone());
        stores.refresh([], &view.fleet.stores.resolve(), skew_bound);
        stores
            .settle(view.fleet.node.resolve().heartbeat_timeout)
            .await;
        let wakes = WakeSignals::new(root.clone(), options.node_id.clone());
        Ok(Node {
            records: EpochRecords::new(root.clone(), options.node_id.clone())
                .with_clock(options.clock.clone()),
            events: EventSource::new(
                root.clone(),
                options.node_id.clone(),
                wakes.clone(),
                options.metrics.clone(),
                store_of(options.opener.clone()),
            )
            .receiving(options.receives_events),
            events_generation: None,
            wakes,
            id: options.node_id,
            offered: options.services,
            heartbeat_path,
            opener: with_look_limit(options.opener),
            plugins,
            clock: options.clock,
            mirror: MirrorRuntime::new(copiers, options.max_mirror_jobs)
                .with_metrics(options.metrics.clone()),
            task_shared: None,
            polls: ConfigPolls::new(root.clone(), poller),
            root,
            view,
            running: BTreeMap::new(),
            task_keys: BTreeMap::new(),
            tasks: JoinSet::new(),
            board: TaskBoard::default(),
            next_instance: 0,
            metrics: options.metrics,
            probes: options.probes,
            shutdown_grace: options.shutdown_grace,
            config_read,
            stores,
            refused: BTreeSet::new(),
            reconciled: None,
            view_generation: 0,
            tasks_ended: 0,
            running_changes: 0,
            published: None,
            clock_samples: VecDeque::new(),
            clock_reading: None,
            skew_bound,
            trimmer: crate::daemon::memory::Trimmer::new(),
        })
    }

    /// Starts, restarts or stops the event source as `[events]` says,
    /// and routes its events to the databases registered now.
    fn follow_events(&mut self) {
        if self.events_generation == Some(self.view_generation) {
            return;
        }
        self.events_generation = Some(self.view_generation);
        let settings = self.view.fleet.events.resolve();
        if settings.is_some() {
            let urls = self.view.databases.keys().map(String::as_str);
            self.events.set_databases(DatabaseIndex::new(urls));
        }
        self.events.reconcile(settings);
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
        let store_settings = self.view.fleet.stores.resolve();
        let root_store = self.stores.root_store();
        if !self.stores.trust(&root_store, &store_settings).admits() {
            self.stand_by(step, &store_settings).await;
            self.metrics.tick_took(started.elapsed());
            return;
        }
        let before_put = (self.clock)();
        let heartbeat_written = bounded(step, self.put_heartbeat()).await == Some(true);
        let after_put = (self.clock)();
        if !heartbeat_written {
            self.metrics.node.heartbeat_put_failures.inc();
        }
        self.poll_config(step).await;
        self.follow_events();
        let live_nodes = match bounded(step, self.root.list_heartbeats()).await {
            Some(Ok(heartbeats)) => {
                let now = (self.clock)();
                // The store's clock, from the heartbeat just written, judges
                // which heartbeats are dead: a node whose own clock runs
                // ahead must not delete live ones (its own among them).
                let mut store_now = now;
                if heartbeat_written
                    && let Some(own) = heartbeats.iter().find(|h| h.path == self.heartbeat_path)
                {
                    self.sample_clock(before_put, after_put, own.last_modified);
                    store_now = own.last_modified;
                }
                let sightings = node_view(&heartbeats, now, self.settings().heartbeat_timeout);
                bounded(step, self.delete_stale_heartbeats(&heartbeats, store_now)).await;
                seams::at(Seam::BetweenOwnershipAndReconcile).await;
                self.reconcile_if_changed(&sightings, &store_settings);
                self.collect_wakes(&sightings, step).await;
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
        self.record_stores(&store_settings);
        self.publish(heartbeat_written, live_nodes);
        self.trimmer.tick();
        self.metrics.tick_took(started.elapsed());
    }

    /// Nudges this node's workers of databases another node's coordinator
    /// woke, and deletes wake markers that have served. Every live node
    /// lists at least once per heartbeat timeout, so a marker seen for
    /// that long has reached them all.
    async fn collect_wakes(
        &self,
        sightings: &BTreeMap<String, crate::fleet::root::NodeSighting>,
        step: Duration,
    ) {
        let live: BTreeSet<String> = sightings
            .values()
            .filter(|s| s.live)
            .map(|s| s.node_id.clone())
            .collect();
        let expiry = self.settings().heartbeat_timeout;
        match bounded(step, self.wakes.collect(&live, expiry)).await {
            Some(Ok(nudged)) if nudged > 0 => {
                debug!(
                    nudged,
                    "nudged the services of databases other nodes woke or had events for"
                );
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => debug!("{e}; workers find queued jobs at their own looks"),
            None => debug!("listing wake markers took over {step:?}"),
        }
    }

    /// A tick while the fleet root's store is unsafe (or not yet known):
    /// no heartbeat, no tasks, the config still polled (an operator may
    /// trust the store) and the check renewed when due.
    async fn stand_by(&mut self, step: Duration, store_settings: &StoreSettings) {
        self.poll_config(step).await;
        self.stores.refresh([], store_settings, self.skew_bound);
        self.admit_and_reconcile(BTreeMap::new(), store_settings);
        self.reconciled = None;
        self.record_stores(store_settings);
        self.publish(false, None);
    }

    /// Reconciles the tasks this node owns, unless nothing they depend
    /// on changed since the last time (finished store checks are
    /// collected, and due ones started, either way).
    fn reconcile_if_changed(
        &mut self,
        sightings: &BTreeMap<String, crate::fleet::root::NodeSighting>,
        store_settings: &StoreSettings,
    ) {
        self.stores.refresh_again(store_settings, self.skew_bound);
        let inputs = ReconcileInputs {
            view: self.view_generation,
            live: sightings
                .values()
                .filter(|s| s.live)
                .map(|s| (s.node_id.clone(), s.services.clone()))
                .collect(),
            ended: self.tasks_ended,
            trusts: self.stores.trusts(store_settings),
        };
        if self.reconciled.as_ref() == Some(&inputs) {
            return;
        }
        let owned = owned_tasks(&self.id, &self.offered, sightings, &self.view);
        self.admit_and_reconcile(owned, store_settings);
        self.reconciled = Some(inputs);
    }

    /// Runs the owned tasks whose stores are safe or trusted; records the
    /// others as refused (status shows why) and starts the checks of
    /// stores not yet known.
    fn admit_and_reconcile(
        &mut self,
        owned: BTreeMap<TaskKey, TaskSpec>,
        store_settings: &StoreSettings,
    ) {
        self.stores.refresh(
            owned.iter().map(|(key, spec)| written_url(key, spec)),
            store_settings,
            self.skew_bound,
        );
        let gate = &mut self.stores;
        let admitted = admit(owned, |store| gate.trust(store, store_settings));
        for key in &self.refused {
            if !admitted.refused.contains_key(key) {
                self.board.set_skip(key, None);
            }
        }
        for (key, why) in &admitted.refused {
            self.board.set_skip(key, Some(why.clone()));
        }
        self.refused = admitted.refused.into_keys().collect();
        self.reconcile(admitted.run);
    }

    /// Each checked store's trust and skew, and this node's clock, into
    /// the metrics.
    fn record_stores(&mut self, store_settings: &StoreSettings) {
        for (store, trust, skew) in self.stores.summary(store_settings) {
            self.metrics.record_store(&store, trust_label(&trust), skew);
        }
        if let Some(clock) = self.clock_reading {
            let stores = &self.metrics.stores;
            stores.node_clock_skew.set(clock.skew_ms as f64 / 1000.0);
            stores
                .node_clock_beyond_bound
                .set(i64::from(clock.beyond_bound()));
        }
    }

    /// Starts a config poll when one is due (at once while the last one
    /// could not read the root), and takes its view if it finishes within
    /// `step`; otherwise a later tick does. The node keeps its last good
    /// view meanwhile.
    async fn poll_config(&mut self, step: Duration) {
        let every = self.settings().config_poll;
        let read = match self.polls.advance(!self.config_read, every, step).await {
            PollOutcome::Pending => return,
            PollOutcome::Overdue(ran) => {
                warn!(
                    "the config poll has run for {ran:?}, over config_poll; keeping the last good config"
                );
                false
            }
            PollOutcome::Failed(e) => {
                warn!("the config poll failed: {e}; keeping the last good config");
                false
            }
            PollOutcome::Finished { view, read_root } => {
                // Cheap when nothing changed: an unchanged registry is the
                // same allocation as last time.
                if *view != self.view {
                    coverage::hit(Mark::ConfigChangeRead);
                    self.view_generation += 1;
                    self.skew_bound = skew_bound_for(&view);
                }
                self.view = *view;
                log_warnings(&self.view);
                read_root
            }
        };
        self.config_read = read;
        if read {
            self.metrics.config_read();
        } else {
            self.metrics.node.config_poll_failures.inc();
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
