//! The registry of served resource types: built-in kinds plus one entry per established CRD.

use std::sync::Arc;

use serde_json::Value;

/// A column of `kubectl get` output (from `additionalPrinterColumns`).
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// One served version of a resource type.
#[derive(Debug, Clone)]
pub struct Version {
    pub name: String,
    /// The `openAPIV3Schema` (shared: request handling clones resource types).
    pub schema: Option<Arc<Value>>,
    /// The schema has `default`s / `x-kubernetes-validations` (so those passes can be skipped).
    pub has_defaults: bool,
    pub has_cel: bool,
    /// The schema's CEL rules, compiled once when the CRD is written (compiling them on every
    /// write made custom-resource writes tens of times slower than kube-apiserver's).
    pub cel: Option<Arc<crate::cel_runtime::CompiledCel>>,
    pub status_subresource: bool,
    /// The CRD's `subresources.scale`: `/scale` serves an `autoscaling/v1` Scale over these paths.
    pub scale: Option<ScalePaths>,
    pub printer_columns: Vec<PrinterColumn>,
    /// A built-in kind's schema generator, run on first use (`builtin::hydrate`): generating
    /// every built-in schema at start took longer than the rest of the start-up.
    pub lazy_schema: Option<fn() -> Option<Value>>,
}

/// JSON paths of a scale subresource (`.spec.replicas` style).
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// A JSON pointer for one of the CRD's simple dotted paths (`.spec.replicas` → `/spec/replicas`).
    pub fn pointer(path: &str) -> String {
        path.replace('.', "/")
    }
}

#[derive(Debug, Clone)]
pub struct ResourceType {
    pub group: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub versions: Vec<Version>,
    /// Built-in kinds accept strategic merge patch and unconditional updates.
    pub builtin: bool,
    /// The verbs discovery lists when they are not the default ones (built-in kinds).
    pub verbs: Option<&'static [&'static str]>,
    /// Subresources listed in discovery besides `status` and `scale` (built-in kinds).
    pub subresources: Vec<Subresource>,
    /// `storageVersionHash` in discovery; `None` for kinds that are never stored.
    pub storage_hash: Option<String>,
    /// A CRD's storage version (`storage: true`); `None` for built-in kinds, which no webhook
    /// converts.
    pub storage_version: Option<String>,
    /// The CRD's conversion webhook (`spec.conversion.strategy: Webhook`); `None` converts by
    /// rewriting `apiVersion` (strategy `None`).
    pub conversion: Option<Arc<crate::webhooks::ClientConfig>>,
}

/// A subresource that discovery lists (`pods/exec`, `serviceaccounts/token`…) with the kind it
/// answers with.
#[derive(Debug, Clone)]
pub struct Subresource {
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub verbs: &'static [&'static str],
}

/// kube-apiserver's `storageVersionHash`: the first 8 bytes of the SHA-256 of
/// `<group>/<version>/<kind>` of the storage version, in standard base64. Clients compare it to
/// notice a storage version change, never decode it.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

impl ResourceType {
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            group: self.group.clone(),
            plural: self.plural.clone(),
        }
    }

    pub fn version(&self, name: &str) -> Option<&Version> {
        self.versions.iter().find(|v| v.name == name)
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// Objects of this type are stored (all but the review kinds, bindings and
    /// ComponentStatus, which kube-apiserver answers without storing).
    pub fn stored(&self) -> bool {
        !self.builtin || self.storage_hash.is_some()
    }

    pub fn has_status(&self) -> bool {
        self.versions.iter().any(|v| v.status_subresource)
    }

    /// The verbs discovery lists, in kube-apiserver's order: sorted for built-in kinds, the
    /// apiextensions-apiserver's own order for custom resources; namespaces have no
    /// deletecollection.
    pub fn verbs(&self) -> Vec<&'static str> {
        if let Some(verbs) = self.verbs {
            return verbs.to_vec();
        }
        if !self.builtin {
            return vec![
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "create",
                "update",
                "watch",
            ];
        }
        let mut verbs = crate::builtin::STORED.to_vec();
        if self.group.is_empty() && self.kind == "Namespace" {
            verbs.retain(|v| *v != "deletecollection");
        }
        verbs
    }
}

/// Identifies a resource type independent of version: (group, plural).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    pub group: String,
    pub plural: String,
}

/// Build a resource type from a `CustomResourceDefinition` object (apiextensions.k8s.io/v1).
pub fn from_crd(crd: &Value) -> Option<ResourceType> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = names.get("kind")?.as_str()?.to_string();
    let plural = names.get("plural")?.as_str()?.to_string();
    let versions = spec
        .get("versions")?
        .as_array()?
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .filter_map(|v| {
            Some(Version {
                name: v.get("name")?.as_str()?.to_string(),
                has_defaults: v
                    .pointer("/schema/openAPIV3Schema")
                    .is_some_and(|s| mentions(s, "default")),
                has_cel: v
                    .pointer("/schema/openAPIV3Schema")
                    .is_some_and(|s| mentions(s, "x-kubernetes-validations")),
                cel: v
                    .pointer("/schema/openAPIV3Schema")
                    .filter(|s| mentions(s, "x-kubernetes-validations"))
                    .map(|s| Arc::new(crate::cel_runtime::CompiledCel::new(s))),
                schema: v.pointer("/schema/openAPIV3Schema").cloned().map(Arc::new),
                status_subresource: v.pointer("/subresources/status").is_some(),
                scale: v.pointer("/subresources/scale").and_then(|s| {
                    Some(ScalePaths {
                        spec_replicas: s.get("specReplicasPath")?.as_str()?.to_string(),
                        status_replicas: s.get("statusReplicasPath")?.as_str()?.to_string(),
                        label_selector: s
                            .get("labelSelectorPath")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    })
                }),
                lazy_schema: None,
                printer_columns: v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .map(|cols| cols.iter().filter_map(printer_column).collect())
                    .unwrap_or_default(),
            })
        })
        .collect();
    // The hash names the storage version, served or not.
    let storage_version = spec
        .get("versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name")?.as_str())
        .map(str::to_string);
    let storage_hash = storage_version
        .as_deref()
        .and_then(|v| Some(storage_version_hash(spec.get("group")?.as_str()?, v, &kind)));
    Some(ResourceType {
        group: spec.get("group")?.as_str()?.to_string(),
        list_kind: names
            .get("listKind")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{kind}List")),
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase()),
        kind,
        plural,
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        short_names: strings(names.get("shortNames")),
        categories: strings(names.get("categories")),
        storage_hash,
        storage_version,
        versions,
        builtin: false,
        verbs: None,
        subresources: Vec::new(),
        conversion: spec
            .get("conversion")
            .filter(|c| c.get("strategy").and_then(Value::as_str) == Some("Webhook"))
            .and_then(|c| c.pointer("/webhook/clientConfig"))
            .map(|c| Arc::new(crate::webhooks::ClientConfig::from_value(c))),
    })
}

/// Whether a schema uses a keyword anywhere.
pub fn mentions(schema: &Value, keyword: &str) -> bool {
    match schema {
        Value::Object(m) => m.iter().any(|(k, v)| k == keyword || mentions(v, keyword)),
        Value::Array(a) => a.iter().any(|v| mentions(v, keyword)),
        _ => false,
    }
}

fn printer_column(c: &Value) -> Option<PrinterColumn> {
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Some(PrinterColumn {
        name: c.get("name")?.as_str()?.to_string(),
        type_: s("type"),
        format: s("format"),
        description: s("description"),
        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
        json_path: c.get("jsonPath")?.as_str()?.to_string(),
    })
}
