//! Committing a pass: the destination's manifests written in order, only
//! after every object they name is copied and checked.

use std::sync::atomic::Ordering;

use futures::{StreamExt, TryStreamExt};

use slatedb::VersionedManifest;

use super::{Attempt, Closure, MirrorPair, PassOutcome, Pin};
use crate::mirror::MirrorError;
use crate::mirror::io::{CreateOutcome, HEAD_PARALLELISM, get_bytes, put_create_or_match};
use crate::mirror::layout::manifest_name;

impl MirrorPair {
    /// Commits the closure's manifests the destination lacks, ascending,
    /// each create-only; identical bytes already there count as success.
    pub(super) async fn commit(
        &self,
        closure: &Closure,
        watermark: Option<&VersionedManifest>,
        objects: u64,
        bytes: u64,
        pin: Option<&Pin>,
    ) -> Result<Attempt, MirrorError> {
        let present = self.present_manifests(closure, watermark);
        let missing: Vec<u64> = closure
            .manifests
            .keys()
            .copied()
            .filter(|id| !present.contains(id))
            .collect();
        let bodies = match self.manifest_bodies(&missing).await? {
            Ok(bodies) => bodies,
            Err(reason) => return Ok(Attempt::Restart(reason)),
        };
        // Nothing more is read from the source: the pin goes while the
        // manifests are written, not after.
        let release = async {
            if let Some(pin) = pin {
                pin.released.store(true, Ordering::Relaxed);
                self.unpin(&pin.ids).await;
            }
        };
        let (written, ()) = tokio::join!(self.write_manifests(closure, bodies), release);
        let committed = written?;
        let head = closure.head.id();
        tracing::info!(target = %self.target, head, manifests = committed, objects, "mirror pass committed");
        Ok(Attempt::Done(PassOutcome {
            head,
            next_wal_sst_id: closure.head.next_wal_sst_id(),
            wal_start: closure.head.replay_after_wal_id().saturating_add(1),
            wal_end: closure.wal_end(),
            committed: committed > 0,
            manifests_committed: committed,
            objects_copied: objects,
            bytes_copied: bytes,
        }))
    }

    /// The source's bodies of manifests `ids`, [`HEAD_PARALLELISM`] at a
    /// time, or a restart reason when one vanished.
    pub(super) async fn manifest_bodies(
        &self,
        ids: &[u64],
    ) -> Result<Result<Vec<(u64, bytes::Bytes)>, String>, MirrorError> {
        // Owned futures: a stream of borrowing closures would make the
        // pass's future fail to be `Send` for every lifetime.
        let gets: Vec<_> = ids
            .iter()
            .map(|&id| {
                let source = self.source.root();
                async move { get_bytes(&source, &manifest_name(id)).await }
            })
            .collect();
        let fetched: Vec<Option<bytes::Bytes>> = futures::stream::iter(gets)
            .buffered(HEAD_PARALLELISM)
            .try_collect()
            .await?;
        let mut bodies = Vec::with_capacity(ids.len());
        for (&id, body) in ids.iter().zip(fetched) {
            match body {
                Some(body) => bodies.push((id, body)),
                None => return Ok(Err(format!("source manifest {id} vanished before commit"))),
            }
        }
        Ok(Ok(bodies))
    }

    /// Writes `bodies` at the destination one at a time in ascending id
    /// order, the head last: a destination holding a manifest holds every
    /// lower one this pass commits, which is what a later pass's
    /// watermark takes for granted. Returns how many were new.
    pub(super) async fn write_manifests(
        &self,
        closure: &Closure,
        bodies: Vec<(u64, bytes::Bytes)>,
    ) -> Result<u64, MirrorError> {
        let destination = self.destination.root();
        let mut committed = 0;
        for (id, body) in bodies {
            match put_create_or_match(&destination, &manifest_name(id), body).await? {
                CreateOutcome::Written => committed += 1,
                CreateOutcome::AlreadyThere => {}
                CreateOutcome::Differs => return Err(self.diverged(id, closure.head.id())),
            }
        }
        Ok(committed)
    }
}
