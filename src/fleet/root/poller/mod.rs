//! Re-reading the fleet root: `sleet.toml` and the `dbs/` registry, with
//! as few requests and as little work as an unchanged root allows.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::{CONFIG_FILE, FleetRoot, FleetView, REGISTRY_DIR, Registered};
use crate::config::{DatabaseConfig, FleetConfig, parse_database_config, parse_fleet_config};
use crate::model::registry::{canonicalize_database_url, parse_file_name};

/// A registry file body the poller has read, kept so an unchanged file
/// (same ETag) is never fetched again.
#[derive(Debug, Clone)]
struct CachedEntry {
    e_tag: Option<String>,
    text: String,
    /// The last version that parsed, with the fleet config it was checked
    /// against, so a `sleet.toml` change re-checks it without a GET.
    good: Option<Arc<DatabaseConfig>>,
    checked_against: Option<Arc<FleetConfig>>,
}

/// Re-reads the fleet root with as few requests as possible, and keeps the
/// last good view of anything that becomes unreadable or invalid.
///
/// Cost of one poll: one GET of `sleet.toml` (its body is re-parsed only
/// when the ETag changed), one LIST of `dbs/` (paginated by the store),
/// and one GET per non-empty registry file whose ETag changed. A listing
/// identical to the last settled one (names, sizes, ETags and times, under
/// the same fleet config, every file read) is not decoded again: at
/// 100,000 databases decoding was half of what a node spent on the fleet's
/// size.
#[derive(Debug, Default)]
pub struct ConfigPoller {
    fleet: Arc<FleetConfig>,
    fleet_e_tag: Option<String>,
    entries: HashMap<String, CachedEntry>,
    last_databases: Arc<Registered>,
    /// The last registry poll whose every file was read, if any: what it
    /// listed and under which fleet config, and the warnings it gave.
    settled: Option<SettledRegistry>,
    /// Keys for listing fingerprints, random per poller.
    fingerprint_keys: std::hash::RandomState,
    /// Listings decoded so far.
    #[cfg(test)]
    decoded: usize,
    /// The config of every empty registry file.
    fleet_defaults: Arc<DatabaseConfig>,
    /// Whether the last poll could read `sleet.toml` and list the registry
    /// (a broken file does not count: the store answered).
    read_root: bool,
}

impl ConfigPoller {
    pub fn new() -> Self {
        ConfigPoller::default()
    }

    /// The fleet config of the last good poll.
    pub fn fleet(&self) -> &FleetConfig {
        &self.fleet
    }

    /// Whether the last poll reached the fleet root's store.
    pub fn read_root(&self) -> bool {
        self.read_root
    }

    /// Reads `sleet.toml` alone (the defaults when it is missing), with
    /// warnings for what could not be read or parsed.
    pub async fn fleet_config(root: &FleetRoot) -> (FleetConfig, Vec<String>) {
        let mut poller = ConfigPoller::new();
        let mut warnings = Vec::new();
        poller.poll_fleet_config(root, &mut warnings).await;
        (Arc::unwrap_or_clone(poller.fleet), warnings)
    }

    /// Polls `sleet.toml` and the registry.
    pub async fn poll(&mut self, root: &FleetRoot) -> FleetView {
        self.read_root = true;
        let mut warnings = Vec::new();
        self.poll_fleet_config(root, &mut warnings).await;
        let databases = self.poll_registry(root, &mut warnings).await;
        FleetView {
            fleet: FleetConfig::clone(&self.fleet),
            databases,
            warnings,
        }
    }

    async fn poll_fleet_config(&mut self, root: &FleetRoot, warnings: &mut Vec<String>) {
        let path = root.path(CONFIG_FILE);
        let shown = root.describe(CONFIG_FILE);
        let result = match root.store.get(&path).await {
            Ok(got) => {
                let e_tag = got.meta.e_tag.clone();
                if e_tag.is_some() && e_tag == self.fleet_e_tag {
                    return;
                }
                got.bytes().await.map(|body| (e_tag, body))
            }
            Err(e) => Err(e),
        };
        match result {
            Ok((e_tag, body)) => match std::str::from_utf8(&body)
                .map_err(|e| format!("not UTF-8: {e}"))
                .and_then(|text| parse_fleet_config(text).map_err(|e| e.to_string()))
            {
                Ok(config) => {
                    self.fleet = Arc::new(config);
                    self.fleet_e_tag = e_tag;
                }
                Err(e) => warnings.push(format!("invalid {shown}: {e}; keeping last good config")),
            },
            Err(object_store::Error::NotFound { .. }) => {
                // A fresh allocation only on a change: entries checked
                // against the old one then compare by pointer.
                if self.fleet_e_tag.is_some() || *self.fleet != FleetConfig::default() {
                    self.fleet = Arc::default();
                }
                self.fleet_e_tag = None;
            }
            Err(e) => {
                self.read_root = false;
                warnings.push(format!(
                    "failed to read {shown}: {e}; keeping last good config"
                ))
            }
        }
    }

