//! Fault injection: rules matched on path and method, firing by probability (seeded) or count.

use std::time::Duration;

use axum::http::StatusCode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::error::ArmError;
use crate::lro::Kind;

/// A rule as posted to `POST /_sim/faults`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRule {
    /// Regular expression matched against the request path (case-insensitive).
    pub path: String,
    /// HTTP method to match; any when absent.
    #[serde(default)]
    pub method: Option<String>,
    /// Chance of firing per matching request (default 1).
    #[serde(default)]
    pub probability: Option<f64>,
    /// Fire this many times, then stop (default: unlimited).
    #[serde(default)]
    pub count: Option<u32>,
    /// Respond with this status (and `code`); without it, the rule only adds latency.
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// Added latency in real milliseconds, before the request is carried out.
    #[serde(default)]
    pub latency_ms: Option<u64>,
    /// Carry the request out, then hold its answer this many real milliseconds: a write ARM
    /// accepted whose answer the caller has not seen yet (a client killed meanwhile never
    /// learns the outcome).
    #[serde(default)]
    pub hold_answer_ms: Option<u64>,
    /// `Retry-After` seconds on the error response.
    #[serde(default)]
    pub retry_after: Option<f64>,
    /// Send `retry_after` as ARM may: only `Retry-After`, as an HTTP date (whole seconds), without
    /// the millisecond headers.
    #[serde(default)]
    pub retry_after_date: bool,
    /// Instead of failing the request, accept it and let its long-running operation end `Failed`
    /// with `code` (PUT/DELETE only; `path` is matched against the resource ID).
    #[serde(default)]
    pub async_failure: bool,
    /// How often it fired (read only).
    #[serde(default)]
    pub fired: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("invalid path pattern: {0}")]
    Pattern(#[from] regex::Error),
    #[error("invalid status {0}")]
    Status(u16),
}

/// What the matching rule does to a request.
#[derive(Debug, Default)]
pub struct Effect {
    pub latency: Option<Duration>,
    pub error: Option<ArmError>,
    /// After carrying the request out, wait this long before answering.
    pub hold_answer: Option<Duration>,
}

pub struct Faults {
    rules: Vec<(FaultRule, Regex)>,
    rng: StdRng,
}

impl Faults {
    pub fn new(seed: u64) -> Self {
        Self {
            rules: Vec::new(),
            rng: StdRng::seed_from_u64(seed),
        }
    }

    pub fn add(&mut self, rule: FaultRule) -> Result<(), RuleError> {
        let re = Regex::new(&format!("(?i){}", rule.path))?;
        if let Some(s) = rule.status
            && StatusCode::from_u16(s).is_err()
        {
            return Err(RuleError::Status(s));
        }
        self.rules.push((rule, re));
        Ok(())
    }

    pub fn rules(&self) -> Vec<FaultRule> {
        self.rules.iter().map(|(r, _)| r.clone()).collect()
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// The effect of the first rule that matches and fires.
    pub fn check(&mut self, method: &str, path: &str) -> Effect {
        for (rule, re) in &mut self.rules {
            let method_ok = rule
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method));
            if rule.async_failure
                || !method_ok
                || !re.is_match(path)
                || rule.count.is_some_and(|c| rule.fired >= c)
            {
                continue;
            }
            let p = rule.probability.unwrap_or(1.0).clamp(0.0, 1.0);
            if !self.rng.random_bool(p) {
                continue;
            }
            rule.fired += 1;
            let error = rule.status.map(|s| {
                let status = StatusCode::from_u16(s).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let code = rule
                    .code
                    .clone()
                    .unwrap_or_else(|| "InternalServerError".into());
                let message = rule
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("Injected fault ({code})."));
                let mut e = ArmError::new(status, code, message);
                e.retry_after = rule.retry_after;
                e.retry_after_date = rule.retry_after_date;
                e
            });
            return Effect {
                latency: rule.latency_ms.map(Duration::from_millis),
                error,
                hold_answer: rule.hold_answer_ms.map(Duration::from_millis),
            };
        }
        Effect::default()
    }

    /// The error a new long-running operation on `resource_id` should end with, if a rule says so.
    pub fn async_failure(&mut self, resource_id: &str, kind: Kind) -> Option<ArmError> {
        let method = match kind {
            Kind::Put => "PUT",
            Kind::Delete => "DELETE",
            Kind::Action => "POST",
        };
        for (rule, re) in &mut self.rules {
            let method_ok = rule
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method));
            if !rule.async_failure
                || !method_ok
                || !re.is_match(resource_id)
                || rule.count.is_some_and(|c| rule.fired >= c)
            {
                continue;
            }
            if !self
                .rng
                .random_bool(rule.probability.unwrap_or(1.0).clamp(0.0, 1.0))
            {
                continue;
            }
            rule.fired += 1;
            let code = rule
                .code
                .clone()
                .unwrap_or_else(|| "InternalServerError".into());
            let message = rule
                .message
                .clone()
                .unwrap_or_else(|| format!("Injected operation failure ({code})."));
            return Some(ArmError::new(
                StatusCode::from_u16(rule.status.unwrap_or(500))
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                code,
                message,
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(probability: f64) -> FaultRule {
        serde_json::from_value(serde_json::json!({
            "path": "virtualNetworks", "probability": probability, "status": 500, "code": "InternalServerError"
        }))
        .unwrap()
    }

    fn pattern(seed: u64) -> Vec<bool> {
        let mut f = Faults::new(seed);
        f.add(rule(0.5)).unwrap();
        (0..64)
            .map(|_| f.check("GET", "/x/virtualNetworks/v").error.is_some())
            .collect()
    }

    #[test]
    fn same_seed_same_faults() {
        assert_eq!(pattern(7), pattern(7));
        assert_ne!(pattern(7), pattern(8));
        let fired = pattern(7).iter().filter(|x| **x).count();
        assert!((10..54).contains(&fired), "{fired}");
    }

    #[test]
    fn count_limits_and_method_filters() {
        let mut f = Faults::new(1);
        let mut r = rule(1.0);
        r.count = Some(2);
        r.method = Some("PUT".into());
        f.add(r).unwrap();
        assert!(f.check("GET", "/virtualNetworks").error.is_none());
        assert!(f.check("PUT", "/virtualNetworks").error.is_some());
        assert!(f.check("PUT", "/virtualNetworks").error.is_some());
        assert!(f.check("PUT", "/virtualNetworks").error.is_none());
        assert_eq!(f.rules()[0].fired, 2);
    }
}
