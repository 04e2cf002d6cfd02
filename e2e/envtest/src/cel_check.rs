//! What kube-apiserver checks in an `x-kubernetes-validations` rule when a CRD is written, beyond
//! parsing: the CEL type check (undefined fields, operands of the wrong type, a rule that is not a
//! bool) and the worst-case cost estimate, multiplied by how often the rule can run.
//!
//! cel-rust (the `cel` crate under `kube-cel`) parses but neither type-checks nor estimates cost, so
//! this module does both over cel-rust's AST, driven by the OpenAPI schema as kube-apiserver's CEL
//! environment is. It follows cel-go's `checker/cost.go` (v0.22, kube-apiserver 1.32) and the sizes
//! and function costs of Kubernetes' `apiserver/pkg/cel` (`common/schemas.go`, `library/cost.go`).
//! It covers the CEL that CRD rules commonly use; for an expression it does not understand (an
//! unknown function, a type it does not model) it answers [`Outcome::Unknown`], and the caller
//! then neither refuses the rule nor counts its cost.

use std::collections::BTreeMap;

use kube_cel::cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

/// kube-apiserver's request size limit, from which it bounds unbounded lists, maps and strings.
pub const MAX_REQUEST_SIZE_BYTES: i64 = 3 * 1024 * 1024;
/// `StaticEstimatedCostLimit`: the most one rule may cost (times how often it can run).
pub const PER_RULE_COST_LIMIT: u64 = 10_000_000;
/// `StaticEstimatedCRDCostLimit`: the most all rules of one schema may cost together.
pub const PER_CRD_COST_LIMIT: u64 = 100_000_000;

const STRING_TRAVERSAL_COST_FACTOR: f64 = 0.1;
const REGEX_STRING_LENGTH_COST_FACTOR: f64 = 0.25;
const LIST_CREATE_BASE_COST: u64 = 10;
const MAP_CREATE_BASE_COST: u64 = 30;

/// The CEL declaration of a schema node (kube's `DeclType`): its kind, the most elements it can
/// hold (list items, map entries, string bytes) and its smallest JSON serialisation.
#[derive(Debug, Clone, PartialEq)]
pub struct Decl {
    kind: Kind,
    max_elements: u64,
    min_size: i64,
    fields: BTreeMap<String, Decl>,
    /// Property names that CEL cannot name as written (escaped by kube as `__dash__` …): a field
    /// not found on such an object is not reported as undefined.
    escaped_names: bool,
    elem: Option<Box<Decl>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    Dyn,
    List,
    Map,
    Object,
}

fn int_of(schema: &Value, key: &str) -> Option<i64> {
    schema.get(key).and_then(Value::as_i64)
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

fn plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
}

impl Decl {
    fn simple(kind: Kind, min_size: i64, max_elements: u64) -> Decl {
        Decl {
            kind,
            max_elements,
            min_size,
            fields: BTreeMap::new(),
            escaped_names: false,
            elem: None,
        }
    }

    /// kube's `SchemaDeclType`: `None` when the schema is not visible to CEL.
    pub fn from_schema(schema: &Value, resource_root: bool) -> Option<Decl> {
        let max_len = int_of(schema, "maxLength").map(|l| l.max(0) as u64 * 4);
        let per_request = (MAX_REQUEST_SIZE_BYTES - 2) as u64;
        if flag(schema, "x-kubernetes-int-or-string") {
            return Some(Decl::simple(Kind::Dyn, 1, max_len.unwrap_or(per_request)));
        }
        let ty = schema.get("type").and_then(Value::as_str)?;
        match ty {
            "array" => {
                let items = schema.get("items")?;
                let elem = Decl::from_schema(items, flag(items, "x-kubernetes-embedded-resource"))?;
                let max = int_of(schema, "maxItems")
                    .map(|m| m.max(0))
                    .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_size + 1));
                let mut d = Decl::simple(Kind::List, 2, max as u64);
                d.elem = Some(Box::new(elem));
                Some(d)
            }
            "object" => {
                if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                    let elem = Decl::from_schema(ap, flag(ap, "x-kubernetes-embedded-resource"))?;
                    let max = int_of(schema, "maxProperties")
                        .map(|m| m.max(0))
                        .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_size + 6));
                    let mut d = Decl::simple(Kind::Map, 2, max as u64);
                    d.elem = Some(Box::new(elem));
                    return Some(d);
                }
                let required: Vec<&str> = schema
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut d = Decl::simple(Kind::Object, 2, 0);
                let mut props: BTreeMap<String, Value> = schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default();
                if resource_root {
                    // apiVersion, kind, metadata.name and metadata.generateName are always there.
                    let string = serde_json::json!({"type": "string"});
                    props.insert("apiVersion".into(), string.clone());
                    props.insert("kind".into(), string.clone());
                    props.insert(
                        "metadata".into(),
                        serde_json::json!({"type": "object", "properties": {
                            "name": string, "generateName": string}}),
                    );
                }
                for (name, prop) in &props {
                    let Some(field) =
                        Decl::from_schema(prop, flag(prop, "x-kubernetes-embedded-resource"))
                    else {
                        continue;
                    };
                    if required.contains(&name.as_str()) && prop.get("default").is_none() {
                        d.min_size += name.len() as i64 + field.min_size + 4;
                    }
                    if plain_identifier(name) {
                        d.fields.insert(name.clone(), field);
                    } else {
                        d.escaped_names = true;
                    }
                }
                Some(d)
            }
            "string" => {
                let (kind, min) = match schema.get("format").and_then(Value::as_str) {
                    Some("byte") => (Kind::Bytes, 2),
                    Some("duration") => (Kind::Duration, 4),
                    Some("date") => (Kind::Timestamp, 12),
                    Some("date-time") => (Kind::Timestamp, 21),
                    _ => (Kind::String, 2),
                };
                let max = match (kind, schema.get("format").and_then(Value::as_str)) {
                    (Kind::Bytes, _) => int_of(schema, "maxLength")
                        .map(|l| l.max(0) as u64)
                        .unwrap_or(per_request),
                    // MaxDurationSizeJSON, JSONDateSize, MaxDatetimeSizeJSON
                    (Kind::Duration, _) => 32,
                    (Kind::Timestamp, Some("date")) => 12,
                    (Kind::Timestamp, _) => 35,
                    _ => max_len.unwrap_or_else(|| {
                        match schema.get("enum").and_then(Value::as_array) {
                            Some(values) if !values.is_empty() => values
                                .iter()
                                .filter_map(Value::as_str)
                                .map(|s| s.len() as u64)
                                .max()
                                .unwrap_or(0),
                            _ => per_request,
                        }
                    }),
                };
                Some(Decl::simple(kind, min, max))
            }
            "boolean" => Some(Decl::simple(Kind::Bool, 4, 0)),
            "number" => Some(Decl::simple(Kind::Double, 1, 0)),
            "integer" => Some(Decl::simple(Kind::Int, 1, 0)),
            _ => None,
        }
    }

    /// How many times a rule on this node can run under unbounded lists or maps (kube's
    /// `maxCardinality`: one comma between elements of the smallest serialisation).
    pub fn max_cardinality(&self) -> u64 {
        (MAX_REQUEST_SIZE_BYTES / (self.min_size + 1)) as u64
    }
}

