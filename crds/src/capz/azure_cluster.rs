use crate::capi::{ApiEndpoint, Condition, FailureDomainSpec};
use crate::common::{ExtendedLocation, FreeForm, ObjectReference, Tags};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::azure::naming;

/// CAPZ's Azure cluster infrastructure: resource group, network, API server load balancer.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "AzureCluster",
    doc = "CAPZ v1beta1 AzureCluster: the Azure infrastructure of a Cluster API cluster, translated by strata-translator.",
    namespaced,
    status = "AzureClusterStatus",
    shortname = "azc",
    category = "cluster-api",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].reason"}"#,
    printcolumn = r#"{"name":"Resource Group","type":"string","jsonPath":".spec.resourceGroup","priority":1}"#,
    printcolumn = r#"{"name":"Location","type":"string","jsonPath":".spec.location","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = rules::immutable("resourceGroup"), validation = rules::immutable("location"), validation = rules::immutable("subscriptionID"))]
#[serde(rename_all = "camelCase")]
pub struct AzureClusterSpec {
    /// Resource group of the cluster's resources (CAPZ default: the cluster name). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 90), pattern(naming::RESOURCE_GROUP))]
    pub resource_group: Option<String>,
    /// Subscription; defaults to the credentials' subscription. Immutable.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "subscriptionID"
    )]
    pub subscription_id: Option<String>,
    /// Azure location. Immutable.
    #[schemars(length(min = 1))]
    pub location: String,
    /// The `AzureClusterIdentity` to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<ObjectReference>,
    /// Network layout.
    #[serde(default)]
    pub network_spec: NetworkSpec,
    /// Set by the provider once the API server's address is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// Extra tags for every resource of the cluster.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub additional_tags: Tags,
    /// Azure cloud, e.g. `AzurePublicCloud`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_environment: Option<String>,
    /// Bastion hosts of the cluster's network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bastion_spec: Option<BastionSpec>,
    /// Cloud-provider config overrides (not used by Strata; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_provider_config_overrides: Option<FreeForm>,
    /// Edge zone of the cluster (Azure public MEC): CAPZ puts it on the VNet, the public IPs, the
    /// load balancers, the NICs and the VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_location: Option<ExtendedLocation>,
    /// Failure domains the control plane may use (CAPZ reads them with the location's zones).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_domains: BTreeMap<String, FailureDomainSpec>,
    /// Whether the cluster has control-plane machines (CAPZ default true; it only changes how CAPZ
    /// reports readiness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_enabled: Option<bool>,
}

/// The cluster's network.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// The virtual network (CAPZ default `<cluster>-vnet`, 10.0.0.0/8).
    #[serde(default)]
    pub vnet: VnetSpec,
    /// Subnets (CAPZ default: control-plane 10.0.0.0/16 and node 10.1.0.0/16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rules::unique_names())]
    pub subnets: Vec<SubnetSpec>,
    /// The API server load balancer (CAPZ default: Public, `<cluster>-public-lb`).
    #[serde(
        default,
        rename = "apiServerLB",
        skip_serializing_if = "Option::is_none"
    )]
    pub api_server_lb: Option<LoadBalancerSpec>,
    /// Outbound load balancer of the nodes.
    #[serde(
        default,
        rename = "nodeOutboundLB",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_outbound_lb: Option<LoadBalancerSpec>,
    /// Outbound load balancer of the control plane (private clusters).
    #[serde(
        default,
        rename = "controlPlaneOutboundLB",
        skip_serializing_if = "Option::is_none"
    )]
    pub control_plane_outbound_lb: Option<LoadBalancerSpec>,
    /// Private DNS zone of a private cluster (`apiServerLB.type: Internal`); CAPZ's default:
    /// `<cluster>.capz.io`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "privateDNSZoneName"
    )]
    #[schemars(length(min = 3, max = 253), pattern(naming::DNS_ZONE))]
    pub private_dns_zone_name: Option<String>,
    /// Resource group of the private DNS zone; defaults to the cluster's.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "privateDNSZoneResourceGroup"
    )]
    #[schemars(length(min = 1, max = 90), pattern(naming::RESOURCE_GROUP))]
    pub private_dns_zone_resource_group: Option<String>,
    /// Whether CAPZ makes the private DNS zone of a private cluster (`System`, the default) or
    /// leaves the API server's name to DNS of the user's own (`None`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "privateDNSZone"
    )]
    pub private_dns_zone: Option<PrivateDnsZoneMode>,
    /// Extra ports of the API server load balancer, each a rule with the same frontend and
    /// backend port (not translated by Strata yet; kept).
    #[serde(
        default,
        rename = "additionalAPIServerLBPorts",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub additional_api_server_lb_ports: Vec<FreeForm>,
}

