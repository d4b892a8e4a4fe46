//! What a plugin costs by the language it is written in: for each kind
//! `sleet plugin new` writes, in Rust, Python (componentize-py) and
//! JavaScript (componentize-js), the component's size, its compile time
//! (what a node's first start pays) and its load from the compile cache
//! (every later start), what one call costs (a fresh instance, `configure`
//! and one export, as a copier batch or a hook call pays), and the memory
//! an instance holds. Languages whose toolchain is not installed are
//! skipped (scripts/bench installs them).

use std::path::Path;
use std::time::{Duration, Instant};

use sleet::commands::scaffold::{self, Lang};
use sleet::config::FleetConfig;
use sleet::plugin::hook::{HookRunner, HookSpec};
use sleet::plugin::{Loaded, PluginKind, PluginRuntime, PluginSet};

const KINDS: [PluginKind; 4] = [
    PluginKind::Copier,
    PluginKind::Hook,
    PluginKind::MergeOperator,
    PluginKind::CompactionFilter,
];

/// The config each kind's new project needs.
fn config(kind: PluginKind) -> Vec<(String, String)> {
    let pairs: &[(&str, &str)] = match kind {
        PluginKind::Hook => &[("start", "00:00"), ("end", "23:59")],
        PluginKind::CompactionFilter => &[("max_age", "7d")],
        _ => &[],
    };
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub async fn run() {
    let projects = tempfile::tempdir().expect("a projects dir");
    let rust_target = std::env::temp_dir().join("sleet-bench-plugins-new");
    for lang in [Lang::Rust, Lang::Python, Lang::Js] {
        if sleet::testing::toolchain(lang).is_none() {
            continue;
        }
        for kind in KINDS {
            let name = format!("{lang}-{kind}");
            let project = scaffold::project(lang, kind, &name).expect("a project");
            let dir = projects.path().join(&name);
            scaffold::write(&dir, &project).expect("written");
            let built = sleet::testing::build_project(&dir, lang, kind, &name, &rust_target);
            let plugins = projects.path().join(format!("{name}-dir"));
            std::fs::create_dir_all(&plugins).expect("a plugin dir");
            std::fs::copy(built, plugins.join(format!("{name}.wasm"))).expect("installed");
            measure(&name, kind, &plugins).await;
            if lang == Lang::Python && kind == PluginKind::Copier {
                node_start_up(&plugins);
            }
        }
    }
}

/// A real `sleet run` from spawn to its first heartbeat with one large
/// plugin in its plugin dir: first with an empty compile cache (the
/// node compiles it), then twice from the cache (every later start), and
/// with the dir emptied (the node's own start-up, for comparison).
fn node_start_up(plugins: &Path) {
    let work = tempfile::tempdir().expect("a work dir");
    let root = work.path().join("root");
    std::fs::create_dir_all(&root).expect("a root");
    std::fs::write(root.join("sleet.toml"), "").expect("sleet.toml");
    let size: u64 = std::fs::read_dir(plugins)
        .expect("the plugin dir")
        .map(|e| e.expect("an entry").metadata().expect("metadata").len())
        .sum();
    let start = |label: &str| {
        let started = Instant::now();
        let mut node = std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
            .args([
                "run",
                &format!("file://{}", root.display()),
                "--node-id",
                "n1",
            ])
            .arg("--plugin-dir")
            .arg(plugins)
            .arg("--plugin-cache")
            .arg(work.path().join("cache"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("sleet run starts");
        let beat =
            |entry: std::fs::DirEntry| entry.file_name().to_string_lossy().starts_with("n1.");
        while !std::fs::read_dir(root.join("nodes"))
            .map(|mut d| d.any(|e| e.is_ok_and(beat)))
            .unwrap_or(false)
        {
            assert!(started.elapsed() < Duration::from_secs(300), "no heartbeat");
            std::thread::sleep(Duration::from_millis(10));
        }
        let took = started.elapsed();
        node.kill().expect("stopped");
        node.wait().expect("reaped");
        let _ = std::fs::remove_dir_all(root.join("nodes"));
        println!(
            "plugin: node start-up, {label}: {} to the first heartbeat",
            human(took)
        );
    };
    let mb = size as f64 / 1e6;
    start(&format!("{mb:.1} MB plugin, empty compile cache"));
    start(&format!("{mb:.1} MB plugin, from the cache"));
    start(&format!("{mb:.1} MB plugin, from the cache"));
    for entry in std::fs::read_dir(plugins).expect("the plugin dir") {
        std::fs::remove_file(entry.expect("an entry").path()).expect("removed");
    }
    start("no plugin");
}

async fn measure(name: &str, kind: PluginKind, dir: &Path) {
    let dirs = [dir.to_path_buf()];
    let load = |runtime: &std::sync::Arc<PluginRuntime>| {
        let set = PluginSet::load(runtime, &dirs, &Default::default());
        let report = set.load_report(name).expect("it loads").clone();
        (set, report)
    };
    let (_, compiled) = load(&PluginRuntime::new(None).expect("a runtime"));
    let cache = tempfile::tempdir().expect("a cache dir");
    let filling = PluginRuntime::new(Some(cache.path().to_path_buf())).expect("a runtime");
    let _ = load(&filling);
    let cached = PluginRuntime::new(Some(cache.path().to_path_buf())).expect("a runtime");
    let (set, from_cache) = load(&cached);

    let limits = FleetConfig::default().plugin_limits(name, kind);
    let config = config(kind);
    let loaded = set.loaded().get(name).expect("loaded").clone();
    let hooks = HookRunner {
        hooks: vec![HookSpec {
            name: "bench".into(),
            plugin: name.into(),
            config: config.clone(),
            limits: limits.clone(),
        }],
        plugins: Some(std::sync::Arc::new(set)),
        node_id: "bench".into(),
        clock: sleet::plugin::hook::system_clock(),
    };
    let context = hooks.context("s3://b/db", sleet::Service::Mirror, None, "task", 1, None);
    // The instance's peak memory, from the check `sleet plugin check` makes.
    let peak = match &*loaded {
        Loaded::Copier(c) => c.check(&config, &limits).await.expect("describes").1,
        Loaded::Hook(h) => h.check(&config, &limits).await.expect("configures"),
        Loaded::MergeOperator(m) => m.check(&config, &limits).expect("configures"),
        Loaded::CompactionFilter(f) => f.check(&config, &limits).expect("configures"),
    };
    // One call: the kind's per-call price.
    let call = || async {
        match &*loaded {
            Loaded::Copier(c) => {
                c.check(&config, &limits).await.expect("describes");
            }
            Loaded::Hook(_) => {
                hooks.before(&context).await;
            }
            Loaded::MergeOperator(m) => {
                m.check(&config, &limits).expect("configures");
            }
            Loaded::CompactionFilter(f) => {
                f.check(&config, &limits).expect("configures");
            }
        }
    };
    call().await;
    let rounds = if compiled.bytes > 1 << 20 { 20 } else { 500 };
    let started = Instant::now();
    for _ in 0..rounds {
        call().await;
    }
    let per_call = started.elapsed() / rounds;
    println!(
        "plugin: {name}: {:.1} MB; compiled in {}, from the cache {}; one call (fresh instance, \
         configure, {}) {}; instance peak {:.1} MiB",
        compiled.bytes as f64 / 1e6,
        human(compiled.took),
        human(from_cache.took),
        match kind {
            PluginKind::Copier => "describe",
            PluginKind::Hook => "pre-task",
            _ => "nothing more",
        },
        human(per_call),
        peak as f64 / f64::from(1 << 20),
    );
    if let Loaded::MergeOperator(merge) = &*loaded {
        merge_calls(name, merge, &config, &limits);
    }
}

/// What SlateDB's compactor pays per `merge_batch` through a pooled,
/// configured instance (no fresh instance per call), by operands per call.
fn merge_calls(
    name: &str,
    merge: &std::sync::Arc<sleet::plugin::compaction::MergePlugin>,
    config: &[(String, String)],
    limits: &sleet::plugin::PluginLimits,
) {
    use bytes::Bytes;
    use slatedb::MergeOperator;
    let spec = sleet::plugin::compaction::CodeSpec {
        plugin: name.into(),
        config: config.to_vec(),
        limits: limits.clone(),
    };
    let operator = merge
        .operator(
            &spec,
            "file:///bench/db",
            sleet::plugin::compaction::unreported(),
        )
        .expect("configured");
    let key = Bytes::from_static(b"key-0000001");
    for operands in [1u64, 10, 100] {
        let batch: Vec<Bytes> = (0..operands)
            .map(|i| Bytes::copy_from_slice(&i.to_le_bytes()))
            .collect();
        let calls = 20_000 / operands as u32;
        for _ in 0..100 {
            operator.merge_batch(&key, None, &batch).expect("merges");
        }
        let started = Instant::now();
        for _ in 0..calls {
            std::hint::black_box(operator.merge_batch(&key, None, &batch).expect("merges"));
        }
        println!(
            "plugin: {name}: merge_batch of {operands} operands on a pooled instance: {}",
            human(started.elapsed() / calls)
        );
    }
}

fn human(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.2} s", d.as_secs_f64())
    } else if d >= Duration::from_millis(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else if d >= Duration::from_micros(10) {
        format!("{:.0} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} µs", d.as_secs_f64() * 1e6)
    }
}
