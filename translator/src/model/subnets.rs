//! The cluster's subnets as CAPZ defaults them: a control-plane and a node subnet when the spec
//! has none, CIDRs, and each role's NSG (with CAPZ's control-plane rules), route table and NAT
//! gateway.

use std::collections::BTreeMap;

use strata_crds::capz::{self, SubnetRole};
use strata_crds::common::Tags;

use super::{DEFAULT_CLUSTER_SUBNET_CIDR, DEFAULT_CONTROL_PLANE_CIDR, SecurityGroups, SubnetModel};
use crate::naming;

/// The subnets, and the NSGs they use (by Azure name, rules merged across the subnets sharing
/// one).
pub(super) fn subnets(
    net: &capz::NetworkSpec,
    name: &str,
    vnet_name: &str,
    api_server_port: i32,
    note: &mut impl FnMut(&str, &str),
) -> (Vec<SubnetModel>, SecurityGroups) {
    // Subnets: CAPZ adds a control-plane subnet and a node subnet when the spec has none (a
    // `cluster` subnet stands for both).
    let mut specs: Vec<(Option<usize>, capz::SubnetSpec)> = net
        .subnets
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, s)| (Some(i), s))
        .collect();
    let has = |role| net.subnets.iter().any(|s| s.role == role);
    let has_cluster = has(SubnetRole::Cluster);
    if !has(SubnetRole::ControlPlane) && !has_cluster {
        specs.push((
            None,
            capz::SubnetSpec {
                role: SubnetRole::ControlPlane,
                name: naming::control_plane_subnet(name),
                ..Default::default()
            },
        ));
    }
    let no_node_subnet = !has(SubnetRole::Node) && !has_cluster;
    if no_node_subnet {
        specs.push((
            None,
            capz::SubnetSpec {
                role: SubnetRole::Node,
                name: naming::node_subnet(name),
                ..Default::default()
            },
        ));
    }
    let mut subnets = Vec::new();
    let mut security_groups: SecurityGroups = BTreeMap::new();
    let mut node_index = 0;
    for (i, s) in &specs {
        let field = match i {
            Some(i) => format!("spec.networkSpec.subnets[{i}]"),
            None => "spec.networkSpec.subnets".to_owned(),
        };
        let index = if s.role == SubnetRole::Node {
            node_index += 1;
            Some(node_index)
        } else {
            None
        };
        let default_cidr = match s.role {
            SubnetRole::ControlPlane => DEFAULT_CONTROL_PLANE_CIDR.to_owned(),
            SubnetRole::Cluster => DEFAULT_CLUSTER_SUBNET_CIDR.to_owned(),
            SubnetRole::Node => format!("10.{}.0.0/16", index.unwrap_or(1)),
            SubnetRole::Bastion => "10.255.255.224/27".to_owned(),
        };
        let cidrs = if s.cidr_blocks.is_empty() {
            vec![default_cidr]
        } else {
            s.cidr_blocks.clone()
        };
        let ipv6 = s.cidr_blocks.iter().any(|c| c.contains(':'));
        let sg_name = s.security_group.as_ref().and_then(|g| g.name.clone());
        let security_group = match s.role {
            SubnetRole::ControlPlane => {
                Some(sg_name.unwrap_or_else(|| naming::control_plane_nsg(name)))
            }
            SubnetRole::Node => Some(sg_name.unwrap_or_else(|| naming::node_nsg(name))),
            SubnetRole::Cluster => Some(sg_name.unwrap_or_else(|| naming::cluster_nsg(name))),
            SubnetRole::Bastion => sg_name,
        };
        if let Some(sg) = &security_group {
            let given = s
                .security_group
                .as_ref()
                .map(|g| g.security_rules.clone())
                .unwrap_or_default();
            // CAPZ's control-plane NSG allows SSH and the API server unless the spec lists
            // rules of its own.
            let rules = if given.is_empty() && s.role == SubnetRole::ControlPlane {
                default_control_plane_rules(api_server_port)
            } else {
                given
            };
            let tags = s
                .security_group
                .as_ref()
                .map(|g| g.tags.clone())
                .unwrap_or_default();
            let entry = security_groups
                .entry(sg.clone())
                .or_insert_with(|| (Vec::new(), Tags::new(), format!("{field}.securityGroup")));
            for r in rules {
                if !entry.0.iter().any(|e| e.name == r.name) {
                    entry.0.push(r);
                }
            }
            entry.1.extend(tags);
        }
        let rt_name = s.route_table.as_ref().and_then(|r| r.name.clone());
        let route_table = match s.role {
            SubnetRole::Node => Some(rt_name.unwrap_or_else(|| naming::node_route_table(name))),
            SubnetRole::Cluster => {
                Some(rt_name.unwrap_or_else(|| naming::cluster_route_table(name)))
            }
            _ => rt_name,
        };
        let given_nat = s.nat_gateway.as_ref();
        let nat_name = match (s.role, given_nat) {
            (_, Some(n)) => Some(n.name.clone()),
            // CAPZ gives IPv4 node subnets that do not exist yet a NAT gateway for egress.
            (SubnetRole::Node, None) if !ipv6 && s.id.is_none() => Some(naming::node_nat_gateway(
                name,
                if no_node_subnet { None } else { index },
            )),
            (SubnetRole::Cluster, None) if !ipv6 && s.id.is_none() => {
                Some(naming::cluster_nat_gateway(name))
            }
            _ => None,
        };
        let nat_gateway = nat_name.map(|n| {
            let ip = given_nat
                .and_then(|g| g.nat_gateway_ip.as_ref())
                .map(|p| p.name.clone())
                .unwrap_or_else(|| naming::nat_gateway_ip(&n));
            (n, ip)
        });
        if let Some(g) = given_nat {
            if !g.zones.is_empty() {
                note(
                    &format!("{field}.natGateway.zones"),
                    "NAT gateway zones are not translated yet: the NAT gateway is regional",
                );
            }
            let ip = g.nat_gateway_ip.as_ref();
            if ip.is_some_and(|p| p.dns_name.is_some()) {
                note(
                    &format!("{field}.natGateway.ip.dnsName"),
                    "not translated yet: the NAT gateway's IP gets no DNS name",
                );
            }
            if ip.is_some_and(|p| !p.ip_tags.is_empty()) {
                note(
                    &format!("{field}.natGateway.ip.ipTags"),
                    "IP tags are not translated yet",
                );
            }
        }
        if !s.private_endpoints.is_empty() {
            note(
                &format!("{field}.privateEndpoints"),
                "private endpoints are not translated yet",
            );
        }
        let service_endpoints = s
            .service_endpoints
            .iter()
            .enumerate()
            .map(|(j, e)| {
                if !e.locations.is_empty() && e.locations != ["*"] {
                    note(
                        &format!("{field}.serviceEndpoints[{j}].locations"),
                        "service endpoint locations other than * are not translated yet",
                    );
                }
                e.service.clone()
            })
            .collect();
        subnets.push(SubnetModel {
            cr_name: naming::subnet_cr_name(name, vnet_name, &s.name),
            name: s.name.clone(),
            role: s.role,
            cidrs,
            security_group,
            route_table,
            nat_gateway,
            service_endpoints,
            existing: s.id.is_some(),
        });
    }

    (subnets, security_groups)
}

/// CAPZ's default control-plane rules (before v1.9 its webhook added them; its templates since
/// carry the same two).
fn default_control_plane_rules(api_server_port: i32) -> Vec<capz::SecurityRule> {
    let rule = |name: &str, description: &str, priority: i32, port: String| capz::SecurityRule {
        name: name.to_owned(),
        description: Some(description.to_owned()),
        protocol: capz::SecurityProtocol::Tcp,
        direction: capz::SecurityRuleDirection::Inbound,
        priority: Some(priority),
        source_ports: Some("*".to_owned()),
        destination_ports: Some(port),
        source: Some("*".to_owned()),
        sources: Vec::new(),
        destination: Some("*".to_owned()),
        action: Some(capz::SecurityRuleAction::Allow),
    };
    vec![
        rule("allow_ssh", "Allow SSH", 2200, "22".to_owned()),
        rule(
            "allow_apiserver",
            "Allow K8s API Server",
            2201,
            api_server_port.to_string(),
        ),
    ]
}
