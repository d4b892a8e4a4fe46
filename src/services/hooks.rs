//! Which hooks guard a service's runs of one database: the enabled hooks
//! of its settings that fire for that service, with the limits the fleet
//! grants their plugins. Node tasks and one-shot mirror passes ask the
//! same hooks.

use crate::Service;
use crate::config::{DatabaseSettings, FleetConfig};
use crate::plugin::PluginKind;
use crate::plugin::hook::HookSpec;

/// The enabled hooks of a database that fire for `service`, by name.
pub fn specs(service: Service, settings: &DatabaseSettings, fleet: &FleetConfig) -> Vec<HookSpec> {
    settings
        .hooks
        .iter()
        .filter(|(_, hook)| hook.applies_to(service))
        .map(|(name, hook)| HookSpec {
            name: name.clone(),
            plugin: hook.plugin.clone(),
            config: hook.config.clone(),
            limits: fleet.plugin_limits(&hook.plugin, PluginKind::Hook),
        })
        .collect()
}
