//! Plugin host costs: compile time with and without the cache, the cost of
//! a fresh instance, and per-call overhead, measured on the example
//! plugins built from `plugins/`.
//!
//! `cargo bench --bench plugin` runs everything; `-- languages` only the
//! costs of `sleet plugin new` projects in Rust, Python and JavaScript
//! (each kind: size, compile and cached load, one call, instance memory);
//! `-- compaction` only the
//! compaction of merge operands with the native counter against the wasm
//! one (`SLEET_BENCH_MERGE_KEYS`, default 100,000 keys, and
//! `SLEET_BENCH_MERGE_ROUNDS`, default 10 operands each). The seeding
//! comparison of plugin copiers against builtin is in `--bench mirror`.
//! docs/performance.md records a run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sleet::config::FleetConfig;
use sleet::plugin::hook::{HookRunner, HookSpec};
use sleet::plugin::{PluginRuntime, PluginSet};

#[path = "plugin/compaction.rs"]
mod compaction;
#[path = "plugin/languages.rs"]
mod languages;

fn main() {
    let only_compaction = std::env::args().any(|a| a == "compaction");
    let only_languages = std::env::args().any(|a| a == "languages");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let target = std::env::temp_dir().join("sleet-bench-plugins");
        let built = sleet::testing::build_plugins(&target);
        let dir = tempfile::tempdir().expect("a plugin dir");
        for name in ["verify-copier", "audit-hook", "counter-merge"] {
            let file = format!("{}.wasm", name.replace('-', "_"));
            std::fs::copy(built.join(&file), dir.path().join(format!("{name}.wasm")))
                .expect("copy a plugin");
        }
        if only_languages {
            return languages::run().await;
        }
        if !only_compaction {
            compile_times(dir.path());
            call_costs(dir.path()).await;
            languages::run().await;
        }
        compaction::run(dir.path()).await;
    });
}

fn compile_times(dir: &std::path::Path) {
    let dirs = [dir.to_path_buf()];
    let cold = Instant::now();
    let uncached = PluginRuntime::new(None).expect("a runtime");
    let _ = PluginSet::load(&uncached, &dirs, &Default::default());
    let uncached_time = cold.elapsed();

    let cache = tempfile::tempdir().expect("a cache dir");
    let filling = PluginRuntime::new(Some(cache.path().to_path_buf())).expect("a runtime");
    let _ = PluginSet::load(&filling, &dirs, &Default::default());
    let warm = Instant::now();
    let cached = PluginRuntime::new(Some(cache.path().to_path_buf())).expect("a runtime");
    let set = PluginSet::load(&cached, &dirs, &Default::default());
    let cached_time = warm.elapsed();
    assert_eq!(set.infos().len(), 3);
    println!(
        "plugin: load 3 plugins (verify-copier, audit-hook, counter-merge): compiled {:.1} ms, from the cache {:.1} ms",
        ms(uncached_time),
        ms(cached_time)
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A hook call is a fresh store, instantiation, `configure` and one export
/// call: the whole per-call price a task run pays per hook.
async fn call_costs(dir: &std::path::Path) {
    let runtime = PluginRuntime::new(None).expect("a runtime");
    let set = Arc::new(PluginSet::load(
        &runtime,
        &[dir.to_path_buf()],
        &Default::default(),
    ));
    let hook = HookRunner {
        hooks: vec![HookSpec {
            name: "audit".into(),
            plugin: "audit-hook".into(),
            config: Vec::new(),
            limits: FleetConfig::default()
                .plugin_limits("audit-hook", sleet::plugin::PluginKind::Hook),
        }],
        plugins: Some(set.clone()),
        node_id: "bench".into(),
        clock: sleet::plugin::hook::system_clock(),
    };
    let context = hook.context("s3://b/db", sleet::Service::Gc, None, "task", 1, None);
    let rounds = 2000u32;
    for _ in 0..100 {
        hook.before(&context).await; // warm up
    }
    let start = Instant::now();
    for _ in 0..rounds {
        hook.before(&context).await;
    }
    let per_call = start.elapsed() / rounds;

    let copier = set.copier("verify-copier", "bench").expect("the copier");
    let limits =
        FleetConfig::default().plugin_limits("verify-copier", sleet::plugin::PluginKind::Copier);
    let start = Instant::now();
    for _ in 0..rounds {
        copier.check(&[], &limits).await.expect("describe");
    }
    let instantiate_and_two_calls = start.elapsed() / rounds;
    println!(
        "plugin: hook pre-task (fresh instance + configure + pre-task): {:.1} µs per call",
        per_call.as_secs_f64() * 1e6
    );
    println!(
        "plugin: copier instance + configure + describe: {:.1} µs per call",
        instantiate_and_two_calls.as_secs_f64() * 1e6
    );
}
