//! One sync pass: bring a destination from its watermark (latest manifest)
//! to the source's latest manifest.
//!
//! The pass pins the source with a named checkpoint so GC cannot delete
//! what it copies, copies the data objects of the head's closure (the head
//! and the manifests its live checkpoints pin), then commits those
//! manifests at the destination in ascending id order, each create-only.
//! Every committed manifest therefore has its objects present, the head
//! its whole closure, even mid-commit (a pass cut off after a support
//! manifest leaves it the latest until the next pass: see
//! [`super::points`]), and two passes racing for one target write
//! identical bytes (a collision with different bytes means something
//! else wrote the destination: divergence).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use slatedb::VersionedManifest;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::MirrorError;
use super::io::{data_sizes, list_dir, missing_at, read_latest, read_manifest};
use super::layout::{
    COMPACTED_DIR, ObjectFloor, kept_pins, live_pins, manifest_objects, unsupported_source,
    wal_name,
};
use super::proof::{Checked, check_copies};
use super::wal_times::WalRecord;
use crate::fleet::database::DatabaseHandle;
use crate::mirror::copier::{Copier, CopyBatch, CopyError, CopyProgress, ObjectOutcome};
use crate::model::coverage::{self, Mark, Region};
use crate::model::planted::{Planted, planted};
use crate::model::seams::{self, Seam};
use crate::store::StoreRoot;

/// Attempts before a pass that keeps losing races with the source gives up.
mod commit;
mod pins;
mod wal;

const MAX_ATTEMPTS: usize = 5;

/// A (source, destination) pair and how to copy between them.
#[derive(Debug, Clone)]
pub struct MirrorPair {
    /// The target's name: it keys placement and the pin checkpoint.
    pub target: String,
    pub source: DatabaseHandle,
    pub destination: DatabaseHandle,
    pub copier: Arc<dyn Copier>,
    pub checkpoint_lifetime: Duration,
    pub progress: Arc<CopyProgress>,
    /// When passes also re-check what earlier ones committed.
    pub deep_check: DeepCheck,
    /// Whether a pass pins the source while it copies: always, except in
    /// the test that shows what the pin protects against.
    #[doc(hidden)]
    pub pin_source: bool,
}

/// When a pass re-checks the objects earlier passes committed (which
/// planning otherwise takes as present): every one must be at the
/// destination with the source's size, or it is copied again. Catches
/// damage done behind sleet's back (a deleted or truncated object).
#[derive(Debug, Clone)]
pub struct DeepCheck {
    every: Option<Duration>,
    last: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
}

impl DeepCheck {
    /// On the first pass, then every `every`.
    pub fn every(every: Duration) -> Self {
        DeepCheck {
            every: Some(every),
            last: Arc::new(std::sync::Mutex::new(None)),
        }
    }

    /// On every pass (one-shot `sleet mirror sync`).
    pub fn always() -> Self {
        DeepCheck {
            every: None,
            last: Arc::new(std::sync::Mutex::new(None)),
        }
    }

    fn due(&self) -> bool {
        let last = self.last.lock().expect("deep check lock");
        match (self.every, *last) {
            (Some(every), Some(at)) => at.elapsed() >= every,
            _ => true,
        }
    }

    fn done(&self) {
        *self.last.lock().expect("deep check lock") = Some(tokio::time::Instant::now());
    }
}

/// What a pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassOutcome {
    /// The source manifest the destination now holds.
    pub head: u64,
    pub next_wal_sst_id: u64,
    /// The first WAL id after the head's replay point: the pass brought
    /// `wal_start..=wal_end` (none when `wal_start > wal_end`).
    pub wal_start: u64,
    /// The newest WAL id the destination now holds with no gap after the
    /// head's replay point: a restore of the head carries the WAL up to it.
    pub wal_end: u64,
    /// Whether the pass wrote any manifest (false: already caught up).
    pub committed: bool,
    pub manifests_committed: u64,
    pub objects_copied: u64,
    pub bytes_copied: u64,
}

