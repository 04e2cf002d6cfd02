//! Drift: does what ARM returns still satisfy what the spec asks for?
//!
//! The comparison looks only at what the desired body sets, so everything ARM fills in on its own
//! (defaults, read-only fields, `etag`, `resourceGuid`, `provisioningState`, generated children
//! such as `defaultSecurityRules`, back-references, allocated addresses, MAC addresses) never counts
//! as drift. It normalises what ARM normalises: resource names, IDs, enum values and regions are
//! case-insensitive, so `westeurope` matches `WestEurope`. Tag values are the one place where case
//! is data. Named children (security rules, load balancer parts, IP configurations) are matched by
//! name and must be the same set: a rule removed or added behind our back is drift.

use serde_json::Value;

/// Fields ARM accepts on PUT but never returns (secrets, bootstrap data): they cannot be compared,
/// so they are never a reason to write.
const WRITE_ONLY: &[&str] = &["customData", "adminPassword"];

/// The path (`properties.securityRules[allow_ssh].priority`) of the first place where `observed`
/// does not satisfy `desired`, or `None` when it does.
pub fn first_difference(desired: &Value, observed: &Value) -> Option<String> {
    diff(desired, observed, "", false)
}

fn diff(desired: &Value, observed: &Value, path: &str, exact: bool) -> Option<String> {
    match desired {
        Value::Null => None,
        Value::Object(want) => {
            let Some(have) = observed.as_object() else {
                return (!is_empty(desired)).then(|| path.to_owned());
            };
            for (key, d) in want {
                if WRITE_ONLY.contains(&key.as_str()) {
                    continue;
                }
                let here = join(path, key);
                let exact = exact || key == "tags" || key == "keyData";
                match have.get(key) {
                    None | Some(Value::Null) if is_empty(d) => {}
                    None | Some(Value::Null) => return Some(here),
                    Some(o) => {
                        if let Some(p) = diff(d, o, &here, exact) {
                            return Some(p);
                        }
                    }
                }
            }
            None
        }
        Value::Array(want) => {
            let have: &[Value] = observed.as_array().map_or(&[], Vec::as_slice);
            diff_list(want, have, path, exact)
        }
        Value::String(s) => match observed.as_str() {
            Some(o) if strings_match(s, o, path, exact) => None,
            _ => Some(path.to_owned()),
        },
        Value::Number(n) => match (n.as_f64(), observed.as_f64()) {
            (Some(a), Some(b)) if a == b => None,
            _ => Some(path.to_owned()),
        },
        Value::Bool(b) => (observed.as_bool() != Some(*b)).then(|| path.to_owned()),
    }
}

fn diff_list(want: &[Value], have: &[Value], path: &str, exact: bool) -> Option<String> {
    if want.len() != have.len() {
        return Some(format!("{path} (length {} ≠ {})", have.len(), want.len()));
    }
    // Objects are matched by their identifying key, whatever order ARM returns them in.
    if let Some(key) = identity_key(want) {
        for w in want {
            let id = w.get(key).and_then(Value::as_str).unwrap_or_default();
            let here = format!("{path}[{id}]");
            let found = have.iter().find(|h| {
                h.get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|h| h.eq_ignore_ascii_case(id))
            });
            match found {
                Some(h) => {
                    if let Some(p) = diff(w, h, &here, exact) {
                        return Some(p);
                    }
                }
                None => return Some(here),
            }
        }
        return None;
    }
    if want.iter().all(|w| !w.is_object() && !w.is_array()) {
        // Lists of scalars (address prefixes, DNS servers, zones) as sets.
        let all_found = want
            .iter()
            .all(|w| have.iter().any(|h| diff(w, h, path, exact).is_none()));
        return (!all_found).then(|| path.to_owned());
    }
    want.iter()
        .zip(have)
        .enumerate()
        .find_map(|(i, (w, h))| diff(w, h, &format!("{path}[{i}]"), exact))
}

/// The key that names the elements of a list of objects: `name` (children, data disks) or `id`
/// (references).
fn identity_key(list: &[Value]) -> Option<&'static str> {
    ["name", "id"]
        .into_iter()
        .find(|k| list.iter().all(|v| v.get(*k).is_some_and(Value::is_string)))
        .filter(|_| !list.is_empty())
}

