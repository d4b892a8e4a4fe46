//! WebAssembly plugins: copier components that move a mirror's data
//! objects, hook components that gate and observe task runs, and
//! compaction components (merge operators, compaction filters) that carry
//! a database's application code into its compactor.
//!
//! Plugins are untrusted. Each copier or hook call gets a fresh instance
//! (compaction plugins keep one for many calls, see [`compaction`]) with no
//! filesystem, network or environment, a memory cap, and a wall-clock
//! deadline; a trap, timeout or overflow fails that call alone, naming the
//! plugin, and the instance is discarded. Copiers reach only the objects
//! of their current batch, and never `manifest/`.
//!
//! May import: `model` and `store` only. Its callers hand it plain limits
//! (`PluginLimits`), never their own types.

mod bindings;
pub mod budget;
pub mod cache;
pub mod compaction;
pub mod copier;
mod handles;
pub mod hook;
mod host;
pub mod output;
pub mod producers;
pub mod runtime;
pub mod text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::ident::is_valid_identifier;
pub use runtime::PluginRuntime;

/// The WIT package version this host implements.
pub const WIT_PACKAGE: &str = "sleet:plugin@0.1.0";
const COPIER_EXPORT: &str = "sleet:plugin/copier@0.1";
const HOOK_EXPORT: &str = "sleet:plugin/hook@0.1";
/// The compaction package (`wit/compaction`) this host implements.
pub const COMPACTION_WIT_PACKAGE: &str = "sleet:compaction@0.1.0";
const MERGE_EXPORT: &str = "sleet:compaction/merge-operator@0.1";
const FILTER_EXPORT: &str = "sleet:compaction/compaction-filter@0.1";

pub use crate::model::policy::{PluginKind, PluginLimits};

/// A loaded plugin as the fleet sees it (heartbeats, `sleet plugin list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginInfo {
    pub name: String,
    /// Hex sha256 of the `.wasm` file.
    pub sha256: String,
    pub kind: PluginKind,
}

/// Why a plugin could not be loaded or called. Every message names the plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    #[error("plugin {name}: failed to read {path}: {message}")]
    Read {
        name: String,
        path: PathBuf,
        message: String,
    },
    #[error("plugin {name}: {path} is not a WebAssembly component")]
    NotWasm { name: String, path: PathBuf },
    #[error("plugin {name}: sha256 is {actual}, but sleet.toml pins {expected}")]
    Sha256Mismatch {
        name: String,
        expected: String,
        actual: String,
    },
    #[error(
        "plugin {name} exports none of {COPIER_EXPORT}.x, {HOOK_EXPORT}.x, {MERGE_EXPORT}.x or \
         {FILTER_EXPORT}.x (it exports: {exports}); build it against wit/plugin.wit ({WIT_PACKAGE}) \
         or wit/compaction ({COMPACTION_WIT_PACKAGE})"
    )]
    WrongWorld { name: String, exports: String },
    #[error("plugin {name} is a {actual} plugin, not a {expected}")]
    WrongKind {
        name: String,
        expected: PluginKind,
        actual: PluginKind,
    },
    #[error("plugin {name}: {message}")]
    Load { name: String, message: String },
    #[error("plugin {name} rejected its config: {message}")]
    Config { name: String, message: String },
    #[error("plugin {name} trapped: {message}")]
    Trap { name: String, message: String },
    #[error("plugin {name} timed out after {}", crate::HumanDuration(*.after))]
    Timeout { name: String, after: Duration },
    #[error("plugin {name} broke the protocol: {message}")]
    Protocol { name: String, message: String },
    #[error("plugin \"{name}\" is not loaded on node {node}{detail}")]
    NotLoaded {
        name: String,
        node: String,
        detail: String,
    },
}

/// A plugin file found in a plugin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFile {
    pub name: String,
    pub path: PathBuf,
}

