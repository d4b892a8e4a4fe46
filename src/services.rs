//! The SlateDB services sleet runs for a database: garbage collection, the
//! standalone compaction coordinator, and compaction workers.
//!
//! Each is a thin wrapper over SlateDB's `Admin` "run until cancelled"
//! helpers, with sleet's resolved config mapped onto SlateDB's options
//! (docs/configuration.md lists the mapping). Duplicate runs are safe:
//! SlateDB fences a second coordinator through `compactor_epoch`, claims
//! worker jobs by CAS, and GC honours checkpoints and boundary files.

use std::sync::Arc;
use std::time::Duration;

use slatedb::config::{
    CompactionWorkerOptions, CompactorOptions, GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions, GarbageCollectorScheduleOptions, SizeTieredCompactionSchedulerOptions,
};
use slatedb::{CloseReason, ErrorKind};
use slatedb::{CompactionWorkerBuilder, CompactorBuilder, GarbageCollectorBuilder};
use slatedb_common::metrics::MetricsRecorder;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::compaction_code::CompactionCode;
use crate::config::{
    CompressionCodec, CoordinatorSettings, GcDirectory, GcSettings, OutsideCompactorSettings,
    WorkerSettings,
};
use crate::database::{ADMIN_CALL_TIMEOUT, DatabaseError, DatabaseHandle};
use crate::idle::wakes::{Role, WakeSignals};
use crate::idle::watch::{VersionWatch, Watched};
use crate::idle::{ServiceIdle, Signals, run_while_busy};
use crate::outside_compactor::claim::ClaimWatch;
use crate::outside_compactor::records::EpochRecords;
use crate::outside_compactor::{self, Evidence, LookError, Sighting, Thresholds, Verdict};
use crate::plugin::compaction::CompactionCodeSpec;
use crate::service::Service;

/// How often a coordinator retries recording the epoch it claimed.
const RECORD_RETRY: Duration = Duration::from_secs(1);

/// Retries SlateDB's services make per store request before giving up, so
/// a dead store surfaces as a task failure (and backoff) instead of a task
/// that hangs forever.
const OBJECT_STORE_MAX_RETRIES: u32 = 10;

/// Why a service could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Opening or reading the database itself failed.
    #[error(transparent)]
    Database(#[from] DatabaseError),
    /// A compaction plugin the database names could not be set up.
    #[error("{0}")]
    Plugin(String),
    /// A compactor outside the fleet holds the database: the fleet runs
    /// neither coordinator nor workers for it.
    #[error("{url} runs its own compactor ({}): the fleet stands down; fix: {}", describe_sighting(.sighting), outside_compactor::FIX)]
    OutsideCompactor {
        url: String,
        sighting: Box<Sighting>,
    },
    /// The fleet's compactor records could not be read or written.
    #[error("compactor records for {url}: {source}")]
    Records {
        url: String,
        source: Box<crate::outside_compactor::records::RecordError>,
    },
}

/// A sighting in a few words, for errors and logs.
pub fn describe_sighting(s: &Sighting) -> String {
    let evidence = match s.evidence {
        Evidence::Active => "it wrote .compactions recently",
        Evidence::Presumed => "quiet, not proven gone",
    };
    format!(
        "compactor epoch {}, writer epoch {}, seen since {}: {evidence}",
        s.compactor_epoch,
        s.writer_epoch,
        s.first_seen.format("%Y-%m-%dT%H:%M:%SZ")
    )
}

impl ServiceError {
    /// Whether SlateDB stopped this run because a newer coordinator fenced
    /// it: the expected end of a brief double run, not a failure.
    pub fn is_fenced(&self) -> bool {
        matches!(self, ServiceError::Database(e) if e.is_fenced())
    }

    /// The outside compactor the fleet stands down for, if that is why
    /// the task stopped.
    pub fn outside_compactor(&self) -> Option<&Sighting> {
        match self {
            ServiceError::OutsideCompactor { sighting, .. } => Some(sighting),
            _ => None,
        }
    }
}

/// The settings one service task runs with. Only these restart the task
/// when they change.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceSpec {
    Gc(GcSettings, ServiceIdle),
    Coordinator(
        CoordinatorSettings,
        OutsideCompactorSettings,
        ServiceIdle,
        CompactionCodeSpec,
    ),
    Workers(
        WorkerSettings,
        OutsideCompactorSettings,
        ServiceIdle,
        CompactionCodeSpec,
    ),
}

