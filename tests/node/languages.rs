//! Plugins in every language an operator may write them in. Each kind
//! that `sleet plugin new` writes, in Rust, Python (componentize-py) and
//! JavaScript (componentize-js), builds with its documented command and
//! passes `sleet plugin check`; the Python and JavaScript ones then run
//! in a real `sleet run` on the S3 server under the default limits:
//! copiers mirror databases that verify and read back, hooks defer and
//! allow mirror passes, merge operators compact counters a native reader
//! sums exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use object_store::ObjectStoreExt;
use sleet::commands::scaffold::Lang;
use sleet::plugin::PluginKind;

use crate::cluster::{Cluster, FAST_NODE_AND_COMPACTION, poll_until};
use crate::common::{endpoint, json, s3_env};
use crate::compaction_plugins::{read_counters, until_compacted, write_counters};
use crate::db;
use crate::wasm::{KINDS, LANGS, build_example, build_project, toolchains};

/// Plugins built from fresh `sleet plugin new` projects (`python-copier`,
/// `js-merge-operator`, `rust-hook`, ...) and the streaming copier
/// examples, with a compile cache that `sleet plugin list` filled once.
struct Built {
    _dir: tempfile::TempDir,
    plugins: PathBuf,
    /// `XDG_CACHE_HOME` for sleet commands: the cache is `<it>/sleet/plugins`.
    cache_home: PathBuf,
}

impl Built {
    fn cache(&self) -> PathBuf {
        self.cache_home.join("sleet/plugins")
    }
}

fn plugin_name(lang: Lang, kind: PluginKind) -> String {
    format!("{lang}-{kind}")
}

/// Builds everything once per test binary (a minute or two: the Python
/// and JavaScript toolchains take 10-20 s a component), or `None` when
/// the toolchains are not installed.
fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Built> = OnceLock::new();
    if !toolchains() {
        return None;
    }
    Some(BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        let projects = dir.path().join("projects");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::create_dir_all(&projects).unwrap();
        std::thread::scope(|threads| {
            for lang in LANGS {
                let (plugins, projects) = (&plugins, &projects);
                // One thread per language: Rust projects share a target dir.
                threads.spawn(move || {
                    for kind in KINDS {
                        let name = plugin_name(lang, kind);
                        let project = new_project(projects, lang, kind, &name);
                        let component = build_project(&project, lang, kind, &name);
                        std::fs::copy(component, plugins.join(format!("{name}.wasm"))).unwrap();
                    }
                });
            }
            threads.spawn(|| {
                build_example(
                    Lang::Python,
                    PluginKind::Copier,
                    "py-stream-copier",
                    &plugins,
                );
                build_example(Lang::Js, PluginKind::Copier, "js-stream-copier", &plugins);
            });
        });
        let cache_home = dir.path().join("cache");
        let listed = sleet(
            &["plugin", "list", "--plugin-dir", &path(&plugins)],
            &cache_home,
        );
        assert!(listed.status.success(), "{listed:?}");
        Built {
            _dir: dir,
            plugins,
            cache_home,
        }
    }))
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The real binary, with `cache_home` as its cache's home.
fn sleet(args: &[&str], cache_home: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
        .args(args)
        .env("XDG_CACHE_HOME", cache_home)
        .env("RUST_LOG", "warn")
        .output()
        .expect("sleet runs")
}

/// `sleet plugin new --lang L --kind K NAME` in `parent`, by the binary.
fn new_project(parent: &Path, lang: Lang, kind: PluginKind, name: &str) -> PathBuf {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
        .args(["plugin", "new", "--lang", &lang.to_string(), "--kind"])
        .arg(kind.to_string())
        .arg(name)
        .arg("--dir")
        .arg(parent)
        .output()
        .expect("sleet runs");
    assert!(out.status.success(), "plugin new: {out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("build it there with"), "{said}");
    parent.join(name)
}

/// A `sleet.toml` that uses all four of `lang`'s plugins, with `start`
/// as the hook's window start.
fn config_using(lang: Lang, start: &str) -> String {
    let name = |kind| plugin_name(lang, kind);
    format!(
        "[database]\nmerge_operator = \"plugin:{}\"\ncompaction_filter = \"plugin:{}\"\n\
         [database.compaction_filter_config]\nmax_age = \"7d\"\n\
         [database.mirror.targets.dr]\nurl = \"s3://dr/copy\"\ncopier = \"plugin:{}\"\n\
         [database.hooks.window]\nplugin = \"{}\"\n\
         [database.hooks.window.config]\nstart = \"{start}\"\nend = \"05:00\"\n",
        name(PluginKind::MergeOperator),
        name(PluginKind::CompactionFilter),
        name(PluginKind::Copier),
        name(PluginKind::Hook),
    )
}

/// What each toolchain writes in its components' `producers` sections.
fn toolchain_says(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python 3.",
        Lang::Js => "JavaScript; ComponentizeJS 0.23.0",
    }
}

