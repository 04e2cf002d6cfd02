//! ARM-rate-aware token buckets, one per subscription and request class, shared by every
//! reconcile, mirroring ARM's own limits (reads 250 burst / 25 per s, writes and deletes 200 / 10
//! per s by default). Under load the operator runs at ARM's rate instead of collecting 429s.
//! ARM's own answers correct them: a 429's `Retry-After` holds a bucket, and the
//! `x-ms-ratelimit-remaining-subscription-…` headers lower it when ARM counts fewer tokens.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;

/// Which of ARM's buckets a request draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    limits: Limits,
    /// Off: every request goes out at once and ARM's own answers (429s) are the only limit —
    /// for a pacing that models an operator without client-side buckets.
    enabled: bool,
    buckets: Mutex<HashMap<(String, Class), State>>,
    waits: Counter,
}

/// One subscription's bucket of one class.
#[derive(Debug)]
struct State {
    /// Tokens left; negative while requests are queued for a refill.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
    /// ARM refused this bucket with a `Retry-After`: nothing is sent before then.
    held_until: Option<Instant>,
}

/// A bucket that ARM's `Retry-After` holds back: try again after this long. The caller requeues
/// instead of waiting, so that a worker is not parked for the whole hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held(pub Duration);

/// The share of ARM's limits the operator allows itself: requests leave our bucket a little
/// before they reach ARM's, so running at exactly ARM's rate could still meet a 429 at the edge.
const MARGIN: f64 = 0.9;

impl Bucket {
    fn capacity(self) -> f64 {
        (f64::from(self.burst) * MARGIN).floor().max(1.0)
    }

    fn rate(self) -> f64 {
        (self.per_second * MARGIN).max(1e-3)
    }
}

impl Throttle {
    pub fn new(limits: Limits) -> Throttle {
        Self::with_counter(limits, Counter::default())
    }

    /// Counts waits in `waits` (the metric `strata_operator_arm_throttle_waits_total`).
    pub fn with_counter(limits: Limits, waits: Counter) -> Throttle {
        Throttle {
            limits,
            enabled: true,
            buckets: Mutex::new(HashMap::new()),
            waits,
        }
    }

    /// The same throttle switched off: no bucket, no hold, nothing learnt from ARM's headers.
    pub fn switched_off(mut self) -> Throttle {
        self.enabled = false;
        self
    }

    fn bucket(&self, class: Class) -> Bucket {
        match class {
            Class::Read => self.limits.reads,
            Class::Write => self.limits.writes,
            Class::Delete => self.limits.deletes,
        }
    }

    /// Runs `f` on the subscription's bucket for `class`, refilled up to now.
    fn with_state<T>(
        &self,
        subscription: &str,
        class: Class,
        f: impl FnOnce(&mut State, Instant) -> T,
    ) -> T {
        let bucket = self.bucket(class);
        let now = Instant::now();
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let state = buckets
            .entry((subscription.to_ascii_lowercase(), class))
            .or_insert_with(|| State {
                tokens: bucket.capacity(),
                at: now,
                held_until: None,
            });
        let elapsed = now.saturating_duration_since(state.at).as_secs_f64();
        if elapsed > 0.0 {
            state.tokens = (state.tokens + elapsed * bucket.rate()).min(bucket.capacity());
            state.at = now;
        }
        f(state, now)
    }

