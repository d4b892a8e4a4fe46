//! Copiers move a mirror's data objects (`wal/` and `compacted/`) from a
//! source root to a destination root. Manifests never go through a
//! copier: the mirror pass commits them itself, in order, create-only.
//!
//! One trait serves every implementation: the built-in streaming copier,
//! rclone, external replication (which only backfills misses), and
//! WebAssembly plugins. A copier gets a batch of root-relative names and
//! reports per object, so a pass can tell an object that vanished at the
//! source (the pass restarts) from one that failed (the pass fails).

pub mod builtin;
pub mod rclone;
pub mod wasm;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::config::{CopierKind, MirrorTargetSettings, PluginLimits};
use crate::plugin::{PluginError, PluginSet, check_pin};
use crate::store::StoreRoot;

/// Names a copier may be handed: data objects only.
pub fn is_data_object(name: &str) -> bool {
    name.starts_with("wal/") || name.starts_with("compacted/")
}

/// A batch of objects to copy, same name on both sides.
#[derive(Debug, Clone, Copy)]
pub struct CopyBatch<'a> {
    pub source: &'a StoreRoot,
    pub destination: &'a StoreRoot,
    /// Root-relative names, each under `wal/` or `compacted/`.
    pub objects: &'a [String],
}

/// What happened to one object of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectOutcome {
    /// Written at the destination; `bytes` when the copier knows.
    Copied {
        bytes: Option<u64>,
    },
    /// The source no longer has it (deleted by GC mid-pass).
    Missing,
    Failed(String),
}

/// Per-object outcomes, in batch order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub outcomes: Vec<(String, ObjectOutcome)>,
}

impl CopyReport {
    /// Bytes copied, as far as the copier reported them.
    pub fn bytes(&self) -> u64 {
        self.outcomes
            .iter()
            .filter_map(|(_, o)| match o {
                ObjectOutcome::Copied { bytes } => *bytes,
                _ => None,
            })
            .sum()
    }

    pub fn copied(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|(_, o)| matches!(o, ObjectOutcome::Copied { .. }))
            .count()
    }
}

/// Why a whole batch failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    #[error("{copier}: {message}")]
    Failed { copier: String, message: String },
    #[error("copy cancelled")]
    Cancelled,
}

/// Running totals a copier bumps as objects land; one-shot commands show
/// them on a terminal.
#[derive(Debug, Default)]
pub struct CopyProgress {
    objects: AtomicU64,
    bytes: AtomicU64,
    /// What the copy expects to move in all (0: not known yet).
    expected_objects: AtomicU64,
    expected_bytes: AtomicU64,
}

impl CopyProgress {
    pub fn new() -> Arc<CopyProgress> {
        Arc::new(CopyProgress::default())
    }

    pub fn record(&self, objects: u64, bytes: u64) {
        self.objects.fetch_add(objects, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `objects` more objects of about `bytes` are to be copied beyond
    /// what is copied so far (a pass that restarts re-plans what is left).
    pub fn expect(&self, objects: u64, bytes: u64) {
        let (done_objects, done_bytes) = self.totals();
        self.expected_objects
            .store(done_objects + objects, Ordering::Relaxed);
        self.expected_bytes
            .store(done_bytes + bytes, Ordering::Relaxed);
    }

    /// `(objects, bytes)` expected in all, `(0, 0)` before anything is planned.
    pub fn expected(&self) -> (u64, u64) {
        (
            self.expected_objects.load(Ordering::Relaxed),
            self.expected_bytes.load(Ordering::Relaxed),
        )
    }

    /// `(objects, bytes)` so far.
    pub fn totals(&self) -> (u64, u64) {
        (
            self.objects.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// Moves data objects between roots.
#[async_trait]
pub trait Copier: Send + Sync + std::fmt::Debug {
    /// How config and messages name it: `builtin`, `rclone`, `plugin:<name>`.
    fn name(&self) -> String;

    /// Whether every write this copier reports was made by sleet's own
    /// code, which saw the store accept it: only then is its report proof.
    /// Every other copier's copies are checked at the destination (name,
    /// size, content hash where comparable) before a pass commits.
    fn host_writes(&self) -> bool {
        false
    }

    /// Whether something outside sleet already replicates data objects,
    /// so the pass should probe the destination and copy only misses.
    fn replicated_elsewhere(&self) -> bool {
        false
    }

    /// Copies every object of the batch, overwriting at the destination.
    /// Stops early with [`CopyError::Cancelled`] once `cancel` fires.
    async fn copy(
        &self,
        batch: CopyBatch<'_>,
        progress: &CopyProgress,
        cancel: &CancellationToken,
    ) -> Result<CopyReport, CopyError>;
}

/// Node-wide copier options from the command line.
#[derive(Debug, Clone, Default)]
pub struct CopierOptions {
    /// The rclone binary (`--rclone`); `rclone` on PATH when unset.
    pub rclone: Option<std::path::PathBuf>,
    /// Plugins loaded from `--plugin-dir`, for `copier = "plugin:<name>"`.
    pub plugins: Option<Arc<PluginSet>>,
    /// This node's id, for messages about plugins it lacks.
    pub node_id: String,
}

/// The copier a target's settings name. A plugin copier is checked first:
/// its file must match any pinned sha256 and its `configure` must accept
/// the target's `copier_config`.
pub async fn for_target(
    settings: &MirrorTargetSettings,
    limits: &PluginLimits,
    options: &CopierOptions,
) -> Result<Arc<dyn Copier>, PluginError> {
    let parallelism = settings.copy_parallelism;
    let builtin = || builtin::BuiltinCopier::new(parallelism).with_policy(settings.stream);
    Ok(match &settings.copier {
        CopierKind::Builtin => Arc::new(builtin()),
        CopierKind::Rclone => Arc::new(rclone::RcloneCopier::new(options.rclone.clone())),
        CopierKind::External => Arc::new(builtin::ExternalCopier::new(builtin())),
        CopierKind::Plugin(name) => {
            let plugins = PluginSet::required(options.plugins.as_deref(), name, &options.node_id)?;
            let plugin = plugins.copier(name, &options.node_id)?;
            check_pin(plugin.info(), limits.sha256.as_deref())?;
            let (info, _) = plugin.check(&settings.copier_config, limits).await?;
            Arc::new(
                wasm::WasmCopier::new(
                    plugin.clone(),
                    settings.copier_config.clone(),
                    limits.clone(),
                    parallelism,
                    info.max_batch,
                )
                .with_policy(settings.stream),
            )
        }
    })
}
