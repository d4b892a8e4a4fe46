//! Node integration tests: real daemons over real SlateDB databases.
//!
//! One test binary (modules below) so the heavy dependency tree links once.

mod chaos;
mod cluster;
#[path = "../core/common.rs"]
mod common;
mod db;
mod outside;
mod system;
