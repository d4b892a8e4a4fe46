//! A fleet root with one source database, a node running its SlateDB
//! services, and mirror targets in `sleet.toml`.

use std::time::Duration;

use slatedb::Db;
use sleet::commands::mirror as ops;
use sleet::mirror::copier::{CopierOptions, CopyProgress};
use sleet::model::response::MirrorSyncResponse;
use sleet::{CancellationToken, Fleet, NodeOptions, Service};
use tokio::task::JoinHandle;

use crate::common::FileRoot;
use crate::db;

/// Fast source services: compaction and GC keep deleting what a pass
/// copies. Manifests are kept 10 s: on `file://` (no GC boundary files) a
/// shorter manifest `min_age` stalls SlateDB's compaction on its own (see
/// docs/reliability.md), and a stalled compaction blocks the writer.
const SERVICES: &str = r#"
[node]
heartbeat_interval = "200ms"
heartbeat_timeout = "2s"
config_poll = "400ms"

[database]
services = ["gc", "compactor-coordinator", "compaction-workers", "mirror"]

[database.gc.manifest]
interval = "300ms"
min_age = "10s"
[database.gc.wal]
interval = "300ms"
min_age = "1s"
[database.gc.compacted]
interval = "300ms"
min_age = "1s"
[database.gc.compactions]
interval = "300ms"
min_age = "1s"

[database.compactor-coordinator]
poll_interval = "100ms"
commit_compacted_interval = "100ms"
checkpoint_lifetime = "2s"
[database.compactor-coordinator.scheduler]
min_compaction_sources = 2

[database.compaction-workers]
compactions_poll_interval = "100ms"
heartbeat_interval = "500ms"
min_filter_keys = 0

"#;

/// [`SERVICES`] with fast idle looks.
pub fn fast_services() -> String {
    format!("{SERVICES}{}", crate::common::FAST_IDLE)
}

pub struct Source {
    pub root: FileRoot,
    pub data: tempfile::TempDir,
    pub fleet: Fleet,
    pub url: String,
    pub writer: Db,
    pub rounds: usize,
    node: Option<(CancellationToken, JoinHandle<Result<(), sleet::Error>>)>,
}

impl Source {
    /// A source database with `rounds` rounds written and a live writer,
    /// registered in a root whose `sleet.toml` is `fast_services()` + `targets`.
    pub async fn new(targets: &str, rounds: usize) -> Source {
        let root = FileRoot::new();
        root.write("sleet.toml", &format!("{}\n{targets}", fast_services()));
        let data = tempfile::tempdir().unwrap();
        let url = format!("file://{}/source", data.path().display());
        let writer = db::open_writer(&url).await;
        db::write_rounds(&writer, 0..rounds).await;
        let fleet = Fleet::open(&root.url()).unwrap();
        fleet.register(&url).await.unwrap();
        Source {
            root,
            data,
            fleet,
            url: sleet::model::registry::canonicalize_database_url(&url).unwrap(),
            writer,
            rounds,
            node: None,
        }
    }

    /// A URL under this test's data directory.
    pub fn data_url(&self, name: &str) -> String {
        format!("file://{}/{name}", self.data.path().display())
    }

    /// Starts a node running GC, the coordinator and workers (not mirror).
    pub fn start_services(&mut self) {
        self.start_node(NodeOptions::new("services").with_services([
            Service::Gc,
            Service::CompactorCoordinator,
            Service::CompactionWorkers,
        ]));
    }

    /// Starts a node with these options (one per source).
    pub fn start_node(&mut self, options: NodeOptions) {
        let token = CancellationToken::new();
        let fleet = self.fleet.clone();
        let child = token.clone();
        let handle = tokio::spawn(async move { fleet.run_node(options, child).await });
        self.node = Some((token, handle));
    }

    pub async fn write(&mut self, rounds: usize) {
        db::write_rounds(&self.writer, self.rounds..self.rounds + rounds).await;
        self.rounds += rounds;
    }

    pub async fn sync(&self, target: &str) -> Result<MirrorSyncResponse, sleet::Error> {
        self.sync_cancellable(target, &CancellationToken::new())
            .await
    }

    pub async fn sync_cancellable(
        &self,
        target: &str,
        cancel: &CancellationToken,
    ) -> Result<MirrorSyncResponse, sleet::Error> {
        ops::sync_once(
            self.fleet.root(),
            &self.url,
            target,
            &CopierOptions::default(),
            ops::Hooks::Ask,
            CopyProgress::new(),
            cancel,
        )
        .await
    }

    /// Stops the services node, leaving the writer open.
    pub async fn stop_services(&mut self) {
        if let Some((token, handle)) = self.node.take() {
            token.cancel();
            handle.await.unwrap().unwrap();
        }
    }

    pub async fn stop(mut self) {
        self.stop_services().await;
        self.writer.close().await.unwrap();
    }
}

/// The destination verifies clean.
pub async fn assert_verified(url: &str) {
    let report = ops::verify_url(url, CopyProgress::new())
        .await
        .expect("verify runs");
    assert!(report.problems.is_empty(), "{url}: {:#?}", report.problems);
    assert!(report.latest_manifest.is_some());
}

pub fn pause(ms: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(ms))
}

/// Polls `check` every 200ms until it is true, or panics after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "timed out after {limit:?}: {what}");
        pause(200).await;
    }
}

/// `sleet mirror restore` of `backup` at `at` into `dest`.
pub async fn restore(
    backup: &str,
    dest: &str,
    at: sleet::mirror::restore::RestorePoint,
) -> sleet::model::response::MirrorRestoreResponse {
    try_restore(backup, dest, at)
        .await
        .unwrap_or_else(|e| panic!("restore {at} of {backup}: {e}"))
}

/// [`restore`], its error returned.
pub async fn try_restore(
    backup: &str,
    dest: &str,
    at: sleet::mirror::restore::RestorePoint,
) -> Result<sleet::model::response::MirrorRestoreResponse, sleet::Error> {
    ops::restore_urls(
        backup,
        dest,
        at,
        false,
        CopyProgress::new(),
        &CancellationToken::new(),
    )
    .await
}

/// `[database.mirror.targets.<name>]` with `url` and extra lines.
pub fn target_toml(name: &str, url: &str) -> String {
    format!("[database.mirror.targets.{name}]\nurl = \"{url}\"\n")
}