impl ServiceSpec {
    /// How long a task that stood down for an outside compactor waits
    /// before it looks again (coordinator and workers only).
    pub fn outside_recheck(&self) -> Option<Duration> {
        match self {
            ServiceSpec::Coordinator(_, outside, ..) | ServiceSpec::Workers(_, outside, ..) => {
                Some(outside.recheck)
            }
            _ => None,
        }
    }

    /// The application code the task's compactor runs (coordinator and
    /// workers only).
    pub fn compaction_code(&self) -> Option<&CompactionCodeSpec> {
        match self {
            ServiceSpec::Coordinator(.., code) | ServiceSpec::Workers(.., code) => Some(code),
            _ => None,
        }
    }

    pub fn service(&self) -> Service {
        match self {
            ServiceSpec::Gc(..) => Service::Gc,
            ServiceSpec::Coordinator(..) => Service::CompactorCoordinator,
            ServiceSpec::Workers(..) => Service::CompactionWorkers,
        }
    }
}

/// Runs one service for a database until `token` is cancelled (or the
/// service fails, or a coordinator is fenced, or the fleet stands down for
/// a compactor outside it). `started` is called once the checks pass and
/// the service itself starts. `code` is what the compactor runs of the
/// application's (built from [`ServiceSpec::compaction_code`]); `None`
/// leaves SlateDB's defaults. Through `wakes` a coordinator that wakes
/// the database tells its workers.
#[allow(clippy::too_many_arguments)]
pub async fn run_service(
    db: &DatabaseHandle,
    spec: &ServiceSpec,
    code: Option<&CompactionCode>,
    records: &EpochRecords,
    wakes: &WakeSignals,
    started: &(dyn Fn() + Sync),
    recorder: Arc<dyn MetricsRecorder>,
    token: CancellationToken,
) -> Result<(), ServiceError> {
    db.gated(db.check_servable()).await?;
    match spec {
        ServiceSpec::Gc(gc, idle) if idle.settings.enabled => {
            started();
            let options = gc_options(gc, db.supports_conditional_update());
            let mut watch = VersionWatch::new(db.clone(), Watched::Changes, idle.list_always);
            if watch.settled_for(idle.settings.sleep_after).await {
                tokio::select! {
                    () = token.cancelled() => return Ok(()),
                    () = Box::pin(db.gated(sweep_once(db, options.clone(), recorder.clone()))) => {}
                }
            }
            let vet = || async { Ok(()) };
            // Boxed, as every idle task would carry it inline.
            let listener = Box::new(wakes.listen(db.url(), Role::Gc));
            let signals = Signals {
                nudged: Some(listener.notify()),
                flow: Some(wakes.flow()),
                ..Signals::default()
            };
            run_while_busy(&mut watch, &idle.settings, &token, &signals, vet, |child| {
                let (options, recorder) = (options.clone(), recorder.clone());
                async move {
                    let result = run_gc(db, options, recorder, child).await;
                    result.map_err(|e| db.slatedb_error(e).into())
                }
            })
            .await
        }
        ServiceSpec::Gc(gc, _) => {
            started();
            let options = gc_options(gc, db.supports_conditional_update());
            let result = Box::pin(run_gc(db, options, recorder, token)).await;
            result.map_err(|e| db.slatedb_error(e).into())
        }
        ServiceSpec::Coordinator(c, outside, idle, _) if idle.settings.enabled => {
            // Look before showing as running: a task standing down for an
            // outside compactor looks again every recheck, and must not
            // flicker to running (and out of `status`) while it looks.
            db.may_compact(records, outside).await?;
            started();
            let trigger = c.min_compaction_sources as usize;
            let watched = Watched::Manifest { trigger };
            let mut watch = VersionWatch::new(db.clone(), watched, idle.list_always);
            let vet = || async { db.may_compact(records, outside).await.map(|_| ()) };
            let woke = || wakes.woke(db.url());
            let listener = Box::new(wakes.listen(db.url(), Role::Coordinator));
            let signals = Signals {
                woke: Some(&woke),
                nudged: Some(listener.notify()),
                flow: Some(wakes.flow()),
            };
            run_while_busy(&mut watch, &idle.settings, &token, &signals, vet, |child| {
                let recorder = recorder.clone();
                async move {
                    let claim = db.may_compact(records, outside).await?;
                    run_coordinator(db, c, code, claim, records, recorder, child).await
                }
            })
            .await
        }
        ServiceSpec::Coordinator(c, outside, ..) => {
            let claim = db.may_compact(records, outside).await?;
            started();
            Box::pin(run_coordinator(
                db, c, code, claim, records, recorder, token,
            ))
            .await
        }
        ServiceSpec::Workers(w, outside, idle, _) if idle.settings.enabled => {
            db.may_compact(records, outside).await?;
            started();
            // Workers have work once the coordinator queued a job.
            let mut watch = VersionWatch::new(db.clone(), Watched::Compactions, idle.list_always);
            let vet = || async { db.may_compact(records, outside).await.map(|_| ()) };
            // A coordinator that woke the database nudges them (see
            // `idle::wakes`): its job need not wait for their next look.
            // Boxed: every idle task's future would carry it inline.
            let listener = Box::new(wakes.listen(db.url(), Role::Workers));
            let signals = Signals {
                nudged: Some(listener.notify()),
                flow: Some(wakes.flow()),
                ..Signals::default()
            };
            // No look of their own before they start: the looks only start
            // the workers on activity, which `vet` has just passed.
            run_while_busy(&mut watch, &idle.settings, &token, &signals, vet, |child| {
                let recorder = recorder.clone();
                run_workers(db, w, code, outside, records, recorder, child)
            })
            .await
        }
        ServiceSpec::Workers(w, outside, ..) => {
            db.may_compact(records, outside).await?;
            started();
            Box::pin(run_workers(db, w, code, outside, records, recorder, token)).await
        }
    }
}

