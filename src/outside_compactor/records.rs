//! What the fleet remembers about compactor epochs, under the fleet root:
//!
//! ```text
//! <root>/compactors/<encoded-db-url>/epoch-<epoch:020>.json   one per epoch a fleet coordinator took (create-only)
//! <root>/compactors/<encoded-db-url>/outside.json             the latest sighting of an outside compactor
//! ```
//!
//! An epoch record is written right after a coordinator's claim succeeds,
//! so "was this epoch the fleet's" is one HEAD. sleet 0.1.0 nodes never
//! read this directory.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::Sighting;
use crate::registry::encoded_name;
use crate::root::FleetRoot;

/// The directory of per-database compactor records.
pub const RECORDS_DIR: &str = "compactors";
const SIGHTING_FILE: &str = "outside.json";
/// Epoch records kept per database; older ones are pruned when a new one
/// is written. Only the current epoch is ever asked about, so a few cover
/// any coordinator whose claim is still in flight.
const KEPT_EPOCH_RECORDS: usize = 8;
/// A sighting larger than this is not one sleet wrote: it is ignored.
const MAX_SIGHTING_BYTES: usize = 16 * 1024;

/// A record that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {location}: {source}")]
pub struct RecordError {
    action: &'static str,
    /// The object, as `<root url>/compactors/...`.
    location: String,
    source: object_store::Error,
}

/// The body of an epoch record: who took the epoch, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochRecord {
    pub node_id: String,
    pub taken_at: DateTime<Utc>,
    pub sleet_version: String,
}

/// The fleet's compactor records for every database under one root.
#[derive(Debug, Clone)]
pub struct EpochRecords {
    root: FleetRoot,
    node_id: String,
}

impl EpochRecords {
    pub fn new(root: FleetRoot, node_id: impl Into<String>) -> Self {
        EpochRecords {
            root,
            node_id: node_id.into(),
        }
    }

    fn error(
        &self,
        action: &'static str,
        relative: &str,
        source: object_store::Error,
    ) -> RecordError {
        RecordError {
            action,
            location: self.root.describe(relative),
            source,
        }
    }

    fn dir(database: &str) -> String {
        format!("{RECORDS_DIR}/{}", encoded_name(database))
    }

    fn epoch_file(database: &str, epoch: u64) -> String {
        format!("{}/epoch-{epoch:020}.json", Self::dir(database))
    }

    fn sighting_file(database: &str) -> String {
        format!("{}/{SIGHTING_FILE}", Self::dir(database))
    }

    /// Whether a fleet coordinator recorded taking `epoch` of `database`.
    pub async fn fleet_took(&self, database: &str, epoch: u64) -> Result<bool, RecordError> {
        let file = Self::epoch_file(database, epoch);
        match self.root.store().head(&self.root.path(&file)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(source) => Err(self.error("read", &file, source)),
        }
    }

    /// Records that this node's coordinator took `epoch`, then prunes old
    /// records of the database (best effort).
    pub async fn record_taken(&self, database: &str, epoch: u64) -> Result<(), RecordError> {
        let file = Self::epoch_file(database, epoch);
        let body = EpochRecord {
            node_id: self.node_id.clone(),
            taken_at: Utc::now(),
            sleet_version: crate::SLEET_VERSION.to_string(),
        };
        let bytes = serde_json::to_vec(&body).expect("epoch records serialize");
        let put = self
            .root
            .store()
            .put_opts(
                &self.root.path(&file),
                PutPayload::from(bytes),
                PutOptions::from(PutMode::Create),
            )
            .await;
        match put {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(source) => return Err(self.error("create", &file, source)),
        }
        info!(database, epoch, "recorded the fleet's compactor epoch");
        if let Err(e) = self.prune(database, epoch).await {
            warn!(database, "failed to prune old compactor epoch records: {e}");
        }
        Ok(())
    }

    /// Deletes all but the newest few epoch records below `newest`.
    async fn prune(&self, database: &str, newest: u64) -> Result<(), RecordError> {
        let dir = Self::dir(database);
        let listed: Vec<_> = self
            .root
            .store()
            .list(Some(&self.root.path(&dir)))
            .try_collect()
            .await
            .map_err(|source| self.error("list", &dir, source))?;
        let mut epochs: Vec<(u64, object_store::path::Path)> = listed
            .into_iter()
            .filter_map(|meta| Some((parse_epoch_file(meta.location.filename()?)?, meta.location)))
            .filter(|(epoch, _)| *epoch <= newest)
            .collect();
        epochs.sort_by_key(|(epoch, _)| std::cmp::Reverse(*epoch));
        for (_, location) in epochs.into_iter().skip(KEPT_EPOCH_RECORDS) {
            match self.root.store().delete(&location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => {
                    return Err(self.error("delete", self.root.relative(&location), source));
                }
            }
        }
        Ok(())
    }

