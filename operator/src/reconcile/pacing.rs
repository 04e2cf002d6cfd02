//! How the loop paces itself: when to look again after a failure, at a running operation and
//! at a converged resource — [`StrataPacing`], built from [`Timing`]. With the `bench-hooks`
//! feature (never in a build a user runs), the benchmark swaps in its model of another operator
//! through [`super::bench_hooks::Pacing`].

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use rand::Rng;

use super::context::Timing;
use crate::kind::CloudKind;
use crate::per_object::PerObject;

/// Strata's pacing: waiting CRs are woken by the readiness index, failures back off
/// exponentially with jitter, a resync compares before it writes, operations are polled at the
/// poll interval or ARM's `Retry-After` if later — and a creation no sooner than its kind's
/// creations were seen to take ([`next_look`]) — and ARM's rate is kept client-side.
#[derive(Debug)]
pub struct StrataPacing {
    timing: Timing,
    /// Consecutive failures per object, for the backoff.
    failures: PerObject<u32>,
    /// Creations running, per object: the kind and when the PUT was answered.
    creating: PerObject<(CloudKind, Instant)>,
    /// How long each kind's recent creations took, from the PUT to being seen done.
    took: Mutex<HashMap<CloudKind, Durations>>,
}

impl StrataPacing {
    pub fn new(timing: Timing) -> StrataPacing {
        StrataPacing {
            timing,
            failures: PerObject::default(),
            creating: PerObject::default(),
            took: Mutex::default(),
        }
    }

    fn took(&self) -> std::sync::MutexGuard<'_, HashMap<CloudKind, Durations>> {
        self.took.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `creation_seen_done` at `now`.
    fn seen_done_at(&self, key: &str, now: Instant) {
        let Some((kind, at)) = self.creating.read(key, |c| c.copied()) else {
            return;
        };
        self.creating.remove(key);
        self.took()
            .entry(kind)
            .or_default()
            .record(now.saturating_duration_since(at));
    }

    /// `operation_poll` at `now`.
    fn poll_at(&self, key: &str, retry_after: Option<Duration>, now: Instant) -> Duration {
        let soonest = retry_after.map_or(self.timing.poll_interval, |after| {
            after.max(self.timing.poll_interval)
        });
        let Some((kind, at)) = self.creating.read(key, |c| c.copied()) else {
            return soonest;
        };
        let expected = self.took().get(&kind).and_then(Durations::expected);
        next_look(now.saturating_duration_since(at), soonest, expected)
    }
}

/// The last [`Durations::KEPT`] creation times of a kind.
#[derive(Debug, Default)]
struct Durations(VecDeque<Duration>);

impl Durations {
    const KEPT: usize = 16;

    fn record(&mut self, d: Duration) {
        if self.0.len() == Self::KEPT {
            self.0.pop_front();
        }
        self.0.push_back(d);
    }

    /// The shortest: a creation is not looked at later than the quickest recent one took.
    fn expected(&self) -> Option<Duration> {
        self.0.iter().min().copied()
    }
}

/// When to look at a creation `elapsed` into it, given the soonest ARM allows (`soonest`: its
/// `Retry-After`, or the poll interval) and how long its kind's creations take (`expected`).
///
/// ARM's `Retry-After` says when to ask again, not when the operation ends: a VM that takes
/// 60 s answered `Retry-After: 10` is GET six times, five of them to read `Creating`, each
/// spending the subscription's read budget (25 per second, shared by every CR). So a creation
/// is looked at when half, three quarters and all of the expected time has passed (the first
/// of those that is not sooner than ARM allows), then at ARM's pace: three GETs instead of six
/// for that VM, and a kind whose creations get quicker is seen to, since the looks before the
/// expected end catch it (the expected time is the quickest of the recent ones).
pub fn next_look(elapsed: Duration, soonest: Duration, expected: Option<Duration>) -> Duration {
    let Some(expected) = expected else {
        return soonest;
    };
    [expected / 2, expected * 3 / 4, expected]
        .into_iter()
        .filter_map(|at| at.checked_sub(elapsed))
        .find(|wait| *wait >= soonest)
        .unwrap_or(soonest)
}

/// The loop's questions about time. `key` is the object's `<namespace>/<CloudKind>/<name>`.
impl StrataPacing {
    /// When to retry after a transient failure (the controller's error policy): jittered
    /// exponential backoff.
    pub fn failure_backoff(&self, key: &str) -> Duration {
        next_delay(
            &self.failures,
            key,
            self.timing.backoff_min,
            self.timing.backoff_max,
        )
    }

    /// The CR reached a good state (Ready, or its finalizer removed): its failures are forgotten.
    pub fn succeeded(&self, key: &str) {
        self.failures.remove(key);
        // Seen done already when Ready (`creation_seen_done` comes first); otherwise the CR's
        // finalizer went before the creation was seen to end: nothing to learn.
        self.creating.remove(key);
    }

