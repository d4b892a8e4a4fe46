//! Bad input to the one-shot mirror commands: clear errors, right exit codes.

use crate::common::*;
use crate::db;

fn registered_source(root: &FileRoot, data: &std::path::Path) -> String {
    let source = format!("file://{}/source", data.display());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        db::seed(&source, 1).await;
        sleet::Fleet::open(&root.url())
            .unwrap()
            .register(&source)
            .await
            .unwrap();
    });
    sleet::model::registry::canonicalize_database_url(&source).unwrap()
}

#[test]
fn mirror_commands_reject_bad_input_clearly() {
    let root = FileRoot::new();
    let data = tempfile::tempdir().unwrap();
    let source = registered_source(&root, data.path());
    let dest = format!("file://{}/dest", data.path().display());
    root.write(
        "sleet.toml",
        &format!("[database.mirror.targets.dr]\nurl = \"{dest}\"\n"),
    );
    let url = root.url();

    fails_with(
        sleet(&["mirror", "sync", &url, &source, "nope"]),
        1,
        &format!("error: no enabled mirror target \"nope\" applies to {source}"),
    );
    let unregistered = format!("file://{}/other", data.path().display());
    fails_with(
        sleet(&["mirror", "sync", &url, &unregistered, "dr"]),
        1,
        "is not registered; `sleet register` it first",
    );

    // A destination that is itself a registered database is refused.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        db::seed(&dest, 1).await;
        sleet::Fleet::open(&url)
            .unwrap()
            .register(&dest)
            .await
            .unwrap();
    });
    fails_with(
        sleet(&["mirror", "sync", &url, &source, "dr"]),
        1,
        "is itself a registered database",
    );

    // A target with a bad scheme: the config is invalid, and the error says so.
    root.write(
        "sleet.toml",
        "[database.mirror.targets.dr]\nurl = \"ftp://x/y\"\n",
    );
    fails_with(
        sleet(&["mirror", "sync", &url, &source, "dr"]),
        1,
        "unsupported URL scheme \"ftp\"",
    );

    fails_with(
        sleet(&[
            "mirror",
            "restore",
            &dest,
            "file:///tmp/x",
            "--at",
            "yesterday",
        ]),
        2,
        "--at \"yesterday\" is neither a manifest id nor an RFC 3339 timestamp",
    );
    let empty = format!("file://{}/empty", data.path().display());
    let err = fails_with(sleet(&["mirror", "verify", &empty]), 1, "problems at");
    assert!(
        err.contains("error: mirror verify found 1 problems"),
        "{err}"
    );
    fails_with(
        sleet(&[
            "mirror",
            "restore",
            &empty,
            &format!("file://{}/r", data.path().display()),
        ]),
        1,
        "is not a SlateDB database (no manifest)",
    );
}