/// The manifests and data objects a reader of `head` may touch, and the
/// WAL run the source holds after it when the pass starts.
#[derive(Debug)]
struct Closure {
    head: VersionedManifest,
    /// Every manifest of the closure by id, the head included.
    manifests: BTreeMap<u64, VersionedManifest>,
    objects: BTreeMap<String, ObjectFloor>,
    /// The source's WAL after the head's replay point, contiguous: its
    /// window, then what the writer published since the head was written
    /// (a quiet writer's every write since its last memtable flush). Each
    /// with its source time and size, recorded at the destination.
    wal: Vec<WalRecord>,
}

/// A pass attempt either finishes or must start over because the source
/// moved underneath it (GC, a vanished pin): not an error.
enum Attempt {
    Done(PassOutcome),
    Restart(String),
}

impl MirrorPair {
    /// Runs one pass, restarting up to [`MAX_ATTEMPTS`] times when the
    /// source moves underneath it.
    pub async fn sync_pass(&self, cancel: &CancellationToken) -> Result<PassOutcome, MirrorError> {
        // A pass runs alone on its destination on one node: another under
        // way there is another node's (a handover, a paused node back).
        let (_passing, others) = coverage::enter(Region::MirrorPass, self.destination.url());
        if others > 0 {
            coverage::hit(Mark::MirrorPassesOverlapped);
        }
        let mut last_reason = String::new();
        for attempt in 1..=MAX_ATTEMPTS {
            match self.attempt(cancel).await? {
                Attempt::Done(outcome) => {
                    self.deep_check.done();
                    return Ok(outcome);
                }
                Attempt::Restart(reason) => {
                    tracing::debug!(target = %self.target, attempt, %reason, "mirror pass restarts");
                    last_reason = reason;
                }
            }
        }
        Err(MirrorError::Stalled {
            target: self.target.clone(),
            reason: last_reason,
        })
    }

    async fn attempt(&self, cancel: &CancellationToken) -> Result<Attempt, MirrorError> {
        let (watermark, latest) =
            tokio::try_join!(read_latest(&self.destination), read_latest(&self.source))?;
        let latest = latest.ok_or_else(|| MirrorError::NotADatabase {
            url: self.source.url().to_string(),
        })?;
        check_source(self.source.url(), &latest)?;
        if let Some(w) = &watermark
            && w.id() > latest.id()
        {
            // Another source's destination says whose it is.
            super::owner::claim(&self.destination, &self.source, &self.target).await?;
            return Err(self.diverged(w.id(), latest.id()));
        }
        // Caught up on manifests or not, the pass brings the WAL the
        // writer published since its last manifest (planning finds none to
        // copy when the tail already has).
        // Nothing is copied, repaired or committed into a destination
        // not proven this source's.
        super::owner::claim(&self.destination, &self.source, &self.target).await?;
        let closure = match self.closure(latest).await? {
            Ok(closure) => closure,
            Err(reason) => return Ok(Attempt::Restart(reason)),
        };
        let work = self.plan(&closure, watermark.as_ref()).await?;
        if work.is_empty() {
            return self.commit(&closure, watermark.as_ref(), 0, 0, None).await;
        }
        // A checkpoint protects a manifest's SSTs and WAL window, not the
        // WAL the writer published after it (source GC keeps that while
        // the latest manifest replays it, and for its `min_age`). So a
        // pass that brings only new WAL takes no pin: a pin writes two
        // source manifests, and would make a continuous target pass again
        // for as long as the writer writes.
        let pin = if work.iter().all(|name| closure.is_run(name)) {
            Pin::none(closure.head.id())
        } else {
            self.pin().await?
        };
        let pinned =
            (!pin.ids.is_empty()).then(|| coverage::enter(Region::MirrorPin, self.source.url()).0);
        let result = self
            .pinned_copy_and_commit(&pin, watermark.as_ref(), cancel)
            .await;
        drop(pinned);
        if !pin.released.load(Ordering::Relaxed) {
            self.unpin(&pin.ids).await;
        }
        result
    }

