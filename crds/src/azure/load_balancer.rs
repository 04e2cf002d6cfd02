use crate::common::{AzureStatus, ExtendedLocation, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AllocationMethod, naming};

/// An Azure load balancer: the API server's (public or internal) and the outbound ones. Rules
/// refer to frontends, pools and probes of the same load balancer by name; the schema checks
/// those names exist.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "LoadBalancer",
    doc = "An Azure load balancer (Microsoft.Network/loadBalancers).",
    namespaced,
    status = "AzureStatus",
    shortname = "lb",
    category = "azure"
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("extendedLocation"),
    validation = rules::immutable("sku"),
    validation = kube::core::Rule::new("!has(self.loadBalancingRules) || self.loadBalancingRules.all(r, self.frontendIPConfigurations.exists(f, f.name == r.frontendIPConfiguration) && has(self.backendAddressPools) && self.backendAddressPools.exists(p, p.name == r.backendAddressPool) && (!has(r.probe) || (has(self.probes) && self.probes.exists(p, p.name == r.probe))))")
        .message("every load balancing rule must name a frontendIPConfiguration, a backendAddressPool and (if set) a probe of this load balancer")
        .field_path(".loadBalancingRules"),
    validation = kube::core::Rule::new("!has(self.outboundRules) || self.outboundRules.all(r, r.frontendIPConfigurations.all(n, self.frontendIPConfigurations.exists(f, f.name == n)) && has(self.backendAddressPools) && self.backendAddressPools.exists(p, p.name == r.backendAddressPool))")
        .message("every outbound rule must name frontendIPConfigurations and a backendAddressPool of this load balancer")
        .field_path(".outboundRules")
)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub azure_name: Option<String>,
    /// The resource group: a `ResourceGroup` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// Azure location. Immutable.
    #[schemars(length(max = 40), pattern(naming::LOCATION))]
    pub location: String,
    /// Azure tags (at most 50; names up to 512 characters, values up to 256: Azure's limits).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    #[schemars(schema_with = "crate::common::tags_schema")]
    pub tags: Tags,
    /// Edge zone of the resource (ARM `extendedLocation`; CAPZ's edgezone flavour). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_location: Option<ExtendedLocation>,
    /// SKU; CAPZ uses Standard. Immutable.
    #[serde(default)]
    pub sku: LoadBalancerSku,
    /// Frontends: each has either a public IP (public LB) or a subnet (internal LB).
    #[serde(rename = "frontendIPConfigurations")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub frontend_ip_configurations: Vec<FrontendIPConfiguration>,
    /// Backend pools, filled by NICs that name them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub backend_address_pools: Vec<BackendAddressPool>,
    /// Health probes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub probes: Vec<Probe>,
    /// Inbound load balancing rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub load_balancing_rules: Vec<LoadBalancingRule>,
    /// Outbound (SNAT) rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub outbound_rules: Vec<OutboundRule>,
}

/// Load balancer SKU.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum LoadBalancerSku {
    Basic,
    #[default]
    Standard,
}

/// A frontend IP configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.publicIPAddress) != has(self.subnet)")
    .message("a frontend needs exactly one of publicIPAddress (public) or subnet (internal)"))]
pub struct FrontendIPConfiguration {
    /// Name, unique in the load balancer.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Public IP of a public frontend.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "publicIPAddress"
    )]
    pub public_ip_address: Option<ResourceRef>,
    /// Subnet of an internal frontend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<ResourceRef>,
    /// Private IP of an internal frontend (Static allocation).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "privateIPAddress"
    )]
    #[schemars(length(max = 45))]
    #[x_kube(validation = rules::ip())]
    pub private_ip_address: Option<String>,
    /// Allocation of the internal frontend's private IP.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "privateIPAllocationMethod"
    )]
    pub private_ip_allocation_method: Option<AllocationMethod>,
    /// Availability zones of an internal frontend (zone-redundant with all three); a public
    /// frontend takes its public IP's. Immutable in Azure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3), inner(length(max = 1), pattern(r"^[1-3]$")))]
    pub zones: Vec<String>,
}

