//! Proving an object store before the fleet trusts it.
//!
//! Everything a brief double run leaves safe rests on two properties of a
//! store: a create-only PUT (`If-None-Match: *`) and a compare-and-swap
//! (`If-Match`) that stay atomic while writers race. SlateDB's manifests,
//! `.compactions` and fencing, and sleet's registrations, epochs records
//! and mirror manifests all depend on them, and S3-compatible stores have
//! shipped both wrong (see `docs/operations.md`, "Choosing an object
//! store"). [`run`] races real writers under a scratch prefix, checks the
//! rest of what sleet relies on (read and list after write, ETags, copies,
//! multipart uploads, the store's clock), cleans up, and returns a
//! [`StoreReport`] whose [`StoreReport::unsafe_properties`] say what would
//! break.
//!
//! `probes` makes the requests; `judge` turns what came back into
//! outcomes, as pure functions.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use object_store::ObjectStore;
use object_store::path::Path;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod judge;
mod probes;

pub use crate::store::store_id;

pub use judge::{ClockSample, ClockSkew, clock_skew, skew_bound};

/// Where the scratch objects of a check go, under the URL checked.
pub const SCRATCH_DIR: &str = ".sleet-store-check";

/// How much of the check to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Form {
    /// Every property: what `sleet store check` runs.
    Full,
    /// The atomicity properties, ETags and the clock, with small races:
    /// what a node runs once per store before it writes there.
    Short,
}

/// What to run, and how hard to race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOptions {
    pub form: Form,
    /// Writers racing for one key in each round.
    pub writers: usize,
    /// Rounds of each race.
    pub rounds: usize,
    /// The largest clock skew the fleet tolerates (see [`skew_bound`]).
    pub skew_bound: Duration,
}

impl CheckOptions {
    /// `sleet store check`'s defaults: eight writers, five rounds.
    pub fn full() -> CheckOptions {
        CheckOptions {
            form: Form::Full,
            writers: 8,
            rounds: 5,
            skew_bound: judge::DEFAULT_SKEW_BOUND,
        }
    }

    /// A node's check: four writers, three rounds, no multipart upload.
    pub fn short(skew_bound: Duration) -> CheckOptions {
        CheckOptions {
            form: Form::Short,
            writers: 4,
            rounds: 3,
            skew_bound,
        }
    }
}

/// One property a store is checked for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Property {
    AtomicCreate,
    AtomicUpdate,
    CreateOverExistingRefused,
    UpdateOfMissingRefused,
    ReadAfterWrite,
    ListAfterWrite,
    Etag,
    Copy,
    ConditionalCopy,
    Multipart,
    Clock,
}

impl Property {
    /// Whether a failure makes the store unsafe for the fleet: the exit
    /// code of `sleet store check`, and what a node refuses to write to.
    pub fn needed(self) -> bool {
        !matches!(
            self,
            Property::Copy | Property::ConditionalCopy | Property::Clock
        )
    }

    /// What a failure would break.
    pub fn protects(self) -> &'static str {
        match self {
            Property::AtomicCreate | Property::CreateOverExistingRefused => {
                "SlateDB's manifests, .compactions and writer fencing; sleet's registrations, \
                 compactor epochs and mirror manifests: two writers could both win"
            }
            Property::AtomicUpdate | Property::UpdateOfMissingRefused => {
                "SlateDB's GC boundary files and every compare-and-swap: two updaters could \
                 both win"
            }
            Property::ReadAfterWrite => {
                "every read-modify-write: a node could act on a state it already replaced"
            }
            Property::ListAfterWrite => {
                "heartbeats, registrations and GC: a node could miss a live peer or an object"
            }
            Property::Etag => {
                "compare-and-swap: SlateDB passes back the ETag a read returned (quoting \
                 mismatches broke it on DigitalOcean Spaces, slatedb/slatedb#1818)"
            }
            Property::Copy => {
                "server-side mirror copies (without them, mirrors stream through the node)"
            }
            Property::ConditionalCopy => {
                "nothing today: sleet never relies on a conditional copy; shown so no one does"
            }
            Property::Multipart => "mirror copies and SlateDB writes of large objects",
            Property::Clock => {
                "GC's min_age and heartbeat liveness, which compare this machine's clock with \
                 the store's LastModified"
            }
        }
    }
}

