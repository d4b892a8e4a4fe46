//! Idle databases cost almost nothing, and wake when written: a node over
//! idle databases on the S3 server, every request it sends to them
//! counted. Cadences run 20 times faster than the defaults (a 3 s
//! "minute"), so the budget is 5 requests per database per 3 s.

use std::time::{Duration, Instant};

use object_store::ObjectStoreExt;
use sleet::Service;
use sleet::testing::{ALL_OPS, CountingStore, Op};

use crate::cluster::{Cluster, compacted, coordinator_owner, owner, placement_matches, poll_until};
use crate::common::endpoint;
use crate::db;

/// How much faster than the defaults this fleet runs.
const SPEEDUP: u32 = 20;
/// The goal: requests per idle database per (scaled) minute.
const BUDGET_PER_MINUTE: f64 = 5.0;
const DATABASES: usize = 4;

/// The defaults divided by [`SPEEDUP`]: GC every 3 s with a 15 s
/// `min_age`, the coordinator and workers polling every 250 ms and its
/// checkpoints living 45 s, idle looks
/// from 250 ms backing off to 1 s (workers 3 s, GC 6 s).
pub(crate) fn fleet_toml(idle_enabled: bool) -> String {
    let mut toml = String::from(
        r#"
[node]
heartbeat_interval = "500ms"
heartbeat_timeout = "3s"
config_poll = "500ms"

[database.compactor-coordinator]
poll_interval = "250ms"
commit_compacted_interval = "250ms"
checkpoint_lifetime = "45s"
[database.compactor-coordinator.scheduler]
min_compaction_sources = 2

[database.compaction-workers]
compactions_poll_interval = "250ms"
heartbeat_interval = "500ms"
min_filter_keys = 0
"#,
    );
    for dir in ["manifest", "wal", "compacted", "compactions"] {
        toml.push_str(&format!(
            "\n[database.gc.{dir}]\ninterval = \"3s\"\nmin_age = \"15s\"\n"
        ));
    }
    toml.push_str(&format!(
        r#"
[database.idle]
enabled = {idle_enabled}
probe_min = "250ms"
probe_max = "1s"
sleep_after = "6s"
workers_probe = "3s"
gc_probe = "6s"
"#
    ));
    toml
}

pub(crate) fn scaled_minute() -> Duration {
    Duration::from_secs(60) / SPEEDUP
}

/// Requests per database per scaled minute over `window`, with the count
/// by kind for the message.
pub(crate) async fn rate(
    counting: &CountingStore,
    window: Duration,
    databases: usize,
) -> (f64, String) {
    let before = total(counting);
    let kinds_before = counting.by_kind();
    tokio::time::sleep(window).await;
    let during = total(counting) - before;
    let kinds: Vec<String> = counting
        .by_kind()
        .into_iter()
        .filter_map(|(kind, n)| {
            let d = n - kinds_before.get(&kind).copied().unwrap_or(0);
            (d > 0).then(|| format!("{kind} {d}"))
        })
        .collect();
    let minutes = window.as_secs_f64() / scaled_minute().as_secs_f64();
    (during as f64 / minutes / databases as f64, kinds.join(", "))
}

/// Waits up to a minute for `url`'s L0 to become a sorted run.
async fn until_compacted(url: &str, what: &str) {
    poll_until(Duration::from_secs(60), what, || async {
        let (l0, runs) = db::shape(url).await;
        compacted(l0, runs).then_some(())
    })
    .await;
}

/// Each database's compactor epoch.
async fn compactor_epochs(urls: &[String]) -> Vec<u64> {
    let mut epochs = Vec::new();
    for url in urls {
        epochs.push(db::compactor_epoch(url).await);
    }
    epochs
}

fn total(counting: &CountingStore) -> u64 {
    ALL_OPS.iter().map(|op| counting.count(*op)).sum()
}

