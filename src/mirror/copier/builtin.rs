//! sleet's own copier: parallel streaming GET to PUT, multipart for large
//! objects, and a server-side copy when both roots share a store.

use async_trait::async_trait;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{Copier, CopyBatch, CopyError, CopyProgress, CopyReport, ObjectOutcome};
use crate::store::StoreRoot;
use crate::store::object_copy::copy_between;
use crate::store::upload::StreamPolicy;

#[derive(Debug, Clone)]
pub struct BuiltinCopier {
    parallelism: usize,
    policy: StreamPolicy,
}

impl BuiltinCopier {
    /// Copies `parallelism` objects at once, streaming by the default
    /// [`StreamPolicy`].
    pub fn new(parallelism: u32) -> Self {
        BuiltinCopier {
            parallelism: parallelism.max(1) as usize,
            policy: StreamPolicy::default(),
        }
    }

    pub fn with_policy(self, policy: StreamPolicy) -> Self {
        BuiltinCopier { policy, ..self }
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
        // Unordered: a large object early in the batch must not hold the
        // slots of the small ones that finished behind it (`buffered`
        // counts finished-but-unyielded copies against its limit).
        let work = futures::stream::iter(batch.objects.iter().cloned().enumerate())
            .map(|(index, name): (usize, String)| async move {
                let outcome = copy_object(source, destination, &name, self.policy).await;
                if let ObjectOutcome::Copied { bytes } = &outcome {
                    progress.record(1, bytes.unwrap_or(0));
                }
                (index, name, outcome)
            })
            .buffer_unordered(self.parallelism)
            .collect::<Vec<_>>();
        let mut done = tokio::select! {
            biased;
            done = work => done,
            () = cancel.cancelled() => return Err(CopyError::Cancelled),
        };
        done.sort_unstable_by_key(|(index, _, _)| *index);
        let outcomes = done
            .into_iter()
            .map(|(_, name, outcome)| (name, outcome))
            .collect();
        Ok(CopyReport { outcomes })
    }
}

/// Copies one object, overwriting. Re-copies are harmless: data objects
/// are immutable under their names.
async fn copy_object(
    source: &StoreRoot,
    destination: &StoreRoot,
    name: &str,
    policy: StreamPolicy,
) -> ObjectOutcome {
    match copy_between(source, name, destination, name, policy).await {
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
    pub fn new(backfill: BuiltinCopier) -> Self {
        ExternalCopier { backfill }
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
