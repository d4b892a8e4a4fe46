//! Wake on events: the S3 server delivers bucket notifications of new
//! manifests to an SQS queue (`sleet events setup` configures both), and a
//! fleet wakes an idle database within seconds of its writer's flush,
//! whichever node receives the event.
//!
//! Every test here sets the notification of the shared test bucket to its
//! own queue, so they hold [`crate::HEAVY`] and run one at a time; each
//! deletes its queue at the end.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sleet::Service;
use sleet::services::events::setup::{Endpoints, setup};
use sleet::services::events::sqs::{AwsCalls, Sqs};
use sleet::testing::CountingStore;

use crate::cluster::{Cluster, owner, placement_matches, poll_until};
use crate::common::{BUCKET, endpoint};
use crate::db;

/// A queue of the test's own on the S3 server, notified of every new
/// manifest in the test bucket; each test deletes its own at the end.
struct TestQueue {
    name: String,
    url: String,
    sqs: Sqs,
}

impl TestQueue {
    async fn new(endpoint: &str, label: &str) -> TestQueue {
        let name = crate::common::unique_prefix(label).replace(['/', '.'], "-");
        let url = TestQueue::notify(endpoint, &name).await;
        TestQueue {
            name,
            sqs: Sqs::new(calls(), endpoint),
            url,
        }
    }

    /// `sleet events setup` for the queue `name` and the test bucket: the
    /// queue's URL.
    async fn notify(endpoint: &str, name: &str) -> String {
        let at = Endpoints {
            calls: calls(),
            endpoint: Some(endpoint.to_string()),
        };
        let report = setup(&at, name, &BTreeSet::from([BUCKET.to_string()]), false)
            .await
            .expect("sleet events setup on the S3 server");
        report.queue_url
    }

    fn events_toml(&self, safety: &str) -> String {
        format!(
            "\n[events]\nsource = \"sqs\"\nqueue_url = \"{}\"\nsafety_interval = \"{safety}\"\nrelay_interval = \"1s\"\n",
            self.url
        )
    }

    /// Deletes the queue and the test bucket's notification of it, so
    /// later tests' writes notify nothing.
    async fn delete(&self, endpoint: &str) {
        set_notifications(&self.sqs, endpoint, EMPTY_NOTIFICATIONS).await;
        self.sqs.delete_queue(&self.url).await.expect("DeleteQueue");
    }
}

/// The environment's AWS settings (scripts/with-servers exports them).
fn calls() -> AwsCalls {
    AwsCalls::from_env(None).expect("AWS settings (scripts/with-servers exports them)")
}

/// A bucket notification configuration that notifies nothing.
const EMPTY_NOTIFICATIONS: &str = r#"<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></NotificationConfiguration>"#;

/// Replaces the test bucket's notification configuration with `document`.
async fn set_notifications(sqs: &Sqs, endpoint: &str, document: &str) {
    let request = http::Request::put(format!("{endpoint}/{BUCKET}?notification"))
        .body(document.to_string())
        .unwrap();
    let reply = sqs
        .calls()
        .send("PutBucketNotificationConfiguration", "s3", request)
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
}

/// Fast node and compaction cadences; idle looks back off from 5 s to 10
/// minutes, so within the test only an event can wake a database.
fn wake_toml(queue: &TestQueue) -> String {
    format!(
        r#"{}
[database.idle]
probe_min = "5s"
probe_max = "10m"
workers_probe = "10m"
gc_probe = "10m"
sleep_after = "2s"
{}"#,
        crate::cluster::FAST_NODE_AND_COMPACTION.replace("count = 2\n", "count = 1\n"),
        queue.events_toml("10m")
    )
}

/// Writes one key into `url` and closes the writer, which flushes it to
/// one L0 SST; returns once the manifest that records it is written.
async fn flush_one_key(url: &str, round: usize) {
    let writer = db::open_writer(url).await;
    writer
        .put(db::key(round, 0), db::value(round, 0))
        .await
        .unwrap();
    writer.close().await.unwrap();
}

