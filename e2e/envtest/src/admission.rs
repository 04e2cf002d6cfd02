//! ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) as kube-apiserver 1.32 applies it
//! to creates and updates: each binding's policy, when its `matchConstraints` (and the binding's
//! `matchResources`) cover the request, evaluates its `matchConditions`, `variables` and
//! `validations` in CEL (Kubernetes' CEL libraries, from kube-cel) over `object`, `oldObject`,
//! `request`, `params` and `namespaceObject`; a failed validation of a `Deny` binding refuses
//! the request with kube-apiserver's message. Label selectors of policies and bindings are not
//! evaluated (every object matches).

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Value as Cel};
use kube_cel::cel::{Context, Program};
use serde_json::{Value, json};

use crate::error::{ApiError, Target};
use crate::resources::{ResourceKey, ResourceType};
use crate::store::{Store, meta_str};

const GROUP: &str = "admissionregistration.k8s.io";

fn key(plural: &str) -> ResourceKey {
    ResourceKey {
        group: GROUP.into(),
        plural: plural.into(),
    }
}

/// The request being admitted.
pub struct Attributes<'a> {
    pub rt: &'a ResourceType,
    pub version: &'a str,
    /// `CREATE` or `UPDATE`.
    pub operation: &'a str,
    pub namespace: &'a str,
    pub object: &'a Value,
    pub old: Option<&'a Value>,
}

pub(crate) fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Whether a rule's list names `value` or `*`.
pub(crate) fn listed(list: &Value, value: &str) -> bool {
    strings(list).iter().any(|v| *v == "*" || *v == value)
}

/// A `resourceRules` entry covering the request (operations, groups, versions, resources with
/// `*`, `resource/subresource` not supported beyond the main resource).
fn rule_matches(rule: &Value, a: &Attributes) -> bool {
    listed(&rule["operations"], a.operation)
        && listed(&rule["apiGroups"], &a.rt.group)
        && listed(&rule["apiVersions"], a.version)
        && listed(&rule["resources"], &a.rt.plural)
}

fn resources_match(match_resources: &Value, a: &Attributes) -> bool {
    let covered = |field: &str| {
        match_resources[field]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| rule_matches(r, a))
    };
    covered("resourceRules") && !covered("excludeResourceRules")
}

/// JSON as Kubernetes' CEL sees it: whole numbers are `int` (serde's conversion would make
/// them `uint`, which `int` arithmetic such as `x % 2` does not accept).
fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => cel_map(
            map.iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect(),
        ),
    }
}

fn cel_map(entries: HashMap<Key, Cel>) -> Cel {
    Cel::Map(kube_cel::cel::objects::Map {
        map: Arc::new(entries),
    })
}

/// How an expression turned out: `Ok(value)` or the evaluation error.
fn evaluate(expression: &str, ctx: &Context) -> Result<Cel, String> {
    let program = Program::compile(expression).map_err(|e| e.to_string())?;
    program.execute(ctx).map_err(|e| e.to_string())
}

