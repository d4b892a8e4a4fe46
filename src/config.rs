//! Fleet policy: `sleet.toml` and the per-database `dbs/<db>.toml` files.
//!
//! Files hold *overrides*: every field is optional. A database's settings
//! are resolved field by field, last writer wins, from three layers:
//! built-in defaults, the `[database]` table of `sleet.toml`, then the
//! database's own registry file. The schema is a superset of sleet 0.1.0's,
//! so a 0.1.0 config parses unchanged; unknown keys are errors, so a typo
//! never silently falls back to a default.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::HumanDuration;
use crate::heartbeat::is_valid_identifier;
use crate::placement::PlacementHash;
use crate::registry::canonicalize_url;
use crate::service::{Service, first_duplicate};

/// Copies every field of `$upper` that is set onto `$lower`.
macro_rules! overlay_fields {
    ($lower:expr, $upper:expr; $($field:ident),+ $(,)?) => {
        $( if $upper.$field.is_some() { $lower.$field = $upper.$field.clone(); } )+
    };
}

// ---------------------------------------------------------------------------
// File shapes
// ---------------------------------------------------------------------------

/// The whole of `sleet.toml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "FleetConfig")]
pub struct FleetConfig {
    /// Fleet-wide agreements: every node must see the same values for
    /// placement to converge.
    #[serde(default)]
    pub node: NodeOverrides,
    /// Defaults for every registered database; each database's own file
    /// overrides them field by field.
    #[serde(default)]
    pub database: DatabaseConfig,
    /// Operator grants and limits per plugin, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plugins: BTreeMap<String, PluginGrants>,
}

/// `[node]`: heartbeat and polling cadence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeOverrides {
    /// How often a node writes its heartbeat and recomputes ownership. Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval: Option<HumanDuration>,
    /// A node whose heartbeat is this old is dead and its work moves. Default `30s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_timeout: Option<HumanDuration>,
    /// How often nodes re-read `sleet.toml` and `dbs/`. Default `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_poll: Option<HumanDuration>,
    /// How nodes score each other for placement: `fnv1a` (sleet 0.1.0's,
    /// the default) or `fnv1a-mix` (an even spread over similar node ids;
    /// only when no sleet 0.1.0 node is in the fleet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_hash: Option<PlacementHash>,
}

/// A `[database]` table, and the whole body of a `dbs/<db>.toml` file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// The services to run, replacing any lower layer's list. `[]` runs
    /// nothing while keeping the database registered. Default: all four.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<Vec<Service>>,
    #[serde(default)]
    pub gc: GcOverrides,
    #[serde(default, rename = "compactor-coordinator")]
    pub compactor_coordinator: CoordinatorOverrides,
    #[serde(default, rename = "compaction-workers")]
    pub compaction_workers: WorkerOverrides,
    #[serde(default)]
    pub mirror: MirrorOverrides,
    /// Hook plugins by name, layered field by field per name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hooks: BTreeMap<String, HookOverrides>,
}

/// `[gc]`: one table per object directory SlateDB collects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcOverrides {
    /// Whether GC keeps `gc/*.boundary` files, which need `If-Match`
    /// updates. Default: on, except for `file://` and HTTP stores, which
    /// cannot update in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary_files: Option<bool>,
    #[serde(default)]
    pub manifest: GcDirectoryOverrides,
    #[serde(default)]
    pub wal: GcDirectoryOverrides,
    /// Zero-byte WAL fence objects. Dry-run by default: deleting a fence a
    /// live writer still needs can lose data.
    #[serde(default)]
    pub wal_fence: GcDirectoryOverrides,
    #[serde(default)]
    pub compacted: GcDirectoryOverrides,
    #[serde(default)]
    pub compactions: GcDirectoryOverrides,
    /// Detaching finished clones from their parent.
    #[serde(default)]
    pub detach: GcDetachOverrides,
}

/// Garbage collection of one directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcDirectoryOverrides {
    /// `false` turns this directory's collection off. Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Time between collections. Default `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<HumanDuration>,
    /// Objects younger than this are never deleted. Default `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_age: Option<HumanDuration>,
    /// Log what would be deleted without deleting. Default `false`
    /// (`true` for `wal_fence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
}

/// Clone detachment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcDetachOverrides {
    /// Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Default `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<HumanDuration>,
}

/// `[compactor-coordinator]`: SlateDB's standalone coordinator, always run
/// without an embedded worker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorOverrides {
    /// How often the coordinator polls the manifest. Default `5s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<HumanDuration>,
    /// Default `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_update_timeout: Option<HumanDuration>,
    /// Jobs in flight for the database at once. Default `4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_compactions: Option<u32>,
    /// Default `1s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_compacted_interval: Option<HumanDuration>,
    /// A running job whose worker is silent this long is reclaimed. Default `30s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_heartbeat_timeout: Option<HumanDuration>,
    /// Lifetime of the checkpoints the coordinator adds on every publish;
    /// they pin old manifests and SSTs against GC. Default `15m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_lifetime: Option<HumanDuration>,
    #[serde(default)]
    pub scheduler: SchedulerOverrides,
}

/// The size-tiered compaction scheduler.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulerOverrides {
    /// Default `4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_compaction_sources: Option<u32>,
    /// Default `8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_compaction_sources: Option<u32>,
    /// Default `4.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_size_threshold: Option<f32>,
}

