//! The simulated object store: one in-memory store (object_store's own,
//! with its conditional writes) that every simulated node reaches through
//! its own [`NodeStore`], which injects the fault mix's failures, from the
//! node's own seeded draws:
//!
//! - an error before the request reaches the store (a 503);
//! - a reply lost after the store applied the request;
//! - a slow request (a pseudo-random wait);
//! - a paused node, whose requests wait until it resumes.
//!
//! Objects carry the simulated store clock's `LastModified` (the
//! in-memory store would stamp the machine's), and every request is
//! recorded in the run's trace.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

use super::clock::SimClock;
use super::marks::{HandoverWatch, database_of};
use super::trace::Trace;
use crate::mirror::layout::{MANIFEST_DIR, parse_manifest_file};
use crate::model::coverage::{self, Mark, Region};
use crate::testing::Chaos;

/// How often requests fail, per 1000, and how slow they may be: the
/// fleet-wide levels the driver turns up and down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultLevels {
    /// Requests failed before they reach the store.
    pub error_per_mille: u64,
    /// Requests applied whose reply is lost.
    pub lost_per_mille: u64,
    /// Each request waits up to this many milliseconds.
    pub max_latency_ms: u64,
}

/// The one store of a simulation, and what every node's view shares.
#[derive(Debug)]
pub struct SimStore {
    inner: InMemory,
    clock: SimClock,
    trace: Arc<Trace>,
    levels: Mutex<FaultLevels>,
    /// When each object was last written, on the store's clock.
    written: Mutex<BTreeMap<String, chrono::DateTime<chrono::Utc>>>,
    /// Every manifest version written, in order, with who wrote it: the
    /// compactor-epoch invariant reads them at the end (GC may have
    /// deleted them from the store by then).
    manifests: Mutex<Vec<ManifestWrite>>,
    /// Every object deleted, in order, with who deleted it and when: the
    /// collection invariant judges them against the manifests of then.
    deletes: Mutex<Vec<Deletion>>,
    handovers: Mutex<HandoverWatch>,
}

/// One object deleted.
#[derive(Debug, Clone)]
pub struct Deletion {
    pub location: Path,
    pub author: String,
    /// The store's time when it applied it.
    pub at: chrono::DateTime<chrono::Utc>,
}

/// One manifest version as written.
#[derive(Debug, Clone)]
pub struct ManifestWrite {
    pub location: Path,
    /// The store view that wrote it: a node's id, or the application's
    /// writer (`app <url>#<open>`).
    pub author: String,
    pub bytes: Bytes,
    /// The store's time when it applied it.
    pub at: chrono::DateTime<chrono::Utc>,
}

impl SimStore {
    pub fn new(clock: SimClock, trace: Arc<Trace>) -> Arc<SimStore> {
        Arc::new(SimStore {
            inner: InMemory::new(),
            clock,
            trace,
            levels: Mutex::new(FaultLevels::default()),
            written: Mutex::new(BTreeMap::new()),
            manifests: Mutex::new(Vec::new()),
            deletes: Mutex::new(Vec::new()),
            handovers: Mutex::new(HandoverWatch::default()),
        })
    }

    pub fn set_levels(&self, levels: FaultLevels) {
        *self.levels.lock().expect("levels lock") = levels;
    }

    fn levels(&self) -> FaultLevels {
        *self.levels.lock().expect("levels lock")
    }

    /// The store as the checker sees it: no faults (so no draws), no
    /// pause, traced as `name`.
    pub fn view(self: &Arc<Self>, name: &str) -> NodeStore {
        NodeStore::new(self.clone(), name, 0, None)
    }

    /// Every manifest version written so far, in order.
    pub fn manifests(&self) -> Vec<ManifestWrite> {
        self.manifests.lock().expect("manifests lock").clone()
    }

    /// Every object deleted so far, in order.
    pub fn deletions(&self) -> Vec<Deletion> {
        self.deletes.lock().expect("deletes lock").clone()
    }

    fn watch_handover(&self, author: &str, location: &Path) {
        let now = self.clock.now();
        self.handovers
            .lock()
            .expect("handovers lock")
            .wrote(author, location, now);
    }

    fn stamp(&self, location: &Path) {
        let now = self.clock.now();
        self.written
            .lock()
            .expect("written lock")
            .insert(location.to_string(), now);
    }

    fn restamp(&self, mut meta: ObjectMeta) -> ObjectMeta {
        if let Some(at) = self
            .written
            .lock()
            .expect("written lock")
            .get(meta.location.as_ref())
        {
            meta.last_modified = *at;
        }
        meta
    }
}

/// One node's way to the store: its own faults, draws and pause.
#[derive(Debug, Clone)]
pub struct NodeStore {
    store: Arc<SimStore>,
    node: String,
    chaos: Arc<Mutex<Chaos>>,
    /// A node's pause, and with it its faults; the checker's view has
    /// neither.
    paused: Option<Arc<PauseGate>>,
}

