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

/// The longest value of Strata's own annotations that the operator keeps as it is; every valid
/// one is far shorter (names, booleans, an ARM scope list, the creation record).
pub const MAX_KEPT_VALUE: usize = 4096;

/// What an annotation longer than [`MAX_KEPT_VALUE`] is kept as: a value every reader of
/// Strata's annotations refuses (not a name, a boolean, a policy or a record), so that cutting
/// it can never turn a refused value into an accepted one, and whose text says what happened.
pub const OVERSIZED_VALUE: &str = "<over 4096 bytes: not read>";

/// The labels and annotations a controller reads of a kind: all it keeps of them.
#[derive(Clone, Copy, Debug)]
pub struct Reads {
    /// Annotation keys read.
    pub annotations: &'static [&'static str],
    /// Label keys read.
    pub labels: &'static [&'static str],
}

/// [`trim`], and of the labels and annotations only those `reads` names, each at most
/// [`MAX_KEPT_VALUE`] bytes, and no owner references: all a controller of Strata's reads of an
/// object's metadata beyond its identity. A tenant's own labels and annotations (up to 256 KiB of
/// annotations on each object, and labels without a limit but the object's size) then cost the
/// operator nothing, whatever their number (docs/security.md, "Memory"). Finalizers are kept
/// whole: the operator writes the list back, guarded by the resource version, when it adds or
/// removes its own.
pub fn trim_to<K: Resource>(object: &mut K, reads: &Reads) {
    trim(object);
    let meta = object.meta_mut();
    meta.owner_references = None;
    for (map, keys) in [
        (&mut meta.annotations, reads.annotations),
        (&mut meta.labels, reads.labels),
    ] {
        if let Some(entries) = map.as_mut() {
            entries.retain(|k, _| keys.contains(&k.as_str()));
            for value in entries.values_mut() {
                if value.len() > MAX_KEPT_VALUE {
                    *value = OVERSIZED_VALUE.to_owned();
                }
            }
            if entries.is_empty() {
                *map = None;
            }
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

    #[test]
    fn trim_to_keeps_only_the_keys_read_and_no_long_values() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let mut cm = ConfigMap::default();
        cm.metadata.annotations = Some(
            [
                ("strata.dev/adopt".to_owned(), "true".to_owned()),
                ("strata.dev/paused".to_owned(), "p".repeat(MAX_KEPT_VALUE)),
                (
                    "strata.dev/identity".to_owned(),
                    "i".repeat(MAX_KEPT_VALUE + 1),
                ),
                ("strata.dev/unknown".to_owned(), "x".repeat(200_000)),
                ("example.com/big".to_owned(), "x".repeat(200_000)),
                (LAST_APPLIED.to_owned(), "{}".to_owned()),
            ]
            .into(),
        );
        cm.metadata.labels = Some(
            [
                ("strata.dev/shard".to_owned(), "1".to_owned()),
                ("team".to_owned(), "a".to_owned()),
            ]
            .into(),
        );
        cm.metadata.owner_references = Some(vec![OwnerReference::default()]);
        cm.metadata.finalizers = Some(vec![
            "example.com/f".into(),
            "azure.strata.dev/finalizer".into(),
        ]);
        let reads = Reads {
            annotations: &[
                "strata.dev/adopt",
                "strata.dev/paused",
                "strata.dev/identity",
            ],
            labels: &["strata.dev/shard"],
        };
        trim_to(&mut cm, &reads);
        let annotations = cm.metadata.annotations.unwrap();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            [
                "strata.dev/adopt",
                "strata.dev/identity",
                "strata.dev/paused"
            ]
        );
        assert_eq!(annotations["strata.dev/paused"].len(), MAX_KEPT_VALUE);
        assert_eq!(annotations["strata.dev/identity"], OVERSIZED_VALUE);
        assert_eq!(annotations["strata.dev/adopt"], "true");
        assert_eq!(cm.metadata.labels.unwrap().len(), 1);
        assert_eq!(cm.metadata.owner_references, None);
        // The operator writes the finalizers back: every one stays.
        assert_eq!(cm.metadata.finalizers.unwrap().len(), 2);

        let mut bare = ConfigMap::default();
        bare.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
        trim_to(&mut bare, &reads);
        assert_eq!(bare.metadata.labels, None);
    }
}
