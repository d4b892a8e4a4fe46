//! `sleet plugin`: list and check plugin dirs, and write what an author
//! needs (the WIT, a new project).

use clap::Subcommand;

use super::{Format, emit};
use crate::plugin::{PluginKind, PluginRuntime};
use crate::{Error, status};

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// List the plugins in plugin dirs: name, kind, sha256, and any that fail to load
    List {
        /// A directory of WebAssembly plugins (<name>.wasm); may repeat
        #[arg(long = "plugin-dir", required = true)]
        plugin_dirs: Vec<std::path::PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Load every plugin, detect its kind, call describe, and configure it with each config
    /// sleet.toml gives it; exits 1 on any problem
    Check {
        /// A directory of WebAssembly plugins (<name>.wasm); may repeat
        #[arg(long = "plugin-dir", required = true)]
        plugin_dirs: Vec<std::path::PathBuf>,
        /// The sleet.toml whose targets, hooks and [plugins] pins to check against
        #[arg(long)]
        config: Option<std::path::PathBuf>,
        /// Also drive a few real calls into each plugin against scratch stores (a copier copies
        /// three objects and the host checks them; a hook answers pre-task and post-task; a
        /// merge operator merges, a filter filters), with the config sleet.toml gives it
        #[arg(long)]
        exercise: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Write the WIT packages this sleet speaks (plugin.wit, compaction/compaction.wit) into DIR
    Wit {
        /// Where to write them (created if missing; only these files are overwritten)
        dir: std::path::PathBuf,
    },
    /// Write a new plugin project, one of the examples renamed, that builds into NAME.wasm with
    /// the one command its README.md gives
    New {
        /// The project's language
        #[arg(long, value_enum)]
        lang: crate::commands::scaffold::Lang,
        /// What the plugin is
        #[arg(long, value_parser = ["copier", "hook", "merge-operator", "compaction-filter"])]
        kind: String,
        /// The plugin's name: [a-z][a-z0-9-]*, at most 64 characters
        name: String,
        /// Where to create the project's directory NAME (default: here)
        #[arg(long, default_value = ".")]
        dir: std::path::PathBuf,
    },
}

pub(super) async fn run(command: PluginCommand) -> Result<(), Error> {
    match command {
        PluginCommand::List {
            plugin_dirs,
            format,
        } => check(plugin_dirs, None, format, false, false).await,
        PluginCommand::Check {
            plugin_dirs,
            config,
            exercise,
            format,
        } => check(plugin_dirs, config, format, true, exercise).await,
        PluginCommand::Wit { dir } => {
            let written = crate::commands::scaffold::write_wit(&dir).map_err(scaffold_error)?;
            for path in written {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        PluginCommand::New {
            lang,
            kind,
            name,
            dir,
        } => new_project(lang, &kind, &name, &dir),
    }
}

fn scaffold_error(e: crate::commands::scaffold::ScaffoldError) -> Error {
    Error::CliUsage(e.to_string())
}

/// `sleet plugin new`: writes the project and says how to build it.
fn new_project(
    lang: crate::commands::scaffold::Lang,
    kind: &str,
    name: &str,
    dir: &std::path::Path,
) -> Result<(), Error> {
    let kinds = [
        PluginKind::Copier,
        PluginKind::Hook,
        PluginKind::MergeOperator,
        PluginKind::CompactionFilter,
    ];
    let kind = kinds
        .into_iter()
        .find(|k| k.to_string() == kind)
        .expect("clap accepts only the kinds it lists");
    let project = crate::commands::scaffold::project(lang, kind, name).map_err(scaffold_error)?;
    let at = dir.join(name);
    crate::commands::scaffold::write(&at, &project).map_err(scaffold_error)?;
    println!(
        "wrote a {lang} {kind} plugin in {}; build it there with:\n  {}\nwhich writes {}",
        at.display(),
        project.build.join(" "),
        project.output.display()
    );
    Ok(())
}

/// `sleet plugin list` (`strict` false) and `sleet plugin check`.
async fn check(
    dirs: Vec<std::path::PathBuf>,
    config: Option<std::path::PathBuf>,
    format: Format,
    strict: bool,
    exercise: bool,
) -> Result<(), Error> {
    let fleet =
        match &config {
            Some(path) => Some(
                crate::config::parse_fleet_config(&std::fs::read_to_string(path).map_err(|e| {
                    Error::CliUsage(format!("failed to read {}: {e}", path.display()))
                })?)
                .map_err(|e| Error::CliUsage(format!("{}: {e}", path.display())))?,
            ),
            None => None,
        };
    let report = crate::commands::plugin_check::check(
        &dirs,
        PluginRuntime::default_cache_dir(),
        fleet.as_ref(),
        exercise,
    )
    .await
    .map_err(Error::Plugins)?;
    emit(format, &report, render_plugins);
    let problems = report.problem_count();
    if strict && problems > 0 {
        return Err(Error::PluginCheckFailed { problems });
    }
    Ok(())
}

fn render_plugins(r: &crate::commands::plugin_check::PluginCheckResponse) -> String {
    let rows = r.plugins.iter().map(|p| {
        vec![
            p.name.clone(),
            p.kind.map_or("-".to_string(), |k| k.to_string()),
            p.sha256.clone().unwrap_or_else(|| "-".into()),
            if p.used_by.is_empty() {
                "-".to_string()
            } else {
                p.used_by.join(", ")
            },
        ]
    });
    let mut out = status::table(&["PLUGIN", "KIND", "SHA256", "USED BY"], rows);
    for p in &r.plugins {
        let mut facts = Vec::new();
        if let Some(toolchain) = &p.toolchain {
            facts.push(format!("made by {toolchain}"));
        }
        if let (Some(bytes), Some(ms)) = (p.size_bytes, p.load_ms) {
            facts.push(format!(
                "{:.1} MB, loaded in {:.1} s",
                bytes as f64 / 1e6,
                ms as f64 / 1e3
            ));
        }
        if let (Some(peak), Some(budget)) = (p.peak_memory_bytes, p.memory_mib) {
            facts.push(format!(
                "peak memory {:.1} of {budget} MiB",
                peak as f64 / f64::from(1 << 20)
            ));
        }
        if !facts.is_empty() {
            out.push_str(&format!("{}: {}\n", p.name, facts.join("; ")));
        }
        for did in &p.exercised {
            out.push_str(&format!("{}: {did}\n", p.name));
        }
    }
    for warning in r.plugins.iter().flat_map(|p| p.warnings.iter()) {
        out.push_str(&format!("warning: {warning}\n"));
    }
    let problems = r
        .problems
        .iter()
        .chain(r.plugins.iter().flat_map(|p| p.problems.iter()));
    for problem in problems {
        out.push_str(&format!("problem: {problem}\n"));
    }
    out
}
