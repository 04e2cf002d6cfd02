//! `ResourceGroup` → `Microsoft.Resources/resourceGroups`.

use serde_json::{Value, json};
use strata_crds::azure::ResourceGroup;

use super::{AzureResource, Resolved};

impl AzureResource for ResourceGroup {
    fn desired(&self, _: &Resolved) -> Value {
        json!({ "location": self.spec.location, "tags": self.spec.tags })
    }
}