    async fn poll_registry(
        &mut self,
        root: &FleetRoot,
        warnings: &mut Vec<String>,
    ) -> Arc<Registered> {
        let listing = match root.list_dir(REGISTRY_DIR).await {
            Ok(listing) => listing,
            Err(e) => {
                self.read_root = false;
                warnings.push(format!("failed to list registry: {e}; keeping last good"));
                return self.last_databases.clone();
            }
        };
        let fingerprint = listing_fingerprint(&self.fingerprint_keys, &listing);
        if let Some(settled) = self
            .settled
            .as_ref()
            .filter(|s| s.fingerprint == fingerprint && Arc::ptr_eq(&s.fleet, &self.fleet))
        {
            warnings.extend(settled.warnings.iter().cloned());
            return self.last_databases.clone();
        }
        #[cfg(test)]
        {
            self.decoded += 1;
        }
        let mut registry_warnings = Vec::new();
        let entries = registry_entries(root, &listing, &mut registry_warnings);
        drop(listing);
        let mut databases = BTreeMap::new();
        let mut seen = HashSet::new();
        let mut settles = true;
        for entry in entries {
            let (config, read) = self
                .entry_config(root, &entry, &mut registry_warnings)
                .await;
            // A file without an ETag is fetched at every poll (its cache
            // cannot tell a rewrite of the same size), so is its listing.
            settles &= read && (entry.size == 0 || entry.e_tag.is_some());
            seen.insert(entry.name.clone());
            databases.insert(entry.url, config);
        }
        self.entries.retain(|name, _| seen.contains(name));
        // A file that could not be read is retried at the next poll, even
        // if the listing has not changed.
        self.settled = settles.then(|| SettledRegistry {
            fingerprint,
            fleet: self.fleet.clone(),
            warnings: registry_warnings.clone(),
        });
        warnings.extend(registry_warnings);
        if *self.last_databases != databases {
            self.last_databases = Arc::new(databases);
        }
        self.last_databases.clone()
    }

    /// The config of one registry file: empty files cost no GET, unchanged
    /// files are served from the cache, and a broken file falls back to its
    /// last good version (or to `services = []` when it never had one).
    /// The flag is false when the file could not be read.
    async fn entry_config(
        &mut self,
        root: &FleetRoot,
        entry: &RegistryEntry,
        warnings: &mut Vec<String>,
    ) -> (Arc<DatabaseConfig>, bool) {
        if entry.size == 0 {
            // Empty means "fleet defaults": no GET, but remembered as the
            // last good version in case the file is later broken.
            let config = self.fleet_defaults.clone();
            let known = self.entries.get(&entry.name).is_some_and(|c| {
                c.e_tag == entry.e_tag
                    && c.text.is_empty()
                    && c.good.as_ref().is_some_and(|g| Arc::ptr_eq(g, &config))
            });
            if !known {
                self.entries.insert(
                    entry.name.clone(),
                    CachedEntry {
                        e_tag: entry.e_tag.clone(),
                        text: String::new(),
                        good: Some(config.clone()),
                        checked_against: Some(self.fleet.clone()),
                    },
                );
            }
            return (config, true);
        }
        let unchanged = self
            .entries
            .get(&entry.name)
            .filter(|c| c.e_tag.is_some() && c.e_tag == entry.e_tag);
        if let Some(good) = unchanged
            .filter(|c| {
                c.checked_against
                    .as_ref()
                    .is_some_and(|f| same(f, &self.fleet))
            })
            .and_then(|c| c.good.clone())
        {
            // Checked against this fleet config already.
            return (good, true);
        }
        let cached = unchanged.cloned();
        let cached = match cached {
            Some(c) => c,
            None => match self.fetch_entry(root, entry).await {
                Ok(text) => CachedEntry {
                    e_tag: entry.e_tag.clone(),
                    text,
                    good: self.entries.get(&entry.name).and_then(|c| c.good.clone()),
                    checked_against: None,
                },
                Err(e) => return (self.fall_back(entry, e, warnings), false),
            },
        };
        match parse_database_config(&self.fleet, &cached.text) {
            Ok(config) => {
                let config = Arc::new(config);
                self.entries.insert(
                    entry.name.clone(),
                    CachedEntry {
                        good: Some(config.clone()),
                        checked_against: Some(self.fleet.clone()),
                        ..cached
                    },
                );
                (config, true)
            }
            Err(e) => {
                let shown = e.to_string();
                self.entries.insert(entry.name.clone(), cached);
                (self.fall_back(entry, shown, warnings), true)
            }
        }
    }

