//! Proving stores: `sleet store check` against every test server, against
//! a proxy that makes conditional writes wrong in the ways S3-compatible
//! stores have, and under a skewed clock; and nodes that refuse to write
//! to a store that fails.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use crate::common::*;
use crate::proxy::FaultProxy;

/// libfaketime's preload library; `None` (a skip) only where the suite
/// does not require it.
fn faketime() -> Option<String> {
    let library = crate::s3_chaos::faketime_library();
    assert!(
        library.is_some() || std::env::var_os("SLEET_REQUIRE_S3").is_none(),
        "scripts/test needs Debian's faketime (.ci/run installs it)"
    );
    library
}

/// `sleet store check URL --format json` with `env`: the report, and
/// the exit code.
async fn store_check(url: &str, env: Vec<(&'static str, String)>) -> (serde_json::Value, i32) {
    store_check_with(url, env, &[]).await
}

async fn store_check_with(
    url: &str,
    env: Vec<(&'static str, String)>,
    extra: &[&str],
) -> (serde_json::Value, i32) {
    let mut args = vec![
        "store".to_string(),
        "check".to_string(),
        url.to_string(),
        "--format".into(),
        "json".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        sleet_env(&args, &env)
    })
    .await
    .unwrap();
    (json(&stdout(&out)), out.status.code().unwrap_or(-1))
}

/// Each property's outcome, by name.
fn outcomes(report: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    report["properties"]
        .as_array()
        .expect("properties")
        .iter()
        .map(|p| {
            (
                p["property"].as_str().unwrap().to_string(),
                p["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn outcome_of(report: &serde_json::Value, property: &str) -> (String, String) {
    let p = report["properties"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["property"] == property)
        .unwrap_or_else(|| panic!("{property} in {report:#}"));
    (
        p["outcome"].as_str().unwrap().to_string(),
        p["detail"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_test_server_is_checked_and_what_it_does_is_recorded() {
    let Some(endpoint) = endpoint() else { return };
    let (Some(_), Some(_)) = (gcs_endpoint(), azure_endpoint()) else {
        return;
    };
    let prefix = unique_prefix("store-check");
    // moto: every property.
    let (moto, code) = store_check(&format!("s3://{BUCKET}/{prefix}"), s3_env(&endpoint)).await;
    assert_eq!(code, 0, "{moto:#}");
    let all = outcomes(&moto);
    assert!(
        all.iter()
            .all(|(p, o)| o == "pass" || (p == "conditional-copy" && o == "not-applicable")),
        "moto passes every property (object_store offers S3 no copy-if-not-exists): {all:?}"
    );
    assert_eq!(moto["store"], "s3://sleet");
    // The scratch prefix is gone.
    let left: Vec<_> = s3_store(&endpoint)
        .list(Some(&object_store::path::Path::from(prefix.as_str())))
        .try_collect()
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");

    // The GCS emulator behind the project's front: its writes go to the
    // JSON API's ifGenerationMatch, which is atomic; the copy the front
    // makes ignores the generation condition.
    let (gcs, code) = store_check(&format!("gs://{BUCKET}/{prefix}"), vec![]).await;
    assert_eq!(code, 0, "{gcs:#}");
    assert_eq!(outcome_of(&gcs, "atomic-create").0, "pass", "{gcs:#}");
    assert_eq!(outcome_of(&gcs, "atomic-update").0, "pass", "{gcs:#}");
    let (copy, why) = outcome_of(&gcs, "conditional-copy");
    assert_eq!(copy, "fail", "{why}");
    assert!(why.contains("overwrote"), "{why}");

    // Azurite: every property, a conditional copy included.
    let (azure, code) = store_check(&format!("az://{BUCKET}/{prefix}"), vec![]).await;
    assert_eq!(code, 0, "{azure:#}");
    assert!(outcomes(&azure).values().all(|o| o == "pass"), "{azure:#}");
    let (etag, seen) = outcome_of(&azure, "etag");
    assert_eq!(etag, "pass");
    assert!(
        seen.contains("LIST 0x"),
        "Azure lists ETags unquoted: {seen}"
    );

    // file://: create-only writes atomic, no If-Match.
    let dir = tempfile::tempdir().unwrap();
    let (file, code) = store_check(&format!("file://{}", dir.path().display()), vec![]).await;
    assert_eq!(code, 0, "{file:#}");
    assert_eq!(outcome_of(&file, "atomic-create").0, "pass");
    assert_eq!(outcome_of(&file, "atomic-update").0, "not-applicable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_looks_then_writes_is_caught_and_named() {
    let Some(endpoint) = endpoint() else { return };
    let proxy = FaultProxy::start(&endpoint, 26).await;
    let url = format!("s3://{BUCKET}/{}", unique_prefix("look-then-write"));
    // Control: through the same proxy, honest, every race has one winner.
    let (honest, code) = store_check_with(&url, s3_env(&proxy.endpoint), &["--short"]).await;
    assert_eq!(code, 0, "{honest:#}");
    proxy.faults.look_then_write(true);
    let (report, code) = store_check_with(&url, s3_env(&proxy.endpoint), &["--short"]).await;
    assert_eq!(code, 1, "{report:#}");
    for race in ["atomic-create", "atomic-update"] {
        let (outcome, detail) = outcome_of(&report, race);
        assert_eq!(outcome, "fail", "{race}: {detail}");
        assert!(
            detail.contains("checks the condition and then writes"),
            "{race}: {detail}"
        );
    }
    assert_eq!(
        outcome_of(&report, "create-over-existing-refused").0,
        "pass",
        "one writer at a time, looking first is enough: only the races tell"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unquoted_etags_are_caught_and_named() {
    let Some(endpoint) = endpoint() else { return };
    let proxy = FaultProxy::start(&endpoint, 27).await;
    proxy.faults.unquote_etags(true);
    let url = format!("s3://{BUCKET}/{}", unique_prefix("unquoted"));
    let (report, code) = store_check_with(&url, s3_env(&proxy.endpoint), &["--short"]).await;
    assert_eq!(code, 1, "{report:#}");
    let (outcome, detail) = outcome_of(&report, "etag");
    assert_eq!(outcome, "fail", "{detail}");
    assert!(detail.contains("unquoted"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_clock_is_measured_and_reported() {
    let Some(endpoint) = endpoint() else { return };
    let Some(library) = faketime() else { return };
    let url = format!("s3://{BUCKET}/{}", unique_prefix("skew"));
    let mut env = s3_env(&endpoint);
    env.extend([
        ("LD_PRELOAD", library),
        ("FAKETIME", "+120s".to_string()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
    ]);
    let (report, code) = store_check_with(&url, env, &["--short"]).await;
    assert_eq!(
        code, 0,
        "a skewed machine is warned about, not the store: {report:#}"
    );
    let skew = report["skew"]["seconds"].as_f64().unwrap();
    assert!(
        (skew + 120.0).abs() < 2.0,
        "the store runs 120 s behind: {report:#}"
    );
    let (outcome, detail) = outcome_of(&report, "clock");
    assert_eq!(outcome, "fail", "{detail}");
    // Control: the same check without faketime.
    let (plain, _) = store_check_with(&url, s3_env(&endpoint), &["--short"]).await;
    assert!(
        plain["skew"]["seconds"].as_f64().unwrap().abs() < 2.0,
        "{plain:#}"
    );
}

/// A node cadence that notices config edits within a second.
const QUICK_NODE: &str =
    "[node]\nheartbeat_interval = \"300ms\"\nheartbeat_timeout = \"3s\"\nconfig_poll = \"300ms\"\n";

/// `sleet status ROOT --format json`, reaching S3 directly.
async fn status(root: &str, endpoint: &str) -> serde_json::Value {
    let (root, endpoint) = (root.to_string(), endpoint.to_string());
    tokio::task::spawn_blocking(move || {
        json(&ok(crate::s3_chaos::cli(
            &["status", &root, "--format", "json"],
            &endpoint,
        )))
    })
    .await
    .unwrap()
}

fn store_entry<'a>(status: &'a serde_json::Value, store: &str) -> Option<&'a serde_json::Value> {
    status["stores"]
        .as_array()?
        .iter()
        .find(|s| s["store"] == store)
}

fn warnings(status: &serde_json::Value) -> Vec<String> {
    status["warnings"]
        .as_array()
        .map(|w| w.iter().map(|w| w.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// A `sleet run` node reaching every S3 bucket through `proxy`.
fn node(id: &str, proxy: FaultProxy, dir: &std::path::Path) -> crate::s3_chaos::Node {
    crate::s3_chaos::Node {
        id: id.to_string(),
        proxy,
        services: None,
        child: None,
        log: dir.join(format!("{id}.log")),
    }
}

/// The heartbeat bodies under a `file://` root's `nodes/`.
fn heartbeats(root_dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_dir(root_dir.join("nodes"))
        .map(|entries| {
            entries
                .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                .filter_map(|text| serde_json::from_str(&text).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn running(heartbeat: &serde_json::Value, service: &str) -> u64 {
    heartbeat["services"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["service"] == service))
        .and_then(|s| s["running"].as_u64())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_writes_nothing_to_a_store_that_fails_until_it_is_trusted() {
    let Some(endpoint) = endpoint() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root_dir = dir.path().join("root");
    std::fs::create_dir_all(&root_dir).unwrap();
    let root = format!("file://{}", root_dir.display());
    std::fs::write(root_dir.join("sleet.toml"), QUICK_NODE).unwrap();
    let database = format!("s3://{BUCKET}/{}/db", unique_prefix("refused"));
    crate::db::seed(&database, 1).await;
    ok(sleet(&["register", &root, &database, "--no-check"]));
    let (store, base) = test_store(&database);
    let objects = || async {
        let listed: Vec<_> = store.list(Some(&base)).try_collect().await.unwrap();
        let mut names: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
        names.sort();
        names
    };
    let seeded = objects().await;

    let proxy = FaultProxy::start(&endpoint, 28).await;
    proxy.faults.look_then_write(true);
    let mut n1 = node("n1", proxy, dir.path());
    n1.spawn(&root);
    let refused = crate::cluster::poll_until(Duration::from_secs(30), "the store refused", || {
        let (root, endpoint) = (root.clone(), endpoint.clone());
        async move {
            let status = status(&root, &endpoint).await;
            let unsafe_store =
                store_entry(&status, "s3://sleet").is_some_and(|s| s["trust"] == "unsafe");
            let deferred = warnings(&status)
                .iter()
                .any(|w| w.contains("deferred on n1: store s3://sleet fails atomic-create"));
            (unsafe_store && deferred).then_some(status)
        }
    })
    .await;
    let entry = store_entry(&refused, "s3://sleet").unwrap();
    let failed: Vec<&str> = entry["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        failed.contains(&"atomic-create") && failed.contains(&"atomic-update"),
        "{entry:#}"
    );
    assert!(
        warnings(&refused)
            .iter()
            .any(|w| w.contains("[stores.trusted]")),
        "status says the fix: {refused:#}"
    );
    // A few more ticks: the node still writes nothing to the database.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(n1.running());
    assert_eq!(
        objects().await,
        seeded,
        "nothing was written to the refused store"
    );
    assert!(heartbeats(&root_dir).iter().all(|h| running(h, "gc") == 0));

    // The operator trusts the store: the node runs its tasks, and status
    // keeps showing what the check found, with the reason.
    std::fs::write(
        root_dir.join("sleet.toml"),
        format!(
            "{QUICK_NODE}[stores.trusted]\n\"s3://sleet\" = \"the test proxy; this test knows\"\n"
        ),
    )
    .unwrap();
    crate::cluster::poll_until(
        Duration::from_secs(30),
        "the trusted store's tasks run",
        || {
            let root_dir = root_dir.clone();
            async move {
                heartbeats(&root_dir)
                    .iter()
                    .any(|h| running(h, "gc") == 1)
                    .then_some(())
            }
        },
    )
    .await;
    let trusted = status(&root, &endpoint).await;
    let entry = store_entry(&trusted, "s3://sleet").unwrap();
    assert_eq!(entry["trust"], "trusted", "{entry:#}");
    assert_eq!(entry["trusted_because"], "the test proxy; this test knows");
    let shown = warnings(&trusted);
    assert!(
        shown.iter().any(|w| w.contains("s3://sleet fails atomic-create, atomic-update but is trusted in sleet.toml: the test proxy")),
        "{shown:#?}"
    );
    assert!(
        !shown.iter().any(|w| w.contains("deferred on n1")),
        "{shown:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_root_on_a_failing_store_gets_no_heartbeat_and_no_registration() {
    let Some(endpoint) = endpoint() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("unsafe-root");
    let root = format!("s3://{BUCKET}/{prefix}/root");
    s3_store(&endpoint)
        .put(
            &object_store::path::Path::from(format!("{prefix}/root/sleet.toml")),
            QUICK_NODE.into(),
        )
        .await
        .unwrap();
    let proxy = FaultProxy::start(&endpoint, 29).await;
    proxy.faults.look_then_write(true);
    let register = {
        let (root, proxy_endpoint) = (root.clone(), proxy.endpoint.clone());
        tokio::task::spawn_blocking(move || {
            crate::s3_chaos::cli(&["register", &root, "s3://data/db"], &proxy_endpoint)
        })
        .await
        .unwrap()
    };
    let refused = fails_with(
        register,
        1,
        "store s3://sleet fails atomic-create, atomic-update",
    );
    assert!(refused.contains("[stores.trusted]"), "{refused}");

    let mut n1 = node("n1", proxy, dir.path());
    n1.spawn(&root);
    let refused = crate::cluster::poll_until(Duration::from_secs(30), "the root refused", || {
        let (root, endpoint) = (root.clone(), endpoint.clone());
        async move {
            let status = status(&root, &endpoint).await;
            store_entry(&status, "s3://sleet")
                .is_some_and(|s| s["trust"] == "unsafe")
                .then_some(status)
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(n1.running());
    let nodes = status(&root, &endpoint).await["nodes"].clone();
    assert_eq!(
        nodes,
        serde_json::json!([]),
        "no heartbeat on an unsafe root: {refused:#}"
    );
    assert!(
        warnings(&refused)
            .iter()
            .any(|w| w.starts_with("store s3://sleet fails atomic-create")),
        "{refused:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_check_is_reused_by_the_next_node_and_renewed_when_it_expires() {
    let Some(endpoint) = endpoint() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("reuse");
    let root = format!("s3://{BUCKET}/{prefix}/root");
    let config = object_store::path::Path::from(format!("{prefix}/root/sleet.toml"));
    let s3 = s3_store(&endpoint);
    s3.put(
        &config,
        format!("{QUICK_NODE}[stores]\nrecheck_after = \"1h\"\n").into(),
    )
    .await
    .unwrap();
    let live = |count: usize| {
        let (root, endpoint) = (root.clone(), endpoint.clone());
        move || {
            let (root, endpoint) = (root.clone(), endpoint.clone());
            async move {
                let status = status(&root, &endpoint).await;
                let nodes = status["nodes"].as_array().unwrap();
                (nodes.iter().filter(|n| n["live"] == true).count() == count).then_some(())
            }
        }
    };
    let mut n1 = node("n1", FaultProxy::start(&endpoint, 30).await, dir.path());
    n1.spawn(&root);
    crate::cluster::poll_until(Duration::from_secs(30), "n1 live", live(1)).await;
    let first = n1
        .proxy
        .faults
        .counts
        .store_check_requests
        .load(Ordering::Relaxed);
    assert!(
        first > 10,
        "the first node checked the store: {first} requests"
    );

    let mut n2 = node("n2", FaultProxy::start(&endpoint, 31).await, dir.path());
    n2.spawn(&root);
    crate::cluster::poll_until(Duration::from_secs(30), "n2 live", live(2)).await;
    let counts = &n2.proxy.faults.counts;
    assert_eq!(
        counts.store_check_requests.load(Ordering::Relaxed),
        0,
        "the second node reused the record ({} requests in all)",
        counts.requests.load(Ordering::Relaxed)
    );

    // Expired: the next node to look checks again.
    n1.kill();
    s3.put(
        &config,
        format!("{QUICK_NODE}[stores]\nrecheck_after = \"2s\"\n").into(),
    )
    .await
    .unwrap();
    crate::cluster::poll_until(Duration::from_secs(30), "n2 rechecked", || {
        let checked = n2
            .proxy
            .faults
            .counts
            .store_check_requests
            .load(Ordering::Relaxed);
        async move { (checked > 10).then_some(()) }
    })
    .await;
    let renewed = status(&root, &endpoint).await;
    assert_eq!(
        store_entry(&renewed, "s3://sleet").unwrap()["trust"],
        "safe"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_clock_is_off_the_stores_says_so_in_status() {
    let Some(library) = faketime() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root_dir = dir.path().join("root");
    std::fs::create_dir_all(&root_dir).unwrap();
    std::fs::write(root_dir.join("sleet.toml"), QUICK_NODE).unwrap();
    let root = format!("file://{}", root_dir.display());
    let log = std::fs::File::create(dir.path().join("n1.log")).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
        .args(["run", &root, "--node-id", "n1"])
        .env("LD_PRELOAD", library)
        .env("FAKETIME", "+30s")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let skewed = crate::cluster::poll_until(Duration::from_secs(30), "the skew reported", || {
        let root = root.clone();
        async move {
            let status = tokio::task::spawn_blocking(move || {
                json(&ok(sleet(&["status", &root, "--format", "json"])))
            })
            .await
            .unwrap();
            warnings(&status)
                .iter()
                .any(|w| w.starts_with("n1's clock is +"))
                .then_some(status)
        }
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let clock = &skewed["nodes"][0]["clock"];
    let skew_ms = clock["skew_ms"].as_i64().unwrap();
    assert!((skew_ms + 30_000).abs() < 1_500, "{clock}");
    assert_eq!(clock["bound_ms"], 1350, "min(3 s - 0.3 s, 5 m) / 2");
    let warning = warnings(&skewed)
        .into_iter()
        .find(|w| w.starts_with("n1's clock"))
        .unwrap();
    assert!(
        warning.contains("beyond the 1.4 s the fleet tolerates"),
        "{warning}"
    );
}