/// What the checker concluded about one rule.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Type-checks to a bool; its worst-case cost per evaluation.
    Cost(u64),
    /// kube-apiserver refuses it; the message after the rule (`compilation failed: ERROR: …` or
    /// `cel expression must evaluate to a bool`).
    Invalid(String),
    /// Uses CEL this checker does not model: neither refused nor counted.
    Unknown,
}

#[derive(Debug, Clone, PartialEq)]
enum Ty<'a> {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Duration,
    Timestamp,
    Dyn,
    List(Box<Ty<'a>>),
    Map(Box<Ty<'a>>, Box<Ty<'a>>),
    Object(&'a Decl),
    /// `optional_type(T)`: `oldSelf` of an `optionalOldSelf` rule.
    Optional(Box<Ty<'a>>),
}

impl<'a> Ty<'a> {
    fn of(decl: &'a Decl) -> Ty<'a> {
        match decl.kind {
            Kind::Bool => Ty::Bool,
            Kind::Int => Ty::Int,
            Kind::Double => Ty::Double,
            Kind::String => Ty::String,
            Kind::Bytes => Ty::Bytes,
            Kind::Duration => Ty::Duration,
            Kind::Timestamp => Ty::Timestamp,
            Kind::Dyn => Ty::Dyn,
            Kind::List => Ty::List(Box::new(decl.elem.as_deref().map_or(Ty::Dyn, Ty::of))),
            Kind::Map => Ty::Map(
                Box::new(Ty::String),
                Box::new(decl.elem.as_deref().map_or(Ty::Dyn, Ty::of)),
            ),
            Kind::Object => Ty::Object(decl),
        }
    }

    /// cel-go's name of the type in overload errors; `None` for generated object types.
    fn name(&self) -> Option<String> {
        Some(match self {
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Null => "null_type".into(),
            Ty::Duration => "google.protobuf.Duration".into(),
            Ty::Timestamp => "google.protobuf.Timestamp".into(),
            Ty::Dyn => "dyn".into(),
            Ty::List(e) => format!("list({})", e.name()?),
            Ty::Map(k, v) => format!("map({}, {})", k.name()?, v.name()?),
            Ty::Object(_) => return None,
            Ty::Optional(t) => format!("optional_type({})", t.name()?),
        })
    }

    fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn)
    }

    fn numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// Whether `_==_` (one type parameter) accepts the two: same type, either dyn or null, or
    /// lists/maps whose parameters do.
    fn unifies(&self, other: &Ty) -> bool {
        match (self, other) {
            (Ty::Dyn, _) | (_, Ty::Dyn) | (Ty::Null, _) | (_, Ty::Null) => true,
            (Ty::List(a), Ty::List(b)) => a.unifies(b),
            (Ty::Map(a, b), Ty::Map(c, d)) => a.unifies(c) && b.unifies(d),
            (Ty::Object(a), Ty::Object(b)) => a == b,
            (Ty::Optional(a), Ty::Optional(b)) => a.unifies(b),
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

/// Why a walk stopped: a reportable error at a position, or CEL the checker does not model.
enum Stop {
    Error(Located),
    Unknown,
}

struct Located {
    at: Anchor,
    message: String,
}

/// Where in the source an error is reported, found again by token since cel-rust keeps no
/// positions in its AST: the n-th (by expression id) of its kind.
#[derive(Clone)]
enum Anchor {
    /// `.field`: the dot.
    Select(String, usize),
    /// A binary operator token.
    Operator(&'static str, usize),
    /// `name(`: the parenthesis.
    GlobalCall(String, usize),
    /// An identifier on its own.
    Ident(String, usize),
}

struct Node<'a> {
    ty: Ty<'a>,
    cost: u64,
    path: Option<Vec<String>>,
    size: Option<u64>,
}

struct Local<'a> {
    name: String,
    ty: Ty<'a>,
    path: Option<Vec<String>>,
}

struct Checker<'a> {
    root: &'a Decl,
    locals: Vec<Local<'a>>,
    /// Expression ids of the nodes of each anchor kind, to number them as the source does.
    anchors: Vec<(u64, String)>,
}

fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// cel-go's `multiplyByCostFactor`: the product rounded up, saturating.
fn factor(x: u64, f: f64) -> u64 {
    let p = (x as f64 * f).ceil();
    if p >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        p as u64
    }
}

fn binary_token(func: &str) -> Option<&'static str> {
    Some(match func {
        "_+_" => "+",
        "_-_" => "-",
        "_*_" => "*",
        "_/_" => "/",
        "_%_" => "%",
        "_==_" => "==",
        "_!=_" => "!=",
        "_<_" => "<",
        "_<=_" => "<=",
        "_>_" => ">",
        "_>=_" => ">=",
        "_&&_" => "&&",
        "_||_" => "||",
        "@in" => "in",
        _ => return None,
    })
}

