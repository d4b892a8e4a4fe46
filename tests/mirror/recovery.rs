//! Restore points at WAL granularity: a quiet writer's acknowledged writes
//! live in its WAL until a 64 MiB memtable fills, and a restore must bring
//! back every one the mirror copied, by the latest point or by a time.

use std::time::Duration;

use chrono::{DateTime, Utc};
use slatedb::Db;
use slatedb::config::{FlushOptions, FlushType};
use sleet::commands::mirror as ops;
use sleet::mirror::copier::{CopierOptions, CopyProgress};
use sleet::mirror::restore::RestorePoint;
use sleet::{CancellationToken, Fleet, NodeOptions, Service};

use crate::common::FileRoot;
use crate::db;
use crate::harness::{eventually, restore, target_toml};

/// A registered database whose writer runs SlateDB's defaults but for the
/// compactor and collector (the fleet's): its writes stay in the WAL.
struct QuietSource {
    root: FileRoot,
    data: tempfile::TempDir,
    fleet: Fleet,
    url: String,
    writer: Db,
    written: usize,
    node: Option<(
        CancellationToken,
        tokio::task::JoinHandle<Result<(), sleet::Error>>,
    )>,
}

impl QuietSource {
    async fn new(targets: &str) -> QuietSource {
        Self::with_config(&format!(
            "[node]\nheartbeat_interval = \"200ms\"\n\n{targets}"
        ))
        .await
    }

    /// A quiet source whose fleet's `sleet.toml` is `config`.
    async fn with_config(config: &str) -> QuietSource {
        let root = FileRoot::new();
        root.write("sleet.toml", config);
        let data = tempfile::tempdir().unwrap();
        let url = format!("file://{}/source", data.path().display());
        let (store, path) = db::open_store(&url);
        let writer = Db::builder(path, store)
            .with_settings(sleet::commands::demo::served_writer_settings())
            .build()
            .await
            .expect("a SlateDB writer");
        let fleet = Fleet::open(&root.url()).unwrap();
        fleet.register(&url).await.unwrap();
        QuietSource {
            root,
            data,
            fleet,
            url: sleet::model::registry::canonicalize_database_url(&url).unwrap(),
            writer,
            written: 0,
            node: None,
        }
    }

    fn url_of(&self, name: &str) -> String {
        format!("file://{}/{name}", self.data.path().display())
    }

    /// Writes `count` keys and returns once SlateDB says they are durable
    /// (in a WAL object), not flushed into an SST.
    async fn write(&mut self, count: usize) -> DateTime<Utc> {
        // `put` returns once the write is in memory; the WAL flush makes
        // every one durable.
        for _ in 0..count {
            let i = self.written;
            self.writer.put(key(i), value(i)).await.expect("put");
            self.written += 1;
        }
        self.writer
            .flush_with_options(FlushOptions {
                flush_type: FlushType::Wal,
            })
            .await
            .expect("WAL flush");
        Utc::now()
    }

    /// One `sleet mirror sync` of `target` now.
    async fn sync(&self, target: &str) -> sleet::model::response::MirrorSyncResponse {
        ops::sync_once(
            self.fleet.root(),
            &self.url,
            target,
            &CopierOptions::default(),
            ops::Hooks::Ask,
            CopyProgress::new(),
            &CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("sync {target}: {e}"))
    }

    fn start_mirror_node(&mut self) {
        self.start_node(&[Service::Mirror]);
    }

    fn start_node(&mut self, services: &[Service]) {
        let token = CancellationToken::new();
        let fleet = self.fleet.clone();
        let child = token.clone();
        let options = NodeOptions::new("node").with_services(services.iter().copied());
        let handle = tokio::spawn(async move { fleet.run_node(options, child).await });
        self.node = Some((token, handle));
    }

    async fn stop_node(&mut self) {
        if let Some((token, handle)) = self.node.take() {
            token.cancel();
            handle.await.unwrap().unwrap();
        }
    }

    async fn stop(mut self) {
        self.stop_node().await;
        self.writer.close().await.unwrap();
        drop(self.root);
    }
}

fn key(i: usize) -> String {
    format!("quiet-{i:05}")
}

fn value(i: usize) -> Vec<u8> {
    format!("{i}:").repeat(32).into_bytes()
}

