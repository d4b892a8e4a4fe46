//! Each section's overrides laid over the defaults: what a database or
//! node runs with when its files leave a setting out.

use super::files::*;
use super::resolve::{
    CoordinatorSettings, GcDetach, GcDirectory, GcSettings, MirrorTargetSettings, NodeSettings,
    OutsideCompactorSettings, WorkerSettings, defaults, duration_or,
};
use super::sections::{
    CoordinatorOverrides, CopierKind, GcDirectoryOverrides, GcOverrides, IdleOverrides, MirrorMode,
    MirrorTargetOverrides, OutsideCompactorOverrides, WorkerOverrides, flatten_config,
};
use crate::model::policy::{EventsSettings, StreamPolicy};

impl EventsConfig {
    /// The event source's settings; `None` when no source is set (or it
    /// has no queue, which `config check` reports).
    pub fn resolve(&self) -> Option<EventsSettings> {
        match self.source? {
            EventSourceKind::None => None,
            EventSourceKind::Sqs => Some(EventsSettings {
                queue_url: self.queue_url.clone()?,
                safety_interval: duration_or(
                    self.safety_interval,
                    defaults::EVENTS_SAFETY_INTERVAL,
                ),
                relay_interval: duration_or(self.relay_interval, defaults::EVENTS_RELAY_INTERVAL),
            }),
        }
    }
}

impl NodeOverrides {
    pub fn resolve(&self) -> NodeSettings {
        NodeSettings {
            heartbeat_interval: duration_or(self.heartbeat_interval, defaults::HEARTBEAT_INTERVAL),
            heartbeat_timeout: duration_or(self.heartbeat_timeout, defaults::HEARTBEAT_TIMEOUT),
            config_poll: duration_or(self.config_poll, defaults::CONFIG_POLL),
            placement_hash: self.placement_hash.unwrap_or_default(),
        }
    }
}

impl GcDirectoryOverrides {
    pub(super) fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper; enabled, interval, min_age, dry_run);
    }

    pub(super) fn resolve(&self, default_dry_run: bool) -> GcDirectory {
        GcDirectory {
            enabled: self.enabled.unwrap_or(true),
            interval: duration_or(self.interval, defaults::GC_INTERVAL),
            min_age: duration_or(self.min_age, defaults::GC_MIN_AGE),
            dry_run: self.dry_run.unwrap_or(default_dry_run),
        }
    }
}

impl GcOverrides {
    /// The directory tables with their names, for validation messages.
    pub(super) fn directories(&self) -> [(&'static str, &GcDirectoryOverrides); 5] {
        [
            ("manifest", &self.manifest),
            ("wal", &self.wal),
            ("wal_fence", &self.wal_fence),
            ("compacted", &self.compacted),
            ("compactions", &self.compactions),
        ]
    }

    pub(super) fn overlay(&mut self, upper: &Self) {
        self.manifest.overlay(&upper.manifest);
        self.wal.overlay(&upper.wal);
        self.wal_fence.overlay(&upper.wal_fence);
        self.compacted.overlay(&upper.compacted);
        self.compactions.overlay(&upper.compactions);
        overlay_fields!(self, upper; boundary_files);
        overlay_fields!(self.detach, upper.detach; enabled, interval);
    }

    pub(super) fn resolve(&self) -> GcSettings {
        GcSettings {
            boundary_files: self.boundary_files,
            manifest: self.manifest.resolve(false),
            wal: self.wal.resolve(false),
            wal_fence: self.wal_fence.resolve(true),
            compacted: self.compacted.resolve(false),
            compactions: self.compactions.resolve(false),
            detach: GcDetach {
                enabled: self.detach.enabled.unwrap_or(true),
                interval: duration_or(self.detach.interval, defaults::GC_DETACH_INTERVAL),
            },
        }
    }
}

impl CoordinatorOverrides {
    pub(super) fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper;
            poll_interval, manifest_update_timeout, max_concurrent_compactions,
            commit_compacted_interval, worker_heartbeat_timeout, checkpoint_lifetime);
        overlay_fields!(self.scheduler, upper.scheduler;
            min_compaction_sources, max_compaction_sources, include_size_threshold);
    }

    pub(super) fn resolve(&self) -> CoordinatorSettings {
        let s = &self.scheduler;
        CoordinatorSettings {
            poll_interval: duration_or(self.poll_interval, defaults::COORDINATOR_POLL),
            manifest_update_timeout: duration_or(
                self.manifest_update_timeout,
                defaults::MANIFEST_UPDATE_TIMEOUT,
            ),
            max_concurrent_compactions: self
                .max_concurrent_compactions
                .unwrap_or(defaults::COORDINATOR_MAX_CONCURRENT),
            commit_compacted_interval: duration_or(
                self.commit_compacted_interval,
                defaults::COMMIT_COMPACTED_INTERVAL,
            ),
            worker_heartbeat_timeout: duration_or(
                self.worker_heartbeat_timeout,
                defaults::WORKER_HEARTBEAT_TIMEOUT,
            ),
            checkpoint_lifetime: duration_or(
                self.checkpoint_lifetime,
                defaults::COORDINATOR_CHECKPOINT_LIFETIME,
            ),
            min_compaction_sources: s
                .min_compaction_sources
                .unwrap_or(defaults::MIN_COMPACTION_SOURCES),
            max_compaction_sources: s
                .max_compaction_sources
                .unwrap_or(defaults::MAX_COMPACTION_SOURCES),
            include_size_threshold: s
                .include_size_threshold
                .unwrap_or(defaults::INCLUDE_SIZE_THRESHOLD),
        }
    }
}

