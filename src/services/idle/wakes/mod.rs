//! A coordinator that wakes a database tells the database's compaction
//! workers, so the job it queues does not wait for the workers' own next
//! look (up to `workers_probe`, a minute by default) while the database's
//! writer stalls at its L0 limit. A node that receives a store event for
//! a database (see `crate::services::events`) tells every service of it the same
//! way: the coordinator, the workers and GC, wherever they run.
//!
//! Services on the same node are nudged in memory. When the ones to tell
//! do not all run here, the node leaves a marker under the fleet root,
//! `wakes/<node-id>/<database>` (workers) or `wakes/<node-id>/all/
//! <database>` (every service, for an event), and every node lists
//! `wakes/` once a tick (every `relay_interval` while events flow): a node
//! that runs services of a marked database nudges them. Markers are
//! deleted by the node that wrote them once every live node has had time
//! to list them (`expiry`), and by any node once their writer's heartbeat
//! is gone. A lost marker or nudge costs only time: the services' own
//! looks still find the work.
//!
//! [`judge`] decides what a listing means; [`WakeSignals`] is its shell.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use percent_encoding::percent_decode_str;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::flow::EventFlow;
use crate::fleet::root::FleetRoot;
use crate::model::registry::encoded_name;

/// Where wake markers live under the fleet root.
pub const WAKES_DIR: &str = "wakes";

/// The most markers one listing acts on: wakes are rare and markers
/// short-lived, so more means junk under `wakes/`, which must not grow a
/// node's memory.
pub const MAX_MARKERS: usize = 10_000;

/// A database's service, as it listens for wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Coordinator,
    Workers,
    Gc,
}

/// Whom a wake tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tell {
    /// The workers: their coordinator woke and queues a job.
    Workers,
    /// Every service: a store event says the database changed.
    All,
}

impl Tell {
    fn reaches(self, role: Role) -> bool {
        self == Tell::All || role == Role::Workers
    }

    /// The marker name's segment before the database.
    fn segment(self) -> &'static str {
        match self {
            Tell::Workers => "",
            Tell::All => "all/",
        }
    }
}

/// One marker as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The node that wrote it.
    pub node_id: String,
    /// The database it wakes (its canonical URL).
    pub database: String,
    pub tell: Tell,
    pub last_modified: DateTime<Utc>,
}

impl Marker {
    /// The marker's name under `wakes/`.
    pub fn name(node_id: &str, tell: Tell, database: &str) -> String {
        format!("{node_id}/{}{}", tell.segment(), encoded_name(database))
    }

    /// The marker's path under the fleet root.
    pub fn relative(node_id: &str, tell: Tell, database: &str) -> String {
        format!("{WAKES_DIR}/{}", Marker::name(node_id, tell, database))
    }

    /// Parses a name under `wakes/`; `None` for anything else.
    pub fn parse(name: &str, last_modified: DateTime<Utc>) -> Option<Marker> {
        let (node_id, rest) = name.split_once('/')?;
        let (tell, encoded) = match rest.strip_prefix(Tell::All.segment()) {
            Some(encoded) => (Tell::All, encoded),
            None => (Tell::Workers, rest),
        };
        if !crate::model::ident::is_valid_identifier(node_id) || encoded.contains('/') {
            return None;
        }
        let database = percent_decode_str(encoded).decode_utf8().ok()?;
        Some(Marker {
            node_id: node_id.to_string(),
            database: database.into_owned(),
            tell,
            last_modified,
        })
    }

    fn key(&self) -> (String, Tell, String) {
        (self.node_id.clone(), self.tell, self.database.clone())
    }
}

/// `wakes/` could not be listed.
#[derive(Debug, thiserror::Error)]
#[error("listing {location}: {source}")]
pub struct ListError {
    location: String,
    source: object_store::Error,
}

/// What a node remembers of the markers it listed: each one's last
/// modification, and since when this node has seen it.
pub type Seen = HashMap<(String, Tell, String), (DateTime<Utc>, Instant)>;

/// What one listing means for this node.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Judged {
    /// Databases whose local services to nudge, and which: markers of
    /// other nodes that are new, or rewritten, since the last listing.
    pub nudge: BTreeSet<(String, Tell)>,
    /// Markers to delete: this node's, and those of nodes that are gone,
    /// once seen for `expiry`.
    pub delete: Vec<Marker>,
}

