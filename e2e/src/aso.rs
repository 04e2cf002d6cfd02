//! A model of Azure Service Operator v2's pacing with its default settings, for the benchmark's
//! baseline: the same Strata loop (observe → decide → act → report) against the same emulator,
//! paced as ASO paces its reconciles. Each rule names the ASO source it comes from
//! (github.com/Azure/azure-service-operator, `v2/…`); the tests check every rule against a table.
//!
//! What is modelled is *when* ASO looks again and what a resync costs, not ASO's code: its
//! reconcile count per step, its condition texts and its webhooks are Strata's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use strata_operator::{Pacing, jittered};

/// ASO v2's defaults.
pub mod defaults {
    use std::time::Duration;

    /// `v2/cmd/controller/app/setup.go`, `makeControllerOptions`: the workqueue's rate limiter
    /// is `generic.NewRateLimiter(1*time.Second, 1*time.Minute, …)` — per item, exponential from
    /// 1 s, doubling, capped at 1 min.
    pub const LIMITER_BASE: Duration = Duration::from_secs(1);
    pub const LIMITER_MAX: Duration = Duration::from_secs(60);
    /// `v2/internal/reconcilers/generic/generic_reconciler.go`, `NewRateLimiter`: the per-item
    /// limiter is combined (max of) with one `BucketRateLimiter` across all items, "10 rps, 100
    /// bucket (spike) size" (client-go's default, kept by ASO).
    pub const BUCKET_PER_SECOND: f64 = 10.0;
    pub const BUCKET_BURST: f64 = 100.0;
    /// `setup.go`, `makeControllerOptions`, `interval.CalculatorParameters`: `ErrorBaseDelay`
    /// 1 s and `ErrorMaxFastDelay` 30 s, the bounds of a `RetryFast` error's requeue
    /// (`v2/internal/util/interval/interval_calculator.go`, `failureResult`).
    pub const FAST_BASE: Duration = Duration::from_secs(1);
    pub const FAST_MAX: Duration = Duration::from_secs(30);
    /// `AZURE_SYNC_PERIOD` (`v2/internal/config/vars.go`): 1 h in the releases this models
    /// (older ones defaulted to 15 min).
    pub const SYNC_PERIOD: Duration = Duration::from_secs(3600);
    /// `interval_calculator.go`, `makeSuccessResult`: `randextensions.Jitter(rand, syncPeriod, 0.25)`.
    pub const SYNC_JITTER: f64 = 0.25;
    /// `setup.go`, `makeControllerOptions`: `MaxConcurrentReconciles` 1 (later releases read it
    /// from `MAX_CONCURRENT_RECONCILES`, default 1); the benchmark also runs 10.
    pub const MAX_CONCURRENT_RECONCILES: u16 = 1;
}

/// Per-item exponential delays, as client-go's `ItemExponentialFailureRateLimiter` and ASO's
/// interval calculator count them: `base · 2^n` for the item's n-th consecutive requeue, capped.
#[derive(Debug)]
struct PerItem {
    base: Duration,
    max: Duration,
    counts: Mutex<HashMap<String, u32>>,
}

impl PerItem {
    fn new(base: Duration, max: Duration) -> PerItem {
        PerItem {
            base,
            max,
            counts: Mutex::default(),
        }
    }

    fn next(&self, key: &str) -> Duration {
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = counts.entry(key.to_owned()).or_insert(0);
        let delay = self
            .base
            .checked_mul(2u32.saturating_pow(*n))
            .map_or(self.max, |d| d.min(self.max));
        *n = n.saturating_add(1);
        delay
    }

