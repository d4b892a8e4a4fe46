//! Settings with defaults applied: the layers of overrides folded, last
//! writer wins, into what the services run with.

use std::collections::BTreeMap;
use std::time::Duration;

use super::files::*;
use super::sections::{
    CompressionCodec, ConfigValue, CopierKind, HookOverrides, MirrorMode, flatten_config,
};
use crate::model::duration::HumanDuration;
use crate::model::placement::PlacementHash;
use crate::model::policy::StreamPolicy;
use crate::model::service::Service;

/// `[node]` with defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeSettings {
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    pub config_poll: Duration,
    pub placement_hash: PlacementHash,
}

/// `[stores]` with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    pub recheck_after: Duration,
    /// Store id to the operator's reason.
    pub trusted: BTreeMap<String, String>,
}

impl StoresConfig {
    pub fn resolve(&self) -> StoreSettings {
        StoreSettings {
            recheck_after: duration_or(self.recheck_after, defaults::STORE_RECHECK_AFTER),
            trusted: self.trusted.clone(),
        }
    }
}

/// Everything the services of one database run with.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseSettings {
    pub services: Vec<Service>,
    pub gc: GcSettings,
    pub coordinator: CoordinatorSettings,
    pub workers: WorkerSettings,
    pub outside_compactor: OutsideCompactorSettings,
    pub idle: crate::model::policy::IdleSettings,
    /// Every target by name, disabled ones included.
    pub mirror_targets: BTreeMap<String, MirrorTargetSettings>,
    /// Enabled hooks by name.
    pub hooks: BTreeMap<String, HookSettings>,
    /// The merge operator and compaction filter the compactor runs.
    pub compaction_code: CompactionCodeSettings,
}

/// The application code a database's compaction runs, by plugin name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionCodeSettings {
    pub merge_operator: Option<CodeSettings>,
    pub compaction_filter: Option<CodeSettings>,
}

impl CompactionCodeSettings {
    /// Each configured role: its setting's name, the kind of plugin it
    /// takes, and the plugin with its config.
    pub fn roles(&self) -> impl Iterator<Item = (&'static str, PluginKind, &CodeSettings)> {
        [
            (
                "merge_operator",
                PluginKind::MergeOperator,
                &self.merge_operator,
            ),
            (
                "compaction_filter",
                PluginKind::CompactionFilter,
                &self.compaction_filter,
            ),
        ]
        .into_iter()
        .filter_map(|(role, kind, code)| code.as_ref().map(|code| (role, kind, code)))
    }
}

/// One compaction plugin and the config it is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSettings {
    pub plugin: String,
    pub config: Vec<(String, String)>,
}

impl CodeSettings {
    fn from_layers(
        choice: Option<&CodeChoice>,
        config: &BTreeMap<String, ConfigValue>,
    ) -> Option<CodeSettings> {
        Some(CodeSettings {
            plugin: choice?.plugin()?.to_string(),
            config: flatten_config(config),
        })
    }
}

/// One enabled hook of a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSettings {
    pub plugin: String,
    /// `None`: every service.
    pub services: Option<Vec<Service>>,
    pub config: Vec<(String, String)>,
}

impl HookSettings {
    /// Whether the hook fires for runs of `service`.
    pub fn applies_to(&self, service: Service) -> bool {
        self.services.as_ref().is_none_or(|s| s.contains(&service))
    }
}

pub use crate::model::policy::{PluginKind, PluginLimits};

#[derive(Debug, Clone, PartialEq)]
pub struct GcSettings {
    /// `None`: decided by what the database's store supports.
    pub boundary_files: Option<bool>,
    pub manifest: GcDirectory,
    pub wal: GcDirectory,
    pub wal_fence: GcDirectory,
    pub compacted: GcDirectory,
    pub compactions: GcDirectory,
    pub detach: GcDetach,
}

impl GcSettings {
    /// The directories GC deletes from (a dry run deletes nothing).
    fn deleting_directories(&self) -> impl Iterator<Item = &GcDirectory> {
        [
            &self.manifest,
            &self.wal,
            &self.wal_fence,
            &self.compacted,
            &self.compactions,
        ]
        .into_iter()
        .filter(|d| d.enabled && !d.dry_run)
    }

    /// How long after a database's last change GC may still have garbage
    /// of it to collect: the longest `min_age` plus that directory's
    /// interval.
    pub fn linger(&self) -> Duration {
        self.deleting_directories()
            .map(|d| d.min_age + d.interval)
            .max()
            .unwrap_or_default()
    }

    /// The shortest `min_age` of a collected directory.
    pub fn shortest_min_age(&self) -> Duration {
        self.deleting_directories()
            .map(|d| d.min_age)
            .min()
            .unwrap_or(Duration::MAX)
    }

