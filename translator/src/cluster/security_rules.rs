//! An NSG's security rules: CAPZ's as ARM's.

use std::collections::BTreeMap;

use strata_crds::azure::{self, *};
use strata_crds::capz;

use crate::InputError;
use crate::model::ClusterModel;

/// CAPZ's security rules as ARM's: defaults filled, priorities checked unique per direction and
/// missing ones given the lowest free number.
pub(super) fn security_rules(
    model: &ClusterModel,
    rules: &[capz::SecurityRule],
    field: &str,
) -> Result<Vec<azure::SecurityRule>, InputError> {
    let err = |i: usize, f: &str, message: String| InputError {
        object: model.object.clone(),
        field: format!("{field}.securityRules[{i}].{f}"),
        message,
    };
    let mut used: BTreeMap<(bool, i32), usize> = BTreeMap::new();
    for (i, r) in rules.iter().enumerate() {
        if let Some(p) = r.priority {
            let inbound = r.direction == capz::SecurityRuleDirection::Inbound;
            if let Some(j) = used.insert((inbound, p), i) {
                return Err(err(
                    i,
                    "priority",
                    format!("priority {p} is already used by securityRules[{j}] in this direction"),
                ));
            }
        }
    }
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let inbound = r.direction == capz::SecurityRuleDirection::Inbound;
        let priority = match r.priority {
            Some(p) => p,
            None => {
                let p = (100..=4096)
                    .find(|p| !used.contains_key(&(inbound, *p)))
                    .ok_or_else(|| err(i, "priority", "no free priority left".into()))?;
                used.insert((inbound, p), i);
                p
            }
        };
        let port = |v: &Option<String>, f: &str| -> Result<String, InputError> {
            let v = v.clone().unwrap_or_else(|| "*".to_owned());
            if port_range_ok(&v) {
                Ok(v)
            } else {
                Err(err(
                    i,
                    f,
                    format!("{v:?} is not *, a port or a range low-high"),
                ))
            }
        };
        let prefix = |v: Option<&String>, f: &str| -> Result<String, InputError> {
            let v = v.cloned().unwrap_or_else(|| "*".to_owned());
            if v.is_empty() || v.len() > 128 {
                Err(err(i, f, "must be 1 to 128 characters".into()))
            } else {
                Ok(v)
            }
        };
        let source = if r.source.is_some() {
            r.source.as_ref()
        } else {
            r.sources.first()
        };
        if r.sources.len() > 1 || (r.source.is_some() && !r.sources.is_empty()) {
            return Err(err(
                i,
                "sources",
                "several source prefixes are not supported yet; use one rule per prefix".into(),
            ));
        }
        out.push(azure::SecurityRule {
            name: r.name.clone(),
            description: r.description.clone(),
            protocol: match r.protocol {
                capz::SecurityProtocol::All => SecurityRuleProtocol::Any,
                capz::SecurityProtocol::Tcp => SecurityRuleProtocol::Tcp,
                capz::SecurityProtocol::Udp => SecurityRuleProtocol::Udp,
                capz::SecurityProtocol::Icmp => SecurityRuleProtocol::Icmp,
            },
            source_port_range: port(&r.source_ports, "sourcePorts")?,
            destination_port_range: port(&r.destination_ports, "destinationPorts")?,
            source_address_prefix: prefix(source, "source")?,
            destination_address_prefix: prefix(r.destination.as_ref(), "destination")?,
            access: match r.action {
                Some(capz::SecurityRuleAction::Deny) => SecurityRuleAccess::Deny,
                _ => SecurityRuleAccess::Allow,
            },
            priority,
            direction: if inbound {
                azure::SecurityRuleDirection::Inbound
            } else {
                azure::SecurityRuleDirection::Outbound
            },
        });
    }
    Ok(out)
}

/// `*`, a port 0–65535 or a range `low-high`, as the NSG CR's schema admits.
fn port_range_ok(v: &str) -> bool {
    let port = |p: &str| {
        !p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && (p == "0" || !p.starts_with('0'))
            && p.parse::<u32>().is_ok_and(|n| n <= 65535)
    };
    v == "*"
        || match v.split_once('-') {
            Some((a, b)) => port(a) && port(b),
            None => port(v),
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges() {
        for ok in ["*", "22", "0", "1024-65535", "65535"] {
            assert!(port_range_ok(ok), "{ok}");
        }
        for bad in ["", "65536", "022", "80,443", "1-", "-1", "a"] {
            assert!(!port_range_ok(bad), "{bad}");
        }
    }
}