    /// The last sighting of an outside compactor, if one was saved. A
    /// file that does not parse (or is implausibly large) counts as none:
    /// the next look writes a fresh one.
    pub async fn sighting(&self, database: &str) -> Result<Option<Sighting>, RecordError> {
        let file = Self::sighting_file(database);
        let bytes = match self.root.get_bytes(&self.root.path(&file)).await {
            Ok(bytes) => bytes,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(source) => return Err(self.error("read", &file, source)),
        };
        if bytes.len() > MAX_SIGHTING_BYTES {
            warn!(file = %self.root.describe(&file), "ignoring an oversized sighting ({} bytes)", bytes.len());
            return Ok(None);
        }
        match serde_json::from_slice(&bytes) {
            Ok(sighting) => Ok(Some(sighting)),
            Err(e) => {
                warn!(file = %self.root.describe(&file), "ignoring an unreadable sighting: {e}");
                Ok(None)
            }
        }
    }

    /// Saves the sighting the fleet stands down for.
    pub async fn save_sighting(
        &self,
        database: &str,
        sighting: &Sighting,
    ) -> Result<(), RecordError> {
        let file = Self::sighting_file(database);
        let bytes = serde_json::to_vec_pretty(sighting).expect("sightings serialize");
        self.root
            .store()
            .put(&self.root.path(&file), PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|source| self.error("write", &file, source))
    }
}

/// The epoch of an `epoch-<n>.json` record name.
fn parse_epoch_file(name: &str) -> Option<u64> {
    name.strip_prefix("epoch-")?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::TimeZone;
    use object_store::memory::InMemory;
    use object_store::path::Path;

    use super::*;
    use crate::outside_compactor::Evidence;

    fn records() -> EpochRecords {
        let root = FleetRoot::from_parts(
            "memory:///fleet".into(),
            Arc::new(InMemory::new()),
            Path::from("fleet"),
        );
        EpochRecords::new(root, "n1")
    }

    #[tokio::test]
    async fn epochs_are_recorded_per_database_and_pruned() {
        let records = records();
        let db = "s3://bucket/db";
        assert!(!records.fleet_took(db, 3).await.unwrap());
        for epoch in 1..=12 {
            records.record_taken(db, epoch).await.unwrap();
        }
        records.record_taken(db, 12).await.unwrap();
        assert!(records.fleet_took(db, 12).await.unwrap());
        assert!(records.fleet_took(db, 5).await.unwrap());
        assert!(
            !records.fleet_took(db, 4).await.unwrap(),
            "pruned to the newest 8"
        );
        assert!(!records.fleet_took("s3://bucket/other", 12).await.unwrap());
        assert_eq!(
            parse_epoch_file("epoch-00000000000000000012.json"),
            Some(12)
        );
        assert_eq!(parse_epoch_file("outside.json"), None);
    }

    #[tokio::test]
    async fn sightings_round_trip_and_garbage_is_ignored() {
        let records = records();
        let db = "s3://bucket/db";
        assert_eq!(records.sighting(db).await.unwrap(), None);
        let sighting = Sighting {
            compactor_epoch: 4,
            writer_epoch: 2,
            first_seen: Utc.timestamp_opt(1_800_000_000, 0).unwrap(),
            backlog_since: None,
            evidence: Evidence::Active,
            last_write: None,
        };
        records.save_sighting(db, &sighting).await.unwrap();
        assert_eq!(records.sighting(db).await.unwrap(), Some(sighting));
        let path = records.root.path(&EpochRecords::sighting_file(db));
        records
            .root
            .store()
            .put(&path, PutPayload::from("{not json"))
            .await
            .unwrap();
        assert_eq!(records.sighting(db).await.unwrap(), None);
        let huge = vec![b' '; MAX_SIGHTING_BYTES + 1];
        records
            .root
            .store()
            .put(&path, PutPayload::from(huge))
            .await
            .unwrap();
        assert_eq!(records.sighting(db).await.unwrap(), None);
    }
}