/// Runs the coordinator. With a [`Claim`] (outside compactors are looked
/// for) it first records that it is about to claim the epoch after the one
/// it saw, then claims exactly that epoch: a compactor that claimed
/// meanwhile (a writer that just opened) keeps its epoch and this run ends
/// fenced, instead of fencing it, and the record is withdrawn. Once the
/// claim holds, it is confirmed under the fleet root. Without a claim it
/// takes whatever epoch is next and records it once it holds it.
async fn run_coordinator(
    db: &DatabaseHandle,
    c: &CoordinatorSettings,
    code: Option<&CompactionCode>,
    claim: Option<Claim>,
    records: &EpochRecords,
    recorder: Arc<dyn MetricsRecorder>,
    token: CancellationToken,
) -> Result<(), ServiceError> {
    let watch = ClaimWatch::forwarding(recorder);
    let mut builder = CompactorBuilder::new(db.path().clone(), db.store().clone())
        .with_options(coordinator_options(c))
        .with_metrics_recorder(Arc::new(watch.clone()));
    if let Some(code) = code {
        builder = builder.with_merge_operator(code.merge_operator.clone());
        if let Some(filter) = &code.compaction_filter {
            builder = builder.with_compaction_filter_supplier(filter.clone());
        }
    }
    let records_error = |source| ServiceError::Records {
        url: db.url().to_string(),
        source: Box::new(source),
    };
    if let Some(claim) = claim {
        // Never beside the fleet coordinator that holds the epoch now.
        outside_compactor::handover::wait(records, db.url(), claim.expected, &token)
            .await
            .map_err(records_error)?;
        if token.is_cancelled() {
            return Ok(());
        }
        records
            .intend(db.url(), claim.expected + 1, claim.writer_epoch)
            .await
            .map_err(records_error)?;
        builder = builder.with_expected_epoch(claim.expected);
    }
    let compactor = builder.build();
    let run = compactor.run();
    tokio::pin!(run);
    // The held epoch until its confirmation is written (retried: a node
    // that dies before would leave only the claiming record behind).
    let mut unconfirmed: Option<u64> = None;
    let mut claimed = false;
    let mut retry = tokio::time::interval(RECORD_RETRY);
    loop {
        tokio::select! {
            result = &mut run => {
                if let (Err(e), None, Some(claim)) = (&result, watch.held(), claim)
                    && e.kind() == ErrorKind::Closed(CloseReason::Fenced)
                {
                    // Another compactor took the epoch first.
                    records.withdraw(db.url(), claim.expected + 1, claim.writer_epoch).await;
                }
                if let Some(epoch) = watch.held() {
                    records.release(db.url(), epoch).await;
                }
                return result.map_err(|e| db.slatedb_error(e).into());
            }
            _ = token.cancelled() => {
                let stopped = compactor.stop().await;
                if let Some(epoch) = unconfirmed.or(watch.held()) {
                    if let Err(e) = records.confirm(db.url(), epoch).await {
                        warn!(database = %db.url(), epoch, "failed to confirm the fleet's compactor epoch while stopping: {e}");
                    }
                    // Stopped: the node that gains the database may start.
                    records.release(db.url(), epoch).await;
                }
                return stopped.map_err(|e| db.slatedb_error(e).into());
            }
            epoch = watch.claimed(), if !claimed => {
                claimed = true;
                unconfirmed = Some(epoch);
                retry.reset_immediately();
            }
            // Written beside the compactor, not in a branch that would
            // hold it still meanwhile.
            (epoch, confirmed) = async {
                retry.tick().await;
                let epoch = unconfirmed.expect("guarded");
                (epoch, records.confirm(db.url(), epoch).await)
            }, if unconfirmed.is_some() => {
                match confirmed {
                    Ok(()) => unconfirmed = None,
                    Err(e) => warn!(database = %db.url(), epoch, "failed to confirm the fleet's compactor epoch; retrying: {e}"),
                }
            }
        }
    }
}

