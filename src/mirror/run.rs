//! The node's mirror task for one (database, target): continuous or
//! periodic passes, the WAL tail, and retention.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::MirrorError;
use super::io::list_dir;
use super::layout::{MANIFEST_DIR, parse_manifest_file};
use super::pass::MirrorPair;
use super::tail::Tail;
use crate::config::{MirrorMode, MirrorTargetSettings};
use crate::mirror::copier::CopierOptions;
use crate::observe::metrics::{Metrics, TargetMetrics};
use crate::plugin::hook::{HookRunner, RunContext, RunOutcome, Verdict};

/// A continuous mirror that found nothing to do backs off to this (or to
/// its `poll`, if longer) between wakes.
const IDLE_POLL_MAX: Duration = Duration::from_secs(300);
/// A continuous mirror with retention prunes at least this often.
const IDLE_PRUNE_EVERY: Duration = Duration::from_secs(600);

/// What every mirror task on a node shares.
#[derive(Debug, Clone)]
pub struct MirrorRuntime {
    pub copiers: CopierOptions,
    /// `--max-mirror-jobs`: passes and prunes running at once on the node.
    pub jobs: Arc<Semaphore>,
    /// Where passes, copies, lag and pruning are counted.
    pub metrics: Arc<Metrics>,
}

impl MirrorRuntime {
    pub fn new(copiers: CopierOptions, max_jobs: usize) -> Self {
        MirrorRuntime {
            copiers,
            jobs: Arc::new(Semaphore::new(max_jobs.max(1))),
            metrics: Arc::new(Metrics::default()),
        }
    }

    /// Counts into `metrics` (the node's) instead of a private registry.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }
}

impl Default for MirrorRuntime {
    fn default() -> Self {
        let parallelism = std::thread::available_parallelism().map_or(4, |n| n.get());
        MirrorRuntime::new(CopierOptions::default(), parallelism)
    }
}

/// What a node's mirror task for one target runs with: its place in the
/// config, compared on reconcile so only a changed target restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorSpec {
    pub target: String,
    /// The canonical destination root for this database.
    pub destination: String,
    pub settings: MirrorTargetSettings,
    /// The destination is itself a registered database: refused, loudly.
    pub destination_registered: bool,
    /// Other (database, target) pairs with the same destination: then
    /// none of them runs.
    pub shared_with: Vec<(String, String)>,
    /// What the operator grants the target's copier plugin.
    pub limits: crate::config::PluginLimits,
}

/// The hooks around each sync pass, and where a deferral is reported.
#[derive(Clone)]
pub struct PassHooks {
    pub runner: HookRunner,
    pub report_skip: Arc<dyn Fn(Option<String>) + Send + Sync>,
}

impl PassHooks {
    /// No hooks: every pass goes ahead.
    pub fn none() -> PassHooks {
        PassHooks {
            runner: HookRunner::none(""),
            report_skip: Arc::new(|_| {}),
        }
    }
}

/// What the hooks said before a pass.
pub(crate) enum PassGate {
    /// Go ahead; the context to tell the hooks how it went, if any.
    Go(Option<RunContext>),
    /// A hook deferred it; its post-task call is still to be made.
    Defer { reason: String, context: RunContext },
}

/// How a deferred pass ended, for the hooks' post-task calls.
pub(crate) fn skipped(reason: String) -> RunOutcome {
    RunOutcome {
        status: "skipped",
        error: Some(reason),
        duration: Duration::ZERO,
    }
}

/// How a pass ended, for the hooks' post-task calls.
pub(crate) fn ended<T>(result: &Result<T, MirrorError>, took: Duration) -> RunOutcome {
    let (status, error) = match result {
        Ok(_) => ("ok", None),
        Err(MirrorError::Cancelled) => ("cancelled", None),
        Err(e) => ("error", Some(e.to_string())),
    };
    RunOutcome {
        status,
        error,
        duration: took,
    }
}

impl PassHooks {
    /// Asks the hooks before a pass of `pair`; a hook that fails it (or
    /// cannot answer) is an error.
    pub(crate) async fn before(&self, pair: &MirrorPair) -> Result<PassGate, MirrorError> {
        if self.runner.is_empty() {
            return Ok(PassGate::Go(None));
        }
        let context = self.runner.context(
            pair.source.url(),
            crate::Service::Mirror,
            Some(&pair.target),
            "mirror-pass",
            1,
            None,
        );
        match self.runner.before(&context).await {
            Verdict::Allow => {
                (self.report_skip)(None);
                Ok(PassGate::Go(Some(context)))
            }
            Verdict::Skip(reason) => {
                tracing::info!(target = %pair.target, "mirror pass deferred: {reason}");
                (self.report_skip)(Some(reason.clone()));
                Ok(PassGate::Defer { reason, context })
            }
            Verdict::Fail(reason) => Err(MirrorError::Hook(reason)),
        }
    }

