//! The fleet root: `sleet.toml`, the `dbs/` registry and `nodes/` heartbeats.
//!
//! Everything a fleet knows lives under one object-store prefix, so nodes
//! are stateless: they read policy and membership from here and write only
//! their own heartbeat (and, on `register`, create-only registry files).
//! Re-reading it cheaply is [`poller`]'s job.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::config::{DatabaseConfig, FleetConfig};
use crate::model::coverage::{self, Mark};
use crate::model::heartbeat::parse_object_name;
use crate::model::planted::{Planted, planted};
use crate::model::registry::{canonicalize_database_url, canonicalize_url, file_name};
use crate::model::response::RegisterResponse;
use crate::model::service::Service;
use crate::store::{child_path, open_url, relative_to};

mod error;
mod poller;

pub use error::RootError;
pub use poller::ConfigPoller;

/// The policy file at the top of the root.
pub const CONFIG_FILE: &str = "sleet.toml";
/// The registry directory: one file per database.
pub const REGISTRY_DIR: &str = "dbs";
/// The heartbeat directory: one object per node.
pub const NODES_DIR: &str = "nodes";

/// An opened fleet root.
#[derive(Debug, Clone)]
pub struct FleetRoot {
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: Path,
}

impl FleetRoot {
    /// Opens a fleet root from its URL, with store options from the
    /// environment.
    pub fn open(url: &str) -> Result<FleetRoot, RootError> {
        let url = canonicalize_url(url).map_err(RootError::FleetRootUrl)?;
        let (store, prefix) = open_url(&url).map_err(|source| RootError::FleetRootStore {
            url: url.clone(),
            source,
        })?;
        Ok(FleetRoot { url, store, prefix })
    }

    /// A root over an existing store, for tests and embedding.
    pub fn from_parts(url: String, store: Arc<dyn ObjectStore>, prefix: Path) -> FleetRoot {
        FleetRoot { url, store, prefix }
    }

    /// The same root through a wrapped store: request counting, fault
    /// injection, metrics.
    pub fn wrap_store(
        self,
        wrap: impl FnOnce(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore>,
    ) -> Self {
        FleetRoot {
            store: wrap(self.store),
            ..self
        }
    }

    /// The canonical root URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The root's path in its store.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The store path of something under the root (`dbs/x.toml`).
    pub fn path(&self, relative: &str) -> Path {
        child_path(&self.prefix, relative)
    }

    /// A root-relative name for messages, such as `dbs/x.toml`.
    pub fn relative<'a>(&self, location: &'a Path) -> &'a str {
        relative_to(&self.prefix, location)
    }

    /// `<root url>/<relative>`, for messages that must name the object.
    pub fn describe(&self, relative: &str) -> String {
        format!("{}/{relative}", self.url)
    }

    fn store_error(
        &self,
        action: &'static str,
        relative: &str,
        source: object_store::Error,
    ) -> RootError {
        RootError::Store {
            action,
            location: self.describe(relative),
            source,
        }
    }

    /// Registers a database with a create-only PUT of an empty registry
    /// file; an existing file (even with overrides in it) is never touched.
    pub async fn register(&self, database_url: &str) -> Result<RegisterResponse, RootError> {
        let url = canonicalize_database_url(database_url)?;
        let file = format!("{REGISTRY_DIR}/{}", file_name(&url));
        let put = self
            .store
            .put_opts(
                &self.path(&file),
                PutPayload::new(),
                PutOptions::from(PutMode::Create),
            )
            .await;
        let created = match put {
            Ok(_) => true,
            Err(object_store::Error::AlreadyExists { .. }) => false,
            Err(source) => return Err(self.store_error("create", &file, source)),
        };
        Ok(RegisterResponse {
            url,
            file,
            created,
            warnings: Vec::new(),
        })
    }

    /// Every object under a root directory, with metadata.
    async fn list_dir(&self, dir: &str) -> Result<Vec<object_store::ObjectMeta>, RootError> {
        let prefix = self.path(dir);
        self.store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|source| self.store_error("list", &format!("{dir}/"), source))
    }

    /// Every parseable heartbeat under `nodes/`, with its store timestamp.
    pub async fn list_heartbeats(&self) -> Result<Vec<HeartbeatObject>, RootError> {
        Ok(heartbeats_in(self.list_dir(NODES_DIR).await?))
    }

    /// The bytes of an object under the root.
    pub async fn get_bytes(&self, location: &Path) -> Result<bytes::Bytes, object_store::Error> {
        self.store.get(location).await?.bytes().await
    }
}

/// The parseable heartbeats of a `nodes/` listing.
pub fn heartbeats_in(objects: Vec<object_store::ObjectMeta>) -> Vec<HeartbeatObject> {
    objects
        .into_iter()
        .filter_map(|meta| {
            let (node_id, services) = parse_object_name(meta.location.filename()?)?;
            Some(HeartbeatObject {
                node_id,
                services,
                last_modified: meta.last_modified,
                path: meta.location,
            })
        })
        .collect()
}

