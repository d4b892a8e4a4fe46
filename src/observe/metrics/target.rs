//! One mirror target's metrics, labelled once when the target starts.

use std::sync::Arc;
use std::time::Duration;

use super::{CopiedLabels, Metrics, PassLabels, PrunedLabels, TargetLabels};

/// What one mirror target records.
#[derive(Debug, Clone)]
pub struct TargetMetrics {
    metrics: Arc<Metrics>,
    labels: TargetLabels,
}

impl TargetMetrics {
    pub(super) fn new(metrics: Arc<Metrics>, labels: TargetLabels) -> Self {
        TargetMetrics { metrics, labels }
    }

    /// A pass ended: `committed`, `caught_up`, `deferred` or `failed`.
    pub fn pass(&self, result: &str) {
        let TargetLabels { database, target } = self.labels.clone();
        self.metrics
            .mirror
            .passes
            .get_or_create(&PassLabels {
                database,
                target,
                result: result.to_string(),
            })
            .inc();
    }

    pub fn copied(&self, copier: &str, objects: u64, bytes: u64) {
        let TargetLabels { database, target } = self.labels.clone();
        let labels = CopiedLabels {
            database,
            target,
            copier: copier.to_string(),
        };
        let mirror = &self.metrics.mirror;
        mirror.objects.get_or_create(&labels).inc_by(objects);
        mirror.bytes.get_or_create(&labels).inc_by(bytes);
    }

    /// How far the destination is behind the source.
    pub fn behind(&self, manifests: u64, for_how_long: Duration) {
        let mirror = &self.metrics.mirror;
        mirror
            .behind_manifests
            .get_or_create(&self.labels)
            .set(manifests as i64);
        mirror
            .behind_seconds
            .get_or_create(&self.labels)
            .set(for_how_long.as_secs_f64());
    }

    /// How far the newest restorable write may trail the source's.
    pub fn recovery_point(&self, behind: Duration) {
        self.metrics
            .mirror
            .recovery_point
            .get_or_create(&self.labels)
            .set(behind.as_secs_f64());
    }

    /// A pass just committed a restore point.
    pub fn restore_point_committed(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        self.metrics
            .mirror
            .last_restore_point
            .get_or_create(&self.labels)
            .set(now.as_secs_f64());
    }

    pub fn pruned(&self, manifests: u64, objects: u64) {
        for (kind, count) in [("manifests", manifests), ("objects", objects)] {
            let TargetLabels { database, target } = self.labels.clone();
            self.metrics
                .mirror
                .pruned
                .get_or_create(&PrunedLabels {
                    database,
                    target,
                    kind: kind.to_string(),
                })
                .inc_by(count);
        }
    }
}
