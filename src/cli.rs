//! The `sleet` command line: argument shapes and what each command prints.
//!
//! Results go to stdout (text for people, `--format json` for machines);
//! logs and errors go to stderr, so JSON output stays clean.

use std::io::Write;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;

use tokio_util::sync::CancellationToken;

use crate::copier::{CopierOptions, CopyProgress};
use crate::daemon::RUNNABLE_SERVICES;
use crate::mirror::restore::RestorePoint;
use crate::mirror::verify::VerifyReport;
use crate::mirror_ops as ops;
use crate::plugin::{PluginKind, PluginRuntime};
use crate::response::{MirrorRestoreResponse, MirrorSyncResponse};
use crate::service::{Service, first_duplicate};
use crate::{
    Error, Fleet, NodeOptions, RegisterResponse, StatusOptions, StatusResponse, config_check,
    heartbeat, status,
};

#[derive(Debug, Parser)]
#[command(
    name = "sleet",
    version,
    about = "A fleet manager for SlateDB databases"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format on stderr: text, or JSON (one object per line)
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colored only on a terminal)
    Text,
    /// One JSON object per line, for log collectors
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a fleet node
    Run {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// This node's id: 1-128 chars of [A-Za-z0-9_-], unique in the fleet
        #[arg(long, value_parser = heartbeat::validate_node_id)]
        node_id: String,
        /// Services this node offers
        #[arg(long, value_delimiter = ',', default_values_t = RUNNABLE_SERVICES, value_parser = runnable_service)]
        services: Vec<Service>,
        /// Maximum (database, target) mirror jobs copying or pruning on this node at once. Default:
        /// the machine's available parallelism
        #[arg(long)]
        max_mirror_jobs: Option<usize>,
        /// Path to the rclone binary, for mirror targets with copier = "rclone"
        #[arg(long)]
        rclone: Option<std::path::PathBuf>,
        /// A directory of WebAssembly plugins (<name>.wasm); may repeat
        #[arg(long = "plugin-dir")]
        plugin_dirs: Vec<std::path::PathBuf>,
        /// Where compiled plugins are cached. Default: ~/.cache/sleet/plugins
        #[arg(long)]
        plugin_cache: Option<std::path::PathBuf>,
        /// Serve /metrics, /healthz, /readyz and /status on this address, e.g. 0.0.0.0:9746. Off
        /// by default
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Metric series per mirror target (mirror, the default), also SlateDB's per database
        /// (database), or only node-wide sums (node)
        #[arg(long, value_enum, default_value_t = crate::metrics::Detail::Mirror)]
        metrics_detail: crate::metrics::Detail,
        /// How long a stopping node (SIGTERM, Ctrl-C) waits for its tasks before it abandons them
        /// and deletes its heartbeat. Give the platform's grace period more than this
        #[arg(long, default_value = "30s", value_parser = parse_grace)]
        shutdown_grace: std::time::Duration,
    },
    /// Show fleet nodes, registered databases, and service placement, derived from the fleet root
    Status {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// Also read each database's compaction queue depth from .compactions (one read per database)
        #[arg(long)]
        compactions: bool,
        /// Also read each mirror target's lag (manifests, WAL ids, seconds) and check destinations
        /// for collisions
        #[arg(long)]
        mirrors: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Register a database: write its dbs/<db>.toml registry file
    Register {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// Database URL, e.g. s3://bucket/db
        db: String,
        /// Register without reading the database (by default it is read to
        /// warn about a compactor running inside its writer)
        #[arg(long)]
        no_check: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Run a local demo: a file:// fleet root, a database under write load, and a node compacting and
    /// collecting it. Ctrl-C stops it
    Demo {
        /// Where to put the fleet root and the database
        #[arg(default_value = "sleet-demo")]
        dir: std::path::PathBuf,
    },
    /// Configuration files: check them before uploading
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Mirror copies: one-shot sync, restore, and verify
    #[command(subcommand)]
    Mirror(MirrorCommand),
    /// WebAssembly plugins: list a plugin dir, or check it against a config
    #[command(subcommand)]
    Plugin(PluginCommand),
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// List the plugins in plugin dirs: name, kind, sha256, and any that fail to load
    List {
        /// A directory of WebAssembly plugins (<name>.wasm); may repeat
        #[arg(long = "plugin-dir", required = true)]
        plugin_dirs: Vec<std::path::PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Load every plugin, detect its kind, call describe, and configure it with each config
    /// sleet.toml gives it; exits 1 on any problem
    Check {
        /// A directory of WebAssembly plugins (<name>.wasm); may repeat
        #[arg(long = "plugin-dir", required = true)]
        plugin_dirs: Vec<std::path::PathBuf>,
        /// The sleet.toml whose targets, hooks and [plugins] pins to check against
        #[arg(long)]
        config: Option<std::path::PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Write the WIT packages this sleet speaks (plugin.wit, compaction/compaction.wit) into DIR
    Wit {
        /// Where to write them (created if missing; only these files are overwritten)
        dir: std::path::PathBuf,
    },
    /// Write a new plugin project, one of the examples renamed, that builds into NAME.wasm with
    /// the one command its README.md gives
    New {
        /// The project's language
        #[arg(long, value_enum)]
        lang: crate::scaffold::Lang,
        /// What the plugin is
        #[arg(long, value_parser = ["copier", "hook", "merge-operator", "compaction-filter"])]
        kind: String,
        /// The plugin's name: [a-z][a-z0-9-]*, at most 64 characters
        name: String,
        /// Where to create the project's directory NAME (default: here)
        #[arg(long, default_value = ".")]
        dir: std::path::PathBuf,
    },
}

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
        /// The restore point: a manifest id or an RFC 3339 timestamp. Default: the backup's latest
        /// manifest
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

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Check config files: a file named sleet.toml is fleet policy, any other is a dbs/<db>.toml
    /// registry file, checked laid over the fleet policy. Exits 1 if any file has a problem
    Check {
        /// Files to check
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
        /// The sleet.toml that registry files are laid over. Default: a sleet.toml among FILES,
        /// else the built-in defaults
        #[arg(long)]
        fleet: Option<std::path::PathBuf>,
    },
}

/// How a one-shot command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable text
    Text,
    /// JSON matching the subcommand's response schema
    Json,
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Run {
            root,
            node_id,
            services,
            max_mirror_jobs,
            rclone,
            plugin_dirs,
            plugin_cache,
            listen,
            metrics_detail,
            shutdown_grace,
        } => {
            if let Some(dup) = first_duplicate(&services) {
                return Err(Error::CliUsage(format!(
                    "--services lists \"{dup}\" more than once"
                )));
            }
            let fleet = Fleet::open(&root)?;
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            let metrics = Arc::new(crate::metrics::Metrics::new(metrics_detail));
            let probes = Arc::new(crate::probes::NodeProbes::default());
            let endpoint = match listen {
                Some(address) => Some(crate::endpoint::Endpoint::bind(address).await.map_err(
                    |e| Error::Listen {
                        address,
                        message: e.to_string(),
                    },
                )?),
                None => None,
            };
            let server = endpoint.map(|endpoint| {
                tracing::info!(address = %listen.expect("bound"), "serving /metrics, /healthz, /readyz and /status");
                endpoint.serve(metrics.clone(), probes.clone(), shutdown.child_token())
            });
            let mut options = NodeOptions::new(node_id)
                .with_services(services)
                .with_telemetry(metrics, probes)
                .with_shutdown_grace(shutdown_grace);
            if let Some(jobs) = max_mirror_jobs {
                options = options.with_max_mirror_jobs(jobs);
            }
            if let Some(rclone) = rclone {
                options = options.with_rclone(rclone);
            }
            options = options.with_plugin_dirs(plugin_dirs, plugin_cache);
            let ran = fleet.run_node(options, shutdown.clone()).await;
            shutdown.cancel();
            if let Some(server) = server {
                let _ = server.await;
            }
            ran?;
        }
        Command::Status {
            root,
            compactions,
            mirrors,
            format,
        } => {
            let options = StatusOptions::default()
                .with_compactions(compactions)
                .with_mirrors(mirrors);
            let status = Fleet::open(&root)?.status(options).await?;
            emit(format, &status, render_status)
        }
        Command::Register {
            root,
            db,
            no_check,
            format,
        } => {
            let fleet = Fleet::open(&root)?;
            let mut registered = fleet.register(&db).await?;
            if !no_check {
                registered.warnings = fleet.check_database(&registered.url).await;
            }
            emit(format, &registered, render_register)
        }
        Command::Demo { dir } => {
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            crate::demo::run(&dir, shutdown).await?;
        }
        Command::Mirror(command) => run_mirror(command).await?,
        Command::Plugin(command) => run_plugin(command).await?,
        Command::Config(ConfigCommand::Check { files, fleet }) => {
            let report = config_check::check_files(&files, fleet.as_deref());
            print!("{}", report.render());
            if report.failed() > 0 {
                return Err(Error::ConfigCheckFailed {
                    failed: report.failed(),
                    total: files.len(),
                });
            }
        }
    }
    Ok(())
}

