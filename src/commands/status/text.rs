//! Status for people: borderless tables written straight to their
//! destination.
//!
//! A fleet of 100,000 databases has 300,000 placement rows. Building them
//! as strings first would hold the fleet's status a second (and third)
//! time, so tables take their rows as a cloneable iterator: one pass
//! measures the columns, a second formats each row as it is written.

use std::io::{self, Write};

use crate::model::response::{MirrorStatus, StatusResponse};
use crate::model::service::Service;

use super::stores;
use super::table::write_table;

/// Writes status for people: borderless tables, one blank line between
/// sections, warnings last.
pub fn write_text(status: &StatusResponse, out: &mut dyn Write) -> io::Result<()> {
    let nodes = status.nodes.iter().map(|n| {
        vec![
            n.node_id.clone(),
            if n.live { "yes" } else { "no" }.to_string(),
            n.heartbeat_age.to_string(),
            join_services(&n.services),
            n.sleet_version.clone().unwrap_or_else(|| "-".into()),
            n.slatedb_version.clone().unwrap_or_else(|| "-".into()),
        ]
    });
    let with_queue = status.databases.iter().any(|db| db.queue.is_some());
    let placements = status.databases.iter().flat_map(move |db| {
        db.services.iter().map(move |p| {
            let service = match &p.target {
                Some(target) => format!("{} ({target})", p.service),
                None => p.service.to_string(),
            };
            let nodes = if p.nodes.is_empty() {
                "-".to_string()
            } else {
                p.nodes.join(",")
            };
            let mut row = vec![db.url.clone(), service, nodes];
            if with_queue {
                row.push(db.queue.map_or("-".into(), |q| {
                    format!("{} waiting, {} running", q.claimable, q.running)
                }));
            }
            row
        })
    });
    write_table(
        out,
        &["NODE", "LIVE", "HEARTBEAT", "SERVICES", "SLEET", "SLATEDB"],
        nodes,
    )?;
    out.write_all(b"\n")?;
    let headers: &[&str] = if with_queue {
        &["DATABASE", "SERVICE", "NODES", "QUEUE"]
    } else {
        &["DATABASE", "SERVICE", "NODES"]
    };
    write_table(out, headers, placements)?;
    if !status.mirrors.is_empty() {
        out.write_all(b"\n")?;
        write_mirrors(out, &status.mirrors)?;
    }
    if !status.stores.is_empty() {
        out.write_all(b"\n")?;
        out.write_all(stores::render(&status.stores).as_bytes())?;
    }
    if !status.warnings.is_empty() {
        out.write_all(b"\n")?;
        for warning in &status.warnings {
            writeln!(out, "warning: {warning}")?;
        }
    }
    Ok(())
}

/// [`write_text`] into a string.
pub fn render_text(status: &StatusResponse) -> String {
    let mut out = Vec::new();
    write_text(status, &mut out).expect("writing to memory cannot fail");
    String::from_utf8(out).expect("status text is UTF-8")
}

/// The mirror lag table, then one `error:` line per unreadable mirror.
fn write_mirrors(out: &mut dyn Write, mirrors: &[MirrorStatus]) -> io::Result<()> {
    let cell = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let rows = mirrors.iter().map(|m| {
        vec![
            m.database.clone(),
            m.target.clone(),
            m.destination.clone(),
            cell(m.manifests_behind),
            cell(m.wal_behind),
            cell(m.seconds_behind),
            m.recovery_point_seconds
                .map_or("-".to_string(), |s| format!("{s:.1}")),
        ]
    });
    write_table(
        out,
        &[
            "DATABASE",
            "TARGET",
            "DESTINATION",
            "MANIFESTS",
            "WAL",
            "SECONDS",
            "RPO",
        ],
        rows,
    )?;
    for m in mirrors {
        if let Some(e) = &m.error {
            writeln!(out, "error: {} target {}: {e}", m.database, m.target)?;
        }
    }
    Ok(())
}

fn join_services(services: &[Service]) -> String {
    if services.is_empty() {
        return "-".into();
    }
    services
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",")
}
