//! What kube-apiserver does when it evaluates `x-kubernetes-validations` rules that `kube-cel`
//! does not: `optionalOldSelf` rules see `oldSelf` as a CEL optional, and the evaluation's actual
//! cost is tracked against the per-call limit and the per-object budget.
//!
//! `optionalOldSelf`: kube-cel binds `oldSelf` to `null` when there is no old value and to the
//! plain old value otherwise. Each such rule is compiled once (per CRD version) wrapped so that the
//! binding becomes kube-apiserver's: `optional.none()` without an old value, `optional.of(old)`
//! with one (see [`wrap_optional_old_self`]).
//!
//! Runtime cost: cel-rust counts no cost, so the cost of an evaluation is computed by a second,
//! small interpreter over the rule's AST ([`RuleCost`]) that applies cel-go's runtime cost model
//! (`interpreter/runtimecost.go`: one per identifier and field selection, ten per list literal,
//! thirty per map literal, the string functions by the actual sizes of their arguments, macros by
//! the iterations they actually make, `&&`/`||` short-circuiting as cel-go does, the root
//! identifier of a conditional's branch not charged as cel-go's planner resolves it) to the
//! actual values. Checked against kube-apiserver 1.32 to the unit at the limit for `all` with
//! `matches` and for `all` nesting `exists_one` (`tests/crd_cel.rs`). It models the CEL that `cel_check` estimates; a rule the estimator does not model is not
//! counted. It runs only for schemas where the limits can be reached at all: the create-time
//! estimate is an upper bound of the actual cost, so when no rule's estimate exceeds the per-call
//! limit and the estimates of all rules, times how often they can run, stay within the per-object
//! budget, no object can exceed either and the pass is skipped (every ordinary CRD).
//!
//! Where it differs from cel-go: `messageExpression`s are not charged; a `+` of two lists costs
//! one, as the create-time estimate counts it; a rule that stops at the per-call limit is charged
//! the limit plus one against the budget (cel-go charges what it had counted when it stopped, at
//! most the cost of one step more).

use std::borrow::Cow;
use std::collections::HashMap;
use std::rc::Rc;

use kube_cel::cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

use crate::cel_check;

/// kube-apiserver's `PerCallLimit`: the most one evaluation of one rule may cost.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// kube-apiserver's `RuntimeCELCostBudget`: the most all rules may cost on one object.
pub const RUNTIME_BUDGET: u64 = 10_000_000;

/// A CRD version's rules, compiled once: kube-cel's compiled schema (with `optionalOldSelf` rules
/// rewritten) and, when the limits can be reached, what the cost pass needs.
#[derive(Debug)]
pub struct CompiledCel {
    pub schema: kube_cel::CompiledSchema,
    /// Where the rules are (see [`RulePlan`]); `None` when only a walk of the whole object by
    /// kube-cel gives its errors exactly (see [`RulePlan::build`]).
    pub plan: Option<RulePlan>,
    cost: Option<CostNode>,
}

impl CompiledCel {
    pub fn new(schema: &Value) -> CompiledCel {
        let mut compiled = kube_cel::compile_schema(schema);
        rewrite_optional_old_self(&mut compiled);
        let mut estimate = Estimate::default();
        estimate_schema(schema, Some(1), &mut estimate);
        let reachable = estimate.max_call > PER_CALL_LIMIT || estimate.total > RUNTIME_BUDGET;
        CompiledCel {
            plan: RulePlan::build(&compiled, schema),
            schema: compiled,
            cost: reachable.then(|| CostNode::new(schema, Some(1))),
        }
    }

    /// Whether the cost pass runs for this schema (its estimates can reach a limit).
    pub fn tracks_cost(&self) -> bool {
        self.cost.is_some()
    }

    /// The cost pass over an object: `None` when no limit is reached, else where kube-apiserver
    /// stops and the rules it evaluated before.
    pub fn cost_stop(&self, obj: &Value, old: Option<&Value>) -> Option<CostStop> {
        let node = self.cost.as_ref()?;
        let mut walk = CostWalk {
            remaining: RUNTIME_BUDGET as i64,
            evaluated: Vec::new(),
        };
        let stop = walk.node(node, obj, old, String::new()).err()?;
        Some(CostStop {
            path: stop.0,
            ty: stop.1,
            detail: stop.2,
            evaluated: walk.evaluated,
        })
    }
}

/// Where the rules of a compiled schema are, so that validation evaluates a subtree only when
/// one of its rules can report an error that stands: kube-cel's walk converts every node of the
/// object to CEL values (each node's whole subtree, again at every level) even where no rule is.
/// Mirrors `kube_cel::CompiledSchema` node for node.
#[derive(Debug, Default)]
pub struct RulePlan {
    /// Some rule (or rule that did not compile) at this node or below, branches included.
    pub rules: bool,
    /// Some rule at this node or below whose text names `oldSelf`: ratcheting never drops its
    /// errors (`schema::validate_cel` keeps every error of such a rule).
    pub old_self: bool,
    /// This node has rules of its own, or `allOf`/`oneOf`/`anyOf` branches with rules: kube-cel
    /// evaluates the node with its whole subtree.
    pub own: bool,
    pub properties: HashMap<String, RulePlan>,
    pub items: Option<Box<RulePlan>>,
    pub additional: Option<Box<RulePlan>>,
}

