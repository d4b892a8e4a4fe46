//! Compactors outside the fleet: find them before fencing them, and stand
//! down.
//!
//! SlateDB's default `Settings` run a compactor inside every writer. A
//! coordinator started anywhere else takes a newer compactor epoch, which
//! fences the writer's compactor, and SlateDB then closes the whole writer.
//! So before the fleet starts a coordinator (or workers) for a database it
//! asks who holds the database's compactor epoch:
//!
//! - nobody (epoch 0), or an epoch the fleet recorded when one of its own
//!   coordinators set out to take it: the fleet compacts, as before;
//! - a compactor outside the fleet (an epoch no node recorded): the fleet
//!   stands down, and looks again every `recheck`. It takes over only on
//!   proof that the outside compactor is gone: its writer was replaced by
//!   one that took no compactor epoch (the writer epoch moved on while the
//!   compactor epoch stood still), or it left a backlog of L0 SSTs
//!   untouched for `takeover_after`.
//!
//! [`judge`] is the decision, a pure function of what one look at the
//! database saw and what an earlier look recorded; [`records`] keeps the
//! fleet's epochs and sightings under the fleet root, and [`probe`] reads
//! the database. [`handover`] keeps two fleet coordinators from running
//! at once when a database moves between nodes.

pub mod claim;
pub mod handover;
pub mod probe;
pub mod records;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use object_store::ObjectStore;
use object_store::path::Path;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use slatedb::admin::Admin;

use self::probe::ProbeError;
use self::records::EpochRecords;

/// How a node treats compactors outside the fleet (`[outside-compactor]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// An outside compactor that wrote `.compactions` this recently is
    /// running.
    pub active_within: Duration,
    /// L0 SSTs that count as a backlog an outside compactor left alone;
    /// 0 never takes over on a backlog.
    pub takeover_backlog: u32,
    /// How long a backlog may stand untouched before the outside
    /// compactor counts as gone.
    pub takeover_after: Duration,
}

/// What one look at a database saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub writer_epoch: u64,
    pub compactor_epoch: u64,
    /// L0 SSTs waiting to be compacted, over every tree.
    pub l0_ssts: usize,
    /// Whether a fleet node recorded taking `compactor_epoch`.
    pub fleet_took_epoch: bool,
    /// The newest `.compactions` write: the epoch it carries and when.
    pub last_compactions_write: Option<(u64, DateTime<Utc>)>,
    pub now: DateTime<Utc>,
}

/// What the fleet knows of an outside compactor, kept under the fleet root
/// between looks (and shown by `sleet status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Sighting {
    /// The outside compactor's epoch.
    pub compactor_epoch: u64,
    /// The writer epoch when the outside compactor was first seen: a newer
    /// writer that took no compactor epoch shows its compactor is gone.
    pub writer_epoch: u64,
    /// When the fleet first stood down for this epoch.
    pub first_seen: DateTime<Utc>,
    /// Since when L0 has held a backlog the outside compactor left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog_since: Option<DateTime<Utc>>,
    /// Why the fleet stands down: `active` (it wrote `.compactions`
    /// recently) or `presumed` (quiet, but not proven gone).
    pub evidence: Evidence,
    /// When the outside compactor last wrote `.compactions`, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_write: Option<DateTime<Utc>>,
}

/// Why the fleet thinks an outside compactor holds a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// It wrote `.compactions` within `active_within`.
    Active,
    /// It is quiet, but nothing shows it is gone: an idle database needs
    /// no compaction, so standing down costs nothing until work appears.
    Presumed,
}

/// Why an outside compactor's epoch may be taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The writer that held it was replaced by one that took no compactor
    /// epoch.
    WriterReplaced,
    /// L0 held a backlog it left untouched for `takeover_after`.
    Abandoned,
}

/// Who may compact a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No compactor has ever run on it (epoch 0).
    Unclaimed,
    /// The epoch is the fleet's own.
    Fleet,
    /// The outside compactor is gone; the fleet may take its epoch over,
    /// and only that epoch (`with_expected_epoch`), so a compactor that
    /// started meanwhile wins and the fleet's coordinator is the one fenced.
    Released(Release),
    /// A compactor outside the fleet holds it: stand down, and remember
    /// this sighting for the next look.
    Outside(Sighting),
}

impl Evidence {
    /// The name status and heartbeats show (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Active => "active",
            Evidence::Presumed => "presumed",
        }
    }
}

impl Verdict {
    /// Whether the fleet may run its coordinator and workers.
    pub fn fleet_may_compact(&self) -> bool {
        !matches!(self, Verdict::Outside(_))
    }
}

