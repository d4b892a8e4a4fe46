//! Proving stores: `sleet store check` against every test server, against
//! a proxy that makes conditional writes wrong in the ways S3-compatible
//! stores have, and under a skewed clock; and nodes that refuse to write
//! to a store that fails.

use futures::TryStreamExt;

use crate::common::*;
use crate::proxy::FaultProxy;

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
    let Some(library) = crate::s3_chaos::faketime_library() else {
        assert!(
            std::env::var_os("SLEET_REQUIRE_S3").is_none(),
            "scripts/test needs Debian's faketime (.ci/run installs it)"
        );
        return;
    };
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
