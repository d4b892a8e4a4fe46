//! One task's life on a node: ask its hooks, run it (a SlateDB service or
//! a mirror target, side by side), tell the hooks how it went, and retry
//! failures with exponential backoff until the node stops owning it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::board::{Phase, TaskBoard};
use super::options::DatabaseOpener;
use super::owned::{TaskKey, TaskSpec, TaskWork};
use crate::fleet::database::DatabaseError;
use crate::mirror::MirrorError;
use crate::mirror::run::{MirrorRuntime, PassHooks, run_mirror_task};
use crate::observe::metrics::{Metrics, ServiceLabels, SlateDbRecorder};
use crate::plugin::hook::{Clock, HookRunner, RunContext, RunOutcome, Verdict};
use crate::services::compaction_code::CompactionCode;
use crate::services::idle::wakes::WakeSignals;
use crate::services::outside_compactor::Sighting;
use crate::services::outside_compactor::records::EpochRecords;
use crate::services::wal_hold::WalHold;
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

/// What every task of a node shares. Held once behind an `Arc`: every
/// task's future carries its supervisor inline for as long as the node
/// owns the task, 30,000 of them on a node with 10,000 databases, and a
/// copy of this in each was 700 bytes of every task's future and a few
/// heap copies (the node's id, the fleet root, the compactor records)
/// besides.
pub(crate) struct TaskShared {
    pub(crate) plugins: Option<Arc<crate::plugin::PluginSet>>,
    pub(crate) node_id: String,
    pub(crate) clock: Clock,
    pub(crate) board: TaskBoard,
    pub(crate) opener: DatabaseOpener,
    pub(crate) records: EpochRecords,
    /// How a coordinator that wakes a database tells its workers.
    pub(crate) wakes: WakeSignals,
    pub(crate) mirror: MirrorRuntime,
    pub(crate) metrics: Arc<Metrics>,
    /// A fenced coordinator waits one heartbeat interval, then reruns if
    /// this node still owns it (the views that disagreed have converged).
    /// The rerun first looks at who fenced it: a compactor outside the
    /// fleet is never fenced back.
    pub(crate) fenced_wait: Duration,
}

/// Runs one task until it is cancelled, retrying failures with
/// exponential backoff.
pub(super) struct Supervisor {
    pub(super) key: TaskKey,
    /// Shared with the node's running-task map, which compares it with
    /// what the node owns at every reconcile.
    pub(super) spec: Arc<TaskSpec>,
    pub(super) instance: u64,
    pub(super) shared: Arc<TaskShared>,
}

