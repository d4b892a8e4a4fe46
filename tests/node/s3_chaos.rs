//! Chaos where production runs: real `sleet run` processes on the local S3
//! server (GC boundary files on, conditional PUTs), killed with SIGKILL
//! and restarted at random, each talking to the store through its own
//! fault proxy (errors, replies lost after the write applied, latency, a
//! node cut off while the others are not), one node's clock skewed by
//! half the heartbeat timeout; a writer per database with faults of its
//! own; continuous and periodic mirror targets among the services.
//!
//! After every round the faults stop and the suite checks what the
//! product promises: every key a writer had acknowledged reads back from
//! the source; each mirror destination holds no hole (every acknowledged
//! key up to the last it holds) and catches up to all of them; a restore
//! of the periodic target's latest restore point into a fresh root reads
//! them back; `sleet mirror verify` passes; the writer that keeps
//! SlateDB's defaults (its own compactor and GC) was never fenced.
//!
//! `SLEET_CHAOS_SEED=<n>` replays a run (the seed is printed);
//! `SLEET_CHAOS_ROUNDS=<n>` sets the round count and
//! `SLEET_CHAOS_MINUTES=<m>` a wall-clock bound (`scripts/soak` sets
//! both); `SLEET_CHAOS_LOGS=<dir>` keeps the nodes' logs. The figures
//! it prints go to `docs/reliability.md`.

use std::collections::{BTreeSet, HashMap};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use slatedb::config::{FlushOptions, FlushType, Settings};
use slatedb::{CloseReason, Db, DbReader, ErrorKind};
use sleet::testing::Chaos;

use crate::common::{BUCKET, FAST_IDLE, endpoint, s3_env, s3_store, sleet_env, unique_prefix};
use crate::manifests::CopySnapshot;
use crate::proxy::{FaultCounts, FaultProxy};

const NODES: [&str; 3] = ["k1", "k2", "k3"];
/// The node whose clock runs ahead by half the heartbeat timeout.
const SKEWED: &str = "k3";
const SKEW: &str = "+2s";
const DATABASES: usize = 3;
/// Keys each writer writes per round. Within a round SlateDB flushes its
/// memtable by size (about every 12 keys), while later writes reach the
/// WAL, so manifests carry WAL replay windows the checks must find in
/// every copy; the writer flushes its memtable once at the round's end.
const KEYS_PER_ROUND: usize = 48;
const DEFAULT_ROUNDS: usize = 4;
/// Faults while a round runs, per 1000 requests through a proxy.
const ERRORS_PER_MILLE: u64 = 30;
const LOST_REPLIES_PER_MILLE: u64 = 10;
const MAX_LATENCY: Duration = Duration::from_millis(30);

/// Fast cadences, heartbeat timeout 4 s (the skew is half of it), GC with
/// a `min_age` well above the slowest step (see docs/reliability.md),
/// and two mirror targets for every database.
fn fleet_toml(prefix: &str) -> String {
    let source = format!("s3://{BUCKET}/{prefix}/data");
    format!(
        r#"
[node]
heartbeat_interval = "500ms"
heartbeat_timeout = "4s"
config_poll = "1s"

[database.gc.manifest]
interval = "500ms"
min_age = "10s"
[database.gc.wal]
interval = "500ms"
min_age = "10s"
[database.gc.compacted]
interval = "500ms"
min_age = "10s"
[database.gc.compactions]
interval = "500ms"
min_age = "10s"

[database.compactor-coordinator]
poll_interval = "200ms"
commit_compacted_interval = "200ms"
[database.compactor-coordinator.scheduler]
min_compaction_sources = 2

[database.compaction-workers]
compactions_poll_interval = "200ms"
heartbeat_interval = "1s"
min_filter_keys = 0

[database.outside-compactor]
recheck = "1s"
{FAST_IDLE}

[database.mirror.targets.live]
url = "s3://sleet-mirror/{prefix}/live"
source_prefix = "{source}"
mode = "continuous"
poll = "300ms"

[database.mirror.targets.points]
url = "s3://sleet-mirror/{prefix}/points"
source_prefix = "{source}"
mode = "periodic"
interval = "3s"
"#
    )
}

/// The suite's knobs, from the environment.
struct Plan {
    rounds: usize,
    /// No new round starts after this long (a soak's wall-clock bound).
    until: Option<Instant>,
}

