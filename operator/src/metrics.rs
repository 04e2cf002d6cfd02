//! The operator's metrics: the controller metrics every Strata binary exports
//! ([`strata_runtime::metrics`], prefix `strata_operator_`) plus ARM requests by method and
//! status code and ARM throttle waits. Labels are bounded: kind (one per registered kind), result, Ready
//! reason, HTTP method and status code — never a name or namespace.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use strata_runtime::metrics::{ControllerMetrics, ObjectCounts};

use crate::index::Index;
use crate::kind::CloudKind;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ArmLabels {
    pub method: String,
    pub code: String,
}

/// Every metric the operator exports.
pub struct Metrics {
    pub common: Arc<ControllerMetrics>,
    pub arm_requests: Family<ArmLabels, Counter>,
    pub throttle_waits: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let arm_requests = Family::<ArmLabels, Counter>::default();
        let throttle_waits = Counter::default();
        let (a, t) = (arm_requests.clone(), throttle_waits.clone());
        let common = ControllerMetrics::new("strata_operator", |r| {
            r.register(
                "arm_requests",
                "ARM requests by method and HTTP status code",
                a,
            );
            r.register(
                "arm_throttle_waits",
                "ARM requests that waited for a rate-limit token",
                t,
            );
        });
        Metrics {
            common: Arc::new(common),
            arm_requests,
            throttle_waits,
        }
    }
}

impl Metrics {
    pub fn reconciled(&self, kind: CloudKind, result: &str, took: Duration) {
        self.common.reconciled(kind.as_str(), result, took);
    }

    pub fn error_reason(&self, kind: CloudKind, reason: &str) {
        self.common.error_reason(kind.as_str(), reason);
    }

    pub fn ready_after(&self, kind: CloudKind, since_creation: Duration) {
        self.common.ready_after(kind.as_str(), since_creation);
    }

    pub fn arm_request(&self, method: &str, code: u16) {
        self.arm_requests
            .get_or_create(&ArmLabels {
                method: method.to_owned(),
                code: code.to_string(),
            })
            .inc();
    }

    /// Count objects from this readiness index at each scrape (the index of the running term).
    pub fn count_objects_of(&self, index: Arc<Index>) {
        self.common.set_object_counter(move || {
            let mut counts = ObjectCounts::new();
            for ((kind, ready), n) in index.counts() {
                let state = if ready { "True" } else { "False" };
                *counts.entry((kind.as_str(), state)).or_default() += n;
            }
            counts
        });
    }

    /// The exposition text.
    pub fn encode(&self) -> String {
        self.common.encode()
    }
}
