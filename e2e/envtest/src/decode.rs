//! What kube-apiserver's strict JSON decoder reports beyond unknown fields: keys that appear twice
//! in one object. `serde_json::Value` keeps only the last of them, so the body is parsed here
//! with a visitor that builds the same value and names the repeated keys as it goes
//! (`duplicate field "spec.size"`) — one pass over the body, not a parse and a second walk.

use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parse a JSON body as `serde_json::from_slice` does (the last of repeated keys wins), and
/// return the paths of keys repeated within one object, in document order (each once).
pub fn parse_json(body: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    let mut found = Vec::new();
    let mut path = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Build {
        path: &mut path,
        found: &mut found,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((value, found))
}

/// One step of the path to the value being built.
enum Segment {
    Key(String),
    Index(usize),
}

/// `spec.ports[0].name`, as kube-apiserver names a field.
fn render(path: &[Segment], last: &str) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(last);
    out
}

struct Build<'a> {
    path: &'a mut Vec<Segment>,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            self.path.push(Segment::Index(out.len()));
            let item = seq.next_element_seed(Build {
                path: &mut *self.path,
                found: &mut *self.found,
            });
            self.path.pop();
            match item? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                let path = render(self.path, &key);
                if !self.found.contains(&path) {
                    self.found.push(path);
                }
                // The last occurrence wins, as in serde_json; what repeats inside it is not
                // reported (the whole field already is).
                let value: Value = map.next_value()?;
                out.insert(key, value);
                continue;
            }
            self.path.push(Segment::Key(key));
            let value = map.next_value_seed(Build {
                path: &mut *self.path,
                found: &mut *self.found,
            });
            let Some(Segment::Key(key)) = self.path.pop() else {
                unreachable!("the key pushed above is on top of the path");
            };
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_named_by_path_in_document_order() {
        let body =
            br#"{"b":1,"spec":{"size":1,"size":2,"ports":[{"n":1,"n":2}]},"b":2,"spec2":{}}"#;
        let (value, found) = parse_json(body).unwrap();
        assert_eq!(
            found,
            vec![
                "spec.size".to_string(),
                "spec.ports[0].n".into(),
                "b".into()
            ]
        );
        assert_eq!(value, serde_json::from_slice::<Value>(body).unwrap());
        assert!(parse_json(br#"{"a":{"a":1}}"#).unwrap().1.is_empty());
        assert!(parse_json(b"not json").is_err());
        assert!(parse_json(br#"{"a":1} trailing"#).is_err());
    }

    #[test]
    fn values_are_the_ones_serde_json_builds() {
        for body in [
            &br#"{"i":-3,"u":18446744073709551615,"f":1.5,"e":1e400,"s":"\u00e9\"x","n":null,"b":[true,false,[],{}]}"#[..],
            b"[1,2,3]",
            b"\"text\"",
            b"  42  ",
        ] {
            let ours = parse_json(body).map(|(v, _)| v).map_err(|e| e.to_string());
            let theirs = serde_json::from_slice::<Value>(body).map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(body));
        }
    }
}
