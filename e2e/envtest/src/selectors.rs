//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field selectors.

use std::borrow::Cow;

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed selector; an empty one matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// Split on commas outside parentheses.
fn terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl Selector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let bad = |t: &str| ApiError::BadRequest(format!("unable to parse requirement: {t}"));
        let mut requirements = Vec::new();
        for t in terms(s) {
            let r = if let Some(k) = t.strip_prefix('!') {
                Requirement::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = t.split_once("!=") {
                Requirement::NotEquals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = t.split_once("==") {
                Requirement::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = t.split_once('=') {
                Requirement::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, rest)) = t.split_once(" notin ") {
                Requirement::NotIn(
                    k.trim().to_string(),
                    set_values(rest).ok_or_else(|| bad(t))?,
                )
            } else if let Some((k, rest)) = t.split_once(" in ") {
                Requirement::In(
                    k.trim().to_string(),
                    set_values(rest).ok_or_else(|| bad(t))?,
                )
            } else if t.contains(char::is_whitespace) || t.contains('(') {
                return Err(bad(t));
            } else {
                Requirement::Exists(t.to_string())
            };
            requirements.push(r);
        }
        Ok(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// A `key=value` the selector requires, if any: the objects that match carry that label.
    pub fn equality(&self) -> Option<(&str, &str)> {
        self.requirements.iter().find_map(|r| match r {
            Requirement::Equals(k, v) => Some((k.as_str(), v.as_str())),
            _ => None,
        })
    }

    /// Match against a lookup of key → value. The lookup borrows what it finds: a list runs this
    /// for every object it reads, and copying each value (with `Value::pointer`'s allocations
    /// per path segment) was a tenth of the API test server's CPU at 1,000 clusters.
    fn matches_with<'v>(&self, lookup: impl Fn(&str) -> Option<Cow<'v, str>>) -> bool {
        let is_in = |x: Cow<'v, str>, vs: &[String]| vs.iter().any(|v| *v == *x);
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => lookup(k).as_deref() == Some(v.as_str()),
            Requirement::NotEquals(k, v) => lookup(k).as_deref() != Some(v.as_str()),
            Requirement::In(k, vs) => lookup(k).is_some_and(|x| is_in(x, vs)),
            Requirement::NotIn(k, vs) => lookup(k).is_none_or(|x| !is_in(x, vs)),
            Requirement::Exists(k) => lookup(k).is_some(),
            Requirement::NotExists(k) => lookup(k).is_none(),
        })
    }

    pub fn matches_labels(&self, obj: &Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        self.matches_with(|k| {
            labels
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .map(Cow::Borrowed)
        })
    }

    /// Field selectors: a dotted path into the object (`metadata.name`, `metadata.namespace`, …).
    pub fn matches_fields(&self, obj: &Value) -> bool {
        self.matches_with(|path| {
            let mut cur = obj;
            for part in path.split('.') {
                cur = cur.get(part)?;
            }
            Some(match cur {
                Value::String(s) => Cow::Borrowed(s.as_str()),
                other => Cow::Owned(other.to_string()),
            })
        }) || self.requirements.is_empty()
    }
}

/// Label and field selectors of one request.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub labels: Selector,
    pub fields: Selector,
}

impl Filter {
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches_labels(obj) && self.fields.matches_fields(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns1", "labels": {"app": "web", "tier": "front"}}})
    }

    #[test]
    fn label_operators() {
        let o = obj();
        let m = |s: &str| Selector::parse(s).unwrap().matches_labels(&o);
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app!=web"));
        assert!(m("app!=db"));
        assert!(m("app in (web, db)"));
        assert!(!m("app notin (web,db)"));
        assert!(m("tier notin (back)"));
        assert!(m("app"));
        assert!(!m("!app"));
        assert!(m("!missing"));
        assert!(m("app=web,tier in (front)"));
        assert!(!m("app=web,tier=back"));
        assert!(m(""));
    }

    #[test]
    fn field_selectors() {
        let o = obj();
        let m = |s: &str| Selector::parse(s).unwrap().matches_fields(&o);
        assert!(m("metadata.name=a"));
        assert!(m("metadata.namespace==ns1"));
        assert!(!m("metadata.namespace!=ns1"));
        assert!(!m("metadata.name=b"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(Selector::parse("app in web").is_err());
    }
}