/// Holds a paused node's requests until it resumes. Waiters wake in the
/// order they came (tokio's `watch` wakes them in a random order, which a
/// replayable run cannot have).
#[derive(Debug, Default)]
pub struct PauseGate {
    paused: std::sync::atomic::AtomicBool,
    resumed: tokio::sync::Notify,
    /// The node is cut off from the fleet root (its requests there fail)
    /// while it still reaches the databases' stores.
    root_cut: std::sync::atomic::AtomicBool,
}

impl PauseGate {
    /// Cuts the node off from the fleet root, or heals the cut; returns
    /// whether it is cut now.
    pub fn toggle_root_cut(&self) -> bool {
        !self
            .root_cut
            .fetch_xor(true, std::sync::atomic::Ordering::SeqCst)
    }

    pub fn heal_root_cut(&self) {
        self.root_cut
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    fn root_cut(&self) -> bool {
        self.root_cut.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn pause(&self) {
        self.paused.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn resume(&self) {
        self.paused
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.resumed.notify_waiters();
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Returns at once unless paused, else when resumed.
    async fn passed(&self) {
        loop {
            let resumed = self.resumed.notified();
            if !self.is_paused() {
                return;
            }
            resumed.await;
        }
    }
}

/// Where the fleet root lives in the simulated store (`world::ROOT_URL`).
const ROOT_PREFIX: &str = "sim-root/";

/// How a request ended, for the trace.
enum Outcome {
    /// Failed by the fault layer before the store saw it.
    Failed,
    /// Applied, its reply lost.
    Lost,
    Done,
    /// Refused by the store itself: a failed precondition, a missing
    /// object.
    Refused(&'static str),
}

/// A store check names its scratch directory by the machine's clock and
/// random bytes (`.sleet-store-check/<time>-<random>`): the trace names
/// every such directory alike, so the run's hash does not depend on them.
fn scratch_named_alike(what: &str) -> String {
    const SCRATCH: &str = ".sleet-store-check/";
    match what.find(SCRATCH) {
        Some(at) => {
            let (head, rest) = what.split_at(at + SCRATCH.len());
            match rest.find('/') {
                Some(end) => format!("{head}*{}", &rest[end..]),
                None => format!("{head}*"),
            }
        }
        None => what.to_string(),
    }
}

impl NodeStore {
    fn new(
        store: Arc<SimStore>,
        node: &str,
        seed: u64,
        paused: Option<Arc<PauseGate>>,
    ) -> NodeStore {
        NodeStore {
            store,
            node: node.to_string(),
            chaos: Arc::new(Mutex::new(Chaos::with_seed(seed))),
            paused,
        }
    }

    /// A node's view, paused while `paused` holds `true`.
    pub fn for_node(
        store: &Arc<SimStore>,
        node: &str,
        seed: u64,
        paused: Arc<PauseGate>,
    ) -> NodeStore {
        NodeStore::new(store.clone(), node, seed, Some(paused))
    }

    fn draw(&self) -> u64 {
        self.chaos.lock().expect("chaos lock").draw()
    }

    /// Waits out a pause and the injected latency, then decides the
    /// request's fate: `Err` before the store sees it, `Ok(true)` when its
    /// reply is to be lost after the store applies it.
    async fn before(&self, op: &str, what: &str) -> Result<bool> {
        let Some(paused) = &self.paused else {
            return Ok(false);
        };
        paused.passed().await;
        if paused.root_cut() && what.starts_with(ROOT_PREFIX) {
            self.record(op, what, Outcome::Failed);
            return Err(injected(what));
        }
        let levels = self.store.levels();
        if levels.max_latency_ms > 0 {
            let wait = self.draw() % (levels.max_latency_ms + 1);
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        }
        if self.draw() % 1000 < levels.error_per_mille {
            self.record(op, what, Outcome::Failed);
            return Err(injected(what));
        }
        Ok(self.draw() % 1000 < levels.lost_per_mille)
    }

    fn record(&self, op: &str, what: &str, outcome: Outcome) {
        let outcome = match outcome {
            Outcome::Failed => "503",
            Outcome::Lost => "lost",
            Outcome::Done => "ok",
            Outcome::Refused(kind) => kind,
        };
        let at = self.store.clock.millis();
        let what = scratch_named_alike(what);
        self.store
            .trace
            .record(at, format!("{} {op} {what} {outcome}", self.node));
    }

    /// The store's reply, recorded, or the error of a reply lost.
    fn reply<T>(&self, op: &str, what: &str, lost: bool, result: Result<T>) -> Result<T> {
        let outcome = match (&result, lost) {
            (_, true) => Outcome::Lost,
            (Ok(_), false) => Outcome::Done,
            (Err(e), false) => Outcome::Refused(kind(e)),
        };
        self.record(op, what, outcome);
        if lost {
            return Err(injected(what));
        }
        result
    }

    fn traced_stream<T: Send + 'static>(
        &self,
        op: &'static str,
        what: String,
        stream: BoxStream<'static, Result<T>>,
    ) -> BoxStream<'static, Result<T>> {
        let this = self.clone();
        futures::stream::once(async move {
            let lost = this.before(op, &what).await?;
            let items: Vec<Result<T>> = stream.collect().await;
            this.reply(op, &what, lost, Ok(()))?;
            Ok::<_, object_store::Error>(futures::stream::iter(items))
        })
        .try_flatten()
        .boxed()
    }
}

fn kind(error: &object_store::Error) -> &'static str {
    match error {
        object_store::Error::NotFound { .. } => "not-found",
        object_store::Error::AlreadyExists { .. } => "already-exists",
        object_store::Error::Precondition { .. } => "precondition",
        object_store::Error::NotModified { .. } => "not-modified",
        _ => "error",
    }
}

/// Whether `location` is a SlateDB manifest version
/// (`<db>/manifest/<id>.manifest`).
fn is_manifest(location: &Path) -> bool {
    let Some((dir, file)) = location.as_ref().rsplit_once('/') else {
        return false;
    };
    let in_manifest_dir = dir.rsplit('/').next() == Some(MANIFEST_DIR);
    in_manifest_dir && parse_manifest_file(file).is_some()
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "SimStore",
        source: format!("injected fault for {what}").into(),
    }
}

impl fmt::Display for NodeStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimStore({})", self.node)
    }
}

