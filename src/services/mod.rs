//! The SlateDB services sleet runs for a database: garbage collection, the
//! standalone compaction coordinator, and compaction workers.
//!
//! Each is a thin wrapper over SlateDB's `Admin` "run until cancelled"
//! helpers, with sleet's resolved config mapped onto SlateDB's options
//! (docs/configuration.md lists the mapping). Duplicate runs are safe:
//! SlateDB fences a second coordinator through `compactor_epoch`, claims
//! worker jobs by CAS, and GC honours checkpoints and boundary files.
//!
//! The rooms: one file a service (`gc`, `coordinator`, `workers`) with
//! `slatedb_options` mapping settings onto SlateDB's, `compaction_claim`
//! (may the fleet compact, and from which epoch), `registration` (what
//! `register` warns of); beside them `idle` (when a service sleeps and
//! wakes), `events` (the store's notifications that wake it),
//! `outside_compactor` (a compactor the fleet must not fence),
//! `compaction_code` (the application's merge operator and filter) and
//! `hooks` (which plugins guard a run).
//!
//! May import: `observe`, `plugin`, `fleet`, `config`, `store`, `model`.
//! Not `mirror`: the two wings of the work layer stand apart.

mod compaction_claim;
pub mod compaction_code;
mod coordinator;
pub mod events;
mod gc;
pub mod hooks;
pub mod idle;
pub mod outside_compactor;
mod registration;
mod replay;
mod slatedb_options;
pub mod wal_hold;
mod workers;

pub use coordinator::Claim;
use coordinator::run_coordinator;
use gc::{run_gc, sweep_once};
pub use registration::registration_warnings;
pub use slatedb_options::{coordinator_options, gc_options, worker_options};
use workers::run_workers;

use std::sync::Arc;
use std::time::Duration;

use slatedb_common::metrics::MetricsRecorder;
use tokio_util::sync::CancellationToken;

use crate::config::{CoordinatorSettings, GcSettings, OutsideCompactorSettings, WorkerSettings};
use crate::fleet::database::{DatabaseError, DatabaseHandle};
use crate::model::service::Service;
use crate::plugin::compaction::CompactionCodeSpec;
use crate::services::compaction_code::CompactionCode;
use crate::services::idle::wakes::{Role, WakeSignals};
use crate::services::idle::watch::{VersionWatch, Watched};
use crate::services::idle::{ServiceIdle, Signals, run_while_busy};
use crate::services::outside_compactor::records::EpochRecords;
use outside_compactor::{Evidence, Sighting};

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
        source: Box<crate::services::outside_compactor::records::RecordError>,
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
    /// The last field: the destinations of the database's continuous
    /// mirrors, whose tails the GC waits for ([`wal_hold`]).
    Gc(GcSettings, ServiceIdle, Vec<String>),
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
    hold: Option<Arc<dyn slatedb::GcFilter>>,
    token: CancellationToken,
) -> Result<(), ServiceError> {
    // Boxed: a start-up check, held by every task's future for its whole
    // life if inline (the largest state an idle task would carry).
    Box::pin(db.gated(db.check_servable())).await?;
    match spec {
        ServiceSpec::Gc(gc, idle, _) if idle.settings.enabled => {
            started();
            let options = gc_options(gc, db.supports_conditional_update());
            let mut watch = VersionWatch::new(db.clone(), Watched::Changes, idle.list_always);
            if watch.settled_for(idle.settings.sleep_after).await {
                tokio::select! {
                    biased;
                    () = token.cancelled() => return Ok(()),
                    () = Box::pin(db.gated(sweep_once(db, options.clone(), recorder.clone(), hold.clone()))) => {}
                }
            }
            let vet = || async { Ok(()) };
            // Boxed, as every idle task would carry it inline.
            let listener = Box::new(wakes.listen(db.url(), Role::Gc));
            let signals = Signals {
                nudged: Some(listener.notify()),
                flow: Some(wakes.flow()),
                grid_origin: Some(wakes.grid_origin()),
                ..Signals::default()
            };
            while_busy(&mut watch, idle, &token, &signals, vet, |child| {
                let (options, recorder, hold) = (options.clone(), recorder.clone(), hold.clone());
                async move {
                    let result = run_gc(db, options, recorder, hold, child).await;
                    result.map_err(|e| db.slatedb_error(e).into())
                }
            })
            .await
        }
        ServiceSpec::Gc(gc, _, _) => {
            started();
            let options = gc_options(gc, db.supports_conditional_update());
            let result = Box::pin(run_gc(db, options, recorder, hold, token)).await;
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
                grid_origin: Some(wakes.grid_origin()),
            };
            while_busy(&mut watch, idle, &token, &signals, vet, |child| {
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
                grid_origin: Some(wakes.grid_origin()),
                ..Signals::default()
            };
            // No look of their own before they start: the looks only start
            // the workers on activity, which `vet` has just passed.
            while_busy(&mut watch, idle, &token, &signals, vet, |child| {
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

/// [`run_while_busy`] with `idle`'s settings, on the heap. Boxed because
/// the three services' loops are one future type (this function's): inline,
/// every task would carry the largest loop's state (the workers', about
/// 1.7 KB against the others' 0.7-0.8 in a debug build) for as long as
/// the node owns it; boxed, each holds its own.
fn while_busy<'a, E, F, Fut, V, VFut>(
    watch: &'a mut VersionWatch,
    idle: &'a ServiceIdle,
    token: &'a CancellationToken,
    signals: &'a Signals<'a>,
    vet: V,
    service: F,
) -> std::pin::Pin<Box<impl std::future::Future<Output = Result<(), E>> + 'a>>
where
    E: 'a,
    F: FnMut(CancellationToken) -> Fut + 'a,
    Fut: std::future::Future<Output = Result<(), E>> + 'a,
    V: FnMut() -> VFut + 'a,
    VFut: std::future::Future<Output = Result<(), E>> + 'a,
{
    Box::pin(run_while_busy(
        watch,
        &idle.settings,
        token,
        signals,
        vet,
        service,
    ))
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

#[cfg(test)]
mod tests;
