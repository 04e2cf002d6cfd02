//! The metrics every Strata controller exports (`prometheus-client`), under its own prefix
//! (`strata_operator_`, `strata_translator_`). Labels are bounded: kind, result, Ready reason,
//! Ready state — never a name or a namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub kind: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub kind: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub kind: String,
    pub ready: String,
}

fn seconds_histogram() -> Histogram {
    // 5 ms … ~80 s: a reconcile, or the time to Ready of a VM on a real clock.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

type Histograms = Family<KindLabels, Histogram, fn() -> Histogram>;

/// Counts of objects by (kind, Ready state), taken at scrape time from the controller's caches.
pub type ObjectCounts = BTreeMap<(&'static str, &'static str), i64>;

/// A reconcile that runs ([`ControllerMetrics::running`]); it ends when this is dropped, also
/// when the reconcile is.
pub struct Running(Gauge);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The controller metrics, plus whatever the binary registers besides (`extra`).
pub struct ControllerMetrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_seconds: Histograms,
    errors: Family<ReasonLabels, Counter>,
    time_to_ready_seconds: Histograms,
    objects: Family<StateLabels, Gauge>,
    queue_depth: Family<KindLabels, Gauge>,
    running: Family<KindLabels, Gauge>,
    leader: Gauge,
    /// Objects waiting for a reconcile, by kind (deduplicated as the controller's queue is).
    queued: Mutex<BTreeMap<&'static str, BTreeSet<String>>>,
    /// Refreshes the object gauges before each scrape.
    count_objects: Mutex<Option<Box<dyn Fn() -> ObjectCounts + Send + Sync>>>,
    /// Serialises scrapes (the object gauges are recomputed for each).
    scrape: Mutex<()>,
}

impl ControllerMetrics {
    /// `prefix` is e.g. `strata_operator`; `extra` registers the binary's own metrics.
    pub fn new(prefix: &str, extra: impl FnOnce(&mut Registry)) -> Self {
        let mut registry = Registry::with_prefix(prefix);
        let m = ControllerMetrics {
            reconciles: Family::default(),
            reconcile_seconds: Histograms::new_with_constructor(seconds_histogram),
            errors: Family::default(),
            time_to_ready_seconds: Histograms::new_with_constructor(seconds_histogram),
            objects: Family::default(),
            queue_depth: Family::default(),
            running: Family::default(),
            leader: Gauge::default(),
            queued: Mutex::default(),
            count_objects: Mutex::new(None),
            scrape: Mutex::new(()),
            registry: Registry::default(),
        };
        registry.register(
            "reconcile",
            "Reconciles by kind and result",
            m.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration by kind",
            m.reconcile_seconds.clone(),
        );
        registry.register(
            "errors",
            "Reconciles that ended with an error, by kind and Ready reason",
            m.errors.clone(),
        );
        registry.register(
            "time_to_ready_seconds",
            "From creation to first Ready, by kind",
            m.time_to_ready_seconds.clone(),
        );
        registry.register(
            "objects",
            "Objects by kind and Ready state (True, False, Unknown)",
            m.objects.clone(),
        );
        registry.register(
            "queue_depth",
            "Objects waiting for a reconcile, by kind",
            m.queue_depth.clone(),
        );
        registry.register(
            "reconciles_running",
            "Reconciles running now, by kind (at most the concurrency per kind): with an empty \
             queue and none running, a controller is idle",
            m.running.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds its lease (or runs without leader election)",
            m.leader.clone(),
        );
        extra(&mut registry);
        ControllerMetrics { registry, ..m }
    }

    pub fn reconciled(&self, kind: &str, result: &str, took: Duration) {
        self.reconciles
            .get_or_create(&ResultLabels {
                kind: kind.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        self.reconcile_seconds
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// A reconcile of `kind` starts: counted in `reconciles_running` until the guard is dropped
    /// (after its `reconciled`, so that an idle controller has counted every reconcile).
    pub fn running(&self, kind: &str) -> Running {
        let gauge = self
            .running
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .clone();
        gauge.inc();
        Running(gauge)
    }

    pub fn error_reason(&self, kind: &str, reason: &str) {
        self.errors
            .get_or_create(&ReasonLabels {
                kind: kind.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn ready_after(&self, kind: &str, since_creation: Duration) {
        self.time_to_ready_seconds
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .observe(since_creation.as_secs_f64());
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// An object was put on the controller's queue (a watch event or a wake-up).
    pub fn queued(&self, kind: &'static str, key: String) {
        let mut q = self.queued.lock().unwrap_or_else(|p| p.into_inner());
        let set = q.entry(kind).or_default();
        set.insert(key);
        self.depth(kind, set.len());
    }

    /// A reconcile of the object started: it left the queue.
    pub fn dequeued(&self, kind: &'static str, key: &str) {
        let mut q = self.queued.lock().unwrap_or_else(|p| p.into_inner());
        let set = q.entry(kind).or_default();
        set.remove(key);
        self.depth(kind, set.len());
    }

    fn depth(&self, kind: &str, n: usize) {
        self.queue_depth
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// How to count objects by kind and Ready state at scrape time.
    pub fn set_object_counter(&self, count: impl Fn() -> ObjectCounts + Send + Sync + 'static) {
        *self.count_objects.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(count));
    }

    /// The exposition text, with the object gauges recomputed now.
    pub fn encode(&self) -> String {
        let _guard = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        self.objects.clear();
        if let Some(count) = &*self.count_objects.lock().unwrap_or_else(|p| p.into_inner()) {
            for ((kind, ready), n) in count() {
                let labels = StateLabels {
                    kind: kind.to_owned(),
                    ready: ready.to_owned(),
                };
                self.objects.get_or_create(&labels).set(n);
            }
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn exposition_has_the_prefix_bounded_labels_and_the_extra_metrics() {
        let extra = Counter::<u64>::default();
        let e = extra.clone();
        let m = ControllerMetrics::new("strata_test", |r| {
            r.register("extra", "An extra counter", e);
        });
        extra.inc();
        m.reconciled("AzureCluster", "applied", Duration::from_millis(20));
        m.error_reason("AzureCluster", "InvalidSpec");
        m.queued("AzureCluster", "ns/a".into());
        m.queued("AzureCluster", "ns/a".into());
        m.queued("AzureCluster", "ns/b".into());
        m.dequeued("AzureCluster", "ns/a");
        let running = m.running("AzureCluster");
        assert!(
            m.encode()
                .contains("strata_test_reconciles_running{kind=\"AzureCluster\"} 1")
        );
        drop(running);
        m.set_object_counter(|| [(("AzureCluster", "True"), 3)].into());
        let text = m.encode();
        for line in [
            "strata_test_reconcile_total{kind=\"AzureCluster\",result=\"applied\"} 1",
            "strata_test_errors_total{kind=\"AzureCluster\",reason=\"InvalidSpec\"} 1",
            "strata_test_queue_depth{kind=\"AzureCluster\"} 1",
            "strata_test_reconciles_running{kind=\"AzureCluster\"} 0",
            "strata_test_objects{kind=\"AzureCluster\",ready=\"True\"} 3",
            "strata_test_extra_total 1",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("ns/"), "no object names in labels");
    }
}
