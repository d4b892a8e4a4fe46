//! The `sleet` command line: argument shapes and what each command prints.
//!
//! Results go to stdout (text for people, `--format json` for machines);
//! logs and errors go to stderr, so JSON output stays clean.

use std::io::Write;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;

use tokio_util::sync::CancellationToken;

use crate::daemon::RUNNABLE_SERVICES;
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
    },
    /// Show fleet nodes, registered databases, and service placement, derived from the fleet root
    Status {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// Also read each database's compaction queue depth from .compactions (one read per database)
        #[arg(long)]
        compactions: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Register a database: write its dbs/<db>.toml registry file
    Register {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// Database URL, e.g. s3://bucket/db
        db: String,
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
        } => {
            if let Some(dup) = first_duplicate(&services) {
                return Err(Error::CliUsage(format!(
                    "--services lists \"{dup}\" more than once"
                )));
            }
            let fleet = Fleet::open(&root)?;
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            let options = NodeOptions::new(node_id).with_services(services);
            fleet.run_node(options, shutdown).await?;
        }
        Command::Status {
            root,
            compactions,
            format,
        } => {
            let options = StatusOptions::default().with_compactions(compactions);
            let status = Fleet::open(&root)?.status(options).await?;
            emit(format, &status, render_status)
        }
        Command::Register { root, db, format } => {
            let registered = Fleet::open(&root)?.register(&db).await?;
            emit(format, &registered, render_register)
        }
        Command::Demo { dir } => {
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            crate::demo::run(&dir, shutdown).await?;
        }
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

/// Parses a `--services` entry, accepting only services this build runs.
fn runnable_service(name: &str) -> Result<Service, String> {
    let service: Service = name
        .parse()
        .map_err(|e: crate::service::UnknownService| e.to_string())?;
    if RUNNABLE_SERVICES.contains(&service) {
        Ok(service)
    } else {
        Err(format!(
            "this build of sleet cannot run the {service} service yet"
        ))
    }
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
    if r.created {
        format!("registered {} at {}\n", r.url, r.file)
    } else {
        format!("{} already registered at {}\n", r.url, r.file)
    }
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