/// How a property fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Pass,
    Fail,
    /// The store does not offer the operation, and nothing sleet runs
    /// there needs it (for example `If-Match` on `file://`).
    NotApplicable,
    /// Not run in this form of the check.
    Skipped,
    /// Errors or lost replies left it unproven either way: a node checks
    /// again rather than trust or refuse the store.
    Inconclusive,
}

/// One property's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PropertyResult {
    pub property: Property,
    pub outcome: Outcome,
    /// Whether a failure makes the store unsafe.
    pub needed: bool,
    /// What was seen: counts, values, the store's error.
    pub detail: String,
    /// What a failure would break.
    pub protects: String,
}

impl PropertyResult {
    fn new(property: Property, outcome: Outcome, detail: impl Into<String>) -> PropertyResult {
        PropertyResult {
            property,
            outcome,
            needed: property.needed(),
            detail: detail.into(),
            protects: property.protects().to_string(),
        }
    }

    /// A needed property that failed.
    pub fn is_unsafe(&self) -> bool {
        self.needed && self.outcome == Outcome::Fail
    }

    /// A needed property neither proven nor disproven.
    pub fn is_unproven(&self) -> bool {
        self.needed && self.outcome == Outcome::Inconclusive
    }
}

/// The result of checking one store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoreReport {
    /// The store: `scheme://bucket` (see [`crate::store::store_id`]).
    pub store: String,
    /// The URL whose scratch prefix the check wrote under.
    pub url: String,
    pub form: Form,
    pub writers: usize,
    pub rounds: usize,
    pub checked_at: DateTime<Utc>,
    pub sleet_version: String,
    pub took_ms: u64,
    pub properties: Vec<PropertyResult>,
    /// The store's clock minus this machine's, if it could be measured.
    pub skew: Option<ClockSkew>,
    /// Scratch objects the check could not delete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_behind: Vec<String>,
}

impl StoreReport {
    /// The needed properties that failed: non-empty means unsafe.
    pub fn unsafe_properties(&self) -> Vec<Property> {
        self.properties_where(PropertyResult::is_unsafe)
    }

    /// The needed properties left unproven: the store is not yet known
    /// safe.
    pub fn unproven_properties(&self) -> Vec<Property> {
        self.properties_where(PropertyResult::is_unproven)
    }

    fn properties_where(&self, holds: fn(&PropertyResult) -> bool) -> Vec<Property> {
        self.properties
            .iter()
            .filter(|p| holds(p))
            .map(|p| p.property)
            .collect()
    }

    /// Whether every needed property was proven one way or the other.
    pub fn conclusive(&self) -> bool {
        !self.properties.iter().any(PropertyResult::is_unproven)
    }

    /// Whether every needed property held.
    pub fn safe(&self) -> bool {
        self.properties
            .iter()
            .all(|p| !p.is_unsafe() && !p.is_unproven())
    }

    /// The result for `property`, if it was checked.
    pub fn property(&self, property: Property) -> Option<&PropertyResult> {
        self.properties.iter().find(|p| p.property == property)
    }
}

/// Runs the check under a fresh scratch prefix of `base` (the path of
/// `url` in `store`), and deletes what it wrote.
pub async fn run(
    store: Arc<dyn ObjectStore>,
    url: &str,
    base: &Path,
    options: CheckOptions,
) -> StoreReport {
    let started = std::time::Instant::now();
    let scratch = scratch_prefix(base);
    let probes = probes::Probes {
        store,
        scratch: scratch.clone(),
        options,
    };
    let (properties, skew) = probes.all().await;
    let left_behind = probes.clean_up().await;
    StoreReport {
        store: store_id(url),
        url: url.to_string(),
        form: options.form,
        writers: options.writers,
        rounds: options.rounds,
        checked_at: Utc::now(),
        sleet_version: env!("CARGO_PKG_VERSION").to_string(),
        took_ms: started.elapsed().as_millis() as u64,
        properties,
        skew,
        left_behind,
    }
}

