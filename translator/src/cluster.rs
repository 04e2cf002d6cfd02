//! Cluster level: Cluster + AzureCluster (+ the availability sets its machines need) → resource
//! group, VNet, subnets, NSGs with their rules, route tables, NAT gateways with their public IPs,
//! the API server load balancer with its public IP (or an internal one), the outbound load
//! balancers, a private cluster's DNS zone with its links and API server record, and the Azure
//! Bastion host with its public IP.

use std::collections::BTreeMap;

use strata_crds::azure::{self, *};
use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{self, AzureCluster, AzureMachine};
use strata_crds::common::{ResourceRef, Tags};

use crate::model::{ClusterModel, LoadBalancerModel};
use crate::{CloudResource, InputError, Translation, machine, naming};

/// CAPZ's role tags.
const ROLE_COMMON: &str = "common";
const ROLE_API_SERVER: &str = "apiserver";
const ROLE_NODE_OUTBOUND: &str = "nodeOutboundLB";
const ROLE_CONTROL_PLANE_OUTBOUND: &str = "controlPlaneOutboundLB";
const ROLE_BASTION: &str = "Bastion";

/// The TTL of the API server's record (`azure/services/privatedns/record_spec.go`).
const API_SERVER_RECORD_TTL: i64 = 300;

/// The API server probe CAPZ makes: HTTPS `/readyz` every 15 s, 4 failures.
const PROBE_PATH: &str = "/readyz";
const PROBE_INTERVAL: i32 = 15;
const PROBE_COUNT: i32 = 4;

