//! What a node's health probes and `/status` answer from: the node loop
//! writes here each tick, the endpoint only reads. Liveness and readiness
//! are pure functions of what was written and the time, so they are
//! tested without a server.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

/// A node is live while its loop ticked within this many heartbeat
/// intervals. Every store call in a tick is bounded by one interval, so a
/// tick of a node whose store is down still ends within a few.
pub const LIVE_WITHIN_INTERVALS: u32 = 10;

/// One task this node owns, as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TaskReport {
    pub database: String,
    pub service: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `starting`, `running`, `backoff` or `stood_down`.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// This node's view, as `GET /status` returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NodeReport {
    pub node_id: String,
    pub services: Vec<String>,
    /// Live nodes at the last tick, this one included.
    pub live_nodes: u64,
    /// Whether the last config poll read the fleet root.
    pub config_read: bool,
    /// Whether the last heartbeat PUT succeeded.
    pub heartbeat_written: bool,
    /// Shared with the node loop, which rebuilds the list only when a
    /// task changed: at 10,000 databases, 30,000 reports every tick.
    pub tasks: std::sync::Arc<Vec<TaskReport>>,
    /// Whether the store's events reach this node; `None` without `[events]`.
    pub events: Option<crate::model::heartbeat::EventsReport>,
}

#[derive(Debug)]
struct State {
    last_tick: Option<Instant>,
    interval: Duration,
    report: NodeReport,
}

/// Shared between the node loop (writer) and the endpoint (reader).
#[derive(Debug)]
pub struct NodeProbes {
    state: Mutex<State>,
}

impl Default for NodeProbes {
    fn default() -> Self {
        NodeProbes {
            state: Mutex::new(State {
                last_tick: None,
                interval: Duration::from_secs(10),
                report: NodeReport::default(),
            }),
        }
    }
}

/// Why a probe fails, for its response body.
pub type ProbeResult = Result<&'static str, String>;

impl NodeProbes {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The loop finished a tick, with this view and heartbeat interval.
    pub fn ticked(&self, report: NodeReport, interval: Duration) {
        let mut state = self.state();
        state.last_tick = Some(Instant::now());
        state.interval = interval;
        state.report = report;
    }

    pub fn report(&self) -> NodeReport {
        self.state().report.clone()
    }

    /// `/healthz`: the node loop is alive.
    pub fn live(&self) -> ProbeResult {
        let state = self.state();
        liveness(state.last_tick.map(|t| t.elapsed()), state.interval)
    }

    /// `/readyz`: the node has read its config and written its heartbeat.
    pub fn ready(&self) -> ProbeResult {
        let state = self.state();
        readiness(state.last_tick.is_some(), &state.report)
    }
}

/// The states the node's task gauges count. `failing` counts the tasks
/// whose last run failed, whatever state they are in now.
pub const TASK_STATES: [&str; 5] = ["starting", "running", "backoff", "stood_down", "failing"];

/// How many of `service`'s tasks are in each of [`TASK_STATES`], in that
/// order, and how many it owns in all.
pub fn task_states(tasks: &[TaskReport], service: &str) -> (usize, [(&'static str, usize); 5]) {
    let of_service: Vec<&TaskReport> = tasks.iter().filter(|t| t.service == service).collect();
    let counts = TASK_STATES.map(|state| {
        let count = of_service
            .iter()
            .filter(|t| match state {
                "failing" => t.last_error.is_some(),
                _ => t.state == state,
            })
            .count();
        (state, count)
    });
    (of_service.len(), counts)
}

/// Live until no tick ended for [`LIVE_WITHIN_INTERVALS`] intervals; a
/// node still in its first tick is live (it is starting).
pub fn liveness(since_last_tick: Option<Duration>, interval: Duration) -> ProbeResult {
    let limit = interval * LIVE_WITHIN_INTERVALS;
    match since_last_tick {
        Some(since) if since > limit => Err(format!(
            "the node loop has not ticked for {}s (limit {}s)",
            since.as_secs(),
            limit.as_secs()
        )),
        _ => Ok("live"),
    }
}

/// Ready once a tick read the config and wrote the heartbeat; not ready
/// while either fails (peers cannot see this node, or it works from a
/// stale view).
pub fn readiness(ticked: bool, report: &NodeReport) -> ProbeResult {
    if !ticked {
        return Err("starting: no tick has finished yet".into());
    }
    match (report.config_read, report.heartbeat_written) {
        (true, true) => Ok("ready"),
        (false, _) => Err("the last config poll could not read the fleet root".into()),
        (true, false) => Err("the last heartbeat could not be written".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN: Duration = Duration::from_secs(10);

    fn task(service: &str, state: &str, failed: bool) -> TaskReport {
        TaskReport {
            database: "s3://b/db".into(),
            service: service.into(),
            target: None,
            state: state.into(),
            last_error: failed.then(|| "boom".into()),
        }
    }

    #[test]
    fn task_states_count_one_service_and_failures_across_states() {
        let tasks = [
            task("gc", "running", false),
            task("gc", "backoff", true),
            task("gc", "running", true),
            task("mirror", "running", false),
        ];
        let (owned, states) = task_states(&tasks, "gc");
        assert_eq!(owned, 3);
        assert_eq!(
            states,
            [
                ("starting", 0),
                ("running", 2),
                ("backoff", 1),
                ("stood_down", 0),
                ("failing", 2)
            ]
        );
        assert_eq!(task_states(&tasks, "compaction-workers").0, 0);
    }

    #[test]
    fn live_while_ticking_and_while_starting() {
        assert!(liveness(None, TEN).is_ok());
        assert!(liveness(Some(Duration::from_secs(99)), TEN).is_ok());
        let stuck = liveness(Some(Duration::from_secs(101)), TEN).unwrap_err();
        assert!(stuck.contains("101s"), "{stuck}");
    }

    #[test]
    fn ready_only_with_config_read_and_heartbeat_written() {
        let good = NodeReport {
            config_read: true,
            heartbeat_written: true,
            ..NodeReport::default()
        };
        assert!(readiness(false, &good).is_err());
        assert_eq!(readiness(true, &good), Ok("ready"));
        let no_heartbeat = NodeReport {
            heartbeat_written: false,
            ..good.clone()
        };
        assert!(
            readiness(true, &no_heartbeat)
                .unwrap_err()
                .contains("heartbeat")
        );
        let no_config = NodeReport {
            config_read: false,
            ..good
        };
        assert!(readiness(true, &no_config).unwrap_err().contains("config"));
    }
}
