//! Admission webhooks (admissionregistration.k8s.io/v1 `MutatingWebhookConfiguration`,
//! `ValidatingWebhookConfiguration`), matched and called as kube-apiserver does: rules
//! (groups, versions, resources with subresources, operations, scope), `matchPolicy:
//! Equivalent` (an object of another served version of the same resource is converted to the
//! version the webhook names, and its patch applied there), `namespaceSelector`,
//! `objectSelector`, `sideEffects` against `dryRun`, `timeoutSeconds` and `failurePolicy`;
//! mutating webhooks in order (configurations by name, then their webhooks), each seeing the
//! previous one's patch, validating webhooks after them. Not done: `matchConditions` (CEL) and
//! `reinvocationPolicy: IfNeeded` (a mutating webhook is called once).

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::admission::{listed, strings};

use crate::error::ApiError;
use crate::resources::{ResourceKey, ResourceType};
use crate::server::AppState;
use crate::store::Store;

/// What is being admitted.
#[derive(Debug, Clone)]
pub struct Attributes {
    pub rt: std::sync::Arc<ResourceType>,
    /// The request's version.
    pub version: String,
    /// `""` for the main resource, else `status`, `scale`…
    pub subresource: String,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    pub namespace: String,
    pub name: String,
    pub dry_run: bool,
    pub user: String,
    pub groups: Vec<String>,
    /// The request's options object kind (`CreateOptions`, `UpdateOptions`, `PatchOptions`
    /// for an apply, `DeleteOptions`) and its field manager.
    pub options_kind: &'static str,
    pub field_manager: String,
}

/// One webhook of a configuration, with the version its rules accept for the request.
#[derive(Debug, Clone)]
pub struct Hook {
    name: String,
    mutating: bool,
    client: super::ClientConfig,
    timeout: Duration,
    fail_closed: bool,
    /// `sideEffects` is `None` or `NoneOnDryRun`: it may be called for a dry run.
    side_effect_free: bool,
    /// The version of the resource the webhook is sent (the request's, or an equivalent one).
    version: String,
}

/// Whether `rule` covers the resource (and subresource) at `version` for the operation.
fn rule_covers(rule: &Value, a: &Attributes, version: &str) -> bool {
    let resource = if a.subresource.is_empty() {
        a.rt.plural.clone()
    } else {
        format!("{}/{}", a.rt.plural, a.subresource)
    };
    let resources = strings(&rule["resources"]);
    let resource_ok = resources.iter().any(|r| match r.split_once('/') {
        None => (*r == "*" || *r == a.rt.plural) && a.subresource.is_empty(),
        Some((res, sub)) => {
            (res == "*" || res == a.rt.plural)
                && (sub == "*" || sub == a.subresource)
                && !a.subresource.is_empty()
        }
    }) || resources.contains(&resource.as_str());
    let scope = rule.get("scope").and_then(Value::as_str).unwrap_or("*");
    let scope_ok = match scope {
        "Cluster" => !a.rt.namespaced,
        "Namespaced" => a.rt.namespaced,
        _ => true,
    };
    listed(&rule["apiGroups"], &a.rt.group)
        && listed(&rule["apiVersions"], version)
        && listed(&rule["operations"], a.operation)
        && resource_ok
        && scope_ok
}

/// `metav1.LabelSelector` over an object's labels (its text form, as apimachinery writes it, read
/// by the server's label selector); an empty or absent selector matches everything.
fn selector_matches(selector: Option<&Value>, obj: Option<&Value>) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    crate::selectors::Selector::parse(&crate::handlers::selector_string(selector))
        .is_ok_and(|s| s.matches_labels(obj.unwrap_or(&Value::Null)))
}

fn configurations(mutating: bool) -> ResourceKey {
    ResourceKey {
        group: "admissionregistration.k8s.io".into(),
        plural: if mutating {
            "mutatingwebhookconfigurations"
        } else {
            "validatingwebhookconfigurations"
        }
        .into(),
    }
}

/// Whether any mutating (or validating) webhook configuration exists: a write nobody could see
/// runs in one go.
pub fn any(store: &Store, mutating: bool) -> bool {
    store.list(&configurations(mutating), None).next().is_some()
}

