//! The application: one SlateDB writer per database, writing as a user's
//! service would, and the ledger of what it was told.
//!
//! A writer puts a key every 1-3 s of simulated time and waits for SlateDB
//! to say it is durable (`put`, then the handle's `await_durable`: SlateDB
//! 0.18's `put` alone returns once the write is in memory). A
//! write acknowledged goes into the ledger with its value; a write that
//! failed or timed out leaves its key uncertain (either value may be read,
//! so it is never checked again). The ledger is the truth the invariants
//! hold the store to: the writer reads acknowledged keys back as it runs
//! and after every reopen, and a fresh `DbReader` reads every one at the
//! end (`acknowledged-write-lost`).
//!
//! Writers come in SlateDB's two shapes. A detached writer runs no
//! compactor and no collector: the fleet compacts for it. A writer on
//! SlateDB's defaults runs its own compactor and collector, which the fleet
//! must never fence (`default-writer-fenced`): once it has opened, no
//! compactor epoch may be taken over it while it stays open. Both flush
//! small L0 files, so compactions and compactor handovers happen within
//! minutes.
//!
//! A writer's crash (the `writer-crash` fault) stops its requests for good
//! (its store view stays paused, as a dead process's requests never come)
//! and the application reopens the database, fencing the old writer as a
//! restarted process would.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use slatedb::admin::{Admin, AdminBuilder};
use slatedb::config::Settings;
use slatedb::{Db, DbReader, ErrorKind};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::check::{DEFAULT_WRITER_FENCED, Violation, WRITE_LOST};
use super::clock::SimClock;
use super::store::{NodeStore, PauseGate, SimStore};
use super::trace::Trace;
use crate::fleet::database::derived_seed;
use crate::model::planted::{Planted, planted};
use crate::testing::Chaos;

/// How a database's writer is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterKind {
    /// No compactor or collector of its own: the fleet compacts.
    Detached,
    /// SlateDB's defaults: its own compactor and collector.
    Defaults,
}

impl WriterKind {
    fn name(self) -> &'static str {
        match self {
            WriterKind::Detached => "detached",
            WriterKind::Defaults => "defaults",
        }
    }
}

/// The longest a write may wait for durability before the application
/// gives up on it (its key then becomes uncertain).
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Keys per database: new writes take new keys, then overwrite old ones.
pub(super) const KEYS: u64 = 400;

/// The value of the application's write `number` (to key `k<number % KEYS>`).
fn written_value(key: &str, number: u64) -> Bytes {
    Bytes::from(format!("{key}={number}:{}", "v".repeat(64)))
}

/// The number of the application's write that `value` of `key` is, or
/// `None` if the application never wrote it there.
pub(super) fn write_number(key: &str, value: &str) -> Option<u64> {
    let (named, rest) = value.split_once('=')?;
    let (number, _) = rest.split_once(':')?;
    let number: u64 = number.parse().ok()?;
    let expected = format!("k{:04}", number % KEYS);
    (named == key && key == expected && written_value(key, number) == value.as_bytes())
        .then_some(number)
}

/// What the application was told, and what it found wrong.
#[derive(Debug, Default)]
struct Ledger {
    /// Keys whose last write was acknowledged durable, with its value.
    acked: BTreeMap<String, Bytes>,
    /// Keys whose last write failed or timed out: never checked again.
    uncertain: BTreeSet<String>,
    /// The number of every write acknowledged, in order.
    acked_writes: Vec<u64>,
    /// When each of `acked_writes` was acknowledged, on the sim's clock.
    acked_at: Vec<chrono::DateTime<chrono::Utc>>,
    violations: Vec<Violation>,
}