/// Who provides a private cluster's DNS zone.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PrivateDnsZoneMode {
    /// CAPZ (here: Strata) creates the zone, its links and the API server record.
    System,
    /// No zone is created.
    None,
}

/// Bastion hosts of the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BastionSpec {
    /// An Azure Bastion host in the cluster's VNet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_bastion: Option<AzureBastion>,
}

/// An Azure Bastion host (CAPZ defaults: `<cluster>-azure-bastion`, subnet `AzureBastionSubnet`
/// 10.255.255.224/27, public IP `<cluster>-azure-bastion-pip`, Basic SKU).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("!has(self.enableTunneling) || !self.enableTunneling || (has(self.sku) && self.sku == 'Standard')")
    .message("enableTunneling needs sku Standard")
    .field_path(".enableTunneling"))]
pub struct AzureBastion {
    /// Name of the bastion host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: Option<String>,
    /// Its subnet (Azure requires the name `AzureBastionSubnet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<SubnetSpec>,
    /// Its public IP.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "publicIP")]
    pub public_ip: Option<PublicIPSpec>,
    /// SKU: Basic (the default) or Standard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<BastionHostSku>,
    /// Native client support; Standard SKU only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_tunneling: Option<bool>,
}

/// SKU of a bastion host.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BastionHostSku {
    #[default]
    Basic,
    Standard,
}

/// The virtual network.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct VnetSpec {
    /// Resource group of a pre-existing VNet (custom VNet); defaults to the cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 90), pattern(naming::RESOURCE_GROUP))]
    pub resource_group: Option<String>,
    /// ARM ID (set by the provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// VNet name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 64), pattern(naming::VIRTUAL_NETWORK))]
    pub name: Option<String>,
    /// Address space.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 43)))]
    #[x_kube(validation = rules::cidrs())]
    pub cidr_blocks: Vec<String>,
    /// Tags of the VNet.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
    /// VNet peerings (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peerings: Vec<FreeForm>,
}

/// A subnet and its role.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSpec {
    /// control-plane, node, bastion or cluster.
    pub role: SubnetRole,
    /// ARM ID (set by the provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Subnet name.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Address ranges (CAPZ uses the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(length(max = 43)))]
    #[x_kube(validation = rules::cidrs())]
    pub cidr_blocks: Vec<String>,
    /// The subnet's network security group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group: Option<SecurityGroup>,
    /// The subnet's route table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_table: Option<NamedResource>,
    /// The subnet's NAT gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat_gateway: Option<NatGatewaySpec>,
    /// Service endpoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_endpoints: Vec<ServiceEndpoint>,
    /// Private endpoints (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_endpoints: Vec<FreeForm>,
}

/// Subnet roles.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum SubnetRole {
    #[serde(rename = "control-plane")]
    ControlPlane,
    #[default]
    #[serde(rename = "node")]
    Node,
    #[serde(rename = "bastion")]
    Bastion,
    #[serde(rename = "cluster")]
    Cluster,
}

/// A resource known by name (and, once it exists, ID).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NamedResource {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name; empty means CAPZ's default name for the role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: Option<String>,
}

/// A network security group with its rules.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroup {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name; empty means CAPZ's default name for the role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: Option<String>,
    /// Rules beyond CAPZ's defaults; names are unique.
    ///
    /// Uniqueness is a list-map keyed by `name` rather than the CEL `unique_names()` rule: the
    /// quadratic rule inside a list of up to 32 subnets is estimated at 4.9× kube-apiserver's
    /// per-rule budget, so the CRD would not install. The list-map costs nothing and names the
    /// duplicate entry (`…securityRules[1]: Duplicate value`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 200))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub security_rules: Vec<SecurityRule>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
}

