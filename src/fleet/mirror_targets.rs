//! Which mirror targets apply to a database, and where each one copies it.

use crate::config::{
    CopierKind, DatabaseSettings, FleetConfig, MirrorTargetSettings, PluginLimits,
};
use crate::model::registry::canonicalize_url;

/// A target that applies to one database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedTarget<'a> {
    pub name: &'a str,
    /// The canonical destination root for this database.
    pub destination: String,
    pub settings: &'a MirrorTargetSettings,
}

/// Where two or more (database, target) pairs copy to the same place:
/// each such destination with its users, sorted. Mirror passes into one
/// destination from two databases would overwrite each other, so none of
/// them runs, and `register` and `status` say so.
pub fn shared_destinations(
    view: &crate::fleet::root::FleetView,
) -> std::collections::BTreeMap<String, Vec<(String, String)>> {
    let mut users: std::collections::BTreeMap<String, Vec<(String, String)>> =
        std::collections::BTreeMap::new();
    for (database, file) in view.databases.iter() {
        let settings = view.fleet.resolve_database(file);
        if !settings
            .services
            .contains(&crate::model::service::Service::Mirror)
        {
            continue;
        }
        for target in applied_targets(database, &settings) {
            users
                .entry(target.destination)
                .or_default()
                .push((database.clone(), target.name.to_string()));
        }
    }
    users.retain(|_, users| users.len() > 1);
    users
}

/// `a target dr and b target dr`, for messages.
pub fn describe_users(users: &[(String, String)]) -> String {
    users
        .iter()
        .map(|(database, target)| format!("{database} target {target}"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The limits a target's copier runs under: its plugin's grants, or the
/// defaults for built-in copiers (which ignore them).
pub fn target_limits(fleet: &FleetConfig, settings: &MirrorTargetSettings) -> PluginLimits {
    match &settings.copier {
        CopierKind::Plugin(name) => {
            fleet.plugin_limits(name, crate::model::policy::PluginKind::Copier)
        }
        _ => FleetConfig::default().plugin_limits("", crate::model::policy::PluginKind::Copier),
    }
}

/// The enabled targets that apply to `database` (a canonical URL), by name.
///
/// A target without `source_prefix` copies every database it is configured
/// for to exactly its `url`. With a prefix, only databases at or below the
/// prefix (on a path-segment boundary) apply, and the path below the prefix
/// is appended to `url`, so one fleet-wide target fans out to one
/// destination per database. A destination equal to the database itself
/// never applies.
pub fn applied_targets<'a>(
    database: &str,
    settings: &'a DatabaseSettings,
) -> Vec<AppliedTarget<'a>> {
    settings
        .mirror_targets
        .iter()
        .filter(|(_, t)| !t.disabled)
        .filter_map(|(name, t)| {
            let destination = destination(database, t)?;
            (destination != database).then_some(AppliedTarget {
                name,
                destination,
                settings: t,
            })
        })
        .collect()
}

/// Where a target copies `database`, or `None` when it does not apply.
pub fn destination(database: &str, target: &MirrorTargetSettings) -> Option<String> {
    let url = canonicalize_url(target.url.as_deref()?).ok()?;
    let Some(prefix) = &target.source_prefix else {
        return Some(url);
    };
    let prefix = canonicalize_url(prefix).ok()?;
    let rest = database.strip_prefix(prefix.as_str())?;
    (rest.is_empty() || rest.starts_with('/')).then(|| format!("{url}{rest}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DatabaseConfig, FleetConfig, parse_database_config};

    fn settings(toml: &str) -> DatabaseSettings {
        let fleet = FleetConfig::default();
        let file: DatabaseConfig = parse_database_config(&fleet, toml).unwrap();
        fleet.resolve_database(&file)
    }

    #[test]
    fn prefix_targets_map_below_the_prefix_only() {
        let s = settings(
            r#"[mirror.targets.dr]
            url = "s3://dr-bucket/mirrors"
            source_prefix = "s3://user-data""#,
        );
        let t = &s.mirror_targets["dr"];
        assert_eq!(
            destination("s3://user-data/tenant1/db1", t).as_deref(),
            Some("s3://dr-bucket/mirrors/tenant1/db1")
        );
        assert_eq!(
            destination("s3://user-data", t).as_deref(),
            Some("s3://dr-bucket/mirrors")
        );
        assert_eq!(
            destination("s3://user-database/x", t),
            None,
            "segment boundary"
        );
        assert_eq!(destination("gs://user-data/x", t), None);
    }

    #[test]
    fn exact_disabled_and_self_targets() {
        let s = settings(
            r#"[mirror.targets.exact]
            url = "s3://dr/one"
            [mirror.targets.off]
            url = "s3://dr/two"
            disabled = true
            [mirror.targets.itself]
            url = "s3://data/db1/""#,
        );
        let applied = applied_targets("s3://data/db1", &s);
        let names: Vec<_> = applied
            .iter()
            .map(|t| (t.name, t.destination.as_str()))
            .collect();
        assert_eq!(names, [("exact", "s3://dr/one")]);
        assert_eq!(
            applied_targets("s3://other/db", &s).len(),
            2,
            "exact targets apply to every database"
        );
    }
}
