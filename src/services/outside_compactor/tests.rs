use chrono::TimeZone;

use super::*;

const LIMITS: Thresholds = Thresholds {
    active_within: Duration::from_secs(120),
    takeover_backlog: 8,
    takeover_after: Duration::from_secs(120),
};

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
}

fn seen(writer_epoch: u64, compactor_epoch: u64) -> Observation {
    Observation {
        writer_epoch,
        compactor_epoch,
        l0_ssts: 0,
        fleet_took_epoch: false,
        last_compactions_write: None,
        now: at(1000),
    }
}

fn outside(verdict: Verdict) -> Sighting {
    match verdict {
        Verdict::Outside(sighting) => sighting,
        other => panic!("expected the fleet to stand down, got {other:?}"),
    }
}

#[test]
fn epoch_zero_is_unclaimed_and_a_recorded_epoch_is_the_fleets() {
    assert_eq!(judge(&seen(3, 0), None, &LIMITS), Verdict::Unclaimed);
    let ours = Observation {
        fleet_took_epoch: true,
        last_compactions_write: Some((5, at(999))),
        ..seen(3, 5)
    };
    assert_eq!(judge(&ours, None, &LIMITS), Verdict::Fleet);
}

#[test]
fn an_unrecorded_epoch_is_outside_even_when_quiet() {
    let sighting = outside(judge(&seen(3, 5), None, &LIMITS));
    assert_eq!(sighting.evidence, Evidence::Presumed);
    assert_eq!(
        (sighting.compactor_epoch, sighting.writer_epoch),
        (5, 3),
        "the sighting remembers both epochs"
    );
    assert_eq!(sighting.first_seen, at(1000));
    assert!(!Verdict::Outside(sighting).fleet_may_compact());
}

#[test]
fn recent_compactions_writes_by_the_epoch_mean_active() {
    for (write_age, evidence) in [
        (0, Evidence::Active),
        (120, Evidence::Active),
        (121, Evidence::Presumed),
    ] {
        let look = Observation {
            last_compactions_write: Some((5, at(1000 - write_age))),
            ..seen(3, 5)
        };
        let sighting = outside(judge(&look, None, &LIMITS));
        assert_eq!(sighting.evidence, evidence, "a write {write_age}s old");
        assert_eq!(sighting.last_write, Some(at(1000 - write_age)));
    }
    let other_epoch = Observation {
        last_compactions_write: Some((4, at(999))),
        ..seen(3, 5)
    };
    assert_eq!(
        outside(judge(&other_epoch, None, &LIMITS)).evidence,
        Evidence::Presumed,
        "a write by another epoch says nothing of this one"
    );
}

#[test]
fn a_newer_writer_under_the_same_compactor_epoch_releases_it() {
    let earlier = outside(judge(&seen(3, 5), None, &LIMITS));
    let restarted = Observation {
        last_compactions_write: Some((5, at(990))),
        ..seen(4, 5)
    };
    assert_eq!(
        judge(&restarted, Some(&earlier), &LIMITS),
        Verdict::Released(Release::WriterReplaced)
    );
    // The same writer, or a writer that brought its own compactor: no.
    assert!(!judge(&seen(3, 5), Some(&earlier), &LIMITS).fleet_may_compact());
    let with_compactor = outside(judge(&seen(4, 6), Some(&earlier), &LIMITS));
    assert_eq!(
        (with_compactor.writer_epoch, with_compactor.first_seen),
        (4, at(1000)),
        "a new epoch starts a new sighting"
    );
    // Without an earlier sighting there is nothing to compare with.
    assert!(!judge(&seen(4, 5), None, &LIMITS).fleet_may_compact());
}

#[test]
fn a_backlog_left_alone_for_takeover_after_releases_the_epoch() {
    let backlog = |now: i64, last_write: Option<i64>| Observation {
        l0_ssts: 8,
        last_compactions_write: last_write.map(|t| (5, at(t))),
        now: at(now),
        ..seen(3, 5)
    };
    let first = outside(judge(&backlog(1000, None), None, &LIMITS));
    assert_eq!(first.backlog_since, Some(at(1000)));
    let later = outside(judge(&backlog(1119, None), Some(&first), &LIMITS));
    assert_eq!(
        later.backlog_since,
        Some(at(1000)),
        "the clock keeps running"
    );
    assert_eq!(later.first_seen, at(1000));
    assert_eq!(
        judge(&backlog(1120, None), Some(&later), &LIMITS),
        Verdict::Released(Release::Abandoned)
    );
    // A write during the backlog restarts the clock; an active compactor
    // is never released for a backlog.
    let worked = outside(judge(&backlog(1120, Some(1010)), Some(&later), &LIMITS));
    assert_eq!(
        (worked.backlog_since, worked.evidence),
        (Some(at(1010)), Evidence::Active)
    );
    assert!(!judge(&backlog(1240, Some(1125)), Some(&worked), &LIMITS).fleet_may_compact());
    assert_eq!(
        judge(&backlog(1250, Some(1125)), Some(&worked), &LIMITS),
        Verdict::Released(Release::Abandoned),
        "quiet for active_within and untouched for takeover_after"
    );
}

