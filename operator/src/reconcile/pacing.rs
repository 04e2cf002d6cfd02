//! How the loop paces itself: the few decisions about *when* that a reconciler could take
//! differently without changing *what* it does. The loop asks a [`Pacing`]; Strata's own is
//! [`StrataPacing`], built from [`Timing`]. The benchmark (`strata-bench`) supplies another —
//! a model of Azure Service Operator v2's defaults, in `strata-e2e` — so that both run the same
//! observe → decide → act → report against the same emulator and differ only in these decisions.

use std::fmt::Debug;
use std::time::Duration;

use backon::BackoffBuilder;
use rand::Rng;

use super::context::Timing;
use crate::per_object::PerObject;

/// The decisions about time the loop delegates. `key` is the object's `<namespace>/<Kind>/<name>`.
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
    /// Whether ARM requests go through the operator's client-side token buckets
    /// ([`crate::throttle`]); without them the reconciler meets ARM's 429s.
    fn client_throttle(&self) -> bool;
    /// Concurrent reconciles per kind, given the configured figure (0: unbounded).
    fn concurrency(&self, configured: u16) -> u16;
}

/// Strata's pacing: waiting CRs are woken by the readiness index, failures back off
/// exponentially with jitter, a resync compares before it writes, operations are polled at the
/// poll interval or ARM's `Retry-After` if later, and ARM's rate is kept client-side.
#[derive(Debug)]
pub struct StrataPacing {
    timing: Timing,
    /// Consecutive failures per object, for the backoff.
    failures: PerObject<u32>,
}

impl StrataPacing {
    pub fn new(timing: Timing) -> StrataPacing {
        StrataPacing {
            timing,
            failures: PerObject::default(),
        }
    }
}

impl Pacing for StrataPacing {
    fn dependency_wait(&self, _key: &str) -> Option<Duration> {
        None
    }

    fn dependencies_ready(&self, _key: &str) {}

    fn failure_backoff(&self, key: &str) -> Duration {
        next_delay(
            &self.failures,
            key,
            self.timing.backoff_min,
            self.timing.backoff_max,
        )
    }

    fn succeeded(&self, key: &str) {
        self.failures.remove(key);
    }

    fn resync(&self) -> Duration {
        jittered(self.timing.sync_period, 0.1)
    }

    fn resync_puts(&self) -> bool {
        false
    }

    fn operation_poll(&self, _key: &str, retry_after: Option<Duration>) -> Duration {
        retry_after.map_or(self.timing.poll_interval, |after| {
            after.max(self.timing.poll_interval)
        })
    }

    fn client_throttle(&self) -> bool {
        true
    }

    fn concurrency(&self, configured: u16) -> u16 {
        configured
    }
}

/// `d` scaled by a uniform factor in `1 ± spread`.
pub fn jittered(d: Duration, spread: f64) -> Duration {
    d.mul_f64(rand::rng().random_range((1.0 - spread)..(1.0 + spread)))
}

/// One more attempt for `key` in `attempts`: its jittered exponential delay between `min` and `max`.
fn next_delay(attempts: &PerObject<u32>, key: &str, min: Duration, max: Duration) -> Duration {
    let n = attempts.update(key, |n| {
        *n = n.saturating_add(1);
        *n
    });
    backon::ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_jitter()
        .without_max_times()
        .build()
        .nth((n - 1) as usize)
        .unwrap_or(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strata() -> StrataPacing {
        StrataPacing::new(Timing::default())
    }

    #[test]
    fn strata_is_woken_compares_before_writing_and_keeps_arms_rate() {
        let p = strata();
        assert_eq!(p.dependency_wait("ns/Subnet/a"), None);
        assert!(!p.resync_puts());
        assert!(p.client_throttle());
        assert_eq!(p.concurrency(16), 16);
        let resync = p.resync().as_secs_f64();
        assert!((3240.0..=3960.0).contains(&resync), "{resync}");
    }

    #[test]
    fn strata_polls_at_the_interval_or_later_when_arm_asks() {
        let p = strata();
        assert_eq!(p.operation_poll("k", None), Duration::from_secs(5));
        assert_eq!(
            p.operation_poll("k", Some(Duration::from_secs(1))),
            Duration::from_secs(5)
        );
        assert_eq!(
            p.operation_poll("k", Some(Duration::from_secs(20))),
            Duration::from_secs(20)
        );
    }

    #[test]
    fn strata_backs_off_per_object_and_forgets_on_success() {
        let p = strata();
        let first = p.failure_backoff("a");
        assert!(first <= Duration::from_secs(2), "{first:?}");
        for _ in 0..20 {
            p.failure_backoff("a");
        }
        assert!(p.failure_backoff("a") >= Duration::from_secs(150));
        // Another object starts from the beginning; success forgets.
        assert!(p.failure_backoff("b") <= Duration::from_secs(2));
        p.succeeded("a");
        assert!(p.failure_backoff("a") <= Duration::from_secs(2));
    }
}