/// The keys [`flush_one_key`] wrote in rounds 0 and 1 read back.
async fn reads_back_both_flushes(url: &str) {
    let reader = db::open_writer(url).await;
    for round in 0..2 {
        let value = reader.get(db::key(round, 0)).await.unwrap();
        assert_eq!(
            value.as_deref(),
            Some(&db::value(round, 0)[..]),
            "round {round}"
        );
    }
    reader.close().await.unwrap();
}

/// A database idle for minutes is compacted within seconds of the flush
/// that brings its L0 to the trigger, on a three-node fleet where the
/// only node receiving events runs none of its compaction services: the
/// receiver leaves a marker under the fleet root that the owners list
/// every second (`idle::wakes`). Their own looks are minutes apart here,
/// so nothing but the event can wake it in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_received_elsewhere_wakes_an_idle_database_within_seconds() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let queue = TestQueue::new(&endpoint, "events-wake").await;
    let mut cluster = Cluster::on_s3(&wake_toml(&queue), &endpoint).await;
    let live = ["e1", "e2", "e3"];
    let url = (0..)
        .map(|i| cluster.db_url(&format!("woken{i}")))
        .find(|url| {
            owner(url, Service::CompactorCoordinator, &live) != "e3"
                && owner(url, Service::CompactionWorkers, &live) != "e3"
        })
        .unwrap();
    // One L0 SST: below the trigger (2), no sorted run yet.
    flush_one_key(&url, 0).await;
    cluster.fleet.register(&url).await.unwrap();
    let dbs = std::collections::BTreeMap::from([(
        url.clone(),
        vec![
            Service::Gc,
            Service::CompactorCoordinator,
            Service::CompactionWorkers,
        ],
    )]);
    cluster.spawn_with("e1", |o| o.with_event_receiver(false));
    cluster.spawn_with("e2", |o| o.with_event_receiver(false));
    cluster.spawn("e3");
    poll_until(
        Duration::from_secs(30),
        "the nodes to run their tasks",
        || async {
            placement_matches(&cluster, &live, &dbs, 1)
                .await
                .then_some(())
        },
    )
    .await;
    // Idle: the services' first looks ran them for `sleep_after` (2 s);
    // the next looks are 5, 10, 20, 40 s ... apart from there: after 40 s
    // the next is over half a minute away.
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert_eq!(db::shape(&url).await.1, 0, "nothing compacted it yet");

    // Its timing bound failed once in a full run, which logs at `warn`:
    // the nodes' debug lines from here are kept to explain another.
    let log = crate::debug_log::DebugLog::start();
    flush_one_key(&url, 1).await;
    let flushed = Instant::now();
    let took = poll_until(Duration::from_secs(60), "the first sorted run", || async {
        (db::shape(&url).await.1 > 0).then(|| flushed.elapsed())
    })
    .await;
    eprintln!(
        "events: compacted {:.2} s after the flush that reached the trigger",
        took.as_secs_f64()
    );
    if took >= Duration::from_secs(3) {
        eprintln!("the nodes' debug log from the flush on:\n{}", log.lines());
    }
    assert!(
        took < Duration::from_secs(3),
        "compacted {:.1} s after the trigger: the event did not wake it",
        took.as_secs_f64()
    );
    drop(log);
    reads_back_both_flushes(&url).await;
    for id in live {
        cluster.stop(id).await;
    }
    queue.delete(&endpoint).await;
}

/// Requests per database per scaled minute over `window`, leaving out
/// the event canaries (a node's, not a database's: returned apart, per
/// scaled minute), with the count by kind.
async fn database_rate(
    counting: &CountingStore,
    window: Duration,
    databases: usize,
) -> (f64, f64, String) {
    let before = counting.by_kind();
    tokio::time::sleep(window).await;
    let after = counting.by_kind();
    let minutes = window.as_secs_f64() / crate::idle::scaled_minute().as_secs_f64();
    let (mut databases_total, mut canaries) = (0, 0);
    let mut kinds = Vec::new();
    for (kind, n) in after {
        let during = n - before.get(&kind).copied().unwrap_or(0);
        if during == 0 {
            continue;
        }
        kinds.push(format!("{kind} {during}"));
        if kind.ends_with(".sleet-events-check") {
            canaries += during;
        } else {
            databases_total += during;
        }
    }
    (
        databases_total as f64 / minutes / databases as f64,
        canaries as f64 / minutes,
        kinds.join(", "),
    )
}