impl RulePlan {
    /// `None` when evaluating subtrees apart could differ from one walk of the whole object:
    /// a schema deeper than kube-cel's depth limit (it counts the depth from where it starts),
    /// or a rule whose `fieldPath` starts with `[` (kube-cel joins it to the node's path with a
    /// dot, which the path of a subtree's error cannot show).
    fn build(compiled: &kube_cel::CompiledSchema, schema: &Value) -> Option<RulePlan> {
        let bracketed = |s: &Value| {
            rules_of(s).any(|r| {
                r.get("fieldPath")
                    .and_then(Value::as_str)
                    .is_some_and(|f| f.starts_with('['))
            })
        };
        if any_node(schema, &bracketed) {
            return None;
        }
        RulePlan::node(compiled, 0)
    }

    fn node(c: &kube_cel::CompiledSchema, depth: usize) -> Option<RulePlan> {
        // kube-cel's MAX_SCHEMA_DEPTH is 64; stay well inside it.
        if depth > 48 {
            return None;
        }
        let child = |c: &kube_cel::CompiledSchema| RulePlan::node(c, depth + 1);
        let mut plan = RulePlan {
            properties: c
                .properties
                .iter()
                .map(|(k, v)| Some((k.clone(), child(v)?)))
                .collect::<Option<_>>()?,
            items: match c.items.as_deref() {
                Some(i) => Some(Box::new(child(i)?)),
                None => None,
            },
            additional: match c.additional_properties.as_deref() {
                Some(a) => Some(Box::new(child(a)?)),
                None => None,
            },
            ..RulePlan::default()
        };
        let mut branches_rules = false;
        for b in c.all_of.iter().chain(&c.one_of).chain(&c.any_of) {
            let b = RulePlan::node(b, depth + 1)?;
            branches_rules |= b.rules;
            plan.old_self |= b.old_self;
        }
        plan.own = !c.validations.is_empty() || branches_rules;
        plan.old_self |= c.validations.iter().any(|v| match v {
            Ok(r) => r.rule.rule.contains("oldSelf"),
            Err(kube_cel::CompilationError::Parse { rule, .. })
            | Err(kube_cel::CompilationError::MessageExpressionParse { rule, .. }) => {
                rule.contains("oldSelf")
            }
            Err(kube_cel::CompilationError::InvalidRule(_)) => false,
            // A schema too deep, or an error this code does not know: never skipped.
            Err(_) => true,
        });
        let children = plan
            .properties
            .values()
            .chain(plan.items.as_deref())
            .chain(plan.additional.as_deref());
        for ch in children {
            plan.rules |= ch.rules;
            plan.old_self |= ch.old_self;
        }
        plan.rules |= plan.own;
        Some(plan)
    }
}

/// Whether `pred` holds for some node of the schema (properties, items, additionalProperties,
/// allOf/oneOf/anyOf branches).
fn any_node(schema: &Value, pred: &impl Fn(&Value) -> bool) -> bool {
    pred(schema)
        || children(schema).any(|c| any_node(c, pred))
        || ["allOf", "oneOf", "anyOf"].iter().any(|k| {
            schema
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|bs| bs.iter().any(|b| any_node(b, pred)))
        })
}

/// Where the cost limits stopped validation, as kube-apiserver reports it.
#[derive(Debug, PartialEq)]
pub struct CostStop {
    /// kube-cel's dotted path of the node whose rule stopped (`spec.items[1]`).
    pub path: String,
    /// The node's schema type, which kube-apiserver shows as the invalid value.
    pub ty: String,
    pub detail: String,
    /// The rules evaluated before, as `(kube-cel error path, rule)`: their errors stand.
    pub evaluated: Vec<(String, String)>,
}

/// Rewrites every `optionalOldSelf` rule (and its `messageExpression`) so that `oldSelf` is an
/// optional, whatever kube-cel binds. The rule's text, shown in errors, stays as written.
fn rewrite_optional_old_self(c: &mut kube_cel::CompiledSchema) {
    for r in c.validations.iter_mut().flatten() {
        if r.rule.optional_old_self != Some(true) || !r.is_transition_rule {
            continue;
        }
        if let Ok(p) = kube_cel::cel::Program::compile(&wrap_optional_old_self(&r.rule.rule)) {
            r.program = p;
        }
        if let Some(m) = r
            .rule
            .message_expression
            .as_deref()
            .filter(|m| m.contains("oldSelf"))
            && let Ok(p) = kube_cel::cel::Program::compile(&wrap_optional_old_self(m))
        {
            r.message_program = Some(p);
        }
    }
    for child in c.properties.values_mut() {
        rewrite_optional_old_self(child);
    }
    for child in c.items.iter_mut().chain(c.additional_properties.iter_mut()) {
        rewrite_optional_old_self(child);
    }
    for child in c
        .all_of
        .iter_mut()
        .chain(c.one_of.iter_mut())
        .chain(c.any_of.iter_mut())
    {
        rewrite_optional_old_self(child);
    }
}

