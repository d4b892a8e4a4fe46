//! Plugin authoring without the repository: `sleet plugin wit DIR` writes
//! the WIT packages this binary speaks, and `sleet plugin new` writes a
//! project in Rust, Python or JavaScript that builds with one command.
//!
//! A new project is one of the examples under `plugins/`, renamed: the
//! examples are the templates, so what the docs show, what the tests run
//! and what an author starts from are the same code.

use std::path::{Path, PathBuf};

use crate::plugin::PluginKind;

/// The WIT files this binary implements, by path under a `wit/` folder.
pub const WIT_FILES: [(&str, &str); 2] = [
    ("plugin.wit", include_str!("../../wit/plugin.wit")),
    (
        "compaction/compaction.wit",
        include_str!("../../wit/compaction/compaction.wit"),
    ),
];

/// A plugin's source language, and so its toolchain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// wit-bindgen 0.63 and `cargo build --target wasm32-wasip2`
    Rust,
    /// componentize-py 0.25.1 (from PyPI)
    Python,
    /// componentize-js 0.23.0 (from npm)
    Js,
}

impl std::fmt::Display for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        })
    }
}

/// What `sleet plugin new` writes: files by path under the project dir,
/// and the command that builds `<name>.wasm` in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub files: Vec<(PathBuf, String)>,
    /// Run in the project dir; the first word is the toolchain's command.
    pub build: Vec<String>,
    /// Where the build leaves the component, relative to the project dir.
    pub output: PathBuf,
}

/// Why a project could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error(
        "plugin name {0:?}: use 1-64 characters of [a-z0-9-], starting with a letter (the \
         file becomes <name>.wasm and a Rust crate of that name)"
    )]
    BadName(String),
    #[error("{0} already exists; choose another name or directory")]
    Exists(PathBuf),
    #[error("failed to write {path}: {message}")]
    Write { path: PathBuf, message: String },
}

/// The world a kind of plugin targets, and the WIT folder it lives in.
fn world(kind: PluginKind) -> (&'static str, &'static str) {
    match kind {
        PluginKind::Copier => ("copier-plugin", "wit"),
        PluginKind::Hook => ("hook-plugin", "wit"),
        PluginKind::MergeOperator => ("merge-operator-plugin", "wit/compaction"),
        PluginKind::CompactionFilter => ("compaction-filter-plugin", "wit/compaction"),
    }
}

/// The example a new project starts from: its name under `plugins/`
/// (replaced by the new name everywhere in the source) and its source.
fn example(lang: Lang, kind: PluginKind) -> (&'static str, &'static str) {
    use PluginKind::*;
    // One example: its name, and its source file under `plugins/<dir>`.
    macro_rules! example {
        ($dir:literal, $name:literal, $file:literal) => {
            (
                $name,
                include_str!(concat!("../../plugins/", $dir, $name, "/", $file)),
            )
        };
    }
    match (lang, kind) {
        (Lang::Rust, Copier) => example!("", "copy-copier", "src/lib.rs"),
        (Lang::Rust, Hook) => example!("", "maintenance-window", "src/lib.rs"),
        (Lang::Rust, MergeOperator) => example!("", "counter-merge", "src/lib.rs"),
        (Lang::Rust, CompactionFilter) => example!("", "ttl-filter", "src/lib.rs"),
        (Lang::Python, Copier) => example!("python/", "py-copy-copier", "app.py"),
        (Lang::Python, Hook) => example!("python/", "py-window-hook", "app.py"),
        (Lang::Python, MergeOperator) => example!("python/", "py-counter-merge", "app.py"),
        (Lang::Python, CompactionFilter) => example!("python/", "py-ttl-filter", "app.py"),
        (Lang::Js, Copier) => example!("js/", "js-copy-copier", "app.js"),
        (Lang::Js, Hook) => example!("js/", "js-window-hook", "app.js"),
        (Lang::Js, MergeOperator) => example!("js/", "js-counter-merge", "app.js"),
        (Lang::Js, CompactionFilter) => example!("js/", "js-ttl-filter", "app.js"),
    }
}

/// The command that builds an example or a new project of `lang` and
/// `kind` into `<name>.wasm` (for Rust, into cargo's target dir).
pub fn build_command(lang: Lang, kind: PluginKind, name: &str) -> Vec<String> {
    let (world, wit) = world(kind);
    let out = format!("{name}.wasm");
    let words: Vec<&str> = match lang {
        Lang::Rust => vec!["cargo", "build", "--release", "--target", "wasm32-wasip2"],
        Lang::Python => vec![
            "componentize-py",
            "-d",
            wit,
            "-w",
            world,
            "componentize",
            "app",
            "-o",
            &out,
        ],
        // componentize-js takes the .wit file; the WASI features it would
        // otherwise import (HTTP above all) are ones sleet never grants.
        // Copiers and hooks keep stdio: an uncaught exception is printed
        // there, and sleet shows it in the error. Compaction code runs
        // where sleet links no stdio.
        Lang::Js => {
            let (file, disabled): (&str, &[&str]) = if wit == "wit" {
                (
                    "wit/plugin.wit",
                    &["random", "clocks", "http", "fetch-event"],
                )
            } else {
                (
                    "wit/compaction/compaction.wit",
                    &["stdio", "random", "clocks", "http", "fetch-event"],
                )
            };
            let mut words = vec![
                "componentize-js",
                "app.js",
                "--wit",
                file,
                "-n",
                world,
                "-d",
            ];
            words.extend_from_slice(disabled);
            words.extend_from_slice(&["-o", &out]);
            words
        }
    };
    words.into_iter().map(String::from).collect()
}

