//! Cluster level: Cluster + AzureCluster (+ the availability sets its machines need) → resource
//! group, VNet, subnets, NSGs with their rules, route tables, NAT gateways with their public IPs,
//! the API server load balancer with its public IP (or an internal one), the outbound load
//! balancers, a private cluster's DNS zone with its links and API server record, and the Azure
//! Bastion host with its public IP. Load balancers and public IPs are built in
//! `cluster/load_balancer.rs`, NSG rules in `cluster/security_rules.rs`.

use strata_crds::azure::*;
use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{self, AzureCluster, AzureMachine};
use strata_crds::common::{ResourceRef, Tags};

use crate::model::ClusterModel;
use crate::{InputError, Note, Translation, machine, naming};

mod load_balancer;
mod security_rules;

use load_balancer::{load_balancer, public_ip};
use security_rules::security_rules;

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
    let mut notes = Vec::new();
    let model = ClusterModel::new(cluster, azure_cluster, &mut notes)?;
    translate_with(&model, notes, machines)
}

/// [`translate`] from a model already built (`notes`: what building it noted), for a caller that
/// reads the model for more (the controller's status, `render`'s machines).
pub fn translate_with(
    model: &ClusterModel,
    notes: Vec<Note>,
    machines: &[(&Machine, &AzureMachine)],
) -> Result<Translation, InputError> {
    let mut out = Translation {
        notes,
        ..Translation::default()
    };
    if model.policy.managed_by {
        return Ok(out);
    }
    let rg_ref = ResourceRef::named(naming::cr_name(&model.name, &model.resource_group));
    resource_group(model, &mut out);
    let vnet_cr = virtual_network(model, &mut out, &rg_ref);
    security_groups(model, &mut out, &rg_ref)?;
    for subnet in &model.subnets {
        subnet_with_its_parts(model, &mut out, &rg_ref, &vnet_cr, subnet);
    }
    for (lb, role, api_server) in [
        (&model.api_server_lb, ROLE_API_SERVER, true),
        (&model.api_server_ilb, ROLE_API_SERVER, true),
        (&model.node_outbound_lb, ROLE_NODE_OUTBOUND, false),
        (
            &model.control_plane_outbound_lb,
            ROLE_CONTROL_PLANE_OUTBOUND,
            false,
        ),
    ] {
        if let Some(lb) = lb {
            load_balancer(model, &mut out, &rg_ref, lb, role, api_server)?;
        }
    }
    if let Some(b) = &model.bastion {
        bastion(model, &mut out, &rg_ref, b);
    }
    if let Some(dns) = &model.private_dns {
        private_dns(model, &mut out, &rg_ref, &vnet_cr, dns)?;
    }
    availability_sets(model, &mut out, &rg_ref, machines);
    crate::machine::check_names(&model.object, &out.resources)?;
    out.normalize();
    Ok(out)
}

/// The cluster's resource group.
fn resource_group(model: &ClusterModel, out: &mut Translation) {
    let cr = naming::cr_name(&model.name, &model.resource_group);
    let tags = model.tags(ROLE_COMMON, &model.resource_group);
    out.resources.push(
        ResourceGroup {
            metadata: model.meta(&cr, false, Some(&tags)),
            spec: ResourceGroupSpec {
                azure_name: ClusterModel::azure_name(&cr, &model.resource_group),
                location: model.location.clone(),
                tags,
            },
            status: None,
        }
        .into(),
    );
}

/// The VNet: the cluster's own, or an existing one in another resource group, observed through a
/// CR of that resource group. Returns the VNet CR's name.
fn virtual_network(model: &ClusterModel, out: &mut Translation, rg_ref: &ResourceRef) -> String {
    let vnet_cr = naming::cr_name(&model.name, &model.vnet_name);
    let owner = if model.vnet_existing {
        let cr = naming::cr_name(&model.name, &model.vnet_resource_group);
        if rg_ref.name.as_deref() != Some(cr.as_str()) {
            out.resources.push(
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
    let tags = if model.vnet_existing {
        model.vnet_tags.clone()
    } else {
        let mut t = model.vnet_tags.clone();
        t.extend(model.tags(ROLE_COMMON, &model.vnet_name));
        t
    };
    out.resources.push(
        VirtualNetwork {
            metadata: model.meta(&vnet_cr, model.vnet_existing, Some(&tags)),
            spec: VirtualNetworkSpec {
                azure_name: ClusterModel::azure_name(&vnet_cr, &model.vnet_name),
                owner,
                location: model.location.clone(),
                tags,
                address_prefixes: model.vnet_cidrs.clone(),
                dns_servers: Vec::new(),
                extended_location: model.extended_location.clone(),
            },
            status: None,
        }
        .into(),
    );
    vnet_cr
}

/// The NSGs, shared by the subnets that name them.
fn security_groups(
    model: &ClusterModel,
    out: &mut Translation,
    rg_ref: &ResourceRef,
) -> Result<(), InputError> {
    for (name, (rules, extra_tags, field)) in &model.security_groups {
        let cr = naming::cr_name(&model.name, name);
        let mut tags = extra_tags.clone();
        tags.extend(model.tags(ROLE_COMMON, name));
        let mut metadata = model.meta(&cr, false, Some(&tags));
        model.mark_use_existing(&mut metadata);
        out.resources.push(
            NetworkSecurityGroup {
                metadata,
                spec: NetworkSecurityGroupSpec {
                    azure_name: ClusterModel::azure_name(&cr, name),
                    owner: rg_ref.clone(),
                    location: model.location.clone(),
                    tags,
                    security_rules: security_rules(model, rules, field)?,
                },
                status: None,
            }
            .into(),
        );
    }
    Ok(())
}

/// A subnet, and the route table and NAT gateway (with its public IP) it names.
fn subnet_with_its_parts(
    model: &ClusterModel,
    out: &mut Translation,
    rg_ref: &ResourceRef,
    vnet_cr: &str,
    subnet: &crate::model::SubnetModel,
) {
    let mut spec = SubnetSpec {
        azure_name: ClusterModel::azure_name(&subnet.cr_name, &subnet.name),
        owner: ResourceRef::named(vnet_cr),
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
        out.resources.push(
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
        let ip_cr = public_ip(model, out, rg_ref, ip, None, false);
        spec.nat_gateway = Some(ResourceRef::named(&cr));
        let tags = model.tags(ROLE_COMMON, nat);
        out.resources.push(
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
    out.resources.push(
        Subnet {
            metadata: subnet_meta(model, subnet),
            spec,
            status: None,
        }
        .into(),
    );
}

/// The availability sets of the machines placed without a zone.
fn availability_sets(
    model: &ClusterModel,
    out: &mut Translation,
    rg_ref: &ResourceRef,
    machines: &[(&Machine, &AzureMachine)],
) {
    for (m, azm) in machines {
        let Some(name) = machine::availability_set_name(model, m, azm) else {
            continue;
        };
        let cr = naming::cr_name(&model.name, &name);
        let tags = model.tags(ROLE_COMMON, &name);
        out.resources.push(
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
