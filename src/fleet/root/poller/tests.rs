use super::*;
use crate::fleet::root::tests::{memory_root, put};
use crate::model::service::Service;
use crate::testing::{CountingStore, Op};
use object_store::memory::InMemory;

#[tokio::test]
async fn registry_files_resolve_with_alias_warnings() {
    let root = memory_root();
    put(&root, "dbs/s3%3A%2F%2Fb%2Fempty.toml", "").await;
    put(&root, "dbs/S3%3A%2F%2Fb%2Fempty.toml", "").await;
    put(&root, "dbs/s3%3A%2F%2Fb%2Fgc.toml", "services = [\"gc\"]").await;
    put(&root, "dbs/s3%3A%2F%2Fb%2Fbroken.toml", "services = 3").await;
    put(&root, "dbs/README.md", "hello").await;
    let view = ConfigPoller::new().poll(&root).await;
    let urls: Vec<_> = view.databases.keys().cloned().collect();
    assert_eq!(urls, ["s3://b/broken", "s3://b/empty", "s3://b/gc"]);
    assert_eq!(
        view.databases["s3://b/gc"].services,
        Some(vec![Service::Gc])
    );
    assert_eq!(
        view.databases["s3://b/broken"].services,
        Some(vec![]),
        "disabled"
    );
    let mut warnings = view.warnings.clone();
    warnings.sort();
    assert_eq!(warnings.len(), 4, "{warnings:#?}");
    assert!(warnings[0].starts_with("ignoring non-registry object dbs/README.md"));
    assert!(warnings[1].starts_with(
        "invalid registry entry dbs/s3%3A%2F%2Fb%2Fbroken.toml: failed to parse config: line 1"
    ));
    assert!(warnings[1].ends_with("; database disabled"));
    assert_eq!(
        warnings[2],
        "registry entries dbs/s3%3A%2F%2Fb%2Fempty.toml and dbs/S3%3A%2F%2Fb%2Fempty.toml alias s3://b/empty; using dbs/s3%3A%2F%2Fb%2Fempty.toml"
    );
    assert_eq!(
        warnings[3],
        "registry entry dbs/S3%3A%2F%2Fb%2Fempty.toml is not canonical (decodes to \"S3://b/empty\", canonical \"s3://b/empty\")"
    );
}

#[tokio::test]
async fn last_good_versions_survive_breakage() {
    let root = memory_root();
    put(&root, "sleet.toml", "[node]\nconfig_poll = \"5s\"").await;
    put(&root, "dbs/s3%3A%2F%2Fb%2Fdb.toml", "services = [\"gc\"]").await;
    let mut poller = ConfigPoller::new();
    let first = poller.poll(&root).await;
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);

    put(&root, "sleet.toml", "[node]\nconfig_poll = 5").await;
    put(&root, "dbs/s3%3A%2F%2Fb%2Fdb.toml", "services = [\"gc\"").await;
    let second = poller.poll(&root).await;
    assert_eq!(
        second.fleet, first.fleet,
        "bad sleet.toml keeps the last good"
    );
    assert_eq!(
        second.databases, first.databases,
        "bad file keeps its last good"
    );
    assert_eq!(second.warnings.len(), 2, "{:?}", second.warnings);
    assert!(second.warnings.iter().any(|w| {
        w.starts_with("invalid memory:///fleet/sleet.toml: failed to parse config: line 2")
            && w.ends_with("; keeping last good config")
    }));
    assert!(
        second
            .warnings
            .iter()
            .any(|w| w.ends_with("; keeping last good")
                && w.starts_with("invalid registry entry dbs/s3%3A%2F%2Fb%2Fdb.toml"))
    );
}

/// Configs are shared, not copied per database: every empty registry
/// file is one allocation, and a file unchanged since the last poll
/// keeps its config (at 100,000 databases, three deep copies each
/// were most of a node's memory).
#[tokio::test]
async fn unchanged_and_empty_registry_files_share_one_config() {
    let root = memory_root();
    for db in ["s3://b/a", "s3://b/b"] {
        root.register(db).await.unwrap();
    }
    let file = root.register("s3://b/c").await.unwrap().file;
    put(&root, &file, "services = [\"gc\"]").await;
    let mut poller = ConfigPoller::new();
    let first = poller.poll(&root).await;
    let second = poller.poll(&root).await;
    let [a, b, c] = ["s3://b/a", "s3://b/b", "s3://b/c"].map(|db| &first.databases[db]);
    assert!(Arc::ptr_eq(a, b), "empty files share the defaults");
    assert!(Arc::ptr_eq(c, &second.databases["s3://b/c"]), "unchanged");
    assert!(Arc::ptr_eq(a, &second.databases["s3://b/a"]));
}

