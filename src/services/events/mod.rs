//! Wake on the store's events: a database's writer creates a new
//! `manifest/*.manifest` object at every flush that matters, and a bucket
//! notification of it (S3 to an SQS queue, set up by `sleet events
//! setup`) wakes the database within a second instead of at its next
//! look.
//!
//! Every node long-polls the queue. SQS hands each message to one of
//! them, which is rarely the node that runs the database's services: the
//! receiver nudges the services it runs itself and leaves a marker under
//! the fleet root for the rest (`idle::wakes`), which every node lists
//! every `relay_interval` while events flow. The receiver deletes the
//! message once it has acted.
//!
//! Polling stays as the safety net. While receives succeed, idle looks
//! back off to `safety_interval` (`idle::flow`): the longest a lost or
//! late notification delays a wake-up. When receives keep failing for
//! [`RECEIVE_GRACE`] (the queue was deleted, credentials expired, the
//! endpoint is down) the node falls back to `probe_max`, says so in its
//! metrics, status and log, and returns to the safety interval at the
//! first receive that succeeds. One failed receive is not a fallback: the
//! queue keeps its messages, so a receive that errs once loses nothing,
//! and falling back sends every idle look of the node at once to a store
//! that may be what made the receive fail (see [`ReceiveHealth`]).
//!
//! A queue that answers proves nothing of the notifications that feed it
//! (a bucket's configuration replaced, a policy changed), so a receiving
//! node also proves the whole path: every half `safety_interval` it writes
//! a canary object into each bucket its databases live in (the marker of
//! `sleet events check`, under `.sleet-events-check/`) and waits for its
//! event, acknowledged by whichever node receives it. Events count as
//! flowing only while receives succeed and the last canaries arrived.
//!
//! [`notification`] decides what a message means; the loop here is its
//! shell.

pub mod check;
pub mod notification;
pub mod setup;
pub mod sqs;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::fleet::root::FleetRoot;
pub use crate::model::policy::EventsSettings;
use crate::observe::metrics::Metrics;
use crate::services::idle::wakes::WakeSignals;
use notification::DatabaseIndex;
use sqs::{LONG_POLL, QueueAddress, Sqs};

/// The first wait before receiving again after a failure; it doubles up
/// to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// How long receives must keep failing before the node falls back to
/// polling: the retries after a first failure (1, 2, 4 and 8 s apart)
/// fit in it, so one failure that the next retry clears is no fallback.
pub const RECEIVE_GRACE: Duration = Duration::from_secs(15);

/// Whether receives are failing long enough to fall back: the pure
/// decision the receive loop follows. At 1,000 databases on an overloaded
/// S3 server a single failed receive used to fall back at once: every
/// idle look (3,000) came due within `probe_max`, then backed off to
/// the safety interval again, five LISTs each, on the store whose
/// overload had failed the receive.
#[derive(Debug, Default)]
pub struct ReceiveHealth {
    failing_since: Option<tokio::time::Instant>,
}

impl ReceiveHealth {
    /// A receive succeeded.
    pub fn succeeded(&mut self) {
        self.failing_since = None;
    }

    /// A receive failed at `now`: whether to fall back (receives have
    /// failed for [`RECEIVE_GRACE`] without one succeeding).
    pub fn failed(&mut self, now: tokio::time::Instant) -> bool {
        let since = *self.failing_since.get_or_insert(now);
        now.duration_since(since) >= RECEIVE_GRACE
    }
}

/// The longest a canary waits for its event.
const CANARY_WAIT: Duration = Duration::from_secs(30);
/// Buckets one round of canaries checks at most.
const CANARY_BUCKETS: usize = 16;

/// The store of a registered database (rooted at its bucket), as the
/// node opens it: canaries are written through it.
pub type StoreOf = Arc<dyn Fn(&str) -> Option<Arc<dyn object_store::ObjectStore>> + Send + Sync>;

/// Why events do not flow, by source: the queue, and the canaries.
#[derive(Debug)]
struct Problems {
    receive: Option<String>,
    canary: Option<String>,
}

impl Default for Problems {
    fn default() -> Self {
        Problems {
            receive: Some("no receive has succeeded yet".into()),
            canary: Some("no canary event has arrived yet".into()),
        }
    }
}

/// What a node reports of its events (in its heartbeat and `/status`).
pub use crate::model::heartbeat::EventsReport as EventsState;

/// A node's event source: started, restarted and stopped as the config
/// changes, fed the registered databases as the registry changes.
pub struct EventSource {
    node: NodeSide,
    index: watch::Sender<Arc<DatabaseIndex>>,
    running: Option<(EventsSettings, CancellationToken)>,
    /// Whether this node long-polls the queue; one that does not lists
    /// `wakes/` every `relay_interval` all the same, and polls.
    receives: bool,
}

