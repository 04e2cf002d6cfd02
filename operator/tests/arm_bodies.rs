//! Without the retired SDK's models, nothing typed checks the bodies the adapters send. This
//! holds every adapter's `desired` body — for every cloud CR of the samples and of the
//! translator's golden outputs — against ARM's REST specification: the swagger extracts the
//! emulator's own spec tests use (e2e/armsim/tests/data/), which keep each kind's read-only
//! properties. A read-only property in a PUT body is refused or ignored by ARM, and would show as
//! drift for ever. The extracts are of Network 2024-03-01, Compute 2024-07-01, Resources
//! 2021-04-01 and Private DNS 2024-06-01; the read-only sets of these kinds' properties Strata sends are the same at the
//! versions now sent (2025-05-01, 2025-04-01), which the emulator's spec tests hold it to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use strata_crds::azure;
use strata_operator::adapters::{AzureResource, Resolved};
use strata_operator::arm_id::ArmId;
use strata_operator::kind::CloudKind;

const SUB: &str = "00000000-0000-0000-0000-000000000001";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// `definitions` and `roots` (ARM type → definition) of the extracts, merged.
fn spec() -> (BTreeMap<String, Value>, BTreeMap<String, String>) {
    let mut definitions = BTreeMap::new();
    let mut roots = BTreeMap::new();
    for file in [
        "network-2024-03-01.json",
        "compute-2024-07-01.json",
        "resources-2021-04-01.json",
        "privatedns-2024-06-01.json",
    ] {
        let path = repo_root().join("e2e/armsim/tests/data").join(file);
        let extract: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for (k, v) in extract["definitions"].as_object().unwrap() {
            definitions.insert(k.clone(), v.clone());
        }
        for (k, v) in extract["roots"].as_object().unwrap() {
            roots.insert(k.clone(), v.as_str().unwrap().to_owned());
        }
    }
    (definitions, roots)
}

/// A definition's properties, `allOf` parents included.
fn properties(definitions: &BTreeMap<String, Value>, name: &str) -> serde_json::Map<String, Value> {
    let Some(def) = definitions.get(name) else {
        return serde_json::Map::new();
    };
    let mut out = serde_json::Map::new();
    for parent in def["allOf"].as_array().into_iter().flatten() {
        if let Some(r) = parent["$ref"].as_str() {
            out.extend(properties(definitions, ref_name(r)));
        }
    }
    if let Some(own) = def["properties"].as_object() {
        out.extend(own.clone());
    }
    out
}

fn ref_name(r: &str) -> &str {
    r.trim_start_matches("#/definitions/")
}

/// Every read-only property of the spec that `body` sets, by JSON path.
fn read_only_sent(
    definitions: &BTreeMap<String, Value>,
    def: &str,
    body: &Value,
    path: &str,
) -> Vec<String> {
    let mut found = Vec::new();
    let Some(object) = body.as_object() else {
        return found;
    };
    let props = properties(definitions, def);
    for (key, value) in object {
        let Some(prop) = props.get(key) else { continue };
        let here = format!("{path}/{key}");
        if prop["readOnly"] == true {
            found.push(here.clone());
        }
        if let Some(r) = prop["$ref"].as_str() {
            found.extend(read_only_sent(definitions, ref_name(r), value, &here));
        }
        if let (Some(r), Some(items)) = (prop["items"]["$ref"].as_str(), value.as_array()) {
            for (i, item) in items.iter().enumerate() {
                found.extend(read_only_sent(
                    definitions,
                    ref_name(r),
                    item,
                    &format!("{here}/{i}"),
                ));
            }
        }
    }
    found
}

/// The desired body of one cloud CR (a YAML document), with its references resolved to IDs.
fn desired_of<K: AzureResource + DeserializeOwned>(doc: &Value) -> (CloudKind, Value) {
    let obj: K = serde_json::from_value(doc.clone()).unwrap();
    let rg = ArmId::resource_group(SUB, "rg");
    let mut resolved = Resolved::default();
    resolved.id = Some(rg.child(K::KIND, "self"));
    resolved.custom_data = obj.custom_data().map(|_| "IyEvYmluL3NoCg==".to_owned());
    for reference in obj.references() {
        if let Some(name) = &reference.to.name {
            let id = rg.child(reference.kind, name).to_string();
            resolved.refs.insert((reference.kind, name.clone()), id);
        }
    }
    let body = obj.desired(&resolved);
    // Every reference the body names is one the kind lists, so the loop resolves it.
    assert_eq!(
        resolved.unresolved(),
        Vec::<String>::new(),
        "{}: references the adapter does not list",
        K::KIND
    );
    (K::KIND, body)
}

fn desired(doc: &Value) -> Option<(CloudKind, Value)> {
    let kind = doc["kind"].as_str()?;
    // Every cloud kind of the registry, so that a new kind needs no line here.
    macro_rules! cloud_kinds {
        ($($k:ident in $file:ident),+ $(,)?) => {
            $(if kind == stringify!($k) {
                return Some(desired_of::<azure::$k>(doc));
            })+
        };
    }
    strata_crds::with_cloud_kinds!(cloud_kinds);
    None
}

/// Every cloud CR in the samples and the translator's golden outputs.
fn cloud_crs() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["samples/azure", "samples/azure-by-arm-id"] {
        for e in std::fs::read_dir(repo_root().join(dir)).unwrap() {
            files.push(e.unwrap().path());
        }
    }
    for e in std::fs::read_dir(repo_root().join("translator/tests/golden")).unwrap() {
        files.push(e.unwrap().path().join("expected.yaml"));
    }
    let mut docs = Vec::new();
    for file in files
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "yaml") && f.exists())
    {
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if v["apiVersion"] == "azure.strata.dev/v1alpha1" {
                let name = format!(
                    "{} {}/{}",
                    file.display(),
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["name"].as_str().unwrap_or_default()
                );
                docs.push((name, v));
            }
        }
    }
    docs
}

#[test]
fn no_adapter_sends_a_read_only_property_of_arms_specification() {
    let (definitions, roots) = spec();
    let crs = cloud_crs();
    let mut kinds = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for (name, doc) in &crs {
        let Some((kind, body)) = desired(doc) else {
            continue;
        };
        kinds.insert(kind);
        let root = roots
            .get(&kind.arm_type_name())
            .unwrap_or_else(|| panic!("no extract describes {}", kind.arm_type_name()));
        for path in read_only_sent(&definitions, root, &body, "") {
            problems.push(format!("{name}: {path}"));
        }
    }
    assert!(
        problems.is_empty(),
        "read-only properties in PUT bodies:\n{}",
        problems.join("\n")
    );
    assert_eq!(
        kinds.len(),
        CloudKind::ALL.len(),
        "every kind's adapter was checked (have {kinds:?} from {} CRs)",
        crs.len()
    );
}

#[test]
fn the_check_finds_a_read_only_property() {
    // The checker itself: a body that sets what ARM computes is caught, at any depth.
    let (definitions, _) = spec();
    let body = json!({
        "location": "westeurope",
        "properties": {"provisioningState": "Succeeded", "subnets": [
            {"name": "s", "properties": {"addressPrefix": "10.0.0.0/24", "ipConfigurations": []}}
        ]}
    });
    let found = read_only_sent(&definitions, "VirtualNetwork", &body, "");
    assert!(
        found.contains(&"/properties/provisioningState".to_owned()),
        "{found:?}"
    );
    assert!(
        found.contains(&"/properties/subnets/0/properties/ipConfigurations".to_owned()),
        "{found:?}"
    );
}
