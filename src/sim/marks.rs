//! Coverage marks only the simulated store can see (see
//! `model::coverage`): a compaction landing while another node's
//! coordinator takes the database over, and the database an object
//! belongs to.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use object_store::path::Path;

use crate::model::coverage::{self, Mark};

/// A compaction's output written this recently before another node's
/// coordinator first writes the manifest was still landing.
const LANDING: chrono::Duration = chrono::Duration::seconds(10);

/// The URL of the database an object of the simulated store belongs to
/// (`s3://sim-data/db003` for `sim-data/db003/wal/...`).
pub(super) fn database_of(location: &Path) -> String {
    let mut parts = location.parts();
    let bucket = parts.next().map(|p| p.as_ref().to_string());
    let name = parts.next().map(|p| p.as_ref().to_string());
    format!(
        "s3://{}/{}",
        bucket.unwrap_or_default(),
        name.unwrap_or_default()
    )
}

/// Per database: the node whose coordinator wrote its manifest last, and
/// when compaction output was last written.
#[derive(Debug, Default)]
pub(super) struct HandoverWatch {
    databases: BTreeMap<String, Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    coordinator: Option<String>,
    compacted_at: Option<DateTime<Utc>>,
}

impl HandoverWatch {
    /// Notes a write by `author` (`n1/coordinator`, `n2/workers`, ...).
    pub(super) fn wrote(&mut self, author: &str, location: &Path, at: DateTime<Utc>) {
        let Some((node, service)) = author.split_once('/') else {
            return;
        };
        let dir = location.parts().nth(2);
        let dir = dir.as_ref().map(|d| d.as_ref());
        let seen = self.databases.entry(database_of(location)).or_default();
        match (service, dir) {
            ("workers", Some("compacted")) => seen.compacted_at = Some(at),
            ("coordinator", Some("manifest")) => {
                let handed_over = seen.coordinator.as_deref().is_some_and(|c| c != node);
                let landing = seen.compacted_at.is_some_and(|c| at - c <= LANDING);
                if handed_over && landing {
                    coverage::hit(Mark::HandoverMidCompaction);
                }
                seen.coordinator = Some(node.to_string());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_coordinator_beside_landing_compaction_is_marked() {
        let counting = coverage::count();
        let mut watch = HandoverWatch::default();
        let t = DateTime::<Utc>::UNIX_EPOCH;
        let s = chrono::Duration::seconds;
        let manifest = Path::from("sim-data/db001/manifest/00000000000000000009.manifest");
        let sst = Path::from("sim-data/db001/compacted/01J.sst");
        watch.wrote("n1/coordinator", &manifest, t);
        watch.wrote("n2/workers", &sst, t + s(1));
        watch.wrote("n1/coordinator", &manifest, t + s(2));
        assert_eq!(
            counting.hits()[&Mark::HandoverMidCompaction],
            0,
            "same node"
        );
        watch.wrote("n3/coordinator", &manifest, t + s(30));
        assert_eq!(
            counting.hits()[&Mark::HandoverMidCompaction],
            0,
            "long landed"
        );
        watch.wrote("n2/workers", &sst, t + s(31));
        watch.wrote("n1/coordinator", &manifest, t + s(33));
        assert_eq!(counting.hits()[&Mark::HandoverMidCompaction], 1);
        assert_eq!(database_of(&sst), "s3://sim-data/db001");
    }
}
