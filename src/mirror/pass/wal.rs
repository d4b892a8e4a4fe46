//! The WAL a pass brings: its head's window and the run the writer
//! published after it (`mirror::wal_run`), listed at the source once,
//! probed at the destination by one listing, and dated there for restores
//! by time (`mirror::wal_times`).

use std::collections::BTreeSet;

use slatedb::VersionedManifest;

use super::{Closure, MirrorPair};
use crate::mirror::MirrorError;
use crate::mirror::io::list_wal_after;
use crate::mirror::layout::{parse_wal_file, wal_name};
use crate::mirror::wal_run::{replay_of, run_end};
use crate::mirror::wal_times::WalRecord;
use crate::store::StoreRoot;

impl Closure {
    /// Whether `name` is a WAL object after the head's own window.
    pub(super) fn is_run(&self, name: &str) -> bool {
        let window_end = replay_of(&self.head).window_end();
        name.strip_prefix("wal/")
            .and_then(parse_wal_file)
            .is_some_and(|id| id > window_end)
    }

    /// The newest WAL id the pass brings: its run's end, or the head's
    /// window end.
    pub(super) fn wal_end(&self) -> u64 {
        let window_end = replay_of(&self.head).window_end();
        self.wal.last().map_or(window_end, |r| r.id.max(window_end))
    }
}

impl MirrorPair {
    /// The source's WAL after `head`'s replay point, by one listing, up to
    /// the first gap: the head's window and the run after it.
    pub(super) async fn source_wal(
        &self,
        head: &VersionedManifest,
    ) -> Result<Vec<WalRecord>, MirrorError> {
        let after = head.replay_after_wal_id();
        let listed = list_wal_after(&self.source.root(), after).await?;
        let present: BTreeSet<u64> = listed.keys().copied().collect();
        let end = run_end(&present, after);
        Ok(listed
            .range(after.saturating_add(1)..)
            .take_while(|(id, _)| **id <= end)
            .map(|(&id, meta)| WalRecord {
                id,
                written: meta.last_modified,
                size: meta.size,
            })
            .collect())
    }

    /// Records when the source wrote the WAL objects this pass copied, for
    /// restores by time; a failed write only costs them precision.
    pub(super) async fn record_wal_times(&self, closure: &Closure, work: &[String]) {
        let copied: BTreeSet<&str> = work.iter().map(String::as_str).collect();
        let records: Vec<WalRecord> = closure
            .wal
            .iter()
            .filter(|r| copied.contains(wal_name(r.id).as_str()))
            .copied()
            .collect();
        if let Err(e) = crate::mirror::wal_times::record(&self.destination.root(), records).await {
            tracing::warn!(target = %self.target, "could not record WAL times: {e}");
        }
    }
}

/// Which of the WAL objects `names` the destination lacks, by one listing
/// from the lowest (a pass may bring a long run: one HEAD each would cost
/// more than the copy).
pub(super) async fn missing_wal(
    destination: &StoreRoot,
    names: Vec<String>,
) -> Result<Vec<String>, MirrorError> {
    let ids = || {
        names
            .iter()
            .filter_map(|n| n.strip_prefix("wal/").and_then(parse_wal_file))
    };
    let Some(lowest) = ids().min() else {
        return Ok(Vec::new());
    };
    let there = list_wal_after(destination, lowest.saturating_sub(1)).await?;
    Ok(names
        .into_iter()
        .filter(|n| {
            n.strip_prefix("wal/")
                .and_then(parse_wal_file)
                .is_none_or(|id| !there.contains_key(&id))
        })
        .collect())
}