/// `[compaction-workers]`: SlateDB's standalone workers, plus how many
/// nodes run them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerOverrides {
    /// How many nodes run workers for the database. Default `1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Jobs one worker runs at once. Default `4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_compactions: Option<u32>,
    /// Default `5s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compactions_poll_interval: Option<HumanDuration>,
    /// How often a worker reports progress to the coordinator; keep it well
    /// below the coordinator's `worker_heartbeat_timeout`. Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval: Option<HumanDuration>,
    /// Accepted for sleet 0.1.0 configs; SlateDB 0.18 replaced it with
    /// `heartbeat_interval`, so it has no effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_bytes: Option<u64>,
    /// Accepted for sleet 0.1.0 configs; SlateDB 0.18 replaced it with
    /// `heartbeat_interval`, so it has no effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_min_interval: Option<HumanDuration>,
    /// Default 256 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sst_size: Option<u64>,
    /// Default `4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fetch_tasks: Option<u32>,
    /// Default 2 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_to_fetch: Option<u64>,
    /// `1` or less disables subcompactions. Default `4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_subcompactions: Option<u32>,
    /// Must match the writer's setting. Default `1000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_filter_keys: Option<u32>,
    /// Must match the writer's setting. Default: uncompressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_codec: Option<CompressionCodec>,
}

/// Block compression for SSTs that workers write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CompressionCodec {
    Snappy,
    Zlib,
    Lz4,
    Zstd,
}

/// `[mirror]`: copies of the database in other object-store roots.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MirrorOverrides {
    /// Targets by name; names key placement and the source pin checkpoint.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub targets: BTreeMap<String, MirrorTargetOverrides>,
}

/// One mirror target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MirrorTargetOverrides {
    /// Destination root. With `source_prefix`, the database's path below the
    /// prefix is appended. `url` and `source_prefix` are set together: a
    /// layer that sets either replaces both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Only databases under this URL use the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_prefix: Option<String>,
    /// Opt out of an inherited target. Default `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Default `continuous`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<MirrorMode>,
    /// Default `builtin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copier: Option<CopierKind>,
    /// Continuous mode: how often to look for new manifests. Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<HumanDuration>,
    /// Periodic mode: time between restore points. Default `24h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<HumanDuration>,
    /// Prune never deletes destination objects younger than this. Default `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_age: Option<HumanDuration>,
    /// Lifetime of the source checkpoint that pins a pass. Default `15m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_lifetime: Option<HumanDuration>,
    /// Objects copied at once by the builtin copier. Default `8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_parallelism: Option<u32>,
    #[serde(default)]
    pub retention: RetentionOverrides,
    /// For `copier = "plugin:<name>"`: passed to the plugin's `configure`,
    /// merged by key across layers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub copier_config: BTreeMap<String, ConfigValue>,
}

/// How long a mirror keeps restore points.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionOverrides {
    /// Restore points younger than this are kept; unset keeps everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<HumanDuration>,
}

/// When a mirror copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MirrorMode {
    /// Follow the source closely, tailing its WAL.
    Continuous,
    /// Cut one restore point every `interval`.
    Periodic,
}

/// What moves a mirror's data objects: `builtin`, `rclone`, `external`, or
/// `plugin:<name>` (a WebAssembly copier from `sleet run --plugin-dir`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum CopierKind {
    /// sleet's own parallel streaming copier.
    Builtin,
    /// The `rclone` binary, driven with `--files-from`.
    Rclone,
    /// Bucket replication configured outside sleet; sleet backfills misses.
    External,
    /// A copier plugin, by name.
    Plugin(String),
}

impl TryFrom<String> for CopierKind {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "builtin" => Ok(CopierKind::Builtin),
            "rclone" => Ok(CopierKind::Rclone),
            "external" => Ok(CopierKind::External),
            other => match other.strip_prefix("plugin:") {
                Some(name) if is_valid_identifier(name) => Ok(CopierKind::Plugin(name.to_string())),
                Some(name) => Err(format!(
                    "invalid plugin name \"{name}\": plugin names are 1-128 chars of [A-Za-z0-9_-]"
                )),
                None => Err(format!(
                    "unknown copier \"{other}\" (expected builtin, rclone, external or plugin:<name>)"
                )),
            },
        }
    }
}

impl From<CopierKind> for String {
    fn from(kind: CopierKind) -> String {
        kind.to_string()
    }
}

impl fmt::Display for CopierKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CopierKind::Builtin => f.write_str("builtin"),
            CopierKind::Rclone => f.write_str("rclone"),
            CopierKind::External => f.write_str("external"),
            CopierKind::Plugin(name) => write!(f, "plugin:{name}"),
        }
    }
}

impl JsonSchema for CopierKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CopierKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "What moves a mirror's data objects: `builtin`, `rclone`, `external`, or `plugin:<name>`.",
            "type": "string",
            "pattern": "^(builtin|rclone|external|plugin:[A-Za-z0-9_-]{1,128})$"
        })
    }
}

/// A value in a plugin's config table (`copier_config`, a hook's `config`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ConfigValue {
    String(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    Array(Vec<ConfigValue>),
    Table(BTreeMap<String, ConfigValue>),
}

