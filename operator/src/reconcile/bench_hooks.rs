//! The hooks through which `strata-bench` runs its model of another operator (Azure Service
//! Operator v2's defaults, `strata-e2e`'s `aso` module) on this same loop, so that both sides
//! run the same observe → decide → act → report against the same emulator and differ only in
//! these decisions. Compiled only with the `bench-hooks` feature, which `strata-e2e` turns on
//! and no build a user runs does: the operator's own binary has none of these switches.

use std::fmt::Debug;
use std::time::Duration;

use super::pacing::StrataPacing;
use crate::kind::CloudKind;

/// The decisions about time the loop asks of its pacing. `key` is the object's
/// `<namespace>/<CloudKind>/<name>`.
pub trait Pacing: Debug + Send + Sync {
    /// A CR's owner or a reference is not usable yet. `None`: register it with the readiness
    /// index, to be woken when that changes; `Some(d)`: nothing wakes it, look again after `d`.
    fn dependency_wait(&self, key: &str) -> Option<Duration>;
    /// The CR's dependencies are usable: its next wait starts from the beginning.
    fn dependencies_ready(&self, key: &str);
    /// When to retry after a transient failure (the controller's error policy).
    fn failure_backoff(&self, key: &str) -> Duration;
    /// The CR reached a good state (Ready, or its finalizer removed): its failures are forgotten.
    fn succeeded(&self, key: &str);
    /// When a Ready resource is looked at again (the resync).
    fn resync(&self) -> Duration;
    /// Whether that resync PUTs the desired body whatever Azure holds (Strata compares first).
    fn resync_puts(&self) -> bool;
    /// When to look at a running operation again, given the `Retry-After` ARM answered the
    /// write with, if any.
    fn operation_poll(&self, key: &str, retry_after: Option<Duration>) -> Duration;
    /// Our PUT started creating `key`, of `kind`, and ARM answered that it runs on.
    fn creation_started(&self, _key: &str, _kind: CloudKind) {}
    /// `key` was seen Ready (after a creation, if one was started); comes before `succeeded`.
    fn creation_seen_done(&self, _key: &str) {}
    /// Whether ARM requests go through the operator's client-side token buckets
    /// ([`crate::throttle`]); without them the reconciler meets ARM's 429s.
    fn client_throttle(&self) -> bool;
}

/// Strata's own pacing, as the benchmark's Strata side runs it: woken by the readiness index,
/// comparing before it writes, keeping ARM's rate client-side.
impl Pacing for StrataPacing {
    fn dependency_wait(&self, _key: &str) -> Option<Duration> {
        None
    }

    fn dependencies_ready(&self, _key: &str) {}

    fn failure_backoff(&self, key: &str) -> Duration {
        StrataPacing::failure_backoff(self, key)
    }

    fn succeeded(&self, key: &str) {
        StrataPacing::succeeded(self, key)
    }

    fn resync(&self) -> Duration {
        StrataPacing::resync(self)
    }

    fn resync_puts(&self) -> bool {
        false
    }

    fn operation_poll(&self, key: &str, retry_after: Option<Duration>) -> Duration {
        StrataPacing::operation_poll(self, key, retry_after)
    }

    fn creation_started(&self, key: &str, kind: CloudKind) {
        StrataPacing::creation_started(self, key, kind)
    }

    fn creation_seen_done(&self, key: &str) {
        StrataPacing::creation_seen_done(self, key)
    }

    fn client_throttle(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::Timing;

    #[test]
    fn strata_is_woken_compares_before_writing_and_keeps_arms_rate() {
        let p: &dyn Pacing = &StrataPacing::new(Timing::default());
        assert_eq!(p.dependency_wait("ns/Subnet/a"), None);
        assert!(!p.resync_puts());
        assert!(p.client_throttle());
    }
}
