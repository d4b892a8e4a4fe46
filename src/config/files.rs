//! The shapes `sleet.toml` and registry files parse into: every field
//! optional, unknown keys rejected.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::sections::{
    ConfigValue, CoordinatorOverrides, GcOverrides, HookOverrides, IdleOverrides, MirrorOverrides,
    OutsideCompactorOverrides, PluginGrants, WorkerOverrides,
};
use crate::model::duration::HumanDuration;
use crate::model::ident::is_valid_identifier;
use crate::model::placement::PlacementHash;
use crate::model::service::Service;

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
    /// How nodes prove the object stores they write to.
    #[serde(default, skip_serializing_if = "StoresConfig::is_empty")]
    pub stores: StoresConfig,
    /// Where nodes hear of new manifests instead of looking for them.
    #[serde(default, skip_serializing_if = "EventsConfig::is_empty")]
    pub events: EventsConfig,
}

/// `[events]`: the store tells the fleet of each new manifest through a
/// queue (S3 bucket notifications to SQS), so an idle database is woken
/// within seconds and its own looks back off to `safety_interval`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsConfig {
    /// `sqs`, or `none` (the default: nodes look for changes themselves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<EventSourceKind>,
    /// The SQS queue's URL, as `sleet events setup` prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_url: Option<String>,
    /// While events flow, an idle database's looks back off to this
    /// interval: the longest a lost notification delays its wake-up.
    /// Default `10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_interval: Option<HumanDuration>,
    /// While events flow, how often a node lists `wakes/` for the events
    /// other nodes received for databases it runs. Default `1s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay_interval: Option<HumanDuration>,
}

impl EventsConfig {
    fn is_empty(&self) -> bool {
        self == &EventsConfig::default()
    }
}

/// Where events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EventSourceKind {
    None,
    Sqs,
}

/// `[stores]`: nodes check every store they write to (the fleet root,
/// each database's, each mirror destination's) for atomic conditional
/// writes before they write there, and record the result under the root.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoresConfig {
    /// How long a recorded check is reused before a node runs it again. Default `1d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recheck_after: Option<HumanDuration>,
    /// Stores nodes write to even when their check fails, by store
    /// (`s3://bucket`, `gs://bucket`, `az://container`, `file://`), each
    /// with the reason; `sleet status` keeps showing both.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub trusted: BTreeMap<String, String>,
}

impl StoresConfig {
    fn is_empty(&self) -> bool {
        self == &StoresConfig::default()
    }
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
    #[serde(default, rename = "outside-compactor")]
    pub outside_compactor: OutsideCompactorOverrides,
    #[serde(default)]
    pub idle: IdleOverrides,
    #[serde(default)]
    pub mirror: MirrorOverrides,
    /// Hook plugins by name, layered field by field per name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hooks: BTreeMap<String, HookOverrides>,
    /// The merge operator the application writes with, as a plugin:
    /// `plugin:<name>`, or `none` (the default). A database with merge
    /// operands cannot be compacted without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_operator: Option<CodeChoice>,
    /// Passed to the merge operator's `configure`, merged by key across layers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub merge_operator_config: BTreeMap<String, ConfigValue>,
    /// A compaction filter the compactor runs on every entry it writes:
    /// `plugin:<name>`, or `none` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_filter: Option<CodeChoice>,
    /// Passed to the compaction filter's `configure`, merged by key across layers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub compaction_filter_config: BTreeMap<String, ConfigValue>,
}

/// Application code a database's compaction runs (`merge_operator`,
/// `compaction_filter`): `plugin:<name>`, or `none` to opt out of one a
/// lower layer sets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum CodeChoice {
    None,
    Plugin(String),
}

impl CodeChoice {
    /// The plugin's name, unless `none`.
    pub fn plugin(&self) -> Option<&str> {
        match self {
            CodeChoice::None => None,
            CodeChoice::Plugin(name) => Some(name),
        }
    }
}

impl TryFrom<String> for CodeChoice {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        match value.strip_prefix("plugin:") {
            _ if value == "none" => Ok(CodeChoice::None),
            Some(name) if is_valid_identifier(name) => Ok(CodeChoice::Plugin(name.to_string())),
            Some(name) => Err(format!(
                "invalid plugin name \"{name}\": plugin names are 1-128 chars of [A-Za-z0-9_-]"
            )),
            None => Err(format!(
                "\"{value}\" is not plugin:<name> or none (merge_operator and \
                 compaction_filter run application code only as WebAssembly plugins)"
            )),
        }
    }
}

impl From<CodeChoice> for String {
    fn from(choice: CodeChoice) -> String {
        match choice {
            CodeChoice::None => "none".into(),
            CodeChoice::Plugin(name) => format!("plugin:{name}"),
        }
    }
}

impl JsonSchema for CodeChoice {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CodeChoice".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Application code a database's compaction runs: `plugin:<name>` (a WebAssembly component from `sleet run --plugin-dir`) or `none`.",
            "type": "string",
            "pattern": "^(none|plugin:[A-Za-z0-9_-]{1,128})$"
        })
    }
}