/// Idle databases stay within the budget; one that is written wakes, is
/// compacted and collected, and drops back to the budget; with idling
/// off (sleet 0.1.0's behaviour) the same count fails the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_databases_cost_at_most_five_requests_a_minute_and_wake_when_written() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let cluster = Cluster::on_s3(&fleet_toml(true), &endpoint).await;
    let (mut cluster, counting) = cluster.with_counting(&endpoint);
    let urls: Vec<String> = (0..DATABASES)
        .map(|i| cluster.db_url(&format!("idle{i}")))
        .collect();
    for url in &urls {
        // One L0 SST: below the trigger, nothing to compact.
        db::seed(url, 1).await;
        cluster.fleet.register(url).await.unwrap();
    }
    cluster.spawn("i1");

    // GC sweeps each database it starts on, then lingers a `min_age` and
    // an interval; after that everything is idle.
    let minute = scaled_minute();
    tokio::time::sleep(minute * 10).await;
    let (idle, kinds) = rate(&counting, minute * 5, DATABASES).await;
    eprintln!("idle: {idle:.1} requests per database-minute ({kinds})");
    assert!(
        idle <= BUDGET_PER_MINUTE,
        "{idle:.1} requests per idle database-minute: {kinds}"
    );

    // Written: L0 reaches the trigger, the coordinator wakes and the
    // workers compact; GC collects the SSTs compaction superseded.
    let woken = &urls[0];
    let initial = db::objects(woken, "compacted").await;
    let writer = db::open_writer(woken).await;
    db::write_rounds(&writer, 1..4).await;
    writer.close().await.unwrap();
    let written = Instant::now();
    until_compacted(woken, "the woken database to compact").await;
    eprintln!(
        "idle: compacted {:.1} s after the writes",
        written.elapsed().as_secs_f64()
    );
    poll_until(
        Duration::from_secs(90),
        "GC of the superseded SSTs",
        || async {
            let now = db::objects(woken, "compacted").await;
            (initial.difference(&now).count() > 0).then_some(())
        },
    )
    .await;
    eprintln!(
        "idle: collected {:.1} s after the writes",
        written.elapsed().as_secs_f64()
    );

    // Quiet again: back to the budget once the coordinator's last
    // checkpoint has expired (45 s), GC has removed it and lingered.
    tokio::time::sleep((written + minute * 24).saturating_duration_since(Instant::now())).await;
    let (again, kinds) = rate(&counting, minute * 5, DATABASES).await;
    eprintln!("idle again: {again:.1} requests per database-minute ({kinds})");
    assert!(
        again <= BUDGET_PER_MINUTE,
        "{again:.1} requests per database-minute after waking: {kinds}"
    );

    // The control: idling off, the same count fails the budget.
    let root = cluster.fleet.root();
    root.store()
        .put(&root.path("sleet.toml"), fleet_toml(false).into())
        .await
        .unwrap();
    tokio::time::sleep(minute * 2).await;
    let epochs = compactor_epochs(&urls).await;
    let (always, kinds) = rate(&counting, minute * 3, DATABASES).await;
    eprintln!("idling off: {always:.1} requests per database-minute ({kinds})");
    assert!(
        always > BUDGET_PER_MINUTE * 4.0,
        "with idling off the services poll: {always:.1} ({kinds})"
    );
    // One coordinator per database after the restart: a stopped task that
    // finished after its replacement started once orphaned it, and two
    // coordinators fenced each other in turn.
    assert_eq!(
        compactor_epochs(&urls).await,
        epochs,
        "the compactor epochs kept rising after the restart"
    );
    cluster.stop("i1").await;
}

/// Failover of an idle database and of one that is waking: the node
/// owning its coordinator dies (its heartbeat stays behind) and the
/// survivor compacts the database once the heartbeat times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_or_waking_database_fails_over() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let mut cluster = Cluster::on_s3(&fleet_toml(true), &endpoint).await;
    let live = ["f1", "f2"];
    // Two databases whose coordinator f1 owns (one per case), two on f2.
    let (mut on_f1, mut on_f2) = (Vec::new(), Vec::new());
    for i in 0.. {
        let url = cluster.db_url(&format!("fo{i}"));
        match coordinator_owner(&url, &live) {
            "f1" if on_f1.len() < 2 => on_f1.push(url),
            "f2" if on_f2.len() < 2 => on_f2.push(url),
            _ if on_f1.len() == 2 && on_f2.len() == 2 => break,
            _ => {}
        }
    }
    for url in on_f1.iter().chain(&on_f2) {
        db::seed(url, 1).await;
        cluster.fleet.register(url).await.unwrap();
    }
    for id in live {
        cluster.spawn(id);
    }
    let (idle, waking) = (&on_f1[0], &on_f1[1]);
    tokio::time::sleep(scaled_minute() * 3).await;

    // Waking: written past the trigger just before the kill.
    let writer = db::open_writer(waking).await;
    db::write_rounds(&writer, 1..4).await;
    writer.close().await.unwrap();
    cluster.kill("f1");
    let killed = Instant::now();
    // Idle: written only after the kill.
    let writer = db::open_writer(idle).await;
    db::write_rounds(&writer, 1..4).await;
    writer.close().await.unwrap();

    // Heartbeat timeout (3 s) and a tick, then the survivor's first look.
    for url in [waking, idle] {
        until_compacted(url, &format!("{url} to compact on f2")).await;
        eprintln!(
            "failover: {url} compacted {:.1} s after the kill",
            killed.elapsed().as_secs_f64()
        );
    }
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "failover took {:?}",
        killed.elapsed()
    );
    cluster.stop("f2").await;
}

