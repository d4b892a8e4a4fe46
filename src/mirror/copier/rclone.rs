//! The rclone copier: `rclone copy --files-from <list> <src> <dst>`, with
//! on-the-fly remotes (no rclone config file) authenticated from the
//! environment, so any node that can reach both stores can run it.

use std::path::PathBuf;
use std::process::Stdio;

use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use super::{Copier, CopyBatch, CopyError, CopyProgress, CopyReport, ObjectOutcome};

/// Lines of rclone's stderr quoted in an error.
const STDERR_LINES: usize = 5;
/// Bytes of one stderr line read at once (a longer one is read in parts).
const MAX_LINE: u64 = 64 * 1024;
/// Characters of one rclone message kept (its log is read, not trusted).
const MAX_MESSAGE: usize = 512;
/// How often rclone reports its transfer totals (read into the pass's
/// progress, so a seeding pass shows bytes as they move).
const STATS_EVERY: &str = "500ms";

/// One line of rclone's JSON log (`--use-json-log`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum LogLine {
    /// Cumulative totals so far.
    Stats { bytes: u64, transfers: u64 },
    /// Anything else it said, bounded.
    Message(String),
}

/// Reads one stderr line: a stats entry, a message, or (not JSON, as
/// rclone prints before its logger starts) the line itself.
fn parse_log_line(line: &str) -> LogLine {
    let bounded = |text: &str| text.chars().take(MAX_MESSAGE).collect::<String>();
    let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
        return LogLine::Message(bounded(line.trim()));
    };
    if let Some(stats) = entry.get("stats") {
        let field = |name: &str| stats.get(name).and_then(serde_json::Value::as_u64);
        if let (Some(bytes), Some(transfers)) = (field("bytes"), field("transfers")) {
            return LogLine::Stats { bytes, transfers };
        }
    }
    let message = entry
        .get("msg")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(line);
    LogLine::Message(bounded(message.trim()))
}

/// What rclone's log told about one run.
#[derive(Debug, Default)]
struct RunLog {
    /// Totals recorded into the progress so far.
    bytes: u64,
    transfers: u64,
    /// Its last messages, for an error.
    last: std::collections::VecDeque<String>,
}

impl RunLog {
    /// Takes one line; records new bytes and transfers into `progress`.
    fn take(&mut self, line: &str, progress: &CopyProgress) {
        match parse_log_line(line) {
            LogLine::Stats { bytes, transfers } => {
                progress.record(
                    transfers.saturating_sub(self.transfers),
                    bytes.saturating_sub(self.bytes),
                );
                self.bytes = self.bytes.max(bytes);
                self.transfers = self.transfers.max(transfers);
            }
            LogLine::Message(message) if !message.is_empty() => {
                if self.last.len() == STDERR_LINES {
                    self.last.pop_front();
                }
                self.last.push_back(message);
            }
            LogLine::Message(_) => {}
        }
    }
}

#[derive(Debug, Clone)]
pub struct RcloneCopier {
    binary: PathBuf,
}

impl RcloneCopier {
    /// `binary` defaults to `rclone` on PATH.
    pub fn new(binary: Option<PathBuf>) -> Self {
        RcloneCopier {
            binary: binary.unwrap_or_else(|| PathBuf::from("rclone")),
        }
    }

    fn failed(&self, message: String) -> CopyError {
        CopyError::Failed {
            copier: "rclone".into(),
            message,
        }
    }
}

/// The rclone remote for a root URL: `s3://b/p` becomes `:s3,env_auth:b/p`
/// (with the endpoint and region of `AWS_ENDPOINT` / `AWS_REGION` when
/// set, as sleet's own S3 client uses them), `file:///srv/db` becomes `/srv/db`.
pub fn remote(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
    let host = parsed.host_str().unwrap_or("");
    let path = parsed.path().trim_start_matches('/');
    let location = if path.is_empty() {
        host.to_string()
    } else {
        format!("{host}/{path}")
    };
    let backend = match parsed.scheme() {
        "file" => {
            return parsed
                .to_file_path()
                .map(|p| p.display().to_string())
                .map_err(|()| format!("{url} is not a local path"));
        }
        "s3" | "s3a" => s3_backend(),
        "gs" => "gcs,env_auth".to_string(),
        "az" | "azure" | "abfs" | "abfss" | "adl" => "azureblob,env_auth".to_string(),
        other => return Err(format!("no rclone backend for scheme \"{other}\"")),
    };
    Ok(format!(":{backend}:{location}"))
}

fn s3_backend() -> String {
    let mut backend = "s3,env_auth".to_string();
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(endpoint) = env("AWS_ENDPOINT").or_else(|| env("AWS_ENDPOINT_URL")) {
        backend.push_str(&format!(",provider=Other,endpoint='{endpoint}'"));
    }
    if let Some(region) = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")) {
        backend.push_str(&format!(",region='{region}'"));
    }
    backend
}