/// Runs SlateDB's garbage collector until `token` is cancelled: what
/// `Admin::run_gc_with_options` does, built here so its metrics reach the
/// node's recorder (`Admin` takes none in SlateDB 0.18).
async fn run_gc(
    db: &DatabaseHandle,
    options: GarbageCollectorOptions,
    recorder: Arc<dyn MetricsRecorder>,
    token: CancellationToken,
) -> Result<(), slatedb::Error> {
    let gc = GarbageCollectorBuilder::new(db.path().clone(), db.store().clone())
        .with_options(options)
        .with_metrics_recorder(recorder)
        .build();
    until_cancelled(gc.run(), || gc.stop(), &token).await
}

/// One pass of every collector SlateDB's GC runs, as a running one does
/// at each interval; like those passes, it logs its errors and goes on.
async fn sweep_once(
    db: &DatabaseHandle,
    options: GarbageCollectorOptions,
    recorder: Arc<dyn MetricsRecorder>,
) {
    let gc = GarbageCollectorBuilder::new(db.path().clone(), db.store().clone())
        .with_options(options)
        .with_metrics_recorder(recorder)
        .build();
    gc.run_gc_once().await;
}

/// Runs a SlateDB service's `run` until it ends, or until `token` is
/// cancelled and then its `stop`. Biased: the first poll starts the
/// service before a cancellation is looked at, so `stop` never meets a
/// service that never started.
async fn until_cancelled<S: std::future::Future<Output = Result<(), slatedb::Error>>>(
    run: impl std::future::Future<Output = Result<(), slatedb::Error>>,
    stop: impl FnOnce() -> S,
    token: &CancellationToken,
) -> Result<(), slatedb::Error> {
    tokio::pin!(run);
    tokio::select! {
        biased;
        result = &mut run => result,
        () = token.cancelled() => stop().await,
    }
}

/// Runs SlateDB's compaction workers until `token` is cancelled, as
/// `Admin::run_compaction_worker_with_options` does, with the node's
/// metrics recorder.
async fn run_worker(
    db: &DatabaseHandle,
    options: CompactionWorkerOptions,
    code: Option<&CompactionCode>,
    recorder: Arc<dyn MetricsRecorder>,
    token: CancellationToken,
) -> Result<(), slatedb::Error> {
    let mut builder = CompactionWorkerBuilder::new(db.path().clone(), db.store().clone())
        .with_options(options)
        .with_metrics_recorder(recorder);
    if let Some(code) = code {
        builder = builder.with_merge_operator(code.merge_operator.clone());
        if let Some(filter) = &code.compaction_filter {
            builder = builder.with_compaction_filter_supplier(filter.clone());
        }
    }
    let worker = builder.build().await?;
    until_cancelled(worker.run(), || worker.stop(), &token).await
}

