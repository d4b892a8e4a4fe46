//! Mirror seeding benchmark: copy a fresh database of `SLEET_BENCH_MIB`
//! MiB (default 256) into an empty destination with each copier, beside
//! the physical limit for the same objects: `cp -r` for file to file, a
//! plain object_store GET/PUT loop for S3 to S3.
//!
//! The example plugin copiers (built from `plugins/`) run on the same
//! workload: `throttle-copier` uncapped, whose bytes move by the host's
//! `copy-to`, and `verify-copier`, which streams every byte through the
//! plugin and reads each copy back. So do the copiers of other languages:
//! `copy-copier` (Rust), and the `sleet plugin new` copiers (copy-to) and
//! streaming examples in Python and JavaScript when their toolchains are
//! installed (scripts/bench installs them).
//!
//! `cargo bench --bench mirror -- recovery` instead measures the
//! recovery point of continuous mirrors, restores by time and periodic
//! passes under a live writer (benches/mirror/recovery.rs).
//!
//! `cargo bench --bench mirror -- across` skips the one-endpoint S3 case;
//! `cargo bench --bench mirror -- multipart` instead times builtin's
//! streamed copy across two S3 endpoints of objects of 16 to 128 MiB, each
//! size sent with one PUT and as a multipart upload: what the default
//! `multipart_threshold_mib` was chosen from. `-- azure` and `-- gcs`
//! instead time a seeding pass between two buckets of that emulator
//! (builtin copies with `Copy Blob` or `rewriteTo`) against the plain
//! loop, which streams.
//!
//! `cargo bench --bench mirror`; S3 to S3 runs when `SLEET_S3_ENDPOINT`
//! points at a server with buckets `sleet` and `sleet-mirror` (as
//! `scripts/with-servers` starts), and S3 to S3 across two endpoints
//! when `SLEET_S3_ENDPOINT_2` points at a second such server (as
//! `scripts/bench` asks `scripts/with-servers` for). docs/performance.md
//! records a run.

#[path = "counted_opener.rs"]
mod counted_opener;
#[path = "mirror/recovery.rs"]
mod recovery;

use counted_opener::counted_opener;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use slatedb::config::{FlushOptions, FlushType, Settings};
use sleet::CancellationToken;
use sleet::fleet::database::DatabaseHandle;
use sleet::mirror::copier::builtin::BuiltinCopier;
use sleet::mirror::copier::rclone::RcloneCopier;
use sleet::mirror::copier::{Copier, CopyProgress};
use sleet::mirror::pass::MirrorPair;
use sleet::store::upload::StreamPolicy;

/// Objects copied at once by builtin and by the raw loop.
const PARALLELISM: u32 = 8;
const VALUE_BYTES: usize = 64 * 1024;

struct Run {
    label: String,
    /// The median of `each`.
    elapsed: Duration,
    each: Vec<Duration>,
}

impl Run {
    fn once(label: impl Into<String>, elapsed: Duration) -> Run {
        Run {
            label: label.into(),
            elapsed,
            each: vec![elapsed],
        }
    }

    fn median_of(label: String, mut each: Vec<Duration>) -> Run {
        each.sort();
        Run {
            elapsed: each[each.len() / 2],
            label,
            each,
        }
    }
}

