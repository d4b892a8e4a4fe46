//! The library's error type: what the facade returns, and what the CLI
//! prints as a one-line `error: ...`.

use crate::model::registry::UrlError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Root(#[from] crate::fleet::root::RootError),
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("failed to {action} {location}: {source}")]
    Store {
        action: &'static str,
        location: String,
        source: object_store::Error,
    },
    #[error(transparent)]
    Node(#[from] crate::daemon::NodeError),
    #[error("{0}")]
    CliUsage(String),
    #[error("--listen {address}: cannot listen there: {message}")]
    Listen {
        address: std::net::SocketAddr,
        message: String,
    },
    #[error("{0}")]
    Demo(String),
    #[error("{0} is not registered; `sleet register` it first")]
    NotRegistered(String),
    #[error("no enabled mirror target \"{target}\" applies to {database}{hint}")]
    NoSuchTarget {
        target: String,
        database: String,
        /// The config warnings that may explain why, if any.
        hint: String,
    },
    #[error(transparent)]
    Mirror(#[from] crate::mirror::MirrorError),
    #[error(
        "the pass did not run: {0} (a node would ask again at its next poll; --no-hooks runs it \
         anyway)"
    )]
    PassDeferred(String),
    #[error("mirror verify found {problems} problems at {url}")]
    VerifyFailed { url: String, problems: usize },
    #[error("failed to load plugins: {0}")]
    Plugins(String),
    #[error("plugin check found {problems} problems")]
    PluginCheckFailed { problems: usize },
    #[error(
        "{store} is not proven safe for a sleet fleet: {failed} needed properties failed or could not be proven"
    )]
    UnsafeStore { store: String, failed: usize },
    #[error("events: {0}")]
    Events(String),
    #[error("events check: {failed} buckets' events did not arrive")]
    EventsCheckFailed { failed: usize },
    #[error(
        "mirror destinations would collide: {users} all map to {destination}; give each database \
         its own destination (a target's source_prefix), or write this database's registry file \
         with the target disabled"
    )]
    SharedDestination { destination: String, users: String },
    #[error(transparent)]
    StoreTrust(#[from] crate::fleet::store_trust::Error),
    #[error("{failed} of {total} config files have problems")]
    ConfigCheckFailed { failed: usize, total: usize },
}

impl Error {
    /// The process exit code: 2 for an address that cannot be listened
    /// on (as for clap's own usage errors, a bad `--listen` among them),
    /// 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Listen { .. } => 2,
            _ => 1,
        }
    }
}
