//! Looks at one database, cheaply while nothing changes: a HEAD of the
//! manifest after the newest one seen (one request, a 404 while the
//! database is idle); only when it exists, a read of the newest manifest
//! and of the compaction queue.

use object_store::ObjectStoreExt;

use super::Look;
use crate::database::DatabaseHandle;

/// One database's manifest, as far as the looks have followed it.
pub struct ManifestWatch {
    db: DatabaseHandle,
    /// The newest manifest id seen; `None` before the first look.
    seen: Option<u64>,
    /// L0 SSTs at which the coordinator schedules a compaction.
    trigger: usize,
}

impl ManifestWatch {
    pub fn new(db: DatabaseHandle, trigger: usize) -> Self {
        ManifestWatch {
            db,
            seen: None,
            trigger,
        }
    }

    /// What the database shows now. While `busy`, a queued or running
    /// compaction counts as activity even when the manifest stands still
    /// (a long job commits only at its end).
    pub async fn look(&mut self, busy: bool) -> Look {
        let moved = match self.seen {
            Some(seen) => match self.exists(seen + 1).await {
                Ok(false) if !busy => return Look::Quiet,
                Ok(false) => false,
                Ok(true) => true,
                Err(_) => return Look::Failed,
            },
            None => true,
        };
        let l0 = if moved {
            match self.db.admin().read_manifest(None).await {
                Ok(Some(latest)) => {
                    self.seen = Some(latest.id());
                    latest.l0().len()
                }
                Ok(None) => return Look::Quiet,
                Err(_) => return Look::Failed,
            }
        } else {
            0
        };
        if l0 >= self.trigger {
            return Look::Activity;
        }
        match self.db.queue_depth().await {
            Ok(queue) if queue.claimable + queue.running > 0 => Look::Activity,
            Ok(_) if moved => Look::Moved,
            Ok(_) => Look::Quiet,
            Err(_) => Look::Failed,
        }
    }

    /// Whether manifest `id` exists: one HEAD.
    async fn exists(&self, id: u64) -> Result<bool, object_store::Error> {
        let location = self.db.root().path(&format!("manifest/{id:020}.manifest"));
        match self.db.store().head(&location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