impl Ledger {
    /// The acknowledged keys `pick` keeps whose last write is certain,
    /// with the values they must read.
    fn certain(&self, pick: impl Fn(&str) -> bool) -> Vec<(String, Bytes)> {
        self.acked
            .iter()
            .filter(|(key, _)| pick(key) && !self.uncertain.contains(*key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    }
}

/// One database's application: its writer task and ledger.
pub struct App {
    pub url: String,
    path: Path,
    store: Arc<SimStore>,
    clock: SimClock,
    seed: u64,
    ledger: Arc<Mutex<Ledger>>,
    crash: Arc<Notify>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

/// What a writer task needs, shared by its every open.
struct Writer {
    url: String,
    path: Path,
    kind: WriterKind,
    store: Arc<SimStore>,
    clock: SimClock,
    trace: Arc<Trace>,
    chaos: Chaos,
    seed: u64,
    /// Writes every 0.5 to 1.5 s into 2 KiB L0 files (a swarm seed's
    /// busy writers: an L0 file about every 20 s, compactions and
    /// collections within minutes), else every 1 to 3 s into 4 KiB ones.
    busy: bool,
    opens: u64,
    ledger: Arc<Mutex<Ledger>>,
    crash: Arc<Notify>,
    /// Reads the manifest as the checker does (no faults), for the
    /// compactor epoch a writer on SlateDB's defaults must keep.
    checker: Admin,
}

impl App {
    /// Starts the application of the database at `url` (store path `path`),
    /// which creates it on its first open, with its writer's kind and
    /// whether it is busy.
    pub fn start(
        url: String,
        path: Path,
        (kind, busy): (WriterKind, bool),
        store: &Arc<SimStore>,
        clock: &SimClock,
        trace: &Arc<Trace>,
        seed: u64,
    ) -> App {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let crash = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let writer = Writer {
            url: url.clone(),
            path: path.clone(),
            kind,
            store: store.clone(),
            clock: clock.clone(),
            trace: trace.clone(),
            chaos: Chaos::with_seed(seed),
            seed,
            busy,
            opens: 0,
            ledger: ledger.clone(),
            crash: crash.clone(),
            checker: AdminBuilder::new(path.clone(), Arc::new(store.view("checker")))
                .with_seed(seed)
                .with_system_clock(clock.slatedb(0))
                .build(),
        };
        let token = stop.clone();
        let task = tokio::spawn(writer.run(token));
        App {
            url,
            path,
            store: store.clone(),
            clock: clock.clone(),
            seed,
            ledger,
            crash,
            stop,
            task: Some(task),
        }
    }

    /// The writer's process dies; the application reopens the database.
    pub fn crash(&self) {
        self.crash.notify_one();
    }

    /// Acknowledged writes so far.
    pub fn acknowledged(&self) -> usize {
        self.ledger.lock().expect("ledger lock").acked.len()
    }

    /// The numbers of the writes acknowledged so far, in order.
    pub fn acknowledged_writes(&self) -> Vec<u64> {
        self.ledger
            .lock()
            .expect("ledger lock")
            .acked_writes
            .clone()
    }

    /// The numbers of the writes acknowledged at or before `by`, in order.
    pub fn acknowledged_by(&self, by: chrono::DateTime<chrono::Utc>) -> Vec<u64> {
        let ledger = self.ledger.lock().expect("ledger lock");
        ledger
            .acked_writes
            .iter()
            .zip(&ledger.acked_at)
            .filter(|(_, at)| **at <= by)
            .map(|(write, _)| *write)
            .collect()
    }

    /// Closes the writer, then reads every acknowledged key with a fresh
    /// reader: the violations the application found as it ran and now.
    pub async fn finish(&mut self) -> Vec<Violation> {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(120), task).await;
        }
        let reader_store: Arc<dyn ObjectStore> =
            Arc::new(self.store.view(&format!("reader {}", self.url)));
        // Stream 0: a writer's opens take 1, 2, ...
        let opened = DbReader::builder(self.path.clone(), reader_store)
            .with_seed(derived_seed(self.seed, 0))
            .with_system_clock(self.clock.slatedb(0))
            .build()
            .await;
        let (mut violations, expected) = {
            let mut ledger = self.ledger.lock().expect("ledger lock");
            let violations = std::mem::take(&mut ledger.violations);
            (violations, ledger.certain(|_| true))
        };
        if expected.is_empty() {
            return violations;
        }
        let reader = match opened {
            Ok(reader) => reader,
            Err(e) => {
                violations.push(Violation {
                    name: WRITE_LOST,
                    detail: format!(
                        "a fresh reader of {} could not open it ({} acknowledged keys unread): {e}",
                        self.url,
                        expected.len()
                    ),
                });
                return violations;
            }
        };
        for (key, value) in expected {
            let read = reader.get(key.as_bytes()).await;
            if let Some(found) = lost(&key, &value, read) {
                violations.push(Violation {
                    name: WRITE_LOST,
                    detail: format!("a fresh reader of {}: {found}", self.url),
                });
                break;
            }
        }
        let _ = reader.close().await;
        violations
    }
}

/// Why a read of `key` does not show the acknowledged `value`, if it does not.
fn lost(key: &str, value: &Bytes, read: Result<Option<Bytes>, slatedb::Error>) -> Option<String> {
    match read {
        Ok(Some(found)) if found == *value => None,
        Ok(Some(found)) => Some(format!(
            "{key} reads {:?} where {:?} was acknowledged durable",
            String::from_utf8_lossy(&found),
            String::from_utf8_lossy(value)
        )),
        Ok(None) => Some(format!(
            "{key} is missing; {:?} was acknowledged durable",
            String::from_utf8_lossy(value)
        )),
        Err(e) => Some(format!("{key} cannot be read: {e}")),
    }
}

impl Writer {
    fn note(&self, event: impl AsRef<str>) {
        self.trace.record(
            self.clock.millis(),
            format!("app {} {}", self.url, event.as_ref()),
        );
    }

