//! How a node is asked to run: its id, the services it offers, and what
//! it is handed (copiers, plugins, telemetry, and for tests a clock and a
//! database opener).

use std::sync::Arc;
use std::time::Duration;

use super::error::NodeError;
use crate::fleet::database::{DatabaseError, DatabaseHandle};
use crate::mirror::copier::CopierOptions;
use crate::model::heartbeat::validate_node_id;
use crate::model::service::{Service, first_duplicate};
use crate::observe::metrics::Metrics;
use crate::observe::probes::NodeProbes;
use crate::plugin::hook::{Clock, system_clock};

/// How long shutdown waits for every task before deleting the heartbeat,
/// unless `--shutdown-grace` says otherwise. Platforms must give the
/// process longer than this (Kubernetes' `terminationGracePeriodSeconds`).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Opens a database's store and admin handle. Tests swap in stores that
/// count requests or inject faults.
pub type DatabaseOpener = Arc<dyn Fn(&str) -> Result<DatabaseHandle, DatabaseError> + Send + Sync>;

/// The services a node runs; a node must never advertise work it would
/// not do.
pub const RUNNABLE_SERVICES: [Service; 4] = [
    Service::Gc,
    Service::CompactorCoordinator,
    Service::CompactionWorkers,
    Service::Mirror,
];

/// How to run a node.
#[derive(Clone)]
pub struct NodeOptions {
    /// 1-128 characters of `[A-Za-z0-9_-]`, unique in the fleet.
    pub node_id: String,
    /// The services this node offers (and so may be assigned).
    pub services: Vec<Service>,
    /// `--rclone`, for targets with `copier = "rclone"`.
    pub copiers: CopierOptions,
    /// `--max-mirror-jobs`: mirror passes and prunes at once (at least 1).
    pub max_mirror_jobs: usize,
    /// `--plugin-dir`: where WebAssembly plugins are loaded from.
    pub plugin_dirs: Vec<std::path::PathBuf>,
    /// `--plugin-cache`: compiled plugins; default `~/.cache/sleet/plugins`.
    pub plugin_cache: Option<std::path::PathBuf>,
    /// `--shutdown-grace`: how long a stopping node waits for its tasks.
    pub shutdown_grace: Duration,
    /// Where the node counts (served by `--listen` as `/metrics`).
    pub metrics: Arc<Metrics>,
    /// What `/healthz`, `/readyz` and `/status` answer from.
    pub probes: Arc<NodeProbes>,
    /// Whether the node receives from the `[events]` queue (`true`), or
    /// only acts on the events other nodes relay (`--no-event-receiver`).
    pub receives_events: bool,
    pub(super) clock: Clock,
    pub(super) opener: DatabaseOpener,
}

impl std::fmt::Debug for NodeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeOptions")
            .field("node_id", &self.node_id)
            .field("services", &self.services)
            .finish()
    }
}

impl NodeOptions {
    /// A node offering every service this build runs.
    pub fn new(node_id: impl Into<String>) -> Self {
        NodeOptions {
            node_id: node_id.into(),
            services: RUNNABLE_SERVICES.to_vec(),
            copiers: CopierOptions::default(),
            max_mirror_jobs: std::thread::available_parallelism().map_or(4, |n| n.get()),
            plugin_dirs: Vec::new(),
            plugin_cache: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            metrics: Arc::new(Metrics::default()),
            probes: Arc::new(NodeProbes::default()),
            receives_events: true,
            clock: system_clock(),
            opener: {
                let stores = crate::store::SharedStores::default();
                Arc::new(move |url: &str| DatabaseHandle::open_shared(url, &stores))
            },
        }
    }

    /// The rclone binary for `copier = "rclone"` targets (default: PATH).
    pub fn with_rclone(mut self, binary: impl Into<std::path::PathBuf>) -> Self {
        self.copiers.rclone = Some(binary.into());
        self
    }

    /// Load WebAssembly plugins from `dirs`, caching native code in
    /// `cache` (default `~/.cache/sleet/plugins`).
    pub fn with_plugin_dirs(
        mut self,
        dirs: impl IntoIterator<Item = std::path::PathBuf>,
        cache: Option<std::path::PathBuf>,
    ) -> Self {
        self.plugin_dirs = dirs.into_iter().collect();
        self.plugin_cache = cache;
        self
    }

    /// At most `jobs` mirror passes or prunes at once (0 counts as 1).
    pub fn with_max_mirror_jobs(mut self, jobs: usize) -> Self {
        self.max_mirror_jobs = jobs.max(1);
        self
    }

    /// Receive from the `[events]` queue (the default), or only act on
    /// the events other nodes relay: for a node where the queue cannot be
    /// reached, and for tests that decide which node an event reaches.
    pub fn with_event_receiver(mut self, receives: bool) -> Self {
        self.receives_events = receives;
        self
    }

    /// Wait up to `grace` for tasks to stop on shutdown.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Count into `metrics` and report health to `probes` (shared with
    /// the endpoint that serves them).
    pub fn with_telemetry(mut self, metrics: Arc<Metrics>, probes: Arc<NodeProbes>) -> Self {
        self.metrics = metrics;
        self.probes = probes;
        self
    }

    /// Offer exactly these services (an empty list offers none).
    pub fn with_services(mut self, services: impl IntoIterator<Item = Service>) -> Self {
        self.services = services.into_iter().collect();
        self
    }

    /// The node's wall clock: what it stamps and judges heartbeats by, and
    /// the time hooks are told. The simulator gives each node its own,
    /// skewed and jumping; a real node reads the system clock.
    #[doc(hidden)]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    #[doc(hidden)]
    pub fn with_database_opener(mut self, opener: DatabaseOpener) -> Self {
        self.opener = opener;
        self
    }

    pub(super) fn validate(&self) -> Result<(), NodeError> {
        validate_node_id(&self.node_id).map_err(NodeError::InvalidNodeId)?;
        if let Some(dup) = first_duplicate(&self.services) {
            return Err(NodeError::DuplicateService(dup));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated() {
        assert!(matches!(
            NodeOptions::new("bad id").validate(),
            Err(NodeError::InvalidNodeId(_))
        ));
        let dup = NodeOptions::new("n").with_services([Service::Gc, Service::Gc]);
        assert!(matches!(
            dup.validate(),
            Err(NodeError::DuplicateService(Service::Gc))
        ));
        assert!(NodeOptions::new("n").with_services([]).validate().is_ok());
    }
}
