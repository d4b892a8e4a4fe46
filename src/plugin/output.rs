//! What a plugin writes to its stdout and stderr during one call: kept,
//! bounded, so an error can carry the guest's own words (a Python
//! traceback, a JavaScript exception, a Rust panic message) instead of a
//! bare wasm trap.
//!
//! Each call's store has its own [`GuestOutput`], so output is never mixed
//! between plugins or calls. It keeps the last [`KEPT_BYTES`] of both
//! streams, interleaved as written (a traceback ends with its error), and
//! counts what it dropped. Writes never fail and never block: a plugin
//! that prints a megabyte a call costs the host 8 KiB, not a trap.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes of output kept per call; older bytes are dropped and counted.
pub const KEPT_BYTES: usize = 8 * 1024;

/// The most one write may hand over (WASI's usual permit); bounds what the
/// guest can make the host allocate at once.
const WRITE_PERMIT: usize = 64 * 1024;

/// Lines of output an error quotes, from the end.
const QUOTED_LINES: usize = 12;

/// One call's stdout and stderr, shared by the streams the guest opens.
#[derive(Debug, Clone, Default)]
pub struct GuestOutput(Arc<Mutex<Tail>>);

#[derive(Debug, Default)]
struct Tail {
    kept: VecDeque<u8>,
    dropped: u64,
}

/// What a call wrote, once it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The last [`KEPT_BYTES`] written, as text (invalid UTF-8 replaced).
    pub text: String,
    /// Bytes written before those, dropped.
    pub dropped: u64,
}

impl GuestOutput {
    fn append(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let skip = bytes.len().saturating_sub(KEPT_BYTES);
        tail.dropped += skip as u64;
        tail.kept.extend(&bytes[skip..]);
        let over = tail.kept.len().saturating_sub(KEPT_BYTES);
        tail.kept.drain(..over);
        tail.dropped += over as u64;
    }

    /// What was written so far.
    pub fn captured(&self) -> Captured {
        let tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (front, back) = tail.kept.as_slices();
        let bytes = [front, back].concat();
        Captured {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            dropped: tail.dropped,
        }
    }
}

impl Captured {
    pub fn is_empty(&self) -> bool {
        self.text.trim().is_empty()
    }

    /// The last non-empty lines, joined with " | ", for one log line or
    /// error; with how much was dropped before them.
    pub fn last_lines(&self) -> String {
        let lines: Vec<&str> = self
            .text
            .lines()
            .map(str::trim_end)
            .filter(|line| !line.trim().is_empty())
            .collect();
        let start = lines.len().saturating_sub(QUOTED_LINES);
        let mut quoted = lines[start..].join(" | ");
        if start > 0 || self.dropped > 0 {
            quoted = format!("... {quoted}");
        }
        if self.dropped > 0 {
            quoted.push_str(&format!(" ({} earlier bytes dropped)", self.dropped));
        }
        quoted
    }

    /// The guest's own error, in its language's words, when its output
    /// names one: the last line of a Python traceback, a JavaScript
    /// exception, a Rust panic message.
    pub fn guest_error(&self) -> Option<String> {
        let lines: Vec<&str> = self.text.lines().map(str::trim).collect();
        // "<ExceptionType>: <message>": how a Python traceback ends and a
        // JavaScript exception begins.
        let error_line = |line: &str| {
            let Some((kind, _)) = line.split_once(':') else {
                return false;
            };
            !kind.is_empty()
                && !kind.contains(' ')
                && (kind.ends_with("Error") || kind.ends_with("Exception"))
        };
        let last_error = |lines: &[&str]| {
            lines
                .iter()
                .rev()
                .find(|line| error_line(line))
                .map(|line| line.to_string())
        };
        // Python: componentize-py prints the traceback, then its runtime
        // panics ("Python function threw an unexpected exception"); the
        // traceback's own error is the one the author wrote.
        if let Some(at) = lines
            .iter()
            .rposition(|l| l.starts_with("Traceback (most recent call last)"))
            && let Some(error) = last_error(&lines[at..])
        {
            return Some(error);
        }
        // A Rust panic: "thread '<unnamed>' panicked at src/lib.rs:9:5:"
        // then the message on the next line.
        if let Some(at) = lines.iter().rposition(|l| l.contains("panicked at")) {
            let message = lines.get(at + 1).copied().unwrap_or_default();
            return Some(format!("{} {message}", lines[at]).trim().to_string());
        }
        // JavaScript (StarlingMonkey): the exception's message, then
        // "Stack:" and the frames, the first of them the author's.
        if let Some(at) = lines.iter().position(|l| *l == "Stack:")
            && at > 0
            && !lines[at - 1].is_empty()
        {
            return Some(match lines.get(at + 1).filter(|f| !f.is_empty()) {
                Some(frame) => format!("{} (at {frame})", lines[at - 1]),
                None => lines[at - 1].to_string(),
            });
        }
        last_error(&lines)
    }
}

