//! Recovery point: `cargo bench --bench mirror -- recovery`.
//!
//! A writer on SlateDB's defaults (its compactor and collector off: the
//! fleet's) writes at a fixed rate and records when each write was
//! acknowledged durable; a node runs every service over it, with a
//! continuous mirror. Every 2 to 6 s a `sleet mirror restore` of the
//! destination starts, and its restored database is read whole: the
//! recovery point of that restore is how long before the restore began
//! the first write it lacks was acknowledged (0 when it lacks none that
//! was). Then restores by time (`--at`) at random moments, each judged
//! against the writes acknowledged by then, and periodic passes taken
//! while the writer runs, each judged on the writes acknowledged before
//! it began. The node's requests to the database stores are counted.
//!
//! Rates: 1,000 puts/s of 256-byte values and 1 put/s (a quiet writer:
//! every write stays in the WAL), and 10 MB/s (1,000 puts/s of 10 KB
//! values: a memtable flush every 6.4 s, compactions, passes copying
//! SSTs beside the tail). Stores: `file://`, and the S3 server when
//! `SLEET_S3_ENDPOINT` is set. `SLEET_BENCH_RECOVERY_RESTORES` (default
//! 20) restores per case, `SLEET_BENCH_RECOVERY_CASES` a comma list of
//! `1000,1,10mb` to run fewer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::counted_opener;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use object_store::ObjectStore;
use slatedb::Db;
use sleet::commands::mirror as ops;
use sleet::mirror::copier::{CopierOptions, CopyProgress};
use sleet::mirror::restore::RestorePoint;
use sleet::testing::{ALL_OPS, CountingStore};
use sleet::{CancellationToken, Fleet, NodeOptions};

/// One writer's pace.
#[derive(Clone, Copy)]
struct Rate {
    label: &'static str,
    puts_per_second: u64,
    value_bytes: usize,
}

const RATES: [Rate; 3] = [
    Rate {
        label: "1000",
        puts_per_second: 1000,
        value_bytes: 256,
    },
    Rate {
        label: "1",
        puts_per_second: 1,
        value_bytes: 256,
    },
    Rate {
        label: "10mb",
        puts_per_second: 1000,
        value_bytes: 10_000,
    },
];

/// When each write was acknowledged durable (by its number).
#[derive(Default)]
struct Acks {
    at: Vec<Option<(Instant, DateTime<Utc>)>>,
}

impl Acks {
    fn set(&mut self, write: usize, when: (Instant, DateTime<Utc>)) {
        if self.at.len() <= write {
            self.at.resize(write + 1, None);
        }
        self.at[write] = Some(when);
    }

    /// Writes acknowledged at or before `by` (wall clock).
    fn acknowledged_by(&self, by: DateTime<Utc>) -> usize {
        self.at
            .iter()
            .filter(|a| a.is_some_and(|(_, at)| at <= by))
            .count()
    }
}

fn key(write: usize) -> String {
    format!("w{write:010}")
}

