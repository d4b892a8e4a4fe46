//! When each copied WAL object was written at the source, kept at the
//! destination so `restore --at <time>` can stop within one WAL object.
//!
//! A copy's own `LastModified` is when the mirror wrote it, seconds (tail)
//! to a day (periodic) after the source did. So whoever copies WAL objects
//! records the source's `LastModified` and size of each, in small JSON
//! objects under `sleet-wal-times/`, named by the ids and times they
//! cover so a restore picks them from one LIST:
//!
//! `sleet-wal-times/<first id:020>-<last id:020>.<first ms:013>-<last ms:013>.json`
//!
//! body `{"wal": [[id, source ms, size], ...]}`. SlateDB ignores the
//! folder; nothing needs it to open the destination. A WAL object with no
//! record is dated by its copy's `LastModified`, which is never earlier
//! than the source's: a restore by time then keeps fewer writes, never
//! more. Records are a hint, checked against what is listed: one whose
//! size disagrees with the object is reported by verify and ignored.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::MirrorError;
use super::io::{get_bytes, list_dir};
use super::layout::{WAL_DIR, parse_wal_file};
use super::wal_run::WalTimes;
use crate::store::StoreRoot;

/// The folder of WAL time records at a destination.
pub const TIMES_DIR: &str = "sleet-wal-times";

/// One copied WAL object: its id, when the source wrote it, its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalRecord {
    pub id: u64,
    pub written: DateTime<Utc>,
    pub size: u64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Body {
    /// `[id, source LastModified in ms since the epoch, size]`.
    wal: Vec<(u64, i64, u64)>,
}

/// The ids and times a record object covers, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub first: u64,
    pub last: u64,
    pub first_ms: i64,
    pub last_ms: i64,
}

/// The name of the object holding `records` (sorted by id, not empty).
pub fn object_name(records: &[WalRecord]) -> Option<String> {
    let (first, last) = (records.first()?, records.last()?);
    Some(format!(
        "{TIMES_DIR}/{:020}-{:020}.{:013}-{:013}.json",
        first.id,
        last.id,
        first.written.timestamp_millis(),
        last.written.timestamp_millis()
    ))
}

/// The span of a record object's file name; `None` for any other name.
pub fn parse_span(file: &str) -> Option<Span> {
    let stem = file.strip_suffix(".json")?;
    let (ids, times) = stem.split_once('.')?;
    let (first, last) = ids.split_once('-')?;
    let (first_ms, last_ms) = times.split_once('-')?;
    let span = Span {
        first: first.parse().ok()?,
        last: last.parse().ok()?,
        first_ms: first_ms.parse().ok()?,
        last_ms: last_ms.parse().ok()?,
    };
    (span.first <= span.last).then_some(span)
}

/// Writes one record object for `records` (nothing when empty). A failed
/// write loses only precision: those objects are dated by their copies.
pub async fn record(root: &StoreRoot, mut records: Vec<WalRecord>) -> Result<(), MirrorError> {
    records.sort_by_key(|r| r.id);
    records.dedup_by_key(|r| r.id);
    let Some(name) = object_name(&records) else {
        return Ok(());
    };
    let body = Body {
        wal: records
            .iter()
            .map(|r| (r.id, r.written.timestamp_millis(), r.size))
            .collect(),
    };
    let bytes = serde_json::to_vec(&body).expect("plain numbers serialize");
    use object_store::ObjectStoreExt;
    root.store
        .put(&root.path(&name), bytes.into())
        .await
        .map_err(|e| MirrorError::Store {
            action: "write".into(),
            location: format!("{}/{name}", root.url),
            message: e.to_string(),
        })?;
    Ok(())
}

/// The record objects under a root, by name, with their spans.
pub async fn list_spans(root: &StoreRoot) -> Result<BTreeMap<String, Span>, MirrorError> {
    Ok(list_dir(root, TIMES_DIR)
        .await?
        .into_keys()
        .filter_map(|name| {
            let span = parse_span(name.rsplit('/').next()?)?;
            Some((name, span))
        })
        .collect())
}

