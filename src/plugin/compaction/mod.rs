//! Compaction plugins: a database's merge operator and compaction filter
//! as WebAssembly components, run inside the fleet's compactor through
//! SlateDB's `MergeOperator` and `CompactionFilterSupplier`.
//!
//! SlateDB calls these per key and per entry, so unlike copiers and hooks
//! an instance serves many calls: merge instances are pooled per
//! database, a filter instance lives for one compaction job. Each call
//! still has the plugin's memory cap and a wall-clock deadline, and a
//! trap discards the instance. A failed call fails the compaction job
//! (SlateDB retries it) and is reported, naming plugin and database; it
//! never takes the node down.

mod filter;
mod merge;

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

pub use filter::{FilterPlugin, WasmFilterSupplier};
pub use merge::{MergePlugin, WasmMergeOperator};

use super::host::HostState;
use super::runtime::{PluginRuntime, call_error, deadline_ticks};
use super::text::{MAX_MESSAGE, bounded};
use super::{PluginError, PluginLimits};

/// One compaction plugin a database uses, with everything a config change
/// could alter (a change restarts the database's compactor tasks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSpec {
    pub plugin: String,
    pub config: Vec<(String, String)>,
    pub limits: PluginLimits,
}

/// The application code a database's compaction runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionCodeSpec {
    pub merge_operator: Option<CodeSpec>,
    pub compaction_filter: Option<CodeSpec>,
}

/// Told of every failed compaction call, with a message that names the
/// plugin and the database: how a failing job reaches `sleet status`.
pub type FailureReport = Arc<dyn Fn(String) + Send + Sync>;

/// A report that goes nowhere (`sleet plugin check`, benchmarks).
pub fn unreported() -> FailureReport {
    Arc::new(|_| {})
}

/// One synchronous call into an instance under the plugin's deadline: a
/// call still running when it passes traps, and is reported as a timeout.
fn call_within<T>(
    store: &mut Store<HostState>,
    limits: &PluginLimits,
    call: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<T>,
) -> Result<T, PluginError> {
    store.set_epoch_deadline(deadline_ticks(limits.call_timeout));
    let started = Instant::now();
    call(store).map_err(|e| {
        let name = store.data().plugin.clone();
        match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => PluginError::Timeout {
                name,
                after: started.elapsed().max(limits.call_timeout),
            },
            _ => call_error(&name, e),
        }
    })
}

/// A plugin's own error message, bounded: it ends up in logs and status.
fn plugin_message(message: String) -> String {
    bounded(&message, MAX_MESSAGE)
}

/// A fresh store for `limits`, named after the plugin.
fn fresh_store(runtime: &PluginRuntime, plugin: &str, limits: &PluginLimits) -> Store<HostState> {
    runtime.sync_store(plugin, limits.memory_bytes)
}
