//! Each test binary uses part of these helpers.
#![allow(dead_code)]
//! Helpers shared by the fleet-core tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use object_store::ObjectStore;

/// A `file://` fleet root in a fresh temporary directory.
pub struct FileRoot {
    pub dir: tempfile::TempDir,
}

impl FileRoot {
    pub fn new() -> Self {
        FileRoot {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn url(&self) -> String {
        format!("file://{}", self.dir.path().display())
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// Writes a file under the root, creating directories.
    pub fn write(&self, relative: &str, body: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        path
    }

    /// Writes a heartbeat whose `LastModified` is `age` in the past.
    pub fn heartbeat(&self, name: &str, body: &str, age: Duration) {
        let path = self.write(&format!("nodes/{name}"), body);
        set_age(&path, age);
    }
}

pub fn set_age(path: &Path, age: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

/// Runs the real binary with extra environment variables.
pub fn sleet_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sleet"));
    command.args(args).env_remove("RUST_LOG");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the sleet binary runs")
}

pub fn sleet(args: &[&str]) -> Output {
    sleet_env(args, &[])
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// Asserts success and returns stdout.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "sleet failed ({:?}): {}",
        out.status.code(),
        stderr(&out)
    );
    stdout(&out)
}

/// Asserts exit code `code` with a stderr mentioning `needle`; returns stderr.
pub fn fails_with(out: Output, code: i32, needle: &str) -> String {
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "stderr: {err}\nstdout: {}",
        stdout(&out)
    );
    assert!(
        err.contains(needle),
        "expected {needle:?} in stderr:\n{err}"
    );
    err
}

pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

// The local S3-compatible server `scripts/test` starts.

pub const BUCKET: &str = "sleet";

/// The server's endpoint, or `None` (with a note) when these tests skip.
pub fn endpoint() -> Option<String> {
    match std::env::var("SLEET_S3_ENDPOINT") {
        Ok(endpoint) => Some(endpoint),
        Err(_) if std::env::var_os("SLEET_REQUIRE_S3").is_some() => {
            panic!("SLEET_REQUIRE_S3 is set but SLEET_S3_ENDPOINT is not")
        }
        Err(_) => {
            eprintln!(
                "note: SLEET_S3_ENDPOINT is unset; skipping an S3 test (scripts/test starts a server)"
            );
            None
        }
    }
}

/// The second, separate S3 server `scripts/test` starts (for copies
/// across endpoints); a failure when the first is required and this one
/// is missing.
pub fn second_endpoint() -> Option<String> {
    match std::env::var("SLEET_S3_ENDPOINT_2") {
        Ok(endpoint) => Some(endpoint),
        Err(_) if std::env::var_os("SLEET_REQUIRE_S3").is_some() => {
            panic!(
                "SLEET_REQUIRE_S3 is set but SLEET_S3_ENDPOINT_2 is not (scripts/test starts it)"
            )
        }
        Err(_) => None,
    }
}

/// The GCS emulator `scripts/with-servers` starts (gs:// URLs reach it
/// through `GOOGLE_SERVICE_ACCOUNT`), or `None` when these tests skip.
pub fn gcs_endpoint() -> Option<String> {
    emulator("SLEET_GCS_ENDPOINT")
}

/// The Azure emulator `scripts/with-servers` starts (az:// URLs reach it
/// through `AZURE_STORAGE_USE_EMULATOR`), or `None` when these tests skip.
pub fn azure_endpoint() -> Option<String> {
    emulator("SLEET_AZURE_ENDPOINT")
}

/// An emulator's URL from `variable`; a failure when the S3 server is
/// required (`scripts/test` starts them all together).
fn emulator(variable: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(endpoint) => Some(endpoint),
        Err(_) if std::env::var_os("SLEET_REQUIRE_S3").is_some() => {
            panic!("SLEET_REQUIRE_S3 is set but {variable} is not (scripts/test starts it)")
        }
        Err(_) => {
            eprintln!("note: {variable} is unset; skipping (scripts/test starts the emulators)");
            None
        }
    }
}

/// The environment a child process needs to reach the server.
pub fn s3_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT", endpoint.to_string()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
    ]
}

pub fn s3_store(endpoint: &str) -> Arc<dyn ObjectStore> {
    s3_bucket_store(endpoint, BUCKET)
}

/// A client for any bucket of the test server (`scripts/test` creates
/// `sleet` and `sleet-mirror`).
pub fn s3_bucket_store(endpoint: &str, bucket: &str) -> Arc<dyn ObjectStore> {
    sleet::testing::local_s3_bucket(endpoint, bucket)
}

/// A prefix no other test (or earlier run) uses.
pub fn unique_prefix(label: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{label}-{}-{nanos:x}", std::process::id())
}

/// A store and path for a database URL: `s3://` URLs reach the test
/// server with explicit credentials (no process environment), anything
/// else opens as sleet would.
pub fn test_store(url: &str) -> (Arc<dyn ObjectStore>, object_store::path::Path) {
    match url
        .strip_prefix("s3://")
        .and_then(|rest| rest.split_once('/'))
    {
        Some((bucket, prefix)) => {
            let endpoint = endpoint().expect("an S3 server for an s3:// URL");
            (
                s3_bucket_store(&endpoint, bucket),
                object_store::path::Path::from(prefix),
            )
        }
        None => sleet::store::open_url(url).expect("a store for the URL"),
    }
}

/// `[database.idle]` for test fleets with fast cadences: idle looks fast
/// enough that a database wakes within a second of being written.
pub const FAST_IDLE: &str = r#"
[database.idle]
probe_min = "200ms"
probe_max = "1s"
workers_probe = "1s"
gc_probe = "1s"
sleep_after = "10s"
"#;