/// `<base>/.sleet-store-check/<time>-<random>`: unique per run, so racing
/// checks by several nodes never share a key.
fn scratch_prefix(base: &Path) -> Path {
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).expect("the OS supplies random bytes");
    let nonce: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("{}-{nonce}", Utc::now().format("%Y%m%dT%H%M%S"));
    base.clone().join(SCRATCH_DIR).join(name)
}

/// The report as text: a line per property, then what fails.
pub fn render_text(report: &StoreReport) -> String {
    let mut out = format!(
        "store {} (checked under {}, {} writers x {} rounds, {} ms)\n",
        report.store, report.url, report.writers, report.rounds, report.took_ms
    );
    for p in &report.properties {
        let mark = match p.outcome {
            Outcome::Pass => "pass",
            Outcome::Fail if p.needed => "FAIL",
            Outcome::Fail => "warn",
            Outcome::NotApplicable => "n/a ",
            Outcome::Skipped => "skip",
            Outcome::Inconclusive => "????",
        };
        out.push_str(&format!(
            "  {mark}  {:<30} {}\n",
            kebab(p.property),
            p.detail
        ));
    }
    for p in &report.properties {
        if p.is_unproven() {
            out.push_str(&format!(
                "error: {} could not be proven either way; run the check again\n",
                kebab(p.property)
            ));
        }
        if p.outcome == Outcome::Fail {
            out.push_str(&format!(
                "{}: {} failed; it protects {}\n",
                if p.needed { "error" } else { "warning" },
                kebab(p.property),
                p.protects
            ));
        }
    }
    for key in &report.left_behind {
        out.push_str(&format!("warning: could not delete scratch object {key}\n"));
    }
    let verdict = if report.safe() {
        "safe for a sleet fleet"
    } else if report.unsafe_properties().is_empty() {
        "not proven safe for a sleet fleet"
    } else {
        "NOT safe for a sleet fleet"
    };
    out.push_str(&format!("{}: {verdict}\n", report.store));
    out
}

/// A property's name as JSON spells it.
pub fn kebab(property: Property) -> String {
    serde_json::to_value(property)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_passes_and_cleans_up() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let report = run(
            store.clone(),
            "memory:///base",
            &Path::from("base"),
            CheckOptions::full(),
        )
        .await;
        assert!(report.safe(), "{}", render_text(&report));
        use futures::TryStreamExt;
        let left: Vec<_> = store.list(None).try_collect().await.unwrap();
        assert!(left.is_empty(), "{left:?}");
    }

    /// Every request of a check, failed in turn (one run each, before
    /// the store sees it and after it applied it): a good store is never
    /// reported failing a property, only unproven. A node cut off or
    /// losing a reply mid-check once branded a good store unsafe for a
    /// day (the S3 chaos suite's mirror that never caught up).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_single_failed_request_fails_a_good_store() {
        use crate::testing::{Faults, FaultyStore};
        let check = |faults: Arc<Faults>| async move {
            let inner: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
            let store: Arc<dyn ObjectStore> = Arc::new(FaultyStore::new(inner, faults));
            let options = CheckOptions::short(judge::DEFAULT_SKEW_BOUND);
            run(store, "memory:///base", &Path::from("base"), options).await
        };
        let clean = Faults::new();
        let report = check(clean.clone()).await;
        assert!(report.safe(), "{}", render_text(&report));
        let requests = clean.requests();
        let runs = (0..requests)
            .flat_map(|n| [(n, false), (n, true)])
            .map(|(n, applied)| {
                let faults = Faults::new();
                faults.fail_one(n, applied);
                tokio::spawn(async move { (n, applied, check(faults.clone()).await, faults) })
            });
        let mut unproven = 0;
        for run in futures::future::join_all(runs).await {
            let (n, applied, report, faults) = run.unwrap();
            let failed: Vec<_> = report
                .properties
                .iter()
                .filter(|p| p.outcome == Outcome::Fail)
                .collect();
            assert!(
                failed.is_empty(),
                "request {n} failed (applied: {applied}): {failed:#?}"
            );
            assert_eq!(faults.injected(), 1, "request {n} was made");
            unproven += usize::from(!report.safe());
        }
        eprintln!(
            "{requests} requests; {unproven} of {} runs unproven",
            2 * requests
        );
    }
}
