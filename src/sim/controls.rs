//! The simulator's controls: for every planted switch (`model::planted`),
//! the run that must find it, the violations that count as found, and
//! the seeds (from 1) within which CI requires it found. The CI test and
//! `scripts/simulate --power` read this one table.

use super::check::{
    DEFAULT_WRITER_FENCED, FENCED_WROTE, GHOST_NODE, MISCOUNTED, NOT_CONVERGED, PANIC,
    TWO_COMPACTORS, WRITE_LOST,
};
use super::collect::COLLECTED_REFERENCED;
use super::foreign::DESTINATION_TAKEN_OVER;
use super::mirror::{DESTINATION_UNSOUND, NOT_A_PREFIX, RECOVERY_POINT_MISSED, RESTORE_BROKEN};
use super::{FaultMix, SimOptions, SimReport};
use crate::model::planted::Planted;

/// One planted bug's control.
#[derive(Debug, Clone, Copy)]
pub struct Control {
    pub bug: Planted,
    /// A violation of these names finds it.
    pub violations: &'static [&'static str],
    /// Whether its run has application writers (the ownership controls
    /// run without: 50 times faster).
    pub writers: bool,
    /// The faults of its run (`None`: every fault).
    pub faults: Option<&'static str>,
    /// CI requires it found within seeds 1 to this (0: not required, for
    /// a switch the simulator does not find yet; docs/reliability.md says
    /// why). Each is the first seed of `scripts/simulate --power --seeds
    /// 200` on 2026-12-08 (debug and release runs of a seed are alike).
    pub within: u64,
}

const MIRROR_POINTS: &[&str] = &[
    RESTORE_BROKEN,
    NOT_A_PREFIX,
    RECOVERY_POINT_MISSED,
    DESTINATION_UNSOUND,
];
const DATA_SAFETY: &[&str] = &[
    // SlateDB asserts what it cannot survive: a manifest's epoch gone
    // back under a writer ("the stored epoch is lower than the local
    // epoch") panics, which the simulator reports as the seed's failure.
    PANIC,
    COLLECTED_REFERENCED,
    FENCED_WROTE,
    TWO_COMPACTORS,
    WRITE_LOST,
    DEFAULT_WRITER_FENCED,
    DESTINATION_UNSOUND,
    RESTORE_BROKEN,
    NOT_A_PREFIX,
    RECOVERY_POINT_MISSED,
];

const fn control(
    bug: Planted,
    violations: &'static [&'static str],
    writers: bool,
    within: u64,
) -> Control {
    Control {
        bug,
        violations,
        writers,
        faults: None,
        within,
    }
}

/// Every planted bug's control, in `Planted::ALL`'s order.
pub const CONTROLS: [Control; 19] = [
    control(Planted::DeadNodesStayLive, &[GHOST_NODE], false, 4),
    control(Planted::TasksOutliveOwnership, &[NOT_CONVERGED], false, 1),
    control(Planted::ConfigChangesIgnored, &[MISCOUNTED], false, 2),
    control(Planted::StoppedTasksStayOnTheBoard, &[MISCOUNTED], false, 1),
    control(
        Planted::OutsideCompactorVetSkipped,
        &[DEFAULT_WRITER_FENCED],
        true,
        1,
    ),
    Control {
        faults: Some("writer-crash"),
        ..control(Planted::WriterAcksBeforeDurable, &[WRITE_LOST], true, 2)
    },
    control(Planted::MirrorCommitsBeforeCopy, MIRROR_POINTS, true, 1),
    control(Planted::PruneKeepsLatestOnly, MIRROR_POINTS, true, 2),
    control(
        Planted::RestoreDropsWalTail,
        &[RECOVERY_POINT_MISSED],
        true,
        1,
    ),
    control(Planted::GcSafetyOff, DATA_SAFETY, true, 1),
    control(Planted::HandoverWaitSkipped, DATA_SAFETY, true, 0),
    control(Planted::MirrorCopiesUnpinned, MIRROR_POINTS, true, 0),
    control(Planted::PinLapseIgnored, MIRROR_POINTS, true, 0),
    control(Planted::PruneIgnoresSource, MIRROR_POINTS, true, 0),
    control(Planted::PruneIgnoresMinAge, MIRROR_POINTS, true, 0),
    control(Planted::PruneIgnoresPinFloor, MIRROR_POINTS, true, 0),
    control(Planted::GcHoldsNoWal, MIRROR_POINTS, true, 0),
    control(
        Planted::OwnerClaimSkipped,
        &[DESTINATION_TAKEN_OVER],
        true,
        3,
    ),
    control(Planted::PruneIgnoresPassesInFlight, MIRROR_POINTS, true, 0),
];

impl Control {
    /// The control's run of `seed`, with its bug planted or not.
    pub fn run_of(&self, seed: u64, planted: bool) -> SimOptions {
        let mut options = SimOptions {
            writers: self.writers,
            ..SimOptions::new(seed)
        };
        if let Some(faults) = self.faults {
            options.faults = FaultMix::parse(faults).expect("a control's faults parse");
        }
        if planted {
            options.planted = vec![self.bug];
        }
        options
    }

    /// Whether `report` found this control's bug.
    pub fn found_in(&self, report: &SimReport) -> bool {
        report
            .violations
            .iter()
            .any(|v| self.violations.contains(&v.name))
    }
}

/// The control of `bug`.
pub fn control_of(bug: Planted) -> &'static Control {
    CONTROLS
        .iter()
        .find(|c| c.bug == bug)
        .expect("every planted bug has a control")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_planted_bug_has_one_control() {
        for (bug, control) in Planted::ALL.iter().zip(&CONTROLS) {
            assert_eq!(*bug, control.bug);
            assert!(!control.violations.is_empty());
        }
    }
}
