//! Hook plugins on a running node: a maintenance window defers mirror
//! passes outside its hours and allows them inside (the test drives the
//! clock the hook is told), an audit hook sees every outcome, and hooks
//! that cannot answer fail closed.

use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sleet::{NodeOptions, StatusOptions};

use crate::db;
use crate::harness::{Source, assert_verified, eventually, pause, target_toml};
use crate::wasm::plugin_dir;

/// Log lines of this test binary, for the audit hook's output.
static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(crate) fn capture_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("sleet=info"))
        .with_writer(|| Capture)
        .with_ansi(false)
        .try_init();
}

pub(crate) fn logged(needle: &str) -> bool {
    String::from_utf8_lossy(&LOGS.lock().unwrap()).contains(needle)
}

/// 2026-12-03 at `hh:mm` UTC, in Unix milliseconds.
fn at(hh: i64, mm: i64) -> i64 {
    let midnight = chrono::NaiveDate::from_ymd_opt(2026, 12, 3)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp_millis();
    midnight + (hh * 60 + mm) * 60_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_maintenance_window_defers_mirror_passes_and_the_audit_hook_sees_outcomes() {
    capture_logs();
    let plugins = plugin_dir(&["maintenance-window", "audit-hook"]);
    let dest_dir = tempfile::tempdir().unwrap();
    let dest = format!("file://{}/copy", dest_dir.path().display());
    let config = target_toml("live", &dest)
        + "poll = \"200ms\"\n"
        + "[database.hooks.window]\nplugin = \"maintenance-window\"\nservices = [\"mirror\"]\n"
        + "[database.hooks.window.config]\nstart = \"02:00\"\nend = \"03:00\"\n"
        + "[database.hooks.audit]\nplugin = \"audit-hook\"\n";
    let mut source = Source::new(&config, 2).await;
    let now = Arc::new(AtomicI64::new(at(12, 0)));
    let clock = now.clone();
    source.start_node(
        NodeOptions::new("solo")
            .with_plugin_dirs([plugins.path().to_path_buf()], None)
            .with_clock(Arc::new(move || {
                chrono::DateTime::from_timestamp_millis(clock.load(Ordering::SeqCst)).unwrap()
            })),
    );

    // Outside the window: mirror work is deferred, visibly; GC still runs.
    eventually(
        Duration::from_secs(30),
        "the deferral in status",
        || async {
            let status = source.fleet.status(StatusOptions::default()).await.unwrap();
            status.warnings.iter().any(|w| {
                w.contains("mirror target live of")
                    && w.contains("is deferred on solo")
                    && w.contains("outside the maintenance window 02:00-03:00 UTC")
            })
        },
    )
    .await;
    pause(1000).await;
    assert!(
        db::objects(&dest, "manifest").await.is_empty(),
        "no pass ran outside the window"
    );

    // Inside the window: passes run and the copy catches up.
    now.store(at(2, 30), Ordering::SeqCst);
    eventually(
        Duration::from_secs(30),
        "a pass inside the window",
        || async { !db::objects(&dest, "manifest").await.is_empty() },
    )
    .await;
    pause(1000).await;
    assert_verified(&dest).await;
    db::assert_reader_sees(&dest, 0..source.rounds).await;

    // The audit hook saw the deferrals and the passes.
    let db = &source.url;
    eventually(Duration::from_secs(10), "audit lines", || async {
        logged(&format!(
            "audit: mirror [live] of {db} on solo (task #1): skipped"
        )) && logged(&format!(
            "audit: mirror [live] of {db} on solo (mirror-pass #1): ok"
        ))
    })
    .await;
    let status = source.fleet.status(StatusOptions::default()).await.unwrap();
    assert!(
        !status.warnings.iter().any(|w| w.contains("is deferred")),
        "{:?}",
        status.warnings
    );
    source.stop().await;
}

/// A hook that traps, runs past its deadline or is not loaded fails
/// closed: the task it guards does not run, and `sleet status` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hooks_that_cannot_answer_fail_closed_visibly() {
    let plugins = plugin_dir(&["hostile-hook"]);
    for (plugin, mode, why) in [
        ("hostile-hook", "trap", "plugin hostile-hook trapped"),
        (
            "hostile-hook",
            "loop",
            "plugin hostile-hook timed out after 1s",
        ),
        (
            "absent-hook",
            "trap",
            "plugin \"absent-hook\" is not loaded on node solo",
        ),
    ] {
        let dest_dir = tempfile::tempdir().unwrap();
        let dest = format!("file://{}/copy", dest_dir.path().display());
        let config = target_toml("live", &dest)
            + "poll = \"200ms\"\n"
            + &format!(
                "[database.hooks.guard]\nplugin = \"{plugin}\"\nservices = [\"mirror\"]\n\
                 [database.hooks.guard.config]\nmode = \"{mode}\"\n\
                 [plugins.hostile-hook]\ncall_timeout = \"1s\"\n"
            );
        let mut source = Source::new(&config, 1).await;
        source.start_node(
            NodeOptions::new("solo").with_plugin_dirs([plugins.path().to_path_buf()], None),
        );
        eventually(
            Duration::from_secs(30),
            &format!("{mode} {plugin}: the hook's failure in status"),
            || async {
                let status = source.fleet.status(StatusOptions::default()).await.unwrap();
                let warnings = status.warnings.join("\n");
                warnings.contains("hook guard") && warnings.contains(why)
            },
        )
        .await;
        assert!(
            db::objects(&dest, "manifest").await.is_empty(),
            "{mode} {plugin}: the guarded task never ran"
        );
        source.stop().await;
    }
}

