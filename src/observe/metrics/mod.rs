//! What a node counts, in Prometheus form: the node's loop, its tasks,
//! mirrors, plugins, and SlateDB's own metrics. Every layer records into
//! one [`Metrics`]; the endpoint encodes it on each scrape.
//!
//! Names and labels are documented in `docs/operations.md`. Counters are
//! registered without `_total`; the encoder adds it.

mod labels;
mod slatedb;
mod target;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use self::labels::{
    CallLabels, CopiedLabels, DecisionLabels, DurationLabels, PassLabels, PrunedLabels,
    ServiceLabels, StoreLabels, StoreTrustLabels, TargetLabels, TaskStateLabels,
};
pub use self::slatedb::SlateDbRecorder;
pub use self::target::TargetMetrics;
use crate::plugin::runtime::PluginEvent;

/// How much per-database detail the node exports. A mirror target adds
/// at most 11 series; SlateDB's counters and gauges for one database about
/// 40 more (its histograms are always summed per node): `docs/operations.md`
/// has the counts. The default keeps the series count independent of how
/// many databases a node serves, except for mirror targets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Detail {
    /// Nothing per database: every series summed per node.
    Node,
    /// Mirror series per (database, target); SlateDB's summed per node.
    #[default]
    Mirror,
    /// SlateDB's counters and gauges per database as well.
    Database,
}

/// Histogram buckets from 1 ms to about 4.4 minutes.
type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 4.0, 10))
}

/// The node's own loop.
pub struct NodeMetrics {
    pub ticks: Counter,
    pub tick_duration: Histogram,
    pub heartbeat_put_failures: Counter,
    pub heartbeat_list_failures: Counter,
    pub config_poll_failures: Counter,
    /// Seconds since the last poll that read the fleet root; set at scrape.
    pub config_age: FloatGauge,
    pub live_nodes: Gauge,
    /// 1 while the store's events flow to this node (`[events]`).
    pub events_flowing: Gauge,
    pub event_messages: Counter,
    pub event_wakes: Counter,
    pub event_receive_failures: Counter,
    pub event_queue_requests: Counter,
}

/// The tasks this node owns and supervises.
#[derive(Default)]
pub struct TaskMetrics {
    pub owned: Family<ServiceLabels, Gauge>,
    pub states: Family<TaskStateLabels, Gauge>,
    pub restarts: Family<ServiceLabels, Counter>,
    pub fences: Family<ServiceLabels, Counter>,
}

/// Mirror targets, per (database, target).
#[derive(Default)]
pub struct MirrorMetrics {
    pub passes: Family<PassLabels, Counter>,
    pub objects: Family<CopiedLabels, Counter>,
    pub bytes: Family<CopiedLabels, Counter>,
    pub behind_manifests: Family<TargetLabels, Gauge>,
    pub behind_seconds: Family<TargetLabels, FloatGauge>,
    pub recovery_point: Family<TargetLabels, FloatGauge>,
    pub last_restore_point: Family<TargetLabels, FloatGauge>,
    pub pruned: Family<PrunedLabels, Counter>,
}

/// Plugin calls and hook decisions, per plugin.
pub struct PluginMetrics {
    pub calls: Family<CallLabels, Counter>,
    pub duration: Family<DurationLabels, Histogram, fn() -> Histogram>,
    pub decisions: Family<DecisionLabels, Counter>,
}

impl Default for PluginMetrics {
    fn default() -> Self {
        PluginMetrics {
            calls: Family::default(),
            duration: Family::new_with_constructor(seconds_histogram),
            decisions: Family::default(),
        }
    }
}

/// The stores a node writes to, as their checks found them.
#[derive(Default)]
pub struct StoreMetrics {
    /// 1 for the store's current trust (safe, trusted, unsafe,
    /// unchecked), 0 for the others.
    pub trust: Family<StoreTrustLabels, Gauge>,
    /// The store's clock minus the checking machine's, from its check.
    pub clock_skew: Family<StoreLabels, FloatGauge>,
    /// This node's clock against the fleet root's, from its heartbeats.
    pub node_clock_skew: FloatGauge,
    /// 1 when this node's clock is certainly further from the root's
    /// than the fleet tolerates.
    pub node_clock_beyond_bound: Gauge,
}

