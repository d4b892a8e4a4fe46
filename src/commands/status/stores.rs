//! The stores section of `sleet status`: each store's recorded check
//! (see `store_trust`), judged with the operator's `[stores.trusted]`.

use chrono::{DateTime, Utc};

use super::table::table;
use crate::fleet::root::{FleetRoot, FleetView};
use crate::fleet::store_trust::Trust;
use crate::model::response::{StatusResponse, StoreStatus};

/// The stores' recorded checks, judged with `[stores.trusted]`, and a
/// warning for each store nothing may write to or that is trusted
/// despite failing.
pub(super) async fn add(
    status: &mut StatusResponse,
    root: &FleetRoot,
    view: &FleetView,
    now: DateTime<Utc>,
) {
    let settings = view.fleet.stores.resolve();
    let reports = match crate::fleet::store_trust::list(root).await {
        Ok(reports) => reports,
        Err(e) => {
            status.warnings.push(format!("store checks unread: {e}"));
            return;
        }
    };
    for report in reports {
        let trust = crate::fleet::store_trust::judge(Some(&report), &report.store, &settings);
        let (label, trusted_because, failed) = match &trust {
            Trust::Safe => ("safe", None, vec![]),
            Trust::Trusted { reason, failed } => ("trusted", Some(reason.clone()), failed.clone()),
            Trust::Unsafe { failed } => ("unsafe", None, failed.clone()),
            Trust::Unchecked => ("unchecked", None, vec![]),
        };
        match &trust {
            Trust::Unsafe { .. } => status.warnings.extend(trust.refusal(&report.store)),
            Trust::Trusted { reason, failed } if !failed.is_empty() => {
                status.warnings.push(format!(
                    "store {} fails {} but is trusted in sleet.toml: {reason}",
                    report.store,
                    crate::fleet::store_trust::names(failed)
                ))
            }
            _ => {}
        }
        status.stores.push(StoreStatus {
            store: report.store.clone(),
            trust: label.to_string(),
            trusted_because,
            failed: failed
                .iter()
                .map(|p| crate::store::check::kebab(*p))
                .collect(),
            checked_at: report
                .checked_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            expired: !crate::fleet::store_trust::fresh(&report, now, &settings),
            sleet_version: report.sleet_version.clone(),
            clock_skew_seconds: report.skew.map(|s| s.seconds),
        });
    }
    status.warnings.sort();
}

/// The `STORE TRUST FAILED CHECKED SKEW` table.
pub(super) fn render(stores: &[StoreStatus]) -> String {
    let rows = stores.iter().map(|s| {
        vec![
            s.store.clone(),
            s.trust.clone(),
            if s.failed.is_empty() {
                "-".into()
            } else {
                s.failed.join(",")
            },
            format!(
                "{}{}",
                s.checked_at,
                if s.expired { " (expired)" } else { "" }
            ),
            s.clock_skew_seconds
                .map_or("-".into(), |skew| format!("{skew:+.1}s")),
        ]
    });
    table(&["STORE", "TRUST", "FAILED", "CHECKED", "SKEW"], rows)
}
