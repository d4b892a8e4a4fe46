//! Pure judgments over what the probes saw: a race's tally, ETags as
//! each request returned them, and the clock samples.

use std::time::Duration;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Outcome, Property, PropertyResult};

/// The skew bound with the default settings (see [`skew_bound`]).
pub const DEFAULT_SKEW_BOUND: Duration = Duration::from_secs(10);

/// The largest clock skew between a node and a store the fleet tolerates:
/// half of the smaller of two margins. A node whose clock runs ahead by
/// `s` sees every heartbeat `s` older than it is, so peers look dead once
/// `s` passes `heartbeat_timeout - heartbeat_interval`; and it judges
/// objects `s` older than they are, so GC could delete one `s` before its
/// `min_age`. Half leaves room for the store's own jitter.
pub fn skew_bound(
    heartbeat_interval: Duration,
    heartbeat_timeout: Duration,
    shortest_min_age: Duration,
) -> Duration {
    heartbeat_timeout
        .saturating_sub(heartbeat_interval)
        .min(shortest_min_age)
        / 2
}

/// What one round of a race came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RaceRound {
    /// Writers whose conditional PUT succeeded.
    pub wins: usize,
    /// Writers refused with a precondition failure (or "already exists").
    pub refused: usize,
    /// Writers told the store does not offer the operation.
    pub unsupported: usize,
    /// Other errors, as the store gave them.
    pub errors: Vec<String>,
    /// Whether the key afterwards held the (one) winner's body.
    pub winner_kept: bool,
    /// Whether the key afterwards held some writer's body.
    pub someone_kept: bool,
}

impl RaceRound {
    /// A round that proves nothing either way: an error, or no winner
    /// while one writer's body stands, which is what a reply lost after
    /// the store applied the PUT looks like (the client retries and is
    /// refused by its own write). Only two winners prove a store wrong.
    pub fn inconclusive(&self) -> bool {
        self.wins <= 1 && (!self.errors.is_empty() || (self.wins == 0 && self.someone_kept))
    }
}

/// A race passes when `required` rounds were conclusive, and in each
/// exactly one writer won, every other was refused, and the winner's
/// body is what stayed. Two winners in any round fail it.
pub fn race(
    property: Property,
    writers: usize,
    required: usize,
    rounds: &[RaceRound],
) -> PropertyResult {
    let wins: Vec<usize> = rounds.iter().map(|r| r.wins).collect();
    let errors: Vec<&String> = rounds.iter().flat_map(|r| &r.errors).collect();
    let detail = format!(
        "{} rounds of {writers} writers, winners per round {wins:?}",
        rounds.len()
    );
    if let Some(round) = rounds.iter().position(|r| r.wins > 1) {
        return PropertyResult::new(
            property,
            Outcome::Fail,
            format!(
                "{detail}; {} writers all won round {}: the store checks the condition and then \
                 writes",
                rounds[round].wins,
                round + 1
            ),
        );
    }
    let conclusive: Vec<&RaceRound> = rounds.iter().filter(|r| !r.inconclusive()).collect();
    if conclusive.len() < required {
        let why = errors.first().map_or_else(
            || "a round had no winner while a writer's body stood (a lost reply?)".to_string(),
            |e| format!("{} errors, first: {e}", errors.len()),
        );
        return PropertyResult::new(property, Outcome::Inconclusive, format!("{detail}; {why}"));
    }
    if conclusive.iter().all(|r| r.unsupported == writers) {
        // `file://` cannot update in place; SlateDB's GC boundary files
        // are off there. A store without create-only PUTs has no such
        // way out.
        return match property {
            Property::AtomicUpdate => PropertyResult::new(
                property,
                Outcome::NotApplicable,
                "the store does not update in place (If-Match); nothing sleet runs there asks it to",
            ),
            _ => PropertyResult::new(
                property,
                Outcome::Fail,
                "the store does not offer create-only PUTs (If-None-Match: *)",
            ),
        };
    }
    let bad = conclusive
        .iter()
        .position(|r| r.wins != 1 || r.refused + 1 != writers || !r.winner_kept);
    match bad {
        None => PropertyResult::new(property, Outcome::Pass, detail),
        Some(i) => {
            let round = conclusive[i];
            let why = if round.wins == 0 {
                format!(
                    "no writer won round {}: the store refused every conditional PUT",
                    i + 1
                )
            } else {
                format!(
                    "round {}: the key does not hold the winner's body afterwards",
                    i + 1
                )
            };
            PropertyResult::new(property, Outcome::Fail, format!("{detail}; {why}"))
        }
    }
}

