//! CEL rules at CRD create, as kube-apiserver 1.32 checks them: type errors (an undefined field,
//! operands of the wrong types, a rule that is not a bool) and the estimated cost, per rule and
//! for the whole schema. Every expectation is kube-apiserver's answer (status code, message,
//! causes); `make test` runs the file on the in-memory server and, with KUBEBUILDER_ASSETS, on
//! kube-apiserver itself. kube-apiserver walks a schema's properties in Go map order, so the
//! order of its causes varies from one request to the next: causes are compared as sets, and the
//! message as its prefix plus every cause it lists.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use serde_json::{Value, json};
use strata_envtest::TestEnv;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All";

const ADVICE: &str = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength \
                      where arrays, maps, and strings are declared)";

async fn env() -> TestEnv {
    TestEnv::start().await.unwrap()
}

fn yaml_file(path: &Path) -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A CRD `things.<group>` whose `spec` has the given properties and rules.
fn crd(group: &str, props: Value, rules: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Thing", "plural": "things", "singular": "thing"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": props,
                        "x-kubernetes-validations": rules}}}}}]
        }
    })
}

/// Asserts a 422 for `name` with exactly these causes (any order), the message listing them all.
fn assert_refused(code: u16, body: &Value, name: &str, causes: &[(&str, String, String)]) {
    assert_eq!(code, 422, "{body:#}");
    assert_eq!(body["reason"], "Invalid", "{body:#}");
    assert_eq!(body["details"]["name"], name, "{body:#}");
    assert_eq!(body["details"]["group"], "apiextensions.k8s.io");
    assert_eq!(body["details"]["kind"], "CustomResourceDefinition");
    let mut got: Vec<(String, String, String)> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["reason"].as_str().unwrap().to_string(),
                c["field"].as_str().unwrap().to_string(),
                c["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut want: Vec<(String, String, String)> = causes
        .iter()
        .map(|(r, f, m)| (r.to_string(), f.clone(), m.clone()))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{body:#}");
    let message = body["message"].as_str().unwrap();
    let prefix = format!("CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: ");
    assert!(message.starts_with(&prefix), "{message}");
    let listed: Vec<String> = want.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
    let rest = &message[prefix.len()..];
    if listed.len() == 1 {
        assert_eq!(rest, listed[0]);
    } else {
        assert!(rest.starts_with('[') && rest.ends_with(']'), "{message}");
        let joined_len = listed.iter().map(String::len).sum::<usize>() + 2 * (listed.len() - 1) + 2;
        assert_eq!(rest.len(), joined_len, "{message}");
        for l in &listed {
            assert!(rest.contains(l.as_str()), "{l} not in {message}");
        }
    }
}

fn rule_value(rule: &str) -> String {
    format!(
        "Invalid value: apiextensions.ValidationRule{{Rule:{rule:?}, Message:\"\", \
         MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), \
         FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}"
    )
}

// The AzureCluster CRD before its lists and strings were bounded: kube-apiserver refuses it for
// the cost of its rules, with each factor (4.9x for the quadratic uniqueness rule in up to 32
// subnets, 2.0x for `isIP` on the private IP of unboundedly many frontend IPs) and the total.
#[tokio::test]
async fn azurecluster_over_the_cel_cost_budget_is_refused_as_kube_apiserver_refuses_it() {
    let env = env().await;
    let old = yaml_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/azurecluster-before-bounds.yaml"),
    );
    let (code, body) = raw(&env.client(), "POST", CRDS, "application/json", Some(old)).await;
    let net = "spec.validation.openAPIV3Schema.properties[spec].properties[networkSpec]";
    let rules = format!(
        "{net}.properties[subnets].items.properties[securityGroup].properties[securityRules].x-kubernetes-validations[0].rule"
    );
    let ip = |lb: &str| {
        format!(
            "{net}.properties[{lb}].properties[frontendIPs].items.properties[privateIP].x-kubernetes-validations[0].rule"
        )
    };
    let over = |factor: &str| {
        format!("Forbidden: estimated rule cost exceeds budget by factor of {factor} {ADVICE}")
    };
    let contributed = "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema".to_string();
    let f = "FieldValueForbidden";
    let lbs = ["apiServerLB", "controlPlaneOutboundLB", "nodeOutboundLB"];
    let mut causes = vec![
        (f, rules.clone(), over("4.9x")),
        (f, rules, contributed.clone()),
    ];
    for lb in lbs {
        causes.push((f, ip(lb), over("2.0x")));
        causes.push((f, ip(lb), contributed.clone()));
    }
    causes.push((
        f,
        "spec.validation.openAPIV3Schema".into(),
        format!(
            "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 \
             schema exceeds budget by factor of 1.091227x {ADVICE}"
        ),
    ));
    assert_refused(
        code,
        &body,
        "azureclusters.infrastructure.cluster.x-k8s.io",
        &causes,
    );
}

// Each rule under the per-rule limit, together over the per-schema one: the four most expensive
// are named (cost order), then the total with six decimals below 1.5x.
#[tokio::test]
async fn rules_over_the_schema_total_name_the_four_most_expensive() {
    let env = env().await;
    // isIP costs a tenth of the string's bytes (4 per character) plus one, and runs once per
    // possible item of an unbounded list: 1,048,576 times for strings.
    let mut props = serde_json::Map::new();
    let mut lengths = vec![20, 17, 15, 12];
    lengths.extend([10; 14]);
    for (i, len) in lengths.iter().enumerate() {
        props.insert(
            format!("f{i:02}"),
            json!({"type": "array", "items": {"type": "string", "maxLength": len,
                "x-kubernetes-validations": [{"rule": "isIP(self)"}]}}),
        );
    }
    let body = crd("total.cel.strata.dev", Value::Object(props), json!([]));
    let (code, body) = raw(&env.client(), "POST", CRDS, "application/json", Some(body)).await;
    let path = |i: usize| {
        format!(
            "spec.validation.openAPIV3Schema.properties[spec].properties[f{i:02}].items.x-kubernetes-validations[0].rule"
        )
    };
    let f = "FieldValueForbidden";
    let mut causes: Vec<(&str, String, String)> = (0..4)
        .map(|i| {
            (
                f,
                path(i),
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema".to_string(),
            )
        })
        .collect();
    // (9 + 8 + 7 + 6 + 14 × 5) × 1,048,576 = 104,857,600
    causes.push((
        f,
        "spec.validation.openAPIV3Schema".into(),
        format!(
            "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 \
             schema exceeds budget by factor of 1.048576x {ADVICE}"
        ),
    ));
    assert_refused(code, &body, "things.total.cel.strata.dev", &causes);
}

// Type errors: cel-go's message with the position, the source line and a caret.
#[tokio::test]
async fn cel_type_errors_are_refused_with_kube_apiservers_messages() {
    let env = env().await;
    let props = json!({"name": {"type": "string", "maxLength": 10}, "count": {"type": "integer"},
        "tags": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 5}}});
    let cases = [
        (
            "self.nosuch == 'a'",
            "compilation failed: ERROR: <input>:1:5: undefined field 'nosuch'\n | self.nosuch == 'a'\n | ....^",
        ),
        (
            "self.tags.all(t, t.size() < 3) && self.name.nosuch",
            "compilation failed: ERROR: <input>:1:44: type 'string' does not support field selection\n | self.tags.all(t, t.size() < 3) && self.name.nosuch\n | ...........................................^",
        ),
        (
            "self.tags.all(t, t.size() < 3) && self.nosuch == 1",
            "compilation failed: ERROR: <input>:1:39: undefined field 'nosuch'\n | self.tags.all(t, t.size() < 3) && self.nosuch == 1\n | ......................................^",
        ),
        (
            "self.name + 1 == 'a1'",
            "compilation failed: ERROR: <input>:1:11: found no matching overload for '_+_' applied to '(string, int)'\n | self.name + 1 == 'a1'\n | ..........^",
        ),
        (
            "self.count == 'a'",
            "compilation failed: ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(int, string)'\n | self.count == 'a'\n | ...........^",
        ),
        ("self.count", "cel expression must evaluate to a bool"),
        (
            "self.tags.map(t, t + 'x')",
            "cel expression must evaluate to a bool",
        ),
    ];
    for (i, (rule, detail)) in cases.iter().enumerate() {
        let group = format!("t{i}.cel.strata.dev");
        let body = crd(&group, props.clone(), json!([{"rule": rule}]));
        let (code, body) = raw(&env.client(), "POST", CRDS, "application/json", Some(body)).await;
        assert_refused(
            code,
            &body,
            &format!("things.{group}"),
            &[(
                "FieldValueInvalid",
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
                    .into(),
                format!("{}: {detail}", rule_value(rule)),
            )],
        );
    }
}

