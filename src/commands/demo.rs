//! `sleet demo`: a local fleet with one database under write load, and a
//! node compacting, collecting and mirroring it into a second local root,
//! so a newcomer sees the whole product work.

use std::path::Path;
use std::time::Duration;

use slatedb::Db;
use slatedb::admin::AdminBuilder;
use slatedb::config::{FlushOptions, FlushType, Settings};
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::fleet::database::DatabaseHandle;
use crate::{Fleet, NodeOptions};

/// Fast cadences so compaction and GC show up within seconds.
const DEMO_FLEET_CONFIG: &str = r#"# Written by `sleet demo`: fast cadences so work shows up within seconds.
[node]
heartbeat_interval = "1s"
heartbeat_timeout = "5s"
config_poll = "2s"

[database]
services = ["gc", "compactor-coordinator", "compaction-workers", "mirror"]

[database.gc.manifest]
interval = "2s"
min_age = "5s"
[database.gc.wal]
interval = "2s"
min_age = "5s"
[database.gc.compacted]
interval = "2s"
min_age = "5s"

[database.compactor-coordinator]
poll_interval = "500ms"
checkpoint_lifetime = "5s"
[database.compactor-coordinator.scheduler]
min_compaction_sources = 2

[database.compaction-workers]
compactions_poll_interval = "500ms"
heartbeat_interval = "2s"
min_filter_keys = 0

# Compaction services sleep while a database is idle; these looks are
# faster than the defaults so the demo wakes at once.
[database.idle]
probe_min = "500ms"
probe_max = "2s"
workers_probe = "2s"
gc_probe = "2s"
sleep_after = "30s"

# A continuous backup of every database under data/ into backup/, with
# restore points kept for two minutes.
[database.mirror.targets.backup]
url = "file://DEMO_DIR/backup"
source_prefix = "file://DEMO_DIR/data"
mode = "continuous"
poll = "1s"
[database.mirror.targets.backup.retention]
keep = "2m"
"#;

/// How often the demo writer adds a round of keys (one L0 SST each).
const WRITE_EVERY: Duration = Duration::from_secs(2);
/// How often the demo prints the database's shape.
const REPORT_EVERY: Duration = Duration::from_secs(3);
const KEYS_PER_ROUND: usize = 64;

/// How a writer of a database the fleet serves opens (the README's
/// advice): SlateDB's defaults, its own compactor and collector off, as
/// the fleet's node does that work.
pub fn served_writer_settings() -> Settings {
    Settings {
        compactor_options: None,
        garbage_collector_options: None,
        ..Settings::default()
    }
}

/// Writer settings that make small L0 SSTs quickly, with no embedded
/// compactor or GC: the fleet's node does that work.
pub fn small_sst_writer_settings() -> Settings {
    Settings {
        flush_interval: Some(Duration::from_millis(10)),
        manifest_poll_interval: Duration::from_millis(100),
        l0_sst_size_bytes: 4096,
        max_unflushed_bytes: 64 * 1024,
        min_filter_keys: 0,
        l0_max_ssts: 64,
        ..served_writer_settings()
    }
}

fn demo_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Demo(format!("{what}: {e}"))
}

