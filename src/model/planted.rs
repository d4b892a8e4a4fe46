//! Bugs planted on purpose, for the simulator's controls: each switch
//! turns one guard of the real code off, so `scripts/simulate` can show
//! it finds the failure that guard prevents. Off unless the simulator
//! turns it on, and per thread: the simulator runs a fleet on one thread,
//! so a planted bug never reaches another test or a node.

use std::cell::Cell;

/// A guard the simulator can remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Planted {
    /// Heartbeats never age out: a node that crashed stays live for its
    /// peers, and its work is never taken over.
    DeadNodesStayLive,
    /// A node never stops a task it no longer owns: after a handover two
    /// nodes run the same task for good.
    TasksOutliveOwnership,
    /// A node reads the config and registry once, at its start, and never
    /// again: changes never reach it.
    ConfigChangesIgnored,
    /// A task's entry stays on the node's board after its supervisor ends
    /// (the guard that removes it is gone): the heartbeat goes on counting
    /// a task the node no longer runs.
    StoppedTasksStayOnTheBoard,
    /// The fleet never looks for a compactor outside it before it
    /// compacts: its coordinator takes the next compactor epoch over a
    /// writer on SlateDB's defaults, whose own compactor it fences.
    OutsideCompactorVetSkipped,
    /// Not a guard of sleet's but of the simulated application's: it
    /// tells its users a write is durable as soon as SlateDB's `put`
    /// returns (the write is then only in memory), so a writer's crash
    /// loses acknowledged writes. The control of the durability invariant.
    WriterAcksBeforeDurable,
    /// A mirror pass writes its manifests at the destination before it
    /// copies the objects they name (and releases its pin of the source
    /// with them): a copy that then fails leaves a committed restore point
    /// that cannot restore, and later passes take its objects as present.
    MirrorCommitsBeforeCopy,
    /// Mirror retention keeps only the objects of the destination's latest
    /// manifest and the WAL after its replay point, ignoring the older
    /// restore points it promises to keep and what their checkpoints pin.
    PruneKeepsLatestOnly,
    /// A restore copies its manifest and the manifest's own WAL window
    /// but not the WAL run the mirror copied after it: a quiet writer's
    /// acknowledged writes, still in the WAL, are not restored (the bug of
    /// sleet before restore points at WAL granularity).
    RestoreDropsWalTail,
    /// SlateDB's GC runs without the safety settings sleet hands it:
    /// boundary files off and every directory's `min_age` zero, so GC may
    /// delete what a writer, a compactor or a pass is about to reference.
    GcSafetyOff,
    /// A coordinator that gains a database starts at once, beside the
    /// coordinator of the node that held the epoch, instead of waiting for
    /// its holder to record that it stopped.
    HandoverWaitSkipped,
    /// A mirror pass copies without pinning the source: source GC may take
    /// what it is copying, and retention elsewhere sees no pass running.
    MirrorCopiesUnpinned,
    /// A mirror pass commits even when its pin lapsed while it copied.
    PinLapseIgnored,
    /// Retention deletes what the source still references (what a pass
    /// under way elsewhere is about to commit).
    PruneIgnoresSource,
    /// Retention deletes unreferenced objects however young.
    PruneIgnoresMinAge,
    /// Retention ignores the pins of passes under way.
    PruneIgnoresPinFloor,
    /// The fleet's GC holds no WAL for continuous mirrors that lack it.
    GcHoldsNoWal,
    /// A mirror pass copies into a destination without proving it is its
    /// source's (`mirror::owner::claim`): two databases mapped to one
    /// destination write into each other's history.
    OwnerClaimSkipped,
    /// Retention's three guards for a pass under way elsewhere at once
    /// (the source's references, `min_age` and the pin floor): each alone
    /// is covered by the other two while the pass's pin lives.
    PruneIgnoresPassesInFlight,
}

