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
    sleet::registry::canonicalize_database_url(&source).unwrap()
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
