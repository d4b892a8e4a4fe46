//! The rclone copier: `rclone copy --files-from <list> <src> <dst>`, with
//! on-the-fly remotes (no rclone config file) authenticated from the
//! environment, so any node that can reach both stores can run it.

use std::path::PathBuf;
use std::process::Stdio;

use async_trait::async_trait;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use super::{Copier, CopyBatch, CopyError, CopyProgress, CopyReport, ObjectOutcome};

/// Lines of rclone's stderr quoted in an error.
const STDERR_LINES: usize = 5;

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
        command.arg("copy").arg("--files-from").arg(list.path());
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
        let mut stderr = child.stderr.take().expect("piped stderr");
        let run = async {
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err).await;
            (child.wait().await, err)
        };
        let (status, err) = tokio::select! {
            done = run => done,
            () = cancel.cancelled() => return Err(CopyError::Cancelled),
        };
        let status = status.map_err(|e| self.failed(format!("failed to wait for rclone: {e}")))?;
        if !status.success() {
            let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = lines[lines.len().saturating_sub(STDERR_LINES)..].join("; ");
            return Err(self.failed(format!(
                "{} exited with {status}: {tail}",
                self.binary.display()
            )));
        }
        progress.record(batch.objects.len() as u64, 0);
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