/// The records of the objects `pick` chooses among `spans`, by id. An
/// unreadable or malformed object is skipped with a warning: its WAL
/// objects fall back to their copies' times.
pub async fn read_records(
    root: &StoreRoot,
    spans: &BTreeMap<String, Span>,
    pick: impl Fn(&Span) -> bool,
) -> Result<BTreeMap<u64, WalRecord>, MirrorError> {
    let mut records = BTreeMap::new();
    for (name, _) in spans.iter().filter(|(_, span)| pick(span)) {
        let Some(body) = get_bytes(root, name).await? else {
            continue;
        };
        let Ok(body) = serde_json::from_slice::<Body>(&body) else {
            tracing::warn!("{}/{name} is not a WAL time record; ignoring it", root.url);
            continue;
        };
        for (id, ms, size) in body.wal {
            if let Some(written) = DateTime::from_timestamp_millis(ms) {
                records.insert(id, WalRecord { id, written, size });
            }
        }
    }
    Ok(records)
}

/// A root's WAL objects (id to size), and when each was written at the
/// source: its record where one was read and agrees on the size, else its
/// copy's `LastModified` (never earlier than the source's).
#[derive(Debug, Default)]
pub struct WalListing {
    pub sizes: BTreeMap<u64, u64>,
    pub times: WalTimes,
    /// Records whose size disagrees with the object listed under that id.
    pub disagreeing: Vec<String>,
    spans: BTreeMap<String, Span>,
}

impl WalListing {
    /// Lists a root's WAL (dated by the copies) and its record objects.
    pub async fn list(root: &StoreRoot) -> Result<WalListing, MirrorError> {
        let mut listing = WalListing::default();
        for (name, meta) in list_dir(root, WAL_DIR).await? {
            let Some(id) = name.strip_prefix("wal/").and_then(parse_wal_file) else {
                continue;
            };
            listing.sizes.insert(id, meta.size);
            listing.times.insert(id, meta.last_modified);
        }
        listing.spans = list_spans(root).await?;
        Ok(listing)
    }

    /// The WAL ids listed.
    pub fn ids(&self) -> std::collections::BTreeSet<u64> {
        self.sizes.keys().copied().collect()
    }

    /// Dates the WAL by the record objects `pick` chooses.
    pub async fn date(
        &mut self,
        root: &StoreRoot,
        pick: impl Fn(&Span) -> bool,
    ) -> Result<(), MirrorError> {
        for (id, record) in read_records(root, &self.spans, pick).await? {
            match self.sizes.get(&id) {
                Some(&size) if size == record.size => {
                    self.times.insert(id, record.written);
                }
                Some(&size) => self.disagreeing.push(format!(
                    "wal/{id:020}.sst is {size} bytes, but the source's was {} when it was copied",
                    record.size
                )),
                None => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_name_says_its_ids_and_times_and_parses_back() {
        let at = |ms| DateTime::from_timestamp_millis(ms).expect("a time");
        let records = [
            WalRecord {
                id: 7,
                written: at(1_765_000_000_123),
                size: 10,
            },
            WalRecord {
                id: 9,
                written: at(1_765_000_000_456),
                size: 0,
            },
        ];
        let name = object_name(&records).expect("a name");
        assert_eq!(
            name,
            "sleet-wal-times/00000000000000000007-00000000000000000009.1765000000123-1765000000456.json"
        );
        assert_eq!(
            parse_span(name.rsplit('/').next().expect("a file")),
            Some(Span {
                first: 7,
                last: 9,
                first_ms: 1_765_000_000_123,
                last_ms: 1_765_000_000_456
            })
        );
        assert_eq!(object_name(&[]), None);
        assert_eq!(
            parse_span("00000000000000000009-00000000000000000007.1-2.json"),
            None
        );
        assert_eq!(parse_span("notes.json"), None);
    }
}