    fn forget(&self, key: &str) {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

/// One token bucket shared by every item, as `golang.org/x/time/rate`'s `Reserve().Delay()`:
/// a request takes a token now or reserves the next one, and waits until it is there.
#[derive(Debug)]
struct Bucket {
    per_second: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    fn new(per_second: f64, burst: f64) -> Bucket {
        Bucket {
            per_second,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    fn reserve(&self) -> Duration {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let (tokens, at) = *state;
        let elapsed = now.saturating_duration_since(at).as_secs_f64();
        let tokens = (tokens + elapsed * self.per_second).min(self.burst) - 1.0;
        *state = (tokens, now);
        if tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-tokens / self.per_second)
        }
    }
}

/// ASO v2's pacing on a clock `time_scale` times real time (the emulator's).
#[derive(Debug)]
pub struct AsoModel {
    sync_period: Duration,
    /// The workqueue's per-item limiter (`setup.go`: 1 s → 1 min).
    limiter: PerItem,
    /// The workqueue's shared bucket (`generic_reconciler.go`: 10 per s, burst 100).
    bucket: Bucket,
    /// The interval calculator's failure count (`interval_calculator.go`: 1 s → 30 s for
    /// `RetryFast`).
    calculator: PerItem,
}

impl AsoModel {
    /// ASO's defaults on a clock `time_scale` times real time (every duration and rate scaled
    /// alike). Its `MaxConcurrentReconciles` is the operator's concurrency setting
    /// (`bench::operator_settings`).
    pub fn new(time_scale: f64, sync_period: Duration) -> AsoModel {
        use defaults::*;
        let scaled = |d: Duration| d.mul_f64(time_scale);
        AsoModel {
            sync_period: scaled(sync_period),
            limiter: PerItem::new(scaled(LIMITER_BASE), scaled(LIMITER_MAX)),
            bucket: Bucket::new(BUCKET_PER_SECOND / time_scale, BUCKET_BURST),
            calculator: PerItem::new(scaled(FAST_BASE), scaled(FAST_MAX)),
        }
    }

    /// A requeue through controller-runtime's `AddRateLimited`: the max of the item's
    /// exponential delay and the shared bucket's (`workqueue.NewMaxOfRateLimiter`).
    fn rate_limited(&self, key: &str) -> Duration {
        self.limiter.next(key).max(self.bucket.reserve())
    }
}

impl Pacing for AsoModel {
    /// `WaitingForOwner` and `ReferenceNotFound` are `ReadyConditionImpactingError`s of
    /// severity Warning and classification `RetryFast`
    /// (`v2/pkg/genruntime/conditions/ready_condition_builder.go`); the interval calculator
    /// requeues them after `ErrorBaseDelay · 2^n`, capped at `ErrorMaxFastDelay`
    /// (`interval_calculator.go`, `failureResult` / `calculateExponentialDelay`). Nothing wakes
    /// the CR when its owner becomes Ready: ASO's watches are on the CR itself.
    fn dependency_wait(&self, key: &str) -> Option<Duration> {
        Some(self.calculator.next(key))
    }

    /// `interval_calculator.go`, `NextInterval`: a reconcile without an error deletes the
    /// request's failure count.
    fn dependencies_ready(&self, key: &str) {
        self.calculator.forget(key);
    }

    /// Any other error is returned to controller-runtime, whose workqueue requeues it through
    /// the rate limiter (`setup.go`'s comment on `RateLimiter`, and `interval_calculator.go`:
    /// "the scenarios that this handler doesn't target: any error other than
    /// ReadyConditionImpacting error").
    fn failure_backoff(&self, key: &str) -> Duration {
        self.rate_limited(key)
    }

    /// controller-runtime forgets the item's failures on a successful reconcile.
    fn succeeded(&self, key: &str) {
        self.limiter.forget(key);
        self.calculator.forget(key);
    }

    /// `interval_calculator.go`, `makeSuccessResult`: a Ready resource is requeued after the
    /// sync period jittered by ±25 %.
    fn resync(&self) -> Duration {
        jittered(self.sync_period, defaults::SYNC_JITTER)
    }

    /// `v2/internal/reconcilers/arm/azure_generic_arm_reconciler_instance.go`: with no poller
    /// token saved, every reconcile of an existing resource begins a CreateOrUpdate — a PUT,
    /// changed or not.
    fn resync_puts(&self) -> bool {
        true
    }

    /// `azure_generic_arm_reconciler_instance.go`, `MonitorResourceCreation`: while the poller
    /// is not done it returns `Requeue: true, RequeueAfter: GetRetryAfter(resp)` — ARM's
    /// `Retry-After`; without one (`RequeueAfter` 0) controller-runtime requeues through the
    /// rate limiter.
    fn operation_poll(&self, key: &str, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(after) if !after.is_zero() => after,
            _ => self.rate_limited(key),
        }
    }

    /// ASO's ARM client (`v2/internal/genericarmclient`) has no client-side token bucket: it
    /// meets ARM's 429s, and the Azure SDK's retry policy honours their `Retry-After`.
    fn client_throttle(&self) -> bool {
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn model() -> AsoModel {
        AsoModel::new(1.0, defaults::SYNC_PERIOD)
    }

    /// Every rule of the model against the value ASO's source gives it.
    #[test]
    fn each_rule_matches_asos_defaults() {
        let m = model();
        // RetryFast for owner/reference waits: 1, 2, 4, 8, 16, then 30 s for good.
        let waits: Vec<u64> = (0..8)
            .map(|_| m.dependency_wait("ns/Subnet/a").unwrap().as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        // Once the dependencies are usable the count starts again.
        m.dependencies_ready("ns/Subnet/a");
        assert_eq!(m.dependency_wait("ns/Subnet/a"), Some(S));

        // The rate limiter for other failures: 1 s doubling to 1 min, per item.
        let backoffs: Vec<u64> = (0..8)
            .map(|_| m.failure_backoff("ns/VirtualMachine/v").as_secs())
            .collect();
        assert_eq!(backoffs, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(m.failure_backoff("ns/VirtualMachine/other"), S);
        m.succeeded("ns/VirtualMachine/v");
        assert_eq!(m.failure_backoff("ns/VirtualMachine/v"), S);

        // Operations: ARM's Retry-After as it is (even below Strata's 5 s); without one, the
        // rate limiter.
        assert_eq!(
            m.operation_poll("ns/Disk/d", Some(Duration::from_millis(1500))),
            Duration::from_millis(1500)
        );
        assert_eq!(m.operation_poll("ns/Disk/d", None), S);
        assert_eq!(m.operation_poll("ns/Disk/d", None), 2 * S);

        // Every resync PUTs, no client-side ARM limiter.
        assert!(m.resync_puts());
        assert!(!m.client_throttle());
    }

    #[test]
    fn the_resync_is_the_sync_period_within_25_percent_and_varies() {
        let m = model();
        let draws: Vec<f64> = (0..200).map(|_| m.resync().as_secs_f64()).collect();
        assert!(
            draws.iter().all(|s| (2700.0..=4500.0).contains(s)),
            "{draws:?}"
        );
        let (lo, hi) = draws
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), s| (l.min(*s), h.max(*s)));
        assert!(lo < 3000.0 && hi > 4200.0, "spread {lo}..{hi}");
    }

    #[test]
    fn the_shared_bucket_allows_100_at_once_then_10_per_second() {
        let m = model();
        // Distinct items, each at its first requeue (1 s): the bucket decides only once spent.
        let delays: Vec<Duration> = (0..120)
            .map(|i| m.failure_backoff(&format!("ns/Subnet/s{i}")))
            .collect();
        assert!(
            delays[..100].iter().all(|d| *d == S),
            "{:?}",
            &delays[..100]
        );
        // The 101st reserves the token that arrives 0.1 s on; the 120th the one 2 s on.
        assert!(delays[100] == S, "max(1 s, 0.1 s)");
        let last = delays[119].as_secs_f64();
        assert!((1.9..=2.1).contains(&last), "{last}");
    }

    #[test]
    fn the_clock_is_scaled() {
        let m = AsoModel::new(0.01, defaults::SYNC_PERIOD);
        assert_eq!(m.dependency_wait("k"), Some(Duration::from_millis(10)));
        assert_eq!(m.failure_backoff("k"), Duration::from_millis(10));
        let resync = m.resync().as_secs_f64();
        assert!((27.0..=45.0).contains(&resync), "{resync}");
    }
}