/// Judges a listing of `wakes/` against what the last one saw, and
/// updates `seen` to it (markers no longer listed are forgotten).
pub fn judge(
    listed: Vec<Marker>,
    seen: &mut Seen,
    own_id: &str,
    live: &BTreeSet<String>,
    now: Instant,
    expiry: Duration,
) -> Judged {
    let mut judged = Judged::default();
    let mut next = Seen::with_capacity(listed.len());
    for marker in listed {
        let key = marker.key();
        let since = match seen.get(&key) {
            Some((modified, since)) if *modified == marker.last_modified => *since,
            _ => {
                if marker.node_id != own_id {
                    judged.nudge.insert((marker.database.clone(), marker.tell));
                }
                now
            }
        };
        let ours_to_delete = marker.node_id == own_id || !live.contains(&marker.node_id);
        if ours_to_delete && now.saturating_duration_since(since) >= expiry {
            judged.delete.push(marker);
        } else {
            next.insert(key, (marker.last_modified, since));
        }
    }
    *seen = next;
    judged
}

/// The wake signals of one node: its workers' listeners, the markers it
/// writes, and what it last listed.
#[derive(Clone)]
pub struct WakeSignals {
    inner: Arc<Inner>,
}

struct Inner {
    root: FleetRoot,
    node_id: String,
    /// The services running on this node, by database.
    listeners: Mutex<HashMap<String, Listeners>>,
    next_listener: std::sync::atomic::AtomicU64,
    seen: Mutex<Seen>,
    /// The live nodes and marker expiry of the last tick's listing, for
    /// the listings between ticks.
    last_tick: Mutex<(BTreeSet<String>, Duration)>,
    /// When this node last left an event marker, by database, and whether
    /// another is due at the end of the gap: a burst of flushes makes a
    /// marker a gap, not one per flush.
    event_markers: Mutex<HashMap<String, (Instant, bool)>>,
    flow: EventFlow,
    grid_origin: Instant,
}

/// The services of one database on this node, each with its id.
type Listeners = Vec<(u64, Role, Arc<Notify>)>;

/// An event marker for a database is rewritten at most this often.
const EVENT_MARKER_GAP: Duration = Duration::from_secs(1);

/// A worker's ear for wakes of its database; it stops listening when
/// dropped.
pub struct WakeListener {
    signals: WakeSignals,
    database: String,
    id: u64,
    notify: Arc<Notify>,
}

