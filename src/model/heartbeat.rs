//! Heartbeat objects under `nodes/`: a frozen format.
//!
//! A node announces itself by overwriting `nodes/<node-id>.<letters>.json`
//! every heartbeat interval. Peers learn the node's offered services from
//! the *name* alone (one LIST, no GETs), and its liveness from the object's
//! `LastModified`; the body is read only by `sleet status`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::service::Service;

/// The heartbeat body format version. Bumped only on incompatible change;
/// readers ignore fields they do not know.
pub const BODY_VERSION: u32 = 1;

/// The longest node id, in characters.
pub const MAX_NODE_ID: usize = crate::model::ident::MAX_IDENTIFIER;

const NAME_SUFFIX: &str = ".json";

/// The rule node ids (and mirror target names) follow, as shown in errors.
pub const NODE_ID_RULE: &str = "node ids are 1-128 chars of [A-Za-z0-9_-]";

pub use crate::model::ident::is_valid_identifier;

/// Checks a node id; the error is the rule, ready for clap or a message.
pub fn validate_node_id(id: &str) -> Result<String, String> {
    if is_valid_identifier(id) {
        Ok(id.to_string())
    } else {
        Err(NODE_ID_RULE.to_string())
    }
}

/// The service letters of a heartbeat name: sorted and deduplicated.
pub fn service_letters(services: &[Service]) -> String {
    let mut letters: Vec<char> = services.iter().map(|s| s.letter()).collect();
    letters.sort_unstable();
    letters.dedup();
    letters.into_iter().collect()
}

/// The object name (relative to `nodes/`) of a node's heartbeat.
pub fn object_name(node_id: &str, services: &[Service]) -> String {
    format!("{node_id}.{}{NAME_SUFFIX}", service_letters(services))
}

/// Parses a heartbeat object name into the node id and offered services
/// (in canonical order). Unknown letters are skipped, so a node from a
/// newer release still counts for the services this one knows.
pub fn parse_object_name(name: &str) -> Option<(String, Vec<Service>)> {
    let stem = name.strip_suffix(NAME_SUFFIX)?;
    let (node_id, letters) = stem.rsplit_once('.')?;
    if node_id.is_empty() {
        return None;
    }
    let offered: Vec<Service> = Service::ALL
        .into_iter()
        .filter(|s| letters.contains(s.letter()))
        .collect();
    Some((node_id.to_string(), offered))
}

/// The JSON body of a heartbeat object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "Heartbeat")]
pub struct HeartbeatBody {
    /// Body format version; 1 for every release so far.
    pub version: u32,
    /// The node id, duplicating the object name.
    pub node_id: String,
    /// The sleet release the node runs.
    pub sleet_version: String,
    /// The SlateDB release the node's services are built on.
    pub slatedb_version: String,
    /// Task counts per offered service, sorted by service letter.
    pub services: Vec<ServiceTasks>,
    /// Tasks waiting out a failure, with the error (a bounded sample).
    /// Added after sleet 0.1.0, whose readers ignore it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<TaskFailure>,
    /// Plugins the node loaded (name, sha256, kind), so `status` can tell
    /// which nodes lack a plugin the config names. Added after 0.1.0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<LoadedPlugin>,
    /// Runs a hook deferred, with the reason (a bounded sample).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<TaskFailure>,
    /// Compactor tasks that run but whose compaction jobs fail (a merge
    /// operator missing or failing, a compaction filter failing), with
    /// the latest error, within the last five minutes (a bounded sample).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_compactions: Vec<TaskFailure>,
    /// How many databases this node stands down for because a compactor
    /// outside the fleet (usually one inside the application's writer)
    /// holds them. Added after 0.1.0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outside_compactor_count: u64,
    /// Those databases, a bounded sample sorted by URL.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_compactors: Vec<OutsideCompactor>,
    /// The fleet root's clock against the node's, measured from its own
    /// heartbeats' `LastModified`. Added after 0.1.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockReading>,
    /// Whether the store's events reach the node (`[events]`); absent
    /// when no source is configured. Added after 0.1.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<EventsReport>,
}

/// Whether a node receives the store's events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EventsReport {
    /// The last receive succeeded: idle looks are at the safety interval.
    pub flowing: bool,
    /// Why not, while not (the node polls at the usual cadence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// A node's clock skew against the fleet root's store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClockReading {
    /// The store's clock minus the node's, in milliseconds.
    pub skew_ms: i64,
    /// How far the truth may lie from `skew_ms` (stores give
    /// `LastModified` to the second).
    pub uncertainty_ms: u64,
    /// The largest skew the fleet tolerates with the settings in force.
    pub bound_ms: u64,
}