/// `DIR/<name>.wasm` for every directory, in order; a name found twice is
/// a problem (which file would run is ambiguous).
pub fn discover(dirs: &[PathBuf]) -> (Vec<PluginFile>, Vec<String>) {
    let mut found: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut problems = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                problems.push(format!("plugin dir {}: {e}", dir.display()));
                continue;
            }
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        paths.sort();
        for path in paths {
            if path.extension().and_then(|e| e.to_str()) != Some("wasm") {
                continue;
            }
            let Some(name) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .map(str::to_string)
            else {
                continue;
            };
            if !is_valid_identifier(&name) {
                problems.push(format!(
                    "{}: plugin names are 1-128 chars of [A-Za-z0-9_-]",
                    path.display()
                ));
                continue;
            }
            if let Some(first) = found.get(&name) {
                problems.push(format!(
                    "plugin {name} is in two plugin dirs: {} and {}; using the first",
                    first.display(),
                    path.display()
                ));
                continue;
            }
            found.insert(name, path);
        }
    }
    let files = found
        .into_iter()
        .map(|(name, path)| PluginFile { name, path })
        .collect();
    (files, problems)
}

/// Hex sha256 of a file's bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A compiled plugin, ready to instantiate per call.
pub enum Loaded {
    Copier(Arc<copier::CopierPlugin>),
    Hook(Arc<hook::HookPlugin>),
    MergeOperator(Arc<compaction::MergePlugin>),
    CompactionFilter(Arc<compaction::FilterPlugin>),
}

impl Loaded {
    pub fn info(&self) -> &PluginInfo {
        match self {
            Loaded::Copier(c) => c.info(),
            Loaded::Hook(h) => h.info(),
            Loaded::MergeOperator(m) => m.info(),
            Loaded::CompactionFilter(f) => f.info(),
        }
    }
}

/// Refuses a plugin whose file differs from the hash `sleet.toml` pins.
pub fn check_pin(info: &PluginInfo, pin: Option<&str>) -> Result<(), PluginError> {
    match pin {
        Some(expected) if !expected.eq_ignore_ascii_case(&info.sha256) => {
            Err(PluginError::Sha256Mismatch {
                name: info.name.clone(),
                expected: expected.to_ascii_lowercase(),
                actual: info.sha256.clone(),
            })
        }
        _ => Ok(()),
    }
}

/// How loading one plugin went: what `sleet plugin check` reports so an
/// operator can size it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// Reading, compiling (or loading the cached compile) and linking.
    pub took: Duration,
    /// The `.wasm` file's size.
    pub bytes: u64,
    /// The file it loaded: `sleet plugin check` reads who made it from
    /// there, so a node's start-up (often from the compile cache) does
    /// not walk a whole component for a fact only the check shows.
    pub path: PathBuf,
}

/// The plugins a node loaded from its plugin dirs, and what went wrong.
#[derive(Default)]
pub struct PluginSet {
    plugins: BTreeMap<String, Arc<Loaded>>,
    /// How each loaded plugin's load went, by name.
    reports: BTreeMap<String, LoadReport>,
    /// Files that failed to load, by name, with why.
    failed: BTreeMap<String, PluginError>,
    /// Directory-level problems (unreadable dir, bad file names).
    pub problems: Vec<String>,
}

impl std::fmt::Debug for PluginSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginSet")
            .field("plugins", &self.plugins.keys().collect::<Vec<_>>())
            .field("failed", &self.failed)
            .finish()
    }
}