/// The example plugin copiers, built from `plugins/`: `throttle-copier`
/// uncapped (its objects move by the host's copy-to) and `verify-copier`
/// (every byte streams through the plugin and is read back).
async fn plugin_copiers() -> Vec<(String, Arc<dyn Copier>)> {
    let built = sleet::testing::build_plugins(&std::env::temp_dir().join("sleet-bench-plugins"));
    let dir = tempfile::tempdir().expect("a plugin dir");
    for name in ["throttle-copier", "verify-copier", "copy-copier"] {
        let file = format!("{}.wasm", name.replace('-', "_"));
        std::fs::copy(built.join(&file), dir.path().join(format!("{name}.wasm"))).expect("copy");
    }
    let languages = language_copiers(dir.path());
    let runtime = sleet::plugin::PluginRuntime::new(None).expect("a plugin runtime");
    let set =
        sleet::plugin::PluginSet::load(&runtime, &[dir.path().to_path_buf()], &Default::default());
    let limits =
        sleet::config::FleetConfig::default().plugin_limits("", sleet::plugin::PluginKind::Copier);
    // As a node does: describe the plugin for its batch size.
    // Streaming copiers in Python and JavaScript hold what they read in a
    // call: their memory covers the largest object (docs/plugins.md).
    let largest_mib = LARGEST_OBJECT
        .load(std::sync::atomic::Ordering::Relaxed)
        .div_ceil(1 << 20);
    let make = async |name: &str, config: Vec<(String, String)>| -> Arc<dyn Copier> {
        let plugin = set.copier(name, "bench").expect("a loaded copier");
        let default_mib = limits.memory_bytes >> 20;
        let memory_mib = match name {
            "py-stream-copier" => 16 + largest_mib,
            "js-stream-copier" => 16 + 2 * largest_mib,
            _ => default_mib,
        }
        .max(default_mib);
        if memory_mib > default_mib {
            println!("mirror seeding: {name} runs with memory_mib = {memory_mib}");
        }
        let limits = sleet::config::PluginLimits {
            memory_bytes: memory_mib << 20,
            ..limits.clone()
        };
        let (info, _) = plugin.check(&config, &limits).await.expect("describes");
        let copier: Arc<dyn Copier> = Arc::new(sleet::mirror::copier::wasm::WasmCopier::new(
            plugin.clone(),
            config,
            limits.clone(),
            PARALLELISM,
            info.max_batch,
        ));
        copier
    };
    let mut copiers = vec![
        (
            "plugin copy-to".to_string(),
            make(
                "throttle-copier",
                vec![("bytes_per_second".into(), "0".into())],
            )
            .await,
        ),
        (
            "plugin streaming".to_string(),
            make("verify-copier", Vec::new()).await,
        ),
        (
            "rust copy-to".to_string(),
            make("copy-copier", Vec::new()).await,
        ),
    ];
    for (label, name) in languages {
        copiers.push((label, make(&name, Vec::new()).await));
    }
    copiers
}

/// The Python and JavaScript copiers (when their toolchains are
/// installed, as scripts/bench does): each language's `sleet plugin new`
/// copier (copy-to) and streaming example, built into `dir`; their labels
/// and plugin names.
fn language_copiers(dir: &std::path::Path) -> Vec<(String, String)> {
    use sleet::commands::scaffold::{self, Lang};
    use sleet::plugin::PluginKind;
    let mut copiers = Vec::new();
    for (lang, stream) in [
        (Lang::Python, "py-stream-copier"),
        (Lang::Js, "js-stream-copier"),
    ] {
        if sleet::testing::toolchain(lang).is_none() {
            continue;
        }
        let name = format!("{lang}-copier");
        let projects = tempfile::tempdir().expect("a projects dir");
        let project = scaffold::project(lang, PluginKind::Copier, &name).expect("a project");
        scaffold::write(&projects.path().join(&name), &project).expect("written");
        let built = sleet::testing::build_project(
            &projects.path().join(&name),
            lang,
            PluginKind::Copier,
            &name,
            std::path::Path::new("unused"),
        );
        std::fs::copy(built, dir.join(format!("{name}.wasm"))).expect("installed");
        sleet::testing::build_example(lang, PluginKind::Copier, stream, dir);
        copiers.push((format!("{lang} copy-to"), name));
        copiers.push((format!("{lang} streaming"), stream.to_string()));
    }
    copiers
}