/// rclone's S3 backend cannot load `AWS_CA_BUNDLE` itself (its HTTP
/// transport rejects the SDK's custom bundle), so hand the same bundle to
/// rclone's own `--ca-cert` and keep the variable from the SDK.
fn pass_ca_bundle(command: &mut tokio::process::Command) {
    if let Some(bundle) = std::env::var_os("AWS_CA_BUNDLE").filter(|b| !b.is_empty()) {
        command
            .env_remove("AWS_CA_BUNDLE")
            .arg("--ca-cert")
            .arg(bundle);
    }
}

#[async_trait]
impl Copier for RcloneCopier {
    fn name(&self) -> String {
        "rclone".into()
    }

    async fn copy(
        &self,
        batch: CopyBatch<'_>,
        progress: &CopyProgress,
        cancel: &CancellationToken,
    ) -> Result<CopyReport, CopyError> {
        if batch.objects.is_empty() {
            return Ok(CopyReport::default());
        }
        let source = remote(&batch.source.url).map_err(|e| self.failed(e))?;
        let destination = remote(&batch.destination.url).map_err(|e| self.failed(e))?;
        let mut list = tempfile::Builder::new()
            .prefix("sleet-rclone-")
            .suffix(".txt")
            .tempfile()
            .map_err(|e| self.failed(format!("failed to write files-from list: {e}")))?;
        let names = batch.objects.join("\n") + "\n";
        std::io::Write::write_all(&mut list, names.as_bytes())
            .map_err(|e| self.failed(format!("failed to write files-from list: {e}")))?;

        let mut command = tokio::process::Command::new(&self.binary);
        command
            .arg("copy")
            .arg("--files-from")
            .arg(list.path())
            .args(["--use-json-log", "--stats", STATS_EVERY])
            .args(["--stats-log-level", "NOTICE"]);
        pass_ca_bundle(&mut command);
        let mut child = command
            .arg(&source)
            .arg(&destination)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                self.failed(format!("failed to run \"{}\": {e}", self.binary.display()))
            })?;
        let stderr = child.stderr.take().expect("piped stderr");
        let mut log = RunLog::default();
        let run = async {
            // Line by line, each bounded: rclone's log is never held whole.
            let mut reader = tokio::io::BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                let read = (&mut reader)
                    .take(MAX_LINE)
                    .read_until(b'\n', &mut line)
                    .await;
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => log.take(&String::from_utf8_lossy(&line), progress),
                }
            }
            child.wait().await
        };
        let status = tokio::select! {
            biased;
            done = run => done,
            () = cancel.cancelled() => return Err(CopyError::Cancelled),
        };
        let status = status.map_err(|e| self.failed(format!("failed to wait for rclone: {e}")))?;
        if !status.success() {
            let tail = log.last.iter().cloned().collect::<Vec<_>>().join("; ");
            return Err(self.failed(format!(
                "{} exited with {status}: {tail}",
                self.binary.display()
            )));
        }
        // Objects its stats did not count (already there, or listed and
        // skipped) still count as handled, as before.
        progress.record(
            (batch.objects.len() as u64).saturating_sub(log.transfers),
            0,
        );
        Ok(CopyReport {
            outcomes: batch
                .objects
                .iter()
                .map(|name| (name.clone(), ObjectOutcome::Copied { bytes: None }))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn stats_lines_feed_progress_and_messages_are_kept_bounded() {
        let progress = CopyProgress::default();
        let mut log = RunLog::default();
        let stats = |bytes, transfers| {
            format!(
                r#"{{"level":"warning","msg":"Transferred...","stats":{{"bytes":{bytes},"transfers":{transfers}}}}}"#
            )
        };
        log.take(&stats(1000, 0), &progress);
        log.take(&stats(4000, 2), &progress);
        assert_eq!(progress.totals(), (2, 4000));
        log.take(&stats(4000, 2), &progress);
        assert_eq!(progress.totals(), (2, 4000), "totals are cumulative");
        let long = "x".repeat(10_000);
        log.take(&format!(r#"{{"level":"error","msg":"{long}"}}"#), &progress);
        assert_eq!(log.last.back().unwrap().len(), MAX_MESSAGE);
        for i in 0..10 {
            log.take(&format!("plain line {i}"), &progress);
        }
        assert_eq!(log.last.len(), STDERR_LINES);
        assert_eq!(log.last.back().unwrap(), "plain line 9");
    }

    use super::*;

    #[test]
    fn remotes_map_schemes_to_rclone_backends() {
        assert_eq!(remote("file:///srv/db").unwrap(), "/srv/db");
        assert_eq!(
            remote("gs://bucket/a/b").unwrap(),
            ":gcs,env_auth:bucket/a/b"
        );
        assert_eq!(remote("az://c/p").unwrap(), ":azureblob,env_auth:c/p");
        assert!(remote("s3://bucket/a/b").unwrap().ends_with(":bucket/a/b"));
        assert_eq!(
            remote("memory:///x").unwrap_err(),
            "no rclone backend for scheme \"memory\""
        );
    }
}