impl<'a> Checker<'a> {
    fn anchor_index(&self, key: &str, id: u64) -> usize {
        self.anchors
            .iter()
            .filter(|(i, k)| k == key && *i < id)
            .count()
    }

    fn error(&self, key: String, id: u64, at: impl Fn(usize) -> Anchor, message: String) -> Stop {
        let n = self.anchor_index(&key, id);
        Stop::Error(Located { at: at(n), message })
    }

    fn size_of(&self, n: &Node) -> u64 {
        if let Some(s) = n.size {
            return s;
        }
        if let Some(s) = self.size_by_path(n.path.as_deref()) {
            return s;
        }
        // cel-go's `computeTypeSize`: scalars have a size of one.
        match n.ty {
            Ty::Bool | Ty::Int | Ty::Uint | Ty::Double | Ty::Duration | Ty::Timestamp => 1,
            _ => u64::MAX,
        }
    }

    /// kube's `sizeEstimator`: the node's `MaxElements` found by path from the rule's root.
    fn size_by_path(&self, path: Option<&[String]>) -> Option<u64> {
        let path = path?;
        let (_, rest) = path.split_first()?;
        let mut node = self.root;
        for step in rest {
            node = match step.as_str() {
                "@items" | "@values" => node.elem.as_deref()?,
                "@keys" => return Some(MAX_REQUEST_SIZE_BYTES as u64 - 2),
                field => node.fields.get(field)?,
            };
        }
        Some(node.max_elements)
    }

