//! Status back to CAPI, as pure functions: a cloud CR's readiness from its `Ready` condition, the
//! CAPI `Ready` and `UnsupportedFields` conditions, the `resources` list and the first thing a
//! cluster or machine waits for. The controller reads the objects and writes the result; what is
//! written is decided here, and tested without an API server.

use kube::api::DynamicObject;
use serde_json::{Value, json};
use strata_crds::capi;

/// A CR's readiness as its Ready condition says.
#[derive(Debug, Clone, PartialEq)]
pub struct Readiness {
    pub kind: String,
    pub name: String,
    pub ready: bool,
    pub reason: String,
    pub message: String,
}

pub fn readiness(kind: &str, o: Option<&DynamicObject>, name: &str) -> Readiness {
    let cond = o.and_then(|o| {
        o.data["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned())
    });
    let generation_ok = o.is_some_and(|o| {
        o.data["status"]["observedGeneration"].as_i64().is_none()
            || o.data["status"]["observedGeneration"].as_i64() == o.metadata.generation
    });
    Readiness {
        kind: kind.to_owned(),
        name: name.to_owned(),
        ready: generation_ok && cond.as_ref().is_some_and(|c| c["status"] == "True"),
        reason: match (&o, &cond) {
            (None, _) => "NotCreated".to_owned(),
            (_, Some(c)) => c["reason"].as_str().unwrap_or("Unknown").to_owned(),
            _ => "Reconciling".to_owned(),
        },
        message: cond
            .as_ref()
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default()
            .to_owned(),
    }
}

/// A CAPI condition, keeping the transition time when the status did not change.
pub fn capi_condition(
    previous: &[capi::Condition],
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
    severity: Option<&str>,
) -> capi::Condition {
    let status = if status { "True" } else { "False" }.to_owned();
    let last = previous
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    capi::Condition {
        type_: "Ready".to_owned(),
        status,
        severity: severity.map(str::to_owned),
        last_transition_time: Some(last),
        reason: reason.map(str::to_owned),
        message,
    }
}

/// Condition `UnsupportedFields` (True, severity Warning) naming every input field the
/// translation could not honour; none when there are none.
pub fn notes_condition(
    previous: &[capi::Condition],
    notes: &[crate::Note],
) -> Option<capi::Condition> {
    if notes.is_empty() {
        return None;
    }
    let message = notes
        .iter()
        .map(|n| format!("{}: {}", n.field, n.message))
        .collect::<Vec<_>>()
        .join("; ");
    let last = previous
        .iter()
        .find(|c| c.type_ == "UnsupportedFields" && c.status == "True")
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    Some(capi::Condition {
        type_: "UnsupportedFields".to_owned(),
        status: "True".to_owned(),
        severity: Some("Warning".to_owned()),
        last_transition_time: Some(last),
        reason: Some("NotTranslated".to_owned()),
        message: Some(message),
    })
}

pub fn conditions(ready: capi::Condition, notes: Option<capi::Condition>) -> Vec<capi::Condition> {
    std::iter::once(ready).chain(notes).collect()
}

pub fn resources_status(list: &[Readiness]) -> Value {
    Value::Array(
        list.iter()
            .map(|r| json!({"kind": r.kind, "name": r.name, "ready": r.ready}))
            .collect(),
    )
}

pub fn first_blocking(list: &[Readiness]) -> Option<String> {
    list.iter().find(|r| !r.ready).map(|r| {
        let mut m = format!("{} {}: {}", r.kind, r.name, r.reason);
        if !r.message.is_empty() {
            m.push_str(": ");
            m.push_str(&r.message);
        }
        m
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cr(generation: i64, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "azure.strata.dev/v1alpha1",
            "kind": "Subnet",
            "metadata": {"name": "nodes", "generation": generation},
            "status": status,
        }))
        .unwrap()
    }

    fn ready(status: &str, reason: &str, observed: i64) -> Value {
        json!({
            "observedGeneration": observed,
            "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": "m"}],
        })
    }

    #[test]
    fn readiness_follows_the_ready_condition_of_the_current_generation() {
        // (object, ready, reason): one row per state a cloud CR can be in.
        let rows = [
            (None, false, "NotCreated"),
            (Some(cr(1, json!({}))), false, "Reconciling"),
            (
                Some(cr(2, ready("True", "Succeeded", 2))),
                true,
                "Succeeded",
            ),
            // Ready for an older spec is not ready for this one.
            (
                Some(cr(3, ready("True", "Succeeded", 2))),
                false,
                "Succeeded",
            ),
            (
                Some(cr(1, ready("False", "WaitingForOwner", 1))),
                false,
                "WaitingForOwner",
            ),
            (
                Some(cr(1, ready("Unknown", "Reconciling", 1))),
                false,
                "Reconciling",
            ),
        ];
        for (o, want_ready, want_reason) in rows {
            let r = readiness("Subnet", o.as_ref(), "nodes");
            assert_eq!(
                (r.ready, r.reason.as_str()),
                (want_ready, want_reason),
                "{o:?}"
            );
        }
    }

    #[test]
    fn the_first_cr_not_ready_is_named_with_its_reason_and_message() {
        let list = [
            readiness(
                "ResourceGroup",
                Some(&cr(1, ready("True", "Succeeded", 1))),
                "rg",
            ),
            readiness(
                "Subnet",
                Some(&cr(1, ready("False", "AzureError", 1))),
                "nodes",
            ),
            readiness("VirtualMachine", None, "vm"),
        ];
        assert_eq!(
            first_blocking(&list).as_deref(),
            Some("Subnet nodes: AzureError: m")
        );
        assert_eq!(first_blocking(&list[..1]), None);
        assert_eq!(
            resources_status(&list[..1]),
            json!([{"kind": "ResourceGroup", "name": "rg", "ready": true}])
        );
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let before = capi_condition(&[], false, Some("Creating"), None, Some("Info"));
        let mut earlier = before.clone();
        earlier.last_transition_time = Some("2020-01-01T00:00:00Z".into());
        let same = capi_condition(&[earlier.clone()], false, Some("Other"), None, None);
        assert_eq!(same.last_transition_time, earlier.last_transition_time);
        let flipped = capi_condition(&[earlier.clone()], true, None, None, None);
        assert_ne!(flipped.last_transition_time, earlier.last_transition_time);
        assert_eq!(flipped.status, "True");
    }

    #[test]
    fn untranslated_fields_give_a_warning_condition_and_none_otherwise() {
        assert_eq!(notes_condition(&[], &[]), None);
        let notes = [crate::Note {
            object: "AzureCluster ns/c".into(),
            field: "spec.bastionSpec".into(),
            message: "not translated".into(),
        }];
        let c = notes_condition(&[], &notes).unwrap();
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.severity.as_deref()),
            ("UnsupportedFields", "True", Some("Warning"))
        );
        assert_eq!(
            c.message.as_deref(),
            Some("spec.bastionSpec: not translated")
        );
    }
}