/// The expression evaluated for an `optionalOldSelf` rule: every reference to the variable
/// `oldSelf` (not a field of that name, nor text in a string or comment) becomes an optional
/// built from kube-cel's binding, which is `null` when there is no old value (an old value is
/// never `null`: kube-apiserver does not validate null values). The optional has to be built in
/// place: cel-rust unwraps an optional bound to a variable (a comprehension's too).
pub fn wrap_optional_old_self(rule: &str) -> String {
    const OPTIONAL: &str = "(oldSelf == null ? optional.none() : optional.of(oldSelf))";
    let chars: Vec<char> = rule.chars().collect();
    let mut out = String::with_capacity(rule.len() + 64);
    let mut i = 0;
    let mut prev_significant = ' ';
    while i < chars.len() {
        let c = chars[i];
        // String literals (with r/b prefixes and triple quotes) are copied as they are.
        let mut j = i;
        while j < chars.len() && j < i + 2 && matches!(chars[j], 'r' | 'R' | 'b' | 'B') {
            j += 1;
        }
        if j < chars.len() && matches!(chars[j], '"' | '\'') {
            let k = crate::cel_check::string_literal_end(&chars, i, j);
            out.extend(&chars[i..k]);
            prev_significant = '"';
            i = k;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            let k = chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |p| i + p);
            out.extend(&chars[i..k]);
            i = k;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let k = chars[i..]
                .iter()
                .position(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
                .map_or(chars.len(), |p| i + p);
            let ident: String = chars[i..k].iter().collect();
            if ident == "oldSelf" && prev_significant != '.' {
                out.push_str(OPTIONAL);
            } else {
                out.push_str(&ident);
            }
            prev_significant = 'a';
            i = k;
            continue;
        }
        if !c.is_whitespace() {
            prev_significant = c;
        }
        out.push(c);
        i += 1;
    }
    out
}

#[derive(Default)]
struct Estimate {
    total: u64,
    max_call: u64,
}

fn rules_of(schema: &Value) -> impl Iterator<Item = &Value> {
    schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn optional_old_self(rule: &Value) -> bool {
    rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true)
}

/// The create-time estimates of every rule (as `schema::validate_crd_cel` computes them): the
/// most one call can cost and the total over how often each rule can run.
fn estimate_schema(schema: &Value, card: Option<u64>, out: &mut Estimate) {
    let embedded = |s: &Value| s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    if let Some(decl) = cel_check::Decl::from_schema(schema, embedded(schema)) {
        for rule in rules_of(schema) {
            let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
            if let cel_check::Outcome::Cost(cost) =
                cel_check::check_rule(text, &decl, optional_old_self(rule))
            {
                let times = card.unwrap_or_else(|| decl.max_cardinality());
                out.max_call = out.max_call.max(cost);
                out.total = out.total.saturating_add(cost.saturating_mul(times));
            }
        }
    }
    let child_card = crate::schema::child_cardinality(schema, card);
    for child in children(schema) {
        estimate_schema(child, child_card, out);
    }
    for branch in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        estimate_schema(branch, card, out);
    }
}

