//! The API server and outbound load balancers with their public IPs, as CAPZ's
//! `azure/services/loadbalancers/spec.go` and `publicips/spec.go` build them.

use strata_crds::azure::*;
use strata_crds::common::ResourceRef;

use super::{PROBE_COUNT, PROBE_INTERVAL, PROBE_PATH, ROLE_COMMON};
use crate::model::{ClusterModel, LoadBalancerModel};
use crate::{InputError, Translation, naming};

/// A Standard, static public IP CR; returns its CR name.
pub(super) fn public_ip(
    model: &ClusterModel,
    out: &mut Translation,
    owner: &ResourceRef,
    name: &str,
    dns_label: Option<&str>,
    edge_zone: bool,
) -> String {
    let cr = naming::cr_name(&model.name, name);
    let tags = model.tags(ROLE_COMMON, name);
    let dns_label = dns_label.and_then(|l| {
        if dns_label_ok(l) {
            Some(l.to_owned())
        } else {
            out.notes.push(crate::Note {
                object: model.object.clone(),
                field: "spec.networkSpec.apiServerLB.frontendIPs[].publicIP.dnsName".to_owned(),
                message: format!("{l:?} is not a valid Azure DNS label; the IP gets none"),
            });
            None
        }
    });
    out.resources.push(
        PublicIPAddress {
            metadata: model.meta(&cr, false, Some(&tags)),
            spec: PublicIPAddressSpec {
                azure_name: ClusterModel::azure_name(&cr, name),
                owner: owner.clone(),
                location: model.location.clone(),
                tags,
                sku: PublicIPSku::Standard,
                allocation_method: AllocationMethod::Static,
                ip_version: IPVersion::IPv4,
                dns_label,
                idle_timeout_in_minutes: None,
                zones: Vec::new(),
                extended_location: model.extended_location.clone().filter(|_| edge_zone),
            },
            status: None,
        }
        .into(),
    );
    cr
}

fn dns_label_ok(l: &str) -> bool {
    let b = l.as_bytes();
    (3..=63).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

pub(super) fn load_balancer(
    model: &ClusterModel,
    out: &mut Translation,
    rg_ref: &ResourceRef,
    lb: &LoadBalancerModel,
    role: &str,
    api_server: bool,
) -> Result<(), InputError> {
    if lb.frontends.is_empty() {
        out.notes.push(crate::Note {
            object: model.object.clone(),
            field: format!("spec.networkSpec ({role})"),
            message: "frontendIPsCount 0: the load balancer is not created".to_owned(),
        });
        return Ok(());
    }
    let cr = naming::cr_name(&model.name, &lb.name);
    let mut frontends = Vec::new();
    for f in &lb.frontends {
        let mut fe = FrontendIPConfiguration {
            name: f.name.clone(),
            ..Default::default()
        };
        if let Some((ip, dns)) = &f.public_ip {
            fe.public_ip_address = Some(ResourceRef::named(public_ip(
                model,
                out,
                rg_ref,
                ip,
                dns.as_deref(),
                true,
            )));
        } else {
            let subnet = model.control_plane_subnet().ok_or_else(|| InputError {
                object: model.object.clone(),
                field: "spec.networkSpec.subnets".to_owned(),
                message: "an internal frontend needs a control-plane subnet".to_owned(),
            })?;
            fe.subnet = Some(ResourceRef::named(&subnet.cr_name));
            fe.private_ip_address = f.private_ip.clone();
            fe.private_ip_allocation_method = Some(AllocationMethod::Static);
            fe.zones = lb.zones.clone();
        }
        frontends.push(fe);
    }
    let pools = vec![BackendAddressPool {
        name: lb.backend_pool.clone(),
    }];
    let public_frontends: Vec<String> = lb
        .frontends
        .iter()
        .filter(|f| f.public_ip.is_some())
        .map(|f| f.name.clone())
        .collect();
    let mut probes = Vec::new();
    let mut rules = Vec::new();
    if api_server {
        probes.push(Probe {
            name: naming::API_SERVER_PROBE.to_owned(),
            protocol: ProbeProtocol::Https,
            port: model.api_server_port,
            request_path: Some(PROBE_PATH.to_owned()),
            interval_in_seconds: Some(PROBE_INTERVAL),
            number_of_probes: Some(PROBE_COUNT),
        });
        let rule = |name: String, frontend: &str| LoadBalancingRule {
            name,
            frontend_ip_configuration: frontend.to_owned(),
            backend_address_pool: lb.backend_pool.clone(),
            probe: Some(naming::API_SERVER_PROBE.to_owned()),
            protocol: TransportProtocol::Tcp,
            frontend_port: model.api_server_port,
            backend_port: model.api_server_port,
            idle_timeout_in_minutes: Some(lb.idle_timeout),
            enable_floating_ip: Some(false),
            // A public API server LB also carries the control plane's outbound rule, which
            // Azure only allows when the inbound rule does not SNAT itself.
            disable_outbound_snat: (!lb.internal).then_some(true),
            load_distribution: Some(LoadDistribution::Default),
        };
        if let Some(f) = public_frontends.first() {
            rules.push(rule(naming::API_SERVER_RULE.to_owned(), f));
        }
        if let Some(f) = lb.frontends.iter().find(|f| f.public_ip.is_none())
            && lb.internal
        {
            rules.push(rule(naming::API_SERVER_RULE.to_owned(), &f.name));
        }
    }
    let outbound_rules = if public_frontends.is_empty() {
        Vec::new()
    } else {
        vec![OutboundRule {
            name: naming::OUTBOUND_RULE.to_owned(),
            frontend_ip_configurations: public_frontends,
            backend_address_pool: lb.backend_pool.clone(),
            protocol: TransportProtocol::All,
            allocated_outbound_ports: None,
            idle_timeout_in_minutes: Some(lb.idle_timeout),
        }]
    };
    let tags = model.tags(role, &lb.name);
    out.resources.push(
        LoadBalancer {
            metadata: model.meta(&cr, false, Some(&tags)),
            spec: LoadBalancerSpec {
                azure_name: ClusterModel::azure_name(&cr, &lb.name),
                owner: rg_ref.clone(),
                location: model.location.clone(),
                tags,
                sku: LoadBalancerSku::Standard,
                frontend_ip_configurations: frontends,
                backend_address_pools: pools,
                probes,
                load_balancing_rules: rules,
                outbound_rules,
                extended_location: model.extended_location.clone(),
            },
            status: None,
        }
        .into(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        assert!(dns_label_ok("strata-ilb-7f3a"));
        assert!(!dns_label_ok("Strata"));
        assert!(!dns_label_ok("ab-"));
    }
}