/// Runs the recovery-point cases the environment asks for.
pub async fn recovery_bench() {
    let restores: usize = std::env::var("SLEET_BENCH_RECOVERY_RESTORES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let cases: Option<Vec<String>> = std::env::var("SLEET_BENCH_RECOVERY_CASES")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let endpoint = std::env::var("SLEET_S3_ENDPOINT").ok();
    for rate in RATES {
        if cases
            .as_ref()
            .is_some_and(|c| !c.iter().any(|l| l == rate.label))
        {
            continue;
        }
        for store in ["file", "s3"] {
            if store == "s3" && endpoint.is_none() {
                println!(
                    "recovery {}: S3 skipped (set SLEET_S3_ENDPOINT)",
                    rate.label
                );
                continue;
            }
            one_case(rate, store, restores).await;
        }
    }
}

async fn one_case(rate: Rate, store: &str, restores: usize) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let unique = format!("recovery-{}-{}", rate.label, std::process::id());
    let (source_url, backup_url, scratch) = match store {
        "s3" => (
            format!("s3://sleet/{unique}/source"),
            format!("s3://sleet/{unique}/backup"),
            format!("s3://sleet/{unique}/restored"),
        ),
        _ => (
            format!("file://{}/source", dir.path().display()),
            format!("file://{}/backup", dir.path().display()),
            format!("file://{}/restored", dir.path().display()),
        ),
    };
    let root = format!("file://{}/fleet", dir.path().display());
    std::fs::create_dir_all(dir.path().join("fleet")).expect("the fleet dir");
    std::fs::write(
        dir.path().join("fleet/sleet.toml"),
        format!(
            "[database.mirror.targets.live]\nurl = \"{backup_url}\"\nmode = \"continuous\"\n\n\
             [database.mirror.targets.nightly]\nurl = \"{backup_url}-periodic\"\n\
             mode = \"periodic\"\ninterval = \"365d\"\n"
        ),
    )
    .expect("sleet.toml");
    let (store_handle, path) = sleet::store::open_url(&source_url).expect("a source store");
    let writer = Db::builder(path, store_handle.clone())
        .with_settings(sleet::commands::demo::served_writer_settings())
        .build()
        .await
        .expect("a writer");
    let fleet = Fleet::open(&root).expect("the fleet");
    fleet.register(&source_url).await.expect("registered");

    // The node, its database requests counted.
    let counts = Arc::new(CountingStore::new(store_handle.clone()));
    let opener = counted_opener(counts.clone() as Arc<dyn ObjectStore>);
    let shutdown = CancellationToken::new();
    let node = tokio::spawn({
        let fleet = fleet.clone();
        let shutdown = shutdown.clone();
        async move {
            fleet
                .run_node(
                    NodeOptions::new("bench").with_database_opener(opener),
                    shutdown,
                )
                .await
        }
    });

    // The writer: puts at its pace, each acknowledgement timed.
    let acks = Arc::new(Mutex::new(Acks::default()));
    let stop = CancellationToken::new();
    let writer = Arc::new(writer);
    let started = Instant::now();
    let writing = tokio::spawn(write_at(writer.clone(), rate, acks.clone(), stop.clone()));

    // Warm up: the first pass and the tail.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let requests_before = totals(&counts);
    let active_since = Instant::now();
    let mut recovery = Vec::new();
    let mut took = Vec::new();
    let mut next = 0;
    for n in 0..restores {
        tokio::time::sleep(Duration::from_millis(2000 + (n as u64 * 1_777) % 4000)).await;
        let began = Instant::now();
        let dest = format!("{scratch}-{n}");
        let held = restore_and_count(&backup_url, &dest, RestorePoint::Latest).await;
        took.push(began.elapsed());
        next = held;
        let acks = acks.lock().expect("acks");
        let missed = acks.at.get(held).copied().flatten();
        let trail = match missed {
            Some((acked, _)) if acked < began => began - acked,
            _ => Duration::ZERO,
        };
        recovery.push(trail);
    }
    let minutes = active_since.elapsed().as_secs_f64() / 60.0;
    let requests_after = totals(&counts);

    // Restores by time, at moments spread over the run.
    let mut at_errors = Vec::new();
    let horizon = Utc::now();
    for n in 0..restores {
        let back = chrono::Duration::milliseconds(3_000 + (n as i64 * 7_919) % 30_000);
        let at = horizon - back;
        let dest = format!("{scratch}-at-{n}");
        let held = restore_and_count(&backup_url, &dest, RestorePoint::Time(at)).await;
        let due = acks.lock().expect("acks").acknowledged_by(at);
        at_errors.push((held as i64 - due as i64, at));
    }
    // Periodic passes while the writer runs: each restore point must
    // hold every write acknowledged before its pass began.
    let mut periodic_missing = Vec::new();
    for n in 0..5 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let began = Utc::now();
        let due = acks.lock().expect("acks").acknowledged_by(began);
        ops::sync_once(
            fleet.root(),
            &source_url,
            "nightly",
            &CopierOptions::default(),
            ops::Hooks::Bypass,
            CopyProgress::new(),
            &CancellationToken::new(),
        )
        .await
        .expect("a periodic pass");
        let dest = format!("{scratch}-periodic-{n}");
        let periodic = format!("{backup_url}-periodic");
        let held = restore_and_count(&periodic, &dest, RestorePoint::Latest).await;
        periodic_missing.push(due.saturating_sub(held));
    }
    stop.cancel();
    let written = writing.await.expect("the writer");
    let run_for = started.elapsed();
    let wal_objects = wal_count(&source_url).await;
    shutdown.cancel();
    let _ = node.await;

    let span = |d: &[Duration], q: f64| {
        let mut sorted = d.to_vec();
        sorted.sort();
        sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
    };
    let requests: Vec<String> = ALL_OPS
        .iter()
        .zip(requests_after.iter().zip(requests_before.iter()))
        .map(|(op, (after, before))| format!("{op:?} {:.0}", (after - before) as f64 / minutes))
        .collect();
    println!(
        "recovery {} puts/s x {} B on {store}: {written} writes; {} restores: recovery point p50 {:.3} s, \
         p99 {:.3} s, max {:.3} s (restore took p50 {:.2} s); last held {next}",
        rate.puts_per_second,
        rate.value_bytes,
        recovery.len(),
        span(&recovery, 0.5).as_secs_f64(),
        span(&recovery, 0.99).as_secs_f64(),
        span(&recovery, 1.0).as_secs_f64(),
        span(&took, 0.5).as_secs_f64(),
    );
    let exact = at_errors.iter().filter(|(e, _)| *e == 0).count();
    let worst = at_errors.iter().map(|(e, _)| e.abs()).max().unwrap_or(0);
    println!(
        "recovery {} puts/s on {store}: --at over {} times: {exact} exact, worst {worst} writes off \
         ({:.1} writes a WAL object on average: {wal_objects} objects in {:.0} s); errors {:?}",
        rate.puts_per_second,
        at_errors.len(),
        written as f64 / wal_objects.max(1) as f64,
        run_for.as_secs_f64(),
        at_errors.iter().map(|(e, _)| *e).collect::<Vec<_>>(),
    );
    println!(
        "recovery {} puts/s on {store}: periodic passes while writing: writes acknowledged before \
         the pass and missing from its restore point {:?}",
        rate.puts_per_second, periodic_missing
    );
    println!(
        "recovery {} puts/s on {store}: node requests to the database stores per active minute: {}",
        rate.puts_per_second,
        requests.join(", ")
    );
}

