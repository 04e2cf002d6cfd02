//! strata-translator: pure functions from CAPI + CAPZ v1beta1 objects to the cloud CRs of
//! `azure.strata.dev` ([`cluster`], [`machine`], names in [`naming`]), the `render` command built
//! on them ([`render`]), and the controller that server-side applies them and reports their state
//! back to CAPI ([`controller`]). See docs/design.md "Translator contract" and
//! `translator/README.md`.

pub mod cluster;
pub mod controller;
pub mod coverage;
pub mod identity;
pub mod machine;
pub mod model;
pub mod naming;
pub mod render;
mod resource;
pub mod status;

pub use resource::{CloudResource, Reference};

use serde::Serialize;

/// Field manager of every server-side apply the translator makes.
pub const FIELD_MANAGER: &str = "strata-translator";
/// The translator's own finalizer on AzureClusters and AzureMachines.
pub const FINALIZER: &str = "azure.strata.dev/translator";

/// Annotations the translator reads or writes: the `strata.dev/` ones are `strata_crds`'s (one
/// list for both controllers, docs/design.md "Annotations"), and CAPI's two it honours.
pub mod annotations {
    pub use strata_crds::annotations::*;
    /// CAPI's pause annotation.
    pub const CAPI_PAUSED: &str = "cluster.x-k8s.io/paused";
    /// CAPI's "another controller manages this infrastructure cluster" annotation.
    pub const MANAGED_BY: &str = "cluster.x-k8s.io/managed-by";
}

/// The input's own error: which object, which field, what is wrong. Rendered on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {message}")]
pub struct InputError {
    /// `Kind namespace/name`.
    pub object: String,
    /// Kubernetes field path, e.g. `spec.networkSpec.subnets[1].cidrBlocks[0]`.
    pub field: String,
    pub message: String,
}

/// A field the input carries that Strata does not translate (yet), or lacks so that the
/// controller will refuse it (`spec.identityRef`): reported (a condition, an event, `render`'s
/// stderr), never silently dropped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Note {
    /// `Kind namespace/name`.
    pub object: String,
    /// Kubernetes field path.
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.object, self.field, self.message)
    }
}

/// What a translation produces: the desired CRs, sorted (dependency order, then name), and notes
/// about input it could not honour.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Translation {
    pub resources: Vec<CloudResource>,
    pub notes: Vec<Note>,
}

impl Translation {
    /// Sorts resources (by kind in dependency order, then name), drops exact duplicates (a NSG
    /// shared by two subnets is made once) and sorts notes.
    pub fn normalize(&mut self) {
        self.resources
            .sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        self.resources
            .dedup_by(|a, b| a.sort_key() == b.sort_key() && a == b);
        self.notes.sort();
        self.notes.dedup();
    }

    /// Appends another translation's resources and notes.
    pub fn extend(&mut self, other: Translation) {
        self.resources.extend(other.resources);
        self.notes.extend(other.notes);
    }
}

/// `Kind namespace/name` of an object, as errors and notes name it.
pub fn object_ref<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    let meta = obj.meta();
    format!(
        "{} {}/{}",
        K::kind(&()),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}