    /// Whether SlateDB's GC boundary files are on: `boundary_files` when
    /// set, else whether the database's store can update objects in place.
    pub fn boundary_files_for(&self, store_updates_in_place: bool) -> bool {
        self.boundary_files.unwrap_or(store_updates_in_place)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcDirectory {
    pub enabled: bool,
    pub interval: Duration,
    pub min_age: Duration,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcDetach {
    pub enabled: bool,
    pub interval: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorSettings {
    pub poll_interval: Duration,
    pub manifest_update_timeout: Duration,
    pub max_concurrent_compactions: u32,
    pub commit_compacted_interval: Duration,
    pub worker_heartbeat_timeout: Duration,
    pub checkpoint_lifetime: Duration,
    pub min_compaction_sources: u32,
    pub max_compaction_sources: u32,
    pub include_size_threshold: f32,
}

/// `[outside-compactor]` with defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutsideCompactorSettings {
    pub enabled: bool,
    pub recheck: Duration,
    pub active_within: Duration,
    pub takeover_backlog: u32,
    pub takeover_after: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSettings {
    pub count: u32,
    pub max_concurrent_compactions: u32,
    pub compactions_poll_interval: Duration,
    pub heartbeat_interval: Duration,
    pub max_sst_size: u64,
    pub max_fetch_tasks: u32,
    pub bytes_to_fetch: u64,
    pub max_subcompactions: u32,
    pub min_filter_keys: u32,
    pub compression_codec: Option<CompressionCodec>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorTargetSettings {
    pub url: Option<String>,
    pub source_prefix: Option<String>,
    pub disabled: bool,
    pub mode: MirrorMode,
    pub copier: CopierKind,
    pub poll: Duration,
    pub interval: Duration,
    pub min_age: Duration,
    pub checkpoint_lifetime: Duration,
    pub deep_check: Duration,
    pub copy_parallelism: u32,
    /// How objects stream when no server-side copy is possible.
    pub stream: StreamPolicy,
    pub retention_keep: Option<Duration>,
    /// `copier_config`, flattened for a plugin's `configure`.
    pub copier_config: Vec<(String, String)>,
}

/// Built-in defaults, one place for the docs and the code to agree on.
pub mod defaults {
    use std::time::Duration;

    pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
    pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const CONFIG_POLL: Duration = Duration::from_secs(60);
    pub const STORE_RECHECK_AFTER: Duration = Duration::from_secs(24 * 3600);

    pub const GC_INTERVAL: Duration = Duration::from_secs(60);
    pub const GC_MIN_AGE: Duration = Duration::from_secs(300);
    pub const GC_DETACH_INTERVAL: Duration = Duration::from_secs(60);

    pub const COORDINATOR_POLL: Duration = Duration::from_secs(5);
    pub const MANIFEST_UPDATE_TIMEOUT: Duration = Duration::from_secs(300);
    pub const COORDINATOR_MAX_CONCURRENT: u32 = 4;
    pub const COMMIT_COMPACTED_INTERVAL: Duration = Duration::from_secs(1);
    pub const WORKER_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const COORDINATOR_CHECKPOINT_LIFETIME: Duration = Duration::from_secs(15 * 60);
    pub const MIN_COMPACTION_SOURCES: u32 = 4;
    pub const MAX_COMPACTION_SOURCES: u32 = 8;
    pub const INCLUDE_SIZE_THRESHOLD: f32 = 4.0;

    pub const WORKER_COUNT: u32 = 1;
    pub const WORKER_MAX_CONCURRENT: u32 = 4;
    pub const WORKER_POLL: Duration = Duration::from_secs(5);
    pub const WORKER_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
    pub const MAX_SST_SIZE: u64 = 256 * 1024 * 1024;
    pub const MAX_FETCH_TASKS: u32 = 4;
    pub const BYTES_TO_FETCH: u64 = 2 * 1024 * 1024;
    pub const MAX_SUBCOMPACTIONS: u32 = 4;
    pub const MIN_FILTER_KEYS: u32 = 1000;

    pub const OUTSIDE_RECHECK: Duration = Duration::from_secs(60);
    pub const OUTSIDE_ACTIVE_WITHIN: Duration = Duration::from_secs(120);
    pub const OUTSIDE_TAKEOVER_BACKLOG: u32 = 8;
    pub const OUTSIDE_TAKEOVER_AFTER: Duration = Duration::from_secs(120);

    pub const MIRROR_POLL: Duration = Duration::from_secs(10);
    pub const MIRROR_INTERVAL: Duration = Duration::from_secs(24 * 3600);
    pub const EVENTS_SAFETY_INTERVAL: Duration = Duration::from_secs(600);
    pub const EVENTS_RELAY_INTERVAL: Duration = Duration::from_secs(1);
    pub const MIRROR_MIN_AGE: Duration = Duration::from_secs(300);
    pub const MIRROR_DEEP_CHECK: Duration = Duration::from_secs(3600);
    pub const CHECKPOINT_LIFETIME: Duration = Duration::from_secs(15 * 60);
    pub const COPY_PARALLELISM: u32 = 8;
    pub const MULTIPART_THRESHOLD_MIB: u32 =
        crate::model::policy::StreamPolicy::DEFAULT_MULTIPART_THRESHOLD_MIB;
    pub const PLUGIN_MEMORY_MIB: u32 = 64;
    pub const COPY_CALL_TIMEOUT: Duration = Duration::from_secs(600);
    pub const HOOK_CALL_TIMEOUT: Duration = Duration::from_secs(5);
    /// Per merge batch or filtered entry: microseconds of honest work, so
    /// a looping plugin holds a compactor thread for at most this.
    pub const COMPACTION_CALL_TIMEOUT: Duration = Duration::from_secs(1);
}

impl DatabaseConfig {
    /// This layer with `upper` laid over it, field by field.
    pub fn overlaid(&self, upper: &DatabaseConfig) -> DatabaseConfig {
        let mut merged = self.clone();
        if upper.services.is_some() {
            merged.services = upper.services.clone();
        }
        merged.gc.overlay(&upper.gc);
        merged
            .compactor_coordinator
            .overlay(&upper.compactor_coordinator);
        merged.compaction_workers.overlay(&upper.compaction_workers);
        merged.outside_compactor.overlay(&upper.outside_compactor);
        merged.idle.overlay(&upper.idle);
        for (name, target) in &upper.mirror.targets {
            merged
                .mirror
                .targets
                .entry(name.clone())
                .or_default()
                .overlay(target);
        }
        for (name, hook) in &upper.hooks {
            merged.hooks.entry(name.clone()).or_default().overlay(hook);
        }
        overlay_fields!(merged, upper; merge_operator, compaction_filter);
        merged
            .merge_operator_config
            .extend(upper.merge_operator_config.clone());
        merged
            .compaction_filter_config
            .extend(upper.compaction_filter_config.clone());
        merged
    }

    /// Built-in defaults filled in for every field this layer leaves unset.
    pub fn resolve(&self) -> DatabaseSettings {
        DatabaseSettings {
            services: self
                .services
                .clone()
                .unwrap_or_else(|| Service::ALL.to_vec()),
            gc: self.gc.resolve(),
            coordinator: self.compactor_coordinator.resolve(),
            workers: self.compaction_workers.resolve(),
            outside_compactor: self.outside_compactor.resolve(),
            idle: self.idle.resolve(),
            mirror_targets: self
                .mirror
                .targets
                .iter()
                .map(|(name, target)| (name.clone(), target.resolve()))
                .collect(),
            hooks: self
                .hooks
                .iter()
                .filter_map(|(name, hook)| Some((name.clone(), hook.resolve()?)))
                .collect(),
            compaction_code: CompactionCodeSettings {
                merge_operator: CodeSettings::from_layers(
                    self.merge_operator.as_ref(),
                    &self.merge_operator_config,
                ),
                compaction_filter: CodeSettings::from_layers(
                    self.compaction_filter.as_ref(),
                    &self.compaction_filter_config,
                ),
            },
        }
    }
}

impl HookOverrides {
    fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper; plugin, services, disabled);
        self.config
            .extend(upper.config.iter().map(|(k, v)| (k.clone(), v.clone())));
    }

    /// `None` when disabled (or, before validation, without a plugin).
    fn resolve(&self) -> Option<HookSettings> {
        if self.disabled.unwrap_or(false) {
            return None;
        }
        Some(HookSettings {
            plugin: self.plugin.clone()?,
            services: self.services.clone(),
            config: flatten_config(&self.config),
        })
    }
}

impl FleetConfig {
    /// The limits a node enforces on `plugin`, used as a `kind` plugin
    /// (which sets the default call timeout).
    pub fn plugin_limits(&self, plugin: &str, kind: PluginKind) -> PluginLimits {
        let grants = self.plugins.get(plugin).cloned().unwrap_or_default();
        let default_timeout = match kind {
            PluginKind::Copier => defaults::COPY_CALL_TIMEOUT,
            PluginKind::Hook => defaults::HOOK_CALL_TIMEOUT,
            PluginKind::MergeOperator | PluginKind::CompactionFilter => {
                defaults::COMPACTION_CALL_TIMEOUT
            }
        };
        PluginLimits {
            sha256: grants.sha256.map(|s| s.to_ascii_lowercase()),
            memory_bytes: u64::from(grants.memory_mib.unwrap_or(defaults::PLUGIN_MEMORY_MIB)) << 20,
            call_timeout: duration_or(grants.call_timeout, default_timeout),
        }
    }
}

impl FleetConfig {
    /// The settings of a database whose registry file holds `file`.
    pub fn resolve_database(&self, file: &DatabaseConfig) -> DatabaseSettings {
        self.database.overlaid(file).resolve()
    }
}

impl FleetConfig {
    /// The sha256 pins of `[plugins.<name>]`, by plugin name.
    pub fn plugin_pins(&self) -> BTreeMap<String, String> {
        self.plugins
            .iter()
            .filter_map(|(name, grants)| Some((name.clone(), grants.sha256.clone()?)))
            .collect()
    }
}

pub(super) fn duration_or(value: Option<HumanDuration>, default: Duration) -> Duration {
    value.map_or(default, |d| d.0)
}
