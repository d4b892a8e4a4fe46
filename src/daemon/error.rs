//! Why a node could not start. The crate's `Error` carries it whole, so
//! its messages are the CLI's.

use crate::fleet::root::RootError;
use crate::model::service::Service;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    #[error("invalid node id: {0}")]
    InvalidNodeId(String),
    #[error("services lists \"{0}\" more than once")]
    DuplicateService(Service),
    #[error("failed to load plugins: {0}")]
    Plugins(String),
    #[error(transparent)]
    Root(#[from] RootError),
}
