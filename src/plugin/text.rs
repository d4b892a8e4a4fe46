//! Text a plugin hands the host (log lines, error messages, hook reasons)
//! before it reaches logs, status, heartbeats or other hooks: bounded in
//! length, and with control characters escaped so one plugin string is
//! always one line that cannot pose as another log line.

/// Longest error message or hook reason kept, in bytes.
pub const MAX_MESSAGE: usize = 512;
/// Longest log line kept, in bytes.
pub const MAX_LOG_LINE: usize = 4096;

/// `text` with control characters escaped (`\n`, `\u{1b}`), cut to at
/// most `max` bytes at a character boundary, with `...` when cut.
pub fn bounded(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 3);
    for c in text.chars() {
        let piece: String = if c.is_control() {
            c.escape_default().collect()
        } else {
            c.to_string()
        };
        if out.len() + piece.len() > max {
            out.push_str("...");
            return out;
        }
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_one_bounded_line() {
        assert_eq!(bounded("plain", 10), "plain");
        assert_eq!(
            bounded("a\nINFO forged line\r\u{1b}[31m", 100),
            "a\\nINFO forged line\\r\\u{1b}[31m"
        );
        assert_eq!(bounded("abcdef", 4), "abcd...");
        assert_eq!(bounded("ééé", 5), "éé...", "cut at a character boundary");
        let huge = "x".repeat(16 * 1024 * 1024);
        assert_eq!(bounded(&huge, MAX_MESSAGE).len(), MAX_MESSAGE + 3);
        assert!(!bounded("\n\n\n", 4).contains('\n'));
    }
}
