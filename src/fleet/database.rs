//! One SlateDB database as sleet reaches it: its canonical URL, its store
//! and an admin handle, and the reads every layer above needs (is it a
//! database sleet can serve, what is its compaction queue). The services
//! and the mirror both build on it; it knows neither.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path;
use slatedb::admin::{Admin, AdminBuilder};
use slatedb::compactor::CompactionStatus;
use slatedb::{CloseReason, ErrorKind};
use slatedb_common::clock::SystemClock;

use crate::model::registry::{UrlError, canonicalize_database_url};
use crate::model::response::QueueStatus;
use crate::store::bucket_copy::BucketAddress;
use crate::store::{OpenedUrl, SharedStores, StoreRoot, open_url_with_address};

/// How long one SlateDB admin read may take before it counts as failed.
/// `Admin` retries store errors without limit, so every call that can
/// wait on the store is bounded by the caller.
pub const ADMIN_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a database could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("failed to open database store {url}: {source}")]
    Store {
        url: String,
        source: object_store::Error,
    },
    #[error("{url} is not a SlateDB database (no manifest)")]
    NotADatabase { url: String },
    #[error("{url} cannot be served: {reason}")]
    Unsupported { url: String, reason: &'static str },
    #[error("{what} for {url} timed out after {}s", .after.as_secs())]
    Timeout {
        what: &'static str,
        url: String,
        after: Duration,
    },
    #[error("{url}: {source}")]
    SlateDb { url: String, source: slatedb::Error },
}

impl DatabaseError {
    /// Whether SlateDB stopped the call because a newer client fenced it.
    pub fn is_fenced(&self) -> bool {
        matches!(self, DatabaseError::SlateDb { source, .. }
            if source.kind() == ErrorKind::Closed(CloseReason::Fenced))
    }
}

/// A database's store and SlateDB admin handle.
#[derive(Clone)]
pub struct DatabaseHandle {
    url: String,
    admin: Arc<Admin>,
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// Its bucket's (or container's) address, for server-side copies.
    address: Option<Arc<BucketAddress>>,
    /// Limits how many of a node's looks run at once; see [`Self::gated`].
    looks: Option<Arc<tokio::sync::Semaphore>>,
    /// The seed and clock SlateDB's services for this database take, when
    /// a run must replay (the simulator's); SlateDB's own otherwise.
    replay: Option<Arc<Replay>>,
}

/// What makes SlateDB's services for one database replay: one seed for
/// their randomness (retry jitter, ULIDs of the files they write) and one
/// clock for their wall time. Production leaves both to SlateDB (the
/// operating system's randomness, its `DefaultSystemClock`); the
/// simulator gives its own, so a seed's run is the same run.
#[derive(Clone)]
pub struct Replay {
    pub seed: u64,
    pub clock: Arc<dyn SystemClock>,
    /// The store each SlateDB service reaches the database through, by
    /// the service's name (`gc`, `coordinator`, `workers`), so a run's
    /// trace and checks can tell who wrote what; `None`: the handle's.
    pub service_stores: Option<ServiceStores>,
}

/// The seed of stream `stream` of a run seeded `seed` (a service's, a
/// node start's, a writer's open), spread by SplitMix64's increment so
/// neighbouring streams draw unrelated numbers.
pub fn derived_seed(seed: u64, stream: u64) -> u64 {
    seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// See [`Replay::service_stores`].
pub type ServiceStores = Arc<dyn Fn(&'static str) -> Arc<dyn ObjectStore> + Send + Sync>;

impl std::fmt::Debug for DatabaseHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseHandle")
            .field("url", &self.url)
            .finish()
    }
}

impl DatabaseHandle {
    /// Opens a database from its URL, with store options from the
    /// environment. Reads nothing yet.
    pub fn open(url: &str) -> Result<DatabaseHandle, DatabaseError> {
        DatabaseHandle::open_with(url, open_url_with_address)
    }

    /// [`DatabaseHandle::open`], through a node's shared stores: the
    /// database's bucket is opened once for all of them.
    pub fn open_shared(url: &str, stores: &SharedStores) -> Result<DatabaseHandle, DatabaseError> {
        DatabaseHandle::open_with(url, |canonical| stores.open(canonical))
    }

    /// Canonicalizes `url` and opens its store with `open`.
    fn open_with(
        url: &str,
        open: impl FnOnce(&str) -> Result<OpenedUrl, object_store::Error>,
    ) -> Result<DatabaseHandle, DatabaseError> {
        let canonical = canonicalize_database_url(url)?;
        let (store, path, address) = open(&canonical).map_err(|source| DatabaseError::Store {
            url: canonical.clone(),
            source,
        })?;
        Ok(DatabaseHandle::from_parts(canonical, store, path).with_address(address))
    }

    /// A handle over an existing store (tests, custom stores).
    pub fn from_parts(url: String, store: Arc<dyn ObjectStore>, path: Path) -> DatabaseHandle {
        let admin = Arc::new(AdminBuilder::new(path.clone(), store.clone()).build());
        DatabaseHandle::with_admin(url, store, path, admin)
    }

    /// [`DatabaseHandle::from_parts`] whose SlateDB admin and services
    /// draw their randomness from `replay.seed` and read `replay.clock`:
    /// the simulator's handles.
    pub fn replaying(
        url: String,
        store: Arc<dyn ObjectStore>,
        path: Path,
        replay: Replay,
    ) -> DatabaseHandle {
        let admin = AdminBuilder::new(path.clone(), store.clone())
            .with_seed(replay.seed)
            .with_system_clock(replay.clock.clone())
            .build();
        let mut handle = DatabaseHandle::with_admin(url, store, path, Arc::new(admin));
        handle.replay = Some(Arc::new(replay));
        handle
    }

