//! A node's running tasks: reaping those that ended, reconciling to what
//! it owns, spawning supervisors, and stopping them all on the way out.

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::ObjectStoreExt;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Node, RunningTask};
use crate::daemon::owned::{TaskKey, TaskSpec};
use crate::daemon::supervisor::{Supervisor, TaskShared};
use crate::model::coverage::{self, Mark};
use crate::model::planted::{Planted, planted};
use crate::services::outside_compactor::records::HandoverLimits;

impl Node {
    /// Forgets supervisors that have exited, so owned keys restart.
    pub(super) fn reap_finished(&mut self) {
        while let Some(done) = self.tasks.try_join_next_with_id() {
            let id = match done {
                Ok((id, ())) => id,
                Err(e) => {
                    if e.is_panic() {
                        warn!("a task supervisor panicked: {e}");
                    }
                    e.id()
                }
            };
            // Only the supervisor that is still the key's: a replaced one
            // exiting must not orphan its replacement (which the next
            // reconcile would then start a second time, and shutdown
            // would never cancel).
            if let Some(key) = self.task_keys.remove(&id)
                && self.running.get(&key).is_some_and(|task| task.id == id)
            {
                self.running.remove(&key);
                self.tasks_ended += 1;
                self.running_changes += 1;
            }
        }
    }

    /// Stops tasks no longer owned or whose settings changed; starts owned
    /// ones that are not running.
    pub(super) fn reconcile(&mut self, owned: BTreeMap<TaskKey, TaskSpec>) {
        let keep_all = planted(Planted::TasksOutliveOwnership);
        self.running.retain(|key, task| {
            let keep =
                owned.get(key) == Some(&*task.spec) || (keep_all && !owned.contains_key(key));
            if !keep {
                if !owned.contains_key(key) {
                    coverage::hit(Mark::TaskStoppedOnHandover);
                }
                info!(database = %key.database, service = %key.service, "stopping task");
                task.token.cancel();
            }
            keep
        });
        self.running_changes += 1;
        for (key, spec) in owned {
            if !self.running.contains_key(&key) {
                self.spawn(key, spec);
            }
        }
    }

    pub(super) fn spawn(&mut self, key: TaskKey, spec: TaskSpec) {
        info!(database = %key.database, service = %key.service, "starting task");
        let token = CancellationToken::new();
        self.next_instance += 1;
        let spec = Arc::new(spec);
        let supervisor = Supervisor {
            key: key.clone(),
            spec: spec.clone(),
            instance: self.next_instance,
            shared: self.task_shared(),
        };
        let handle = self.tasks.spawn(supervisor.run(token.clone()));
        let id = handle.id();
        self.task_keys.insert(id, key.clone());
        self.running.insert(key, RunningTask { spec, token, id });
    }

    /// What the node's tasks share, built again only when the node's
    /// settings it holds change (a task keeps what it started with).
    fn task_shared(&mut self) -> Arc<TaskShared> {
        let node = self.settings();
        let handover = HandoverLimits {
            timeout: node.heartbeat_timeout,
            // The holder stops at its next tick, anywhere within an
            // interval: looking four times as often keeps the added wait
            // a fraction of it (two LISTs a look).
            poll: node.heartbeat_interval / 4,
        };
        let current = self.task_shared.as_ref().filter(|shared| {
            shared.records.handover_limits() == handover
                && shared.fenced_wait == node.heartbeat_interval
        });
        if let Some(shared) = current {
            return shared.clone();
        }
        let shared = Arc::new(TaskShared {
            plugins: self.plugins.clone(),
            node_id: self.id.clone(),
            clock: self.clock.clone(),
            board: self.board.clone(),
            opener: self.opener.clone(),
            records: self.records.clone().with_handover(handover),
            wakes: self.wakes.clone(),
            mirror: self.mirror.clone(),
            metrics: self.metrics.clone(),
            fenced_wait: node.heartbeat_interval,
        });
        self.task_shared = Some(shared.clone());
        shared
    }

    pub(super) async fn shut_down(mut self) {
        info!("shutting down: stopping tasks and deleting heartbeat");
        for task in self.running.values() {
            task.token.cancel();
        }
        let drained = tokio::time::timeout(self.shutdown_grace, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(
                "{} tasks did not stop within {}s; abandoning them",
                self.tasks.len(),
                self.shutdown_grace.as_secs()
            );
            self.tasks.shutdown().await;
        }
        match self.root.store().delete(&self.heartbeat_path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => warn!("failed to delete heartbeat {}: {e}", self.heartbeat_path),
        }
    }
}