    /// With the pin held: adopt the pin's manifest as the head, re-plan
    /// against the same watermark, copy while refreshing the pin, commit.
    async fn pinned_copy_and_commit(
        &self,
        pin: &Pin,
        watermark: Option<&VersionedManifest>,
        cancel: &CancellationToken,
    ) -> Result<Attempt, MirrorError> {
        let Some(head) = read_manifest(&self.source, pin.manifest_id).await? else {
            return Ok(Attempt::Restart(
                "the pin's own manifest already vanished".into(),
            ));
        };
        let closure = match self.closure(head).await? {
            Ok(closure) => closure,
            Err(reason) => return Ok(Attempt::Restart(reason)),
        };
        let work = self.plan(&closure, watermark).await?;
        // Sizes from the manifests (an SST's index end, WAL objects as 0):
        // close enough for a progress bar, and no extra request.
        let about: u64 = work
            .iter()
            .filter_map(|name| closure.objects.get(name))
            .map(|floor| floor.min_size)
            .sum();
        self.progress.expect(work.len() as u64, about);
        if planted(Planted::MirrorCommitsBeforeCopy) {
            let committed = self.commit(&closure, watermark, 0, 0, Some(pin)).await?;
            return match self.copy_pinned(pin, &work, cancel).await? {
                Ok(_) => Ok(committed),
                Err(reason) => Ok(Attempt::Restart(reason)),
            };
        }
        let copied = match self.copy_pinned(pin, &work, cancel).await? {
            Ok(copied) => copied,
            Err(reason) => return Ok(Attempt::Restart(reason)),
        };
        seams::at(Seam::AfterCopyBeforeCommit).await;
        if tokio::time::Instant::now() >= copied.pin_deadline && !planted(Planted::PinLapseIgnored)
        {
            coverage::hit(Mark::MirrorPinLapsed);
            return Ok(Attempt::Restart("pin lapsed before commit".into()));
        }
        self.record_wal_times(&closure, &work).await;
        self.commit(&closure, watermark, copied.objects, copied.bytes, Some(pin))
            .await
    }

    /// The closure of `head`, or a restart reason when a pinned manifest
    /// vanished while reading it.
    async fn closure(
        &self,
        head: VersionedManifest,
    ) -> Result<Result<Closure, String>, MirrorError> {
        let mut manifests = BTreeMap::new();
        let mut objects = manifest_objects(&head);
        let now = self.source.now();
        let live = live_pins(&head, now);
        for id in kept_pins(&head, now) {
            let pinned = match read_manifest(&self.source, id).await? {
                Some(pinned) => pinned,
                None if live.contains(&id) => {
                    return Ok(Err(
                        "a live checkpoint's pinned manifest vanished mid-diff".into()
                    ));
                }
                // Its checkpoint expired and source GC took it: no reader
                // will look for it.
                None => continue,
            };
            objects.extend(manifest_objects(&pinned));
            manifests.insert(id, pinned);
        }
        manifests.insert(head.id(), head.clone());
        let wal = self.source_wal(&head).await?;
        for record in &wal {
            objects.insert(wal_name(record.id), ObjectFloor { min_size: 0 });
        }
        Ok(Ok(Closure {
            head,
            manifests,
            objects,
            wal,
        }))
    }

    /// The manifests the destination already has (the watermark and what
    /// the checkpoints it shares with the head keep) and so need no commit.
    fn present_manifests(
        &self,
        closure: &Closure,
        watermark: Option<&VersionedManifest>,
    ) -> BTreeSet<u64> {
        let Some(w) = watermark else {
            return BTreeSet::new();
        };
        // Judged with the same margin `closure` keeps pins by, so a pin
        // the watermark already holds is not committed again.
        let kept_since = self.source.now() - super::layout::CLOCK_MARGIN;
        let kept_in_head: BTreeSet<Uuid> = closure
            .head
            .checkpoints()
            .iter()
            .filter(|c| super::layout::checkpoint_live(c, kept_since))
            .map(|c| c.id)
            .collect();
        let mut present: BTreeSet<u64> = w
            .checkpoints()
            .iter()
            .filter(|c| {
                super::layout::checkpoint_live(c, kept_since) && kept_in_head.contains(&c.id)
            })
            .map(|c| c.manifest_id)
            .filter(|id| closure.manifests.contains_key(id))
            .collect();
        present.insert(w.id());
        present
    }

