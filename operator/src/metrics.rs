//! Prometheus metrics (`prometheus-client`), prefix `strata_operator_`. Labels are bounded: kind
//! (eleven values), result, Ready reason, HTTP method and status code — never a name or namespace.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::index::Index;
use crate::kind::Kind;

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
pub struct ArmLabels {
    pub method: String,
    pub code: String,
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

/// Every metric the operator exports.
pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ResultLabels, Counter>,
    pub reconcile_seconds: Family<KindLabels, Histogram, fn() -> Histogram>,
    pub errors: Family<ReasonLabels, Counter>,
    pub arm_requests: Family<ArmLabels, Counter>,
    pub throttle_waits: Counter,
    pub time_to_ready_seconds: Family<KindLabels, Histogram, fn() -> Histogram>,
    objects: Family<StateLabels, Gauge>,
    /// Serialises scrapes (the object gauges are recomputed for each).
    scrape: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("strata_operator");
        let reconciles = Family::<ResultLabels, Counter>::default();
        let reconcile_seconds =
            Family::<KindLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                seconds_histogram,
            );
        let errors = Family::<ReasonLabels, Counter>::default();
        let arm_requests = Family::<ArmLabels, Counter>::default();
        let throttle_waits = Counter::default();
        let time_to_ready_seconds =
            Family::<KindLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                seconds_histogram,
            );
        let objects = Family::<StateLabels, Gauge>::default();
        registry.register(
            "reconcile",
            "Reconciles by kind and result",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration by kind",
            reconcile_seconds.clone(),
        );
        registry.register(
            "errors",
            "Reconciles that ended with an error Ready reason",
            errors.clone(),
        );
        registry.register(
            "arm_requests",
            "ARM requests by method and HTTP status code",
            arm_requests.clone(),
        );
        registry.register(
            "arm_throttle_waits",
            "ARM requests that waited for a rate-limit token",
            throttle_waits.clone(),
        );
        registry.register(
            "time_to_ready_seconds",
            "From creation to first Ready, by kind",
            time_to_ready_seconds.clone(),
        );
        registry.register(
            "objects",
            "Cloud CRs by kind and Ready state",
            objects.clone(),
        );
        Metrics {
            registry,
            reconciles,
            reconcile_seconds,
            errors,
            arm_requests,
            throttle_waits,
            time_to_ready_seconds,
            objects,
            scrape: Mutex::new(()),
        }
    }
}

impl Metrics {
    pub fn reconciled(&self, kind: Kind, result: &str, took: Duration) {
        let k = kind.label().to_owned();
        self.reconciles
            .get_or_create(&ResultLabels {
                kind: k.clone(),
                result: result.to_owned(),
            })
            .inc();
        self.reconcile_seconds
            .get_or_create(&KindLabels { kind: k })
            .observe(took.as_secs_f64());
    }

    pub fn error_reason(&self, kind: Kind, reason: &str) {
        self.errors
            .get_or_create(&ReasonLabels {
                kind: kind.label().to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn arm_request(&self, method: &str, code: u16) {
        self.arm_requests
            .get_or_create(&ArmLabels {
                method: method.to_owned(),
                code: code.to_string(),
            })
            .inc();
    }

    pub fn ready_after(&self, kind: Kind, since_creation: Duration) {
        self.time_to_ready_seconds
            .get_or_create(&KindLabels {
                kind: kind.label().to_owned(),
            })
            .observe(since_creation.as_secs_f64());
    }

    /// The exposition text, with the object gauges taken from the readiness index now.
    pub fn encode(&self, index: &Index) -> String {
        let _guard = self
            .scrape
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.objects.clear();
        for ((kind, ready), n) in index.counts() {
            let labels = StateLabels {
                kind: kind.label().to_owned(),
                ready: ready.to_string(),
            };
            self.objects.get_or_create(&labels).set(n);
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
