//! The `min_age = 1s` finding, probed against SlateDB alone: no sleet
//! node, only SlateDB's own writer, coordinator, workers and GC on
//! `LocalFileSystem` (boundary files off, as sleet sets them there), the
//! background services behind the same faulty store the old in-process
//! chaos test used (5% errors, up to 40 ms latency), and coordinators
//! "crashed" the way that test crashed nodes: the task is aborted while
//! SlateDB's own spawned work may go on.
//!
//! A probe, run by hand (`--ignored`); `PROBE_MIN_AGE_MS`, `PROBE_SECS`
//! and `PROBE_CRASH=0` vary it. What it found is in docs/reliability.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use slatedb::admin::AdminBuilder;
use slatedb::config::{
    CompactorOptions, DbReaderOptions, GarbageCollectorDirectoryOptions, GarbageCollectorOptions,
    SizeTieredCompactionSchedulerOptions,
};
use slatedb::{CompactionWorkerBuilder, CompactorBuilder, Db, DbReader, DbReaderMode};
use sleet::testing::{Faults, FaultyStore};
use tokio_util::sync::CancellationToken;

use crate::db;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// GC every 300 ms; `min_age` for the directories `PROBE_GC_DIRS` names
/// (all by default: manifest, wal, compacted, compactions), 10 s for the
/// rest.
fn gc_options(min_age: Duration, boundary_files: bool) -> GarbageCollectorOptions {
    let short = std::env::var("PROBE_GC_DIRS")
        .unwrap_or_else(|_| "manifest,wal,compacted,compactions".into());
    let dir = |name: &str| {
        Some(GarbageCollectorDirectoryOptions {
            interval: Some(Duration::from_millis(300)),
            min_age: if short.split(',').any(|d| d == name) {
                min_age
            } else {
                Duration::from_secs(10)
            },
            dry_run: false,
        })
    };
    GarbageCollectorOptions {
        manifest_options: dir("manifest"),
        wal_options: dir("wal"),
        compacted_options: dir("compacted"),
        compactions_options: dir("compactions"),
        boundary_files_enabled: boundary_files,
        ..GarbageCollectorOptions::default()
    }
}

fn coordinator_options() -> CompactorOptions {
    CompactorOptions {
        poll_interval: Duration::from_millis(100),
        commit_compacted_interval: Duration::from_millis(100),
        checkpoint_lifetime: Duration::from_secs(1),
        scheduler_options: SizeTieredCompactionSchedulerOptions {
            min_compaction_sources: 2,
            ..SizeTieredCompactionSchedulerOptions::default()
        }
        .into(),
        worker: None,
        ..CompactorOptions::default()
    }
}

/// Keys of `rounds` missing from a scan of `iter`.
async fn missing_from(
    mut iter: slatedb::DbIterator,
    rounds: std::ops::Range<usize>,
) -> Result<Vec<String>, String> {
    let mut held = std::collections::HashSet::new();
    while let Some(entry) = iter.next().await.map_err(|e| e.to_string())? {
        held.insert(String::from_utf8_lossy(&entry.key).to_string());
    }
    Ok(rounds
        .flat_map(|round| (0..32).map(move |i| db::key(round, i)))
        .filter(|key| !held.contains(key))
        .collect())
}

