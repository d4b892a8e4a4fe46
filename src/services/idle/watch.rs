//! Looks at one database, cheaply while nothing changes: a HEAD of the
//! version after the newest one seen (one request, a 404 while the
//! database is idle) of the manifest (a writer flushed, a compaction
//! committed, a checkpoint was taken) or of `.compactions` (a job was
//! queued); only when it exists, a LIST from there and a read of what
//! changed.
//!
//! A version written and garbage-collected between two looks leaves no
//! next id for the HEAD to find (the database's own writer may run GC
//! with any `min_age`), so every [`LIST_EVERY`]th look LISTs from the
//! newest version seen instead, and every look does when the fleet's own
//! GC could collect a version within two looks.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use super::Look;
use crate::fleet::database::DatabaseHandle;
use crate::store::child_path;

/// Every this many looks, a LIST replaces the HEAD.
pub const LIST_EVERY: u64 = 20;

/// Which versioned file a watch follows, and what counts as work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// `manifest/` for the coordinator: work once L0 holds `trigger` SSTs
    /// or a job is queued or running.
    Manifest { trigger: usize },
    /// `compactions/` for workers: work once a job is queued or running.
    Compactions,
    /// `manifest/` for GC: every change is work (it makes garbage), and so
    /// is the expiry of a checkpoint (it frees what the checkpoint held).
    Changes,
}

impl Watched {
    fn dir(self) -> &'static str {
        match self {
            Watched::Manifest { .. } | Watched::Changes => "manifest",
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
    list_always: bool,
    /// Looks are further apart than a HEAD can follow (events flow).
    list_beyond: bool,
    /// The newest version id seen; `None` before the first look.
    seen: Option<u64>,
    looks: u64,
    /// The next checkpoint expiry in the newest manifest read (GC only).
    next_expiry: Option<DateTime<Utc>>,
    /// When the newest version seen was written, by the store's clock.
    newest_written: Option<DateTime<Utc>>,
    /// A move [`VersionWatch::settled_for`] saw but did not act on: the
    /// next look reports it.
    unreported_move: bool,
    /// The next version's path, kept while no newer version shows: an
    /// idle database's looks HEAD the same object each time, and at
    /// 10,000 databases building it afresh was a visible share of a
    /// node's CPU.
    next_head: Option<(u64, object_store::path::Path)>,
}

impl VersionWatch {
    pub fn new(db: DatabaseHandle, watched: Watched, list_always: bool) -> Self {
        VersionWatch {
            db,
            watched,
            list_always,
            list_beyond: false,
            seen: None,
            looks: 0,
            next_expiry: None,
            newest_written: None,
            unreported_move: false,
            next_head: None,
        }
    }

    pub fn watched(&self) -> Watched {
        self.watched
    }

    /// Whether a look has followed the database yet: the first one that
    /// does reports a move that is only its first sighting.
    pub fn has_sighted(&self) -> bool {
        self.seen.is_some()
    }

    /// Whether looks are now further apart than a HEAD can follow (a
    /// version written and collected between them): then every idle look
    /// LISTs, as with `list_always` (busy looks still HEAD).
    pub fn set_list_always_beyond(&mut self, beyond: bool) {
        self.list_beyond = beyond;
    }

    /// How long until a look is due whatever the interval: a checkpoint
    /// expires (GC only).
    pub fn due_in(&self) -> Option<std::time::Duration> {
        let at = self.next_expiry?;
        Some((at - self.db.now()).to_std().unwrap_or_default())
    }

    /// GC's first look at a database: whether its newest manifest was
    /// written at least `age` ago. Then whatever is garbage is already old
    /// enough to delete, so one sweep collects it all, where a collector
    /// started on the first look's move would run for `age` (the linger)
    /// first: on a node starting with 10,000 databases, 10,000 collectors
    /// at once. A settled database's move is consumed, and the checkpoint
    /// expiry it shows is followed as a look would; an unsettled one's
    /// move is left for the next look to report. A node clock ahead of
    /// the store's makes a database look settled early: what was not yet
    /// old enough waits for the next change to start GC (SlateDB's own
    /// collectors judge each object's age, so nothing goes early).
    pub async fn settled_for(&mut self, age: std::time::Duration) -> bool {
        if self.seen.is_some() {
            return false;
        }
        let _permit = self.db.look_permit().await;
        Box::pin(self.settle(age)).await
    }

    async fn settle(&mut self, age: std::time::Duration) -> bool {
        match self.moved(false).await {
            Ok(moved) => self.unreported_move = moved,
            Err(e) => {
                tracing::debug!(watched = ?self.watched, "idle look failed: {e}");
                return false;
            }
        }
        let settled = self.newest_written.is_some_and(|at| {
            (self.db.now() - at)
                .to_std()
                .is_ok_and(|quiet| quiet >= age)
        });
        if settled && self.look_for_gc(true).await == Look::Activity {
            self.unreported_move = false;
            return true;
        }
        false
    }

