//! Garbage collection: SlateDB's collectors, run with the node's metrics.

use std::sync::Arc;

use slatedb::GarbageCollectorBuilder;
use slatedb::config::GarbageCollectorOptions;
use slatedb_common::metrics::MetricsRecorder;
use tokio_util::sync::CancellationToken;

use super::replay::Replayable;
use super::until_cancelled;
use crate::fleet::database::DatabaseHandle;

/// Runs SlateDB's garbage collector until `token` is cancelled: what
/// `Admin::run_gc_with_options` does, built here so its metrics reach the
/// node's recorder (`Admin` takes none in SlateDB 0.18).
pub(super) async fn run_gc(
    db: &DatabaseHandle,
    options: GarbageCollectorOptions,
    recorder: Arc<dyn MetricsRecorder>,
    token: CancellationToken,
) -> Result<(), slatedb::Error> {
    let gc = GarbageCollectorBuilder::new(db.path().clone(), db.store_for("gc"))
        .with_options(options)
        .with_metrics_recorder(recorder)
        .replaying(db)
        .build();
    until_cancelled(gc.run(), || gc.stop(), &token).await
}

/// One pass of every collector SlateDB's GC runs, as a running one does
/// at each interval; like those passes, it logs its errors and goes on.
pub(super) async fn sweep_once(
    db: &DatabaseHandle,
    options: GarbageCollectorOptions,
    recorder: Arc<dyn MetricsRecorder>,
) {
    let gc = GarbageCollectorBuilder::new(db.path().clone(), db.store_for("gc"))
        .with_options(options)
        .with_metrics_recorder(recorder)
        .replaying(db)
        .build();
    gc.run_gc_once().await;
}