impl Plan {
    fn from_env() -> Plan {
        let number = |name: &str| std::env::var(name).ok().and_then(|r| r.parse::<u64>().ok());
        Plan {
            rounds: number("SLEET_CHAOS_ROUNDS").map_or(DEFAULT_ROUNDS, |r| r as usize),
            until: number("SLEET_CHAOS_MINUTES")
                .map(|m| Instant::now() + Duration::from_secs(60 * m)),
        }
    }

    fn another_round(&self, done: usize) -> bool {
        done < self.rounds && self.until.is_none_or(|until| Instant::now() < until)
    }
}

/// libfaketime's preload library, when the machine has it (`.ci/run`
/// installs Debian's `faketime`).
pub fn faketime_library() -> Option<String> {
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .map(str::to_string)
}

/// One `sleet run` process and the proxy it reaches the store through.
pub struct Node {
    pub id: String,
    pub proxy: FaultProxy,
    /// `--services`, when the node runs only some.
    pub services: Option<&'static str>,
    pub child: Option<Child>,
    pub log: std::path::PathBuf,
}

impl Node {
    pub fn spawn(&mut self, root: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_sleet"));
        command
            .args(["run", root, "--node-id", &self.id])
            .envs(s3_env(&self.proxy.endpoint))
            .env("RUST_LOG", "warn,sleet=info")
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(services) = self.services {
            command.args(["--services", services]);
        }
        if self.id == SKEWED
            && let Some(library) = faketime_library()
        {
            command
                .env("LD_PRELOAD", library)
                .env("FAKETIME", SKEW)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        self.child = Some(command.spawn().expect("sleet run starts"));
    }

    /// SIGKILL: no shutdown, no cleanup, SlateDB's own tasks die too.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => {
                let exited = child.try_wait().unwrap();
                assert!(
                    exited.is_none(),
                    "node {} exited by itself: {exited:?}\n{}",
                    self.id,
                    self.tail()
                );
                true
            }
            None => false,
        }
    }

    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(40).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A writer on one database through its own proxy, recording every key
/// SlateDB acknowledged as durable. In SlateDB 0.18 a `put` returns once
/// the write is in memory; only its handle's `await_durable` says it
/// reached the WAL in the store, so that is what counts as acknowledged.
pub struct Writer {
    name: String,
    url: String,
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    /// SlateDB's default settings: its own compactor and GC.
    own_compactor: bool,
    db: Option<Db>,
    pub acked: Vec<String>,
    /// For each acknowledged key, the highest WAL id the source held just
    /// after the acknowledgement: the key's WAL id is no higher.
    wal_bound: Vec<u64>,
    next: usize,
    reopened: u32,
}

fn value_of(key: &str) -> Vec<u8> {
    format!("{key}:").repeat(48).into_bytes()
}

impl Writer {
    /// A writer on `url` (at `path` in the test bucket) that reaches the
    /// store through `endpoint`, with the embedded compactor and GC off.
    pub fn new(name: &str, url: &str, endpoint: &str, path: &str) -> Writer {
        Writer {
            name: name.to_string(),
            url: url.to_string(),
            store: sleet::testing::local_s3_bucket(endpoint, BUCKET),
            path: ObjectPath::from(path),
            own_compactor: false,
            db: None,
            acked: Vec::new(),
            wal_bound: Vec::new(),
            next: 0,
            reopened: 0,
        }
    }

    fn settings(&self) -> Settings {
        let tiny = crate::db::tiny_settings();
        if self.own_compactor {
            let defaults = Settings::default();
            Settings {
                compactor_options: defaults.compactor_options,
                garbage_collector_options: defaults.garbage_collector_options,
                ..tiny
            }
        } else {
            tiny
        }
    }

