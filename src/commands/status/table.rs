//! Borderless, left-aligned tables, written a row at a time: the shape
//! every status table shares.

use std::io::{self, Write};

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