/// A plugin config table flattened for the plugin's `configure` call:
/// nested tables become dotted keys, other values their TOML text
/// (arrays as comma-separated items), sorted by key.
pub fn flatten_config(table: &BTreeMap<String, ConfigValue>) -> Vec<(String, String)> {
    fn text(value: &ConfigValue) -> String {
        match value {
            ConfigValue::String(s) => s.clone(),
            ConfigValue::Integer(n) => n.to_string(),
            ConfigValue::Float(x) => x.to_string(),
            ConfigValue::Boolean(b) => b.to_string(),
            ConfigValue::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
            ConfigValue::Table(_) => String::new(),
        }
    }
    fn walk(prefix: &str, table: &BTreeMap<String, ConfigValue>, out: &mut Vec<(String, String)>) {
        for (key, value) in table {
            let key = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match value {
                ConfigValue::Table(inner) => walk(&key, inner, out),
                other => out.push((key, text(other))),
            }
        }
    }
    let mut out = Vec::new();
    walk("", table, &mut out);
    out
}

/// `[database.hooks.<name>]`: a hook plugin run before and after every
/// task run and mirror pass of the database.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookOverrides {
    /// The hook plugin's name (its file stem in `--plugin-dir`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// Only these services' runs; default every service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<Vec<Service>>,
    /// Passed to the plugin's `configure`, merged by key across layers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, ConfigValue>,
    /// Opt out of an inherited hook. Default `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
}

/// `[plugins.<name>]` in `sleet.toml`: what the operator allows a plugin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginGrants {
    /// The plugin file's expected sha256 (64 hex digits); a node whose
    /// file differs refuses to run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Linear memory cap per instance. Default `64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u32>,
    /// Wall-clock limit on each call. Default `10m` for a copier's batch,
    /// `5s` for a hook call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout: Option<HumanDuration>,
}

// ---------------------------------------------------------------------------
// Resolved settings
// ---------------------------------------------------------------------------

/// `[node]` with defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeSettings {
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    pub config_poll: Duration,
    pub placement_hash: PlacementHash,
}

/// Everything the services of one database run with.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseSettings {
    pub services: Vec<Service>,
    pub gc: GcSettings,
    pub coordinator: CoordinatorSettings,
    pub workers: WorkerSettings,
    /// Every target by name, disabled ones included.
    pub mirror_targets: BTreeMap<String, MirrorTargetSettings>,
    /// Enabled hooks by name.
    pub hooks: BTreeMap<String, HookSettings>,
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

/// What a node enforces on each call into one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLimits {
    pub sha256: Option<String>,
    pub memory_bytes: u64,
    pub call_timeout: Duration,
}

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
    pub copy_parallelism: u32,
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

    pub const MIRROR_POLL: Duration = Duration::from_secs(10);
    pub const MIRROR_INTERVAL: Duration = Duration::from_secs(24 * 3600);
    pub const MIRROR_MIN_AGE: Duration = Duration::from_secs(300);
    pub const CHECKPOINT_LIFETIME: Duration = Duration::from_secs(15 * 60);
    pub const COPY_PARALLELISM: u32 = 8;
    pub const PLUGIN_MEMORY_MIB: u32 = 64;
    pub const COPY_CALL_TIMEOUT: Duration = Duration::from_secs(600);
    pub const HOOK_CALL_TIMEOUT: Duration = Duration::from_secs(5);
}

fn duration_or(value: Option<HumanDuration>, default: Duration) -> Duration {
    value.map_or(default, |d| d.0)
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
    fn directories(&self) -> [(&'static str, &GcDirectoryOverrides); 5] {
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

    fn resolve(&self) -> CoordinatorSettings {
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
            copy_parallelism);
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
            copy_parallelism: self.copy_parallelism.unwrap_or(defaults::COPY_PARALLELISM),
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
    /// The limits a node enforces on `plugin`, a copier or a hook.
    pub fn plugin_limits(&self, plugin: &str, hook: bool) -> PluginLimits {
        let grants = self.plugins.get(plugin).cloned().unwrap_or_default();
        let default_timeout = if hook {
            defaults::HOOK_CALL_TIMEOUT
        } else {
            defaults::COPY_CALL_TIMEOUT
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

// ---------------------------------------------------------------------------
// Parsing and validation
// ---------------------------------------------------------------------------

/// A config file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The TOML did not parse into the config shape (syntax, wrong type,
    /// unknown key). The message names the line, column and key.
    #[error("failed to parse config: {0}")]
    Parse(String),
    /// The config parsed but breaks one or more rules.
    #[error("{}", Problems(.0))]
    Invalid(Vec<String>),
}

struct Problems<'a>(&'a [String]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid config:")?;
        for problem in self.0 {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

/// Parses and validates `sleet.toml`.
pub fn parse_fleet_config(text: &str) -> Result<FleetConfig, ConfigError> {
    let config: FleetConfig = parse_toml(text)?;
    let mut problems = Vec::new();
    check_node(&config.node, &mut problems);
    check_plugins(&config.plugins, &mut problems);
    let mut check = Checker::new("database", &mut problems);
    check.layer(&config.database);
    check.resolved(&config.database);
    into_result(config, problems)
}

/// Parses and validates one `dbs/<db>.toml`, checking the file alone and
/// then the result of laying it over the fleet's `[database]` table.
pub fn parse_database_config(
    fleet: &FleetConfig,
    text: &str,
) -> Result<DatabaseConfig, ConfigError> {
    let file: DatabaseConfig = parse_toml(text)?;
    let mut problems = Vec::new();
    Checker::new("", &mut problems).layer(&file);
    Checker::new("resolved", &mut problems).resolved(&fleet.database.overlaid(&file));
    into_result(file, problems)
}

fn into_result<T>(value: T, problems: Vec<String>) -> Result<T, ConfigError> {
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(ConfigError::Invalid(problems))
    }
}

/// Deserializes TOML, turning the parser's multi-line report into one line
/// that still names the line, column and offending key.
fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let location = e
            .span()
            .map(|span| {
                let (line, column) = line_and_column(text, span.start);
                format!("line {line}, column {column}: ")
            })
            .unwrap_or_default();
        ConfigError::Parse(format!("{location}{}", e.message().trim_end()))
    })
}

/// 1-based line and column (in characters) of a byte offset.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit_once('\n')
        .map_or(before, |(_, last)| last)
        .chars()
        .count()
        + 1;
    (line, column)
}