    fn lookup(&self, name: &str) -> Option<&Local<'a>> {
        self.locals.iter().rev().find(|l| l.name == name)
    }

    fn visit(&mut self, e: &IdedExpr) -> Result<Node<'a>, Stop> {
        match &e.expr {
            Expr::Literal(l) => {
                let (ty, size) = match l {
                    LiteralValue::Boolean(_) => (Ty::Bool, 1),
                    LiteralValue::Int(_) => (Ty::Int, 1),
                    LiteralValue::UInt(_) => (Ty::Uint, 1),
                    LiteralValue::Double(_) => (Ty::Double, 1),
                    LiteralValue::Null => (Ty::Null, 1),
                    LiteralValue::String(s) => (Ty::String, s.inner().chars().count() as u64),
                    LiteralValue::Bytes(b) => (Ty::Bytes, b.len() as u64),
                };
                Ok(Node {
                    ty,
                    cost: 0,
                    path: None,
                    size: Some(size),
                })
            }
            Expr::Ident(name) => {
                let Some(local) = self.lookup(name) else {
                    return Err(self.error(
                        format!("ident:{name}"),
                        e.id,
                        |n| Anchor::Ident(name.clone(), n),
                        format!("undeclared reference to '{name}' (in container '')"),
                    ));
                };
                Ok(Node {
                    ty: local.ty.clone(),
                    cost: 1,
                    path: local.path.clone(),
                    size: None,
                })
            }
            Expr::Select(sel) => {
                let mut operand = self.visit(&sel.operand)?;
                // Selecting a field of an optional gives an optional (cel-go's optional types).
                let optional = match operand.ty {
                    Ty::Optional(inner) if !sel.test => {
                        operand.ty = *inner;
                        true
                    }
                    Ty::Optional(_) => return Err(Stop::Unknown),
                    _ => false,
                };
                let ty = match &operand.ty {
                    Ty::Object(decl) => match decl.fields.get(&sel.field) {
                        Some(f) => Ty::of(f),
                        None if decl.escaped_names => return Err(Stop::Unknown),
                        None => {
                            return Err(self.error(
                                format!("select:{}", sel.field),
                                e.id,
                                |n| Anchor::Select(sel.field.clone(), n),
                                format!("undefined field '{}'", sel.field),
                            ));
                        }
                    },
                    Ty::Map(_, v) => (**v).clone(),
                    Ty::Dyn => Ty::Dyn,
                    other => {
                        let Some(name) = other.name() else {
                            return Err(Stop::Unknown);
                        };
                        return Err(self.error(
                            format!("select:{}", sel.field),
                            e.id,
                            |n| Anchor::Select(sel.field.clone(), n),
                            format!("type '{name}' does not support field selection"),
                        ));
                    }
                };
                if sel.test {
                    // has(): a presence test costs one, plus its operand.
                    return Ok(Node {
                        ty: Ty::Bool,
                        cost: add(operand.cost, 1),
                        path: None,
                        size: None,
                    });
                }
                let extra = u64::from(matches!(operand.ty, Ty::Object(_) | Ty::Map(..)));
                Ok(Node {
                    ty: if optional {
                        Ty::Optional(Box::new(ty))
                    } else {
                        ty
                    },
                    cost: add(operand.cost, extra),
                    path: operand.path.map(|mut p| {
                        p.push(sel.field.clone());
                        p
                    }),
                    size: None,
                })
            }
            Expr::List(list) => {
                let mut cost = LIST_CREATE_BASE_COST;
                let mut elem: Option<Ty> = None;
                for item in &list.elements {
                    let n = self.visit(item)?;
                    cost = add(cost, n.cost);
                    elem = Some(match elem {
                        None => n.ty,
                        Some(t) if t == n.ty => t,
                        Some(_) => Ty::Dyn,
                    });
                }
                Ok(Node {
                    ty: Ty::List(Box::new(elem.unwrap_or(Ty::Dyn))),
                    cost,
                    path: None,
                    size: Some(list.elements.len() as u64),
                })
            }
            Expr::Map(map) => {
                let mut cost = MAP_CREATE_BASE_COST;
                for entry in &map.entries {
                    let EntryExpr::MapEntry(m) = &entry.expr else {
                        return Err(Stop::Unknown);
                    };
                    cost = add(cost, self.visit(&m.key)?.cost);
                    cost = add(cost, self.visit(&m.value)?.cost);
                }
                Ok(Node {
                    ty: Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn)),
                    cost,
                    path: None,
                    size: Some(map.entries.len() as u64),
                })
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Call(call) => self.call(e.id, call),
            Expr::Struct(_) | Expr::Unspecified => Err(Stop::Unknown),
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Result<Node<'a>, Stop> {
        if c.iter_var2.is_some() {
            return Err(Stop::Unknown);
        }
        let range = self.visit(&c.iter_range)?;
        let init = self.visit(&c.accu_init)?;
        let (iter_ty, sub) = match &range.ty {
            Ty::List(e) => ((**e).clone(), "@items"),
            Ty::Map(k, _) => ((**k).clone(), "@keys"),
            Ty::Dyn => (Ty::Dyn, "@items"),
            _ => return Err(Stop::Unknown),
        };
        self.locals.push(Local {
            name: c.accu_var.clone(),
            ty: init.ty.clone(),
            path: None,
        });
        self.locals.push(Local {
            name: c.iter_var.clone(),
            ty: iter_ty,
            path: range.path.clone().map(|mut p| {
                p.push(sub.into());
                p
            }),
        });
        let looped = self
            .visit(&c.loop_cond)
            .and_then(|cond| Ok((cond, self.visit(&c.loop_step)?)));
        self.locals.pop();
        let (cond, step) = match looped {
            Ok(x) => x,
            Err(e) => {
                self.locals.pop();
                return Err(e);
            }
        };
        // The accumulator takes the step's type (a list literal's element type, for map/filter).
        if let Some(acc) = self.locals.last_mut() {
            acc.ty = step.ty.clone();
        }
        let result = self.visit(&c.result);
        self.locals.pop();
        let result = result?;
        let count = self.size_of(&range);
        let cost = add(
            add(add(range.cost, init.cost), result.cost),
            mul(count, add(step.cost, cond.cost)),
        );
        let size = match &c.accu_init.expr {
            Expr::Literal(_) => init.size,
            Expr::List(_) | Expr::Map(_) => Some(count),
            _ => None,
        };
        Ok(Node {
            ty: result.ty,
            cost,
            path: None,
            size,
        })
    }

    fn overload_error(&self, id: u64, func: &str, args: &[&Node]) -> Stop {
        let names: Option<Vec<String>> = args.iter().map(|a| a.ty.name()).collect();
        match (binary_token(func), names) {
            (Some(token), Some(names)) => self.error(
                format!("op:{token}"),
                id,
                |n| Anchor::Operator(token, n),
                format!(
                    "found no matching overload for '{func}' applied to '({})'",
                    names.join(", ")
                ),
            ),
            _ => Stop::Unknown,
        }
    }

    fn call(
        &mut self,
        id: u64,
        call: &kube_cel::cel::common::ast::CallExpr,
    ) -> Result<Node<'a>, Stop> {
        let func = call.func_name.as_str();
        if let Some(t) = &call.target
            && let Expr::Ident(name) = &t.expr
            && self.lookup(name).is_none()
        {
            // A namespaced function (`math.greatest`, `strings.quote` …).
            return Err(Stop::Unknown);
        }
        let target = match &call.target {
            Some(t) => Some(self.visit(t)?),
            None => None,
        };
        let mut args = Vec::with_capacity(call.args.len());
        for a in &call.args {
            args.push(self.visit(a)?);
        }
        let arg_cost = args.iter().fold(0, |s, a| add(s, a.cost));
        let target_cost = target.as_ref().map_or(0, |t| t.cost);
        let node = |ty: Ty<'a>, cost: u64| Node {
            ty,
            cost,
            path: None,
            size: None,
        };
        let bool_or_dyn = |t: &Ty| matches!(t, Ty::Bool | Ty::Dyn);
        match (func, target.as_ref(), args.as_slice()) {
            ("_&&_" | "_||_", None, [l, r]) => {
                if !bool_or_dyn(&l.ty) || !bool_or_dyn(&r.ty) {
                    return Err(self.overload_error(id, func, &[l, r]));
                }
                Ok(node(Ty::Bool, arg_cost))
            }
            ("!_", None, [a]) => {
                if !bool_or_dyn(&a.ty) {
                    return Err(Stop::Unknown);
                }
                Ok(node(Ty::Bool, add(1, arg_cost)))
            }
            ("@not_strictly_false", None, [_]) => Ok(node(Ty::Bool, add(1, arg_cost))),
            ("_?_:_", None, [c, t, f]) => {
                if !bool_or_dyn(&c.ty) {
                    return Err(Stop::Unknown);
                }
                let ty = if t.ty == f.ty {
                    t.ty.clone()
                } else if t.ty.unifies(&f.ty) {
                    if t.ty.is_dyn() || matches!(t.ty, Ty::Null) {
                        f.ty.clone()
                    } else {
                        t.ty.clone()
                    }
                } else {
                    return Err(Stop::Unknown);
                };
                let size = self.size_of(t).max(self.size_of(f));
                Ok(Node {
                    ty,
                    cost: add(c.cost, t.cost.max(f.cost)),
                    path: None,
                    size: Some(size),
                })
            }
            ("_==_" | "_!=_", None, [l, r]) => {
                if l.ty.numeric() && r.ty.numeric() && l.ty != r.ty {
                    // Mixed numeric equality: not modelled (cel-go's overloads decide).
                    return Err(Stop::Unknown);
                }
                if !l.ty.unifies(&r.ty) {
                    return Err(self.overload_error(id, func, &[l, r]));
                }
                let smallest = self.size_of(l).min(self.size_of(r));
                Ok(node(
                    Ty::Bool,
                    add(factor(smallest, STRING_TRAVERSAL_COST_FACTOR), arg_cost),
                ))
            }
            ("_<_" | "_<=_" | "_>_" | "_>=_", None, [l, r]) => {
                let ok = l.ty.is_dyn()
                    || r.ty.is_dyn()
                    || (l.ty.numeric() && r.ty.numeric())
                    || (l.ty == r.ty
                        && matches!(
                            l.ty,
                            Ty::String | Ty::Bytes | Ty::Bool | Ty::Duration | Ty::Timestamp
                        ));
                if !ok {
                    return Err(self.overload_error(id, func, &[l, r]));
                }
                let cost = if matches!(l.ty, Ty::String | Ty::Bytes) {
                    let smallest = self.size_of(l).min(self.size_of(r));
                    factor(smallest, STRING_TRAVERSAL_COST_FACTOR)
                } else {
                    1
                };
                Ok(node(Ty::Bool, add(cost, arg_cost)))
            }
            ("_+_", None, [l, r]) => {
                let ty = match (&l.ty, &r.ty) {
                    (Ty::Dyn, _) | (_, Ty::Dyn) => return Err(Stop::Unknown),
                    (Ty::List(a), Ty::List(b)) if a.unifies(b) => {
                        Ty::List(if a.is_dyn() { b.clone() } else { a.clone() })
                    }
                    (a, b) if a == b && matches!(a, Ty::Int | Ty::Uint | Ty::Double) => a.clone(),
                    (Ty::String, Ty::String) => Ty::String,
                    (Ty::Bytes, Ty::Bytes) => Ty::Bytes,
                    (Ty::Duration, Ty::Duration) => Ty::Duration,
                    (Ty::Timestamp, Ty::Duration) | (Ty::Duration, Ty::Timestamp) => Ty::Timestamp,
                    _ => return Err(self.overload_error(id, func, &[l, r])),
                };
                let size = self.size_of(l).saturating_add(self.size_of(r));
                let cost = match ty {
                    Ty::List(_) => add(1, arg_cost),
                    Ty::String | Ty::Bytes => {
                        add(factor(size, STRING_TRAVERSAL_COST_FACTOR), arg_cost)
                    }
                    _ => add(1, arg_cost),
                };
                let sized = matches!(ty, Ty::List(_) | Ty::String | Ty::Bytes);
                Ok(Node {
                    ty,
                    cost,
                    path: None,
                    size: sized.then_some(size),
                })
            }
            ("_-_" | "_*_" | "_/_" | "_%_", None, [l, r]) => {
                let ty = match (&l.ty, &r.ty) {
                    (Ty::Dyn, _) | (_, Ty::Dyn) => return Err(Stop::Unknown),
                    (a, b) if a == b && a.numeric() => {
                        if func == "_%_" && *a == Ty::Double {
                            return Err(self.overload_error(id, func, &[l, r]));
                        }
                        a.clone()
                    }
                    (Ty::Timestamp | Ty::Duration, Ty::Timestamp | Ty::Duration) => {
                        return Err(Stop::Unknown);
                    }
                    _ => return Err(self.overload_error(id, func, &[l, r])),
                };
                Ok(node(ty, add(1, arg_cost)))
            }
            ("-_", None, [a]) if matches!(a.ty, Ty::Int | Ty::Double) => {
                Ok(node(a.ty.clone(), add(1, arg_cost)))
            }
            ("@in", None, [elem, container]) => {
                let ok = match &container.ty {
                    Ty::List(e) => e.unifies(&elem.ty),
                    Ty::Map(k, _) => k.unifies(&elem.ty),
                    Ty::Dyn => true,
                    _ => false,
                };
                if !ok {
                    return Err(self.overload_error(id, func, &[elem, container]));
                }
                let cost = if matches!(container.ty, Ty::List(_)) {
                    factor(self.size_of(container), 1.0)
                } else {
                    1
                };
                Ok(node(Ty::Bool, add(cost, arg_cost)))
            }
            ("_[_]", None, [c, i]) => {
                let (ty, sub) = match (&c.ty, &i.ty) {
                    (Ty::List(e), Ty::Int | Ty::Dyn) => ((**e).clone(), "@items"),
                    (Ty::Map(_, v), _) => ((**v).clone(), "@values"),
                    (Ty::Dyn, _) => (Ty::Dyn, "@items"),
                    _ => return Err(Stop::Unknown),
                };
                Ok(Node {
                    ty,
                    cost: add(1, arg_cost),
                    path: c.path.clone().map(|mut p| {
                        p.push(sub.into());
                        p
                    }),
                    size: None,
                })
            }
            // Optionals (cel-go's default cost of one per call): `oldSelf.hasValue()`,
            // `oldSelf.value()` (the value keeps its path, so its size is known),
            // `oldSelf.orValue(x)`, `oldSelf.or(optional)`.
            (
                "hasValue",
                Some(Node {
                    ty: Ty::Optional(_),
                    ..
                }),
                [],
            ) => Ok(node(Ty::Bool, add(1, target_cost))),
            (
                "value",
                Some(
                    t @ Node {
                        ty: Ty::Optional(inner),
                        ..
                    },
                ),
                [],
            ) => Ok(Node {
                ty: (**inner).clone(),
                cost: add(1, target_cost),
                path: t.path.clone(),
                size: t.size,
            }),
            (
                "orValue",
                Some(Node {
                    ty: Ty::Optional(inner),
                    ..
                }),
                [a],
            ) => {
                if !inner.unifies(&a.ty) {
                    return Err(Stop::Unknown);
                }
                let ty = if inner.is_dyn() {
                    a.ty.clone()
                } else {
                    (**inner).clone()
                };
                Ok(node(ty, add(add(1, arg_cost), target_cost)))
            }
            (
                "or",
                Some(
                    t @ Node {
                        ty: Ty::Optional(_),
                        ..
                    },
                ),
                [a],
            ) if matches!(a.ty, Ty::Optional(_)) => {
                Ok(node(t.ty.clone(), add(add(1, arg_cost), target_cost)))
            }
            ("size", None, [a]) | ("size", Some(a), []) => {
                if !matches!(
                    a.ty,
                    Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(..) | Ty::Dyn
                ) {
                    return Err(Stop::Unknown);
                }
                Ok(node(Ty::Int, add(add(1, arg_cost), target_cost)))
            }
            ("startsWith" | "endsWith", Some(t), [a])
                if t.ty == Ty::String && a.ty == Ty::String =>
            {
                let cost = factor(self.size_of(a), STRING_TRAVERSAL_COST_FACTOR);
                Ok(node(Ty::Bool, add(add(cost, arg_cost), target_cost)))
            }
            ("contains", Some(t), [a]) if t.ty == Ty::String && a.ty == Ty::String => {
                let cost = mul(
                    factor(self.size_of(t), STRING_TRAVERSAL_COST_FACTOR),
                    factor(self.size_of(a), STRING_TRAVERSAL_COST_FACTOR),
                );
                Ok(node(Ty::Bool, add(add(cost, arg_cost), target_cost)))
            }
            ("matches", Some(t), [a]) if t.ty == Ty::String && a.ty == Ty::String => {
                let s = factor(
                    self.size_of(t).saturating_add(1),
                    STRING_TRAVERSAL_COST_FACTOR,
                );
                let r = factor(self.size_of(a), REGEX_STRING_LENGTH_COST_FACTOR);
                Ok(node(Ty::Bool, add(add(mul(s, r), arg_cost), target_cost)))
            }
            ("isIP" | "isCIDR", None, [a]) if a.ty == Ty::String => {
                let cost = factor(self.size_of(a), STRING_TRAVERSAL_COST_FACTOR);
                Ok(node(Ty::Bool, add(cost, arg_cost)))
            }
            ("lowerAscii" | "upperAscii" | "trim", Some(t), []) if t.ty == Ty::String => {
                let size = self.size_of(t);
                Ok(Node {
                    ty: Ty::String,
                    cost: add(factor(size, STRING_TRAVERSAL_COST_FACTOR), target_cost),
                    path: None,
                    size: Some(size),
                })
            }
            (name, None, _) if binary_token(name).is_none() && !KNOWN_GLOBALS.contains(&name) => {
                Err(self.error(
                    format!("call:{name}"),
                    id,
                    |n| Anchor::GlobalCall(name.to_string(), n),
                    format!("undeclared reference to '{name}' (in container '')"),
                ))
            }
            _ => Err(Stop::Unknown),
        }
    }
}

