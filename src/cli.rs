//! The `sleet` command line: argument shapes and what each command prints.
//!
//! Results go to stdout (text for people, `--format json` for machines);
//! logs and errors go to stderr, so JSON output stays clean.

use std::io::Write;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;

use crate::{Error, Fleet, RegisterResponse, StatusResponse, config_check, status};

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
    /// Show fleet nodes, registered databases, and service placement, derived from the fleet root
    Status {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
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
        Command::Status { root, format } => {
            let status = Fleet::open(&root)?.status().await?;
            emit(format, &status, render_status)
        }
        Command::Register { root, db, format } => {
            let registered = Fleet::open(&root)?.register(&db).await?;
            emit(format, &registered, render_register)
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