/// The webhooks that apply to a request, mutating or validating, in kube-apiserver's order.
/// Read under the store's lock; called without it.
pub fn matching(
    store: &Store,
    mutating: bool,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Vec<Hook> {
    let mut configs: Vec<_> = store.list(&configurations(mutating), None).collect();
    configs
        .sort_by(|x, y| crate::store::meta_str(x, "name").cmp(crate::store::meta_str(y, "name")));
    let namespace = (!a.namespace.is_empty())
        .then(|| {
            let ns_key = ResourceKey {
                group: String::new(),
                plural: "namespaces".into(),
            };
            store.get(&ns_key, "", &a.namespace)
        })
        .flatten();
    let mut hooks = Vec::new();
    for config in configs {
        for wh in config
            .get("webhooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let rules = wh.get("rules").and_then(Value::as_array);
            let covers = |version: &str| {
                rules
                    .into_iter()
                    .flatten()
                    .any(|r| rule_covers(r, a, version))
            };
            let equivalent = wh
                .get("matchPolicy")
                .and_then(Value::as_str)
                .unwrap_or("Equivalent")
                == "Equivalent";
            let version = if covers(&a.version) {
                Some(a.version.clone())
            } else if equivalent {
                a.rt.versions
                    .iter()
                    .map(|v| v.name.clone())
                    .find(|v| covers(v))
            } else {
                None
            };
            let Some(version) = version else { continue };
            // The namespace selector applies to namespaced objects (and to Namespaces
            // themselves, by their own labels); cluster-scoped objects always match it.
            let ns_ok = if a.rt.group.is_empty() && a.rt.plural == "namespaces" {
                selector_matches(wh.get("namespaceSelector"), object.or(old))
            } else if a.rt.namespaced {
                selector_matches(
                    wh.get("namespaceSelector"),
                    namespace.as_deref().map(|n| &**n),
                )
            } else {
                true
            };
            let selector = wh.get("objectSelector");
            let object_ok = selector_matches(selector, object) || selector_matches(selector, old);
            if !(ns_ok && object_ok) {
                continue;
            }
            hooks.push(Hook {
                name: wh
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                mutating,
                client: super::ClientConfig::from_value(
                    wh.get("clientConfig").unwrap_or(&Value::Null),
                ),
                timeout: Duration::from_secs(
                    wh.get("timeoutSeconds")
                        .and_then(Value::as_u64)
                        .unwrap_or(10),
                ),
                fail_closed: wh
                    .get("failurePolicy")
                    .and_then(Value::as_str)
                    .unwrap_or("Fail")
                    == "Fail",
                side_effect_free: matches!(
                    wh.get("sideEffects").and_then(Value::as_str),
                    Some("None" | "NoneOnDryRun")
                ),
                version,
            });
        }
    }
    hooks
}

/// The `AdmissionReview` request kube-apiserver sends.
fn review(
    a: &Attributes,
    hook: &Hook,
    uid: &str,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let group = &a.rt.group;
    let mut request = json!({
        "uid": uid,
        "kind": {"group": group, "version": hook.version, "kind": a.rt.kind},
        "resource": {"group": group, "version": hook.version, "resource": a.rt.plural},
        "requestKind": {"group": group, "version": a.version, "kind": a.rt.kind},
        "requestResource": {"group": group, "version": a.version, "resource": a.rt.plural},
        "name": a.name,
        "operation": a.operation,
        "userInfo": {"username": a.user, "groups": a.groups},
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": a.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": a.options_kind},
    });
    if !a.subresource.is_empty() {
        request["subResource"] = json!(a.subresource);
        request["requestSubResource"] = json!(a.subresource);
    }
    if !a.namespace.is_empty() {
        request["namespace"] = json!(a.namespace);
    }
    if !a.field_manager.is_empty() && a.options_kind != "DeleteOptions" {
        request["options"]["fieldManager"] = json!(a.field_manager);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// kube-apiserver's answer when a webhook could not be called, or answered nonsense, under
/// `failurePolicy: Fail`.
fn call_failed(hook: &Hook, why: String) -> ApiError {
    ApiError::Status(Box::new(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("Internal error occurred: failed calling webhook \"{}\": {why}", hook.name),
        "reason": "InternalError",
        "details": {"causes": [{"message": format!("failed calling webhook \"{}\": {why}", hook.name)}]},
        "code": 500,
    })))
}

/// A denial as kube-apiserver reports it (`webhookerrors.ToStatusErr`): the webhook's status,
/// its code at least 400, its message prefixed with the webhook's name.
fn denied(hook: &Hook, status: Option<&Value>) -> ApiError {
    let mut status = status.cloned().unwrap_or_else(|| json!({}));
    let denied_by = format!("admission webhook \"{}\" denied the request", hook.name);
    let code = status.get("code").and_then(Value::as_u64).unwrap_or(0);
    status["code"] = json!(if code < 400 { 400 } else { code });
    status["status"] = json!("Failure");
    let message = status.get("message").and_then(Value::as_str).unwrap_or("");
    let reason = status.get("reason").and_then(Value::as_str).unwrap_or("");
    status["message"] = json!(match (message, reason) {
        ("", "") => format!("{denied_by} without explanation"),
        ("", r) => format!("{denied_by}: {r}"),
        (m, _) => format!("{denied_by}: {m}"),
    });
    status["kind"] = json!("Status");
    status["apiVersion"] = json!("v1");
    if status.get("metadata").is_none() {
        status["metadata"] = json!({});
    }
    ApiError::Status(Box::new(status))
}

