//! A custom resource version's schema as kube-apiserver 1.32 publishes it
//! (apiextensions-apiserver's `controller/openapi/builder`): the CRD's `openAPIV3Schema`
//! through `Structural.ToKubeOpenAPI` (Go's `omitempty`: false flags and empty lists vanish),
//! reduced by `ToStructuralOpenAPIV2` for `/openapi/v2`, with `apiVersion`, `kind` and
//! `metadata` added and `x-kubernetes-group-version-kind`. Clients compare these definitions
//! with the CRD's schema (the upstream `CustomResourcePublishOpenAPI` specs wait until they are
//! equal) and `kubectl explain` reads their descriptions.

use serde_json::{Map, Value, json};

use crate::resources::ResourceType;

const API_VERSION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
/// kube-apiserver 1.32's wording (`PartialObjectMetadataList`'s doc links to `#types-kinds`).
const LIST_METADATA: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
/// An embedded resource's `apiVersion` and `kind` (`addEmbeddedProperties`): other wording.
const EMBEDDED_API_VERSION: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

fn prefix(v2: bool) -> &'static str {
    if v2 {
        "#/definitions/"
    } else {
        "#/components/schemas/"
    }
}

fn flag(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// A reference with its own description: v3 wraps the `$ref` in an `allOf`, because a `$ref`
/// there may have no siblings.
fn reference(name: &str, v2: bool, description: &str) -> Value {
    let target = json!({"$ref": format!("{}{name}", prefix(v2))});
    if v2 {
        json!({"$ref": target["$ref"], "description": description})
    } else {
        json!({"allOf": [target], "description": description})
    }
}

/// `ObjectMeta` and `ListMeta`, which every custom resource definition refers to, from
/// k8s-openapi's schemas (with their field descriptions, which `kubectl explain` shows).
pub fn meta_definitions() -> &'static [(&'static str, Value)] {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    static DEFS: std::sync::OnceLock<Vec<(&'static str, Value)>> = std::sync::OnceLock::new();
    DEFS.get_or_init(|| {
        let object = crate::builtin::schema_of::<meta::ObjectMeta>();
        let list = crate::builtin::schema_of::<meta::ListMeta>();
        vec![
            (
                OBJECT_META,
                object.unwrap_or_else(|| json!({"type": "object"})),
            ),
            (LIST_META, list.unwrap_or_else(|| json!({"type": "object"}))),
        ]
    })
}

/// The definition of one served version of a custom resource.
pub fn definition(rt: &ResourceType, version: &str, v2: bool) -> Value {
    let schema = rt.version(version).and_then(|v| v.schema.as_deref());
    let gvk = json!([{"group": rt.group, "version": version, "kind": rt.kind}]);
    // kube-apiserver 1.32 lists the CRD's `selectableFields` here; the server supports none.
    let selectable = json!([]);
    // kubectl would refuse unknown fields if the v2 definition listed properties, so a schema
    // that keeps unknown fields at its root is published as a bare object there.
    let Some(schema) = schema.filter(|s| !(v2 && flag(s, "x-kubernetes-preserve-unknown-fields")))
    else {
        return json!({"type": "object", "x-kubernetes-group-version-kind": gvk,
            "x-kubernetes-selectable-fields": selectable});
    };
    let mut def = published(&unfold(schema), v2);
    if let Some(map) = def.as_object_mut() {
        let props = map
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(props) = props {
            props.insert("metadata".into(), reference(OBJECT_META, v2, METADATA));
            props.insert(
                "apiVersion".into(),
                json!({"description": API_VERSION, "type": "string"}),
            );
            props.insert(
                "kind".into(),
                json!({"description": KIND, "type": "string"}),
            );
        }
    }
    add_embedded_properties(&mut def, v2);
    def["x-kubernetes-group-version-kind"] = gvk;
    def["x-kubernetes-selectable-fields"] = selectable;
    def
}

/// The definition of a custom resource's list kind (`buildListSchema`).
pub fn list_definition(rt: &ResourceType, version: &str, item: &str, v2: bool) -> Value {
    json!({
        "description": format!("{} is a list of {}", rt.list_kind, rt.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION, "type": "string"},
            "kind": {"description": KIND, "type": "string"},
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", rt.plural),
                "type": "array",
                "items": {"$ref": format!("{}{item}", prefix(v2))},
            },
            "metadata": reference(LIST_META, v2, LIST_METADATA),
        },
        "x-kubernetes-group-version-kind": [{"group": rt.group, "version": version, "kind": rt.list_kind}],
        "x-kubernetes-selectable-fields": [],
    })
}

