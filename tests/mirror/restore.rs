//! Periodic restore points, retention, and restore.

use sleet::CancellationToken;
use sleet::copier::CopyProgress;
use sleet::mirror::ops;
use sleet::mirror::restore::RestorePoint;

use crate::db;
use crate::harness::{Source, assert_verified, pause, target_toml};

async fn restore(backup: &str, dest: &str, at: RestorePoint) -> Result<u64, sleet::Error> {
    ops::restore_urls(
        backup,
        dest,
        at,
        CopyProgress::new(),
        &CancellationToken::new(),
    )
    .await
    .map(|r| r.manifest_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retention_prunes_old_restore_points_and_kept_ones_restore() {
    let dest_dir = tempfile::tempdir().unwrap();
    let backup = format!("file://{}/backup", dest_dir.path().display());
    let target = target_toml("nightly", &backup)
        + "mode = \"periodic\"\nmin_age = \"1s\"\n[database.mirror.targets.nightly.retention]\nkeep = \"3s\"\n";
    let mut source = Source::new(&target, 2).await;
    source.start_services();

    // An early restore point, then let it age past `keep`.
    let early = source.sync("nightly").await.unwrap();
    let early_rounds = source.rounds;
    let early_copy = format!("file://{}/early", dest_dir.path().display());
    assert_eq!(
        restore(&backup, &early_copy, RestorePoint::Manifest(early.head))
            .await
            .unwrap(),
        early.head
    );
    db::assert_reader_sees(&early_copy, 0..early_rounds).await;
    db::assert_reader_lacks(&early_copy, early_rounds).await;

    source.write(2).await;
    pause(3500).await;
    let mut last = None;
    let mut pruned = 0;
    for _ in 0..3 {
        source.write(1).await;
        let synced = source.sync("nightly").await.unwrap();
        pruned += synced.pruned_manifests;
        last = Some(synced);
        pause(300).await;
    }
    let last = last.unwrap();
    assert!(pruned > 0, "old manifests were pruned");
    assert_verified(&backup).await;

    // The aged-out point is gone; a kept one restores with its data.
    let gone = restore(
        &backup,
        &format!("file://{}/gone", dest_dir.path().display()),
        RestorePoint::Manifest(early.head),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        gone.contains(&format!("the backup has no manifest {}", early.head)),
        "{gone}"
    );
    let kept_copy = format!("file://{}/kept", dest_dir.path().display());
    assert_eq!(
        restore(&backup, &kept_copy, RestorePoint::Manifest(last.head))
            .await
            .unwrap(),
        last.head
    );
    db::assert_reader_sees(&kept_copy, 0..source.rounds).await;

    // By timestamp: now is the newest point; long ago predates the history.
    let now_copy = format!("file://{}/now", dest_dir.path().display());
    let at_now = restore(&backup, &now_copy, RestorePoint::Time(chrono::Utc::now()))
        .await
        .unwrap();
    assert!(at_now >= last.head, "{at_now} vs {}", last.head);
    db::assert_reader_sees(&now_copy, 0..source.rounds).await;
    let ancient = "2001-01-01T00:00:00Z".parse().unwrap();
    let err = restore(
        &backup,
        &format!("file://{}/ancient", dest_dir.path().display()),
        ancient,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("predates the backup's tracked history"),
        "{err}"
    );

    // A non-empty destination is refused before anything is written.
    let err = restore(&backup, &kept_copy, RestorePoint::Latest)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not empty; restore never deletes"), "{err}");
    source.stop().await;
}