/// The desired cluster-level CRs of `cluster` + `azure_cluster`, with availability sets for the
/// given machines that have no zone. Empty when the AzureCluster is managed by someone else.
pub fn translate(
    cluster: &Cluster,
    azure_cluster: &AzureCluster,
    machines: &[(&Machine, &AzureMachine)],
) -> Result<Translation, InputError> {
    let mut out = Translation::default();
    let model = ClusterModel::new(cluster, azure_cluster, &mut out.notes)?;
    if model.policy.managed_by {
        return Ok(out);
    }
    let rg_cr = naming::cr_name(&model.name, &model.resource_group);
    let rg_ref = ResourceRef::named(&rg_cr);
    let push = |out: &mut Translation, r: CloudResource| out.resources.push(r);

    // Resource group.
    let tags = model.tags(ROLE_COMMON, &model.resource_group);
    push(
        &mut out,
        ResourceGroup {
            metadata: model.meta(&rg_cr, false, Some(&tags)),
            spec: ResourceGroupSpec {
                azure_name: ClusterModel::azure_name(&rg_cr, &model.resource_group),
                location: model.location.clone(),
                tags,
            },
            status: None,
        }
        .into(),
    );

    // VNet: the cluster's own, or an existing one in another resource group, observed through a
    // CR of that resource group.
    let vnet_cr = naming::cr_name(&model.name, &model.vnet_name);
    let vnet_owner = if model.vnet_existing {
        let cr = naming::cr_name(&model.name, &model.vnet_resource_group);
        if cr != rg_cr {
            push(
                &mut out,
                ResourceGroup {
                    metadata: model.meta(&cr, true, None),
                    spec: ResourceGroupSpec {
                        azure_name: ClusterModel::azure_name(&cr, &model.vnet_resource_group),
                        location: model.location.clone(),
                        tags: Tags::new(),
                    },
                    status: None,
                }
                .into(),
            );
        }
        ResourceRef::named(cr)
    } else {
        rg_ref.clone()
    };
    let vnet_tags = if model.vnet_existing {
        model.vnet_tags.clone()
    } else {
        let mut t = model.vnet_tags.clone();
        t.extend(model.tags(ROLE_COMMON, &model.vnet_name));
        t
    };
    push(
        &mut out,
        VirtualNetwork {
            metadata: model.meta(&vnet_cr, model.vnet_existing, Some(&vnet_tags)),
            spec: VirtualNetworkSpec {
                azure_name: ClusterModel::azure_name(&vnet_cr, &model.vnet_name),
                owner: vnet_owner,
                location: model.location.clone(),
                tags: vnet_tags,
                address_prefixes: model.vnet_cidrs.clone(),
                dns_servers: Vec::new(),
                extended_location: model.extended_location.clone(),
            },
            status: None,
        }
        .into(),
    );

    // NSGs, shared by the subnets that name them.
    for (name, (rules, extra_tags, field)) in &model.security_groups {
        let cr = naming::cr_name(&model.name, name);
        let mut tags = extra_tags.clone();
        tags.extend(model.tags(ROLE_COMMON, name));
        let mut metadata = model.meta(&cr, false, Some(&tags));
        model.mark_use_existing(&mut metadata);
        push(
            &mut out,
            NetworkSecurityGroup {
                metadata,
                spec: NetworkSecurityGroupSpec {
                    azure_name: ClusterModel::azure_name(&cr, name),
                    owner: rg_ref.clone(),
                    location: model.location.clone(),
                    tags,
                    security_rules: security_rules(&model, rules, field)?,
                },
                status: None,
            }
            .into(),
        );
    }

    for subnet in &model.subnets {
        let mut spec = SubnetSpec {
            azure_name: ClusterModel::azure_name(&subnet.cr_name, &subnet.name),
            owner: ResourceRef::named(&vnet_cr),
            address_prefix: subnet.cidrs.first().cloned().unwrap_or_default(),
            additional_address_prefixes: subnet.cidrs.iter().skip(1).cloned().collect(),
            network_security_group: subnet
                .security_group
                .as_ref()
                .map(|n| ResourceRef::named(naming::cr_name(&model.name, n))),
            route_table: None,
            nat_gateway: None,
            service_endpoints: subnet.service_endpoints.clone(),
            private_endpoint_network_policies: None,
        };
        if let Some(rt) = &subnet.route_table {
            let cr = naming::cr_name(&model.name, rt);
            spec.route_table = Some(ResourceRef::named(&cr));
            let tags = model.tags(ROLE_COMMON, rt);
            let mut metadata = model.meta(&cr, false, Some(&tags));
            model.mark_use_existing(&mut metadata);
            push(
                &mut out,
                RouteTable {
                    metadata,
                    spec: RouteTableSpec {
                        azure_name: ClusterModel::azure_name(&cr, rt),
                        owner: rg_ref.clone(),
                        location: model.location.clone(),
                        tags,
                        routes: Vec::new(),
                        disable_bgp_route_propagation: None,
                    },
                    status: None,
                }
                .into(),
            );
        }
        if let Some((nat, ip)) = &subnet.nat_gateway {
            let cr = naming::cr_name(&model.name, nat);
            // CAPZ gives NAT gateway IPs no extended location (azure/scope/cluster.go
            // PublicIPSpecs).
            let ip_cr = public_ip(&model, &mut out, &rg_ref, ip, None, false);
            spec.nat_gateway = Some(ResourceRef::named(&cr));
            let tags = model.tags(ROLE_COMMON, nat);
            push(
                &mut out,
                NatGateway {
                    metadata: model.meta(&cr, false, Some(&tags)),
                    spec: NatGatewaySpec {
                        azure_name: ClusterModel::azure_name(&cr, nat),
                        owner: rg_ref.clone(),
                        location: model.location.clone(),
                        tags,
                        idle_timeout_in_minutes: None,
                        public_ip_addresses: vec![ResourceRef::named(ip_cr)],
                        zones: Vec::new(),
                    },
                    status: None,
                }
                .into(),
            );
        }
        push(
            &mut out,
            Subnet {
                metadata: subnet_meta(&model, subnet),
                spec,
                status: None,
            }
            .into(),
        );
    }

    // Load balancers.
    if let Some(lb) = &model.api_server_lb {
        load_balancer(&model, &mut out, &rg_ref, lb, ROLE_API_SERVER, true)?;
    }
    if let Some(lb) = &model.api_server_ilb {
        load_balancer(&model, &mut out, &rg_ref, lb, ROLE_API_SERVER, true)?;
    }
    if let Some(lb) = &model.node_outbound_lb {
        load_balancer(&model, &mut out, &rg_ref, lb, ROLE_NODE_OUTBOUND, false)?;
    }
    if let Some(lb) = &model.control_plane_outbound_lb {
        load_balancer(
            &model,
            &mut out,
            &rg_ref,
            lb,
            ROLE_CONTROL_PLANE_OUTBOUND,
            false,
        )?;
    }

    if let Some(b) = &model.bastion {
        bastion(&model, &mut out, &rg_ref, b);
    }
    if let Some(dns) = &model.private_dns {
        private_dns(&model, &mut out, &rg_ref, &vnet_cr, dns)?;
    }

    // Availability sets of the machines placed without a zone.
    for (m, azm) in machines {
        if let Some(name) = machine::availability_set_name(&model, m, azm) {
            let cr = naming::cr_name(&model.name, &name);
            let tags = model.tags(ROLE_COMMON, &name);
            push(
                &mut out,
                AvailabilitySet {
                    metadata: model.meta(&cr, false, Some(&tags)),
                    spec: AvailabilitySetSpec {
                        azure_name: ClusterModel::azure_name(&cr, &name),
                        owner: rg_ref.clone(),
                        location: model.location.clone(),
                        tags,
                        platform_fault_domain_count: 2,
                        platform_update_domain_count: 5,
                        sku: AvailabilitySetSku::Aligned,
                    },
                    status: None,
                }
                .into(),
            );
        }
    }

    crate::machine::check_names(&model.object, &out.resources)?;
    out.normalize();
    Ok(out)
}

