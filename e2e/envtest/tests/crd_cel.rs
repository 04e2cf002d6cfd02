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

/// A server with the CRD installed and a fresh namespace; the things' collection path.
async fn env_with(crd: Value) -> (TestEnv, String) {
    let group = crd["spec"]["group"].as_str().unwrap().to_string();
    let env = TestEnv::builder().crd(crd).start().await.unwrap();
    let ns = test_namespace(&env.client()).await;
    (env, format!("/apis/{group}/v1/namespaces/{ns}/things"))
}

fn thing(group: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{group}/v1"), "kind": "Thing", "metadata": {"name": name},
        "spec": spec})
}

/// Asserts kube-apiserver's 422 for a custom resource: reason, message and causes, in order.
fn assert_invalid(code: u16, body: &Value, group: &str, name: &str, causes: &[(&str, &str)]) {
    assert_eq!(code, 422, "{body:#}");
    let listed: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
    let listed = if listed.len() == 1 {
        listed[0].clone()
    } else {
        format!("[{}]", listed.join(", "))
    };
    let causes: Vec<Value> = causes
        .iter()
        .map(|(f, m)| json!({"reason": "FieldValueInvalid", "field": f, "message": m}))
        .collect();
    assert_eq!(
        *body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("Thing.{group} \"{name}\" is invalid: {listed}"),
            "reason": "Invalid",
            "details": {"name": name, "group": group, "kind": "Thing", "causes": causes},
            "code": 422}),
        "{body:#}"
    );
}

// `optionalOldSelf: true` (kube-apiserver 1.32, on by default): the rule also runs on create and
// when the old value is absent, with `oldSelf` an empty optional; on update it holds the old value.
#[tokio::test]
async fn optional_old_self_is_empty_on_create_and_the_old_value_on_update() {
    let group = "optional.cel.strata.dev";
    let props = json!({
        "replicas": {"type": "integer", "x-kubernetes-validations": [{
            "rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true,
            "message": "replicas may not decrease"}]},
        "tier": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{
            "rule": "oldSelf.orValue('free') == 'free' || self != 'free'",
            "optionalOldSelf": true, "message": "a paid tier cannot go back to free"}]},
    });
    let rules = json!([{"rule": "oldSelf.hasValue() || self.replicas <= 5",
        "optionalOldSelf": true, "message": "at most 5 replicas on create"}]);
    let (env, things) = env_with(crd(group, props, rules)).await;
    let c = env.client();
    let post = |name: &str, spec: Value| {
        let (c, things, body) = (c.clone(), things.clone(), thing(group, name, spec));
        async move { raw(&c, "POST", &things, "application/json", Some(body)).await }
    };
    let patch = |name: &str, spec: Value| {
        let (c, path) = (c.clone(), format!("{things}/{name}"));
        async move {
            let body = json!({"spec": spec});
            raw(
                &c,
                "PATCH",
                &path,
                "application/merge-patch+json",
                Some(body),
            )
            .await
        }
    };
    let (code, body) = post("a", json!({"replicas": 6, "tier": "gold"})).await;
    assert_invalid(
        code,
        &body,
        group,
        "a",
        &[(
            "spec",
            "Invalid value: \"object\": at most 5 replicas on create",
        )],
    );
    let (code, body) = post("a", json!({"replicas": 3, "tier": "gold"})).await;
    assert_eq!(code, 201, "{body:#}");
    let (code, body) = patch("a", json!({"replicas": 6})).await;
    assert_eq!(code, 200, "{body:#}");
    let (code, body) = patch("a", json!({"replicas": 2})).await;
    assert_invalid(
        code,
        &body,
        group,
        "a",
        &[(
            "spec.replicas",
            "Invalid value: \"integer\": replicas may not decrease",
        )],
    );
    let (code, body) = patch("a", json!({"tier": "free"})).await;
    assert_invalid(
        code,
        &body,
        group,
        "a",
        &[(
            "spec.tier",
            "Invalid value: \"string\": a paid tier cannot go back to free",
        )],
    );
    // No old value for a field absent before the update: `orValue` gives the default.
    let (code, body) = post("b", json!({"replicas": 1})).await;
    assert_eq!(code, 201, "{body:#}");
    let (code, body) = patch("b", json!({"tier": "free"})).await;
    assert_eq!(code, 200, "{body:#}");
}

