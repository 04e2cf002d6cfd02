use super::*;
use serde_json::json;

fn cost(rule: &str, value: Value) -> u64 {
    let ast = kube_cel::cel::parser::Parser::new()
        .parse(rule)
        .expect("a rule that parses");
    RuleCost::run(&ast, &value, None, false)
}

#[test]
fn all_over_a_list_costs_its_iterations() {
    // range self (1); per item: @not_strictly_false(@result) 2, @result && x > 0: 1 + 1 + 1;
    // the result @result 1.
    assert_eq!(cost("self.all(x, x > 0)", json!([1, 2, 3])), 1 + 3 * 5 + 1);
    // A false predicate ends the loop at the next condition: two steps, three conditions.
    assert_eq!(cost("self.all(x, x > 1)", json!([1, 2, 3])), 1 + 5 + 2 + 1);
}

#[test]
fn a_conditional_branch_that_is_an_attribute_costs_no_identifier() {
    // exists_one: per item `y == 'a'` 2 (a literal costs nothing), then `@result + 1` (2) on the match or `@result` (0);
    // the result `@result == 1` 2, the range 1.
    assert_eq!(
        cost("self.exists_one(y, y == 'a')", json!(["a", "b", "c"])),
        1 + 3 * 2 + 2 + 2
    );
    assert_eq!(
        cost("self.a > 0 ? self.b : 0", json!({"a": 1, "b": 2})),
        3 + 1
    );
}

#[test]
fn matches_costs_by_the_actual_string_and_regex_sizes() {
    // ceil((1 + 20) × 0.1) = 3 times ceil(8 × 0.25) = 2, plus self.
    let s = "a".repeat(20);
    assert_eq!(cost("self.matches('^[a-z]+$')", json!(s)), 1 + 3 * 2);
    // Nested macros: the inner one runs once per outer item.
    let v = json!([["a", "b"], ["c"]]);
    let inner = |n: u64| 1 + n * (2 + 1 + 1 + 1) + 1; // y.all(z, z != 'q') over n items
    assert_eq!(
        cost("self.all(y, y.all(z, z != 'q'))", v),
        1 + (2 + 1 + inner(2)) + (2 + 1 + inner(1)) + 1
    );
}

#[test]
fn the_per_call_limit_stops_an_evaluation() {
    let long: Vec<String> = (0..30_000).map(|_| "a".repeat(100)).collect();
    let c = cost("self.all(x, x.matches('^[a-z0-9]+$'))", json!(long));
    assert!(c > PER_CALL_LIMIT && c < PER_CALL_LIMIT + 100, "{c}");
}

#[test]
fn optional_old_self_is_an_optional() {
    let ast = kube_cel::cel::parser::Parser::new()
        .parse("!oldSelf.hasValue() || self >= oldSelf.value()")
        .expect("parses");
    assert_eq!(RuleCost::run(&ast, &json!(3), None, true), 3);
    assert_eq!(
        RuleCost::run(&ast, &json!(3), Some(&json!(2)), true),
        1 + 1 + 1 + 1 + 1 + 1 + 1
    );
}

fn schema_with(rules: Value, max_items: u64) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": rules,
        "properties": {"names": {"type": "array", "maxItems": max_items,
            "items": {"type": "string", "maxLength": 100}}}}}})
}

#[test]
fn cheap_schemas_skip_the_cost_pass() {
    let rules = json!([{"rule": "self.names.all(x, x.matches('^[a-z0-9]+$'))"}]);
    assert!(!CompiledCel::new(&schema_with(rules.clone(), 100)).tracks_cost());
    assert!(CompiledCel::new(&schema_with(rules, 10_000)).tracks_cost());
}

#[test]
fn a_rule_over_the_per_call_limit_stops_validation() {
    let rules = json!([{"rule": "self.names.all(x, x.matches('^[a-z0-9]+$'))", "message": " m "}]);
    let c = CompiledCel::new(&schema_with(rules, 30_000));
    let names: Vec<String> = (0..30_000).map(|_| "a".repeat(100)).collect();
    let stop = c
        .cost_stop(&json!({"spec": {"names": names}}), None)
        .expect("over the limit");
    assert_eq!(stop.path, "spec");
    assert_eq!(stop.ty, "object");
    assert!(
        stop.detail.ends_with("exceeds limit for rule: m"),
        "{}",
        stop.detail
    );
    let few: Vec<String> = (0..100).map(|_| "a".repeat(100)).collect();
    assert_eq!(c.cost_stop(&json!({"spec": {"names": few}}), None), None);
}

#[test]
fn wrapped_optional_old_self_rules_evaluate_in_cel_rust() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "n": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true,
             "message": "may not decrease"},
            {"rule": "self <= oldSelf.orValue(100) // a comment", "optionalOldSelf": true,
             "message": "over"}]}}}}});
    let c = CompiledCel::new(&schema);
    let v = kube_cel::Validator::new();
    let check = |new: Value, old: Option<Value>| {
        v.validate_compiled(&c.schema, &new, old.as_ref())
            .err()
            .map(|e| e.iter().map(|e| e.message.clone()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert!(check(json!({"spec": {"n": 5}}), None).is_empty());
    assert_eq!(check(json!({"spec": {"n": 500}}), None), vec!["over"]);
    assert_eq!(
        check(json!({"spec": {"n": 4}}), Some(json!({"spec": {"n": 5}}))),
        vec!["may not decrease"]
    );
    assert_eq!(
        check(json!({"spec": {"n": 6}}), Some(json!({"spec": {"n": 5}}))),
        vec!["over"]
    );
    assert!(check(json!({"spec": {"n": 6}}), Some(json!({"spec": {}}))).is_empty());
    assert_eq!(
        check(json!({"spec": {"n": 7}}), Some(json!({"spec": {"n": 6}}))),
        vec!["over"]
    );
}

#[test]
fn only_the_old_self_variable_is_rewritten() {
    assert_eq!(
        wrap_optional_old_self("oldSelf.orValue('oldSelf') != x.oldSelf // oldSelf"),
        "(oldSelf == null ? optional.none() : optional.of(oldSelf)).orValue('oldSelf') != \
         x.oldSelf // oldSelf"
    );
}
