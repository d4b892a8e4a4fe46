//! Looks at one database, cheaply while nothing changes: a HEAD of the
//! version after the newest one seen (one request, a 404 while the
//! database is idle) of the manifest (the coordinator's signal: a writer
//! flushed) or of `.compactions` (the workers' signal: a job was queued);
//! only when it exists, a LIST from there and a read of what changed.

use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use super::Look;
use crate::database::DatabaseHandle;

/// Which versioned file a watch follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// `manifest/`: work once L0 holds `trigger` SSTs or a job is queued.
    Manifest { trigger: usize },
    /// `compactions/`: work once a job is queued or running.
    Compactions,
}

impl Watched {
    fn dir(self) -> &'static str {
        match self {
            Watched::Manifest { .. } => "manifest",
            Watched::Compactions => "compactions",
        }
    }

    fn file(self, id: u64) -> String {
        format!("{}/{id:020}.{}", self.dir(), self.dir())
    }
}

/// One database, as far as the looks have followed it.
pub struct VersionWatch {
    db: DatabaseHandle,
    watched: Watched,
    /// The newest version id seen; `None` before the first look.
    seen: Option<u64>,
}

impl VersionWatch {
    pub fn new(db: DatabaseHandle, watched: Watched) -> Self {
        VersionWatch {
            db,
            watched,
            seen: None,
        }
    }

    /// What the database shows now. While `busy`, a queued or running
    /// compaction counts as activity even when nothing moved (a long job
    /// commits only at its end).
    pub async fn look(&mut self, busy: bool) -> Look {
        let moved = match self.seen {
            Some(seen) => match self.exists(seen + 1).await {
                Ok(false) if !busy => return Look::Quiet,
                Ok(moved) => moved,
                Err(_) => return Look::Failed,
            },
            None => true,
        };
        if moved {
            match self.newest().await {
                // An empty directory (no coordinator ever ran): the next
                // look asks for the first version.
                Ok(newest) => self.seen = Some(newest.or(self.seen).unwrap_or(0)),
                Err(_) => return Look::Failed,
            }
        }
        if moved && let Watched::Manifest { trigger } = self.watched {
            match self.db.admin().read_manifest(None).await {
                Ok(Some(latest)) if latest.l0().len() >= trigger => return Look::Activity,
                Ok(_) => {}
                Err(_) => return Look::Failed,
            }
        }
        match self.db.queue_depth().await {
            Ok(queue) if queue.claimable + queue.running > 0 => Look::Activity,
            Ok(_) if moved => Look::Moved,
            Ok(_) => Look::Quiet,
            Err(_) => Look::Failed,
        }
    }

    /// Whether version `id` exists: one HEAD.
    async fn exists(&self, id: u64) -> Result<bool, object_store::Error> {
        let location = self.db.root().path(&self.watched.file(id));
        match self.db.store().head(&location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The newest version id, listed from the last one seen on.
    async fn newest(&self) -> Result<Option<u64>, object_store::Error> {
        let root = self.db.root();
        let dir = root.path(self.watched.dir());
        let listed: Vec<_> = match self.seen {
            Some(seen) => {
                let after = root.path(&self.watched.file(seen));
                self.db
                    .store()
                    .list_with_offset(Some(&dir), &after)
                    .try_collect()
                    .await?
            }
            None => self.db.store().list(Some(&dir)).try_collect().await?,
        };
        Ok(listed
            .iter()
            .filter_map(|meta| meta.location.filename()?.split('.').next()?.parse().ok())
            .max())
    }
}
