//! API Priority and Fairness as a client sees it: the FlowSchemas and PriorityLevelConfigurations
//! kube-apiserver 1.32 creates at start (`assets/flowcontrol-defaults.json`, read from it), and
//! every request classified by them, answered with the `X-Kubernetes-PF-FlowSchema-UID` and
//! `X-Kubernetes-PF-PriorityLevel-UID` headers. Nothing is queued or rejected: the server has
//! no concurrency limits to enforce.

use std::sync::Arc;

use axum::http::HeaderMap;
use k8s_openapi::api::flowcontrol::v1::{
    FlowSchema, NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject,
};
use serde_json::{Value, json};

use crate::resources::ResourceKey;
use crate::store::Store;

pub const FLOW_SCHEMA_HEADER: &str = "x-kubernetes-pf-flowschema-uid";
pub const PRIORITY_LEVEL_HEADER: &str = "x-kubernetes-pf-prioritylevel-uid";
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";

fn key(plural: &str) -> ResourceKey {
    ResourceKey {
        group: GROUP.into(),
        plural: plural.into(),
    }
}

/// kube-apiserver's mandatory and suggested configuration objects, parsed once per process.
fn defaults() -> &'static Value {
    static DEFAULTS: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(|| {
        serde_json::from_str(include_str!("assets/flowcontrol-defaults.json"))
            .unwrap_or_else(|e| unreachable!("the bundled flowcontrol defaults parse: {e}"))
    })
}

/// Store the default objects, as kube-apiserver's config producer does when it starts (their
/// specs are kube-apiserver's; written directly, without the create path, to keep start-up
/// quick).
pub fn install_defaults(store: &mut Store) {
    let now = crate::lifecycle::now();
    for (list, plural) in [
        ("priorityLevelConfigurations", "prioritylevelconfigurations"),
        ("flowSchemas", "flowschemas"),
    ] {
        for obj in defaults()[list].as_array().into_iter().flatten() {
            let mut obj = obj.clone();
            obj["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
            obj["metadata"]["creationTimestamp"] = json!(now);
            obj["metadata"]["generation"] = json!(1);
            store.insert(&key(plural), obj);
        }
    }
    mark_dangling(store);
}

/// The `Dangling` condition of every FlowSchema, as kube-apiserver's APF configuration
/// controller keeps it (`apf_controller.go`): `True`/`NotFound` when no
/// PriorityLevelConfiguration has the name its spec references, else `False`/`Found`; a
/// FlowSchema whose condition already says so is left alone.
pub fn mark_dangling(store: &mut Store) {
    let levels: std::collections::HashSet<String> = store
        .list(&key("prioritylevelconfigurations"), None)
        .map(|l| crate::store::meta_str(l, "name").to_string())
        .collect();
    let now = crate::lifecycle::now();
    let updates: Vec<Value> = store
        .list(&key("flowschemas"), None)
        .filter_map(|fs| {
            let level = fs
                .pointer("/spec/priorityLevelConfiguration/name")
                .and_then(Value::as_str)?;
            let quoted = crate::lifecycle::go_quote(level);
            let (status, reason, message) = if levels.contains(level) {
                ("False", "Found", format!("This FlowSchema references the PriorityLevelConfiguration object named {quoted} and it exists"))
            } else {
                ("True", "NotFound", format!("This FlowSchema references the PriorityLevelConfiguration object named {quoted} but there is no such object"))
            };
            let mut conditions: Vec<Value> = fs
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let current = conditions.iter().position(|c| c["type"] == "Dangling");
            if let Some(i) = current
                && conditions[i]["status"] == status
                && conditions[i]["reason"] == reason
                && conditions[i]["message"] == message.as_str()
            {
                return None;
            }
            let condition = json!({"type": "Dangling", "status": status, "reason": reason,
                "message": message, "lastTransitionTime": now});
            match current {
                Some(i) => conditions[i] = condition,
                None => conditions.push(condition),
            }
            let mut updated = Value::clone(fs);
            updated["status"] = json!({ "conditions": conditions });
            Some(updated)
        })
        .collect();
    for fs in updates {
        store.replace(&key("flowschemas"), fs);
    }
}

/// kube-apiserver's concurrency limit with its default flags: `--max-requests-inflight` (400)
/// plus `--max-mutating-requests-inflight` (200), shared among the priority levels.
const SERVER_CONCURRENCY_LIMIT: f64 = 600.0;

/// `GET /metrics`: the flow-control series that describe the configuration, in Prometheus'
/// text format — `apiserver_flowcontrol_nominal_limit_seats` per priority level, each level's
/// share of the server's concurrency limit (`ceil(limit × shares / sum of shares)`, exempt
/// levels' shares included, as kube-apiserver computes it). Nothing is queued here, so the
/// series of a running queue are not served.
pub fn metrics(store: &Store) -> String {
    let levels: Vec<(String, f64)> = store
        .list(&key("prioritylevelconfigurations"), None)
        .map(|l| {
            let shares = l
                .pointer("/spec/limited/nominalConcurrencyShares")
                .or_else(|| l.pointer("/spec/exempt/nominalConcurrencyShares"))
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            (crate::store::meta_str(l, "name").to_string(), shares)
        })
        .collect();
    let sum: f64 = levels.iter().map(|(_, s)| s).sum();
    let mut out = String::from(
        "# HELP apiserver_flowcontrol_nominal_limit_seats [BETA] Nominal number of execution seats configured for each priority level\n# TYPE apiserver_flowcontrol_nominal_limit_seats gauge\n",
    );
    for (name, shares) in &levels {
        let seats = if sum > 0.0 {
            (SERVER_CONCURRENCY_LIMIT * shares / sum).ceil()
        } else {
            0.0
        };
        out.push_str(&format!(
            "apiserver_flowcontrol_nominal_limit_seats{{priority_level=\"{name}\"}} {seats}\n"
        ));
    }
    out
}

/// Who sent a request and what it asks, as the classifier matches it.
pub struct Request<'a> {
    pub user: &'a str,
    pub groups: Vec<&'a str>,
    pub verb: &'a str,
    /// `None` for a non-resource request (`/version`, `/healthz`, `/openapi/v2` …).
    pub resource: Option<ResourceAttributes<'a>>,
    pub path: &'a str,
}