/// Keys of `rounds` a fresh read-only reader cannot find.
async fn reader_lost(
    store: Arc<dyn ObjectStore>,
    path: &ObjectPath,
    rounds: std::ops::Range<usize>,
) -> Result<Vec<String>, String> {
    let reader = DbReader::open(
        path.clone(),
        store,
        DbReaderMode::FollowLatest,
        DbReaderOptions::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let iter = reader.scan(..).await.map_err(|e| e.to_string())?;
    let lost = missing_from(iter, rounds).await;
    let _ = reader.close().await;
    lost
}

/// The latest manifest's L0 count and sorted-run count.
async fn shape(store: &Arc<dyn ObjectStore>, path: &ObjectPath) -> (usize, usize) {
    let manifest = AdminBuilder::new(path.clone(), store.clone())
        .build()
        .read_manifest(None)
        .await
        .unwrap()
        .unwrap();
    (manifest.l0().len(), manifest.compacted().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a probe, run by hand"]
async fn slatedb_alone_with_a_short_gc_min_age() {
    let min_age = Duration::from_millis(env_u64("PROBE_MIN_AGE_MS", 1000));
    let run_for = Duration::from_secs(env_u64("PROBE_SECS", 60));
    let crash = env_u64("PROBE_CRASH", 1) == 1;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("PROBE_LOG").unwrap_or_else(|_| "slatedb=warn".into()))
        .with_writer(std::io::stderr)
        .try_init();
    let dir = tempfile::tempdir().unwrap();
    // PROBE_S3=1: the local S3 server, with GC boundary files on.
    let on_s3 = env_u64("PROBE_S3", 0) == 1;
    let base: Arc<dyn ObjectStore> = if on_s3 {
        let endpoint = crate::common::endpoint().expect("PROBE_S3 runs under scripts/test");
        crate::common::s3_store(&endpoint)
    } else {
        Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap())
    };
    let faults = Faults::new();
    let faulty: Arc<dyn ObjectStore> = Arc::new(FaultyStore::new(base.clone(), faults.clone()));
    let path = ObjectPath::from(crate::common::unique_prefix("min-age-probe"));

    let writer = Db::builder(path.clone(), base.clone())
        .with_settings(db::tiny_settings())
        .build()
        .await
        .unwrap();
    db::write_rounds(&writer, 0..2).await;

    let stop = CancellationToken::new();
    let gc_admin = AdminBuilder::new(path.clone(), faulty.clone()).build();
    let gc = tokio::spawn({
        let stop = stop.clone();
        async move {
            gc_admin
                .run_gc_with_options(stop, gc_options(min_age, on_s3))
                .await
        }
    });
    // Like sleet's supervisor: a service that ends (an injected error is
    // fatal to SlateDB's loops) starts again.
    let mut workers = Vec::new();
    for _ in 0..2 {
        let (path, faulty) = (path.clone(), faulty.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let worker = CompactionWorkerBuilder::new(path.clone(), faulty.clone())
                    .with_options(slatedb::config::CompactionWorkerOptions {
                        compactions_poll_interval: Duration::from_millis(100),
                        heartbeat_interval: Duration::from_millis(500),
                        min_filter_keys: 0,
                        ..Default::default()
                    })
                    .build()
                    .await;
                match worker {
                    Ok(worker) => {
                        if let Err(e) = worker.run().await {
                            eprintln!("probe: a worker ended: {e}");
                        }
                    }
                    Err(e) => eprintln!("probe: a worker did not start: {e}"),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    let start_coordinator = || {
        let (path, faulty) = (path.clone(), faulty.clone());
        tokio::spawn(async move {
            loop {
                let compactor = CompactorBuilder::new(path.clone(), faulty.clone())
                    .with_options(coordinator_options())
                    .build();
                if let Err(e) = compactor.run().await {
                    eprintln!("probe: a coordinator ended: {e}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut coordinator = start_coordinator();

    let started = Instant::now();
    let mut round = 2;
    let mut findings = Vec::new();
    // Rounds as the old chaos test ran them: faults and a crash while the
    // writer writes two rounds and 1.5 s pass, then a check without faults.
    while started.elapsed() < run_for {
        faults.set(50, Duration::from_millis(40));
        if crash {
            coordinator.abort();
            coordinator = start_coordinator();
        }
        db::write_rounds(&writer, round..round + 2).await;
        round += 2;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        faults.clear();
        let (l0, runs) = shape(&base, &path).await;
        let jobs = AdminBuilder::new(path.clone(), base.clone())
            .build()
            .read_compactions(None)
            .await
            .ok()
            .flatten()
            .map(|c| {
                c.recent_compactions()
                    .map(|j| format!("{:?}", j.status()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        eprintln!(
            "probe at {:.0?}: round {round}, L0 {l0}, runs {runs}, jobs {jobs:?}",
            started.elapsed(),
        );
        match writer.scan(..).await {
            Ok(iter) => match missing_from(iter, 0..round).await {
                Ok(lost) if lost.is_empty() => {}
                Ok(lost) => findings.push(format!("round {round}: the writer lost {lost:?}")),
                Err(e) => findings.push(format!("round {round}: the writer failed: {e}")),
            },
            Err(e) => findings.push(format!("round {round}: the writer failed: {e}")),
        }
        match reader_lost(base.clone(), &path, 0..round).await {
            Ok(lost) if lost.is_empty() => {}
            Ok(lost) => findings.push(format!("round {round}: a reader lost {lost:?}")),
            Err(e) => findings.push(format!("round {round}: a reader failed: {e}")),
        }
        if !findings.is_empty() {
            break;
        }
    }
    stop.cancel();
    coordinator.abort();
    for worker in workers {
        worker.abort();
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), gc).await;
    let (l0, runs) = shape(&base, &path).await;
    eprintln!(
        "probe: min_age {min_age:?}, crashes {crash}, {round} rounds in {:.0?}, L0 {l0}, runs {runs}, faults {}",
        started.elapsed(),
        faults.injected()
    );
    assert!(findings.is_empty(), "{findings:#?}");
}