impl PluginSet {
    /// Loads every plugin in `dirs`. `pins` are the sha256 values
    /// `sleet.toml` requires, by name.
    pub fn load(
        runtime: &Arc<PluginRuntime>,
        dirs: &[PathBuf],
        pins: &BTreeMap<String, String>,
    ) -> PluginSet {
        let (files, problems) = discover(dirs);
        let mut set = PluginSet {
            problems,
            ..PluginSet::default()
        };
        for file in files {
            let pin = pins.get(&file.name).map(String::as_str);
            match load_file(runtime, &file.name, &file.path, pin) {
                Ok((loaded, report)) => {
                    tracing::info!(plugin = %file.name, kind = %loaded.info().kind,
                        sha256 = %loaded.info().sha256, took = ?report.took, "plugin loaded");
                    set.reports.insert(file.name.clone(), report);
                    set.plugins.insert(file.name, Arc::new(loaded));
                }
                Err(e) => {
                    tracing::warn!("{e}");
                    set.failed.insert(file.name, e);
                }
            }
        }
        set
    }

    /// Every loaded plugin, by name.
    pub fn loaded(&self) -> &BTreeMap<String, Arc<Loaded>> {
        &self.plugins
    }

    /// How loading plugin `name` went, if it loaded.
    pub fn load_report(&self, name: &str) -> Option<&LoadReport> {
        self.reports.get(name)
    }

    pub fn infos(&self) -> Vec<PluginInfo> {
        self.plugins.values().map(|p| p.info().clone()).collect()
    }

    /// Files that failed to load.
    pub fn failures(&self) -> impl Iterator<Item = &PluginError> {
        self.failed.values()
    }

    /// The copier plugin `name`, or why this node cannot run it.
    pub fn copier(
        &self,
        name: &str,
        node: &str,
    ) -> Result<&Arc<copier::CopierPlugin>, PluginError> {
        match self.get(name, node)? {
            Loaded::Copier(c) => Ok(c),
            other => Err(wrong_kind(name, PluginKind::Copier, other)),
        }
    }

    /// The hook plugin `name`, or why this node cannot run it.
    pub fn hook(&self, name: &str, node: &str) -> Result<&Arc<hook::HookPlugin>, PluginError> {
        match self.get(name, node)? {
            Loaded::Hook(h) => Ok(h),
            other => Err(wrong_kind(name, PluginKind::Hook, other)),
        }
    }

    /// The merge operator plugin `name`, or why this node cannot run it.
    pub fn merge_operator(
        &self,
        name: &str,
        node: &str,
    ) -> Result<&Arc<compaction::MergePlugin>, PluginError> {
        match self.get(name, node)? {
            Loaded::MergeOperator(m) => Ok(m),
            other => Err(wrong_kind(name, PluginKind::MergeOperator, other)),
        }
    }

    /// The compaction filter plugin `name`, or why this node cannot run it.
    pub fn compaction_filter(
        &self,
        name: &str,
        node: &str,
    ) -> Result<&Arc<compaction::FilterPlugin>, PluginError> {
        match self.get(name, node)? {
            Loaded::CompactionFilter(f) => Ok(f),
            other => Err(wrong_kind(name, PluginKind::CompactionFilter, other)),
        }
    }

    /// The node's plugins, or why plugin `name` cannot run on `node`:
    /// a node started without `--plugin-dir` has none.
    pub fn required<'a>(
        plugins: Option<&'a PluginSet>,
        name: &str,
        node: &str,
    ) -> Result<&'a PluginSet, PluginError> {
        plugins.ok_or_else(|| PluginError::NotLoaded {
            name: name.into(),
            node: node.into(),
            detail: " (it runs without --plugin-dir)".into(),
        })
    }

    fn get(&self, name: &str, node: &str) -> Result<&Loaded, PluginError> {
        if let Some(loaded) = self.plugins.get(name) {
            return Ok(loaded);
        }
        let detail = match self.failed.get(name) {
            Some(e) => format!(": {e}"),
            None => " (no such file in its --plugin-dir)".into(),
        };
        Err(PluginError::NotLoaded {
            name: name.into(),
            node: node.into(),
            detail,
        })
    }
}

fn wrong_kind(name: &str, expected: PluginKind, actual: &Loaded) -> PluginError {
    PluginError::WrongKind {
        name: name.into(),
        expected,
        actual: actual.info().kind,
    }
}

