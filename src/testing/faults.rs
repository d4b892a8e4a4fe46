//! Seeded randomness and a store wrapper that injects faults: errors,
//! delays and responses lost after the store applied the request.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// SplitMix64's increment.
const SPLITMIX_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a well-mixed 64 bits from any input.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seedable SplitMix64 generator for randomized tests. The seed comes
/// from `SLEET_CHAOS_SEED` when set, else the clock, and is printed, so a
/// failing run replays.
#[derive(Debug, Clone)]
pub struct Chaos {
    seed: u64,
    state: u64,
}

impl Chaos {
    pub fn from_env() -> Chaos {
        let seed = std::env::var("SLEET_CHAOS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64)
            });
        eprintln!("chaos seed {seed} (SLEET_CHAOS_SEED={seed} replays it)");
        Chaos::with_seed(seed)
    }

    /// A generator of its own, for one part of a seeded run.
    pub fn with_seed(seed: u64) -> Chaos {
        Chaos { seed, state: seed }
    }

    /// The seed this generator started from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn draw(&mut self) -> u64 {
        self.state = self.state.wrapping_add(SPLITMIX_GAMMA);
        mix64(self.state)
    }

    /// One of `from`, uniformly enough for tests; `from` must not be empty.
    pub fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[(self.draw() % from.len() as u64) as usize]
    }
}

/// Fault settings shared by every [`FaultyStore`] made from them, so a test
/// can turn faults up and down for a whole fleet at once.
#[derive(Debug, Default)]
pub struct Faults {
    /// Requests failed out of every 1000, before they reach the store.
    error_per_mille: AtomicU64,
    /// Each request waits a pseudo-random 0..=this many milliseconds.
    max_latency_ms: AtomicU64,
    /// Requests seen, the seed of the next pseudo-random draw.
    sequence: AtomicU64,
    injected: AtomicU64,
    /// Writes to a location that sorts after this one in its directory
    /// fail: a writer cut off at a known point.
    refuse_puts_after: std::sync::Mutex<Option<String>>,
    /// Requests counted since the last [`Faults::fail_one`].
    requests: AtomicU64,
    /// The one request (1-based, 0: none) that fails, and whether the
    /// store applies it first (a reply lost on the way back).
    fail_one_at: AtomicU64,
    fail_one_applied: std::sync::atomic::AtomicBool,
    /// Requests whose location contains this text wait this long more.
    slow: std::sync::Mutex<Option<(String, std::time::Duration)>>,
}

impl Faults {
    pub fn new() -> Arc<Faults> {
        Arc::new(Faults::default())
    }

    /// Fails `per_mille` of 1000 requests and delays each by up to `max_latency`.
    pub fn set(&self, per_mille: u64, max_latency: std::time::Duration) {
        self.error_per_mille
            .store(per_mille.min(1000), Ordering::Relaxed);
        self.max_latency_ms
            .store(max_latency.as_millis() as u64, Ordering::Relaxed);
    }

    /// Delays every request whose location (for a LIST, its prefix)
    /// contains `text` by `delay`, on top of [`Faults::set`]'s latency.
    pub fn slow_down(&self, text: &str, delay: std::time::Duration) {
        *self.slow.lock().expect("faults lock") = Some((text.to_string(), delay));
    }

    /// No more faults.
    pub fn clear(&self) {
        self.set(0, std::time::Duration::ZERO);
        *self.slow.lock().expect("faults lock") = None;
    }

    /// Fails every write to a location in `location`'s directory that
    /// sorts after it (`None`: no such refusal).
    pub fn refuse_puts_after(&self, location: Option<String>) {
        *self.refuse_puts_after.lock().expect("faults lock") = location;
    }

    /// Whether a write to `location` is refused by [`Self::refuse_puts_after`].
    fn refuses_put(&self, location: &str) -> Result<()> {
        let after = self.refuse_puts_after.lock().expect("faults lock");
        let Some(after) = after.as_deref() else {
            return Ok(());
        };
        let directory = |l: &str| l.rsplit_once('/').map_or("", |(dir, _)| dir).to_string();
        if directory(location) == directory(after) && location > after {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(object_store::Error::Generic {
                store: "FaultyStore",
                source: format!("refused write to {location}").into(),
            });
        }
        Ok(())
    }

    /// Fails only the `n`th request from now (0-based), before it reaches
    /// the store or, when `applied`, after the store applied it: every
    /// single point a request can fail at, one run each.
    pub fn fail_one(&self, n: u64, applied: bool) {
        self.requests.store(0, Ordering::Relaxed);
        self.fail_one_applied.store(applied, Ordering::Relaxed);
        self.fail_one_at.store(n + 1, Ordering::Relaxed);
    }

