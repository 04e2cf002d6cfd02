//! Every name the translator makes: the Azure names CAPZ v1beta1 gives a cluster's and a machine's
//! resources (so that a CAPZ-built cluster is found under the same names when it is migrated), and
//! the Kubernetes names of the cloud CRs that stand for them.
//!
//! Azure names are scoped to a resource group (or a VNet), CR names to a namespace, and several
//! clusters may share a namespace: [`cr_name`] keeps CR names unique per cluster.

/// Label CAPI puts on everything of a cluster; the translator puts it on every CR it makes.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label CAPI puts on control-plane Machines.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// Labels CAPI puts on Machines of a MachineDeployment / MachineSet.
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
pub const SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
/// CAPZ's tag naming the role of a resource.
pub const ROLE_TAG: &str = "sigs.k8s.io_cluster-api-provider-azure_role";
/// Value of CAPZ's cluster tag on resources the cluster owns.
pub const OWNED: &str = "owned";

/// CAPZ's tag marking resources a cluster owns.
pub fn owned_tag(cluster: &str) -> String {
    strata_crds::capz::cluster_owned_tag(cluster)
}

/// The VNet CAPZ makes: `<cluster>-vnet`.
pub fn vnet(cluster: &str) -> String {
    format!("{cluster}-vnet")
}

/// The control-plane subnet: `<cluster>-controlplane-subnet`.
pub fn control_plane_subnet(cluster: &str) -> String {
    format!("{cluster}-controlplane-subnet")
}

/// The node subnet CAPZ adds when a spec names none: `<cluster>-node-subnet`.
pub fn node_subnet(cluster: &str) -> String {
    format!("{cluster}-node-subnet")
}

/// The subnet of role `cluster`: `<cluster>-subnet`.
pub fn cluster_subnet(cluster: &str) -> String {
    format!("{cluster}-subnet")
}

/// `<cluster>-controlplane-nsg`.
pub fn control_plane_nsg(cluster: &str) -> String {
    format!("{cluster}-controlplane-nsg")
}

/// `<cluster>-node-nsg`.
pub fn node_nsg(cluster: &str) -> String {
    format!("{cluster}-node-nsg")
}

/// NSG of a `cluster`-role subnet: `<cluster>-nsg`.
pub fn cluster_nsg(cluster: &str) -> String {
    format!("{cluster}-nsg")
}

/// `<cluster>-node-routetable`.
pub fn node_route_table(cluster: &str) -> String {
    format!("{cluster}-node-routetable")
}

/// Route table of a `cluster`-role subnet: `<cluster>-routetable`.
pub fn cluster_route_table(cluster: &str) -> String {
    format!("{cluster}-routetable")
}

/// The node NAT gateway: `<cluster>-node-natgw`, with `-<n>` for the n-th node subnet a spec
/// lists (CAPZ numbers them from 1; only the subnet CAPZ adds itself has no number).
pub fn node_nat_gateway(cluster: &str, index: Option<usize>) -> String {
    with_index(format!("{cluster}-node-natgw"), index)
}

/// NAT gateway of a `cluster`-role subnet: `<cluster>-natgw`.
pub fn cluster_nat_gateway(cluster: &str) -> String {
    format!("{cluster}-natgw")
}

/// A NAT gateway's public IP: `pip-<natgateway>`.
pub fn nat_gateway_ip(nat_gateway: &str) -> String {
    format!("pip-{nat_gateway}")
}

/// The public API server load balancer: `<cluster>-public-lb`.
pub fn public_lb(cluster: &str) -> String {
    format!("{cluster}-public-lb")
}

/// The internal API server load balancer of a private cluster: `<cluster>-internal-lb`.
pub fn internal_lb(cluster: &str) -> String {
    format!("{cluster}-internal-lb")
}

/// The control plane's outbound load balancer: `<cluster>-outbound-lb`.
pub fn control_plane_outbound_lb(cluster: &str) -> String {
    format!("{cluster}-outbound-lb")
}

/// The nodes' outbound load balancer is named after the cluster itself.
pub fn node_outbound_lb(cluster: &str) -> String {
    cluster.to_owned()
}

/// The API server's public IP: `pip-<cluster>-apiserver`.
pub fn api_server_ip(cluster: &str) -> String {
    format!("pip-{cluster}-apiserver")
}

/// Public IP of the nodes' outbound LB: `pip-<cluster>-node-outbound[-<n>]`.
pub fn node_outbound_ip(cluster: &str, index: Option<usize>) -> String {
    with_index(format!("pip-{cluster}-node-outbound"), index)
}

/// Public IP of the control plane's outbound LB: `pip-<cluster>-controlplane-outbound[-<n>]`.
pub fn control_plane_outbound_ip(cluster: &str, index: Option<usize>) -> String {
    with_index(format!("pip-{cluster}-controlplane-outbound"), index)
}

