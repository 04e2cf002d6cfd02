//! The built-in kinds the server serves without a CRD.

use k8s_openapi::api::{coordination, core, events};
use serde_json::Value;

use crate::resources::{PrinterColumn, ResourceType, Version};

/// The OpenAPI schema of a built-in kind, from k8s-openapi (inlined, so it works for pruning,
/// validation and `/openapi/v3`).
fn schema_of<T: schemars::JsonSchema>() -> Option<Value> {
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
    Some(schema)
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
                        if let Some(key) = crate::patch::merge_key(name) {
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

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short_names: &[&str],
    status: bool,
    columns: Vec<PrinterColumn>,
    schema: Option<Value>,
) -> ResourceType {
    ResourceType {
        group: group.to_string(),
        kind: kind.to_string(),
        list_kind: format!("{kind}List"),
        plural: plural.to_string(),
        singular: kind.to_lowercase(),
        namespaced,
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        // kube-apiserver files CustomResourceDefinitions under the `api-extensions` category.
        categories: if kind == "CustomResourceDefinition" {
            vec!["api-extensions".to_string()]
        } else {
            Vec::new()
        },
        versions: vec![Version {
            name: version.to_string(),
            has_defaults: schema
                .as_ref()
                .is_some_and(|s| crate::resources::mentions(s, "default")),
            has_cel: false,
            cel: None,
            schema: schema.map(std::sync::Arc::new),
            status_subresource: status,
            scale: None,
            printer_columns: columns,
        }],
        builtin: true,
    }
}

/// Every built-in resource type (built once per process; schemas are generated).
pub fn resource_types() -> Vec<ResourceType> {
    static TYPES: std::sync::OnceLock<Vec<ResourceType>> = std::sync::OnceLock::new();
    TYPES.get_or_init(build).clone()
}

fn build() -> Vec<ResourceType> {
    vec![
        builtin(
            "",
            "v1",
            "Namespace",
            "namespaces",
            false,
            &["ns"],
            true,
            vec![col("Status", "string", ".status.phase", 0)],
            schema_of::<core::v1::Namespace>(),
        ),
        builtin(
            "",
            "v1",
            "Secret",
            "secrets",
            true,
            &[],
            false,
            vec![col("Type", "string", ".type", 0)],
            schema_of::<core::v1::Secret>(),
        ),
        builtin(
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            true,
            &["cm"],
            false,
            vec![],
            schema_of::<core::v1::ConfigMap>(),
        ),
        builtin(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            false,
            vec![],
            schema_of::<core::v1::ServiceAccount>(),
        ),
        builtin(
            "",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            false,
            vec![
                col("Type", "string", ".type", 0),
                col("Reason", "string", ".reason", 0),
                col("Message", "string", ".message", 0),
            ],
            schema_of::<core::v1::Event>(),
        ),
        builtin(
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            false,
            vec![
                col("Type", "string", ".type", 0),
                col("Reason", "string", ".reason", 0),
                col("Note", "string", ".note", 0),
            ],
            schema_of::<events::v1::Event>(),
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            &[],
            false,
            vec![col("Holder", "string", ".spec.holderIdentity", 0)],
            schema_of::<coordination::v1::Lease>(),
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            true,
            vec![col("Created At", "date", ".metadata.creationTimestamp", 0)],
            None,
        ),
    ]
}
