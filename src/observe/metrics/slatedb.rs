//! SlateDB's own metrics (GC deletions, compaction bytes and the rest),
//! taken through the `MetricsRecorder` its builders accept and exported
//! beside sleet's: `slatedb.gc.deleted_count` becomes
//! `slatedb_gc_deleted_count`, with SlateDB's labels plus `database`.
//!
//! Histograms (most of SlateDB's series, one per bucket) are always summed
//! per node. Counters and up/down counters sum correctly across databases;
//! a gauge SlateDB *sets* (the compactor epoch) means something only per
//! database, so without a database label it is not exported.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use slatedb_common::metrics::{CounterFn, GaugeFn, HistogramFn, MetricsRecorder, UpDownCounterFn};

use super::Metrics;

type Labels = Vec<(String, String)>;

/// Histogram buckets as SlateDB declared them for one metric.
#[derive(Debug, Clone)]
struct Buckets(Vec<f64>);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

/// One SlateDB metric name, registered once per node; each database's
/// registration is a label set in it.
#[derive(Clone)]
enum SlateFamily {
    Counter(Family<Labels, Counter>),
    Gauge(Family<Labels, Gauge>),
    Histogram(Family<Labels, Histogram, Buckets>),
}

/// The families registered so far, by exported name.
#[derive(Default)]
pub(super) struct SlateFamilies(Mutex<HashMap<String, SlateFamily>>);

/// A recorder for one database's SlateDB services on this node.
pub struct SlateDbRecorder {
    metrics: Arc<Metrics>,
    database: String,
}

impl SlateDbRecorder {
    pub fn new(metrics: Arc<Metrics>, database_url: &str) -> Self {
        let database = metrics.slatedb_database_label(database_url);
        SlateDbRecorder { metrics, database }
    }

    fn labels(&self, labels: &[(&str, &str)], database: &str) -> Labels {
        let mut all: Labels = labels
            .iter()
            .map(|(k, v)| (exported_name(k), v.to_string()))
            .collect();
        all.push(("database".into(), database.to_string()));
        all
    }

    fn per_database(&self, labels: &[(&str, &str)]) -> Labels {
        self.labels(labels, &self.database)
    }

    /// The family for `name`, registered on first use. A name SlateDB
    /// used before with another kind of metric gets `None` (its values
    /// are dropped rather than exported under a wrong type).
    fn family(
        &self,
        name: &str,
        description: &str,
        make: impl FnOnce() -> SlateFamily,
    ) -> Option<SlateFamily> {
        let name = exported_name(name);
        let mut families = self
            .metrics
            .slatedb
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = families.get(&name) {
            return Some(existing.clone());
        }
        let family = make();
        let mut registry = self.metrics.registry();
        match &family {
            SlateFamily::Counter(f) => registry.register(&name, description, f.clone()),
            SlateFamily::Gauge(f) => registry.register(&name, description, f.clone()),
            SlateFamily::Histogram(f) => registry.register(&name, description, f.clone()),
        }
        families.insert(name, family.clone());
        Some(family)
    }
}

/// `slatedb.gc.deleted_count` → `slatedb_gc_deleted_count`: anything
/// outside `[a-zA-Z0-9_]` becomes `_`, as Prometheus names require.
fn exported_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

struct CounterHandle(Counter);
impl CounterFn for CounterHandle {
    fn increment(&self, value: u64) {
        self.0.inc_by(value);
    }
}

struct GaugeHandle(Gauge);
impl GaugeFn for GaugeHandle {
    fn set(&self, value: i64) {
        self.0.set(value);
    }
}
impl UpDownCounterFn for GaugeHandle {
    fn increment(&self, value: i64) {
        self.0.inc_by(value);
    }
}

struct HistogramHandle(Histogram);
impl HistogramFn for HistogramHandle {
    fn record(&self, value: f64) {
        self.0.observe(value);
    }
}

/// Values of a metric that could not be exported.
struct Dropped;
impl CounterFn for Dropped {
    fn increment(&self, _: u64) {}
}
impl GaugeFn for Dropped {
    fn set(&self, _: i64) {}
}
impl UpDownCounterFn for Dropped {
    fn increment(&self, _: i64) {}
}
impl HistogramFn for Dropped {
    fn record(&self, _: f64) {}
}

impl MetricsRecorder for SlateDbRecorder {
    fn register_counter(
        &self,
        name: &str,
        description: &str,
        labels: &[(&str, &str)],
    ) -> Arc<dyn CounterFn> {
        // The encoder adds `_total` to counters; a name that has it already
        // would end in it twice.
        let name = name.strip_suffix("_total").unwrap_or(name);
        match self.family(
            name,
            description,
            || SlateFamily::Counter(Family::default()),
        ) {
            Some(SlateFamily::Counter(f)) => Arc::new(CounterHandle(
                f.get_or_create(&self.per_database(labels)).clone(),
            )),
            _ => Arc::new(Dropped),
        }
    }

