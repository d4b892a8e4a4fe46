//! Compaction workers: SlateDB's workers, stood down when a compactor
//! outside the fleet starts.

use std::sync::Arc;

use slatedb::CompactionWorkerBuilder;
use slatedb::config::CompactionWorkerOptions;
use slatedb_common::metrics::MetricsRecorder;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::replay::Replayable;
use super::{ServiceError, until_cancelled, worker_options};
use crate::config::{OutsideCompactorSettings, WorkerSettings};
use crate::fleet::database::DatabaseHandle;
use crate::services::compaction_code::CompactionCode;
use crate::services::outside_compactor::records::EpochRecords;

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
    let mut builder = CompactionWorkerBuilder::new(db.path().clone(), db.store_for("workers"))
        .with_options(options)
        .with_metrics_recorder(recorder)
        .replaying(db);
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
pub(super) async fn run_workers(
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
            biased;
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