/// A subnet's metadata. Subnets have no tags in Azure, so in a migration they are adopted when
/// their VNet is (the VNet carries CAPZ's ownership tag); in a bring-your-own VNet they are used
/// as they are when they exist ([`ClusterModel::mark_use_existing`]).
fn subnet_meta(
    model: &ClusterModel,
    subnet: &crate::model::SubnetModel,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    let mut meta = model.meta(&subnet.cr_name, subnet.existing, None);
    if model.policy.adopt && !model.policy.observe && !subnet.existing && !model.vnet_existing {
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(crate::annotations::ADOPT.to_owned(), "true".to_owned());
    }
    model.mark_use_existing(&mut meta);
    meta
}

/// A Standard, static public IP CR; returns its CR name.
fn public_ip(
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

fn load_balancer(
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

/// The Azure Bastion host with its public IP (its subnet is one of the model's subnets), as
/// `azure/services/bastionhosts/spec.go` builds it: tags with role `Bastion`, one IP
/// configuration `<bastion>-bastionIP` with a dynamic private IP.
fn bastion(
    model: &ClusterModel,
    out: &mut Translation,
    rg_ref: &ResourceRef,
    b: &crate::model::BastionModel,
) {
    let (ip, dns) = &b.public_ip;
    // Not in an edge zone: CAPZ's bastion spec carries no extended location.
    let ip_cr = public_ip(model, out, rg_ref, ip, dns.as_deref(), false);
    let cr = naming::cr_name(&model.name, &b.name);
    let tags = model.tags(ROLE_BASTION, &b.name);
    out.resources.push(
        BastionHost {
            metadata: model.meta(&cr, false, Some(&tags)),
            spec: BastionHostSpec {
                azure_name: ClusterModel::azure_name(&cr, &b.name),
                owner: rg_ref.clone(),
                location: model.location.clone(),
                tags,
                sku: match b.sku {
                    capz::BastionHostSku::Basic => BastionSku::Basic,
                    capz::BastionHostSku::Standard => BastionSku::Standard,
                },
                ip_configurations: vec![BastionIPConfiguration {
                    name: naming::bastion_ip_config(&b.name),
                    subnet: ResourceRef::named(&b.subnet_cr),
                    public_ip_address: ResourceRef::named(ip_cr),
                    private_ip_allocation_method: Some(AllocationMethod::Dynamic),
                }],
                enable_tunneling: Some(b.enable_tunneling),
                scale_units: None,
            },
            status: None,
        }
        .into(),
    );
}

/// A private cluster's DNS zone, its VNet links and the API server's A record
/// (`azure/scope/cluster.go` `PrivateDNSSpec`). The zone and links carry CAPZ's ownership tag and
/// the additional tags, without role or name (`zone_spec.go`, `link_spec.go`); a zone in another
/// resource group is placed there through an observed CR of that group, which CAPZ expects to
/// exist.
fn private_dns(
    model: &ClusterModel,
    out: &mut Translation,
    rg_ref: &ResourceRef,
    vnet_cr: &str,
    dns: &crate::model::PrivateDnsModel,
) -> Result<(), InputError> {
    let mut tags = model.additional_tags.clone();
    tags.insert(naming::owned_tag(&model.name), naming::OWNED.to_owned());
    let zone_owner = if dns.resource_group == model.resource_group {
        rg_ref.clone()
    } else {
        let cr = naming::cr_name(&model.name, &dns.resource_group);
        if !out.resources.iter().any(|r| r.name() == cr) {
            out.resources.push(
                ResourceGroup {
                    metadata: model.meta(&cr, true, None),
                    spec: ResourceGroupSpec {
                        azure_name: ClusterModel::azure_name(&cr, &dns.resource_group),
                        location: model.location.clone(),
                        tags: Tags::new(),
                    },
                    status: None,
                }
                .into(),
            );
        }
        ResourceRef::named(cr)
    };
    let zone_cr = naming::cr_name(&model.name, &dns.zone);
    out.resources.push(
        PrivateDnsZone {
            metadata: model.meta(&zone_cr, false, Some(&tags)),
            spec: PrivateDnsZoneSpec {
                azure_name: ClusterModel::azure_name(&zone_cr, &dns.zone),
                owner: zone_owner,
                tags: tags.clone(),
            },
            status: None,
        }
        .into(),
    );
    for (i, link) in dns.links.iter().enumerate() {
        let virtual_network = match &link.peered {
            None => ResourceRef::named(vnet_cr),
            Some((rg, vnet)) => {
                let subscription = model.subscription_id.as_deref().ok_or_else(|| InputError {
                    object: model.object.clone(),
                    field: "spec.subscriptionID".to_owned(),
                    message: format!(
                        "required to link the private DNS zone to the peered VNet {vnet}                          (spec.networkSpec.vnet.peerings[{}])",
                        i - 1
                    ),
                })?;
                ResourceRef::arm(naming::network_id(
                    subscription,
                    rg,
                    "virtualNetworks",
                    vnet,
                ))
            }
        };
        let cr = naming::cr_name(&model.name, &link.name);
        out.resources.push(
            PrivateDnsZoneVirtualNetworkLink {
                metadata: model.meta(&cr, false, Some(&tags)),
                spec: PrivateDnsZoneVirtualNetworkLinkSpec {
                    azure_name: ClusterModel::azure_name(&cr, &link.name),
                    owner: ResourceRef::named(&zone_cr),
                    tags: tags.clone(),
                    virtual_network,
                    registration_enabled: Some(false),
                },
                status: None,
            }
            .into(),
        );
    }
    let (host, ip) = &dns.record;
    let cr = naming::cr_name(&model.name, host);
    out.resources.push(
        PrivateDnsARecord {
            metadata: model.meta(&cr, false, None),
            spec: PrivateDnsARecordSpec {
                azure_name: ClusterModel::azure_name(&cr, host),
                owner: ResourceRef::named(&zone_cr),
                ttl: Some(API_SERVER_RECORD_TTL),
                ipv4_addresses: vec![ip.clone()],
            },
            status: None,
        }
        .into(),
    );
    Ok(())
}

/// CAPZ's security rules as ARM's: defaults filled, priorities checked unique per direction and
/// missing ones given the lowest free number.
fn security_rules(
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

    #[test]
    fn dns_labels() {
        assert!(dns_label_ok("strata-ilb-7f3a"));
        assert!(!dns_label_ok("Strata"));
        assert!(!dns_label_ok("ab-"));
    }
}