/// `sleet mirror sync` asks the database's mirror hooks as a node's pass
/// does: a hook it cannot load fails the command closed, a maintenance
/// window closed now defers it (exit 1 with the reason, nothing copied),
/// `--no-hooks` runs it anyway, and inside the window it runs, with an
/// audit hook told of the pass before the command exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_passes_ask_the_hooks_a_node_would() {
    use crate::common::{fails_with, ok, sleet, sleet_env, stderr};
    let plugins = plugin_dir(&["maintenance-window", "audit-hook"]);
    let dest_dir = tempfile::tempdir().unwrap();
    let dest = format!("file://{}/copy", dest_dir.path().display());
    let hhmm = |hours: i64| {
        (chrono::Utc::now() + chrono::Duration::hours(hours))
            .format("%H:%M")
            .to_string()
    };
    let config = |start: String, end: String| {
        target_toml("live", &dest)
            + "[database.hooks.window]\nplugin = \"maintenance-window\"\nservices = [\"mirror\"]\n"
            + &format!("[database.hooks.window.config]\nstart = \"{start}\"\nend = \"{end}\"\n")
            + "[database.hooks.audit]\nplugin = \"audit-hook\"\n"
    };
    let source = Source::new(&config(hhmm(2), hhmm(3)), 2).await;
    let (root, db) = (source.root.url(), source.url.clone());
    let dir = plugins.path().to_str().unwrap();
    let with_plugins = ["mirror", "sync", &root, &db, "live", "--plugin-dir", dir];

    fails_with(
        sleet(&["mirror", "sync", &root, &db, "live"]),
        1,
        "hook audit: plugin \"audit-hook\" is not loaded on node sleet mirror sync \
         (it runs without --plugin-dir)",
    );
    fails_with(
        sleet(&with_plugins),
        1,
        "the pass did not run: hook window skipped it: outside the maintenance window",
    );
    assert!(
        db::objects(&dest, "manifest").await.is_empty(),
        "deferred: nothing copied"
    );

    ok(sleet(&[&with_plugins[..], &["--no-hooks"]].concat()));
    assert_verified(&dest).await;

    source.root.write(
        "sleet.toml",
        &format!(
            "{}\n{}",
            crate::harness::fast_services(),
            config(hhmm(-1), hhmm(1))
        ),
    );
    source.writer.flush().await.unwrap();
    let out = sleet_env(&with_plugins, &[("RUST_LOG", "sleet=info")]);
    let said = stderr(&out);
    ok(out);
    assert!(
        said.contains(&format!(
            "audit: mirror [live] of {db} on sleet mirror sync (mirror-pass #1): ok"
        )),
        "the audit hook heard of the pass: {said}"
    );
    source.stop().await;
}
