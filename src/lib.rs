//! sleet: SlateDB's background services for a whole fleet of databases.
//!
//! A fleet lives under one object-store URL, its *root*: `sleet.toml`
//! (policy), `dbs/<db>.toml` (one registry file per database) and
//! `nodes/<id>.<letters>.json` (heartbeats). Stateless nodes heartbeat into
//! the root, rank themselves for each database's work by rendezvous
//! hashing, and run what they own. [`Fleet`] is the embedding API:
//!
//! ```no_run
//! # async fn demo() -> Result<(), sleet::Error> {
//! let fleet = sleet::Fleet::open("file:///var/lib/sleet/fleet")?;
//! fleet.register("s3://bucket/db1").await?;
//! let status = fleet.status().await?;
//! println!("{} databases", status.databases.len());
//! # Ok(()) }
//! ```

pub mod cli;
pub mod config;
pub mod config_check;
pub mod duration;
mod error;
pub mod heartbeat;
pub mod mirror;
pub mod ownership;
pub mod placement;
pub mod registry;
pub mod response;
pub mod root;
pub mod schema;
pub mod service;
pub mod status;
pub mod store;
#[doc(hidden)]
pub mod testing;

pub use duration::HumanDuration;
pub use error::Error;
pub use response::{
    DatabaseStatus, NodeStatus, RegisterResponse, ServicePlacement, StatusResponse,
};
pub use service::Service;

use root::FleetRoot;

/// This sleet release.
pub const SLEET_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The SlateDB release sleet's services are built on.
pub const SLATEDB_VERSION: &str = env!("SLEET_SLATEDB_VERSION");

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
    /// existing registration is left as it is (`created == false`).
    pub async fn register(&self, database_url: &str) -> Result<RegisterResponse, Error> {
        self.root.register(database_url).await
    }

    /// The fleet's nodes, databases, placement and warnings, as of now.
    pub async fn status(&self) -> Result<StatusResponse, Error> {
        status::fleet_status(&self.root, chrono::Utc::now()).await
    }
}
