//! The in-process nodes' log: warnings (or `RUST_LOG`) to the test's
//! captured output, and, while a test asks for it, sleet's debug lines
//! kept in memory, so a test whose timing bound fails can print the
//! timeline that explains it. A full run logs at `warn`: without this, a
//! bound that fails once leaves nothing to explain it by.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The most lines kept: the oldest go first.
const KEPT_LINES: usize = 20_000;

static RECORDING: AtomicBool = AtomicBool::new(false);
static LINES: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

/// Installs the process's log once (later calls do nothing).
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let captured = tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(filter);
    let kept = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(|| Line(Vec::new()))
        // Dynamic: a plain `filter_fn` caches each callsite's first
        // answer, and most are first hit while nothing is kept.
        .with_filter(tracing_subscriber::filter::dynamic_filter_fn(|meta, _| {
            RECORDING.load(Ordering::Relaxed)
                && (meta.target().starts_with("sleet") && *meta.level() <= tracing::Level::DEBUG
                    || meta.target().starts_with("slatedb")
                        && *meta.level() <= tracing::Level::INFO)
        }));
    let _ = tracing_subscriber::registry()
        .with(captured)
        .with(kept)
        .try_init();
}

/// One event's text, kept when written out.
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let line = String::from_utf8_lossy(&self.0).trim_end().to_string();
        let mut lines = LINES.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == KEPT_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// Keeps sleet's debug log (and SlateDB's info) from now until dropped.
/// Other tests running at the time log into it too.
pub struct DebugLog(());

impl DebugLog {
    pub fn start() -> DebugLog {
        init();
        LINES.lock().unwrap_or_else(|e| e.into_inner()).clear();
        RECORDING.store(true, Ordering::Relaxed);
        DebugLog(())
    }

    /// The lines kept so far, oldest first.
    pub fn lines(&self) -> String {
        let lines = LINES.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for DebugLog {
    fn drop(&mut self) {
        RECORDING.store(false, Ordering::Relaxed);
    }
}
