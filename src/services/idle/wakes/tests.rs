use super::*;

fn marker(node: &str, db: &str, modified_secs: i64) -> Marker {
    Marker {
        node_id: node.into(),
        database: db.into(),
        tell: Tell::Workers,
        last_modified: DateTime::from_timestamp(modified_secs, 0).unwrap(),
    }
}

fn live(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[test]
fn names_round_trip_and_junk_is_ignored() {
    let db = "s3://bucket/a b/db.1";
    let name = Marker::name("node-1", Tell::Workers, db);
    assert!(!name[7..].contains('/'), "{name}");
    let at = DateTime::from_timestamp(5, 0).unwrap();
    assert_eq!(Marker::parse(&name, at), Some(marker("node-1", db, 5)));
    let all = Marker::name("node-1", Tell::All, db);
    let parsed = Marker::parse(&all, at).unwrap();
    assert_eq!((parsed.tell, parsed.database.as_str()), (Tell::All, db));
    for junk in [
        "",
        "node-1",
        "bad node/x",
        "node-1/a/b",
        "node-1/%FF",
        "node-1/all/a/b",
    ] {
        assert_eq!(Marker::parse(junk, at), None, "{junk}");
    }
}

const EXPIRY: Duration = Duration::from_secs(30);

/// `me` judges a listing of node a's marker for `db`, last modified at
/// `modified`, at `now`.
fn see(seen: &mut Seen, me: &str, live: &BTreeSet<String>, modified: i64, now: Instant) -> Judged {
    judge(
        vec![marker("a", "db", modified)],
        seen,
        me,
        live,
        now,
        EXPIRY,
    )
}

#[tokio::test(start_paused = true)]
async fn a_marker_nudges_once_per_write_and_is_deleted_by_its_writer_or_when_orphaned() {
    let both = live(&["a", "b"]);
    let t0 = Instant::now();
    let later = t0 + EXPIRY * 10;

    // b sees a's marker: one nudge, no delete; the same listing again
    // nudges nothing; a rewrite nudges again.
    let mut seen = Seen::new();
    let first = see(&mut seen, "b", &both, 1, t0);
    assert_eq!(
        first.nudge,
        BTreeSet::from([("db".to_string(), Tell::Workers)])
    );
    assert!(first.delete.is_empty());
    assert_eq!(see(&mut seen, "b", &both, 1, t0), Judged::default());
    assert_eq!(see(&mut seen, "b", &both, 2, t0).nudge.len(), 1);

    // b never deletes a live node's marker, however old.
    assert_eq!(see(&mut seen, "b", &both, 2, later), Judged::default());

    // Its writer deletes it once it has seen it for `expiry`, and is
    // never nudged by its own marker.
    let mut own = Seen::new();
    assert_eq!(see(&mut own, "a", &both, 2, t0), Judged::default());
    assert!(
        see(&mut own, "a", &both, 2, t0 + EXPIRY / 2)
            .delete
            .is_empty()
    );
    let due = see(&mut own, "a", &both, 2, t0 + EXPIRY);
    assert_eq!(due.delete, vec![marker("a", "db", 2)]);
    assert!(own.is_empty(), "a deleted marker is forgotten");

    // A gone node's marker: nudged when first seen, deleted after
    // `expiry` by whoever sees it.
    let mut seen = Seen::new();
    let only_b = live(&["b"]);
    let orphan = see(&mut seen, "b", &only_b, 3, t0);
    assert_eq!(orphan.nudge.len(), 1);
    assert!(orphan.delete.is_empty());
    assert_eq!(see(&mut seen, "b", &only_b, 3, later).delete.len(), 1);

    // Markers no longer listed are forgotten: `seen` is bounded by
    // the listing.
    let mut seen = Seen::new();
    let two = vec![marker("a", "x", 1), marker("a", "y", 1)];
    judge(two, &mut seen, "b", &both, t0, EXPIRY);
    judge(vec![marker("a", "y", 1)], &mut seen, "b", &both, t0, EXPIRY);
    assert_eq!(seen.len(), 1);
}

#[tokio::test]
async fn a_wake_nudges_local_workers_or_leaves_a_marker_the_other_node_acts_on() {
    let root = FleetRoot::from_parts(
        "memory:///fleet".into(),
        Arc::new(object_store::memory::InMemory::new()),
        object_store::path::Path::from("fleet"),
    );
    let a = WakeSignals::new(root.clone(), "a");
    let b = WakeSignals::new(root.clone(), "b");
    let both = live(&["a", "b"]);

    // A worker on the waking node: nudged in memory, nothing written.
    let local = a.listen("s3://bkt/db", Role::Workers);
    a.woke("s3://bkt/db");
    tokio::time::timeout(Duration::from_secs(1), local.notify().notified())
        .await
        .expect("the local worker is nudged");
    tokio::task::yield_now().await;
    assert_eq!(b.collect(&both, EXPIRY).await.unwrap(), 0);
    drop(local);

    // No worker here: the marker reaches b's worker, once.
    let remote = b.listen("s3://bkt/db", Role::Workers);
    a.woke("s3://bkt/db");
    let relative = Marker::relative("a", Tell::Workers, "s3://bkt/db");
    until_written(&root, &relative).await;
    let marker = root.path(&relative);
    assert_eq!(b.collect(&both, EXPIRY).await.unwrap(), 1);
    tokio::time::timeout(Duration::from_secs(1), remote.notify().notified())
        .await
        .expect("the other node's worker is nudged");
    assert_eq!(b.collect(&both, EXPIRY).await.unwrap(), 0, "once per write");

    // Its writer deletes it after `expiry`.
    assert_eq!(a.collect(&both, Duration::ZERO).await.unwrap(), 0);
    assert!(
        root.store().head(&marker).await.is_err(),
        "the writer deleted its marker"
    );
}

/// Waits (in real time, for the in-memory store's writes) until
/// `relative` exists under `root`.
async fn until_written(root: &FleetRoot, relative: &str) {
    for _ in 0..200 {
        if root.store().head(&root.path(relative)).await.is_ok() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{relative} was not written");
}

#[tokio::test(start_paused = true)]
async fn an_event_reaches_every_service_and_a_burst_leaves_one_marker_a_gap_the_last_included() {
    let root = FleetRoot::from_parts(
        "memory:///fleet".into(),
        Arc::new(object_store::memory::InMemory::new()),
        object_store::path::Path::from("fleet"),
    );
    let (a, b) = (
        WakeSignals::new(root.clone(), "a"),
        WakeSignals::new(root.clone(), "b"),
    );
    let both = live(&["a", "b"]);
    let db = "s3://bkt/db";
    let coordinator = b.listen(db, Role::Coordinator);
    let gc = b.listen(db, Role::Gc);
    let workers = b.listen(db, Role::Workers);

    // A coordinator's wake tells only the workers.
    a.woke(db);
    until_written(&root, &Marker::relative("a", Tell::Workers, db)).await;
    assert_eq!(b.collect(&both, EXPIRY).await.unwrap(), 1);
    workers.notify().notified().await;
    let told = |l: &WakeListener| {
        let notified = l.notify().notified();
        futures::pin_mut!(notified);
        notified.as_mut().enable()
    };
    assert!(
        !told(&coordinator) && !told(&gc),
        "a wake is for the workers"
    );

    // An event tells every service, through a marker of its own.
    let all = Marker::relative("a", Tell::All, db);
    a.event(db);
    until_written(&root, &all).await;
    assert_eq!(b.collect(&both, EXPIRY).await.unwrap(), 1);
    assert!(told(&coordinator) && told(&gc) && told(&workers));

    // More events within the gap write nothing at once ...
    let modified = || async {
        let head = root.store().head(&root.path(&all)).await;
        head.unwrap().last_modified
    };
    let first = modified().await;
    for _ in 0..5 {
        a.event(db);
    }
    tokio::task::yield_now().await;
    assert_eq!(
        b.collect(&both, EXPIRY).await.unwrap(),
        0,
        "one marker a gap"
    );
    // ... and one marker at its end, so the burst's last is not lost.
    tokio::time::advance(EVENT_MARKER_GAP).await;
    for _ in 0..200 {
        let now = modified().await;
        if now != first {
            break;
        }
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        b.collect(&both, EXPIRY).await.unwrap(),
        1,
        "the trailing marker"
    );
    assert!(told(&coordinator));
}