#[test]
fn a_small_backlog_or_a_zero_threshold_never_takes_over() {
    let small = Observation {
        l0_ssts: 7,
        now: at(100_000),
        ..seen(3, 5)
    };
    let earlier = Sighting {
        backlog_since: Some(at(0)),
        ..outside(judge(&seen(3, 5), None, &LIMITS))
    };
    let sighting = outside(judge(&small, Some(&earlier), &LIMITS));
    assert_eq!(sighting.backlog_since, None, "a shrunk backlog resets");
    let off = Thresholds {
        takeover_backlog: 0,
        ..LIMITS
    };
    let huge = Observation {
        l0_ssts: 500,
        ..small
    };
    assert!(!judge(&huge, Some(&earlier), &off).fleet_may_compact());
}

#[test]
fn a_sighting_of_another_epoch_is_ignored() {
    let earlier = outside(judge(&seen(1, 2), None, &LIMITS));
    let sighting = outside(judge(&seen(3, 5), Some(&earlier), &LIMITS));
    assert_eq!((sighting.writer_epoch, sighting.compactor_epoch), (3, 5));
}

#[test]
fn a_store_clock_ahead_of_the_node_counts_as_now() {
    let look = Observation {
        last_compactions_write: Some((5, at(1030))),
        ..seen(3, 5)
    };
    assert_eq!(
        outside(judge(&look, None, &LIMITS)).evidence,
        Evidence::Active
    );
}

/// Every combination of the inputs that matter: the fleet never compacts
/// over an outside compactor that shows activity, and always compacts
/// when the epoch is unclaimed or its own.
#[test]
fn exhaustive_invariants() {
    for compactor_epoch in [0u64, 5] {
        for fleet_took_epoch in [false, true] {
            for writer_epoch in [2u64, 3, 4] {
                for l0_ssts in [0usize, 7, 8, 50] {
                    for write in [None, Some((5, 0)), Some((5, 200)), Some((4, 0))] {
                        for earlier in [
                            None,
                            Some((3, 5, None)),
                            Some((3, 5, Some(500))),
                            Some((3, 6, None)),
                        ] {
                            let look = Observation {
                                writer_epoch,
                                compactor_epoch,
                                l0_ssts,
                                fleet_took_epoch,
                                last_compactions_write: write.map(|(e, ago)| (e, at(1000 - ago))),
                                now: at(1000),
                            };
                            let earlier = earlier.map(|(w, c, backlog)| Sighting {
                                compactor_epoch: c,
                                writer_epoch: w,
                                first_seen: at(0),
                                backlog_since: backlog.map(at),
                                evidence: Evidence::Presumed,
                                last_write: None,
                            });
                            let verdict = judge(&look, earlier.as_ref(), &LIMITS);
                            let case = format!("{look:?} {earlier:?} -> {verdict:?}");
                            if compactor_epoch == 0 {
                                assert_eq!(verdict, Verdict::Unclaimed, "{case}");
                                continue;
                            }
                            if fleet_took_epoch {
                                assert_eq!(verdict, Verdict::Fleet, "{case}");
                                continue;
                            }
                            let active = write == Some((5, 0));
                            let newer_writer = earlier.as_ref().is_some_and(|s| {
                                s.compactor_epoch == 5 && writer_epoch > s.writer_epoch
                            });
                            match &verdict {
                                Verdict::Released(Release::WriterReplaced) => {
                                    assert!(newer_writer, "{case}")
                                }
                                Verdict::Released(Release::Abandoned) => {
                                    assert!(!active && l0_ssts >= 8, "{case}")
                                }
                                Verdict::Outside(s) => {
                                    assert!(!newer_writer, "{case}");
                                    assert_eq!(s.compactor_epoch, 5, "{case}");
                                    assert_eq!(s.evidence == Evidence::Active, active, "{case}");
                                }
                                other => panic!("{case}: unexpected {other:?}"),
                            }
                        }
                    }
                }
            }
        }
    }
}
