//! Periodic restore points, retention, and restore.

use sleet::CancellationToken;
use sleet::commands::mirror as ops;
use sleet::mirror::copier::CopyProgress;
use sleet::mirror::restore::RestorePoint;

use crate::db;
use crate::harness::{Source, assert_verified, pause, target_toml};

async fn restore(backup: &str, dest: &str, at: RestorePoint) -> Result<u64, sleet::Error> {
    crate::harness::try_restore(backup, dest, at)
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

/// A destination damaged behind sleet's back (an SST deleted, another
/// replaced by a truncated copy): `mirror verify` names both, restore
/// refuses the broken point (and restores it anyway when forced), and the
/// next pass finds the damage and copies the objects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_damaged_destination_is_named_refused_and_repaired() {
    let dest_dir = tempfile::tempdir().unwrap();
    let backup = format!("file://{}/backup", dest_dir.path().display());
    let source = Source::new(&target_toml("dr", &backup), 3).await;
    let synced = source.sync("dr").await.unwrap();
    assert_verified(&backup).await;

    let ssts: Vec<String> = db::objects(&backup, "compacted")
        .await
        .into_iter()
        .collect();
    assert!(ssts.len() >= 2, "{ssts:?}");
    let on_disk = |name: &str| dest_dir.path().join("backup/compacted").join(name);
    std::fs::remove_file(on_disk(&ssts[0])).unwrap();
    // A new, shorter file (the builtin copier hard-links on one
    // filesystem, so truncating in place would shorten the source too).
    let whole = std::fs::read(on_disk(&ssts[1])).unwrap();
    std::fs::remove_file(on_disk(&ssts[1])).unwrap();
    std::fs::write(on_disk(&ssts[1]), &whole[..whole.len() / 2]).unwrap();

    let report = ops::verify_url(&backup, sleet::mirror::copier::CopyProgress::new())
        .await
        .unwrap();
    let problems = report.problems.join("\n");
    assert!(
        problems.contains(&format!("compacted/{} is missing", ssts[0])),
        "{problems}"
    );
    assert!(
        problems.contains(&format!(
            "compacted/{} is {} bytes, shorter",
            ssts[1],
            whole.len() / 2
        )),
        "{problems}"
    );
    let refused = restore(
        &backup,
        &format!("file://{}/refused", dest_dir.path().display()),
        RestorePoint::Latest,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains(&format!("restore point {} is broken", synced.head)),
        "{refused}"
    );
    assert!(refused.contains("--force"), "{refused}");
    let forced = ops::restore_urls(
        &backup,
        &format!("file://{}/forced", dest_dir.path().display()),
        RestorePoint::Latest,
        true,
        CopyProgress::new(),
        &CancellationToken::new(),
    )
    .await;
    assert!(forced.is_ok(), "--force restores what is there: {forced:?}");

    // The next pass (nothing new at the source) re-checks and repairs.
    source.sync("dr").await.unwrap();
    assert_verified(&backup).await;
    assert_eq!(std::fs::read(on_disk(&ssts[1])).unwrap(), whole);
    let repaired = format!("file://{}/repaired", dest_dir.path().display());
    restore(&backup, &repaired, RestorePoint::Latest)
        .await
        .unwrap();
    db::assert_reader_sees(&repaired, 0..3).await;
    source.stop().await;
}

/// Retention may take the restore point a restore chose before the
/// restore copies it (a newer point was committed, the chosen one aged
/// out; the simulator's seam found it, "manifest 2 vanished during the
/// restore"). A restore of the newest point then chooses again; before,
/// it failed, with the destination half written. The restore is held
/// between its choice and its copy (`model::seams`, on its own thread)
/// while the newest point is deleted, as a prune would.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restore_whose_point_is_pruned_before_the_copy_chooses_again() {
    let dest_dir = tempfile::tempdir().unwrap();
    let backup = format!("file://{}/backup", dest_dir.path().display());
    let target = target_toml("nightly", &backup) + "mode = \"periodic\"\nmin_age = \"1s\"\n";
    let mut source = Source::new(&target, 2).await;
    source.start_services();
    let older = source.sync("nightly").await.unwrap();
    source.write(2).await;
    let newer = source.sync("nightly").await.unwrap();
    assert!(newer.head > older.head, "two restore points");
    let chosen = dest_dir
        .path()
        .join(format!("backup/manifest/{:020}.manifest", newer.head));
    assert!(chosen.exists(), "{}", chosen.display());

    let copy = format!("file://{}/copy", dest_dir.path().display());
    let (backup_url, copy_url) = (backup.clone(), copy.clone());
    let restored = std::thread::spawn(move || {
        let mut held = false;
        let _hook = sleet::model::seams::install(Box::new(move |seam| {
            if seam == sleet::model::seams::Seam::BetweenRestorePointAndCopy && !held {
                held = true;
                return std::time::Duration::from_millis(800);
            }
            std::time::Duration::ZERO
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let prune = async {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                std::fs::remove_file(&chosen).unwrap();
            };
            let (restored, ()) =
                tokio::join!(restore(&backup_url, &copy_url, RestorePoint::Latest), prune);
            restored
        })
    })
    .join()
    .unwrap();
    let id = restored.expect("the restore chooses again");
    assert!(
        (older.head..newer.head).contains(&id),
        "restored {id}: the newest point left is at or after {} and before {}",
        older.head,
        newer.head
    );
    db::assert_reader_sees(&copy, 0..2).await;
}