    fn violate(&self, name: &'static str, detail: String) {
        self.note(format!("violation {name}: {detail}"));
        self.ledger
            .lock()
            .expect("ledger lock")
            .violations
            .push(Violation { name, detail });
    }

    fn draw(&mut self, below: u64) -> u64 {
        self.chaos.draw() % below.max(1)
    }

    fn settings(&self) -> Settings {
        let mut settings = Settings {
            // Small L0 files, so a few minutes of writes compact.
            l0_sst_size_bytes: if self.busy { 2 * 1024 } else { 4 * 1024 },
            ..Settings::default()
        };
        if self.kind == WriterKind::Detached {
            settings.compactor_options = None;
            settings.garbage_collector_options = None;
        }
        settings
    }

    /// Opens the database with a new writer (fencing any before it) on a
    /// store view of its own, which a crash pauses for good.
    async fn open(&mut self) -> Result<(Db, Arc<PauseGate>), slatedb::Error> {
        self.opens += 1;
        let gate = Arc::new(PauseGate::default());
        let seed = derived_seed(self.seed, self.opens);
        let name = format!("app {}#{}", self.url, self.opens);
        let store: Arc<dyn ObjectStore> =
            Arc::new(NodeStore::for_node(&self.store, &name, seed, gate.clone()));
        let db = Db::builder(self.path.clone(), store)
            .with_settings(self.settings())
            .with_seed(seed)
            .with_system_clock(self.clock.slatedb(0))
            .build()
            .await?;
        Ok((db, gate))
    }

    /// The compactor epoch in the database's manifest, as the checker
    /// reads it (no faults).
    async fn compactor_epoch(&self) -> Option<u64> {
        match self.checker.read_manifest(None).await {
            Ok(Some(manifest)) => Some(manifest.compactor_epoch()),
            _ => None,
        }
    }

    /// Reads back the certain acknowledged keys `pick` keeps (all of them
    /// after a reopen, where a loss would show; a sample as it runs, as
    /// every read goes to the store and all of them every 20 writes made
    /// the run's cost grow with the square of its writes).
    async fn read_back(&self, db: &Db, when: &str, pick: impl Fn(&str) -> bool) -> bool {
        let expected = self.ledger.lock().expect("ledger lock").certain(pick);
        for (key, value) in expected {
            let read = tokio::time::timeout(WRITE_TIMEOUT, db.get(key.as_bytes())).await;
            let Ok(read) = read else {
                self.note(format!("read of {key} timed out {when}"));
                return true;
            };
            if matches!(&read, Err(e) if matches!(e.kind(), ErrorKind::Closed(_) | ErrorKind::Unavailable))
            {
                return true;
            }
            if let Some(found) = lost(&key, &value, read) {
                self.violate(
                    WRITE_LOST,
                    format!("the writer of {} {when}: {found}", self.url),
                );
                return false;
            }
        }
        true
    }

