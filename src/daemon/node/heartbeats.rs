//! A node's heartbeat: the clock samples it carries, the reports it
//! publishes, writing it, and deleting peers' heartbeats long dead.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use object_store::{ObjectStoreExt, PutPayload};
use tracing::{info, warn};

use super::{CLOCK_SAMPLES, DEAD_HEARTBEAT_TIMEOUTS, Node, loaded_plugin};
use crate::fleet::root::HeartbeatObject;
use crate::model::heartbeat::ClockReading;
use crate::model::service::Service;
use crate::observe::probes::NodeReport;
use crate::store::check::{ClockSample, clock_skew};

impl Node {
    /// One heartbeat PUT's timing against the `LastModified` the store
    /// gave it; the node's skew from the last few, logged when it is
    /// certainly beyond the bound.
    pub(super) fn sample_clock(
        &mut self,
        before: chrono::DateTime<Utc>,
        after: chrono::DateTime<Utc>,
        last_modified: chrono::DateTime<Utc>,
    ) {
        if self.clock_samples.len() == CLOCK_SAMPLES {
            self.clock_samples.pop_front();
        }
        self.clock_samples.push_back(ClockSample {
            before,
            after,
            last_modified,
        });
        let samples: Vec<ClockSample> = self.clock_samples.iter().copied().collect();
        let Some(skew) = clock_skew(&samples, Duration::from_secs(1), self.skew_bound) else {
            return;
        };
        let reading = ClockReading {
            skew_ms: (skew.seconds * 1000.0).round() as i64,
            uncertainty_ms: (skew.uncertainty_seconds * 1000.0).round() as u64,
            bound_ms: self.skew_bound.as_millis() as u64,
        };
        if reading.beyond_bound() && !self.clock_reading.is_some_and(|c| c.beyond_bound()) {
            warn!(
                "this machine's clock is {:+.1} s off the fleet root's store, beyond the {:.1} s \
                 the fleet tolerates (GC min_age and heartbeat liveness compare the two): fix \
                 its time sync",
                -skew.seconds,
                self.skew_bound.as_secs_f64()
            );
        }
        self.clock_reading = Some(reading);
    }

    /// Shows this tick's outcome to the probes and the task gauges.
    pub(super) fn publish(&mut self, heartbeat_written: bool, live_nodes: Option<u64>) {
        if let Some(live) = live_nodes {
            self.metrics.node.live_nodes.set(live as i64);
        }
        let at = (self.board.changes(), self.running_changes);
        let tasks = match &self.published {
            Some((built, tasks)) if *built == at => tasks.clone(),
            _ => {
                let tasks = Arc::new(self.board.reports(self.running.keys()));
                for service in &self.offered {
                    let service = service.to_string();
                    let (owned, states) = crate::observe::probes::task_states(&tasks, &service);
                    self.metrics.record_tasks(&service, owned, &states);
                }
                self.published = Some((at, tasks.clone()));
                tasks
            }
        };
        let report = NodeReport {
            node_id: self.id.clone(),
            services: self.offered.iter().map(Service::to_string).collect(),
            live_nodes: live_nodes.unwrap_or(0),
            config_read: self.config_read,
            heartbeat_written,
            tasks,
            events: self.events.state(),
        };
        self.probes
            .ticked(report, self.settings().heartbeat_interval);
    }

    /// Writes this node's heartbeat; false when the PUT failed.
    pub(super) async fn put_heartbeat(&self) -> bool {
        let mut body = self.board.heartbeat_body(&self.id, &self.offered);
        body.plugins = self
            .plugins
            .as_ref()
            .map(|p| p.infos().iter().map(loaded_plugin).collect())
            .unwrap_or_default();
        body.clock = self.clock_reading;
        body.events = self.events.state();
        let bytes = serde_json::to_vec(&body).expect("heartbeat bodies serialize");
        match self
            .root
            .store()
            .put(&self.heartbeat_path, PutPayload::from(bytes))
            .await
        {
            Ok(_) => true,
            Err(e) => {
                warn!("failed to PUT heartbeat {}: {e}", self.heartbeat_path);
                false
            }
        }
    }

    /// Deletes this node's heartbeats under old names (it changed roles)
    /// and anyone's heartbeat dead for ten timeouts at `now` (the store's
    /// time where the node could read it). Never its own current one.
    pub(super) async fn delete_stale_heartbeats(
        &self,
        heartbeats: &[HeartbeatObject],
        now: chrono::DateTime<Utc>,
    ) {
        let dead_after = self.settings().heartbeat_timeout * DEAD_HEARTBEAT_TIMEOUTS;
        for hb in heartbeats {
            let age = (now - hb.last_modified).to_std().unwrap_or_default();
            let renamed = hb.node_id == self.id && hb.path != self.heartbeat_path;
            if hb.path == self.heartbeat_path || (!renamed && age < dead_after) {
                continue;
            }
            match self.root.store().delete(&hb.path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                    info!(heartbeat = %hb.path, "deleted a stale heartbeat")
                }
                Err(e) => warn!("failed to delete stale heartbeat {}: {e}", hb.path),
            }
        }
    }
}
