//! The request log: every resource request the server answered, as an authorizer sees it (verb,
//! API group, resource, subresource) with the caller's user agent — the same fields
//! kube-apiserver's audit log records, so that a test can read either (see
//! [`crate::TestEnv::request_log`]) and prove that a controller's RBAC role grants what it uses
//! and nothing more ([`Rules::check`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::handlers::parse_path;
use crate::server::AppState;

/// How many requests the embedded server remembers by default (the oldest go first).
pub const CAPACITY: usize = 200_000;

/// One resource request.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// API group (`""` for the core group).
    pub group: String,
    pub resource: String,
    /// `status`, `scale` … or `""`.
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub user_agent: String,
    pub code: u16,
}

impl RequestRecord {
    /// What RBAC rules must grant for this request: its verb, and `create` as well for a patch
    /// that created the object (server-side apply of a new object answers 201, and
    /// kube-apiserver authorizes it as both).
    pub fn accesses(&self) -> Vec<Access> {
        let resource = if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        };
        let access = |verb: &str| Access {
            verb: verb.to_owned(),
            group: self.group.clone(),
            resource: resource.clone(),
        };
        let mut out = vec![access(&self.verb)];
        if self.verb == "patch" && self.code == 201 {
            out.push(access("create"));
        }
        out
    }

    /// A record from one line of kube-apiserver's JSON audit log (`None` for non-resource
    /// requests such as discovery, and for lines that are not audit events).
    pub fn from_audit_line(line: &str) -> Option<(String, RequestRecord)> {
        let v: Value = serde_json::from_str(line).ok()?;
        let o = v.get("objectRef")?;
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let record = RequestRecord {
            verb: s(&v, "verb"),
            group: s(o, "apiGroup"),
            resource: s(o, "resource"),
            subresource: s(o, "subresource"),
            namespace: s(o, "namespace"),
            name: s(o, "name"),
            user_agent: s(&v, "userAgent"),
            code: v
                .pointer("/responseStatus/code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(0),
        };
        Some((s(&v, "auditID"), record))
    }
}

/// The Kubernetes verb of a request, as kube-apiserver's request-info resolver names it.
pub fn verb(method: &Method, has_name: bool, watch: bool) -> &'static str {
    match (method.as_str(), has_name) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// The embedded server's log, of at most its capacity.
pub struct RequestLog(Mutex<VecDeque<RequestRecord>>, usize);

impl RequestLog {
    pub fn new(capacity: usize) -> RequestLog {
        RequestLog(Mutex::new(VecDeque::new()), capacity)
    }

    pub fn push(&self, r: RequestRecord) {
        if self.1 == 0 {
            return;
        }
        let mut log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() >= self.1 {
            log.pop_front();
        }
        log.push_back(r);
    }

    pub fn entries(&self) -> Vec<RequestRecord> {
        let log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        log.iter().cloned().collect()
    }
}

/// Middleware: records each resource request once its response status is known.
pub async fn record(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let path = parse_path(uri.path());
    let watch_param = uri
        .query()
        .unwrap_or("")
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    // API Priority and Fairness classifies every request (kube-apiserver's filter runs on
    // resource and non-resource requests alike, watches included).
    let resource_verb = path
        .as_ref()
        .map(|p| verb(&method, p.name.is_some(), watch_param));
    let method_verb = method.as_str().to_ascii_lowercase();
    let classified = {
        let (user, groups) = crate::flowcontrol::user(req.headers());
        state.classify(&crate::flowcontrol::Request {
            user,
            groups,
            verb: resource_verb.unwrap_or(&method_verb),
            resource: path.as_ref().and_then(|p| {
                Some(crate::flowcontrol::ResourceAttributes {
                    group: &p.group,
                    resource: p.plural.as_deref()?,
                    subresource: p.subresource.as_deref().unwrap_or(""),
                    namespace: p.namespace.as_deref().unwrap_or(""),
                })
            }),
            path: uri.path(),
        })
    };
    // kube-apiserver's request-deadline filter runs here rather than in a layer of its own, so
    // that requests pay no extra middleware (and its 400s are recorded as the audit log does).
    let mut response = match crate::handlers::invalid_timeout(&uri) {
        Some(error) => axum::response::IntoResponse::into_response(error),
        None => next.run(req).await,
    };
    if let Some((flow_schema, priority_level)) = classified {
        for (name, uid) in [
            (crate::flowcontrol::FLOW_SCHEMA_HEADER, flow_schema),
            (crate::flowcontrol::PRIORITY_LEVEL_HEADER, priority_level),
        ] {
            if let Ok(value) = axum::http::HeaderValue::from_str(&uid) {
                response.headers_mut().insert(name, value);
            }
        }
    }
    let Some(path) = path else {
        return response;
    };
    if path.group == crate::flowcontrol::GROUP && !matches!(method, Method::GET | Method::HEAD) {
        state.flowcontrol_changed();
    }
    let Some(resource) = path.plural.clone() else {
        return response;
    };
    state.requests().push(RequestRecord {
        verb: verb(&method, path.name.is_some(), watch_param).to_owned(),
        group: path.group,
        resource,
        subresource: path.subresource.unwrap_or_default(),
        namespace: path.namespace.unwrap_or_default(),
        name: path.name.unwrap_or_default(),
        user_agent,
        code: response.status().as_u16(),
    });
    response
}

/// What a request needs from RBAC: a verb on `resource` or `resource/subresource` of a group.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)
    }
}

/// The rules of RBAC roles (`rules` of ClusterRoles and Roles), as kube-apiserver's RBAC
/// authorizer matches them: verbs, apiGroups and resources each a list or `*`; a subresource
/// must be named as `resource/subresource` (or `*/subresource`).
#[derive(Debug, Default)]
pub struct Rules(Vec<Rule>);

