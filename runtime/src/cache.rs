//! What a controller keeps of each watched object in its reflector cache.
//!
//! Neither binary reads `metadata.managedFields` (server-side apply's bookkeeping, often the
//! largest part of an object) nor kubectl's `last-applied-configuration` annotation (a second
//! copy of the spec as text). Dropping both before the object reaches the store keeps the cache
//! at about the size of the objects themselves: at tens of thousands of CRs that is the
//! difference between a replica's memory limit held and an OOM kill (ASO's controller, which
//! keeps them, is reported to need over 512 MiB at that scale).
//!
//! The trimmed copy is never written back: both binaries write with server-side apply or merge
//! patches built from scratch, which leave those fields to the API server.

use kube::Resource;

/// kubectl's client-side apply annotation: the whole object as last applied, as JSON text.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Removes what no controller of Strata reads from a watched object (see the module's doc).
/// Pass it to `WatchStreamExt::modify` before the stream reaches the reflector.
pub fn trim<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn trim_drops_managed_fields_and_the_last_applied_copy_but_keeps_other_annotations() {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("a".into());
        cm.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("strata-translator".into()),
            ..Default::default()
        }]);
        cm.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_owned(), "{\"a\":1}".to_owned()),
                ("azure.strata.dev/adopt".to_owned(), "true".to_owned()),
            ]
            .into(),
        );
        trim(&mut cm);
        assert_eq!(cm.metadata.managed_fields, None);
        let annotations = cm.metadata.annotations.unwrap();
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations["azure.strata.dev/adopt"], "true");
        assert_eq!(cm.metadata.name.as_deref(), Some("a"));

        // An object whose only annotation was the copy is left with none.
        let mut only = ConfigMap::default();
        only.metadata.annotations = Some([(LAST_APPLIED.to_owned(), "{}".to_owned())].into());
        trim(&mut only);
        assert_eq!(only.metadata.annotations, None);
    }
}