fn main() {
    let mib: usize = std::env::var("SLEET_BENCH_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let endpoint = std::env::var("SLEET_S3_ENDPOINT").ok();
    if let Some(endpoint) = &endpoint {
        // rclone reads its S3 endpoint and keys from the environment, as
        // a node's would; set before the runtime starts any thread.
        unsafe {
            std::env::set_var("AWS_ENDPOINT", endpoint);
            // The recovery bench opens s3:// URLs as a node does.
            std::env::set_var("AWS_ALLOW_HTTP", "true");
            std::env::set_var("AWS_ACCESS_KEY_ID", "test");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
            std::env::set_var("AWS_REGION", "us-east-1");
        }
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if filter.iter().any(|f| f == "recovery") {
        runtime.block_on(recovery::recovery_bench());
        return;
    }
    if filter.iter().any(|f| f == "multipart") {
        match (&endpoint, std::env::var("SLEET_S3_ENDPOINT_2")) {
            (Some(endpoint), Ok(second)) => runtime.block_on(multipart(endpoint, &second)),
            _ => println!(
                "mirror multipart: skipped (set SLEET_S3_ENDPOINT and SLEET_S3_ENDPOINT_2)"
            ),
        }
        return;
    }
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let source_url = format!("file://{}/source", dir.path().display());
        let bytes = seed(&source_url, mib).await;
        println!(
            "mirror seeding: source root {:.0} MB ({mib} MiB of values, WAL included), largest object {:.1} MB",
            bytes as f64 / 1e6,
            LARGEST_OBJECT.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e6
        );

        let emulators = [
            (
                "azure",
                "az",
                "SLEET_AZURE_ENDPOINT",
                "Azure to Azure (two containers)",
            ),
            (
                "gcs",
                "gs",
                "SLEET_GCS_ENDPOINT",
                "GCS to GCS (two buckets)",
            ),
        ];
        let asked: Vec<_> = emulators
            .iter()
            .filter(|(name, ..)| filter.iter().any(|f| f == name))
            .collect();
        for (name, scheme, variable, what) in &asked {
            match std::env::var(variable) {
                Ok(_) => {
                    let (runs, mb) = between_buckets(scheme, &source_url).await;
                    print_runs(what, &runs, mb);
                }
                Err(_) => println!("mirror {name}: skipped (set {variable})"),
            }
        }
        if !asked.is_empty() {
            return;
        }
        let file_runs = file_to_file(&source_url, dir.path()).await;
        let open = |url: &str| DatabaseHandle::open(url).expect("a handle");
        let copy_to = format!("file://{}/plugin-copy-to", dir.path().display());
        print_check_cost(
            "file to file",
            host_check(open(&source_url), open(&copy_to)).await,
            &file_runs,
        );
        let builtin = format!("file://{}/builtin", dir.path().display());
        let (store, path) = sleet::store::open_url(&builtin).expect("a store");
        let mb = listing(&store, &path).await.1 as f64 / 1e6;
        println!("mirror seeding: a seeding pass copies {mb:.0} MB (the head's closure)");
        print_runs("file to file", &file_runs, mb);
        let only_across = filter.iter().any(|f| f == "across");
        if only_across {
            println!("mirror seeding: S3 to S3 on one endpoint skipped (`-- across`)");
        } else if let Some(endpoint) = &endpoint {
            let s3_runs = s3_to_s3(&source_url, endpoint, endpoint).await;
            print_runs("S3 to S3", &s3_runs, mb);
        } else {
            println!("mirror seeding: S3 to S3 skipped (set SLEET_S3_ENDPOINT)");
        }
        match (&endpoint, std::env::var("SLEET_S3_ENDPOINT_2")) {
            (Some(endpoint), Ok(second)) => {
                let runs = s3_to_s3(&source_url, endpoint, &second).await;
                print_runs("S3 to S3 across endpoints", &runs, mb);
            }
            _ => println!(
                "mirror seeding: S3 to S3 across endpoints skipped (set SLEET_S3_ENDPOINT_2)"
            ),
        }
    });
}

fn print_runs(what: &str, runs: &[Run], mb: f64) {
    let limit = runs.last().expect("the physical limit runs last").elapsed;
    for run in runs {
        let secs = run.elapsed.as_secs_f64();
        let each = if run.each.len() > 1 {
            let all: Vec<String> = run
                .each
                .iter()
                .map(|d| format!("{:.2}", d.as_secs_f64()))
                .collect();
            format!("  (median of {} s)", all.join(", "))
        } else {
            String::new()
        };
        println!(
            "mirror seeding {what}: {:<22} {secs:>7.2} s  {:>7.1} MB/s  {:.2}x the limit's time{each}",
            run.label,
            mb / secs,
            secs / limit.as_secs_f64()
        );
    }
}

/// Writes `mib` MiB of incompressible values in 64 KiB entries and
/// returns the bytes under the root.
async fn seed(url: &str, mib: usize) -> u64 {
    let (store, path) = sleet::store::open_url(url).expect("a store");
    // No compactor runs, so allow every L0 SST the seed makes (writes
    // stall at `l0_max_ssts`).
    let settings = Settings {
        l0_sst_size_bytes: 16 * 1024 * 1024,
        l0_max_ssts: 4096,
        compactor_options: None,
        garbage_collector_options: None,
        ..Settings::default()
    };
    let db = slatedb::Db::builder(path.clone(), store.clone())
        .with_settings(settings)
        .build()
        .await
        .expect("a writer");
    for i in 0..(mib * 1024 * 1024 / VALUE_BYTES) {
        let value = random_bytes(VALUE_BYTES, 0x2545_f491_4f6c_dd1d ^ i as u64);
        db.put(format!("key-{i:08}"), value).await.expect("put");
    }
    db.flush_with_options(FlushOptions {
        flush_type: FlushType::MemTable,
    })
    .await
    .expect("flush");
    db.close().await.expect("close");
    let mut total = 0;
    let mut listing = store.list(Some(&path));
    while let Some(meta) = listing.next().await {
        let size = meta.expect("list").size;
        total += size;
        LARGEST_OBJECT.fetch_max(size, std::sync::atomic::Ordering::Relaxed);
    }
    total
}