impl ClockReading {
    /// Whether the skew is certainly beyond the bound.
    pub fn beyond_bound(&self) -> bool {
        self.skew_ms
            .unsigned_abs()
            .saturating_sub(self.uncertainty_ms)
            > self.bound_ms
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A database a node stands down for: a compactor the fleet did not start
/// holds its compactor epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OutsideCompactor {
    pub database: String,
    /// The outside compactor's epoch in the database's manifest.
    pub compactor_epoch: u64,
    /// The writer epoch when the fleet first saw it.
    pub writer_epoch: u64,
    /// When the fleet first stood down for this epoch (RFC 3339).
    pub since: String,
    /// `active` (it wrote `.compactions` recently) or `presumed` (quiet,
    /// not proven gone).
    pub evidence: String,
}

// The heartbeat's own record of a plugin, so this frozen format depends
// on nothing; it keeps the schema name it had when it was plugin::PluginInfo.
/// A plugin the node loaded: name, sha256 and kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "PluginInfo")]
pub struct LoadedPlugin {
    pub name: String,
    /// Hex sha256 of the `.wasm` file.
    pub sha256: String,
    pub kind: LoadedPluginKind,
}

/// What a loaded plugin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "PluginKind")]
pub enum LoadedPluginKind {
    Copier,
    Hook,
    MergeOperator,
    CompactionFilter,
}

/// A task that failed and waits to retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskFailure {
    pub database: String,
    pub service: Service,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub error: String,
}

/// How many of one service's tasks a node runs, and how many wait to retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServiceTasks {
    pub service: Service,
    /// Tasks currently running.
    pub running: u64,
    /// Tasks waiting out a failure backoff.
    pub backoff: u64,
}

impl HeartbeatBody {
    /// A body for this build, with per-service counts in letter order.
    pub fn new(node_id: &str, mut services: Vec<ServiceTasks>) -> Self {
        services.sort_by_key(|s| s.service.letter());
        HeartbeatBody {
            version: BODY_VERSION,
            node_id: node_id.to_string(),
            sleet_version: crate::model::version::SLEET_VERSION.to_string(),
            slatedb_version: crate::model::version::SLATEDB_VERSION.to_string(),
            services,
            failing: Vec::new(),
            plugins: Vec::new(),
            skipped: Vec::new(),
            clock: None,
            events: None,
            failing_compactions: Vec::new(),
            outside_compactor_count: 0,
            outside_compactors: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Service::*;

    #[test]
    fn object_names_sort_and_dedup_letters() {
        assert_eq!(object_name("sleet-1", &Service::ALL), "sleet-1.cgmw.json");
        assert_eq!(
            object_name(
                "sleet-1",
                &[CompactionWorkers, Gc, CompactorCoordinator, Gc]
            ),
            "sleet-1.cgw.json"
        );
        assert_eq!(object_name("n", &[Gc]), "n.g.json");
        assert_eq!(object_name("n", &[]), "n..json");
    }

    #[test]
    fn object_names_roundtrip_and_reject_garbage() {
        assert_eq!(
            parse_object_name("sleet-1.cgmw.json"),
            Some(("sleet-1".into(), Service::ALL.to_vec()))
        );
        assert_eq!(
            parse_object_name("sleet-1.wgc.json"),
            Some((
                "sleet-1".into(),
                vec![Gc, CompactorCoordinator, CompactionWorkers]
            ))
        );
        assert_eq!(
            parse_object_name("sleet-2.gx.json"),
            Some(("sleet-2".into(), vec![Gc]))
        );
        assert_eq!(parse_object_name("n..json"), Some(("n".into(), vec![])));
        assert_eq!(parse_object_name("no-extension.cgw"), None);
        assert_eq!(parse_object_name("nodot.json"), None);
        assert_eq!(parse_object_name(".g.json"), None);
    }

    #[test]
    fn node_ids_are_validated() {
        for ok in ["n", "sleet-1", "a_b-c", "A9", &"x".repeat(128)] {
            assert!(validate_node_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a.b", "a/b", "a b", "a:b", "ü", &"x".repeat(129)] {
            assert_eq!(
                validate_node_id(bad),
                Err(NODE_ID_RULE.to_string()),
                "{bad}"
            );
        }
    }

    #[test]
    fn bodies_roundtrip_and_ignore_unknown_fields() {
        let body = HeartbeatBody::new(
            "sleet-1",
            vec![
                ServiceTasks {
                    service: CompactionWorkers,
                    running: 3,
                    backoff: 0,
                },
                ServiceTasks {
                    service: Gc,
                    running: 12,
                    backoff: 1,
                },
            ],
        );
        assert_eq!(body.services[0].service, Gc, "sorted by letter: g < w");
        let json = serde_json::to_string(&body).unwrap();
        assert_eq!(serde_json::from_str::<HeartbeatBody>(&json).unwrap(), body);

        let sample = r#"{"version":1,"node_id":"sleet-1","sleet_version":"0.1.0",
            "slatedb_version":"0.14.1","future":true,
            "services":[{"service":"gc","running":12,"backoff":1,"extra":[]}]}"#;
        let parsed: HeartbeatBody = serde_json::from_str(sample).unwrap();
        assert_eq!(parsed.sleet_version, "0.1.0");
        assert_eq!(parsed.services[0].running, 12);
    }
}