/// Waits until every live node says events do not flow, and `sleet
/// status` warns with `warning`.
async fn until_fallen_back(cluster: &Cluster, warning: &str) {
    poll_until(
        Duration::from_secs(60),
        "the nodes to fall back",
        || async { (events_flow(cluster).await == Some(false)).then_some(()) },
    )
    .await;
    let status = cluster
        .fleet
        .status(sleet::StatusOptions::default())
        .await
        .unwrap();
    assert!(
        status.warnings.iter().any(|w| w.contains(warning)),
        "{:?}",
        status.warnings
    );
}

/// Whether every live node's heartbeat says events flow (`Some(true)`),
/// every one says they do not (`Some(false)`), or they disagree.
async fn events_flow(cluster: &Cluster) -> Option<bool> {
    let status = cluster
        .fleet
        .status(sleet::StatusOptions::default())
        .await
        .ok()?;
    let flows: BTreeSet<bool> = status
        .nodes
        .iter()
        .filter(|n| n.live)
        .map(|n| n.events.as_ref().is_some_and(|e| e.flowing))
        .collect();
    (flows.len() == 1).then(|| flows.into_iter().next().unwrap())
}

/// With events flowing, idle databases cost at most half a request a
/// minute (their looks back off to the safety interval; cadences 20 times
/// the defaults, as in `idle`: a 30 s safety interval for 10 minutes).
/// The queue deleted: nodes fall back to polling within a long poll, say
/// so in status, and a burst is compacted at polling speed. The queue
/// restored: they return to the safety interval. The bucket's
/// notification removed while the queue still answers: the canaries stop
/// the flow until setup restores it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_databases_cost_half_a_request_a_minute_with_events_and_fall_back_without() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    const DATABASES: usize = 4;
    let queue = TestQueue::new(&endpoint, "events-idle").await;
    let toml = format!(
        "{}{}",
        crate::idle::fleet_toml(true),
        queue.events_toml("30s")
    );
    let cluster = Cluster::on_s3(&toml, &endpoint).await;
    let (mut cluster, counting) = cluster.with_counting(&endpoint);
    let urls: Vec<String> = (0..DATABASES)
        .map(|i| cluster.db_url(&format!("evidle{i}")))
        .collect();
    for url in &urls {
        db::seed(url, 1).await;
        cluster.fleet.register(url).await.unwrap();
    }
    cluster.spawn("v1");
    cluster.spawn("v2");
    poll_until(Duration::from_secs(30), "events to flow", || async {
        (events_flow(&cluster).await == Some(true)).then_some(())
    })
    .await;

    // GC sweeps and lingers (18 s); looks back off from 250 ms to the
    // 30 s safety interval within about a minute.
    let minute = crate::idle::scaled_minute();
    tokio::time::sleep(Duration::from_secs(90)).await;
    let (idle, canaries, kinds) = database_rate(&counting, minute * 20, DATABASES).await;
    eprintln!(
        "events: {idle:.2} requests per idle database-minute, canaries {canaries:.2} per scaled \
         minute for the two nodes ({kinds})"
    );
    assert!(
        idle <= 0.5,
        "{idle:.2} requests per idle database-minute with events: {kinds}"
    );

    // The queue gone (the bucket still notifying its ARN): every node
    // falls back and says so.
    queue.sqs.delete_queue(&queue.url).await.unwrap();
    until_fallen_back(&cluster, "receives no store events").await;
    let (polling, kinds) = crate::idle::rate(&counting, minute * 5, DATABASES).await;
    eprintln!("events gone: {polling:.2} requests per idle database-minute ({kinds})");
    assert!(
        polling > 2.0,
        "the nodes did not fall back to polling: {polling:.2} ({kinds})"
    );
    // A burst is compacted at polling speed (`probe_max` 1 s here).
    let woken = &urls[0];
    let writer = db::open_writer(woken).await;
    db::write_rounds(&writer, 1..4).await;
    writer.close().await.unwrap();
    let written = Instant::now();
    poll_until(
        Duration::from_secs(20),
        "the burst to compact while polling",
        || async {
            let (l0, runs) = db::shape(woken).await;
            crate::cluster::compacted(l0, runs).then_some(())
        },
    )
    .await;
    eprintln!(
        "events gone: compacted {:.1} s after the writes",
        written.elapsed().as_secs_f64()
    );

    // The queue back (the same name has the same URL, and the bucket
    // still notifies it): the nodes return within their retry (30 s).
    queue.sqs.create_queue(&queue.name).await.unwrap();
    poll_until(Duration::from_secs(60), "events to flow again", || async {
        (events_flow(&cluster).await == Some(true)).then_some(())
    })
    .await;

    // The queue answers but the bucket no longer notifies it: the
    // canaries (every half safety interval, 15 s here) stop the flow, and
    // setup run again restores it.
    set_notifications(&queue.sqs, &endpoint, EMPTY_NOTIFICATIONS).await;
    until_fallen_back(&cluster, "the canary event of s3://").await;
    TestQueue::notify(&endpoint, &queue.name).await;
    poll_until(
        Duration::from_secs(60),
        "events to flow after setup",
        || async { (events_flow(&cluster).await == Some(true)).then_some(()) },
    )
    .await;
    for id in ["v1", "v2"] {
        cluster.stop(id).await;
    }
    queue.delete(&endpoint).await;
}