fn check_node(node: &NodeOverrides, problems: &mut Vec<String>) {
    let resolved = node.resolve();
    if resolved.heartbeat_interval.is_zero() {
        problems.push("node.heartbeat_interval must be > 0".into());
    } else if resolved.heartbeat_interval >= resolved.heartbeat_timeout {
        problems.push(format!(
            "node.heartbeat_interval ({}) must be < node.heartbeat_timeout ({})",
            HumanDuration(resolved.heartbeat_interval),
            HumanDuration(resolved.heartbeat_timeout)
        ));
    }
    if resolved.config_poll.is_zero() {
        problems.push("node.config_poll must be > 0".into());
    }
}

fn check_plugins(plugins: &BTreeMap<String, PluginGrants>, problems: &mut Vec<String>) {
    for (name, grants) in plugins {
        if !is_valid_identifier(name) {
            problems.push(format!(
                "plugins.{name}: plugin names are 1-128 chars of [A-Za-z0-9_-]"
            ));
        }
        if let Some(sha) = &grants.sha256
            && (sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            problems.push(format!("plugins.{name}.sha256 must be 64 hex digits"));
        }
        if grants.memory_mib.is_some_and(|m| !(1..=4096).contains(&m)) {
            problems.push(format!("plugins.{name}.memory_mib must be 1..=4096"));
        }
        if grants.call_timeout.is_some_and(|d| d.is_zero()) {
            problems.push(format!("plugins.{name}.call_timeout must be > 0"));
        }
    }
}

/// Collects rule violations under a location prefix such as `database`.
struct Checker<'a> {
    prefix: String,
    problems: &'a mut Vec<String>,
}

impl<'a> Checker<'a> {
    fn new(location: &str, problems: &'a mut Vec<String>) -> Self {
        let prefix = if location.is_empty() {
            String::new()
        } else {
            format!("{location}.")
        };
        Checker { prefix, problems }
    }

    fn push(&mut self, problem: String) {
        self.problems.push(format!("{}{problem}", self.prefix));
    }

    fn positive(&mut self, field: &str, value: Option<HumanDuration>) {
        if value.is_some_and(|d| d.is_zero()) {
            self.push(format!("{field} must be > 0"));
        }
    }

    fn at_least_one<N: Into<u64> + Copy>(&mut self, field: &str, value: Option<N>) {
        if value.is_some_and(|n| n.into() == 0) {
            self.push(format!("{field} must be >= 1"));
        }
    }

    fn nonzero_bytes(&mut self, field: &str, value: Option<u64>) {
        if value == Some(0) {
            self.push(format!("{field} must be > 0"));
        }
    }

    /// Rules every layer must satisfy on its own.
    fn layer(&mut self, db: &DatabaseConfig) {
        if let Some(services) = &db.services
            && let Some(dup) = first_duplicate(services)
        {
            self.push(format!("services lists \"{dup}\" more than once"));
        }
        for (name, dir) in db.gc.directories() {
            self.positive(&format!("gc.{name}.interval"), dir.interval);
        }
        self.positive("gc.detach.interval", db.gc.detach.interval);
        self.coordinator_layer(&db.compactor_coordinator);
        for (name, target) in &db.mirror.targets {
            self.target_layer(name, target);
        }
        for (name, hook) in &db.hooks {
            self.hook_layer(name, hook);
        }
        self.workers_layer(&db.compaction_workers);
    }

    fn hook_layer(&mut self, name: &str, hook: &HookOverrides) {
        if !is_valid_identifier(name) {
            self.push(format!(
                "hooks.{name}: hook names are 1-128 chars of [A-Za-z0-9_-]"
            ));
        }
        if let Some(plugin) = &hook.plugin
            && !is_valid_identifier(plugin)
        {
            self.push(format!(
                "hooks.{name}.plugin: plugin names are 1-128 chars of [A-Za-z0-9_-]"
            ));
        }
        if let Some(services) = &hook.services
            && let Some(dup) = first_duplicate(services)
        {
            self.push(format!(
                "hooks.{name}.services lists \"{dup}\" more than once"
            ));
        }
    }

