//! Databases whose compaction needs application code: a node compacts
//! them with merge operator and compaction filter plugins built from
//! `plugins/`, and a reader with the application's own native code reads
//! what it expects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use slatedb::config::{FlushOptions, FlushType};
use slatedb::{Db, DbReader, MergeOperator, WriteBatch};
use slatedb_common::clock::{DefaultSystemClock, SystemClock, SystemClockTicker};

use crate::cluster::{Cluster, compacted, fast_fleet, poll_until};
use crate::{db, wasm};
use sleet::testing::NativeCounter;

fn native_counter() -> Arc<dyn MergeOperator + Send + Sync> {
    Arc::new(NativeCounter)
}

async fn flush(db: &Db) {
    db.flush_with_options(FlushOptions {
        flush_type: FlushType::MemTable,
    })
    .await
    .expect("memtable flush");
}

/// Writes `rounds` flushed rounds of increments to `keys` counters
/// through a writer with the native operator, and returns the sums.
pub async fn write_counters(url: &str, keys: usize, rounds: u64) -> BTreeMap<String, u64> {
    let (store, path) = db::open_store(url);
    let writer = Db::builder(path, store)
        .with_settings(db::tiny_settings())
        .with_merge_operator(native_counter())
        .build()
        .await
        .expect("a SlateDB writer");
    let mut sums = BTreeMap::new();
    for round in 1..=rounds {
        let mut batch = WriteBatch::new();
        for k in 0..keys {
            let key = format!("counter-{k:04}");
            let increment = round * 1_000 + k as u64;
            batch.merge(key.as_bytes(), increment.to_le_bytes());
            *sums.entry(key).or_insert(0) += increment;
        }
        writer.write(batch).await.expect("a round of merges");
        flush(&writer).await;
    }
    writer.close().await.expect("close");
    sums
}

/// What a reader with the native operator reads for every key.
pub async fn read_counters(url: &str, keys: impl Iterator<Item = String>) -> BTreeMap<String, u64> {
    let (store, path) = db::open_store(url);
    let reader = DbReader::builder(path, store)
        .with_merge_operator(native_counter())
        .build()
        .await
        .expect("a SlateDB reader");
    let mut read = BTreeMap::new();
    for key in keys {
        let value = reader.get(key.as_bytes()).await.expect("get");
        read.insert(key, value.map_or(u64::MAX, |v| NativeCounter::read(&v)));
    }
    reader.close().await.expect("close reader");
    read
}

/// Waits until L0 has been folded into a sorted run.
pub async fn until_compacted(url: &str, limit: Duration) {
    poll_until(limit, "L0 compacted into a sorted run", || async {
        let (l0, runs) = db::shape(url).await;
        compacted(l0, runs).then_some(())
    })
    .await;
}

/// Status warnings that mention `needle`.
async fn warnings_about(cluster: &Cluster, needle: &str) -> Vec<String> {
    let status = cluster.status().await;
    status
        .warnings
        .into_iter()
        .filter(|w| w.contains(needle))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasm_counter_compacts_merge_operands_that_a_native_reader_sums() {
    let _heavy = crate::HEAVY.lock().await;
    let plugins = wasm::plugin_dir(&["counter-merge"]);
    let mut cluster = Cluster::new(&format!(
        "{}\n[database]\nmerge_operator = \"plugin:counter-merge\"\n",
        fast_fleet()
    ));
    let url = cluster.db_url("counters");
    let sums = write_counters(&url, 200, 8).await;
    assert!(db::shape(&url).await.0 >= 8, "8 rounds of operands in L0");
    cluster.fleet.register(&url).await.unwrap();
    cluster.spawn_with_plugins("n1", plugins.path());

    until_compacted(&url, Duration::from_secs(60)).await;
    let read = read_counters(&url, sums.keys().cloned()).await;
    assert_eq!(
        read, sums,
        "every counter reads its exact sum after compaction"
    );
    let failures = warnings_about(&cluster, "compactions of").await;
    assert!(failures.is_empty(), "no failed compactions: {failures:?}");
    cluster.stop("n1").await;
}

/// A clock `behind` the system's: the writer that stamps old entries.
#[derive(Debug)]
struct ClockBehind {
    system: DefaultSystemClock,
    behind: chrono::Duration,
}

impl SystemClock for ClockBehind {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.system.now() - self.behind
    }

    fn sleep<'a>(
        &'a self,
        duration: Duration,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        self.system.sleep(duration)
    }

    fn ticker<'a>(&'a self, duration: Duration) -> SystemClockTicker<'a> {
        SystemClockTicker::new(self, duration)
    }
}