    /// Our PUT started creating `key`, of `kind`, and ARM answered that it runs on.
    pub fn creation_started(&self, key: &str, kind: CloudKind) {
        self.creating.set(key, (kind, Instant::now()));
    }

    /// `key` was seen Ready (after a creation, if one was started); comes before `succeeded`.
    pub fn creation_seen_done(&self, key: &str) {
        self.seen_done_at(key, Instant::now());
    }

    /// When a Ready resource is looked at again (the resync; it compares before it writes).
    pub fn resync(&self) -> Duration {
        jittered(self.timing.sync_period, 0.1)
    }

    /// When to look at a running operation again, given the `Retry-After` ARM answered the
    /// write with, if any ([`next_look`]).
    pub fn operation_poll(&self, key: &str, retry_after: Option<Duration>) -> Duration {
        self.poll_at(key, retry_after, Instant::now())
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn strata() -> StrataPacing {
        StrataPacing::new(Timing::default())
    }

    #[test]
    fn strata_resyncs_at_the_sync_period_within_10_percent() {
        let p = strata();
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

    /// A VM expected to take 60 s, answered `Retry-After: 10`: looked at after 30, 45 and 60 s,
    /// then every 10 s; nothing learnt yet, or ARM asking for more, and ARM's pace wins.
    #[test]
    fn a_creation_is_looked_at_when_its_kind_usually_ends() {
        let s = Duration::from_secs;
        let ten = s(10);
        let vm = Some(s(60));
        let table = [
            (s(0), ten, vm, s(30)),
            (s(30), ten, vm, s(15)),
            (s(45), ten, vm, s(15)),
            // Less than ARM's pace to the expected end: ARM's pace.
            (s(55), ten, vm, ten),
            (s(60), ten, vm, ten),
            (s(75), ten, vm, ten),
            // Nothing learnt about the kind.
            (s(0), ten, None, ten),
            // ARM asks for longer than half the expected time: the next mark after that.
            (s(0), s(40), vm, s(45)),
            // A quick kind: ARM's pace already waits longer than the expected time.
            (s(0), s(5), Some(s(3)), s(5)),
        ];
        for (elapsed, soonest, expected, want) in table {
            assert_eq!(
                next_look(elapsed, soonest, expected),
                want,
                "{elapsed:?} into it, soonest {soonest:?}, expected {expected:?}"
            );
        }
    }

    /// What the schedule learns from: the quickest of a kind's recent creations, per kind, and
    /// only from creations it saw start.
    #[test]
    fn the_expected_time_is_the_quickest_recent_creation_of_the_kind() {
        let mut d = Durations::default();
        assert_eq!(d.expected(), None);
        for secs in [70, 60, 65] {
            d.record(Duration::from_secs(secs));
        }
        assert_eq!(d.expected(), Some(Duration::from_secs(60)));
        // Only the last 16 count: a kind that got slower is seen to.
        for _ in 0..Durations::KEPT {
            d.record(Duration::from_secs(120));
        }
        assert_eq!(d.expected(), Some(Duration::from_secs(120)));

        let p = strata();
        let ten = Duration::from_secs(10);
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        // Not seen to start: nothing learnt, ARM's pace.
        p.seen_done_at("ns/VirtualMachine/a", at(60));
        assert_eq!(p.poll_at("ns/VirtualMachine/b", Some(ten), at(60)), ten);
        // A VM seen done 60 s after its PUT.
        p.creation_started("ns/VirtualMachine/a", CloudKind::VirtualMachine);
        let started = p.creating.read("ns/VirtualMachine/a", |c| c.map(|c| c.1));
        p.seen_done_at(
            "ns/VirtualMachine/a",
            started.unwrap() + Duration::from_secs(60),
        );
        // Another VM's creation, 2 s in: looked at 30 s after its start.
        p.creation_started("ns/VirtualMachine/b", CloudKind::VirtualMachine);
        let started = p.creating.read("ns/VirtualMachine/b", |c| c.map(|c| c.1));
        let now = started.unwrap() + Duration::from_secs(2);
        assert_eq!(
            p.poll_at("ns/VirtualMachine/b", Some(ten), now),
            Duration::from_secs(28)
        );
        // A NIC learnt nothing from the VM.
        p.creation_started("ns/NetworkInterface/c", CloudKind::NetworkInterface);
        assert_eq!(p.operation_poll("ns/NetworkInterface/c", Some(ten)), ten);
        // A finalizer removed before the creation was seen to end: nothing learnt, nothing kept.
        p.succeeded("ns/VirtualMachine/b");
        assert!(p.creating.read("ns/VirtualMachine/b", |c| c.is_none()));
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
