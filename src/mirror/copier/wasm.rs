//! WebAssembly copier plugins behind the [`Copier`] trait. The plugin host
//! runs each batch and hands back what the plugin reported; this adapter
//! spreads batches over `copy_parallelism` calls and maps the reports to
//! per-object outcomes (which the mirror pass then checks at the
//! destination: a plugin's word is never proof).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{Copier, CopyBatch, CopyError, CopyProgress, CopyReport, ObjectOutcome};
use crate::plugin::PluginLimits;
use crate::plugin::copier::{CopierPlugin, Reported};
use crate::store::upload::StreamPolicy;

/// A copier plugin with its target's config and the operator's limits.
pub struct WasmCopier {
    plugin: Arc<CopierPlugin>,
    config: Vec<(String, String)>,
    limits: PluginLimits,
    parallelism: usize,
    batch_size: usize,
    /// How the host streams the plugin's `copy-to`s.
    policy: StreamPolicy,
}

impl std::fmt::Debug for WasmCopier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmCopier")
            .field("plugin", &self.plugin.info().name)
            .finish()
    }
}

impl WasmCopier {
    /// Runs `plugin` with `config` under `limits`, `parallelism` calls at
    /// once, in batches of what the plugin asked for (`max_batch`).
    pub fn new(
        plugin: Arc<CopierPlugin>,
        config: Vec<(String, String)>,
        limits: PluginLimits,
        parallelism: u32,
        max_batch: u32,
    ) -> Self {
        WasmCopier {
            plugin,
            config,
            limits,
            parallelism: parallelism.max(1) as usize,
            batch_size: CopierPlugin::batch_size(max_batch),
            policy: StreamPolicy::default(),
        }
    }

    pub fn with_policy(self, policy: StreamPolicy) -> Self {
        WasmCopier { policy, ..self }
    }
}

fn outcome(reported: Reported) -> ObjectOutcome {
    match reported {
        Reported::Copied { size } => ObjectOutcome::Copied { bytes: Some(size) },
        Reported::NotFound => ObjectOutcome::Missing,
        Reported::Failed(message) => ObjectOutcome::Failed(message),
    }
}

/// Calls per instance slot a copy aims for: several, so that a slot whose
/// objects happen to be large does not leave the others idle at the end
/// (objects within one call run in sequence).
const CALLS_PER_SLOT: usize = 4;

/// Objects per plugin call: what the plugin asked for at most, but small
/// enough that a copy of `objects` gives each of `parallelism` instance
/// slots [`CALLS_PER_SLOT`] calls.
fn chunk_size(objects: usize, parallelism: usize, max_batch: usize) -> usize {
    objects
        .div_ceil(parallelism.max(1) * CALLS_PER_SLOT)
        .clamp(1, max_batch.max(1))
}

/// What one batch's call returned: the plugin's reports and the bytes.
type BatchResult = Result<(Vec<(String, Reported)>, u64), crate::plugin::PluginError>;
/// A batch's result, with its place in the copy.
type BatchRun = (usize, BatchResult);

#[async_trait]
impl Copier for WasmCopier {
    fn name(&self) -> String {
        format!("plugin:{}", self.plugin.info().name)
    }

    /// Runs the batches as tasks of their own, `parallelism` at once, so
    /// a plugin that streams bytes through itself gets as many cores as
    /// the target allows (one task polling them all would give it one).
    /// Dropping the copy (a cancelled pass) aborts the calls in flight.
    async fn copy(
        &self,
        batch: CopyBatch<'_>,
        progress: &CopyProgress,
        cancel: &CancellationToken,
    ) -> Result<CopyReport, CopyError> {
        let size = chunk_size(batch.objects.len(), self.parallelism, self.batch_size);
        let mut pending = batch
            .objects
            .chunks(size)
            .map(<[String]>::to_vec)
            .enumerate();
        // Each batch's result, in batch order.
        let mut runs: Vec<Option<BatchResult>> = Vec::new();
        let mut in_flight: JoinSet<BatchRun> = JoinSet::new();
        loop {
            while in_flight.len() < self.parallelism
                && let Some((index, objects)) = pending.next()
            {
                runs.push(None);
                in_flight.spawn(self.run_one(&batch, index, objects));
            }
            let joined = tokio::select! {
                biased;
                joined = in_flight.join_next() => joined,
                () = cancel.cancelled() => return Err(CopyError::Cancelled),
            };
            let Some(joined) = joined else { break };
            let (index, ran) = joined.map_err(|e| CopyError::Failed {
                copier: self.name(),
                message: format!("a batch's task ended abnormally: {e}"),
            })?;
            if let Ok((reports, bytes)) = &ran {
                let copied = reports
                    .iter()
                    .filter(|(_, r)| matches!(r, Reported::Copied { .. }))
                    .count();
                progress.record(copied as u64, *bytes);
            }
            runs[index] = Some(ran);
        }
        let mut outcomes = Vec::with_capacity(batch.objects.len());
        for run in runs.into_iter().flatten() {
            let (reports, _) = run.map_err(|e| CopyError::Failed {
                copier: self.name(),
                message: e.to_string(),
            })?;
            outcomes.extend(reports.into_iter().map(|(name, r)| (name, outcome(r))));
        }
        Ok(CopyReport { outcomes })
    }
}

impl WasmCopier {
    /// One batch's call, owning what it needs to run as a task.
    fn run_one(
        &self,
        batch: &CopyBatch<'_>,
        index: usize,
        objects: Vec<String>,
    ) -> impl Future<Output = BatchRun> + Send + 'static {
        let plugin = self.plugin.clone();
        let (source, destination) = (batch.source.clone(), batch.destination.clone());
        let (config, limits, policy) = (self.config.clone(), self.limits.clone(), self.policy);
        async move {
            let ran = plugin
                .run_batch(&source, &destination, &objects, &config, &limits, policy)
                .await;
            (index, ran)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::chunk_size;

    #[test]
    fn batches_spread_over_the_parallelism_within_the_plugins_maximum() {
        assert_eq!(chunk_size(100, 8, 256), 4, "25 calls of at most 4");
        assert_eq!(chunk_size(19, 8, 64), 1, "19 calls of one");
        assert_eq!(
            chunk_size(10_000, 8, 256),
            256,
            "the plugin's maximum holds"
        );
        assert_eq!(
            chunk_size(3, 8, 256),
            1,
            "fewer objects than calls: one each"
        );
        assert_eq!(chunk_size(1000, 8, 256), 32, "four calls per slot");
        assert_eq!(chunk_size(0, 8, 256), 1);
        assert_eq!(
            chunk_size(100, 0, 0),
            1,
            "nonsense limits still make progress"
        );
    }
}
