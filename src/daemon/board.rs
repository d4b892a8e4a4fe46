//! The task states supervisors write and the node reads for its
//! heartbeat, `/status` and metrics: running, backing off or standing
//! down, the last error, hook deferrals and failing compaction jobs.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::owned::TaskKey;
use crate::model::coverage::{self, Mark};
use crate::model::heartbeat::{HeartbeatBody, OutsideCompactor, ServiceTasks, TaskFailure};
use crate::model::planted::{Planted, planted};
use crate::model::service::Service;
use crate::observe::probes::TaskReport;
use crate::plugin::compaction::FailureReport;
use crate::services::outside_compactor::Sighting;

/// Failing tasks listed in a heartbeat body, at most.
const MAX_REPORTED_FAILURES: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Phase {
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

/// A supervisor's hold on its board entry: dropping it removes the
/// entry, however the supervisor ends (returns, panics, or is aborted
/// with the node). A stale entry would go on counting a task the node no
/// longer runs, in its heartbeat and `status`: one node reporting more
/// coordinators than placement gives it, for good.
pub(super) struct BoardEntry {
    board: TaskBoard,
    key: TaskKey,
    instance: u64,
}

impl Drop for BoardEntry {
    fn drop(&mut self) {
        if !planted(Planted::StoppedTasksStayOnTheBoard) {
            coverage::hit(Mark::BoardEntryRemoved);
            self.board.remove(&self.key, self.instance);
        }
    }
}

#[derive(Debug, Default, Clone)]
pub(super) struct TaskBoard {
    states: Arc<Mutex<HashMap<TaskKey, TaskState>>>,
    /// Runs or passes a hook deferred, with the reason.
    skips: Arc<Mutex<HashMap<TaskKey, String>>>,
    /// The latest failed compaction call of each compactor task, and when.
    compaction_failures: Arc<Mutex<HashMap<TaskKey, (Instant, String)>>>,
    /// Bumped by every change of a task's state, so readers can tell
    /// that nothing changed without reading them all.
    changes: Arc<std::sync::atomic::AtomicU64>,
}

/// How long a failed compaction job stays in the heartbeat after the
/// last failure: SlateDB retries a failing job within seconds, so one
/// that stopped failing this long ago succeeded or is no longer tried.
const COMPACTION_FAILURE_SHOWN: Duration = Duration::from_secs(300);

impl TaskBoard {
    /// Records (or, with `None`, clears) a hook's deferral of a task.
    pub(super) fn set_skip(&self, key: &TaskKey, reason: Option<String>) {
        let mut skips = self
            .skips
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match reason {
            Some(reason) => skips.insert(key.clone(), reason),
            None => skips.remove(key),
        };
    }

    /// Deferred tasks with the hook's reason, a bounded sample.
    pub(super) fn skipped(&self) -> Vec<TaskFailure> {
        let skips = self
            .skips
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    pub(super) fn report_compaction_failure(&self, key: &TaskKey, message: String) {
        let mut failures = self
            .compaction_failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.insert(key.clone(), (Instant::now(), message));
    }

    /// Compactor tasks whose jobs failed lately, with the latest error, a
    /// bounded sample.
    pub(super) fn failing_compactions(&self) -> Vec<TaskFailure> {
        let mut failures = self
            .compaction_failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    pub(super) fn compaction_report(&self, key: &TaskKey) -> FailureReport {
        let (board, key) = (self.clone(), key.clone());
        Arc::new(move |message| board.report_compaction_failure(&key, message))
    }

    pub(super) fn set(
        &self,
        key: &TaskKey,
        instance: u64,
        phase: Phase,
        last_error: Option<String>,
    ) {
        let mut states = self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        states.insert(
            key.clone(),
            TaskState {
                instance,
                phase,
                last_error,
            },
        );
        self.changed();
    }

    /// How many times a task's state changed so far.
    pub(super) fn changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn changed(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether this supervisor's task last stood down for an outside
    /// compactor.
    pub(super) fn is_stood_down(&self, key: &TaskKey, instance: u64) -> bool {
        let states = self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        states
            .get(key)
            .is_some_and(|s| s.instance == instance && matches!(s.phase, Phase::StoodDown(_)))
    }

    /// The entry of supervisor `instance` of `key`, removed from the
    /// board when the returned guard drops.
    pub(super) fn entry(&self, key: &TaskKey, instance: u64) -> BoardEntry {
        BoardEntry {
            board: self.clone(),
            key: key.clone(),
            instance,
        }
    }

    fn remove(&self, key: &TaskKey, instance: u64) {
        let mut states = self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if states.get(key).is_some_and(|s| s.instance == instance) {
            states.remove(key);
            self.changed();
            self.set_skip(key, None);
            let mut failures = self
                .compaction_failures
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            failures.remove(key);
        }
    }

    /// Per-service counts for every offered service, and failing tasks.
    pub(super) fn summary(&self, offered: &[Service]) -> (Vec<ServiceTasks>, Vec<TaskFailure>) {
        let states = self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    pub(super) fn reports<'a>(&self, owned: impl Iterator<Item = &'a TaskKey>) -> Vec<TaskReport> {
        let states = self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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

    /// A heartbeat body with everything the board knows: per-service
    /// counts and bounded samples of failing, deferred and stood-down
    /// tasks, so its size does not grow with the databases a node owns.
    pub(super) fn heartbeat_body(&self, node_id: &str, offered: &[Service]) -> HeartbeatBody {
        let (counts, failing) = self.summary(offered);
        let mut body = HeartbeatBody::new(node_id, counts);
        body.failing = failing;
        body.skipped = self.skipped();
        body.failing_compactions = self.failing_compactions();
        (body.outside_compactor_count, body.outside_compactors) = self.outside_compactors();
        body
    }

    /// Databases this node stands down for, one entry each (coordinator
    /// and workers may both report one): the count and a bounded sample.
    pub(super) fn outside_compactors(&self) -> (u64, Vec<OutsideCompactor>) {
        let states = self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::outside_compactor::Evidence;

    /// A board of `databases` databases whose every task fails, is
    /// deferred, has failing compactions or stands down for an outside
    /// compactor: the worst a heartbeat can be asked to carry.
    fn troubled_board(databases: usize) -> TaskBoard {
        let board = TaskBoard::default();
        for i in 0..databases {
            let key = |service| TaskKey {
                database: format!("s3://bucket/tenants/database-{i:06}"),
                service,
                target: None,
            };
            let error = Some(format!(
                "database-{i:06} is not a SlateDB database (no manifest)"
            ));
            board.set(&key(Service::Gc), 0, Phase::Backoff, error.clone());
            let sighting = Sighting {
                compactor_epoch: 7,
                writer_epoch: 3,
                first_seen: chrono::Utc::now(),
                backlog_since: None,
                evidence: Evidence::Active,
                last_write: None,
            };
            board.set(
                &key(Service::CompactorCoordinator),
                0,
                Phase::StoodDown(sighting),
                None,
            );
            board.set_skip(&key(Service::Mirror), Some("the hook said not now".into()));
            board.report_compaction_failure(
                &key(Service::CompactionWorkers),
                "filter trapped".into(),
            );
        }
        board
    }

    #[test]
    fn a_heartbeat_body_does_not_grow_with_the_databases_a_node_owns() {
        let size = |databases| {
            let body = troubled_board(databases).heartbeat_body("node-1", &Service::ALL);
            serde_json::to_vec(&body).unwrap().len()
        };
        let (small, large) = (size(100), size(10_000));
        assert!(
            large <= small + 64,
            "{small} bytes at 100 databases, {large} at 10,000"
        );
        assert!(large < 16 * 1024, "{large} bytes");
    }
}
