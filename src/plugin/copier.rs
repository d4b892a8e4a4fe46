//! Copier plugins: each batch runs in a fresh instance, with handles
//! scoped to the batch's objects, and returns what the plugin reported.
//! `copier::wasm` puts them behind sleet's `Copier` trait.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use wasmtime::component::{Component, HasSelf, Resource};

use super::bindings::copier_world::exports::sleet::plugin::copier::Info;
use super::bindings::copier_world::{CopierPlugin as Bindings, CopierPluginPre};
use super::host::{HostState, Scope};
use super::runtime::{PluginRuntime, load_error};
use super::text::{MAX_MESSAGE, bounded};
use super::{PluginError, PluginInfo, PluginLimits};
use crate::store::StoreRoot;
use crate::store::upload::StreamPolicy;

/// Paths per call when the plugin states no preference.
const DEFAULT_BATCH: usize = 256;
/// Paths per call at most, whatever the plugin asks for.
const MAX_BATCH: usize = 4096;
/// How long a call waits for the aborts of uploads its plugin left open.
const ABORT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a plugin reported for one object of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported {
    /// It says it wrote `size` bytes at the destination.
    Copied { size: u64 },
    /// It says the source has no such object.
    NotFound,
    /// It failed the object, with its (bounded) message.
    Failed(String),
}

/// A compiled copier plugin.
pub struct CopierPlugin {
    runtime: Arc<PluginRuntime>,
    info: PluginInfo,
    pre: CopierPluginPre<HostState>,
}

impl CopierPlugin {
    pub(super) fn new(
        runtime: Arc<PluginRuntime>,
        info: PluginInfo,
        component: &Component,
    ) -> Result<CopierPlugin, PluginError> {
        let pre = runtime.instantiate_pre(&info.name, component, |linker| {
            Bindings::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
        })?;
        let pre = CopierPluginPre::new(pre).map_err(|e| load_error(&info.name, e))?;
        Ok(CopierPlugin { runtime, info, pre })
    }

    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// Instantiates, configures and describes the plugin: what
    /// `sleet plugin check` and task start run to catch bad config early.
    /// Also the most memory the instance held, in bytes.
    pub async fn check(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
    ) -> Result<(Info, u64), PluginError> {
        let name = &self.info.name;
        let _memory = self.runtime.memory_share(limits.memory_bytes).await;
        let mut store = self
            .runtime
            .store(name, limits.memory_bytes, Scope::default());
        let output = store.data().output.clone();
        let call = async {
            let instance = self.pre.instantiate_async(&mut store).await?;
            let copier = instance.sleet_plugin_copier();
            let configured = copier.call_configure(&mut store, &config.to_vec()).await?;
            let info = copier.call_describe(&mut store).await?;
            Ok((configured, info))
        };
        let checked = self
            .runtime
            .with_deadline(name, "describe", limits.call_timeout, &output, call)
            .await?;
        match checked {
            (Err(message), _) => Err(PluginError::Config {
                name: name.clone(),
                message: bounded(&message, MAX_MESSAGE),
            }),
            (Ok(()), info) => Ok((info, store.data().peak_memory())),
        }
    }

    /// Paths per call: what the plugin asked for (`max-batch`), within
    /// the host's bounds.
    pub fn batch_size(max_batch: u32) -> usize {
        match max_batch as usize {
            0 => DEFAULT_BATCH,
            n => n.min(MAX_BATCH),
        }
    }

    /// Runs one batch in a fresh instance: one result per object, in
    /// batch order (what the plugin *says*: the caller checks copies), and
    /// the bytes the plugin wrote through the host.
    pub async fn run_batch(
        &self,
        source: &StoreRoot,
        destination: &StoreRoot,
        objects: &[String],
        config: &[(String, String)],
        limits: &PluginLimits,
        policy: StreamPolicy,
    ) -> Result<(Vec<(String, Reported)>, u64), PluginError> {
        let name = &self.info.name;
        let _memory = self.runtime.memory_share(limits.memory_bytes).await;
        let mut store = self
            .runtime
            .store(name, limits.memory_bytes, Scope::new(objects));
        store.data_mut().stream_policy = policy;
        let bytes_written = store.data().bytes_written.clone();
        let output = store.data().output.clone();
        let src = store.data_mut().push_store(source.clone(), false);
        let dst = store.data_mut().push_store(destination.clone(), true);
        let (src, dst) = match (src, dst) {
            (Ok(src), Ok(dst)) => (src, dst),
            (Err(e), _) | (_, Err(e)) => return Err(super::runtime::call_error(name, e, &output)),
        };
        let paths = objects.to_vec();
        let call = async {
            let instance = self.pre.instantiate_async(&mut store).await?;
            let copier = instance.sleet_plugin_copier();
            if let Err(message) = copier.call_configure(&mut store, &config.to_vec()).await? {
                return Ok(Err(message));
            }
            let src = Resource::new_borrow(src.rep());
            let dst = Resource::new_borrow(dst.rep());
            Ok(Ok(copier.call_copy(&mut store, src, dst, &paths).await?))
        };
        let finished = self
            .runtime
            .with_deadline(name, "copy", limits.call_timeout, &output, call)
            .await;
        // Dropping the store drops the writers a trap or timeout left open;
        // their uploads are aborted before this call counts as done.
        let aborts = store.data().aborts.clone();
        drop(store);
        aborts.wait(ABORT_WAIT).await;
        let results = match finished? {
            Err(message) => {
                return Err(PluginError::Config {
                    name: name.clone(),
                    message: bounded(&message, MAX_MESSAGE),
                });
            }
            Ok(results) => results,
        };
        let outcomes = self.check_results(objects, results)?;
        Ok((outcomes, bytes_written.load(Ordering::Relaxed)))
    }

    /// Exactly one result per batch object, in batch order.
    fn check_results(
        &self,
        objects: &[String],
        results: Vec<super::bindings::copier_world::exports::sleet::plugin::copier::CopyResult>,
    ) -> Result<Vec<(String, Reported)>, PluginError> {
        let protocol = |message: String| PluginError::Protocol {
            name: self.info.name.clone(),
            message,
        };
        if results.len() != objects.len() {
            return Err(protocol(format!(
                "returned {} results for a batch of {} objects",
                results.len(),
                objects.len()
            )));
        }
        let mut by_path = std::collections::BTreeMap::new();
        for result in results {
            by_path.insert(result.path, result.outcome);
        }
        let expected: BTreeSet<&String> = objects.iter().collect();
        if by_path.len() != objects.len() || by_path.keys().any(|p| !expected.contains(p)) {
            return Err(protocol(
                "results do not name each object of the batch exactly once".into(),
            ));
        }
        Ok(objects
            .iter()
            .map(|path| {
                let outcome = match by_path.remove(path).expect("checked above") {
                    Ok(meta) => Reported::Copied { size: meta.size },
                    Err(e) if e.kind == "not-found" => Reported::NotFound,
                    Err(e) => Reported::Failed(format!(
                        "plugin {}: {}: {}",
                        self.info.name,
                        bounded(&e.kind, 32),
                        bounded(&e.message, MAX_MESSAGE)
                    )),
                };
                (path.clone(), outcome)
            })
            .collect())
    }
}