async fn run_mirror(command: MirrorCommand) -> Result<(), Error> {
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

/// `sleet plugin wit` and `sleet plugin new`: files on disk, no runtime.
fn write_plugin_files(command: PluginCommand) -> Result<(), Error> {
    use crate::scaffold;
    let failed = |e: scaffold::ScaffoldError| Error::CliUsage(e.to_string());
    match command {
        PluginCommand::Wit { dir } => {
            for path in scaffold::write_wit(&dir).map_err(failed)? {
                println!("wrote {}", path.display());
            }
        }
        PluginCommand::New {
            lang,
            kind,
            name,
            dir,
        } => {
            let kind = match kind.as_str() {
                "copier" => PluginKind::Copier,
                "hook" => PluginKind::Hook,
                "merge-operator" => PluginKind::MergeOperator,
                _ => PluginKind::CompactionFilter,
            };
            let project = scaffold::project(lang, kind, &name).map_err(failed)?;
            let at = dir.join(&name);
            scaffold::write(&at, &project).map_err(failed)?;
            println!(
                "wrote a {lang} {kind} plugin in {}; build it there with:\n  {}\nwhich writes {}",
                at.display(),
                project.build.join(" "),
                project.output.display()
            );
        }
        _ => unreachable!("only wit and new write files"),
    }
    Ok(())
}

async fn run_plugin(command: PluginCommand) -> Result<(), Error> {
    if matches!(
        command,
        PluginCommand::Wit { .. } | PluginCommand::New { .. }
    ) {
        return write_plugin_files(command);
    }
    let (dirs, config, format, strict) = match command {
        PluginCommand::List {
            plugin_dirs,
            format,
        } => (plugin_dirs, None, format, false),
        PluginCommand::Check {
            plugin_dirs,
            config,
            format,
        } => (plugin_dirs, config, format, true),
        PluginCommand::Wit { .. } | PluginCommand::New { .. } => unreachable!("handled above"),
    };
    let fleet =
        match &config {
            Some(path) => Some(
                crate::config::parse_fleet_config(&std::fs::read_to_string(path).map_err(|e| {
                    Error::CliUsage(format!("failed to read {}: {e}", path.display()))
                })?)
                .map_err(|e| Error::CliUsage(format!("{}: {e}", path.display())))?,
            ),
            None => None,
        };
    let report =
        crate::plugin_check::check(&dirs, PluginRuntime::default_cache_dir(), fleet.as_ref())
            .await
            .map_err(Error::Plugins)?;
    emit(format, &report, render_plugins);
    let problems = report.problem_count();
    if strict && problems > 0 {
        return Err(Error::PluginCheckFailed { problems });
    }
    Ok(())
}

fn render_plugins(r: &crate::plugin_check::PluginCheckResponse) -> String {
    let rows = r.plugins.iter().map(|p| {
        vec![
            p.name.clone(),
            p.kind.map_or("-".to_string(), |k| k.to_string()),
            p.sha256.clone().unwrap_or_else(|| "-".into()),
            if p.used_by.is_empty() {
                "-".to_string()
            } else {
                p.used_by.join(", ")
            },
        ]
    });
    let mut out = status::table(&["PLUGIN", "KIND", "SHA256", "USED BY"], rows);
    for p in &r.plugins {
        let mut facts = Vec::new();
        if let Some(toolchain) = &p.toolchain {
            facts.push(format!("made by {toolchain}"));
        }
        if let (Some(bytes), Some(ms)) = (p.size_bytes, p.load_ms) {
            facts.push(format!(
                "{:.1} MB, loaded in {:.1} s",
                bytes as f64 / 1e6,
                ms as f64 / 1e3
            ));
        }
        if let (Some(peak), Some(budget)) = (p.peak_memory_bytes, p.memory_mib) {
            facts.push(format!(
                "peak memory {:.1} of {budget} MiB",
                peak as f64 / f64::from(1 << 20)
            ));
        }
        if !facts.is_empty() {
            out.push_str(&format!("{}: {}\n", p.name, facts.join("; ")));
        }
    }
    for warning in r.plugins.iter().flat_map(|p| p.warnings.iter()) {
        out.push_str(&format!("warning: {warning}\n"));
    }
    let problems = r
        .problems
        .iter()
        .chain(r.plugins.iter().flat_map(|p| p.problems.iter()));
    for problem in problems {
        out.push_str(&format!("problem: {problem}\n"));
    }
    out
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
    format!(
        "restored {} at manifest {} into {}: {} manifests, {} objects, {} bytes\n",
        r.backup,
        r.manifest_id,
        r.destination,
        r.manifests_committed,
        r.objects_copied,
        r.bytes_copied
    )
}

fn render_verify(r: &VerifyReport) -> String {
    let mut out = String::new();
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

/// Parses a `--services` entry.
fn runnable_service(name: &str) -> Result<Service, String> {
    name.parse()
        .map_err(|e: crate::service::UnknownService| e.to_string())
}

/// Cancels `shutdown` on SIGINT (Ctrl-C) or SIGTERM (service managers,
/// container runtimes), so both stop tasks and delete the heartbeat.
async fn cancel_on_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("signal received; shutting down");
    shutdown.cancel();
}

fn render_status(status: &StatusResponse) -> String {
    status::render_text(status)
}

fn render_register(r: &RegisterResponse) -> String {
    let mut out = if r.created {
        format!("registered {} at {}\n", r.url, r.file)
    } else {
        format!("{} already registered at {}\n", r.url, r.file)
    };
    for warning in &r.warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

/// Prints a response as text or pretty JSON with a trailing newline.
fn emit<T: Serialize>(format: Format, value: &T, text: fn(&T) -> String) {
    let out = match format {
        Format::Text => text(value),
        Format::Json => {
            let mut json = serde_json::to_string_pretty(value).expect("responses serialize");
            json.push('\n');
            json
        }
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`sleet status | head`) is not an error worth a panic.
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
}

/// `--shutdown-grace`: a duration such as `30s` or `2m`.
fn parse_grace(value: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(value).map_err(|e| format!("\"{value}\" is not a duration: {e}"))
}
