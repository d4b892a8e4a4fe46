//! What `deploy/` ships is checked by the tools it targets: every PromQL
//! expression of the Grafana dashboard parses with `promtool` and names
//! only metrics a node exports; the Kubernetes manifests validate against
//! the Kubernetes API schemas (`kubernetes-validate --strict`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const DASHBOARD: &str = "deploy/grafana/sleet-fleet.json";
const MANIFESTS: &str = "deploy/kubernetes";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A tool the test needs: found, or (where the suite must be complete,
/// as under `scripts/test`) a failure naming how to get it.
fn tool(candidates: &[&str], install: &str) -> Option<PathBuf> {
    let found = candidates.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("SLEET_REQUIRE_S3").is_none(),
            "none of {candidates:?} exists: {install}"
        );
        eprintln!("skipped: none of {candidates:?} exists");
    }
    found
}

/// Every `expr` of every panel target, nested rows included.
fn dashboard_exprs() -> Vec<String> {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(expr)) = map.get("expr") {
                    out.push(expr.clone());
                }
                map.values().for_each(|v| walk(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(repo(DASHBOARD)).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    walk(&dashboard, &mut exprs);
    exprs
}

/// A rules file with one recording rule per expression, which
/// `promtool check rules` parses as PromQL.
fn rules_file(exprs: &[String]) -> String {
    let mut text = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in exprs.iter().enumerate() {
        let quoted = serde_json::to_string(expr).unwrap();
        text.push_str(&format!(
            "      - record: dashboard:expr_{i}\n        expr: {quoted}\n"
        ));
    }
    text
}

fn promtool_accepts(promtool: &Path, exprs: &[String]) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, rules_file(exprs)).unwrap();
    let out = Command::new(promtool)
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .expect("promtool runs");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The sample names a node exports: counters as `<name>_total`,
/// histograms as `_bucket`, `_sum` and `_count`, gauges as they are.
fn exported_samples() -> BTreeSet<String> {
    let text = sleet::observe::metrics::Metrics::catalogue();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').unwrap();
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// `sleet_…` identifiers an expression names.
fn named_metrics(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("sleet_") {
        let before = rest[..at].chars().last();
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

#[test]
fn every_dashboard_expression_parses_and_names_an_exported_metric() {
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 15, "the dashboard has its panels");
    let exported = exported_samples();
    for expr in &exprs {
        let named = named_metrics(expr);
        assert!(!named.is_empty(), "{expr} names no sleet metric");
        for name in named {
            assert!(
                exported.contains(&name),
                "the dashboard queries {name}, which no node exports (exported: {exported:?})"
            );
        }
    }
    assert!(
        named_metrics("rate(sleet_not_a_metric_total[5m])")
            .iter()
            .all(|n| !exported.contains(n))
    );

    let Some(promtool) = tool(
        &["/usr/bin/promtool", "/usr/local/bin/promtool"],
        "install Debian's prometheus package (.ci/run and scripts/test do)",
    ) else {
        return;
    };
    promtool_accepts(&promtool, &exprs).unwrap_or_else(|e| panic!("promtool: {e}"));
    // The control: promtool rejects a broken expression.
    let broken = vec!["sum by (le (rate(sleet_node_ticks_total[5m]))".to_string()];
    assert!(promtool_accepts(&promtool, &broken).is_err());
}

#[test]
fn the_kubernetes_manifests_validate_against_the_api_schemas() {
    let validator = std::env::var("SLEET_KUBERNETES_VALIDATE").unwrap_or_default();
    let Some(validator) = tool(
        &[validator.as_str(), "/usr/local/bin/kubernetes-validate"],
        "scripts/with-servers installs kubernetes-validate into its venv",
    ) else {
        return;
    };
    let manifests: Vec<PathBuf> = std::fs::read_dir(repo(MANIFESTS))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    assert!(!manifests.is_empty());
    let validate = |files: &[PathBuf]| {
        Command::new(&validator)
            .args(["--strict", "--quiet"])
            .args(files)
            .output()
            .expect("kubernetes-validate runs")
    };
    let out = validate(&manifests);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The control: a misspelled probe field fails strict validation.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(&manifests[0]).unwrap();
    assert!(text.contains("periodSeconds:"));
    std::fs::write(&bad, text.replacen("periodSeconds:", "periodSecond:", 1)).unwrap();
    assert!(!validate(&[bad]).status.success());
}

/// `systemd-analyze verify` finds no unknown key or bad value in the unit
/// (where systemd's tools are installed; only the missing
/// `/usr/local/bin/sleet` of this machine is expected).
#[test]
fn the_systemd_unit_verifies() {
    let Some(analyze) = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("skipped: no systemd-analyze");
        return;
    };
    let verify = |unit: &str| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sleet.service");
        std::fs::write(&path, unit).unwrap();
        let out = Command::new(analyze)
            .arg("verify")
            .arg(&path)
            .output()
            .expect("systemd-analyze runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        text.lines()
            .filter(|l| !l.contains("/usr/local/bin/sleet is not executable"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let unit = std::fs::read_to_string(repo("deploy/systemd/sleet.service")).unwrap();
    let complaints = verify(&unit);
    assert!(complaints.is_empty(), "{complaints:#?}");
    // The control: a misspelled key is reported.
    let typo = unit.replacen("TimeoutStopSec", "TimeoutStopSex", 1);
    assert!(!verify(&typo).is_empty());
}