#[test]
fn every_language_and_kind_from_sleet_plugin_new_builds_and_passes_plugin_check() {
    // Building 14 components saturates both cores for a minute or more:
    // never beside a test whose timing or request counts it would skew.
    let _heavy = crate::HEAVY.blocking_lock();
    let Some(built) = built() else { return };
    let config = tempfile::NamedTempFile::new().unwrap();
    let check = |body: &str| {
        std::fs::write(config.path(), body).unwrap();
        let plugins = path(&built.plugins);
        let args = [
            "plugin",
            "check",
            "--exercise",
            "--plugin-dir",
            &plugins,
            "--config",
        ];
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
            .args(args)
            .arg(config.path())
            .args(["--format", "json"])
            .env("XDG_CACHE_HOME", &built.cache_home)
            .output()
            .unwrap();
        (
            out.status.code(),
            json(&String::from_utf8_lossy(&out.stdout)),
        )
    };
    for lang in LANGS {
        let (code, report) = check(&config_using(lang, "01:00"));
        assert_eq!(code, Some(0), "{lang}: {report:#}");
        let plugins = report["plugins"].as_array().unwrap();
        for kind in KINDS {
            let name = plugin_name(lang, kind);
            let plugin = plugins.iter().find(|p| p["name"] == name.as_str()).unwrap();
            assert_eq!(plugin["kind"], kind.to_string(), "{plugin:#}");
            assert_eq!(plugin["used_by"].as_array().unwrap().len(), 1, "{plugin:#}");
            assert!(plugin.get("problems").is_none(), "{plugin:#}");
            let toolchain = plugin["toolchain"].as_str().unwrap_or_default();
            assert!(toolchain.contains(toolchain_says(lang)), "{plugin:#}");
            let peak = plugin["peak_memory_bytes"].as_u64().unwrap();
            assert!(
                peak > 0 && peak < 32 << 20,
                "{name}: well inside 64 MiB: {peak}"
            );
            assert_eq!(plugin["memory_mib"], 64, "the default budget");
            // Exercised with the config: real calls, no trap.
            let exercised = plugin["exercised"].as_array().map_or(0, Vec::len);
            assert!(exercised > 0, "{name} was exercised: {plugin:#}");
        }
        // The streaming examples take no required settings: exercised
        // with none.
        for name in ["py-stream-copier", "js-stream-copier"] {
            let plugin = plugins.iter().find(|p| p["name"] == name).unwrap();
            let exercised = plugin["exercised"].to_string();
            assert!(exercised.contains("copied 3 objects"), "{plugin:#}");
        }
        // A config the hook refuses: its error, raised in Python (Err),
        // thrown in JavaScript or returned in Rust, reaches the operator.
        let (code, report) = check(&config_using(lang, "25:00"));
        assert_eq!(code, Some(1), "{lang}: {report:#}");
        let problems = report["plugins"].to_string();
        assert!(
            problems.contains(&format!(
                "hook window: plugin {lang}-hook rejected its config: expected HH:MM (UTC), got"
            )) && problems.contains("25:00"),
            "{lang}: {problems}"
        );
    }
}

/// `HH:MM` of now plus `hours` (UTC).
fn clock_in(hours: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::hours(hours))
        .format("%H:%M")
        .to_string()
}

