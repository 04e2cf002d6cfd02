//! The generated schemas accept every sample and refuse every file under samples/invalid/, each
//! with an error naming the field its `# field:` comment gives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{documents, repo, violations, yaml_files};

#[test]
fn every_sample_and_fixture_is_accepted() {
    let mut checked = 0;
    for dir in [
        "samples/azure",
        "samples/azure-by-arm-id",
        "samples/capi",
        "crds/tests/fixtures",
    ] {
        for file in yaml_files(dir) {
            for object in documents(&file) {
                let errors = violations(&object, None);
                assert!(
                    errors.is_empty(),
                    "{} {}: {errors:#?}",
                    file.display(),
                    object["metadata"]["name"]
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} sample objects found");
}

#[test]
fn every_invalid_sample_is_refused_naming_its_field() {
    let files = yaml_files("samples/invalid");
    assert!(
        files.len() >= 15,
        "samples/invalid holds {} files, the foundation asks for 15",
        files.len()
    );
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let field = text
            .lines()
            .find_map(|l| l.strip_prefix("# field: "))
            .unwrap_or_else(|| panic!("{}: no `# field:` comment", file.display()));
        assert!(
            text.lines().any(|l| l.starts_with("# rule: ")),
            "{}: no `# rule:` comment",
            file.display()
        );
        let docs = documents(&file);
        let (old, new) = match docs.as_slice() {
            [new] => (None, new),
            [old, new] => {
                // A transition case: the stored object itself must be valid.
                assert_eq!(
                    violations(old, None),
                    Vec::<String>::new(),
                    "{}: first document",
                    file.display()
                );
                (Some(old), new)
            }
            _ => panic!(
                "{}: expected one object, or a stored object and its update",
                file.display()
            ),
        };
        let errors = violations(new, old);
        assert!(
            errors.iter().any(|e| e.starts_with(&format!("{field}:"))),
            "{}: expected an error on {field}, got {errors:#?}",
            file.display()
        );
    }
}

#[test]
fn every_cel_rule_compiles() {
    for file in yaml_files("crds/generated") {
        let crd = &documents(&file)[0];
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let schema = &version["schema"]["openAPIV3Schema"];
            let compiled = kube_cel::compile_schema(schema);
            let errors: Vec<String> = compiled
                .compilation_errors()
                .iter()
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
        }
    }
    // The checker itself must be able to fail: a broken rule is reported.
    let broken =
        serde_json::json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.("}]});
    assert!(kube_cel::compile_schema(&broken).has_errors());
}

#[test]
fn samples_directory_layout() {
    // The README points users at these files.
    for path in [
        "samples/capi/default-cluster.yaml",
        "samples/azure/cluster-resources.yaml",
    ] {
        assert!(repo().join(path).is_file(), "{path} is missing");
    }
}

/// Every `default` in a generated schema must satisfy the schema it sits in: API servers refuse a
/// CRD whose defaults break its own validation (a derived `Default` once gave `osDisk.diskSizeGB: 0`
/// against a minimum of 1).
#[test]
fn every_schema_default_is_valid_against_its_own_schema() {
    fn check(node: &serde_json::Value, path: &str, bad: &mut Vec<String>) {
        let Some(map) = node.as_object() else { return };
        if let Some(default) = map.get("default") {
            let mut schema = map.clone();
            schema.remove("default");
            let validator = jsonschema::validator_for(&serde_json::Value::Object(schema)).unwrap();
            for e in validator.iter_errors(default) {
                bad.push(format!("{path}: default {default} is invalid: {e}"));
            }
        }
        for (key, child) in map {
            match (key.as_str(), child) {
                ("properties", serde_json::Value::Object(props)) => {
                    for (name, prop) in props {
                        check(prop, &format!("{path}.{name}"), bad);
                    }
                }
                ("items" | "additionalProperties", _) => check(child, &format!("{path}[]"), bad),
                _ => {}
            }
        }
    }
    let mut bad = Vec::new();
    let mut defaults = 0;
    for file in yaml_files("crds/generated") {
        let text = std::fs::read_to_string(&file).unwrap();
        defaults += text.matches("default:").count();
        let crd = &documents(&file)[0];
        for version in crd["spec"]["versions"].as_array().unwrap() {
            check(
                &version["schema"]["openAPIV3Schema"],
                crd["spec"]["names"]["kind"].as_str().unwrap(),
                &mut bad,
            );
        }
    }
    assert!(
        defaults > 10,
        "expected the generated CRDs to carry defaults"
    );
    assert!(bad.is_empty(), "{bad:#?}");
}
