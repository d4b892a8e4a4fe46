//! The real `sleet run` binary: signals, exit codes and argument errors.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn start_node(root: &FileRoot, id: &str) -> Child {
    root.write(
        "sleet.toml",
        "[node]\nheartbeat_interval = \"200ms\"\nheartbeat_timeout = \"2s\"\n",
    );
    Command::new(env!("CARGO_BIN_EXE_sleet"))
        .args(["run", &root.url(), "--node-id", id])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sleet run starts")
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn sigint_and_sigterm_stop_cleanly_and_delete_the_heartbeat() {
    for sig in ["INT", "TERM"] {
        let root = FileRoot::new();
        let mut child = start_node(&root, "s1");
        let heartbeat = root.path("nodes/s1.cgmw.json");
        wait_for("the heartbeat", Duration::from_secs(20), || {
            heartbeat.exists()
        });
        signal(&child, sig);
        let status = child.wait().unwrap();
        assert!(status.success(), "SIG{sig}: exit {status:?}");
        assert!(!heartbeat.exists(), "SIG{sig} left the heartbeat behind");
    }
}

#[test]
fn sigkill_leaves_the_heartbeat_for_peers_to_time_out() {
    let root = FileRoot::new();
    let mut child = start_node(&root, "victim");
    let heartbeat = root.path("nodes/victim.cgmw.json");
    wait_for("the heartbeat", Duration::from_secs(20), || {
        heartbeat.exists()
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(heartbeat.exists());
    std::thread::sleep(Duration::from_millis(2100));
    let status = json(&ok(sleet(&["status", &root.url(), "--format", "json"])));
    assert_eq!(status["nodes"][0]["node_id"], "victim");
    assert_eq!(
        status["nodes"][0]["live"], false,
        "dead after the 2s timeout: {status:#}"
    );
}

#[test]
fn run_rejects_bad_arguments() {
    let root = FileRoot::new();
    let url = root.url();
    let err = fails_with(
        sleet(&["run", &url, "--node-id", "bad.id"]),
        2,
        "invalid value 'bad.id' for '--node-id <NODE_ID>'",
    );
    assert!(
        err.contains("node ids are 1-128 chars of [A-Za-z0-9_-]"),
        "{err}"
    );
    fails_with(
        sleet(&[
            "run",
            &url,
            "--node-id",
            "n1",
            "--services",
            "gc,compaction-workers,gc",
        ]),
        1,
        "error: --services lists \"gc\" more than once",
    );
    fails_with(
        sleet(&["run", &url, "--node-id", "n1", "--services", "gcc"]),
        2,
        "unknown service \"gcc\"",
    );
    fails_with(
        sleet(&["run", "ftp://x/fleet", "--node-id", "n1"]),
        1,
        "error: invalid fleet root: unsupported URL scheme \"ftp\"",
    );
    assert!(!root.path("nodes").exists(), "no heartbeat was written");
}

/// The newcomer's first command: the demo compacts, collects and mirrors
/// its database, prints the mirror's lag and verified restore points, and
/// stops cleanly on Ctrl-C. Its log lines carry no color codes when
/// stderr is not a terminal.
#[test]
fn the_demo_mirrors_its_database_and_stops_on_ctrl_c() {
    let _alone = crate::HEAVY.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("demo.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sleet"))
        .args(["demo", dir.path().join("demo").to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("sleet demo starts");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let started = Instant::now();
    while !text().contains("restore points, verified") {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("no verified restore point within 120 s:\n{}", text());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    signal(&child, "INT");
    let status = child.wait().unwrap();
    let output = text();
    assert!(status.success(), "exit {status:?}:\n{output}");
    assert!(output.contains("mirror: backup at manifest"), "{output}");
    assert!(output.contains("stopped cleanly"), "{output}");
    assert!(
        !output.contains('\u{1b}'),
        "color codes in a piped log:\n{output}"
    );
}

#[test]
fn a_bad_shutdown_grace_is_a_usage_error() {
    let root = FileRoot::new();
    fails_with(
        sleet(&[
            "run",
            &root.url(),
            "--node-id",
            "n",
            "--shutdown-grace",
            "soon",
        ]),
        2,
        "\"soon\" is not a duration",
    );
}