/// Runs workers, looking every `recheck` for a compactor outside the fleet
/// that started meanwhile (a writer reopened with SlateDB's defaults): the
/// workers then stop, releasing their claims.
async fn run_workers(
    db: &DatabaseHandle,
    w: &WorkerSettings,
    code: Option<&CompactionCode>,
    outside: &OutsideCompactorSettings,
    records: &EpochRecords,
    recorder: Arc<dyn MetricsRecorder>,
    token: CancellationToken,
) -> Result<(), ServiceError> {
    let workers = token.child_token();
    let run = run_worker(db, worker_options(w), code, recorder, workers.clone());
    tokio::pin!(run);
    let mut recheck = tokio::time::interval(outside.recheck);
    recheck.tick().await;
    loop {
        // The look races the workers rather than running in a branch,
        // which would hold them still while it reads the store.
        tokio::select! {
            result = &mut run => return result.map_err(|e| db.slatedb_error(e).into()),
            seen = async {
                recheck.tick().await;
                db.may_compact(records, outside).await
            }, if outside.enabled => match seen {
                Err(stand_down @ ServiceError::OutsideCompactor { .. }) => {
                    workers.cancel();
                    if let Err(e) = run.await {
                        warn!(database = %db.url(), "workers stopped with an error: {e}");
                    }
                    return Err(stand_down);
                }
                Err(e) => warn!(database = %db.url(), "could not look for an outside compactor: {e}"),
                Ok(_) => {}
            },
        }
    }
}

impl DatabaseHandle {
    /// Looks at who holds the database's compactor epoch. `Ok(Some(claim))`
    /// when the fleet may compact, with what its coordinator must claim
    /// from; `Ok(None)` when `[outside-compactor] enabled = false` (no
    /// look, any epoch is the fleet's); [`ServiceError::OutsideCompactor`]
    /// when it must stand down.
    pub async fn may_compact(
        &self,
        records: &EpochRecords,
        outside: &OutsideCompactorSettings,
    ) -> Result<Option<Claim>, ServiceError> {
        if !outside.enabled {
            return Ok(None);
        }
        let target = outside_compactor::Target {
            url: self.url(),
            admin: self.admin(),
            store: self.store(),
            path: self.path(),
        };
        let limits = thresholds(outside);
        // The time limit is the store's, so it starts once the node's look
        // permit is held: the wait for a permit is the node's own queue.
        // Counted from before it, a node starting over 1,000 databases on
        // a slow store timed out most of its 2,000 first checks while they
        // queued, and the tasks' restarts kept the store saturated.
        // Boxed: the look's state would otherwise sit in every idle
        // coordinator's and workers' task for its whole life.
        // (`timeout` fixes its deadline when called, hence the `async`
        // block: it is first polled once the permit is held.)
        let look = outside_compactor::look(&target, records, &limits);
        let timed = async { tokio::time::timeout(ADMIN_CALL_TIMEOUT, look).await };
        let seen = Box::pin(self.gated(timed))
            .await
            .map_err(|_| DatabaseError::Timeout {
                what: "looking for an outside compactor",
                url: self.url().to_string(),
                after: ADMIN_CALL_TIMEOUT,
            })?
            .map_err(|e| match e {
                LookError::Probe(outside_compactor::probe::ProbeError::SlateDb(source)) => {
                    self.slatedb_error(source).into()
                }
                LookError::Probe(outside_compactor::probe::ProbeError::Store(source)) => {
                    DatabaseError::Store {
                        url: self.url().to_string(),
                        source,
                    }
                    .into()
                }
                LookError::Records(source) => ServiceError::Records {
                    url: self.url().to_string(),
                    source: Box::new(source),
                },
            })?
            .ok_or_else(|| DatabaseError::NotADatabase {
                url: self.url().to_string(),
            })?;
        match seen.verdict {
            Verdict::Outside(sighting) => Err(ServiceError::OutsideCompactor {
                url: self.url().to_string(),
                sighting: Box::new(sighting),
            }),
            Verdict::Released(why) => {
                info!(database = %self.url(), epoch = seen.compactor_epoch, "taking over compaction: the outside compactor is gone ({why:?})");
                Ok(Some(Claim::from(&seen)))
            }
            Verdict::Unclaimed | Verdict::Fleet => Ok(Some(Claim::from(&seen))),
        }
    }
}

/// What `sleet register` tells an operator about a database it just
/// registered: above all a compactor running inside its writer, which the
/// fleet will not fence. A database that cannot be read yet gets no
/// warning (registering before the first writer opens is normal).
pub async fn registration_warnings(records: &EpochRecords, url: &str) -> Vec<String> {
    let db = match DatabaseHandle::open(url) {
        Ok(db) => db,
        Err(e) => return vec![format!("could not open {url} to check it: {e}")],
    };
    let defaults = crate::config::DatabaseConfig::default().resolve();
    match db.may_compact(records, &defaults.outside_compactor).await {
        Ok(_) | Err(ServiceError::Database(DatabaseError::NotADatabase { .. })) => Vec::new(),
        Err(e @ ServiceError::OutsideCompactor { .. }) => vec![e.to_string()],
        Err(e) => vec![format!(
            "could not check {url} for a compactor outside the fleet: {e}"
        )],
    }
}