    /// One pass with its hooks around it, counted; `None` when a hook
    /// deferred it.
    async fn pass(
        &self,
        pair: &MirrorPair,
        watch: &TargetMetrics,
        cancel: &CancellationToken,
    ) -> Result<Option<super::pass::PassOutcome>, MirrorError> {
        let context = match self.before(pair).await {
            Ok(PassGate::Go(context)) => context,
            Ok(PassGate::Defer { reason, context }) => {
                self.runner.after(context, skipped(reason));
                watch.pass("deferred");
                return Ok(None);
            }
            Err(e) => {
                watch.pass("failed");
                return Err(e);
            }
        };
        let started = tokio::time::Instant::now();
        let result = pair.sync_pass(cancel).await;
        if let Some(context) = context {
            self.runner
                .after(context, ended(&result, started.elapsed()));
        }
        match &result {
            Ok(outcome) => {
                watch.copied(
                    &pair.copier.name(),
                    outcome.objects_copied,
                    outcome.bytes_copied,
                );
                if outcome.committed {
                    watch.pass("committed");
                    watch.restore_point_committed();
                } else {
                    watch.pass("caught_up");
                }
            }
            Err(MirrorError::Cancelled) => {}
            Err(_) => watch.pass("failed"),
        }
        result.map(Some)
    }
}

/// Runs a node's mirror task: builds the pair from `spec`, then runs the
/// target's mode until `cancel` fires.
pub async fn run_mirror_task(
    source: crate::fleet::database::DatabaseHandle,
    destination: crate::fleet::database::DatabaseHandle,
    spec: &MirrorSpec,
    runtime: &MirrorRuntime,
    hooks: &PassHooks,
    cancel: &CancellationToken,
) -> Result<(), MirrorError> {
    if !spec.shared_with.is_empty() {
        return Err(MirrorError::DestinationShared {
            destination: spec.destination.clone(),
            others: crate::fleet::mirror_targets::describe_users(&spec.shared_with),
        });
    }
    if spec.destination_registered {
        return Err(MirrorError::DestinationRegistered {
            destination: spec.destination.clone(),
        });
    }
    let settings = &spec.settings;
    let pair = MirrorPair {
        target: spec.target.clone(),
        source,
        destination,
        copier: crate::mirror::copier::for_target(settings, &spec.limits, &runtime.copiers).await?,
        checkpoint_lifetime: settings.checkpoint_lifetime,
        progress: crate::mirror::copier::CopyProgress::new(),
        deep_check: super::pass::DeepCheck::every(settings.deep_check),
        pin_source: true,
    };
    run_target(&pair, settings, runtime, hooks, cancel).await
}

/// Runs a target's mirror until `cancel` fires (`Ok`) or something fails.
pub async fn run_target(
    pair: &MirrorPair,
    settings: &MirrorTargetSettings,
    runtime: &MirrorRuntime,
    hooks: &PassHooks,
    cancel: &CancellationToken,
) -> Result<(), MirrorError> {
    let watch = runtime.metrics.target(pair.source.url(), &pair.target);
    match settings.mode {
        MirrorMode::Continuous => {
            run_continuous(pair, settings, runtime, hooks, &watch, cancel).await
        }
        MirrorMode::Periodic => run_periodic(pair, settings, runtime, hooks, &watch, cancel).await,
    }
}

/// How far a continuous target is behind its source, and since when.
#[derive(Debug, Default)]
struct Lag {
    behind_since: Option<tokio::time::Instant>,
}

impl Lag {
    /// Records the gap between the source's latest manifest and the
    /// destination's watermark (ids are dense, so their difference counts
    /// manifests).
    fn observe(&mut self, latest: Option<u64>, watermark: Option<u64>, watch: &TargetMetrics) {
        let behind = match (latest, watermark) {
            (Some(latest), Some(mark)) => latest.saturating_sub(mark),
            (Some(latest), None) => latest,
            (None, _) => 0,
        };
        if behind == 0 {
            self.behind_since = None;
            watch.behind(0, Duration::ZERO);
        } else {
            let since = *self
                .behind_since
                .get_or_insert_with(tokio::time::Instant::now);
            watch.behind(behind, since.elapsed());
        }
    }
}

/// Sleeps `wait`; false when cancelled first.
async fn pause(wait: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        biased;
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}

/// A mirror-job permit, or `None` when cancelled while waiting.
async fn permit(
    runtime: &MirrorRuntime,
    cancel: &CancellationToken,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => None,
        permit = runtime.jobs.clone().acquire_owned() => permit.ok(),
    }
}

