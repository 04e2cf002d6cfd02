//! [`CloudResource`]: one desired cloud CR of any cloud kind (the registry's list), with what the translator
//! needs of it generically (metadata, sort order, the references it makes).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use strata_crds::azure::*;
use strata_crds::{CloudKind, CloudObject};

macro_rules! cloud_resources {
    ($($kind:ident in $file:ident),+ $(,)?) => {
        /// A desired cloud CR (`azure.strata.dev/v1alpha1`).
        // A translation holds tens of CRs; boxing them would buy nothing measurable.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, Serialize)]
        #[serde(untagged)]
        pub enum CloudResource {
            $($kind($kind)),+
        }

        impl CloudResource {
            /// The CR's kind.
            pub fn cloud_kind(&self) -> CloudKind {
                match self {
                    $(Self::$kind(_) => CloudKind::$kind),+
                }
            }

            /// The CR's kind name.
            pub fn kind(&self) -> &'static str {
                self.cloud_kind().as_str()
            }

            /// The CR's metadata.
            pub fn meta(&self) -> &ObjectMeta {
                match self {
                    $(Self::$kind(r) => &r.metadata),+
                }
            }

            /// The CR's metadata, to stamp labels, annotations and owners.
            pub fn meta_mut(&mut self) -> &mut ObjectMeta {
                match self {
                    $(Self::$kind(r) => &mut r.metadata),+
                }
            }
        }

        /// Calls `$f` with the CR as its own type (`CloudObject` is not object-safe).
        macro_rules! dispatch {
            ($self_:expr, $r:ident => $body:expr) => {
                match $self_ {
                    $(CloudResource::$kind($r) => $body),+
                }
            };
        }

        $(impl From<$kind> for CloudResource {
            fn from(r: $kind) -> Self {
                Self::$kind(r)
            }
        })+
    };
}

strata_crds::with_cloud_kinds!(cloud_resources);

// The kube-derived root types are not `PartialEq`; two CRs are equal when they serialize alike.
impl PartialEq for CloudResource {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.to_value() == other.to_value()
    }
}

/// A reference from one CR to another CR of the set (by name), or to a Secret.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// Kind referred to (`Secret` for custom data).
    pub kind: &'static str,
    pub name: String,
    /// The referring field, e.g. `spec.owner`.
    pub field: String,
}

impl CloudResource {
    /// The CR's Azure tags (a Subnet has none of its own).
    pub fn tags(&self) -> Option<&strata_crds::common::Tags> {
        dispatch!(self, r => r.tags())
    }

    /// The CR's name in Azure: `spec.azureName`, else its own name.
    pub fn azure_name(&self) -> &str {
        dispatch!(self, r => CloudObject::azure_name(r)).unwrap_or_else(|| self.name())
    }

    /// The CR's name.
    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    /// (kind, name): the translator's sort order, parents first (the registry's order).
    pub fn sort_key(&self) -> (CloudKind, &str) {
        (self.cloud_kind(), self.name())
    }

    /// The CR as JSON, as it is applied.
    pub fn to_value(&self) -> serde_json::Value {
        // Serializing these derived types cannot fail (string keys, no non-finite floats).
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Every by-name reference this CR makes to another CR (or Secret) in its namespace, its
    /// owner first; ARM-ID references point outside the set and are not listed.
    pub fn references(&self) -> Vec<Reference> {
        dispatch!(self, r => references_of(r))
    }
}

fn references_of<K: CloudObject>(r: &K) -> Vec<Reference> {
    let owner = r
        .owner()
        .zip(K::OWNER)
        .map(|(to, kind)| (kind.as_str(), to, "spec.owner".to_owned()));
    let others = r
        .references()
        .into_iter()
        .map(|x| (x.kind.as_str(), x.to, x.field));
    let mut out: Vec<Reference> = owner
        .into_iter()
        .chain(others)
        .filter_map(|(kind, to, field)| {
            to.name.as_ref().map(|name| Reference {
                kind,
                name: name.clone(),
                field,
            })
        })
        .collect();
    if let Some(s) = r.custom_data() {
        out.push(Reference {
            kind: "Secret",
            name: s.name.clone(),
            field: "spec.customData".into(),
        });
    }
    out
}