impl WakeListener {
    /// Completes once the database was woken since the last completion.
    pub fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for WakeListener {
    fn drop(&mut self) {
        let mut listeners = lock(&self.signals.inner.listeners);
        if let Some(list) = listeners.get_mut(&self.database) {
            list.retain(|(id, ..)| *id != self.id);
            if list.is_empty() {
                listeners.remove(&self.database);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl WakeSignals {
    pub fn new(root: FleetRoot, node_id: impl Into<String>) -> Self {
        WakeSignals {
            inner: Arc::new(Inner {
                root,
                node_id: node_id.into(),
                listeners: Mutex::new(HashMap::new()),
                next_listener: std::sync::atomic::AtomicU64::new(0),
                seen: Mutex::new(Seen::new()),
                last_tick: Mutex::new((BTreeSet::new(), Duration::ZERO)),
                event_markers: Mutex::new(HashMap::new()),
                flow: EventFlow::default(),
                grid_origin: Instant::now(),
            }),
        }
    }

    /// Whether the store's events reach this node.
    pub fn flow(&self) -> &EventFlow {
        &self.inner.flow
    }

    /// Where the node's idle looks lay their grid from (see
    /// [`super::on_grid`]): when the node started.
    pub fn grid_origin(&self) -> Instant {
        self.inner.grid_origin
    }

    /// Listens for wakes of `database` as its `role` (a service does,
    /// while it runs).
    pub fn listen(&self, database: &str, role: Role) -> WakeListener {
        let id = self
            .inner
            .next_listener
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        lock(&self.inner.listeners)
            .entry(database.to_string())
            .or_default()
            .push((id, role, notify.clone()));
        WakeListener {
            signals: self.clone(),
            database: database.to_string(),
            id,
            notify,
        }
    }

    /// Nudges this node's listeners of `database` that `tell` reaches;
    /// the roles nudged.
    fn nudge(&self, database: &str, tell: Tell) -> BTreeSet<Role> {
        let listeners = lock(&self.inner.listeners);
        let Some(list) = listeners.get(database) else {
            return BTreeSet::new();
        };
        let mut nudged = BTreeSet::new();
        for (_, role, notify) in list.iter().filter(|(_, role, _)| tell.reaches(*role)) {
            // A permit is kept for a listener busy looking: not lost.
            notify.notify_one();
            nudged.insert(*role);
        }
        nudged
    }

    /// `database` woke: its workers here are nudged at once; if none runs
    /// here, a marker tells the node that runs them (written in the
    /// background: the coordinator does not wait for it). One nudged
    /// worker is enough, as any worker may take the job.
    pub fn woke(&self, database: &str) {
        if !self.nudge(database, Tell::Workers).is_empty() {
            debug!(%database, "woke: nudged the workers on this node");
            return;
        }
        self.leave_marker(database, Tell::Workers);
    }

    /// A store event says `database` changed: its services here are
    /// nudged at once; unless its coordinator and workers both run here,
    /// a marker tells the nodes that run them (at most one per
    /// [`EVENT_MARKER_GAP`] for a database, the last event of a burst
    /// included).
    pub fn event(&self, database: &str) {
        let nudged = self.nudge(database, Tell::All);
        if nudged.contains(&Role::Coordinator) && nudged.contains(&Role::Workers) {
            debug!(%database, "event: nudged its services on this node");
            return;
        }
        // At most one marker per gap: events during it leave one more
        // at its end, so the last of a burst is never dropped.
        let now = Instant::now();
        let due = {
            let mut markers = lock(&self.inner.event_markers);
            markers.retain(|_, (at, pending)| {
                *pending || now.saturating_duration_since(*at) < EVENT_MARKER_GAP
            });
            match markers.get_mut(database) {
                Some((_, true)) => return,
                Some((at, pending)) => {
                    *pending = true;
                    *at + EVENT_MARKER_GAP
                }
                None => {
                    markers.insert(database.to_string(), (now, false));
                    now
                }
            }
        };
        if due <= now {
            self.leave_marker(database, Tell::All);
            return;
        }
        let (signals, database) = (self.clone(), database.to_string());
        tokio::spawn(async move {
            tokio::time::sleep_until(due).await;
            lock(&signals.inner.event_markers).insert(database.clone(), (Instant::now(), false));
            signals.leave_marker(&database, Tell::All);
        });
    }

    /// Writes a marker in the background: the caller does not wait.
    fn leave_marker(&self, database: &str, tell: Tell) {
        let relative = Marker::relative(&self.inner.node_id, tell, database);
        let root = self.inner.root.clone();
        let database = database.to_string();
        tokio::spawn(async move {
            let put = root.store().put(&root.path(&relative), "".into()).await;
            match put {
                Ok(_) => debug!(%database, ?tell, "marker written for its services on other nodes"),
                Err(e) => warn!(
                    "could not write {}: {e}; the services of {database} find its work at their own next look",
                    root.describe(&relative)
                ),
            }
        });
    }

    /// [`WakeSignals::collect`] between ticks, with the last tick's live
    /// nodes and expiry (while events flow, every `relay_interval`).
    pub async fn relay(&self) -> Result<usize, ListError> {
        let (live, expiry) = lock(&self.inner.last_tick).clone();
        if live.is_empty() {
            return Ok(0);
        }
        self.collect_with(&live, expiry).await
    }

    /// Lists `wakes/` once: nudges this node's workers of databases other
    /// nodes woke, and deletes markers that have served (see [`judge`]).
    /// `live` are the node ids with a live heartbeat. Returns how many
    /// databases were nudged.
    pub async fn collect(
        &self,
        live: &BTreeSet<String>,
        expiry: Duration,
    ) -> Result<usize, ListError> {
        *lock(&self.inner.last_tick) = (live.clone(), expiry);
        self.collect_with(live, expiry).await
    }

    async fn collect_with(
        &self,
        live: &BTreeSet<String>,
        expiry: Duration,
    ) -> Result<usize, ListError> {
        let root = &self.inner.root;
        let prefix = root.path(WAKES_DIR);
        let listed: Vec<Marker> = root
            .store()
            .list(Some(&prefix))
            .take(MAX_MARKERS)
            .try_filter_map(|meta| {
                let relative = root.relative(&meta.location);
                let name = relative
                    .strip_prefix(WAKES_DIR)
                    .and_then(|n| n.strip_prefix('/'));
                futures::future::ready(Ok(name.and_then(|n| Marker::parse(n, meta.last_modified))))
            })
            .try_collect()
            .await
            .map_err(|source| ListError {
                location: root.describe(&format!("{WAKES_DIR}/")),
                source,
            })?;
        let judged = {
            let mut seen = lock(&self.inner.seen);
            judge(
                listed,
                &mut seen,
                &self.inner.node_id,
                live,
                Instant::now(),
                expiry,
            )
        };
        let nudged = judged
            .nudge
            .iter()
            .filter(|(database, tell)| !self.nudge(database, *tell).is_empty())
            .count();
        for marker in judged.delete {
            let relative = Marker::relative(&marker.node_id, marker.tell, &marker.database);
            match root.store().delete(&root.path(&relative)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => debug!("could not delete {}: {e}", root.describe(&relative)),
            }
        }
        Ok(nudged)
    }
}

#[cfg(test)]
mod tests;
