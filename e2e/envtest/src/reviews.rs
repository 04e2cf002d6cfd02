//! The kinds kube-apiserver answers without storing them: access and token reviews (created,
//! answered, forgotten) and ComponentStatus (computed on read). The server has no
//! authentication: every client is `admin` in `system:masters`, as envtest's admin user is.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::ResourceType;

/// The user every request comes from.
const USER: &str = "admin";
const GROUPS: [&str; 2] = ["system:masters", "system:authenticated"];

/// The answer to a `create` of a review kind: the request's spec with the status
/// kube-apiserver's authorizer and authenticator give `admin` (all allowed) and, for other users,
/// what a cluster without RBAC bindings gives (nothing allowed: no RBAC rule is evaluated).
pub fn answer(rt: &ResourceType, mut body: Value) -> Result<Value, ApiError> {
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "the request body must be an object".into(),
        ));
    }
    let version = rt.versions.first().map(|v| v.name.as_str()).unwrap_or("v1");
    body["apiVersion"] = json!(rt.api_version(version));
    body["kind"] = json!(rt.kind);
    let mut metadata = body
        .get("metadata")
        .filter(|m| m.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    for k in ["uid", "resourceVersion", "managedFields", "generation"] {
        if let Some(m) = metadata.as_object_mut() {
            m.remove(k);
        }
    }
    metadata["creationTimestamp"] = Value::Null;
    body["metadata"] = metadata;
    let status = match rt.kind.as_str() {
        "SelfSubjectAccessReview" => json!({"allowed": true}),
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let user = body.pointer("/spec/user").and_then(Value::as_str);
            let masters = body
                .pointer("/spec/groups")
                .and_then(Value::as_array)
                .is_some_and(|g| g.iter().any(|g| g == "system:masters"));
            json!({"allowed": user == Some(USER) || masters})
        }
        "SelfSubjectRulesReview" => json!({
            "resourceRules": [
                {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
                {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
                 "resources": ["selfsubjectreviews"]},
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            ],
            "nonResourceRules": [
                {"verbs": ["get"], "nonResourceURLs":
                    ["/healthz", "/livez", "/readyz", "/version", "/version/"]},
                {"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*",
                    "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version",
                    "/version/"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ],
            "incomplete": false,
        }),
        "SelfSubjectReview" => {
            body["metadata"]["creationTimestamp"] = json!(crate::lifecycle::now());
            json!({"userInfo": {"username": USER, "groups": GROUPS}})
        }
        // No token is valid: the server has no authentication.
        "TokenReview" => json!({"user": {}, "error": "invalid bearer token"}),
        _ => return Err(ApiError::MethodNotAllowed),
    };
    if rt.kind == "SelfSubjectRulesReview" && body.get("spec").is_some() {
        // kube-apiserver answers with an empty spec.
        body["spec"] = json!({});
    }
    body["status"] = status;
    Ok(body)
}

/// `ComponentStatusList` as kube-apiserver without kube-controller-manager and scheduler
/// reports it: both unreachable, the store healthy.
pub fn component_statuses() -> Vec<Value> {
    let unreachable = |name: &str, port: u16| {
        json!({"metadata": {"name": name, "creationTimestamp": null},
            "conditions": [{"type": "Healthy", "status": "False", "message": format!(
                "Get \"https://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: connection refused")}]})
    };
    vec![
        unreachable("controller-manager", 10257),
        unreachable("scheduler", 10259),
        json!({"metadata": {"name": "etcd-0", "creationTimestamp": null},
            "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}),
    ]
}