/// Writes a database's registry file (its overrides of `[database]`).
async fn register_with(cluster: &Cluster, url: &str, body: &str) {
    let canonical = sleet::model::registry::canonicalize_database_url(url).unwrap();
    let root = cluster.fleet.root();
    let file = root.path(&format!(
        "dbs/{}",
        sleet::model::registry::file_name(&canonical)
    ));
    root.store()
        .put(&file, body.to_string().into())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_javascript_plugins_mirror_gate_and_compact_in_a_real_node_on_s3() {
    let Some(endpoint) = endpoint() else { return };
    let _heavy = crate::HEAVY.lock().await;
    let Some(built) = built() else { return };
    // Fast cadences; GC keeps its default ages.
    let fleet = format!("{FAST_NODE_AND_COMPACTION}{}", crate::common::FAST_IDLE);
    let cluster = Cluster::on_s3(&fleet, &endpoint).await;
    let mirror_url = |name: &str| {
        cluster
            .db_url(name)
            .replace("s3://sleet/", "s3://sleet-mirror/")
    };

    // One database mirrored by four copiers; two gated by hooks; two
    // counters databases compacted by merge operators.
    let mirrored = cluster.db_url("mirrored");
    db::seed(&mirrored, 3).await;
    let copiers = [
        "python-copier",
        "js-copier",
        "py-stream-copier",
        "js-stream-copier",
    ];
    let mut targets = String::new();
    for copier in copiers {
        targets += &format!(
            "[mirror.targets.{copier}]\nurl = \"{}\"\ncopier = \"plugin:{copier}\"\npoll = \"200ms\"\n",
            mirror_url(copier)
        );
    }
    register_with(&cluster, &mirrored, &targets).await;
    let gated_body = |hook: &str, start: &str, end: &str| {
        format!(
            "[mirror.targets.live]\nurl = \"{}\"\npoll = \"200ms\"\n\
             [hooks.window]\nplugin = \"{hook}\"\nservices = [\"mirror\"]\n\
             [hooks.window.config]\nstart = \"{start}\"\nend = \"{end}\"\n",
            mirror_url(hook)
        )
    };
    let gated = [("python-hook", "gated-py"), ("js-hook", "gated-js")];
    for (hook, name) in gated {
        let url = cluster.db_url(name);
        db::seed(&url, 2).await;
        // A window that opens in two hours: every pass is deferred.
        register_with(
            &cluster,
            &url,
            &gated_body(hook, &clock_in(2), &clock_in(3)),
        )
        .await;
    }
    let merges = [
        ("python-merge-operator", "counters-py"),
        ("js-merge-operator", "counters-js"),
    ];
    let mut sums = BTreeMap::new();
    for (plugin, name) in merges {
        let url = cluster.db_url(name);
        sums.insert(name, write_counters(&url, 100, 8).await);
        register_with(
            &cluster,
            &url,
            &format!("merge_operator = \"plugin:{plugin}\"\n"),
        )
        .await;
    }

    let log = tempfile::NamedTempFile::new().unwrap();
    let mut node = std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
        .args(["run", cluster.fleet.root().url(), "--node-id", "polyglot"])
        .args(["--plugin-dir", &path(&built.plugins), "--plugin-cache"])
        .arg(built.cache())
        .envs(s3_env(&endpoint))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .expect("sleet run starts");
    let logged = || std::fs::read_to_string(log.path()).unwrap_or_default();

    // Copiers: each copy verifies and a reader reads every round back.
    let verified = |dest: String, what: String| {
        let endpoint = endpoint.clone();
        async move {
            poll_until(Duration::from_secs(120), &what, || async {
                let verify = std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
                    .args(["mirror", "verify", &dest])
                    .envs(s3_env(&endpoint))
                    .output()
                    .unwrap();
                verify.status.success().then_some(())
            })
            .await
        }
    };
    for copier in copiers {
        let dest = mirror_url(copier);
        verified(dest.clone(), format!("{copier}'s copy verifies")).await;
        db::assert_reader_sees(&dest, 0..3).await;
    }

    // Hooks deny: the passes are deferred, visibly, and nothing is copied.
    for (hook, name) in gated {
        let db = cluster.db_url(name);
        poll_until(
            Duration::from_secs(60),
            &format!("{hook} defers {name}"),
            || async {
                let status = cluster.status().await;
                status
                    .warnings
                    .iter()
                    .any(|w| w.contains(&db) && w.contains("outside the maintenance window"))
                    .then_some(())
            },
        )
        .await;
        assert!(
            db::objects(&mirror_url(hook), "manifest").await.is_empty(),
            "{hook}: no pass ran outside the window\n{}",
            logged()
        );
    }
    // ...and allow: a window around now lets the passes run.
    for (hook, name) in gated {
        let body = gated_body(hook, &clock_in(-1), &clock_in(1));
        register_with(&cluster, &cluster.db_url(name), &body).await;
    }
    for (hook, _) in gated {
        let dest = mirror_url(hook);
        verified(dest.clone(), format!("{hook} allows a pass that verifies")).await;
        db::assert_reader_sees(&dest, 0..2).await;
    }

    // Merge operators: compacted counters read back exactly.
    for (plugin, name) in merges {
        let url = cluster.db_url(name);
        until_compacted(&url, Duration::from_secs(120)).await;
        let read = read_counters(&url, sums[name].keys().cloned()).await;
        assert_eq!(read, sums[name], "{plugin}: every counter reads its sum");
    }
    let status = cluster.status().await;
    let troubled = |w: &&String| {
        ["python-", "js-", "py-stream", "compactions of"]
            .iter()
            .any(|n| w.contains(n))
    };
    let troubles: Vec<&String> = status.warnings.iter().filter(troubled).collect();
    assert!(troubles.is_empty(), "{troubles:?}\n{}", logged());
    assert!(
        node.try_wait().unwrap().is_none(),
        "the node is up\n{}",
        logged()
    );
    node.kill().unwrap();
    node.wait().unwrap();
}
