//! One compaction of the same merge-operand database, side by side: the
//! application's native Rust counter in SlateDB's compactor against the
//! `counter-merge` component through sleet's adapter. Also the cost of
//! one `merge-batch` call through the adapter and natively.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use slatedb::config::{FlushOptions, FlushType, Settings};
use slatedb::{CompactorBuilder, Db, DbReader, MergeOperator, WriteBatch};
use sleet::config::{DatabaseConfig, FleetConfig};
use sleet::plugin::compaction::{CodeSpec, unreported};
use sleet::plugin::{PluginKind, PluginRuntime, PluginSet};
use sleet::testing::NativeCounter;

type Operator = Arc<dyn MergeOperator + Send + Sync>;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The database under `dir`, opened as a node opens a `file://` URL.
fn open(dir: &std::path::Path) -> (Arc<dyn ObjectStore>, Path) {
    sleet::store::open_url(&format!("file://{}/db", dir.display())).expect("a local store")
}

fn key(k: usize) -> String {
    format!("key-{k:07}")
}

/// Writes `rounds` flushed L0 SSTs, each one operand for every key.
async fn write(dir: &std::path::Path, keys: usize, rounds: usize) {
    let settings = Settings {
        l0_sst_size_bytes: 256 << 20,
        l0_max_ssts: 64,
        // Every key is in every L0 SST: the per-key stall (8) would stop
        // the writer before the database has its operands.
        l0_max_ssts_per_key: 64,
        compactor_options: None,
        garbage_collector_options: None,
        ..Settings::default()
    };
    let (store, path) = open(dir);
    let writer = Db::builder(path, store)
        .with_settings(settings)
        .with_merge_operator(Arc::new(NativeCounter))
        .build()
        .await
        .expect("a writer");
    for round in 0..rounds {
        let mut batch = WriteBatch::new();
        for k in 0..keys {
            batch.merge(key(k).as_bytes(), ((round + k) as u64).to_le_bytes());
        }
        writer.write(batch).await.expect("a round");
        writer
            .flush_with_options(FlushOptions {
                flush_type: FlushType::MemTable,
            })
            .await
            .expect("flush");
    }
    writer.close().await.expect("close");
}

/// Bytes under `dir/db/compacted`: the L0 SSTs the compaction reads.
fn sst_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir.join("db/compacted"))
        .expect("compacted/")
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs a coordinator with an embedded worker and `operator` until L0 is
/// one sorted run; returns how long that took.
async fn compact(dir: &std::path::Path, operator: Operator) -> Duration {
    let settings = DatabaseConfig::default().resolve();
    let mut options = sleet::services::coordinator_options(&settings.coordinator);
    options.poll_interval = Duration::from_millis(20);
    options.scheduler_options = slatedb::config::SizeTieredCompactionSchedulerOptions {
        min_compaction_sources: 2,
        max_compaction_sources: 64,
        ..Default::default()
    }
    .into();
    let mut worker = sleet::services::worker_options(&settings.workers);
    worker.compactions_poll_interval = Duration::from_millis(20);
    options.worker = Some(worker);
    let (store, path) = open(dir);
    let compactor = CompactorBuilder::new(path.clone(), store.clone())
        .with_options(options)
        .with_merge_operator(operator)
        .build();
    let admin = slatedb::admin::AdminBuilder::new(path, store).build();
    let started = Instant::now();
    let run = compactor.run();
    tokio::pin!(run);
    loop {
        tokio::select! {
            result = &mut run => panic!("the compactor stopped: {result:?}"),
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        let manifest = admin.read_manifest(None).await.unwrap().unwrap();
        if manifest.l0().is_empty() && !manifest.compacted().is_empty() {
            break;
        }
    }
    let took = started.elapsed();
    compactor.stop().await.expect("stop");
    took
}

async fn read_sample(dir: &std::path::Path, keys: usize) -> Vec<Option<Bytes>> {
    let (store, path) = open(dir);
    let reader = DbReader::builder(path, store)
        .with_merge_operator(Arc::new(NativeCounter))
        .build()
        .await
        .expect("a reader");
    let mut values = Vec::new();
    for k in (0..keys).step_by((keys / 1000).max(1)) {
        values.push(reader.get(key(k).as_bytes()).await.unwrap());
    }
    reader.close().await.unwrap();
    values
}

/// The wasm counter as the node builds it.
fn wasm_counter(dir: &std::path::Path) -> Operator {
    let runtime = PluginRuntime::new(None).expect("a runtime");
    let set = PluginSet::load(&runtime, &[dir.to_path_buf()], &Default::default());
    let plugin = set
        .merge_operator("counter-merge", "bench")
        .expect("counter-merge loads")
        .clone();
    let spec = CodeSpec {
        plugin: "counter-merge".into(),
        config: Vec::new(),
        limits: FleetConfig::default().plugin_limits("counter-merge", PluginKind::MergeOperator),
    };
    Arc::new(
        plugin
            .operator(&spec, "file:///bench/db", unreported())
            .expect("configured"),
    )
}

/// Nanoseconds per `merge_batch` of `operands` 8-byte operands.
fn per_call(operator: &Operator, operands: usize) -> f64 {
    let key = Bytes::from_static(b"key-0000001");
    let batch: Vec<Bytes> = (0..operands as u64)
        .map(|i| Bytes::copy_from_slice(&i.to_le_bytes()))
        .collect();
    let calls = 200_000 / operands.max(1);
    for _ in 0..1000 {
        operator.merge_batch(&key, None, &batch).unwrap();
    }
    let started = Instant::now();
    for _ in 0..calls {
        std::hint::black_box(operator.merge_batch(&key, None, &batch).unwrap());
    }
    started.elapsed().as_nanos() as f64 / calls as f64
}

pub async fn run(plugin_dir: &std::path::Path) {
    let keys = env_usize("SLEET_BENCH_MERGE_KEYS", 100_000);
    let rounds = env_usize("SLEET_BENCH_MERGE_ROUNDS", 10);
    let native: Operator = Arc::new(NativeCounter);
    let wasm = wasm_counter(plugin_dir);
    for operands in [1, 10, 100] {
        println!(
            "compaction: merge_batch of {operands} operands: native {:.0} ns, wasm {:.0} ns per call",
            per_call(&native, operands),
            per_call(&wasm, operands)
        );
    }

    let seeded = tempfile::tempdir().expect("a data dir");
    let started = Instant::now();
    write(seeded.path(), keys, rounds).await;
    let input = sst_bytes(seeded.path());
    println!(
        "compaction: wrote {} operands over {keys} keys in {rounds} L0 SSTs ({:.1} MB) in {:.1} s",
        keys * rounds,
        input as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let copies = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for copy in &copies {
        copy_dir(seeded.path(), copy.path());
    }
    let runs = [("native", native, &copies[0]), ("wasm", wasm, &copies[1])];
    let mut seconds = Vec::new();
    for (name, operator, dir) in runs {
        let took = compact(dir.path(), operator).await.as_secs_f64();
        seconds.push(took);
        println!(
            "compaction: {name:6} counter: {took:.2} s, {:.0} keys/s, {:.0} operands/s, {:.1} MB/s read",
            keys as f64 / took,
            (keys * rounds) as f64 / took,
            input as f64 / 1e6 / took
        );
    }
    println!("compaction: wasm at {:.2}x native", seconds[0] / seconds[1]);
    assert_eq!(
        read_sample(copies[0].path(), keys).await,
        read_sample(copies[1].path(), keys).await,
        "both compactions read back the same sums"
    );
}