/// Global functions and conversions of kube-apiserver's CEL environment (the checker estimates only
/// some of them; the others make a rule [`Outcome::Unknown`] rather than undeclared).
const KNOWN_GLOBALS: &[&str] = &[
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "duration",
    "timestamp",
    "dyn",
    "type",
    "matches",
    "isIP",
    "isCIDR",
    "ip",
    "cidr",
    "url",
    "isURL",
    "quantity",
    "isQuantity",
    "semver",
    "isSemver",
    "format",
    "optional",
];

/// Every anchorable node of the expression, with its kind key, for numbering them in source order.
fn collect_anchors(e: &IdedExpr, out: &mut Vec<(u64, String)>) {
    match &e.expr {
        Expr::Ident(name) => out.push((e.id, format!("ident:{name}"))),
        Expr::Select(s) => {
            if !s.test {
                out.push((e.id, format!("select:{}", s.field)));
            } else {
                // has(x.f) is written with a dot too.
                out.push((e.id, format!("select:{}", s.field)));
            }
            collect_anchors(&s.operand, out);
        }
        Expr::Call(c) => {
            if let Some(t) = binary_token(&c.func_name) {
                out.push((e.id, format!("op:{t}")));
            } else if c.target.is_none() {
                out.push((e.id, format!("call:{}", c.func_name)));
            }
            if let Some(t) = &c.target {
                collect_anchors(t, out);
            }
            for a in &c.args {
                collect_anchors(a, out);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| collect_anchors(x, out)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    collect_anchors(&me.key, out);
                    collect_anchors(&me.value, out);
                }
            }
        }
        Expr::Comprehension(c) => {
            // Only what the rule's author wrote: the range and the macro's own expressions. The
            // accumulator glue (`@result`, `_&&_`, `_+_` …) has no token.
            collect_anchors(&c.iter_range, out);
            for part in macro_user_parts(c) {
                collect_anchors(part, out);
            }
        }
        _ => {}
    }
}

