//! `sleet plugin check --exercise`: a few real calls into each plugin,
//! against scratch stores, with the config a fleet gives it. A plugin that
//! would trap on its first real call in a node (state kept on `self` in
//! Python, an exception in JavaScript, a panic in Rust) fails here, with
//! its own error, before anyone deploys it.
//!
//! - a copier copies three objects (one larger than one host read, one
//!   empty) between two in-memory roots, and the host checks every byte;
//! - a hook answers a `pre-task` and hears a `post-task`, for a task and
//!   for a mirror pass;
//! - a merge operator merges counters and text; a compaction filter judges
//!   a value, a merge operand and a tombstone, then hears the end.
//!
//! A merge operator or filter that returns an error for these values is
//! warned about, not failed: its own values may be of another shape. Only
//! a trap, a timeout or a broken reply fails.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use crate::config::PluginLimits;
use crate::plugin::PluginError;
pub use crate::plugin::compaction::exercise::Exercised;
use crate::plugin::copier::{CopierPlugin, Reported};
use crate::plugin::hook::{HookPlugin, RunContext, RunOutcome};
use crate::plugin::{Loaded, compaction};
use crate::store::StoreRoot;
use crate::store::upload::StreamPolicy;

/// The objects a copier is given: a small one, one larger than the most
/// one host `read` returns (1 MiB), and an empty one.
const OBJECTS: [(&str, usize); 3] = [
    ("compacted/01EXERCISE0000000000000001.sst", 4 * 1024),
    (
        "compacted/01EXERCISE0000000000000002.sst",
        1024 * 1024 + 512 * 1024,
    ),
    ("wal/00000000000000000001.sst", 0),
];

/// Exercises `loaded` with `config` under `limits`.
pub async fn exercise(
    loaded: &Loaded,
    config: &[(String, String)],
    limits: &PluginLimits,
) -> Result<Exercised, PluginError> {
    match loaded {
        Loaded::Copier(copier) => copy(copier, config, limits).await,
        Loaded::Hook(hook) => hook_calls(hook, config, limits).await,
        Loaded::MergeOperator(merge) => {
            let merge = merge.clone();
            let (config, limits) = (config.to_vec(), limits.clone());
            blocking(move || compaction::exercise::merges(&merge, &config, &limits)).await
        }
        Loaded::CompactionFilter(filter) => {
            let filter = filter.clone();
            let (config, limits) = (config.to_vec(), limits.clone());
            blocking(move || compaction::exercise::filters(&filter, &config, &limits)).await
        }
    }
}

/// Compaction plugins are called synchronously, as SlateDB calls them.
async fn blocking(
    call: impl FnOnce() -> Result<Exercised, PluginError> + Send + 'static,
) -> Result<Exercised, PluginError> {
    tokio::task::spawn_blocking(call)
        .await
        .unwrap_or_else(|e| panic!("a compaction plugin's exercise panicked: {e}"))
}

fn scratch_root(name: &str) -> StoreRoot {
    StoreRoot {
        url: format!("memory:///{name}"),
        store: Arc::new(InMemory::new()),
        prefix: Path::from(""),
        address: None,
    }
}

/// Bytes that differ from object to object and position to position.
fn body(index: usize, size: usize) -> Bytes {
    (0..size)
        .map(|i| (i.wrapping_mul(31) ^ index.wrapping_mul(131)) as u8)
        .collect()
}

async fn copy(
    copier: &CopierPlugin,
    config: &[(String, String)],
    limits: &PluginLimits,
) -> Result<Exercised, PluginError> {
    let name = copier.info().name.clone();
    let (info, _) = copier.check(config, limits).await?;
    let source = scratch_root("exercise-source");
    let destination = scratch_root("exercise-destination");
    let mut expected = Vec::new();
    for (index, (path, size)) in OBJECTS.iter().enumerate() {
        let bytes = body(index, *size);
        source
            .store
            .put(&source.path(path), PutPayload::from(bytes.clone()))
            .await
            .expect("an in-memory put");
        expected.push((path.to_string(), bytes));
    }
    let names: Vec<String> = expected.iter().map(|(path, _)| path.clone()).collect();
    let batch = CopierPlugin::batch_size(info.max_batch);
    let mut calls = 0;
    for chunk in names.chunks(batch) {
        let (outcomes, _) = copier
            .run_batch(
                &source,
                &destination,
                chunk,
                config,
                limits,
                StreamPolicy::default(),
            )
            .await?;
        calls += 1;
        for (path, outcome) in outcomes {
            let wrong = |why: String| PluginError::Protocol {
                name: name.clone(),
                message: format!("exercise copy of {path}: {why}"),
            };
            match outcome {
                Reported::Copied { .. } => {}
                Reported::NotFound => {
                    return Err(wrong(
                        "it reported the source object missing; it is there".into(),
                    ));
                }
                Reported::Failed(message) => return Err(wrong(format!("it failed: {message}"))),
            }
            let want = &expected
                .iter()
                .find(|(p, _)| *p == path)
                .expect("a batch object")
                .1;
            let got = destination.store.get(&destination.path(&path)).await;
            let got = match got {
                Ok(got) => got.bytes().await.map_err(|e| wrong(e.to_string()))?,
                Err(e) => {
                    return Err(wrong(format!(
                        "it reported it copied, but the destination has no such object ({e})"
                    )));
                }
            };
            if got != want {
                return Err(wrong(format!(
                    "it reported it copied, but the destination holds {} bytes that differ \
                     from the source's {}",
                    got.len(),
                    want.len()
                )));
            }
        }
    }
    Ok(Exercised {
        did: vec![format!(
            "copied {} objects ({} bytes in all, one larger than a read, one empty) in {calls} \
             calls; every byte checked",
            OBJECTS.len(),
            OBJECTS.iter().map(|(_, size)| size).sum::<usize>()
        )],
        warnings: Vec::new(),
    })
}

async fn hook_calls(
    hook: &HookPlugin,
    config: &[(String, String)],
    limits: &PluginLimits,
) -> Result<Exercised, PluginError> {
    let mut did = Vec::new();
    for (service, target, run) in [
        (crate::Service::Gc, None, "task"),
        (
            crate::Service::Mirror,
            Some("dr".to_string()),
            "mirror-pass",
        ),
    ] {
        let context = RunContext {
            database: "s3://exercise/db".into(),
            service,
            target,
            run,
            node_id: "plugin-check".into(),
            attempt: 1,
            last_error: None,
            now: chrono::Utc::now(),
        };
        let decision = hook.pre_run(config, limits, &context).await?;
        let outcome = RunOutcome {
            status: "ok",
            error: None,
            duration: Duration::from_millis(1500),
        };
        hook.post_run(config, limits, &context, &outcome).await?;
        did.push(format!(
            "{run} of {service}: pre-task said {decision:?}; post-task heard"
        ));
    }
    Ok(Exercised {
        did,
        warnings: Vec::new(),
    })
}
