//! Swarm runs: each seed draws its own fleet (nodes, databases), its own
//! fault mix out of the one asked for, its own timings (heartbeats, config
//! polls, GC, the mirror's pins and polls) and which seams hold for how
//! long (`model::seams`). One fixed configuration explores one corner of
//! the space; a swarm of them reaches the corners where a guard matters
//! (TigerBeetle's VOPR, FoundationDB's BUGGIFY).
//!
//! Every draw stays within what the fleet must survive and the judges
//! assume: timings only shorter than the defaults (so the convergence
//! bound holds), heartbeats at least three intervals to a timeout (so the
//! skews of `Fault::Skew` never age out a live node once the faults stop),
//! GC's `min_age` at least a minute for manifests (the safe bound with
//! boundary files).

use std::cell::Cell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

use super::{Fault, FaultMix};
use crate::model::seams::{Hook, Seam};
use crate::testing::Chaos;

/// Drawn per seed, from its own stream (the run's draws stay as they are).
const SWARM_STREAM: u64 = 0x5357_4152_4d00_0001;
const SEAM_STREAM: u64 = 0x5345_414d_0000_0001;

/// What a swarm seed runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swarm {
    pub nodes: usize,
    pub databases: usize,
    pub faults: FaultMix,
    /// Faults come one every 2 s to this long.
    pub fault_gap_max: Duration,
    pub timings: Timings,
    /// The seams that hold in this seed, each with its longest hold.
    pub seams: Vec<(Seam, Duration)>,
    /// The faults end with one node crashed for good (a mix with
    /// crashes, one seed in two).
    pub last_crash: bool,
    /// `db000`'s mirror destination is another fleet's (`sim::foreign`),
    /// one seed in three.
    pub foreign_destination: bool,
    /// The writers write twice as often into L0 files half the size,
    /// one seed in two: compactions, source GC and retention's deletions
    /// of compacted objects all happen within the run.
    pub busy_writers: bool,
}

/// The fleet's timings, written into its `sleet.toml` (`None`: default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timings {
    pub heartbeat_interval: Option<Duration>,
    pub heartbeat_timeout: Option<Duration>,
    pub config_poll: Option<Duration>,
    pub gc_interval: Option<Duration>,
    pub gc_min_age: Option<Duration>,
    pub mirror_poll: Option<Duration>,
    pub mirror_checkpoint_lifetime: Option<Duration>,
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

struct Draws(Chaos);

impl Draws {
    fn below(&mut self, n: u64) -> u64 {
        self.0.draw() % n.max(1)
    }
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
    /// A duration in seconds between `low` and `high`, half the time.
    fn sometimes(&mut self, low: u64, high: u64) -> Option<Duration> {
        (!self.chance(2)).then(|| secs(self.between(low, high)))
    }
}

impl Swarm {
    /// The swarm of `seed`, its faults drawn out of `pool`, its fleet
    /// between 3 and `max_nodes` nodes and 2 and `max_databases`
    /// databases.
    pub fn draw(seed: u64, pool: &FaultMix, max_nodes: usize, max_databases: usize) -> Swarm {
        let mut d = Draws(Chaos::with_seed(seed ^ SWARM_STREAM));
        let nodes = d.between(3, max_nodes.max(3) as u64) as usize;
        let databases = d.between(2.min(max_databases as u64), max_databases as u64) as usize;
        // Each fault of the pool in two seeds of three; never none of a
        // pool that has some.
        let mut faults: BTreeSet<Fault> = pool.0.iter().copied().filter(|_| !d.chance(3)).collect();
        if faults.is_empty()
            && let Some(any) = pool.0.iter().nth(d.below(pool.0.len() as u64) as usize)
        {
            faults.insert(*any);
        }
        let fault_gap_max = secs(d.between(8, 40));
        let heartbeat_timeout = d.between(12, 30);
        let heartbeat_interval = d.between(2, (heartbeat_timeout / 3).min(10));
        let shortened = !d.chance(3);
        let timings = if shortened {
            Timings {
                heartbeat_interval: Some(secs(heartbeat_interval)),
                heartbeat_timeout: Some(secs(heartbeat_timeout)),
                config_poll: d.sometimes(10, 60),
                // Frequent collections: GC racing pins and fresh
                // objects is what its safety settings are for.
                gc_interval: Some(secs(d.between(3, 30))),
                gc_min_age: d.sometimes(60, 300),
                mirror_poll: d.sometimes(1, 10),
                mirror_checkpoint_lifetime: d.sometimes(15, 90),
            }
        } else {
            Timings::default()
        };
        // A mirror's seams may hold past a short pin's lifetime; a node's
        // tick and a coordinator's start hold at most 30 s, so a hold
        // begun as the faults stop ends well within the convergence bound.
        let mut seams = Vec::new();
        for seam in Seam::ALL {
            let node_side = matches!(
                seam,
                Seam::BetweenOwnershipAndReconcile | Seam::BeforeCoordinatorStart
            );
            let choices: &[u64] = if node_side {
                &[1, 5, 30]
            } else {
                &[1, 5, 30, 90]
            };
            let longest = secs(choices[d.below(choices.len() as u64) as usize]);
            if d.chance(2) {
                seams.push((seam, longest));
            }
        }
        let last_crash = faults.contains(&Fault::Crash) && d.chance(2);
        let foreign_destination = d.chance(3);
        let busy_writers = d.chance(3);
        Swarm {
            busy_writers,
            foreign_destination,
            last_crash,
            nodes,
            databases,
            faults: FaultMix(faults),
            fault_gap_max,
            timings,
            seams,
        }
    }

