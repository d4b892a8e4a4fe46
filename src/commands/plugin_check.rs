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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
    /// Languages and tools the component names in its `producers`
    /// sections (its author's claim), such as `"Python; componentize-py 0.25.1"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<String>,
    /// The `.wasm` file's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// How long loading took: compiling to native code, or loading this
    /// machine's cached compile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_ms: Option<u64>,
    /// The most linear memory and tables an instance held in the test
    /// calls (`configure`, and `describe` for copiers), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// The budget those calls ran under (`[plugins.<name>] memory_mib`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// What `--exercise` made it do (copies checked, hook answers, merges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exercised: Vec<String>,
    /// Things to look at that do not stop a node from running it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl PluginReport {
    fn named(name: &str) -> PluginReport {
        PluginReport {
            name: name.to_string(),
            ..PluginReport::default()
        }
    }

    /// Notes a test call's peak against its budget (the same for every use
    /// of one plugin: `[plugins.<name>]`).
    fn measured(&mut self, peak: u64, limits: &PluginLimits) {
        self.peak_memory_bytes = Some(self.peak_memory_bytes.unwrap_or(0).max(peak));
        self.memory_mib = Some(limits.memory_bytes >> 20);
    }

    /// Warns when a test call alone came near the budget, since real calls
    /// hold more than `configure` does.
    fn warn_near_budget(&mut self) {
        let (Some(peak), Some(budget_mib)) = (self.peak_memory_bytes, self.memory_mib) else {
            return;
        };
        if peak.saturating_mul(4) >= (budget_mib << 20).saturating_mul(3) {
            self.warnings.push(format!(
                "plugin {} held {} MiB of its memory budget of {budget_mib} MiB in a test call \
                 alone; real calls hold more: raise [plugins.{}] memory_mib",
                self.name,
                peak.div_ceil(1 << 20),
                self.name
            ));
        }
    }

    /// A failed test call; one that ran out of memory says how to give
    /// the plugin more.
    fn failed(&mut self, context: Option<&str>, error: crate::plugin::PluginError) {
        let mut problem = match context {
            Some(what) => format!("{what}: {error}"),
            None => error.to_string(),
        };
        if problem.contains(crate::plugin::budget::EXCEEDED) {
            problem += &format!(
                " (give it more with [plugins.{}] memory_mib in sleet.toml)",
                self.name
            );
        }
        self.problems.push(problem);
    }
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
/// each config that `sleet.toml` passes it; with `exercise`, a few real
/// calls too ([`super::plugin_exercise`]). `list` is this without a config.
pub async fn check(
    dirs: &[PathBuf],
    cache: Option<PathBuf>,
    fleet: Option<&FleetConfig>,
    exercise: bool,
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
        let mut report = PluginReport::named(&failure_name(failure));
        report.problems.push(failure.to_string());
        response.plugins.push(report);
    }
    for (name, loaded) in set.loaded() {
        let mine: Vec<&Usage> = usages.iter().filter(|u| &u.plugin == name).collect();
        let mut report = report(name, loaded, &mine, exercise).await;
        if let Some(load) = set.load_report(name) {
            let bytes = std::fs::read(&load.path).unwrap_or_default();
            report.toolchain = crate::plugin::producers::toolchain(&bytes);
            report.size_bytes = Some(load.bytes);
            report.load_ms = Some(load.took.as_millis() as u64);
        }
        response.plugins.push(report);
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

/// Describes the plugin and runs `configure` for each of its usages
/// (and, with `exercise`, a few real calls with each usage's config, or
/// with none when nothing uses it).
async fn report(name: &str, loaded: &Loaded, usages: &[&Usage], exercise: bool) -> PluginReport {
    use crate::plugin::PluginError;
    let info = loaded.info();
    let mut report = PluginReport::named(name);
    report.kind = Some(info.kind);
    report.sha256 = Some(info.sha256.clone());
    report.used_by = usages.iter().map(|u| u.what.clone()).collect();
    if let Loaded::Copier(copier) = loaded
        && usages.is_empty()
    {
        // No config to check with: describing it proves it instantiates.
        let limits = FleetConfig::default().plugin_limits(name, PluginKind::Copier);
        match copier.check(&[], &limits).await {
            Ok((info, peak)) => {
                report.describes_as = Some(format!("{} {}", info.name, info.version));
                report.measured(peak, &limits);
            }
            Err(PluginError::Config { .. }) => {}
            Err(e) => report.failed(None, e),
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
                .map(|(info, peak)| {
                    report.describes_as = Some(format!("{} {}", info.name, info.version));
                    peak
                }),
            (Loaded::Hook(hook), PluginKind::Hook) => {
                hook.check(&usage.config, &usage.limits).await
            }
            (Loaded::MergeOperator(merge), PluginKind::MergeOperator) => {
                merge.check(&usage.config, &usage.limits)
            }
            (Loaded::CompactionFilter(filter), PluginKind::CompactionFilter) => {
                filter.check(&usage.config, &usage.limits)
            }
            (_, expected) => Err(PluginError::WrongKind {
                name: name.to_string(),
                expected,
                actual: info.kind,
            }),
        };
        match checked {
            Ok(peak) => {
                report.measured(peak, &usage.limits);
                if exercise {
                    exercised(
                        &mut report,
                        loaded,
                        Some(&usage.what),
                        &usage.config,
                        &usage.limits,
                    )
                    .await;
                }
            }
            Err(e) => report.failed(Some(&usage.what), e),
        }
    }
    if exercise && usages.is_empty() {
        let limits = FleetConfig::default().plugin_limits(name, info.kind);
        exercised(&mut report, loaded, None, &[], &limits).await;
    }
    report.warn_near_budget();
    report
}

/// Exercises `loaded` with one usage's config, into `report`.
async fn exercised(
    report: &mut PluginReport,
    loaded: &Loaded,
    usage: Option<&str>,
    config: &[(String, String)],
    limits: &PluginLimits,
) {
    let context = match usage {
        Some(what) => format!("exercise with the config of {what}"),
        None => "exercise with no config".to_string(),
    };
    match super::plugin_exercise::exercise(loaded, config, limits).await {
        Ok(done) => {
            report
                .exercised
                .extend(done.did.into_iter().map(|did| format!("{context}: {did}")));
            let name = report.name.clone();
            report.warnings.extend(
                done.warnings
                    .into_iter()
                    .map(|w| format!("plugin {name}: {context}: {w}")),
            );
        }
        // Nothing gives it settings: a plugin that needs some cannot be
        // exercised, which is not its fault.
        Err(e @ crate::plugin::PluginError::Config { .. }) if usage.is_none() => {
            report.warnings.push(format!(
                "{context}: not exercised, it needs settings ({e}); pass --config with a \
                 sleet.toml that uses it"
            ));
        }
        Err(e) => report.failed(Some(&context), e),
    }
}