/// A load balancer's frontend: `<lb>-frontEnd[-<n>]`.
pub fn frontend(lb: &str, index: Option<usize>) -> String {
    with_index(format!("{lb}-frontEnd"), index)
}

/// A load balancer's private frontend (API server ILB): `<lb>-frontEnd-internal-ip`.
pub fn private_frontend(lb: &str) -> String {
    format!("{lb}-frontEnd-internal-ip")
}

/// The API server LB's backend pool: `<lb>-backendPool`.
pub fn backend_pool(lb: &str) -> String {
    format!("{lb}-backendPool")
}

/// An outbound LB's backend pool: `<lb>-outboundBackendPool`.
pub fn outbound_backend_pool(lb: &str) -> String {
    format!("{lb}-outboundBackendPool")
}

/// A private cluster's DNS zone: `<cluster>.capz.io` (CAPZ `azure/defaults.go`
/// `GeneratePrivateDNSZoneName`).
/// The `LocationZones` CR of a cluster (the zones of its location, read from ARM).
pub fn location_zones(cluster: &str) -> String {
    format!("{cluster}-zones")
}

pub fn private_dns_zone(cluster: &str) -> String {
    format!("{cluster}.capz.io")
}

/// A private DNS zone's link to a VNet: `<vnet>-link` (`GenerateVNetLinkName`).
pub fn vnet_link(vnet: &str) -> String {
    format!("{vnet}-link")
}

/// The API server's name in the private DNS zone (`PrivateAPIServerHostname`).
pub const PRIVATE_API_SERVER_HOSTNAME: &str = "apiserver";

/// The Azure Bastion host: `<cluster>-azure-bastion` (`generateAzureBastionName`).
pub fn azure_bastion(cluster: &str) -> String {
    format!("{cluster}-azure-bastion")
}

/// The Azure Bastion host's public IP: `<cluster>-azure-bastion-pip`
/// (`generateAzureBastionPublicIPName`).
pub fn azure_bastion_ip(cluster: &str) -> String {
    format!("{cluster}-azure-bastion-pip")
}

/// A bastion host's IP configuration: `<bastion>-bastionIP` (`bastionhosts/spec.go`).
pub fn bastion_ip_config(bastion: &str) -> String {
    format!("{bastion}-bastionIP")
}

/// The API server LB's probe, rule and outbound rule, as CAPZ names them.
pub const API_SERVER_PROBE: &str = "HTTPSProbe";
pub const API_SERVER_RULE: &str = "LBRuleHTTPS";
pub const OUTBOUND_RULE: &str = "OutboundNATAllProtocols";

/// The internal companion of a public API server LB, and its pool: `<name>-internal`.
pub fn internal_companion(name: &str) -> String {
    format!("{name}-internal")
}

/// A machine's NIC: `<machine>-nic`, or `<machine>-nic-<n>` when it has several.
pub fn nic(machine: &str, index: Option<usize>) -> String {
    with_index(format!("{machine}-nic"), index)
}

/// Name of a NIC's primary IP configuration.
pub const PRIMARY_IP_CONFIG: &str = "pipConfig";
/// The IPv6 IP configuration of a NIC in a dual-stack or IPv6 cluster (CAPZ's name).
pub const IPV6_IP_CONFIG: &str = "ipConfigv6";

/// Name of a NIC's further IP configurations: `ipConfig-<n>`.
pub fn ip_config(index: usize) -> String {
    format!("ipConfig-{index}")
}

/// A machine's public IP: `pip-<machine>`.
pub fn machine_public_ip(machine: &str) -> String {
    format!("pip-{machine}")
}

/// An availability set: `<cluster>_<nodegroup>-as` (node group `control-plane`, or the
/// MachineDeployment / MachineSet name).
pub fn availability_set(cluster: &str, node_group: &str) -> String {
    format!("{cluster}_{node_group}-as")
}

/// The Secret holding a copy of a machine's bootstrap data, which its VM CR references.
pub fn custom_data_secret(machine: &str) -> String {
    format!("{machine}-customdata")
}

/// Key of the bootstrap data in CAPI's bootstrap Secret and in the copy.
pub const BOOTSTRAP_DATA_KEY: &str = "value";

/// The Secret into which translators before issue 22 copied the credentials of a cluster's
/// `identityRef` (`<cluster>-azure-credential`). The translator writes none any more (the CRs
/// name the identity); it only empties one it finds that is its own.
pub fn legacy_credential_secret(cluster: &str) -> String {
    format!("{cluster}-azure-credential")
}

fn with_index(name: String, index: Option<usize>) -> String {
    match index {
        Some(n) => format!("{name}-{n}"),
        None => name,
    }
}

