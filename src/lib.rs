//! sleet: SlateDB's background services for a whole fleet of databases.
//!
//! A fleet lives under one object-store URL, its *root*: `sleet.toml`
//! (policy), `dbs/<db>.toml` (one registry file per database) and
//! `nodes/<id>.<letters>.json` (heartbeats). Stateless nodes heartbeat into
//! the root, rank themselves for each database's work by rendezvous
//! hashing, and run what they own. [`Fleet`] is the embedding API:
//!
//! ```
//! # #[tokio::main]
//! # async fn main() -> Result<(), sleet::Error> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let root = format!("file://{}", dir.path().display());
//! let fleet = sleet::Fleet::open(&root)?; // "s3://ops/sleet", "file:///srv/fleet", ...
//! assert!(fleet.register("s3://bucket/db1").await?.created);
//! assert!(!fleet.register("s3://bucket/db1/").await?.created, "already registered");
//! let status = fleet.status(sleet::StatusOptions::default()).await?;
//! assert_eq!(status.databases[0].url, "s3://bucket/db1");
//! # Ok(()) }
//! ```

// The layers, from the command line down to the store (see
// docs/architecture.md): each folder is one layer or wing, and imports run
// down.
pub mod cli;
pub mod commands;
pub mod config;
pub mod daemon;
mod error;
pub mod fleet;
pub mod mirror;
pub mod model;
pub mod observe;
pub mod plugin;
pub mod services;
#[doc(hidden)]
pub mod sim;
pub mod store;
#[doc(hidden)]
pub mod testing;

pub use commands::status::StatusOptions;
pub use daemon::NodeOptions;
pub use error::Error;
pub use model::duration::HumanDuration;
pub use model::response::QueueStatus;
pub use model::response::{
    DatabaseStatus, NodeStatus, RegisterResponse, ServicePlacement, StatusResponse,
};
pub use model::service::Service;
pub use model::version::{SLATEDB_VERSION, SLEET_VERSION};
pub use tokio_util::sync::CancellationToken;

use commands::status;
use fleet::root::{self, FleetRoot};
use fleet::{mirror_targets, store_trust};
use model::registry;
use services::outside_compactor;

/// Registry files [`Fleet::register_all`] creates at once: enough to
/// hide a store's round trip, few enough not to be throttled.
pub const REGISTERS_IN_FLIGHT: usize = 32;

/// A fleet, opened from its root URL.
#[derive(Debug, Clone)]
pub struct Fleet {
    root: FleetRoot,
}

impl Fleet {
    /// Opens the fleet rooted at `url` (`s3://ops/sleet`, `file:///srv/fleet`,
    /// ...). Store credentials and endpoints come from the environment.
    /// Nothing is read until a call needs it.
    pub fn open(url: &str) -> Result<Fleet, Error> {
        Ok(Fleet {
            root: FleetRoot::open(url)?,
        })
    }

    /// A fleet over an already opened root (tests, custom stores).
    pub fn from_root(root: FleetRoot) -> Fleet {
        Fleet { root }
    }

    /// The canonical root URL.
    pub fn url(&self) -> &str {
        self.root.url()
    }

    /// The opened root.
    pub fn root(&self) -> &FleetRoot {
        &self.root
    }

    /// Registers a database by creating its empty registry file. An
    /// existing registration is left as it is (`created == false`). Reads
    /// nothing of the database: [`Fleet::check_database`] does.
    ///
    /// A database whose mirror targets would copy it where a registered
    /// database already goes is refused ([`Error::SharedDestination`]).
    ///
    /// A registration is a create-only PUT, so the root's store is proven
    /// first: its recorded check (see `sleet store check`) is reused while
    /// fresh, else the short check runs and is recorded. A store that
    /// fails (and is not trusted in `sleet.toml`) is refused with
    /// [`Error::StoreRefused`].
    pub async fn register(&self, database_url: &str) -> Result<RegisterResponse, Error> {
        let mut registered = self.register_all(&[database_url.to_string()]).await?;
        Ok(registered.remove(0))
    }