/// ETags as each request returned them for one unchanged object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeenEtags {
    pub put: Option<String>,
    pub head: Option<String>,
    pub get: Option<String>,
    pub list: Option<String>,
}

/// ETags pass when PUT, HEAD and GET return the same quoted value and
/// LIST's matches it with or without quotes (Azure's and GCS's listings
/// leave them out).
pub fn etags(seen: &SeenEtags) -> PropertyResult {
    let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
    let detail = format!(
        "PUT {}, HEAD {}, GET {}, LIST {}",
        shown(&seen.put),
        shown(&seen.head),
        shown(&seen.get),
        shown(&seen.list)
    );
    let fail =
        |why: &str| PropertyResult::new(Property::Etag, Outcome::Fail, format!("{detail}: {why}"));
    let (Some(put), Some(head), Some(get)) = (&seen.put, &seen.head, &seen.get) else {
        return fail("a request returned no ETag");
    };
    if put != head || head != get {
        return fail("the ETag of one unchanged object differs between requests");
    }
    let quoted =
        |e: &str| e.len() >= 2 && e.starts_with('"') && e.ends_with('"') || e.starts_with("W/\"");
    if !quoted(put) {
        return fail("unquoted: HTTP ETags are quoted strings (RFC 9110)");
    }
    if let Some(list) = &seen.list
        && list.trim_matches('"') != put.trim_matches('"')
    {
        return fail("LIST's ETag differs from the object's");
    }
    PropertyResult::new(Property::Etag, Outcome::Pass, detail)
}

/// The store's clock minus this machine's, from `LastModified`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClockSkew {
    /// The estimate, in seconds: positive when the store runs ahead.
    pub seconds: f64,
    /// How far the truth may lie from the estimate, in seconds (stores
    /// give `LastModified` to the second).
    pub uncertainty_seconds: f64,
    /// The bound the check held it to, in seconds.
    pub bound_seconds: f64,
}

impl ClockSkew {
    /// Whether the skew is certainly beyond the bound.
    pub fn beyond_bound(&self) -> bool {
        self.seconds.abs() - self.uncertainty_seconds > self.bound_seconds
    }
}

/// One write's timing: this machine's clock just before and just after
/// the PUT, and the `LastModified` the store gave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSample {
    pub before: DateTime<Utc>,
    pub after: DateTime<Utc>,
    pub last_modified: DateTime<Utc>,
}

/// The skew every sample allows: the store stamped each write somewhere
/// in `[before, after]` of this machine's time, and truncated it to
/// `resolution`; intersecting the samples' intervals narrows the skew.
pub fn clock_skew(
    samples: &[ClockSample],
    resolution: Duration,
    bound: Duration,
) -> Option<ClockSkew> {
    let resolution = resolution.as_secs_f64();
    let secs = |d: chrono::TimeDelta| d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6;
    let (low, high) = samples.iter().fold((f64::MIN, f64::MAX), |(low, high), s| {
        let low_here = secs(s.last_modified - s.after);
        let high_here = secs(s.last_modified - s.before) + resolution;
        (low.max(low_here), high.min(high_here))
    });
    if samples.is_empty() {
        return None;
    }
    // Intervals that do not meet mean the store's clock jumped between
    // samples; the widest honest answer is then their hull's middle.
    let (low, high) = if low <= high {
        (low, high)
    } else {
        (high, low)
    };
    Some(ClockSkew {
        seconds: (low + high) / 2.0,
        uncertainty_seconds: (high - low) / 2.0,
        bound_seconds: bound.as_secs_f64(),
    })
}

