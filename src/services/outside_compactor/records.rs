//! What the fleet remembers about compactor epochs, under the fleet root:
//!
//! ```text
//! <root>/compactors/<encoded-db-url>/<epoch:020>/<node>.claiming-<writer-epoch>   before a claim
//! <root>/compactors/<encoded-db-url>/<epoch:020>/<node>.claimed                   after it succeeded
//! <root>/compactors/<encoded-db-url>/<epoch:020>/<node>.released                  once its coordinator stopped
//! <root>/compactors/<encoded-db-url>/outside.json                                 the latest outside-compactor sighting
//! ```
//!
//! A coordinator writes its *claiming* record before it claims, so there is
//! no moment at which the fleet holds an epoch it has not written down,
//! even if the node dies or is cancelled mid-claim (SlateDB may bump the
//! epoch before it returns). The claim itself is SlateDB's
//! compare-and-swap on the epoch the node saw, so a claiming record can
//! only be wrong if another compactor won that race; then the record is
//! withdrawn. Should the withdrawal be lost too, the record still counts
//! only while the writer epoch is the one it names: a writer that runs its
//! own compactor opens (a new writer epoch) before that compactor claims.
//! The *claimed* record, written once the claim is confirmed, counts for
//! good. One LIST of an epoch's directory answers "is this epoch the
//! fleet's", and which node holds it. The *released* record, written
//! once that node's coordinator has stopped, tells the node that gains
//! the database it may start its own without running beside it (see
//! [`super::handover`]). sleet 0.1.0 nodes never read this directory;
//! earlier 0.2 nodes skip names they do not know.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::Sighting;
use crate::fleet::root::FleetRoot;
use crate::model::registry::encoded_name;
use crate::plugin::hook::{Clock, system_clock};

/// The directory of per-database compactor records.
pub const RECORDS_DIR: &str = "compactors";
const SIGHTING_FILE: &str = "outside.json";
const CLAIMED: &str = "claimed";
const CLAIMING: &str = "claiming-";
const RELEASED: &str = "released";
/// Epochs whose records are kept per database; older ones are pruned when
/// a claim is confirmed. Only the current epoch is ever asked about.
const KEPT_EPOCHS: usize = 8;
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

/// The body of a record, for people reading the root: who and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RecordBody {
    node_id: String,
    at: chrono::DateTime<Utc>,
    sleet_version: String,
}

/// The fleet's compactor records for every database under one root.
#[derive(Clone)]
pub struct EpochRecords {
    root: FleetRoot,
    node_id: String,
    /// The node's wall clock: what records are stamped and heartbeats
    /// judged by.
    clock: Clock,
    /// How long a coordinator waits for the node holding the epoch to
    /// hand it over (zero: no wait), and how often it looks meanwhile.
    handover: HandoverLimits,
}

impl std::fmt::Debug for EpochRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpochRecords")
            .field("node_id", &self.node_id)
            .field("handover", &self.handover)
            .finish_non_exhaustive()
    }
}

/// See [`super::handover`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandoverLimits {
    /// The fleet's heartbeat timeout: a holder whose heartbeat is older
    /// is gone, and no wait lasts longer.
    pub timeout: std::time::Duration,
    /// How often a waiting coordinator looks (a node uses a quarter of
    /// its heartbeat interval).
    pub poll: std::time::Duration,
}

/// The node holding an epoch, from its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochHolder {
    pub node_id: String,
    /// Whether it confirmed the claim (rather than only set out to).
    pub confirmed: bool,
    /// Whether its coordinator has stopped since.
    pub released: bool,
}

impl EpochRecords {
    pub fn new(root: FleetRoot, node_id: impl Into<String>) -> Self {
        EpochRecords {
            root,
            node_id: node_id.into(),
            clock: system_clock(),
            handover: HandoverLimits::default(),
        }
    }

    /// These records, stamped and judged by `clock` (the node's).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The node's wall time.
    pub fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    /// These records, with coordinators that wait up to `limits` for a
    /// handover.
    pub fn with_handover(mut self, limits: HandoverLimits) -> Self {
        self.handover = limits;
        self
    }