/// Decides who may compact a database from one look at it and the fleet's
/// sighting from an earlier look (if that sighting was of the same epoch).
pub fn judge(seen: &Observation, earlier: Option<&Sighting>, limits: &Thresholds) -> Verdict {
    let epoch = seen.compactor_epoch;
    if epoch == 0 {
        return Verdict::Unclaimed;
    }
    if seen.fleet_took_epoch {
        return Verdict::Fleet;
    }
    let earlier = earlier.filter(|s| s.compactor_epoch == epoch);
    let last_write = seen
        .last_compactions_write
        .filter(|(written_by, _)| *written_by == epoch)
        .map(|(_, at)| at);
    let active = last_write.is_some_and(|at| age(seen.now, at) <= limits.active_within);
    // A writer opens before its embedded compactor claims an epoch, so a
    // newer writer under an unchanged compactor epoch runs no compactor,
    // and the writer that ran this one is fenced and closed.
    if let Some(earlier) = earlier
        && seen.writer_epoch > earlier.writer_epoch
    {
        return Verdict::Released(Release::WriterReplaced);
    }
    let backlog_since = backlog_since(seen, earlier, last_write, limits);
    if !active
        && let Some(since) = backlog_since
        && age(seen.now, since) >= limits.takeover_after
    {
        return Verdict::Released(Release::Abandoned);
    }
    Verdict::Outside(Sighting {
        compactor_epoch: epoch,
        writer_epoch: earlier.map_or(seen.writer_epoch, |s| s.writer_epoch),
        first_seen: earlier.map_or(seen.now, |s| s.first_seen),
        backlog_since,
        evidence: if active {
            Evidence::Active
        } else {
            Evidence::Presumed
        },
        last_write,
    })
}

/// Since when L0 has held a backlog the outside compactor did not touch:
/// the earlier sighting's start, moved up to its last `.compactions`
/// write (work it did restarts the clock); `None` without a backlog.
fn backlog_since(
    seen: &Observation,
    earlier: Option<&Sighting>,
    last_write: Option<DateTime<Utc>>,
    limits: &Thresholds,
) -> Option<DateTime<Utc>> {
    if limits.takeover_backlog == 0 || seen.l0_ssts < limits.takeover_backlog as usize {
        return None;
    }
    let since = earlier.and_then(|s| s.backlog_since).unwrap_or(seen.now);
    Some(match last_write {
        Some(at) if at > since => at.min(seen.now),
        _ => since,
    })
}

/// `now - then`, zero when `then` is in the future (clock skew).
fn age(now: DateTime<Utc>, then: DateTime<Utc>) -> Duration {
    (now - then).to_std().unwrap_or_default()
}

/// The database a look is about.
pub struct Target<'a> {
    /// The canonical database URL (the records' key).
    pub url: &'a str,
    pub admin: &'a Admin,
    pub store: &'a Arc<dyn ObjectStore>,
    pub path: &'a Path,
}

/// Why a look failed.
#[derive(Debug, thiserror::Error)]
pub enum LookError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Records(#[from] records::RecordError),
}

/// What one look decided, with the epochs it saw: a coordinator claims
/// exactly the compactor epoch after this one, and records the writer
/// epoch beside its claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub verdict: Verdict,
    pub compactor_epoch: u64,
    pub writer_epoch: u64,
}

/// One look at a database: read it, ask the fleet's records, judge, and
/// save the sighting when the fleet stands down. `None`: no manifest yet.
pub async fn look(
    db: &Target<'_>,
    records: &EpochRecords,
    limits: &Thresholds,
) -> Result<Option<Seen>, LookError> {
    let Some(state) = probe::read_state(db.admin, db.store, db.path).await? else {
        return Ok(None);
    };
    let epoch = state.compactor_epoch;
    let fleet_took_epoch = epoch > 0
        && records
            .fleet_took(db.url, epoch, state.writer_epoch)
            .await?;
    let earlier = if epoch > 0 && !fleet_took_epoch {
        records.sighting(db.url).await?
    } else {
        None
    };
    let seen = Observation {
        writer_epoch: state.writer_epoch,
        compactor_epoch: epoch,
        l0_ssts: state.l0_ssts,
        fleet_took_epoch,
        last_compactions_write: state.last_compactions_write,
        now: records.now(),
    };
    let verdict = judge(&seen, earlier.as_ref(), limits);
    if let Verdict::Outside(sighting) = &verdict
        && earlier.as_ref() != Some(sighting)
    {
        records.save_sighting(db.url, sighting).await?;
    }
    Ok(Some(Seen {
        verdict,
        compactor_epoch: epoch,
        writer_epoch: state.writer_epoch,
    }))
}

/// The one-line fix operators are shown wherever a database stands down.
pub const FIX: &str = "open the writer with `compactor_options: None` and \
    `garbage_collector_options: None` (the fleet takes over once it reopens), or take \
    compactor-coordinator and compaction-workers out of the database's `services`";

#[cfg(test)]
mod tests;
