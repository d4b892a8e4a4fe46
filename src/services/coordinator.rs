//! The compaction coordinator: SlateDB's standalone compactor, run by the
//! fleet only once it has claimed the database's compactor epoch, and the
//! [`Claim`] it claims from.

use std::sync::Arc;
use std::time::Duration;

use slatedb::CompactorBuilder;
use slatedb::{CloseReason, ErrorKind};
use slatedb_common::metrics::MetricsRecorder;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::replay::Replayable;
use super::{ServiceError, coordinator_options, outside_compactor};
use crate::config::CoordinatorSettings;
use crate::fleet::database::DatabaseHandle;
use crate::model::seams::{self, Seam};
use crate::services::compaction_code::CompactionCode;
use crate::services::outside_compactor::claim::ClaimWatch;
use crate::services::outside_compactor::records::EpochRecords;

/// How often a coordinator retries recording the epoch it claimed.
const RECORD_RETRY: Duration = Duration::from_secs(1);

/// Runs the coordinator. With a [`Claim`] (outside compactors are looked
/// for) it first records that it is about to claim the epoch after the one
/// it saw, then claims exactly that epoch: a compactor that claimed
/// meanwhile (a writer that just opened) keeps its epoch and this run ends
/// fenced, instead of fencing it, and the record is withdrawn. Once the
/// claim holds, it is confirmed under the fleet root. Without a claim it
/// takes whatever epoch is next and records it once it holds it.
pub(super) async fn run_coordinator(
    db: &DatabaseHandle,
    c: &CoordinatorSettings,
    code: Option<&CompactionCode>,
    claim: Option<Claim>,
    records: &EpochRecords,
    recorder: Arc<dyn MetricsRecorder>,
    token: CancellationToken,
) -> Result<(), ServiceError> {
    let watch = ClaimWatch::forwarding(recorder);
    let mut builder = CompactorBuilder::new(db.path().clone(), db.store_for("coordinator"))
        .with_options(coordinator_options(c))
        .with_metrics_recorder(Arc::new(watch.clone()))
        .replaying(db);
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
        seams::at(Seam::BeforeCoordinatorStart).await;
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
            biased;
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
