//! What the operator last reported per object: the `Ready` decision and the resourceVersions its
//! own status writes produced.
//!
//! Status changes do not wake a reconcile (most are the operator's own writes), so a status that
//! somebody else wrote would stand until the sync period: typically the late write of a previous
//! instance, killed while its request was in flight, landing after the new instance reported
//! Ready. The watch compares each event's status with the decision recorded here and wakes the
//! object when they disagree and the event is not one of our own writes.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use strata_crds::common::AzureStatus;

/// How many of our own writes per object are remembered: a reconcile writes at most a few
/// statuses before their events come back.
const OWN_WRITES: usize = 4;

/// A `Ready` condition as reported, with the generation it describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub status: String,
    pub reason: String,
    pub message: String,
    /// The top-level `observedGeneration` written with it.
    pub generation: Option<i64>,
}

impl Decision {
    /// The decision a status shows (none without a `Ready` condition).
    pub fn shown_by(status: Option<&AzureStatus>) -> Option<Decision> {
        let status = status?;
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
        Some(Decision {
            status: ready.status.clone(),
            reason: ready.reason.clone(),
            message: ready.message.clone(),
            generation: status.observed_generation,
        })
    }
}

struct Record {
    decision: Decision,
    own_writes: VecDeque<String>,
}

/// Per object key (`<namespace>/<CloudKind>/<name>`), what was last reported.
#[derive(Default)]
pub struct Reported {
    records: Mutex<HashMap<String, Record>>,
}

impl Reported {
    /// Records the decision about to be reported, before the status is compared and written (so
    /// that an event landing meanwhile is compared with it); returns the previous one.
    pub fn record(&self, key: &str, decision: Decision) -> Option<Decision> {
        let mut records = self.lock();
        match records.get_mut(key) {
            Some(r) => Some(std::mem::replace(&mut r.decision, decision)),
            None => {
                records.insert(
                    key.to_owned(),
                    Record {
                        decision,
                        own_writes: VecDeque::new(),
                    },
                );
                None
            }
        }
    }

    /// Remembers the resourceVersion one of our status writes produced.
    pub fn wrote(&self, key: &str, resource_version: Option<String>) {
        let (mut records, Some(rv)) = (self.lock(), resource_version) else {
            return;
        };
        if let Some(r) = records.get_mut(key) {
            if r.own_writes.len() == OWN_WRITES {
                r.own_writes.pop_front();
            }
            r.own_writes.push_back(rv);
        }
    }

    /// Whether `resource_version` is the one our last status write for `key` produced.
    pub fn is_last_write(&self, key: &str, resource_version: Option<&str>) -> bool {
        let records = self.lock();
        let last = records.get(key).and_then(|r| r.own_writes.back());
        resource_version.is_some_and(|rv| last.is_some_and(|w| w == rv))
    }

    /// Whether a watched object's status contradicts the decision last reported for it, and is
    /// not one of our own writes (whose event may arrive after a newer decision was recorded):
    /// then it needs a reconcile to be put right. Nothing recorded: nothing to contradict (a
    /// fresh instance reconciles every object once anyway).
    pub fn contradicts(
        &self,
        key: &str,
        resource_version: Option<&str>,
        status: Option<&AzureStatus>,
    ) -> bool {
        let records = self.lock();
        let Some(r) = records.get(key) else {
            return false;
        };
        if resource_version.is_some_and(|rv| r.own_writes.iter().any(|w| w == rv)) {
            return false;
        }
        Decision::shown_by(status).as_ref() != Some(&r.decision)
    }

    /// Forgets a deleted object.
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decision(status: &str, reason: &str, generation: i64) -> Decision {
        Decision {
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            generation: Some(generation),
        }
    }

    fn status(ready: &str, reason: &str, generation: i64) -> AzureStatus {
        serde_json::from_value(json!({"id": "/x", "observedGeneration": generation,
            "conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
        .unwrap_or_default()
    }

    #[test]
    fn nothing_recorded_contradicts_nothing() {
        let reported = Reported::default();
        assert!(!reported.contradicts("k", Some("1"), Some(&status("False", "Reconciling", 1))));
    }

    #[test]
    fn a_status_that_differs_from_the_last_decision_contradicts_it() {
        let reported = Reported::default();
        assert_eq!(
            reported.record("k", decision("Unknown", "Reconciling", 1)),
            None
        );
        assert_eq!(
            reported.record("k", decision("True", "Succeeded", 1)),
            Some(decision("Unknown", "Reconciling", 1))
        );
        assert!(!reported.contradicts("k", Some("7"), Some(&status("True", "Succeeded", 1))));
        assert!(
            reported.contradicts("k", Some("8"), Some(&status("Unknown", "Reconciling", 1))),
            "a late write of an older decision"
        );
        assert!(
            reported.contradicts("k", Some("9"), Some(&status("True", "Succeeded", 0))),
            "another generation"
        );
        assert!(
            reported.contradicts("k", Some("9"), None),
            "no status at all"
        );
    }

    #[test]
    fn our_own_writes_never_contradict() {
        let reported = Reported::default();
        reported.record("k", decision("Unknown", "Reconciling", 1));
        reported.wrote("k", Some("5".into()));
        reported.record("k", decision("True", "Succeeded", 1));
        assert!(
            !reported.contradicts("k", Some("5"), Some(&status("Unknown", "Reconciling", 1))),
            "the event of our previous write, arriving after the next decision"
        );
        for rv in 6..6 + OWN_WRITES {
            reported.wrote("k", Some(rv.to_string()));
        }
        assert!(
            reported.contradicts("k", Some("5"), Some(&status("Unknown", "Reconciling", 1))),
            "only the last few writes are remembered"
        );
        assert!(reported.is_last_write("k", Some(&(5 + OWN_WRITES).to_string())));
        assert!(!reported.is_last_write("k", Some("6")));
        assert!(!reported.is_last_write("k", None));
        reported.forget("k");
        assert!(!reported.contradicts("k", Some("1"), None));
    }
}
