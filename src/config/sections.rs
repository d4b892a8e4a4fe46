//! The sections of a database's settings as the files write them: `[gc]`,
//! `[coordinator]`, `[outside-compactor]`, `[idle]`, `[workers]`,
//! `[mirror]` and its targets, hooks and plugin grants. Every field is
//! optional: `resolve` layers them over the defaults.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::duration::HumanDuration;
use crate::model::ident::is_valid_identifier;
use crate::model::service::Service;

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

/// `[outside-compactor]`: what the fleet does about a compactor it did not
/// start, such as the one SlateDB's default settings run inside every
/// writer. The fleet never fences one it can see working: it stands down
/// (no coordinator, no workers) and takes over only once that compactor is
/// gone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutsideCompactorOverrides {
    /// Whether the fleet looks for outside compactors at all. `false`
    /// counts every compactor epoch as the fleet's (sleet 0.1.0's
    /// behaviour): only for a rolling upgrade from a release that records
    /// no epochs, and only where no writer runs its own compactor.
    /// Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// How often a database the fleet stands down for is looked at again,
    /// and how often running workers check they should still run. Each
    /// look is about 5 reads. Default `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recheck: Option<HumanDuration>,
    /// An outside compactor that wrote `.compactions` this recently counts
    /// as running. Default `2m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_within: Option<HumanDuration>,
    /// L0 SSTs that count as a backlog an outside compactor left alone.
    /// `0` never takes over on a backlog. Default `8` (SlateDB's default
    /// `l0_max_ssts`, where writers stall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover_backlog: Option<u32>,
    /// How long such a backlog may stand with no `.compactions` write
    /// before the outside compactor counts as gone and the fleet takes its
    /// epoch over. Default `2m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover_after: Option<HumanDuration>,
}

/// `[idle]`: run a database's compaction services only while it has work,
/// and watch an idle one with one small request (a HEAD of its next
/// manifest) instead of SlateDB's polling.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdleOverrides {
    /// `false` runs the services all the time, as sleet 0.1.0 did.
    /// Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The first look at a database that went idle, and the retry after a
    /// failed look. Default `5s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_min: Option<HumanDuration>,
    /// The coordinator's looks at an idle database back off to this
    /// interval (one HEAD each). Default `20s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_max: Option<HumanDuration>,
    /// How long a busy database must stay quiet (no new manifest, no
    /// compaction queued or running) before its services stop. Default
    /// `2m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep_after: Option<HumanDuration>,
    /// The workers' looks back off to this interval: the longest a job
    /// queued on an idle database waits for them. Default `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_probe: Option<HumanDuration>,
    /// GC's looks back off to this interval, or half the shortest GC
    /// `min_age` if that is shorter. Default `2m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_probe: Option<HumanDuration>,
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
    /// How often a pass also re-checks what earlier passes committed
    /// (every referenced object present at the destination with the
    /// source's size) and re-copies what was lost or damaged behind
    /// sleet's back. Default `1h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deep_check: Option<HumanDuration>,
    /// Objects copied at once by the builtin copier. Default `8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_parallelism: Option<u32>,
    /// When an object streams (no server-side copy between the two
    /// roots), objects up to this many MiB go up with one PUT and larger
    /// ones as a multipart upload. Default `64`; 5 to 5120.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multipart_threshold_mib: Option<u32>,
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
