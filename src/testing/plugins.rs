//! Plugins built from source for tests and benchmarks, by the real
//! toolchains: the Rust crates under `plugins/` with cargo, and Python and
//! JavaScript projects (examples and `sleet plugin new` projects) with
//! componentize-py and componentize-js, which scripts/with-servers
//! installs from PyPI and npm. Nothing prebuilt is committed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::commands::scaffold::{self, Lang};
use crate::plugin::PluginKind;

/// Builds the plugin crates under `plugins/` for wasm32-wasip2 into
/// `target_dir` (release) and returns the directory holding the
/// `<crate_name>.wasm` files. Tests and benchmarks build plugins from
/// source this way; nothing prebuilt is committed.
pub fn build_plugins(target_dir: &Path) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // A target dir of its own: a nested cargo on the outer build's dir
    // would wait forever for the lock the outer build holds.
    let output = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target_dir)
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
    target_dir.join("wasm32-wasip2/release")
}

/// The toolchain command for `lang`, or `None` (with a note) when it is
/// not installed: scripts/with-servers installs componentize-py and
/// componentize-js and names them in `SLEET_COMPONENTIZE_PY` and
/// `SLEET_COMPONENTIZE_JS`. With `SLEET_REQUIRE_S3` set (scripts/test), a
/// missing one is a failure, not a skip.
pub fn toolchain(lang: Lang) -> Option<OsString> {
    let var = match lang {
        Lang::Rust => return Some(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())),
        Lang::Python => "SLEET_COMPONENTIZE_PY",
        Lang::Js => "SLEET_COMPONENTIZE_JS",
    };
    match std::env::var_os(var) {
        Some(path) => Some(path),
        None if std::env::var_os("SLEET_REQUIRE_S3").is_some() => {
            panic!("SLEET_REQUIRE_S3 is set but {var} is not (scripts/with-servers installs it)")
        }
        None => {
            eprintln!("note: {var} is unset; skipping {lang} plugins (scripts/test installs it)");
            None
        }
    }
}

/// Runs a project's documented build command in `dir` with the real
/// toolchain and returns the component it wrote. Rust projects build into
/// `rust_target` (shared, so their dependencies compile once).
pub fn build_project(
    dir: &Path,
    lang: Lang,
    kind: PluginKind,
    name: &str,
    rust_target: &Path,
) -> PathBuf {
    let words = scaffold::build_command(lang, kind, name);
    let program = toolchain(lang).expect("the toolchain is installed");
    let mut command = Command::new(program);
    command.args(&words[1..]).current_dir(dir);
    let output = match lang {
        Lang::Rust => {
            command
                .env("CARGO_TARGET_DIR", rust_target)
                .env_remove("RUSTFLAGS")
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .env_remove("RUSTC_WRAPPER")
                .env_remove("CARGO_BUILD_TARGET");
            let relative = scaffold::build_output(lang, name);
            rust_target.join(relative.strip_prefix("target").expect("under target/"))
        }
        Lang::Python | Lang::Js => dir.join(scaffold::build_output(lang, name)),
    };
    let ran = command.output().expect("the toolchain runs");
    assert!(
        ran.status.success(),
        "building {name} ({lang}) with `{}` failed:\n{}{}",
        words.join(" "),
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    output
}

/// Builds the example `plugins/<python|js>/<name>` in a scratch copy (with
/// the WIT `sleet plugin wit` writes) and installs it as `into/<name>.wasm`.
pub fn build_example(lang: Lang, kind: PluginKind, name: &str, into: &Path) {
    let folder = match lang {
        Lang::Python => "python",
        Lang::Js => "js",
        Lang::Rust => panic!("Rust examples build with plugins/'s workspace (build_plugins)"),
    };
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plugins")
        .join(folder)
        .join(name);
    let scratch = tempfile::tempdir().expect("a scratch dir");
    let entries = std::fs::read_dir(&source).unwrap_or_else(|e| panic!("{name}: {e}"));
    for entry in entries {
        let path = entry.expect("a dir entry").path();
        if path.extension().is_some_and(|e| e == "py" || e == "js") {
            let to = scratch.path().join(path.file_name().expect("a file name"));
            std::fs::copy(&path, to).expect("copy a source file");
        }
    }
    scaffold::write_wit(&scratch.path().join("wit")).expect("the WIT");
    let built = build_project(scratch.path(), lang, kind, name, Path::new("unused"));
    std::fs::copy(built, into.join(format!("{name}.wasm"))).expect("install the component");
}
