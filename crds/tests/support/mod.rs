//! Shared by the crds integration tests: reading the YAML under samples/ and crds/generated/, and
//! checking objects against the generated schemas the way an API server would (OpenAPI structure
//! with `jsonschema`, then `x-kubernetes-validations` with `kube-cel`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The repository root (crds/ is one level down).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Every YAML document in `path`, as JSON values.
pub fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// The `*.yaml` files of a directory under the repository root, sorted.
pub fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// The openAPIV3Schema of `apiVersion`/`kind` from crds/generated.
pub fn schema_for(api_version: &str, kind: &str) -> Value {
    let (group, version) = api_version.split_once('/').unwrap();
    for file in yaml_files("crds/generated") {
        let crd = &documents(&file)[0];
        if crd["spec"]["group"] == group && crd["spec"]["names"]["kind"] == kind {
            let versions = crd["spec"]["versions"].as_array().unwrap();
            let v = versions.iter().find(|v| v["name"] == version).unwrap();
            let mut schema = v["schema"]["openAPIV3Schema"].clone();
            nullable_as_json_schema(&mut schema);
            return schema;
        }
    }
    panic!("no generated CRD for {api_version} {kind}")
}

/// OpenAPI's `nullable: true` means JSON Schema's `type: [<type>, "null"]`: kube-apiserver takes
/// a `null` there, and `jsonschema` knows only the JSON Schema spelling.
fn nullable_as_json_schema(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::String(t)) = map.get("type").cloned()
            {
                map.insert("type".into(), serde_json::json!([t, "null"]));
            }
            map.values_mut().for_each(nullable_as_json_schema);
        }
        Value::Array(items) => items.iter_mut().for_each(nullable_as_json_schema),
        _ => {}
    }
}

/// Everything the schemas say is wrong with `object` (an update of `old` when given), each as
/// `<field path>: <message>` with Kubernetes-style paths (`spec.rules[0].priority`).
pub fn violations(object: &Value, old: Option<&Value>) -> Vec<String> {
    let schema = schema_for(
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
    );
    let mut found = Vec::new();
    let validator = jsonschema::validator_for(&schema).expect("generated schema compiles");
    for error in validator.iter_errors(object) {
        let mut path = k8s_path(&error.instance_path().to_string());
        if let jsonschema::error::ValidationErrorKind::Required { property } = error.kind() {
            let field = property.as_str().unwrap_or_default();
            path = if path.is_empty() {
                field.to_owned()
            } else {
                format!("{path}.{field}")
            };
        }
        found.push(format!("{path}: {error}"));
    }
    list_map_duplicates(&schema, object, "", &mut found);
    if let Err(errors) = kube_cel::Validator::new().validate(&schema, object, old) {
        found.extend(
            errors
                .iter()
                .map(|e| format!("{}: {}", e.field_path, e.message)),
        );
    }
    found
}

/// `/spec/rules/0/priority` → `spec.rules[0].priority`.
fn k8s_path(pointer: &str) -> String {
    let mut path = String::new();
    for segment in pointer.split('/').skip(1) {
        if segment.parse::<usize>().is_ok() {
            path.push_str(&format!("[{segment}]"));
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    path
}

/// `x-kubernetes-list-type: map` entries whose keys repeat an earlier entry's, as the API server
/// reports them (`spec.items[1]: Duplicate value`); JSON Schema has no keyword for this.
fn list_map_duplicates(schema: &Value, value: &Value, path: &str, found: &mut Vec<String>) {
    let child = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let sub = schema["properties"]
                    .get(k)
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(sub) = sub {
                    list_map_duplicates(sub, v, &child(k), found);
                }
            }
        }
        Value::Array(items) => {
            if schema["x-kubernetes-list-type"] == "map" {
                let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let key_of =
                    |item: &Value| keys.iter().map(|k| item[*k].clone()).collect::<Vec<_>>();
                for (i, item) in items.iter().enumerate() {
                    if items[..i].iter().any(|o| key_of(o) == key_of(item)) {
                        found.push(format!("{path}[{i}]: Duplicate value"));
                    }
                }
            }
            for (i, item) in items.iter().enumerate() {
                list_map_duplicates(&schema["items"], item, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}