/// The largest object of the seeded source: what a Python or JavaScript
/// streaming copier's memory must cover (docs/plugins.md).
static LARGEST_OBJECT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One seeding pass with `copier` into an empty destination.
async fn pass(
    source: DatabaseHandle,
    destination: DatabaseHandle,
    copier: Arc<dyn Copier>,
) -> Duration {
    let pair = MirrorPair {
        target: "bench".into(),
        source,
        destination,
        copier,
        checkpoint_lifetime: Duration::from_secs(900),
        progress: CopyProgress::new(),
        deep_check: sleet::mirror::pass::DeepCheck::every(Duration::from_secs(3600)),
        pin_source: true,
    };
    let start = Instant::now();
    let outcome = pair
        .sync_pass(&CancellationToken::new())
        .await
        .expect("a seeding pass");
    assert!(outcome.committed);
    start.elapsed()
}

async fn file_to_file(source_url: &str, dir: &std::path::Path) -> Vec<Run> {
    let open = |url: &str| DatabaseHandle::open(url).expect("a handle");
    let mut runs = Vec::new();
    for (label, copier) in plugin_copiers().await {
        let dest = format!("file://{}/{}", dir.display(), label.replace(' ', "-"));
        let elapsed = pass(open(source_url), open(&dest), copier).await;
        runs.push(Run::once(label, elapsed));
    }
    let builtin = format!("file://{}/builtin", dir.display());
    let copier = Arc::new(BuiltinCopier::new(PARALLELISM));
    let elapsed = pass(open(source_url), open(&builtin), copier).await;
    runs.push(Run::once("builtin", elapsed));
    let rclone = format!("file://{}/rclone", dir.display());
    let copier = Arc::new(RcloneCopier::new(None));
    let elapsed = pass(open(source_url), open(&rclone), copier).await;
    runs.push(Run::once("rclone", elapsed));
    // The limit copies exactly the objects builtin's pass wrote.
    let (builtin_store, builtin_path) = sleet::store::open_url(&builtin).expect("a store");
    let (names, _) = listing(&builtin_store, &builtin_path).await;
    let target = dir.join("cp");
    std::fs::create_dir_all(&target).expect("cp target");
    let start = Instant::now();
    let status = std::process::Command::new("cp")
        .arg("--parents")
        .args(&names)
        .arg(&target)
        .current_dir(dir.join("source"))
        .status()
        .expect("cp runs");
    assert!(status.success());
    runs.push(Run::once("cp (limit)", start.elapsed()));
    runs
}

/// How long the host's check of a finished mirror takes (every data
/// object at the destination against the source: what a pass does before
/// it commits, for copiers other than builtin).
async fn host_check(source: DatabaseHandle, destination: DatabaseHandle) -> (usize, Duration) {
    let (dst_root, src_root) = (destination.root(), source.root());
    let (names, _) = listing(&dst_root.store, &dst_root.prefix).await;
    let data: Vec<String> = names
        .into_iter()
        .filter(|n| sleet::mirror::copier::is_data_object(n))
        .collect();
    let start = Instant::now();
    let checked = sleet::mirror::proof::check_copies(&src_root, &dst_root, &data)
        .await
        .expect("the check runs");
    assert!(matches!(
        checked,
        sleet::mirror::proof::Checked::Intact { .. }
    ));
    (data.len(), start.elapsed())
}

fn print_check_cost(what: &str, check: (usize, Duration), runs: &[Run]) {
    let pass = runs
        .iter()
        .find(|r| r.label == "plugin copy-to")
        .expect("a copy-to run")
        .elapsed;
    print_check_cost_of(what, check, pass);
}