    /// Opens (or reopens) the writer, retrying through the faults.
    pub async fn open(&mut self) -> Result<(), String> {
        let mut last = String::new();
        for _ in 0..20 {
            match Db::builder(self.path.clone(), self.store.clone())
                .with_settings(self.settings())
                .build()
                .await
            {
                Ok(db) => {
                    self.db = Some(db);
                    return Ok(());
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!("{}: the writer did not open: {last}", self.name))
    }

    /// Writes `count` keys; a writer SlateDB closed is reopened, except
    /// the one with its own compactor, whose closing fails the suite.
    pub async fn write(mut self, count: usize) -> Result<Writer, String> {
        for n in 0..count {
            if self.db.is_none() {
                self.open().await?;
                self.reopened += 1;
            }
            let db = self.db.as_ref().unwrap();
            let key = format!("k{:06}", self.next);
            self.next += 1;
            let put = match db.put(&key, value_of(&key)).await {
                Ok(handle) => handle.await_durable().await,
                Err(e) => Err(e),
            };
            let flushed = if put.is_ok() && n + 1 == count {
                db.flush_with_options(FlushOptions {
                    flush_type: FlushType::MemTable,
                })
                .await
            } else {
                Ok(())
            };
            if put.is_ok() {
                self.acked.push(key);
                self.wal_bound.push(highest_wal(&self.url).await);
            }
            for error in [put.err(), flushed.err()].into_iter().flatten() {
                if let ErrorKind::Closed(reason) = error.kind() {
                    if self.own_compactor {
                        return Err(format!(
                            "{}: the writer with its own compactor was closed ({reason:?}): {error}",
                            self.name
                        ));
                    }
                    if reason == CloseReason::Fenced {
                        self.db = None;
                    } else {
                        let _ = self
                            .db
                            .take()
                            .map(|db| tokio::spawn(async move { db.close().await }));
                    }
                    break;
                }
            }
        }
        Ok(self)
    }

    /// The acknowledged keys a reader of a manifest whose
    /// `next_wal_sst_id` is `next_wal` must see: every key whose WAL is
    /// below it, because SlateDB flushed that WAL into the manifest's
    /// SSTs or the reader replays it. A manifest a pass pinned holds
    /// every key acknowledged before its WAL was last flushed, which is
    /// what this checks.
    fn held_below(&self, next_wal: u64) -> &[String] {
        &self.acked[..self.wal_bound.partition_point(|&wal| wal < next_wal)]
    }
}

/// The highest WAL id `url` holds, read on the server itself.
async fn highest_wal(url: &str) -> u64 {
    crate::db::objects(url, "wal")
        .await
        .iter()
        .filter_map(|name| sleet::mirror::layout::parse_wal_file(name))
        .max()
        .unwrap_or(0)
}

/// What a round disturbed, for the figures.
#[derive(Default)]
pub struct Tally {
    rounds: usize,
    kills: usize,
    cut_offs: usize,
    keys_checked: usize,
    destinations_checked: usize,
    restores_checked: usize,
    /// Restore points of each database's periodic copy already restored.
    restored_points: std::collections::HashMap<String, BTreeSet<u64>>,
    /// Manifests of the continuous copies opened in place.
    pub manifests_opened: usize,
    /// Each database's continuous copy, and the manifests already opened.
    live_copies: std::collections::HashMap<String, (CopySnapshot, BTreeSet<u64>)>,
    pub lost: BTreeSet<String>,
}

/// A read-only view of `url` on the server itself (no proxy, no faults).
async fn reader(url: &str) -> Result<DbReader, String> {
    crate::db::open_reader(url)
        .await
        .map_err(|e| format!("{url} does not open read-only ({e})"))
}

/// Which of `keys` `url` holds, from one full scan; a wrong value is a
/// failure of its own.
async fn present(url: &str, keys: &[String]) -> Result<Vec<bool>, String> {
    let reader = reader(url).await?;
    let mut held = HashMap::new();
    let mut scan = reader
        .scan(..)
        .await
        .map_err(|e| format!("{url}: scan: {e}"))?;
    while let Some(entry) = scan.next().await.map_err(|e| format!("{url}: scan: {e}"))? {
        held.insert(entry.key.to_vec(), entry.value.to_vec());
    }
    let _ = reader.close().await;
    Ok(found_in(url, &held, keys))
}

/// `present`, retrying a read that met source GC between the reader's
/// manifest and an SST (a `FollowLatest` reader pins nothing).
async fn present_retrying(url: &str, keys: &[String]) -> Result<Vec<bool>, String> {
    let mut last = String::new();
    for _ in 0..5 {
        match present(url, keys).await {
            Ok(found) => return Ok(found),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(last)
}

/// Acknowledged keys `url` lacks.
pub async fn missing(url: &str, keys: &[String]) -> Vec<String> {
    let found = present_retrying(url, keys)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    lacking(keys, &found)
}

fn lacking(keys: &[String], found: &[bool]) -> Vec<String> {
    keys.iter()
        .zip(found)
        .filter(|(_, f)| !**f)
        .map(|(k, _)| k.clone())
        .collect()
}

/// Keys missing before the last one present: a hole in a copy.
fn holes(keys: &[String], found: &[bool]) -> Vec<String> {
    let last = found.iter().rposition(|f| *f).unwrap_or(0);
    lacking(&keys[..last], &found[..last])
}

/// What a manifest of a copy lost: a hole, or a key whose WAL is below
/// the manifest's `next_wal_sst_id`.
fn lost_at(writer: &Writer, id: u64, next_wal: u64, found: &[bool], what: &str) -> Vec<String> {
    let held = writer.held_below(next_wal);
    let mut lost: BTreeSet<String> = holes(&writer.acked, found).into_iter().collect();
    lost.extend(lacking(held, &found[..held.len()]));
    lost.into_iter()
        .map(|k| {
            let bound = writer
                .acked
                .iter()
                .position(|a| *a == k)
                .map(|i| writer.wal_bound[i]);
            format!("{} {what} {id}: {k} (WAL at most {bound:?})", writer.name)
        })
        .collect()
}

/// Which of `keys` a scan returned; a wrong value fails the suite.
fn found_in(label: &str, held: &HashMap<Vec<u8>, Vec<u8>>, keys: &[String]) -> Vec<bool> {
    keys.iter()
        .map(|key| match held.get(key.as_bytes()) {
            Some(value) => {
                assert_eq!(&value[..], &value_of(key)[..], "{label}: {key}");
                true
            }
            None => false,
        })
        .collect()
}

pub fn cli(args: &[&str], endpoint: &str) -> std::process::Output {
    let env = s3_env(endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    sleet_env(args, &env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_kills_lost_replies_and_partitions_on_s3_lose_nothing() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let plan = Plan::from_env();
    let mut chaos = Chaos::from_env();
    let skew = faketime_library().map_or("none (faketime missing)", |_| SKEW);
    assert!(
        faketime_library().is_some() || std::env::var_os("SLEET_REQUIRE_S3").is_none(),
        "scripts/test runs this suite with a skewed clock: install Debian's faketime (.ci/run does)"
    );
    eprintln!(
        "s3 chaos: {} rounds, clock skew on {SKEWED}: {skew}",
        plan.rounds
    );
    let prefix = unique_prefix("s3-chaos");
    let root = format!("s3://{BUCKET}/{prefix}/root");
    s3_store(&endpoint)
        .put(
            &ObjectPath::from(format!("{prefix}/root/sleet.toml")),
            fleet_toml(&prefix).into(),
        )
        .await
        .unwrap();

    let mut writers = Vec::new();
    let mut writer_proxies = Vec::new();
    for i in 0..DATABASES {
        let proxy = FaultProxy::start(&endpoint, chaos.draw()).await;
        let url = format!("s3://{BUCKET}/{prefix}/data/db{i}");
        let mut writer = Writer::new(
            &format!("db{i}"),
            &url,
            &proxy.endpoint,
            &format!("{prefix}/data/db{i}"),
        );
        writer.own_compactor = i == 0;
        writer.open().await.unwrap();
        writer = writer.write(KEYS_PER_ROUND).await.unwrap();
        let registered = cli(&["register", &root, &url], &endpoint);
        assert!(
            registered.status.success(),
            "{}",
            String::from_utf8_lossy(&registered.stderr)
        );
        writers.push(writer);
        writer_proxies.push(proxy);
    }

    // SLEET_CHAOS_LOGS=DIR keeps the nodes' logs for a replay.
    let logs = tempfile::tempdir().unwrap();
    let logs = std::env::var_os("SLEET_CHAOS_LOGS").map_or(logs.path().to_path_buf(), Into::into);
    let mut nodes = Vec::new();
    for id in NODES {
        let mut node = Node {
            id: id.to_string(),
            proxy: FaultProxy::start(&endpoint, chaos.draw()).await,
            services: None,
            child: None,
            log: logs.join(format!("{id}.log")),
        };
        node.spawn(&root);
        nodes.push(node);
    }

    let mut tally = Tally::default();
    let mut round = 0;
    while plan.another_round(round) {
        for (i, proxy) in writer_proxies.iter().enumerate() {
            // The writer that keeps SlateDB's defaults must survive, so it
            // gets only faults that are not applied-and-lost writes.
            let lost = if i == 0 { 0 } else { LOST_REPLIES_PER_MILLE };
            proxy.faults.set(ERRORS_PER_MILLE, lost, MAX_LATENCY);
        }
        for node in &nodes {
            node.proxy
                .faults
                .set(ERRORS_PER_MILLE, LOST_REPLIES_PER_MILLE, MAX_LATENCY);
        }
        let writing: Vec<_> = writers
            .drain(..)
            .map(|w| tokio::spawn(w.write(KEYS_PER_ROUND)))
            .collect();
        let mut actions = Vec::new();
        for _ in 0..3 {
            actions.push(disturb(&mut nodes, &mut chaos, &root, &mut tally).await);
            tokio::time::sleep(Duration::from_millis(500 + chaos.draw() % 1500)).await;
        }
        for handle in writing {
            writers.push(handle.await.unwrap().unwrap_or_else(|e| panic!("{e}")));
        }
        for proxy in writer_proxies.iter().chain(nodes.iter().map(|n| &n.proxy)) {
            proxy.faults.clear();
        }
        for node in &mut nodes {
            if !node.running() {
                node.spawn(&root);
                actions.push(format!("start {}", node.id));
            }
        }
        let checking = Instant::now();
        check_round(&writers, &endpoint, &prefix, round, &mut tally, &mut nodes).await;
        eprintln!(
            "round {round}: {actions:?}, checked in {:.1}s",
            checking.elapsed().as_secs_f64()
        );
        tally.rounds += 1;
        round += 1;
    }

    let counts = FaultCounts::default();
    for proxy in writer_proxies.iter().chain(nodes.iter().map(|n| &n.proxy)) {
        counts.add(&proxy.faults.counts);
    }
    let get = FaultCounts::get;
    eprintln!(
        "s3 chaos figures: seed {}, rounds {}, kills {}, cut-offs {}, requests {}, \
         errors {}, lost replies {}, cut-off requests {}, writer reopenings {}, \
         keys checked {}, destinations checked {}, restores checked {}, \
         live manifests opened {}, keys lost {}",
        chaos.seed(),
        tally.rounds,
        tally.kills,
        tally.cut_offs,
        get(&counts.requests),
        get(&counts.errors),
        get(&counts.lost_replies),
        get(&counts.cut_off),
        writers.iter().map(|w| w.reopened).sum::<u32>(),
        tally.keys_checked,
        tally.destinations_checked,
        tally.restores_checked,
        tally.manifests_opened,
        tally.lost.len(),
    );
    assert!(
        tally.lost.is_empty(),
        "keys lost: {:?}\n{}",
        tally.lost,
        nodes
            .iter()
            .map(|n| format!("--- {} ---\n{}", n.id, n.tail()))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        get(&counts.errors) > 0 && get(&counts.lost_replies) > 0,
        "faults were injected"
    );

    // The fleet did its work on the databases it may compact, and stood
    // down for the one whose writer compacts itself.
    for writer in &writers[1..] {
        let (_, runs) = crate::db::shape(&writer.url).await;
        assert!(runs > 0, "{} was compacted by the fleet", writer.name);
    }
    for writer in writers {
        if let Some(db) = writer.db {
            db.close()
                .await
                .unwrap_or_else(|e| panic!("{}: close: {e}", writer.name));
        }
    }
    for node in &mut nodes {
        if let Some(child) = &node.child {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        if let Some(mut child) = node.child.take() {
            let status = child.wait().unwrap();
            assert!(
                status.success(),
                "{} stopped with {status:?}\n{}",
                node.id,
                node.tail()
            );
        }
    }
}

/// One random disturbance: SIGKILL a running node (one always stays up),
/// restart a killed one, or cut one off from the store for a while.
async fn disturb(nodes: &mut [Node], chaos: &mut Chaos, root: &str, tally: &mut Tally) -> String {
    let running: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].running()).collect();
    let stopped: Vec<usize> = (0..nodes.len()).filter(|i| !running.contains(i)).collect();
    let mut choices = vec!["cut off"];
    if running.len() > 1 {
        choices.push("kill");
    }
    if !stopped.is_empty() {
        choices.push("restart");
    }
    match *chaos.pick(&choices) {
        "kill" => {
            let i = *chaos.pick(&running);
            nodes[i].kill();
            tally.kills += 1;
            format!("SIGKILL {}", nodes[i].id)
        }
        "restart" => {
            let i = *chaos.pick(&stopped);
            nodes[i].spawn(root);
            format!("restart {}", nodes[i].id)
        }
        _ => {
            let i = *chaos.pick(&running);
            let faults = nodes[i].proxy.faults.clone();
            let cut = Duration::from_millis(1000 + chaos.draw() % 3000);
            faults.cut_off(true);
            tokio::spawn(async move {
                tokio::time::sleep(cut).await;
                faults.cut_off(false);
            });
            tally.cut_offs += 1;
            format!("cut off {} for {cut:?}", nodes[i].id)
        }
    }
}

/// Whether a verify report's one problem is that no manifest is a
/// restore point yet.
fn only_lacks_a_first_restore_point(report: &serde_json::Value) -> bool {
    let problems = report["problems"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    report["restore_points"] == 0
        && problems.len() == 1
        && problems[0]
            .as_str()
            .is_some_and(|p| p.starts_with("no restore point"))
}

/// `mirror verify` passes on `copy` now, and its latest manifest becomes
/// a restore point: a pass cut off after committing support leaves that
/// the latest, and the next pass must commit a head above it (a head
/// committed without its closure never would).
async fn verify_until_a_head_is_latest(copy: &str, endpoint: &str, round: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let verified = cli(&["mirror", "verify", copy, "--format", "json"], endpoint);
        let stdout = String::from_utf8_lossy(&verified.stdout);
        let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "mirror verify --format json: {e}: {stdout}{}",
                String::from_utf8_lossy(&verified.stderr)
            )
        });
        // A first pass cut off mid-commit leaves only support: manifests
        // its head pins, whose own pins need not be there, and no restore
        // point yet. The next pass commits one; anything else fails now.
        if !verified.status.success() && only_lacks_a_first_restore_point(&report) {
            assert!(
                Instant::now() < deadline,
                "round {round}: {copy}: no restore point for a minute: {stdout}"
            );
            eprintln!("  {copy}: only support of a cut-off first pass; waiting");
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        assert!(
            verified.status.success(),
            "round {round}: mirror verify {copy}: {stdout}{}",
            String::from_utf8_lossy(&verified.stderr)
        );
        let latest = &report["latest_manifest"];
        if report["latest_restore_point"] == *latest {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "round {round}: {copy}: manifest {latest} stayed the latest without being a \
             restore point: {stdout}"
        );
        eprintln!("  {copy}: manifest {latest} is support left by a cut-off pass; waiting");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every node's last log lines, for a failure message.
fn node_tails(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|node| format!("--- {} ---\n{}", node.id, node.tail()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The checks after a round, with no faults: sources, mirror copies, a
/// restore, `mirror verify`.
async fn check_round(
    writers: &[Writer],
    endpoint: &str,
    prefix: &str,
    round: usize,
    tally: &mut Tally,
    nodes: &mut [Node],
) {
    let started = Instant::now();
    for writer in writers {
        let lost = missing(&writer.url, &writer.acked).await;
        tally.keys_checked += writer.acked.len();
        tally
            .lost
            .extend(lost.iter().map(|k| format!("{} source: {k}", writer.name)));
    }
    eprintln!(
        "  sources checked at {:.1}s",
        started.elapsed().as_secs_f64()
    );
    for target in ["live", "points"] {
        for writer in writers {
            let copy = format!("s3://sleet-mirror/{prefix}/{target}/{}", writer.name);
            // Whatever the copy holds has no hole in it, and it catches
            // up to every acknowledged key.
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                let found = match present_retrying(&copy, &writer.acked).await {
                    Ok(found) => found,
                    Err(e) if e.contains("does not open") => vec![false; writer.acked.len()],
                    Err(e) => panic!("round {round}: {e}"),
                };
                let holes = holes(&writer.acked, &found);
                tally.lost.extend(
                    holes
                        .iter()
                        .map(|k| format!("{} {target} hole: {k}", writer.name)),
                );
                let lacking = lacking(&writer.acked, &found);
                if lacking.is_empty() {
                    break;
                }
                for node in nodes.iter_mut() {
                    node.running();
                }
                assert!(
                    Instant::now() < deadline,
                    "round {round}: {copy} still lacks {} acknowledged keys (first {})\n{}",
                    lacking.len(),
                    lacking[0],
                    node_tails(nodes)
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            eprintln!(
                "  {copy}: caught up at {:.1}s",
                started.elapsed().as_secs_f64()
            );
            verify_until_a_head_is_latest(&copy, endpoint, round).await;
            tally.destinations_checked += 1;
            if target == "live" {
                open_every_manifest(writer, &copy, round, tally).await;
                eprintln!(
                    "  {copy}: every manifest opened at {:.1}s",
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
    // The periodic target's latest restore point, restored into a fresh
    // root, reads back every acknowledged key (one database a round).
    let writer = &writers[round % writers.len()];
    let backup = format!("s3://sleet-mirror/{prefix}/points/{}", writer.name);
    let restored = format!("s3://{BUCKET}/{prefix}/restored/{}-{round}", writer.name);
    let out = cli(&["mirror", "restore", &backup, &restored], endpoint);
    assert!(
        out.status.success(),
        "round {round}: restore {backup}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("  restored at {:.1}s", started.elapsed().as_secs_f64());
    let lost = missing(&restored, &writer.acked).await;
    tally.lost.extend(
        lost.iter()
            .map(|k| format!("{} restored: {k}", writer.name)),
    );
    tally.restores_checked += 1;
    restore_every_point(writer, &backup, prefix, endpoint, round, tally).await;
}

/// Every restore point of `backup` committed since the last look,
/// restored into a fresh root: each restores and holds no hole (every
/// acknowledged key up to the last it holds). Manifests that are only
/// another pass's closure support, or that retention pruned meanwhile,
/// are not restore points and are skipped.
async fn restore_every_point(
    writer: &Writer,
    backup: &str,
    prefix: &str,
    endpoint: &str,
    round: usize,
    tally: &mut Tally,
) {
    let ids: BTreeSet<u64> = crate::db::objects(backup, "manifest")
        .await
        .iter()
        .filter_map(|name| name.strip_suffix(".manifest")?.parse().ok())
        .collect();
    let latest = ids.last().copied();
    let checked = tally
        .restored_points
        .entry(writer.name.clone())
        .or_default();
    let fresh: Vec<u64> = ids.difference(checked).copied().collect();
    checked.extend(fresh.iter().copied());
    for id in fresh {
        let restored = format!("s3://{BUCKET}/{prefix}/restored/{}-m{id}", writer.name);
        let at = id.to_string();
        let out = cli(
            &["mirror", "restore", backup, &restored, "--at", &at],
            endpoint,
        );
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let not_a_point = (stderr.contains("is closure support, not a restore point")
                && Some(id) != latest)
                || stderr.contains("the backup has no manifest")
                || stderr.contains("vanished from the backup");
            assert!(
                not_a_point,
                "round {round}: restore {backup} at {id}: {stderr}"
            );
            continue;
        }
        let found = present_retrying(&restored, &writer.acked)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let next_wal = crate::db::next_wal_sst_id(&restored).await;
        tally
            .lost
            .extend(lost_at(writer, id, next_wal, &found, "restore point"));
        tally.restores_checked += 1;
    }
}

/// Every manifest of the continuous copy committed since the last look,
/// opened read-only in place (see `manifests.rs`): each opens, holds no
/// hole, and holds every key the source had flushed by that manifest.
pub async fn open_every_manifest(writer: &Writer, copy: &str, round: usize, tally: &mut Tally) {
    let (snapshot, opened) = tally.live_copies.entry(writer.name.clone()).or_default();
    snapshot
        .refresh(copy)
        .await
        .unwrap_or_else(|e| panic!("round {round}: {e}"));
    let fresh: Vec<u64> = snapshot
        .manifest_ids()
        .difference(opened)
        .copied()
        .collect();
    for id in fresh {
        let read = snapshot
            .read_at(id)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {copy}: {e}"));
        let found = found_in(copy, &read.held, &writer.acked);
        let what = format!(
            "live manifest (WAL window {:?}, lacking {:?})",
            read.window, read.lacking_wal
        );
        tally
            .lost
            .extend(lost_at(writer, id, read.next_wal, &found, &what));
        opened.insert(id);
        tally.manifests_opened += 1;
    }
}
