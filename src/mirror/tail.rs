//! The WAL tail of a continuous mirror: between passes, copy each new WAL
//! object as soon as the source writer publishes it, so the destination's
//! newest restore point trails the source's newest durable write by about
//! [`TAIL_INTERVAL`] while the writer is active. A restore carries the
//! copied run ([`super::wal_run`]); a writer that opens the destination
//! replays it like crash recovery.
//!
//! WAL ids are dense (fences are zero-byte WAL objects), so probing the
//! next id is one GET, and an idle look costs exactly that. The source
//! time of each copied object is recorded ([`super::wal_times`]), in one
//! object per [`RECORD_EVERY`] rather than one per look.

use std::time::Duration;

use object_store::ObjectStoreExt;

use super::MirrorError;
use super::io::{get_with_meta, list_wal_after};
use super::layout::wal_name;
use super::wal_times::{WalRecord, record};
use crate::store::StoreRoot;

/// How often the tail looks for new WAL while the writer is active.
/// SlateDB publishes a WAL object every 100 ms by default; Litestream
/// syncs once a second. Each look that finds nothing costs one GET.
pub const TAIL_INTERVAL: Duration = Duration::from_millis(500);
/// The tail counts as active this long after it last copied something;
/// then its looks back off with the mirror's idle wakes.
pub const TAIL_ACTIVE_FOR: Duration = Duration::from_secs(60);
/// Source times are written out at most this often (and when the tail
/// stops): one small PUT, not one per look.
pub const RECORD_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct Tail {
    /// The next WAL id to look for at the source.
    next: u64,
    /// The WAL the last pass brought: from its head's replay point on
    /// through its run. The tail skips it, and a hole below it (WAL the
    /// source collected before anyone copied it) ends there.
    brought: Option<std::ops::RangeInclusive<u64>>,
    /// Copied objects whose source times are not yet recorded.
    unrecorded: Vec<WalRecord>,
    last_recorded: tokio::time::Instant,
    /// When the last look found the source had nothing newer: every WAL
    /// object the source had published before then is at the destination.
    caught_up: Option<tokio::time::Instant>,
    last_copy: Option<tokio::time::Instant>,
}

impl Tail {
    /// Starts after the highest WAL id the destination already has, and
    /// never below `floor` (past the last pass's WAL run).
    pub async fn start(destination: &StoreRoot, floor: u64) -> Result<Tail, MirrorError> {
        let highest = list_wal_after(destination, 0)
            .await?
            .last_key_value()
            .map(|(&id, _)| id);
        Ok(Tail {
            next: highest.map_or(floor, |h| (h + 1).max(floor)),
            brought: None,
            unrecorded: Vec::new(),
            last_recorded: tokio::time::Instant::now(),
            caught_up: None,
            last_copy: None,
        })
    }

    /// Starts after the destination's highest WAL id, if it holds any:
    /// with none, only a pass knows where the source's WAL begins.
    pub async fn resume(destination: &StoreRoot) -> Result<Option<Tail>, MirrorError> {
        let tail = Tail::start(destination, 0).await?;
        Ok((tail.next > 0).then_some(tail))
    }

    /// A pass brought WAL ids `first..=last` (its head's window and run;
    /// none when `first > last`). The tail goes on from where it is: below
    /// `first` it still copies what the source has (WAL between two
    /// manifests, which restores by time use, held for the mirror by the
    /// fleet's GC while the tail was away), and skips the ids the pass
    /// brought.
    pub fn passed(&mut self, first: u64, last: u64) {
        if self.next >= first {
            self.next = self.next.max(last.saturating_add(1));
        }
        self.brought = Some(first..=last);
    }

    /// When the tail should look next: soon while the writer is active,
    /// else at the mirror's idle wake (`idle`).
    pub fn wait(&self, idle: Duration) -> Duration {
        match self.last_copy {
            Some(at) if at.elapsed() < TAIL_ACTIVE_FOR => TAIL_INTERVAL.min(idle),
            _ => idle,
        }
    }

    /// How far the destination's newest restorable write may trail the
    /// source's newest durable one: zero right after a look that caught
    /// up, then the time since that look.
    pub fn behind(&self) -> Option<Duration> {
        self.caught_up.map(|at| at.elapsed())
    }

    /// Copies every WAL object the source has from `next` on, in order,
    /// recording their source times now and then. Returns how many it
    /// copied.
    pub async fn step(
        &mut self,
        source: &StoreRoot,
        destination: &StoreRoot,
    ) -> Result<u64, MirrorError> {
        let mut copied = 0;
        loop {
            if let Some(brought) = &self.brought
                && brought.contains(&self.next)
            {
                self.next = brought.end() + 1;
            }
            let looked = tokio::time::Instant::now();
            let name = wal_name(self.next);
            let Some((body, meta)) = get_with_meta(source, &name).await? else {
                match &self.brought {
                    // A hole below what the last pass brought: collected
                    // at the source before anyone copied it; restores from
                    // that pass's head on do not need it.
                    Some(brought) if self.next < *brought.start() => {
                        tracing::info!(
                            "WAL {} was collected at {} before the mirror copied it; restores by \
                             time cannot stop between WAL {} and {}",
                            self.next,
                            source.url,
                            self.next,
                            brought.start()
                        );
                        self.next = (*brought.start()).max(brought.end().saturating_add(1));
                        continue;
                    }
                    _ => {
                        self.caught_up = Some(looked);
                        break;
                    }
                }
            };
            let size = body.len() as u64;
            destination
                .store
                .put(&destination.path(&name), body.into())
                .await
                .map_err(|e| MirrorError::Store {
                    action: "write".into(),
                    location: format!("{}/{name}", destination.url),
                    message: e.to_string(),
                })?;
            self.unrecorded.push(WalRecord {
                id: self.next,
                written: meta.last_modified,
                size,
            });
            self.next += 1;
            copied += 1;
        }
        if copied > 0 {
            self.last_copy = Some(tokio::time::Instant::now());
        }
        if !self.unrecorded.is_empty() && self.last_recorded.elapsed() >= RECORD_EVERY {
            self.flush_records(destination).await;
        }
        Ok(copied)
    }

    /// Writes the source times of what was copied since the last record.
    pub async fn flush_records(&mut self, destination: &StoreRoot) {
        let records = std::mem::take(&mut self.unrecorded);
        self.last_recorded = tokio::time::Instant::now();
        if let Err(e) = record(destination, records).await {
            tracing::warn!("could not record WAL times at {}: {e}", destination.url);
        }
    }
}
