//! `sleet mirror`: one-shot sync, restore and verify, with a progress bar
//! on a terminal.

use clap::Subcommand;
use tokio_util::sync::CancellationToken;

use super::{Format, cancel_on_signal, emit};
use crate::commands::mirror as ops;
use crate::mirror::copier::{CopierOptions, CopyProgress};
use crate::mirror::restore::RestorePoint;
use crate::mirror::verify::VerifyReport;
use crate::model::response::{MirrorRestoreResponse, MirrorSyncResponse};
use crate::plugin::PluginRuntime;
use crate::{Error, Fleet};

#[derive(Debug, Subcommand)]
pub enum MirrorCommand {
    /// Run a single sync pass for one (database, target), regardless of the target's mode; prunes
    /// afterward when retention is set. The database's mirror hooks are asked first, as before a
    /// node's pass: a hook that defers or fails it ends the command (exit 1) with its reason
    Sync {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// Registered database URL
        db: String,
        /// Mirror target name
        target: String,
        /// The rclone binary, for targets with copier = "rclone". Default: rclone on PATH
        #[arg(long)]
        rclone: Option<std::path::PathBuf>,
        /// A directory of WebAssembly plugins, for targets with copier = "plugin:<name>" and for
        /// the database's hooks; may repeat
        #[arg(long = "plugin-dir")]
        plugin_dirs: Vec<std::path::PathBuf>,
        /// Run the pass without asking the database's hooks (an operator's override)
        #[arg(long)]
        no_hooks: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Restore a backup (a mirror destination) into an empty root
    Restore {
        /// Backup root URL (a mirror destination)
        backup: String,
        /// Empty destination root URL
        dest: String,
        /// The restore point: an RFC 3339 time (the writes acknowledged by then, within one WAL
        /// object) or a manifest id (that manifest alone). Default: every write the backup holds
        /// (its newest restore point and the WAL run after it)
        #[arg(long, value_parser = parse_restore_point)]
        at: Option<RestorePoint>,
        /// Restore even when the restore point's objects are missing or shorter than its manifests
        /// record (by default such a restore point is refused)
        #[arg(long)]
        force: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Check that a mirror destination's latest manifest and every restore point have all their
    /// objects; exits 1 when anything is missing
    Verify {
        /// Mirror destination URL
        target: String,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub(super) async fn run(command: MirrorCommand) -> Result<(), Error> {
    let cancel = CancellationToken::new();
    tokio::spawn(cancel_on_signal(cancel.clone()));
    match command {
        MirrorCommand::Sync {
            root,
            db,
            target,
            rclone,
            plugin_dirs,
            no_hooks,
            format,
        } => {
            let fleet = Fleet::open(&root)?;
            let hooks = if no_hooks {
                ops::Hooks::Bypass
            } else {
                ops::Hooks::Ask
            };
            let copiers = CopierOptions {
                rclone,
                plugins: crate::plugin::load_dirs(
                    &plugin_dirs,
                    PluginRuntime::default_cache_dir(),
                    Default::default(),
                    None,
                )
                .await
                .map_err(Error::CliUsage)?,
                node_id: "sleet mirror sync".into(),
            };
            let progress = CopyProgress::new();
            let meter = ProgressMeter::start(format, progress.clone());
            let synced = ops::sync_once(
                fleet.root(),
                &db,
                &target,
                &copiers,
                hooks,
                progress,
                &cancel,
            )
            .await;
            meter.finish();
            emit(format, &synced?, render_sync);
        }
        MirrorCommand::Restore {
            backup,
            dest,
            at,
            force,
            format,
        } => {
            let progress = CopyProgress::new();
            let meter = ProgressMeter::start(format, progress.clone());
            let at = at.unwrap_or(RestorePoint::Latest);
            let restored = ops::restore_urls(&backup, &dest, at, force, progress, &cancel).await;
            meter.finish();
            emit(format, &restored?, render_restore);
        }
        MirrorCommand::Verify { target, format } => {
            let progress = CopyProgress::new();
            let meter = ProgressMeter::start(format, progress.clone());
            let report = ops::verify_url(&target, progress).await;
            meter.finish();
            let report = report?;
            emit(format, &report, render_verify);
            if !report.problems.is_empty() {
                return Err(Error::VerifyFailed {
                    url: report.url,
                    problems: report.problems.len(),
                });
            }
        }
    }
    Ok(())
}

fn parse_restore_point(value: &str) -> Result<RestorePoint, String> {
    value.parse()
}

/// A progress bar on stderr while a one-shot copy runs (objects and bytes
/// against the planned total, rate, time left), only when stderr is a
/// terminal and the output is text: nothing of it in logs or JSON.
struct ProgressMeter {
    task: Option<(tokio::task::JoinHandle<()>, indicatif::ProgressBar)>,
}

impl ProgressMeter {
    fn start(format: Format, progress: std::sync::Arc<CopyProgress>) -> ProgressMeter {
        use std::io::IsTerminal;
        if format != Format::Text || !std::io::stderr().is_terminal() {
            return ProgressMeter { task: None };
        }
        let bar = indicatif::ProgressBar::new(0).with_style(progress_style());
        let shown = bar.clone();
        let task = tokio::spawn(async move {
            loop {
                let (objects, bytes) = progress.totals();
                let (all_objects, all_bytes) = progress.expected();
                shown.set_length(all_bytes.max(bytes));
                shown.set_position(bytes);
                shown.set_message(if all_objects > 0 {
                    format!("{objects}/{all_objects} objects")
                } else {
                    "planning".to_string()
                });
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        });
        ProgressMeter {
            task: Some((task, bar)),
        }
    }

    fn finish(self) {
        if let Some((task, bar)) = self.task {
            task.abort();
            bar.finish_and_clear();
        }
    }
}

fn progress_style() -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(
        "{bar:30} {bytes}/{total_bytes} {msg}, {bytes_per_sec}, {eta} left",
    )
    .expect("a valid template")
}

fn render_sync(r: &MirrorSyncResponse) -> String {
    let mut out = if r.committed {
        format!(
            "synced {} target {} to manifest {} ({}): {} manifests, {} objects, {} bytes\n",
            r.database,
            r.target,
            r.head,
            r.destination,
            r.manifests_committed,
            r.objects_copied,
            r.bytes_copied
        )
    } else {
        format!(
            "{} target {} is caught up at manifest {} ({})\n",
            r.database, r.target, r.head, r.destination
        )
    };
    if r.pruned_manifests > 0 || r.pruned_objects > 0 {
        out.push_str(&format!(
            "pruned {} manifests, {} objects\n",
            r.pruned_manifests, r.pruned_objects
        ));
    }
    out
}

fn render_restore(r: &MirrorRestoreResponse) -> String {
    let of = r
        .source
        .as_ref()
        .map_or(String::new(), |source| format!(" (a mirror of {source})"));
    let newest = r.newest_write.map_or(String::new(), |at| {
        format!(
            ", newest write {}",
            at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        )
    });
    format!(
        "restored {}{of} at manifest {} and WAL {}{newest} into {}: {} manifests, {} objects, {} bytes\n",
        r.backup,
        r.manifest_id,
        r.wal_end,
        r.destination,
        r.manifests_committed,
        r.objects_copied,
        r.bytes_copied
    )
}

fn render_verify(r: &VerifyReport) -> String {
    let mut out = match &r.source {
        Some(source) => format!("mirror of {source}\n"),
        None => "note: no sleet-mirror-source.json yet (the next pass records its source)\n".into(),
    };
    for problem in &r.problems {
        out.push_str(&format!("problem: {problem}\n"));
    }
    let verdict = if r.problems.is_empty() {
        "ok"
    } else {
        "FAILED"
    };
    if let (Some(latest), Some(point)) = (r.latest_manifest, r.latest_restore_point)
        && point != latest
    {
        out.push_str(&format!(
            "note: the newest restore point is manifest {point}; manifest {latest} is support \
             a pass committed before it was cut off, and the next pass supersedes it\n"
        ));
    }
    if let Some(end) = r.wal_end {
        let at = r
            .newest_restorable_write
            .map_or("unknown".to_string(), |at| {
                at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            });
        out.push_str(&format!(
            "newest restorable write: {at} (WAL {end}, the end of the contiguous run after the \
             newest restore point)\n"
        ));
    }
    if r.stranded_wal > 0 {
        out.push_str(&format!(
            "note: {} WAL objects lie after a gap in the WAL run and cannot be restored until a \
             pass commits a manifest past it\n",
            r.stranded_wal
        ));
    }
    out.push_str(&format!(
        "{verdict}: {} latest manifest {}, {} restore points, {} manifests and {} objects checked, {} problems\n",
        r.url,
        r.latest_manifest.map_or("none".to_string(), |id| id.to_string()),
        r.restore_points,
        r.manifests_checked,
        r.objects_checked,
        r.problems.len()
    ));
    out
}