/// What one webhook said: allowed (with a JSON patch for a mutating one) or denied.
pub struct Answer {
    pub patch: Option<json_patch::Patch>,
    pub warnings: Vec<String>,
}

/// Call one webhook with the objects at its version. `Ok(None)`: it could not be called and its
/// failure policy is `Ignore`.
pub async fn call(
    state: &AppState,
    a: &Attributes,
    hook: &Hook,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Option<Answer>, ApiError> {
    if a.dry_run && !hook.side_effect_free {
        return Err(ApiError::BadRequest(format!(
            "admission webhook \"{}\" does not support dry run",
            hook.name
        )));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let body = review(a, hook, &uid, object, old);
    let failed = |why: String| {
        if hook.fail_closed {
            Err(call_failed(hook, why))
        } else {
            tracing::warn!(webhook = %hook.name, error = %why, "failed calling webhook, ignored (failurePolicy Ignore)");
            Ok(None)
        }
    };
    let answer = match state
        .webhooks()
        .call(&hook.client, &body, hook.timeout)
        .await
    {
        Ok(a) => a,
        Err(e) => return failed(e.to_string()),
    };
    let Some(response) = answer.get("response") else {
        return failed("the response has no response field".into());
    };
    if response.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
        return failed(format!(
            "expected response.uid=\"{uid}\", got \"{}\"",
            response.get("uid").and_then(Value::as_str).unwrap_or("")
        ));
    }
    let warnings = strings(&response["warnings"])
        .into_iter()
        .map(str::to_string)
        .collect();
    if response.get("allowed").and_then(Value::as_bool) != Some(true) {
        return Err(denied(hook, response.get("status")));
    }
    let patch = match response.get("patch").and_then(Value::as_str) {
        Some(p) if hook.mutating => {
            if response.get("patchType").and_then(Value::as_str) != Some("JSONPatch") {
                return failed("the response has a patch but no patchType \"JSONPatch\"".into());
            }
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    serde_json::from_slice::<json_patch::Patch>(&b).map_err(|e| e.to_string())
                });
            match decoded {
                Ok(p) => Some(p),
                Err(e) => return failed(format!("decoding the patch: {e}")),
            }
        }
        _ => None,
    };
    Ok(Some(Answer { patch, warnings }))
}

/// Run the mutating webhooks in order on `object` (at the request's version), each on the
/// previous one's result. Returns the mutated object and the webhooks' warnings.
pub async fn mutate(
    state: &AppState,
    a: &Attributes,
    hooks: &[Hook],
    mut object: Value,
    old: Option<&Value>,
) -> Result<(Value, Vec<String>), ApiError> {
    let mut warnings = Vec::new();
    for hook in hooks {
        let at = a.rt.api_version(&hook.version);
        let sent = super::conversion::one(state, &a.rt, object.clone(), &at).await?;
        let old_sent = match old {
            Some(o) => Some(super::conversion::one(state, &a.rt, o.clone(), &at).await?),
            None => None,
        };
        let Some(answer) = call(state, a, hook, Some(&sent), old_sent.as_ref()).await? else {
            continue;
        };
        warnings.extend(answer.warnings);
        let Some(patch) = answer.patch else { continue };
        let mut patched = sent;
        if let Err(e) = json_patch::patch(&mut patched, &patch) {
            return Err(call_failed(hook, format!("applying the patch: {e}")));
        }
        object =
            super::conversion::one(state, &a.rt, patched, &a.rt.api_version(&a.version)).await?;
    }
    Ok((object, warnings))
}

/// Run the validating webhooks (kube-apiserver calls them in parallel) on the object as it
/// would be stored.
pub async fn validate(
    state: &AppState,
    a: &Attributes,
    hooks: &[Hook],
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let calls = hooks.iter().map(|hook| async move {
        let at = a.rt.api_version(&hook.version);
        let sent = match object {
            Some(o) => Some(super::conversion::one(state, &a.rt, o.clone(), &at).await?),
            None => None,
        };
        let old_sent = match old {
            Some(o) => Some(super::conversion::one(state, &a.rt, o.clone(), &at).await?),
            None => None,
        };
        call(state, a, hook, sent.as_ref(), old_sent.as_ref()).await
    });
    let mut warnings = Vec::new();
    for answer in futures::future::join_all(calls).await {
        if let Some(answer) = answer? {
            warnings.extend(answer.warnings);
        }
    }
    Ok(warnings)
}
