//! Each test binary uses part of these helpers.
#![allow(dead_code)]
//! Helpers shared by the fleet-core tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

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
