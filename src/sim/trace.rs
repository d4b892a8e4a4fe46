//! The event trace of one simulated run: every store request each node
//! made (and how it ended) and every fault the driver injected, in order,
//! with virtual timestamps. Its hash is the run's fingerprint: the same
//! seed gives the same hash, or the simulation is not deterministic.

use std::collections::VecDeque;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// How many of the last events a report keeps.
pub const KEPT_EVENTS: usize = 200;

/// A running hash of every event, and the last [`KEPT_EVENTS`] of them.
#[derive(Debug, Default)]
pub struct Trace {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    hash: Sha256,
    count: u64,
    last: VecDeque<String>,
    /// Every event, when the run was asked to print them.
    all: Option<Vec<String>>,
}

impl Trace {
    /// A trace that also keeps every event (`--trace`).
    pub fn keeping_all() -> Trace {
        let trace = Trace::default();
        trace.inner.lock().expect("trace lock").all = Some(Vec::new());
        trace
    }

    /// Records one event, stamped `at` milliseconds into the run.
    pub fn record(&self, at: u64, event: impl AsRef<str>) {
        let line = format!("{at:>10} {}", event.as_ref());
        let mut inner = self.inner.lock().expect("trace lock");
        inner.hash.update(line.as_bytes());
        inner.hash.update(b"\n");
        inner.count += 1;
        if inner.last.len() == KEPT_EVENTS {
            inner.last.pop_front();
        }
        inner.last.push_back(line.clone());
        if let Some(all) = inner.all.as_mut() {
            all.push(line);
        }
    }

    /// The hash of every event so far, as 16 hex digits.
    pub fn hash(&self) -> String {
        let inner = self.inner.lock().expect("trace lock");
        hex::encode(&inner.hash.clone().finalize()[..8])
    }

    pub fn count(&self) -> u64 {
        self.inner.lock().expect("trace lock").count
    }

    /// The last events, oldest first.
    pub fn last(&self) -> Vec<String> {
        self.inner
            .lock()
            .expect("trace lock")
            .last
            .iter()
            .cloned()
            .collect()
    }

    /// Every event, if the trace keeps them.
    pub fn all(&self) -> Option<Vec<String>> {
        self.inner.lock().expect("trace lock").all.clone()
    }
}
