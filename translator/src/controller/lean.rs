//! A cloud CR as the owned-CR watches decode it: a [`DynamicObject`] whose `managedFields` are
//! passed over while the JSON is read rather than built and then dropped (`cache::trim`).
//!
//! The server-side-apply field sets are the largest part of a CR's metadata and every status
//! write of strata-operator sends the whole object to these watches again; decoding them into
//! JSON trees was 5.8 % of the translator's CPU in a 30 × 3 benchmark (docs/performance.md,
//! "Decoding"). The metadata is read as `strata_runtime::lean` reads a typed
//! object's: without that key (serde skips it without allocating); the rest without
//! `DynamicObject`'s `flatten`, which buffers every value before it is decoded.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use kube::core::DynamicResourceScope;
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;
use strata_runtime::lean::LeanMeta;

/// A [`DynamicObject`] decoded without `metadata.managedFields`.
#[derive(Clone, Debug)]
pub(crate) struct LeanObject(pub(crate) DynamicObject);

impl<'de> Deserialize<'de> for LeanObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = LeanObject;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a Kubernetes object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LeanObject, A::Error> {
                let (mut api_version, mut kind) = (None, None);
                let mut metadata = ObjectMeta::default();
                let mut data = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "apiVersion" => api_version = Some(map.next_value()?),
                        "kind" => kind = Some(map.next_value()?),
                        "metadata" => metadata = map.next_value::<LeanMeta>()?.0,
                        _ => {
                            data.insert(key, map.next_value()?);
                        }
                    }
                }
                let types = match (api_version, kind) {
                    (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
                    _ => None,
                };
                Ok(LeanObject(DynamicObject {
                    types,
                    metadata,
                    data: Value::Object(data),
                }))
            }
        }
        d.deserialize_map(Fields)
    }
}

impl Resource for LeanObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        DynamicObject::kind(dt)
    }
    fn group(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        DynamicObject::group(dt)
    }
    fn version(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        DynamicObject::version(dt)
    }
    fn plural(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        DynamicObject::plural(dt)
    }
    fn api_version(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        DynamicObject::api_version(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_as_a_dynamic_object_does_but_without_managed_fields() {
        let object = json!({
            "apiVersion": "azure.strata.dev/v1alpha1",
            "kind": "Subnet",
            "metadata": {
                "name": "s", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
                "generation": 3, "creationTimestamp": "2026-11-29T10:00:00Z",
                "deletionTimestamp": "2026-11-29T11:00:00Z", "deletionGracePeriodSeconds": 0,
                "labels": {"cluster.x-k8s.io/cluster-name": "c"},
                "annotations": {"strata.dev/identity": "ns/id"},
                "finalizers": ["azure.strata.dev/finalizer"],
                "ownerReferences": [{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "AzureCluster", "name": "c", "uid": "o-1", "controller": true}],
                "managedFields": [{"manager": "strata-operator", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:id": {}}}}],
                "generateName": "s-", "selfLink": "/x"
            },
            "spec": {"addressPrefix": "10.0.0.0/16", "owner": {"name": "vnet"}},
            "status": {"id": "/subscriptions/x", "conditions": [{"type": "Ready", "status": "True"}]}
        })
        .to_string();
        let lean: LeanObject = serde_json::from_str(&object).unwrap();
        let mut full: DynamicObject = serde_json::from_str(&object).unwrap();
        assert!(
            full.metadata.managed_fields.is_some(),
            "the full decode keeps them"
        );
        full.metadata.managed_fields = None;
        assert_eq!(lean.0, full);
    }

    #[test]
    fn a_watch_event_decodes_its_object_lean() {
        let event = r#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"X",
            "metadata":{"name":"a","managedFields":[{"manager":"m"}]},"status":{"ready":true}}}"#;
        let e: kube::core::WatchEvent<LeanObject> = serde_json::from_str(event).unwrap();
        let kube::core::WatchEvent::Modified(o) = e else {
            panic!("not a modification: {e:?}");
        };
        assert_eq!(o.0.metadata.name.as_deref(), Some("a"));
        assert_eq!(o.0.metadata.managed_fields, None);
        assert_eq!(o.0.data["status"]["ready"], json!(true));
    }
}