/// The clock property: a warning when the skew is certainly beyond the
/// bound.
pub fn clock(skew: Option<&ClockSkew>) -> PropertyResult {
    match skew {
        // Every HEAD carries LastModified: no sample means the writes
        // meant to give one failed, which proves nothing.
        None => PropertyResult::new(
            Property::Clock,
            Outcome::Inconclusive,
            "no timed write came back to compare with",
        ),
        Some(s) => {
            let detail = format!(
                "store minus this machine: {:+.1} s (±{:.1} s), bound {:.1} s",
                s.seconds, s.uncertainty_seconds, s.bound_seconds
            );
            let outcome = if s.beyond_bound() {
                Outcome::Fail
            } else {
                Outcome::Pass
            };
            PropertyResult::new(Property::Clock, outcome, detail)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' races need one conclusive round.
    const ROUNDS: usize = 1;

    fn round(wins: usize, refused: usize) -> RaceRound {
        RaceRound {
            wins,
            refused,
            winner_kept: true,
            ..RaceRound::default()
        }
    }

    #[test]
    fn a_race_needs_one_winner_every_round() {
        let ok = race(Property::AtomicCreate, 4, 2, &[round(1, 3), round(1, 3)]);
        assert_eq!(ok.outcome, Outcome::Pass);
        let lost = race(
            Property::AtomicCreate,
            4,
            ROUNDS,
            &[round(1, 3), round(3, 1)],
        );
        assert_eq!(lost.outcome, Outcome::Fail);
        assert!(
            lost.detail.contains("3 writers all won round 2"),
            "{}",
            lost.detail
        );
        let none = race(Property::AtomicUpdate, 4, ROUNDS, &[round(0, 4)]);
        assert!(none.detail.contains("refused every"), "{}", none.detail);
        let mut lost_reply = round(0, 4);
        lost_reply.someone_kept = true;
        assert_eq!(
            race(Property::AtomicCreate, 4, ROUNDS, &[lost_reply]).outcome,
            Outcome::Inconclusive
        );
        let failing = RaceRound {
            errors: vec!["connection reset".into()],
            ..round(1, 2)
        };
        assert_eq!(
            race(
                Property::AtomicCreate,
                4,
                ROUNDS,
                std::slice::from_ref(&failing)
            )
            .outcome,
            Outcome::Inconclusive
        );
        assert_eq!(
            race(Property::AtomicCreate, 4, ROUNDS, &[failing, round(2, 2)]).outcome,
            Outcome::Fail,
            "two winners are proof whatever else happened"
        );
        let mut overwritten = round(1, 3);
        overwritten.winner_kept = false;
        assert_eq!(
            race(Property::AtomicUpdate, 4, ROUNDS, &[overwritten]).outcome,
            Outcome::Fail
        );
        let unsupported = RaceRound {
            unsupported: 4,
            ..RaceRound::default()
        };
        assert_eq!(
            race(
                Property::AtomicUpdate,
                4,
                ROUNDS,
                std::slice::from_ref(&unsupported)
            )
            .outcome,
            Outcome::NotApplicable
        );
        assert_eq!(
            race(Property::AtomicCreate, 4, ROUNDS, &[unsupported]).outcome,
            Outcome::Fail,
            "create-only PUTs are needed everywhere"
        );
    }

    #[test]
    fn etags_must_be_quoted_and_stable() {
        let q = |s: &str| Some(s.to_string());
        let good = SeenEtags {
            put: q("\"a\""),
            head: q("\"a\""),
            get: q("\"a\""),
            list: q("a"),
        };
        assert_eq!(etags(&good).outcome, Outcome::Pass);
        let unquoted = SeenEtags {
            put: q("a"),
            head: q("a"),
            get: q("a"),
            list: q("a"),
        };
        assert!(etags(&unquoted).detail.contains("unquoted"));
        let unstable = SeenEtags {
            head: q("\"b\""),
            ..good.clone()
        };
        assert_eq!(etags(&unstable).outcome, Outcome::Fail);
    }

    #[test]
    fn skew_narrows_over_samples_and_is_judged_against_the_bound() {
        let t = |s: f64| DateTime::<Utc>::from_timestamp_micros((s * 1e6) as i64).unwrap();
        // The store runs 120 s behind; writes take 0.2 s; LastModified is
        // truncated to the second.
        let samples: Vec<ClockSample> = [1000.3, 1001.7, 1003.1]
            .iter()
            .map(|&local| ClockSample {
                before: t(local),
                after: t(local + 0.2),
                last_modified: t((local + 0.1 - 120.0_f64).floor()),
            })
            .collect();
        let skew = clock_skew(&samples, Duration::from_secs(1), DEFAULT_SKEW_BOUND).unwrap();
        assert!((skew.seconds + 120.0).abs() < 1.0, "{skew:?}");
        assert!(skew.uncertainty_seconds <= 0.6, "{skew:?}");
        assert!(skew.beyond_bound());
        assert_eq!(clock(Some(&skew)).outcome, Outcome::Fail);
        let agreeing: Vec<ClockSample> = samples
            .iter()
            .map(|s| ClockSample {
                last_modified: s.last_modified + chrono::TimeDelta::seconds(120),
                ..*s
            })
            .collect();
        let skew = clock_skew(&agreeing, Duration::from_secs(1), DEFAULT_SKEW_BOUND).unwrap();
        assert!(!skew.beyond_bound(), "{skew:?}");
    }

    #[test]
    fn the_bound_follows_the_heartbeat_and_min_age() {
        let s = Duration::from_secs;
        assert_eq!(skew_bound(s(10), s(30), s(300)), DEFAULT_SKEW_BOUND);
        assert_eq!(skew_bound(s(10), s(30), s(4)), s(2));
    }
}
