//! The built-in kinds the server serves without a CRD.

use serde_json::Value;

use crate::resources::{PrinterColumn, ResourceType, ScalePaths, Subresource, Version};

/// The OpenAPI schema of a built-in kind, from k8s-openapi (inlined, so it works for pruning,
/// validation and `/openapi/v3`).
pub fn schema_of<T: schemars::JsonSchema>() -> Option<Value> {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(m) = schema.as_object_mut() {
        m.remove("title");
        m.remove("$schema");
    }
    mark_merge_lists(&mut schema);
    preserve_raw_extensions(&mut schema);
    Some(schema)
}

/// A `runtime.RawExtension` (ControllerRevision `data`) holds any JSON object: kube-apiserver
/// keeps it as raw bytes, never prunes it. k8s-openapi's schema for it is a bare `type: object`
/// (inlined under the field's own description, so not recognisable by name), which pruning
/// would empty: a bare object keeps what it holds. (The other bare objects are Go's empty
/// structs, such as a CRD's `subresources.status: {}`, where kube-apiserver would drop unknown
/// keys and the server keeps them.)
fn preserve_raw_extensions(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            let bare = m.get("type").and_then(Value::as_str) == Some("object")
                && !m.contains_key("properties")
                && !m.contains_key("additionalProperties");
            if bare {
                m.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
            }
            m.values_mut().for_each(preserve_raw_extensions);
        }
        Value::Array(items) => items.iter_mut().for_each(preserve_raw_extensions),
        _ => {}
    }
}

/// k8s-openapi's schemas do not carry the Go `patchStrategy` tags; kube-apiserver's
/// structured-merge-diff treats a list with a merge key as a map keyed by it and a merged list
/// of scalars as a set. Mark them as such, so that `managedFields` name their items
/// (`k:{"name":"a"}`, `v:"f"`) as kube-apiserver's do.
fn mark_merge_lists(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if let Some(Value::Object(props)) = m.get_mut("properties") {
                for (name, prop) in props.iter_mut() {
                    if prop.get("type").and_then(Value::as_str) == Some("array") {
                        if name == "ports" && is_service_port(prop.get("items")) {
                            // ServiceSpec.ports: `listType=map`, keyed by port and protocol
                            // (its strategic-merge key is port alone).
                            prop["x-kubernetes-list-type"] = "map".into();
                            prop["x-kubernetes-list-map-keys"] =
                                serde_json::json!(["port", "protocol"]);
                        } else if let Some(key) = crate::patch::merge_key(name) {
                            prop["x-kubernetes-list-type"] = "map".into();
                            prop["x-kubernetes-list-map-keys"] = serde_json::json!([key]);
                            // ServiceAccount.secrets holds ObjectReferences, a Go struct tagged
                            // `structType=atomic`: owned whole, never field by field.
                            if name == "secrets" && prop.get("items").is_some() {
                                prop["items"]["x-kubernetes-map-type"] = "atomic".into();
                            }
                        } else if crate::patch::primitive_merge(name) {
                            prop["x-kubernetes-list-type"] = "set".into();
                        }
                    }
                }
            }
            for v in m.values_mut() {
                mark_merge_lists(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mark_merge_lists),
        _ => {}
    }
}

/// A `ServicePort` item schema (a Service's ports; an EndpointPort has no targetPort, a
/// ContainerPort no port).
fn is_service_port(items: Option<&Value>) -> bool {
    let props = items.and_then(|i| i.get("properties"));
    ["port", "protocol", "targetPort", "nodePort"]
        .iter()
        .all(|k| props.and_then(|p| p.get(k)).is_some())
}

fn col(name: &str, type_: &str, json_path: &str, priority: i64) -> PrinterColumn {
    PrinterColumn {
        name: name.to_string(),
        type_: type_.to_string(),
        format: String::new(),
        description: String::new(),
        priority,
        json_path: json_path.to_string(),
    }
}

/// The verbs of a kind kube-apiserver stores (sorted, as its discovery lists them).
pub(crate) const STORED: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// The verbs of the review kinds and bindings: created, answered, never stored.
const CREATE_ONLY: &[&str] = &["create"];
/// Subresources that only proxy or stream (`pods/exec`…), listed in discovery.
const PROXY: &[&str] = &["create", "delete", "get", "patch", "update"];
const CONNECT: &[&str] = &["create", "get"];

