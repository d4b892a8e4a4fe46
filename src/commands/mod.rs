//! The commands: one function per command of the CLI, each returning a
//! response of `model::response` or the crate's `Error`.
//!
//! `status` (the fleet's nodes, placement and warnings), `mirror` (the
//! one-shot mirror passes, restores and verifies), `config_check`,
//! `plugin_check`, `scaffold` (new plugin projects), `schema` (the JSON
//! schemas of config and responses) and `demo` (the README's first
//! command).
//!
//! May import: every layer below (`daemon` and down), and the crate's
//! `Error` and `Fleet` facade.

pub mod config_check;
pub mod demo;
pub mod mirror;
pub mod plugin_check;
pub mod plugin_exercise;
pub mod scaffold;
pub mod schema;
pub mod status;
