//! Compaction filter plugins: SlateDB's `CompactionFilterSupplier` over a
//! component, one configured instance per compaction job.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use slatedb::{
    CompactionFilter, CompactionFilterDecision, CompactionFilterError, CompactionFilterSupplier,
    CompactionJobContext, RowEntry, ValueDeletable,
};
use wasmtime::Store;
use wasmtime::component::InstancePre;

use super::super::bindings::filter_world::exports::sleet::compaction::compaction_filter::{
    Decision, Entry, Job, Value,
};
use super::super::bindings::filter_world::{CompactionFilterPlugin, CompactionFilterPluginPre};
use super::super::host::HostState;
use super::super::{PluginError, PluginLimits};
use super::{
    CodeSpec, CompiledPlugin, FailureReport, Failures, Instance, World, call_within, plugin_message,
};

/// A compiled compaction filter plugin.
pub type FilterPlugin = CompiledPlugin<FilterWorld>;

type FilterInstance = Instance<CompactionFilterPlugin>;

/// The `compaction-filter-plugin` world.
pub struct FilterWorld;

impl World for FilterWorld {
    type Pre = CompactionFilterPluginPre<HostState>;
    type Bindings = CompactionFilterPlugin;

    fn prepare(pre: InstancePre<HostState>) -> wasmtime::Result<Self::Pre> {
        CompactionFilterPluginPre::new(pre)
    }

    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<CompactionFilterPlugin> {
        pre.instantiate(store)
    }

    fn configure(
        bindings: &CompactionFilterPlugin,
        store: &mut Store<HostState>,
        config: &Vec<(String, String)>,
    ) -> wasmtime::Result<Result<(), String>> {
        bindings
            .sleet_compaction_compaction_filter()
            .call_configure(store, config)
    }
}

impl FilterPlugin {
    /// The supplier `database`'s compactor runs. One instance is made
    /// now, so a plugin that rejects its config fails the task at start.
    pub fn supplier(
        self: &Arc<Self>,
        spec: &CodeSpec,
        database: &str,
        report: FailureReport,
    ) -> Result<WasmFilterSupplier, PluginError> {
        self.check(&spec.config, &spec.limits)?;
        Ok(WasmFilterSupplier {
            plugin: self.clone(),
            spec: spec.clone(),
            failures: Failures::new("compaction filter", &self.info.name, database, report),
        })
    }
}

/// Makes a filter instance for each compaction job of one database.
pub struct WasmFilterSupplier {
    plugin: Arc<FilterPlugin>,
    spec: CodeSpec,
    failures: Failures,
}

#[async_trait]
impl CompactionFilterSupplier for WasmFilterSupplier {
    async fn create_compaction_filter(
        &self,
        context: &CompactionJobContext,
    ) -> Result<Box<dyn CompactionFilter>, CompactionFilterError> {
        let failures = self.failures.clone();
        if let Err(why) = failures.backoff.check() {
            return Err(CompactionFilterError::CreationError(
                failures.fail_fast(why).into(),
            ));
        }
        let limits = &self.spec.limits;
        let memory = self.plugin.runtime.memory_share(limits.memory_bytes).await;
        let mut instance = self
            .plugin
            .instance(&self.spec.config, limits)
            .map_err(|e| CompactionFilterError::CreationError(failures.fail(e).into()))?;
        let job = job_of(context);
        let FilterInstance { store, bindings } = &mut instance;
        let started = call_within(store, limits, |store| {
            bindings
                .sleet_compaction_compaction_filter()
                .call_start_job(store, job)
        });
        let started = match started {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(format!("start-job returned: {}", plugin_message(message))),
            Err(e) => Err(e.to_string()),
        };
        started.map_err(|why| CompactionFilterError::CreationError(failures.fail(why).into()))?;
        Ok(Box::new(WasmFilter {
            instance: Mutex::new(instance),
            limits: limits.clone(),
            failures,
            _memory: memory,
        }))
    }
}

/// The job as the plugin sees it.
fn job_of(context: &CompactionJobContext) -> Job {
    Job {
        destination: context.destination,
        is_dest_last_run: context.is_dest_last_run,
        now_ms: context.compaction_clock_tick,
        retention_min_seq: context.retention_min_seq,
    }
}

