//! Sync passes under write load, compaction and GC.

use crate::db;
use crate::harness::{Source, assert_verified, pause};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_pass_leaves_a_readable_verified_copy_of_the_source() {
    let targets_dir = tempfile::tempdir().unwrap();
    let dest = format!("file://{}/dr", targets_dir.path().display());
    let mut source = Source::new(
        &format!("[database.mirror.targets.dr]\nurl = \"{dest}\"\n"),
        3,
    )
    .await;
    source.start_services();
    for pass in 0..4 {
        let synced = source.sync("dr").await.expect("a sync pass");
        assert!(synced.committed, "pass {pass}: {synced:?}");
        assert_verified(&dest).await;
        db::assert_reader_sees(&dest, 0..source.rounds).await;
        source.write(2).await;
        pause(700).await;
    }
    source.stop().await;
}
