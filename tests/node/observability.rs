//! Operating a node: a real Prometheus scrapes a real `sleet run` that
//! mirrors a real database on the local S3 server, and sees the mirror's
//! byte counter and the task gauges move as the database is written; a
//! node cut off from its store turns `/readyz` unhealthy while `/healthz`
//! stays up; logs in `--log-format json` parse line by line; a bad
//! `--listen` fails at start with exit code 2.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{BUCKET, endpoint, s3_env, sleet_env, unique_prefix};
use crate::proxy::FaultProxy;

fn fleet_toml(prefix: &str) -> String {
    format!(
        r#"
[node]
heartbeat_interval = "500ms"
heartbeat_timeout = "4s"
config_poll = "1s"

[database.mirror.targets.live]
url = "s3://sleet-mirror/{prefix}/live"
source_prefix = "s3://{BUCKET}/{prefix}/data"
mode = "continuous"
poll = "300ms"
"#
    )
}

/// A free loopback port (bound, then released for the child to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET http://127.0.0.1:port/path`: the status code and body.
async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let url = format!("http://127.0.0.1:{port}{path}");
    let client = reqwest::Client::builder().no_proxy().build().ok()?;
    let reply = client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    let code = reply.status().as_u16();
    Some((code, reply.text().await.ok()?))
}

/// Polls until `check` holds, or panics with `what` after `limit`.
async fn until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The node's `/status`, parsed.
async fn status_json(port: u16) -> serde_json::Value {
    let (code, body) = get(port, "/status").await.expect("the endpoint answers");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("/status is JSON")
}

/// The value of an instant PromQL query, summed, as Prometheus answers it.
async fn prom_value(port: u16, query: &str) -> Option<f64> {
    let encoded: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
    let (code, body) = get(port, &format!("/api/v1/query?query={encoded}")).await?;
    if code != 200 {
        return None;
    }
    let reply: serde_json::Value = serde_json::from_str(&body).ok()?;
    let results = reply["data"]["result"].as_array()?;
    if results.is_empty() {
        return None;
    }
    Some(
        results
            .iter()
            .filter_map(|r| r["value"][1].as_str()?.parse::<f64>().ok())
            .sum(),
    )
}

