//! Parsing config text and checking it: every problem is reported at once,
//! each naming its field.

use std::collections::BTreeMap;
use std::fmt;

use super::files::*;
use super::sections::{
    CoordinatorOverrides, HookOverrides, MirrorTargetOverrides, PluginGrants, WorkerOverrides,
};
use crate::model::duration::HumanDuration;
use crate::model::ident::is_valid_identifier;
use crate::model::registry::canonicalize_url;
use crate::model::service::first_duplicate;

/// A config file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The TOML did not parse into the config shape (syntax, wrong type,
    /// unknown key). The message names the line, column and key.
    #[error("failed to parse config: {0}")]
    Parse(String),
    /// The config parsed but breaks one or more rules.
    #[error("{}", Problems(.0))]
    Invalid(Vec<String>),
}

struct Problems<'a>(&'a [String]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid config:")?;
        for problem in self.0 {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

/// Parses and validates `sleet.toml`.
pub fn parse_fleet_config(text: &str) -> Result<FleetConfig, ConfigError> {
    let config: FleetConfig = parse_toml(text)?;
    let mut problems = Vec::new();
    check_node(&config.node, &mut problems);
    check_events(&config.events, &mut problems);
    check_plugins(&config.plugins, &mut problems);
    check_stores(&config.stores, &mut problems);
    let mut check = Checker::new("database", &mut problems);
    check.layer(&config.database);
    check.resolved(&config.database);
    into_result(config, problems)
}

/// Parses and validates one `dbs/<db>.toml`, checking the file alone and
/// then the result of laying it over the fleet's `[database]` table.
pub fn parse_database_config(
    fleet: &FleetConfig,
    text: &str,
) -> Result<DatabaseConfig, ConfigError> {
    let file: DatabaseConfig = parse_toml(text)?;
    let mut problems = Vec::new();
    Checker::new("", &mut problems).layer(&file);
    Checker::new("resolved", &mut problems).resolved(&fleet.database.overlaid(&file));
    into_result(file, problems)
}

fn into_result<T>(value: T, problems: Vec<String>) -> Result<T, ConfigError> {
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(ConfigError::Invalid(problems))
    }
}

/// Deserializes TOML, turning the parser's multi-line report into one line
/// that still names the line, column and offending key.
fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let location = e
            .span()
            .map(|span| {
                let (line, column) = line_and_column(text, span.start);
                format!("line {line}, column {column}: ")
            })
            .unwrap_or_default();
        ConfigError::Parse(format!("{location}{}", e.message().trim_end()))
    })
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit_once('\n')
        .map_or(before, |(_, last)| last)
        .chars()
        .count()
        + 1;
    (line, column)
}

fn check_node(node: &NodeOverrides, problems: &mut Vec<String>) {
    let resolved = node.resolve();
    if resolved.heartbeat_interval.is_zero() {
        problems.push("node.heartbeat_interval must be > 0".into());
    } else if resolved.heartbeat_interval >= resolved.heartbeat_timeout {
        problems.push(format!(
            "node.heartbeat_interval ({}) must be < node.heartbeat_timeout ({})",
            HumanDuration(resolved.heartbeat_interval),
            HumanDuration(resolved.heartbeat_timeout)
        ));
    }
    if resolved.config_poll.is_zero() {
        problems.push("node.config_poll must be > 0".into());
    }
}

/// `[events]`: a source needs its queue, and the intervals must leave
/// polling a real safety net.
fn check_events(events: &EventsConfig, problems: &mut Vec<String>) {
    let sqs = events.source == Some(EventSourceKind::Sqs);
    match (&events.queue_url, sqs) {
        (None, true) => {
            problems.push("events.queue_url is required with events.source = \"sqs\"".into())
        }
        (Some(_), false) => problems.push(
            "events.queue_url is set but events.source is not \"sqs\": no events would be received"
                .into(),
        ),
        (Some(queue), true) => {
            if let Err(why) = crate::model::policy::QueueAddress::parse(queue) {
                problems.push(format!("events.queue_url {queue:?}: {why}"));
            }
        }
        (None, false) => {}
    }
    if events
        .safety_interval
        .is_some_and(|d| d.0 < std::time::Duration::from_secs(20))
    {
        problems
            .push("events.safety_interval must be at least 20s (the default look interval)".into());
    }
    if events
        .relay_interval
        .is_some_and(|d| d.0 < std::time::Duration::from_millis(100))
    {
        problems.push("events.relay_interval must be at least 100ms".into());
    }
}

