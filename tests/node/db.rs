//! Real SlateDB databases for the node tests: writers, and manifest views.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path;
use slatedb::Db;
use slatedb::admin::AdminBuilder;
use slatedb::config::{FlushOptions, FlushType, Settings};

/// Writer settings that make many small L0 SSTs quickly, with no embedded
/// compactor or GC: the fleet's nodes must do that work.
pub fn tiny_settings() -> Settings {
    sleet::demo::small_sst_writer_settings()
}

pub fn open_store(url: &str) -> (Arc<dyn ObjectStore>, Path) {
    sleet::store::open_url(url).expect("a store for the database URL")
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

/// The latest manifest's L0 count and sorted-run count.
pub async fn shape(url: &str) -> (usize, usize) {
    let (store, path) = open_store(url);
    let admin = AdminBuilder::new(path, store).build();
    let manifest = admin
        .read_manifest(None)
        .await
        .expect("read manifest")
        .expect("a manifest");
    (manifest.l0().len(), manifest.compacted().len())
}

/// Objects under `<db>/<dir>/` of a `file://` database.
pub fn files(dir: &std::path::Path, sub: &str) -> Vec<String> {
    match std::fs::read_dir(dir.join(sub)) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Every key written in `rounds` reads back with its value.
pub async fn assert_all_keys(db: &Db, rounds: std::ops::Range<usize>) {
    for round in rounds {
        for i in 0..32 {
            let got = db.get(key(round, i)).await.expect("get");
            assert_eq!(
                got.as_deref(),
                Some(&value(round, i)[..]),
                "{}",
                key(round, i)
            );
        }
    }
}
