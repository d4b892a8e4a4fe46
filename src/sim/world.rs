//! The simulated world: the store, the clock, the nodes (what survives
//! their crashes and what does not), the databases and their writers,
//! and what the driver and the fault mix do to them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::app::{App, WriterKind};
use super::check::Violation;
use super::clock::{SimClock, Skew};
use super::store::{NodeStore, PauseGate, SimStore};
use super::swarm::Timings;
use super::trace::Trace;
use crate::Fleet;
use crate::daemon::{DatabaseOpener, NodeOptions};
use crate::fleet::database::{DatabaseHandle, Replay, ServiceStores, derived_seed};
use crate::fleet::root::FleetRoot;
use crate::model::coverage::{self, Mark};
use crate::model::placement::fnv1a;
use crate::model::registry::canonicalize_database_url;
use crate::observe::metrics::Metrics;
use crate::observe::probes::NodeProbes;
use crate::testing::Chaos;

/// The fleet root's URL, and the bucket every database lives in. Nothing
/// leaves the process: every node opens them on the simulated store.
pub(super) const ROOT_URL: &str = "s3://sim-root/fleet";
pub(super) const DATA_BUCKET: &str = "s3://sim-data";
/// Where databases mirror to (`s3://sim-mirror/db003` for `db003`), and
/// the target's name.
pub(super) const MIRROR_BUCKET: &str = "s3://sim-mirror";
pub(super) const MIRROR_TARGET: &str = "dr";
/// How long the mirror keeps restore points.
pub(super) const MIRROR_KEEP: Duration = Duration::from_secs(240);

/// One simulated node: what survives its crashes (id, clock) and what
/// does not (its task, pause and probes).
pub(super) struct SimNode {
    pub(super) id: String,
    pub(super) skew: Arc<Skew>,
    pub(super) run: Option<NodeRun>,
    /// When its pause began, while it is paused.
    pub(super) paused_since: Option<tokio::time::Instant>,
}

impl SimNode {
    /// Pauses the node, or resumes it: a node with a skewed clock back
    /// from a pause past the heartbeat timeout is a mark.
    pub(super) fn toggle_pause(&mut self, timings: &Timings) -> Option<&'static str> {
        let run = self.run.as_ref()?;
        if !run.pause.is_paused() {
            run.pause.pause();
            self.paused_since = Some(tokio::time::Instant::now());
            return Some("pause");
        }
        run.pause.resume();
        let timeout = timings
            .heartbeat_timeout
            .unwrap_or(crate::config::defaults::HEARTBEAT_TIMEOUT);
        let away = self.paused_since.take().map(|at| at.elapsed());
        if away.is_some_and(|away| away >= timeout) && self.skew.millis().abs() >= 1_000 {
            coverage::hit(Mark::SkewedNodeAgedOut);
        }
        Some("resume")
    }
}

pub(super) struct NodeRun {
    pub(super) handle: JoinHandle<Result<(), crate::Error>>,
    pub(super) shutdown: CancellationToken,
    pub(super) pause: Arc<PauseGate>,
    pub(super) probes: Arc<NodeProbes>,
}

pub(super) struct World {
    pub(super) clock: SimClock,
    pub(super) store: Arc<SimStore>,
    pub(super) trace: Arc<Trace>,
    pub(super) chaos: Chaos,
    pub(super) seed: u64,
    /// Node starts so far: each gets its own draws.
    pub(super) starts: u64,
    /// The checker's root: no faults, no pause.
    pub(super) root: FleetRoot,
    /// Registered databases by index, with their registry files.
    pub(super) databases: BTreeMap<usize, String>,
    pub(super) next_database: usize,
    /// Whether the config now limits databases to GC and coordinator.
    pub(super) narrowed: bool,
    /// Each database's application (kept when the database is removed
    /// from the fleet: its users still write).
    pub(super) apps: BTreeMap<usize, App>,
    pub(super) writers: bool,
    /// Restores the mirror check made so far: each gets a fresh root.
    pub(super) restores: u64,
    /// The fleet's timings in its config (a swarm seed's).
    pub(super) timings: Timings,
    /// The database whose mirror destination another fleet holds, if any
    /// (`sim::foreign`): no restore of it is judged.
    pub(super) foreign: Option<usize>,
    /// Whether the writers are busy (a swarm seed's; `sim::app`).
    pub(super) busy_writers: bool,
}

impl World {
    pub(super) fn note(&self, event: impl AsRef<str>) {
        self.trace
            .record(self.clock.millis(), format!("sim {}", event.as_ref()));
    }

    /// Adds what a check `found` to `violations`, each in the trace too.
    pub(super) fn judged(&self, found: Vec<Violation>, violations: &mut Vec<Violation>) {
        for violation in &found {
            self.note(format!("violation {violation}"));
        }
        violations.extend(found);
    }

    pub(super) fn draw(&mut self, below: u64) -> u64 {
        self.chaos.draw() % below.max(1)
    }