fn call_args(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(call) => call.args.iter().collect(),
        _ => Vec::new(),
    }
}

/// The expressions of a macro's comprehension that come from the source (predicate, transform).
fn macro_user_parts(c: &ComprehensionExpr) -> Vec<&IdedExpr> {
    let step = &c.loop_step;
    let Expr::Call(call) = &step.expr else {
        return Vec::new();
    };
    match call.func_name.as_str() {
        // all / exists: accu && pred, accu || pred
        "_&&_" | "_||_" => call.args.get(1).into_iter().collect(),
        // map without filter: accu + [f]
        "_+_" => match call.args.get(1).map(|a| &a.expr) {
            Some(Expr::List(l)) => l.elements.iter().collect(),
            _ => Vec::new(),
        },
        // exists_one: pred ? accu + 1 : accu; filter: pred ? accu + [x] : accu;
        // map with filter: filter ? accu + [f] : accu
        "_?_:_" => {
            let mut parts: Vec<&IdedExpr> = call.args.first().into_iter().collect();
            if let Some(add) = call.args.get(1)
                && let Some(Expr::List(l)) = call_args(add).get(1).map(|a| &a.expr)
                && let Some(item) = l.elements.first()
                && !matches!(&item.expr, Expr::Ident(n) if *n == c.iter_var)
            {
                parts.push(item);
            }
            parts
        }
        _ => Vec::new(),
    }
}

