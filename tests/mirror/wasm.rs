//! Each test binary uses part of these helpers.
#![allow(dead_code)]
//! Builds the components under `plugins/` from source, once per test
//! binary, for the wasm32-wasip2 target (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sleet::commands::scaffold::Lang;
use sleet::plugin::PluginKind;

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

/// The toolchain command for `lang` (see [`sleet::testing::toolchain`]).
pub fn toolchain(lang: Lang) -> Option<std::ffi::OsString> {
    sleet::testing::toolchain(lang)
}

/// Whether every toolchain is here (else the caller skips).
pub fn toolchains() -> bool {
    LANGS.iter().all(|lang| toolchain(*lang).is_some())
}

/// Runs a project's documented build command in `dir`; the component.
pub fn build_project(dir: &Path, lang: Lang, kind: PluginKind, name: &str) -> PathBuf {
    let rust_target = outer_target_dir().join("plugins-new");
    sleet::testing::build_project(dir, lang, kind, name, &rust_target)
}

/// Builds `plugins/<python|js>/<name>` into `into/<name>.wasm`.
pub fn build_example(lang: Lang, kind: PluginKind, name: &str, into: &Path) {
    sleet::testing::build_example(lang, kind, name, into)
}