impl Supervisor {
    pub(super) async fn run(self, token: CancellationToken) {
        let _entry = self.shared.board.entry(&self.key, self.instance);
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
                        biased;
                        _ = token.cancelled() => break,
                        _ = tokio::time::sleep(self.shared.fenced_wait) => continue,
                    }
                }
                HookGate::Fail(reason) => Err(TaskError::Hook(reason)),
                HookGate::Go(hooked) => {
                    // A task that stood down stays shown as standing down
                    // while it looks again; `run_task` marks it running
                    // once the service really starts.
                    let board = &self.shared.board;
                    if !board.is_stood_down(&self.key, self.instance) {
                        board.set(&self.key, self.instance, Phase::Running, None);
                    }
                    let result = self.run_once(&token).await;
                    if let Some(hooked) = hooked {
                        let (hooks, context) = *hooked;
                        hooks.after(context, run_outcome(&result, &token, started.elapsed()));
                    }
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
                    self.count(&self.shared.metrics.tasks.fences);
                    info!(database = %self.key.database, "coordinator fenced; looking at who holds the epoch after one heartbeat interval");
                    backoff = BACKOFF_START;
                    self.shared.fenced_wait
                }
                Err(ref e) if e.outside_compactor().is_some() => {
                    let sighting = e.outside_compactor().cloned().expect("checked");
                    warn!(database = %self.key.database, service = %self.key.service, "{e}");
                    backoff = BACKOFF_START;
                    self.shared.board.set(
                        &self.key,
                        self.instance,
                        Phase::StoodDown(sighting),
                        None,
                    );
                    let work = &self.spec.work;
                    work.outside_recheck().unwrap_or(self.shared.fenced_wait)
                }
                Err(e) => {
                    if started.elapsed() >= HEALTHY_RUN {
                        backoff = BACKOFF_START;
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    self.count(&self.shared.metrics.tasks.restarts);
                    warn!(database = %self.key.database, service = %self.key.service,
                        "task failed: {e}; retrying in {}s", backoff.as_secs());
                    last_error = Some(e.to_string());
                    self.shared.board.set(
                        &self.key,
                        self.instance,
                        Phase::Backoff,
                        Some(e.to_string()),
                    );
                    backoff
                }
            };
            tokio::select! {
                biased;
                _ = token.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
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

    /// The task's hooks, built for a run that has any.
    fn hooks(&self) -> HookRunner {
        HookRunner {
            hooks: self.spec.hooks.clone(),
            plugins: self.shared.plugins.clone(),
            node_id: self.shared.node_id.clone(),
            clock: self.shared.clock.clone(),
        }
    }

    /// Asks the task's hooks whether this run may start, recording a
    /// deferral where the heartbeat (and so `status`) shows it. A task
    /// without hooks builds no context: it would sit in the task's
    /// future, with two strings on the heap, for the whole run.
    async fn ask_hooks(&self, attempt: u32, last_error: Option<String>) -> HookGate {
        if self.spec.hooks.is_empty() {
            return HookGate::Go(None);
        }
        let hooks = self.hooks();
        let context = hooks.context(
            &self.key.database,
            self.key.service,
            self.key.target.as_deref(),
            "task",
            attempt,
            last_error,
        );
        let board = &self.shared.board;
        // Boxed: a plugin call's state would otherwise sit in every
        // task's future, hooked or not, for the task's whole life.
        match Box::pin(hooks.before(&context)).await {
            Verdict::Allow => {
                board.set_skip(&self.key, None);
                HookGate::Go(Some(Box::new((hooks, context))))
            }
            Verdict::Skip(reason) => {
                info!(database = %self.key.database, service = %self.key.service, "run deferred: {reason}");
                board.set_skip(&self.key, Some(reason.clone()));
                hooks.after(
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
    async fn run_once(&self, token: &CancellationToken) -> Result<(), TaskError> {
        let run = self.run_task(token.clone());
        tokio::pin!(run);
        tokio::select! {
            biased;
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
            self.shared.plugins.as_deref(),
            &self.shared.node_id,
            &self.key.database,
            self.shared.board.compaction_report(&self.key),
        );
        built
            .map(Some)
            .map_err(|e| ServiceError::Plugin(e.to_string()))
    }

    async fn run_task(&self, token: CancellationToken) -> Result<(), TaskError> {
        let shared = &*self.shared;
        let source = (shared.opener)(&self.key.database)?;
        let started = || {
            shared
                .board
                .set(&self.key, self.instance, Phase::Running, None)
        };
        match &self.spec.work {
            TaskWork::Mirror(spec) => {
                let destination = (shared.opener)(&spec.destination)?;
                started();
                let (board, key) = (shared.board.clone(), self.key.clone());
                let passes = PassHooks {
                    runner: self.hooks(),
                    report_skip: Arc::new(move |reason| board.set_skip(&key, reason)),
                };
                let run =
                    run_mirror_task(source, destination, spec, &shared.mirror, &passes, &token);
                Ok(Box::pin(run).await?)
            }
            TaskWork::Service(spec) => {
                let recorder = Arc::new(SlateDbRecorder::new(
                    shared.metrics.clone(),
                    &self.key.database,
                ));
                let code = self.compaction_code(spec)?;
                let code = code.as_ref();
                let hold = match spec {
                    ServiceSpec::Gc(_, _, tails) if !tails.is_empty() => {
                        let tails = tails
                            .iter()
                            .map(|url| (shared.opener)(url))
                            .collect::<Result<Vec<_>, _>>()?;
                        let hold: Arc<dyn slatedb::GcFilter> =
                            Arc::new(WalHold::new(source.clone(), tails));
                        Some(hold)
                    }
                    _ => None,
                };
                Ok(run_service(
                    &source,
                    spec,
                    code,
                    &shared.records,
                    &shared.wakes,
                    &started,
                    recorder,
                    hold,
                    token,
                )
                .await?)
            }
        }
    }
}

/// What a task's hooks said before a run: go (with the hooks and the
/// context to tell how it went, if the task has hooks), wait, or fail.
enum HookGate {
    Go(Option<Box<(HookRunner, RunContext)>>),
    Skip,
    Fail(String),
}

/// Why one run of a task ended badly: its service's error or its
/// mirror's, side by side, or its hooks'.
#[derive(Debug, thiserror::Error)]
enum TaskError {
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Mirror(Box<MirrorError>),
    /// A hook refused the run, or could not answer.
    #[error("{0}")]
    Hook(String),
}

impl From<MirrorError> for TaskError {
    fn from(e: MirrorError) -> Self {
        TaskError::Mirror(Box::new(e))
    }
}

impl From<DatabaseError> for TaskError {
    fn from(e: DatabaseError) -> Self {
        TaskError::Service(e.into())
    }
}

impl TaskError {
    /// Whether SlateDB stopped this run because a newer coordinator
    /// fenced it: the expected end of a brief double run.
    fn is_fenced(&self) -> bool {
        matches!(self, TaskError::Service(e) if e.is_fenced())
    }

    /// The outside compactor the fleet stands down for, if that is why
    /// the task stopped.
    fn outside_compactor(&self) -> Option<&Sighting> {
        match self {
            TaskError::Service(e) => e.outside_compactor(),
            _ => None,
        }
    }
}

/// How a run ended, for its hooks.
fn run_outcome(
    result: &Result<(), TaskError>,
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
    use object_store::path::Path;

    use super::*;
    use crate::config::{DatabaseConfig, FleetConfig};
    use crate::daemon::owned::task_spec;
    use crate::fleet::database::DatabaseError;
    use crate::fleet::ownership::Assignment;
    use crate::fleet::root::{FleetRoot, FleetView};
    use crate::model::service::Service;

    /// The work of a GC task with default settings.
    fn gc_spec() -> TaskWork {
        let settings = FleetConfig::default().resolve_database(&DatabaseConfig::default());
        let assignment = Assignment {
            service: Service::Gc,
            target: None,
            owners: vec![],
        };
        let none = std::collections::BTreeMap::new();
        task_spec(
            &assignment,
            "s3://b/db",
            &settings,
            &FleetView::default(),
            || &none,
        )
        .unwrap()
    }

    /// A GC supervisor for `s3://b/db` on `board` whose store opener is
    /// `opener`.
    pub(super) fn supervisor(
        board: &TaskBoard,
        metrics: &Arc<Metrics>,
        opener: DatabaseOpener,
    ) -> Supervisor {
        let root = FleetRoot::from_parts(
            "memory:///fleet".into(),
            Arc::new(object_store::memory::InMemory::new()),
            Path::from("fleet"),
        );
        Supervisor {
            key: TaskKey {
                database: "s3://b/db".into(),
                service: Service::Gc,
                target: None,
            },
            spec: Arc::new(TaskSpec {
                work: gc_spec(),
                hooks: Vec::new(),
            }),
            instance: 1,
            shared: Arc::new(TaskShared {
                plugins: None,
                node_id: "n".into(),
                clock: crate::plugin::hook::system_clock(),
                board: board.clone(),
                opener,
                records: EpochRecords::new(root.clone(), "n"),
                wakes: WakeSignals::new(root, "n"),
                mirror: MirrorRuntime::default(),
                metrics: metrics.clone(),
                fenced_wait: Duration::from_secs(7),
            }),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failing_tasks_back_off_and_report_their_error() {
        let board = TaskBoard::default();
        let opened = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = opened.clone();
        let metrics = Arc::new(Metrics::default());
        let opener: DatabaseOpener = Arc::new(move |_: &str| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(DatabaseError::NotADatabase {
                url: "s3://b/db".into(),
            })
        });
        let supervisor = supervisor(&board, &metrics, opener);
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

    /// A supervisor that panics (here in its store opener) leaves no
    /// entry behind: before, its task went on counting as running in
    /// the node's heartbeat for good.
    #[tokio::test]
    async fn a_supervisor_that_panics_leaves_no_task_behind() {
        let board = TaskBoard::default();
        let metrics = Arc::new(Metrics::default());
        let opener: DatabaseOpener = Arc::new(|_: &str| panic!("a bug in the task"));
        let supervisor = supervisor(&board, &metrics, opener);
        let ended = tokio::spawn(supervisor.run(CancellationToken::new())).await;
        assert!(ended.unwrap_err().is_panic());
        let (counts, _) = board.summary(&[Service::Gc]);
        assert_eq!((counts[0].running, counts[0].backoff), (0, 0));
    }

    /// Every task a node owns is one of these futures for as long as it
    /// owns it, idle or not: 3 per database, 30,000 on a node with 10,000
    /// databases. A running service's state (SlateDB's collector,
    /// coordinator or workers, a mirror pass, a plugin call) is boxed, so
    /// an idle task carries only its watch. Inline it was 12 KiB a task
    /// (measured), 36 KiB of every idle database's memory. Then 4,088
    /// bytes in this (debug) build, until the node's shared parts went
    /// behind one `Arc`, a task without hooks stopped holding a hook
    /// context, and each service's idle loop was boxed (the three shared
    /// the largest one's size): 1,864.
    #[test]
    fn a_task_holds_no_running_service_state_inline() {
        let board = TaskBoard::default();
        let metrics = Arc::new(Metrics::default());
        let opener: DatabaseOpener = Arc::new(|_: &str| panic!("never opened"));
        let task = supervisor(&board, &metrics, opener).run(CancellationToken::new());
        let size = std::mem::size_of_val(&task);
        assert!(size <= 2048, "a task's future is {size} bytes");
    }
}
