//! CAPI v1beta1 types the translator reads (`cluster.x-k8s.io`, plus the kubeadm control-plane and
//! bootstrap types the sample clusters use). In production CAPI installs these CRDs; Strata ships
//! them for tests and the demo. Fields the CAPI contracts name are typed; the rest of a spec stays
//! opaque ([`FreeForm`](crate::common::FreeForm)) and is kept by the API server as it is.

mod cluster;
mod kubeadm;
mod machine;
mod machine_deployment;
mod machine_pool;

pub use cluster::*;
pub use kubeadm::*;
pub use machine::*;
pub use machine_deployment::*;
pub use machine_pool::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the CAPI core types.
pub const GROUP: &str = "cluster.x-k8s.io";

/// A CAPI v1beta1 condition (not `metav1.Condition`: it has a severity and no observedGeneration).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 256))]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[schemars(pattern(r"^(True|False|Unknown)$"))]
    pub status: String,
    /// `Error`, `Warning` or `Info` when status is False.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// Last time the status changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// An address of a machine (`Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS`, `InternalDNS`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineAddress {
    /// Address type.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}

/// Host and port of an API server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ApiEndpoint {
    /// Host name or IP.
    pub host: String,
    /// Port.
    pub port: i32,
}

/// Labels and annotations stamped onto objects created from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ObjectMetaTemplate {
    /// Labels.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}
