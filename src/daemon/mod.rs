//! A fleet node: heartbeat, compute ownership, supervise what it owns.
//!
//! Every `heartbeat_interval` a node overwrites its heartbeat, re-reads
//! the config when `config_poll` is due, lists `nodes/`, deletes stale
//! heartbeats, and reconciles its tasks to exactly the work it owns. There
//! is no leader: nodes that see the same heartbeats and config compute the
//! same assignment, and while views differ a task may briefly run twice,
//! which SlateDB's fencing and CAS make safe.
//!
//! The rooms: [`options`] (how a node is asked to run), [`owned`] (the
//! pure computation of which tasks a node owns, and with what settings),
//! [`node`] (the tick loop: heartbeat, config, reconcile), [`config_polls`]
//! (the config re-read beside the tick), [`supervisor`]
//! (one task's runs, restarts and hooks, dispatching to the SlateDB
//! services and the mirror side by side), [`stores`] (which stores the
//! node may write to, from their checks), [`board`] (the task states
//! supervisors write and heartbeats, status and probes read) and
//! [`memory`] (freed memory handed back to the system).
//!
//! May import: every layer below: `services`, `mirror`, `observe`,
//! `plugin`, `fleet`, `config`, `store`, `model`. It returns its own
//! `NodeError`, which the crate's `Error` carries.

mod board;
mod config_polls;
mod error;
mod memory;
mod node;
mod options;
mod owned;
mod stores;
mod supervisor;

pub use error::NodeError;
pub use node::{LOOKS_AT_ONCE, run_node};
pub use options::{DEFAULT_SHUTDOWN_GRACE, DatabaseOpener, NodeOptions, RUNNABLE_SERVICES};
pub use owned::{TaskKey, TaskSpec, TaskWork, owned_tasks};
