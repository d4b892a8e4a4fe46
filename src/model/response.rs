//! What one-shot commands return: the CLI's `--format json` output and the
//! Rust facade's return values are the same types, and
//! `schema/cli.schema.json` is generated from them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::duration::HumanDuration;
use crate::model::service::Service;

/// `sleet register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RegisterResponse {
    /// The canonical database URL.
    pub url: String,
    /// The registry file, relative to the fleet root.
    pub file: String,
    /// `false` when the database was already registered.
    pub created: bool,
    /// What the check of the database found, such as a compactor running
    /// inside its writer (the fleet will not compact it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `sleet status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusResponse {
    /// Every node with a heartbeat, live or not, sorted by id.
    pub nodes: Vec<NodeStatus>,
    /// Every registered database, sorted by canonical URL.
    pub databases: Vec<DatabaseStatus>,
    /// Mirror lag per (database, target), with `--mirrors`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<MirrorStatus>,
    /// The stores the fleet's nodes checked, from their records under
    /// `stores/`, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stores: Vec<StoreStatus>,
    /// Anything skipped or suspicious, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One store as its latest recorded check found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoreStatus {
    /// `s3://bucket`, `gs://bucket`, `az://container`, `file://`, ...
    pub store: String,
    /// `safe`, `trusted` (by `[stores.trusted]`, whatever the check
    /// says), `unsafe` (nothing writes there) or `unchecked` (the check
    /// could not prove a needed property; nodes check again).
    pub trust: String,
    /// The operator's reason, when trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_because: Option<String>,
    /// Needed properties the check failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// When the check ran (RFC 3339), and whether it is past
    /// `recheck_after` (the next node to need the store checks again).
    pub checked_at: String,
    pub expired: bool,
    /// The sleet release that ran it.
    pub sleet_version: String,
    /// The store's clock minus the checking node's, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_seconds: Option<f64>,
}

/// One node, from its youngest heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeStatus {
    pub node_id: String,
    /// Whether the heartbeat is younger than `heartbeat_timeout`.
    pub live: bool,
    /// Age of the heartbeat, in whole seconds.
    pub heartbeat_age: HumanDuration,
    /// Services the node offers, from its heartbeat name.
    pub services: Vec<Service>,
    /// Absent when the heartbeat body could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleet_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slatedb_version: Option<String>,
    /// The fleet root's clock against the node's, from its heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::model::heartbeat::ClockReading>,
    /// Whether the store's events reach the node (`[events]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<crate::model::heartbeat::EventsReport>,
}

/// One registered database and who runs its services.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DatabaseStatus {
    /// The canonical database URL.
    pub url: String,
    /// One entry per resolved service (one per applied target for mirror),
    /// in config order.
    pub services: Vec<ServicePlacement>,
    /// Compaction queue depth, with `--compactions` when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueStatus>,
    /// Set when live nodes stand down because a compactor outside the
    /// fleet (usually one inside the application's writer) holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_compactor: Option<OutsideCompactorStatus>,
}

/// A compactor the fleet did not start holds a database, so the fleet
/// runs neither its coordinator nor its workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OutsideCompactorStatus {
    /// The outside compactor's epoch.
    pub compactor_epoch: u64,
    /// When the fleet first stood down for it (RFC 3339).
    pub since: String,
    /// `active` (it wrote `.compactions` recently) or `presumed` (quiet,
    /// not proven gone).
    pub evidence: String,
    /// The live nodes that stand down for it.
    pub nodes: Vec<String>,
    /// How to let the fleet compact it.
    pub fix: String,
}

/// Compaction jobs of one database, from its `.compactions` file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QueueStatus {
    /// Jobs submitted or scheduled, waiting for a worker.
    pub claimable: u64,
    /// Jobs a worker holds.
    pub running: u64,
}

/// The owners of one service of one database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServicePlacement {
    pub service: Service,
    /// The mirror target, for `mirror` entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Owning nodes, best ranked first; empty when no live node offers it.
    pub nodes: Vec<String>,
}

/// `sleet mirror sync`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MirrorSyncResponse {
    /// The canonical source database URL.
    pub database: String,
    pub target: String,
    /// The canonical destination root.
    pub destination: String,
    /// The source manifest the destination now holds.
    pub head: u64,
    /// `false` when the destination was already caught up.
    pub committed: bool,
    pub manifests_committed: u64,
    pub objects_copied: u64,
    /// Bytes copied, where the copier reports them (rclone does not).
    pub bytes_copied: u64,
    pub pruned_manifests: u64,
    pub pruned_objects: u64,
}

/// `sleet mirror restore`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MirrorRestoreResponse {
    /// The backup root, as given.
    pub backup: String,
    /// The destination root, as given.
    pub destination: String,
    /// The database the backup mirrors, from its `sleet-mirror-source.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The restored manifest: the destination's latest.
    pub manifest_id: u64,
    /// The newest WAL id restored: the restored database replays the WAL
    /// after the manifest's replay point up to it (absent from restores
    /// by sleet before 0.2).
    #[serde(default)]
    pub wal_end: u64,
    /// When the source wrote that WAL object: the newest write restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_write: Option<chrono::DateTime<chrono::Utc>>,
    pub manifests_committed: u64,
    pub objects_copied: u64,
    pub bytes_copied: u64,
}

/// How far one mirror target trails its source (`status --mirrors`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MirrorStatus {
    pub database: String,
    pub target: String,
    pub destination: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_manifest_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest_manifest_id: Option<u64>,
    /// The difference of manifest ids (ids have gaps), not a count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests_behind: Option<u64>,
    /// Source WAL objects the destination has not got yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal_behind: Option<u64>,
    /// Age of the destination's data against the source's, by the source's
    /// sequence tracker (about one-minute resolution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_behind: Option<u64>,
    /// The recovery point: how far the newest write a restore of the
    /// destination brings back (its newest restore point and WAL run)
    /// trails the source's newest durable write (its newest WAL object),
    /// in seconds, by the source's own times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point_seconds: Option<f64>,
    /// Why the lag could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