/// How many of keys `0..count` a fresh reader of `url` finds, and the
/// first it misses.
async fn found(url: &str, count: usize) -> (usize, Option<usize>) {
    let reader = db::open_reader(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let mut seen = 0;
    let mut first_missing = None;
    for i in 0..count {
        match reader.get(key(i)).await.expect("get") {
            Some(v) => {
                assert_eq!(v.as_ref(), value(i).as_slice(), "{url}: {}", key(i));
                seen += 1;
            }
            None => {
                first_missing.get_or_insert(i);
            }
        }
    }
    reader.close().await.unwrap();
    (seen, first_missing)
}

/// The source's newest WAL id.
async fn newest_wal(url: &str) -> u64 {
    wal_ids(url).await.last().copied().unwrap_or(0)
}

/// The WAL ids a root holds.
async fn wal_ids(url: &str) -> std::collections::BTreeSet<u64> {
    db::objects(url, "wal")
        .await
        .iter()
        .filter_map(|f| f.strip_suffix(".sst")?.parse().ok())
        .collect()
}

/// A continuous mirror of a quiet writer: every restore brings back every
/// write acknowledged before the tail's last copy, by the latest restore
/// point with its WAL run. The control: the same restore point without
/// its run (the manifest alone, which is what every restore brought back
/// before) lacks them, so the assertion would catch a restore dropping it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restore_holds_every_write_the_wal_tail_copied() {
    let dest_dir = tempfile::tempdir().unwrap();
    let backup = format!("file://{}/live", dest_dir.path().display());
    let mut source = QuietSource::new(&(target_toml("live", &backup) + "poll = \"200ms\"\n")).await;
    source.start_mirror_node();
    for _ in 0..3 {
        source.write(50).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let published = newest_wal(&source.url).await;
    eventually(
        Duration::from_secs(20),
        "the tail copies the WAL",
        || async { newest_wal(&backup).await >= published },
    )
    .await;
    // Status: the newest restorable write is the source's newest.
    let status = source
        .fleet
        .status(sleet::StatusOptions::default().with_mirrors(true))
        .await
        .unwrap();
    let row = status
        .mirrors
        .iter()
        .find(|m| m.target == "live")
        .expect("a row");
    assert_eq!(row.recovery_point_seconds, Some(0.0), "{row:?}");
    // Verify sees the run and dates its end.
    let report = ops::verify_url(&backup, CopyProgress::new()).await.unwrap();
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    assert!(
        report.wal_end.is_some_and(|end| end >= published),
        "{report:?}"
    );
    assert!(report.newest_restorable_write.is_some(), "{report:?}");

    let copy = format!("file://{}/restored", dest_dir.path().display());
    let restored = restore(&backup, &copy, RestorePoint::Latest).await;
    assert!(restored.wal_end >= published, "{restored:?}");
    assert!(restored.newest_write.is_some(), "{restored:?}");
    assert_eq!(
        found(&copy, 150).await,
        (150, None),
        "every acknowledged write"
    );

    let bare = format!("file://{}/manifest-only", dest_dir.path().display());
    restore(&backup, &bare, RestorePoint::Manifest(restored.manifest_id)).await;
    let (seen, _) = found(&bare, 150).await;
    assert!(
        seen < 150,
        "control: the manifest alone holds {seen} of 150 writes"
    );
    source.stop().await;
}

/// A periodic pass takes the WAL present when it starts: its restore
/// point holds every write acknowledged before the pass began, though no
/// memtable flush wrote them into an SST.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_periodic_restore_point_holds_every_write_acknowledged_before_its_pass() {
    let dest_dir = tempfile::tempdir().unwrap();
    let backup = format!("file://{}/nightly", dest_dir.path().display());
    let target = target_toml("nightly", &backup) + "mode = \"periodic\"\n";
    let mut source = QuietSource::new(&target).await;
    source.write(120).await;
    let synced = source.sync("nightly").await;
    assert!(synced.committed, "{synced:?}");
    let copy = source.url_of("restored");
    restore(&backup, &copy, RestorePoint::Latest).await;
    assert_eq!(found(&copy, 120).await, (120, None));

    // Caught up on manifests, a later pass still brings the new WAL.
    source.write(30).await;
    source.sync("nightly").await;
    let again = source.url_of("restored-again");
    restore(&backup, &again, RestorePoint::Latest).await;
    assert_eq!(found(&again, 150).await, (150, None));
    source.stop().await;
}

