//! `LocationZones`: the availability zones of an Azure location per VM size, as ARM's Resource
//! SKUs list gives them. Not a cloud kind (nothing is created in Azure, there is no ARM ID to
//! PUT or DELETE): the translator asks for it, strata-operator — the only component that talks
//! to ARM — fills its status, and the translator turns that into the AzureCluster's failure
//! domains as CAPZ does (`azure/services/resourceskus` `GetZones`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::naming;
use crate::rules;

/// The location whose zones are wanted.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "LocationZones",
    plural = "locationzones",
    doc = "The availability zones of an Azure location per VM size (ARM's Resource SKUs list), read by strata-operator with the credential the strata.dev/identity annotation names.",
    namespaced,
    status = "LocationZonesStatus",
    shortname = "lz",
    category = "azure",
    printcolumn = r#"{"name":"Location","type":"string","jsonPath":".spec.location"}"#,
    printcolumn = r#"{"name":"Zones","type":"string","jsonPath":".status.zones"}"#
)]
#[x_kube(validation = rules::immutable("location"))]
#[serde(rename_all = "camelCase")]
pub struct LocationZonesSpec {
    /// Azure location, e.g. `westeurope`. Immutable.
    #[schemars(length(max = 40), pattern(naming::LOCATION))]
    pub location: String,
}

/// `status.sizes`, bounded as every field of a Strata CR is: a location lists some hundreds of
/// VM sizes, each in at most three zones.
fn sizes_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 4096,
        "additionalProperties": {
            "type": "array",
            "maxItems": 8,
            "items": {"type": "string", "maxLength": 8},
        },
        "x-kubernetes-validations": [{
            "rule": "self.all(k, size(k) <= 128)",
            "message": "VM size names are at most 128 characters",
        }],
    })
}

/// What ARM says of the location, written by strata-operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocationZonesStatus {
    /// The zones into which some VM size may deploy (CAPZ's failure domains), sorted; empty for a
    /// location without zones.
    #[serde(default)]
    #[schemars(length(max = 16), inner(length(max = 8)))]
    pub zones: Vec<String>,
    /// Each VM size's zones, restricted zones left out; a size of a location without zones maps
    /// to an empty list.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "sizes_schema")]
    pub sizes: BTreeMap<String, Vec<String>>,
    /// The `metadata.generation` the status describes (kstatus style).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When ARM was last asked (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub observed_at: Option<String>,
    /// `Ready`: True once ARM answered, False with the reason it did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
