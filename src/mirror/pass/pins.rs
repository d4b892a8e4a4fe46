//! Pinning the source while a pass copies it: a SlateDB checkpoint that
//! keeps GC from deleting what the pass is about to copy, released when
//! the pass ends.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;

use slatedb::config::CheckpointOptions;
use uuid::Uuid;

use super::{MirrorPair, Pin};
use crate::mirror::MirrorError;
use crate::mirror::io::{read_latest, read_manifest};
use crate::mirror::layout::pin_name;
use crate::model::coverage::{self, Mark};
use crate::model::planted::{Planted, planted};
use crate::model::seams::{self, Seam};

impl MirrorPair {
    /// Pins the head, and re-pins under the mirror's name and lifetime
    /// every manifest the head's other live checkpoints hold: the pass
    /// copies their objects too, and those checkpoints (the coordinator's
    /// own last 15 minutes by default) may expire long before a slow pass
    /// ends, after which source GC would delete what it is copying.
    pub(super) async fn pin(&self) -> Result<Pin, MirrorError> {
        if !self.pin_source || planted(Planted::MirrorCopiesUnpinned) {
            return self.no_pin().await;
        }
        coverage::hit(Mark::MirrorPinTaken);
        // The checkpoint expires a lifetime after it is written, so the
        // pin's deadline counts from before the request.
        let now = tokio::time::Instant::now();
        let created = self.checkpoint(None).await?;
        let mut pin = Pin {
            ids: vec![created.id],
            manifest_id: created.manifest_id,
            refresh_at: now + self.checkpoint_lifetime / 2,
            deadline: now + self.checkpoint_lifetime,
            released: AtomicBool::new(false),
        };
        seams::at(Seam::BetweenPinAndRead).await;
        let Some(head) = read_manifest(&self.source, created.manifest_id).await? else {
            return Ok(pin);
        };
        let now = self.source.now();
        let mut held = BTreeSet::new();
        for checkpoint in head.checkpoints() {
            let live = crate::mirror::layout::checkpoint_live(checkpoint, now);
            if !live || checkpoint.id == created.id || checkpoint.manifest_id == head.id() {
                continue;
            }
            if !held.insert(checkpoint.manifest_id) {
                continue;
            }
            match self.checkpoint(Some(checkpoint.id)).await {
                Ok(repinned) => pin.ids.push(repinned.id),
                // Expired meanwhile: if its objects go, the pass restarts.
                Err(e) => {
                    tracing::debug!(target = %self.target, "could not re-pin checkpoint {}: {e}", checkpoint.id)
                }
            }
        }
        Ok(pin)
    }

    /// A checkpoint named for this target: of the latest manifest, or of
    /// the manifest checkpoint `source` holds.
    pub(super) async fn checkpoint(
        &self,
        source: Option<Uuid>,
    ) -> Result<slatedb::CheckpointCreateResult, MirrorError> {
        let options = CheckpointOptions {
            lifetime: Some(self.checkpoint_lifetime),
            source,
            name: Some(pin_name(&self.target)),
        };
        Ok(self
            .source
            .bounded(
                "pinning the source",
                self.source.admin().create_detached_checkpoint(&options),
            )
            .await?)
    }

    /// The latest manifest, held by nothing (the test-only unpinned mode).
    pub(super) async fn no_pin(&self) -> Result<Pin, MirrorError> {
        let latest = read_latest(&self.source)
            .await?
            .ok_or_else(|| MirrorError::NotADatabase {
                url: self.source.url().to_string(),
            })?;
        Ok(Pin::none(latest.id()))
    }

    /// Best effort: a pin left behind expires and source GC removes it.
    pub(super) async fn unpin(&self, ids: &[Uuid]) {
        for &id in ids {
            self.unpin_one(id).await;
        }
    }

    pub(super) async fn unpin_one(&self, id: Uuid) {
        let deleted = self
            .source
            .bounded(
                "deleting the pin",
                self.source.admin().delete_checkpoint(id),
            )
            .await;
        if let Err(e) = deleted {
            tracing::warn!(target = %self.target, "failed to delete mirror pin {id}: {e}");
        }
    }
}
