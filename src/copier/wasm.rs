//! WebAssembly copier plugins behind the [`Copier`] trait. The plugin host
//! runs each batch and hands back what the plugin reported; this adapter
//! spreads batches over `copy_parallelism` calls and maps the reports to
//! per-object outcomes (which the mirror pass then checks at the
//! destination: a plugin's word is never proof).

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{Copier, CopyBatch, CopyError, CopyProgress, CopyReport, ObjectOutcome};
use crate::plugin::PluginLimits;
use crate::plugin::copier::{CopierPlugin, Reported};

/// A copier plugin with its target's config and the operator's limits.
pub struct WasmCopier {
    plugin: Arc<CopierPlugin>,
    config: Vec<(String, String)>,
    limits: PluginLimits,
    parallelism: usize,
    batch_size: usize,
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
        }
    }
}

fn outcome(reported: Reported) -> ObjectOutcome {
    match reported {
        Reported::Copied { size } => ObjectOutcome::Copied { bytes: Some(size) },
        Reported::NotFound => ObjectOutcome::Missing,
        Reported::Failed(message) => ObjectOutcome::Failed(message),
    }
}

#[async_trait]
impl Copier for WasmCopier {
    fn name(&self) -> String {
        format!("plugin:{}", self.plugin.info().name)
    }

    async fn copy(
        &self,
        batch: CopyBatch<'_>,
        progress: &CopyProgress,
        cancel: &CancellationToken,
    ) -> Result<CopyReport, CopyError> {
        let chunks: Vec<Vec<String>> = batch
            .objects
            .chunks(self.batch_size)
            .map(<[String]>::to_vec)
            .collect();
        let runs = futures::stream::iter(chunks)
            .map(|objects: Vec<String>| async move {
                let ran = self
                    .plugin
                    .run_batch(
                        batch.source,
                        batch.destination,
                        &objects,
                        &self.config,
                        &self.limits,
                    )
                    .await;
                if let Ok((reports, bytes)) = &ran {
                    let copied = reports
                        .iter()
                        .filter(|(_, r)| matches!(r, Reported::Copied { .. }))
                        .count();
                    progress.record(copied as u64, *bytes);
                }
                ran
            })
            .buffered(self.parallelism)
            .collect::<Vec<_>>();
        let runs = tokio::select! {
            runs = runs => runs,
            () = cancel.cancelled() => return Err(CopyError::Cancelled),
        };
        let mut outcomes = Vec::with_capacity(batch.objects.len());
        for run in runs {
            let (reports, _) = run.map_err(|e| CopyError::Failed {
                copier: self.name(),
                message: e.to_string(),
            })?;
            outcomes.extend(reports.into_iter().map(|(name, r)| (name, outcome(r))));
        }
        Ok(CopyReport { outcomes })
    }
}
