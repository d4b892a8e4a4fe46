//! Restore: copy one restore point of a backup (a mirror destination) into
//! an empty root, which then opens as an ordinary SlateDB database.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use slatedb::VersionedManifest;
use slatedb::seq_tracker::FindOption;
use tokio_util::sync::CancellationToken;

use super::MirrorError;
use super::io::{get_bytes, list_manifest_ids, list_sizes, read_manifest};
use super::layout::{COMPACTED_DIR, ObjectFloor, live_pins, manifest_name, wal_name};
use super::points::newest_restore_point;
use super::verify::{Needed, add_needs, closure_problems};
use super::wal_run::{as_of, latest_end, replay_of};
use super::wal_times::WalListing;
use crate::fleet::database::DatabaseHandle;
use crate::mirror::copier::builtin::BuiltinCopier;
use crate::mirror::copier::{Copier, CopyBatch, CopyError, CopyProgress, ObjectOutcome};
use crate::model::coverage::{self, Mark};
use crate::model::planted::{Planted, planted};
use crate::model::seams::{self, Seam};
use crate::store::StoreRoot;

/// How many times a restore of the newest point (or by time) chooses
/// again when retention takes the point it chose before it copies.
const RESOLVE_ATTEMPTS: u32 = 3;

/// Objects copied at once during a restore.
const RESTORE_PARALLELISM: u32 = 8;

/// Which manifest of a backup to restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePoint {
    Latest,
    Manifest(u64),
    /// The writes acknowledged by this instant, within one WAL object:
    /// the newest restore point written by then, and its WAL run up to
    /// the newest object the source wrote by then.
    Time(DateTime<Utc>),
}

impl std::str::FromStr for RestorePoint {
    type Err = String;

    /// A manifest id, else an RFC 3339 timestamp.
    fn from_str(value: &str) -> Result<Self, String> {
        if let Ok(id) = value.parse() {
            return Ok(RestorePoint::Manifest(id));
        }
        DateTime::parse_from_rfc3339(value)
            .map(|t| RestorePoint::Time(t.with_timezone(&Utc)))
            .map_err(|_| {
                format!("--at \"{value}\" is neither a manifest id nor an RFC 3339 timestamp")
            })
    }
}

impl std::fmt::Display for RestorePoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestorePoint::Latest => write!(f, "latest"),
            RestorePoint::Manifest(id) => write!(f, "manifest {id}"),
            RestorePoint::Time(t) => write!(f, "{}", t.to_rfc3339()),
        }
    }
}

/// What a restore wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreOutcome {
    /// The database the backup mirrors, from its `sleet-mirror-source.json`.
    pub source: Option<String>,
    pub manifest_id: u64,
    /// The newest WAL id restored: the restored database replays the WAL
    /// after the manifest's replay point up to this one.
    pub wal_end: u64,
    /// When the source wrote that WAL object (as recorded by the mirror,
    /// else its copy's time), if the backup holds it.
    pub newest_write: Option<DateTime<Utc>>,
    pub manifests_committed: u64,
    pub objects_copied: u64,
    pub bytes_copied: u64,
}

