//! A machine's network: its public IP (nodes only, as in CAPZ) and its NICs, each in its subnet
//! with the load balancer pools CAPZ puts it in.

use strata_crds::azure::*;
use strata_crds::capz;
use strata_crds::common::ResourceRef;

use super::Input;
use crate::model::ClusterModel;
use crate::{CloudResource, InputError, naming};

/// Azure's limit of private IP addresses (IP configurations) per network interface.
const MAX_IP_CONFIGS: usize = 256;

/// The machine's public IP CR, when it gets one.
pub(super) fn public_ip(
    i: &Input,
    resources: &mut Vec<CloudResource>,
    note: &mut impl FnMut(&str, &str),
) -> Option<ResourceRef> {
    let (model, spec, control_plane) = (i.model, i.spec, i.control_plane);
    let (vm_name, rg) = (&i.vm_name, &i.rg);
    let tags = |name: &str| i.tags(name);
    // Public IP: CAPZ gives one to nodes only.
    if control_plane && spec.allocate_public_ip == Some(true) {
        note(
            "spec.allocatePublicIP",
            "ignored for control-plane machines (as in CAPZ): they are reached through the API server load balancer",
        );
    }
    if !control_plane && spec.allocate_public_ip == Some(true) {
        // CAPZ names it after the machine's Azure name (a Windows VM's shortened one).
        let name = naming::machine_public_ip(&i.azure_vm_name);
        let cr = naming::sanitize(&naming::machine_public_ip(vm_name));
        let t = tags(&name);
        resources.push(
            PublicIPAddress {
                metadata: model.meta(&cr, false, Some(&t)),
                spec: PublicIPAddressSpec {
                    azure_name: ClusterModel::azure_name(&cr, &name),
                    owner: rg.clone(),
                    location: model.location.clone(),
                    tags: t,
                    sku: PublicIPSku::Standard,
                    allocation_method: AllocationMethod::Static,
                    ip_version: IPVersion::IPv4,
                    dns_label: None,
                    idle_timeout_in_minutes: None,
                    zones: Vec::new(),
                    extended_location: model.extended_location.clone(),
                },
                status: None,
            }
            .into(),
        );
        Some(ResourceRef::named(cr))
    } else {
        None
    }
}

