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

pub mod exercise;
mod filter;
mod merge;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::Store;

pub use filter::{FilterPlugin, FilterWorld, WasmFilterSupplier};
pub use merge::{MergePlugin, MergeWorld, WasmMergeOperator};

use wasmtime::component::{Component, InstancePre};

use super::host::HostState;
use super::runtime::{PluginRuntime, call_error, deadline_ticks, load_error};
use super::text::{MAX_MESSAGE, bounded};
use super::{PluginError, PluginInfo, PluginLimits};

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
            _ => call_error(&name, e, &store.data().output),
        }
    })
}

/// A plugin's own error message, bounded: it ends up in logs and status.
fn plugin_message(message: String) -> String {
    bounded(&message, MAX_MESSAGE)
}

/// After a failed call, how long a database's compactions fail fast
/// instead of calling the plugin again, doubling per failure up to
/// [`MAX_BACKOFF`]. A merge or filter is deterministic, so SlateDB's own
/// retry (within a poll interval) would only repeat the failure, and a
/// looping plugin would hold a compactor thread for its whole deadline
/// every time.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The backoff of one database's plugin: a lock-free check on the call
/// path, a lock only when a call fails or first succeeds after failures.
struct Backoff {
    epoch: Instant,
    /// Milliseconds after `epoch` before which calls fail fast; 0 when
    /// the last call succeeded.
    until_ms: AtomicU64,
    failure: Mutex<Option<(Duration, String)>>,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            epoch: Instant::now(),
            until_ms: AtomicU64::new(0),
            failure: Mutex::new(None),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// `Err` with the last failure while backing off.
    fn check(&self) -> Result<(), String> {
        let until = self.until_ms.load(Ordering::Relaxed);
        if until == 0 || self.now_ms() >= until {
            return Ok(());
        }
        let failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        let (delay, why) = failure
            .as_ref()
            .map_or((Duration::ZERO, ""), |(d, w)| (*d, w));
        Err(format!(
            "backing off for up to {} after: {why}",
            crate::HumanDuration(delay)
        ))
    }

    /// Starts or doubles the backoff after `why`.
    fn failed(&self, why: &str) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        let delay = failure
            .as_ref()
            .map_or(FIRST_BACKOFF, |(d, _)| (*d * 2).min(MAX_BACKOFF));
        *failure = Some((delay, why.to_string()));
        let until = self.now_ms() + delay.as_millis() as u64;
        self.until_ms.store(until.max(1), Ordering::Relaxed);
    }

    /// Ends any backoff once a call succeeds.
    fn succeeded(&self) {
        if self.until_ms.load(Ordering::Relaxed) != 0 {
            *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
            self.until_ms.store(0, Ordering::Relaxed);
        }
    }
}

/// How a failed compaction call names itself (plugin and database),
/// reaches status, and backs off; shared by every call and job of one
/// database's plugin.
#[derive(Clone)]
struct Failures {
    /// "merge operator" or "compaction filter".
    what: &'static str,
    plugin: String,
    database: String,
    report: FailureReport,
    backoff: Arc<Backoff>,
}

impl Failures {
    fn new(what: &'static str, plugin: &str, database: &str, report: FailureReport) -> Self {
        Failures {
            what,
            plugin: plugin.to_string(),
            database: database.to_string(),
            report,
            backoff: Arc::new(Backoff::new()),
        }
    }

    /// Backs off after `why`, reports it, and returns the job's error.
    fn fail(&self, why: impl std::fmt::Display) -> String {
        let why = why.to_string();
        self.backoff.failed(&why);
        self.fail_fast(why)
    }

    /// Reports a call refused while backing off, and returns the error.
    fn fail_fast(&self, why: impl std::fmt::Display) -> String {
        let message = format!(
            "{} plugin {} failed compacting {}: {why}",
            self.what, self.plugin, self.database
        );
        (self.report)(message.clone());
        message
    }
}

/// A configured instance of a compaction plugin, with the store it lives in.
struct Instance<B> {
    store: Store<HostState>,
    bindings: B,
}

/// What sets one compaction world apart, for [`CompiledPlugin`]: its
/// generated bindings and how to reach its `configure` export.
pub trait World {
    type Pre: Send + Sync;
    type Bindings;
    fn prepare(pre: InstancePre<HostState>) -> wasmtime::Result<Self::Pre>;
    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<Self::Bindings>;
    /// `config` is a `&Vec` because the generated binding takes one.
    #[allow(clippy::ptr_arg)]
    fn configure(
        bindings: &Self::Bindings,
        store: &mut Store<HostState>,
        config: &Vec<(String, String)>,
    ) -> wasmtime::Result<Result<(), String>>;
}

/// A compiled compaction plugin of world `W`, ready to instantiate.
pub struct CompiledPlugin<W: World> {
    runtime: Arc<PluginRuntime>,
    info: PluginInfo,
    pre: W::Pre,
}

impl<W: World> CompiledPlugin<W> {
    pub(in crate::plugin) fn new(
        runtime: Arc<PluginRuntime>,
        info: PluginInfo,
        component: &Component,
    ) -> Result<Self, PluginError> {
        let pre = runtime.instantiate_pre_pure(&info.name, component)?;
        let pre = W::prepare(pre).map_err(|e| load_error(&info.name, e))?;
        Ok(CompiledPlugin { runtime, info, pre })
    }

    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// A fresh instance, in a store of its own under `limits`, that
    /// accepted `config`.
    fn instance(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
    ) -> Result<Instance<W::Bindings>, PluginError> {
        let mut store = self
            .runtime
            .sync_store(&self.info.name, limits.memory_bytes);
        let bindings = call_within(&mut store, limits, |store| W::instantiate(&self.pre, store))?;
        let config = config.to_vec();
        call_within(&mut store, limits, |store| {
            W::configure(&bindings, store, &config)
        })?
        .map_err(|message| PluginError::Config {
            name: self.info.name.clone(),
            message: plugin_message(message),
        })?;
        Ok(Instance { store, bindings })
    }

    /// Instantiates and configures the plugin (`sleet plugin check`):
    /// the most memory the instance held, in bytes.
    pub fn check(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
    ) -> Result<u64, PluginError> {
        self.instance(config, limits)
            .map(|instance| instance.store.data().peak_memory())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_fails_calls_fast_for_a_doubling_while_and_a_success_ends_it() {
        let backoff = Backoff::new();
        assert!(backoff.check().is_ok());
        backoff.failed("trapped");
        let err = backoff.check().expect_err("backing off");
        assert!(err.contains("trapped") && err.contains("1s"), "{err}");
        backoff.failed("trapped again");
        let err = backoff.check().expect_err("still backing off");
        assert!(err.contains("2s") && err.contains("trapped again"), "{err}");
        for _ in 0..10 {
            backoff.failed("again");
        }
        let err = backoff.check().expect_err("capped");
        assert!(err.contains("1m"), "capped at a minute: {err}");
        backoff.succeeded();
        assert!(backoff.check().is_ok());
        backoff.failed("once more");
        assert!(backoff.check().unwrap_err().contains("1s"), "starts over");
    }

    #[test]
    fn a_backoff_ends_by_itself() {
        let backoff = Backoff::new();
        backoff.failed("x");
        std::thread::sleep(Duration::from_millis(5));
        backoff.until_ms.store(backoff.now_ms(), Ordering::Relaxed);
        assert!(backoff.check().is_ok(), "the window passed");
    }
}