/// A `file://` fleet whose GC collects a directory after 3 s and lingers
/// 4 s after a change (3 s `min_age` plus its 1 s interval).
fn settle_toml() -> String {
    let mut toml =
        String::from("[node]\nheartbeat_interval = \"500ms\"\nheartbeat_timeout = \"3s\"\n");
    for dir in ["manifest", "wal", "compacted", "compactions"] {
        toml.push_str(&format!(
            "\n[database.gc.{dir}]\ninterval = \"1s\"\nmin_age = \"3s\"\n"
        ));
    }
    toml.push_str(
        "\n[database.idle]\nprobe_min = \"250ms\"\nprobe_max = \"1s\"\nsleep_after = \"2s\"\n",
    );
    toml
}

/// How many times a node running GC alone listed `compacted/` over 12 s (three lingers)
/// from its start on one database seeded with three flushes, `settled`
/// (its newest manifest older than the linger) or fresh; and whether the
/// superseded manifests were collected by then.
async fn gc_sweeps_after_start(settled: bool) -> (u64, bool) {
    let (mut cluster, counting) = Cluster::new(&settle_toml()).with_counted_files(Duration::ZERO);
    let url = cluster.db_url("settle");
    db::seed(&url, 3).await;
    cluster.fleet.register(&url).await.unwrap();
    let manifests = db::objects(&url, "manifest").await;
    if settled {
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    // GC alone: a coordinator would write manifests of its own.
    cluster.spawn_with("s1", |options| options.with_services(vec![Service::Gc]));
    tokio::time::sleep(Duration::from_secs(12)).await;
    let lists = counting
        .by_kind()
        .get("list compacted")
        .copied()
        .unwrap_or(0);
    let left = db::objects(&url, "manifest").await;
    cluster.stop("s1").await;
    (lists, left.len() == 1 && manifests.len() > 1)
}

/// A node that starts on a database nobody changed for longer than GC
/// lingers collects its garbage in one sweep and runs no collector (at
/// 10,000 databases, 10,000 collectors lingering at once held most of a
/// starting node's memory). The control: a freshly written database gets
/// the lingering collector, sweeping every interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_settled_database_is_swept_once_at_start_a_fresh_one_lingers() {
    let (settled_lists, settled_collected) = gc_sweeps_after_start(true).await;
    assert!(
        settled_collected,
        "the one sweep collected the old manifests"
    );
    assert_eq!(
        settled_lists, 1,
        "one sweep of compacted/, then no collector"
    );
    let (fresh_lists, fresh_collected) = gc_sweeps_after_start(false).await;
    assert!(
        fresh_collected,
        "the lingering collector collected them too"
    );
    assert!(
        fresh_lists >= 3,
        "a fresh database's collector sweeps every interval: {fresh_lists} sweeps of compacted/"
    );
}