/// Advice for the commonest mistake a guest's error shows, if it shows
/// one: componentize-py makes a new instance of the exported class for
/// every call, so an attribute set on `self` in `configure` is gone in the
/// next call.
pub fn advice(guest_error: &str) -> Option<&'static str> {
    let on_self = guest_error.starts_with("AttributeError:")
        && guest_error.contains("object has no attribute");
    on_self.then_some(
        "state on self does not outlive a call (each call gets a new instance); \
         keep it in a module global",
    )
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[async_trait::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_bounded_and_the_drop_counted() {
        let output = GuestOutput::default();
        let mut stream = output.clone();
        for _ in 0..256 {
            OutputStream::write(&mut stream, Bytes::from(vec![b'x'; 4096])).unwrap();
        }
        OutputStream::write(&mut stream, Bytes::from_static(b"\nValueError: the end\n")).unwrap();
        let captured = output.captured();
        assert_eq!(captured.text.len(), KEPT_BYTES);
        assert_eq!(captured.dropped, 256 * 4096 + 21 - KEPT_BYTES as u64);
        assert_eq!(
            captured.guest_error().as_deref(),
            Some("ValueError: the end")
        );
        assert!(captured.last_lines().contains("earlier bytes dropped"));
    }

    #[test]
    fn each_language_s_error_is_found() {
        let python = Captured {
            text: "Traceback (most recent call last):\n  File \"app.py\", line 20, in copy\n    \
                   n = self.chunk\n        ^^^^^^^^^^\nAttributeError: 'Copier' object has no \
                   attribute 'chunk'\nthread '<unnamed>' (1) panicked at runtime/src/lib.rs:1280:25:\n\
                   Python function threw an unexpected exception\n"
                .into(),
            dropped: 0,
        };
        let error = python.guest_error().unwrap();
        assert_eq!(
            error,
            "AttributeError: 'Copier' object has no attribute 'chunk'"
        );
        assert!(advice(&error).unwrap().contains("module global"));
        let rust = Captured {
            text: "\nthread '<unnamed>' panicked at src/lib.rs:9:5:\nno chunk size\nnote: run \
                   with `RUST_BACKTRACE=1`\n"
                .into(),
            dropped: 0,
        };
        assert_eq!(
            rust.guest_error().unwrap(),
            "thread '<unnamed>' panicked at src/lib.rs:9:5: no chunk size"
        );
        // As componentize-js 0.23.0 prints an uncaught exception.
        let js = Captured {
            text: "can't access property \"chunk\", settings is undefined\nStack:\n  \
                   copy@app.js:24:19\n  export_copier_0_1_0$copy@initializer.js:856:17\n\
                   Redirecting call to abort() to mozalloc_abort\n"
                .into(),
            dropped: 0,
        };
        assert_eq!(
            js.guest_error().unwrap(),
            "can't access property \"chunk\", settings is undefined (at copy@app.js:24:19)"
        );
        assert_eq!(advice("TypeError: nope"), None);
        let quiet = Captured::default();
        assert!(quiet.is_empty() && quiet.guest_error().is_none());
    }
}