    pub fn handover_limits(&self) -> HandoverLimits {
        self.handover
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    pub fn root(&self) -> &FleetRoot {
        &self.root
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

    fn epoch_dir(database: &str, epoch: u64) -> String {
        format!("{}/{epoch:020}", Self::dir(database))
    }

    fn claiming_file(&self, database: &str, epoch: u64, writer_epoch: u64) -> String {
        format!(
            "{}/{}.{CLAIMING}{writer_epoch}",
            Self::epoch_dir(database, epoch),
            self.node_id
        )
    }

    fn claimed_file(&self, database: &str, epoch: u64) -> String {
        format!(
            "{}/{}.{CLAIMED}",
            Self::epoch_dir(database, epoch),
            self.node_id
        )
    }

    fn released_file(&self, database: &str, epoch: u64) -> String {
        format!(
            "{}/{}.{RELEASED}",
            Self::epoch_dir(database, epoch),
            self.node_id
        )
    }

    fn sighting_file(database: &str) -> String {
        format!("{}/{SIGHTING_FILE}", Self::dir(database))
    }

    /// Whether `epoch` of `database` is the fleet's: some node confirmed
    /// claiming it, or set out to claim it while the writer epoch was
    /// `writer_epoch` (the current one).
    pub async fn fleet_took(
        &self,
        database: &str,
        epoch: u64,
        writer_epoch: u64,
    ) -> Result<bool, RecordError> {
        let listed = self.list(&Self::epoch_dir(database, epoch)).await?;
        Ok(listed.iter().any(|meta| {
            meta.location
                .filename()
                .and_then(parse_record_name)
                .is_some_and(|(_, record)| match record {
                    Record::Claimed | Record::Released => true,
                    Record::Claiming { writer_epoch: w } => w == writer_epoch,
                })
        }))
    }

    /// The node holding `epoch` of `database`: the newest confirmed
    /// claim, else the newest claim set out on; `None` when no fleet node
    /// recorded one.
    pub async fn holder(
        &self,
        database: &str,
        epoch: u64,
    ) -> Result<Option<EpochHolder>, RecordError> {
        let listed = self.list(&Self::epoch_dir(database, epoch)).await?;
        let records: Vec<(String, Record, chrono::DateTime<Utc>)> = listed
            .iter()
            .filter_map(|meta| {
                let (node, record) = parse_record_name(meta.location.filename()?)?;
                Some((node, record, meta.last_modified))
            })
            .collect();
        let newest = |confirmed: bool| {
            records
                .iter()
                .filter(|(_, record, _)| match record {
                    Record::Claimed => confirmed,
                    Record::Claiming { .. } => !confirmed,
                    Record::Released => false,
                })
                .max_by_key(|(_, _, at)| *at)
                .map(|(node, ..)| (node.clone(), confirmed))
        };
        Ok(newest(true)
            .or_else(|| newest(false))
            .map(|(node_id, confirmed)| {
                let released = records
                    .iter()
                    .any(|(node, record, _)| *node == node_id && *record == Record::Released);
                EpochHolder {
                    node_id,
                    confirmed,
                    released,
                }
            }))
    }

    /// Whether `node` has a heartbeat younger than `timeout` (by this
    /// machine's clock, as every node judges liveness).
    pub async fn node_live(
        &self,
        node: &str,
        timeout: std::time::Duration,
    ) -> Result<bool, RecordError> {
        let listed = self.list(crate::fleet::root::NODES_DIR).await?;
        let heartbeats = crate::fleet::root::heartbeats_in(listed);
        let view = crate::fleet::root::node_view(&heartbeats, self.now(), timeout);
        Ok(view.get(node).is_some_and(|sighting| sighting.live))
    }

    /// Records that this node's coordinator holding `epoch` has stopped
    /// (best effort: without it, the next holder waits out the limit).
    pub async fn release(&self, database: &str, epoch: u64) {
        if let Err(e) = self.create(&self.released_file(database, epoch)).await {
            warn!(
                database,
                epoch, "failed to record that the coordinator stopped: {e}"
            );
        }
    }

    /// Writes down, before claiming, that this node is about to claim
    /// `epoch` while the writer epoch is `writer_epoch`.
    pub async fn intend(
        &self,
        database: &str,
        epoch: u64,
        writer_epoch: u64,
    ) -> Result<(), RecordError> {
        let file = self.claiming_file(database, epoch, writer_epoch);
        self.create(&file).await
    }

    /// Takes back a claiming record whose claim lost to another compactor.
    /// Retried a few times: a stale record would count while the writer
    /// epoch stands.
    pub async fn withdraw(&self, database: &str, epoch: u64, writer_epoch: u64) {
        let file = self.claiming_file(database, epoch, writer_epoch);
        for attempt in 1..=5 {
            match self.root.store().delete(&self.root.path(&file)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => return,
                Err(e) => {
                    warn!(
                        database,
                        epoch, attempt, "failed to withdraw a claiming record: {e}"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
                }
            }
        }
    }

    /// Records that this node's coordinator holds `epoch`, then prunes old
    /// records of the database (best effort).
    pub async fn confirm(&self, database: &str, epoch: u64) -> Result<(), RecordError> {
        self.create(&self.claimed_file(database, epoch)).await?;
        info!(database, epoch, "recorded the fleet's compactor epoch");
        if let Err(e) = self.prune(database, epoch).await {
            warn!(database, "failed to prune old compactor epoch records: {e}");
        }
        Ok(())
    }

    /// Every object under `dir` (root-relative).
    async fn list(&self, dir: &str) -> Result<Vec<object_store::ObjectMeta>, RecordError> {
        self.root
            .store()
            .list(Some(&self.root.path(dir)))
            .try_collect()
            .await
            .map_err(|source| self.error("list", dir, source))
    }

    /// A create-only record; one that exists already is as good.
    async fn create(&self, file: &str) -> Result<(), RecordError> {
        let body = RecordBody {
            node_id: self.node_id.clone(),
            at: self.now(),
            sleet_version: crate::model::version::SLEET_VERSION.to_string(),
        };
        let bytes = serde_json::to_vec(&body).expect("records serialize");
        let put = self
            .root
            .store()
            .put_opts(
                &self.root.path(file),
                PutPayload::from(bytes),
                PutOptions::from(PutMode::Create),
            )
            .await;
        match put {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
            Err(source) => Err(self.error("create", file, source)),
        }
    }

    /// Deletes the records of all but the newest few epochs at or below
    /// `newest`.
    async fn prune(&self, database: &str, newest: u64) -> Result<(), RecordError> {
        let dir = Self::dir(database);
        let listed = self.list(&dir).await?;
        let epoch_of = |meta: &object_store::ObjectMeta| -> Option<u64> {
            let relative = self.root.relative(&meta.location);
            let (epoch, name) = relative.strip_prefix(&format!("{dir}/"))?.split_once('/')?;
            parse_record_name(name)?;
            epoch.parse().ok()
        };
        let mut epochs: Vec<u64> = listed.iter().filter_map(epoch_of).collect();
        epochs.sort_unstable();
        epochs.dedup();
        let keep_from = epochs
            .iter()
            .rev()
            .filter(|e| **e <= newest)
            .nth(KEPT_EPOCHS - 1)
            .copied()
            .unwrap_or(0);
        for meta in &listed {
            if epoch_of(meta).is_some_and(|e| e < keep_from) {
                match self.root.store().delete(&meta.location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(source) => {
                        return Err(self.error(
                            "delete",
                            self.root.relative(&meta.location),
                            source,
                        ));
                    }
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

/// One record in an epoch's directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    Claimed,
    Claiming { writer_epoch: u64 },
    Released,
}

/// Parses `<node>.claimed`, `<node>.claiming-<writer epoch>` or
/// `<node>.released` into the node and the record.
fn parse_record_name(name: &str) -> Option<(String, Record)> {
    let (node, kind) = name.rsplit_once('.')?;
    let record = match kind {
        CLAIMED => Record::Claimed,
        RELEASED => Record::Released,
        _ => Record::Claiming {
            writer_epoch: kind.strip_prefix(CLAIMING)?.parse().ok()?,
        },
    };
    Some((node.to_string(), record))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::TimeZone;
    use object_store::memory::InMemory;
    use object_store::path::Path;

    use super::*;
    use crate::services::outside_compactor::Evidence;

    fn records(node: &str, store: &Arc<InMemory>) -> EpochRecords {
        let root =
            FleetRoot::from_parts("memory:///fleet".into(), store.clone(), Path::from("fleet"));
        EpochRecords::new(root, node)
    }

    #[tokio::test]
    async fn claims_count_while_their_writer_epoch_stands_and_confirmations_for_good() {
        let store = Arc::new(InMemory::new());
        let (a, b) = (records("a", &store), records("b", &store));
        let db = "s3://bucket/db";
        assert!(!a.fleet_took(db, 3, 1).await.unwrap());
        a.intend(db, 3, 1).await.unwrap();
        assert!(
            b.fleet_took(db, 3, 1).await.unwrap(),
            "in flight, same writer"
        );
        assert!(
            !b.fleet_took(db, 3, 2).await.unwrap(),
            "a writer opened since: its own compactor may hold the epoch"
        );
        a.confirm(db, 3).await.unwrap();
        assert!(b.fleet_took(db, 3, 2).await.unwrap(), "confirmed for good");
        // b lost a race for epoch 4 and withdraws; a's records stay.
        b.intend(db, 4, 2).await.unwrap();
        b.withdraw(db, 4, 2).await;
        assert!(!a.fleet_took(db, 4, 2).await.unwrap());
        assert!(a.fleet_took(db, 3, 2).await.unwrap());
        assert!(!a.fleet_took("s3://bucket/other", 3, 1).await.unwrap());
    }

    #[tokio::test]
    async fn the_holder_is_the_confirmed_claimer_until_it_releases() {
        let store = Arc::new(InMemory::new());
        let (a, b) = (records("a", &store), records("b", &store));
        let db = "s3://bucket/db";
        assert_eq!(b.holder(db, 3).await.unwrap(), None, "nobody recorded it");
        a.intend(db, 3, 1).await.unwrap();
        let held = b.holder(db, 3).await.unwrap().unwrap();
        assert_eq!((held.node_id.as_str(), held.confirmed), ("a", false));
        a.confirm(db, 3).await.unwrap();
        // b set out to claim the same epoch and lost: a still holds it.
        b.intend(db, 3, 1).await.unwrap();
        let held = b.holder(db, 3).await.unwrap().unwrap();
        assert_eq!(
            (held.node_id.as_str(), held.confirmed, held.released),
            ("a", true, false)
        );
        a.release(db, 3).await;
        assert!(b.holder(db, 3).await.unwrap().unwrap().released);
        assert!(b.fleet_took(db, 3, 9).await.unwrap(), "still the fleet's");
    }

    #[tokio::test]
    async fn confirming_prunes_old_epochs() {
        let store = Arc::new(InMemory::new());
        let a = records("a", &store);
        let db = "s3://bucket/db";
        for epoch in 1..=12 {
            a.intend(db, epoch, 1).await.unwrap();
            a.confirm(db, epoch).await.unwrap();
        }
        assert!(a.fleet_took(db, 12, 9).await.unwrap());
        assert!(a.fleet_took(db, 5, 9).await.unwrap());
        assert!(
            !a.fleet_took(db, 4, 1).await.unwrap(),
            "pruned to the newest 8"
        );
        assert_eq!(
            parse_record_name("n-1.claimed"),
            Some(("n-1".into(), Record::Claimed))
        );
        assert_eq!(
            parse_record_name("n-1.claiming-7"),
            Some(("n-1".into(), Record::Claiming { writer_epoch: 7 }))
        );
        assert_eq!(
            parse_record_name("n-1.released"),
            Some(("n-1".into(), Record::Released))
        );
        assert_eq!(parse_record_name("outside.json"), None);
    }

    #[tokio::test]
    async fn sightings_round_trip_and_garbage_is_ignored() {
        let store = Arc::new(InMemory::new());
        let records = records("n1", &store);
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
