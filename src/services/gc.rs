//! Garbage collection: SlateDB's collectors, run with the node's metrics.

use std::sync::Arc;

use slatedb::config::GarbageCollectorOptions;
use slatedb::{GarbageCollectorBuilder, GcFilter};
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
    hold: Option<Arc<dyn GcFilter>>,
    token: CancellationToken,
) -> Result<(), slatedb::Error> {
    let gc = builder(db, options, recorder, hold).build();
    until_cancelled(gc.run(), || gc.stop(), &token).await
}

/// One pass of every collector SlateDB's GC runs, as a running one does
/// at each interval; like those passes, it logs its errors and goes on.
pub(super) async fn sweep_once(
    db: &DatabaseHandle,
    options: GarbageCollectorOptions,
    recorder: Arc<dyn MetricsRecorder>,
    hold: Option<Arc<dyn GcFilter>>,
) {
    builder(db, options, recorder, hold)
        .build()
        .run_gc_once()
        .await;
}

/// SlateDB's collector for `db`, reporting to `recorder`, holding the WAL
/// its continuous mirrors still need when `hold` is given.
fn builder(
    db: &DatabaseHandle,
    options: GarbageCollectorOptions,
    recorder: Arc<dyn MetricsRecorder>,
    hold: Option<Arc<dyn GcFilter>>,
) -> GarbageCollectorBuilder<slatedb::object_store::path::Path> {
    let gc = GarbageCollectorBuilder::new(db.path().clone(), db.store_for("gc"))
        .with_options(options)
        .with_metrics_recorder(recorder)
        .replaying(db);
    match hold {
        Some(hold) => gc.with_gc_filter(hold),
        None => gc,
    }
}
