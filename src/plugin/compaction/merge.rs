//! Merge operator plugins: SlateDB's `MergeOperator` over a component.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use slatedb::{MergeOperator, MergeOperatorError};
use wasmtime::Store;
use wasmtime::component::Component;

use super::super::bindings::merge_world::{MergeOperatorPlugin, MergeOperatorPluginPre};
use super::super::host::HostState;
use super::super::runtime::{PluginRuntime, load_error};
use super::super::{PluginError, PluginInfo, PluginLimits};
use super::{Backoff, CodeSpec, FailureReport, call_within, fresh_store, plugin_message};

/// A compiled merge operator plugin.
pub struct MergePlugin {
    runtime: Arc<PluginRuntime>,
    info: PluginInfo,
    pre: MergeOperatorPluginPre<HostState>,
}

/// A configured instance, ready for `merge-batch` calls.
struct MergeInstance {
    store: Store<HostState>,
    bindings: MergeOperatorPlugin,
}

impl MergePlugin {
    pub(in crate::plugin) fn new(
        runtime: Arc<PluginRuntime>,
        info: PluginInfo,
        component: &Component,
    ) -> Result<MergePlugin, PluginError> {
        let pre = runtime.instantiate_pre_pure(&info.name, component)?;
        let pre = MergeOperatorPluginPre::new(pre).map_err(|e| load_error(&info.name, e))?;
        Ok(MergePlugin { runtime, info, pre })
    }

    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// A fresh instance that accepted `config`.
    fn instance(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
    ) -> Result<MergeInstance, PluginError> {
        let mut store = fresh_store(&self.runtime, &self.info.name, limits);
        let bindings = call_within(&mut store, limits, |store| self.pre.instantiate(store))?;
        let configured = call_within(&mut store, limits, |store| {
            bindings
                .sleet_compaction_merge_operator()
                .call_configure(store, &config.to_vec())
        })?;
        configured.map_err(|message| PluginError::Config {
            name: self.info.name.clone(),
            message: plugin_message(message),
        })?;
        Ok(MergeInstance { store, bindings })
    }

    /// Instantiates and configures the plugin (`sleet plugin check`).
    pub fn check(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
    ) -> Result<(), PluginError> {
        self.instance(config, limits).map(|_| ())
    }

    /// The operator `database`'s compactor runs. One instance is made
    /// now, so a plugin that rejects its config fails the task at start.
    pub fn operator(
        self: &Arc<Self>,
        spec: &CodeSpec,
        database: &str,
        report: FailureReport,
    ) -> Result<WasmMergeOperator, PluginError> {
        let first = self.instance(&spec.config, &spec.limits)?;
        Ok(WasmMergeOperator {
            plugin: self.clone(),
            config: spec.config.clone(),
            limits: spec.limits.clone(),
            database: database.to_string(),
            report,
            backoff: Backoff::new(),
            idle: Mutex::new(vec![first]),
            keep: idle_instances(),
        })
    }
}

/// Instances kept between calls: one per thread that may call at once.
fn idle_instances() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get())
}

/// SlateDB's merge operator for one database, backed by a pool of
/// configured instances: a call takes one, a trap discards it.
pub struct WasmMergeOperator {
    plugin: Arc<MergePlugin>,
    config: Vec<(String, String)>,
    limits: PluginLimits,
    database: String,
    report: FailureReport,
    backoff: Backoff,
    idle: Mutex<Vec<MergeInstance>>,
    keep: usize,
}

impl WasmMergeOperator {
    fn take(&self) -> Result<MergeInstance, PluginError> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match pooled {
            Some(instance) => Ok(instance),
            None => self.plugin.instance(&self.config, &self.limits),
        }
    }

    fn give_back(&self, instance: MergeInstance) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.keep {
            idle.push(instance);
        }
    }

    /// Reports the failure, backs off, and turns it into SlateDB's error.
    fn fail(&self, why: String) -> MergeOperatorError {
        self.backoff.failed(&why);
        self.fail_fast(why)
    }

    /// Reports a call refused while backing off.
    fn fail_fast(&self, why: String) -> MergeOperatorError {
        let message = format!(
            "merge operator plugin {} failed compacting {}: {why}",
            self.plugin.info.name, self.database
        );
        (self.report)(message.clone());
        MergeOperatorError::Callback { message }
    }

    fn merge_operands(
        &self,
        key: &Bytes,
        existing: Option<Bytes>,
        operands: &[Bytes],
    ) -> Result<Bytes, MergeOperatorError> {
        self.backoff.check().map_err(|why| self.fail_fast(why))?;
        let mut instance = self.take().map_err(|e| self.fail(e.to_string()))?;
        let operands: Vec<Vec<u8>> = operands.iter().map(|o| o.to_vec()).collect();
        let MergeInstance { store, bindings } = &mut instance;
        let result = call_within(store, &self.limits, |store| {
            bindings.sleet_compaction_merge_operator().call_merge_batch(
                store,
                key,
                existing.as_deref(),
                &operands,
            )
        });
        match result {
            Ok(Ok(merged)) => {
                self.give_back(instance);
                self.backoff.succeeded();
                Ok(Bytes::from(merged))
            }
            Ok(Err(message)) => {
                self.give_back(instance);
                Err(self.fail(format!("it returned: {}", plugin_message(message))))
            }
            // The instance trapped or timed out: it is not reused.
            Err(e) => Err(self.fail(e.to_string())),
        }
    }
}

impl MergeOperator for WasmMergeOperator {
    fn merge(
        &self,
        key: &Bytes,
        existing_value: Option<Bytes>,
        value: Bytes,
    ) -> Result<Bytes, MergeOperatorError> {
        self.merge_operands(key, existing_value, std::slice::from_ref(&value))
    }

    fn merge_batch(
        &self,
        key: &Bytes,
        existing_value: Option<Bytes>,
        operands: &[Bytes],
    ) -> Result<Bytes, MergeOperatorError> {
        self.merge_operands(key, existing_value, operands)
    }
}