/// Every file under `dir`, with its bytes.
fn snapshot(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// Two fleets (so neither sees a collision in its own config) point a
/// target at one destination: the first pass claims it, and the other
/// database's pass is refused with both names before it writes a byte.
#[test]
fn a_destination_belongs_to_the_first_source_that_mirrors_into_it() {
    let data = tempfile::tempdir().unwrap();
    let dest = format!("file://{}/dest", data.path().display());
    let (first, second) = (FileRoot::new(), FileRoot::new());
    let a = registered_source(&first, &data.path().join("a"));
    let b = registered_source(&second, &data.path().join("b"));
    // The second source runs ahead, so without the record its pass would
    // plan over the first's manifests and repair "lost" objects.
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(db::seed(&b, 3));
    for root in [&first, &second] {
        root.write(
            "sleet.toml",
            &format!("[database.mirror.targets.dr]\nurl = \"{dest}\"\n"),
        );
    }
    ok(sleet(&["mirror", "sync", &first.url(), &a, "dr"]));
    let claimed = snapshot(&data.path().join("dest"));
    let record: serde_json::Value =
        serde_json::from_slice(&claimed[&data.path().join("dest/sleet-mirror-source.json")])
            .unwrap();
    assert_eq!(record["source"], a.as_str());

    let refused = fails_with(
        sleet(&["mirror", "sync", &second.url(), &b, "dr"]),
        1,
        &format!("mirror destination {dest} belongs to {a}"),
    );
    assert!(
        refused.contains(&format!("{b} cannot mirror there")),
        "{refused}"
    );
    assert_eq!(
        snapshot(&data.path().join("dest")),
        claimed,
        "not a byte of the destination changed"
    );

    let verified = json(&ok(sleet(&["mirror", "verify", &dest, "--format", "json"])));
    assert_eq!(verified["source"], a.as_str());
    assert_eq!(verified["problems"], serde_json::json!([]));
    // The owner's next pass still runs, and a restore names the source.
    ok(sleet(&["mirror", "sync", &first.url(), &a, "dr"]));
    let restored_into = format!("file://{}/restored", data.path().display());
    let restored = json(&ok(sleet(&[
        "mirror",
        "restore",
        &dest,
        &restored_into,
        "--format",
        "json",
    ])));
    assert_eq!(restored["source"], a.as_str());
    assert!(
        !data
            .path()
            .join("restored/sleet-mirror-source.json")
            .exists(),
        "the restored root is a database, not a mirror"
    );
}

/// One fleet, a fleet-wide target without `source_prefix`: the second
/// registration is refused; a database registered behind sleet's back
/// makes both targets refused by one-shot passes and by nodes, and
/// status says so, while the destination stays empty.
#[test]
fn colliding_destinations_are_caught_before_a_byte_is_written() {
    let root = FileRoot::new();
    let data = tempfile::tempdir().unwrap();
    let dest = format!("file://{}/dest", data.path().display());
    root.write(
        "sleet.toml",
        &format!(
            "[node]\nheartbeat_interval = \"300ms\"\nheartbeat_timeout = \"3s\"\nconfig_poll = \"300ms\"\n\
             [database.mirror.targets.dr]\nurl = \"{dest}\"\n"
        ),
    );
    let a = registered_source(&root, &data.path().join("a"));
    let b_dir = data.path().join("b");
    let b = sleet::model::registry::canonicalize_database_url(&format!(
        "file://{}/source",
        b_dir.display()
    ))
    .unwrap();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(db::seed(&b, 1));
    let refused = fails_with(
        sleet(&["register", &root.url(), &b]),
        1,
        &format!(
            "mirror destinations would collide: {a} target dr and {b} target dr all map to {dest}"
        ),
    );
    assert!(refused.contains("source_prefix"), "{refused}");

    // Registered anyway, as an older sleet would.
    root.write(
        &format!("dbs/{}", sleet::model::registry::file_name(&b)),
        "",
    );
    let status = json(&ok(sleet(&["status", &root.url(), "--format", "json"])));
    let collide = format!(
        "mirror destinations collide: {a} target dr and {b} target dr all map to {dest}; none of them runs"
    );
    assert!(
        status["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().starts_with(&collide)),
        "{status:#}"
    );
    fails_with(
        sleet(&["mirror", "sync", &root.url(), &a, "dr"]),
        1,
        &format!("mirror destination {dest} is also where {b} target dr mirror to"),
    );
    // config check sees it only laid over the fleet's registry.
    let policy = root.path("sleet.toml");
    let policy = policy.to_str().unwrap();
    ok(sleet(&["config", "check", policy]));
    let checked = sleet(&["config", "check", policy, "--root", &root.url()]);
    assert_eq!(checked.status.code(), Some(1));
    assert!(
        stdout(&checked).contains(&format!(
            "error: {policy}: mirror destinations collide in {}: {a} target dr and {b} target dr",
            root.url()
        )),
        "{}",
        stdout(&checked)
    );

    let mut node = std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
        .args([
            "run",
            &root.url(),
            "--node-id",
            "n1",
            "--services",
            "mirror",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let failing = loop {
        let status = json(&ok(sleet(&["status", &root.url(), "--format", "json"])));
        let warnings: Vec<String> = status["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect();
        let both = [&a, &b].iter().all(|db| {
            warnings.iter().any(|w| {
                w.starts_with(&format!("mirror target dr of {db} is failing on n1: mirror destination {dest} is also where"))
            })
        });
        if both {
            break warnings;
        }
        assert!(std::time::Instant::now() < deadline, "{warnings:#?}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let _ = node.kill();
    let _ = node.wait();
    assert!(
        !data.path().join("dest").exists(),
        "nothing was written to the destination: {failing:#?}"
    );
}