/// What a fleet coordinator claims from: the compactor epoch it saw (it
/// takes exactly the next one) and the writer epoch at the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub expected: u64,
    pub writer_epoch: u64,
}

impl From<&outside_compactor::Seen> for Claim {
    fn from(seen: &outside_compactor::Seen) -> Self {
        Claim {
            expected: seen.compactor_epoch,
            writer_epoch: seen.writer_epoch,
        }
    }
}

/// The judge's thresholds from the resolved config.
fn thresholds(s: &OutsideCompactorSettings) -> Thresholds {
    Thresholds {
        active_within: s.active_within,
        takeover_backlog: s.takeover_backlog,
        takeover_after: s.takeover_after,
    }
}

fn directory_options(dir: &GcDirectory) -> Option<GarbageCollectorDirectoryOptions> {
    dir.enabled.then_some(GarbageCollectorDirectoryOptions {
        interval: Some(dir.interval),
        min_age: dir.min_age,
        dry_run: dir.dry_run,
    })
}

/// SlateDB GC options from sleet's. `boundary_files` follows
/// `gc.boundary_files` when set, else what the store supports.
pub fn gc_options(gc: &GcSettings, store_supports_update: bool) -> GarbageCollectorOptions {
    GarbageCollectorOptions {
        manifest_options: directory_options(&gc.manifest),
        wal_options: directory_options(&gc.wal),
        wal_fence_options: directory_options(&gc.wal_fence),
        compacted_options: directory_options(&gc.compacted),
        compactions_options: directory_options(&gc.compactions),
        detach_options: gc
            .detach
            .enabled
            .then_some(GarbageCollectorScheduleOptions {
                interval: Some(gc.detach.interval),
            }),
        metric_level: None,
        boundary_files_enabled: gc.boundary_files_for(store_supports_update),
        object_store_max_retries: Some(OBJECT_STORE_MAX_RETRIES),
    }
}

/// SlateDB coordinator options from sleet's: never an embedded worker
/// (workers are their own service, placed on their own nodes).
pub fn coordinator_options(c: &CoordinatorSettings) -> CompactorOptions {
    CompactorOptions {
        poll_interval: c.poll_interval,
        manifest_update_timeout: c.manifest_update_timeout,
        max_concurrent_compactions: c.max_concurrent_compactions as usize,
        scheduler_options: SizeTieredCompactionSchedulerOptions {
            min_compaction_sources: c.min_compaction_sources as usize,
            max_compaction_sources: c.max_compaction_sources as usize,
            include_size_threshold: c.include_size_threshold,
            ..SizeTieredCompactionSchedulerOptions::default()
        }
        .into(),
        worker: None,
        metric_level: None,
        commit_compacted_interval: c.commit_compacted_interval,
        worker_heartbeat_timeout: c.worker_heartbeat_timeout,
        checkpoint_lifetime: c.checkpoint_lifetime,
        object_store_max_retries: Some(OBJECT_STORE_MAX_RETRIES),
        ..CompactorOptions::default()
    }
}

/// SlateDB worker options from sleet's.
pub fn worker_options(w: &WorkerSettings) -> CompactionWorkerOptions {
    CompactionWorkerOptions {
        max_concurrent_compactions: w.max_concurrent_compactions as usize,
        compactions_poll_interval: w.compactions_poll_interval,
        heartbeat_interval: w.heartbeat_interval,
        max_sst_size: usize::try_from(w.max_sst_size).unwrap_or(usize::MAX),
        max_fetch_tasks: w.max_fetch_tasks as usize,
        bytes_to_fetch: usize::try_from(w.bytes_to_fetch).unwrap_or(usize::MAX),
        max_subcompactions: w.max_subcompactions as usize,
        min_filter_keys: w.min_filter_keys,
        compression_codec: w.compression_codec.map(codec),
        metric_level: None,
        object_store_max_retries: Some(OBJECT_STORE_MAX_RETRIES),
    }
}

