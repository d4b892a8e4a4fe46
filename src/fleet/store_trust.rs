//! Which stores a fleet may write to: store checks recorded under the
//! fleet root, reused by every node until they expire, and judged with
//! the operator's `[stores.trusted]`.
//!
//! One object per store, `stores/<store id, percent-encoded>.json`,
//! holding the [`StoreReport`] of the latest check. A check writes it
//! with a plain PUT: racing nodes both checked, and either report is
//! true. Readers ignore what does not parse (and say so), so a damaged
//! record costs one more check, never a refusal.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use object_store::{ObjectStoreExt, PutPayload};

use crate::config::StoreSettings;
use crate::fleet::root::FleetRoot;
use crate::model::coverage::{self, Mark};
use crate::model::registry::encoded_name;
use crate::store::check::{self as store_check, CheckOptions, Property, StoreReport};

/// Why a store's trust could not be established or was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to {action} {location}: {source}")]
    Store {
        action: &'static str,
        location: String,
        source: object_store::Error,
    },
    /// Nothing may write to the store: the store, what failed, the fix.
    #[error("{0}")]
    Refused(String),
}

/// The root directory of the records.
pub const STORES_DIR: &str = "stores";

/// Records larger than this are not read (a report is about 3 KiB).
const MAX_RECORD_BYTES: usize = 256 * 1024;

/// What the fleet may do with a store.
#[derive(Debug, Clone, PartialEq)]
pub enum Trust {
    /// Its check passed.
    Safe,
    /// The operator trusts it, whatever its check says.
    Trusted {
        reason: String,
        failed: Vec<Property>,
    },
    /// Its check failed these needed properties: nothing writes there.
    Unsafe { failed: Vec<Property> },
    /// Not checked yet.
    Unchecked,
}

impl Trust {
    /// Whether tasks may write to the store.
    pub fn admits(&self) -> bool {
        matches!(self, Trust::Safe | Trust::Trusted { .. })
    }

    /// Why a task that writes to `store` does not run, for logs and
    /// status.
    pub fn refusal(&self, store: &str) -> Option<String> {
        match self {
            Trust::Unsafe { failed } => Some(format!(
                "store {store} fails {}: nothing in the fleet writes there (use a store whose \
                 conditional writes are atomic, see docs/operations.md \"Choosing an object \
                 store\", or if you know better: [stores.trusted] \"{store}\" = \"why\" in \
                 sleet.toml)",
                names(failed)
            )),
            Trust::Unchecked => Some(format!("store {store} is not checked yet")),
            _ => None,
        }
    }
}

/// The largest clock skew between a node and a store the fleet
/// tolerates with `view`'s settings (see [`crate::store::check::skew_bound`]).
pub fn skew_bound_for(view: &crate::fleet::root::FleetView) -> std::time::Duration {
    let node = view.fleet.node.resolve();
    let shortest_min_age = view
        .databases
        .values()
        .map(|db| view.fleet.resolve_database(db).gc.shortest_min_age())
        .min()
        .unwrap_or_else(|| {
            let defaults = crate::config::DatabaseConfig::default();
            view.fleet.resolve_database(&defaults).gc.shortest_min_age()
        });
    crate::store::check::skew_bound(
        node.heartbeat_interval,
        node.heartbeat_timeout,
        shortest_min_age,
    )
}