    /// What the database shows now. While `busy`, a queued or running
    /// compaction counts as activity even when nothing moved (a long job
    /// commits only at its end).
    ///
    /// Only idle looks wait for the node's look permit (which bounds a
    /// starting node's thousands of first looks). A busy look is one HEAD
    /// every `probe_min` beside a service that sends far more, and the
    /// look that lets the service sleep: queued behind the idle looks on
    /// a store slowed by the services' own load, busy looks at 1,000
    /// databases came minutes late, so no GC ever slept and the load
    /// never eased.
    pub async fn look(&mut self, busy: bool) -> Look {
        let _permit = if busy {
            None
        } else {
            self.db.look_permit().await
        };
        // Boxed: held only while looking, not by every idle task.
        Box::pin(self.look_now(busy)).await
    }

    async fn look_now(&mut self, busy: bool) -> Look {
        let moved = match self.moved(busy).await {
            Ok(moved) => moved,
            Err(e) => {
                tracing::debug!(watched = ?self.watched, "idle look failed: {e}");
                return Look::Failed;
            }
        };
        match self.watched {
            Watched::Changes => self.look_for_gc(moved).await,
            Watched::Manifest { trigger } => {
                if !moved && !busy {
                    return Look::Quiet;
                }
                if moved {
                    match self.latest_manifest().await {
                        Ok(Some(latest)) if latest.l0().len() >= trigger => {
                            return Look::Activity;
                        }
                        Ok(_) => {}
                        Err(()) => return Look::Failed,
                    }
                }
                self.look_at_queue(moved).await
            }
            Watched::Compactions if !moved && !busy => Look::Quiet,
            Watched::Compactions => self.look_at_queue(moved).await,
        }
    }

    /// GC has work after a change, and once a checkpoint has expired.
    async fn look_for_gc(&mut self, moved: bool) -> Look {
        let expired = self.next_expiry.is_some_and(|at| at <= self.db.now());
        if !moved && !expired {
            return Look::Quiet;
        }
        match self.latest_manifest().await {
            Ok(latest) => {
                let now = self.db.now();
                self.next_expiry = latest
                    .iter()
                    .flat_map(|m| m.checkpoints())
                    .filter_map(|c| c.expire_time)
                    .filter(|at| *at > now)
                    .min();
                Look::Activity
            }
            Err(()) => Look::Failed,
        }
    }

    /// The latest manifest, bounded like every admin call (SlateDB retries
    /// a failing store on its own); a failure is logged here.
    async fn latest_manifest(&self) -> Result<Option<slatedb::VersionedManifest>, ()> {
        let read = self.db.admin().read_manifest(None);
        self.db
            .bounded("reading the latest manifest", read)
            .await
            .map_err(|e| tracing::debug!("idle look failed to read the manifest: {e}"))
    }

    async fn look_at_queue(&self, moved: bool) -> Look {
        match self.db.queue_depth().await {
            Ok(queue) if queue.claimable + queue.running > 0 => Look::Activity,
            Ok(_) if moved => Look::Moved,
            Ok(_) => Look::Quiet,
            Err(_) => Look::Failed,
        }
    }

    /// Whether a version newer than the last one seen exists, following
    /// it. The first look always counts as a move.
    ///
    /// A `busy` look comes `probe_min` after the last one, so the HEAD of
    /// the next version follows it whatever the idle looks' back-off
    /// needs (`list_beyond`). Busy looks that LISTed under events (twelve
    /// times a HEAD's price on S3) kept the S3 server saturated at 1,000
    /// databases, its slow replies kept every GC awake, and idle
    /// databases cost 9 requests a minute instead of 0.3.
    async fn moved(&mut self, busy: bool) -> Result<bool, object_store::Error> {
        if std::mem::take(&mut self.unreported_move) {
            return Ok(true);
        }
        self.looks += 1;
        let Some(seen) = self.seen else {
            // An empty directory (no coordinator ever ran): the next look
            // asks for the first version.
            self.seen = Some(self.newest_after(None).await?.unwrap_or(0));
            return Ok(true);
        };
        let list = self.list_always
            || (self.list_beyond && !busy)
            || self.looks.is_multiple_of(LIST_EVERY);
        if !list && !self.exists(seen + 1).await? {
            return Ok(false);
        }
        match self.newest_after(Some(seen)).await? {
            Some(newest) if newest > seen => {
                self.seen = Some(newest);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether version `id` exists: one HEAD.
    async fn exists(&mut self, id: u64) -> Result<bool, object_store::Error> {
        let location = match &self.next_head {
            Some((cached, location)) if *cached == id => location,
            _ => {
                let location = child_path(self.db.path(), &self.watched.file(id));
                &self.next_head.insert((id, location)).1
            }
        };
        match self.db.store().head(location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The newest version id after `seen` (all of them for `None`): one
    /// LIST. Notes when that version was written.
    async fn newest_after(
        &mut self,
        seen: Option<u64>,
    ) -> Result<Option<u64>, object_store::Error> {
        let root = self.db.root();
        let dir = root.path(self.watched.dir());
        let listed: Vec<_> = match seen {
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
        let newest = listed
            .iter()
            .filter_map(|meta| {
                let id: u64 = meta.location.filename()?.split('.').next()?.parse().ok()?;
                Some((id, meta.last_modified))
            })
            .max_by_key(|(id, _)| *id);
        if let Some((_, written)) = newest {
            self.newest_written = Some(written);
        }
        Ok(newest.map(|(id, _)| id))
    }
}
