//! Plugin authors see their own language's errors (issue 42): a Python
//! copier and hook that keep state on `self`, a JavaScript copier that
//! throws, and a Python copier that prints a megabyte a call, built by
//! their real toolchains. `sleet plugin check --exercise` fails each
//! mistake before deployment, exit 1, naming the guest's own error; in a
//! node, status and the log carry the same words. Every example under
//! `plugins/` passes `check --exercise`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sleet::commands::scaffold::Lang;
use sleet::plugin::PluginKind;
use sleet::{NodeOptions, StatusOptions};

use crate::harness::{Source, eventually, target_toml};
use crate::hooks::{capture_logs, logged};
use crate::wasm::{build_example, plugin_dir, toolchain};

/// The fixtures: each language's commonest mistake, and a loud copier.
const FIXTURES: [(Lang, PluginKind, &str); 4] = [
    (Lang::Python, PluginKind::Copier, "py-mistake-copier"),
    (Lang::Python, PluginKind::Hook, "py-mistake-hook"),
    (Lang::Js, PluginKind::Copier, "js-mistake-copier"),
    (Lang::Python, PluginKind::Copier, "py-loud-copier"),
];

const PY_COPIER_SAYS: &str = "AttributeError: 'Copier' object has no attribute 'mode'";
const PY_HOOK_SAYS: &str = "AttributeError: 'Hook' object has no attribute 'services'";
const JS_SAYS: &str = "can't access property \"get\", settings is undefined (at copy@app.js:";
const ADVICE: &str = "keep it in a module global";

fn toolchains_here() -> bool {
    toolchain(Lang::Python).is_some() && toolchain(Lang::Js).is_some()
}

/// Builds `plugins` into `into`, two at a time (each toolchain takes
/// seconds a component and one core).
fn build_all(plugins: &[(Lang, PluginKind, &str)], into: &Path) {
    for pair in plugins.chunks(2) {
        std::thread::scope(|threads| {
            for (lang, kind, name) in pair {
                threads.spawn(move || build_example(*lang, *kind, name, into));
            }
        });
    }
}

