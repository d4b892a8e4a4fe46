//! The fleet root on a real S3-compatible server (moto, started by
//! `scripts/test`): conditional writes, LIST pagination and LastModified,
//! and the binary configured purely from the environment.
//!
//! Set `SLEET_S3_ENDPOINT` (and a `sleet` bucket) to run these; with
//! `SLEET_REQUIRE_S3=1` a missing server is a failure, not a skip.

use std::sync::Arc;

use futures::future::join_all;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use sleet::fleet::root::{ConfigPoller, FleetRoot, node_view};
use sleet::testing::{CountingStore, Op};

use crate::common::*;

/// Writes `body` at a root-relative path through the root's store.
async fn put(root: &FleetRoot, relative: &str, body: &'static [u8]) {
    root.store()
        .put(&root.path(relative), PutPayload::from_static(body))
        .await
        .expect("a PUT to the S3 server");
}

fn root_over(store: Arc<dyn ObjectStore>, prefix: &str) -> FleetRoot {
    FleetRoot::from_parts(format!("s3://{BUCKET}/{prefix}"), store, Path::from(prefix))
}

#[test]
fn the_binary_registers_and_reports_through_environment_options() {
    let Some(endpoint) = endpoint() else { return };
    let env = s3_env(&endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let root = format!("s3://{BUCKET}/{}", unique_prefix("cli"));
    let first = json(&ok(sleet_env(
        &["register", &root, "s3://data/db1", "--format", "json"],
        &env,
    )));
    assert_eq!(first["created"], true);
    let second = json(&ok(sleet_env(
        &["register", &root, "S3://Data/db1/", "--format", "json"],
        &env,
    )));
    assert_eq!(
        second["created"], false,
        "conditional create refused the second write"
    );
    let status = json(&ok(sleet_env(&["status", &root, "--format", "json"], &env)));
    assert_eq!(status["databases"][0]["url"], "s3://data/db1");
    let warnings = status["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .all(|w| w.as_str().unwrap().starts_with("no live node offers ")),
        "only placement warnings, nothing about the root: {status:#}"
    );

    let wrong = [
        ("AWS_ENDPOINT", "http://127.0.0.1:1"),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_MAX_RETRIES", "0"),
        ("AWS_RETRY_TIMEOUT", "1s"),
    ];
    let out = sleet_env(&["status", &root], &wrong);
    let err = fails_with(out, 1, "error: failed to list ");
    assert!(
        err.contains(&format!("{root}/nodes/")),
        "names what it tried to read: {err}"
    );
}

#[tokio::test]
async fn the_server_honours_conditional_writes() {
    let Some(endpoint) = endpoint() else { return };
    let store = s3_store(&endpoint);
    let path = Path::from(format!("{}/cas", unique_prefix("cas")));
    let create = || PutOptions::from(PutMode::Create);
    let first = store
        .put_opts(&path, PutPayload::from_static(b"one"), create())
        .await
        .unwrap();
    let again = store
        .put_opts(&path, PutPayload::from_static(b"two"), create())
        .await;
    assert!(
        matches!(again, Err(object_store::Error::AlreadyExists { .. })),
        "{again:?}"
    );

    let update = |result: &object_store::PutResult| {
        PutOptions::from(PutMode::Update(UpdateVersion {
            e_tag: result.e_tag.clone(),
            version: result.version.clone(),
        }))
    };
    let second = store
        .put_opts(&path, PutPayload::from_static(b"two"), update(&first))
        .await
        .unwrap();
    let stale = store
        .put_opts(&path, PutPayload::from_static(b"three"), update(&first))
        .await;
    assert!(
        matches!(stale, Err(object_store::Error::Precondition { .. })),
        "{stale:?}"
    );
    assert_eq!(
        &store.get(&path).await.unwrap().bytes().await.unwrap()[..],
        b"two"
    );

    // Racing writers: exactly one create and one update may win.
    let raced = Path::from(format!("{}/race", unique_prefix("cas")));
    let creates = join_all((0..8).map(|i| {
        let store = store.clone();
        let raced = raced.clone();
        async move {
            store
                .put_opts(&raced, PutPayload::from(format!("{i}")), create())
                .await
        }
    }))
    .await;
    assert_eq!(
        creates.iter().filter(|r| r.is_ok()).count(),
        1,
        "{creates:?}"
    );
    let updates = join_all((0..8).map(|i| {
        let store = store.clone();
        let path = path.clone();
        let opts = update(&second);
        async move {
            store
                .put_opts(&path, PutPayload::from(format!("u{i}")), opts)
                .await
        }
    }))
    .await;
    assert_eq!(
        updates.iter().filter(|r| r.is_ok()).count(),
        1,
        "{updates:?}"
    );
}

#[tokio::test]
async fn root_code_registers_lists_heartbeats_and_caches_by_etag() {
    let Some(endpoint) = endpoint() else { return };
    let counted = Arc::new(CountingStore::new(s3_store(&endpoint)));
    let prefix = unique_prefix("root");
    let root = root_over(counted.clone(), &prefix);

    assert!(root.register("s3://data/db1").await.unwrap().created);
    assert!(!root.register("s3://data/db1").await.unwrap().created);

    put(&root, "nodes/n1.cg.json", b"{}").await;
    put(&root, "nodes/n2.w.json", b"{}").await;
    let heartbeats = root.list_heartbeats().await.unwrap();
    assert_eq!(heartbeats.len(), 2);
    let now = chrono::Utc::now();
    for hb in &heartbeats {
        let skew = (now - hb.last_modified).num_seconds().abs();
        assert!(
            skew < 60,
            "LastModified {} is {skew}s from now",
            hb.last_modified
        );
    }
    let view = node_view(&heartbeats, now, std::time::Duration::from_secs(30));
    assert!(view.values().all(|n| n.live), "{view:#?}");

    put(&root, "sleet.toml", b"[node]\nconfig_poll = \"5s\"\n").await;
    put(
        &root,
        "dbs/s3%3A%2F%2Fdata%2Fdb1.toml",
        b"services = [\"gc\"]\n",
    )
    .await;
    let mut poller = ConfigPoller::new();
    let gets_before = counted.count(Op::Get);
    let view = poller.poll(&root).await;
    assert!(view.warnings.is_empty(), "{:?}", view.warnings);
    assert_eq!(
        counted.count(Op::Get) - gets_before,
        2,
        "config + one non-empty file"
    );
    poller.poll(&root).await;
    assert_eq!(
        counted.count(Op::Get) - gets_before,
        3,
        "unchanged ETags: config GET only"
    );
}

#[tokio::test]
async fn registry_listing_pages_past_a_thousand() {
    let Some(endpoint) = endpoint() else { return };
    let store = s3_store(&endpoint);
    let root = root_over(store.clone(), &unique_prefix("page"));
    let names: Vec<String> = (0..1100).map(|i| format!("s3://data/db{i:04}")).collect();
    for chunk in names.chunks(50) {
        join_all(chunk.iter().map(|db| root.register(db)))
            .await
            .into_iter()
            .for_each(|r| assert!(r.unwrap().created));
    }
    let view = ConfigPoller::new().poll(&root).await;
    assert_eq!(view.databases.len(), 1100);
    assert!(
        view.warnings.is_empty(),
        "{:?}",
        &view.warnings[..view.warnings.len().min(3)]
    );
}