/// `[stores.trusted]` names whole stores, each with a reason.
fn check_stores(stores: &StoresConfig, problems: &mut Vec<String>) {
    if stores.recheck_after.is_some_and(|d| d.0.is_zero()) {
        problems.push("stores.recheck_after must be > 0".into());
    }
    for (store, reason) in &stores.trusted {
        let named = crate::model::registry::canonicalize_url(store)
            .map(|url| crate::store::store_id(&url))
            .ok();
        if named.as_deref() != Some(store.as_str()) {
            let hint = named.map_or(String::new(), |id| format!(" (\"{id}\")"));
            problems.push(format!(
                "stores.trusted.\"{store}\": name a whole store as scheme://bucket{hint}"
            ));
        }
        if reason.trim().is_empty() {
            problems.push(format!(
                "stores.trusted.\"{store}\": give the reason the store is trusted"
            ));
        }
    }
}

fn check_plugins(plugins: &BTreeMap<String, PluginGrants>, problems: &mut Vec<String>) {
    for (name, grants) in plugins {
        if !is_valid_identifier(name) {
            problems.push(format!(
                "plugins.{name}: plugin names are 1-128 chars of [A-Za-z0-9_-]"
            ));
        }
        if let Some(sha) = &grants.sha256
            && (sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            problems.push(format!("plugins.{name}.sha256 must be 64 hex digits"));
        }
        if grants.memory_mib.is_some_and(|m| !(1..=4096).contains(&m)) {
            problems.push(format!("plugins.{name}.memory_mib must be 1..=4096"));
        }
        if grants.call_timeout.is_some_and(|d| d.is_zero()) {
            problems.push(format!("plugins.{name}.call_timeout must be > 0"));
        }
    }
}

/// Collects rule violations under a location prefix such as `database`.
struct Checker<'a> {
    prefix: String,
    problems: &'a mut Vec<String>,
}

impl<'a> Checker<'a> {
    fn new(location: &str, problems: &'a mut Vec<String>) -> Self {
        let prefix = if location.is_empty() {
            String::new()
        } else {
            format!("{location}.")
        };
        Checker { prefix, problems }
    }

    fn push(&mut self, problem: String) {
        self.problems.push(format!("{}{problem}", self.prefix));
    }

    fn positive(&mut self, field: &str, value: Option<HumanDuration>) {
        if value.is_some_and(|d| d.is_zero()) {
            self.push(format!("{field} must be > 0"));
        }
    }

    fn at_least_one<N: Into<u64> + Copy>(&mut self, field: &str, value: Option<N>) {
        if value.is_some_and(|n| n.into() == 0) {
            self.push(format!("{field} must be >= 1"));
        }
    }

    /// S3's limits: parts of at least 5 MiB, one PUT of at most 5 GiB.
    fn multipart_threshold(&mut self, field: &str, mib: Option<u32>) {
        if mib.is_some_and(|m| !(5..=5120).contains(&m)) {
            self.push(format!(
                "{field} must be 5 to 5120 (MiB): S3 parts are at least 5 MiB and one PUT at most 5 GiB"
            ));
        }
    }

    fn nonzero_bytes(&mut self, field: &str, value: Option<u64>) {
        if value == Some(0) {
            self.push(format!("{field} must be > 0"));
        }
    }

    /// Rules every layer must satisfy on its own.
    fn layer(&mut self, db: &DatabaseConfig) {
        if let Some(services) = &db.services
            && let Some(dup) = first_duplicate(services)
        {
            self.push(format!("services lists \"{dup}\" more than once"));
        }
        for (name, dir) in db.gc.directories() {
            self.positive(&format!("gc.{name}.interval"), dir.interval);
        }
        self.positive("gc.detach.interval", db.gc.detach.interval);
        self.coordinator_layer(&db.compactor_coordinator);
        for (name, target) in &db.mirror.targets {
            self.target_layer(name, target);
        }
        for (name, hook) in &db.hooks {
            self.hook_layer(name, hook);
        }
        self.workers_layer(&db.compaction_workers);
        let outside = &db.outside_compactor;
        self.positive("outside-compactor.recheck", outside.recheck);
        self.positive("outside-compactor.active_within", outside.active_within);
        self.positive("outside-compactor.takeover_after", outside.takeover_after);
        let idle = &db.idle;
        self.positive("idle.probe_min", idle.probe_min);
        self.positive("idle.probe_max", idle.probe_max);
        self.positive("idle.sleep_after", idle.sleep_after);
        self.positive("idle.workers_probe", idle.workers_probe);
        self.positive("idle.gc_probe", idle.gc_probe);
        if let (Some(min), Some(max)) = (idle.probe_min, idle.probe_max)
            && min.0 > max.0
        {
            self.push(format!(
                "idle.probe_min ({min}) must not exceed idle.probe_max ({max})"
            ));
        }
    }

