//! Node integration tests: real daemons over real SlateDB databases.
//!
//! One test binary (modules below) so the heavy dependency tree links once.

mod chaos;
mod cluster;
#[path = "../core/common.rs"]
mod common;
mod compaction_plugins;
mod db;
mod debug_log;
mod events;
mod idle;
mod languages;
mod manifests;
mod min_age;
mod observability;
mod outside;
mod proxy;
mod s3_chaos;
mod stores;
mod system;
mod takeover;
#[path = "../mirror/wasm.rs"]
mod wasm;

/// Tests whose timing bounds assume the machine is not also running the
/// other heavy tests (the chaos rounds, real multi-process fleets,
/// in-process clusters, the demo) hold this for their whole run: on two
/// cores they would starve each other (the in-process chaos test once
/// missed its 45 s convergence bound beside the cluster tests).
pub static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
