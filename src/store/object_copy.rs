//! Copying one object between roots the cheapest way: server-side within
//! one store or between buckets of one endpoint (S3, GCS, or containers
//! of one Azure account), else streamed through
//! an [`Upload`] (one PUT when small, a multipart upload when large). The
//! builtin copier and plugins' `copy-to` both run through here.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::store::StoreRoot;
use crate::store::bucket_copy::CopyAcross;
use crate::store::upload::{StreamPolicy, Upload};

/// Copies `from` under `source` to `to` under `destination` the cheapest
/// way (server-side within one store or one endpoint, streaming
/// otherwise); returns the bytes copied. Plugins' `copy-to` runs through
/// here.
pub async fn copy_between(
    source: &StoreRoot,
    from: &str,
    destination: &StoreRoot,
    to: &str,
    policy: StreamPolicy,
) -> object_store::Result<u64> {
    let (from, to) = (source.path(from), destination.path(to));
    if source.shares_store_with(destination) {
        return server_side_copy(source.store.as_ref(), &from, &to).await;
    }
    if let Some(copied) = across_buckets(source, &from, destination, &to).await? {
        return Ok(copied);
    }
    stream_copy(
        source.store.as_ref(),
        &destination.store,
        &from,
        &to,
        policy,
    )
    .await
}

/// Root pairs (source, destination) whose store refused a server-side
/// copy: their objects stream from then on, without asking again.
static REFUSED: std::sync::Mutex<BTreeSet<(String, String)>> =
    std::sync::Mutex::new(BTreeSet::new());

fn refused_pairs() -> std::sync::MutexGuard<'static, BTreeSet<(String, String)>> {
    REFUSED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server-side copy from another bucket of the same endpoint (see
/// [`crate::store::bucket_copy`]): `Some(size)` when it copied, `None` when it
/// cannot (not two such buckets, or refused: the caller streams).
async fn across_buckets(
    source: &StoreRoot,
    from: &object_store::path::Path,
    destination: &StoreRoot,
    to: &object_store::path::Path,
) -> object_store::Result<Option<u64>> {
    let (Some(src), Some(dst)) = (&source.address, &destination.address) else {
        return Ok(None);
    };
    let pair = (source.url.clone(), destination.url.clone());
    if !dst.reaches(src) || refused_pairs().contains(&pair) {
        return Ok(None);
    }
    let size = source.store.head(from).await?.size;
    match dst.copy_from(src, from, to, size).await {
        Ok(()) => Ok(Some(size)),
        Err(CopyAcross::NotFound) => Err(object_store::Error::NotFound {
            path: from.to_string(),
            source: "a server-side copy found no source object".into(),
        }),
        Err(CopyAcross::Unavailable(why)) => {
            tracing::debug!(
                source = %source.url, destination = %destination.url,
                "a server-side copy failed ({why}); streaming this object"
            );
            Ok(None)
        }
        Err(CopyAcross::Refused(why)) => {
            tracing::warn!(
                source = %source.url, destination = %destination.url,
                "the store refused a server-side copy between these roots ({why}); streaming instead"
            );
            refused_pairs().insert(pair);
            Ok(None)
        }
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

/// GET `from` and write it to `to` as it arrives (one PUT or a
/// multipart upload, by `policy`); returns its size.
async fn stream_copy(
    source: &dyn ObjectStore,
    destination: &Arc<dyn ObjectStore>,
    from: &object_store::path::Path,
    to: &object_store::path::Path,
    policy: StreamPolicy,
) -> object_store::Result<u64> {
    let object = source.get(from).await?;
    let size = object.meta.size;
    let mut upload = Upload::new(destination.clone(), to.clone(), policy);
    let mut chunks = object.into_stream();
    let streamed = async {
        while let Some(chunk) = chunks.try_next().await? {
            upload.write(chunk).await?;
        }
        Ok::<_, object_store::Error>(())
    }
    .await;
    match streamed {
        Ok(()) => upload.finish().await.map(|_| size),
        Err(e) => {
            upload.abort().await;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::{CountingStore, Op};

    fn root(url: &str, store: Arc<dyn ObjectStore>) -> StoreRoot {
        StoreRoot {
            url: url.into(),
            store,
            prefix: "db".into(),
            address: None,
        }
    }

    /// A 6 MiB object streamed between two stores under `policy`: the
    /// destination's count of (PUTs, multipart uploads).
    async fn stream_six_mib(policy: StreamPolicy) -> (u64, u64) {
        let source = root("memory:///a", Arc::new(InMemory::new()));
        let counted = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
        let destination = root("memory:///b", counted.clone());
        let body: Vec<u8> = (0..6u32 << 20).map(|i| (i % 251) as u8).collect();
        let name = "compacted/01.sst";
        source
            .store
            .put(&source.path(name), body.clone().into())
            .await
            .unwrap();
        let copied = copy_between(&source, name, &destination, name, policy)
            .await
            .unwrap();
        assert_eq!(copied, body.len() as u64);
        let landed = destination
            .store
            .get(&destination.path(name))
            .await
            .unwrap();
        assert_eq!(landed.bytes().await.unwrap(), body, "the copy is whole");
        (counted.count(Op::Put), counted.multipart_uploads())
    }

    #[tokio::test]
    async fn objects_up_to_the_threshold_go_up_with_one_put_and_larger_ones_in_parts() {
        assert_eq!(
            stream_six_mib(StreamPolicy::with_threshold_mib(64)).await,
            (1, 0),
            "under the threshold: one PUT"
        );
        assert_eq!(
            stream_six_mib(StreamPolicy::with_threshold_mib(5)).await,
            (1, 1),
            "over it: a multipart upload"
        );
        assert_eq!(
            StreamPolicy::default().multipart_threshold,
            64 << 20,
            "the documented default"
        );
    }
}