/// A backend pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BackendAddressPool {
    /// Name, unique in the load balancer.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
}

/// A health probe.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("self.protocol == 'Tcp' || has(self.requestPath)")
    .message("Http and Https probes need a requestPath"))]
pub struct Probe {
    /// Name, unique in the load balancer.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Tcp, Http or Https.
    pub protocol: ProbeProtocol,
    /// Port probed, 1–65535.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Path for Http/Https probes, e.g. `/readyz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^/.*$"), length(max = 1024))]
    pub request_path: Option<String>,
    /// Seconds between probes, 5–2147483646.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5))]
    pub interval_in_seconds: Option<i32>,
    /// Failed probes before an endpoint is taken out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub number_of_probes: Option<i32>,
}

/// Probe protocol.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ProbeProtocol {
    #[default]
    Tcp,
    Http,
    Https,
}

/// Transport protocol of a rule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum TransportProtocol {
    #[default]
    Tcp,
    Udp,
    All,
}

/// An inbound load balancing rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancingRule {
    /// Name, unique in the load balancer.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Name of the frontend in `frontendIPConfigurations`.
    #[serde(rename = "frontendIPConfiguration")]
    #[schemars(length(min = 1, max = 80))]
    pub frontend_ip_configuration: String,
    /// Name of the pool in `backendAddressPools`.
    #[schemars(length(min = 1, max = 80))]
    pub backend_address_pool: String,
    /// Name of the probe in `probes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80))]
    pub probe: Option<String>,
    /// Transport protocol.
    pub protocol: TransportProtocol,
    /// Frontend port, 0–65534 (0 with protocol All).
    #[schemars(range(min = 0, max = 65534))]
    pub frontend_port: i32,
    /// Backend port, 0–65535.
    #[schemars(range(min = 0, max = 65535))]
    pub backend_port: i32,
    /// Idle timeout, 4–30 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 4, max = 30))]
    pub idle_timeout_in_minutes: Option<i32>,
    /// Floating IP (direct server return).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "enableFloatingIP"
    )]
    pub enable_floating_ip: Option<bool>,
    /// Do not use this rule's frontend for outbound SNAT (needed when an outbound rule exists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_outbound_snat: Option<bool>,
    /// Distribution: Default (5-tuple), SourceIP or SourceIPProtocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_distribution: Option<LoadDistribution>,
}

/// Load distribution mode.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum LoadDistribution {
    #[default]
    Default,
    SourceIP,
    SourceIPProtocol,
}

/// An outbound (SNAT) rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutboundRule {
    /// Name, unique in the load balancer.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Names of frontends in `frontendIPConfigurations`.
    #[serde(rename = "frontendIPConfigurations")]
    #[schemars(length(min = 1, max = 16), inner(length(max = 80)))]
    pub frontend_ip_configurations: Vec<String>,
    /// Name of the pool in `backendAddressPools`.
    #[schemars(length(min = 1, max = 80))]
    pub backend_address_pool: String,
    /// Transport protocol.
    pub protocol: TransportProtocol,
    /// SNAT ports per backend instance, a multiple of 8 up to 64000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 64000))]
    pub allocated_outbound_ports: Option<i32>,
    /// Idle timeout, 4–120 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 4, max = 120))]
    pub idle_timeout_in_minutes: Option<i32>,
}

impl CloudObject for LoadBalancer {
    const KIND: CloudKind = CloudKind::LoadBalancer;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "loadBalancers";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: plain);

    fn references(&self) -> Vec<Reference<'_>> {
        let mut refs = References::default();
        for (i, f) in self.spec.frontend_ip_configurations.iter().enumerate() {
            refs.add(
                CloudKind::PublicIPAddress,
                f.public_ip_address.as_ref(),
                || format!("spec.frontendIPConfigurations[{i}].publicIPAddress"),
            );
            refs.add(CloudKind::Subnet, f.subnet.as_ref(), || {
                format!("spec.frontendIPConfigurations[{i}].subnet")
            });
        }
        refs.done()
    }
}