/// Property names, comma-separated.
pub fn names(properties: &[Property]) -> String {
    properties
        .iter()
        .map(|p| store_check::kebab(*p))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The trust a store gets from its latest report and the operator's
/// settings.
pub fn judge(report: Option<&StoreReport>, store: &str, settings: &StoreSettings) -> Trust {
    let failed: Vec<Property> = report
        .map(StoreReport::unsafe_properties)
        .unwrap_or_default();
    match (settings.trusted.get(store), report) {
        (Some(reason), _) => Trust::Trusted {
            reason: reason.clone(),
            failed,
        },
        (None, None) => Trust::Unchecked,
        (None, Some(_)) if !failed.is_empty() => Trust::Unsafe { failed },
        (None, Some(report)) if report.safe() => Trust::Safe,
        // Errors left a needed property unproven: check again.
        (None, Some(_)) => Trust::Unchecked,
    }
}

/// Whether a report may still be reused at `now`: younger than
/// `recheck_after`, not from the future, and conclusive.
pub fn fresh(report: &StoreReport, now: DateTime<Utc>, settings: &StoreSettings) -> bool {
    let age = (now - report.checked_at).to_std().unwrap_or_default();
    report.checked_at <= now + chrono::TimeDelta::minutes(5)
        && age < settings.recheck_after
        && report.conclusive()
}

/// The root-relative name of a store's record.
pub fn record_name(store: &str) -> String {
    format!("{STORES_DIR}/{}.json", encoded_name(store))
}

/// The recorded report of `store`, if there is one that parses.
pub async fn read(root: &FleetRoot, store: &str) -> Result<Option<StoreReport>, Error> {
    let name = record_name(store);
    match root.get_bytes(&root.path(&name)).await {
        Ok(bytes) => Ok(parse(root, &name, &bytes)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(source) => Err(Error::Store {
            action: "read",
            location: root.describe(&name),
            source,
        }),
    }
}

fn parse(root: &FleetRoot, name: &str, bytes: &[u8]) -> Option<StoreReport> {
    if bytes.len() > MAX_RECORD_BYTES {
        tracing::warn!(
            "{} is over {MAX_RECORD_BYTES} bytes; ignored",
            root.describe(name)
        );
        return None;
    }
    serde_json::from_slice(bytes)
        .inspect_err(|e| tracing::warn!("{} does not parse ({e}); ignored", root.describe(name)))
        .ok()
}

/// Records a report.
pub async fn write(root: &FleetRoot, report: &StoreReport) -> Result<(), Error> {
    let name = record_name(&report.store);
    let body = serde_json::to_vec_pretty(report).expect("reports serialize");
    root.store()
        .put(&root.path(&name), PutPayload::from(body))
        .await
        .map(drop)
        .map_err(|source| Error::Store {
            action: "write",
            location: root.describe(&name),
            source,
        })
}

/// Every recorded report, sorted by store (for `sleet status`).
pub async fn list(root: &FleetRoot) -> Result<Vec<StoreReport>, Error> {
    let dir = root.path(STORES_DIR);
    let metas: Vec<_> = root
        .store()
        .list(Some(&dir))
        .try_collect()
        .await
        .map_err(|source| Error::Store {
            action: "list",
            location: root.describe(&format!("{STORES_DIR}/")),
            source,
        })?;
    let mut reports = Vec::new();
    for meta in metas {
        let name = root.relative(&meta.location).to_string();
        if !name.ends_with(".json") || meta.size as usize > MAX_RECORD_BYTES {
            continue;
        }
        match root.get_bytes(&meta.location).await {
            Ok(bytes) => reports.extend(parse(root, &name, &bytes)),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(source) => {
                return Err(Error::Store {
                    action: "read",
                    location: root.describe(&name),
                    source,
                });
            }
        }
    }
    reports.sort_by(|a, b| a.store.cmp(&b.store));
    Ok(reports)
}

/// The report of the store `url` lives in: the recorded one while it is
/// fresh, else a new short check under `url` (through `store`, with
/// `base` the URL's path in it), recorded. The bool says whether the
/// check ran.
pub async fn ensure(
    root: &FleetRoot,
    url: &str,
    store: std::sync::Arc<dyn object_store::ObjectStore>,
    base: &object_store::path::Path,
    settings: &StoreSettings,
    skew_bound: std::time::Duration,
) -> Result<(StoreReport, bool), Error> {
    let id = store_check::store_id(url);
    if let Some(report) = read(root, &id).await?
        && fresh(&report, Utc::now(), settings)
    {
        return Ok((report, false));
    }
    let report = store_check::run(store, url, base, CheckOptions::short(skew_bound)).await;
    coverage::hit(Mark::StoreChecked);
    if !report.safe() {
        tracing::error!(
            store = %id,
            "store check failed: {}",
            names(&report.unsafe_properties())
        );
    }
    write(root, &report).await?;
    Ok((report, true))
}

/// [`ensure`], then an error naming the store, the failed properties
/// and the fix when nothing may write there: for one-shot commands
/// (`register`, `mirror sync`) about to write to `url`.
pub async fn require(
    root: &FleetRoot,
    url: &str,
    store: std::sync::Arc<dyn object_store::ObjectStore>,
    base: &object_store::path::Path,
    settings: &StoreSettings,
    skew_bound: std::time::Duration,
) -> Result<Trust, Error> {
    let (report, _) = ensure(root, url, store, base, settings, skew_bound).await?;
    let trust = judge(Some(&report), &report.store, settings);
    match trust {
        Trust::Unsafe { .. } => Err(Error::Refused(
            trust.refusal(&report.store).unwrap_or_default(),
        )),
        Trust::Unchecked => Err(Error::Refused(format!(
            "store {} could not be proven safe ({}); run `sleet store check {url}` for details",
            report.store,
            names(&report.unproven_properties())
        ))),
        trust => Ok(trust),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::store::check::{Form, Outcome, PropertyResult};

    fn report(failing: &[Property]) -> StoreReport {
        StoreReport {
            store: "s3://b".into(),
            url: "s3://b/root".into(),
            form: Form::Short,
            writers: 4,
            rounds: 3,
            checked_at: Utc::now(),
            sleet_version: "x".into(),
            took_ms: 1,
            properties: failing
                .iter()
                .map(|p| PropertyResult {
                    property: *p,
                    outcome: Outcome::Fail,
                    needed: p.needed(),
                    detail: String::new(),
                    protects: String::new(),
                })
                .collect(),
            skew: None,
            left_behind: vec![],
        }
    }

    fn settings(trusted: &[(&str, &str)]) -> StoreSettings {
        StoreSettings {
            recheck_after: Duration::from_secs(3600),
            trusted: trusted
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn a_failed_needed_property_refuses_unless_trusted() {
        let none = settings(&[]);
        assert_eq!(judge(None, "s3://b", &none), Trust::Unchecked);
        assert_eq!(judge(Some(&report(&[])), "s3://b", &none), Trust::Safe);
        assert_eq!(
            judge(Some(&report(&[Property::Clock])), "s3://b", &none),
            Trust::Safe,
            "a skewed clock is the node's to fix, not the store's"
        );
        let failed = report(&[Property::AtomicUpdate]);
        let refused = judge(Some(&failed), "s3://b", &none);
        assert!(!refused.admits());
        assert!(refused.refusal("s3://b").unwrap().contains("atomic-update"));
        let trusted = judge(Some(&failed), "s3://b", &settings(&[("s3://b", "ours")]));
        assert!(trusted.admits());
        assert_eq!(
            trusted,
            Trust::Trusted {
                reason: "ours".into(),
                failed: vec![Property::AtomicUpdate]
            }
        );
    }

    #[test]
    fn a_report_expires() {
        let s = settings(&[]);
        let mut r = report(&[]);
        assert!(fresh(&r, Utc::now(), &s));
        r.checked_at = Utc::now() - chrono::TimeDelta::hours(2);
        assert!(!fresh(&r, Utc::now(), &s));
        r.checked_at = Utc::now() + chrono::TimeDelta::hours(2);
        assert!(
            !fresh(&r, Utc::now(), &s),
            "a report from the future is not trusted"
        );
        assert_eq!(record_name("s3://b"), "stores/s3%3A%2F%2Fb.json");
    }
}