/// Everything one node exports.
pub struct Metrics {
    registry: Mutex<Registry>,
    detail: Detail,
    last_good_poll: Mutex<Instant>,
    slatedb: slatedb::SlateFamilies,
    pub node: NodeMetrics,
    pub tasks: TaskMetrics,
    pub mirror: MirrorMetrics,
    pub plugins: PluginMetrics,
    pub stores: StoreMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("detail", &self.detail)
            .finish()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(Detail::default())
    }
}

impl Metrics {
    pub fn new(detail: Detail) -> Self {
        let node = NodeMetrics {
            ticks: Counter::default(),
            tick_duration: seconds_histogram(),
            heartbeat_put_failures: Counter::default(),
            heartbeat_list_failures: Counter::default(),
            config_poll_failures: Counter::default(),
            config_age: FloatGauge::default(),
            live_nodes: Gauge::default(),
            events_flowing: Gauge::default(),
            event_messages: Counter::default(),
            event_wakes: Counter::default(),
            event_receive_failures: Counter::default(),
            event_queue_requests: Counter::default(),
        };
        let metrics = Metrics {
            registry: Mutex::new(Registry::default()),
            detail,
            last_good_poll: Mutex::new(Instant::now()),
            slatedb: slatedb::SlateFamilies::default(),
            node,
            tasks: TaskMetrics::default(),
            mirror: MirrorMetrics::default(),
            plugins: PluginMetrics::default(),
            stores: StoreMetrics::default(),
        };
        metrics.register_all();
        metrics
    }

