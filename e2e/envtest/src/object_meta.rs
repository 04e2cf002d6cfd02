//! `metadata` as kube-apiserver reads it: decoded into Go's `ObjectMeta`, where a JSON `null`
//! becomes the field's zero value, then checked by `ValidateObjectMetaAccessor`. So an annotation
//! written `key:` in YAML (a `null`: CAPZ's Windows machine-pool flavour has one) is stored as `""`,
//! never as `null` — a stored `null` is an object no typed client can decode — and a `null`
//! finalizer or owner reference becomes an empty one, which validation refuses.

use serde_json::Value;

use crate::error::Cause;
use crate::lifecycle::go_quote;

/// The `ObjectMeta` string maps.
const STRING_MAPS: [&str; 2] = ["labels", "annotations"];

/// The zero values Go's decoder leaves for the nulls of `metadata`: a null field is absent, a
/// null map value or finalizer is `""`, a null owner reference is an empty one.
pub fn coerce(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.retain(|_, v| !v.is_null());
    for key in STRING_MAPS {
        if let Some(map) = meta.get_mut(key).and_then(Value::as_object_mut) {
            for v in map.values_mut().filter(|v| v.is_null()) {
                *v = Value::String(String::new());
            }
        }
    }
    if let Some(items) = meta.get_mut("finalizers").and_then(Value::as_array_mut) {
        for v in items.iter_mut().filter(|v| v.is_null()) {
            *v = Value::String(String::new());
        }
    }
    if let Some(items) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        for v in items.iter_mut().filter(|v| v.is_null()) {
            *v = serde_json::json!({"apiVersion": "", "kind": "", "name": "", "uid": ""});
        }
    }
}

/// What `ValidateObjectMetaAccessor` refuses of the finalizers and owner references, with its
/// field paths and messages (the list is not indexed in either).
pub fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let meta = obj.get("metadata");
    let finalizers = meta
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array);
    for f in finalizers.into_iter().flatten().filter_map(Value::as_str) {
        for msg in qualified_name_errors(f) {
            causes.push(invalid("metadata.finalizers", f, &msg));
        }
    }
    let owners = meta
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array);
    for owner in owners.into_iter().flatten() {
        let field = |k: &str| owner.get(k).and_then(Value::as_str).unwrap_or("");
        let api_version = field("apiVersion");
        // `schema.FromAPIVersionAndKind`: the version is what follows the group's slash.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] | [_, v] => *v,
            _ => "",
        };
        let checks = [
            (
                "apiVersion",
                api_version,
                version,
                "version must not be empty",
            ),
            (
                "kind",
                field("kind"),
                field("kind"),
                "kind must not be empty",
            ),
            (
                "name",
                field("name"),
                field("name"),
                "name must not be empty",
            ),
            ("uid", field("uid"), field("uid"), "uid must not be empty"),
        ];
        for (key, value, checked, msg) in checks {
            if checked.is_empty() {
                causes.push(invalid(
                    &format!("metadata.ownerReferences.{key}"),
                    value,
                    msg,
                ));
            }
        }
    }
    causes
}

/// The lines structured-merge-diff fails a server-side apply configuration with when its
/// finalizers or owner references hold a `null` (a 500, before any merge).
pub fn nulls_in_apply(applied: &Value) -> Vec<String> {
    let meta = applied.get("metadata");
    let lists = [
        (
            "finalizers",
            "associative list without keys has an element that's an explicit null",
        ),
        (
            "ownerReferences",
            "associative list with keys may not have a null element",
        ),
    ];
    lists
        .into_iter()
        .filter_map(|(key, msg)| {
            let items = meta?.get(key)?.as_array()?;
            let i = items.iter().position(Value::is_null)?;
            Some(format!(".metadata.{key}: element {i}: {msg}"))
        })
        .collect()
}

fn invalid(field: &str, value: &str, msg: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {}: {msg}", go_quote(value)),
    )
}

/// `IsDNS1123Subdomain`'s one complaint about the regular expression.
pub const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Whether `s` is a DNS-1123 subdomain (at most 253 characters).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

const QUALIFIED_NAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `IsQualifiedName`: an optional DNS subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let name = match value.split('/').collect::<Vec<_>>().as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else if prefix.len() > 253 {
                errors.push("prefix part must be no more than 253 characters".to_owned());
            } else if !is_dns1123_subdomain(prefix) {
                errors.push(format!("prefix part {DNS1123_SUBDOMAIN}"));
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let matches = alnum(name.chars().next())
        && alnum(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !matches {
        errors.push(format!("name part {QUALIFIED_NAME}"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nulls_become_go_zero_values() {
        let mut obj = json!({"metadata": {"name": "a", "annotations": {"x": null, "y": "1"},
            "labels": null, "finalizers": [null, "f"], "ownerReferences": [null]}});
        coerce(&mut obj);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "a", "annotations": {"x": "", "y": "1"},
                "finalizers": ["", "f"],
                "ownerReferences": [{"apiVersion": "", "kind": "", "name": "", "uid": ""}]}})
        );
        let messages: Vec<_> = validate(&obj).into_iter().map(|c| c.field).collect();
        assert_eq!(
            messages,
            [
                "metadata.finalizers",
                "metadata.finalizers",
                "metadata.ownerReferences.apiVersion",
                "metadata.ownerReferences.kind",
                "metadata.ownerReferences.name",
                "metadata.ownerReferences.uid",
            ]
        );
    }

    #[test]
    fn qualified_names_as_go_checks_them() {
        assert!(qualified_name_errors("example.com/my-finalizer").is_empty());
        assert!(qualified_name_errors("kubernetes").is_empty());
        assert_eq!(qualified_name_errors("").len(), 2);
        assert_eq!(
            qualified_name_errors("/x"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(
            qualified_name_errors("Example.com/x"),
            [format!("prefix part {DNS1123_SUBDOMAIN}")]
        );
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
        assert_eq!(
            qualified_name_errors(&"x".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
        assert_eq!(qualified_name_errors("-x").len(), 1);
    }
}
