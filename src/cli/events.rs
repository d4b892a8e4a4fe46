//! `sleet events setup` and `sleet events check`.

use std::fmt::Write as _;
use std::time::Duration;

use clap::Subcommand;

use super::{Format, emit};
use crate::Error;
use crate::fleet::root::{ConfigPoller, FleetRoot};
use crate::services::events::check::{self, CheckReport};
use crate::services::events::notification::DatabaseIndex;
use crate::services::events::setup::{self, SetupReport};

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Create the SQS queue if missing, its access policy, and a notification of new manifests
    /// (suffix .manifest) on every bucket registered databases live in; prints what it did and
    /// the [events] table for sleet.toml. Run it again after registering a database in a new bucket
    Setup {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// The queue's name
        #[arg(long)]
        queue: String,
        /// Print the configuration without changing anything
        #[arg(long)]
        dry_run: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Write a marker object into every bucket registered databases live in and report whether
    /// and how fast its event arrives (at a running node, or here when none runs); exits 1 when
    /// one does not
    Check {
        /// Fleet root URL, e.g. s3://ops/sleet/
        root: String,
        /// How long to wait for each event
        #[arg(long, default_value = "30s", value_parser = super::parse_duration)]
        timeout: Duration,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub async fn run(command: EventsCommand) -> Result<(), Error> {
    match command {
        EventsCommand::Setup {
            root,
            queue,
            dry_run,
            format,
        } => {
            let root = FleetRoot::open(&root)?;
            let buckets = registered_buckets(&ConfigPoller::new().poll(&root).await);
            let endpoints =
                setup::Endpoints::from_env().map_err(|e| Error::Events(e.to_string()))?;
            let report = setup::setup(&endpoints, &queue, &buckets, dry_run)
                .await
                .map_err(|e| Error::Events(e.to_string()))?;
            emit(format, &report, setup_text);
        }
        EventsCommand::Check {
            root,
            timeout,
            format,
        } => {
            let root = FleetRoot::open(&root)?;
            let view = ConfigPoller::new().poll(&root).await;
            let settings = view.fleet.events.resolve().ok_or_else(|| {
                Error::Events(format!(
                    "{} has no [events] source; run `sleet events setup` and add the table it prints",
                    root.describe("sleet.toml")
                ))
            })?;
            let buckets = registered_buckets(&view);
            if buckets.is_empty() {
                return Err(Error::Events("no registered database is on S3".into()));
            }
            let nodes_live = nodes_live(&root, &view).await?;
            let report =
                check::run(&root, &settings.queue_url, &buckets, nodes_live, timeout).await;
            emit(format, &report, check_text);
            let failed = report.failed();
            if failed > 0 {
                return Err(Error::EventsCheckFailed { failed });
            }
        }
    }
    Ok(())
}

/// The buckets of the registered S3 databases.
fn registered_buckets(view: &crate::fleet::root::FleetView) -> std::collections::BTreeSet<String> {
    DatabaseIndex::new(view.databases.keys().map(String::as_str))
        .buckets()
        .clone()
}

/// Whether any node's heartbeat is live.
async fn nodes_live(root: &FleetRoot, view: &crate::fleet::root::FleetView) -> Result<bool, Error> {
    let heartbeats = root.list_heartbeats().await?;
    let timeout = view.fleet.node.resolve().heartbeat_timeout;
    Ok(
        crate::fleet::root::node_view(&heartbeats, chrono::Utc::now(), timeout)
            .values()
            .any(|n| n.live),
    )
}

fn setup_text(report: &SetupReport) -> String {
    let mut out = String::new();
    let verb = |done: &str, would: &str| {
        if report.dry_run {
            would.to_string()
        } else {
            done.to_string()
        }
    };
    let _ = writeln!(
        out,
        "queue {} ({}){}",
        report.queue_url,
        report.queue_arn,
        if report.queue_created {
            format!(": {}", verb("created", "would be created"))
        } else {
            ": exists".into()
        }
    );
    let _ = writeln!(
        out,
        "queue policy: {} s3.amazonaws.com to send from {} buckets",
        verb("allows", "would allow"),
        report.buckets.len()
    );
    for bucket in &report.buckets {
        let _ = writeln!(
            out,
            "bucket {bucket}: new *.manifest objects {} the queue",
            verb("notify", "would notify")
        );
    }
    if report.dry_run {
        let _ = writeln!(
            out,
            "\nqueue policy:\n{}",
            serde_json::to_string_pretty(&report.policy).unwrap_or_default()
        );
        let _ = writeln!(
            out,
            "\nbucket notification (kept beside the bucket's others):\n{}",
            report.notification
        );
    }
    let _ = writeln!(out, "\nadd to sleet.toml:\n\n{}", report.config_snippet());
    out
}

fn check_text(report: &CheckReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "queue {}", report.queue_url);
    for bucket in &report.buckets {
        match (bucket.arrived_after_secs, &bucket.problem) {
            (Some(secs), _) => {
                let by = bucket.received_by.as_deref().unwrap_or("?");
                let _ = writeln!(
                    out,
                    "bucket {}: event arrived after {secs:.2}s (received by {by})",
                    bucket.bucket
                );
            }
            (None, problem) => {
                let _ = writeln!(
                    out,
                    "bucket {}: FAILED: {}",
                    bucket.bucket,
                    problem.as_deref().unwrap_or("no event")
                );
            }
        }
    }
    out
}