pub struct ResourceAttributes<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
}

/// The user a request runs as: the server has one, `admin` in `system:masters` (the identity
/// of the kubeconfig it writes), unless the request impersonates another (`Impersonate-User`,
/// `Impersonate-Group`; kube-apiserver adds `system:authenticated`).
pub fn user(headers: &HeaderMap) -> (&str, Vec<&str>) {
    match headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    {
        Some(user) => {
            let mut groups: Vec<&str> = headers
                .get_all("impersonate-group")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            if !groups.contains(&"system:authenticated") {
                groups.push("system:authenticated");
            }
            (user, groups)
        }
        None => ("admin", vec!["system:masters", "system:authenticated"]),
    }
}

struct Schema {
    uid: String,
    priority_level_uid: String,
    rules: Vec<PolicyRulesWithSubjects>,
}

/// The FlowSchemas in matching order (precedence, then name), each with its priority level's
/// UID; built from the store when a flowcontrol object changes.
pub struct Classifier(Vec<Schema>);

impl Classifier {
    pub fn build(store: &Store) -> Classifier {
        let levels: std::collections::HashMap<&str, &str> = store
            .list(&key("prioritylevelconfigurations"), None)
            .map(|o| {
                (
                    crate::store::meta_str(o, "name"),
                    crate::store::meta_str(o, "uid"),
                )
            })
            .collect();
        let mut schemas: Vec<(i32, String, Schema)> = store
            .list(&key("flowschemas"), None)
            .filter_map(|o| serde_json::from_value::<FlowSchema>(Value::clone(o)).ok())
            .filter_map(|fs| {
                let spec = fs.spec;
                // A schema whose priority level does not exist ("dangling") classifies nothing.
                let level = levels.get(spec.priority_level_configuration.name.as_str())?;
                Some((
                    spec.matching_precedence.unwrap_or(1000),
                    fs.metadata.name.clone().unwrap_or_default(),
                    Schema {
                        uid: fs.metadata.uid.clone().unwrap_or_default(),
                        priority_level_uid: (*level).to_string(),
                        rules: spec.rules.unwrap_or_default(),
                    },
                ))
            })
            .collect();
        schemas.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Classifier(schemas.into_iter().map(|(_, _, s)| s).collect())
    }

    /// The UIDs of the FlowSchema and priority level a request is classified into.
    pub fn classify(&self, req: &Request) -> Option<(&str, &str)> {
        self.0
            .iter()
            .find(|s| s.rules.iter().any(|r| rule_matches(r, req)))
            .map(|s| (s.uid.as_str(), s.priority_level_uid.as_str()))
    }
}

/// Build a shared classifier (cached by the caller until a flowcontrol object changes).
pub fn classifier(store: &Store) -> Arc<Classifier> {
    Arc::new(Classifier::build(store))
}

fn listed(values: &[String], value: &str, all: &str) -> bool {
    values.iter().any(|v| v == all || v == value)
}

fn subject_matches(s: &Subject, req: &Request) -> bool {
    match s.kind.as_str() {
        "User" => s
            .user
            .as_ref()
            .is_some_and(|u| u.name == "*" || u.name == req.user),
        "Group" => s
            .group
            .as_ref()
            .is_some_and(|g| g.name == "*" || req.groups.contains(&g.name.as_str())),
        "ServiceAccount" => s.service_account.as_ref().is_some_and(|sa| {
            req.user
                .strip_prefix("system:serviceaccount:")
                .and_then(|rest| rest.split_once(':'))
                .is_some_and(|(ns, name)| sa.namespace == ns && (sa.name == "*" || sa.name == name))
        }),
        _ => false,
    }
}

fn resource_rule_matches(r: &ResourcePolicyRule, req: &Request, a: &ResourceAttributes) -> bool {
    let resource = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let namespace_ok = if a.namespace.is_empty() {
        r.cluster_scope == Some(true)
    } else {
        r.namespaces
            .as_deref()
            .is_some_and(|n| listed(n, a.namespace, "*"))
    };
    listed(&r.verbs, req.verb, "*")
        && listed(&r.api_groups, a.group, "*")
        && listed(&r.resources, &resource, "*")
        && namespace_ok
}

fn non_resource_rule_matches(r: &NonResourcePolicyRule, req: &Request) -> bool {
    listed(&r.verbs, req.verb, "*")
        && r.non_resource_urls.iter().any(|u| {
            u == "*"
                || u == req.path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| req.path.starts_with(prefix))
        })
}

fn rule_matches(r: &PolicyRulesWithSubjects, req: &Request) -> bool {
    if !r.subjects.iter().any(|s| subject_matches(s, req)) {
        return false;
    }
    match &req.resource {
        Some(a) => r
            .resource_rules
            .iter()
            .flatten()
            .any(|rr| resource_rule_matches(rr, req, a)),
        None => r
            .non_resource_rules
            .iter()
            .flatten()
            .any(|nr| non_resource_rule_matches(nr, req)),
    }
}