impl EventSource {
    pub fn new(
        root: FleetRoot,
        node_id: String,
        wakes: WakeSignals,
        metrics: Arc<Metrics>,
        store_of: StoreOf,
    ) -> EventSource {
        EventSource {
            node: NodeSide {
                root,
                node_id,
                wakes,
                metrics,
                store_of,
                state: Arc::new(Mutex::new(EventsState::default())),
            },
            index: watch::Sender::new(Arc::new(DatabaseIndex::default())),
            running: None,
            receives: true,
        }
    }

    /// Whether this node receives from the queue (see `NodeOptions::with_event_receiver`).
    pub fn receiving(mut self, receives: bool) -> EventSource {
        self.receives = receives;
        self
    }

    /// The state to report; `None` when no source is configured, or
    /// this node does not receive (it polls, by choice).
    pub fn state(&self) -> Option<EventsState> {
        self.running
            .as_ref()
            .filter(|_| self.receives)
            .map(|_| lock(&self.node.state).clone())
    }

    /// Routes events to these databases from now on.
    pub fn set_databases(&self, index: DatabaseIndex) {
        self.index.send_if_modified(|now| {
            let changed = **now != index;
            if changed {
                *now = Arc::new(index);
            }
            changed
        });
    }

    /// Runs the source `settings` describe (none: stops it).
    pub fn reconcile(&mut self, settings: Option<EventsSettings>) {
        if self.running.as_ref().map(|(s, _)| s) == settings.as_ref() {
            return;
        }
        if let Some((_, token)) = self.running.take() {
            token.cancel();
        }
        self.node.wakes.flow().set(None);
        self.node.metrics.node.events_flowing.set(0);
        *lock(&self.node.state) = EventsState::default();
        let Some(settings) = settings else {
            return;
        };
        let token = CancellationToken::new();
        let consumer = Consumer {
            node: self.node.clone(),
            settings: settings.clone(),
            index: self.index.subscribe(),
            problems: Arc::new(Mutex::new(Problems::default())),
            token: token.clone(),
        };
        if self.receives {
            info!(queue = %settings.queue_url, "receiving store events");
            tokio::spawn(consumer.clone().receive(token.clone()));
            tokio::spawn(consumer.clone().canaries(token.clone()));
        } else {
            info!("acting on store events other nodes receive");
        }
        tokio::spawn(consumer.relay(token.clone(), !self.receives));
        self.running = Some((settings, token));
    }
}

impl Drop for EventSource {
    fn drop(&mut self) {
        if let Some((_, token)) = self.running.take() {
            token.cancel();
        }
    }
}

/// What the source and its tasks share of the node.
#[derive(Clone)]
struct NodeSide {
    root: FleetRoot,
    node_id: String,
    wakes: WakeSignals,
    metrics: Arc<Metrics>,
    store_of: StoreOf,
    state: Arc<Mutex<EventsState>>,
}

#[derive(Clone)]
struct Consumer {
    node: NodeSide,
    settings: EventsSettings,
    index: watch::Receiver<Arc<DatabaseIndex>>,
    problems: Arc<Mutex<Problems>>,
    /// Cancelled when the source stops or its settings change: a stopped
    /// consumer reports nothing more (its successor does).
    token: CancellationToken,
}

impl Consumer {
    /// Long-polls the queue until `token` is cancelled.
    async fn receive(self, token: CancellationToken) {
        let sqs = QueueAddress::parse(&self.settings.queue_url)
            .map_err(|why| format!("events.queue_url {:?}: {why}", self.settings.queue_url))
            .and_then(|queue| Sqs::for_queue(&queue).map_err(|e| e.to_string()));
        let sqs = match sqs {
            Ok(sqs) => sqs,
            Err(problem) => {
                self.report(|p| p.receive = Some(problem));
                return;
            }
        };
        let url = &self.settings.queue_url;
        let mut retry = RETRY_MIN;
        let mut health = ReceiveHealth::default();
        loop {
            self.node.metrics.node.event_queue_requests.inc();
            let received = tokio::select! {
                biased;
                () = token.cancelled() => break,
                received = sqs.receive(url, LONG_POLL) => received,
            };
            match received {
                Ok(messages) => {
                    retry = RETRY_MIN;
                    health.succeeded();
                    self.report(|p| p.receive = None);
                    self.act_on(&messages);
                    if !messages.is_empty() {
                        self.node.metrics.node.event_queue_requests.inc();
                    }
                    if let Err(e) = sqs.delete(url, &messages).await {
                        // They come back after the visibility timeout:
                        // duplicates cost only a look.
                        debug!("could not delete received events: {e}");
                    }
                }
                Err(e) => {
                    self.node.metrics.node.event_receive_failures.inc();
                    let problem = format!("receiving from {url}: {e}");
                    if health.failed(tokio::time::Instant::now()) {
                        self.report(|p| p.receive = Some(problem));
                    } else {
                        debug!("{problem}; trying again in {}s", retry.as_secs());
                    }
                    tokio::select! {
                        biased;
                        () = token.cancelled() => break,
                        () = tokio::time::sleep(retry) => {}
                    }
                    retry = (retry * 2).min(RETRY_MAX);
                }
            }
        }
    }