    async fn fetch_entry(&self, root: &FleetRoot, entry: &RegistryEntry) -> Result<String, String> {
        let body = root
            .get_bytes(&entry.path)
            .await
            .map_err(|e| e.to_string())?;
        String::from_utf8(body.to_vec()).map_err(|e| format!("not UTF-8: {e}"))
    }

    fn fall_back(
        &self,
        entry: &RegistryEntry,
        problem: String,
        warnings: &mut Vec<String>,
    ) -> Arc<DatabaseConfig> {
        match self.entries.get(&entry.name).and_then(|c| c.good.clone()) {
            Some(good) => {
                warnings.push(format!(
                    "invalid registry entry {}: {problem}; keeping last good",
                    entry.name
                ));
                good
            }
            None => {
                warnings.push(format!(
                    "invalid registry entry {}: {problem}; database disabled",
                    entry.name
                ));
                Arc::new(DatabaseConfig {
                    services: Some(Vec::new()),
                    ..DatabaseConfig::default()
                })
            }
        }
    }
}

/// Whether two shared fleet configs are the same: the same allocation,
/// or (after a `sleet.toml` change and back) equal.
fn same(a: &Arc<FleetConfig>, b: &Arc<FleetConfig>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// A registry poll that read every file, remembered so that the next poll
/// of the same listing under the same fleet config can skip decoding it.
#[derive(Debug)]
struct SettledRegistry {
    fingerprint: u64,
    fleet: Arc<FleetConfig>,
    warnings: Vec<String>,
}

/// A digest of a `dbs/` listing: every name, size, ETag and modification
/// time, in order. Two listings with the same digest are taken to be the
/// same: keyed SipHash over 64 bits, so a collision (which would hide one
/// change until the registry changes again) cannot be aimed at and is
/// vanishingly rare.
fn listing_fingerprint(keys: &std::hash::RandomState, listing: &[object_store::ObjectMeta]) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut hasher = keys.build_hasher();
    listing.len().hash(&mut hasher);
    for meta in listing {
        meta.location.as_ref().hash(&mut hasher);
        meta.size.hash(&mut hasher);
        meta.e_tag.hash(&mut hasher);
        meta.last_modified.hash(&mut hasher);
    }
    hasher.finish()
}

/// One usable file in a `dbs/` listing.
#[derive(Debug, Clone)]
struct RegistryEntry {
    /// Root-relative name, `dbs/<file>`.
    name: String,
    url: String,
    path: Path,
    size: u64,
    e_tag: Option<String>,
}

/// Decodes a `dbs/` listing into one entry per database. Canonical
/// spellings win over aliases that decode to the same database; anything
/// skipped gets a warning naming the file.
fn registry_entries(
    root: &FleetRoot,
    listing: &[object_store::ObjectMeta],
    warnings: &mut Vec<String>,
) -> Vec<RegistryEntry> {
    let mut candidates = Vec::new();
    for meta in listing {
        let name = root.relative(&meta.location).to_string();
        let Some(decoded) = meta.location.filename().and_then(parse_file_name) else {
            warnings.push(format!("ignoring non-registry object {name}"));
            continue;
        };
        let url = match canonicalize_database_url(&decoded) {
            Ok(url) => url,
            Err(e) => {
                warnings.push(format!("ignoring registry entry {name}: {e}"));
                continue;
            }
        };
        let canonical = url == decoded;
        if !canonical {
            warnings.push(format!(
                "registry entry {name} is not canonical (decodes to \"{decoded}\", canonical \"{url}\")"
            ));
        }
        candidates.push((
            !canonical,
            RegistryEntry {
                name,
                url,
                path: meta.location.clone(),
                size: meta.size,
                e_tag: meta.e_tag.clone(),
            },
        ));
    }
    candidates.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    let mut winners: BTreeMap<String, String> = BTreeMap::new();
    let mut entries = Vec::new();
    for (_, entry) in candidates {
        if let Some(winner) = winners.get(&entry.url) {
            warnings.push(format!(
                "registry entries {winner} and {} alias {}; using {winner}",
                entry.name, entry.url
            ));
            continue;
        }
        winners.insert(entry.url.clone(), entry.name.clone());
        entries.push(entry);
    }
    entries
}

#[cfg(test)]
mod tests;
