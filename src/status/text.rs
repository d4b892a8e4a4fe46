//! Status for people: borderless tables written straight to their
//! destination.
//!
//! A fleet of 100,000 databases has 300,000 placement rows. Building them
//! as strings first would hold the fleet's status a second (and third)
//! time, so tables take their rows as a cloneable iterator: one pass
//! measures the columns, a second formats each row as it is written.

use std::io::{self, Write};

use crate::response::{MirrorStatus, StatusResponse};
use crate::service::Service;

use super::stores;

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

/// A left-aligned table as a string (see [`write_table`]), for tables
/// small enough to build whole.
pub fn table(headers: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = rows.into_iter().collect();
    let mut out = Vec::new();
    write_table(&mut out, headers, rows.iter()).expect("writing to memory cannot fail");
    String::from_utf8(out).expect("table cells are UTF-8")
}

/// Writes a left-aligned table: each column padded to its widest cell plus
/// a two-space gutter, the last column unpadded, no trailing whitespace.
/// `rows` is walked twice (widths, then lines) and never collected.
pub fn write_table<I>(out: &mut dyn Write, headers: &[&str], rows: I) -> io::Result<()>
where
    I: Iterator + Clone,
    I::Item: AsRef<[String]>,
{
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows.clone() {
        for (width, cell) in widths.iter_mut().zip(row.as_ref()) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut line = String::new();
    write_line(out, &mut line, headers, &widths)?;
    for row in rows {
        write_line(out, &mut line, row.as_ref(), &widths)?;
    }
    Ok(())
}

/// One table line, formatted in `line` (reused between lines).
fn write_line(
    out: &mut dyn Write,
    line: &mut String,
    cells: &[impl AsRef<str>],
    widths: &[usize],
) -> io::Result<()> {
    use std::fmt::Write as _;
    line.clear();
    for (col, cell) in cells.iter().enumerate() {
        let cell = cell.as_ref();
        if col + 1 == cells.len() {
            line.push_str(cell);
        } else {
            let _ = write!(line, "{cell:<width$}  ", width = widths[col]);
        }
    }
    out.write_all(line.trim_end().as_bytes())?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A row that counts how many rows exist at once.
    struct CountedRow {
        cells: Vec<String>,
        alive: Rc<Cell<usize>>,
    }

    impl CountedRow {
        fn new(i: usize, alive: &Rc<Cell<usize>>, peak: &Rc<Cell<usize>>) -> Self {
            alive.set(alive.get() + 1);
            peak.set(peak.get().max(alive.get()));
            CountedRow {
                cells: vec![format!("db{i}"), "gc".into()],
                alive: alive.clone(),
            }
        }
    }

    impl Drop for CountedRow {
        fn drop(&mut self) {
            self.alive.set(self.alive.get() - 1);
        }
    }

    impl AsRef<[String]> for CountedRow {
        fn as_ref(&self) -> &[String] {
            &self.cells
        }
    }

    #[test]
    fn a_table_is_written_a_row_at_a_time_never_collected() {
        let alive = Rc::new(Cell::new(0));
        let peak = Rc::new(Cell::new(0));
        let rows = (0..1000).map(|i| CountedRow::new(i, &alive, &peak));
        let mut out = Vec::new();
        write_table(&mut out, &["DATABASE", "SERVICE"], rows).unwrap();
        assert_eq!(peak.get(), 1, "rows alive at once");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1001);
        assert!(
            text.starts_with("DATABASE  SERVICE\ndb0       gc\n"),
            "{text}"
        );
        assert!(text.ends_with("db999     gc\n"), "{text}");
    }
}