async fn prune_now(
    pair: &MirrorPair,
    settings: &MirrorTargetSettings,
    watch: &TargetMetrics,
) -> Result<(), MirrorError> {
    if let Some(keep) = settings.retention_keep {
        let report = pair
            .prune(keep, settings.min_age, pair.source.now())
            .await?;
        watch.pruned(report.deleted_manifests, report.deleted_objects);
        if report.deleted_manifests + report.deleted_objects > 0 {
            tracing::info!(target = %pair.target, manifests = report.deleted_manifests,
                objects = report.deleted_objects, "mirror pruned");
        }
    }
    Ok(())
}

/// Follows the source: a pass whenever its latest manifest moves, and the
/// WAL tail in between, every [`super::tail::TAIL_INTERVAL`] while the
/// writer is active. A caught-up look at the manifests costs one source
/// LIST; a caught-up tail look one GET.
async fn run_continuous(
    pair: &MirrorPair,
    settings: &MirrorTargetSettings,
    runtime: &MirrorRuntime,
    hooks: &PassHooks,
    watch: &TargetMetrics,
    cancel: &CancellationToken,
) -> Result<(), MirrorError> {
    let mut follow = Follow {
        pair,
        settings,
        runtime,
        hooks,
        watch,
        cancel,
        idle: settings.poll,
        max_idle: IDLE_POLL_MAX.max(settings.poll),
        watermark: None,
        tail: None,
        last_prune: tokio::time::Instant::now(),
        lag: Lag::default(),
    };
    let result = follow.run().await;
    if let Some(tail) = &mut follow.tail {
        tail.flush_records(&pair.destination.root()).await;
    }
    result
}

/// A continuous target: what it runs with, and its state between looks.
struct Follow<'a> {
    pair: &'a MirrorPair,
    settings: &'a MirrorTargetSettings,
    runtime: &'a MirrorRuntime,
    hooks: &'a PassHooks,
    watch: &'a TargetMetrics,
    cancel: &'a CancellationToken,
    idle: Duration,
    max_idle: Duration,
    watermark: Option<u64>,
    tail: Option<Tail>,
    last_prune: tokio::time::Instant,
    lag: Lag,
}

impl Follow<'_> {
    async fn run(&mut self) -> Result<(), MirrorError> {
        let (pair, settings, cancel) = (self.pair, self.settings, self.cancel);
        let source = pair.source.root();
        let destination = pair.destination.root();
        // A destination that already holds WAL is tailed from its newest
        // object on at once, not only after the first pass.
        self.tail = Tail::resume(&destination).await?;
        let mut next_look = tokio::time::Instant::now();
        loop {
            let mut active = false;
            if tokio::time::Instant::now() >= next_look {
                match self.look().await? {
                    Looked::Cancelled => return Ok(()),
                    Looked::Deferred => {
                        if !pause(settings.poll, cancel).await {
                            return Ok(());
                        }
                        continue;
                    }
                    Looked::Done { committed } => active = committed,
                }
            }
            let mut tail_wait = self.idle;
            if let Some(tail) = &mut self.tail {
                // Before the look: what a restore would have missed at most
                // had it started now.
                if let Some(behind) = tail.behind() {
                    self.watch.recovery_point(behind);
                }
                let copied = tail.step(&source, &destination).await?;
                active |= copied > 0;
                tail_wait = tail.wait(self.idle);
            }
            if active {
                self.idle = settings.poll;
                next_look = next_look.min(tokio::time::Instant::now() + self.idle);
            }
            if tokio::time::Instant::now() >= next_look {
                if !active {
                    self.idle = (self.idle * 2).min(self.max_idle);
                }
                next_look = tokio::time::Instant::now() + self.idle;
            }
            let wake = next_look.min(tokio::time::Instant::now() + tail_wait);
            let wait = wake.saturating_duration_since(tokio::time::Instant::now());
            if !pause(wait, cancel).await {
                return Ok(());
            }
        }
    }

    /// One look at the source's manifests: a pass when the latest moved,
    /// and a prune when one is due.
    async fn look(&mut self) -> Result<Looked, MirrorError> {
        let (pair, settings, runtime, watch, cancel) = (
            self.pair,
            self.settings,
            self.runtime,
            self.watch,
            self.cancel,
        );
        let latest = latest_manifest_id(&pair.source.root()).await?;
        self.lag.observe(latest, self.watermark, watch);
        let prune_due =
            settings.retention_keep.is_some() && self.last_prune.elapsed() >= IDLE_PRUNE_EVERY;
        if latest.is_some() && latest != self.watermark {
            let Some(_permit) = permit(runtime, cancel).await else {
                return Ok(Looked::Cancelled);
            };
            let Some(outcome) = self.pass_beside_tail().await? else {
                // Deferred by a hook: no pass and no tail until it allows.
                return Ok(Looked::Deferred);
            };
            self.watermark = Some(outcome.head);
            self.lag.observe(latest, self.watermark, watch);
            let floor = outcome
                .next_wal_sst_id
                .max(outcome.wal_end.saturating_add(1));
            let tail = match self.tail.take() {
                Some(tail) => tail,
                None => Tail::start(&pair.destination.root(), floor).await?,
            };
            self.tail
                .insert(tail)
                .passed(outcome.wal_start, outcome.wal_end);
            if outcome.committed || prune_due {
                prune_now(pair, settings, watch).await?;
                self.last_prune = tokio::time::Instant::now();
            }
            return Ok(Looked::Done {
                committed: outcome.committed,
            });
        }
        if prune_due {
            let Some(_permit) = permit(runtime, cancel).await else {
                return Ok(Looked::Cancelled);
            };
            prune_now(pair, settings, watch).await?;
            self.last_prune = tokio::time::Instant::now();
        }
        Ok(Looked::Done { committed: false })
    }

    /// A pass, with the WAL tail going on beside it: a pass copies a
    /// flush's or a compaction's SSTs, which can take minutes, and the
    /// recovery point must not wait for it. The tail looks between the
    /// pass's polls (a look is a few small requests); both may write one
    /// WAL object, with the same bytes.
    async fn pass_beside_tail(&mut self) -> Result<Option<super::pass::PassOutcome>, MirrorError> {
        let pair = self.pair;
        let (source, destination) = (pair.source.root(), pair.destination.root());
        let pass = self.hooks.pass(pair, self.watch, self.cancel);
        tokio::pin!(pass);
        loop {
            let wait = self
                .tail
                .as_ref()
                .map_or(self.max_idle, |t| t.wait(self.idle));
            tokio::select! {
                biased;
                outcome = &mut pass => return outcome,
                () = tokio::time::sleep(wait), if self.tail.is_some() => {
                    if let Some(tail) = &mut self.tail {
                        tail.step(&source, &destination).await?;
                    }
                }
            }
        }
    }
}

