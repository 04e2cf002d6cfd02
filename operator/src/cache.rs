//! What the operator keeps of each object it watches: the metadata it reads, and the spec of a
//! cloud CR only up to a size (`--max-spec-bytes`).
//!
//! Every CR of every tenant sits in the operator's reflector caches, so a tenant could make the
//! operator run out of memory, and stop every tenant's reconciles, by applying CRs that are
//! merely large (docs/security.md, "Memory"). The schema bounds each field; what it cannot bound
//! is the sum (a NIC may list 256 IP configurations), nor a CR's labels and annotations. So:
//!
//! - of the metadata, only the annotations and labels the operator reads are kept
//!   ([`strata_runtime::cache::trim_to`]);
//! - a cloud CR whose spec, with what it keeps of the metadata that a tenant writes (Strata's
//!   annotations, the finalizers), is larger than the limit is *set aside*: its cached copy keeps
//!   its identity, status and a mark ([`SET_ASIDE`]), and an empty spec. Its reconcile reports
//!   `Ready=False`, `SpecTooLarge`, and sends nothing to Azure; when it is deleted, the reconcile
//!   reads the whole CR from the API server once (a list of its name), and deletes as for any CR.
//!
//! A set-aside CR is never Ready, so nothing that refers to it uses its empty spec: dependents
//! wait for it as for any CR that is not Ready.

use kube::Resource;
use kube::core::object::HasSpec;
use serde::Serialize;
use strata_crds::annotations::{ALLOWED_SCOPES, ON_CLOUD_CRS};
use strata_runtime::cache::{Reads, trim_to};
use strata_runtime::shard::SHARD_LABEL;

/// The default `--max-spec-bytes`: a spec's size as JSON above which a cloud CR is set aside.
/// Everything the translator writes for CAPZ's flavours is under 10 KiB; 64 KiB leaves room for
/// hand-written CRs (a network security group of ~200 rules), and 1,000 CRs at the limit stay
/// well within the Deployment's 256 MiB (docs/security.md, "Memory", has the figure).
pub const MAX_SPEC_BYTES: usize = 64 * 1024;

/// On a cached copy only, never written to the API server: `<size>/<limit>`, the size of the
/// spec that was set aside and the limit it is over. Not among the annotations the operator
/// reads, so a user's own is dropped first.
pub const SET_ASIDE: &str = "strata.dev/spec-set-aside";

/// What the operator reads of a cloud CR's labels and annotations.
pub const CLOUD_CR: Reads = Reads {
    annotations: ON_CLOUD_CRS,
    labels: &[SHARD_LABEL],
};

/// What it reads of an `AzureClusterIdentity`'s.
pub const IDENTITY: Reads = Reads {
    annotations: &[ALLOWED_SCOPES],
    labels: &[],
};

/// Nothing: a `ReferenceGrant` is read for its spec only.
pub const NOTHING: Reads = Reads {
    annotations: &[],
    labels: &[],
};

/// Trims a watched cloud CR for the cache, setting its spec aside when it is larger than
/// `max_spec_bytes` with the annotations and finalizers kept beside it.
pub fn keep<K>(object: &mut K, max_spec_bytes: usize)
where
    K: Resource + HasSpec,
    K::Spec: Default + Serialize,
{
    trim_to(object, &CLOUD_CR);
    let meta = object.meta();
    let size =
        json_size(object.spec()) + json_size(&meta.annotations) + json_size(&meta.finalizers);
    if size <= max_spec_bytes {
        return;
    }
    *object.spec_mut() = K::Spec::default();
    // Written back only from the whole CR, read again when it is deleted.
    let meta = object.meta_mut();
    meta.finalizers = None;
    meta.annotations = Some([(SET_ASIDE.to_owned(), format!("{size}/{max_spec_bytes}"))].into());
}

/// The size of the spec that was set aside and the limit it is over, if this cached copy's was.
pub fn set_aside<K: Resource>(object: &K) -> Option<(usize, usize)> {
    let mark = object.meta().annotations.as_ref()?.get(SET_ASIDE)?;
    let (size, limit) = mark.split_once('/')?;
    Some((size.parse().ok()?, limit.parse().ok()?))
}

/// The length of `value` as JSON, counted without building the text.
fn json_size(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A spec is plain data: serializing it to a writer that cannot fail cannot fail either.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use strata_crds::azure::{ResourceGroup, ResourceGroupSpec};

    fn group(tags: usize) -> ResourceGroup {
        let mut rg = ResourceGroup::new(
            "g",
            ResourceGroupSpec {
                location: "westeurope".into(),
                tags: (0..tags)
                    .map(|i| (format!("t{i}"), "v".repeat(200)))
                    .collect(),
                ..Default::default()
            },
        );
        rg.metadata.finalizers = Some(vec!["azure.strata.dev/finalizer".into()]);
        rg.metadata.annotations = Some(
            [
                (SET_ASIDE.to_owned(), "1".to_owned()),
                ("strata.dev/adopt".to_owned(), "true".to_owned()),
                ("example.com/note".to_owned(), "x".repeat(100_000)),
            ]
            .into(),
        );
        rg
    }

    #[test]
    fn finalizers_count_with_the_spec() {
        let mut rg = group(0);
        rg.metadata.finalizers = Some((0..1000).map(|i| format!("example.com/f{i}")).collect());
        keep(&mut rg, MAX_SPEC_BYTES);
        assert_eq!(set_aside(&rg), None);
        rg.metadata.finalizers = Some((0..5000).map(|i| format!("example.com/f{i}")).collect());
        keep(&mut rg, MAX_SPEC_BYTES);
        assert!(set_aside(&rg).is_some_and(|(size, _)| size > MAX_SPEC_BYTES));
        assert_eq!(rg.metadata.finalizers, None);
    }

    #[test]
    fn a_spec_within_the_limit_is_kept_and_a_users_mark_is_dropped() {
        let mut rg = group(10);
        let spec = rg.spec.clone();
        keep(&mut rg, MAX_SPEC_BYTES);
        assert_eq!(rg.spec, spec);
        assert_eq!(set_aside(&rg), None);
        assert_eq!(rg.metadata.finalizers.as_ref().unwrap().len(), 1);
        let annotations = rg.metadata.annotations.unwrap();
        assert_eq!(annotations.len(), 1, "{annotations:?}");
        assert_eq!(annotations["strata.dev/adopt"], "true");
    }

    #[test]
    fn a_spec_over_the_limit_is_set_aside_with_its_size() {
        let mut rg = group(50);
        // What is kept of it: the spec, Strata's annotation, the finalizer.
        let size = serde_json::to_vec(&rg.spec).unwrap().len()
            + serde_json::to_vec(&rg.metadata.finalizers).unwrap().len()
            + serde_json::to_vec(&serde_json::json!({"strata.dev/adopt": "true"}))
                .unwrap()
                .len();
        keep(&mut rg, size - 1);
        assert_eq!(rg.spec, ResourceGroupSpec::default());
        assert_eq!(set_aside(&rg), Some((size, size - 1)));
        assert_eq!(rg.metadata.finalizers, None);
        // At the limit exactly, it is kept.
        let mut rg = group(50);
        keep(&mut rg, size);
        assert_eq!(set_aside(&rg), None);
        assert_eq!(rg.spec.tags.len(), 50);
    }
}