fn strings_match(want: &str, have: &str, path: &str, exact: bool) -> bool {
    if exact {
        return want == have;
    }
    if path.ends_with("location") {
        // ARM answers `westeurope` for `West Europe`.
        let norm = |s: &str| s.replace(' ', "").to_ascii_lowercase();
        return norm(want) == norm(have);
    }
    want.eq_ignore_ascii_case(have)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_empty),
        _ => false,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nsg(rules: Value, tags: Value) -> Value {
        json!({"location": "westeurope", "tags": tags, "properties": {"securityRules": rules}})
    }

    fn rule(name: &str, priority: i64) -> Value {
        json!({"name": name, "properties": {"priority": priority, "protocol": "Tcp", "access": "Allow"}})
    }

    #[test]
    fn server_filled_fields_are_not_drift() {
        let desired = nsg(
            json!([rule("allow_ssh", 100)]),
            json!({"strata-owner": "ns/NetworkSecurityGroup/a"}),
        );
        let observed = json!({
            "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/a",
            "etag": "W/\"1\"", "location": "WestEurope", "type": "Microsoft.Network/networkSecurityGroups",
            "tags": {"strata-owner": "ns/NetworkSecurityGroup/a"},
            "properties": {
                "provisioningState": "Succeeded", "resourceGuid": "g",
                "securityRules": [{"name": "ALLOW_SSH", "id": "x", "etag": "e", "properties": {
                    "priority": 100, "protocol": "TCP", "access": "Allow", "provisioningState": "Succeeded",
                    "sourcePortRanges": [], "destinationPortRanges": []}}],
                "defaultSecurityRules": [rule("AllowVnetInBound", 65000)]
            }
        });
        assert_eq!(first_difference(&desired, &observed), None);
    }

    #[test]
    fn real_drift_is_found_with_its_path() {
        let desired = nsg(
            json!([rule("a", 100), rule("b", 110)]),
            json!({"env": "Prod"}),
        );
        let cases = [
            (
                nsg(json!([rule("a", 100)]), json!({"env": "Prod"})),
                "properties.securityRules (length 1 ≠ 2)",
            ),
            (
                nsg(
                    json!([rule("a", 100), rule("c", 110)]),
                    json!({"env": "Prod"}),
                ),
                "properties.securityRules[b]",
            ),
            (
                nsg(
                    json!([rule("a", 100), rule("b", 120)]),
                    json!({"env": "Prod"}),
                ),
                "properties.securityRules[b].properties.priority",
            ),
            (
                nsg(
                    json!([rule("a", 100), rule("b", 110)]),
                    json!({"env": "prod"}),
                ),
                "tags.env",
            ),
            (
                nsg(json!([rule("a", 100), rule("b", 110)]), json!({})),
                "tags.env",
            ),
        ];
        for (observed, path) in cases {
            assert_eq!(first_difference(&desired, &observed).as_deref(), Some(path));
        }
    }

    #[test]
    fn scalars_lists_and_references() {
        let desired = json!({"properties": {
            "addressSpace": {"addressPrefixes": ["10.0.0.0/8", "192.168.0.0/16"]},
            "subnet": {"id": "/subscriptions/S/resourceGroups/RG/x"},
            "dnsServers": [], "osProfile": {"customData": "c2VjcmV0"}, "enable": false, "size": 30}});
        let same = json!({"properties": {
            "addressSpace": {"addressPrefixes": ["192.168.0.0/16", "10.0.0.0/8"]},
            "subnet": {"id": "/subscriptions/s/resourcegroups/rg/x"},
            "osProfile": {"computerName": "x"}, "enable": false, "size": 30.0}});
        assert_eq!(first_difference(&desired, &same), None);
        let mut changed = same.clone();
        changed["properties"]["enable"] = json!(true);
        assert_eq!(
            first_difference(&desired, &changed).as_deref(),
            Some("properties.enable")
        );
        let mut changed = same;
        changed["properties"]["addressSpace"]["addressPrefixes"] =
            json!(["10.0.0.0/8", "172.16.0.0/12"]);
        assert_eq!(
            first_difference(&desired, &changed).as_deref(),
            Some("properties.addressSpace.addressPrefixes")
        );
    }
}