/// `--at <time>` restores the writes acknowledged by that time: three
/// batches a second and a half apart, each restored alone by a time
/// between them (the WAL objects' source times, recorded by the pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restore_by_time_holds_exactly_the_writes_acknowledged_by_then() {
    let dest_dir = tempfile::tempdir().unwrap();
    let backup = format!("file://{}/nightly", dest_dir.path().display());
    let target = target_toml("nightly", &backup) + "mode = \"periodic\"\n";
    let mut source = QuietSource::new(&target).await;
    let gap = Duration::from_millis(1500);
    let mut acked = Vec::new();
    for _ in 0..3 {
        acked.push(source.write(40).await);
        tokio::time::sleep(gap).await;
    }
    source.sync("nightly").await;
    for (batch, at) in acked.iter().enumerate() {
        let between = *at + chrono::Duration::milliseconds(700);
        let copy = source.url_of(&format!("at-{batch}"));
        let restored = restore(&backup, &copy, RestorePoint::Time(between)).await;
        let holds = (batch + 1) * 40;
        assert_eq!(
            found(&copy, 120).await,
            (holds, (holds < 120).then_some(holds)),
            "restored at {between} ({restored:?})"
        );
    }

    // A destination written before the records (sleet 0.1's, or a tail
    // that stopped before it wrote them) still restores and verifies:
    // its WAL is dated by the copies, never earlier than the source, so
    // a restore by time keeps no write made after the time.
    let records = dest_dir.path().join("nightly/sleet-wal-times");
    assert!(records.is_dir(), "the pass recorded source times");
    std::fs::remove_dir_all(&records).unwrap();
    let report = ops::verify_url(&backup, CopyProgress::new()).await.unwrap();
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    let copy = source.url_of("at-without-records");
    restore(
        &backup,
        &copy,
        RestorePoint::Time(acked[0] + chrono::Duration::milliseconds(700)),
    )
    .await;
    let (held, _) = found(&copy, 120).await;
    assert!(
        held <= 40,
        "{held} writes, of which only 40 were acknowledged by then"
    );
    let latest = source.url_of("latest-without-records");
    restore(&backup, &latest, RestorePoint::Latest).await;
    assert_eq!(found(&latest, 120).await, (120, None));
    source.stop().await;
}

/// While a continuous mirror is away, the fleet's GC holds the WAL it has
/// not copied (here: WAL a memtable flush made history, past a 1 s
/// `min_age`), and the tail copies it when the mirror is back; then GC
/// collects it. The same GC deleting the same objects once the mirror
/// holds them is the control: it is the hold that kept them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fleets_gc_holds_the_wal_a_mirror_away_has_not_copied() {
    let dest_dir = tempfile::tempdir().unwrap();
    let backup = format!("file://{}/live", dest_dir.path().display());
    let config = format!(
        "{}\n{}poll = \"200ms\"\n",
        crate::harness::fast_services(),
        target_toml("live", &backup)
    );
    let mut source = QuietSource::with_config(&config).await;
    source.start_node(&[Service::Gc, Service::Mirror]);
    source.write(20).await;
    let published = newest_wal(&source.url).await;
    eventually(
        Duration::from_secs(20),
        "the tail copies the WAL",
        || async { newest_wal(&backup).await >= published },
    )
    .await;

    // The mirror is away; the fleet's GC goes on.
    source.stop_node().await;
    source.start_node(&[Service::Gc]);
    source.write(30).await;
    let away: Vec<u64> = wal_ids(&source.url)
        .await
        .into_iter()
        .filter(|id| *id > published)
        .collect();
    assert!(!away.is_empty());
    // More WAL, then a memtable flush: SlateDB keeps the WAL from the
    // replay point on, so the replay point must lie past `away`.
    source.write(10).await;
    source
        .writer
        .flush_with_options(FlushOptions {
            flush_type: FlushType::MemTable,
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let at_source = wal_ids(&source.url).await;
    assert!(
        away.iter().all(|id| at_source.contains(id)),
        "GC held {away:?} for the mirror: the source has {at_source:?}"
    );

    // Back: the tail copies what was held, and GC lets it go.
    source.stop_node().await;
    source.start_node(&[Service::Gc, Service::Mirror]);
    let start = std::time::Instant::now();
    loop {
        let copied = wal_ids(&backup).await;
        if away.iter().all(|id| copied.contains(id)) {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            panic!(
                "away {away:?}; backup {copied:?}; source {:?}",
                wal_ids(&source.url).await
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A change wakes the idle GC, which now lets the copied WAL go.
    source.write(5).await;
    source
        .writer
        .flush_with_options(FlushOptions {
            flush_type: FlushType::MemTable,
        })
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "GC collects the copied WAL",
        || async {
            let at_source = wal_ids(&source.url).await;
            !at_source.contains(&away[0])
        },
    )
    .await;
    let copy = source.url_of("restored");
    restore(&backup, &copy, RestorePoint::Latest).await;
    assert_eq!(found(&copy, 65).await, (65, None));
    source.stop().await;
}