/// A built-in kind from k8s-openapi's `Resource` trait (group, version, kind, plural, scope)
/// and its schema, with the stored kinds' verbs and no short names, categories nor
/// subresources yet.
fn kind<T>() -> ResourceType
where
    T: k8s_openapi::Resource + schemars::JsonSchema,
    T::Scope: 'static,
{
    let namespaced = std::any::TypeId::of::<T::Scope>()
        == std::any::TypeId::of::<k8s_openapi::NamespaceResourceScope>();
    ResourceType {
        group: T::GROUP.to_string(),
        kind: T::KIND.to_string(),
        list_kind: format!("{}List", T::KIND),
        plural: T::URL_PATH_SEGMENT.to_string(),
        singular: T::KIND.to_lowercase(),
        namespaced,
        short_names: Vec::new(),
        categories: Vec::new(),
        versions: vec![Version {
            name: T::VERSION.to_string(),
            has_defaults: false,
            has_cel: false,
            cel: None,
            schema: None,
            status_subresource: false,
            scale: None,
            printer_columns: Vec::new(),
            lazy_schema: Some(schema_of::<T>),
        }],
        builtin: true,
        verbs: Some(STORED),
        subresources: Vec::new(),
        conversion: None,
        storage_version: None,
        storage_hash: Some(crate::resources::storage_version_hash(
            T::GROUP,
            T::VERSION,
            T::KIND,
        )),
    }
}

/// Discovery details kube-apiserver 1.32 gives a built-in kind.
trait Details: Sized {
    fn short(self, names: &[&str]) -> Self;
    fn categories(self, names: &[&str]) -> Self;
    fn status(self) -> Self;
    /// `/scale` over `.spec.replicas`, `.status.replicas` and the selector at `.spec.selector`.
    fn scale(self) -> Self;
    fn columns(self, columns: Vec<PrinterColumn>) -> Self;
    /// A subresource only listed in discovery (`pods/exec`, `serviceaccounts/token`…).
    fn sub(self, name: &str, response: (&str, &str, &str), verbs: &'static [&'static str]) -> Self;
    /// Verbs other than the stored kinds' ones.
    fn verbs(self, verbs: &'static [&'static str]) -> Self;
    /// A kind kube-apiserver answers but never stores (reviews, bindings, ComponentStatus).
    fn unstored(self) -> Self;
    /// Stored under another group/version/kind (what `storageVersionHash` hashes).
    fn stored_as(self, group: &str, version: &str, kind: &str) -> Self;
}

impl Details for ResourceType {
    fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }
    fn categories(mut self, names: &[&str]) -> Self {
        self.categories = names.iter().map(|s| s.to_string()).collect();
        self
    }
    fn status(mut self) -> Self {
        self.versions
            .iter_mut()
            .for_each(|v| v.status_subresource = true);
        self
    }
    fn scale(mut self) -> Self {
        for v in &mut self.versions {
            v.scale = Some(ScalePaths {
                spec_replicas: ".spec.replicas".into(),
                status_replicas: ".status.replicas".into(),
                label_selector: Some(".spec.selector".into()),
            });
        }
        self
    }
    fn columns(mut self, columns: Vec<PrinterColumn>) -> Self {
        for v in &mut self.versions {
            v.printer_columns = columns.clone();
        }
        self
    }
    fn sub(
        mut self,
        name: &str,
        (group, version, kind): (&str, &str, &str),
        verbs: &'static [&'static str],
    ) -> Self {
        self.subresources.push(Subresource {
            name: name.to_string(),
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            verbs,
        });
        self
    }
    fn verbs(mut self, verbs: &'static [&'static str]) -> Self {
        self.verbs = Some(verbs);
        self
    }
    fn unstored(mut self) -> Self {
        self.storage_hash = None;
        self
    }
    fn stored_as(mut self, group: &str, version: &str, kind: &str) -> Self {
        self.storage_hash = Some(crate::resources::storage_version_hash(group, version, kind));
        self
    }
}

/// A resource type with its built-in schemas generated (once per process and kind, on first
/// use); custom resource types are left as they are.
pub fn hydrate(rt: &mut ResourceType) {
    type Cache = std::sync::Mutex<
        std::collections::HashMap<(String, String, String), Option<std::sync::Arc<Value>>>,
    >;
    static SCHEMAS: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    for v in &mut rt.versions {
        let Some(generate) = v.lazy_schema.filter(|_| v.schema.is_none()) else {
            continue;
        };
        let key = (rt.group.clone(), v.name.clone(), rt.kind.clone());
        let cached = SCHEMAS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&key)
            .cloned();
        let schema = match cached {
            Some(s) => s,
            None => {
                // Generated outside the lock: two threads may both generate, one wins.
                let s = generate().map(std::sync::Arc::new);
                SCHEMAS
                    .get_or_init(Default::default)
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(key, s.clone());
                s
            }
        };
        v.has_defaults = schema
            .as_deref()
            .is_some_and(|s| crate::resources::mentions(s, "default"));
        v.schema = schema;
    }
}

