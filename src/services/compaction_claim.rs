//! Whether the fleet may compact a database: the look for a compactor
//! outside it, and what a coordinator claims from.

use tracing::info;

use super::outside_compactor::{self, LookError, Thresholds, Verdict};
use super::{Claim, ServiceError};
use crate::config::OutsideCompactorSettings;
use crate::fleet::database::{ADMIN_CALL_TIMEOUT, DatabaseError, DatabaseHandle};
use crate::model::coverage::{self, Mark};
use crate::model::planted::{Planted, planted};
use crate::services::outside_compactor::records::EpochRecords;

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
        if !outside.enabled || planted(Planted::OutsideCompactorVetSkipped) {
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
            Verdict::Outside(sighting) => Err({
                coverage::hit(Mark::OutsideCompactorStoodDown);
                ServiceError::OutsideCompactor {
                    url: self.url().to_string(),
                    sighting: Box::new(sighting),
                }
            }),
            Verdict::Released(why) => {
                info!(database = %self.url(), epoch = seen.compactor_epoch, "taking over compaction: the outside compactor is gone ({why:?})");
                Ok(Some(Claim::from(&seen)))
            }
            Verdict::Unclaimed | Verdict::Fleet => Ok(Some(Claim::from(&seen))),
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