/// What a look at the manifests came to.
enum Looked {
    Done { committed: bool },
    Deferred,
    Cancelled,
}

/// Cuts a restore point every `interval`, judged by the age of the
/// destination's latest manifest, so a restarted task keeps the cadence.
async fn run_periodic(
    pair: &MirrorPair,
    settings: &MirrorTargetSettings,
    runtime: &MirrorRuntime,
    hooks: &PassHooks,
    watch: &TargetMetrics,
    cancel: &CancellationToken,
) -> Result<(), MirrorError> {
    let destination = pair.destination.root();
    let check = (settings.interval / 20).clamp(Duration::from_secs(60), Duration::from_secs(3600));
    loop {
        let age = latest_manifest_age(&destination, pair.destination.now()).await?;
        let wait = match age {
            Some(age) if age < settings.interval => {
                (settings.interval - age).min(settings.interval)
            }
            _ => {
                let Some(_permit) = permit(runtime, cancel).await else {
                    return Ok(());
                };
                match hooks.pass(pair, watch, cancel).await? {
                    None => settings.poll.min(settings.interval),
                    Some(outcome) => {
                        watch.behind(0, Duration::ZERO);
                        prune_now(pair, settings, watch).await?;
                        // A pass that brought only new WAL (a quiet
                        // writer's) commits no manifest, but its restore
                        // point is as new as one that did.
                        if outcome.committed || outcome.objects_copied > 0 {
                            settings.interval
                        } else {
                            check.min(settings.interval)
                        }
                    }
                }
            }
        };
        if !pause(wait, cancel).await {
            return Ok(());
        }
    }
}

async fn manifests(
    root: &crate::store::StoreRoot,
) -> Result<Vec<(u64, object_store::ObjectMeta)>, MirrorError> {
    Ok(list_dir(root, MANIFEST_DIR)
        .await?
        .into_iter()
        .filter_map(|(name, meta)| Some((parse_manifest_file(name.rsplit('/').next()?)?, meta)))
        .collect())
}

/// The highest manifest id under a root, by one LIST.
pub async fn latest_manifest_id(
    root: &crate::store::StoreRoot,
) -> Result<Option<u64>, MirrorError> {
    Ok(manifests(root).await?.into_iter().map(|(id, _)| id).max())
}

/// How long ago the root's latest manifest was written.
async fn latest_manifest_age(
    root: &crate::store::StoreRoot,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Duration>, MirrorError> {
    let latest = manifests(root).await?.into_iter().max_by_key(|(id, _)| *id);
    Ok(latest.map(|(_, meta)| (now - meta.last_modified).to_std().unwrap_or_default()))
}