// At CRD create, `oldSelf` of an `optionalOldSelf` rule is an `optional_type`: its methods
// type-check, using it as the plain value does not.
#[tokio::test]
async fn optional_old_self_is_type_checked_as_an_optional() {
    let env = env().await;
    let props = json!({"replicas": {"type": "integer"}});
    let good = json!([
        {"rule": "!oldSelf.hasValue() || self.replicas >= oldSelf.value().replicas",
         "optionalOldSelf": true},
        {"rule": "self.replicas >= oldSelf.orValue(self).replicas", "optionalOldSelf": true},
    ]);
    let body = crd("good.optional.cel.strata.dev", props.clone(), good);
    let (code, resp) = raw(&env.client(), "POST", CRDS, "application/json", Some(body)).await;
    assert_eq!(code, 201, "{resp:#}");
    let bad = json!([{"rule": "self.replicas >= oldSelf.replicas", "optionalOldSelf": true}]);
    let body = crd("bad.optional.cel.strata.dev", props, bad);
    let (code, resp) = raw(&env.client(), "POST", CRDS, "application/json", Some(body)).await;
    assert_eq!(code, 422, "{resp:#}");
    let cause = &resp["details"]["causes"][0];
    assert_eq!(
        cause["field"],
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    );
    // The rule is printed with `OptionalOldSelf:(*bool)(0xc…)`: a Go pointer, different each time.
    let message = cause["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Invalid value: apiextensions.ValidationRule{Rule:\"self.replicas >= oldSelf.replicas\""
        ),
        "{message}"
    );
    assert!(message.ends_with("}: compilation failed: ERROR: <input>:1:15: found no matching overload for '_>=_' applied to '(int, optional_type(int))'\n | self.replicas >= oldSelf.replicas\n | ..............^"), "{message}");
}

const NAME_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?[a-z0-9]*$";

/// A CRD whose `spec` has `names` (at most `max_items` strings of at most `max_len` characters)
/// and `rules` copies of `rule` (messages `check <i>`).
fn names_crd(group: &str, rule: &str, rules: usize, max_items: u64, max_len: u64) -> Value {
    let props = json!({"names": {"type": "array", "maxItems": max_items,
        "items": {"type": "string", "maxLength": max_len}}});
    let rules: Vec<Value> = (0..rules)
        .map(|i| json!({"rule": rule, "message": format!("check {i}")}))
        .collect();
    crd(group, props, Value::Array(rules))
}

/// `n` distinct names of `len` digits.
fn names(n: usize, len: usize) -> Value {
    (0..n).map(|i| format!("{i:0>len$}")).collect()
}

/// Creates `under` (accepted) and `over`, and asserts `over`'s 422 with one cause on `spec`.
async fn assert_limit(crd: Value, under: Value, over: Value, message: &str) {
    let group = crd["spec"]["group"].as_str().unwrap().to_string();
    let (env, things) = env_with(crd).await;
    let c = env.client();
    let body = thing(&group, "under", json!({"names": under}));
    let (code, resp) = raw(&c, "POST", &things, "application/json", Some(body)).await;
    assert_eq!(code, 201, "{resp:#}");
    let body = thing(&group, "over", json!({"names": over}));
    let (code, resp) = raw(&c, "POST", &things, "application/json", Some(body)).await;
    assert_invalid(
        code,
        &resp,
        &group,
        "over",
        &[("spec", &format!("Invalid value: \"object\": {message}"))],
    );
}

const PER_CALL: &str = "'operation cancelled: actual cost limit exceeded': no further \
                        validation rules will be run due to call cost exceeds limit for rule: \
                        check 0";

// One evaluation over the per-call limit (1,000,000: cel-go counts the actual cost as it
// evaluates and stops past it) stops validation; the create-time estimate let the rule in.
// `matches` over each of n names of 1,000 characters with a 40-character pattern costs
// 3 + n × (4 + ceil(1,001 × 0.1) × ceil(40 × 0.25)) = 3 + 1,014 n: the range `self.names` (2),
// per name the loop condition (2), `@result && …` and `x` (2) and the match, the result (1).
// 986 names cost 999,807, 987 cost 1,000,821. The estimate, with 4 bytes per character:
// 3 + 2,000 × (4 + 401 × 10) = 8,028,003, under the per-rule limit.
#[tokio::test]
async fn a_matches_rule_over_the_runtime_per_call_limit_is_refused() {
    assert_eq!(NAME_PATTERN.len(), 40);
    let rule = format!("self.names.all(x, x.matches('{NAME_PATTERN}'))");
    let crd = names_crd("percall.cel.strata.dev", &rule, 1, 2000, 1000);
    assert_limit(crd, names(986, 1000), names(987, 1000), PER_CALL).await;
}