/// Loads the plugins of `dirs` (none when `dirs` is empty), compiling on a
/// blocking thread. `pins` come from `[plugins.<name>] sha256` in
/// `sleet.toml`; a failure to start the engine or create the cache is an
/// error, a bad plugin file is only reported in the set.
pub async fn load_dirs(
    dirs: &[PathBuf],
    cache: Option<PathBuf>,
    pins: BTreeMap<String, String>,
    observer: Option<runtime::PluginObserver>,
) -> Result<Option<Arc<PluginSet>>, String> {
    if dirs.is_empty() {
        return Ok(None);
    }
    let dirs = dirs.to_vec();
    tokio::task::spawn_blocking(move || {
        let runtime = PluginRuntime::new(cache)?;
        if let Some(observer) = observer {
            runtime.observe(observer);
        }
        Ok(Some(Arc::new(PluginSet::load(&runtime, &dirs, &pins))))
    })
    .await
    .map_err(|e| format!("plugin loading panicked: {e}"))?
}

/// Reads, pins, compiles (through the cache) and type-checks one plugin.
pub fn load_file(
    runtime: &Arc<PluginRuntime>,
    name: &str,
    path: &Path,
    pin: Option<&str>,
) -> Result<(Loaded, LoadReport), PluginError> {
    let started = std::time::Instant::now();
    let bytes = std::fs::read(path).map_err(|e| PluginError::Read {
        name: name.into(),
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let sha256 = sha256_hex(&bytes);
    if let Some(expected) = pin
        && !expected.eq_ignore_ascii_case(&sha256)
    {
        return Err(PluginError::Sha256Mismatch {
            name: name.into(),
            expected: expected.to_ascii_lowercase(),
            actual: sha256,
        });
    }
    if !runtime::is_component(&bytes) {
        return Err(PluginError::NotWasm {
            name: name.into(),
            path: path.to_path_buf(),
        });
    }
    let component = runtime.compile(name, &bytes, &sha256)?;
    let loaded = link(runtime, name, &component, &sha256)?;
    let report = LoadReport {
        took: started.elapsed(),
        bytes: bytes.len() as u64,
        path: path.to_path_buf(),
    };
    Ok((loaded, report))
}

/// Finds the interface a compiled component exports, and type-checks it
/// against that world's imports.
fn link(
    runtime: &Arc<PluginRuntime>,
    name: &str,
    component: &wasmtime::component::Component,
    sha256: &str,
) -> Result<Loaded, PluginError> {
    let exports = runtime.export_names(component);
    let has = |prefix: &str| exports.iter().any(|e| e.starts_with(prefix));
    let info = |kind| PluginInfo {
        name: name.to_string(),
        sha256: sha256.to_string(),
        kind,
    };
    if has(COPIER_EXPORT) {
        copier::CopierPlugin::new(runtime.clone(), info(PluginKind::Copier), component)
            .map(|c| Loaded::Copier(Arc::new(c)))
    } else if has(HOOK_EXPORT) {
        hook::HookPlugin::new(runtime.clone(), info(PluginKind::Hook), component)
            .map(|h| Loaded::Hook(Arc::new(h)))
    } else if has(MERGE_EXPORT) {
        let kind = PluginKind::MergeOperator;
        compaction::MergePlugin::new(runtime.clone(), info(kind), component)
            .map(|m| Loaded::MergeOperator(Arc::new(m)))
    } else if has(FILTER_EXPORT) {
        let kind = PluginKind::CompactionFilter;
        compaction::FilterPlugin::new(runtime.clone(), info(kind), component)
            .map(|f| Loaded::CompactionFilter(Arc::new(f)))
    } else {
        Err(PluginError::WrongWorld {
            name: name.into(),
            exports: if exports.is_empty() {
                "nothing".into()
            } else {
                exports.join(", ")
            },
        })
    }
}