/// `Structural.Unfold`: an int-or-string node states its two types as an `anyOf` (or, when
/// it has another `anyOf`, in an `allOf` in front of it).
fn unfold(s: &Value) -> Value {
    let Some(map) = s.as_object() else {
        return s.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        let v = match k.as_str() {
            "properties" => Value::Object(
                v.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, p)| (name.clone(), unfold(p)))
                    .collect(),
            ),
            "items" | "additionalProperties" if v.is_object() => unfold(v),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if flag(s, "x-kubernetes-int-or-string") {
        let pair = json!([{"type": "integer"}, {"type": "string"}]);
        let in_all_of = map
            .get("allOf")
            .and_then(|a| a.get(0))
            .and_then(|a| a.get("anyOf"))
            == Some(&pair);
        match map.get("anyOf") {
            None if !in_all_of => {
                out.insert("anyOf".into(), pair);
            }
            Some(any) if *any != pair && !in_all_of => {
                let mut all = vec![json!({"anyOf": pair})];
                all.extend(
                    map.get("allOf")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
                out.insert("allOf".into(), Value::Array(all));
            }
            _ => {}
        }
    }
    Value::Object(out)
}

/// One node through `ToKubeOpenAPI` (and, for v2, `ToStructuralOpenAPIV2` first, which looks at
/// a node before its children): only what a structural schema holds, as Go writes it.
fn published(s: &Value, v2: bool) -> Value {
    let Some(map) = s.as_object() else {
        return s.clone();
    };
    let nullable = flag(s, "nullable");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let mut out = Map::new();
    for (k, v) in map {
        let keep = match k.as_str() {
            "nullable" => !v2 && v == &Value::Bool(true),
            "uniqueItems"
            | "exclusiveMaximum"
            | "exclusiveMinimum"
            | "x-kubernetes-preserve-unknown-fields"
            | "x-kubernetes-embedded-resource"
            | "x-kubernetes-int-or-string" => v == &Value::Bool(true),
            "required" | "enum" | "x-kubernetes-list-map-keys" | "x-kubernetes-validations" => {
                v.as_array().is_some_and(|a| !a.is_empty())
            }
            "type"
            | "format"
            | "description"
            | "title"
            | "pattern"
            | "x-kubernetes-list-type"
            | "x-kubernetes-map-type" => v.as_str().is_some_and(|t| !t.is_empty()),
            // Defaults are not published in v2.
            "default" => !v2,
            "maximum" | "minimum" | "maxLength" | "minLength" | "maxItems" | "minItems"
            | "multipleOf" | "maxProperties" | "minProperties" | "externalDocs" => true,
            "allOf" | "anyOf" | "oneOf" | "not" => !v2,
            "properties" | "items" | "additionalProperties" => true,
            _ => false,
        };
        if !keep {
            continue;
        }
        let v = match k.as_str() {
            "properties" => Value::Object(
                v.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, p)| (name.clone(), published(p, v2)))
                    .collect(),
            ),
            "items" | "additionalProperties" if v.is_object() => published(v, v2),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if v2 {
        // kubectl cannot cope with typed nodes that accept anything, nor with arrays
        // without items.
        if nullable {
            out.remove("type");
        }
        if nullable || preserve {
            out.remove("items");
            out.remove("properties");
        }
        let ty = out.get("type").and_then(Value::as_str);
        if (ty == Some("array") && !out.contains_key("items")) || (preserve && ty == Some("object"))
        {
            out.remove("type");
        }
        // A nullable field is not required in v2; a nullable map value makes nothing required.
        let nullable_fields: Vec<&String> = map
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(_, p)| flag(p, "nullable"))
            .map(|(name, _)| name)
            .collect();
        let nullable_values = map
            .get("additionalProperties")
            .is_some_and(|a| flag(a, "nullable"));
        if let Some(Value::Array(required)) = out.get_mut("required") {
            if nullable_values {
                required.clear();
            }
            required.retain(|r| {
                !nullable_fields
                    .iter()
                    .any(|f| r.as_str() == Some(f.as_str()))
            });
            if required.is_empty() {
                out.remove("required");
            }
        }
    }
    Value::Object(out)
}

/// `addEmbeddedProperties`: an embedded resource gets `apiVersion`, `kind` and `metadata`, and
/// requires the first two; in v2 not under a node that keeps unknown fields (kubectl would then
/// refuse the fields it does not list).
fn add_embedded_properties(s: &mut Value, v2: bool) {
    let Some(map) = s.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props
            .values_mut()
            .for_each(|p| add_embedded_properties(p, v2));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key).filter(|c| c.is_object()) {
            add_embedded_properties(child, v2);
        }
    }
    let set = |key: &str| map.get(key).and_then(Value::as_bool).unwrap_or(false);
    if (v2 && set("x-kubernetes-preserve-unknown-fields")) || !set("x-kubernetes-embedded-resource")
    {
        return;
    }
    if let Some(props) = map
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        props.insert(
            "apiVersion".into(),
            json!({"description": EMBEDDED_API_VERSION, "type": "string"}),
        );
        props.insert(
            "kind".into(),
            json!({"description": EMBEDDED_KIND, "type": "string"}),
        );
        props.insert("metadata".into(), reference(OBJECT_META, v2, METADATA));
    }
    let required = map.entry("required").or_insert_with(|| json!([]));
    if let Some(required) = required.as_array_mut() {
        for field in ["kind", "apiVersion"] {
            if !required.iter().any(|r| r == field) {
                required.push(json!(field));
            }
        }
    }
}