    /// Takes a token from the subscription's bucket for this class, waiting for a refill when
    /// it is empty; answers [`Held`] at once, without a token, while ARM's `Retry-After` holds
    /// the bucket.
    pub async fn acquire(&self, subscription: &str, class: Class) -> Result<(), Held> {
        if !self.enabled {
            return Ok(());
        }
        let rate = self.bucket(class).rate();
        let wait = self.with_state(subscription, class, |state, now| {
            if let Some(until) = state.held_until.filter(|u| *u > now) {
                return Err(Held(until - now));
            }
            state.tokens -= 1.0;
            Ok((state.tokens < 0.0).then(|| Duration::from_secs_f64(-state.tokens / rate)))
        })?;
        if let Some(wait) = wait {
            self.waits.inc();
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }

    /// ARM refused a request of this class with `Retry-After: retry_after`: no request of the
    /// class goes to the subscription before then, whichever CR sends it, and the bucket
    /// refills only from then on.
    pub fn hold(&self, subscription: &str, class: Class, retry_after: Duration) {
        if !self.enabled {
            return;
        }
        self.with_state(subscription, class, |state, now| {
            let until = now + retry_after;
            let until = state.held_until.map_or(until, |u| u.max(until));
            state.held_until = Some(until);
            state.tokens = state.tokens.min(0.0);
            state.at = until;
        });
    }

    /// How long ARM's `Retry-After` still holds the bucket back (zero: not held).
    pub fn held_for(&self, subscription: &str, class: Class) -> Duration {
        self.with_state(subscription, class, |state, now| {
            state
                .held_until
                .map_or(Duration::ZERO, |u| u.saturating_duration_since(now))
        })
    }

    /// ARM said how many requests of this class it still allows
    /// (`x-ms-ratelimit-remaining-subscription-…`): when that is fewer than our bucket holds,
    /// ARM's count wins (another client of the subscription spends the same budget).
    pub fn observe_remaining(&self, subscription: &str, class: Class, remaining: u64) {
        if !self.enabled {
            return;
        }
        self.with_state(subscription, class, |state, _| {
            // Precision: counts beyond 2^53 do not occur.
            let remaining = remaining as f64 * MARGIN;
            if remaining < state.tokens {
                tracing::debug!(
                    subscription,
                    ?class,
                    ours = state.tokens,
                    arm = remaining,
                    "ARM's remaining count is lower: the bucket follows it"
                );
                state.tokens = remaining;
            }
        });
    }

    /// Tokens left in a bucket (tests and diagnostics).
    pub fn tokens(&self, subscription: &str, class: Class) -> f64 {
        self.with_state(subscription, class, |state, _| state.tokens)
    }

    /// How many requests had to wait for a token so far.
    pub fn waits(&self) -> u64 {
        self.waits.get()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hold_refuses_at_once_for_its_subscription_and_class_only() {
        let t = Throttle::new(Limits::default());
        t.hold("sub-a", Class::Write, Duration::from_secs(7));
        let Err(Held(left)) = t.acquire("SUB-A", Class::Write).await else {
            panic!("a held bucket gives no token");
        };
        assert!(
            left > Duration::from_secs(6) && left <= Duration::from_secs(7),
            "{left:?}"
        );
        assert_eq!(t.waits(), 0, "refused, not waited for");
        // A shorter Retry-After later does not shorten the hold.
        t.hold("sub-a", Class::Write, Duration::from_secs(1));
        assert!(t.held_for("sub-a", Class::Write) > Duration::from_secs(6));
        t.acquire("sub-b", Class::Write).await.unwrap();
        t.acquire("sub-a", Class::Read).await.unwrap();
        assert_eq!(t.held_for("sub-a", Class::Read), Duration::ZERO);
    }

    #[tokio::test]
    async fn switched_off_it_never_waits_holds_or_learns() {
        let t = Throttle::new(Limits {
            writes: Bucket {
                burst: 1,
                per_second: 0.001,
            },
            ..Limits::default()
        })
        .switched_off();
        t.hold("s", Class::Write, Duration::from_secs(60));
        for _ in 0..10 {
            t.acquire("s", Class::Write).await.unwrap();
        }
        assert_eq!(t.waits(), 0);
        assert_eq!(t.held_for("s", Class::Write), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_hold_ends_and_the_bucket_refills_from_then_on() {
        let t = Throttle::new(Limits::default());
        t.hold("s", Class::Read, Duration::from_millis(50));
        assert!(t.acquire("s", Class::Read).await.is_err());
        tokio::time::sleep(Duration::from_millis(60)).await;
        t.acquire("s", Class::Read).await.unwrap();
    }

    #[test]
    fn arm_remaining_count_lowers_the_bucket_but_never_raises_it() {
        let t = Throttle::new(Limits::default());
        assert_eq!(t.tokens("s", Class::Write), 180.0, "90 % of 200");
        t.observe_remaining("s", Class::Write, 10);
        assert!(t.tokens("s", Class::Write) < 10.0);
        t.observe_remaining("s", Class::Write, 150);
        assert!(
            t.tokens("s", Class::Write) < 10.0,
            "a higher count is ignored"
        );
        assert_eq!(
            t.tokens("s", Class::Read),
            225.0,
            "other classes keep theirs"
        );
    }

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
            t.acquire("sub-a", Class::Read).await.unwrap();
        }
        assert_eq!(t.waits(), 0, "the burst needs no wait");
        t.acquire("sub-a", Class::Read).await.unwrap();
        assert_eq!(t.waits(), 1, "the tenth read waits for a refill");
        t.acquire("SUB-B", Class::Read).await.unwrap();
        t.acquire("sub-a", Class::Write).await.unwrap();
        assert_eq!(
            t.waits(),
            1,
            "other subscriptions and classes have their own buckets"
        );
    }
}