/// Puts `count` keys named `{prefix}-n` through a writer whose clock is
/// `behind` the system's, flushed into L0.
async fn put_keys_written_ago(url: &str, prefix: &str, count: usize, behind: Duration) {
    let (store, path) = db::open_store(url);
    let clock = Arc::new(ClockBehind {
        system: DefaultSystemClock::new(),
        behind: chrono::Duration::from_std(behind).unwrap(),
    });
    let writer = Db::builder(path, store)
        .with_settings(db::tiny_settings())
        .with_system_clock(clock)
        .build()
        .await
        .expect("a SlateDB writer");
    let mut batch = WriteBatch::new();
    for i in 0..count {
        batch.put(format!("{prefix}-{i:03}").as_bytes(), b"value");
    }
    writer.write(batch).await.expect("puts");
    flush(&writer).await;
    writer.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_filter_drops_entries_older_than_its_max_age_and_keeps_the_rest() {
    let _heavy = crate::HEAVY.lock().await;
    let plugins = wasm::plugin_dir(&["ttl-filter"]);
    let mut cluster = Cluster::new(&format!(
        "{}\n[database]\ncompaction_filter = \"plugin:ttl-filter\"\n\
         [database.compaction_filter_config]\nmax_age = \"1h\"\n",
        fast_fleet()
    ));
    let url = cluster.db_url("expiring");
    let two_hours = Duration::from_secs(2 * 3600);
    // Oldest first: SlateDB refuses a writer clock behind the last one.
    put_keys_written_ago(&url, "old", 50, two_hours).await;
    put_keys_written_ago(&url, "recent", 50, Duration::from_secs(1800)).await;
    put_keys_written_ago(&url, "new", 50, Duration::ZERO).await;
    cluster.fleet.register(&url).await.unwrap();
    cluster.spawn_with_plugins("n1", plugins.path());

    until_compacted(&url, Duration::from_secs(60)).await;
    let (store, path) = db::open_store(&url);
    let reader = DbReader::builder(path, store).build().await.unwrap();
    for i in 0..50 {
        let get = |prefix: &str| format!("{prefix}-{i:03}");
        let old = reader.get(get("old").as_bytes()).await.unwrap();
        assert_eq!(old, None, "{} was written 2h ago: expired", get("old"));
        for kept in ["new", "recent"] {
            let value = reader.get(get(kept).as_bytes()).await.unwrap();
            assert_eq!(
                value.as_deref(),
                Some(&b"value"[..]),
                "{} is kept",
                get(kept)
            );
        }
    }
    reader.close().await.unwrap();
    cluster.stop("n1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_hostile_merge_operator_fails_only_its_database_and_status_says_why() {
    let _heavy = crate::HEAVY.lock().await;
    let plugins = wasm::plugin_dir(&["hostile-merge"]);
    let mut cluster = Cluster::new(&fast_fleet());
    let missing = cluster.db_url("missing");
    let looping = cluster.db_url("looping");
    let trapping = cluster.db_url("trapping");
    let plain = cluster.db_url("plain");
    for url in [&missing, &looping, &trapping] {
        write_counters(url, 20, 4).await;
    }
    db::seed(&plain, 4).await;
    for (url, mode) in [(&looping, "loop"), (&trapping, "trap")] {
        let canonical = sleet::model::registry::canonicalize_database_url(url).unwrap();
        cluster.root().write(
            &format!("dbs/{}", sleet::model::registry::file_name(&canonical)),
            &format!(
                "merge_operator = \"plugin:hostile-merge\"\n\
                 [merge_operator_config]\nmode = \"{mode}\"\n"
            ),
        );
    }
    for url in [&missing, &plain] {
        cluster.fleet.register(url).await.unwrap();
    }
    cluster.spawn_with_plugins("n1", plugins.path());

    // The database without merge operands is compacted meanwhile.
    until_compacted(&plain, Duration::from_secs(60)).await;
    let expectations = [
        ("missing", "no merge operator is configured"),
        ("looping", "hostile-merge timed out"),
        ("trapping", "hostile-merge trapped"),
    ];
    for (name, why) in expectations {
        let warnings = poll_until(
            Duration::from_secs(60),
            &format!("status explains why {name} is not compacted"),
            || async {
                let found = warnings_about(&cluster, &format!("/{name} ")).await;
                found.iter().any(|w| w.contains(why)).then_some(found)
            },
        )
        .await;
        assert!(
            warnings.iter().any(|w| w.contains("compactions of")),
            "{name}: {warnings:?}"
        );
    }
    let missing_warning = warnings_about(&cluster, "no merge operator").await;
    assert!(
        missing_warning[0].contains("merge_operator = \"plugin:<name>\""),
        "says what to configure: {missing_warning:?}"
    );
    for url in [&missing, &looping, &trapping] {
        assert!(db::shape(url).await.0 >= 4, "{url} stays uncompacted");
    }
    assert!(
        cluster.running("n1").await.is_some(),
        "the node still heartbeats"
    );
    cluster.stop("n1").await;
}