fn codec(c: CompressionCodec) -> slatedb::config::CompressionCodec {
    use slatedb::config::CompressionCodec as C;
    match c {
        CompressionCodec::Snappy => C::Snappy,
        CompressionCodec::Zlib => C::Zlib,
        CompressionCodec::Lz4 => C::Lz4,
        CompressionCodec::Zstd => C::Zstd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FleetConfig, parse_database_config};

    fn settings(toml: &str) -> crate::config::DatabaseSettings {
        let fleet = FleetConfig::default();
        fleet.resolve_database(&parse_database_config(&fleet, toml).unwrap())
    }

    /// The outside-compactor check's time limit counts from when the look
    /// permit is held, not from when the task asked for it: with every
    /// permit held for longer than the limit, and a store that takes
    /// 10 s a request, the check still answers (here: no database). The
    /// controls: timed from the request, it failed with a timeout (and at
    /// 1,000 databases on a slow store most tasks' first checks did); so
    /// did a `timeout` built before the permit and polled after it, which
    /// passed this test while the store answered at once.
    #[tokio::test(start_paused = true)]
    async fn the_outside_compactor_check_is_timed_from_its_permit() {
        use crate::root::FleetRoot;
        use crate::testing::{Faults, FaultyStore};
        let store = Arc::new(object_store::memory::InMemory::new());
        let faults = Faults::new();
        let reply_after = Duration::from_secs(10);
        faults.slow_down("", reply_after);
        let slow = Arc::new(FaultyStore::new(store.clone(), faults));
        let permits = Arc::new(tokio::sync::Semaphore::new(1));
        let db = DatabaseHandle::from_parts("memory:///db".into(), slow, "db".into())
            .with_look_limit(permits.clone());
        let root = FleetRoot::from_parts("memory:///fleet".into(), store, "fleet".into());
        let records = EpochRecords::new(root, "n");
        let outside = settings("").outside_compactor;
        let held = permits.clone().acquire_owned().await.unwrap();
        let queued = ADMIN_CALL_TIMEOUT * 2;
        tokio::spawn(async move {
            tokio::time::sleep(queued).await;
            drop(held);
        });
        let asked = tokio::time::Instant::now();
        let result = db.may_compact(&records, &outside).await;
        assert!(
            asked.elapsed() >= queued + reply_after,
            "it waited for the permit, then the store"
        );
        assert!(
            matches!(
                result,
                Err(ServiceError::Database(DatabaseError::NotADatabase { .. }))
            ),
            "{result:?}"
        );
    }

    #[test]
    fn options_map_from_resolved_defaults() {
        let s = settings("");
        let gc = gc_options(&s.gc, true);
        let manifest = gc.manifest_options.unwrap();
        assert_eq!(manifest.interval, Some(Duration::from_secs(60)));
        assert_eq!(manifest.min_age, Duration::from_secs(300));
        assert!(!manifest.dry_run);
        assert!(gc.wal_fence_options.unwrap().dry_run);
        assert_eq!(
            gc.detach_options.unwrap().interval,
            Some(Duration::from_secs(60))
        );
        assert!(gc.boundary_files_enabled);
        assert!(
            !gc_options(&s.gc, false).boundary_files_enabled,
            "file:// cannot If-Match"
        );

        let c = coordinator_options(&s.coordinator);
        assert!(c.worker.is_none(), "never an embedded worker");
        assert_eq!(c.poll_interval, Duration::from_secs(5));
        assert_eq!(c.scheduler_options["max_compaction_sources"], "8");
        assert_eq!(c.checkpoint_lifetime, Duration::from_secs(900));

        let w = worker_options(&s.workers);
        assert_eq!(w.heartbeat_interval, Duration::from_secs(10));
        assert_eq!(w.max_sst_size, 256 * 1024 * 1024);
        assert!(w.compression_codec.is_none());
    }

    #[test]
    fn disabled_directories_and_overrides_map_through() {
        let s = settings(
            r#"[gc]
            boundary_files = true
            [gc.compacted]
            enabled = false
            [gc.detach]
            enabled = false
            [compaction-workers]
            compression_codec = "lz4""#,
        );
        let gc = gc_options(&s.gc, false);
        assert!(gc.compacted_options.is_none());
        assert!(gc.detach_options.is_none());
        assert!(gc.boundary_files_enabled, "explicit setting wins");
        assert!(matches!(
            worker_options(&s.workers).compression_codec,
            Some(slatedb::config::CompressionCodec::Lz4)
        ));
    }
}
