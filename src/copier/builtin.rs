//! sleet's own copier: parallel streaming GET to PUT, multipart for large
//! objects, and a server-side copy when both roots share a store.

use async_trait::async_trait;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{Copier, CopyBatch, CopyError, CopyProgress, CopyReport, ObjectOutcome};
use crate::object_copy::copy_between;
use crate::store::StoreRoot;

#[derive(Debug, Clone)]
pub struct BuiltinCopier {
    parallelism: usize,
}

impl BuiltinCopier {
    pub fn new(parallelism: u32) -> Self {
        BuiltinCopier {
            parallelism: parallelism.max(1) as usize,
        }
    }
}

#[async_trait]
impl Copier for BuiltinCopier {
    fn name(&self) -> String {
        "builtin".into()
    }

    /// Every write is this code's own PUT (or hard link, or server-side
    /// copy) whose success the store reported.
    fn host_writes(&self) -> bool {
        true
    }

    async fn copy(
        &self,
        batch: CopyBatch<'_>,
        progress: &CopyProgress,
        cancel: &CancellationToken,
    ) -> Result<CopyReport, CopyError> {
        let (source, destination) = (batch.source, batch.destination);
        let work = futures::stream::iter(batch.objects.iter().cloned())
            .map(|name: String| async move {
                let outcome = copy_object(source, destination, &name).await;
                if let ObjectOutcome::Copied { bytes } = &outcome {
                    progress.record(1, bytes.unwrap_or(0));
                }
                (name, outcome)
            })
            .buffered(self.parallelism)
            .collect::<Vec<_>>();
        tokio::select! {
            outcomes = work => Ok(CopyReport { outcomes }),
            () = cancel.cancelled() => Err(CopyError::Cancelled),
        }
    }
}

/// Copies one object, overwriting. Re-copies are harmless: data objects
/// are immutable under their names.
async fn copy_object(source: &StoreRoot, destination: &StoreRoot, name: &str) -> ObjectOutcome {
    match copy_between(source, name, destination, name).await {
        Ok(bytes) => ObjectOutcome::Copied { bytes: Some(bytes) },
        Err(object_store::Error::NotFound { .. }) => ObjectOutcome::Missing,
        Err(e) => ObjectOutcome::Failed(e.to_string()),
    }
}

/// For targets kept in sync by bucket replication outside sleet: the pass
/// probes the destination and only the misses reach this copier, which
/// backfills them the built-in way.
#[derive(Debug, Clone)]
pub struct ExternalCopier {
    backfill: BuiltinCopier,
}

impl ExternalCopier {
    pub fn new(parallelism: u32) -> Self {
        ExternalCopier {
            backfill: BuiltinCopier::new(parallelism),
        }
    }
}

#[async_trait]
impl Copier for ExternalCopier {
    fn name(&self) -> String {
        "external".into()
    }

    fn replicated_elsewhere(&self) -> bool {
        true
    }

    async fn copy(
        &self,
        batch: CopyBatch<'_>,
        progress: &CopyProgress,
        cancel: &CancellationToken,
    ) -> Result<CopyReport, CopyError> {
        self.backfill.copy(batch, progress, cancel).await
    }
}