/// The machine's NICs: one per `networkInterfaces` entry, or one in the role's subnet; the first
/// carries the public IP and the load balancer pools.
pub(super) fn network_interfaces(
    i: &Input,
    public_ip: Option<ResourceRef>,
    resources: &mut Vec<CloudResource>,
    note: &mut impl FnMut(&str, &str),
) -> Result<Vec<ResourceRef>, InputError> {
    let (model, spec, control_plane, role) = (i.model, i.spec, i.control_plane, i.role);
    let (vm_name, azure_vm_name, rg) = (&i.vm_name, &i.azure_vm_name, &i.rg);
    let err = |field: &str, message: String| i.err(field, message);
    let tags = |name: &str| i.tags(name);
    let nic_specs: Vec<(String, capz::NetworkInterface)> = if spec.network_interfaces.is_empty() {
        vec![(
            "spec.subnetName".to_owned(),
            capz::NetworkInterface {
                subnet_name: spec.subnet_name.clone(),
                private_ip_configs: None,
                accelerated_networking: spec.accelerated_networking,
            },
        )]
    } else {
        if spec.subnet_name.is_some() {
            note(
                "spec.subnetName",
                "ignored: networkInterfaces names the subnets (as in CAPZ)",
            );
        }
        spec.network_interfaces
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("spec.networkInterfaces[{i}].subnetName"), n.clone()))
            .collect()
    };
    for (i, d) in spec.dns_servers.iter().enumerate() {
        if d.parse::<std::net::IpAddr>().is_err() {
            return Err(err(
                &format!("spec.dnsServers[{i}]"),
                format!("{d:?} is not an IP address"),
            ));
        }
    }
    let dns_servers = &spec.dns_servers;
    let many = nic_specs.len() > 1;
    let mut nic_refs = Vec::new();
    for (i, (field, nic)) in nic_specs.iter().enumerate() {
        let subnet = match &nic.subnet_name {
            Some(name) => model
                .subnets
                .iter()
                .find(|s| &s.name == name)
                .ok_or_else(|| err(field, format!("the AzureCluster has no subnet {name:?}")))?,
            None => model
                .default_subnet(control_plane)
                .ok_or_else(|| err(field, format!("the AzureCluster has no {role} subnet")))?,
        };
        let subnet_ref = if model.policy.managed_by {
            ResourceRef::arm(format!(
                "{}/subnets/{}",
                naming::network_id(
                    model.subscription()?,
                    &model.vnet_resource_group,
                    "virtualNetworks",
                    &model.vnet_name
                ),
                subnet.name
            ))
        } else {
            ResourceRef::named(&subnet.cr_name)
        };
        // The CR is named after the machine; in Azure the NIC carries the VM's Azure name (a
        // Windows VM's shortened one), as CAPZ's `GenerateNICName(MachineScope.Name())`.
        let name = naming::nic(azure_vm_name, many.then_some(i));
        let cr = naming::sanitize(&naming::nic(vm_name, many.then_some(i)));
        let mut pools = Vec::new();
        if i == 0 {
            // As CAPZ: the control plane joins the API server LB(s) and, in a private cluster,
            // the control plane's outbound LB; a node joins the node outbound LB only when its
            // subnet has no NAT gateway and it has no public IP of its own.
            let lbs = if control_plane {
                let outbound = if model.api_server_lb.as_ref().is_some_and(|l| l.internal) {
                    &model.control_plane_outbound_lb
                } else {
                    &None
                };
                vec![&model.api_server_lb, &model.api_server_ilb, outbound]
            } else if subnet.nat_gateway.is_none() && public_ip.is_none() {
                vec![&model.node_outbound_lb]
            } else {
                Vec::new()
            };
            for lb in lbs.into_iter().flatten() {
                if lb.frontends.is_empty() {
                    continue;
                }
                let load_balancer = if model.policy.managed_by {
                    ResourceRef::arm(naming::network_id(
                        model.subscription()?,
                        &model.resource_group,
                        "loadBalancers",
                        &lb.name,
                    ))
                } else {
                    ResourceRef::named(naming::cr_name(&model.name, &lb.name))
                };
                pools.push(BackendPoolRef {
                    load_balancer,
                    pool: lb.backend_pool.clone(),
                });
            }
        }
        let mut configs = vec![IPConfiguration {
            name: naming::PRIMARY_IP_CONFIG.to_owned(),
            subnet: subnet_ref.clone(),
            primary: Some(true),
            private_ip_allocation_method: Some(AllocationMethod::Dynamic),
            private_ip_address: None,
            private_ip_address_version: None,
            public_ip_address: if i == 0 { public_ip.clone() } else { None },
            load_balancer_backend_address_pools: pools,
        }];
        for j in 1..nic.private_ip_configs.unwrap_or(1).max(1) as usize {
            configs.push(IPConfiguration {
                name: naming::ip_config(j),
                subnet: subnet_ref.clone(),
                primary: Some(false),
                private_ip_allocation_method: Some(AllocationMethod::Dynamic),
                ..Default::default()
            });
        }
        // A dual-stack NIC gets an IPv6 configuration too, after the IPv4 ones
        // (azure/services/networkinterfaces/spec.go).
        if model.ipv6 {
            configs.push(IPConfiguration {
                name: naming::IPV6_IP_CONFIG.to_owned(),
                subnet: subnet_ref.clone(),
                primary: Some(false),
                private_ip_address_version: Some(IPVersion::IPv6),
                ..Default::default()
            });
        }
        if configs.len() > MAX_IP_CONFIGS {
            return Err(err(
                &field.replace("subnetName", "privateIPConfigs"),
                format!("at most {MAX_IP_CONFIGS} IP configurations per NIC (Azure's limit)"),
            ));
        }
        let t = tags(&name);
        resources.push(
            NetworkInterface {
                metadata: model.meta(&cr, false, Some(&t)),
                spec: NetworkInterfaceSpec {
                    azure_name: ClusterModel::azure_name(&cr, &name),
                    owner: rg.clone(),
                    location: model.location.clone(),
                    tags: t,
                    ip_configurations: configs,
                    network_security_group: None,
                    enable_accelerated_networking: nic
                        .accelerated_networking
                        .or(spec.accelerated_networking),
                    enable_ip_forwarding: spec.enable_ip_forwarding,
                    extended_location: model.extended_location.clone(),
                    // CAPZ gives the DNS servers to the primary NIC only (MachineScope.BuildNICSpec).
                    dns_servers: if i == 0 {
                        dns_servers.clone()
                    } else {
                        Vec::new()
                    },
                },
                status: None,
            }
            .into(),
        );
        nic_refs.push(ResourceRef::named(cr));
    }

    Ok(nic_refs)
}
