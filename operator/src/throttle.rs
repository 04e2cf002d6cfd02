//! ARM-rate-aware token buckets, one per subscription and request class, shared by every
//! reconcile, mirroring ARM's own limits (reads 250 burst / 25 per s, writes and deletes 200 / 10
//! per s by default). Under load the operator runs at ARM's rate instead of collecting 429s.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use prometheus_client::metrics::counter::Counter;

/// Which of ARM's buckets a request draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Read,
    Write,
    Delete,
}

/// A bucket's size and refill rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    pub burst: u32,
    pub per_second: f64,
}

/// The limits per subscription.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub reads: Bucket,
    pub writes: Bucket,
    pub deletes: Bucket,
}

impl Default for Limits {
    /// ARM's documented per-subscription limits.
    fn default() -> Self {
        Limits {
            reads: Bucket {
                burst: 250,
                per_second: 25.0,
            },
            writes: Bucket {
                burst: 200,
                per_second: 10.0,
            },
            deletes: Bucket {
                burst: 200,
                per_second: 10.0,
            },
        }
    }
}

impl Limits {
    /// The same limits on a clock that runs `1 / time_scale` times faster (the emulator's
    /// `--time-scale`): refill rates scale, bursts do not.
    pub fn scaled(self, time_scale: f64) -> Limits {
        let f = |b: Bucket| Bucket {
            burst: b.burst,
            per_second: b.per_second / time_scale,
        };
        Limits {
            reads: f(self.reads),
            writes: f(self.writes),
            deletes: f(self.deletes),
        }
    }
}

/// The shared buckets.
pub struct Throttle {
    reads: DefaultKeyedRateLimiter<String>,
    writes: DefaultKeyedRateLimiter<String>,
    deletes: DefaultKeyedRateLimiter<String>,
    waits: Counter,
}

/// The share of ARM's limits the operator allows itself: requests leave our bucket a little
/// before they reach ARM's, so running at exactly ARM's rate could still meet a 429 at the edge.
const MARGIN: f64 = 0.9;

fn limiter(b: Bucket) -> DefaultKeyedRateLimiter<String> {
    let burst =
        NonZeroU32::new(((f64::from(b.burst) * MARGIN) as u32).max(1)).unwrap_or(NonZeroU32::MIN);
    let period = Duration::from_secs_f64(1.0 / (b.per_second * MARGIN).max(1e-3));
    let quota = Quota::with_period(period).unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN));
    RateLimiter::keyed(quota.allow_burst(burst))
}

impl Throttle {
    pub fn new(limits: Limits) -> Throttle {
        Self::with_counter(limits, Counter::default())
    }

    /// Counts waits in `waits` (the metric `strata_operator_arm_throttle_waits_total`).
    pub fn with_counter(limits: Limits, waits: Counter) -> Throttle {
        Throttle {
            reads: limiter(limits.reads),
            writes: limiter(limits.writes),
            deletes: limiter(limits.deletes),
            waits,
        }
    }

    /// Waits until the subscription's bucket for this class has a token.
    pub async fn acquire(&self, subscription: &str, class: Class) {
        let limiter = match class {
            Class::Read => &self.reads,
            Class::Write => &self.writes,
            Class::Delete => &self.deletes,
        };
        let key = subscription.to_ascii_lowercase();
        if limiter.check_key(&key).is_err() {
            self.waits.inc();
            limiter.until_key_ready(&key).await;
        }
    }

    /// How many requests had to wait for a token so far.
    pub fn waits(&self) -> u64 {
        self.waits.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn burst_then_wait_per_subscription() {
        let t = Throttle::new(Limits {
            reads: Bucket {
                burst: 10,
                per_second: 20.0,
            },
            ..Limits::default()
        });
        // 90 % of a burst of 10 is 9.
        for _ in 0..9 {
            t.acquire("sub-a", Class::Read).await;
        }
        assert_eq!(t.waits(), 0, "the burst needs no wait");
        t.acquire("sub-a", Class::Read).await;
        assert_eq!(t.waits(), 1, "the tenth read waits for a refill");
        t.acquire("SUB-B", Class::Read).await;
        t.acquire("sub-a", Class::Write).await;
        assert_eq!(
            t.waits(),
            1,
            "other subscriptions and classes have their own buckets"
        );
    }
}