impl Planted {
    pub const ALL: [Planted; 19] = [
        Planted::DeadNodesStayLive,
        Planted::TasksOutliveOwnership,
        Planted::ConfigChangesIgnored,
        Planted::StoppedTasksStayOnTheBoard,
        Planted::OutsideCompactorVetSkipped,
        Planted::WriterAcksBeforeDurable,
        Planted::MirrorCommitsBeforeCopy,
        Planted::PruneKeepsLatestOnly,
        Planted::RestoreDropsWalTail,
        Planted::GcSafetyOff,
        Planted::HandoverWaitSkipped,
        Planted::MirrorCopiesUnpinned,
        Planted::PinLapseIgnored,
        Planted::PruneIgnoresSource,
        Planted::PruneIgnoresMinAge,
        Planted::PruneIgnoresPinFloor,
        Planted::GcHoldsNoWal,
        Planted::OwnerClaimSkipped,
        Planted::PruneIgnoresPassesInFlight,
    ];

    /// The name `scripts/simulate --plant` takes.
    pub fn name(self) -> &'static str {
        match self {
            Planted::DeadNodesStayLive => "dead-nodes-stay-live",
            Planted::TasksOutliveOwnership => "tasks-outlive-ownership",
            Planted::ConfigChangesIgnored => "config-changes-ignored",
            Planted::StoppedTasksStayOnTheBoard => "stopped-tasks-stay-on-the-board",
            Planted::OutsideCompactorVetSkipped => "outside-compactor-vet-skipped",
            Planted::WriterAcksBeforeDurable => "writer-acks-before-durable",
            Planted::MirrorCommitsBeforeCopy => "mirror-commits-before-copy",
            Planted::PruneKeepsLatestOnly => "prune-keeps-latest-only",
            Planted::RestoreDropsWalTail => "restore-drops-wal-tail",
            Planted::GcSafetyOff => "gc-safety-off",
            Planted::HandoverWaitSkipped => "handover-wait-skipped",
            Planted::MirrorCopiesUnpinned => "mirror-copies-unpinned",
            Planted::PinLapseIgnored => "pin-lapse-ignored",
            Planted::PruneIgnoresSource => "prune-ignores-source",
            Planted::PruneIgnoresMinAge => "prune-ignores-min-age",
            Planted::PruneIgnoresPinFloor => "prune-ignores-pin-floor",
            Planted::GcHoldsNoWal => "gc-holds-no-wal",
            Planted::OwnerClaimSkipped => "owner-claim-skipped",
            Planted::PruneIgnoresPassesInFlight => "prune-ignores-passes-in-flight",
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

thread_local! {
    static PLANTED: Cell<u32> = const { Cell::new(0) };
}

/// Whether `bug` is planted on this thread (never while the thread is
/// going away: a guard dropped then asks too).
pub fn planted(bug: Planted) -> bool {
    PLANTED
        .try_with(|bits| bits.get() & bug.bit() != 0)
        .unwrap_or(false)
}

/// Plants `bugs` on this thread (and removes every other) until the guard
/// is dropped.
pub fn plant(bugs: &[Planted]) -> PlantGuard {
    let bits = bugs.iter().fold(0, |bits, bug| bits | bug.bit());
    let before = PLANTED.with(|cell| cell.replace(bits));
    PlantGuard { before }
}

/// Restores the planted bugs of before when dropped.
#[derive(Debug)]
pub struct PlantGuard {
    before: u32,
}

impl Drop for PlantGuard {
    fn drop(&mut self) {
        PLANTED.with(|cell| cell.set(self.before));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_bug_stays_on_its_thread_and_goes_with_its_guard() {
        assert!(!planted(Planted::DeadNodesStayLive));
        {
            let _guard = plant(&[Planted::DeadNodesStayLive]);
            assert!(planted(Planted::DeadNodesStayLive));
            assert!(!planted(Planted::TasksOutliveOwnership));
            let elsewhere = std::thread::spawn(|| planted(Planted::DeadNodesStayLive));
            assert!(!elsewhere.join().unwrap(), "another thread sees no plant");
        }
        assert!(!planted(Planted::DeadNodesStayLive));
    }
}
