//! Plain data and frozen formats: the bottom layer.
//!
//! The formats sleet 0.1.0 shares, each in one small module with golden
//! tests: registry file names (`registry`), heartbeat names and bodies
//! (`heartbeat`), the placement hash (`placement`), service names and
//! letters (`service`), identifiers (`ident`). Beside them the values
//! handed down as settings (`policy`, `duration`), the JSON responses of
//! the commands (`response`) and the build's versions (`version`), and the simulator's switches
//! (`planted`), marks (`coverage`) and `seams`, inert outside it.
//!
//! May import: nothing of the crate outside this folder.

pub mod coverage;
pub mod duration;
pub mod heartbeat;
pub mod ident;
pub mod placement;
pub mod planted;
pub mod policy;
pub mod registry;
pub mod response;
pub mod seams;
pub mod service;
pub mod version;