    fn coordinator_layer(&mut self, c: &CoordinatorOverrides) {
        const P: &str = "compactor-coordinator";
        self.positive(&format!("{P}.poll_interval"), c.poll_interval);
        self.positive(
            &format!("{P}.manifest_update_timeout"),
            c.manifest_update_timeout,
        );
        self.at_least_one(
            &format!("{P}.max_concurrent_compactions"),
            c.max_concurrent_compactions,
        );
        self.positive(
            &format!("{P}.commit_compacted_interval"),
            c.commit_compacted_interval,
        );
        self.positive(
            &format!("{P}.worker_heartbeat_timeout"),
            c.worker_heartbeat_timeout,
        );
        self.positive(&format!("{P}.checkpoint_lifetime"), c.checkpoint_lifetime);
        let s = &c.scheduler;
        self.at_least_one(
            &format!("{P}.scheduler.min_compaction_sources"),
            s.min_compaction_sources,
        );
        self.at_least_one(
            &format!("{P}.scheduler.max_compaction_sources"),
            s.max_compaction_sources,
        );
        if s.include_size_threshold
            .is_some_and(|t| !t.is_finite() || t <= 0.0)
        {
            self.push(format!(
                "{P}.scheduler.include_size_threshold must be a positive number"
            ));
        }
    }

    fn target_layer(&mut self, name: &str, t: &MirrorTargetOverrides) {
        if !is_valid_identifier(name) {
            self.push(format!(
                "mirror.targets.{name}: mirror target names are 1-128 chars of [A-Za-z0-9_-]"
            ));
        }
        let field = |f: &str| format!("mirror.targets.{name}.{f}");
        self.positive(&field("poll"), t.poll);
        self.positive(&field("interval"), t.interval);
        self.positive(&field("min_age"), t.min_age);
        self.positive(&field("checkpoint_lifetime"), t.checkpoint_lifetime);
        self.at_least_one(&field("copy_parallelism"), t.copy_parallelism);
        self.positive(&field("retention.keep"), t.retention.keep);
    }

    fn workers_layer(&mut self, w: &WorkerOverrides) {
        const P: &str = "compaction-workers";
        if w.count == Some(0) {
            self.push(format!(
                "{P}.count must be >= 1 (drop \"compaction-workers\" from services to run none)"
            ));
        }
        self.at_least_one(
            &format!("{P}.max_concurrent_compactions"),
            w.max_concurrent_compactions,
        );
        self.positive(
            &format!("{P}.compactions_poll_interval"),
            w.compactions_poll_interval,
        );
        self.positive(&format!("{P}.heartbeat_interval"), w.heartbeat_interval);
        self.at_least_one(&format!("{P}.max_fetch_tasks"), w.max_fetch_tasks);
        self.nonzero_bytes(&format!("{P}.max_sst_size"), w.max_sst_size);
        self.nonzero_bytes(&format!("{P}.bytes_to_fetch"), w.bytes_to_fetch);
    }

