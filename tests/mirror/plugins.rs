//! Mirrors through the example copier plugins, and hostile plugins
//! contained: each failure names the plugin, fails only its batch, and
//! writes nothing it should not.

use std::sync::Arc;

use sleet::CancellationToken;
use sleet::commands::mirror as ops;
use sleet::mirror::copier::{CopierOptions, CopyProgress};
use sleet::plugin::PluginSet;

use crate::db;
use crate::harness::{Source, assert_verified};
use crate::wasm::{plugin_dir, sha256_of};

/// Loads `dir`'s plugins the way a node does, with no compile cache.
async fn load(dir: &std::path::Path, fleet_pins: &[(&str, String)]) -> Arc<PluginSet> {
    let pins = fleet_pins
        .iter()
        .map(|(n, s)| (n.to_string(), s.clone()))
        .collect();
    sleet::plugin::load_dirs(&[dir.to_path_buf()], None, pins, None)
        .await
        .expect("the plugin runtime starts")
        .expect("a plugin set")
}

/// One sync pass of target `t` through `plugins`.
async fn sync(
    source: &Source,
    plugins: &Arc<PluginSet>,
) -> Result<sleet::model::response::MirrorSyncResponse, sleet::Error> {
    let copiers = CopierOptions {
        plugins: Some(plugins.clone()),
        node_id: "test".into(),
        ..CopierOptions::default()
    };
    ops::sync_once(
        source.fleet.root(),
        &source.url,
        "t",
        &copiers,
        ops::Hooks::Ask,
        CopyProgress::new(),
        &CancellationToken::new(),
    )
    .await
}

fn target(dest: &str, copier: &str, extra: &str) -> String {
    format!("[database.mirror.targets.t]\nurl = \"{dest}\"\ncopier = \"plugin:{copier}\"\n{extra}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn example_copiers_mirror_a_readable_verified_copy() {
    let plugins_dir = plugin_dir(&["verify-copier", "throttle-copier"]);
    let plugins = load(plugins_dir.path(), &[]).await;
    assert_eq!(plugins.infos().len(), 2, "{:?}", plugins.infos());
    for (copier, config) in [
        ("verify-copier", "chunk_kib = 16"),
        ("throttle-copier", "bytes_per_second = 50000000"),
    ] {
        let dest_dir = tempfile::tempdir().unwrap();
        let dest = format!("file://{}/copy", dest_dir.path().display());
        let extra = format!("[database.mirror.targets.t.copier_config]\n{config}\n");
        let mut source = Source::new(&target(&dest, copier, &extra), 3).await;
        source.start_services();
        for _ in 0..2 {
            let synced = sync(&source, &plugins)
                .await
                .expect("a pass through the plugin");
            assert!(synced.committed, "{synced:?}");
            assert!(
                synced.bytes_copied > 0,
                "the host counts plugin bytes: {synced:?}"
            );
            assert_verified(&dest).await;
            db::assert_reader_sees(&dest, 0..source.rounds).await;
            source.write(1).await;
        }
        source.stop().await;
    }
}

/// A source whose target runs `plugin` from `plugins_dir` with `mode`,
/// a 32 MiB memory cap and a 2 s call timeout, one call at a time (so a
/// batch holds every object, as modes like `swap` need).
async fn hostile_in(
    plugins_dir: &std::path::Path,
    plugin: &str,
    mode: &str,
) -> (Source, String, tempfile::TempDir, Arc<PluginSet>) {
    let plugins = load(plugins_dir, &[]).await;
    let dest_dir = tempfile::tempdir().unwrap();
    let dest = format!("file://{}/copy", dest_dir.path().display());
    let extra = format!(
        "copy_parallelism = 1\n[database.mirror.targets.t.copier_config]\nmode = \"{mode}\"\n\
         [plugins.{plugin}]\nmemory_mib = 32\ncall_timeout = \"2s\"\n"
    );
    let source = Source::new(&target(&dest, plugin, &extra), 2).await;
    (source, dest, dest_dir, plugins)
}

async fn hostile_error(mode: &str) -> (String, Source, String) {
    let plugins_dir = plugin_dir(&["hostile-copier"]);
    failed_pass(plugins_dir.path(), "hostile-copier", mode).await
}

/// One pass through `plugin`, which must fail naming the plugin and
/// commit nothing; returns the error.
async fn failed_pass(
    plugins_dir: &std::path::Path,
    plugin: &str,
    mode: &str,
) -> (String, Source, String) {
    let (source, dest, _dir, plugins) = hostile_in(plugins_dir, plugin, mode).await;
    let err = sync(&source, &plugins).await.unwrap_err().to_string();
    eprintln!("{plugin} {mode}: {}", &err[..err.len().min(2000)]);
    assert!(err.contains(plugin), "the error names the plugin: {err}");
    assert!(
        db::objects(&dest, "manifest").await.is_empty(),
        "a failed batch commits nothing"
    );
    (err, source, dest)
}

/// The hostile suite's Python members, built from `plugins/python` by
/// componentize-py: a copier that allocates without bound is stopped at
/// its memory budget (32 MiB, summed over the instance's memories), and
/// one that reports copies it never made is caught by the host's
/// verification. Each fails its pass naming the plugin, commits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_copiers_that_hoard_or_lie_are_stopped_and_caught() {
    use sleet::commands::scaffold::Lang;
    use sleet::plugin::PluginKind;
    if crate::wasm::toolchain(Lang::Python).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    crate::wasm::build_example(
        Lang::Python,
        PluginKind::Copier,
        "py-hostile-copier",
        dir.path(),
    );
    for (mode, refusal) in [
        ("hoard", "memory budget exceeded"),
        ("lie", "the destination has no such object"),
    ] {
        let (err, source, _) = failed_pass(dir.path(), "py-hostile-copier", mode).await;
        assert!(err.contains(refusal), "{mode}: {err}");
        source.stop().await;
    }
}