/// Runs the demo in `dir` until `shutdown` is cancelled.
pub async fn run(dir: &Path, shutdown: CancellationToken) -> Result<(), Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| demo_error(&format!("cannot create {}", dir.display()), e))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| demo_error("cannot resolve the demo directory", e))?;
    let root_url = format!("file://{}/fleet", dir.display());
    let db_url = format!("file://{}/data/orders", dir.display());
    std::fs::create_dir_all(dir.join("fleet"))
        .map_err(|e| demo_error("cannot create the fleet root", e))?;
    let config = DEMO_FLEET_CONFIG.replace("DEMO_DIR", &dir.display().to_string());
    std::fs::write(dir.join("fleet/sleet.toml"), config)
        .map_err(|e| demo_error("cannot write sleet.toml", e))?;
    let backup_url = format!("file://{}/backup/orders", dir.display());

    let fleet = Fleet::open(&root_url)?;
    let registered = fleet.register(&db_url).await?;
    eprintln!("demo: fleet root {root_url}");
    eprintln!(
        "demo: database   {} (registry file {})",
        registered.url, registered.file
    );
    eprintln!("demo: mirror    {backup_url} (continuous, restore points kept 2 minutes)");
    eprintln!(
        "demo: a writer adds {KEYS_PER_ROUND} keys every {}s; the node compacts, collects and mirrors them",
        WRITE_EVERY.as_secs()
    );
    eprintln!(
        "demo: in another shell: sleet status {root_url} --compactions   (Ctrl-C here stops)"
    );

    let (store, path) = crate::store::open_url(&registered.url)
        .map_err(|e| demo_error("cannot open the database store", e))?;
    let db = Db::builder(path.clone(), store.clone())
        .with_settings(small_sst_writer_settings())
        .build()
        .await
        .map_err(|e| demo_error("cannot open the demo database", e))?;
    let admin = AdminBuilder::new(path, store).build();
    let source = DatabaseHandle::open(&registered.url)
        .map_err(|e| demo_error("cannot open the demo database", e))?;
    let backup =
        DatabaseHandle::open(&backup_url).map_err(|e| demo_error("cannot open the backup", e))?;

    let node = tokio::spawn({
        let (fleet, shutdown) = (fleet.clone(), shutdown.clone());
        async move {
            fleet
                .run_node(NodeOptions::new("demo-node"), shutdown)
                .await
        }
    });
    let mut round = 0usize;
    let mut write_tick = tokio::time::interval(WRITE_EVERY);
    let mut report_tick = tokio::time::interval(REPORT_EVERY);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            _ = write_tick.tick() => {
                write_round(&db, round).await?;
                round += 1;
            }
            _ = report_tick.tick() => {
                if let Ok(Some(m)) = admin.read_manifest(None).await {
                    eprintln!(
                        "demo: {} keys written; manifest {}: {} L0 SSTs, {} sorted runs; {} SST files in compacted/",
                        round * KEYS_PER_ROUND, m.id(), m.l0().len(), m.compacted().len(),
                        sst_files(&dir.join("data/orders/compacted")),
                    );
                }
                eprintln!("demo: {}", mirror_line(&source, &backup).await);
            }
        }
    }
    db.close()
        .await
        .map_err(|e| demo_error("closing the demo database", e))?;
    node.await.map_err(|e| demo_error("the demo node", e))??;
    eprintln!(
        "demo: stopped cleanly; the fleet and database stay in {}",
        dir.display()
    );
    Ok(())
}

async fn write_round(db: &Db, round: usize) -> Result<(), Error> {
    for i in 0..KEYS_PER_ROUND {
        let value = format!("order {round}-{i} ").repeat(16);
        db.put(format!("order-{round:06}-{i:03}"), value)
            .await
            .map_err(|e| demo_error("demo write", e))?;
    }
    db.flush_with_options(FlushOptions {
        flush_type: FlushType::MemTable,
    })
    .await
    .map_err(|e| demo_error("demo flush", e))
}

/// The backup's lag and restore points, in one line.
async fn mirror_line(source: &DatabaseHandle, backup: &DatabaseHandle) -> String {
    let mut lag = crate::model::response::MirrorStatus::default();
    if let Err(e) = crate::mirror::lag::probe(source, backup, &mut lag).await {
        return format!("mirror: not readable yet ({e})");
    }
    let Some(copied) = lag.dest_manifest_id else {
        return "mirror: the first pass is copying".into();
    };
    let points = match crate::mirror::verify::verify(backup).await {
        Ok(report) if report.problems.is_empty() => {
            format!("{} restore points, verified", report.restore_points)
        }
        Ok(report) => format!("{} problems: {}", report.problems.len(), report.problems[0]),
        Err(e) => format!("not verifiable: {e}"),
    };
    format!(
        "mirror: backup at manifest {copied}, {} behind the source (ids), {} WAL objects behind; {points}",
        lag.manifests_behind.unwrap_or(0),
        lag.wal_behind.unwrap_or(0),
    )
}

fn sst_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}
