//! `sleet config check`: validate config files before they reach a fleet.
//!
//! A running node never fails on a bad config (it keeps its last good
//! view and warns), so the place to catch a mistake is before the upload.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::config::{
    DatabaseConfig, FleetConfig, hazards, parse_database_config, parse_fleet_config,
};
use crate::fleet::root::CONFIG_FILE;

/// The verdict on each checked file, in the order given, and the
/// hazards (valid settings that can stall or lose work) in each.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub results: Vec<(PathBuf, Result<(), String>)>,
    pub warnings: Vec<(PathBuf, String)>,
}

impl CheckReport {
    pub fn failed(&self) -> usize {
        self.results.iter().filter(|(_, r)| r.is_err()).count()
    }

    /// `ok: <file>` or `error: <file>: <problem>` per file.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (path, result) in &self.results {
            let _ = match result {
                Ok(()) => writeln!(out, "ok: {}", path.display()),
                Err(problem) => writeln!(out, "error: {}: {problem}", path.display()),
            };
        }
        for (path, warning) in &self.warnings {
            let _ = writeln!(out, "warning: {}: {warning}", path.display());
        }
        out
    }
}

fn is_fleet_file(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == CONFIG_FILE)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))
}

fn check_fleet(path: &Path) -> Result<FleetConfig, String> {
    parse_fleet_config(&read(path)?).map_err(|e| e.to_string())
}

/// Checks each file. Registry files are checked laid over `fleet` if given,
/// else over a `sleet.toml` among `files`, else over built-in defaults.
pub fn check_files(files: &[PathBuf], fleet: Option<&Path>) -> CheckReport {
    let mut report = CheckReport::default();
    let fleet_path = fleet
        .map(Path::to_path_buf)
        .or_else(|| files.iter().find(|f| is_fleet_file(f)).cloned());
    let base = match &fleet_path {
        Some(path) => match check_fleet(path) {
            Ok(config) => Some(config),
            Err(problem) => {
                if !files.contains(path) {
                    report.results.push((path.clone(), Err(problem)));
                }
                None
            }
        },
        None => Some(FleetConfig::default()),
    };
    for file in files {
        let checked = if is_fleet_file(file) {
            check_fleet(file).map(|fleet| fleet.resolve_database(&DatabaseConfig::default()))
        } else {
            match &base {
                Some(fleet) => read(file).and_then(|text| {
                    parse_database_config(fleet, &text)
                        .map(|db| fleet.resolve_database(&db))
                        .map_err(|e| e.to_string())
                }),
                None => Err("not checked: the fleet config it is laid over is invalid".into()),
            }
        };
        if let Ok(settings) = &checked {
            let found = hazards(settings, None);
            report
                .warnings
                .extend(found.into_iter().map(|w| (file.clone(), w)));
        }
        report.results.push((file.clone(), checked.map(drop)));
    }
    report
}

/// [`check_files`], then the files laid over the fleet at `root` (its
/// `sleet.toml` unless one is among `files`, and its registry with the
/// given registry files in place): a mirror destination two databases
/// would share is an error on the file that makes it so (the
/// `sleet.toml`, else an involved registry file, else the root).
pub async fn check_files_against_root(
    files: &[PathBuf],
    fleet: Option<&Path>,
    root: &crate::fleet::root::FleetRoot,
) -> CheckReport {
    let mut report = check_files(files, fleet);
    let mut view = crate::fleet::root::ConfigPoller::new().poll(root).await;
    let fleet_file = fleet
        .map(Path::to_path_buf)
        .or_else(|| files.iter().find(|f| is_fleet_file(f)).cloned());
    if let Some(path) = &fleet_file {
        match check_fleet(path) {
            Ok(config) => view.fleet = config,
            Err(_) => return report,
        }
    }
    let mut given = std::collections::BTreeMap::new();
    for file in files.iter().filter(|f| !is_fleet_file(f)) {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let (Some(url), Ok(text)) = (crate::model::registry::parse_file_name(name), read(file))
        else {
            continue;
        };
        if let Ok(config) = parse_database_config(&view.fleet, &text) {
            std::sync::Arc::make_mut(&mut view.databases)
                .insert(url.clone(), std::sync::Arc::new(config));
            given.insert(url, file.clone());
        }
    }
    for (destination, users) in crate::fleet::mirror_targets::shared_destinations(&view) {
        let blamed = fleet_file
            .clone()
            .or_else(|| users.iter().find_map(|(db, _)| given.get(db).cloned()))
            .unwrap_or_else(|| PathBuf::from(root.url()));
        let problem = format!(
            "mirror destinations collide in {}: {} all map to {destination}",
            root.url(),
            crate::fleet::mirror_targets::describe_users(&users)
        );
        match report.results.iter_mut().find(|(path, _)| *path == blamed) {
            Some((_, result @ Ok(()))) => *result = Err(problem),
            Some((_, Err(existing))) => existing.push_str(&format!("; {problem}")),
            None => report.results.push((blamed, Err(problem))),
        }
    }
    report
}
