//! Each test binary uses part of these helpers.
#![allow(dead_code)]
//! Real SlateDB databases for the node tests: writers, and manifest views.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use slatedb::admin::AdminBuilder;
use slatedb::config::DbReaderOptions;
use slatedb::config::{FlushOptions, FlushType, Settings};
use slatedb::{Db, DbReader, DbReaderMode};

/// Writer settings that make many small L0 SSTs quickly, with no embedded
/// compactor or GC: the fleet's nodes must do that work.
pub fn tiny_settings() -> Settings {
    sleet::commands::demo::small_sst_writer_settings()
}

pub fn open_store(url: &str) -> (Arc<dyn ObjectStore>, Path) {
    crate::common::test_store(url)
}

pub fn key(round: usize, i: usize) -> String {
    format!("key-{round:03}-{i:03}")
}

pub fn value(round: usize, i: usize) -> Vec<u8> {
    format!("{round}:{i}:").repeat(64).into_bytes()
}

/// A writer on a database URL.
pub async fn open_writer(url: &str) -> Db {
    let (store, path) = open_store(url);
    Db::builder(path, store)
        .with_settings(tiny_settings())
        .build()
        .await
        .expect("a SlateDB writer")
}

/// Writes `rounds` rounds of 32 keys, each round flushed into its own L0.
pub async fn write_rounds(db: &Db, rounds: std::ops::Range<usize>) {
    for round in rounds {
        for i in 0..32 {
            db.put(key(round, i), value(round, i)).await.expect("put");
        }
        db.flush_with_options(FlushOptions {
            flush_type: FlushType::MemTable,
        })
        .await
        .expect("memtable flush");
    }
}

/// Creates a database with `rounds` flushed rounds and closes the writer.
pub async fn seed(url: &str, rounds: usize) {
    let db = open_writer(url).await;
    write_rounds(&db, 0..rounds).await;
    db.close().await.expect("close");
}

/// The latest manifest.
async fn latest_manifest(url: &str) -> slatedb::VersionedManifest {
    let (store, path) = open_store(url);
    AdminBuilder::new(path, store)
        .build()
        .read_manifest(None)
        .await
        .expect("read manifest")
        .expect("a manifest")
}

/// The WAL ids a reader of the latest manifest replays: those strictly
/// between the two (empty when the last memtable flush covered them all).
pub async fn wal_window(url: &str) -> (u64, u64) {
    let manifest = latest_manifest(url).await;
    (manifest.replay_after_wal_id(), manifest.next_wal_sst_id())
}

/// The latest manifest's L0 count and sorted-run count.
pub async fn shape(url: &str) -> (usize, usize) {
    let manifest = latest_manifest(url).await;
    (manifest.l0().len(), manifest.compacted().len())
}

/// The latest manifest's compactor epoch.
pub async fn compactor_epoch(url: &str) -> u64 {
    latest_manifest(url).await.compactor_epoch()
}

/// The latest manifest's `next_wal_sst_id`.
pub async fn next_wal_sst_id(url: &str) -> u64 {
    latest_manifest(url).await.next_wal_sst_id()
}

/// Object names under `<db>/<dir>/`, on any store.
pub async fn objects(url: &str, dir: &str) -> BTreeSet<String> {
    let (store, path) = open_store(url);
    let prefix = path.clone().join(dir);
    store
        .list(Some(&prefix))
        .map_ok(|meta| meta.location.filename().unwrap_or_default().to_string())
        .try_collect()
        .await
        .expect("list")
}

/// A fresh read-only view (no writes to the database) sees every key
/// written in `rounds`: the manifest and every SST it names are intact.
///
/// A `FollowLatest` reader pins nothing, so on a source whose GC runs with
/// the tests' one-second `min_age` an SST can go between the reader's
/// manifest read and its SST read; such a read is retried from a fresh
/// manifest. Mirror destinations have no GC and never retry.
pub async fn assert_reader_sees(url: &str, rounds: std::ops::Range<usize>) {
    assert_reader_sees_in(url, open_store(url), rounds).await;
}

/// [`assert_reader_sees`] for a database at `root` of `store` (named
/// `label` in failures): one on a server the URL alone does not reach.
pub async fn assert_reader_sees_in(
    label: &str,
    (store, root): (Arc<dyn ObjectStore>, Path),
    rounds: std::ops::Range<usize>,
) {
    for attempt in 1..=5 {
        match read_all(label, (store.clone(), root.clone()), rounds.clone()).await {
            Ok(()) => return,
            Err(e) if attempt < 5 && e.contains("NotFound") => continue,
            Err(e) => panic!("{label}: {e}"),
        }
    }
}

async fn read_all(
    url: &str,
    (store, root): (Arc<dyn ObjectStore>, Path),
    rounds: std::ops::Range<usize>,
) -> Result<(), String> {
    let reader = open_reader_in(store, root).await?;
    check_keys(url, rounds, |k| {
        let reader = &reader;
        async move {
            let got = reader
                .get(k)
                .await
                .map_err(|e| format!("reader get: {e:?}"))?;
            Ok(got.map(|b| b.to_vec()))
        }
    })
    .await?;
    reader
        .close()
        .await
        .map_err(|e| format!("reader close: {e:?}"))
}

/// A `FollowLatest` reader, which writes nothing to the database.
pub async fn open_reader(url: &str) -> Result<DbReader, String> {
    let (store, path) = open_store(url);
    open_reader_in(store, path).await
}

/// [`open_reader`] for a database at `path` of `store`.
async fn open_reader_in(store: Arc<dyn ObjectStore>, path: Path) -> Result<DbReader, String> {
    DbReader::open(
        path,
        store,
        DbReaderMode::FollowLatest,
        DbReaderOptions::default(),
    )
    .await
    .map_err(|e| format!("opens read-only: {e:?}"))
}

/// A fresh read-only view does not see round `round` yet.
pub async fn assert_reader_lacks(url: &str, round: usize) {
    let reader = open_reader(url)
        .await
        .unwrap_or_else(|e| panic!("{url} {e}"));
    let got = reader.get(key(round, 0)).await.expect("reader get");
    assert!(got.is_none(), "{url} already has round {round}");
    reader.close().await.expect("reader close");
}

/// Every key written in `rounds` reads back with its value.
pub async fn assert_all_keys(db: &Db, rounds: std::ops::Range<usize>) {
    check_keys("the writer", rounds, |k| async move {
        let got = db.get(k).await.map_err(|e| format!("get: {e:?}"))?;
        Ok(got.map(|b| b.to_vec()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Reads every key of `rounds` through `get`, asserting each value; a
/// failed read is returned (callers retry or panic), a wrong value panics.
async fn check_keys<F, Fut>(
    label: &str,
    rounds: std::ops::Range<usize>,
    get: F,
) -> Result<(), String>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Vec<u8>>, String>>,
{
    for round in rounds {
        for i in 0..32 {
            let got = get(key(round, i))
                .await
                .map_err(|e| format!("{label}: {e}"))?;
            assert_eq!(
                got.as_deref(),
                Some(&value(round, i)[..]),
                "{label}: {}",
                key(round, i)
            );
        }
    }
    Ok(())
}
