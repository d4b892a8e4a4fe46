//! Which manifests of a mirror destination are restore points.
//!
//! A pass commits its head's closure in ascending id order: the manifests
//! the head's live checkpoints pin (support) first, the head last. A
//! support manifest carries its own checkpoints, and those may pin
//! manifests the source had already collected, which no pass can copy. So
//! when a pass is cut off between a support manifest and its head (a
//! crash, a failed write), the destination's latest manifest can be one
//! whose live checkpoints pin manifests it lacks, until the next pass
//! commits a head. Found by the S3 chaos suite: `verify` failed such a
//! destination and `restore` refused its latest manifest, though the
//! previous head was complete.
//!
//! A restore point is therefore a manifest no other manifest's live
//! checkpoint pins and whose own live checkpoints pin only manifests the
//! destination holds. `verify`, `restore` (for the latest and by time) and
//! retention all use this rule; the newest restore point may lie below the
//! latest manifest for as long as an interrupted pass is not yet redone.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use slatedb::VersionedManifest;

use super::MirrorError;
use super::io::read_manifest;
use super::layout::live_pins;
use crate::fleet::database::DatabaseHandle;

/// Whether `id`, whose live checkpoints pin `pins`, is a restore point of
/// a destination holding `listed`, given every manifest pinned by another
/// manifest's live checkpoint (`live_support`).
pub fn is_restore_point(
    id: u64,
    pins: &BTreeSet<u64>,
    live_support: &BTreeSet<u64>,
    listed: &BTreeSet<u64>,
) -> bool {
    !live_support.contains(&id) && pins.iter().all(|pinned| listed.contains(pinned))
}

/// The restore points among `pins` (each manifest's live pins, for every
/// manifest the destination holds).
pub fn restore_points(pins: &BTreeMap<u64, BTreeSet<u64>>) -> BTreeSet<u64> {
    let listed: BTreeSet<u64> = pins.keys().copied().collect();
    let live_support: BTreeSet<u64> = pins.values().flatten().copied().collect();
    pins.iter()
        .filter(|(id, p)| is_restore_point(**id, p, &live_support, &listed))
        .map(|(id, _)| *id)
        .collect()
}

/// Walks a destination's manifests newest first, so each is judged by the
/// pins of every later one: a checkpoint pins its own manifest or an older
/// one, never a newer one.
pub struct NewestFirst<'a> {
    listed: &'a BTreeSet<u64>,
    live_support: BTreeSet<u64>,
}

impl<'a> NewestFirst<'a> {
    pub fn new(listed: &'a BTreeSet<u64>) -> Self {
        NewestFirst {
            listed,
            live_support: BTreeSet::new(),
        }
    }

    /// Judges `manifest` (the next one down) and remembers its pins.
    pub fn is_restore_point(&mut self, manifest: &VersionedManifest, now: DateTime<Utc>) -> bool {
        self.judge(manifest.id(), live_pins(manifest, now))
    }

    fn judge(&mut self, id: u64, pins: BTreeSet<u64>) -> bool {
        let point = is_restore_point(id, &pins, &self.live_support, self.listed);
        self.live_support.extend(pins);
        point
    }
}

/// The newest restore point among `listed` for which `accept` holds, read
/// newest first (one GET per manifest read); `None` when there is none.
pub async fn newest_restore_point(
    backup: &DatabaseHandle,
    listed: &BTreeSet<u64>,
    now: DateTime<Utc>,
    mut accept: impl FnMut(&VersionedManifest) -> bool,
) -> Result<Option<VersionedManifest>, MirrorError> {
    let mut walk = NewestFirst::new(listed);
    for &id in listed.iter().rev() {
        let Some(manifest) = read_manifest(backup, id).await? else {
            continue;
        };
        if walk.is_restore_point(&manifest, now) && accept(&manifest) {
            return Ok(Some(manifest));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn destination(manifests: &[(u64, &[u64])]) -> BTreeMap<u64, BTreeSet<u64>> {
        manifests
            .iter()
            .map(|(id, pins)| (*id, pins.iter().copied().collect()))
            .collect()
    }

    #[test]
    fn a_manifest_a_live_checkpoint_pins_is_support() {
        let all = destination(&[(3, &[]), (5, &[3])]);
        assert_eq!(restore_points(&all), BTreeSet::from([5]));
    }

    #[test]
    fn once_the_checkpoint_expires_a_complete_manifest_is_a_restore_point_again() {
        let all = destination(&[(3, &[]), (5, &[])]);
        assert_eq!(restore_points(&all), BTreeSet::from([3, 5]));
    }

    /// Manifest 4 was committed for a checkpoint of 6; its own checkpoint
    /// pins 2, which the source had already collected.
    #[test]
    fn support_whose_own_pins_were_gone_is_no_restore_point() {
        let all = destination(&[(4, &[2]), (6, &[4])]);
        assert_eq!(restore_points(&all), BTreeSet::from([6]));
    }

    /// The pass that committed 4 as support was cut off before its head:
    /// 4 is the latest manifest, and the head before it the newest
    /// restore point.
    #[test]
    fn an_interrupted_pass_leaves_the_previous_head_the_newest_restore_point() {
        let all = destination(&[(1, &[]), (4, &[2])]);
        assert_eq!(restore_points(&all), BTreeSet::from([1]));
    }

    #[test]
    fn the_newest_first_walk_agrees_with_the_whole_view() {
        let cases: [&[(u64, &[u64])]; 4] = [
            &[(3, &[]), (5, &[3])],
            &[(4, &[2]), (6, &[4])],
            &[(1, &[]), (4, &[2])],
            &[(1, &[]), (2, &[1]), (3, &[1]), (7, &[3, 9])],
        ];
        for case in cases {
            let all = destination(case);
            let listed: BTreeSet<u64> = all.keys().copied().collect();
            let mut walk = NewestFirst::new(&listed);
            let walked: BTreeSet<u64> = all
                .iter()
                .rev()
                .filter(|(id, pins)| walk.judge(**id, (*pins).clone()))
                .map(|(id, _)| *id)
                .collect();
            assert_eq!(walked, restore_points(&all), "{case:?}");
        }
    }
}
