//! Mirror integration tests: real SlateDB sources under write load, with a
//! sleet node compacting and collecting them, copied into real stores.
//!
//! One test binary (modules below) so the heavy dependency tree links once.

mod cli;
mod clouds;
#[path = "../core/common.rs"]
mod common;
mod copiers;
#[path = "../node/db.rs"]
mod db;
mod guest_errors;
mod harness;
mod hooks;
mod node;
mod pass;
mod plugins;
/// Shared with the node suite; this binary uses only its latency.
#[allow(dead_code)]
#[path = "../node/proxy.rs"]
mod proxy;
mod recovery;
mod restore;
mod wasm;
mod wat_copier;
