use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use sleet::cli::LogFormat;
use tracing_subscriber::EnvFilter;

/// jemalloc, not the system's allocator: a node's bursts (30,000 tasks
/// starting, GC lingering on every database copied moments before) free
/// most of what they allocated around allocations that live on, and
/// glibc's allocator cannot hand back a page that still holds one live
/// chunk. Over 10,000 fresh copies a node settled at 30.4 KiB per
/// database with glibc and 24.9 with jemalloc, the same live heap
/// (`cargo bench --bench fleet -- scale-cli`, docs/performance.md).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = sleet::cli::Cli::parse();
    init_logging(cli.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(sleet::cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Logs go to stderr (stdout is for results), filtered by `RUST_LOG`,
/// `sleet=info,warn` by default: plain lines (colored only on a terminal)
/// or one JSON object per line with the span and event fields (node,
/// database, service, target, plugin) at the top level.
fn init_logging(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("sleet=info,warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
}
