//! Azure Bastion as CAPZ defaults it (`api/v1beta1/azurecluster_default.go`
//! `setBastionDefaults`, `azure/scope/cluster.go` `AzureBastionSpec`, `SubnetSpecs`,
//! `azure/services/bastionhosts/spec.go`): the host `<cluster>-azure-bastion`, its subnet
//! `AzureBastionSubnet` (10.255.255.224/27, role `bastion`, no NSG or route table unless named)
//! and its public IP `<cluster>-azure-bastion-pip`, Basic SKU, tunneling off.

use strata_crds::capz::{self, BastionHostSku, SubnetRole};
use strata_crds::common::Tags;

use super::{SecurityGroups, SubnetModel};
use crate::naming;

/// CAPZ's bastion subnet name and CIDR.
pub const DEFAULT_BASTION_SUBNET: &str = "AzureBastionSubnet";
pub const DEFAULT_BASTION_SUBNET_CIDR: &str = "10.255.255.224/27";

/// An Azure Bastion host, defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct BastionModel {
    pub name: String,
    pub sku: BastionHostSku,
    pub enable_tunneling: bool,
    /// Public IP (Azure name, DNS label).
    pub public_ip: (String, Option<String>),
    /// The subnet's CR name (the subnet itself is in the model's subnets).
    pub subnet_cr: String,
}

/// The bastion host of `bastion`, with its subnet (and the NSG the subnet names) added to
/// `subnets` and `security_groups`.
pub(super) fn bastion(
    bastion: &capz::AzureBastion,
    name: &str,
    vnet_name: &str,
    subnets: &mut Vec<SubnetModel>,
    security_groups: &mut SecurityGroups,
    note: &mut impl FnMut(&str, &str),
) -> BastionModel {
    const FIELD: &str = "spec.bastionSpec.azureBastion.subnet";
    let spec = bastion.subnet.clone().unwrap_or_default();
    let subnet_name = if spec.name.is_empty() {
        DEFAULT_BASTION_SUBNET.to_owned()
    } else {
        spec.name.clone()
    };
    if spec.cidr_blocks.len() > 1 {
        note(
            &format!("{FIELD}.cidrBlocks"),
            "only the first CIDR block of a subnet is translated",
        );
    }
    if spec.nat_gateway.is_some() {
        note(
            &format!("{FIELD}.natGateway"),
            "CAPZ gives a bastion subnet no NAT gateway; not translated",
        );
    }
    if !spec.private_endpoints.is_empty() {
        note(
            &format!("{FIELD}.privateEndpoints"),
            "private endpoints are not translated yet",
        );
    }
    let security_group = spec.security_group.as_ref().and_then(|g| g.name.clone());
    if let (Some(sg), Some(g)) = (&security_group, &spec.security_group) {
        let entry = security_groups
            .entry(sg.clone())
            .or_insert_with(|| (Vec::new(), Tags::new(), format!("{FIELD}.securityGroup")));
        for r in &g.security_rules {
            if !entry.0.iter().any(|e| e.name == r.name) {
                entry.0.push(r.clone());
            }
        }
        entry.1.extend(g.tags.clone());
    }
    let subnet = SubnetModel {
        cr_name: naming::subnet_cr_name(name, vnet_name, &subnet_name),
        name: subnet_name,
        role: SubnetRole::Bastion,
        cidrs: if spec.cidr_blocks.is_empty() {
            vec![DEFAULT_BASTION_SUBNET_CIDR.to_owned()]
        } else {
            spec.cidr_blocks.clone()
        },
        security_group,
        route_table: spec.route_table.as_ref().and_then(|r| r.name.clone()),
        nat_gateway: None,
        service_endpoints: spec
            .service_endpoints
            .iter()
            .map(|e| e.service.clone())
            .collect(),
        existing: spec.id.is_some(),
    };
    let subnet_cr = subnet.cr_name.clone();
    subnets.push(subnet);
    let public_ip = match &bastion.public_ip {
        Some(p) => {
            if !p.ip_tags.is_empty() {
                note(
                    "spec.bastionSpec.azureBastion.publicIP.ipTags",
                    "IP tags are not translated yet",
                );
            }
            (
                p.name.clone(),
                p.dns_name
                    .as_deref()
                    .map(|d| d.split('.').next().unwrap_or_default().to_lowercase()),
            )
        }
        None => (naming::azure_bastion_ip(name), None),
    };
    BastionModel {
        name: bastion
            .name
            .clone()
            .unwrap_or_else(|| naming::azure_bastion(name)),
        sku: bastion.sku.unwrap_or_default(),
        enable_tunneling: bastion.enable_tunneling.unwrap_or(false),
        public_ip,
        subnet_cr,
    }
}