/// `hydrate` for a type shared with the store: copied only when a schema is still to be
/// generated. Returns whether it was.
pub fn hydrate_shared(rt: &mut std::sync::Arc<ResourceType>) -> bool {
    let pending = rt
        .versions
        .iter()
        .any(|v| v.lazy_schema.is_some() && v.schema.is_none());
    if pending {
        hydrate(std::sync::Arc::make_mut(rt));
    }
    pending
}

/// Every built-in resource type with its schemas (for the OpenAPI documents).
pub fn hydrated_types() -> Vec<ResourceType> {
    let mut types = resource_types();
    types.iter_mut().for_each(hydrate);
    types
}

/// Every built-in resource type (built once per process; schemas are generated on first use).
pub fn resource_types() -> Vec<ResourceType> {
    static TYPES: std::sync::OnceLock<Vec<ResourceType>> = std::sync::OnceLock::new();
    TYPES.get_or_init(build).clone()
}

/// The same kind in two versions of its group (HorizontalPodAutoscaler in `autoscaling/v1`
/// and `v2`): one resource type, one storage, the first version preferred.
fn with_version(mut rt: ResourceType, other: ResourceType) -> ResourceType {
    rt.versions.extend(other.versions);
    rt
}

fn build() -> Vec<ResourceType> {
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn,
        authorization::v1 as authz, autoscaling, batch::v1 as batch,
        certificates::v1 as certificates, core::v1 as core, discovery::v1 as discovery,
        flowcontrol::v1 as flowcontrol, networking::v1 as networking, node::v1 as node,
        policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
        storage::v1 as storage,
    };
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    let all = &["all"];
    let extensions = &["api-extensions"];
    let core_kind = |k: &'static str| ("", "", k);
    vec![
        // core/v1
        kind::<core::Binding>().verbs(CREATE_ONLY).unstored(),
        kind::<core::ComponentStatus>()
            .verbs(&["get", "list"])
            .unstored()
            .short(&["cs"]),
        kind::<core::ConfigMap>().short(&["cm"]),
        kind::<core::Endpoints>().short(&["ep"]),
        kind::<core::Event>().short(&["ev"]).columns(vec![
            col("Type", "string", ".type", 0),
            col("Reason", "string", ".reason", 0),
            col("Message", "string", ".message", 0),
        ]),
        kind::<core::LimitRange>().short(&["limits"]),
        kind::<core::Namespace>()
            .verbs(&[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ])
            .short(&["ns"])
            .status()
            .sub("finalize", core_kind("Namespace"), &["update"])
            .columns(vec![col("Status", "string", ".status.phase", 0)]),
        kind::<core::Node>().short(&["no"]).status().sub(
            "proxy",
            core_kind("NodeProxyOptions"),
            PROXY,
        ),
        kind::<core::PersistentVolumeClaim>()
            .short(&["pvc"])
            .status(),
        kind::<core::PersistentVolume>().short(&["pv"]).status(),
        kind::<core::Pod>()
            .short(&["po"])
            .categories(all)
            .status()
            .sub("attach", core_kind("PodAttachOptions"), CONNECT)
            .sub("binding", core_kind("Binding"), CREATE_ONLY)
            .sub(
                "ephemeralcontainers",
                core_kind("Pod"),
                &["get", "patch", "update"],
            )
            .sub("eviction", ("policy", "v1", "Eviction"), CREATE_ONLY)
            .sub("exec", core_kind("PodExecOptions"), CONNECT)
            .sub("log", core_kind("Pod"), &["get"])
            .sub("portforward", core_kind("PodPortForwardOptions"), CONNECT)
            .sub("proxy", core_kind("PodProxyOptions"), PROXY)
            .sub("resize", core_kind("Pod"), &["get", "patch", "update"]),
        kind::<core::PodTemplate>(),
        kind::<core::ReplicationController>()
            .short(&["rc"])
            .categories(all)
            .status()
            .scale(),
        kind::<core::ResourceQuota>().short(&["quota"]).status(),
        kind::<core::Secret>().columns(vec![col("Type", "string", ".type", 0)]),
        kind::<core::ServiceAccount>().short(&["sa"]).sub(
            "token",
            ("authentication.k8s.io", "v1", "TokenRequest"),
            CREATE_ONLY,
        ),
        kind::<core::Service>()
            .short(&["svc"])
            .categories(all)
            .status()
            .sub("proxy", core_kind("ServiceProxyOptions"), PROXY),
        // apiregistration.k8s.io/v1
        kind::<apiregistration::APIService>()
            .categories(extensions)
            .status(),
        // apps/v1
        kind::<apps::ControllerRevision>(),
        kind::<apps::DaemonSet>()
            .short(&["ds"])
            .categories(all)
            .status(),
        kind::<apps::Deployment>()
            .short(&["deploy"])
            .categories(all)
            .status()
            .scale(),
        kind::<apps::ReplicaSet>()
            .short(&["rs"])
            .categories(all)
            .status()
            .scale(),
        kind::<apps::StatefulSet>()
            .short(&["sts"])
            .categories(all)
            .status()
            .scale(),
        // events.k8s.io/v1: stored as core/v1 Events (the two are kept in step, see events.rs).
        kind::<k8s_openapi::api::events::v1::Event>()
            .short(&["ev"])
            .stored_as("", "v1", "Event")
            .columns(vec![
                col("Type", "string", ".type", 0),
                col("Reason", "string", ".reason", 0),
                col("Note", "string", ".note", 0),
            ]),
        // authentication.k8s.io/v1, authorization.k8s.io/v1
        kind::<authn::SelfSubjectReview>()
            .verbs(CREATE_ONLY)
            .unstored(),
        kind::<authn::TokenReview>().verbs(CREATE_ONLY).unstored(),
        kind::<authz::LocalSubjectAccessReview>()
            .verbs(CREATE_ONLY)
            .unstored(),
        kind::<authz::SelfSubjectAccessReview>()
            .verbs(CREATE_ONLY)
            .unstored(),
        kind::<authz::SelfSubjectRulesReview>()
            .verbs(CREATE_ONLY)
            .unstored(),
        kind::<authz::SubjectAccessReview>()
            .verbs(CREATE_ONLY)
            .unstored(),
        // autoscaling: v2 is the storage version and preferred, v1 served from the same storage.
        with_version(
            kind::<autoscaling::v2::HorizontalPodAutoscaler>(),
            kind::<autoscaling::v1::HorizontalPodAutoscaler>(),
        )
        .short(&["hpa"])
        .categories(all)
        .status(),
        // batch/v1
        kind::<batch::CronJob>()
            .short(&["cj"])
            .categories(all)
            .status(),
        kind::<batch::Job>().categories(all).status(),
        // certificates.k8s.io/v1
        kind::<certificates::CertificateSigningRequest>()
            .short(&["csr"])
            .status()
            .sub(
                "approval",
                core_kind("CertificateSigningRequest"),
                &["get", "patch", "update"],
            ),
        // networking.k8s.io/v1
        kind::<networking::IngressClass>(),
        kind::<networking::Ingress>().short(&["ing"]).status(),
        kind::<networking::NetworkPolicy>().short(&["netpol"]),
        // policy/v1
        kind::<policy::PodDisruptionBudget>()
            .short(&["pdb"])
            .status(),
        // rbac.authorization.k8s.io/v1
        kind::<rbac::ClusterRoleBinding>(),
        kind::<rbac::ClusterRole>(),
        kind::<rbac::RoleBinding>(),
        kind::<rbac::Role>(),
        // storage.k8s.io/v1
        kind::<storage::CSIDriver>(),
        kind::<storage::CSINode>(),
        kind::<storage::CSIStorageCapacity>(),
        kind::<storage::StorageClass>().short(&["sc"]),
        kind::<storage::VolumeAttachment>().status(),
        // admissionregistration.k8s.io/v1
        kind::<admission::MutatingWebhookConfiguration>().categories(extensions),
        kind::<admission::ValidatingAdmissionPolicy>()
            .categories(extensions)
            .status(),
        kind::<admission::ValidatingAdmissionPolicyBinding>().categories(extensions),
        kind::<admission::ValidatingWebhookConfiguration>().categories(extensions),
        // apiextensions.k8s.io/v1: CRDs are stored as v1beta1 (the storageVersionHash says so).
        crd_kind(),
        // scheduling.k8s.io/v1, coordination.k8s.io/v1, node.k8s.io/v1, discovery.k8s.io/v1
        kind::<scheduling::PriorityClass>().short(&["pc"]),
        kind::<k8s_openapi::api::coordination::v1::Lease>().columns(vec![col(
            "Holder",
            "string",
            ".spec.holderIdentity",
            0,
        )]),
        kind::<node::RuntimeClass>(),
        kind::<discovery::EndpointSlice>(),
        // flowcontrol.apiserver.k8s.io/v1
        kind::<flowcontrol::FlowSchema>().status(),
        kind::<flowcontrol::PriorityLevelConfiguration>().status(),
    ]
}

/// CustomResourceDefinitions are checked by hand (lifecycle.rs), not against a schema.
fn crd_kind() -> ResourceType {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut rt = kind::<CustomResourceDefinition>()
        .short(&["crd", "crds"])
        .categories(&["api-extensions"])
        .status()
        .stored_as(
            "apiextensions.k8s.io",
            "v1beta1",
            "CustomResourceDefinition",
        )
        .columns(vec![col(
            "Created At",
            "date",
            ".metadata.creationTimestamp",
            0,
        )]);
    for v in &mut rt.versions {
        v.lazy_schema = None;
    }
    rt
}
