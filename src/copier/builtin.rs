//! sleet's own copier: parallel streaming GET to PUT, multipart for large
//! objects, and a server-side copy when both roots share a store.

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use tokio_util::sync::CancellationToken;

use super::{Copier, CopyBatch, CopyError, CopyProgress, CopyReport, ObjectOutcome};
use crate::store::StoreRoot;

/// Objects at most this large are read whole and written with one PUT;
/// larger ones stream through a multipart upload.
pub const MULTIPART_THRESHOLD: u64 = 8 * 1024 * 1024;
/// Multipart parts in flight per object.
const PARTS_IN_FLIGHT: usize = 8;

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

/// Copies `from` under `source` to `to` under `destination` the cheapest
/// way (server-side within one store, streaming otherwise); returns the
/// bytes copied. Plugins' `copy-to` runs through here.
pub async fn copy_between(
    source: &StoreRoot,
    from: &str,
    destination: &StoreRoot,
    to: &str,
) -> object_store::Result<u64> {
    let (from, to) = (source.path(from), destination.path(to));
    if source.shares_store_with(destination) {
        server_side_copy(source.store.as_ref(), &from, &to).await
    } else {
        stream_copy(
            source.store.as_ref(),
            destination.store.as_ref(),
            &from,
            &to,
        )
        .await
    }
}

async fn server_side_copy(
    store: &dyn ObjectStore,
    from: &object_store::path::Path,
    to: &object_store::path::Path,
) -> object_store::Result<u64> {
    let size = store.head(from).await?.size;
    store.copy(from, to).await?;
    Ok(size)
}

async fn stream_copy(
    source: &dyn ObjectStore,
    destination: &dyn ObjectStore,
    from: &object_store::path::Path,
    to: &object_store::path::Path,
) -> object_store::Result<u64> {
    let object = source.get(from).await?;
    let size = object.meta.size;
    if size <= MULTIPART_THRESHOLD {
        let bytes = object.bytes().await?;
        destination.put(to, bytes.into()).await?;
        return Ok(size);
    }
    let mut upload = WriteMultipart::new(destination.put_multipart(to).await?);
    let mut chunks = object.into_stream();
    while let Some(chunk) = chunks.try_next().await? {
        upload.wait_for_capacity(PARTS_IN_FLIGHT).await?;
        upload.put(chunk);
    }
    upload.finish().await?;
    Ok(size)
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
