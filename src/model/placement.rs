//! Rendezvous placement: which live node owns which work. A frozen format.
//!
//! Every node ranks the candidates for a `(database, service)` pair (or a
//! `(database, mirror, target)` triple) by an FNV-1a 64 score of the key and
//! the node id, and the top of the ranking owns the work. Nodes that see the
//! same heartbeats agree without talking to each other, and adding or
//! removing a node moves only the work that node wins or held. The hash,
//! key encoding and tie-break are shared with sleet 0.1.0.
//!
//! FNV-1a mixes the last bytes of its input poorly, so node ids that differ
//! only at the end (`node-01`, `node-02`, ...) get very uneven shares under
//! the 0.1.0 hash. `[node] placement_hash = "fnv1a-mix"` runs each score
//! through a 64-bit finalizer: a bijection, so ranking keeps its minimal
//! movement, with an even spread. Every node of a fleet must use the same
//! hash, so only fleets without 0.1.0 nodes can switch.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::service::Service;

/// How node scores are computed; every node of a fleet must agree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PlacementHash {
    /// FNV-1a 64, as sleet 0.1.0 places work (the default).
    #[default]
    #[serde(rename = "fnv1a")]
    Fnv1a,
    /// FNV-1a 64 then the MurmurHash3 64-bit finalizer: an even spread
    /// over similar node ids. Not understood by sleet 0.1.0 nodes.
    #[serde(rename = "fnv1a-mix")]
    Fnv1aMix,
}

impl PlacementHash {
    fn finish(self, score: u64) -> u64 {
        match self {
            PlacementHash::Fnv1a => score,
            PlacementHash::Fnv1aMix => {
                let mut k = score;
                k ^= k >> 33;
                k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
                k ^= k >> 33;
                k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
                k ^ (k >> 33)
            }
        }
    }
}

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Above this many owners, ranking everyone and truncating is cheaper than
/// keeping a sorted top list while scanning.
const TOP_K_SCAN_MAX: usize = 8;

/// Separates the parts of a placement key.
const KEY_SEPARATOR: u8 = 0x00;

/// FNV-1a 64 of `bytes`: the 0.1.0 hash, also a stable way to derive a
/// seed from a name.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(FNV_OFFSET_BASIS, &[bytes])
}

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

    /// The 0.1.0 score of `node_id` for this key; higher ranks first.
    pub fn score(&self, node_id: &str) -> u64 {
        fnv1a_from(self.key_state(), &[node_id.as_bytes()])
    }

    /// Candidates ordered best first by the 0.1.0 hash.
    pub fn rank<'n>(&self, candidates: impl IntoIterator<Item = &'n str>) -> Vec<&'n str> {
        self.rank_by(PlacementHash::Fnv1a, candidates)
    }

    /// The first `count` nodes of the 0.1.0 ranking.
    pub fn owners<'n>(
        &self,
        candidates: impl IntoIterator<Item = &'n str>,
        count: usize,
    ) -> Vec<&'n str> {
        self.owners_by(PlacementHash::Fnv1a, candidates, count)
    }

    /// Candidates ordered best first: score descending, then node id
    /// ascending (byte-wise) on a tie.
    pub fn rank_by<'n>(
        &self,
        hash: PlacementHash,
        candidates: impl IntoIterator<Item = &'n str>,
    ) -> Vec<&'n str> {
        let state = self.key_state();
        let mut scored: Vec<(u64, &str)> = candidates
            .into_iter()
            .map(|node| (hash.finish(fnv1a_from(state, &[node.as_bytes()])), node))
            .collect();
        scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.dedup_by(|a, b| a.1 == b.1);
        scored.into_iter().map(|(_, node)| node).collect()
    }

    /// The first `count` nodes of the ranking (all of them when fewer).
    /// Keeps only the best `count` while scanning, so picking one owner
    /// among many nodes neither sorts nor allocates per candidate.
    pub fn owners_by<'n>(
        &self,
        hash: PlacementHash,
        candidates: impl IntoIterator<Item = &'n str>,
        count: usize,
    ) -> Vec<&'n str> {
        if count > TOP_K_SCAN_MAX {
            let mut ranked = self.rank_by(hash, candidates);
            ranked.truncate(count);
            return ranked;
        }
        let state = self.key_state();
        let better = |a: &(u64, &str), b: &(u64, &str)| a.0 > b.0 || (a.0 == b.0 && a.1 < b.1);
        let mut best: Vec<(u64, &'n str)> = Vec::new();
        for node in candidates {
            let entry = (hash.finish(fnv1a_from(state, &[node.as_bytes()])), node);
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

    #[test]
    fn the_mixed_hash_spreads_similar_node_ids_evenly() {
        let nodes: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        let share = |hash: PlacementHash| {
            let mut counts = std::collections::BTreeMap::<&str, usize>::new();
            for d in 0..2000 {
                let database = format!("s3://bucket/tenant-{d:05}");
                let key = PlacementKey::Service {
                    database: &database,
                    service: Service::Gc,
                };
                let owner = key.owners_by(hash, nodes.iter().map(String::as_str), 1)[0];
                *counts.entry(owner).or_default() += 1;
            }
            let (min, max) = (
                counts.values().min().copied(),
                counts.values().max().copied(),
            );
            (counts.len(), min.unwrap_or(0), max.unwrap_or(0))
        };
        let (_, _, skewed_max) = share(PlacementHash::Fnv1a);
        assert!(
            skewed_max > 400,
            "0.1.0's hash gives some node 2x its share"
        );
        let (nodes_used, min, max) = share(PlacementHash::Fnv1aMix);
        assert_eq!(nodes_used, 10);
        assert!(min > 150 && max < 250, "even: {min}..{max} around 200");
    }
}