    /// The seed's seam hook: each hold of an enabled seam, one time in
    /// three, lasts up to its longest hold, drawn from the seed. Holding
    /// is a fault: none once `faults_on` is false (the judges' bounds
    /// assume the fleet's own timings by then).
    pub fn seam_hook(&self, seed: u64, faults_on: Rc<Cell<bool>>) -> Hook {
        let seams = self.seams.clone();
        let mut chaos = Chaos::with_seed(seed ^ SEAM_STREAM);
        Box::new(move |seam| {
            if !faults_on.get() {
                return Duration::ZERO;
            }
            let Some((_, longest)) = seams.iter().find(|(s, _)| *s == seam) else {
                return Duration::ZERO;
            };
            if !chaos.draw().is_multiple_of(3) {
                return Duration::ZERO;
            }
            let millis = longest.as_millis() as u64;
            Duration::from_millis(chaos.draw() % (millis + 1))
        })
    }

    /// One line for the trace and the report.
    pub fn describe(&self) -> String {
        let seams: Vec<String> = self
            .seams
            .iter()
            .map(|(s, d)| format!("{}<={}s", s.name(), d.as_secs()))
            .collect();
        format!(
            "swarm nodes {} databases {} faults {}{}{}{} gap<={}s timings {:?} seams [{}]",
            self.nodes,
            self.databases,
            self.faults,
            if self.last_crash {
                " (last crash stays)"
            } else {
                ""
            },
            if self.foreign_destination {
                " foreign destination"
            } else {
                ""
            },
            if self.busy_writers {
                " busy writers"
            } else {
                ""
            },
            self.fault_gap_max.as_secs(),
            self.timings,
            seams.join(" ")
        )
    }
}

impl Timings {
    /// The `sleet.toml` lines that set them: `[node]`'s, then the
    /// `[database]` table's (`gc` and the mirror target's `extra`).
    pub fn node_table(&self) -> String {
        let mut text = String::new();
        for (key, value) in [
            ("heartbeat_interval", self.heartbeat_interval),
            ("heartbeat_timeout", self.heartbeat_timeout),
            ("config_poll", self.config_poll),
        ] {
            if let Some(value) = value {
                text.push_str(&format!("{key} = \"{}s\"\n", value.as_secs()));
            }
        }
        if text.is_empty() {
            text
        } else {
            format!("[node]\n{text}\n")
        }
    }

    /// `[database.gc.<dir>]` tables.
    pub fn gc_tables(&self) -> String {
        let mut text = String::new();
        for dir in ["manifest", "wal", "compacted", "compactions"] {
            let mut lines = String::new();
            if let Some(interval) = self.gc_interval {
                lines.push_str(&format!("interval = \"{}s\"\n", interval.as_secs()));
            }
            if let Some(min_age) = self.gc_min_age {
                lines.push_str(&format!("min_age = \"{}s\"\n", min_age.as_secs()));
            }
            if !lines.is_empty() {
                text.push_str(&format!("\n[database.gc.{dir}]\n{lines}"));
            }
        }
        text
    }

    /// Lines for the mirror target's table.
    pub fn mirror_lines(&self) -> String {
        let mut text = String::new();
        if let Some(poll) = self.mirror_poll {
            text.push_str(&format!("poll = \"{}s\"\n", poll.as_secs()));
        }
        if let Some(lifetime) = self.mirror_checkpoint_lifetime {
            text.push_str(&format!(
                "checkpoint_lifetime = \"{}s\"\n",
                lifetime.as_secs()
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_swarm_within_its_bounds() {
        let pool = FaultMix::all();
        for seed in 1..200 {
            let swarm = Swarm::draw(seed, &pool, 5, 10);
            assert_eq!(swarm, Swarm::draw(seed, &pool, 5, 10));
            assert!((3..=5).contains(&swarm.nodes) && (2..=10).contains(&swarm.databases));
            assert!(!swarm.faults.0.is_empty() && swarm.faults.0.is_subset(&pool.0));
            if let (Some(i), Some(t)) = (
                swarm.timings.heartbeat_interval,
                swarm.timings.heartbeat_timeout,
            ) {
                assert!(i * 3 <= t && t <= secs(30), "{i:?} {t:?}");
            }
        }
        let narrow = FaultMix::parse("crash").unwrap();
        assert_eq!(Swarm::draw(3, &narrow, 3, 1).faults, narrow);
        assert_ne!(Swarm::draw(1, &pool, 5, 10), Swarm::draw(2, &pool, 5, 10));
    }
}