// Nested macros, the uniqueness rule of the Strata CRDs: over n distinct names of 10
// characters, `all` runs `exists_one` once per name, which costs 3 per name (`y == x`; the
// branch `@result` is free, `@result + 1` costs 2 once) plus 6: the whole rule costs
// 3n² + 9n + 3, 997,053 at 575 names and 1,000,515 at 576. Estimate:
// 3 + 1,000 × (2 + 1 + 2 + 1,000 × 8 + 2) = 8,007,003.
#[tokio::test]
async fn a_nested_macro_over_the_runtime_per_call_limit_is_refused() {
    let rule = "self.names.all(x, self.names.exists_one(y, y == x))";
    let crd = names_crd("nested.cel.strata.dev", rule, 1, 1000, 10);
    assert_limit(crd, names(575, 10), names(576, 10), PER_CALL).await;
}

// The rules of one object together over the runtime budget (10,000,000): eleven `matches`
// rules of 3 + 1,014 n each fit at 896 names (9,994,017) and not at 897 (10,005,171), where
// the eleventh finds too little budget left. The estimates (11 × 8,028,003) fit the schema's
// limit (100,000,000).
#[tokio::test]
async fn rules_over_the_runtime_budget_of_an_object_are_refused() {
    let rule = format!("self.names.all(x, x.matches('{NAME_PATTERN}'))");
    let crd = names_crd("budget.cel.strata.dev", &rule, 11, 2000, 1000);
    let message = "validation failed due to running out of cost budget, no further validation \
                   rules will be run";
    assert_limit(crd, names(896, 1000), names(897, 1000), message).await;
}

// No Strata CRD's writes need the runtime-cost pass: no rule's estimate exceeds the per-call
// limit and all estimates together stay within the object budget, so the actual cost cannot
// reach either and the pass is skipped. (Named lists are list-maps keyed by name, which refuse
// duplicates themselves: a CEL uniqueness rule over them would be quadratic in their length and
// exceed the per-call limit at a few hundred entries — 256 IP configurations, 400 routes.)
#[test]
fn no_strata_crd_needs_the_runtime_cost_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds/generated");
    let mut tracked = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let crd = yaml_file(&path);
        for v in crd["spec"]["versions"].as_array().unwrap() {
            let schema = &v["schema"]["openAPIV3Schema"];
            if strata_envtest::cel_runtime::CompiledCel::new(schema).tracks_cost() {
                tracked.push(crd["metadata"]["name"].as_str().unwrap().to_string());
            }
            checked += 1;
        }
    }
    assert!(checked > 10, "{checked}");
    tracked.sort();
    assert_eq!(tracked, Vec::<String>::new());
}

// Ratcheting drops the error of a rule that is false on a value the update left unchanged, but
// kube-apiserver still evaluates the rule and charges its cost (`schema/cel/validation.go`: the
// cost is counted before the verdict is ratcheted): a rule over the per-call limit on an
// unchanged `spec` refuses an update that only adds a label. The rule is tightened after the
// object was stored (with 987 names of 1,000 characters: 1,000,821, see above).
#[tokio::test]
async fn a_rule_over_the_per_call_limit_on_an_unchanged_value_still_refuses_the_update() {
    let group = "unchanged.cel.strata.dev";
    let (env, things) = env_with(names_crd(group, "size(self.names) >= 0", 1, 2000, 1000)).await;
    let c = env.client();
    let body = thing(group, "big", json!({"names": names(987, 1000)}));
    let (code, resp) = raw(&c, "POST", &things, "application/json", Some(body)).await;
    assert_eq!(code, 201, "{resp:#}");
    let crd = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.{group}");
    let rule = format!("self.names.all(x, x.matches('{NAME_PATTERN}'))");
    let path =
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations/0/rule";
    let (code, resp) = raw(
        &c,
        "PATCH",
        &crd,
        "application/json-patch+json",
        Some(json!([{"op": "replace", "path": path, "value": rule}])),
    )
    .await;
    assert_eq!(code, 200, "{resp:#}");
    // A real server applies a CRD change asynchronously: wait until a create sees it.
    let mut n = 0;
    loop {
        let probe = thing(group, &format!("p{n}"), json!({"names": names(987, 1000)}));
        let (code, _) = raw(&c, "POST", &things, "application/json", Some(probe)).await;
        if code == 422 {
            break;
        }
        n += 1;
        assert!(n < 300, "the new rule never applied");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let label = json!({"metadata": {"labels": {"touched": "yes"}}});
    let (code, resp) = raw(
        &c,
        "PATCH",
        &format!("{things}/big"),
        "application/merge-patch+json",
        Some(label),
    )
    .await;
    assert_invalid(
        code,
        &resp,
        group,
        "big",
        &[("spec", &format!("Invalid value: \"object\": {PER_CALL}"))],
    );
}
