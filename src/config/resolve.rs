//! Settings with defaults applied: the layers of overrides folded, last
//! writer wins, into what the services run with.

use std::collections::BTreeMap;
use std::time::Duration;

use super::files::*;
use crate::model::duration::HumanDuration;
use crate::model::placement::PlacementHash;
use crate::model::policy::{EventsSettings, StreamPolicy};
use crate::model::service::Service;

/// Copies every field of `$upper` that is set onto `$lower`.
macro_rules! overlay_fields {
    ($lower:expr, $upper:expr; $($field:ident),+ $(,)?) => {
        $( if $upper.$field.is_some() { $lower.$field = $upper.$field.clone(); } )+
    };
}

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

fn duration_or(value: Option<HumanDuration>, default: Duration) -> Duration {
    value.map_or(default, |d| d.0)
}

impl EventsConfig {
    /// The event source's settings; `None` when no source is set (or it
    /// has no queue, which `config check` reports).
    pub fn resolve(&self) -> Option<EventsSettings> {
        match self.source? {
            EventSourceKind::None => None,
            EventSourceKind::Sqs => Some(EventsSettings {
                queue_url: self.queue_url.clone()?,
                safety_interval: duration_or(
                    self.safety_interval,
                    defaults::EVENTS_SAFETY_INTERVAL,
                ),
                relay_interval: duration_or(self.relay_interval, defaults::EVENTS_RELAY_INTERVAL),
            }),
        }
    }
}

impl NodeOverrides {
    pub fn resolve(&self) -> NodeSettings {
        NodeSettings {
            heartbeat_interval: duration_or(self.heartbeat_interval, defaults::HEARTBEAT_INTERVAL),
            heartbeat_timeout: duration_or(self.heartbeat_timeout, defaults::HEARTBEAT_TIMEOUT),
            config_poll: duration_or(self.config_poll, defaults::CONFIG_POLL),
            placement_hash: self.placement_hash.unwrap_or_default(),
        }
    }
}

impl GcDirectoryOverrides {
    fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper; enabled, interval, min_age, dry_run);
    }

    fn resolve(&self, default_dry_run: bool) -> GcDirectory {
        GcDirectory {
            enabled: self.enabled.unwrap_or(true),
            interval: duration_or(self.interval, defaults::GC_INTERVAL),
            min_age: duration_or(self.min_age, defaults::GC_MIN_AGE),
            dry_run: self.dry_run.unwrap_or(default_dry_run),
        }
    }
}

impl GcOverrides {
    /// The directory tables with their names, for validation messages.
    pub(super) fn directories(&self) -> [(&'static str, &GcDirectoryOverrides); 5] {
        [
            ("manifest", &self.manifest),
            ("wal", &self.wal),
            ("wal_fence", &self.wal_fence),
            ("compacted", &self.compacted),
            ("compactions", &self.compactions),
        ]
    }

    fn overlay(&mut self, upper: &Self) {
        self.manifest.overlay(&upper.manifest);
        self.wal.overlay(&upper.wal);
        self.wal_fence.overlay(&upper.wal_fence);
        self.compacted.overlay(&upper.compacted);
        self.compactions.overlay(&upper.compactions);
        overlay_fields!(self, upper; boundary_files);
        overlay_fields!(self.detach, upper.detach; enabled, interval);
    }

    fn resolve(&self) -> GcSettings {
        GcSettings {
            boundary_files: self.boundary_files,
            manifest: self.manifest.resolve(false),
            wal: self.wal.resolve(false),
            wal_fence: self.wal_fence.resolve(true),
            compacted: self.compacted.resolve(false),
            compactions: self.compactions.resolve(false),
            detach: GcDetach {
                enabled: self.detach.enabled.unwrap_or(true),
                interval: duration_or(self.detach.interval, defaults::GC_DETACH_INTERVAL),
            },
        }
    }
}

impl CoordinatorOverrides {
    fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper;
            poll_interval, manifest_update_timeout, max_concurrent_compactions,
            commit_compacted_interval, worker_heartbeat_timeout, checkpoint_lifetime);
        overlay_fields!(self.scheduler, upper.scheduler;
            min_compaction_sources, max_compaction_sources, include_size_threshold);
    }

    pub(super) fn resolve(&self) -> CoordinatorSettings {
        let s = &self.scheduler;
        CoordinatorSettings {
            poll_interval: duration_or(self.poll_interval, defaults::COORDINATOR_POLL),
            manifest_update_timeout: duration_or(
                self.manifest_update_timeout,
                defaults::MANIFEST_UPDATE_TIMEOUT,
            ),
            max_concurrent_compactions: self
                .max_concurrent_compactions
                .unwrap_or(defaults::COORDINATOR_MAX_CONCURRENT),
            commit_compacted_interval: duration_or(
                self.commit_compacted_interval,
                defaults::COMMIT_COMPACTED_INTERVAL,
            ),
            worker_heartbeat_timeout: duration_or(
                self.worker_heartbeat_timeout,
                defaults::WORKER_HEARTBEAT_TIMEOUT,
            ),
            checkpoint_lifetime: duration_or(
                self.checkpoint_lifetime,
                defaults::COORDINATOR_CHECKPOINT_LIFETIME,
            ),
            min_compaction_sources: s
                .min_compaction_sources
                .unwrap_or(defaults::MIN_COMPACTION_SOURCES),
            max_compaction_sources: s
                .max_compaction_sources
                .unwrap_or(defaults::MAX_COMPACTION_SOURCES),
            include_size_threshold: s
                .include_size_threshold
                .unwrap_or(defaults::INCLUDE_SIZE_THRESHOLD),
        }
    }
}