    fn hook_layer(&mut self, name: &str, hook: &HookOverrides) {
        if !is_valid_identifier(name) {
            self.push(format!(
                "hooks.{name}: hook names are 1-128 chars of [A-Za-z0-9_-]"
            ));
        }
        if let Some(plugin) = &hook.plugin
            && !is_valid_identifier(plugin)
        {
            self.push(format!(
                "hooks.{name}.plugin: plugin names are 1-128 chars of [A-Za-z0-9_-]"
            ));
        }
        if let Some(services) = &hook.services
            && let Some(dup) = first_duplicate(services)
        {
            self.push(format!(
                "hooks.{name}.services lists \"{dup}\" more than once"
            ));
        }
    }

    fn coordinator_layer(&mut self, c: &CoordinatorOverrides) {
        const P: &str = "compactor-coordinator";
        self.positive(&format!("{P}.poll_interval"), c.poll_interval);
        self.positive(
            &format!("{P}.manifest_update_timeout"),
            c.manifest_update_timeout,
        );
        self.at_least_one(
            &format!("{P}.max_concurrent_compactions"),
            c.max_concurrent_compactions,
        );
        self.positive(
            &format!("{P}.commit_compacted_interval"),
            c.commit_compacted_interval,
        );
        self.positive(
            &format!("{P}.worker_heartbeat_timeout"),
            c.worker_heartbeat_timeout,
        );
        self.positive(&format!("{P}.checkpoint_lifetime"), c.checkpoint_lifetime);
        let s = &c.scheduler;
        self.at_least_one(
            &format!("{P}.scheduler.min_compaction_sources"),
            s.min_compaction_sources,
        );
        self.at_least_one(
            &format!("{P}.scheduler.max_compaction_sources"),
            s.max_compaction_sources,
        );
        if s.include_size_threshold
            .is_some_and(|t| !t.is_finite() || t <= 0.0)
        {
            self.push(format!(
                "{P}.scheduler.include_size_threshold must be a positive number"
            ));
        }
    }

    fn target_layer(&mut self, name: &str, t: &MirrorTargetOverrides) {
        if !is_valid_identifier(name) {
            self.push(format!(
                "mirror.targets.{name}: mirror target names are 1-128 chars of [A-Za-z0-9_-]"
            ));
        }
        let field = |f: &str| format!("mirror.targets.{name}.{f}");
        self.positive(&field("poll"), t.poll);
        self.positive(&field("interval"), t.interval);
        self.positive(&field("min_age"), t.min_age);
        self.positive(&field("checkpoint_lifetime"), t.checkpoint_lifetime);
        self.positive(&field("deep_check"), t.deep_check);
        self.at_least_one(&field("copy_parallelism"), t.copy_parallelism);
        self.multipart_threshold(&field("multipart_threshold_mib"), t.multipart_threshold_mib);
        self.positive(&field("retention.keep"), t.retention.keep);
    }

    fn workers_layer(&mut self, w: &WorkerOverrides) {
        const P: &str = "compaction-workers";
        if w.count == Some(0) {
            self.push(format!(
                "{P}.count must be >= 1 (drop \"compaction-workers\" from services to run none)"
            ));
        }
        self.at_least_one(
            &format!("{P}.max_concurrent_compactions"),
            w.max_concurrent_compactions,
        );
        self.positive(
            &format!("{P}.compactions_poll_interval"),
            w.compactions_poll_interval,
        );
        self.positive(&format!("{P}.heartbeat_interval"), w.heartbeat_interval);
        self.at_least_one(&format!("{P}.max_fetch_tasks"), w.max_fetch_tasks);
        self.nonzero_bytes(&format!("{P}.max_sst_size"), w.max_sst_size);
        self.nonzero_bytes(&format!("{P}.bytes_to_fetch"), w.bytes_to_fetch);
    }

    /// Rules about the layered result, which no single layer can decide.
    fn resolved(&mut self, merged: &DatabaseConfig) {
        for (name, hook) in &merged.hooks {
            if !hook.disabled.unwrap_or(false) && hook.plugin.is_none() {
                self.push(format!(
                    "hooks.{name}: plugin is required unless the hook is disabled"
                ));
            }
        }
        let coordinator = merged.compactor_coordinator.resolve();
        if coordinator.min_compaction_sources > coordinator.max_compaction_sources {
            self.push(format!(
                "compactor-coordinator.scheduler: min_compaction_sources ({}) exceeds max_compaction_sources ({})",
                coordinator.min_compaction_sources, coordinator.max_compaction_sources
            ));
        }
        for (name, target) in &merged.mirror.targets {
            let disabled = target.disabled.unwrap_or(false);
            match &target.url {
                None if !disabled => self.push(format!(
                    "mirror.targets.{name}: url is required unless the target is disabled"
                )),
                Some(url) => {
                    if let Err(e) = canonicalize_url(url) {
                        self.push(format!("mirror.targets.{name}.url: {e}"));
                    }
                }
                None => {}
            }
            if let Some(prefix) = &target.source_prefix
                && let Err(e) = canonicalize_url(prefix)
            {
                self.push(format!("mirror.targets.{name}.source_prefix: {e}"));
            }
        }
    }
}