    fn register_all(&self) {
        let mut r = self.registry();
        let n = &self.node;
        r.register(
            "sleet_node_ticks",
            "Ticks of the node loop",
            n.ticks.clone(),
        );
        r.register(
            "sleet_node_tick_duration_seconds",
            "How long one tick took (heartbeat, config poll, placement)",
            n.tick_duration.clone(),
        );
        r.register(
            "sleet_node_heartbeat_put_failures",
            "Heartbeat PUTs that failed",
            n.heartbeat_put_failures.clone(),
        );
        r.register(
            "sleet_node_heartbeat_list_failures",
            "LISTs of the fleet's heartbeats that failed (the node kept its assignments)",
            n.heartbeat_list_failures.clone(),
        );
        r.register(
            "sleet_node_config_poll_failures",
            "Config polls that could not read sleet.toml or the registry, or ran longer than config_poll",
            n.config_poll_failures.clone(),
        );
        r.register(
            "sleet_node_config_age_seconds",
            "Seconds since the last config poll that read the fleet root",
            n.config_age.clone(),
        );
        r.register(
            "sleet_node_live_nodes",
            "Live nodes this node saw at its last tick, itself included",
            n.live_nodes.clone(),
        );
        r.register(
            "sleet_events_flowing",
            "1 while the store's events reach this node (idle looks at the safety interval), 0 while it polls",
            n.events_flowing.clone(),
        );
        r.register(
            "sleet_event_messages",
            "Queue messages this node received",
            n.event_messages.clone(),
        );
        r.register(
            "sleet_event_wakes",
            "Registered databases woken by an event this node received",
            n.event_wakes.clone(),
        );
        r.register(
            "sleet_event_receive_failures",
            "Receives from the event queue that failed (the node polls until one succeeds)",
            n.event_receive_failures.clone(),
        );
        r.register(
            "sleet_event_queue_requests",
            "Requests this node sent the event queue (long polls and deletes)",
            n.event_queue_requests.clone(),
        );
        let t = &self.tasks;
        r.register(
            "sleet_tasks_owned",
            "Tasks this node owns, per service",
            t.owned.clone(),
        );
        r.register(
            "sleet_tasks",
            "Owned tasks by state (running, backoff, failing, stood_down)",
            t.states.clone(),
        );
        r.register(
            "sleet_task_restarts",
            "Task runs that failed and were retried",
            t.restarts.clone(),
        );
        r.register(
            "sleet_task_fences",
            "Times a task was fenced by a newer epoch",
            t.fences.clone(),
        );
        let m = &self.mirror;
        r.register(
            "sleet_mirror_passes",
            "Mirror passes by result (committed, caught_up, deferred, failed)",
            m.passes.clone(),
        );
        r.register(
            "sleet_mirror_objects_copied",
            "Data objects mirror passes copied",
            m.objects.clone(),
        );
        r.register(
            "sleet_mirror_bytes_copied",
            "Bytes mirror passes copied",
            m.bytes.clone(),
        );
        r.register(
            "sleet_mirror_behind_manifests",
            "The source's latest manifest id minus the destination's (ids can skip: an upper bound)",
            m.behind_manifests.clone(),
        );
        r.register(
            "sleet_mirror_behind_seconds",
            "How long the destination has been behind the source (0 when caught up)",
            m.behind_seconds.clone(),
        );
        r.register(
            "sleet_mirror_recovery_point_seconds",
            "Continuous targets: how far the newest restorable write may trail the source's newest \
             durable write (the time since the WAL tail last found nothing newer to copy)",
            m.recovery_point.clone(),
        );
        r.register(
            "sleet_mirror_last_restore_point_timestamp_seconds",
            "Unix time of the last restore point a pass committed",
            m.last_restore_point.clone(),
        );
        r.register(
            "sleet_mirror_pruned",
            "Manifests and data objects retention deleted at destinations",
            m.pruned.clone(),
        );
        let s = &self.stores;
        r.register(
            "sleet_store_trust",
            "1 for each store's trust (safe, trusted, unsafe, unchecked): tasks write only to safe and trusted stores",
            s.trust.clone(),
        );
        r.register(
            "sleet_store_clock_skew_seconds",
            "The store's clock minus the checking node's, from the store's latest check",
            s.clock_skew.clone(),
        );
        r.register(
            "sleet_node_clock_skew_seconds",
            "The fleet root's clock minus this node's, from its heartbeats' LastModified",
            s.node_clock_skew.clone(),
        );
        r.register(
            "sleet_node_clock_beyond_bound",
            "1 when this node's clock is certainly further from the fleet root's than the fleet tolerates",
            s.node_clock_beyond_bound.clone(),
        );
        let p = &self.plugins;
        r.register(
            "sleet_plugin_calls",
            "Plugin calls by export and result (ok, trap, timeout, error)",
            p.calls.clone(),
        );
        r.register(
            "sleet_plugin_call_duration_seconds",
            "How long plugin calls took, instantiation included",
            p.duration.clone(),
        );
        r.register(
            "sleet_hook_decisions",
            "What pre-task hooks decided (allow, skip, fail)",
            p.decisions.clone(),
        );
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `database` label SlateDB's series carry at this node's detail
    /// (empty: summed per node).
    pub fn slatedb_database_label(&self, url: &str) -> String {
        match self.detail {
            Detail::Database => url.to_string(),
            Detail::Mirror | Detail::Node => String::new(),
        }
    }

    /// Labels of one mirror target's series.
    pub fn target_labels(&self, database: &str, target: &str) -> TargetLabels {
        match self.detail {
            Detail::Mirror | Detail::Database => TargetLabels {
                database: database.to_string(),
                target: target.to_string(),
            },
            Detail::Node => TargetLabels::default(),
        }
    }

    /// The series of one mirror target.
    pub fn target(self: &Arc<Self>, database: &str, target: &str) -> TargetMetrics {
        TargetMetrics::new(self.clone(), self.target_labels(database, target))
    }

    /// A config poll read the fleet root.
    pub fn config_read(&self) {
        *self
            .last_good_poll
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// One service's task gauges: owned, and how many are in each state.
    /// A store's trust (`safe`, `trusted`, `unsafe`, `unchecked`) and its
    /// clock skew as its check measured it.
    pub fn record_store(&self, store: &str, trust: &str, skew_seconds: Option<f64>) {
        for state in ["safe", "trusted", "unsafe", "unchecked"] {
            let labels = StoreTrustLabels {
                store: store.to_string(),
                trust: state.to_string(),
            };
            self.stores
                .trust
                .get_or_create(&labels)
                .set(i64::from(state == trust));
        }
        if let Some(skew) = skew_seconds {
            let labels = StoreLabels {
                store: store.to_string(),
            };
            self.stores.clock_skew.get_or_create(&labels).set(skew);
        }
    }

    pub fn record_tasks(&self, service: &str, owned: usize, states: &[(&str, usize)]) {
        let labels = ServiceLabels {
            service: service.to_string(),
        };
        self.tasks.owned.get_or_create(&labels).set(owned as i64);
        for (state, count) in states {
            self.tasks
                .states
                .get_or_create(&TaskStateLabels {
                    service: service.to_string(),
                    state: state.to_string(),
                })
                .set(*count as i64);
        }
    }

    pub fn tick_took(&self, took: Duration) {
        self.node.ticks.inc();
        self.node.tick_duration.observe(took.as_secs_f64());
    }

    /// One plugin call or hook decision (the plugin runtime's observer).
    pub fn record_plugin(&self, event: PluginEvent<'_>) {
        match event {
            PluginEvent::Call {
                plugin,
                export,
                took,
                result,
            } => {
                self.plugins
                    .calls
                    .get_or_create(&CallLabels {
                        plugin: plugin.to_string(),
                        export: export.to_string(),
                        result: result.as_str().to_string(),
                    })
                    .inc();
                self.plugins
                    .duration
                    .get_or_create(&DurationLabels {
                        plugin: plugin.to_string(),
                        export: export.to_string(),
                    })
                    .observe(took.as_secs_f64());
            }
            PluginEvent::Decision { plugin, decision } => {
                self.plugins
                    .decisions
                    .get_or_create(&DecisionLabels {
                        plugin: plugin.to_string(),
                        decision: decision.to_string(),
                    })
                    .inc();
            }
        }
    }

    /// The exposition of a node that has one series in every family: the
    /// full list of what a node can export (a family shows in `/metrics`
    /// only once it has a series). Checks of the dashboard use it.
    pub fn catalogue() -> String {
        let metrics = Metrics::default();
        let t = &metrics.tasks;
        let _ = t.owned.get_or_create(&ServiceLabels::default());
        let _ = t.states.get_or_create(&TaskStateLabels::default());
        let _ = t.restarts.get_or_create(&ServiceLabels::default());
        let _ = t.fences.get_or_create(&ServiceLabels::default());
        let m = &metrics.mirror;
        let _ = m.passes.get_or_create(&PassLabels::default());
        let _ = m.objects.get_or_create(&CopiedLabels::default());
        let _ = m.bytes.get_or_create(&CopiedLabels::default());
        let _ = m.behind_manifests.get_or_create(&TargetLabels::default());
        let _ = m.behind_seconds.get_or_create(&TargetLabels::default());
        let _ = m.recovery_point.get_or_create(&TargetLabels::default());
        let _ = m.last_restore_point.get_or_create(&TargetLabels::default());
        let _ = m.pruned.get_or_create(&PrunedLabels::default());
        let p = &metrics.plugins;
        let _ = p.calls.get_or_create(&CallLabels::default());
        let _ = p.duration.get_or_create(&DurationLabels::default());
        let _ = p.decisions.get_or_create(&DecisionLabels::default());
        metrics.encode()
    }

    /// The Prometheus text exposition of everything.
    pub fn encode(&self) -> String {
        let age = self
            .last_good_poll
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed();
        self.node.config_age.set(age.as_secs_f64());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry())
            .expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests;