/// The CR name standing for the Azure resource `azure_name` of `cluster`: the Azure name made a
/// valid Kubernetes name (lower case, `-` for what Kubernetes does not allow), prefixed with
/// `<cluster>-` unless it already holds the cluster name, so that two clusters in one namespace
/// with a subnet both called `node-subnet` get distinct CRs.
pub fn cr_name(cluster: &str, azure_name: &str) -> String {
    let name = sanitize(azure_name);
    if name.contains(&sanitize(cluster)) {
        name
    } else {
        sanitize(&format!("{cluster}-{name}"))
    }
}

/// The CR name of a subnet: its VNet's CR name and the subnet's name, since subnet names are
/// only unique within a VNet.
pub fn subnet_cr_name(cluster: &str, vnet: &str, subnet: &str) -> String {
    sanitize(&format!("{}-{}", cr_name(cluster, vnet), subnet))
}

/// A valid Kubernetes object name (RFC 1123 subdomain) close to `name`.
pub fn sanitize(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect();
    let trimmed = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let mut out = String::with_capacity(trimmed.len());
    for c in trimmed.chars() {
        // Collapse runs of separators so `a__b` does not become `a--b`.
        if (c == '-' || c == '.') && out.ends_with(['-', '.']) {
            continue;
        }
        out.push(c);
    }
    out.truncate(253);
    let out = out.trim_end_matches(['-', '.']).to_owned();
    if out.is_empty() { "x".to_owned() } else { out }
}

/// The ARM ID of a resource group.
pub fn resource_group_id(subscription: &str, resource_group: &str) -> String {
    format!("/subscriptions/{subscription}/resourceGroups/{resource_group}")
}

/// The ARM ID of a network resource (`type` such as `virtualNetworks`, `loadBalancers`).
pub fn network_id(subscription: &str, resource_group: &str, type_: &str, name: &str) -> String {
    format!(
        "{}/providers/Microsoft.Network/{type_}/{name}",
        resource_group_id(subscription, resource_group)
    )
}

/// CAPI's providerID for a VM: `azure://` + its ARM ID with the resource group in lower case, as
/// CAPZ writes it (the cloud provider lowercases it, and CAPI matches nodes by this string).
pub fn provider_id(vm_arm_id: &str) -> String {
    let mut parts: Vec<String> = vm_arm_id.split('/').map(str::to_owned).collect();
    if let Some(i) = parts
        .iter()
        .position(|p| p.eq_ignore_ascii_case("resourceGroups"))
        && let Some(rg) = parts.get_mut(i + 1)
    {
        *rg = rg.to_lowercase();
    }
    format!("azure://{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capz_default_names() {
        assert_eq!(vnet("c1"), "c1-vnet");
        assert_eq!(control_plane_nsg("c1"), "c1-controlplane-nsg");
        assert_eq!(node_route_table("c1"), "c1-node-routetable");
        assert_eq!(public_lb("c1"), "c1-public-lb");
        assert_eq!(api_server_ip("c1"), "pip-c1-apiserver");
        assert_eq!(nic("m1", None), "m1-nic");
        assert_eq!(node_nat_gateway("c1", Some(2)), "c1-node-natgw-2");
        assert_eq!(nat_gateway_ip("c1-node-natgw-1"), "pip-c1-node-natgw-1");
        assert_eq!(frontend("c1-public-lb", None), "c1-public-lb-frontEnd");
        assert_eq!(availability_set("c1", "md-0"), "c1_md-0-as");
    }

    #[test]
    fn cr_names_are_kubernetes_names_and_unique_per_cluster() {
        assert_eq!(cr_name("demo", "demo-vnet"), "demo-vnet");
        assert_eq!(cr_name("demo", "pip-demo-apiserver"), "pip-demo-apiserver");
        assert_eq!(cr_name("demo", "node-nsg"), "demo-node-nsg");
        assert_eq!(
            cr_name("demo", "demo_control-plane-as"),
            "demo-control-plane-as"
        );
        assert_eq!(cr_name("demo", "My_VNet."), "demo-my-vnet");
        assert_eq!(
            subnet_cr_name("demo", "demo-vnet", "node-subnet"),
            "demo-vnet-node-subnet"
        );
        assert_eq!(sanitize("__"), "x");
    }

    #[test]
    fn provider_id_lowercases_only_the_resource_group() {
        assert_eq!(
            provider_id(
                "/subscriptions/S/resourceGroups/My-RG/providers/Microsoft.Compute/virtualMachines/VM1"
            ),
            "azure:///subscriptions/S/resourceGroups/my-rg/providers/Microsoft.Compute/virtualMachines/VM1"
        );
    }
}
