//! What kube-apiserver's strict JSON decoder reports beyond unknown fields: keys that appear twice
//! in one object. `serde_json::Value` keeps only the last of them, so the raw body is walked once
//! more, without building values, to name them (`duplicate field "spec.size"`).

use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The paths of keys repeated within one JSON object of `body`, in document order (each once).
/// A body that is not JSON has none (it fails decoding elsewhere, with its own error).
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    if (Walk {
        path: String::new(),
        found: &mut found,
    })
    .deserialize(&mut de)
    .is_err()
    {
        return Vec::new();
    }
    found
}

struct Walk<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let seed = Walk {
                path: format!("{}[{i}]", self.path),
                found: &mut *self.found,
            };
            if seq.next_element_seed(seed)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                if !self.found.contains(&path) {
                    self.found.push(path);
                }
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            map.next_value_seed(Walk {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_named_by_path_in_document_order() {
        let body =
            br#"{"b":1,"spec":{"size":1,"size":2,"ports":[{"n":1,"n":2}]},"b":2,"spec2":{}}"#;
        assert_eq!(
            duplicate_fields(body),
            vec![
                "spec.size".to_string(),
                "spec.ports[0].n".into(),
                "b".into()
            ]
        );
        assert!(duplicate_fields(br#"{"a":{"a":1}}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
    }
}