#[derive(Debug)]
struct Token {
    text: String,
    line: usize,
    col: usize,
}

/// The end (exclusive) of the CEL string literal whose opening quote is at `quote`, its prefix
/// letters (`r`, `b`) starting at `start`: escapes are skipped unless the literal is raw, a
/// triple-quoted one ends at three quotes; an unterminated literal ends the text.
pub(crate) fn string_literal_end(chars: &[char], start: usize, quote: usize) -> usize {
    let q = chars[quote];
    let triple = chars.get(quote + 1) == Some(&q) && chars.get(quote + 2) == Some(&q);
    let raw = chars[start..quote].iter().any(|c| matches!(c, 'r' | 'R'));
    let mut k = quote + if triple { 3 } else { 1 };
    while k < chars.len() {
        if chars[k] == '\\' && !raw {
            k += 2;
            continue;
        }
        if chars[k] == q
            && (!triple || (chars.get(k + 1) == Some(&q) && chars.get(k + 2) == Some(&q)))
        {
            return k + if triple { 3 } else { 1 };
        }
        k += 1;
    }
    chars.len()
}

/// A small CEL lexer: identifiers, numbers, strings (skipped as one token), punctuation.
fn tokens(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0, 1, 1);
    let advance = |i: &mut usize, line: &mut usize, col: &mut usize, n: usize| {
        for _ in 0..n {
            if chars.get(*i) == Some(&'\n') {
                *line += 1;
                *col = 1;
            } else {
                *col += 1;
            }
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            advance(&mut i, &mut line, &mut col, 1);
            continue;
        }
        let (l0, c0) = (line, col);
        let is_quote = |c: char| c == '"' || c == '\'';
        // string literals, with optional r/b prefixes and triple quotes
        let mut j = i;
        while j < chars.len() && j < i + 2 && matches!(chars[j], 'r' | 'R' | 'b' | 'B') {
            j += 1;
        }
        if j < chars.len() && is_quote(chars[j]) && (j == i || !chars[i..j].is_empty()) {
            let k = string_literal_end(&chars, i, j);
            out.push(Token {
                text: "\"".into(),
                line: l0,
                col: c0,
            });
            let n = k - i;
            advance(&mut i, &mut line, &mut col, n);
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let mut k = i;
            while k < chars.len() && (chars[k].is_ascii_alphanumeric() || chars[k] == '_') {
                k += 1;
            }
            out.push(Token {
                text: chars[i..k].iter().collect(),
                line: l0,
                col: c0,
            });
            let n = k - i;
            advance(&mut i, &mut line, &mut col, n);
            continue;
        }
        if c.is_ascii_digit() {
            let mut k = i;
            while k < chars.len() && (chars[k].is_ascii_alphanumeric() || chars[k] == '.') {
                k += 1;
            }
            out.push(Token {
                text: "0".into(),
                line: l0,
                col: c0,
            });
            let n = k - i;
            advance(&mut i, &mut line, &mut col, n);
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let n = if ["==", "!=", "<=", ">=", "&&", "||"].contains(&two.as_str()) {
            2
        } else {
            1
        };
        out.push(Token {
            text: chars[i..i + n].iter().collect(),
            line: l0,
            col: c0,
        });
        advance(&mut i, &mut line, &mut col, n);
    }
    out
}