    /// Registers many databases as [`Fleet::register`] does one, paying
    /// once for what they share: one config read, one store check and (with
    /// mirror targets) one read of the registry for collisions, then the
    /// create-only PUTs, [`REGISTERS_IN_FLIGHT`] at a time. Every URL is
    /// checked before anything is written; a collision between two of them
    /// is refused like one with a registered database. Returned in the
    /// order given.
    pub async fn register_all(
        &self,
        database_urls: &[String],
    ) -> Result<Vec<RegisterResponse>, Error> {
        let urls = database_urls
            .iter()
            .map(|url| registry::canonicalize_database_url(url))
            .collect::<Result<Vec<_>, _>>()?;
        let (fleet, _) = root::ConfigPoller::fleet_config(&self.root).await;
        let view = root::FleetView {
            fleet,
            ..Default::default()
        };
        store_trust::require(
            &self.root,
            self.root.url(),
            self.root.store().clone(),
            self.root.prefix(),
            &view.fleet.stores.resolve(),
            store_trust::skew_bound_for(&view),
        )
        .await?;
        if !view.fleet.database.mirror.targets.is_empty() {
            self.refuse_shared_destinations(&urls).await?;
        }
        use futures::StreamExt;
        let registered = futures::stream::iter(&urls)
            .map(|url| self.root.register(url))
            .buffered(REGISTERS_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await;
        Ok(registered.into_iter().collect::<Result<_, _>>()?)
    }

    /// Refuses new registrations whose mirror destinations a registered
    /// database, or another of them, already copies to.
    async fn refuse_shared_destinations(&self, urls: &[String]) -> Result<(), Error> {
        let mut view = root::ConfigPoller::new().poll(&self.root).await;
        let new: std::collections::BTreeSet<&String> = urls
            .iter()
            .filter(|url| !view.databases.contains_key(*url))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let databases = std::sync::Arc::make_mut(&mut view.databases);
        for url in &new {
            databases.insert((*url).clone(), Default::default());
        }
        let shared = mirror_targets::shared_destinations(&view);
        match shared
            .into_iter()
            .find(|(_, users)| users.iter().any(|(database, _)| new.contains(&database)))
        {
            Some((destination, users)) => Err(Error::SharedDestination {
                destination,
                users: mirror_targets::describe_users(&users),
            }),
            None => Ok(()),
        }
    }

    /// Reads a database (with store options from the environment) and
    /// returns warnings about what would keep the fleet from serving it,
    /// above all a compactor running inside its writer. A database with no
    /// manifest yet gets none: registering before the first writer opens is
    /// normal. `sleet register` calls this unless given `--no-check`.
    pub async fn check_database(&self, canonical_url: &str) -> Vec<String> {
        let records = outside_compactor::records::EpochRecords::new(self.root.clone(), "register");
        services::registration_warnings(&records, canonical_url).await
    }

    /// The fleet's nodes, databases, placement and warnings, as of now.
    pub async fn status(&self, options: StatusOptions) -> Result<StatusResponse, Error> {
        status::fleet_status(&self.root, chrono::Utc::now(), options).await
    }

    /// Runs a node of this fleet until `shutdown` is cancelled. On the way
    /// out it stops its tasks (waiting a bounded time) and deletes its
    /// heartbeat, so peers take over at their next tick.
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), sleet::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let root = format!("file://{}", dir.path().display());
    /// let fleet = sleet::Fleet::open(&root)?;
    /// let shutdown = sleet::CancellationToken::new();
    /// let node = tokio::spawn({
    ///     let (fleet, shutdown) = (fleet.clone(), shutdown.clone());
    ///     async move { fleet.run_node(sleet::NodeOptions::new("node-1"), shutdown).await }
    /// });
    /// // The node heartbeats at once, and `status` sees it live.
    /// while fleet.status(Default::default()).await?.nodes.is_empty() {
    ///     tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    /// }
    /// shutdown.cancel();
    /// node.await.expect("the node task")?;
    /// // A clean stop deletes the heartbeat: peers take over at their next tick.
    /// assert!(fleet.status(Default::default()).await?.nodes.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn run_node(
        &self,
        options: NodeOptions,
        shutdown: CancellationToken,
    ) -> Result<(), Error> {
        Ok(daemon::run_node(self.root.clone(), options, shutdown).await?)
    }
}
