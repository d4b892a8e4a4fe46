//! Why the fleet root could not be opened, read or written. The crate's
//! `Error` carries it whole, so its messages are the CLI's.

use crate::model::registry::UrlError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RootError {
    #[error("invalid fleet root: {0}")]
    FleetRootUrl(UrlError),
    #[error("failed to open fleet root store {url}: {source}")]
    FleetRootStore {
        url: String,
        source: object_store::Error,
    },
    /// A database URL the root was asked to register.
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("failed to {action} {location}: {source}")]
    Store {
        action: &'static str,
        location: String,
        source: object_store::Error,
    },
}