    /// Rules about the layered result, which no single layer can decide.
    fn resolved(&mut self, merged: &DatabaseConfig) {
        for (name, hook) in &merged.hooks {
            if !hook.disabled.unwrap_or(false) && hook.plugin.is_none() {
                self.push(format!(
                    "hooks.{name}: plugin is required unless the hook is disabled"
                ));
            }
        }
        let coordinator = merged.compactor_coordinator.resolve();
        if coordinator.min_compaction_sources > coordinator.max_compaction_sources {
            self.push(format!(
                "compactor-coordinator.scheduler: min_compaction_sources ({}) exceeds max_compaction_sources ({})",
                coordinator.min_compaction_sources, coordinator.max_compaction_sources
            ));
        }
        for (name, target) in &merged.mirror.targets {
            let disabled = target.disabled.unwrap_or(false);
            match &target.url {
                None if !disabled => self.push(format!(
                    "mirror.targets.{name}: url is required unless the target is disabled"
                )),
                Some(url) => {
                    if let Err(e) = canonicalize_url(url) {
                        self.push(format!("mirror.targets.{name}.url: {e}"));
                    }
                }
                None => {}
            }
            if let Some(prefix) = &target.source_prefix
                && let Err(e) = canonicalize_url(prefix)
            {
                self.push(format!("mirror.targets.{name}.source_prefix: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(result: Result<impl fmt::Debug, ConfigError>) -> Vec<String> {
        match result {
            Err(ConfigError::Invalid(p)) => p,
            other => panic!("expected validation problems, got {other:?}"),
        }
    }

    #[test]
    fn empty_config_resolves_to_builtin_defaults() {
        let fleet = parse_fleet_config("").unwrap();
        let node = fleet.node.resolve();
        assert_eq!(node.heartbeat_interval, Duration::from_secs(10));
        assert_eq!(node.heartbeat_timeout, Duration::from_secs(30));
        assert_eq!(node.config_poll, Duration::from_secs(60));
        let db = fleet.resolve_database(&DatabaseConfig::default());
        assert_eq!(db.services, Service::ALL);
        assert!(db.mirror_targets.is_empty());
        assert_eq!(
            db.gc.manifest,
            GcDirectory {
                enabled: true,
                interval: Duration::from_secs(60),
                min_age: Duration::from_secs(300),
                dry_run: false
            }
        );
        assert!(db.gc.wal_fence.dry_run, "fences are dry-run by default");
        assert_eq!(
            db.gc.detach,
            GcDetach {
                enabled: true,
                interval: Duration::from_secs(60)
            }
        );
        assert_eq!(db.coordinator.poll_interval, Duration::from_secs(5));
        assert_eq!(
            db.coordinator.worker_heartbeat_timeout,
            Duration::from_secs(30)
        );
        assert_eq!(db.coordinator.max_compaction_sources, 8);
        assert_eq!(db.workers.count, 1);
        assert_eq!(db.workers.max_sst_size, 268_435_456);
        assert_eq!(db.workers.heartbeat_interval, Duration::from_secs(10));
        assert_eq!(db.workers.compression_codec, None);
    }

    #[test]
    fn layers_apply_field_by_field_in_order() {
        let fleet = parse_fleet_config(
            r#"
            [database]
            services = ["gc", "compaction-workers"]
            [database.compaction-workers]
            count = 2
            max_fetch_tasks = 7
            [database.gc.compacted]
            min_age = "10m"
            "#,
        )
        .unwrap();
        let file = parse_database_config(
            &fleet,
            r#"
            [compaction-workers]
            count = 4
            [gc.compacted]
            interval = "2m"
            "#,
        )
        .unwrap();
        let db = fleet.resolve_database(&file);
        assert_eq!(db.workers.count, 4, "the file wins");
        assert_eq!(
            db.workers.max_fetch_tasks, 7,
            "the fleet layer falls through"
        );
        assert_eq!(
            db.workers.compactions_poll_interval,
            Duration::from_secs(5),
            "built-in"
        );
        assert_eq!(db.services, [Service::Gc, Service::CompactionWorkers]);
        assert_eq!(db.gc.compacted.min_age, Duration::from_secs(600));
        assert_eq!(db.gc.compacted.interval, Duration::from_secs(120));
    }

    #[test]
    fn services_lists_replace_rather_than_merge() {
        let fleet = parse_fleet_config("[database]\nservices = [\"gc\", \"mirror\"]").unwrap();
        let file = parse_database_config(&fleet, "services = []").unwrap();
        assert!(fleet.resolve_database(&file).services.is_empty());
        let file = parse_database_config(&fleet, "services = [\"compactor-coordinator\"]").unwrap();
        assert_eq!(
            fleet.resolve_database(&file).services,
            [Service::CompactorCoordinator]
        );
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_location() {
        let err = parse_fleet_config("[node]\ntimeout = \"1s\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("failed to parse config: line 2, column 1: unknown field `timeout`"),
            "{err}"
        );
        let err = parse_fleet_config("[database.gc]\nwals = {}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `wals`"), "{err}");
        let err = parse_database_config(&FleetConfig::default(), "url = \"s3://x\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `url`"), "{err}");
        let err = parse_fleet_config("[node]\nheartbeat_interval = \"soon\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid duration \"soon\""), "{err}");
        let err = parse_fleet_config("[database]\nservices = [\"gcc\"]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant `gcc`"), "{err}");
    }

    #[test]
    fn malformed_toml_is_a_parse_error() {
        let err = parse_fleet_config("[node\n").unwrap_err();
        assert!(matches!(err, ConfigError::Parse(_)), "{err}");
        assert!(
            !err.to_string().contains('\n'),
            "one line for status warnings: {err}"
        );
    }

    #[test]
    fn node_cadence_rules() {
        assert_eq!(
            problems(parse_fleet_config(
                "[node]\nheartbeat_interval = \"30s\"\nheartbeat_timeout = \"30s\""
            )),
            ["node.heartbeat_interval (30s) must be < node.heartbeat_timeout (30s)"]
        );
        assert_eq!(
            problems(parse_fleet_config("[node]\nheartbeat_interval = \"0s\"")),
            ["node.heartbeat_interval must be > 0"]
        );
        assert_eq!(
            problems(parse_fleet_config("[node]\nconfig_poll = \"0s\"")),
            ["node.config_poll must be > 0"]
        );
    }

    #[test]
    fn every_layer_rule_has_its_message() {
        let text = r#"
            services = ["gc", "gc"]
            [gc.manifest]
            interval = "0s"
            [gc.wal]
            interval = "0s"
            [gc.wal_fence]
            interval = "0s"
            [gc.compacted]
            interval = "0s"
            [gc.compactions]
            interval = "0s"
            [gc.detach]
            interval = "0s"
            [compactor-coordinator]
            poll_interval = "0s"
            manifest_update_timeout = "0s"
            max_concurrent_compactions = 0
            commit_compacted_interval = "0s"
            worker_heartbeat_timeout = "0s"
            checkpoint_lifetime = "0s"
            [compactor-coordinator.scheduler]
            min_compaction_sources = 0
            max_compaction_sources = 0
            include_size_threshold = -1.0
            [compaction-workers]
            count = 0
            max_concurrent_compactions = 0
            compactions_poll_interval = "0s"
            heartbeat_interval = "0s"
            max_fetch_tasks = 0
            max_sst_size = 0
            bytes_to_fetch = 0
            [mirror.targets."bad name"]
            url = "s3://dr/x"
            [mirror.targets.dr]
            url = "s3://dr/y"
            poll = "0s"
            interval = "0s"
            min_age = "0s"
            checkpoint_lifetime = "0s"
            copy_parallelism = 0
            retention = { keep = "0s" }
        "#;
        let found = problems(parse_database_config(&FleetConfig::default(), text));
        let expected = [
            "services lists \"gc\" more than once",
            "gc.manifest.interval must be > 0",
            "gc.wal.interval must be > 0",
            "gc.wal_fence.interval must be > 0",
            "gc.compacted.interval must be > 0",
            "gc.compactions.interval must be > 0",
            "gc.detach.interval must be > 0",
            "compactor-coordinator.poll_interval must be > 0",
            "compactor-coordinator.manifest_update_timeout must be > 0",
            "compactor-coordinator.max_concurrent_compactions must be >= 1",
            "compactor-coordinator.commit_compacted_interval must be > 0",
            "compactor-coordinator.worker_heartbeat_timeout must be > 0",
            "compactor-coordinator.checkpoint_lifetime must be > 0",
            "compactor-coordinator.scheduler.min_compaction_sources must be >= 1",
            "compactor-coordinator.scheduler.max_compaction_sources must be >= 1",
            "compactor-coordinator.scheduler.include_size_threshold must be a positive number",
            "mirror.targets.bad name: mirror target names are 1-128 chars of [A-Za-z0-9_-]",
            "mirror.targets.dr.poll must be > 0",
            "mirror.targets.dr.interval must be > 0",
            "mirror.targets.dr.min_age must be > 0",
            "mirror.targets.dr.checkpoint_lifetime must be > 0",
            "mirror.targets.dr.copy_parallelism must be >= 1",
            "mirror.targets.dr.retention.keep must be > 0",
            "compaction-workers.count must be >= 1 (drop \"compaction-workers\" from services to run none)",
            "compaction-workers.max_concurrent_compactions must be >= 1",
            "compaction-workers.compactions_poll_interval must be > 0",
            "compaction-workers.heartbeat_interval must be > 0",
            "compaction-workers.max_fetch_tasks must be >= 1",
            "compaction-workers.max_sst_size must be > 0",
            "compaction-workers.bytes_to_fetch must be > 0",
        ];
        assert_eq!(found, expected);
    }

    #[test]
    fn fleet_layer_problems_are_prefixed_with_database() {
        assert_eq!(
            problems(parse_fleet_config(
                "[database.compaction-workers]\ncount = 0"
            )),
            [
                "database.compaction-workers.count must be >= 1 (drop \"compaction-workers\" from services to run none)"
            ]
        );
        let err = parse_fleet_config("[database.gc.wal]\ninterval = \"0s\"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid config:\n  database.gc.wal.interval must be > 0"
        );
    }

    #[test]
    fn scheduler_bounds_check_the_layered_result() {
        let fleet = parse_fleet_config(
            "[database.compactor-coordinator.scheduler]\nmin_compaction_sources = 6",
        )
        .unwrap();
        let file = "[compactor-coordinator.scheduler]\nmax_compaction_sources = 4";
        assert!(parse_database_config(&FleetConfig::default(), file).is_ok());
        assert_eq!(
            problems(parse_database_config(&fleet, file)),
            [
                "resolved.compactor-coordinator.scheduler: min_compaction_sources (6) exceeds max_compaction_sources (4)"
            ]
        );
        assert_eq!(
            problems(parse_fleet_config(
                "[database.compactor-coordinator.scheduler]\nmin_compaction_sources = 9"
            )),
            [
                "database.compactor-coordinator.scheduler: min_compaction_sources (9) exceeds max_compaction_sources (8)"
            ]
        );
    }

    #[test]
    fn mirror_targets_layer_and_travel_together() {
        let fleet = parse_fleet_config(
            r#"
            [database.mirror.targets.dr]
            url = "s3://dr-bucket/mirrors"
            source_prefix = "s3://user-data"
            poll = "30s"
            [database.mirror.targets.backup]
            url = "gs://backups"
            "#,
        )
        .unwrap();
        let file = parse_database_config(
            &fleet,
            r#"
            [mirror.targets.dr]
            url = "s3://elsewhere/db1"
            [mirror.targets.backup]
            disabled = true
            mode = "periodic"
            copier = "external"
            interval = "24h"
            retention.keep = "30d"
            "#,
        )
        .unwrap();
        let db = fleet.resolve_database(&file);
        let dr = &db.mirror_targets["dr"];
        assert_eq!(dr.url.as_deref(), Some("s3://elsewhere/db1"));
        assert_eq!(
            dr.source_prefix, None,
            "a bare url clears the inherited prefix"
        );
        assert_eq!(
            dr.poll,
            Duration::from_secs(30),
            "other fields fall through"
        );
        assert_eq!(dr.checkpoint_lifetime, Duration::from_secs(900));
        assert!(!dr.disabled);
        let backup = &db.mirror_targets["backup"];
        assert!(backup.disabled);
        assert_eq!(
            backup.url.as_deref(),
            Some("gs://backups"),
            "disabled keeps its url"
        );
        assert_eq!(backup.mode, MirrorMode::Periodic);
        assert_eq!(backup.copier, CopierKind::External);
        assert_eq!(backup.retention_keep, Some(Duration::from_secs(30 * 86400)));
    }

    #[test]
    fn mirror_targets_need_a_valid_url_unless_disabled() {
        let none = FleetConfig::default();
        assert_eq!(
            problems(parse_database_config(
                &none,
                "[mirror.targets.dr]\npoll = \"1s\""
            )),
            ["resolved.mirror.targets.dr: url is required unless the target is disabled"]
        );
        assert!(parse_database_config(&none, "[mirror.targets.dr]\ndisabled = true").is_ok());
        assert_eq!(
            problems(parse_database_config(
                &none,
                "[mirror.targets.dr]\nurl = \"ftp://x/y\""
            )),
            [
                "resolved.mirror.targets.dr.url: unsupported URL scheme \"ftp\" (expected one of s3, s3a, gs, az, adl, azure, abfs, abfss, file, memory, http, https)"
            ]
        );
        assert_eq!(
            problems(parse_database_config(
                &none,
                "[mirror.targets.dr]\nurl = \"s3://x/y\"\nsource_prefix = \"nope\""
            )),
            [
                "resolved.mirror.targets.dr.source_prefix: invalid URL \"nope\": relative URL without a base"
            ]
        );
        let fleet = parse_fleet_config("[database.mirror.targets.dr]\ndisabled = true").unwrap();
        assert_eq!(
            problems(parse_database_config(
                &fleet,
                "[mirror.targets.dr]\ndisabled = false"
            )),
            ["resolved.mirror.targets.dr: url is required unless the target is disabled"]
        );
    }

    #[test]
    fn a_sleet_0_1_worker_table_still_parses() {
        let file = parse_database_config(
            &FleetConfig::default(),
            "[compaction-workers]\nheartbeat_bytes = 5242880\nheartbeat_min_interval = \"5s\"",
        )
        .unwrap();
        assert_eq!(file.compaction_workers.heartbeat_bytes, Some(5_242_880));
    }

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_and_column("ab\ncµd", 6), (2, 3));
        assert_eq!(line_and_column("ab\ncµd", 5), (2, 2), "inside a character");
        assert_eq!(line_and_column("x", 0), (1, 1));
    }

    #[test]
    fn plugin_copiers_hooks_and_grants_parse_layer_and_flatten() {
        let fleet = parse_fleet_config(
            r#"
            [database.mirror.targets.dr]
            url = "s3://dr/x"
            copier = "plugin:throttle-copier"
            [database.mirror.targets.dr.copier_config]
            bytes_per_second = 1000
            tags = { team = "data", tier = 2 }
            [database.hooks.window]
            plugin = "maintenance-window"
            services = ["mirror"]
            [database.hooks.window.config]
            start = "01:00"
            [plugins.throttle-copier]
            memory_mib = 16
            call_timeout = "30s"
            "#,
        )
        .unwrap();
        let file = parse_database_config(
            &fleet,
            "[mirror.targets.dr.copier_config]\nbytes_per_second = 5\n[hooks.window]\ndisabled = true\n",
        )
        .unwrap();
        let db = fleet.resolve_database(&file);
        let dr = &db.mirror_targets["dr"];
        assert_eq!(dr.copier, CopierKind::Plugin("throttle-copier".into()));
        assert_eq!(
            dr.copier_config,
            [
                ("bytes_per_second".to_string(), "5".to_string()),
                ("tags.team".to_string(), "data".to_string()),
                ("tags.tier".to_string(), "2".to_string()),
            ],
            "merged by key, nested tables dotted"
        );
        assert!(
            db.hooks.is_empty(),
            "a registry file disables the hook by name"
        );
        let window = &fleet.database.resolve().hooks["window"];
        assert!(window.applies_to(Service::Mirror) && !window.applies_to(Service::Gc));
        let limits = fleet.plugin_limits("throttle-copier", false);
        assert_eq!(limits.memory_bytes, 16 << 20);
        assert_eq!(limits.call_timeout, Duration::from_secs(30));
        assert_eq!(
            fleet.plugin_limits("other", true).call_timeout,
            Duration::from_secs(5),
            "hooks default to 5s"
        );
    }

    #[test]
    fn bad_plugin_config_is_named() {
        let err = |toml: &str| parse_fleet_config(toml).unwrap_err().to_string();
        assert!(
            err("[database.mirror.targets.dr]\nurl = \"s3://x/y\"\ncopier = \"plugin:bad name\"")
                .contains("invalid plugin name \"bad name\"")
        );
        assert!(
            err("[database.mirror.targets.dr]\nurl = \"s3://x/y\"\ncopier = \"ftp\"")
                .contains("unknown copier \"ftp\"")
        );
        assert!(
            err("[database.hooks.h]\nservices = [\"gc\"]")
                .contains("database.hooks.h: plugin is required unless the hook is disabled")
        );
        assert!(
            err("[plugins.p]\nsha256 = \"abc\"").contains("plugins.p.sha256 must be 64 hex digits")
        );
        assert!(
            err("[plugins.p]\nmemory_mib = 0").contains("plugins.p.memory_mib must be 1..=4096")
        );
    }
}