impl OutsideCompactorOverrides {
    pub(super) fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper; enabled, recheck, active_within, takeover_backlog, takeover_after);
    }

    pub(super) fn resolve(&self) -> OutsideCompactorSettings {
        OutsideCompactorSettings {
            enabled: self.enabled.unwrap_or(true),
            recheck: duration_or(self.recheck, defaults::OUTSIDE_RECHECK),
            active_within: duration_or(self.active_within, defaults::OUTSIDE_ACTIVE_WITHIN),
            takeover_backlog: self
                .takeover_backlog
                .unwrap_or(defaults::OUTSIDE_TAKEOVER_BACKLOG),
            takeover_after: duration_or(self.takeover_after, defaults::OUTSIDE_TAKEOVER_AFTER),
        }
    }
}

impl IdleOverrides {
    pub(super) fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper; enabled, probe_min, probe_max, sleep_after, workers_probe, gc_probe);
    }

    pub(super) fn resolve(&self) -> crate::model::policy::IdleSettings {
        let defaults = crate::model::policy::IdleSettings::default();
        crate::model::policy::IdleSettings {
            enabled: self.enabled.unwrap_or(defaults.enabled),
            probe_min: duration_or(self.probe_min, defaults.probe_min),
            probe_max: duration_or(self.probe_max, defaults.probe_max),
            sleep_after: duration_or(self.sleep_after, defaults.sleep_after),
            workers_probe: duration_or(self.workers_probe, defaults.workers_probe),
            gc_probe: duration_or(self.gc_probe, defaults.gc_probe),
        }
    }
}

impl WorkerOverrides {
    pub(super) fn overlay(&mut self, upper: &Self) {
        overlay_fields!(self, upper;
            count, max_concurrent_compactions, compactions_poll_interval, heartbeat_interval,
            heartbeat_bytes, heartbeat_min_interval, max_sst_size, max_fetch_tasks,
            bytes_to_fetch, max_subcompactions, min_filter_keys, compression_codec);
    }

    pub(super) fn resolve(&self) -> WorkerSettings {
        WorkerSettings {
            count: self.count.unwrap_or(defaults::WORKER_COUNT),
            max_concurrent_compactions: self
                .max_concurrent_compactions
                .unwrap_or(defaults::WORKER_MAX_CONCURRENT),
            compactions_poll_interval: duration_or(
                self.compactions_poll_interval,
                defaults::WORKER_POLL,
            ),
            heartbeat_interval: duration_or(
                self.heartbeat_interval,
                defaults::WORKER_HEARTBEAT_INTERVAL,
            ),
            max_sst_size: self.max_sst_size.unwrap_or(defaults::MAX_SST_SIZE),
            max_fetch_tasks: self.max_fetch_tasks.unwrap_or(defaults::MAX_FETCH_TASKS),
            bytes_to_fetch: self.bytes_to_fetch.unwrap_or(defaults::BYTES_TO_FETCH),
            max_subcompactions: self
                .max_subcompactions
                .unwrap_or(defaults::MAX_SUBCOMPACTIONS),
            min_filter_keys: self.min_filter_keys.unwrap_or(defaults::MIN_FILTER_KEYS),
            compression_codec: self.compression_codec,
        }
    }
}

impl MirrorTargetOverrides {
    /// Field-wise overlay, except that `url` and `source_prefix` travel
    /// together: a prefix only makes sense with the URL it maps into.
    pub(super) fn overlay(&mut self, upper: &Self) {
        if upper.url.is_some() || upper.source_prefix.is_some() {
            self.url = upper.url.clone();
            self.source_prefix = upper.source_prefix.clone();
        }
        overlay_fields!(self, upper;
            disabled, mode, copier, poll, interval, min_age, checkpoint_lifetime,
            deep_check, copy_parallelism, multipart_threshold_mib);
        overlay_fields!(self.retention, upper.retention; keep);
        self.copier_config.extend(
            upper
                .copier_config
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
    }

    pub(super) fn resolve(&self) -> MirrorTargetSettings {
        MirrorTargetSettings {
            url: self.url.clone(),
            source_prefix: self.source_prefix.clone(),
            disabled: self.disabled.unwrap_or(false),
            mode: self.mode.unwrap_or(MirrorMode::Continuous),
            copier: self.copier.clone().unwrap_or(CopierKind::Builtin),
            poll: duration_or(self.poll, defaults::MIRROR_POLL),
            interval: duration_or(self.interval, defaults::MIRROR_INTERVAL),
            min_age: duration_or(self.min_age, defaults::MIRROR_MIN_AGE),
            checkpoint_lifetime: duration_or(
                self.checkpoint_lifetime,
                defaults::CHECKPOINT_LIFETIME,
            ),
            deep_check: duration_or(self.deep_check, defaults::MIRROR_DEEP_CHECK),
            copy_parallelism: self.copy_parallelism.unwrap_or(defaults::COPY_PARALLELISM),
            stream: StreamPolicy::with_threshold_mib(
                self.multipart_threshold_mib
                    .unwrap_or(defaults::MULTIPART_THRESHOLD_MIB),
            ),
            retention_keep: self.retention.keep.map(|d| d.0),
            copier_config: flatten_config(&self.copier_config),
        }
    }
}
