//! Each test binary uses part of these helpers.
#![allow(dead_code)]
//! Builds the components under `plugins/` from source, once per test
//! binary, for the wasm32-wasip2 target (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sleet::plugin::PluginKind;
use sleet::scaffold::{self, Lang};

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
    BUILT.get_or_init(|| sleet::testing::build_plugins(&outer_target_dir().join("plugins-wasm")))
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

// Plugins in other languages, built by their own toolchains (installed by
// scripts/with-servers from PyPI and npm).

/// Every language and kind `sleet plugin new` writes.
pub const LANGS: [Lang; 3] = [Lang::Rust, Lang::Python, Lang::Js];
pub const KINDS: [PluginKind; 4] = [
    PluginKind::Copier,
    PluginKind::Hook,
    PluginKind::MergeOperator,
    PluginKind::CompactionFilter,
];

/// The toolchain command for `lang`, or `None` (with a note) when these
/// tests skip: outside scripts/test, which installs them. With
/// `SLEET_REQUIRE_S3` set (scripts/test), a missing one is a failure.
pub fn toolchain(lang: Lang) -> Option<std::ffi::OsString> {
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
            eprintln!(
                "note: {var} is unset; skipping a {lang} plugin test (scripts/test installs it)"
            );
            None
        }
    }
}

/// Whether every toolchain is here (else the caller skips).
pub fn toolchains() -> bool {
    LANGS.iter().all(|lang| toolchain(*lang).is_some())
}

/// Runs the project's documented build command in `dir` with the real
/// toolchain, and returns the component it wrote. Rust projects share one
/// target dir, so their dependencies compile once.
pub fn build_project(dir: &Path, lang: Lang, kind: PluginKind, name: &str) -> PathBuf {
    let words = scaffold::build_command(lang, kind, name);
    let program = toolchain(lang).expect("the toolchain is installed");
    let mut command = std::process::Command::new(program);
    command.args(&words[1..]).current_dir(dir);
    let output = match lang {
        Lang::Rust => {
            let target = outer_target_dir().join("plugins-new");
            command
                .env("CARGO_TARGET_DIR", &target)
                .env_remove("RUSTFLAGS")
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .env_remove("RUSTC_WRAPPER")
                .env_remove("CARGO_BUILD_TARGET");
            let relative = scaffold::build_output(lang, name);
            target.join(relative.strip_prefix("target").unwrap())
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

/// Builds the example `plugins/<python|js>/<name>` in a scratch copy
/// (with the WIT `sleet plugin wit` writes) and installs it as
/// `into/<name>.wasm`.
pub fn build_example(lang: Lang, kind: PluginKind, name: &str, into: &Path) {
    let folder = match lang {
        Lang::Python => "python",
        Lang::Js => "js",
        Lang::Rust => panic!("Rust examples build with plugins/'s workspace (built())"),
    };
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plugins")
        .join(folder)
        .join(name);
    let scratch = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "py" || e == "js") {
            std::fs::copy(&path, scratch.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    scaffold::write_wit(&scratch.path().join("wit")).unwrap();
    let built = build_project(scratch.path(), lang, kind, name);
    std::fs::copy(built, into.join(format!("{name}.wasm"))).unwrap();
}