/// A filter for one compaction job. The mutex only makes the instance
/// `Sync` as SlateDB asks; one job calls it from one task.
struct WasmFilter {
    instance: Mutex<FilterInstance>,
    limits: PluginLimits,
    failures: Failures,
    /// This job's share of the node's plugin memory.
    _memory: tokio::sync::OwnedSemaphorePermit,
}

impl WasmFilter {
    fn decide(&self, entry: &RowEntry) -> Result<CompactionFilterDecision, String> {
        let mut instance = self.instance.lock().unwrap_or_else(|e| e.into_inner());
        let FilterInstance { store, bindings } = &mut *instance;
        let entry = entry_of(entry);
        let decision = call_within(store, &self.limits, |store| {
            bindings
                .sleet_compaction_compaction_filter()
                .call_filter(store, &entry)
        })
        .map_err(|e| e.to_string())?
        .map_err(|message| format!("filter returned: {}", plugin_message(message)))?;
        Ok(decision_of(decision, &entry.value))
    }

    fn end(&self) -> Result<(), String> {
        let mut instance = self.instance.lock().unwrap_or_else(|e| e.into_inner());
        let FilterInstance { store, bindings } = &mut *instance;
        call_within(store, &self.limits, |store| {
            bindings
                .sleet_compaction_compaction_filter()
                .call_end_job(store)
        })
        .map_err(|e| e.to_string())?
        .map_err(|message| format!("end-job returned: {}", plugin_message(message)))
    }
}

#[async_trait]
impl CompactionFilter for WasmFilter {
    async fn filter(
        &mut self,
        entry: &RowEntry,
    ) -> Result<CompactionFilterDecision, CompactionFilterError> {
        self.decide(entry)
            .map_err(|why| CompactionFilterError::FilterError(self.failures.fail(why).into()))
    }

    async fn on_compaction_end(&mut self) -> Result<(), CompactionFilterError> {
        self.end().map_err(|why| {
            CompactionFilterError::CompactionEndError(self.failures.fail(why).into())
        })?;
        self.failures.backoff.succeeded();
        Ok(())
    }
}

/// An entry as the plugin sees it.
fn entry_of(entry: &RowEntry) -> Entry {
    Entry {
        key: entry.key.to_vec(),
        value: match &entry.value {
            ValueDeletable::Value(v) => Value::Put(v.to_vec()),
            ValueDeletable::Merge(v) => Value::Merge(v.to_vec()),
            ValueDeletable::Tombstone => Value::Tombstone,
        },
        seq: entry.seq,
        create_ts: entry.create_ts,
        expire_ts: entry.expire_ts,
    }
}

/// The plugin's decision as SlateDB's: a changed value keeps its kind
/// (a merge operand stays an operand; a tombstone given a value becomes
/// a plain value).
fn decision_of(decision: Decision, original: &Value) -> CompactionFilterDecision {
    match decision {
        Decision::Keep => CompactionFilterDecision::Keep,
        Decision::Drop => CompactionFilterDecision::Drop,
        Decision::Tombstone => CompactionFilterDecision::Modify(ValueDeletable::Tombstone),
        Decision::ChangeValue(bytes) => {
            let bytes = Bytes::from(bytes);
            CompactionFilterDecision::Modify(match original {
                Value::Merge(_) => ValueDeletable::Merge(bytes),
                Value::Put(_) | Value::Tombstone => ValueDeletable::Value(bytes),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_value_keeps_the_kind_of_entry_it_replaces() {
        let merged = decision_of(
            Decision::ChangeValue(b"x".to_vec()),
            &Value::Merge(b"a".to_vec()),
        );
        assert_eq!(
            merged,
            CompactionFilterDecision::Modify(ValueDeletable::Merge(Bytes::from_static(b"x")))
        );
        let put = decision_of(Decision::ChangeValue(b"x".to_vec()), &Value::Tombstone);
        assert_eq!(
            put,
            CompactionFilterDecision::Modify(ValueDeletable::Value(Bytes::from_static(b"x")))
        );
        assert_eq!(
            decision_of(Decision::Tombstone, &Value::Put(b"a".to_vec())),
            CompactionFilterDecision::Modify(ValueDeletable::Tombstone)
        );
        assert_eq!(
            decision_of(Decision::Drop, &Value::Put(b"a".to_vec())),
            CompactionFilterDecision::Drop
        );
    }
}