/// Restores `at` from `backup` into `destination`, which must be empty.
/// The restore point is checked first: an object its manifests need that
/// is missing or shorter than they record refuses the restore, unless
/// `force` (then whatever is there is copied).
pub async fn restore(
    backup: &DatabaseHandle,
    destination: &DatabaseHandle,
    at: RestorePoint,
    force: bool,
    progress: Arc<CopyProgress>,
    cancel: &CancellationToken,
) -> Result<RestoreOutcome, MirrorError> {
    let dest_root = destination.root();
    ensure_empty(&dest_root).await?;
    // An unreadable record is refused; the record itself is not restored
    // (the restored root is a database, not a mirror).
    let source = super::owner::read(backup).await?.map(|owner| owner.source);
    let backup_root = backup.root();
    // The point's manifests are read before anything is written: a
    // mirror's retention may take a point that stopped being the newest
    // meanwhile, and then the newest is chosen again (by `--at <id>`,
    // the named point is gone and the restore says so).
    let mut attempt = 0;
    let (chosen_id, window_end, wal_end, wal, members, bodies) = loop {
        attempt += 1;
        let listed = list_manifest_ids(&backup_root).await?;
        let Some(&latest) = listed.last() else {
            return Err(MirrorError::NotADatabase {
                url: backup.url().to_string(),
            });
        };
        let mut wal = WalListing::list(&backup_root).await?;
        let (chosen, wal_end) = resolve(backup, &listed, latest, &mut wal, at).await?;
        seams::at(Seam::BetweenRestorePointAndCopy).await;
        let chosen_id = chosen.id();
        let window_end = replay_of(&chosen).window_end();
        let members = members(backup, chosen, at).await?;
        match manifest_bodies(&backup_root, members.keys().copied()).await? {
            Ok(bodies) => break (chosen_id, window_end, wal_end, wal, members, bodies),
            Err(_) if attempt < RESOLVE_ATTEMPTS && !matches!(at, RestorePoint::Manifest(_)) => {
                tracing::info!(backup = %backup.url(), chosen_id, "restore point pruned while resolving; choosing again");
            }
            Err(name) => {
                return Err(MirrorError::Store {
                    action: "read".into(),
                    location: format!("{}/{name}", backup_root.url),
                    message: "vanished during the restore (the mirror's retention took it)".into(),
                });
            }
        }
    };

    let mut needed: Needed = BTreeMap::new();
    for (&id, manifest) in &members {
        add_needs(&mut needed, manifest, id);
    }
    // The WAL run after the manifest's own window: what the writer
    // acknowledged after the manifest was written.
    for id in window_end.saturating_add(1)..=wal_end {
        needed
            .entry(wal_name(id))
            .or_insert((ObjectFloor { min_size: 0 }, BTreeSet::new()))
            .1
            .insert(chosen_id);
    }
    // The WAL listed once: for the run above, and for these checks.
    let mut sizes = list_sizes(&backup_root, COMPACTED_DIR).await?;
    sizes.extend(wal.named_sizes());
    let problems = closure_problems(&needed, &sizes);
    if !problems.is_empty() && !force {
        return Err(MirrorError::BrokenRestorePoint {
            manifest_id: chosen_id,
            problems: problems.len(),
            first: problems[0].clone(),
        });
    }
    // Forced past missing objects, copy what there is.
    let objects: Vec<String> = needed
        .into_keys()
        .filter(|name| sizes.contains_key(name))
        .collect();
    progress.expect(
        objects.len() as u64,
        objects.iter().filter_map(|name| sizes.get(name)).sum(),
    );
    let copier = BuiltinCopier::new(RESTORE_PARALLELISM);
    let batch = CopyBatch {
        source: &backup_root,
        destination: &dest_root,
        objects: &objects,
    };
    let report = copier
        .copy(batch, &progress, cancel)
        .await
        .map_err(|e| match e {
            CopyError::Cancelled => MirrorError::Cancelled,
            other => MirrorError::Copy(other),
        })?;
    if let Some((name, outcome)) = report
        .outcomes
        .iter()
        .find(|(_, o)| !matches!(o, ObjectOutcome::Copied { .. }))
    {
        return Err(MirrorError::CopyFailed {
            copier: "builtin".into(),
            failed: report.outcomes.len() - report.copied(),
            first: format!("{name}: {outcome:?}"),
        });
    }
    let mut committed = 0;
    for (id, body) in bodies {
        commit_new(&dest_root, id, body).await?;
        committed += 1;
    }
    Ok(RestoreOutcome {
        source,
        manifest_id: chosen_id,
        wal_end,
        newest_write: wal.times.get(&wal_end).copied(),
        manifests_committed: committed,
        objects_copied: report.copied() as u64,
        bytes_copied: report.bytes(),
    })
}

async fn ensure_empty(root: &StoreRoot) -> Result<(), MirrorError> {
    use futures::StreamExt;
    let first = root.store.list(Some(&root.prefix)).next().await;
    match first {
        None => Ok(()),
        Some(Ok(_)) => Err(MirrorError::DestinationNotEmpty {
            url: root.url.clone(),
        }),
        Some(Err(e)) => Err(MirrorError::Store {
            action: "list".into(),
            location: root.url.clone(),
            message: e.to_string(),
        }),
    }
}

fn no_point(at: RestorePoint, reason: String) -> MirrorError {
    MirrorError::NoRestorePoint {
        at: at.to_string(),
        reason,
    }
}