/// `sleet events setup` and `sleet events check`, by the binary: the dry
/// run changes nothing, setup creates the queue and the notification and
/// prints the `[events]` table, check sees its marker's event arrive
/// (received here: no node runs). The control: a queue no bucket
/// notifies fails the check, naming the likely cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_setup_and_check_by_the_binary() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let env = crate::common::s3_env(&endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = |args: &[&str]| crate::common::sleet_env(args, &env);
    let prefix = crate::common::unique_prefix("events-cli");
    let root = format!("s3://{BUCKET}/{prefix}/root");
    let registered = run(&[
        "register",
        &root,
        &format!("s3://{BUCKET}/{prefix}/db"),
        "--no-check",
    ]);
    assert!(
        registered.status.success(),
        "{}",
        crate::common::stderr(&registered)
    );
    let queue = prefix.replace(['/', '.'], "-");

    let dry = run(&["events", "setup", &root, "--queue", &queue, "--dry-run"]);
    let text = crate::common::stdout(&dry);
    assert!(dry.status.success(), "{}", crate::common::stderr(&dry));
    assert!(
        text.contains("would be created") && text.contains("<Value>.manifest</Value>"),
        "{text}"
    );
    let sqs = Sqs::new(calls(), &endpoint);
    assert_eq!(
        sqs.queue_url(&queue).await.unwrap(),
        None,
        "a dry run creates nothing"
    );

    let setup = run(&["events", "setup", &root, "--queue", &queue]);
    let text = crate::common::stdout(&setup);
    assert!(setup.status.success(), "{}", crate::common::stderr(&setup));
    let url = sqs.queue_url(&queue).await.unwrap().expect("the queue");
    assert!(text.contains(&format!("queue_url = \"{url}\"")), "{text}");
    assert!(
        text.contains(&format!(
            "bucket {BUCKET}: new *.manifest objects notify the queue"
        )),
        "{text}"
    );

    let write_events = |queue_url: &str| {
        let root = root.clone();
        let queue_url = queue_url.to_string();
        let endpoint = endpoint.clone();
        async move {
            let store = crate::common::s3_store(&endpoint);
            let toml = format!("[events]\nsource = \"sqs\"\nqueue_url = \"{queue_url}\"\n");
            let path = object_store::path::Path::from(format!(
                "{}/sleet.toml",
                root.trim_start_matches(&format!("s3://{BUCKET}/"))
            ));
            object_store::ObjectStoreExt::put(store.as_ref(), &path, toml.into())
                .await
                .unwrap();
        }
    };
    write_events(&url).await;
    let check = run(&["events", "check", &root]);
    let text = crate::common::stdout(&check);
    assert!(
        check.status.success(),
        "{text}{}",
        crate::common::stderr(&check)
    );
    assert!(
        text.contains("event arrived after") && text.contains("received by sleet events check"),
        "{text}"
    );

    // The control: a queue nothing notifies.
    let silent = sqs.create_queue(&format!("{queue}-silent")).await.unwrap();
    write_events(&silent).await;
    let check = run(&["events", "check", &root, "--timeout", "3s"]);
    let text = crate::common::stdout(&check);
    assert_eq!(check.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAILED: no event within 3s: is the bucket notification set"),
        "{text}"
    );
    set_notifications(&sqs, &endpoint, EMPTY_NOTIFICATIONS).await;
    for queue_url in [url, silent] {
        sqs.delete_queue(&queue_url).await.unwrap();
    }
}

