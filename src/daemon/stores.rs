//! The stores a node writes to, and whether it may: every task writes to
//! one store (a database's, or a mirror destination's), and the fleet
//! root is written by the node itself. Each store is checked once (or
//! its recorded check reused, see `store_trust`) before anything writes
//! there; a store that fails gets no task, and the others keep working.
//!
//! [`admit`] is the pure decision; [`StoreGate`] runs the checks in the
//! background so a slow store never holds the tick.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use object_store::ObjectStore;
use object_store::path::Path;
use tokio::task::JoinSet;
use tracing::{info, warn};

use super::options::DatabaseOpener;
use super::owned::{TaskKey, TaskSpec, TaskWork};
use crate::config::StoreSettings;
use crate::fleet::root::FleetRoot;
use crate::fleet::store_trust::{self, Trust};
use crate::store::check::{StoreReport, store_id};

/// The URL a task writes under: its mirror destination, or its database.
pub fn written_url<'a>(key: &'a TaskKey, spec: &'a TaskSpec) -> &'a str {
    match &spec.work {
        TaskWork::Mirror(mirror) => &mirror.destination,
        TaskWork::Service(_) => &key.database,
    }
}

/// Owned tasks split by the trust of the store each writes to.
#[derive(Debug, Default, PartialEq)]
pub struct Admitted {
    /// Tasks whose store is safe or trusted.
    pub run: BTreeMap<TaskKey, TaskSpec>,
    /// Tasks whose store failed its check, with why.
    pub refused: BTreeMap<TaskKey, String>,
    /// Tasks whose store is not checked yet.
    pub waiting: usize,
}

/// A trust as the metrics label it.
pub fn trust_label(trust: &Trust) -> &'static str {
    match trust {
        Trust::Safe => "safe",
        Trust::Trusted { .. } => "trusted",
        Trust::Unsafe { .. } => "unsafe",
        Trust::Unchecked => "unchecked",
    }
}

/// Splits `owned` by `trust` (store id to its trust).
pub fn admit(owned: BTreeMap<TaskKey, TaskSpec>, mut trust: impl FnMut(&str) -> Trust) -> Admitted {
    let mut admitted = Admitted::default();
    for (key, spec) in owned {
        let store = store_id(written_url(&key, &spec));
        match trust(&store) {
            t if t.admits() => {
                admitted.run.insert(key, spec);
            }
            Trust::Unchecked => admitted.waiting += 1,
            refused => {
                let why = refused.refusal(&store).unwrap_or_default();
                admitted.refused.insert(key, why);
            }
        }
    }
    admitted
}

/// The latest report per store, and the checks under way.
pub(super) struct StoreGate {
    root: FleetRoot,
    /// Opens a store as the node's tasks will (tests point it at theirs).
    opener: DatabaseOpener,
    reports: BTreeMap<String, StoreReport>,
    checks: JoinSet<(String, Option<StoreReport>)>,
    checking: BTreeSet<String>,
    /// The last trust logged per store, so a change is logged once.
    logged: BTreeMap<String, Trust>,
    /// The stores of the last [`StoreGate::refresh`], each with one URL
    /// in it, for [`StoreGate::refresh_again`].
    refreshed: BTreeMap<String, String>,
}

/// Checks under way at once; more stores wait for the next tick.
const MAX_CONCURRENT_CHECKS: usize = 4;

impl StoreGate {
    pub fn new(root: FleetRoot, opener: DatabaseOpener) -> StoreGate {
        StoreGate {
            root,
            opener,
            reports: BTreeMap::new(),
            checks: JoinSet::new(),
            checking: BTreeSet::new(),
            logged: BTreeMap::new(),
            refreshed: BTreeMap::new(),
        }
    }

    /// The fleet root's store id.
    pub fn root_store(&self) -> String {
        store_id(self.root.url())
    }