/// A node starting over many databases looks at no more than
/// [`sleet::daemon::LOOKS_AT_ONCE`] of them at once: 300 idle tasks
/// starting together, every read taking up to 40 ms. Unbounded, their
/// first looks all ran at once and held hundreds of MiB of listings at
/// 2,000 databases, never given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_starting_node_looks_at_a_bounded_number_of_databases_at_once() {
    use futures::StreamExt;
    let (mut cluster, counting) =
        Cluster::new(&settle_toml()).with_counted_files(Duration::from_millis(40));
    let urls: Vec<String> = (0..150)
        .map(|i| cluster.db_url(&format!("many{i}")))
        .collect();
    let fleet = cluster.fleet.clone();
    futures::stream::iter(urls.clone())
        .for_each_concurrent(16, |url| {
            let fleet = fleet.clone();
            async move {
                db::seed(&url, 1).await;
                fleet.register(&url).await.unwrap();
            }
        })
        .await;
    let services = vec![Service::CompactorCoordinator, Service::CompactionWorkers];
    cluster.spawn_with("m1", |options| options.with_services(services));
    poll_until(
        Duration::from_secs(60),
        "every database looked at",
        || async {
            (counting.count(Op::Head) + counting.count(Op::Get) >= 2 * urls.len() as u64)
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    cluster.stop("m1").await;
    let peak = counting.peak_reads_in_flight();
    eprintln!("at most {peak} reads in flight at once");
    assert!(
        peak <= sleet::daemon::LOOKS_AT_ONCE as u64,
        "{peak} reads in flight at once"
    );
}

/// A fleet whose workers (one per database) back off to a two-minute
/// look while the coordinator looks every second: a job queued for idle
/// workers would wait for their next look unless the coordinator that
/// queued it tells them.
fn stall_toml() -> String {
    format!(
        r#"{}
[database.idle]
probe_min = "250ms"
probe_max = "1s"
workers_probe = "120s"
gc_probe = "60s"
sleep_after = "2s"
"#,
        crate::cluster::FAST_NODE_AND_COMPACTION.replace("count = 2\n", "count = 1\n")
    )
}

/// How long a burst of 16 flushes into `url` takes a writer at SlateDB's
/// default L0 limit (8 SSTs), which stalls it until something compacts.
async fn burst(url: &str) -> Duration {
    let (store, path) = db::open_store(url);
    let writer = slatedb::Db::builder(path, store)
        .with_settings(slatedb::config::Settings {
            l0_max_ssts: 8,
            ..db::tiny_settings()
        })
        .build()
        .await
        .expect("a SlateDB writer");
    let started = Instant::now();
    db::write_rounds(&writer, 1..17).await;
    let took = started.elapsed();
    writer.close().await.unwrap();
    took
}

/// A stalling burst into `url` (see [`burst`]), and how long after it
/// began the first sorted run showed: the first compaction finished, and
/// the writer could go on. Later compactions keep pace with the writer at
/// the store's speed; this one waits for the wake.
async fn burst_to_first_run(url: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let first_run = async {
        poll_until(Duration::from_secs(90), "the first sorted run", || async {
            let (_, runs) = db::shape(url).await;
            (runs > 0).then(|| started.elapsed())
        })
        .await
    };
    let (took, first_run) = tokio::join!(burst(url), first_run);
    (took, first_run)
}

/// A burst into an idle database stalls its writer until the
/// coordinator's look (1 s here) and a compaction, not until the workers'
/// own next look: the coordinator that wakes the database nudges its
/// workers in memory when they run on its node, and through a marker
/// under the fleet root when they run on another (`idle::wakes`). Every
/// service's first look counts as activity, so the workers run for
/// `sleep_after` (2 s) at start, then look 0.25, 0.5, ... 32 s apart:
/// the bursts come 38 s after the nodes settled, when the workers' next
/// look is about 30 s away. What is timed is the first compaction: the
/// later ones keep pace with the writer at the store's speed (on the S3
/// server, seconds each).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_writer_waits_for_the_coordinators_look_not_the_workers() {
    let _alone = crate::HEAVY.lock().await;
    stalled_writers(Cluster::new(&stall_toml())).await;
}

/// The same on the S3 server: the marker is a PUT, LIST and DELETE there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_writer_on_s3_waits_for_the_coordinators_look_not_the_workers() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    stalled_writers(Cluster::on_s3(&stall_toml(), &endpoint).await).await;
}

async fn stalled_writers(mut cluster: Cluster) {
    let live = ["s1", "s2"];
    let placed = |same: bool| {
        (0..)
            .map(|i| cluster.db_url(&format!("stalled{i}")))
            .find(|url| {
                let coordinator = owner(url, Service::CompactorCoordinator, &live);
                (coordinator == owner(url, Service::CompactionWorkers, &live)) == same
            })
            .unwrap()
    };
    let (together, apart) = (placed(true), placed(false));
    let mut dbs = std::collections::BTreeMap::new();
    for url in [&together, &apart] {
        // One key: one L0 SST, below the trigger, and no sorted run yet.
        let writer = db::open_writer(url).await;
        writer.put(b"seed", b"1").await.unwrap();
        writer.close().await.unwrap();
        cluster.fleet.register(url).await.unwrap();
        dbs.insert(
            url.clone(),
            vec![
                Service::Gc,
                Service::CompactorCoordinator,
                Service::CompactionWorkers,
            ],
        );
    }
    for id in live {
        cluster.spawn(id);
    }
    poll_until(
        Duration::from_secs(30),
        "both nodes to run their tasks",
        || async {
            placement_matches(&cluster, &live, &dbs, 1)
                .await
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(38)).await;

    let (same_node, other_node) =
        tokio::join!(burst_to_first_run(&together), burst_to_first_run(&apart));
    eprintln!(
        "idle: the first compaction finished {:.1} s into the burst (workers on the coordinator's \
         node), {:.1} s (on another node); the bursts took {:.1} s and {:.1} s",
        same_node.1.as_secs_f64(),
        other_node.1.as_secs_f64(),
        same_node.0.as_secs_f64(),
        other_node.0.as_secs_f64()
    );
    for ((_, first_run), workers) in [(same_node, "on its node"), (other_node, "on another node")] {
        assert!(
            first_run < Duration::from_secs(10),
            "the first compaction finished {:.1} s into the burst with the workers {workers}: \
             its job waited for their own look",
            first_run.as_secs_f64()
        );
    }
    db::assert_reader_sees(&together, 1..17).await;
    db::assert_reader_sees(&apart, 1..17).await;
    for id in live {
        cluster.stop(id).await;
    }
}