#[derive(Debug)]
struct Rule {
    verbs: Vec<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// What a role grants beyond and short of what was used.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RbacReport {
    /// Used but not granted: the role is not enough.
    pub missing: BTreeSet<Access>,
    /// Granted (verb × group × resource of a rule) but never used: the role grants too much.
    pub unused: BTreeSet<Access>,
}

impl Rules {
    /// The rules of every ClusterRole and Role among `objects` (other kinds are skipped).
    pub fn of_roles(objects: &[Value]) -> Rules {
        let mut rules = Vec::new();
        for o in objects {
            if !matches!(o["kind"].as_str(), Some("ClusterRole" | "Role")) {
                continue;
            }
            for r in o["rules"].as_array().into_iter().flatten() {
                rules.push(Rule {
                    verbs: strings(r, "verbs"),
                    groups: strings(r, "apiGroups"),
                    resources: strings(r, "resources"),
                    resource_names: strings(r, "resourceNames"),
                });
            }
        }
        Rules(rules)
    }

    /// The rules of the roles in a (multi-document) YAML file, e.g. a deploy manifest.
    pub fn of_yaml_file(path: &std::path::Path) -> std::io::Result<Rules> {
        let text = std::fs::read_to_string(path)?;
        let mut objects = Vec::new();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            objects.push(v);
        }
        Ok(Rules::of_roles(&objects))
    }

    /// Whether some rule grants `a` (on any object name).
    pub fn grants(&self, a: &Access) -> bool {
        let any = |list: &[String], want: &str| list.iter().any(|x| x == "*" || x == want);
        self.0.iter().any(|r| {
            r.resource_names.is_empty()
                && any(&r.verbs, &a.verb)
                && any(&r.groups, &a.group)
                && (any(&r.resources, &a.resource)
                    || a.resource.split_once('/').is_some_and(|(_, sub)| {
                        r.resources.iter().any(|x| x == &format!("*/{sub}"))
                    }))
        })
    }

    /// Every (verb, group, resource) the rules name explicitly (wildcards are reported as
    /// such: a least-privilege role has none).
    pub fn granted(&self) -> BTreeSet<Access> {
        let mut out = BTreeSet::new();
        for r in &self.0 {
            for verb in &r.verbs {
                for group in &r.groups {
                    for resource in &r.resources {
                        out.insert(Access {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Compares the rules with the accesses `used` (e.g. from [`RequestRecord::accesses`]).
    pub fn check(&self, used: &BTreeSet<Access>) -> RbacReport {
        RbacReport {
            missing: used.iter().filter(|a| !self.grants(a)).cloned().collect(),
            unused: self.granted().difference(used).cloned().collect(),
        }
    }
}

/// The accesses of the requests whose user agent starts with `agent`, with how many each.
pub fn accesses_of(log: &[RequestRecord], agent: &str) -> BTreeMap<Access, usize> {
    let mut out = BTreeMap::new();
    for r in log.iter().filter(|r| r.user_agent.starts_with(agent)) {
        for a in r.accesses() {
            *out.entry(a).or_default() += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn access(verb: &str, group: &str, resource: &str) -> Access {
        Access {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
        }
    }

    #[test]
    fn rules_match_as_the_rbac_authorizer_does() {
        let rules = Rules::of_roles(&[
            json!({"kind": "ClusterRole", "rules": [
                {"apiGroups": ["azure.strata.dev"], "resources": ["subnets", "subnets/status"],
                 "verbs": ["get", "patch"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                 "resourceNames": ["only-this"]},
            ]}),
            json!({"kind": "ConfigMap", "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ]);
        assert!(rules.grants(&access("patch", "azure.strata.dev", "subnets/status")));
        assert!(!rules.grants(&access("update", "azure.strata.dev", "subnets")));
        assert!(!rules.grants(&access("get", "", "subnets")));
        // A rule limited to names does not grant list/get on any name.
        assert!(!rules.grants(&access("get", "", "secrets")));
        let used = BTreeSet::from([
            access("get", "azure.strata.dev", "subnets"),
            access("list", "azure.strata.dev", "subnets"),
        ]);
        let report = rules.check(&used);
        assert_eq!(
            report.missing,
            BTreeSet::from([access("list", "azure.strata.dev", "subnets")])
        );
        assert!(
            report
                .unused
                .contains(&access("patch", "azure.strata.dev", "subnets/status"))
        );
    }

    #[test]
    fn audit_lines_become_records() {
        let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/azure.strata.dev/v1alpha1/namespaces/ns/subnets/s/status","verb":"patch","userAgent":"strata-operator/0.1.0","objectRef":{"resource":"subnets","namespace":"ns","name":"s","apiGroup":"azure.strata.dev","apiVersion":"v1alpha1","subresource":"status"},"responseStatus":{"metadata":{},"code":200}}"#;
        let (id, r) = RequestRecord::from_audit_line(line).unwrap();
        assert_eq!(id, "a1");
        assert_eq!(
            r.accesses(),
            [access("patch", "azure.strata.dev", "subnets/status")]
        );
        assert_eq!(r.code, 200);
        // Server-side apply that creates the object needs create as well.
        let applied_new = RequestRecord {
            code: 201,
            subresource: String::new(),
            ..r
        };
        assert_eq!(
            applied_new.accesses(),
            [
                access("patch", "azure.strata.dev", "subnets"),
                access("create", "azure.strata.dev", "subnets")
            ]
        );
        assert!(RequestRecord::from_audit_line(r#"{"verb":"get","requestURI":"/api"}"#).is_none());
    }
}
