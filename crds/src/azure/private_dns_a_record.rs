use crate::common::{AzureStatus, ResourceRef};
use crate::kinds::{CloudKind, CloudObject, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::naming;

/// An A record set of a `PrivateDnsZone`: a relative name (`apiserver`, or `@` for the zone's
/// apex) and its IPv4 addresses. CAPZ writes one for a private cluster's API server, TTL 300,
/// pointing at the internal load balancer's frontend (`azure/services/privatedns/record_spec.go`).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "PrivateDnsARecord",
    doc = "An A record set of an Azure private DNS zone (Microsoft.Network/privateDnsZones/A).",
    namespaced,
    status = "PrivateDnsARecordStatus",
    shortname = "pdnsa",
    category = "azure",
    printcolumn = r#"{"name":"FQDN","type":"string","jsonPath":".status.fqdn"}"#
)]
#[x_kube(validation = rules::immutable("azureName"), validation = rules::immutable("owner"))]
#[serde(rename_all = "camelCase")]
pub struct PrivateDnsARecordSpec {
    /// The record set's name relative to the zone (`apiserver`, `@` for the apex); defaults to
    /// metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(naming::DNS_RELATIVE_NAME))]
    pub azure_name: Option<String>,
    /// The zone: a `PrivateDnsZone` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// Time to live of the records, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2_147_483_647))]
    pub ttl: Option<i64>,
    /// The IPv4 addresses (ARM `aRecords[].ipv4Address`).
    #[schemars(length(min = 1, max = 20), inner(length(max = 15)))]
    #[x_kube(validation = kube::core::Rule::new("self.all(a, isIP(a) && !a.contains(':'))").message("every entry must be an IPv4 address such as 10.0.0.100"))]
    pub ipv4_addresses: Vec<String>,
}

/// Observed state of an A record set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrivateDnsARecordStatus {
    #[serde(flatten)]
    pub resource: AzureStatus,
    /// The record set's fully qualified name, e.g. `apiserver.my-cluster.capz.io.`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub fqdn: Option<String>,
}

impl CloudObject for PrivateDnsARecord {
    const KIND: CloudKind = CloudKind::PrivateDnsARecord;
    const OWNER: Option<CloudKind> = Some(CloudKind::PrivateDnsZone);
    const CARRIES_TAGS: bool = false;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "A";
    const API_VERSION: &'static str = "2024-06-01";
    common_accessors!(status: flattened, tags: none);
}
