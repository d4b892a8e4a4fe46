//! sleet's resolved settings mapped onto SlateDB's service options
//! (docs/configuration.md lists the mapping).

use slatedb::config::{
    CompactionWorkerOptions, CompactorOptions, GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions, GarbageCollectorScheduleOptions, SizeTieredCompactionSchedulerOptions,
};

use crate::config::{
    CompressionCodec, CoordinatorSettings, GcDirectory, GcSettings, WorkerSettings,
};
use crate::model::planted::{Planted, planted};

/// Retries SlateDB's services make per store request before giving up, so
/// a dead store surfaces as a task failure (and backoff) instead of a task
/// that hangs forever.
const OBJECT_STORE_MAX_RETRIES: u32 = 10;

fn directory_options(dir: &GcDirectory) -> Option<GarbageCollectorDirectoryOptions> {
    dir.enabled.then_some(GarbageCollectorDirectoryOptions {
        interval: Some(dir.interval),
        min_age: dir.min_age,
        dry_run: dir.dry_run,
    })
}

/// SlateDB GC options from sleet's. `boundary_files` follows
/// `gc.boundary_files` when set, else what the store supports.
pub fn gc_options(gc: &GcSettings, store_supports_update: bool) -> GarbageCollectorOptions {
    let options = GarbageCollectorOptions {
        manifest_options: directory_options(&gc.manifest),
        wal_options: directory_options(&gc.wal),
        wal_fence_options: directory_options(&gc.wal_fence),
        compacted_options: directory_options(&gc.compacted),
        compactions_options: directory_options(&gc.compactions),
        detach_options: gc
            .detach
            .enabled
            .then_some(GarbageCollectorScheduleOptions {
                interval: Some(gc.detach.interval),
            }),
        metric_level: None,
        boundary_files_enabled: gc.boundary_files_for(store_supports_update),
        object_store_max_retries: Some(OBJECT_STORE_MAX_RETRIES),
    };
    if planted(Planted::GcSafetyOff) {
        return without_safety(options);
    }
    options
}

/// The simulator's control for the settings above that keep GC off what
/// others are about to reference: no boundary files, every directory
/// collected with no `min_age`, and WAL fences deleted, not only logged.
fn without_safety(options: GarbageCollectorOptions) -> GarbageCollectorOptions {
    let reckless = |dir: Option<GarbageCollectorDirectoryOptions>| {
        dir.map(|dir| GarbageCollectorDirectoryOptions {
            min_age: std::time::Duration::ZERO,
            ..dir
        })
    };
    GarbageCollectorOptions {
        manifest_options: reckless(options.manifest_options),
        wal_options: reckless(options.wal_options),
        wal_fence_options: reckless(options.wal_fence_options).map(|dir| {
            GarbageCollectorDirectoryOptions {
                dry_run: false,
                ..dir
            }
        }),
        compacted_options: reckless(options.compacted_options),
        compactions_options: reckless(options.compactions_options),
        boundary_files_enabled: false,
        ..options
    }
}

/// SlateDB coordinator options from sleet's: never an embedded worker
/// (workers are their own service, placed on their own nodes).
pub fn coordinator_options(c: &CoordinatorSettings) -> CompactorOptions {
    CompactorOptions {
        poll_interval: c.poll_interval,
        manifest_update_timeout: c.manifest_update_timeout,
        max_concurrent_compactions: c.max_concurrent_compactions as usize,
        scheduler_options: SizeTieredCompactionSchedulerOptions {
            min_compaction_sources: c.min_compaction_sources as usize,
            max_compaction_sources: c.max_compaction_sources as usize,
            include_size_threshold: c.include_size_threshold,
            ..SizeTieredCompactionSchedulerOptions::default()
        }
        .into(),
        worker: None,
        metric_level: None,
        commit_compacted_interval: c.commit_compacted_interval,
        worker_heartbeat_timeout: c.worker_heartbeat_timeout,
        checkpoint_lifetime: c.checkpoint_lifetime,
        object_store_max_retries: Some(OBJECT_STORE_MAX_RETRIES),
        ..CompactorOptions::default()
    }
}

/// SlateDB worker options from sleet's.
pub fn worker_options(w: &WorkerSettings) -> CompactionWorkerOptions {
    CompactionWorkerOptions {
        max_concurrent_compactions: w.max_concurrent_compactions as usize,
        compactions_poll_interval: w.compactions_poll_interval,
        heartbeat_interval: w.heartbeat_interval,
        max_sst_size: usize::try_from(w.max_sst_size).unwrap_or(usize::MAX),
        max_fetch_tasks: w.max_fetch_tasks as usize,
        bytes_to_fetch: usize::try_from(w.bytes_to_fetch).unwrap_or(usize::MAX),
        max_subcompactions: w.max_subcompactions as usize,
        min_filter_keys: w.min_filter_keys,
        compression_codec: w.compression_codec.map(codec),
        metric_level: None,
        object_store_max_retries: Some(OBJECT_STORE_MAX_RETRIES),
    }
}

fn codec(c: CompressionCodec) -> slatedb::config::CompressionCodec {
    use slatedb::config::CompressionCodec as C;
    match c {
        CompressionCodec::Snappy => C::Snappy,
        CompressionCodec::Zlib => C::Zlib,
        CompressionCodec::Lz4 => C::Lz4,
        CompressionCodec::Zstd => C::Zstd,
    }
}