/// The manifest `at` names and the WAL end to restore with it: for the
/// latest or a time, the newest restore point that qualifies
/// ([`super::points`]) and its WAL run ([`super::wal_run`]); for a
/// manifest id, that manifest's own window.
async fn resolve(
    backup: &DatabaseHandle,
    listed: &BTreeSet<u64>,
    latest: u64,
    wal: &mut WalListing,
    at: RestorePoint,
) -> Result<(VersionedManifest, u64), MirrorError> {
    let now = backup.now();
    let present = wal.ids();
    let root = backup.root();
    match at {
        RestorePoint::Latest => {
            let chosen = newest_restore_point(backup, listed, now, |_| true)
                .await?
                .ok_or_else(|| {
                    no_point(
                        at,
                        "the backup holds no restore point: every manifest lacks a manifest its \
                         live checkpoints pin (was its first pass cut off?)"
                            .into(),
                    )
                })?;
            let end = if planted(Planted::RestoreDropsWalTail) {
                replay_of(&chosen).window_end()
            } else {
                latest_end(replay_of(&chosen), &present)
            };
            if end > replay_of(&chosen).window_end() {
                coverage::hit(Mark::RestoreTookWalRun);
            }
            wal.date(&root, |span| span.first <= end && end <= span.last)
                .await?;
            Ok((chosen, end))
        }
        RestorePoint::Manifest(id) if listed.contains(&id) => {
            let chosen = read_manifest(backup, id)
                .await?
                .ok_or_else(|| no_point(at, format!("manifest {id} vanished from the backup")))?;
            let end = replay_of(&chosen).window_end();
            Ok((chosen, end))
        }
        RestorePoint::Manifest(id) => Err(no_point(at, format!("the backup has no manifest {id}"))),
        RestorePoint::Time(ts) => {
            wal.date_around(&root, ts).await?;
            let mut end = None;
            let by_wal = newest_restore_point(backup, listed, now, |m| {
                end = as_of(&[(m.id(), replay_of(m))], &present, &wal.times, ts).map(|(_, e)| e);
                end.is_some()
            })
            .await?;
            if let (Some(chosen), Some(end)) = (by_wal, end) {
                return Ok((chosen, end));
            }
            // No WAL dates a restore point by `ts` (its WAL was pruned, or
            // predates the records): the source's sequence tracker, which
            // samples about once a minute, dates manifests instead.
            let Some(head) = read_manifest(backup, latest).await? else {
                return Err(no_point(
                    at,
                    format!("manifest {latest} vanished from the backup"),
                ));
            };
            let tracker = head.sequence_tracker();
            let written_by = |m: &VersionedManifest| {
                tracker
                    .find_ts(m.last_l0_seq(), FindOption::RoundDown)
                    .is_some_and(|written| written <= ts)
            };
            let chosen = newest_restore_point(backup, listed, now, written_by)
                .await?
                .ok_or_else(|| {
                    no_point(
                        at,
                        "the timestamp predates the backup's tracked history".into(),
                    )
                })?;
            let end = replay_of(&chosen).window_end();
            Ok((chosen, end))
        }
    }
}

/// The chosen manifest and the manifests its live checkpoints pin; all
/// must be in the backup before anything is written.
async fn members(
    backup: &DatabaseHandle,
    chosen: VersionedManifest,
    at: RestorePoint,
) -> Result<BTreeMap<u64, VersionedManifest>, MirrorError> {
    let mut members = BTreeMap::new();
    for pinned in live_pins(&chosen, backup.now()) {
        let manifest = read_manifest(backup, pinned).await?.ok_or_else(|| {
            no_point(
                at,
                format!(
                    "manifest {} is closure support, not a restore point: its live checkpoint \
                     pins manifest {pinned}, which the backup no longer has",
                    chosen.id()
                ),
            )
        })?;
        members.insert(pinned, manifest);
    }
    members.insert(chosen.id(), chosen);
    Ok(members)
}

/// The bodies of manifests `ids` of the backup, ascending, or the name
/// of one that is gone.
async fn manifest_bodies(
    backup: &StoreRoot,
    ids: impl Iterator<Item = u64>,
) -> Result<Result<Vec<(u64, bytes::Bytes)>, String>, MirrorError> {
    let mut bodies = Vec::new();
    for id in ids {
        let name = manifest_name(id);
        match get_bytes(backup, &name).await? {
            Some(body) => bodies.push((id, body)),
            None => return Ok(Err(name)),
        }
    }
    Ok(Ok(bodies))
}

/// Writes manifest `id` create-only: a restore writes into a fresh root,
/// so anything already there is an error.
async fn commit_new(
    destination: &StoreRoot,
    id: u64,
    body: bytes::Bytes,
) -> Result<(), MirrorError> {
    let name = manifest_name(id);
    if !super::io::put_create_new(destination, &name, body).await? {
        return Err(MirrorError::Store {
            action: "write".into(),
            location: format!("{}/{name}", destination.url),
            message: "already exists: something else is writing the destination".into(),
        });
    }
    Ok(())
}
