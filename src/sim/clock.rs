//! Simulated wall clocks. The store's clock is the simulation's epoch
//! plus tokio's (paused, virtual) elapsed time; each node's clock is the
//! store's plus its own skew, which the fault mix sets and jumps. Nothing
//! here reads the machine's clock, so a seed's run is the same run.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, TimeDelta, Utc};
use slatedb_common::clock::{SystemClock, SystemClockTicker};

use crate::plugin::hook::Clock;

/// The wall time every simulation starts at.
pub const EPOCH: &str = "2026-01-01T00:00:00Z";

/// Virtual wall time: the epoch plus the virtual time since the start.
#[derive(Debug, Clone)]
pub struct SimClock {
    epoch: DateTime<Utc>,
    start: tokio::time::Instant,
}

impl SimClock {
    /// Starts now (virtual time) at [`EPOCH`]. Call inside the runtime.
    pub fn start() -> SimClock {
        SimClock {
            epoch: EPOCH.parse().expect("the epoch parses"),
            start: tokio::time::Instant::now(),
        }
    }

    /// The store's time.
    pub fn now(&self) -> DateTime<Utc> {
        self.epoch + TimeDelta::from_std(self.start.elapsed()).expect("a simulation is short")
    }

    /// Milliseconds since the start: the trace's timestamps.
    pub fn millis(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// SlateDB's clock in a process whose wall clock is `offset_millis`
    /// off the store's (see [`SlateClock`]).
    pub fn slatedb(&self, offset_millis: i64) -> Arc<dyn SystemClock> {
        Arc::new(SlateClock {
            clock: self.clone(),
            offset: TimeDelta::milliseconds(offset_millis),
        })
    }

    /// A node's clock: this one plus `skew`, which may change as it runs.
    pub fn skewed(&self, skew: Arc<Skew>) -> Clock {
        let clock = self.clone();
        Arc::new(move || clock.now() + TimeDelta::milliseconds(skew.millis()))
    }
}

/// What SlateDB reads in a simulated process: like its
/// `DefaultSystemClock` (the wall time when the process started, moved on
/// by tokio's monotonic time), so its offset from the store's clock is
/// the process's skew when it opened the database, fixed from then on:
/// a later jump of the node's clock does not move it, as a real jump does
/// not move SlateDB's.
#[derive(Debug, Clone)]
pub struct SlateClock {
    clock: SimClock,
    offset: TimeDelta,
}

impl SystemClock for SlateClock {
    fn now(&self) -> DateTime<Utc> {
        self.clock.now() + self.offset
    }

    fn sleep<'a>(
        &'a self,
        duration: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(tokio::time::sleep(duration))
    }

    fn ticker<'a>(&'a self, duration: std::time::Duration) -> SystemClockTicker<'a> {
        SystemClockTicker::new(self, duration)
    }
}

/// A node's clock offset from the store's, in milliseconds.
#[derive(Debug, Default)]
pub struct Skew(AtomicI64);

impl Skew {
    pub fn set(&self, millis: i64) {
        self.0.store(millis, Ordering::Relaxed);
    }

    pub fn millis(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}