#[async_trait]
impl ObjectStore for NodeStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let what = location.to_string();
        let lost = self.before("put", &what).await?;
        let manifest = is_manifest(location).then(|| Bytes::from(payload.clone()));
        let conditional = !matches!(opts.mode, PutMode::Overwrite);
        let result = self.store.inner.put_opts(location, payload, opts).await;
        if result.is_ok() {
            if lost && conditional {
                coverage::hit(Mark::LostReplyToConditionalWrite);
            }
            self.store.stamp(location);
            self.store.watch_handover(&self.node, location);
            if let Some(bytes) = manifest {
                self.store
                    .manifests
                    .lock()
                    .expect("manifests lock")
                    .push(ManifestWrite {
                        location: location.clone(),
                        author: self.node.clone(),
                        bytes,
                        at: self.store.clock.now(),
                    });
            }
        }
        self.reply("put", &what, lost, result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let what = location.to_string();
        let lost = self.before("multipart", &what).await?;
        let result = self.store.inner.put_multipart_opts(location, opts).await;
        self.store.stamp(location);
        self.reply("multipart", &what, lost, result)
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let what = location.to_string();
        let op = if options.head { "head" } else { "get" };
        let lost = self.before(op, &what).await?;
        let result = self
            .store
            .inner
            .get_opts(location, options)
            .await
            .map(|mut got| {
                got.meta = self.store.restamp(got.meta);
                got
            });
        self.reply(op, &what, lost, result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let what = location.to_string();
        let lost = self.before("get-ranges", &what).await?;
        let result = self.store.inner.get_ranges(location, ranges).await;
        self.reply("get-ranges", &what, lost, result)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let (store, author) = (self.store.clone(), self.node.clone());
        let inner = self
            .store
            .inner
            .delete_stream(locations)
            .inspect_ok(move |location| {
                if author.ends_with("/gc")
                    && coverage::under_way(Region::MirrorPin, &database_of(location)) > 0
                {
                    coverage::hit(Mark::GcWhilePinned);
                }
                let at = store.clock.millis();
                let what = scratch_named_alike(location.as_ref());
                store.trace.record(at, format!("{author} deleted {what}"));
                store.deletes.lock().expect("deletes lock").push(Deletion {
                    location: location.clone(),
                    author: author.clone(),
                    at: store.clock.now(),
                });
            })
            .boxed();
        self.traced_stream("delete", String::new(), inner)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let what = prefix.map(|p| p.to_string()).unwrap_or_default();
        let store = self.store.clone();
        let listed = self
            .store
            .inner
            .list(prefix)
            .map_ok(move |meta| store.restamp(meta))
            .boxed();
        self.traced_stream("list", what, listed)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let what = prefix.map(|p| p.to_string()).unwrap_or_default();
        let store = self.store.clone();
        let listed = self
            .store
            .inner
            .list_with_offset(prefix, offset)
            .map_ok(move |meta| store.restamp(meta))
            .boxed();
        self.traced_stream("list", what, listed)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let what = prefix.map(|p| p.to_string()).unwrap_or_default();
        let lost = self.before("list-dir", &what).await?;
        let result = self
            .store
            .inner
            .list_with_delimiter(prefix)
            .await
            .map(|mut listed| {
                listed.objects = listed
                    .objects
                    .into_iter()
                    .map(|meta| self.store.restamp(meta))
                    .collect();
                listed
            });
        self.reply("list-dir", &what, lost, result)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let what = format!("{from}->{to}");
        let lost = self.before("copy", &what).await?;
        let result = self.store.inner.copy_opts(from, to, options).await;
        if result.is_ok() {
            self.store.stamp(to);
        }
        self.reply("copy", &what, lost, result)
    }
}
