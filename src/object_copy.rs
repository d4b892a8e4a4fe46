//! Copying one object between roots the cheapest way: server-side within
//! one store or between buckets of one S3 endpoint, else streamed (one PUT
//! when small, a multipart upload when large). The builtin copier and
//! plugins' `copy-to` both run through here.
//! A multipart upload that does not finish (an error, or the caller
//! dropping the copy: a cancelled pass, a plugin call past its deadline) is
//! aborted, so none is left behind at the destination.

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};

use std::collections::BTreeSet;

use crate::s3_copy::{CopyAcross, MAX_COPY_OBJECT};
use crate::store::StoreRoot;

/// Multipart parts in flight per object.
const PARTS_IN_FLIGHT: usize = 8;

/// How a streamed copy writes: objects up to `multipart_threshold` bytes
/// are read whole and written with one PUT, larger ones go up as a
/// multipart upload of concurrent parts. One PUT costs the destination
/// one request and no reassembly, and holds the object in memory while
/// it goes; a multipart upload holds only the parts in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPolicy {
    pub multipart_threshold: u64,
}

impl StreamPolicy {
    /// The default threshold, in MiB (see docs/performance.md for the
    /// measurements it was chosen from).
    pub const DEFAULT_MULTIPART_THRESHOLD_MIB: u32 = 64;

    pub fn with_threshold_mib(mib: u32) -> StreamPolicy {
        StreamPolicy {
            multipart_threshold: u64::from(mib) << 20,
        }
    }
}

impl Default for StreamPolicy {
    fn default() -> Self {
        StreamPolicy::with_threshold_mib(StreamPolicy::DEFAULT_MULTIPART_THRESHOLD_MIB)
    }
}

/// Copies `from` under `source` to `to` under `destination` the cheapest
/// way (server-side within one store or one S3 endpoint, streaming
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
        destination.store.as_ref(),
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

/// A server-side `CopyObject` from another bucket of the same S3
/// endpoint: `Some(size)` when it copied, `None` when it cannot (not two
/// such buckets, too large for one request, or refused: the caller
/// streams).
async fn across_buckets(
    source: &StoreRoot,
    from: &object_store::path::Path,
    destination: &StoreRoot,
    to: &object_store::path::Path,
) -> object_store::Result<Option<u64>> {
    let (Some(src), Some(dst)) = (&source.s3, &destination.s3) else {
        return Ok(None);
    };
    let pair = (source.url.clone(), destination.url.clone());
    if !dst.reaches(src) || refused_pairs().contains(&pair) {
        return Ok(None);
    }
    let size = source.store.head(from).await?.size;
    if size > MAX_COPY_OBJECT {
        return Ok(None);
    }
    match dst.copy_from(src, from, to).await {
        Ok(()) => Ok(Some(size)),
        Err(CopyAcross::NotFound) => Err(object_store::Error::NotFound {
            path: from.to_string(),
            source: "CopyObject: NoSuchKey".into(),
        }),
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

async fn stream_copy(
    source: &dyn ObjectStore,
    destination: &dyn ObjectStore,
    from: &object_store::path::Path,
    to: &object_store::path::Path,
    policy: StreamPolicy,
) -> object_store::Result<u64> {
    let object = source.get(from).await?;
    let size = object.meta.size;
    if size <= policy.multipart_threshold {
        let bytes = object.bytes().await?;
        destination.put(to, bytes.into()).await?;
        return Ok(size);
    }
    let mut upload = AbortOnDrop(Some(WriteMultipart::new(
        destination.put_multipart(to).await?,
    )));
    let mut chunks = object.into_stream();
    let streamed = async {
        let writer = upload.0.as_mut().expect("taken only below");
        while let Some(chunk) = chunks.try_next().await? {
            writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
            writer.put(chunk);
        }
        Ok::<_, object_store::Error>(())
    }
    .await;
    let writer = upload.0.take().expect("still held");
    match streamed {
        Ok(()) => writer.finish().await.map(|_| size),
        Err(e) => {
            let _ = writer.abort().await;
            Err(e)
        }
    }
}

/// Aborts a multipart upload that is dropped before it finished.
struct AbortOnDrop(Option<WriteMultipart>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        let Some(upload) = self.0.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = upload.abort().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::{CountingStore, Op};

    fn root(url: &str, store: Arc<dyn ObjectStore>) -> StoreRoot {
        StoreRoot {
            url: url.into(),
            store,
            prefix: "db".into(),
            s3: None,
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
