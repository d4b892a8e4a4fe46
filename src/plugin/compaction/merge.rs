//! Merge operator plugins: SlateDB's `MergeOperator` over a component.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use slatedb::{MergeOperator, MergeOperatorError};
use wasmtime::Store;
use wasmtime::component::InstancePre;

use super::super::bindings::merge_world::{MergeOperatorPlugin, MergeOperatorPluginPre};
use super::super::host::HostState;
use super::super::{PluginError, PluginLimits};
use super::{
    CodeSpec, CompiledPlugin, FailureReport, Failures, Instance, World, call_within, plugin_message,
};

/// A compiled merge operator plugin.
pub type MergePlugin = CompiledPlugin<MergeWorld>;

type MergeInstance = Instance<MergeOperatorPlugin>;

/// The `merge-operator-plugin` world.
pub struct MergeWorld;

impl World for MergeWorld {
    type Pre = MergeOperatorPluginPre<HostState>;
    type Bindings = MergeOperatorPlugin;

    fn prepare(pre: InstancePre<HostState>) -> wasmtime::Result<Self::Pre> {
        MergeOperatorPluginPre::new(pre)
    }

    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<MergeOperatorPlugin> {
        pre.instantiate(store)
    }

    fn configure(
        bindings: &MergeOperatorPlugin,
        store: &mut Store<HostState>,
        config: &Vec<(String, String)>,
    ) -> wasmtime::Result<Result<(), String>> {
        bindings
            .sleet_compaction_merge_operator()
            .call_configure(store, config)
    }
}

impl MergePlugin {
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
            failures: Failures::new("merge operator", &self.info.name, database, report),
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
    failures: Failures,
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
        let message = self.failures.fail(why);
        MergeOperatorError::Callback { message }
    }

    fn merge_operands(
        &self,
        key: &Bytes,
        existing: Option<Bytes>,
        operands: &[Bytes],
    ) -> Result<Bytes, MergeOperatorError> {
        let backing_off = self.failures.backoff.check();
        backing_off.map_err(|why| MergeOperatorError::Callback {
            message: self.failures.fail_fast(why),
        })?;
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
                self.failures.backoff.succeeded();
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