fn locate(src: &str, at: &Anchor) -> Option<(usize, usize)> {
    let toks = tokens(src);
    let mut found = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let next = toks.get(i + 1).map(|t| t.text.as_str());
        let prev = i.checked_sub(1).map(|p| toks[p].text.as_str());
        let hit = match at {
            Anchor::Select(f, _) => t.text == "." && next == Some(f.as_str()),
            Anchor::Operator(op, _) => t.text == *op,
            Anchor::GlobalCall(name, _) => {
                t.text == "("
                    && prev == Some(name.as_str())
                    && i.checked_sub(2).is_none_or(|p| toks[p].text != ".")
            }
            Anchor::Ident(name, _) => t.text == *name && prev != Some(".") && next != Some("("),
        };
        if hit {
            found.push((t.line, t.col));
        }
    }
    let n = match at {
        Anchor::Select(_, n)
        | Anchor::Operator(_, n)
        | Anchor::GlobalCall(_, n)
        | Anchor::Ident(_, n) => *n,
    };
    found.get(n).or(found.last()).copied()
}

/// cel-go's rendering of one error: `ERROR: <input>:L:C: msg`, the source line and a caret.
fn render(src: &str, e: &Located) -> String {
    let (line, col) = locate(src, &e.at).unwrap_or((1, 1));
    let text = src.lines().nth(line - 1).unwrap_or("");
    format!(
        "ERROR: <input>:{line}:{col}: {}\n | {text}\n | {}^",
        e.message,
        ".".repeat(col - 1)
    )
}

/// Type-check one rule against its schema node's declaration and estimate its worst-case cost.
/// With `optional_old_self` (the rule's `optionalOldSelf: true`), `oldSelf` is declared as
/// kube-apiserver declares it then: `optional_type(<self's type>)`.
pub fn check_rule(rule: &str, self_decl: &Decl, optional_old_self: bool) -> Outcome {
    let Ok(ast) = kube_cel::cel::parser::Parser::new().parse(rule) else {
        // Parse errors are reported by the caller (through cel-rust's own message).
        return Outcome::Unknown;
    };
    let mut anchors = Vec::new();
    collect_anchors(&ast, &mut anchors);
    let mut checker = Checker {
        root: self_decl,
        locals: ["self", "oldSelf"]
            .into_iter()
            .map(|name| Local {
                name: name.into(),
                ty: if name == "oldSelf" && optional_old_self {
                    Ty::Optional(Box::new(Ty::of(self_decl)))
                } else {
                    Ty::of(self_decl)
                },
                path: Some(vec![name.into()]),
            })
            .collect(),
        anchors,
    };
    match checker.visit(&ast) {
        Ok(n) if matches!(n.ty, Ty::Bool) => Outcome::Cost(n.cost),
        Ok(_) => Outcome::Invalid("cel expression must evaluate to a bool".into()),
        Err(Stop::Unknown) => Outcome::Unknown,
        Err(Stop::Error(e)) => {
            Outcome::Invalid(format!("compilation failed: {}", render(rule, &e)))
        }
    }
}

/// kube-apiserver's `getCostErrorMessage`.
pub fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let f = cost as f64 / limit as f64;
    let factor = if f > 100.0 {
        "more than 100x".to_string()
    } else if f < 1.5 {
        format!("{f:.6}x")
    } else {
        format!("{f:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, \
         maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

#[cfg(test)]
mod tests;