    /// Collects finished checks, then starts one for each store of
    /// `urls` whose report is missing or stale (at most a few at once).
    pub fn refresh<'a>(
        &mut self,
        urls: impl IntoIterator<Item = &'a str>,
        settings: &StoreSettings,
        skew_bound: Duration,
    ) {
        while let Some(done) = self.checks.try_join_next() {
            if let Ok((store, report)) = done {
                self.collect(store, report);
            }
        }
        let mut wanted: BTreeMap<String, &str> = BTreeMap::new();
        wanted.insert(self.root_store(), self.root.url());
        for url in urls {
            wanted.entry(store_id(url)).or_insert(url);
        }
        self.refreshed = wanted
            .iter()
            .map(|(store, url)| (store.clone(), url.to_string()))
            .collect();
        let now = Utc::now();
        for (store, url) in wanted {
            let stale = self
                .reports
                .get(&store)
                .is_none_or(|r| !store_trust::fresh(r, now, settings));
            if !stale
                || self.checking.contains(&store)
                || self.checking.len() >= MAX_CONCURRENT_CHECKS
            {
                continue;
            }
            let Some((target, base)) = self.open(&store, url) else {
                continue;
            };
            self.checking.insert(store.clone());
            let (root, url, settings) = (self.root.clone(), url.to_string(), settings.clone());
            self.checks.spawn(async move {
                let checked =
                    store_trust::ensure(&root, &url, target, &base, &settings, skew_bound).await;
                match checked {
                    Ok((report, ran)) => {
                        if ran {
                            info!(store = %report.store, safe = report.safe(), took_ms = report.took_ms, "checked a store");
                        }
                        (store, Some(report))
                    }
                    Err(e) => {
                        warn!(%store, "could not check the store: {e}; trying again next tick");
                        (store, None)
                    }
                }
            });
        }
    }

    /// [`StoreGate::refresh`] with the stores of the last one: collects
    /// finished checks and renews stale reports without walking every
    /// task's URL again.
    pub fn refresh_again(&mut self, settings: &StoreSettings, skew_bound: Duration) {
        let stores = std::mem::take(&mut self.refreshed);
        self.refresh(stores.values().map(String::as_str), settings, skew_bound);
    }

    /// Each store's trust now, in store order: what admission depends on.
    pub fn trusts(&mut self, settings: &StoreSettings) -> Vec<(String, Trust)> {
        let stores: Vec<String> = self.refreshed.keys().cloned().collect();
        stores
            .into_iter()
            .map(|store| {
                let trust = self.trust(&store, settings);
                (store, trust)
            })
            .collect()
    }

    /// Takes a finished check's report. A check that could not reach the
    /// store, or proved nothing either way, does not replace a conclusive
    /// report in hand: a renewal that meets a bad moment keeps the tasks
    /// running on the old verdict (the stale report is checked again at
    /// the next tick) rather than stopping them.
    fn collect(&mut self, store: String, report: Option<StoreReport>) {
        self.checking.remove(&store);
        let Some(report) = report else { return };
        let conclusive = report.conclusive();
        let held = self
            .reports
            .get(&store)
            .is_some_and(StoreReport::conclusive);
        if conclusive || !held {
            self.reports.insert(store, report);
        }
    }

    /// The store at `url`, and the URL's path in it, opened as the tasks
    /// that write there open it; the root's is the root's own client.
    fn open(&self, store: &str, url: &str) -> Option<(Arc<dyn ObjectStore>, Path)> {
        if *store == self.root_store() && url == self.root.url() {
            return Some((self.root.store().clone(), self.root.prefix().clone()));
        }
        match (self.opener)(url) {
            Ok(handle) => Some((handle.store().clone(), handle.path().clone())),
            Err(e) => {
                warn!(%store, "cannot open {url} to check its store: {e}");
                None
            }
        }
    }

    /// Waits (at most `limit`) for the checks under way, collecting them.
    pub async fn settle(&mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            while let Some(done) = self.checks.join_next().await {
                if let Ok((store, report)) = done {
                    self.collect(store, report);
                }
            }
        })
        .await;
    }

    /// What the fleet may do with `store`, logged when it changes.
    pub fn trust(&mut self, store: &str, settings: &StoreSettings) -> Trust {
        let trust = store_trust::judge(self.reports.get(store), store, settings);
        if self.logged.get(store) != Some(&trust) {
            match &trust {
                Trust::Unsafe { .. } => {
                    tracing::error!("{}", trust.refusal(store).unwrap_or_default())
                }
                Trust::Trusted { reason, failed } if !failed.is_empty() => warn!(
                    "store {store} fails {} but is trusted in sleet.toml: {reason}",
                    store_trust::names(failed)
                ),
                _ => {}
            }
            self.logged.insert(store.to_string(), trust.clone());
        }
        trust
    }

    /// Each store with a report in hand, its trust and clock skew (for
    /// metrics).
    pub fn summary(&mut self, settings: &StoreSettings) -> Vec<(String, Trust, Option<f64>)> {
        let stores: Vec<(String, Option<f64>)> = self
            .reports
            .values()
            .map(|r| (r.store.clone(), r.skew.map(|s| s.seconds)))
            .collect();
        stores
            .into_iter()
            .map(|(store, skew)| {
                let trust = self.trust(&store, settings);
                (store, trust, skew)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::RUNNABLE_SERVICES;

    #[test]
    fn tasks_run_only_where_their_store_is_trusted() {
        let view = super::super::owned::tests::view(&[
            (
                "s3://good/a",
                "[mirror.targets.dr]\nurl = \"s3://bad/copy\"",
            ),
            ("s3://bad/b", ""),
            ("s3://new/c", ""),
        ]);
        let owned =
            super::super::owned::owned_tasks("me", &RUNNABLE_SERVICES, &BTreeMap::new(), &view);
        let per_database = owned.keys().filter(|k| k.database == "s3://new/c").count();
        let admitted = admit(owned, |store| match store {
            "s3://good" => Trust::Safe,
            "s3://bad" => Trust::Unsafe {
                failed: vec![crate::store::check::Property::AtomicCreate],
            },
            _ => Trust::Unchecked,
        });
        assert!(
            admitted
                .run
                .keys()
                .all(|k| k.database == "s3://good/a" && k.target.is_none())
        );
        assert_eq!(admitted.run.len(), per_database);
        assert_eq!(admitted.waiting, per_database);
        assert_eq!(
            admitted.refused.len(),
            per_database + 1,
            "the bad store's database and the mirror into it"
        );
        assert!(
            admitted
                .refused
                .values()
                .all(|why| why.contains("s3://bad fails atomic-create"))
        );
    }
}
