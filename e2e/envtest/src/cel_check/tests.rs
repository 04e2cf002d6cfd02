use super::*;
use serde_json::json;

fn decl(schema: Value) -> Decl {
    Decl::from_schema(&schema, false).expect("a CEL-visible schema")
}

#[test]
fn quadratic_uniqueness_rule_costs_as_kube_apiserver_estimates() {
    // kube-apiserver 1.32: 4.9x the per-rule limit at 32 subnets (1,521,202 × 32 = 48,678,464).
    let d = decl(
        json!({"type": "array", "maxItems": 200, "items": {"type": "object",
        "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 80}}}}),
    );
    assert_eq!(
        check_rule(
            "self.all(a, self.exists_one(b, b.name == a.name))",
            &d,
            false
        ),
        Outcome::Cost(1_521_202)
    );
}

#[test]
fn ip_rule_on_an_unbounded_list_runs_once_per_possible_item() {
    let d = decl(json!({"type": "string", "maxLength": 45}));
    assert_eq!(check_rule("isIP(self)", &d, false), Outcome::Cost(19));
    assert_eq!(d.max_cardinality(), 1_048_576);
    assert_eq!(
        cost_error_message("estimated rule cost", 19 * 1_048_576, PER_RULE_COST_LIMIT),
        "estimated rule cost exceeds budget by factor of 2.0x (try simplifying the rule, or \
         adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    );
}

#[test]
fn type_errors_read_as_cel_go_reports_them() {
    let d = decl(json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 10}, "count": {"type": "integer"}}}));
    assert_eq!(
        check_rule("self.nosuch", &d, false),
        Outcome::Invalid(
            "compilation failed: ERROR: <input>:1:5: undefined field 'nosuch'\n | self.nosuch\n | ....^"
                .into()
        )
    );
    assert_eq!(
        check_rule("self.name.size() > 1 && self.nosuch.x", &d, false),
        Outcome::Invalid(
            "compilation failed: ERROR: <input>:1:29: undefined field 'nosuch'\n | self.name.size() > 1 && self.nosuch.x\n | ............................^"
                .into()
        )
    );
    assert_eq!(
        check_rule("self.name + 1 == 2", &d, false),
        Outcome::Invalid(
            "compilation failed: ERROR: <input>:1:11: found no matching overload for '_+_' applied to '(string, int)'\n | self.name + 1 == 2\n | ..........^"
                .into()
        )
    );
    assert_eq!(
        check_rule("self.count == \"a\"", &d, false),
        Outcome::Invalid(
            "compilation failed: ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(int, string)'\n | self.count == \"a\"\n | ...........^"
                .into()
        )
    );
    assert_eq!(
        check_rule("nope(self.name)", &d, false),
        Outcome::Invalid(
            "compilation failed: ERROR: <input>:1:5: undeclared reference to 'nope' (in container '')\n | nope(self.name)\n | ....^"
                .into()
        )
    );
    assert_eq!(
        check_rule("self.count", &d, false),
        Outcome::Invalid("cel expression must evaluate to a bool".into())
    );
    assert_eq!(
        check_rule("math.greatest(1, 2) == 2", &d, false),
        Outcome::Unknown
    );
}
