//! ARM's token buckets, as the operator keeps them: one per subscription, principal and request
//! class, each refilled at 90 % of ARM's documented rate, held for a 429's `Retry-After` and
//! lowered to ARM's own remaining count when that is lower.

use std::time::{Duration, Instant};

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

/// The share of ARM's limits the operator allows itself: requests leave our bucket a little
/// before they reach ARM's, so running at exactly ARM's rate could still meet a 429 at the edge.
const MARGIN: f64 = 0.9;

impl Bucket {
    /// The tokens a full bucket holds.
    pub(super) fn capacity(self) -> f64 {
        (f64::from(self.burst) * MARGIN).floor().max(1.0)
    }

    /// The tokens that refill per second.
    pub(super) fn rate(self) -> f64 {
        (self.per_second * MARGIN).max(1e-3)
    }
}

/// The tokens of one bucket.
#[derive(Debug)]
pub(super) struct Tokens {
    /// Tokens left (below zero after ARM's count lowered it).
    pub(super) left: f64,
    /// When `left` was last brought up to date.
    at: Instant,
    /// ARM refused this bucket with a `Retry-After`: nothing is sent before then.
    held_until: Option<Instant>,
}

impl Tokens {
    /// A full bucket.
    pub(super) fn full(bucket: Bucket, now: Instant) -> Tokens {
        Tokens {
            left: bucket.capacity(),
            at: now,
            held_until: None,
        }
    }

    /// Brings `left` up to `now`.
    pub(super) fn refill(&mut self, bucket: Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        if elapsed > 0.0 {
            self.left = (self.left + elapsed * bucket.rate()).min(bucket.capacity());
            self.at = now;
        }
    }

    /// Until when ARM's `Retry-After` holds the bucket, if it still does at `now`.
    pub(super) fn held(&self, now: Instant) -> Option<Instant> {
        self.held_until.filter(|u| *u > now)
    }

    /// ARM answered `Retry-After: retry_after`: nothing goes out before then (a shorter one
    /// never shortens a hold), and the bucket refills only from then on. Returns the hold's end.
    pub(super) fn hold(&mut self, retry_after: Duration, now: Instant) -> Instant {
        let until = now + retry_after;
        let until = self.held_until.map_or(until, |u| u.max(until));
        self.held_until = Some(until);
        self.left = self.left.min(0.0);
        self.at = until;
        until
    }

    /// ARM counts `remaining` requests left: when that is fewer than the bucket holds, ARM's
    /// count wins (another client of the subscription spends the same budget). Whether it did.
    pub(super) fn lower_to(&mut self, remaining: u64) -> bool {
        // Precision: counts beyond 2^53 do not occur.
        let remaining = remaining as f64 * MARGIN;
        let lower = remaining < self.left;
        if lower {
            self.left = remaining;
        }
        lower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_keeps_a_margin_under_arms_limits() {
        let writes = Limits::default().writes;
        assert_eq!(writes.capacity(), 180.0);
        assert!((writes.rate() - 9.0).abs() < 1e-9);
        let scaled = Limits::default().scaled(0.1).writes;
        assert_eq!(scaled.burst, 200, "bursts do not scale");
        assert!((scaled.rate() - 90.0).abs() < 1e-9);
    }

    #[test]
    fn a_hold_empties_the_bucket_and_refills_it_only_after() {
        let bucket = Limits::default().writes;
        let now = Instant::now();
        let mut t = Tokens::full(bucket, now);
        let until = t.hold(Duration::from_secs(10), now);
        assert_eq!(t.held(now), Some(until));
        assert_eq!(t.left, 0.0);
        t.refill(bucket, now + Duration::from_secs(5));
        assert_eq!(t.left, 0.0, "nothing refills during the hold");
        t.refill(bucket, now + Duration::from_secs(11));
        assert!((t.left - 9.0).abs() < 1e-6, "{}", t.left);
        assert_eq!(t.held(now + Duration::from_secs(11)), None);
    }
}