    pub(super) async fn write_config(&self) {
        let services = if self.narrowed {
            "services = [\"gc\", \"compactor-coordinator\"]\n"
        } else {
            ""
        };
        // With writers, every database mirrors to its own destination
        // under MIRROR_BUCKET, keeping 4 minutes of restore points, so
        // passes, the WAL tail and prunes all run within a run.
        let mirror = if self.writers {
            format!(
                "\n[database.mirror.targets.{MIRROR_TARGET}]\nurl = \"{MIRROR_BUCKET}\"\n\
                 source_prefix = \"{DATA_BUCKET}\"\nmin_age = \"1m\"\n\
                 retention.keep = \"{}s\"\n{}",
                MIRROR_KEEP.as_secs(),
                self.timings.mirror_lines()
            )
        } else {
            String::new()
        };
        // The simulated stores are trusted: their checks run (and prove
        // the in-memory store's conditional writes) but the check's clock
        // probe reads the machine's clock, not the simulation's.
        let text = format!(
            "{}[stores.trusted]\n\"s3://sim-root\" = \"simulated\"\n\"{DATA_BUCKET}\" = \
             \"simulated\"\n\"{MIRROR_BUCKET}\" = \"simulated\"\n\n[database]\n{services}{}{mirror}",
            self.timings.node_table(),
            self.timings.gc_tables(),
        );
        let path = self.root.path(crate::fleet::root::CONFIG_FILE);
        self.root
            .store()
            .put(&path, PutPayload::from(text.into_bytes()))
            .await
            .expect("the checker's writes never fail");
    }

    pub(super) async fn register(&mut self, index: usize) {
        let url = database_url(index);
        let registered = self
            .root
            .register(&url)
            .await
            .expect("the checker's writes never fail");
        self.databases.insert(index, registered.file);
        self.note(format!("register {url}"));
        if self.writers && !self.apps.contains_key(&index) {
            // One writer in three runs SlateDB's defaults.
            let kind = if self.draw(3) == 0 {
                WriterKind::Defaults
            } else {
                WriterKind::Detached
            };
            let seed = self.seed ^ fnv1a(url.as_bytes());
            let app = App::start(
                url.clone(),
                database_path(&url),
                (kind, self.busy_writers),
                &self.store,
                &self.clock,
                &self.trace,
                seed,
            );
            self.note(format!("app {url} {kind:?}"));
            self.apps.insert(index, app);
        }
    }

    pub(super) async fn remove(&mut self, index: usize) {
        let file = self
            .databases
            .remove(&index)
            .expect("a registered database");
        self.root
            .store()
            .delete(&self.root.path(&file))
            .await
            .expect("the checker's writes never fail");
        self.note(format!("remove {}", database_url(index)));
    }

    pub(super) fn start(&mut self, node: &mut SimNode) {
        self.starts += 1;
        let pause = Arc::new(PauseGate::default());
        let seed = derived_seed(self.seed, self.starts);
        let store: Arc<dyn ObjectStore> = Arc::new(NodeStore::for_node(
            &self.store,
            &node.id,
            seed,
            pause.clone(),
        ));
        let root = FleetRoot::from_parts(
            ROOT_URL.to_string(),
            store.clone(),
            Path::from("sim-root/fleet"),
        );
        // SlateDB's services reach the store each through a view of its
        // own (`n1/gc`, ...), with the node's pause, so the trace and the
        // epoch check can tell a coordinator's manifest writes from GC's.
        let services: BTreeMap<&'static str, Arc<dyn ObjectStore>> =
            ["gc", "coordinator", "workers"]
                .into_iter()
                .map(|service| {
                    let view: Arc<dyn ObjectStore> = Arc::new(NodeStore::for_node(
                        &self.store,
                        &format!("{}/{service}", node.id),
                        seed ^ fnv1a(service.as_bytes()),
                        pause.clone(),
                    ));
                    (service, view)
                })
                .collect();
        let service_stores: ServiceStores = Arc::new(move |service| {
            services
                .get(service)
                .cloned()
                .expect("a simulated service's store")
        });
        let (clock, skew) = (self.clock.clone(), node.skew.clone());
        let opener: DatabaseOpener = Arc::new(move |url: &str| {
            let canonical = canonicalize_database_url(url)?;
            let path = database_path(&canonical);
            let replay = Replay {
                seed: seed ^ fnv1a(canonical.as_bytes()),
                // Like SlateDB's own clock: the node's wall time when the
                // database was opened, moved on monotonically.
                clock: clock.slatedb(skew.millis()),
                service_stores: Some(service_stores.clone()),
            };
            Ok(DatabaseHandle::replaying(
                canonical,
                store.clone(),
                path,
                replay,
            ))
        });
        let probes = Arc::new(NodeProbes::default());
        let options = NodeOptions::new(node.id.clone())
            .with_event_receiver(false)
            .with_max_mirror_jobs(1)
            .with_shutdown_grace(Duration::from_secs(5))
            .with_clock(self.clock.skewed(node.skew.clone()))
            .with_telemetry(Arc::new(Metrics::default()), probes.clone())
            .with_database_opener(opener);
        let shutdown = CancellationToken::new();
        let fleet = Fleet::from_root(root);
        let token = shutdown.clone();
        let handle = tokio::spawn(async move { fleet.run_node(options, token).await });
        node.run = Some(NodeRun {
            handle,
            shutdown,
            pause,
            probes,
        });
        self.note(format!("start {}", node.id));
    }
}

pub(super) fn database_url(index: usize) -> String {
    format!("{DATA_BUCKET}/db{index:03}")
}

/// Where the database of `index` mirrors to.
pub(super) fn mirror_url(index: usize) -> String {
    format!("{MIRROR_BUCKET}/db{index:03}")
}

/// Where a database lives in the simulated store.
pub(super) fn database_path(canonical_url: &str) -> Path {
    Path::from(canonical_url.trim_start_matches("s3://"))
}