    /// The data objects to copy: the closure's objects not proven present
    /// at the destination, compacted SSTs first, WAL ascending. WAL (and,
    /// for externally replicated targets, SSTs) are probed with HEADs.
    async fn plan(
        &self,
        closure: &Closure,
        watermark: Option<&VersionedManifest>,
    ) -> Result<Vec<String>, MirrorError> {
        let present = self.present_manifests(closure, watermark);
        let mut proven: BTreeSet<String> = BTreeSet::new();
        for id in &present {
            let manifest = match closure.manifests.get(id) {
                Some(m) => Some(m.clone()),
                None if watermark.is_some_and(|w| w.id() == *id) => watermark.cloned(),
                None => None,
            };
            if let Some(m) = manifest {
                proven.extend(manifest_objects(&m).into_keys());
            }
        }
        if !proven.is_empty() && self.deep_check.due() {
            let damaged = self.damaged(closure, &proven).await?;
            if !damaged.is_empty() {
                tracing::warn!(target = %self.target, objects = damaged.len(), first = %damaged[0],
                    "the destination lost or damaged objects earlier passes committed; copying them again");
                proven.retain(|name| !damaged.contains(name));
            }
        }
        let candidates: Vec<&String> = closure
            .objects
            .keys()
            .filter(|name| !proven.contains(*name))
            .collect();
        let (compacted, wal): (Vec<String>, Vec<String>) = candidates
            .into_iter()
            .cloned()
            .partition(|name| name.starts_with(COMPACTED_DIR));
        let destination = self.destination.root();
        let mut work: Vec<String> = if !self.copier.replicated_elsewhere() {
            compacted
        } else if watermark.is_none() {
            let listed = list_dir(&destination, COMPACTED_DIR).await?;
            compacted
                .into_iter()
                .filter(|n| !listed.contains_key(n))
                .collect()
        } else {
            missing_at(&destination, compacted).await?
        };
        work.extend(wal::missing_wal(&destination, wal).await?);
        Ok(work)
    }

    /// Objects committed manifests reference that the destination lacks,
    /// or holds with another size than the source's (or, where the source
    /// lost them, shorter than their manifests record).
    async fn damaged(
        &self,
        closure: &Closure,
        proven: &BTreeSet<String>,
    ) -> Result<Vec<String>, MirrorError> {
        let at_destination = data_sizes(&self.destination.root()).await?;
        let at_source = data_sizes(&self.source.root()).await?;
        Ok(proven
            .iter()
            .filter(|name| {
                let floor = closure.objects.get(*name).map_or(0, |f| f.min_size);
                match (at_destination.get(*name), at_source.get(*name)) {
                    (None, _) => true,
                    (Some(dst), Some(src)) => dst != src,
                    (Some(dst), None) => *dst < floor,
                }
            })
            .cloned()
            .collect())
    }

