//! Test and benchmark seams: an object-store wrapper that counts requests.
//!
//! Not covered by semver; used by sleet's own tests and benchmarks to
//! check request-cost promises against a real store.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// The kinds of request a [`CountingStore`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Get,
    Head,
    Put,
    List,
    Delete,
    Copy,
}

const OPS: usize = 6;

/// Wraps a store and counts each request it forwards.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counts: [AtomicU64; OPS],
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore {
            inner,
            counts: Default::default(),
        }
    }

    /// Requests of one kind forwarded so far.
    pub fn count(&self, op: Op) -> u64 {
        self.counts[op as usize].load(Ordering::Relaxed)
    }

    /// Every count, for printing: `get=3 head=0 ...`.
    pub fn summary(&self) -> String {
        [Op::Get, Op::Head, Op::Put, Op::List, Op::Delete, Op::Copy]
            .iter()
            .map(|op| format!("{}={}", format!("{op:?}").to_lowercase(), self.count(*op)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn bump(&self, op: Op) {
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.bump(Op::Put);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.bump(Op::Put);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.bump(if options.head { Op::Head } else { Op::Get });
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.bump(Op::Get);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.bump(Op::Delete);
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.bump(Op::List);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.bump(Op::List);
        self.inner.list_with_offset(prefix, offset).boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.bump(Op::List);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.bump(Op::Copy);
        self.inner.copy_opts(from, to, options).await
    }
}