fn print_check_cost_of(what: &str, (objects, took): (usize, Duration), pass: Duration) {
    println!(
        "mirror seeding {what}: host check of {objects} copied objects {:.3} s, {:.1}% of the copy-to pass (which includes it)",
        took.as_secs_f64(),
        100.0 * took.as_secs_f64() / pass.as_secs_f64()
    );
}

/// Root-relative names and total bytes of every object under `root`.
async fn listing(store: &Arc<dyn ObjectStore>, root: &Path) -> (Vec<String>, u64) {
    let metas: Vec<object_store::ObjectMeta> = store
        .list(Some(root))
        .map(|meta| meta.expect("list"))
        .collect()
        .await;
    let bytes = metas.iter().map(|m| m.size).sum();
    let names = metas
        .iter()
        .map(|m| {
            let full = m.location.as_ref();
            full.strip_prefix(root.as_ref())
                .unwrap_or(full)
                .trim_start_matches('/')
                .to_string()
        })
        .collect();
    (names, bytes)
}

/// `names` (relative to `from`) copied to `to`, `PARALLELISM` at a time.
async fn raw_copy(
    source: &Arc<dyn ObjectStore>,
    from: &Path,
    destination: &Arc<dyn ObjectStore>,
    to: &Path,
    names: Vec<String>,
) {
    futures::stream::iter(names)
        .map(|relative| async move {
            let name = Path::parse(format!("{from}/{relative}")).expect("a path");
            let target = Path::parse(format!("{to}/{relative}")).expect("a path");
            let body = source
                .get(&name)
                .await
                .expect("get")
                .bytes()
                .await
                .expect("body");
            destination.put(&target, body.into()).await.expect("put");
        })
        .buffer_unordered(PARALLELISM as usize)
        .collect::<Vec<()>>()
        .await;
}

/// Seeding passes from bucket `sleet` at `endpoint` into `sleet-mirror`
/// at `dest_endpoint`: on one endpoint builtin copies server-side; across
/// two, every copier must stream (rclone, configured for one endpoint from
/// the environment as a node is, runs only on one).
async fn s3_to_s3(file_source: &str, endpoint: &str, dest_endpoint: &str) -> Vec<Run> {
    let one_endpoint = endpoint == dest_endpoint;
    let run_id = format!(
        "bench-{:x}-{}",
        std::process::id(),
        if one_endpoint { "one" } else { "two" }
    );
    let sleet_bucket = sleet::testing::local_s3_bucket(endpoint, "sleet");
    let mirror_bucket = sleet::testing::local_s3_bucket(dest_endpoint, "sleet-mirror");
    let (local, local_path) = sleet::store::open_url(file_source).expect("the file source");
    let source_path = Path::from(format!("{run_id}/source"));
    let (all, _) = listing(&local, &local_path).await;
    raw_copy(&local, &local_path, &sleet_bucket, &source_path, all).await;
    // Both roots know their bucket's address, as a node's do when it
    // opens s3:// URLs: builtin then copies across the buckets server-side.
    let source = || {
        DatabaseHandle::from_parts(
            format!("s3://sleet/{run_id}/source"),
            sleet_bucket.clone(),
            source_path.clone(),
        )
        .with_address(sleet::testing::local_s3_bucket_address(endpoint, "sleet"))
    };
    let destination = |name: &str| {
        DatabaseHandle::from_parts(
            format!("s3://sleet-mirror/{run_id}/{name}"),
            mirror_bucket.clone(),
            Path::from(format!("{run_id}/{name}")),
        )
        .with_address(sleet::testing::local_s3_bucket_address(
            dest_endpoint,
            "sleet-mirror",
        ))
    };
    let mut copiers = plugin_copiers().await;
    copiers.push((
        "builtin".to_string(),
        Arc::new(BuiltinCopier::new(PARALLELISM)),
    ));
    if one_endpoint {
        copiers.push((
            "rclone".to_string(),
            Arc::new(RcloneCopier::new(None)) as Arc<dyn Copier>,
        ));
    }
    // The objects a seeding pass copies: what builtin's untimed warm-up
    // pass wrote (the loop and builtin alone copy exactly these).
    let warm_up = destination("warm-up");
    let builtin = Arc::new(BuiltinCopier::new(PARALLELISM));
    pass(source(), destination("warm-up"), builtin.clone()).await;
    let warm_up = warm_up.root().prefix;
    let names = listing(&mirror_bucket, &warm_up).await.0;
    clear(&mirror_bucket, &warm_up).await;
    // Every contender runs `rounds()` times, each round in a rotated order
    // so that none always runs first or after the same neighbour; each
    // copy is deleted once timed, so every run meets the same server state.
    let mut contenders: Vec<Contender> = copiers
        .into_iter()
        .map(|(label, copier)| Contender::Pass(label, copier))
        .collect();
    contenders.push(Contender::Alone);
    contenders.push(Contender::Loop);
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); contenders.len()];
    for round in 0..rounds() {
        for step in 0..contenders.len() {
            let slot = (step + round) % contenders.len();
            let name = format!(
                "{}-{round}",
                contenders[slot].label().replace([' ', ','], "-")
            );
            let target = destination(&name);
            let start = Instant::now();
            match &contenders[slot] {
                Contender::Pass(_, copier) => {
                    pass(source(), destination(&name), copier.clone()).await;
                }
                Contender::Alone => copy_alone(&builtin, &source(), &target, &names).await,
                Contender::Loop => {
                    let to = target.root().prefix;
                    raw_copy(
                        &sleet_bucket,
                        &source_path,
                        &mirror_bucket,
                        &to,
                        names.clone(),
                    )
                    .await;
                }
            }
            times[slot].push(start.elapsed());
            if one_endpoint && round == 0 && contenders[slot].label() == "plugin copy-to" {
                print_check_cost_of(
                    "S3 to S3",
                    host_check(source(), destination(&name)).await,
                    times[slot][0],
                );
            }
            clear(&mirror_bucket, &target.root().prefix).await;
        }
    }
    contenders
        .iter()
        .zip(times)
        .map(|(contender, each)| Run::median_of(contender.label().to_string(), each))
        .collect()
}

