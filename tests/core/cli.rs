//! The real binary: register, status and config check over `file://` roots,
//! and the errors people will actually hit.

use std::time::Duration;

use sleet::Service;
use sleet::model::placement::PlacementKey;
use sleet::model::registry::file_name;

use crate::common::*;

#[test]
fn register_creates_once_and_reports_existing() {
    let root = FileRoot::new();
    let url = root.url();
    assert_eq!(
        ok(sleet(&["register", &url, "S3://Bucket/db/", "--no-check"])),
        "registered s3://bucket/db at dbs/s3%3A%2F%2Fbucket%2Fdb.toml\n"
    );
    assert!(root.path("dbs/s3%3A%2F%2Fbucket%2Fdb.toml").is_file());
    assert_eq!(
        ok(sleet(&["register", &url, "s3://bucket/db", "--no-check"])),
        "s3://bucket/db already registered at dbs/s3%3A%2F%2Fbucket%2Fdb.toml\n"
    );
    let again = json(&ok(sleet(&[
        "register",
        &url,
        "s3://bucket/db",
        "--no-check",
        "--format",
        "json",
    ])));
    assert_eq!(
        again,
        serde_json::json!({"url": "s3://bucket/db", "file": "dbs/s3%3A%2F%2Fbucket%2Fdb.toml", "created": false})
    );
    let fresh = ok(sleet(&[
        "register",
        &url,
        "gs://analytics/events",
        "--no-check",
        "--format",
        "json",
    ]));
    assert!(
        fresh.ends_with("}\n"),
        "pretty JSON with a trailing newline"
    );
    assert_eq!(json(&fresh)["created"], true);
}

#[test]
fn register_takes_many_databases_and_checks_them_all_before_writing() {
    let root = FileRoot::new();
    let url = root.url();
    let list = root.path("to-register.txt");
    std::fs::write(&list, "# tenants\ns3://bucket/t2\n\n  s3://bucket/t3  \n").unwrap();
    let from = list.to_str().unwrap();
    assert_eq!(
        ok(sleet(&[
            "register",
            &url,
            "s3://bucket/t1",
            "--from",
            from,
            "--no-check"
        ])),
        "registered s3://bucket/t1 at dbs/s3%3A%2F%2Fbucket%2Ft1.toml\n\
         registered s3://bucket/t2 at dbs/s3%3A%2F%2Fbucket%2Ft2.toml\n\
         registered s3://bucket/t3 at dbs/s3%3A%2F%2Fbucket%2Ft3.toml\n"
    );
    let again = json(&ok(sleet(&[
        "register",
        &url,
        "s3://bucket/t1",
        "s3://bucket/t4",
        "--no-check",
        "--format",
        "json",
    ])));
    assert_eq!(again[0]["created"], false, "{again:#}");
    assert_eq!(again[1]["created"], true, "{again:#}");

    // One bad URL, or a missing list, and nothing is written.
    fails_with(
        sleet(&[
            "register",
            &url,
            "s3://bucket/t5",
            "not a url",
            "--no-check",
        ]),
        1,
        "error: invalid URL \"not a url\"",
    );
    fails_with(
        sleet(&[
            "register",
            &url,
            "s3://bucket/t5",
            "--from",
            "/nonexistent/list",
        ]),
        1,
        "error: --from /nonexistent/list: cannot read it:",
    );
    let empty = root.path("empty.txt");
    std::fs::write(&empty, "# nothing yet\n\n").unwrap();
    fails_with(
        sleet(&["register", &url, "--from", empty.to_str().unwrap()]),
        1,
        "lists no database URLs",
    );
    assert!(
        !root
            .path(&format!("dbs/{}", file_name("s3://bucket/t5")))
            .exists()
    );

    // Two new databases whose targets collide with each other are refused
    // together; either alone is not.
    let mirrored = FileRoot::new();
    mirrored.write(
        "sleet.toml",
        "[database.mirror.targets.dr]\nurl = \"s3://dr/x\"\n",
    );
    fails_with(
        sleet(&[
            "register",
            &mirrored.url(),
            "s3://bucket/t6",
            "s3://bucket/t7",
            "--no-check",
        ]),
        1,
        "error: mirror destinations would collide: s3://bucket/t6 target dr and s3://bucket/t7 \
         target dr all map to s3://dr/x",
    );
    assert!(!mirrored.path("dbs").exists(), "nothing was written");
    ok(sleet(&[
        "register",
        &mirrored.url(),
        "s3://bucket/t6",
        "--no-check",
    ]));
}

