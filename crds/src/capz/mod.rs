//! CAPZ v1beta1 infrastructure types (`infrastructure.cluster.x-k8s.io`), with CAPZ's field names
//! and meaning so that CAPZ cluster templates (default, private, internal API server LB, custom
//! VNet) apply unchanged. The translator reads their specs and writes their status.

mod azure_cluster;
mod azure_cluster_identity;
mod azure_machine;
mod azure_machine_pool;

pub use azure_cluster::*;
pub use azure_cluster_identity::*;
pub use azure_machine::*;
pub use azure_machine_pool::*;

/// API group of the CAPZ types.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// CAPZ's tag marking resources a cluster owns: `sigs.k8s.io_cluster-api-provider-azure_cluster_<cluster>`.
pub fn cluster_owned_tag(cluster: &str) -> String {
    format!("sigs.k8s.io_cluster-api-provider-azure_cluster_{cluster}")
}