    fn register_gauge(
        &self,
        name: &str,
        description: &str,
        labels: &[(&str, &str)],
    ) -> Arc<dyn GaugeFn> {
        if self.database.is_empty() {
            // Set by every database into one series: meaningless.
            return Arc::new(Dropped);
        }
        match self.family(name, description, || SlateFamily::Gauge(Family::default())) {
            Some(SlateFamily::Gauge(f)) => Arc::new(GaugeHandle(
                f.get_or_create(&self.per_database(labels)).clone(),
            )),
            _ => Arc::new(Dropped),
        }
    }

    fn register_up_down_counter(
        &self,
        name: &str,
        description: &str,
        labels: &[(&str, &str)],
    ) -> Arc<dyn UpDownCounterFn> {
        match self.family(name, description, || SlateFamily::Gauge(Family::default())) {
            Some(SlateFamily::Gauge(f)) => Arc::new(GaugeHandle(
                f.get_or_create(&self.per_database(labels)).clone(),
            )),
            _ => Arc::new(Dropped),
        }
    }

    fn register_histogram(
        &self,
        name: &str,
        description: &str,
        labels: &[(&str, &str)],
        boundaries: &[f64],
    ) -> Arc<dyn HistogramFn> {
        let buckets = Buckets(boundaries.to_vec());
        let make = || SlateFamily::Histogram(Family::new_with_constructor(buckets));
        match self.family(name, description, make) {
            // Summed per node at every detail: buckets per database would
            // be most of a node's series.
            Some(SlateFamily::Histogram(f)) => Arc::new(HistogramHandle(
                f.get_or_create(&self.labels(labels, "")).clone(),
            )),
            _ => Arc::new(Dropped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slatedb_metrics_are_exported_under_prometheus_names_per_database() {
        let metrics = Arc::new(Metrics::new(super::super::Detail::Database));
        let a = SlateDbRecorder::new(metrics.clone(), "s3://b/a");
        let b = SlateDbRecorder::new(metrics.clone(), "s3://b/b");
        a.register_counter(
            "slatedb.gc.deleted_count",
            "deleted",
            &[("resource", "sst")],
        )
        .increment(3);
        b.register_counter(
            "slatedb.gc.deleted_count",
            "deleted",
            &[("resource", "sst")],
        )
        .increment(4);
        a.register_histogram("slatedb.compactor.bytes", "bytes", &[], &[1.0, 10.0])
            .record(5.0);
        // Registered again as another kind: dropped, not mis-typed.
        a.register_gauge("slatedb.gc.deleted_count", "x", &[])
            .set(9);
        let text = metrics.encode();
        assert!(
            text.contains(
                "slatedb_gc_deleted_count_total{resource=\"sst\",database=\"s3://b/a\"} 3"
            ),
            "{text}"
        );
        assert!(text.contains("database=\"s3://b/b\"} 4"), "{text}");
        assert!(
            text.contains("slatedb_compactor_bytes_bucket{le=\"10.0\",database=\"\"}"),
            "histograms are summed per node: {text}"
        );
        assert!(!text.contains("} 9"), "{text}");
    }

    /// At the default detail nothing is per database: counters sum, and a
    /// gauge SlateDB sets (meaningless summed) is not exported.
    #[test]
    fn the_default_detail_sums_per_node() {
        let metrics = Arc::new(Metrics::default());
        for url in ["s3://b/a", "s3://b/b"] {
            let recorder = SlateDbRecorder::new(metrics.clone(), url);
            recorder
                .register_counter("slatedb.gc.count", "runs", &[])
                .increment(2);
            recorder
                .register_gauge("slatedb.compactor.epoch", "epoch", &[])
                .set(7);
            recorder
                .register_up_down_counter("slatedb.compactor.running", "running", &[])
                .increment(1);
        }
        let text = metrics.encode();
        assert!(
            text.contains("slatedb_gc_count_total{database=\"\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("slatedb_compactor_running{database=\"\"} 2"),
            "{text}"
        );
        assert!(!text.contains("slatedb_compactor_epoch"), "{text}");
    }

    #[test]
    fn names_become_prometheus_names() {
        assert_eq!(
            exported_name("slatedb.gc.deleted-count"),
            "slatedb_gc_deleted_count"
        );
        assert_eq!(exported_name("9lives"), "_9lives");
    }
}
