//! Builds the components under `plugins/` from source, once per test
//! binary, for the wasm32-wasip2 target (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The outer build's target directory (`<target>/debug/sleet` is the binary).
fn outer_target_dir() -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_sleet"));
    binary
        .ancestors()
        .nth(2)
        .expect("the sleet binary sits in <target>/<profile>/")
        .to_path_buf()
}

/// The directory holding `<crate_name>.wasm` for every plugin crate.
pub fn built() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/Cargo.toml");
        // A separate target dir: a nested cargo on the outer one would
        // wait forever for the lock the outer build holds.
        let target = outer_target_dir().join("plugins-wasm");
        let output = Command::new(env!("CARGO"))
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--manifest-path",
            ])
            .arg(&manifest)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTC_WRAPPER")
            .env_remove("CARGO_BUILD_TARGET")
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "building plugins/ for wasm32-wasip2 failed (is the target installed? \
             `rustup target add wasm32-wasip2`):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        target.join("wasm32-wasip2/release")
    })
}

/// A fresh plugin dir holding the named plugins (`verify-copier`, ...).
pub fn plugin_dir(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in names {
        let file = format!("{}.wasm", name.replace('-', "_"));
        std::fs::copy(built().join(&file), dir.path().join(format!("{name}.wasm")))
            .unwrap_or_else(|e| panic!("plugin {file}: {e}"));
    }
    dir
}

/// The sha256 of a built plugin, as `sleet.toml` would pin it.
pub fn sha256_of(name: &str) -> String {
    let bytes = std::fs::read(built().join(format!("{}.wasm", name.replace('-', "_")))).unwrap();
    sleet::plugin::sha256_hex(&bytes)
}