    async fn run(mut self, token: CancellationToken) {
        let mut written: u64 = 0;
        'opens: loop {
            let opened = tokio::select! {
                biased;
                _ = token.cancelled() => return,
                opened = tokio::time::timeout(WRITE_TIMEOUT, self.open()) => opened,
            };
            let (db, gate) = match opened {
                Ok(Ok(opened)) => opened,
                Ok(Err(e)) => {
                    self.note(format!("open failed: {e}"));
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    continue;
                }
                Err(_) => {
                    self.note("open timed out");
                    continue;
                }
            };
            let held = match self.kind {
                WriterKind::Defaults => self.compactor_epoch().await,
                WriterKind::Detached => None,
            };
            self.note(format!(
                "open #{} {} compactor epoch {held:?}",
                self.opens,
                self.kind.name()
            ));
            if !self
                .read_back(&db, &format!("after open #{}", self.opens), |_| true)
                .await
            {
                return;
            }
            loop {
                let wait = if self.busy {
                    Duration::from_millis(500 + self.draw(1_000))
                } else {
                    Duration::from_millis(1_000 + self.draw(2_000))
                };
                tokio::select! {
                    biased;
                    _ = token.cancelled() => {
                        let _ = tokio::time::timeout(Duration::from_secs(60), db.close()).await;
                        return;
                    }
                    _ = self.crash.notified() => {
                        gate.pause();
                        self.note(format!("crash #{}", self.opens));
                        drop(db);
                        tokio::time::sleep(Duration::from_millis(1_000 + self.draw(9_000))).await;
                        continue 'opens;
                    }
                    _ = tokio::time::sleep(wait) => {}
                }
                written += 1;
                let key = format!("k{:04}", written % KEYS);
                let value = written_value(&key, written);
                // `put` returns once the write is in memory; the
                // application is told it is durable only once SlateDB says
                // so (SlateDB 0.18's `WriteHandle::await_durable`).
                let durable = async {
                    let handle = db.put(key.as_bytes(), &value).await?;
                    if planted(Planted::WriterAcksBeforeDurable) {
                        return Ok(());
                    }
                    handle.await_durable().await
                };
                let put = tokio::time::timeout(WRITE_TIMEOUT, durable).await;
                let closed = {
                    let mut ledger = self.ledger.lock().expect("ledger lock");
                    match &put {
                        Ok(Ok(_)) => {
                            ledger.acked.insert(key.clone(), value.clone());
                            ledger.acked_writes.push(written);
                            ledger.acked_at.push(self.clock.now());
                            None
                        }
                        Ok(Err(e)) => {
                            ledger.uncertain.insert(key.clone());
                            match e.kind() {
                                ErrorKind::Closed(reason) => Some(reason),
                                _ => None,
                            }
                        }
                        Err(_) => {
                            ledger.uncertain.insert(key.clone());
                            None
                        }
                    }
                };
                match &put {
                    Ok(Ok(_)) => self.note(format!("put {key} #{written} durable")),
                    Ok(Err(e)) => self.note(format!("put {key} #{written} failed: {e}")),
                    Err(_) => self.note(format!("put {key} #{written} timed out")),
                }
                let judge = closed.is_some() || written.is_multiple_of(10);
                if judge && let Some(held) = held {
                    let now = self.compactor_epoch().await;
                    if let Some(now) = now.filter(|now| *now > held) {
                        self.violate(
                            DEFAULT_WRITER_FENCED,
                            format!(
                                "{}'s writer on SlateDB's defaults (open #{}) held compactor \
                                 epoch {held} and something took epoch {now} over it while it \
                                 was open",
                                self.url, self.opens
                            ),
                        );
                        return;
                    }
                }
                if closed.is_some() {
                    self.note(format!("closed ({closed:?}); reopening"));
                    gate.pause();
                    drop(db);
                    continue 'opens;
                }
                // The last 20 keys written and one in 16 of the rest,
                // a different sixteenth each time.
                let recent = written.saturating_sub(20);
                let phase = (written / 20) % 16;
                let sample = |key: &str| {
                    let n: u64 = key[1..].parse().unwrap_or(0);
                    let last = written - (written + KEYS - n) % KEYS;
                    last > recent || n % 16 == phase
                };
                if written.is_multiple_of(20) && !self.read_back(&db, "as it ran", sample).await {
                    return;
                }
            }
        }
    }
}