fn children(schema: &Value) -> impl Iterator<Item = &Value> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values())
        .chain(schema.get("items").filter(|i| i.is_object()))
        .chain(schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// A schema node for the cost pass: its rules (parsed once) and its children.
#[derive(Debug)]
struct CostNode {
    ty: String,
    rules: Vec<CostRule>,
    properties: Vec<(String, CostNode)>,
    items: Option<Box<CostNode>>,
    additional: Option<Box<CostNode>>,
    all_of: Vec<CostNode>,
}

#[derive(Debug)]
struct CostRule {
    text: String,
    /// kube-apiserver's `ruleErrorString`: the message, else the rule, trimmed.
    shown: String,
    field_path: Option<String>,
    transition: bool,
    optional_old_self: bool,
    /// `None` when the estimator does not model the rule: then it is not charged.
    ast: Option<IdedExpr>,
}

impl CostNode {
    fn new(schema: &Value, card: Option<u64>) -> CostNode {
        let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
        let decl = cel_check::Decl::from_schema(schema, embedded);
        let rules = rules_of(schema)
            .map(|rule| {
                let field = |k: &str| rule.get(k).and_then(Value::as_str);
                let text = field("rule").unwrap_or("").to_string();
                let optional = optional_old_self(rule);
                let modelled = decl.as_ref().is_some_and(|d| {
                    matches!(
                        cel_check::check_rule(&text, d, optional),
                        cel_check::Outcome::Cost(_)
                    )
                });
                let ast = modelled
                    .then(|| kube_cel::cel::parser::Parser::new().parse(&text).ok())
                    .flatten();
                let shown = field("message")
                    .filter(|m| !m.is_empty())
                    .unwrap_or(&text)
                    .trim()
                    .to_string();
                CostRule {
                    transition: ast.as_ref().is_some_and(uses_old_self),
                    shown,
                    field_path: field("fieldPath").map(str::to_string),
                    optional_old_self: optional,
                    text,
                    ast,
                }
            })
            .collect();
        let child_card = crate::schema::child_cardinality(schema, card);
        CostNode {
            ty: schema
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            rules,
            properties: schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(k, s)| (k.clone(), CostNode::new(s, child_card)))
                .collect(),
            items: schema
                .get("items")
                .filter(|i| i.is_object())
                .map(|s| Box::new(CostNode::new(s, child_card))),
            additional: schema
                .get("additionalProperties")
                .filter(|a| a.is_object())
                .map(|s| Box::new(CostNode::new(s, child_card))),
            all_of: schema
                .get("allOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|s| CostNode::new(s, card))
                .collect(),
        }
    }
}

fn uses_old_self(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Ident(n) => n == "oldSelf",
        Expr::Select(s) => uses_old_self(&s.operand),
        Expr::Call(c) => {
            c.target.as_deref().is_some_and(uses_old_self) || c.args.iter().any(uses_old_self)
        }
        Expr::List(l) => l.elements.iter().any(uses_old_self),
        Expr::Map(m) => m.entries.iter().any(|e| match &e.expr {
            EntryExpr::MapEntry(me) => uses_old_self(&me.key) || uses_old_self(&me.value),
            EntryExpr::StructField(f) => uses_old_self(&f.value),
        }),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .any(uses_old_self),
        _ => false,
    }
}

/// kube-cel's path of a rule's error: the node's path, or the rule's `fieldPath` under it.
fn error_path(node: &str, field_path: Option<&str>) -> String {
    match field_path {
        Some(fp) if fp.starts_with('.') => format!("{node}{fp}"),
        Some(fp) if !node.is_empty() => format!("{node}.{fp}"),
        Some(fp) => fp.to_string(),
        None => node.to_string(),
    }
}

const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

struct CostWalk {
    remaining: i64,
    evaluated: Vec<(String, String)>,
}

type Stop = (String, String, String);