/// Where [`build_command`] leaves the component, relative to the project.
pub fn build_output(lang: Lang, name: &str) -> PathBuf {
    match lang {
        Lang::Rust => PathBuf::from(format!(
            "target/wasm32-wasip2/release/{}.wasm",
            name.replace('-', "_")
        )),
        Lang::Python | Lang::Js => PathBuf::from(format!("{name}.wasm")),
    }
}

/// Whether `name` works as a plugin name, a file stem and a crate name.
fn valid_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The files and build command of a new `kind` plugin named `name`.
pub fn project(lang: Lang, kind: PluginKind, name: &str) -> Result<Project, ScaffoldError> {
    if !valid_name(name) {
        return Err(ScaffoldError::BadName(name.into()));
    }
    let (example_name, source) = example(lang, kind);
    let source = source.replace(example_name, name);
    let mut files: Vec<(PathBuf, String)> = WIT_FILES
        .iter()
        .map(|(path, text)| (Path::new("wit").join(path), text.to_string()))
        .collect();
    match lang {
        Lang::Rust => {
            let source = source.replace("path: \"../../wit", "path: \"wit");
            files.push(("Cargo.toml".into(), cargo_toml(name)));
            files.push(("src/lib.rs".into(), source));
        }
        Lang::Python => files.push(("app.py".into(), source)),
        Lang::Js => files.push(("app.js".into(), source)),
    }
    let build = build_command(lang, kind, name);
    let output = build_output(lang, name);
    files.push((
        "README.md".into(),
        readme(lang, kind, name, &build, &output),
    ));
    Ok(Project {
        files,
        build,
        output,
    })
}

fn cargo_toml(name: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
wit-bindgen = "0.63"

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
# Keep the name section so traps name the function.
strip = "debuginfo"

# A project of its own, even inside another workspace.
[workspace]
"#
    )
}

fn readme(lang: Lang, kind: PluginKind, name: &str, build: &[String], output: &Path) -> String {
    let install = match lang {
        Lang::Rust => "rustup target add wasm32-wasip2",
        Lang::Python => "pip install componentize-py==0.25.1",
        // componentize-js imports preview2-shim without depending on it.
        Lang::Js => {
            "npm install -g @bytecodealliance/componentize-js@0.23.0 \
             @bytecodealliance/preview2-shim@0.25.0"
        }
    };
    format!(
        "# {name}\n\n\
         A sleet {kind} plugin in {lang}, written by `sleet plugin new`. `wit/` holds the \
         interfaces the sleet binary that wrote it speaks (`sleet plugin wit wit` writes them \
         again).\n\n\
         Build it (once: `{install}`):\n\n```sh\n{}\n```\n\n\
         Then check it, and install it into a node's `--plugin-dir` as `{name}.wasm`:\n\n\
         ```sh\nmkdir -p plugins && cp {} plugins/{name}.wasm\n\
         sleet plugin check --plugin-dir plugins\n```\n\n\
         The author's guide: docs/plugins.md in sleet's repository.\n",
        build.join(" "),
        output.display(),
    )
}

/// Writes `project` into a new directory `dir`, never over an existing one.
pub fn write(dir: &Path, project: &Project) -> Result<(), ScaffoldError> {
    if dir.exists() {
        return Err(ScaffoldError::Exists(dir.to_path_buf()));
    }
    write_files(dir, &project.files)
}

/// Writes the WIT packages this binary speaks under `dir` (overwriting
/// those files only).
pub fn write_wit(dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    let files: Vec<(PathBuf, String)> = WIT_FILES
        .iter()
        .map(|(path, text)| (PathBuf::from(path), text.to_string()))
        .collect();
    write_files(dir, &files)?;
    Ok(files.into_iter().map(|(path, _)| dir.join(path)).collect())
}

fn write_files(dir: &Path, files: &[(PathBuf, String)]) -> Result<(), ScaffoldError> {
    for (path, text) in files {
        let path = dir.join(path);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, text));
        written.map_err(|e| ScaffoldError::Write {
            path,
            message: e.to_string(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_suit_a_file_and_a_crate() {
        for bad in ["", "1st", "My-Hook", "a b", "../up", &"x".repeat(65)] {
            assert!(matches!(
                project(Lang::Python, PluginKind::Hook, bad),
                Err(ScaffoldError::BadName(_))
            ));
        }
        assert!(project(Lang::Rust, PluginKind::Hook, "night-window2").is_ok());
    }

    #[test]
    fn a_project_is_its_example_renamed() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            for kind in [
                PluginKind::Copier,
                PluginKind::Hook,
                PluginKind::MergeOperator,
                PluginKind::CompactionFilter,
            ] {
                let project = project(lang, kind, "acme-thing").unwrap();
                let (example_name, _) = example(lang, kind);
                let text: String = project.files.iter().map(|(_, t)| t.as_str()).collect();
                assert!(
                    !text.contains(example_name),
                    "{lang} {kind}: {example_name}"
                );
                assert!(!text.contains("../../wit"), "{lang} {kind}");
                assert!(text.contains(world(kind).0), "{lang} {kind}");
                let wit = project.files.iter().filter(|(p, _)| p.starts_with("wit"));
                assert_eq!(wit.count(), 2, "{lang} {kind}");
            }
        }
    }

    #[test]
    fn a_project_is_never_written_over_another() {
        let dir = tempfile::tempdir().unwrap();
        let project = project(Lang::Js, PluginKind::Copier, "x").unwrap();
        write(&dir.path().join("x"), &project).unwrap();
        assert!(dir.path().join("x/wit/compaction/compaction.wit").is_file());
        assert!(matches!(
            write(&dir.path().join("x"), &project),
            Err(ScaffoldError::Exists(_))
        ));
    }
}