/// Seeding passes between buckets `sleet` and `sleet-mirror` of the
/// Azure (`az`) or GCS (`gs`) emulator, URLs opened as a node opens them
/// (from the environment): builtin copies server-side (`Copy Blob`,
/// `rewriteTo`); the plain loop streams every byte through the bench.
/// Rounds alternate which runs first. Returns the runs and the MB a
/// seeding pass copies.
async fn between_buckets(scheme: &str, file_source: &str) -> (Vec<Run>, f64) {
    let run_id = format!("bench-{:x}-{scheme}", std::process::id());
    let open = |url: String| DatabaseHandle::open(&url).expect("a root on the emulator");
    let source = || open(format!("{scheme}://sleet/{run_id}/source"));
    let destination = |name: &str| open(format!("{scheme}://sleet-mirror/{run_id}/{name}"));
    let (local, local_path) = sleet::store::open_url(file_source).expect("the file source");
    let seeded = source();
    let (all, _) = listing(&local, &local_path).await;
    raw_copy(&local, &local_path, seeded.store(), seeded.path(), all).await;
    let builtin = Arc::new(BuiltinCopier::new(PARALLELISM));
    let warm_up = destination("warm-up");
    pass(source(), warm_up.clone(), builtin.clone()).await;
    let (names, copied) = listing(warm_up.store(), warm_up.path()).await;
    clear(warm_up.store(), warm_up.path()).await;
    let labels = ["builtin (server-side)", "object_store loop (streams)"];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); labels.len()];
    for round in 0..rounds() {
        for step in 0..labels.len() {
            let which = (step + round) % labels.len();
            let target = destination(&format!("{which}-{round}"));
            let start = Instant::now();
            if which == 0 {
                pass(source(), target.clone(), builtin.clone()).await;
            } else {
                let (from, to) = (seeded.store(), target.store());
                raw_copy(from, seeded.path(), to, target.path(), names.clone()).await;
            }
            times[which].push(start.elapsed());
            clear(target.store(), target.path()).await;
        }
    }
    let runs = labels
        .iter()
        .zip(times)
        .map(|(label, each)| Run::median_of(label.to_string(), each))
        .collect();
    (runs, copied as f64 / 1e6)
}

/// What the S3 cases time: a seeding pass with a copier; builtin's copy
/// of the same objects alone; the plain loop (the limit, last).
enum Contender {
    Pass(String, Arc<dyn Copier>),
    Alone,
    Loop,
}

impl Contender {
    fn label(&self) -> &str {
        match self {
            Contender::Pass(label, _) => label,
            Contender::Alone => "builtin, copy alone",
            Contender::Loop => "object_store loop (limit)",
        }
    }
}