#[test]
fn status_of_an_empty_root() {
    let root = FileRoot::new();
    assert_eq!(
        ok(sleet(&["status", &root.url()])),
        "NODE  LIVE  HEARTBEAT  SERVICES  SLEET  SLATEDB\n\nDATABASE  SERVICE  NODES\n"
    );
    assert_eq!(
        ok(sleet(&["status", &root.url(), "--format", "json"])),
        "{\n  \"nodes\": [],\n  \"databases\": []\n}\n"
    );
}

fn body(node: &str) -> String {
    format!(
        r#"{{"version":1,"node_id":"{node}","sleet_version":"0.1.0","slatedb_version":"0.14.1","services":[]}}"#
    )
}

/// A root with three live nodes (one with a garbled body), one dead node,
/// three databases and an alias.
fn populated_root() -> FileRoot {
    let root = FileRoot::new();
    root.heartbeat("n1.cgmw.json", &body("n1"), Duration::from_secs(1));
    root.heartbeat("n2.g.json", &body("n2"), Duration::from_secs(2));
    root.heartbeat("n3.w.json", "not json", Duration::from_secs(3));
    root.heartbeat("gone.cgmw.json", &body("gone"), Duration::from_secs(600));
    root.write("sleet.toml", "[database.compaction-workers]\ncount = 2\n");
    root.write(&format!("dbs/{}", file_name("s3://b/one")), "");
    root.write(
        &format!("dbs/{}", file_name("s3://b/two")),
        "services = [\"gc\"]\n",
    );
    root.write(
        &format!("dbs/{}", file_name("s3://b/off")),
        "services = []\n",
    );
    root.write(&format!("dbs/{}", file_name("S3://B/one")), "");
    root.write("dbs/notes.txt", "hello");
    root
}

