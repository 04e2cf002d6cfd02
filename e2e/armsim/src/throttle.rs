//! ARM-like throttling: token buckets per subscription, principal and class of request.

use std::collections::HashMap;
use std::time::Instant;

use axum::http::Method;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limit {
    pub burst: f64,
    /// Refill per simulated second.
    pub per_second: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThrottleConfig {
    pub enabled: bool,
    pub reads: Limit,
    pub writes: Limit,
    pub deletes: Limit,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            reads: Limit {
                burst: 250.0,
                per_second: 25.0,
            },
            writes: Limit {
                burst: 200.0,
                per_second: 10.0,
            },
            deletes: Limit {
                burst: 200.0,
                per_second: 10.0,
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    Reads,
    Writes,
    Deletes,
}

impl Class {
    pub fn of(method: &Method) -> Class {
        match *method {
            Method::GET | Method::HEAD => Class::Reads,
            Method::DELETE => Class::Deletes,
            _ => Class::Writes,
        }
    }
    /// The `x-ms-ratelimit-remaining-subscription-…` header for this class.
    pub fn header(self) -> &'static str {
        match self {
            Class::Reads => "x-ms-ratelimit-remaining-subscription-reads",
            Class::Writes => "x-ms-ratelimit-remaining-subscription-writes",
            Class::Deletes => "x-ms-ratelimit-remaining-subscription-deletes",
        }
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Debug)]
pub struct Throttle {
    pub config: ThrottleConfig,
    buckets: HashMap<(String, String, Class), Bucket>,
}

/// A refused request: retry after this many real seconds.
#[derive(Debug, Clone, Copy)]
pub struct Refused {
    pub retry_after: f64,
}

impl Throttle {
    pub fn new(config: ThrottleConfig) -> Self {
        Self {
            config,
            buckets: HashMap::new(),
        }
    }

    pub fn set_config(&mut self, config: ThrottleConfig) {
        self.config = config;
        self.buckets.clear();
    }

    /// Takes one token; returns the tokens left, or how long to wait. `time_scale` converts the
    /// configured rates (per simulated second) to real time.
    pub fn take(
        &mut self,
        subscription: &str,
        principal: &str,
        class: Class,
        now: Instant,
        time_scale: f64,
    ) -> Result<u64, Refused> {
        let limit = match class {
            Class::Reads => self.config.reads,
            Class::Writes => self.config.writes,
            Class::Deletes => self.config.deletes,
        };
        if !self.config.enabled || time_scale <= 0.0 {
            return Ok(limit.burst as u64);
        }
        let rate = limit.per_second / time_scale;
        let key = (
            subscription.to_ascii_lowercase(),
            principal.to_string(),
            class,
        );
        let bucket = self.buckets.entry(key).or_insert(Bucket {
            tokens: limit.burst,
            last: now,
        });
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(limit.burst);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(bucket.tokens.floor() as u64)
        } else if rate > 0.0 {
            Err(Refused {
                retry_after: (1.0 - bucket.tokens) / rate,
            })
        } else {
            Err(Refused {
                retry_after: 3600.0,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bucket_refuses_after_burst_and_refills_at_scaled_rate() {
        let mut t = Throttle::new(ThrottleConfig {
            enabled: true,
            reads: Limit {
                burst: 3.0,
                per_second: 1.0,
            },
            ..ThrottleConfig::default()
        });
        let now = Instant::now();
        assert_eq!(t.take("s", "p", Class::Reads, now, 0.1).ok(), Some(2));
        assert_eq!(t.take("s", "p", Class::Reads, now, 0.1).ok(), Some(1));
        assert_eq!(t.take("s", "p", Class::Reads, now, 0.1).ok(), Some(0));
        let refused = t.take("s", "p", Class::Reads, now, 0.1).unwrap_err();
        // 1 token per simulated second at time scale 0.1 = one per 0.1 real seconds.
        assert!((refused.retry_after - 0.1).abs() < 1e-9, "{refused:?}");
        // Other principals and classes have their own buckets.
        assert!(t.take("s", "q", Class::Reads, now, 0.1).is_ok());
        assert!(t.take("s", "p", Class::Writes, now, 0.1).is_ok());
        let later = now + Duration::from_millis(150);
        assert_eq!(t.take("s", "p", Class::Reads, later, 0.1).ok(), Some(0));
    }
}
