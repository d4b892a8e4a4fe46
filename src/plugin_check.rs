//! `sleet plugin list` and `sleet plugin check`: what a plugin dir holds,
//! and whether each plugin loads, and accepts the config `sleet.toml`
//! gives it, before any node runs it.

use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::{CopierKind, FleetConfig, PluginLimits};
use crate::plugin::{Loaded, PluginKind, PluginRuntime, PluginSet, check_pin};

/// One plugin file, as `list` and `check` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginReport {
    pub name: String,
    /// `copier`, `hook`, `merge-operator` or `compaction-filter`, when
    /// the file loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<PluginKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A copier's own name and version, from `describe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub describes_as: Option<String>,
    /// Where `sleet.toml` uses it (`mirror target dr`, `hook audit`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used_by: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// `sleet plugin list` / `sleet plugin check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginCheckResponse {
    pub plugins: Vec<PluginReport>,
    /// Problems not tied to one loaded file: unreadable dirs, bad names,
    /// plugins the config names that no dir holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl PluginCheckResponse {
    pub fn problem_count(&self) -> usize {
        self.problems.len() + self.plugins.iter().map(|p| p.problems.len()).sum::<usize>()
    }
}

/// A place in the config that runs a plugin, with the config it passes.
struct Usage {
    plugin: String,
    what: String,
    config: Vec<(String, String)>,
    limits: PluginLimits,
    /// What the config uses it as.
    kind: PluginKind,
}

/// Every plugin the `[database]` table of `fleet` names.
fn usages(fleet: &FleetConfig) -> Vec<Usage> {
    let settings = fleet.database.resolve();
    let mut usages = Vec::new();
    for (name, target) in &settings.mirror_targets {
        if let CopierKind::Plugin(plugin) = &target.copier {
            usages.push(Usage {
                plugin: plugin.clone(),
                what: format!("mirror target {name}"),
                config: target.copier_config.clone(),
                limits: fleet.plugin_limits(plugin, PluginKind::Copier),
                kind: PluginKind::Copier,
            });
        }
    }
    for (name, hook) in &settings.hooks {
        usages.push(Usage {
            plugin: hook.plugin.clone(),
            what: format!("hook {name}"),
            config: hook.config.clone(),
            limits: fleet.plugin_limits(&hook.plugin, PluginKind::Hook),
            kind: PluginKind::Hook,
        });
    }
    for (role, kind, code) in settings.compaction_code.roles() {
        usages.push(Usage {
            plugin: code.plugin.clone(),
            what: role.to_string(),
            config: code.config.clone(),
            limits: fleet.plugin_limits(&code.plugin, kind),
            kind,
        });
    }
    usages
}

/// Loads every plugin in `dirs`; with `fleet`, also runs `configure` with
/// each config that `sleet.toml` passes it. `list` is this without a config.
pub async fn check(
    dirs: &[PathBuf],
    cache: Option<PathBuf>,
    fleet: Option<&FleetConfig>,
) -> Result<PluginCheckResponse, String> {
    let pins = fleet.map(FleetConfig::plugin_pins).unwrap_or_default();
    let dirs = dirs.to_vec();
    let set = tokio::task::spawn_blocking(move || {
        let runtime = PluginRuntime::new(cache)?;
        Ok::<_, String>(Arc::new(PluginSet::load(&runtime, &dirs, &pins)))
    })
    .await
    .map_err(|e| format!("plugin loading panicked: {e}"))??;
    let usages = fleet.map(usages).unwrap_or_default();
    let mut response = PluginCheckResponse {
        plugins: Vec::new(),
        problems: set.problems.clone(),
    };
    for failure in set.failures() {
        response.plugins.push(PluginReport {
            name: failure_name(failure),
            kind: None,
            sha256: None,
            describes_as: None,
            used_by: Vec::new(),
            problems: vec![failure.to_string()],
        });
    }
    for (name, loaded) in set.loaded() {
        let mine: Vec<&Usage> = usages.iter().filter(|u| &u.plugin == name).collect();
        response.plugins.push(report(name, loaded, &mine).await);
    }
    for usage in &usages {
        if !response.plugins.iter().any(|p| p.name == usage.plugin) {
            response.problems.push(format!(
                "{} names plugin {}, which no plugin dir holds",
                usage.what, usage.plugin
            ));
        }
    }
    response.plugins.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(response)
}

fn failure_name(failure: &crate::plugin::PluginError) -> String {
    use crate::plugin::PluginError::*;
    match failure {
        Read { name, .. }
        | NotWasm { name, .. }
        | Sha256Mismatch { name, .. }
        | WrongWorld { name, .. }
        | WrongKind { name, .. }
        | Load { name, .. }
        | Config { name, .. }
        | Trap { name, .. }
        | Timeout { name, .. }
        | Protocol { name, .. }
        | NotLoaded { name, .. } => name.clone(),
    }
}

/// Describes the plugin and runs `configure` for each of its usages.
async fn report(name: &str, loaded: &Loaded, usages: &[&Usage]) -> PluginReport {
    let info = loaded.info();
    let mut report = PluginReport {
        name: name.to_string(),
        kind: Some(info.kind),
        sha256: Some(info.sha256.clone()),
        describes_as: None,
        used_by: usages.iter().map(|u| u.what.clone()).collect(),
        problems: Vec::new(),
    };
    if let Loaded::Copier(copier) = loaded
        && usages.is_empty()
    {
        // No config to check with: describing it proves it instantiates.
        let limits = FleetConfig::default().plugin_limits(name, crate::plugin::PluginKind::Copier);
        match copier.check(&[], &limits).await {
            Ok(info) => report.describes_as = Some(format!("{} {}", info.name, info.version)),
            Err(crate::plugin::PluginError::Config { .. }) => {}
            Err(e) => report.problems.push(e.to_string()),
        }
    }
    for usage in usages {
        if let Err(e) = check_pin(info, usage.limits.sha256.as_deref()) {
            report.problems.push(e.to_string());
            continue;
        }
        let checked = match (loaded, usage.kind) {
            (Loaded::Copier(copier), PluginKind::Copier) => copier
                .check(&usage.config, &usage.limits)
                .await
                .map(|info| report.describes_as = Some(format!("{} {}", info.name, info.version))),
            (Loaded::Hook(hook), PluginKind::Hook) => {
                hook.check(&usage.config, &usage.limits).await
            }
            (Loaded::MergeOperator(merge), PluginKind::MergeOperator) => {
                merge.check(&usage.config, &usage.limits)
            }
            (Loaded::CompactionFilter(filter), PluginKind::CompactionFilter) => {
                filter.check(&usage.config, &usage.limits)
            }
            (_, expected) => Err(crate::plugin::PluginError::WrongKind {
                name: name.to_string(),
                expected,
                actual: info.kind,
            }),
        };
        if let Err(e) = checked {
            report.problems.push(format!("{}: {e}", usage.what));
        }
    }
    report
}