impl TestQueue {
    /// Posts `body` to the queue, as the store would a notification.
    async fn post(&self, body: &str) {
        self.sqs
            .call(
                "SendMessage",
                serde_json::json!({"QueueUrl": self.url, "MessageBody": body}),
            )
            .await
            .expect("SendMessage");
    }

    /// Waits until the queue holds no message, visible or in flight:
    /// the node has received and deleted every one.
    async fn until_consumed(&self) {
        poll_until(
            Duration::from_secs(30),
            "the node to consume the queue",
            || async {
                let reply = self
                    .sqs
                    .call(
                        "GetQueueAttributes",
                        serde_json::json!({"QueueUrl": self.url, "AttributeNames": [
                            "ApproximateNumberOfMessages",
                            "ApproximateNumberOfMessagesNotVisible"
                        ]}),
                    )
                    .await
                    .ok()?;
                let attributes = reply.get("Attributes")?.as_object()?;
                attributes
                    .values()
                    .all(|n| n.as_str() == Some("0"))
                    .then_some(())
            },
        )
        .await;
    }
}

/// An S3 notification of `key` in `bucket`, as the store sends it
/// (`ObjectCreated:Put` unless `event` says otherwise).
fn notification(bucket: &str, key: &str, event: &str) -> String {
    serde_json::json!({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "eventName": event,
        "s3": {"bucket": {"name": bucket}, "object": {"key": key, "size": 1}}
    }]})
    .to_string()
}

/// The requests the nodes sent the database bucket since `before`
/// (canaries left out).
fn requests_since(
    counting: &CountingStore,
    before: &std::collections::BTreeMap<String, u64>,
) -> u64 {
    counting
        .by_kind()
        .into_iter()
        .filter(|(kind, _)| !kind.ends_with(".sleet-events-check"))
        .map(|(kind, n)| n - before.get(&kind).copied().unwrap_or(0))
        .sum()
}