/// A streaming copier in Python or JavaScript holds what it reads in a
/// call (the toolchains' bindings lift each `read` into fresh guest
/// memory): sized by the rule docs/plugins.md gives (Python: 16 MiB plus
/// the object; JavaScript: 16 MiB plus twice it), a 24 MiB object copies
/// byte for byte; under a 32 MiB budget the same call is stopped at the
/// budget, naming the plugin, and nothing is left at the destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_javascript_streaming_copiers_hold_what_they_read_within_their_budget() {
    use object_store::ObjectStoreExt;
    use sleet::commands::scaffold::Lang;
    use sleet::plugin::{PluginKind, PluginLimits};
    let langs = [
        (Lang::Python, "py-stream-copier", 16 + 24),
        (Lang::Js, "js-stream-copier", 16 + 2 * 24),
    ];
    if langs
        .iter()
        .any(|(lang, ..)| crate::wasm::toolchain(*lang).is_none())
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (lang, name, _) in langs {
        crate::wasm::build_example(lang, PluginKind::Copier, name, dir.path());
    }
    let plugins = load(dir.path(), &[]).await;
    let data = tempfile::tempdir().unwrap();
    let root = |name: &str| {
        let url = format!("file://{}/{name}", data.path().display());
        let (store, prefix) = sleet::store::open_url(&url).unwrap();
        sleet::store::StoreRoot {
            url,
            store,
            prefix,
            address: None,
        }
    };
    let (src, dst) = (root("src"), root("dst"));
    let object = "compacted/01J79C21YKR31J2BS1EFXJZ7MR.sst".to_string();
    let bytes: Vec<u8> = (0..24u32 << 20).map(|i| (i % 251) as u8).collect();
    src.store
        .put(&src.path(&object), bytes.clone().into())
        .await
        .unwrap();
    for (_, name, sized_mib) in langs {
        let copier = plugins.copier(name, "test").unwrap();
        let (small, sized) = [32, sized_mib]
            .map(|mib: u64| PluginLimits {
                sha256: None,
                memory_bytes: mib << 20,
                call_timeout: std::time::Duration::from_secs(60),
            })
            .into();
        let batch = [object.clone()];
        let run = |limits| copier.run_batch(&src, &dst, &batch, &[], limits, Default::default());
        let err = run(&small).await.expect_err("over its budget").to_string();
        assert!(
            err.contains(&format!("plugin {name} trapped: memory budget exceeded")),
            "{err}"
        );
        assert!(
            dst.store.head(&dst.path(&object)).await.is_err(),
            "{name}: nothing left"
        );
        let (reported, written) = run(&sized).await.expect("within its budget");
        assert_eq!(written, 24 << 20, "{name}: {reported:?}");
        let copied = dst
            .store
            .get(&dst.path(&object))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert!(copied == bytes, "{name}: the copy is byte for byte");
        dst.store.delete(&dst.path(&object)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_plugin_fails_its_batch_with_the_trap() {
    let (err, source, _) = hostile_error("trap").await;
    assert!(err.contains("trapped"), "{err}");
    source.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_plugin_is_stopped_at_its_deadline() {
    let started = std::time::Instant::now();
    let (err, source, _) = hostile_error("loop").await;
    assert!(err.contains("timed out after 2s"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    source.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_hits_its_cap() {
    let (err, source, _) = hostile_error("memory").await;
    assert!(err.contains("trapped") && err.contains("memory"), "{err}");
    source.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_escapes_and_manifest_writes_are_denied() {
    for mode in ["escape", "manifest"] {
        let (err, source, dest) = hostile_error(mode).await;
        assert!(err.contains("denied"), "{mode}: {err}");
        let root = dest.strip_prefix("file://").unwrap();
        let parent = std::path::Path::new(root).parent().unwrap();
        let escaped: Vec<_> = walk(parent)
            .into_iter()
            .filter(|p| {
                p.contains("escaped") || p.contains("manifest") || p.contains("not-in-batch")
            })
            .collect();
        assert!(escaped.is_empty(), "{mode}: wrote {escaped:?}");
        source.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_return_value_is_refused() {
    let (err, source, _) = hostile_error("huge").await;
    assert!(
        err.contains("results for a batch of") || err.contains("trapped"),
        "{err}"
    );
    source.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_world_non_wasm_and_sha256_mismatch_are_clear() {
    let dir = plugin_dir(&["audit-hook", "verify-copier"]);
    std::fs::write(dir.path().join("bogus.wasm"), "not wasm at all").unwrap();
    let plugins = load(dir.path(), &[("verify-copier", "0".repeat(64))]).await;
    let dest_dir = tempfile::tempdir().unwrap();
    let dest = format!("file://{}/copy", dest_dir.path().display());
    let cases = [
        ("audit-hook", "is a hook plugin, not a copier"),
        ("bogus", "is not a WebAssembly component"),
        ("verify-copier", "but sleet.toml pins 0000"),
        ("absent", "no such file in its --plugin-dir"),
    ];
    for (copier, expected) in cases {
        let source = Source::new(&target(&dest, copier, ""), 1).await;
        let err = sync(&source, &plugins).await.unwrap_err().to_string();
        assert!(err.contains(expected), "{copier}: {err}");
        source.stop().await;
    }
    let _ = sha256_of("verify-copier");
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            out.push(path.display().to_string());
            if path.is_dir() {
                out.extend(walk(&path));
            }
        }
    }
    out
}

#[test]
fn plugin_list_and_check_report_what_a_node_would_load() {
    use crate::common::{fails_with, json, ok, sleet};
    let dir = plugin_dir(&["verify-copier", "throttle-copier", "audit-hook"]);
    std::fs::write(dir.path().join("bogus.wasm"), "not wasm").unwrap();
    let dir_arg = dir.path().to_str().unwrap();

    let listed = json(&ok(sleet(&[
        "plugin",
        "list",
        "--plugin-dir",
        dir_arg,
        "--format",
        "json",
    ])));
    let plugins = listed["plugins"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = plugins
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["kind"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("audit-hook", "hook"),
            ("bogus", "-"),
            ("throttle-copier", "copier"),
            ("verify-copier", "copier")
        ]
    );
    assert_eq!(
        plugins[3]["sha256"].as_str().unwrap(),
        sha256_of("verify-copier")
    );

    let config = tempfile::NamedTempFile::new().unwrap();
    let write_config = |body: &str| std::fs::write(config.path(), body).unwrap();
    let config_arg = config.path().to_str().unwrap();
    write_config(
        "[database.mirror.targets.slow]\nurl = \"s3://dr/x\"\ncopier = \"plugin:throttle-copier\"\n\
         [database.hooks.audit]\nplugin = \"audit-hook\"\n",
    );
    std::fs::remove_file(dir.path().join("bogus.wasm")).unwrap();
    let err = fails_with(
        sleet(&[
            "plugin",
            "check",
            "--plugin-dir",
            dir_arg,
            "--config",
            config_arg,
        ]),
        1,
        "plugin check found 1 problems",
    );
    let out = String::from_utf8(
        sleet(&[
            "plugin",
            "check",
            "--plugin-dir",
            dir_arg,
            "--config",
            config_arg,
        ])
        .stdout,
    )
    .unwrap();
    assert!(
        out.contains("mirror target slow: plugin throttle-copier rejected its config: bytes_per_second is required"),
        "{out}\n{err}"
    );
    write_config(
        "[database.mirror.targets.slow]\nurl = \"s3://dr/x\"\ncopier = \"plugin:throttle-copier\"\n\
         [database.mirror.targets.slow.copier_config]\nbytes_per_second = 1000000\n\
         [database.hooks.audit]\nplugin = \"audit-hook\"\n\
         [database.hooks.window]\nplugin = \"maintenance-window\"\n",
    );
    fails_with(
        sleet(&[
            "plugin",
            "check",
            "--plugin-dir",
            dir_arg,
            "--config",
            config_arg,
        ]),
        1,
        "plugin check found 1 problems",
    );
    write_config(
        "[database.mirror.targets.slow]\nurl = \"s3://dr/x\"\ncopier = \"plugin:throttle-copier\"\n\
         [database.mirror.targets.slow.copier_config]\nbytes_per_second = 1000000\n\
         [database.hooks.audit]\nplugin = \"audit-hook\"\n",
    );
    let checked = ok(sleet(&[
        "plugin",
        "check",
        "--plugin-dir",
        dir_arg,
        "--config",
        config_arg,
    ]));
    assert!(
        checked.contains("throttle-copier") && !checked.contains("problem:"),
        "{checked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_keeps_mirroring_beside_a_trapping_plugin_and_a_missing_one() {
    use sleet::{NodeOptions, StatusOptions};
    let plugins = plugin_dir(&["hostile-copier"]);
    let dest_dir = tempfile::tempdir().unwrap();
    let url = |name: &str| format!("file://{}/{name}", dest_dir.path().display());
    let config = format!(
        "[database.mirror.targets.good]\nurl = \"{}\"\npoll = \"200ms\"\n\
         [database.mirror.targets.bad]\nurl = \"{}\"\ncopier = \"plugin:hostile-copier\"\n\
         [database.mirror.targets.bad.copier_config]\nmode = \"trap\"\n\
         [database.mirror.targets.absent]\nurl = \"{}\"\ncopier = \"plugin:verify-copier\"\n",
        url("good"),
        url("bad"),
        url("absent")
    );
    let mut source = Source::new(&config, 2).await;
    source.start_node(
        NodeOptions::new("solo").with_plugin_dirs([plugins.path().to_path_buf()], None),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let status = source.fleet.status(StatusOptions::default()).await.unwrap();
        let warnings = status.warnings.join("\n");
        let good_done = !db::objects(&url("good"), "manifest").await.is_empty();
        if good_done
            && warnings.contains("mirror target bad of")
            && warnings.contains("plugin hostile-copier trapped")
            && warnings.contains("plugin \"verify-copier\" is not loaded on node solo")
            && warnings.contains("needs plugin verify-copier, which node solo has not loaded")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{warnings}");
        crate::harness::pause(200).await;
    }
    assert_verified(&url("good")).await;
    db::assert_reader_sees(&url("good"), 0..source.rounds).await;
    assert!(db::objects(&url("bad"), "manifest").await.is_empty());
    source.stop().await;
}

/// Copiers that report success for copies they did not make: the host
/// checks every reported copy at the destination before it commits, so
/// each pass fails naming the plugin and the object, and commits nothing.
/// An honest copier then mirrors the same destination cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_a_plugin_only_claims_are_caught_before_commit() {
    for (mode, found) in [
        ("partial", "bytes, the source"),
        ("lie", "the destination has no such object"),
        ("swap", "bytes, the source"),
    ] {
        let (err, source, dest) = hostile_error(mode).await;
        assert!(
            err.contains("plugin:hostile-copier reported compacted/")
                || err.contains("plugin:hostile-copier reported wal/"),
            "{mode}: names the object: {err}"
        );
        assert!(err.contains(found), "{mode}: {err}");
        assert!(err.contains("nothing was committed"), "{mode}: {err}");
        // The same destination, mirrored by the builtin copier.
        let honest = sleet::mirror::copier::CopierOptions::default();
        source.root.write(
            "sleet.toml",
            &format!(
                "{}\n[database.mirror.targets.t]\nurl = \"{dest}\"\n",
                crate::harness::fast_services()
            ),
        );
        ops::sync_once(
            source.fleet.root(),
            &source.url,
            "t",
            &honest,
            ops::Hooks::Ask,
            CopyProgress::new(),
            &CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{mode}: an honest pass after the hostile one: {e}"));
        assert_verified(&dest).await;
        db::assert_reader_sees(&dest, 0..2).await;
        source.stop().await;
    }
}

/// Same size, different bytes: caught where both stores give a content
/// hash (S3 to S3 on the local server, whose ETags are MD5s), through the
/// real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_copy_with_the_right_size_is_caught_on_s3() {
    use crate::common::{BUCKET, FileRoot, endpoint, unique_prefix};
    let Some(endpoint) = endpoint() else { return };
    let plugins_dir = plugin_dir(&["hostile-copier"]);
    let prefix = unique_prefix("corrupt");
    let source = format!("s3://{BUCKET}/{prefix}/source");
    let dest = format!("s3://{BUCKET}/{prefix}/copy");
    db::seed(&source, 2).await;
    let root = FileRoot::new();
    root.write(
        "sleet.toml",
        &target(
            &dest,
            "hostile-copier",
            "[database.mirror.targets.t.copier_config]\nmode = \"corrupt\"\n",
        ),
    );
    let stderr = failed_binary_sync(&endpoint, &root, &source, plugins_dir.path());
    assert!(stderr.contains("the contents differ (ETag"), "{stderr}");
    assert!(stderr.contains("nothing was committed"), "{stderr}");
    assert!(
        db::objects(&dest, "manifest").await.is_empty(),
        "a failed pass commits nothing"
    );
}

/// A call that traps or times out mid-upload leaves no unfinished
/// multipart upload at the destination (which would be billed for its
/// parts until a lifecycle rule removed it): the host aborts it, and a
/// one-shot sync waits for the abort before it exits. Every request goes
/// through a proxy that delays it, so an abort not waited for is cut off
/// with the process (control: without `aborts.wait` in `run_batch` this
/// fails every run). A second control shows the listing finds an upload
/// that was left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_off_by_a_trap_or_timeout_is_aborted() {
    use crate::common::{BUCKET, FileRoot, endpoint, s3_bucket_store};
    use object_store::ObjectStoreExt;
    let Some(endpoint) = endpoint() else { return };

    let control = crate::common::unique_prefix("left-upload");
    let store = s3_bucket_store(&endpoint, BUCKET);
    let mut left = store
        .put_multipart(&object_store::path::Path::from(format!(
            "{control}/big.sst"
        )))
        .await
        .unwrap();
    left.put_part(vec![0u8; 5 * 1024 * 1024].into())
        .await
        .unwrap();
    assert_eq!(
        unfinished_uploads(&endpoint, &control).await,
        1,
        "the control"
    );
    left.abort().await.unwrap();

    let plugins_dir = plugin_dir(&["hostile-copier"]);
    for mode in ["upload-then-trap", "upload-then-hang"] {
        let prefix = crate::common::unique_prefix(mode);
        let data = tempfile::tempdir().unwrap();
        let source = format!("file://{}/source", data.path().display());
        db::seed(&source, 2).await;
        let root = FileRoot::new();
        let extra = format!(
            "[database.mirror.targets.t.copier_config]\nmode = \"{mode}\"\n\
             [plugins.hostile-copier]\nmemory_mib = 32\ncall_timeout = \"3s\"\n"
        );
        let dest = format!("s3://{BUCKET}/{prefix}/copy");
        root.write("sleet.toml", &target(&dest, "hostile-copier", &extra));
        // Each request is delayed, so an abort still in flight when the
        // process exits would be lost rather than win a race.
        let slow = crate::proxy::FaultProxy::start(&endpoint, 7).await;
        slow.faults.set(0, 0, std::time::Duration::from_millis(400));
        let stderr = failed_binary_sync(&slow.endpoint, &root, &source, plugins_dir.path());
        assert!(stderr.contains("hostile-copier"), "{mode}: {stderr}");
        // Checked the moment the process is gone: an abort still in
        // flight when it exited would never have been sent.
        let left = unfinished_uploads(&endpoint, &prefix).await;
        assert_eq!(left, 0, "{mode}: unfinished uploads under {prefix}");
    }
}

/// Registers `source` in `root` and runs `sleet mirror sync` of target
/// `t` through the real binary against the local S3 server; the sync must
/// fail (exit 1). Returns its stderr.
fn failed_binary_sync(
    endpoint: &str,
    root: &crate::common::FileRoot,
    source: &str,
    plugins_dir: &std::path::Path,
) -> String {
    use crate::common::{s3_env, sleet_env};
    let env = s3_env(endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let registered = sleet_env(&["register", &root.url(), source, "--no-check"], &env);
    assert!(registered.status.success());
    let out = sleet_env(
        &[
            "mirror",
            "sync",
            &root.url(),
            source,
            "t",
            "--plugin-dir",
            plugins_dir.to_str().unwrap(),
        ],
        &env,
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    stderr
}

/// Unfinished multipart uploads under `prefix` in the test bucket, from
/// the server's own listing (`ListMultipartUploads`, which the local
/// server answers without a signature).
async fn unfinished_uploads(endpoint: &str, prefix: &str) -> usize {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!(
        "GET /{}?uploads&prefix={prefix} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
        crate::common::BUCKET
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    reply.matches("<UploadId>").count()
}

/// The compile cache is trusted only when it is private and its entries
/// carry this node's tag: a planted entry under the right name is
/// recompiled over, never loaded; a shared or symlinked directory is not
/// used at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_or_shared_compile_cache_is_never_loaded() {
    use sleet::plugin::PluginRuntime;
    let plugins = plugin_dir(&["verify-copier", "throttle-copier"]);
    let wasm = |name: &str| std::fs::read(plugins.path().join(format!("{name}.wasm"))).unwrap();
    let (verify, throttle) = (wasm("verify-copier"), wasm("throttle-copier"));
    let (verify_sha, throttle_sha) = (
        sleet::plugin::sha256_hex(&verify),
        sleet::plugin::sha256_hex(&throttle),
    );
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("cache");
    let runtime = PluginRuntime::new(Some(dir.clone())).unwrap();
    assert!(runtime.caches());
    runtime
        .compile("verify-copier", &verify, &verify_sha)
        .unwrap();
    runtime
        .compile("throttle-copier", &throttle, &throttle_sha)
        .unwrap();
    let entry = |sha: &str| {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(sha))
            .unwrap()
    };
    // Plant the throttle copier's native code under the verify copier's name.
    std::fs::copy(entry(&throttle_sha), entry(&verify_sha)).unwrap();
    let planted = std::fs::read(entry(&verify_sha)).unwrap();
    let fresh = PluginRuntime::new(Some(dir.clone())).unwrap();
    fresh
        .compile("verify-copier", &verify, &verify_sha)
        .unwrap();
    assert_ne!(
        std::fs::read(entry(&verify_sha)).unwrap(),
        planted,
        "the planted entry was compiled over, not loaded"
    );
    // A group-writable directory, and a symlink to a good one: not used.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let link = parent.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(!PluginRuntime::new(Some(link)).unwrap().caches());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(!PluginRuntime::new(Some(dir.clone())).unwrap().caches());
        let shared = PluginRuntime::new(Some(dir)).unwrap();
        shared
            .compile("verify-copier", &verify, &verify_sha)
            .unwrap();
    }
}

/// A plugin that tries to make the host hold too much or do too much is
/// refused at the host's budget: open writers (each may hold half the
/// plugin's memory before it uploads in parts) within its memory, store requests in proportion to its batch, and its
/// strings cut before they reach errors and logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_cannot_make_the_host_hold_or_do_without_bound() {
    let (err, source, _) = hostile_error("writers").await;
    assert!(
        err.contains("at most 2 writers may be open at once"),
        "32 MiB of memory holds 2 writers of 16 MiB: {err}"
    );
    source.stop().await;
    let (err, source, _) = hostile_error("flood").await;
    assert!(err.contains("request budget spent"), "{err}");
    source.stop().await;
    let (err, source, _) = hostile_error("huge-error").await;
    assert!(err.len() < 2048, "the message is cut: {} bytes", err.len());
    assert!(err.contains("EEE..."), "{}", &err[..err.len().min(300)]);
    source.stop().await;
    let started = std::time::Instant::now();
    let (err, source, _) = hostile_error("logs").await;
    assert!(err.contains("logged"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    source.stop().await;
}

/// Attacks written by hand in WebAssembly text, where no Rust guest can
/// go: results aliasing one string (48 MiB to lift from a 32 MiB
/// plugin, under wasmtime's own 128 MiB default, so only the host's
/// tighter bound stops it), memories that each fit the plugin's budget
/// but together do not, a table grown without end. Each fails its pass naming the plugin, commits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_written_attacks_stop_at_the_hosts_bounds() {
    use crate::wat_copier::{Attack, install};
    for (attack, refusal) in [
        (Attack::Alias(48), "too much data is being copied"),
        (Attack::Memories, "memory budget exceeded"),
        (Attack::Table, "growing a table"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "wat-copier", attack);
        let (err, source, _) = failed_pass(dir.path(), "wat-copier", "-").await;
        assert!(err.contains(refusal), "{attack:?}: {err}");
        source.stop().await;
    }
}

/// Every hostile class at once in a real `sleet run` process, beside an
/// honest target: copiers that hold writers open, lie, write half an
/// object or another name, flood requests or the log, return a 16 MiB
/// error, alias one string across results, declare memories past their budget or
/// grow a table without end. The process stays up, its resident memory
/// stays under 512 MiB (two calls of a 64 MiB plugin hold at most 256
/// MiB of plugin memory and host buffers), every hostile target shows
/// its failure in status, none commits, and the honest one keeps
/// mirroring.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_node_stays_up_and_bounded_beside_hostile_copiers() {
    use crate::common::json;
    use crate::wat_copier::{Attack, install};
    let plugins = plugin_dir(&["hostile-copier"]);
    for (name, attack) in [
        ("wat-alias", Attack::Alias(100)),
        ("wat-memories", Attack::Memories),
        ("wat-table", Attack::Table),
    ] {
        install(plugins.path(), name, attack);
    }
    // (target, plugin, mode, what its status warning says)
    let hostile_targets = [
        (
            "writers",
            "hostile-copier",
            "writers",
            "writers may be open at once",
        ),
        (
            "lies",
            "hostile-copier",
            "lie",
            "the destination has no such object",
        ),
        ("partial", "hostile-copier", "partial", "bytes, the source"),
        ("swap", "hostile-copier", "swap", "the destination has"),
        ("flood", "hostile-copier", "flood", "request budget spent"),
        ("logs", "hostile-copier", "logs", "logged"),
        ("huge-error", "hostile-copier", "huge-error", "EEE..."),
        ("alias", "wat-alias", "-", "too much data is being copied"),
        ("memories", "wat-memories", "-", "memory budget exceeded"),
        ("table", "wat-table", "-", "growing a table"),
    ];
    let dest_dir = tempfile::tempdir().unwrap();
    let url = |name: &str| format!("file://{}/{name}", dest_dir.path().display());
    let mut config = format!(
        "[database.mirror.targets.good]\nurl = \"{}\"\npoll = \"200ms\"\n",
        url("good")
    );
    for (name, plugin, mode, _) in hostile_targets {
        config += &format!(
            "[database.mirror.targets.{name}]\nurl = \"{}\"\ncopier = \"plugin:{plugin}\"\n\
             poll = \"200ms\"\ncopy_parallelism = 2\n\
             [database.mirror.targets.{name}.copier_config]\nmode = \"{mode}\"\n",
            url(name)
        );
    }
    for plugin in ["hostile-copier", "wat-alias", "wat-memories", "wat-table"] {
        config += &format!("[plugins.{plugin}]\nmemory_mib = 64\ncall_timeout = \"5s\"\n");
    }
    let mut source = Source::new(&config, 3).await;
    let mut node = std::process::Command::new(env!("CARGO_BIN_EXE_sleet"))
        .args([
            "run",
            &source.root.url(),
            "--node-id",
            "real",
            "--services",
            "mirror",
            "--plugin-dir",
            plugins.path().to_str().unwrap(),
        ])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("sleet run starts");
    let rss_mib = |pid: u32| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    let all_failing = |status: &str| {
        let warnings = json(status)["warnings"].to_string();
        hostile_targets.iter().all(|(name, _, _, why)| {
            warnings.contains(&format!("mirror target {name} of")) && warnings.contains(why)
        })
    };
    let mut peak = 0;
    let started = std::time::Instant::now();
    let mut seen = String::new();
    while started.elapsed() < std::time::Duration::from_secs(20) || !all_failing(&seen) {
        assert!(
            node.try_wait().unwrap().is_none(),
            "the node exited beside hostile plugins"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "every hostile target shows its failure: {seen}"
        );
        peak = peak.max(rss_mib(node.id()));
        crate::harness::pause(200).await;
        let status = crate::common::sleet(&["status", &source.root.url(), "--format", "json"]);
        seen = String::from_utf8_lossy(&status.stdout).to_string();
    }
    source.write(1).await;
    let written = latest_manifest(&source.url).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while latest_manifest(&url("good")).await < written {
        peak = peak.max(rss_mib(node.id()));
        assert!(
            std::time::Instant::now() < deadline,
            "the honest target kept mirroring"
        );
        crate::harness::pause(200).await;
    }
    db::assert_reader_sees(&url("good"), 0..source.rounds).await;
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status();
    assert!(node.wait().unwrap().success(), "a clean stop after it all");
    eprintln!("peak resident memory beside hostile copiers: {peak} MiB");
    assert!(peak > 0 && peak < 512, "peak RSS {peak} MiB");
    for (name, ..) in hostile_targets {
        assert!(
            db::objects(&url(name), "manifest").await.is_empty(),
            "{name} committed"
        );
    }
    source.stop().await;
}

/// The id of a root's latest manifest (0 before the first), read-only.
async fn latest_manifest(url: &str) -> u64 {
    let (store, path) = crate::common::test_store(url);
    slatedb::admin::AdminBuilder::new(path, store)
        .build()
        .read_manifest(None)
        .await
        .unwrap()
        .map_or(0, |m| m.id())
}

/// On a terminal, a one-shot sync draws a progress bar against the pass's
/// planned total (a throttled copier keeps it on screen); with
/// `--format json` nothing but the JSON is written. Run under `script`,
/// which gives the command a pseudo-terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_on_a_terminal_shows_a_progress_bar_and_json_does_not() {
    let Some(script) = pseudo_terminal() else {
        return;
    };
    let plugins_dir = plugin_dir(&["throttle-copier"]);
    let run = |format: &'static str, dest: &str| {
        let (dest, plugins) = (dest.to_string(), plugins_dir.path().to_path_buf());
        async move {
            let data = tempfile::tempdir().unwrap();
            let source = format!("file://{}/source", data.path().display());
            db::seed(&source, 6).await;
            let root = crate::common::FileRoot::new();
            let extra = "[database.mirror.targets.t.copier_config]\nbytes_per_second = 60000\n";
            root.write("sleet.toml", &target(&dest, "throttle-copier", extra));
            let registered =
                crate::common::sleet(&["register", &root.url(), &source, "--no-check"]);
            assert!(registered.status.success());
            let command = format!(
                "{} mirror sync {} {source} t --plugin-dir {} --format {format}",
                env!("CARGO_BIN_EXE_sleet"),
                root.url(),
                plugins.display()
            );
            on_terminal(script, &command, &[])
        }
    };
    let dest_dir = tempfile::tempdir().unwrap();
    let shown = run("text", &format!("file://{}/a", dest_dir.path().display())).await;
    assert!(shown.contains(" objects, "), "no bar:\n{shown}");
    assert!(shown.contains(" left"), "no time left:\n{shown}");
    assert!(shown.contains("synced "), "{shown}");
    let json = run("json", &format!("file://{}/b", dest_dir.path().display())).await;
    assert!(!json.contains(" left"), "a bar with --format json:\n{json}");
    assert_eq!(json_reply(&json)["committed"], true);
}

/// Runs `command` through `script(1)` on a pseudo-terminal with `env`
/// added; it must succeed. What the terminal showed (stdout and stderr).
fn on_terminal(script: &str, command: &str, env: &[(&str, String)]) -> String {
    let out = std::process::Command::new(script)
        .args(["-qfec", command, "/dev/null"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("TERM", "xterm")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The JSON reply a terminal showed. The pseudo-terminal also carries the
/// log lines (stderr); the reply is the document from the line that opens
/// it.
fn json_reply(shown: &str) -> serde_json::Value {
    let start = shown.find("\n{").map_or(0, |at| at + 1);
    serde_json::from_str(shown[start..].trim())
        .unwrap_or_else(|e| panic!("a JSON reply ({e}):\n{shown}"))
}

/// `script(1)`, which runs a command on a pseudo-terminal, when the
/// machine has it.
fn pseudo_terminal() -> Option<&'static str> {
    let found = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    if found.is_none() {
        eprintln!("skipped: no script(1) for a pseudo-terminal");
    }
    found
}

/// `mirror verify` on a terminal draws the same bar, against the
/// manifests it reads (one GET each, slowed to 150 ms by a proxy in front
/// of the S3 server so the bar is on screen); with `--format json`
/// nothing but the JSON is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_on_a_terminal_shows_a_progress_bar_and_json_does_not() {
    use crate::common::{BUCKET, FileRoot, endpoint, s3_env, sleet_env, unique_prefix};
    let Some(script) = pseudo_terminal() else {
        return;
    };
    let Some(endpoint) = endpoint() else { return };
    let data = tempfile::tempdir().unwrap();
    let source = format!("file://{}/source", data.path().display());
    let copy = format!("s3://{BUCKET}/{}/copy", unique_prefix("verify-bar"));
    let root = FileRoot::new();
    root.write(
        "sleet.toml",
        &format!("[database.mirror.targets.t]\nurl = \"{copy}\"\n"),
    );
    let env = s3_env(&endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let writer = db::open_writer(&source).await;
    for round in 0..4 {
        db::write_rounds(&writer, round..round + 1).await;
        if round == 0 {
            let registered = crate::common::sleet(&["register", &root.url(), &source]);
            assert!(registered.status.success(), "{registered:?}");
        }
        let synced = sleet_env(&["mirror", "sync", &root.url(), &source, "t"], &env);
        assert!(synced.status.success(), "{synced:?}");
    }
    writer.close().await.unwrap();

    let slow = crate::proxy::FaultProxy::start(&endpoint, 11).await;
    slow.faults.set(0, 0, std::time::Duration::from_millis(150));
    let verify = |format: &str| {
        let command = format!(
            "{} mirror verify {copy} --format {format}",
            env!("CARGO_BIN_EXE_sleet")
        );
        on_terminal(script, &command, &s3_env(&slow.endpoint))
    };
    let shown = verify("text");
    assert!(shown.contains(" objects, "), "no bar:\n{shown}");
    assert!(shown.contains(" left"), "no time left:\n{shown}");
    assert!(shown.contains("ok: "), "{shown}");
    let json = verify("json");
    assert!(!json.contains(" left"), "a bar with --format json:\n{json}");
    let reply = json_reply(&json);
    assert_eq!(reply["problems"], serde_json::json!([]));
    assert!(reply["manifests_checked"].as_u64().unwrap() >= 2, "{reply}");
}

#[test]
fn plugin_check_configures_merge_operators_and_compaction_filters_as_compactors_would() {
    use crate::common::{json, ok, sleet};
    let dir = plugin_dir(&["counter-merge", "ttl-filter"]);
    let dir_arg = dir.path().to_str().unwrap();
    let listed = json(&ok(sleet(&[
        "plugin",
        "list",
        "--plugin-dir",
        dir_arg,
        "--format",
        "json",
    ])));
    let kinds: Vec<(&str, &str)> = listed["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("counter-merge", "merge-operator"),
            ("ttl-filter", "compaction-filter")
        ]
    );

    let config = tempfile::NamedTempFile::new().unwrap();
    let config_arg = config.path().to_str().unwrap();
    let check = |body: &str| {
        std::fs::write(config.path(), body).unwrap();
        let out = sleet(&[
            "plugin",
            "check",
            "--plugin-dir",
            dir_arg,
            "--config",
            config_arg,
        ]);
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, out) = check(
        "[database]\nmerge_operator = \"plugin:ttl-filter\"\n\
         compaction_filter = \"plugin:ttl-filter\"\n",
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(
            "merge_operator: plugin ttl-filter is a compaction-filter plugin, not a merge-operator"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "compaction_filter: plugin ttl-filter rejected its config: max_age is required"
        ),
        "{out}"
    );
    let (code, out) = check(
        "[database]\nmerge_operator = \"plugin:counter-merge\"\n\
         compaction_filter = \"plugin:ttl-filter\"\n\
         [database.compaction_filter_config]\nmax_age = \"7d\"\n",
    );
    assert_eq!(code, Some(0), "{out}");
}