/// Puts at `rate` until `stop`; each write's acknowledgement is timed as
/// SlateDB reports it durable. Returns the writes made.
async fn write_at(
    db: Arc<Db>,
    rate: Rate,
    acks: Arc<Mutex<Acks>>,
    stop: CancellationToken,
) -> usize {
    let value = vec![b'v'; rate.value_bytes];
    let per_tick = (rate.puts_per_second / 100).max(1);
    let tick = if rate.puts_per_second >= 100 {
        Duration::from_millis(10)
    } else {
        Duration::from_millis(1000 / rate.puts_per_second)
    };
    let mut interval = tokio::time::interval(tick);
    let mut durable = futures::stream::FuturesUnordered::new();
    let mut written = 0;
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            Some(()) = durable.next(), if !durable.is_empty() => {}
            _ = interval.tick() => {
                for _ in 0..per_tick {
                    let handle = db.put(key(written), &value).await.expect("put");
                    let acks = acks.clone();
                    let write = written;
                    durable.push(async move {
                        handle.await_durable().await.expect("durable");
                        acks.lock().expect("acks").set(write, (Instant::now(), Utc::now()));
                    });
                    written += 1;
                }
            }
        }
    }
    while durable.next().await.is_some() {}
    written
}

/// Restores `backup` at `at` into `dest`; how many writes it holds.
async fn restore_and_count(backup: &str, dest: &str, at: RestorePoint) -> usize {
    ops::restore_urls(
        backup,
        dest,
        at,
        false,
        CopyProgress::new(),
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("restore {at} of {backup}: {e}"));
    count_prefix(dest).await
}

/// How many writes the database at `url` holds: a restore is a prefix of
/// the writer's history, so the first write it lacks is found by binary
/// search (17 reads for 100,000 writes, where a scan of a restore on the
/// S3 server took minutes), and a sample below it is checked present.
async fn count_prefix(url: &str) -> usize {
    let (store, path) = sleet::store::open_url(url).expect("a store");
    let reader = slatedb::DbReader::builder(path, store)
        .build()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let holds = |write: usize| {
        let reader = &reader;
        async move { reader.get(key(write)).await.expect("get").is_some() }
    };
    // The first write it lacks lies in (low, high].
    let (mut low, mut high) = (0usize, 1usize);
    if !holds(0).await {
        let _ = reader.close().await;
        return 0;
    }
    while holds(high).await {
        low = high;
        high *= 2;
    }
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if holds(middle).await {
            low = middle;
        } else {
            high = middle;
        }
    }
    for sample in (0..high).step_by((high / 16).max(1)) {
        assert!(
            holds(sample).await,
            "{url} holds write {low} but not {sample}"
        );
    }
    let _ = reader.close().await;
    high
}

fn totals(counts: &CountingStore) -> [u64; 6] {
    let mut out = [0; 6];
    for (slot, op) in out.iter_mut().zip(ALL_OPS) {
        *slot = counts.count(op);
    }
    out
}

/// WAL objects the source holds.
async fn wal_count(url: &str) -> usize {
    let (store, path) = sleet::store::open_url(url).expect("a store");
    let prefix = path.clone().join("wal");
    store.list(Some(&prefix)).count().await
}
