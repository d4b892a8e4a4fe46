//! Handing a database's compactor from one fleet node to the next
//! without running both.
//!
//! When ownership moves, the node that gains a coordinator sees it at its
//! next tick, and the node that loses it at its own. Started at once, the
//! new coordinator would run beside the old one until the old node's
//! tick: SlateDB's fencing keeps that safe for the manifest, and a
//! compactor takeover with compactions in flight is where the writer's
//! positional merge of L0 lists was suspected of dropping data
//! (`merge_writer_and_compactor`, slatedb/slatedb#1871; slatedb 0.18.0
//! guards the watermark it merges by, see docs/reliability.md). The
//! fleet causes no such overlap it can avoid: the gaining node first waits until the
//! node that holds the epoch has recorded that its coordinator stopped,
//! or its heartbeat is gone, or the heartbeat timeout has passed (so a
//! holder that died mid-stop, or restarted, costs at most that).
//!
//! [`judge`] is the decision; [`wait`] looks and sleeps.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::info;

use super::records::{EpochHolder, EpochRecords, RecordError};
use crate::model::coverage::{self, Mark};
use crate::model::planted::{Planted, planted};

/// Whether a coordinator may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handover {
    /// Nobody else holds the epoch, or its holder is done with it.
    Go,
    /// Another live node holds the epoch and has not stopped yet.
    Wait { holder: String },
    /// The holder is live but did not hand over within the limit: start
    /// anyway (fencing settles it).
    TimedOut { holder: String },
}

/// Decides whether this node (`me`) may start a coordinator on an epoch
/// `holder` holds, having waited `waited` of `limit` so far.
pub fn judge(
    me: &str,
    holder: Option<&EpochHolder>,
    holder_live: bool,
    waited: Duration,
    limit: Duration,
) -> Handover {
    let Some(holder) = holder else {
        return Handover::Go;
    };
    if holder.node_id == me || holder.released || !holder_live {
        return Handover::Go;
    }
    if waited >= limit {
        return Handover::TimedOut {
            holder: holder.node_id.clone(),
        };
    }
    Handover::Wait {
        holder: holder.node_id.clone(),
    }
}

/// Waits until this node may start a coordinator for `database`, whose
/// compactor epoch is `epoch` (or `token` is cancelled), logging a wait.
pub async fn wait(
    records: &EpochRecords,
    database: &str,
    epoch: u64,
    token: &CancellationToken,
) -> Result<(), RecordError> {
    let limits = records.handover_limits();
    if epoch == 0 || limits.timeout.is_zero() || planted(Planted::HandoverWaitSkipped) {
        return Ok(());
    }
    let started = tokio::time::Instant::now();
    let mut said = false;
    loop {
        let holder = records.holder(database, epoch).await?;
        let live = match &holder {
            Some(h) if h.node_id != records.node_id() && !h.released => {
                if !said {
                    coverage::hit(Mark::CoordinatorTookOverEpoch);
                }
                records.node_live(&h.node_id, limits.timeout).await?
            }
            _ => false,
        };
        let waited = started.elapsed();
        match judge(
            records.node_id(),
            holder.as_ref(),
            live,
            waited,
            limits.timeout,
        ) {
            Handover::Go => {
                if said {
                    info!(
                        database,
                        epoch,
                        "handed over after {} ms",
                        waited.as_millis()
                    );
                }
                return Ok(());
            }
            Handover::TimedOut { holder } => {
                tracing::warn!(
                    database,
                    epoch,
                    %holder,
                    "node {holder} still holds the compactor after {} ms without handing it over; starting anyway (SlateDB's fencing stops the older one)",
                    waited.as_millis()
                );
                return Ok(());
            }
            Handover::Wait { holder } => {
                if !said {
                    coverage::hit(Mark::CoordinatorHandoverWaited);
                    info!(database, epoch, %holder, "waiting for node {holder} to stop its coordinator before starting this one");
                    said = true;
                }
            }
        }
        tokio::select! {
            biased;
            _ = token.cancelled() => return Ok(()),
            _ = tokio::time::sleep(limits.poll) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(node: &str, released: bool) -> EpochHolder {
        EpochHolder {
            node_id: node.into(),
            confirmed: true,
            released,
        }
    }

    #[test]
    fn a_coordinator_waits_only_for_a_live_holder_that_has_not_stopped() {
        let limit = Duration::from_secs(10);
        let early = Duration::from_secs(1);
        let go = |h: Option<&EpochHolder>, live, waited| judge("me", h, live, waited, limit);
        assert_eq!(go(None, true, early), Handover::Go, "nobody holds it");
        assert_eq!(go(Some(&holder("me", false)), true, early), Handover::Go);
        assert_eq!(go(Some(&holder("a", true)), true, early), Handover::Go);
        assert_eq!(go(Some(&holder("a", false)), false, early), Handover::Go);
        assert_eq!(
            go(Some(&holder("a", false)), true, early),
            Handover::Wait { holder: "a".into() }
        );
        assert_eq!(
            go(Some(&holder("a", false)), true, limit),
            Handover::TimedOut { holder: "a".into() }
        );
    }
}
