//! Fields of an input object that its Rust type does not declare. Deserializing into the typed
//! CAPZ structs drops unknown fields without a word; comparing the object as the server (or the
//! YAML file) holds it with its typed round trip finds them, so that each becomes a note instead
//! of vanishing. With Strata's own CRDs installed the API server prunes such fields before they
//! reach the translator; with CAPZ's CRDs, or in `render`, they arrive.

use serde_json::Value;

use crate::Note;

/// A note for every member of `raw` (below `path`) that `typed`, the object's typed round trip,
/// lacks. Empty values (`null`, `{}`, `[]`, `""`) are skipped: the typed form omits those too,
/// and they ask for nothing.
pub fn undeclared_fields(object: &str, path: &str, raw: &Value, typed: &Value) -> Vec<Note> {
    let mut notes = Vec::new();
    walk(object, path, raw, typed, &mut notes);
    notes
}

fn walk(object: &str, path: &str, raw: &Value, typed: &Value, notes: &mut Vec<Note>) {
    match (raw, typed) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, v) in r {
                if is_empty(v) {
                    continue;
                }
                let field = format!("{path}.{k}");
                match t.get(k) {
                    Some(tv) => walk(object, &field, v, tv, notes),
                    None => notes.push(Note {
                        object: object.to_owned(),
                        field,
                        message: "not a field Strata knows (a newer CAPZ API?): not translated"
                            .to_owned(),
                    }),
                }
            }
        }
        (Value::Array(r), Value::Array(t)) => {
            for (i, (v, tv)) in r.iter().zip(t).enumerate() {
                walk(object, &format!("{path}[{i}]"), v, tv, notes);
            }
        }
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_unknown_members_at_any_depth_and_skips_empty_ones() {
        let raw = json!({ "a": 1, "b": { "c": "x", "d": true }, "e": [ { "f": 1, "g": 2 } ],
            "h": {}, "i": null });
        let typed = json!({ "a": 1, "b": { "c": "x" }, "e": [ { "f": 1 } ] });
        let notes = undeclared_fields("K ns/n", "spec", &raw, &typed);
        let fields: Vec<&str> = notes.iter().map(|n| n.field.as_str()).collect();
        assert_eq!(fields, ["spec.b.d", "spec.e[0].g"]);
        assert!(undeclared_fields("K ns/n", "spec", &typed, &typed).is_empty());
    }
}