    /// Wakes the databases the messages name, and acknowledges the
    /// markers of `sleet events check`.
    fn act_on(&self, messages: &[sqs::Message]) {
        self.node
            .metrics
            .node
            .event_messages
            .inc_by(messages.len() as u64);
        let routed = self
            .index
            .borrow()
            .route(messages.iter().map(|m| m.body.as_str()));
        for token in routed.checks {
            let (root, node) = (self.node.root.clone(), self.node.node_id.clone());
            tokio::spawn(async move { check::acknowledge(&root, &token, &node).await });
        }
        for database in routed.databases {
            self.node.metrics.node.event_wakes.inc();
            debug!(%database, "event: a new manifest");
            self.node.wakes.event(&database);
        }
    }

    /// Every half safety interval, a canary into each bucket (see the
    /// module doc); a canary that does not arrive stops the flow until
    /// one does.
    async fn canaries(self, token: CancellationToken) {
        let every = self.settings.safety_interval / 2;
        let wait = CANARY_WAIT.min(every);
        loop {
            let buckets = self.index.borrow().one_per_bucket(CANARY_BUCKETS);
            let mut problem = None;
            for (bucket, database) in buckets {
                let Some(store) = (self.node.store_of)(&database) else {
                    continue;
                };
                let how = check::Arrival::Acknowledged;
                let probe =
                    check::probe_bucket(&self.node.root, store.as_ref(), &bucket, how, wait);
                let probed = tokio::select! {
                    biased;
                    () = token.cancelled() => return,
                    probed = probe => probed,
                };
                if let Some(why) = probed.problem {
                    problem = Some(format!(
                        "the canary event of s3://{bucket} did not arrive: {why}"
                    ));
                    break;
                }
                debug!(%bucket, after = ?probed.arrived_after_secs, "canary event arrived");
            }
            self.report(|p| p.canary = problem);
            match check::sweep_stale_acks(&self.node.root).await {
                Ok(0) => {}
                Ok(swept) => debug!(swept, "deleted stale events-check acknowledgements"),
                Err(e) => debug!("could not sweep events-check acknowledgements: {e}"),
            }
            tokio::select! {
                biased;
                () = token.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    }

    /// Updates why events do not flow, and publishes whether they do (in
    /// the flow the idle looks follow, the metrics and the state the
    /// heartbeat reports), logging a change.
    fn report(&self, update: impl FnOnce(&mut Problems)) {
        if self.token.is_cancelled() {
            return;
        }
        let problem = {
            let mut problems = lock(&self.problems);
            update(&mut problems);
            problems.receive.clone().or_else(|| problems.canary.clone())
        };
        let flowing = problem.is_none();
        let was = std::mem::replace(
            &mut *lock(&self.node.state),
            EventsState {
                flowing,
                problem: problem.clone(),
            },
        );
        self.node
            .wakes
            .flow()
            .set(flowing.then_some(self.settings.safety_interval));
        self.node
            .metrics
            .node
            .events_flowing
            .set(i64::from(flowing));
        match (was.flowing, problem) {
            (false, None) => info!(
                "store events flow: idle databases are looked at every {}",
                crate::model::duration::HumanDuration(self.settings.safety_interval)
            ),
            (true, Some(problem)) => {
                warn!(
                    "{problem}; idle databases are polled at their usual cadence until events flow again"
                )
            }
            // Starting: the first receive and canary are on their way.
            (false, Some(problem)) if was.problem.is_none() => info!("store events: {problem}"),
            (false, Some(problem)) if was.problem.as_ref() != Some(&problem) => warn!("{problem}"),
            _ => {}
        }
    }

    /// While events flow (`always`: whether or not), lists `wakes/` every
    /// `relay_interval`: events another node received for databases this
    /// node runs.
    async fn relay(self, token: CancellationToken, always: bool) {
        let mut ticker = tokio::time::interval(self.settings.relay_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = token.cancelled() => return,
                _ = ticker.tick() => {}
            }
            if !always && self.node.wakes.flow().safety().is_none() {
                continue;
            }
            match tokio::time::timeout(self.settings.relay_interval * 10, self.node.wakes.relay())
                .await
            {
                Ok(Ok(nudged)) if nudged > 0 => debug!(nudged, "relayed wakes"),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => debug!("{e}"),
                Err(_) => debug!("listing wake markers timed out"),
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure the next retries clear is no fallback; failures for the
    /// whole grace are, and a success starts the grace afresh. The
    /// control: with no grace (the first failure falls back), the first
    /// assertion fails.
    #[test]
    fn only_receives_failing_for_the_grace_fall_back() {
        let start = tokio::time::Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let mut health = ReceiveHealth::default();
        assert!(!health.failed(at(0)), "one failure");
        assert!(!health.failed(at(1)));
        assert!(!health.failed(at(3)));
        health.succeeded();
        assert!(!health.failed(at(7)), "the grace starts again");
        assert!(!health.failed(at(15)));
        assert!(health.failed(at(22)), "failing for 15 s");
        assert!(health.failed(at(52)), "still failing");
        health.succeeded();
        assert!(!health.failed(at(53)));
    }
}