#[tokio::test]
async fn an_empty_file_is_a_last_good_version() {
    let root = memory_root();
    let file = root.register("s3://b/db").await.unwrap().file;
    let mut poller = ConfigPoller::new();
    assert_eq!(
        *poller.poll(&root).await.databases["s3://b/db"],
        DatabaseConfig::default()
    );
    put(&root, &file, "services = 7").await;
    let view = poller.poll(&root).await;
    assert_eq!(
        *view.databases["s3://b/db"],
        DatabaseConfig::default(),
        "not disabled"
    );
    assert!(
        view.warnings[0].ends_with("; keeping last good"),
        "{:?}",
        view.warnings
    );
}

#[tokio::test]
async fn a_fleet_change_rechecks_cached_files() {
    let root = memory_root();
    put(
        &root,
        "dbs/s3%3A%2F%2Fb%2Fdb.toml",
        "[compactor-coordinator.scheduler]\nmax_compaction_sources = 4",
    )
    .await;
    let mut poller = ConfigPoller::new();
    assert!(poller.poll(&root).await.warnings.is_empty());
    put(
        &root,
        "sleet.toml",
        "[database.compactor-coordinator.scheduler]\nmin_compaction_sources = 6",
    )
    .await;
    let view = poller.poll(&root).await;
    assert_eq!(view.warnings.len(), 1, "{:?}", view.warnings);
    assert!(view.warnings[0].contains("exceeds max_compaction_sources"));
}

#[tokio::test]
async fn a_listing_seen_before_is_not_decoded_again_unless_a_file_failed_to_read() {
    let faults = crate::testing::Faults::new();
    let store = crate::testing::FaultyStore::new(Arc::new(InMemory::new()), faults.clone());
    let root = FleetRoot::from_parts("memory:///f".into(), Arc::new(store), Path::from("f"));
    put(&root, "dbs/s3%3A%2F%2Fb%2Fempty.toml", "").await;
    put(&root, "dbs/s3%3A%2F%2Fb%2Fdb.toml", "services = [\"gc\"]").await;
    put(&root, "dbs/notes.txt", "").await;
    let mut poller = ConfigPoller::new();
    // GET sleet.toml, LIST dbs/, then the GET of db.toml fails.
    faults.fail_one(2, false);
    let failed = poller.poll(&root).await;
    assert_eq!(failed.databases["s3://b/db"].services, Some(vec![]));
    assert_eq!(poller.decoded, 1);

    let read = poller.poll(&root).await;
    assert_eq!(
        poller.decoded, 2,
        "a file failed: the same listing is read again"
    );
    assert_eq!(
        read.databases["s3://b/db"].services,
        Some(vec![Service::Gc])
    );

    let settled = poller.poll(&root).await;
    assert_eq!(
        poller.decoded, 2,
        "the same listing, every file read: not decoded"
    );
    assert!(Arc::ptr_eq(&read.databases, &settled.databases));
    assert_eq!(settled, read);
    assert!(
        settled.warnings.iter().any(|w| w.contains("dbs/notes.txt")),
        "{:?}",
        settled.warnings
    );

    put(&root, "dbs/s3%3A%2F%2Fb%2Fdb.toml", "services = []").await;
    let changed = poller.poll(&root).await;
    assert_eq!(poller.decoded, 3, "a changed file is a changed listing");
    assert_eq!(changed.databases["s3://b/db"].services, Some(vec![]));
}

#[tokio::test]
async fn poller_never_refetches_unchanged_bodies() {
    let counted = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let root = FleetRoot::from_parts("memory:///f".into(), counted.clone(), Path::from("f"));
    put(&root, "sleet.toml", "[node]\nconfig_poll = \"5s\"").await;
    put(&root, "dbs/s3%3A%2F%2Fb%2Fempty.toml", "").await;
    put(&root, "dbs/s3%3A%2F%2Fb%2Fdb.toml", "services = [\"gc\"]").await;
    let mut poller = ConfigPoller::new();
    poller.poll(&root).await;
    assert_eq!(counted.count(Op::Get), 2, "config + one non-empty file");
    poller.poll(&root).await;
    assert_eq!(counted.count(Op::Get), 3, "config only");
    put(&root, "dbs/s3%3A%2F%2Fb%2Fdb.toml", "services = []").await;
    let view = poller.poll(&root).await;
    assert_eq!(counted.count(Op::Get), 5, "config + the changed file");
    assert_eq!(view.databases["s3://b/db"].services, Some(vec![]));
    assert_eq!(counted.count(Op::List), 3, "one LIST of dbs/ per poll");
}