/// A heartbeat object seen in a `nodes/` listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatObject {
    pub node_id: String,
    pub services: Vec<Service>,
    pub last_modified: DateTime<Utc>,
    pub path: Path,
}

/// One node as a reader sees it: its youngest heartbeat and whether that
/// heartbeat is recent enough to count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSighting {
    pub node_id: String,
    pub services: Vec<Service>,
    /// Reader clock minus the store's `LastModified`, never negative.
    pub age: Duration,
    pub live: bool,
    pub path: Path,
}

/// Each node's youngest heartbeat (the first listed wins a tie), with
/// liveness judged by `now`: live iff younger than `timeout`. Sorted by id.
pub fn node_view(
    heartbeats: &[HeartbeatObject],
    now: DateTime<Utc>,
    timeout: Duration,
) -> BTreeMap<String, NodeSighting> {
    let mut youngest: BTreeMap<String, &HeartbeatObject> = BTreeMap::new();
    for hb in heartbeats {
        youngest
            .entry(hb.node_id.clone())
            .and_modify(|seen| {
                if hb.last_modified > seen.last_modified {
                    *seen = hb;
                }
            })
            .or_insert(hb);
    }
    youngest
        .into_iter()
        .map(|(id, hb)| {
            let age = (now - hb.last_modified).to_std().unwrap_or(Duration::ZERO);
            if age >= timeout {
                coverage::hit(Mark::HeartbeatAgedOut);
            }
            let sighting = NodeSighting {
                node_id: id.clone(),
                services: hb.services.clone(),
                age,
                live: age < timeout || planted(Planted::DeadNodesStayLive),
                path: hb.path.clone(),
            };
            (id, sighting)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Config polling
// ---------------------------------------------------------------------------

/// What a poll of the root found: the policy, the registered databases
/// (each with its own file layer), and warnings about anything skipped.
#[derive(Debug, Clone, Default)]
pub struct FleetView {
    pub fleet: FleetConfig,
    /// The registered databases. A poll that finds the registry as the
    /// last one left it returns the same allocation, so keeping, cloning
    /// and comparing a view of 100,000 databases costs nothing per poll.
    pub databases: Arc<Registered>,
    pub warnings: Vec<String>,
}

/// Canonical database URL to its registry file's contents. Shared: every
/// empty registry file (and every unchanged one, from poll to poll) is the
/// same allocation, so a fleet of 100,000 databases holds one config per
/// distinct file, not three copies per database.
pub type Registered = BTreeMap<String, Arc<DatabaseConfig>>;

impl PartialEq for FleetView {
    fn eq(&self, other: &Self) -> bool {
        self.fleet == other.fleet
            && (Arc::ptr_eq(&self.databases, &other.databases) || self.databases == other.databases)
            && self.warnings == other.warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    pub(super) fn memory_root() -> FleetRoot {
        FleetRoot::from_parts(
            "memory:///fleet".into(),
            Arc::new(InMemory::new()),
            Path::from("fleet"),
        )
    }

    pub(super) async fn put(root: &FleetRoot, relative: &str, body: &str) {
        root.store()
            .put(&root.path(relative), PutPayload::from(body.to_string()))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn empty_root_yields_defaults() {
        let view = ConfigPoller::new().poll(&memory_root()).await;
        assert_eq!(view.fleet, FleetConfig::default());
        assert!(view.databases.is_empty());
        assert!(view.warnings.is_empty());
    }

    #[tokio::test]
    async fn register_is_create_only() {
        let root = memory_root();
        let first = root.register("S3://Bucket/db/").await.unwrap();
        assert_eq!(first.url, "s3://bucket/db");
        assert_eq!(first.file, "dbs/s3%3A%2F%2Fbucket%2Fdb.toml");
        assert!(first.created);
        put(&root, &first.file, "services = [\"gc\"]").await;
        let second = root.register("s3://bucket/db").await.unwrap();
        assert!(!second.created);
        let body = root.get_bytes(&root.path(&first.file)).await.unwrap();
        assert_eq!(&body[..], b"services = [\"gc\"]", "never overwritten");
    }

    #[test]
    fn node_view_keeps_the_youngest_and_judges_liveness() {
        let now = Utc::now();
        let hb = |id: &str, letters: &str, secs: i64| HeartbeatObject {
            node_id: id.into(),
            services: parse_object_name(&format!("{id}.{letters}.json"))
                .unwrap()
                .1,
            last_modified: now - chrono::Duration::seconds(secs),
            path: Path::from(format!("nodes/{id}.{letters}.json")),
        };
        let view = node_view(
            &[
                hb("a", "g", 50),
                hb("a", "cg", 5),
                hb("b", "w", 30),
                hb("c", "m", -3),
            ],
            now,
            Duration::from_secs(30),
        );
        assert_eq!(
            view["a"].services,
            [Service::Gc, Service::CompactorCoordinator]
        );
        assert!(view["a"].live);
        assert!(!view["b"].live, "exactly the timeout is dead");
        assert_eq!(view["c"].age, Duration::ZERO, "future stamps clamp to zero");
        assert!(view["c"].live);
    }
}
