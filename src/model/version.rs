//! The versions a node reports in its heartbeat and `--version`.

/// This sleet release.
pub const SLEET_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The SlateDB release sleet's services are built on (from Cargo.lock, by
/// `build.rs`).
pub const SLATEDB_VERSION: &str = env!("SLEET_SLATEDB_VERSION");