/// Duplicate, late and foreign events change nothing but cost. Posted
/// to the queue by hand, as a store, a replaying queue or another fleet
/// would send them: notifications of another bucket, of an unregistered
/// database, of a database's other objects and deletions, a check marker
/// in a bucket of no registered database, a test event and junk; then,
/// once a genuine flush has woken and compacted the database, twenty
/// copies of its newest manifest's event and five of its oldest. The
/// database's compactor epoch (it moves at every coordinator start), its
/// shape and its data stay as they were, events keep flowing, and a
/// foreign marker is not acknowledged. The control: the genuine event,
/// the same way in, does move the epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicate_late_and_foreign_events_change_nothing_but_cost() {
    let Some(endpoint) = endpoint() else { return };
    let _alone = crate::HEAVY.lock().await;
    let queue = TestQueue::new(&endpoint, "events-replayed").await;
    let cluster = Cluster::on_s3(&wake_toml(&queue), &endpoint).await;
    let (mut cluster, counting) = cluster.with_counting(&endpoint);
    let url = cluster.db_url("replayed");
    let prefix = url
        .strip_prefix(&format!("s3://{BUCKET}/"))
        .unwrap()
        .to_string();
    flush_one_key(&url, 0).await;
    cluster.fleet.register(&url).await.unwrap();
    cluster.spawn("r1");
    poll_until(Duration::from_secs(30), "events to flow", || async {
        (events_flow(&cluster).await == Some(true)).then_some(())
    })
    .await;
    // The first looks run the services for `sleep_after` (2 s), and the
    // coordinator's start moves the epoch once.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let settled = (db::compactor_epoch(&url).await, db::shape(&url).await);

    let manifest = |id: u64| format!("{prefix}/manifest/{id:020}.manifest");
    let foreign = [
        notification("elsewhere", &manifest(99), "ObjectCreated:Put"),
        notification(
            BUCKET,
            &format!("{prefix}-unregistered/manifest/{:020}.manifest", 1),
            "ObjectCreated:Put",
        ),
        notification(
            BUCKET,
            &format!("{prefix}/wal/{:020}.sst", 1),
            "ObjectCreated:Put",
        ),
        notification(
            BUCKET,
            &format!("{prefix}/compacted/x.manifest"),
            "ObjectCreated:Put",
        ),
        notification(BUCKET, &manifest(1), "ObjectRemoved:Delete"),
        notification(
            "elsewhere",
            ".sleet-events-check/forged-1.manifest",
            "ObjectCreated:Put",
        ),
        r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"elsewhere"}"#.to_string(),
        "not json".to_string(),
    ];
    let before = counting.by_kind();
    for body in &foreign {
        queue.post(body).await;
    }
    queue.until_consumed().await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    eprintln!(
        "events: {} foreign messages cost {} requests at the database bucket",
        foreign.len(),
        requests_since(&counting, &before)
    );
    assert_eq!(
        (db::compactor_epoch(&url).await, db::shape(&url).await),
        settled,
        "foreign events changed the database"
    );
    assert_eq!(
        events_flow(&cluster).await,
        Some(true),
        "foreign events stopped the flow"
    );
    let root = cluster.fleet.root();
    let acks: Vec<String> = futures::TryStreamExt::try_collect::<Vec<_>>(
        root.store()
            .list(Some(&root.path(sleet::services::events::check::ACK_DIR))),
    )
    .await
    .unwrap()
    .into_iter()
    .map(|meta| meta.location.to_string())
    .collect();
    assert!(
        !acks.iter().any(|a| a.contains("forged-1")),
        "a marker in a bucket of no registered database was acknowledged: {acks:?}"
    );

    // The control: a genuine flush to the trigger, its event the same way
    // in, wakes the coordinator (the epoch moves) and it compacts.
    flush_one_key(&url, 1).await;
    poll_until(
        Duration::from_secs(30),
        "the genuine event's compaction",
        || async { (db::shape(&url).await.1 > 0).then_some(()) },
    )
    .await;
    let woken = db::compactor_epoch(&url).await;
    assert!(
        woken > settled.0,
        "the genuine event did not start the coordinator"
    );
    // Asleep again, and every manifest event of the wake consumed.
    tokio::time::sleep(Duration::from_secs(10)).await;
    queue.until_consumed().await;
    let awake_then = (db::compactor_epoch(&url).await, db::shape(&url).await);

    let manifests = db::objects(&url, "manifest").await;
    let (oldest, newest) = (
        manifests.first().unwrap().clone(),
        manifests.last().unwrap().clone(),
    );
    let before = counting.by_kind();
    for _ in 0..20 {
        let key = format!("{prefix}/manifest/{newest}");
        queue
            .post(&notification(BUCKET, &key, "ObjectCreated:Put"))
            .await;
    }
    for _ in 0..5 {
        let key = format!("{prefix}/manifest/{oldest}");
        queue
            .post(&notification(BUCKET, &key, "ObjectCreated:Put"))
            .await;
    }
    queue.until_consumed().await;
    // The nudged looks: 0.5, 1, 2 and 4 s after the nudge.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let cost = requests_since(&counting, &before);
    eprintln!("events: 25 duplicate and late events cost {cost} requests at the database bucket");
    // However many copies arrive, each service takes its few nudged looks
    // (0.5, 1, 2, 4 s): about 40 requests here. Were each copy a wake, the
    // coordinator would start and the cost pass 600.
    assert!(
        cost <= 100,
        "25 duplicate and late events cost {cost} requests"
    );
    assert_eq!(
        (db::compactor_epoch(&url).await, db::shape(&url).await),
        awake_then,
        "duplicate or late events changed the database"
    );
    assert_eq!(events_flow(&cluster).await, Some(true));
    reads_back_both_flushes(&url).await;
    cluster.stop("r1").await;
    queue.delete(&endpoint).await;
}