/// builtin's copy of `names` from `source` to `destination`, outside a
/// pass: what the pass's own requests (pin, manifests, plan) add to it.
async fn copy_alone(
    copier: &BuiltinCopier,
    source: &DatabaseHandle,
    destination: &DatabaseHandle,
    names: &[String],
) {
    let (source, destination) = (source.root(), destination.root());
    let batch = sleet::mirror::copier::CopyBatch {
        source: &source,
        destination: &destination,
        objects: names,
    };
    let report = copier
        .copy(batch, &CopyProgress::new(), &CancellationToken::new())
        .await
        .expect("builtin copies");
    assert_eq!(report.copied(), names.len());
}

/// Runs per copier in the S3 cases: `SLEET_BENCH_ROUNDS`, default 3.
fn rounds() -> usize {
    std::env::var("SLEET_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3)
}

/// Deletes every object under `root`.
async fn clear(store: &Arc<dyn ObjectStore>, root: &Path) {
    let names = store
        .list(Some(root))
        .map(|meta| Ok(meta.expect("list").location))
        .boxed();
    store
        .delete_stream(names)
        .for_each(|deleted| async move {
            deleted.expect("delete");
        })
        .await;
}

/// Object sizes the multipart case copies, in MiB, 256 MiB of each.
const MULTIPART_SIZES_MIB: [u32; 4] = [16, 32, 64, 128];

/// For each size in [`MULTIPART_SIZES_MIB`]: 256 MiB of such objects
/// copied from `endpoint` to `second` by builtin with one PUT per object
/// and as multipart uploads, `rounds()` times each, alternating.
async fn multipart(endpoint: &str, second: &str) {
    let run_id = format!("bench-{:x}-multipart", std::process::id());
    let from = sleet::testing::local_s3_bucket(endpoint, "sleet");
    let to = sleet::testing::local_s3_bucket(second, "sleet-mirror");
    let root = |store: &Arc<dyn ObjectStore>, url: &str, name: &str| {
        DatabaseHandle::from_parts(
            format!("s3://{url}/{run_id}/{name}"),
            store.clone(),
            Path::from(format!("{run_id}/{name}")),
        )
    };
    println!(
        "mirror multipart: builtin streaming {PARALLELISM} objects at once from one S3 server to another"
    );
    for size in MULTIPART_SIZES_MIB {
        let source = root(&from, "sleet", &format!("{size}"));
        let count = (256 / size) as usize;
        let names: Vec<String> = (0..count)
            .map(|i| format!("compacted/{i:04}.sst"))
            .collect();
        for (i, name) in names.iter().enumerate() {
            let body = random_bytes((size as usize) << 20, u64::from(size) * 1000 + i as u64);
            from.put(&source.root().path(name), body.into())
                .await
                .expect("seed an object");
        }
        // One PUT: a threshold above the size; multipart: S3's smallest.
        let policies = [
            ("one PUT", StreamPolicy::with_threshold_mib(5120)),
            ("multipart", StreamPolicy::with_threshold_mib(5)),
        ];
        let mut times = [Vec::new(), Vec::new()];
        for round in 0..rounds() {
            for step in 0..policies.len() {
                let slot = (step + round) % policies.len();
                let (label, policy) = policies[slot];
                let name = format!("{size}-{}-{round}", label.replace(' ', "-"));
                let destination = root(&to, "sleet-mirror", &name);
                let copier = BuiltinCopier::new(PARALLELISM).with_policy(policy);
                let start = Instant::now();
                copy_alone(&copier, &source, &destination, &names).await;
                times[slot].push(start.elapsed());
                clear(&to, &destination.root().prefix).await;
            }
        }
        let [one, parts] = times.map(|each| Run::median_of(String::new(), each).elapsed);
        let mb = f64::from(256 * 1024 * 1024u32) / 1e6;
        println!(
            "mirror multipart: {count:>2} x {size:>3} MiB: one PUT {:.2} s ({:.0} MB/s), multipart {:.2} s ({:.0} MB/s): multipart takes {:.2}x one PUT's time",
            one.as_secs_f64(),
            mb / one.as_secs_f64(),
            parts.as_secs_f64(),
            mb / parts.as_secs_f64(),
            parts.as_secs_f64() / one.as_secs_f64()
        );
        clear(&from, &source.root().prefix).await;
    }
}

/// `len` incompressible bytes from `seed`.
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}