impl CostWalk {
    /// kube-apiserver's walk: a node's rules, then its `allOf` branches, then its children.
    fn node(
        &mut self,
        n: &CostNode,
        value: &Value,
        old: Option<&Value>,
        path: String,
    ) -> Result<(), Stop> {
        if value.is_null() {
            return Ok(());
        }
        if !n.rules.is_empty() && self.remaining <= 0 {
            return Err((path, n.ty.clone(), OUT_OF_BUDGET.into()));
        }
        for rule in &n.rules {
            if rule.transition && old.is_none() && !rule.optional_old_self {
                continue;
            }
            let cost = rule.ast.as_ref().map_or(0, |ast| {
                RuleCost::run(ast, value, old, rule.transition && rule.optional_old_self)
            });
            // cel-go stops an evaluation as soon as it passes the per-call limit.
            let charged = cost.min(PER_CALL_LIMIT + 1) as i64;
            if charged > self.remaining {
                return Err((path, n.ty.clone(), OUT_OF_BUDGET.into()));
            }
            self.remaining -= charged;
            if cost > PER_CALL_LIMIT {
                return Err((
                    path,
                    n.ty.clone(),
                    format!(
                        "'operation cancelled: actual cost limit exceeded': no further validation \
                         rules will be run due to call cost exceeds limit for rule: {}",
                        rule.shown
                    ),
                ));
            }
            self.evaluated.push((
                error_path(&path, rule.field_path.as_deref()),
                rule.text.clone(),
            ));
        }
        for branch in &n.all_of {
            self.node(branch, value, old, path.clone())?;
        }
        let join = |segment: &str| {
            if path.is_empty() {
                segment.to_string()
            } else {
                format!("{path}.{segment}")
            }
        };
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let child = n
                        .properties
                        .iter()
                        .find(|(name, _)| name == k)
                        .map(|(_, c)| c)
                        .or(n.additional.as_deref());
                    if let Some(child) = child {
                        self.node(child, v, old.and_then(|o| o.get(k)), join(k))?;
                    }
                }
            }
            Value::Array(items) => {
                if let Some(child) = &n.items {
                    for (i, v) in items.iter().enumerate() {
                        // Correlated by index, as kube-cel evaluates transition rules.
                        let p = format!("{path}[{i}]");
                        self.node(child, v, old.and_then(|o| o.get(i)), p)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Whether cel-go plans the expression as an attribute: an identifier and field selections on it.
fn is_attribute(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Ident(_) => true,
        Expr::Select(s) => !s.test && is_attribute(&s.operand),
        _ => false,
    }
}

const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;

fn factor(size: u64, f: f64) -> u64 {
    (size as f64 * f).ceil() as u64
}

/// A CEL value for the cost interpreter: JSON borrowed from the object where possible.
#[derive(Clone, Debug)]
enum V<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Cow<'a, str>),
    /// A JSON array or object of the object under validation.
    Json(&'a Value),
    List(Rc<Vec<V<'a>>>),
    Map(Rc<Vec<(V<'a>, V<'a>)>>),
    Opt(Option<Box<V<'a>>>),
    /// An evaluation error (no such key, no matching overload …), a value as in cel-go.
    Error,
}

fn from_json(v: &Value) -> V<'_> {
    match v {
        Value::Null => V::Null,
        Value::Bool(b) => V::Bool(*b),
        Value::Number(n) => n
            .as_i64()
            .map(V::Int)
            .or_else(|| n.as_u64().map(V::Uint))
            .unwrap_or_else(|| V::Double(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => V::Str(Cow::Borrowed(s)),
        Value::Array(_) | Value::Object(_) => V::Json(v),
    }
}

impl<'a> V<'a> {
    /// cel-go's `actualSize`: characters of a string, elements of a list or map, else one.
    fn size(&self) -> u64 {
        match self {
            V::Str(s) => s.chars().count() as u64,
            V::Json(Value::Array(a)) => a.len() as u64,
            V::Json(Value::Object(o)) => o.len() as u64,
            V::List(l) => l.len() as u64,
            V::Map(m) => m.len() as u64,
            _ => 1,
        }
    }

    fn is_mapish(&self) -> bool {
        matches!(self, V::Json(Value::Object(_)) | V::Map(_))
    }

    fn items(&self) -> Option<Vec<V<'a>>> {
        Some(match self {
            V::Json(Value::Array(a)) => a.iter().map(from_json).collect(),
            V::Json(Value::Object(o)) => o.keys().map(|k| V::Str(Cow::Borrowed(k))).collect(),
            V::List(l) => l.as_ref().clone(),
            V::Map(m) => m.iter().map(|(k, _)| k.clone()).collect(),
            _ => return None,
        })
    }

    fn get(&self, key: &V<'a>) -> V<'a> {
        match (self, key) {
            (V::Json(Value::Object(o)), V::Str(k)) => o.get(k.as_ref()).map_or(V::Error, from_json),
            (V::Json(Value::Array(a)), V::Int(i)) => usize::try_from(*i)
                .ok()
                .and_then(|i| a.get(i))
                .map_or(V::Error, from_json),
            (V::List(l), V::Int(i)) => usize::try_from(*i)
                .ok()
                .and_then(|i| l.get(i).cloned())
                .unwrap_or(V::Error),
            (V::Map(m), k) => m
                .iter()
                .find(|(mk, _)| equal(mk, k) == Some(true))
                .map_or(V::Error, |(_, v)| v.clone()),
            _ => V::Error,
        }
    }
}

fn equal(a: &V, b: &V) -> Option<bool> {
    Some(match (a, b) {
        (V::Error, _) | (_, V::Error) => return None,
        (V::Null, V::Null) => true,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Str(x), V::Str(y)) => x == y,
        (V::Int(_) | V::Uint(_) | V::Double(_), V::Int(_) | V::Uint(_) | V::Double(_)) => {
            number(a)? == number(b)?
        }
        (V::Opt(x), V::Opt(y)) => match (x, y) {
            (Some(x), Some(y)) => equal(x, y)?,
            (None, None) => true,
            _ => false,
        },
        _ if a.items().is_some() && b.items().is_some() => {
            let (x, y) = (a.items()?, b.items()?);
            if x.len() != y.len() {
                return Some(false);
            }
            let lists = !a.is_mapish() && !b.is_mapish();
            for (i, xi) in x.iter().enumerate() {
                let same = if lists {
                    equal(xi, &y[i])?
                } else {
                    a.is_mapish() == b.is_mapish() && equal(&a.get(xi), &b.get(xi)).unwrap_or(false)
                };
                if !same {
                    return Some(false);
                }
            }
            true
        }
        _ => false,
    })
}

fn number(v: &V) -> Option<f64> {
    match v {
        V::Int(i) => Some(*i as f64),
        V::Uint(u) => Some(*u as f64),
        V::Double(d) => Some(*d),
        _ => None,
    }
}

/// Why a cost evaluation ended early.
enum Halt {
    /// The per-call limit was passed (the cost so far is the answer).
    Limit,
    /// CEL this interpreter does not model: the rule is not charged.
    Unsupported,
}

/// The actual cost of one evaluation of one rule, by cel-go's runtime cost model.
struct RuleCost<'a> {
    cost: u64,
    locals: Vec<(&'a str, V<'a>)>,
    regexes: HashMap<String, Option<regex::Regex>>,
}

impl<'a> RuleCost<'a> {
    fn run(ast: &'a IdedExpr, value: &'a Value, old: Option<&'a Value>, optional: bool) -> u64 {
        let old_self = if optional {
            Some(V::Opt(old.map(|o| Box::new(from_json(o)))))
        } else {
            old.map(from_json)
        };
        let mut rc = RuleCost {
            cost: 0,
            locals: vec![("self", from_json(value))],
            regexes: HashMap::new(),
        };
        if let Some(o) = old_self {
            rc.locals.push(("oldSelf", o));
        }
        match rc.eval(ast) {
            Ok(_) | Err(Halt::Limit) => rc.cost,
            Err(Halt::Unsupported) => 0,
        }
    }

    fn charge(&mut self, c: u64) -> Result<(), Halt> {
        self.cost = self.cost.saturating_add(c);
        if self.cost > PER_CALL_LIMIT {
            Err(Halt::Limit)
        } else {
            Ok(())
        }
    }

    fn eval(&mut self, e: &'a IdedExpr) -> Result<V<'a>, Halt> {
        match &e.expr {
            Expr::Literal(l) => Ok(match l {
                LiteralValue::Boolean(b) => V::Bool(**b),
                LiteralValue::Int(i) => V::Int(**i),
                LiteralValue::UInt(u) => V::Uint(**u),
                LiteralValue::Double(d) => V::Double(**d),
                LiteralValue::Null => V::Null,
                LiteralValue::String(s) => V::Str(Cow::Borrowed(s.inner())),
                LiteralValue::Bytes(_) => return Err(Halt::Unsupported),
            }),
            Expr::Ident(name) => {
                self.charge(1)?;
                self.locals
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .ok_or(Halt::Unsupported)
            }
            Expr::Select(sel) => {
                let operand = self.eval(&sel.operand)?;
                if sel.field.contains("__") {
                    // Escaped property names (`__dash__` …): not modelled.
                    return Err(Halt::Unsupported);
                }
                self.charge(1)?;
                let key = V::Str(Cow::Borrowed(sel.field.as_str()));
                if sel.test {
                    return Ok(match operand {
                        V::Json(Value::Object(o)) => V::Bool(o.contains_key(&sel.field)),
                        V::Map(_) => V::Bool(!matches!(operand.get(&key), V::Error)),
                        _ => V::Error,
                    });
                }
                Ok(operand.get(&key))
            }
            Expr::List(list) => {
                self.charge(10)?;
                let mut out = Vec::with_capacity(list.elements.len());
                for item in &list.elements {
                    out.push(self.eval(item)?);
                }
                Ok(V::List(Rc::new(out)))
            }
            Expr::Map(map) => {
                self.charge(30)?;
                let mut out = Vec::with_capacity(map.entries.len());
                for entry in &map.entries {
                    let EntryExpr::MapEntry(m) = &entry.expr else {
                        return Err(Halt::Unsupported);
                    };
                    out.push((self.eval(&m.key)?, self.eval(&m.value)?));
                }
                Ok(V::Map(Rc::new(out)))
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Call(call) => self.call(call),
            Expr::Struct(_) | Expr::Unspecified => Err(Halt::Unsupported),
        }
    }

    /// cel-go's fold: the condition before each step (a false one ends the loop), then the result.
    fn comprehension(&mut self, c: &'a ComprehensionExpr) -> Result<V<'a>, Halt> {
        if c.iter_var2.is_some() {
            return Err(Halt::Unsupported);
        }
        let range = self.eval(&c.iter_range)?;
        // Iterates the range in place (no copy of a JSON list): one element at a time.
        let len = match &range {
            V::Json(Value::Array(a)) => a.len(),
            V::Json(Value::Object(o)) => o.len(),
            V::List(l) => l.len(),
            V::Map(m) => m.len(),
            _ => return Ok(V::Error),
        };
        let mut keys = match &range {
            V::Json(Value::Object(o)) => Some(o.keys()),
            _ => None,
        };
        let accu = self.eval(&c.accu_init)?;
        self.locals.push((c.accu_var.as_str(), accu));
        self.locals.push((c.iter_var.as_str(), V::Null));
        let mut looped = Ok(());
        for i in 0..len {
            let item = match &range {
                V::Json(Value::Array(a)) => from_json(&a[i]),
                V::Json(Value::Object(_)) => keys
                    .as_mut()
                    .and_then(Iterator::next)
                    .map_or(V::Error, |k| V::Str(Cow::Borrowed(k))),
                V::List(l) => l[i].clone(),
                V::Map(m) => m[i].0.clone(),
                _ => V::Error,
            };
            let n = self.locals.len();
            self.locals[n - 1].1 = item;
            match self.eval(&c.loop_cond) {
                Ok(V::Bool(false)) => break,
                Ok(_) => {}
                Err(e) => {
                    looped = Err(e);
                    break;
                }
            }
            match self.eval(&c.loop_step) {
                Ok(step) => self.locals[n - 2].1 = step,
                Err(e) => {
                    looped = Err(e);
                    break;
                }
            }
        }
        self.locals.pop();
        let result = looped.and_then(|()| self.eval(&c.result));
        self.locals.pop();
        result
    }

    fn regex(&mut self, pattern: &str) -> Option<&regex::Regex> {
        self.regexes
            .entry(pattern.to_string())
            .or_insert_with(|| regex::Regex::new(pattern).ok())
            .as_ref()
    }

    fn call(&mut self, call: &'a kube_cel::cel::common::ast::CallExpr) -> Result<V<'a>, Halt> {
        let func = call.func_name.as_str();
        // Logical operators and the conditional evaluate lazily, as cel-go does.
        match (func, call.args.as_slice()) {
            ("_&&_" | "_||_", [l, r]) => {
                let stop = func == "_||_";
                let lv = self.eval(l)?;
                if matches!(lv, V::Bool(b) if b == stop) {
                    return Ok(lv);
                }
                let rv = self.eval(r)?;
                return Ok(match (lv, rv) {
                    (_, V::Bool(b)) if b == stop => V::Bool(b),
                    (V::Bool(_), V::Bool(b)) => V::Bool(b),
                    _ => V::Error,
                });
            }
            ("_?_:_", [c, t, f]) => {
                let branch = match self.eval(c)? {
                    V::Bool(true) => t,
                    V::Bool(false) => f,
                    _ => return Ok(V::Error),
                };
                let out = self.eval(branch)?;
                if is_attribute(branch) {
                    // cel-go resolves a branch that is an attribute (`@result`, `self.a`)
                    // through the conditional without observing it: its root identifier is
                    // not charged (its field selections are).
                    self.cost -= 1;
                }
                return Ok(out);
            }
            ("@not_strictly_false", [a]) => {
                let v = self.eval(a)?;
                self.charge(1)?;
                return Ok(V::Bool(!matches!(v, V::Bool(false))));
            }
            _ => {}
        }
        let namespaced = matches!(call.target.as_deref().map(|t| &t.expr),
            Some(Expr::Ident(n)) if n == "optional" && !self.locals.iter().any(|(l, _)| *l == "optional"));
        if namespaced {
            let mut args = Vec::new();
            for a in &call.args {
                args.push(self.eval(a)?);
            }
            self.charge(1)?;
            return match (func, args.as_slice()) {
                ("none", []) => Ok(V::Opt(None)),
                ("of", [v]) => Ok(V::Opt(Some(Box::new(v.clone())))),
                _ => Err(Halt::Unsupported),
            };
        }
        let target = match &call.target {
            Some(t) => Some(self.eval(t)?),
            None => None,
        };
        let mut args = Vec::with_capacity(call.args.len());
        for a in &call.args {
            args.push(self.eval(a)?);
        }
        if target.iter().chain(&args).any(|v| matches!(v, V::Error)) {
            // cel-go propagates the error without calling the function.
            return Ok(V::Error);
        }
        let str_of = |v: &V<'a>| match v {
            V::Str(s) => Some(s.clone()),
            _ => None,
        };
        let (cost, out) = match (func, target.as_ref(), args.as_slice()) {
            ("!_", None, [V::Bool(b)]) => (1, V::Bool(!b)),
            ("_==_" | "_!=_", None, [l, r]) => (
                factor(l.size().min(r.size()), STRING_TRAVERSAL),
                equal(l, r).map_or(V::Error, |eq| V::Bool(eq == (func == "_==_"))),
            ),
            ("_<_" | "_<=_" | "_>_" | "_>=_", None, [l, r]) => {
                let ord = match (l, r) {
                    (V::Str(a), V::Str(b)) => Some(a.cmp(b)),
                    (V::Bool(a), V::Bool(b)) => Some(a.cmp(b)),
                    _ => number(l)
                        .zip(number(r))
                        .and_then(|(a, b)| a.partial_cmp(&b)),
                };
                let cost = match (l, r) {
                    (V::Str(_), V::Str(_)) => factor(l.size().min(r.size()), STRING_TRAVERSAL),
                    _ => 1,
                };
                let out = ord.map_or(V::Error, |o| {
                    V::Bool(match func {
                        "_<_" => o.is_lt(),
                        "_<=_" => o.is_le(),
                        "_>_" => o.is_gt(),
                        _ => o.is_ge(),
                    })
                });
                (cost, out)
            }
            ("_+_", None, [l, r]) => match (l, r) {
                (V::Str(a), V::Str(b)) => (
                    factor(l.size() + r.size(), STRING_TRAVERSAL),
                    V::Str(Cow::Owned(format!("{a}{b}"))),
                ),
                (V::Int(a), V::Int(b)) => (1, a.checked_add(*b).map_or(V::Error, V::Int)),
                (V::Uint(a), V::Uint(b)) => (1, a.checked_add(*b).map_or(V::Error, V::Uint)),
                (V::Double(a), V::Double(b)) => (1, V::Double(a + b)),
                _ => match (l.items(), r.items()) {
                    (Some(mut a), Some(b)) if !l.is_mapish() && !r.is_mapish() => {
                        a.extend(b);
                        (1, V::List(Rc::new(a)))
                    }
                    _ => return Err(Halt::Unsupported),
                },
            },
            ("_-_" | "_*_" | "_/_" | "_%_", None, [V::Int(a), V::Int(b)]) => {
                let out = match func {
                    "_-_" => a.checked_sub(*b),
                    "_*_" => a.checked_mul(*b),
                    "_/_" => a.checked_div(*b),
                    _ => a.checked_rem(*b),
                };
                (1, out.map_or(V::Error, V::Int))
            }
            ("_-_" | "_*_" | "_/_", None, [V::Double(a), V::Double(b)]) => {
                let out = match func {
                    "_-_" => a - b,
                    "_*_" => a * b,
                    _ => a / b,
                };
                (1, V::Double(out))
            }
            ("-_", None, [V::Int(a)]) => (1, a.checked_neg().map_or(V::Error, V::Int)),
            ("-_", None, [V::Double(a)]) => (1, V::Double(-a)),
            ("@in", None, [elem, container]) => {
                if container.is_mapish() {
                    (1, V::Bool(!matches!(container.get(elem), V::Error)))
                } else {
                    let items = container.items().ok_or(Halt::Unsupported)?;
                    let found = items.iter().any(|i| equal(i, elem) == Some(true));
                    (container.size(), V::Bool(found))
                }
            }
            ("_[_]", None, [c, i]) => (1, c.get(i)),
            ("size", None, [a]) | ("size", Some(a), []) => (1, V::Int(a.size() as i64)),
            ("startsWith" | "endsWith", Some(t), [a]) => {
                let (Some(t), Some(a)) = (str_of(t), str_of(a)) else {
                    return Err(Halt::Unsupported);
                };
                let out = if func == "startsWith" {
                    t.starts_with(a.as_ref())
                } else {
                    t.ends_with(a.as_ref())
                };
                (factor(args[0].size(), STRING_TRAVERSAL), V::Bool(out))
            }
            ("contains", Some(tv), [av]) => {
                let (Some(t), Some(a)) = (str_of(tv), str_of(av)) else {
                    return Err(Halt::Unsupported);
                };
                let cost =
                    factor(tv.size(), STRING_TRAVERSAL) * factor(av.size(), STRING_TRAVERSAL);
                (cost, V::Bool(t.contains(a.as_ref())))
            }
            ("matches", Some(tv), [av]) => {
                let (Some(t), Some(a)) = (str_of(tv), str_of(av)) else {
                    return Err(Halt::Unsupported);
                };
                let cost =
                    factor(tv.size() + 1, STRING_TRAVERSAL) * factor(av.size(), REGEX_LENGTH);
                let out = self
                    .regex(&a)
                    .map_or(V::Error, |re| V::Bool(re.is_match(&t)));
                (cost, out)
            }
            ("lowerAscii" | "upperAscii" | "trim", Some(tv), []) => {
                let Some(t) = str_of(tv) else {
                    return Err(Halt::Unsupported);
                };
                let out = match func {
                    "lowerAscii" => t.to_ascii_lowercase(),
                    "upperAscii" => t.to_ascii_uppercase(),
                    _ => t.trim().to_string(),
                };
                (factor(tv.size(), STRING_TRAVERSAL), V::Str(Cow::Owned(out)))
            }
            ("isIP" | "isCIDR", None, [av]) => {
                let Some(a) = str_of(av) else {
                    return Err(Halt::Unsupported);
                };
                let ok = if func == "isIP" {
                    a.parse::<std::net::IpAddr>().is_ok()
                } else {
                    a.split_once('/').is_some_and(|(ip, bits)| {
                        ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok()
                    })
                };
                (factor(av.size(), STRING_TRAVERSAL), V::Bool(ok))
            }
            ("hasValue", Some(V::Opt(o)), []) => (1, V::Bool(o.is_some())),
            ("value", Some(V::Opt(o)), []) => (1, o.as_deref().cloned().unwrap_or(V::Error)),
            ("orValue", Some(V::Opt(o)), [a]) => {
                (1, o.as_deref().cloned().unwrap_or_else(|| a.clone()))
            }
            ("or", Some(V::Opt(o)), [a @ V::Opt(_)]) => (
                1,
                if o.is_some() {
                    V::Opt(o.clone())
                } else {
                    a.clone()
                },
            ),
            _ => return Err(Halt::Unsupported),
        };
        self.charge(cost)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
