//! A store wrapper that counts requests by kind and by object kind, for
//! tests and benchmarks that check request-cost promises.

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
/// Every [`Op`], in the order of its discriminant.
pub const ALL_OPS: [Op; OPS] = [Op::Get, Op::Head, Op::Put, Op::List, Op::Delete, Op::Copy];

/// Wraps a store and counts each request it forwards, in total and by
/// kind of object (the SlateDB directory a path is in).
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counts: [AtomicU64; OPS],
    /// Of the PUTs, those that began a multipart upload.
    multipart: AtomicU64,
    /// By operation and the index of its kind in [`KINDS`] (its length
    /// for "other"): counting allocates nothing, so at tens of thousands
    /// of requests a minute the count costs the node it measures little.
    by_kind: Arc<std::sync::Mutex<KindCounts>>,
    /// GETs and HEADs forwarded and not yet answered, and the most at once.
    reads_in_flight: AtomicU64,
    peak_reads: AtomicU64,
}

/// Requests by operation and kind.
type KindCounts = [[u64; KINDS.len() + 1]; OPS];

/// Directories of a SlateDB or fleet root a request is attributed to.
const KINDS: [&str; 9] = [
    "manifest",
    "compactions",
    "wal",
    "compacted",
    "gc",
    "nodes",
    "dbs",
    "sleet.toml",
    // The event canaries (`events::check`): per node, not per database.
    ".sleet-events-check",
];

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore {
            inner,
            counts: Default::default(),
            multipart: AtomicU64::new(0),
            by_kind: Default::default(),
            reads_in_flight: AtomicU64::new(0),
            peak_reads: AtomicU64::new(0),
        }
    }

    /// The most GETs and HEADs this store had in flight at once.
    pub fn peak_reads_in_flight(&self) -> u64 {
        self.peak_reads.load(Ordering::Relaxed)
    }

    /// Requests by `"<op> <kind>"` (`"get manifest"`, `"list nodes"`).
    pub fn by_kind(&self) -> std::collections::BTreeMap<String, u64> {
        let counts = *self.by_kind.lock().expect("tally lock");
        let mut named = std::collections::BTreeMap::new();
        for (op, kinds) in counts.iter().enumerate() {
            for (kind, &n) in kinds.iter().enumerate().filter(|(_, n)| **n > 0) {
                let name = KINDS.get(kind).copied().unwrap_or("other");
                let op = format!("{:?}", ALL_OPS[op]).to_lowercase();
                named.insert(format!("{op} {name}"), n);
            }
        }
        named
    }

    fn tally(&self, op: Op, location: Option<&Path>) {
        tally_into(&self.by_kind, op, location);
    }

    /// Requests of one kind forwarded so far.
    pub fn count(&self, op: Op) -> u64 {
        self.counts[op as usize].load(Ordering::Relaxed)
    }

    /// Multipart uploads begun so far (each also counts as a PUT).
    pub fn multipart_uploads(&self) -> u64 {
        self.multipart.load(Ordering::Relaxed)
    }

    /// Every count, for printing: `get=3 head=0 ...`.
    pub fn summary(&self) -> String {
        ALL_OPS
            .iter()
            .map(|op| format!("{}={}", format!("{op:?}").to_lowercase(), self.count(*op)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn bump(&self, op: Op, location: Option<&Path>) {
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
        self.tally(op, location);
    }
}

/// Counts one `op` request under the kind of `location` (a directory of
/// [`KINDS`], or "other").
fn tally_into(by_kind: &std::sync::Mutex<KindCounts>, op: Op, location: Option<&Path>) {
    let kind = location
        .and_then(|p| {
            p.parts()
                .find_map(|part| KINDS.iter().position(|k| part.as_ref() == *k))
        })
        .unwrap_or(KINDS.len());
    by_kind.lock().expect("tally lock")[op as usize][kind] += 1;
}

/// One read a [`CountingStore`] forwarded, until it is answered or
/// dropped.
struct ReadInFlight<'a>(&'a CountingStore);

impl<'a> ReadInFlight<'a> {
    fn new(store: &'a CountingStore) -> Self {
        let now = store.reads_in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        store.peak_reads.fetch_max(now, Ordering::Relaxed);
        ReadInFlight(store)
    }
}

impl Drop for ReadInFlight<'_> {
    fn drop(&mut self) {
        self.0.reads_in_flight.fetch_sub(1, Ordering::Relaxed);
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
        self.bump(Op::Put, Some(location));
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.bump(Op::Put, Some(location));
        self.multipart.fetch_add(1, Ordering::Relaxed);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.bump(
            if options.head { Op::Head } else { Op::Get },
            Some(location),
        );
        let _in_flight = ReadInFlight::new(self);
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.bump(Op::Get, Some(location));
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        // One request, counted under the kind of its first location (a
        // batch deletes within one directory).
        self.counts[Op::Delete as usize].fetch_add(1, Ordering::Relaxed);
        let by_kind = self.by_kind.clone();
        let mut first = true;
        let locations = locations.inspect(move |location| {
            if std::mem::take(&mut first) {
                tally_into(&by_kind, Op::Delete, location.as_ref().ok());
            }
        });
        self.inner.delete_stream(Box::pin(locations))
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.bump(Op::List, prefix);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.bump(Op::List, prefix);
        self.inner.list_with_offset(prefix, offset).boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.bump(Op::List, prefix);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.bump(Op::Copy, Some(from));
        self.inner.copy_opts(from, to, options).await
    }
}
