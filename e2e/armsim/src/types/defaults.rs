//! Server-filled values: what ARM puts in a body when the client leaves a field out. Each kind
//! keeps its list as one table of [`Fill`]s (in its own module) that a reader can hold against the
//! REST specification (`default` in the swagger, or what ARM's published example responses show).

use serde_json::Value;

/// When a fill applies.
#[derive(Debug, Clone, Copy)]
pub enum When {
    Always,
    /// The value at this JSON pointer (from the resource root) is this string.
    Is(&'static str, &'static str),
    /// Nothing is at this JSON pointer (from the resource root).
    Absent(&'static str),
    /// Something is at the first pointer and nothing at the second.
    PresentAbsent(&'static str, &'static str),
    /// A rule the pointers cannot say (a VM whose image is Windows).
    Test(fn(&Value) -> bool),
}

/// One server-filled value: `at` is a JSON pointer from the resource root in which `*` stands
/// for every element of an array (`/properties/loadBalancingRules/*/properties/enableTcpReset`);
/// `value` is JSON text. A fill never overwrites what the client sent; objects on the way are
/// created, arrays are not.
#[derive(Debug, Clone, Copy)]
pub struct Fill {
    pub at: &'static str,
    pub value: &'static str,
    pub when: When,
}

/// A fill that always applies.
pub const fn fill(at: &'static str, value: &'static str) -> Fill {
    Fill {
        at,
        value,
        when: When::Always,
    }
}

/// A fill that applies when the value at `pointer` is `is`.
pub const fn fill_if(
    at: &'static str,
    value: &'static str,
    pointer: &'static str,
    is: &'static str,
) -> Fill {
    Fill {
        at,
        value,
        when: When::Is(pointer, is),
    }
}

/// A fill that applies under any condition.
pub const fn fill_when(at: &'static str, value: &'static str, when: When) -> Fill {
    Fill { at, value, when }
}

/// A fill that applies when nothing is at `pointer`.
pub const fn fill_unless(at: &'static str, value: &'static str, pointer: &'static str) -> Fill {
    Fill {
        at,
        value,
        when: When::Absent(pointer),
    }
}

impl Fill {
    /// The value as JSON. The tables are constants checked by a unit test, so a value that does
    /// not parse is a programming error; it is skipped rather than taking the server down.
    fn parsed(&self) -> Option<Value> {
        match serde_json::from_str(self.value) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::error!(at = self.at, error = %e, "server-filled value is not JSON");
                None
            }
        }
    }

    fn applies(&self, root: &Value) -> bool {
        match self.when {
            When::Always => true,
            When::Is(pointer, is) => root.pointer(pointer).and_then(Value::as_str) == Some(is),
            When::Absent(pointer) => root.pointer(pointer).is_none_or(Value::is_null),
            When::PresentAbsent(present, absent) => {
                root.pointer(present).is_some_and(|v| !v.is_null())
                    && root.pointer(absent).is_none_or(Value::is_null)
            }
            When::Test(test) => test(root),
        }
    }
}

/// Applies every fill of `table` to `body`, leaving what is already there.
pub fn apply(table: &[Fill], body: &mut Value) {
    for f in table {
        if !f.applies(body) {
            continue;
        }
        let Some(value) = f.parsed() else { continue };
        let parts: Vec<&str> = f.at.trim_start_matches('/').split('/').collect();
        fill_at(body, &parts, &value);
    }
}

fn fill_at(node: &mut Value, parts: &[&str], value: &Value) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if *first == "*" {
        if let Some(items) = node.as_array_mut() {
            for item in items {
                fill_at(item, rest, value);
            }
        }
        return;
    }
    let Some(map) = node.as_object_mut() else {
        return;
    };
    if rest.is_empty() {
        let slot = map.entry(*first).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value.clone();
        }
        return;
    }
    // An array below this key only exists if the client sent it; objects are created.
    if rest.first() == Some(&"*") {
        if let Some(child) = map.get_mut(*first) {
            fill_at(child, rest, value);
        }
        return;
    }
    let child = map
        .entry(*first)
        .or_insert_with(|| Value::Object(Default::default()));
    if child.is_null() {
        *child = Value::Object(Default::default());
    }
    fill_at(child, rest, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_missing_values_only_and_walks_arrays() {
        let table = [
            fill("/properties/enableIPForwarding", "false"),
            fill("/properties/dnsSettings/dnsServers", "[]"),
            fill("/properties/rules/*/properties/enableTcpReset", "false"),
            fill("/properties/missing/*/x", "1"),
            fill_if("/properties/ddos", "\"On\"", "/sku/name", "Standard"),
            fill_unless("/properties/linux", "true", "/properties/windows"),
        ];
        let mut body = json!({
            "sku": { "name": "Basic" },
            "properties": {
                "enableIPForwarding": true,
                "rules": [ { "name": "a" }, { "properties": { "enableTcpReset": true } } ],
                "windows": {},
            }
        });
        apply(&table, &mut body);
        assert_eq!(
            body,
            json!({
                "sku": { "name": "Basic" },
                "properties": {
                    "enableIPForwarding": true,
                    "dnsSettings": { "dnsServers": [] },
                    "rules": [
                        { "name": "a", "properties": { "enableTcpReset": false } },
                        { "properties": { "enableTcpReset": true } },
                    ],
                    "windows": {},
                }
            })
        );
        let mut standard = json!({ "sku": { "name": "Standard" } });
        apply(&table, &mut standard);
        assert_eq!(standard["properties"]["ddos"], "On");
        assert_eq!(standard["properties"]["linux"], true);
    }

    #[test]
    fn every_table_value_is_json() {
        for spec in super::super::all_specs() {
            for f in spec.defaults {
                assert!(
                    serde_json::from_str::<Value>(f.value).is_ok(),
                    "{} {}: {}",
                    spec.type_name,
                    f.at,
                    f.value
                );
                assert!(f.at.starts_with('/'), "{} {}", spec.type_name, f.at);
            }
        }
    }
}