/// Check a write against every binding; the first denial refuses it.
pub fn admit(store: &Store, a: &Attributes) -> Result<(), ApiError> {
    let bindings: Vec<Value> = store
        .list(&key("validatingadmissionpolicybindings"), None)
        .map(|o| Value::clone(o))
        .collect();
    if bindings.is_empty() || a.rt.group == GROUP {
        return Ok(());
    }
    for binding in &bindings {
        let policy_name = binding["spec"]["policyName"].as_str().unwrap_or("");
        let Some(policy) = store.get(&key("validatingadmissionpolicies"), "", policy_name) else {
            continue;
        };
        let spec = &policy["spec"];
        if !resources_match(&spec["matchConstraints"], a)
            || (binding["spec"].get("matchResources").is_some()
                && binding["spec"]["matchResources"]["resourceRules"].is_array()
                && !resources_match(&binding["spec"]["matchResources"], a))
        {
            continue;
        }
        let deny = strings(&binding["spec"]["validationActions"]).contains(&"Deny");
        let denied = |message: String, reason: Option<&str>| ApiError::Admission {
            target: Target {
                kind: a.rt.plural.clone(),
                group: a.rt.group.clone(),
                name: meta_str(a.object, "name").to_string(),
            },
            message: format!(
                "ValidatingAdmissionPolicy '{policy_name}' with binding '{}' denied request: {message}",
                meta_str(binding, "name")
            ),
            // kube-apiserver's known reasons; another is a 400 BadRequest.
            reason: match reason.unwrap_or("Invalid") {
                "Invalid" => "Invalid",
                "Forbidden" => "Forbidden",
                "RequestEntityTooLarge" => "RequestEntityTooLarge",
                _ => "BadRequest",
            },
        };
        let ctx = context(store, a, spec, binding);
        let fail_closed = spec["failurePolicy"].as_str() != Some("Ignore");
        // matchConditions: all must hold; an error counts against the failure policy.
        let mut applies = true;
        for condition in spec["matchConditions"].as_array().into_iter().flatten() {
            let expression = condition["expression"].as_str().unwrap_or("");
            match evaluate(expression, &ctx) {
                Ok(Cel::Bool(true)) => {}
                Ok(_) => applies = false,
                Err(e) if fail_closed && deny => return Err(denied(e, None)),
                Err(_) => applies = false,
            }
        }
        if !applies || !deny {
            continue;
        }
        for v in spec["validations"].as_array().into_iter().flatten() {
            let expression = v["expression"].as_str().unwrap_or("");
            let reason = v["reason"].as_str();
            match evaluate(expression, &ctx) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => {
                    let from_expression =
                        v["messageExpression"]
                            .as_str()
                            .and_then(|m| match evaluate(m, &ctx) {
                                Ok(Cel::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
                                _ => None,
                            });
                    let message = from_expression
                        .or_else(|| v["message"].as_str().map(String::from))
                        .unwrap_or_else(|| format!("failed expression: {expression}"));
                    return Err(denied(message, reason));
                }
                Ok(_) if fail_closed => {
                    return Err(denied(
                        format!("expression '{expression}' resulted in error: no such overload"),
                        reason,
                    ));
                }
                Err(e) if fail_closed => {
                    return Err(denied(
                        format!("expression '{expression}' resulted in error: {e}"),
                        reason,
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The CEL environment of one policy and binding: the request's variables, the binding's
/// parameter object, then the policy's `variables` in order (each may use the ones before it).
fn context<'a>(store: &Store, a: &Attributes, spec: &Value, binding: &Value) -> Context<'a> {
    let mut ctx = Context::default().with_all();
    let (user, groups) = ("admin", ["system:masters", "system:authenticated"]);
    let request = json!({
        "operation": a.operation,
        "name": meta_str(a.object, "name"),
        "namespace": a.namespace,
        "kind": {"group": a.rt.group, "version": a.version, "kind": a.rt.kind},
        "resource": {"group": a.rt.group, "version": a.version, "resource": a.rt.plural},
        "userInfo": {"username": user, "groups": groups},
        "dryRun": false,
    });
    ctx.add_variable_from_value("object", to_cel(a.object));
    ctx.add_variable_from_value("oldObject", a.old.map(to_cel).unwrap_or(Cel::Null));
    ctx.add_variable_from_value("request", to_cel(&request));
    let namespace = store
        .get(
            &ResourceKey {
                group: String::new(),
                plural: "namespaces".into(),
            },
            "",
            a.namespace,
        )
        .map(|ns| to_cel(&ns))
        .unwrap_or(Cel::Null);
    ctx.add_variable_from_value("namespaceObject", namespace);
    ctx.add_variable_from_value("params", params(store, a, spec, binding));
    let mut variables: HashMap<Key, Cel> = HashMap::new();
    ctx.add_variable_from_value("variables", cel_map(variables.clone()));
    for v in spec["variables"].as_array().into_iter().flatten() {
        let (Some(name), Some(expression)) = (v["name"].as_str(), v["expression"].as_str()) else {
            continue;
        };
        // A variable that fails to evaluate is an error only where it is used.
        if let Ok(value) = evaluate(expression, &ctx) {
            variables.insert(Key::String(Arc::new(name.to_string())), value);
            ctx.add_variable_from_value("variables", cel_map(variables.clone()));
        }
    }
    ctx
}

/// The binding's parameter object (`paramRef` by name, in its namespace or the request's),
/// or null when the policy has no `paramKind`.
fn params(store: &Store, a: &Attributes, spec: &Value, binding: &Value) -> Cel {
    let kind = &spec["paramKind"];
    let reference = &binding["spec"]["paramRef"];
    let (Some(api_version), Some(kind), Some(name)) = (
        kind["apiVersion"].as_str(),
        kind["kind"].as_str(),
        reference["name"].as_str(),
    ) else {
        return Cel::Null;
    };
    let Some(rt) = store.find_type_by_kind(api_version, kind) else {
        return Cel::Null;
    };
    let namespace = if rt.namespaced {
        reference["namespace"].as_str().unwrap_or(a.namespace)
    } else {
        ""
    };
    store
        .get(&rt.key(), namespace, name)
        .map(|p| to_cel(&p))
        .unwrap_or(Cel::Null)
}