    /// Copies `work` while refreshing the pin at half its lifetime.
    /// `Ok(Err(reason))` asks for a restart.
    async fn copy_pinned(
        &self,
        pin: &Pin,
        work: &[String],
        cancel: &CancellationToken,
    ) -> Result<Result<Copied, String>, MirrorError> {
        let source = self.source.root();
        let destination = self.destination.root();
        let batch = CopyBatch {
            source: &source,
            destination: &destination,
            objects: work,
        };
        let copy = self.copier.copy(batch, &self.progress, cancel);
        tokio::pin!(copy);
        let mut refresh_at = pin.refresh_at;
        let mut pin_deadline = pin.deadline;
        let result = loop {
            // The refresh races the copy rather than running in a branch,
            // which would hold the copy still while it waits on the store.
            tokio::select! {
                biased;
                result = &mut copy => break result,
                refreshed = async {
                    tokio::time::sleep_until(refresh_at).await;
                    // A refresh sets the expiry from the store's receipt
                    // of it, no earlier than this.
                    let asked = tokio::time::Instant::now();
                    for &id in &pin.ids {
                        self.source
                            .bounded(
                                "refreshing the pin",
                                self.source.admin().refresh_checkpoint(id, Some(self.checkpoint_lifetime)),
                            )
                            .await?;
                    }
                    Ok::<_, crate::fleet::database::DatabaseError>(asked)
                } => match refreshed {
                    Ok(asked) => {
                        pin_deadline = asked + self.checkpoint_lifetime;
                        refresh_at += self.checkpoint_lifetime / 2;
                    }
                    Err(e) => return Ok(Err(format!("pin refresh failed: {e}"))),
                },
            }
        };
        match result {
            Ok(report) => {
                let mut failures = Vec::new();
                for (name, outcome) in &report.outcomes {
                    match outcome {
                        ObjectOutcome::Missing => {
                            return Ok(Err(format!("{name} vanished mid-copy")));
                        }
                        ObjectOutcome::Failed(e) => failures.push(format!("{name}: {e}")),
                        ObjectOutcome::Copied { .. } => {}
                    }
                }
                if !failures.is_empty() {
                    return Err(MirrorError::CopyFailed {
                        copier: self.copier.name(),
                        failed: failures.len(),
                        first: failures.swap_remove(0),
                    });
                }
                let mut bytes = report.bytes();
                if !self.copier.host_writes() {
                    match check_copies(&source, &destination, work).await? {
                        // What the destination holds, not what the copier said.
                        Checked::Intact { bytes: verified } => bytes = verified,
                        Checked::VanishedAtSource(name) => {
                            return Ok(Err(format!("{name} vanished mid-copy")));
                        }
                        Checked::Differs(object, mismatch) => {
                            return Err(MirrorError::Unverified {
                                copier: self.copier.name(),
                                object,
                                mismatch: mismatch.to_string(),
                            });
                        }
                    }
                }
                Ok(Ok(Copied {
                    objects: report.copied() as u64,
                    bytes,
                    pin_deadline,
                }))
            }
            Err(CopyError::Cancelled) => Err(MirrorError::Cancelled),
            Err(e) => match first_missing(&source, work).await? {
                Some(name) => Ok(Err(format!("{name} vanished mid-copy"))),
                None => Err(MirrorError::Copy(e)),
            },
        }
    }

    fn diverged(&self, destination_id: u64, source_id: u64) -> MirrorError {
        MirrorError::Diverged {
            destination: self.destination.url().to_string(),
            source_url: self.source.url().to_string(),
            destination_id,
            source_id,
        }
    }
}

/// What a pinned copy did, and until when its last refresh holds the pin.
struct Copied {
    objects: u64,
    bytes: u64,
    pin_deadline: tokio::time::Instant,
}

/// Named checkpoints holding the source still while a pass copies: the
/// first pins the head, the rest re-pin the manifests the head's other
/// live checkpoints hold (empty only in the test-only unpinned mode).
struct Pin {
    ids: Vec<Uuid>,
    manifest_id: u64,
    refresh_at: tokio::time::Instant,
    deadline: tokio::time::Instant,
    /// Set once the commit has released the pin.
    released: AtomicBool,
}

impl Pin {
    /// No checkpoint: the copy needs none (its objects are WAL no
    /// checkpoint protects), or the test-only unpinned mode.
    fn none(manifest_id: u64) -> Pin {
        let never = tokio::time::Instant::now() + Duration::from_secs(365 * 24 * 3600);
        Pin {
            ids: Vec::new(),
            manifest_id,
            refresh_at: never,
            deadline: never,
            released: AtomicBool::new(false),
        }
    }
}

/// Refuses sources a byte copy cannot reproduce.
pub fn check_source(url: &str, manifest: &VersionedManifest) -> Result<(), MirrorError> {
    match unsupported_source(manifest) {
        Some(reason) => Err(MirrorError::Unsupported {
            url: url.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The first of `names` the source no longer has, after a copier failed
/// as a whole (it cannot say which object was missing).
async fn first_missing(
    source: &StoreRoot,
    names: &[String],
) -> Result<Option<String>, MirrorError> {
    Ok(missing_at(source, names.to_vec()).await?.into_iter().next())
}
