//! Deterministic simulation of a fleet: real nodes, one process, one seed.
//!
//! `run` starts a fleet of real nodes (`daemon::run_node`: heartbeats,
//! config polls, ownership, store trust, supervisors, and SlateDB's GC,
//! coordinator and compaction workers for the databases each owns) and
//! one application writer per database (`app`: some detached, some on
//! SlateDB's defaults), each database mirrored to a second bucket, on a
//! single-threaded tokio runtime with paused
//! time and a seeded generator, over one in-memory store. Only what must
//! be is replaced: the clocks (`clock`: virtual, each node skewed its own
//! way; SlateDB's fixed at the skew its process opened with), randomness
//! (one seed, drawn from in order; SlateDB's components get seeds derived
//! from it through `DatabaseHandle::replaying`), the store (`store`:
//! object_store's in-memory store behind a fault layer) and process
//! boundaries (a crash drops a node's tasks and memory and leaves the
//! requests of SlateDB's tasks, which outlive an abort, waiting for good;
//! a restart is a new node with the same id). The fault mix (`FaultMix`)
//! crashes, restarts and pauses nodes, crashes writers, fails, slows and
//! loses replies to requests, skews and jumps clocks, cuts nodes off
//! from the fleet root, changes the fleet's config and registers and
//! removes databases while the fleet runs; each seed draws its own mix,
//! fleet, timings and held-open seams (`swarm`), and counts the coverage
//! marks it reaches (`model::coverage`, `marks`). After
//! the faults stop, `check` judges the invariants: ownership, every
//! acknowledged write, writers on SlateDB's defaults never fenced, and
//! every manifest's epochs (over the manifests `history` decodes); every
//! mirror restore point restores to a consistent prefix (`mirror`, also
//! while faults run, and `mirror verify` of each destination); no
//! deletion removed what a manifest or a live pin referenced
//! (`collect`); a destination another fleet owns stays untouched
//! (`foreign`). `controls` lists every planted switch with the run that
//! finds it. Every store request and every fault goes into
//! the run's `trace`, whose hash is the same for the same seed. See
//! docs/reliability.md, "Deterministic simulation".
//!
//! May import: every layer; nothing imports it but tests, benches and
//! `scripts/simulate`.

mod app;
mod check;
mod clock;
mod collect;
mod controls;
mod fleet;
mod foreign;
mod history;
mod inject;
mod marks;
mod mirror;
mod store;
mod swarm;
mod trace;
mod world;

use std::collections::BTreeSet;
use std::fmt;

pub use check::Violation;
pub use clock::{EPOCH, SimClock};
pub use controls::{CONTROLS, Control, control_of};
pub use fleet::{CONVERGENCE_BOUND, SimOptions, SimReport, run};
pub use store::{FaultLevels, NodeStore, SimStore};
pub use swarm::{Swarm, Timings};

pub use crate::model::coverage::Mark;
pub use trace::{KEPT_EVENTS, Trace};

pub use crate::model::planted::Planted;

/// One kind of fault the driver may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// A node's process dies (its tasks and memory go) and may restart.
    Crash,
    /// A node stops reaching the store for longer than the heartbeat
    /// timeout, then carries on as if nothing happened.
    Pause,
    /// Requests fail before the store sees them (503s).
    Errors,
    /// Requests are applied but their replies are lost.
    LostReplies,
    /// Requests take up to seconds.
    Slow,
    /// A node's clock is set off the store's, and jumps.
    Skew,
    /// The fleet config changes (which services databases run).
    Config,
    /// Databases are registered and removed.
    Registry,
    /// An application writer's process dies; the application reopens.
    WriterCrash,
    /// A node loses the fleet root (its heartbeats and config polls fail)
    /// but still reaches the databases: its peers take its work over
    /// while it goes on with what it ran, until the cut heals.
    Partition,
}

impl Fault {
    pub const ALL: [Fault; 10] = [
        Fault::Crash,
        Fault::Pause,
        Fault::Errors,
        Fault::LostReplies,
        Fault::Slow,
        Fault::Skew,
        Fault::Config,
        Fault::Registry,
        Fault::WriterCrash,
        Fault::Partition,
    ];

    /// The name `--faults` takes.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Crash => "crash",
            Fault::Pause => "pause",
            Fault::Errors => "503",
            Fault::LostReplies => "lost-reply",
            Fault::Slow => "slow",
            Fault::Skew => "skew",
            Fault::Config => "config",
            Fault::Registry => "registry",
            Fault::WriterCrash => "writer-crash",
            Fault::Partition => "partition",
        }
    }
}

/// The faults a run may inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultMix(pub BTreeSet<Fault>);

impl FaultMix {
    /// Every fault.
    pub fn all() -> FaultMix {
        FaultMix(Fault::ALL.into_iter().collect())
    }

    /// No fault: the fleet just runs.
    pub fn none() -> FaultMix {
        FaultMix(BTreeSet::new())
    }

    /// `all`, `none`, or names joined by commas (`crash,pause,503`).
    pub fn parse(text: &str) -> Result<FaultMix, String> {
        match text.trim() {
            "all" => return Ok(FaultMix::all()),
            "none" => return Ok(FaultMix::none()),
            _ => {}
        }
        let mut faults = BTreeSet::new();
        for name in text.split(',').map(str::trim) {
            let fault = by_name(&Fault::ALL, Fault::name, name, "fault")
                .map_err(|e| format!("{e}, or all, or none"))?;
            faults.insert(fault);
        }
        Ok(FaultMix(faults))
    }

    pub fn has(&self, fault: Fault) -> bool {
        self.0.contains(&fault)
    }
}

impl fmt::Display for FaultMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|fault| fault.name()).collect();
        write!(
            f,
            "{}",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(",")
            }
        )
    }
}

/// A planted bug by its `--plant` name.
pub fn planted_by_name(name: &str) -> Result<Planted, String> {
    by_name(&Planted::ALL, Planted::name, name, "planted bug")
}

/// The one of `all` called `name`, or an error that names every one.
fn by_name<T: Copy>(
    all: &[T],
    name_of: fn(T) -> &'static str,
    name: &str,
    what: &str,
) -> Result<T, String> {
    all.iter()
        .copied()
        .find(|t| name_of(*t) == name)
        .ok_or_else(|| {
            let known: Vec<&str> = all.iter().map(|t| name_of(*t)).collect();
            format!(
                "unknown {what} \"{name}\"; the known ones are {}",
                known.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_mixes_parse_and_unknown_names_are_refused() {
        assert_eq!(FaultMix::parse("all").unwrap(), FaultMix::all());
        assert_eq!(FaultMix::parse("none").unwrap(), FaultMix::none());
        let mix = FaultMix::parse("crash, 503").unwrap();
        assert!(mix.has(Fault::Crash) && mix.has(Fault::Errors) && !mix.has(Fault::Pause));
        assert_eq!(mix.to_string(), "crash,503");
        let refused = FaultMix::parse("crash,meteor").unwrap_err();
        assert!(refused.contains("unknown fault \"meteor\""), "{refused}");
        assert!(planted_by_name("dead-nodes-stay-live").is_ok());
        assert!(planted_by_name("nope").is_err());
    }
}
