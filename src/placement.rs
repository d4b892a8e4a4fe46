//! Rendezvous placement: which live node owns which work. A frozen format.
//!
//! Every node ranks the candidates for a `(database, service)` pair (or a
//! `(database, mirror, target)` triple) by an FNV-1a 64 score of the key and
//! the node id, and the top of the ranking owns the work. Nodes that see the
//! same heartbeats agree without talking to each other, and adding or
//! removing a node moves only the work that node wins or held. The hash,
//! key encoding and tie-break are shared with sleet 0.1.0.

use crate::service::Service;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Above this many owners, ranking everyone and truncating is cheaper than
/// keeping a sorted top list while scanning.
const TOP_K_SCAN_MAX: usize = 8;

/// Separates the parts of a placement key.
const KEY_SEPARATOR: u8 = 0x00;

/// FNV-1a 64 continued from `state` over a sequence of byte strings, as
/// if concatenated.
fn fnv1a_from(state: u64, parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .flat_map(|part| part.iter())
        .fold(state, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(FNV_PRIME)
        })
}

/// The work a ranking is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementKey<'a> {
    /// A database's service: `database \0 service \0 node`.
    Service { database: &'a str, service: Service },
    /// One mirror target of a database: `database \0 mirror \0 target \0 node`.
    MirrorTarget { database: &'a str, target: &'a str },
}

impl PlacementKey<'_> {
    /// The hash state after the key and its trailing separator: every
    /// node's score continues from it, so ranking many nodes hashes the
    /// key once.
    fn key_state(&self) -> u64 {
        let sep: &[u8] = &[KEY_SEPARATOR];
        match *self {
            PlacementKey::Service { database, service } => fnv1a_from(
                FNV_OFFSET_BASIS,
                &[database.as_bytes(), sep, service.as_str().as_bytes(), sep],
            ),
            PlacementKey::MirrorTarget { database, target } => fnv1a_from(
                FNV_OFFSET_BASIS,
                &[
                    database.as_bytes(),
                    sep,
                    Service::Mirror.as_str().as_bytes(),
                    sep,
                    target.as_bytes(),
                    sep,
                ],
            ),
        }
    }

    /// The score of `node_id` for this key; higher ranks first.
    pub fn score(&self, node_id: &str) -> u64 {
        fnv1a_from(self.key_state(), &[node_id.as_bytes()])
    }

    /// Candidates ordered best first: score descending, then node id
    /// ascending (byte-wise) on a tie.
    pub fn rank<'n>(&self, candidates: impl IntoIterator<Item = &'n str>) -> Vec<&'n str> {
        let state = self.key_state();
        let mut scored: Vec<(u64, &str)> = candidates
            .into_iter()
            .map(|node| (fnv1a_from(state, &[node.as_bytes()]), node))
            .collect();
        scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.dedup_by(|a, b| a.1 == b.1);
        scored.into_iter().map(|(_, node)| node).collect()
    }

    /// The first `count` nodes of the ranking (all of them when fewer).
    /// Keeps only the best `count` while scanning, so picking one owner
    /// among many nodes neither sorts nor allocates per candidate.
    pub fn owners<'n>(
        &self,
        candidates: impl IntoIterator<Item = &'n str>,
        count: usize,
    ) -> Vec<&'n str> {
        if count > TOP_K_SCAN_MAX {
            let mut ranked = self.rank(candidates);
            ranked.truncate(count);
            return ranked;
        }
        let state = self.key_state();
        let better = |a: &(u64, &str), b: &(u64, &str)| a.0 > b.0 || (a.0 == b.0 && a.1 < b.1);
        let mut best: Vec<(u64, &'n str)> = Vec::new();
        for node in candidates {
            let entry = (fnv1a_from(state, &[node.as_bytes()]), node);
            if best.len() == count && !best.last().is_some_and(|worst| better(&entry, worst)) {
                continue;
            }
            let at = best.partition_point(|kept| better(kept, &entry));
            if best.get(at).is_some_and(|kept| kept.1 == node) {
                continue; // a duplicate candidate: same id, same score
            }
            best.insert(at, entry);
            best.truncate(count);
        }
        best.into_iter().map(|(_, node)| node).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(service: Service) -> PlacementKey<'static> {
        PlacementKey::Service {
            database: "s3://b/db",
            service,
        }
    }

    #[test]
    fn scores_are_frozen() {
        assert_eq!(pair(Service::Gc).score("sleet-1"), 0x0db7_953a_e9be_cf63);
        assert_eq!(
            pair(Service::CompactorCoordinator).score("sleet-1"),
            0xf9bc_77ef_1143_3076
        );
        assert_eq!(
            pair(Service::CompactionWorkers).score("sleet-2"),
            0xb6c6_79bd_aed4_4473
        );
    }

    #[test]
    fn target_scores_are_frozen() {
        let dr = PlacementKey::MirrorTarget {
            database: "s3://b/db",
            target: "dr",
        };
        let backup = PlacementKey::MirrorTarget {
            database: "s3://b/db",
            target: "backup",
        };
        assert_eq!(dr.score("sleet-1"), 0xa705_7dde_1da5_335e);
        assert_eq!(backup.score("sleet-2"), 0x0128_2b68_db71_bebf);
    }

    #[test]
    fn rankings_match_the_reference_model() {
        let nodes = ["n1", "n2", "n3"];
        let db1 = PlacementKey::Service {
            database: "memory:///dbs/db1",
            service: Service::Gc,
        };
        let db2 = PlacementKey::Service {
            database: "memory:///dbs/db2",
            service: Service::Gc,
        };
        assert_eq!(db1.rank(nodes), ["n3", "n2", "n1"]);
        assert_eq!(db2.rank(nodes), ["n1", "n2", "n3"]);
    }

    #[test]
    fn ranking_is_order_independent_and_service_dependent() {
        let nodes = ["a", "b", "c", "d", "e", "f"];
        let mut reversed = nodes;
        reversed.reverse();
        assert_eq!(
            pair(Service::Gc).rank(nodes),
            pair(Service::Gc).rank(reversed)
        );
        let differs = Service::ALL
            .iter()
            .any(|s| pair(*s).rank(nodes) != pair(Service::Gc).rank(nodes));
        assert!(differs, "services should not all share one ranking");
    }

    #[test]
    fn owners_are_distinct_and_capped() {
        let owners = pair(Service::CompactionWorkers).owners(["a", "b", "c", "d"], 10);
        assert_eq!(owners.len(), 4);
        let owners = pair(Service::CompactionWorkers).owners(["a", "a", "b"], 2);
        assert_eq!(owners.len(), 2);
        assert_ne!(owners[0], owners[1]);
        assert!(pair(Service::Gc).owners([], 1).is_empty());
    }
}
