//! The `sleet` command line: argument shapes and what each command prints.
//!
//! Results go to stdout (text for people, `--format json` for machines);
//! logs and errors go to stderr, so JSON output stays clean.
//!
//! The edge: it parses arguments, calls `Fleet` and the `commands`, and
//! turns errors into one line and an exit code.
//!
//! May import: everything below it.

use std::io::Write;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use futures::StreamExt;
use serde::Serialize;

use tokio_util::sync::CancellationToken;

mod events;
mod mirror;
mod plugin;
mod store;

pub use mirror::MirrorCommand;
pub use plugin::PluginCommand;
pub use store::StoreCommand;

use crate::commands::{config_check, status};
use crate::daemon::RUNNABLE_SERVICES;
use crate::model::heartbeat;
use crate::model::service::{Service, first_duplicate};
use crate::{Error, Fleet, NodeOptions, RegisterResponse, StatusOptions};

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
        #[arg(long, value_enum, default_value_t = crate::observe::metrics::Detail::Mirror)]
        metrics_detail: crate::observe::metrics::Detail,
        /// How long a stopping node (SIGTERM, Ctrl-C) waits for its tasks before it abandons them
        /// and deletes its heartbeat. Give the platform's grace period more than this
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        shutdown_grace: std::time::Duration,
        /// Do not receive from the [events] queue; act only on the events other nodes relay (and
        /// poll at the usual cadence). For a node that cannot reach the queue
        #[arg(long)]
        no_event_receiver: bool,
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
    /// Register databases: write each one's dbs/<db>.toml registry file
    Register {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// Database URLs, e.g. s3://bucket/db (several are registered together)
        #[arg(required_unless_present = "from")]
        dbs: Vec<String>,
        /// Also register the database URLs in this file, one per line (blank lines and lines
        /// starting with # are skipped); - reads standard input
        #[arg(long, value_name = "FILE")]
        from: Option<std::path::PathBuf>,
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
    /// Object stores: prove one has the atomic conditional writes a fleet needs
    #[command(subcommand)]
    Store(StoreCommand),
    /// Store events: set up the queue and bucket notifications that wake idle databases, and check
    /// that they arrive
    #[command(subcommand)]
    Events(events::EventsCommand),
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
        /// Also check the files laid over this fleet root (its config and registry): mirror
        /// destinations two databases would share are errors
        #[arg(long)]
        root: Option<String>,
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
            no_event_receiver,
        } => {
            if let Some(dup) = first_duplicate(&services) {
                return Err(Error::CliUsage(format!(
                    "--services lists \"{dup}\" more than once"
                )));
            }
            let fleet = Fleet::open(&root)?;
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            let metrics = Arc::new(crate::observe::metrics::Metrics::new(metrics_detail));
            let probes = Arc::new(crate::observe::probes::NodeProbes::default());
            let endpoint = match listen {
                Some(address) => Some(
                    crate::observe::endpoint::Endpoint::bind(address)
                        .await
                        .map_err(|e| Error::Listen {
                            address,
                            message: e.to_string(),
                        })?,
                ),
                None => None,
            };
            let server = endpoint.map(|endpoint| {
                tracing::info!(address = %listen.expect("bound"), "serving /metrics, /healthz, /readyz and /status");
                endpoint.serve(metrics.clone(), probes.clone(), shutdown.child_token())
            });
            let mut options = NodeOptions::new(node_id)
                .with_services(services)
                .with_telemetry(metrics, probes)
                .with_shutdown_grace(shutdown_grace)
                .with_event_receiver(!no_event_receiver);
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
            emit_with(format, &status, status::write_text)
        }
        Command::Register {
            root,
            mut dbs,
            from,
            no_check,
            format,
        } => {
            if let Some(from) = &from {
                dbs.extend(read_url_list(from)?);
                if dbs.is_empty() {
                    return Err(Error::CliUsage(format!(
                        "--from {}: lists no database URLs",
                        from.display()
                    )));
                }
            }
            let fleet = Fleet::open(&root)?;
            let mut registered = fleet.register_all(&dbs).await?;
            if !no_check {
                let warnings: Vec<Vec<String>> = futures::stream::iter(&registered)
                    .map(|r| fleet.check_database(&r.url))
                    .buffered(CHECKS_IN_FLIGHT)
                    .collect()
                    .await;
                for (r, warnings) in registered.iter_mut().zip(warnings) {
                    r.warnings = warnings;
                }
            }
            // One database prints one response, as it always has.
            match <[RegisterResponse; 1]>::try_from(registered) {
                Ok([one]) => emit(format, &one, render_register),
                Err(many) => emit(format, &many, |many| {
                    many.iter().map(render_register).collect()
                }),
            }
        }
        Command::Demo { dir } => {
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            crate::commands::demo::run(&dir, shutdown).await?;
        }
        Command::Mirror(command) => mirror::run(command).await?,
        Command::Plugin(command) => plugin::run(command).await?,
        Command::Store(command) => store::run(command).await?,
        Command::Events(command) => events::run(command).await?,
        Command::Config(ConfigCommand::Check { files, fleet, root }) => {
            let report = match root {
                Some(root) => {
                    let root = Fleet::open(&root)?;
                    config_check::check_files_against_root(&files, fleet.as_deref(), root.root())
                        .await
                }
                None => config_check::check_files(&files, fleet.as_deref()),
            };
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

/// Parses a `--services` entry.
fn runnable_service(name: &str) -> Result<Service, String> {
    name.parse()
        .map_err(|e: crate::model::service::UnknownService| e.to_string())
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
                    biased;
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

/// Databases `register` reads at once to warn about them.
const CHECKS_IN_FLIGHT: usize = 16;

/// The database URLs in a `--from` file (or standard input for `-`): one
/// per line, blank lines and `#` comments skipped.
fn read_url_list(from: &std::path::Path) -> Result<Vec<String>, Error> {
    let text = if from == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(from)
    }
    .map_err(|e| Error::CliUsage(format!("--from {}: cannot read it: {e}", from.display())))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_string)
        .collect())
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
    emit_with(format, value, |value, out| {
        out.write_all(text(value).as_bytes())
    })
}

/// Prints a response, writing the text or JSON straight to stdout as it
/// is formed rather than building it in memory first: a large fleet's
/// status is held once, not twice.
fn emit_with<T: Serialize>(
    format: Format,
    value: &T,
    text: impl FnOnce(&T, &mut dyn Write) -> std::io::Result<()>,
) {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = match format {
        Format::Text => text(value, &mut out),
        Format::Json => serde_json::to_writer_pretty(&mut out, value)
            .map_err(|e| {
                assert!(e.is_io(), "responses serialize: {e}");
                std::io::Error::from(e)
            })
            .and_then(|()| out.write_all(b"\n")),
    };
    // A closed pipe (`sleet status | head`) is not an error worth a panic.
    let _ = written.and_then(|()| out.flush());
}

/// `--shutdown-grace`: a duration such as `30s` or `2m`.
pub(super) fn parse_duration(value: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(value).map_err(|e| format!("\"{value}\" is not a duration: {e}"))
}