/// A CAPZ security rule (CAPZ's names: `sourcePorts`, `action` …).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityRule {
    /// Rule name.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 140))]
    pub description: Option<String>,
    /// Tcp, Udp, Icmp or `*`.
    pub protocol: SecurityProtocol,
    /// Inbound or Outbound.
    pub direction: SecurityRuleDirection,
    /// 100–4096.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 4096))]
    pub priority: Option<i32>,
    /// Source ports, e.g. `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ports: Option<String>,
    /// Destination ports, e.g. `22`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_ports: Option<String>,
    /// Source prefix or tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Source prefixes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Destination prefix or tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Allow or Deny (default Allow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<SecurityRuleAction>,
}

/// CAPZ security rule protocols.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum SecurityProtocol {
    #[serde(rename = "*")]
    All,
    #[default]
    Tcp,
    Udp,
    Icmp,
}

/// Direction of a CAPZ security rule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum SecurityRuleDirection {
    #[default]
    Inbound,
    Outbound,
}

/// Action of a CAPZ security rule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum SecurityRuleAction {
    #[default]
    Allow,
    Deny,
}

/// A NAT gateway of a subnet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatGatewaySpec {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Its public IP (CAPZ default `pip-<natgateway>`). CAPZ's field is `ip`; `natGatewayIP`
    /// (what earlier Strata versions called it) is still read.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "ip",
        alias = "natGatewayIP"
    )]
    pub nat_gateway_ip: Option<PublicIPSpec>,
    /// Zones of the NAT gateway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
}

/// A service endpoint of a subnet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ServiceEndpoint {
    /// e.g. `Microsoft.Storage`.
    pub service: String,
    /// Locations, e.g. `*`.
    #[serde(default)]
    pub locations: Vec<String>,
}

/// A load balancer of the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerSpec {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: Option<String>,
    /// Public or Internal.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<LoadBalancerType>,
    /// Standard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    /// Frontend IPs (at most 100, as `frontendIPsCount`). The bound keeps the `privateIP` rule
    /// within kube-apiserver's CEL cost budget: unbounded, it is estimated at 2× the limit.
    #[serde(default, rename = "frontendIPs", skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub frontend_ips: Vec<FrontendIP>,
    /// Number of frontend IPs of an outbound LB.
    #[serde(
        default,
        rename = "frontendIPsCount",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 100))]
    pub frontend_ips_count: Option<i32>,
    /// Backend pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_pool: Option<BackendPool>,
    /// Idle timeout, 4–30 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 4, max = 30))]
    pub idle_timeout_in_minutes: Option<i32>,
    /// Availability zones of the load balancer's frontends (zone redundancy); an internal load
    /// balancer's frontends carry them, a public one's come from its public IPs. Immutable in
    /// Azure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3), inner(pattern(r"^[1-3]$")))]
    pub availability_zones: Vec<String>,
}

/// Public or Internal load balancer.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum LoadBalancerType {
    #[default]
    Public,
    Internal,
}

/// A backend pool name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BackendPool {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A frontend IP of a load balancer: public (with `publicIP`) or private (with `privateIP`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct FrontendIP {
    /// Name.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Public IP of a public frontend.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "publicIP")]
    pub public_ip: Option<PublicIPSpec>,
    /// Private IP of an internal frontend.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "privateIP")]
    #[schemars(length(max = 45))]
    #[x_kube(validation = rules::ip())]
    pub private_ip: Option<String>,
}

/// A public IP.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicIPSpec {
    /// Name.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// DNS name (FQDN) for the IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_name: Option<String>,
    /// IP tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_tags: Vec<IpTag>,
}

/// An IP tag.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct IpTag {
    /// Tag type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Tag value.
    pub tag: String,
}

/// Observed state of an AzureCluster (CAPI infrastructure-cluster contract).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureClusterStatus {
    /// Whether the infrastructure is ready (CAPI contract).
    #[serde(default)]
    pub ready: bool,
    /// Failure domains (availability zones) machines may use.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_domains: BTreeMap<String, FailureDomainSpec>,
    /// Conditions, `Ready` among them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The cloud CRs the translator made for the cluster, each with its readiness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceReadiness>,
}

/// A cloud CR owned by an AzureCluster or AzureMachine and whether it is Ready.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceReadiness {
    /// Kind, e.g. `VirtualNetwork`.
    pub kind: String,
    /// CR name in the same namespace.
    pub name: String,
    /// Its `Ready` condition is True.
    pub ready: bool,
}