impl OutsideCompactorOverrides {
    fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper; enabled, recheck, active_within, takeover_backlog, takeover_after);
    }

    fn resolve(&self) -> OutsideCompactorSettings {
        OutsideCompactorSettings {
            enabled: self.enabled.unwrap_or(true),
            recheck: duration_or(self.recheck, defaults::OUTSIDE_RECHECK),
            active_within: duration_or(self.active_within, defaults::OUTSIDE_ACTIVE_WITHIN),
            takeover_backlog: self
                .takeover_backlog
                .unwrap_or(defaults::OUTSIDE_TAKEOVER_BACKLOG),
            takeover_after: duration_or(self.takeover_after, defaults::OUTSIDE_TAKEOVER_AFTER),
        }
    }
}

impl IdleOverrides {
    fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper; enabled, probe_min, probe_max, sleep_after, workers_probe, gc_probe);
    }

    fn resolve(&self) -> crate::model::policy::IdleSettings {
        let defaults = crate::model::policy::IdleSettings::default();
        crate::model::policy::IdleSettings {
            enabled: self.enabled.unwrap_or(defaults.enabled),
            probe_min: duration_or(self.probe_min, defaults.probe_min),
            probe_max: duration_or(self.probe_max, defaults.probe_max),
            sleep_after: duration_or(self.sleep_after, defaults.sleep_after),
            workers_probe: duration_or(self.workers_probe, defaults.workers_probe),
            gc_probe: duration_or(self.gc_probe, defaults.gc_probe),
        }
    }
}

impl WorkerOverrides {
    fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper;
            count, max_concurrent_compactions, compactions_poll_interval, heartbeat_interval,
            heartbeat_bytes, heartbeat_min_interval, max_sst_size, max_fetch_tasks,
            bytes_to_fetch, max_subcompactions, min_filter_keys, compression_codec);
    }

    fn resolve(&self) -> WorkerSettings {
        WorkerSettings {
            count: self.count.unwrap_or(defaults::WORKER_COUNT),
            max_concurrent_compactions: self
                .max_concurrent_compactions
                .unwrap_or(defaults::WORKER_MAX_CONCURRENT),
            compactions_poll_interval: duration_or(
                self.compactions_poll_interval,
                defaults::WORKER_POLL,
            ),
            heartbeat_interval: duration_or(
                self.heartbeat_interval,
                defaults::WORKER_HEARTBEAT_INTERVAL,
            ),
            max_sst_size: self.max_sst_size.unwrap_or(defaults::MAX_SST_SIZE),
            max_fetch_tasks: self.max_fetch_tasks.unwrap_or(defaults::MAX_FETCH_TASKS),
            bytes_to_fetch: self.bytes_to_fetch.unwrap_or(defaults::BYTES_TO_FETCH),
            max_subcompactions: self
                .max_subcompactions
                .unwrap_or(defaults::MAX_SUBCOMPACTIONS),
            min_filter_keys: self.min_filter_keys.unwrap_or(defaults::MIN_FILTER_KEYS),
            compression_codec: self.compression_codec,
        }
    }
}

impl MirrorTargetOverrides {
    /// Field-wise overlay, except that `url` and `source_prefix` travel
    /// together: a prefix only makes sense with the URL it maps into.
    fn overlay(&mut self, upper: &Self) {
        if upper.url.is_some() || upper.source_prefix.is_some() {
            self.url = upper.url.clone();
            self.source_prefix = upper.source_prefix.clone();
        }
        overlay_fields!(self, upper;
            disabled, mode, copier, poll, interval, min_age, checkpoint_lifetime,
            deep_check, copy_parallelism, multipart_threshold_mib);
        overlay_fields!(self.retention, upper.retention; keep);
        self.copier_config.extend(
            upper
                .copier_config
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
    }

    fn resolve(&self) -> MirrorTargetSettings {
        MirrorTargetSettings {
            url: self.url.clone(),
            source_prefix: self.source_prefix.clone(),
            disabled: self.disabled.unwrap_or(false),
            mode: self.mode.unwrap_or(MirrorMode::Continuous),
            copier: self.copier.clone().unwrap_or(CopierKind::Builtin),
            poll: duration_or(self.poll, defaults::MIRROR_POLL),
            interval: duration_or(self.interval, defaults::MIRROR_INTERVAL),
            min_age: duration_or(self.min_age, defaults::MIRROR_MIN_AGE),
            checkpoint_lifetime: duration_or(
                self.checkpoint_lifetime,
                defaults::CHECKPOINT_LIFETIME,
            ),
            deep_check: duration_or(self.deep_check, defaults::MIRROR_DEEP_CHECK),
            copy_parallelism: self.copy_parallelism.unwrap_or(defaults::COPY_PARALLELISM),
            stream: StreamPolicy::with_threshold_mib(
                self.multipart_threshold_mib
                    .unwrap_or(defaults::MULTIPART_THRESHOLD_MIB),
            ),
            retention_keep: self.retention.keep.map(|d| d.0),
            copier_config: flatten_config(&self.copier_config),
        }
    }
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
