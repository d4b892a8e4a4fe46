//! Learning the epoch a coordinator claimed, at the moment it claims it.
//!
//! SlateDB's `Compactor::run` claims the epoch and then runs until stopped,
//! with no hook in between; but right after a successful claim it sets its
//! `slatedb.compactor.epoch` gauge. A recorder that watches that one gauge
//! tells the fleet its epoch as soon as it holds it, so it can record it
//! before anyone else looks.

use std::sync::Arc;

use slatedb::compactor::stats::COMPACTOR_EPOCH;
use slatedb_common::metrics::{
    CounterFn, GaugeFn, HistogramFn, MetricsRecorder, NoopMetricsRecorder, UpDownCounterFn,
};
use tokio::sync::watch;

/// A metrics recorder that reports the compactor epoch, and passes every
/// metric (the epoch too) on to another recorder (the node's metrics).
#[derive(Clone)]
pub struct ClaimWatch {
    epoch: watch::Sender<Option<u64>>,
    rest: Arc<dyn MetricsRecorder>,
}

impl Default for ClaimWatch {
    fn default() -> Self {
        ClaimWatch::forwarding(Arc::new(NoopMetricsRecorder::new()))
    }
}

impl ClaimWatch {
    /// Watches the epoch and passes everything on to `rest`.
    pub fn forwarding(rest: Arc<dyn MetricsRecorder>) -> Self {
        ClaimWatch {
            epoch: watch::Sender::new(None),
            rest,
        }
    }

    /// The epoch the coordinator holds, if it has claimed one.
    pub fn held(&self) -> Option<u64> {
        *self.epoch.borrow()
    }

    /// Waits for the coordinator to hold an epoch, and returns it.
    pub async fn claimed(&self) -> u64 {
        let mut rx = self.epoch.subscribe();
        let held = rx
            .wait_for(Option::is_some)
            .await
            .expect("the sender lives in self");
        held.expect("waited for Some")
    }
}

struct EpochGauge(watch::Sender<Option<u64>>, Arc<dyn GaugeFn>);

impl GaugeFn for EpochGauge {
    fn set(&self, value: i64) {
        self.1.set(value);
        if let Ok(epoch) = u64::try_from(value) {
            self.0.send_replace(Some(epoch));
        }
    }
}

impl MetricsRecorder for ClaimWatch {
    fn register_counter(
        &self,
        name: &str,
        description: &str,
        labels: &[(&str, &str)],
    ) -> Arc<dyn CounterFn> {
        self.rest.register_counter(name, description, labels)
    }

    fn register_gauge(
        &self,
        name: &str,
        description: &str,
        labels: &[(&str, &str)],
    ) -> Arc<dyn GaugeFn> {
        let forwarded = self.rest.register_gauge(name, description, labels);
        if name == COMPACTOR_EPOCH {
            Arc::new(EpochGauge(self.epoch.clone(), forwarded))
        } else {
            forwarded
        }
    }

    fn register_up_down_counter(
        &self,
        name: &str,
        description: &str,
        labels: &[(&str, &str)],
    ) -> Arc<dyn UpDownCounterFn> {
        self.rest
            .register_up_down_counter(name, description, labels)
    }

    fn register_histogram(
        &self,
        name: &str,
        description: &str,
        labels: &[(&str, &str)],
        boundaries: &[f64],
    ) -> Arc<dyn HistogramFn> {
        self.rest
            .register_histogram(name, description, labels, boundaries)
    }
}
