//! The node's mirror service: continuous and periodic targets running
//! beside GC and compaction, and bad targets contained to their own task.

use std::time::Duration;

use sleet::{NodeOptions, StatusOptions};

use crate::db;
use crate::harness::{Source, assert_verified, eventually, pause, target_toml};

/// Whether a fresh reader of `url` sees round `round`.
async fn has_round(url: &str, round: usize) -> bool {
    if db::objects(url, "manifest").await.is_empty() {
        return false;
    }
    let (store, path) = db::open_store(url);
    let Ok(reader) = slatedb::DbReader::open(
        path,
        store,
        slatedb::DbReaderMode::FollowLatest,
        slatedb::config::DbReaderOptions::default(),
    )
    .await
    else {
        return false;
    };
    let seen = reader
        .get(db::key(round, 31))
        .await
        .ok()
        .flatten()
        .is_some();
    let _ = reader.close().await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_mirrors_continuously_and_periodically_beside_its_other_work() {
    let dest_dir = tempfile::tempdir().unwrap();
    let live = format!("file://{}/live", dest_dir.path().display());
    let nightly = format!("file://{}/nightly", dest_dir.path().display());
    let targets = target_toml("live", &live)
        + "poll = \"200ms\"\n"
        + &target_toml("nightly", &nightly)
        + "mode = \"periodic\"\ninterval = \"2s\"\nmin_age = \"1s\"\n"
        + "[database.mirror.targets.nightly.retention]\nkeep = \"3s\"\n";
    let mut source = Source::new(&targets, 2).await;

    // Bad targets on other databases: a destination that is itself a
    // registered database, and one that cannot be written.
    // Each registry file is written before the registration, as an
    // operator would: registered bare, these databases would share the
    // fleet-wide targets' destinations, which `register` refuses.
    let register_with = |name: &'static str, body: String| {
        let url = source.data_url(name);
        let file = format!(
            "dbs/{}",
            sleet::model::registry::file_name(
                &sleet::model::registry::canonicalize_database_url(&url).unwrap()
            )
        );
        source.root.write(&file, &body);
        url
    };
    let victim = register_with("victim", "services = [\"gc\"]\n".into());
    let forked = register_with(
        "forked",
        format!(
            "[mirror.targets.live]\nurl = \"{}\"\n[mirror.targets.nightly]\ndisabled = true\n",
            victim
        ),
    );
    let unwritable = register_with(
        "unwritable",
        "[mirror.targets.live]\nurl = \"file:///proc/sleet-cannot-write-here\"\n[mirror.targets.nightly]\ndisabled = true\n".into(),
    );
    for url in [&victim, &forked, &unwritable] {
        db::seed(url, 1).await;
        source.fleet.register(url).await.unwrap();
    }

    source.start_node(NodeOptions::new("solo").with_max_mirror_jobs(2));

    // Continuous: each new round reaches the live copy, through passes and
    // the WAL tail, while GC and compaction run on the source.
    for _ in 0..3 {
        source.write(1).await;
        let round = source.rounds - 1;
        eventually(Duration::from_secs(30), "the live copy to catch up", || {
            has_round(&live, round)
        })
        .await;
    }
    assert_verified(&live).await;
    db::assert_reader_sees(&live, 0..source.rounds).await;

    // Periodic: restore points every 2s, pruned past 3s, always verifiable.
    eventually(Duration::from_secs(30), "a periodic restore point", || {
        has_round(&nightly, source.rounds - 1)
    })
    .await;
    pause(4000).await;
    source.write(1).await;
    eventually(Duration::from_secs(30), "the next restore point", || {
        has_round(&nightly, source.rounds - 1)
    })
    .await;
    assert_verified(&nightly).await;
    let points = db::objects(&nightly, "manifest").await.len();
    assert!(
        points <= 6,
        "retention pruned old restore points: {points} left"
    );

    // status --mirrors reads the lag of every applied target.
    let lagging = source
        .fleet
        .status(StatusOptions::default().with_mirrors(true))
        .await
        .unwrap();
    let live_lag = lagging
        .mirrors
        .iter()
        .find(|m| m.database == source.url && m.target == "live")
        .expect("the live target's lag");
    assert!(live_lag.error.is_none(), "{live_lag:?}");
    assert!(live_lag.dest_manifest_id.is_some() && live_lag.manifests_behind.is_some());
    assert!(
        lagging
            .warnings
            .iter()
            .any(|w| w.contains("is itself a registered database")),
        "{:?}",
        lagging.warnings
    );

    // The bad targets fail on their own, visibly, with clear messages.
    let status = source.fleet.status(StatusOptions::default()).await.unwrap();
    let warnings = status.warnings.join("\n");
    eprintln!("status warnings:\n{warnings}");
    assert!(
        warnings.contains("is itself a registered database"),
        "{warnings}"
    );
    assert!(warnings.contains("sleet-cannot-write-here"), "{warnings}");
    assert!(
        !db::objects(&victim, "manifest").await.is_empty() && has_round(&victim, 0).await,
        "the registered database was not touched by the mirror"
    );
    source.stop().await;
}