// With a schema per version, errors name `spec.versions[i].schema.openAPIV3Schema…`; rules that
// type-check and fit the budget are accepted.
#[tokio::test]
async fn per_version_schemas_name_their_version_and_good_rules_pass() {
    let env = env().await;
    let group = "versions.cel.strata.dev";
    let props = json!({"name": {"type": "string", "maxLength": 10},
        "tags": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 5}}});
    let mut body = crd(group, props.clone(), json!([{"rule": "self.name"}]));
    let good = json!([
        {"rule": "has(self.name) && self.name.startsWith('a') && self.tags.all(t, t in ['x', 'y'])"},
        {"rule": "self.tags.exists_one(t, t == 'x') || size(self.tags) == 0"},
        {"rule": "!has(oldSelf.name) || self.name == oldSelf.name"},
    ]);
    let mut v2 = body["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
        good.clone();
    body["spec"]["versions"].as_array_mut().unwrap().push(v2);
    let (code, resp) = raw(&env.client(), "POST", CRDS, "application/json", Some(body)).await;
    assert_refused(
        code,
        &resp,
        &format!("things.{group}"),
        &[(
            "FieldValueInvalid",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
                .into(),
            format!("{}: cel expression must evaluate to a bool", rule_value("self.name")),
        )],
    );
    let body = crd(group, props, good);
    let (code, resp) = raw(&env.client(), "POST", CRDS, "application/json", Some(body)).await;
    assert_eq!(code, 201, "{resp:#}");
}

// Every Strata CRD fits kube-apiserver's budget and type-checks (dry run: nothing is created).
#[tokio::test]
async fn every_generated_crd_is_accepted() {
    let env = env().await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds/generated");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        let (code, resp) = raw(
            &env.client(),
            "POST",
            CRDS,
            "application/json",
            Some(yaml_file(&file)),
        )
        .await;
        assert!(
            code == 201 || code == 409,
            "{}: {code} {resp:#}",
            file.display()
        );
    }
}
