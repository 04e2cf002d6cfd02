//! `ResourceGroup` → `Microsoft.Resources/resourceGroups`.

use serde_json::{Value, json};
use strata_crds::azure::ResourceGroup;
use strata_crds::common::{AzureStatus, ResourceRef};

use super::{AzureResource, Resolved};
use crate::kind::Kind;

impl AzureResource for ResourceGroup {
    const KIND: Kind = Kind::ResourceGroup;

    fn azure_name(&self) -> Option<&str> {
        self.spec.azure_name.as_deref()
    }

    fn owner(&self) -> Option<&ResourceRef> {
        None
    }

    fn base_status(&self) -> Option<&AzureStatus> {
        self.status.as_ref()
    }

    fn desired(&self, _: &Resolved) -> Value {
        json!({ "location": self.spec.location, "tags": self.spec.tags })
    }
}