    /// Requests counted since the last [`Faults::fail_one`] (or ever).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Errors injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// A well-mixed 64-bit draw (SplitMix64 over a shared counter): cheap,
    /// deterministic in distribution, and needs no RNG crate.
    fn draw(&self) -> u64 {
        mix64(
            self.sequence
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_add(SPLITMIX_GAMMA),
        )
    }

    /// Waits the injected latency, then decides whether this request
    /// fails: `Err` before it reaches the store, `Ok(true)` after the
    /// store applied it (see [`Self::reply`]).
    async fn before_request(&self, location: &str) -> Result<bool> {
        let this = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        if this == self.fail_one_at.load(Ordering::Relaxed) {
            self.injected.fetch_add(1, Ordering::Relaxed);
            if self.fail_one_applied.load(Ordering::Relaxed) {
                return Ok(true);
            }
            return Err(injected(location));
        }
        self.chance(location).await.map(|()| false)
    }

    /// The store's reply, or the error of a reply lost after it applied
    /// the request.
    fn reply<T>(lost: bool, location: &str, result: Result<T>) -> Result<T> {
        match lost {
            true => Err(injected(location)),
            false => result,
        }
    }

    /// The latency and per-mille errors of [`Faults::set`].
    async fn chance(&self, location: &str) -> Result<()> {
        let slow = self.slow.lock().expect("faults lock").clone();
        if let Some((_, delay)) = slow.filter(|(text, _)| location.contains(text.as_str())) {
            tokio::time::sleep(delay).await;
        }
        let max_latency = self.max_latency_ms.load(Ordering::Relaxed);
        if max_latency > 0 {
            let wait = self.draw() % (max_latency + 1);
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        }
        if self.draw() % 1000 < self.error_per_mille.load(Ordering::Relaxed) {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(injected(location));
        }
        Ok(())
    }
}

fn injected(location: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultyStore",
        source: format!("injected fault for {location}").into(),
    }
}

/// Wraps a store and fails or delays requests as its [`Faults`] say.
/// Faults strike before a request reaches the store, so a failed write
/// never half-happens, except [`Faults::fail_one`]'s lost reply; streams
/// (LIST, DELETE) fail as a whole.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<Faults>,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn ObjectStore>, faults: Arc<Faults>) -> Self {
        FaultyStore { inner, faults }
    }

    /// Runs a streaming request after the fault check, as one stream.
    fn faulty_stream<T: Send + 'static>(
        &self,
        what: String,
        stream: BoxStream<'static, Result<T>>,
    ) -> BoxStream<'static, Result<T>> {
        let faults = self.faults.clone();
        futures::stream::once(async move {
            if faults.before_request(&what).await? {
                // Applied, and the reply lost.
                let _ = stream.collect::<Vec<_>>().await;
                return Err(injected(&what));
            }
            Ok(stream)
        })
        .try_flatten()
        .boxed()
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let lost = self.faults.before_request(location.as_ref()).await?;
        self.faults.refuses_put(location.as_ref())?;
        let result = self.inner.put_opts(location, payload, opts).await;
        Faults::reply(lost, location.as_ref(), result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let lost = self.faults.before_request(location.as_ref()).await?;
        self.faults.refuses_put(location.as_ref())?;
        let result = self.inner.put_multipart_opts(location, opts).await;
        Faults::reply(lost, location.as_ref(), result)
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let lost = self.faults.before_request(location.as_ref()).await?;
        let result = self.inner.get_opts(location, options).await;
        Faults::reply(lost, location.as_ref(), result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let lost = self.faults.before_request(location.as_ref()).await?;
        let result = self.inner.get_ranges(location, ranges).await;
        Faults::reply(lost, location.as_ref(), result)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.faulty_stream("delete".into(), self.inner.delete_stream(locations))
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let what = format!("list {}", prefix.map(|p| p.as_ref()).unwrap_or(""));
        self.faulty_stream(what, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let what = format!("list {}", prefix.map(|p| p.as_ref()).unwrap_or(""));
        self.faulty_stream(what, self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let what = format!("list {}", prefix.map(|p| p.as_ref()).unwrap_or(""));
        let lost = self.faults.before_request(&what).await?;
        let result = self.inner.list_with_delimiter(prefix).await;
        Faults::reply(lost, &what, result)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let lost = self.faults.before_request(from.as_ref()).await?;
        let result = self.inner.copy_opts(from, to, options).await;
        Faults::reply(lost, from.as_ref(), result)
    }
}