/// `sleet plugin check --exercise` over `dir`: exit code and all output.
fn check_exercise(dir: &Path, config: Option<&Path>) -> (Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sleet"));
    command.args(["plugin", "check", "--exercise", "--plugin-dir"]);
    command.arg(dir);
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    let out = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_author_s_mistake_is_named_in_their_own_language() {
    if !toolchains_here() {
        return;
    }
    capture_logs();
    let dir = tempfile::tempdir().unwrap();
    build_all(&FIXTURES, dir.path());

    // Before deployment: check --exercise fails each mistake, exit 1.
    let (code, said) = check_exercise(dir.path(), None);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "plugin py-mistake-copier trapped: {PY_COPIER_SAYS}"
        )),
        "{said}"
    );
    assert!(said.contains(ADVICE), "{said}");
    assert!(
        said.contains(&format!("plugin py-mistake-hook trapped: {PY_HOOK_SAYS}")),
        "{said}"
    );
    assert!(
        said.contains(&format!("plugin js-mistake-copier trapped: {JS_SAYS}")),
        "{said}"
    );
    assert!(
        said.contains("py-mistake-copier: made by Python 3."),
        "a componentize-py component is Python: {said}"
    );
    assert!(
        said.contains("js-mistake-copier: made by JavaScript"),
        "{said}"
    );
    // The loud copier prints a megabyte a call and still copies: it
    // passes, its output bounded.
    assert!(
        said.contains("py-loud-copier: exercise with no config: copied 3 objects"),
        "{said}"
    );
    assert!(
        !said.contains("problem: exercise with no config: plugin py-loud"),
        "{said}"
    );

    // Told to fail, its error carries its own words and the log its last
    // lines, with the megabyte before them counted, not kept.
    let config = dir.path().join("sleet.toml");
    std::fs::write(
        &config,
        "[database.mirror.targets.loud]\nurl = \"s3://unused/loud\"\n\
         copier = \"plugin:py-loud-copier\"\n\
         [database.mirror.targets.loud.copier_config]\nfail = \"yes\"\n",
    )
    .unwrap();
    let (code, said) = check_exercise(dir.path(), Some(&config));
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(
            "plugin py-loud-copier trapped: RuntimeError: loud and failing, as configured"
        ),
        "{said}"
    );
    let dropped = said
        .lines()
        .find(|line| line.contains("earlier bytes dropped"))
        .unwrap_or_else(|| panic!("the dropped output is counted: {said}"));
    assert!(
        dropped.len() < 16 * 1024,
        "a megabyte printed, at most the kept 8 KiB logged: {} bytes",
        dropped.len()
    );

    // In a node: status and the log say the same.
    let data = tempfile::tempdir().unwrap();
    let url = |name: &str| format!("file://{}/{name}", data.path().display());
    let config = format!(
        "{}copier = \"plugin:py-mistake-copier\"\npoll = \"200ms\"\n\
         {}copier = \"plugin:js-mistake-copier\"\npoll = \"200ms\"\n\
         [database.hooks.gate]\nplugin = \"py-mistake-hook\"\nservices = [\"gc\"]\n",
        target_toml("py", &url("py")),
        target_toml("js", &url("js")),
    );
    let mut source = Source::new(&config, 2).await;
    source.start_node(NodeOptions::new("solo").with_plugin_dirs([dir.path().to_path_buf()], None));
    let fleet = source.fleet.clone();
    eventually(
        Duration::from_secs(60),
        "the guests' errors in status",
        || {
            let fleet = fleet.clone();
            async move {
                let status = fleet.status(StatusOptions::default()).await.unwrap();
                let warnings = status.warnings.join("\n");
                warnings.contains(PY_COPIER_SAYS)
                    && warnings.contains(JS_SAYS)
                    && warnings.contains(PY_HOOK_SAYS)
            }
        },
    )
    .await;
    for says in [
        PY_COPIER_SAYS,
        PY_HOOK_SAYS,
        "settings is undefined",
        "copy@app.js:",
    ] {
        assert!(logged(says), "the node's log says {says}");
    }
    source.stop().await;
}

/// Every Rust example under `plugins/` passes `sleet plugin check
/// --exercise` with the settings its documentation gives. (The Python and
/// JavaScript examples, and the Rust ones `sleet plugin new` copies, are
/// exercised where the node suite builds them:
/// `languages::every_language_and_kind_from_sleet_plugin_new_builds_and_passes_plugin_check`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rust_example_plugin_passes_check_exercise() {
    let rust = [
        "audit-hook",
        "copy-copier",
        "counter-merge",
        "maintenance-window",
        "throttle-copier",
        "ttl-filter",
        "verify-copier",
    ];
    let dir = plugin_dir(&rust);
    let config = dir.path().join("sleet.toml");
    std::fs::write(
        &config,
        "[database]\nmerge_operator = \"plugin:counter-merge\"\n\
         compaction_filter = \"plugin:ttl-filter\"\n\
         [database.compaction_filter_config]\nmax_age = \"7d\"\n\
         [database.mirror.targets.slow]\nurl = \"s3://unused/slow\"\n\
         copier = \"plugin:throttle-copier\"\n\
         [database.mirror.targets.slow.copier_config]\nbytes_per_second = \"100000000\"\n\
         [database.hooks.window]\nplugin = \"maintenance-window\"\n\
         [database.hooks.window.config]\nstart = \"01:00\"\nend = \"02:00\"\n",
    )
    .unwrap();
    let (code, said) = check_exercise(dir.path(), Some(&config));
    assert_eq!(code, Some(0), "{said}");
    for name in rust {
        assert!(
            said.contains(&format!("{name}: exercise with")),
            "{name} was exercised: {said}"
        );
    }
    assert!(said.contains("copied 3 objects"), "{said}");
    assert!(
        said.contains("merged 8-byte little-endian counters"),
        "{said}"
    );
    assert!(said.contains("ended the job"), "{said}");
}
