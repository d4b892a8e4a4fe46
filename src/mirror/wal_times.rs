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
use super::io::{get_bytes, list_dir, list_wal_after};
use super::layout::wal_name;
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

/// The records of the objects `pick` chooses among `spans` (an id may
/// have more than one: a pass and the tail may both copy it). An
/// unreadable or malformed object is skipped with a warning: its WAL
/// objects fall back to their copies' times.
pub async fn read_records(
    root: &StoreRoot,
    spans: &BTreeMap<String, Span>,
    pick: impl Fn(&Span) -> bool,
) -> Result<Vec<WalRecord>, MirrorError> {
    let mut records = Vec::new();
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
                records.push(WalRecord { id, written, size });
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
        for (id, meta) in list_wal_after(root, 0).await? {
            listing.sizes.insert(id, meta.size);
            listing.times.insert(id, meta.last_modified);
        }
        listing.spans = list_spans(root).await?;
        Ok(listing)
    }

    /// The WAL objects' sizes by root-relative name, as
    /// [`super::io::data_sizes`] gives them, from this listing.
    pub fn named_sizes(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.sizes.iter().map(|(&id, &size)| (wal_name(id), size))
    }

    /// The WAL ids listed.
    pub fn ids(&self) -> std::collections::BTreeSet<u64> {
        self.sizes.keys().copied().collect()
    }

    /// Dates the WAL for a decision "written by `at`?" reading as few
    /// record objects as it can: a record object whose span the name says
    /// ends by `at` dates its objects by its last time (no later than
    /// their own, and not after `at`), one that begins after `at` by its
    /// first (after `at`); only those that straddle `at` (usually one)
    /// are read for their objects' own times.
    pub async fn date_around(
        &mut self,
        root: &StoreRoot,
        at: DateTime<Utc>,
    ) -> Result<(), MirrorError> {
        let at_ms = at.timestamp_millis();
        for span in self.spans.values() {
            let bound = if span.last_ms <= at_ms {
                span.last_ms
            } else if span.first_ms > at_ms {
                span.first_ms
            } else {
                continue;
            };
            let Some(bound) = DateTime::from_timestamp_millis(bound) else {
                continue;
            };
            for (_, time) in self.times.range_mut(span.first..=span.last) {
                *time = bound;
            }
        }
        self.date(root, |span| span.first_ms <= at_ms && at_ms < span.last_ms)
            .await
    }

    /// Dates the WAL by the record objects `pick` chooses.
    pub async fn date(
        &mut self,
        root: &StoreRoot,
        pick: impl Fn(&Span) -> bool,
    ) -> Result<(), MirrorError> {
        for record in read_records(root, &self.spans, pick).await? {
            let id = record.id;
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
    use std::sync::Arc;

    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(ms).expect("a time")
    }

    /// WAL 1..=6 copied (their copies all dated 10 s after the fact),
    /// recorded in three objects: 1-2 at 1.0-1.1 s, 3-4 at 2.0-2.2 s, 5-6
    /// at 3.0-3.1 s. Around 2.1 s only the middle object is read: 1-2 are
    /// dated by their span's end, 5-6 by its start, 3-4 by their records.
    #[tokio::test]
    async fn dating_around_a_time_reads_only_the_record_that_straddles_it() {
        let root = StoreRoot {
            url: "memory:///dest".into(),
            store: Arc::new(InMemory::new()),
            prefix: "dest".into(),
            address: None,
        };
        for id in 1..=6u64 {
            root.store
                .put(
                    &root.path(&crate::mirror::layout::wal_name(id)),
                    vec![7u8; 3].into(),
                )
                .await
                .unwrap();
        }
        let record = |id, ms| WalRecord {
            id,
            written: at(ms),
            size: 3,
        };
        record_all(&root, vec![record(1, 1_000), record(2, 1_100)]).await;
        record_all(&root, vec![record(3, 2_000), record(4, 2_200)]).await;
        record_all(&root, vec![record(5, 3_000), record(6, 3_100)]).await;
        // A record the object disagrees with is reported, not used.
        record_all(
            &root,
            vec![WalRecord {
                size: 9,
                ..record(6, 3_050)
            }],
        )
        .await;
        let mut listing = WalListing::list(&root).await.unwrap();
        listing.date_around(&root, at(2_100)).await.unwrap();
        let ms = |id| listing.times[&id].timestamp_millis();
        assert_eq!((ms(1), ms(2)), (1_100, 1_100));
        assert_eq!((ms(3), ms(4)), (2_000, 2_200));
        assert!(ms(5) > 2_100 && ms(6) > 2_100);
        assert!(
            listing.disagreeing.is_empty(),
            "not read: {:?}",
            listing.disagreeing
        );

        let mut all = WalListing::list(&root).await.unwrap();
        all.date(&root, |_| true).await.unwrap();
        assert_eq!(all.times[&6].timestamp_millis(), 3_100);
        assert_eq!(all.disagreeing.len(), 1, "{:?}", all.disagreeing);
    }

    async fn record_all(root: &StoreRoot, records: Vec<WalRecord>) {
        record(root, records).await.unwrap();
    }

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