#[test]
fn status_reports_nodes_placement_and_warnings() {
    let root = populated_root();
    let status = json(&ok(sleet(&["status", &root.url(), "--format", "json"])));

    let nodes = status["nodes"].as_array().unwrap();
    let ids: Vec<_> = nodes
        .iter()
        .map(|n| n["node_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["gone", "n1", "n2", "n3"]);
    assert_eq!(nodes[0]["live"], false, "600s old with a 30s timeout");
    assert_eq!(nodes[0]["heartbeat_age"], "10m");
    assert_eq!(nodes[1]["heartbeat_age"], "1s", "whole seconds");
    assert_eq!(nodes[1]["live"], true);
    assert_eq!(
        nodes[1]["services"],
        serde_json::json!([
            "gc",
            "compactor-coordinator",
            "compaction-workers",
            "mirror"
        ])
    );
    assert_eq!(nodes[1]["sleet_version"], "0.1.0");
    assert_eq!(nodes[3]["live"], true);
    assert!(
        nodes[3].get("sleet_version").is_none(),
        "garbled body: versions absent"
    );

    let dbs = status["databases"].as_array().unwrap();
    let urls: Vec<_> = dbs.iter().map(|d| d["url"].as_str().unwrap()).collect();
    assert_eq!(urls, ["s3://b/off", "s3://b/one", "s3://b/two"]);
    assert_eq!(
        dbs[0]["services"],
        serde_json::json!([]),
        "services = [] runs nothing"
    );

    // s3://b/one runs the defaults: placement follows the frozen ranking
    // over the live nodes offering each service (the dead one excluded).
    let one = dbs[1]["services"].as_array().unwrap();
    let owners = |i: usize| -> Vec<String> {
        one[i]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    };
    let rank = |service, nodes: &[&'static str]| -> Vec<String> {
        PlacementKey::Service {
            database: "s3://b/one",
            service,
        }
        .rank(nodes.iter().copied())
        .into_iter()
        .map(str::to_string)
        .collect()
    };
    assert_eq!(one.len(), 3, "mirror has no targets: no entry");
    assert_eq!(one[0]["service"], "gc");
    assert_eq!(owners(0), rank(Service::Gc, &["n1", "n2"])[..1]);
    assert_eq!(owners(1), ["n1"], "only n1 offers the coordinator");
    assert_eq!(
        owners(2),
        rank(Service::CompactionWorkers, &["n1", "n3"]),
        "count = 2"
    );
    assert_eq!(dbs[2]["services"][0]["service"], "gc");

    let warnings: Vec<_> = status["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert_eq!(warnings[0], "ignoring non-registry object dbs/notes.txt");
    assert!(warnings[1].starts_with("registry entries dbs/s3%3A%2F%2Fb%2Fone.toml and dbs/S3%3A%2F%2FB%2Fone.toml alias s3://b/one"));
    assert!(warnings[2].starts_with("registry entry dbs/S3%3A%2F%2FB%2Fone.toml is not canonical"));
}

#[test]
fn status_text_is_a_readable_table() {
    let root = populated_root();
    let text = ok(sleet(&["status", &root.url()]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("NODE  "), "{text}");
    assert!(lines[1].starts_with("gone  no "), "{text}");
    assert!(
        lines.iter().any(
            |l| l.starts_with("n3    yes   3s         compaction-workers  ")
                && l.ends_with("  -      -")
        ),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("DATABASE    SERVICE")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("s3://b/one  compactor-coordinator  n1")),
        "{text}"
    );
    assert!(
        lines.contains(&"warning: ignoring non-registry object dbs/notes.txt"),
        "{text}"
    );
    assert!(
        text.lines().all(|l| l == l.trim_end()),
        "no trailing whitespace"
    );
}

#[test]
fn a_broken_fleet_config_is_a_warning_naming_the_file() {
    let root = FileRoot::new();
    root.write("sleet.toml", "[node]\nheartbeat_interval = 10\n");
    let status = json(&ok(sleet(&["status", &root.url(), "--format", "json"])));
    let warning = status["warnings"][0].as_str().unwrap();
    let expected = format!(
        "invalid {}/sleet.toml: failed to parse config: line 2",
        root.url()
    );
    assert!(warning.starts_with(&expected), "{warning}");
    assert!(warning.ends_with("; keeping last good config"), "{warning}");
}

#[test]
fn bad_inputs_fail_with_a_message_naming_the_problem() {
    let root = FileRoot::new();
    let url = root.url();
    fails_with(
        sleet(&["status", "ftp://host/fleet"]),
        1,
        "error: invalid fleet root: unsupported URL scheme \"ftp\" (expected one of s3, s3a, gs, az, adl, azure, abfs, abfss, file, memory, http, https)",
    );
    fails_with(
        sleet(&["register", &url, "not a url"]),
        1,
        "error: invalid URL \"not a url\": relative URL without a base",
    );
    let long = format!("s3://bucket/{}", "x".repeat(1000));
    fails_with(
        sleet(&["register", &url, &long]),
        1,
        "error: database URL too long: its registry file name is 1025 bytes (max 900",
    );
    fails_with(
        sleet(&["status", &url, "--format", "yaml"]),
        2,
        "invalid value 'yaml' for '--format <FORMAT>'",
    );
    fails_with(
        sleet(&["register", &url]),
        2,
        "required arguments were not provided",
    );
    fails_with(sleet(&["launch"]), 2, "unrecognized subcommand 'launch'");
    assert!(!root.path("dbs").exists(), "nothing was written");
}

#[test]
fn config_check_names_each_file_and_problem() {
    let root = FileRoot::new();
    let fleet = root.write("sleet.toml", "[database.compaction-workers]\ncount = 2\n");
    let good = root.write("good.toml", "services = [\"gc\"]\n");
    let malformed = root.write("malformed.toml", "services = [\"gc\"\n");
    let unknown = root.write("unknown.toml", "[gc.wals]\nmin_age = \"1m\"\n");
    let invalid = root.write("invalid.toml", "[compaction-workers]\ncount = 0\n");
    let p = |p: &std::path::Path| p.display().to_string();

    let out = ok(sleet(&["config", "check", &p(&fleet), &p(&good)]));
    assert_eq!(out, format!("ok: {}\nok: {}\n", p(&fleet), p(&good)));

    let out = sleet(&[
        "config",
        "check",
        &p(&good),
        &p(&malformed),
        &p(&unknown),
        &p(&invalid),
    ]);
    let text = stdout(&out);
    fails_with(out, 1, "error: 3 of 4 config files have problems");
    assert!(
        text.contains(&format!(
            "error: {}: failed to parse config: line 1",
            p(&malformed)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "error: {}: failed to parse config: line 1, column 5: unknown field `wals`",
            p(&unknown)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "error: {}: invalid config:\n  compaction-workers.count must be >= 1",
            p(&invalid)
        )),
        "{text}"
    );

    let missing = root.path("missing.toml");
    let out = sleet(&["config", "check", &p(&missing)]);
    let text = stdout(&out);
    fails_with(out, 1, "1 of 1");
    assert!(
        text.starts_with(&format!("error: {}: cannot read", p(&missing))),
        "{text}"
    );

    let bad_fleet = root.write("other/sleet.toml", "[node]\nconfig_poll = \"0s\"\n");
    let out = sleet(&["config", "check", "--fleet", &p(&bad_fleet), &p(&good)]);
    let text = stdout(&out);
    fails_with(out, 1, "problems");
    assert!(text.contains("node.config_poll must be > 0"), "{text}");
    assert!(
        text.contains("not checked: the fleet config it is laid over is invalid"),
        "{text}"
    );
}

#[test]
fn logs_never_reach_stdout() {
    let root = FileRoot::new();
    let out = sleet_env(
        &["status", &root.url(), "--format", "json"],
        &[("RUST_LOG", "trace")],
    );
    let text = ok(out);
    json(&text);
}

#[test]
fn version_and_help() {
    let out = ok(sleet(&["--version"]));
    assert_eq!(out, format!("sleet {}\n", env!("CARGO_PKG_VERSION")));
    for args in [
        &["--help"][..],
        &["status", "--help"],
        &["register", "-h"],
        &["config", "check", "--help"],
    ] {
        let text = ok(sleet(args));
        assert!(text.contains("Usage: sleet"), "{args:?}: {text}");
    }
}

/// An author gets the WIT this binary speaks, byte for byte, without the
/// repository; `plugin new` refuses a bad name or an existing directory
/// with a clear error and writes nothing over anything.
#[test]
fn plugin_wit_and_plugin_new_write_what_an_author_needs() {
    let dir = tempfile::tempdir().unwrap();
    let wit = dir.path().join("wit");
    ok(sleet(&["plugin", "wit", wit.to_str().unwrap()]));
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wit");
    for file in ["plugin.wit", "compaction/compaction.wit"] {
        assert_eq!(
            std::fs::read(wit.join(file)).unwrap(),
            std::fs::read(repo.join(file)).unwrap(),
            "{file}"
        );
    }
    let parent = dir.path().to_str().unwrap();
    let new = |name: &str| {
        sleet(&[
            "plugin", "new", "--lang", "python", "--kind", "hook", name, "--dir", parent,
        ])
    };
    fails_with(
        new("Night Window"),
        1,
        "plugin name \"Night Window\": use 1-64 characters",
    );
    let said = ok(new("night-window"));
    assert!(
        said.contains(
            "componentize-py -d wit -w hook-plugin componentize app -o night-window.wasm"
        ),
        "{said}"
    );
    let app = std::fs::read_to_string(dir.path().join("night-window/app.py")).unwrap();
    assert!(app.contains("night-window was not configured"), "{app}");
    std::fs::write(dir.path().join("night-window/app.py"), "# mine").unwrap();
    fails_with(new("night-window"), 1, "night-window already exists");
    let kept = std::fs::read_to_string(dir.path().join("night-window/app.py")).unwrap();
    assert_eq!(kept, "# mine", "an existing project is never written over");
    let out = sleet(&["plugin", "new", "--lang", "go", "--kind", "hook", "x"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap refuses an unknown language"
    );
}