fn start_prometheus(dir: &std::path::Path, scrape_port: u16, port: u16) -> Option<Running> {
    let binary = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(binary) = binary else {
        assert!(
            std::env::var_os("SLEET_REQUIRE_S3").is_none(),
            "scripts/test scrapes a node with a real Prometheus: install Debian's prometheus \
             (.ci/run does)"
        );
        eprintln!("skipped: no prometheus binary");
        return None;
    };
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  \
             - job_name: sleet\n    static_configs:\n      - targets: ['127.0.0.1:{scrape_port}']\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prometheus starts");
    Some(Running(child))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prometheus_scrapes_a_mirroring_node_and_probes_tell_live_from_ready() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let work = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("observed");
    let root = format!("s3://{BUCKET}/{prefix}/root");
    let source = format!("s3://{BUCKET}/{prefix}/data/db");
    let env = s3_env(&endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    let writer = crate::db::open_writer(&source).await;
    crate::db::write_rounds(&writer, 0..2).await;
    use object_store::ObjectStoreExt;
    crate::common::s3_store(&endpoint)
        .put(
            &object_store::path::Path::from(format!("{prefix}/root/sleet.toml")),
            fleet_toml(&prefix).into_bytes().into(),
        )
        .await
        .unwrap();
    let registered = sleet_env(&["register", &root, &source, "--no-check"], &env);
    assert!(registered.status.success(), "{registered:?}");

    let proxy = FaultProxy::start(&endpoint, 11).await;
    let port = free_port();
    let log_path = work.path().join("node.log");
    let node = Running(
        Command::new(env!("CARGO_BIN_EXE_sleet"))
            .args([
                "run",
                &root,
                "--node-id",
                "observed",
                "--log-format",
                "json",
            ])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            // SlateDB's counters per database too (the default sums them).
            .args(["--metrics-detail", "database"])
            .envs(s3_env(&proxy.endpoint))
            .env("RUST_LOG", "warn,sleet=info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .expect("sleet run starts"),
    );
    until(Duration::from_secs(30), "the node is ready", || async {
        get(port, "/readyz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;

    let prom_port = free_port();
    let Some(_prometheus) = start_prometheus(work.path(), port, prom_port) else {
        return;
    };
    let bytes = "sum(sleet_mirror_bytes_copied_total)";
    until(
        Duration::from_secs(60),
        "Prometheus sees mirrored bytes",
        || async { prom_value(prom_port, bytes).await.is_some_and(|v| v > 0.0) },
    )
    .await;
    let running = r#"sum(sleet_tasks{state="running"})"#;
    until(
        Duration::from_secs(30),
        "Prometheus sees running tasks",
        || async {
            prom_value(prom_port, running)
                .await
                .is_some_and(|v| v >= 4.0)
        },
    )
    .await;
    let before = prom_value(prom_port, bytes).await.unwrap();
    crate::db::write_rounds(&writer, 2..6).await;
    until(
        Duration::from_secs(60),
        "the byte counter moves with writes",
        || async {
            prom_value(prom_port, bytes)
                .await
                .is_some_and(|v| v > before)
        },
    )
    .await;
    let passes = r#"sum(sleet_mirror_passes_total{result="committed"})"#;
    assert!(prom_value(prom_port, passes).await.unwrap() >= 2.0);

    // SlateDB's own compactor metrics come through, labelled by database.
    let (_, exposition) = get(port, "/metrics").await.unwrap();
    let slatedb_series = exposition
        .lines()
        .filter(|l| l.starts_with("slatedb_") && l.contains(&format!("database=\"{source}\"")))
        .count();
    let mirror_series = exposition
        .lines()
        .filter(|l| l.starts_with("sleet_mirror_") && l.contains("target=\"live\""))
        .count();
    eprintln!(
        "series for one database: {slatedb_series} from SlateDB (GC, coordinator, workers; \
         histograms summed per node), {mirror_series} for its mirror target"
    );
    // GC, the coordinator and the workers all report (GC's runs counter,
    // `slatedb.gc.count`, among them).
    assert!(slatedb_series > 0, "{exposition}");
    assert!(
        exposition
            .lines()
            .any(|l| l.starts_with("slatedb_gc_count_total{")),
        "{exposition}"
    );
    assert!(mirror_series <= 11, "{exposition}");
    // The stores the node writes to were checked before it wrote, and
    // are safe.
    assert!(
        exposition
            .lines()
            .any(|l| l.starts_with("sleet_store_trust{store=\"s3://")
                && l.contains("trust=\"safe\"} 1")),
        "{exposition}"
    );

    // Cut off from the store: not ready, still live.
    proxy.faults.cut_off(true);
    until(Duration::from_secs(30), "/readyz turns 503", || async {
        get(port, "/readyz")
            .await
            .is_some_and(|(code, _)| code == 503)
    })
    .await;
    for _ in 0..10 {
        let (code, body) = get(port, "/healthz").await.expect("the endpoint answers");
        assert_eq!(code, 200, "live while the store is down: {body}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let status = status_json(port).await;
    assert_eq!(status["node_id"], "observed");
    assert_eq!(status["heartbeat_written"], false, "{status}");
    proxy.faults.cut_off(false);
    until(Duration::from_secs(30), "/readyz recovers", || async {
        get(port, "/readyz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;
    let status = status_json(port).await;
    let tasks = status["tasks"].as_array().unwrap();
    assert!(
        tasks
            .iter()
            .any(|t| t["service"] == "mirror" && t["target"] == "live"),
        "{status}"
    );
    drop(node);
    writer.close().await.unwrap();

    let log = std::fs::read_to_string(&log_path).unwrap();
    let mut with_database = 0;
    for line in log.lines() {
        let entry: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        assert!(
            entry["level"].is_string() && entry["message"].is_string(),
            "{line}"
        );
        with_database += usize::from(entry["database"].is_string());
    }
    assert!(
        with_database > 0,
        "task lines carry the database field:\n{log}"
    );
}

#[test]
fn a_bad_listen_address_fails_at_start_with_exit_2() {
    let root = crate::common::FileRoot::new();
    let malformed = crate::common::sleet(&[
        "run",
        &root.url(),
        "--node-id",
        "n",
        "--listen",
        "127.0.0.1:99999",
    ]);
    assert_eq!(malformed.status.code(), Some(2), "{malformed:?}");
    assert!(crate::common::stderr(&malformed).contains("--listen"));

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let busy = crate::common::sleet(&["run", &root.url(), "--node-id", "n", "--listen", &address]);
    assert_eq!(busy.status.code(), Some(2), "{busy:?}");
    let stderr = crate::common::stderr(&busy);
    assert!(
        stderr.contains(&format!("--listen {address}: cannot listen there")),
        "{stderr}"
    );
}