    fn with_admin(
        url: String,
        store: Arc<dyn ObjectStore>,
        path: Path,
        admin: Arc<Admin>,
    ) -> DatabaseHandle {
        DatabaseHandle {
            url,
            admin,
            store,
            path,
            address: None,
            looks: None,
            replay: None,
        }
    }

    /// The same handle, its looks sharing `looks` with every other
    /// database of the node.
    pub fn with_look_limit(mut self, looks: Arc<tokio::sync::Semaphore>) -> Self {
        self.looks = Some(looks);
        self
    }

    /// Runs one short look at the database (a few requests: the idle
    /// watch's, a start's checks, GC's first sweep) once the node has room
    /// for it. A node starting over 10,000 databases starts 30,000 tasks
    /// at once, and their first looks, all at once, held hundreds of MiB
    /// of listings (and on S3 would open as many connections); the memory
    /// was never given back. Never nest: a look that waited for a second
    /// permit could wait for ever.
    pub async fn gated<T>(&self, look: impl std::future::Future<Output = T>) -> T {
        let _permit = self.look_permit().await;
        look.await
    }

    /// [`Self::gated`]'s permit, for a look that needs the handle's owner
    /// mutably: held until dropped.
    pub async fn look_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let looks = self.looks.clone()?;
        looks.acquire_owned().await.ok()
    }

    /// The same handle, knowing its bucket's address (tests and
    /// benchmarks that build stores themselves).
    pub fn with_address(mut self, address: Option<Arc<BucketAddress>>) -> Self {
        self.address = address;
        self
    }

    /// The same database through a wrapped store (request counting,
    /// fault injection); the admin handle is rebuilt over it.
    pub fn wrap_store(
        self,
        wrap: impl FnOnce(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore>,
    ) -> Self {
        let address = self.address.clone();
        let looks = self.looks.clone();
        let mut wrapped =
            DatabaseHandle::from_parts(self.url, wrap(self.store), self.path).with_address(address);
        wrapped.looks = looks;
        wrapped
    }

    /// The wall time the services judge this database's objects by: the
    /// replaying clock's, else the system's.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        match &self.replay {
            Some(replay) => replay.clock.now(),
            None => chrono::Utc::now(),
        }
    }

    /// The store SlateDB's `service` (`gc`, `coordinator`, `workers`)
    /// reaches the database through: the handle's own, but for a
    /// replaying handle that names each service's.
    pub fn store_for(&self, service: &'static str) -> Arc<dyn ObjectStore> {
        match self.replay.as_ref().and_then(|r| r.service_stores.as_ref()) {
            Some(stores) => stores(service),
            None => self.store.clone(),
        }
    }

    /// The seed and clock SlateDB's services take, when the run replays.
    pub fn replay(&self) -> Option<&Replay> {
        self.replay.as_deref()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn admin(&self) -> &Admin {
        &self.admin
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the store can update objects in place with `If-Match`:
    /// SlateDB's GC boundary files need it, and `file://` and HTTP stores
    /// cannot.
    pub fn supports_conditional_update(&self) -> bool {
        crate::store::updates_in_place(&self.url)
    }

    pub(crate) fn slatedb_error(&self, source: slatedb::Error) -> DatabaseError {
        DatabaseError::SlateDb {
            url: self.url.clone(),
            source,
        }
    }

    /// The database's root, for copying objects in and out of it.
    pub fn root(&self) -> StoreRoot {
        StoreRoot {
            url: self.url.clone(),
            store: self.store.clone(),
            prefix: self.path.clone(),
            address: self.address.clone(),
        }
    }

    /// Runs one SlateDB admin call, bounded by [`ADMIN_CALL_TIMEOUT`].
    pub(crate) async fn bounded<T>(
        &self,
        what: &'static str,
        call: impl Future<Output = Result<T, slatedb::Error>>,
    ) -> Result<T, DatabaseError> {
        tokio::time::timeout(ADMIN_CALL_TIMEOUT, call)
            .await
            .map_err(|_| DatabaseError::Timeout {
                what,
                url: self.url.clone(),
                after: ADMIN_CALL_TIMEOUT,
            })?
            .map_err(|e| self.slatedb_error(e))
    }

    /// Checks that the database exists and has a layout the services can
    /// serve: a database whose WAL lives in a separate object store keeps
    /// it where sleet cannot reach, so GC would judge WAL liveness wrong.
    pub async fn check_servable(&self) -> Result<(), DatabaseError> {
        let manifest = self
            .bounded(
                "reading the latest manifest",
                self.admin.read_manifest(None),
            )
            .await?
            .ok_or_else(|| DatabaseError::NotADatabase {
                url: self.url.clone(),
            })?;
        if manifest.wal_object_store_uri().is_some() {
            return Err(DatabaseError::Unsupported {
                url: self.url.clone(),
                reason: "it keeps its WAL in a separate object store (wal_object_store_uri is set)",
            });
        }
        Ok(())
    }

    /// Compaction jobs waiting for a worker and running, from `.compactions`.
    pub async fn queue_depth(&self) -> Result<QueueStatus, DatabaseError> {
        let compactions = self
            .bounded("reading .compactions", self.admin.read_compactions(None))
            .await?;
        let mut queue = QueueStatus::default();
        for job in compactions.iter().flat_map(|c| c.recent_compactions()) {
            match job.status() {
                CompactionStatus::Submitted | CompactionStatus::Scheduled => queue.claimable += 1,
                CompactionStatus::Running => queue.running += 1,
                _ => {}
            }
        }
        Ok(queue)
    }
}
