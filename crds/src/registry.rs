//! The one list of Strata's CRDs and the touches that are the same for every cloud CR.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, JSON, JSONSchemaProps,
    JSONSchemaPropsOrArray,
};
use kube::CustomResourceExt;

use crate::kinds::CloudKind;
use crate::{capi, capz};

/// A CRD and the file `crdgen` writes it to.
pub struct CrdFile {
    /// File name under `crds/generated/`, e.g. `azure.strata.dev_virtualnetworks.yaml`.
    pub file_name: String,
    /// The definition.
    pub crd: CustomResourceDefinition,
}

/// Every CRD Strata ships, in a stable order: the cloud CRs, then CAPZ, then CAPI.
pub fn crds() -> Vec<CrdFile> {
    let cloud = CloudKind::ALL
        .iter()
        .map(|kind| kind.crd())
        .map(with_cloud_columns)
        .map(with_bounded_conditions);
    // Not a cloud kind (no ARM resource behind it), so without the cloud columns.
    let observed = [
        with_bounded_conditions(crate::azure::LocationZones::crd()),
        with_grantable_kinds(crate::azure::ReferenceGrant::crd()),
    ];
    let capz = [
        capz::AzureCluster::crd(),
        capz::AzureMachine::crd(),
        capz::AzureMachineTemplate::crd(),
        capz::AzureMachinePool::crd(),
        capz::AzureClusterIdentity::crd(),
    ]
    .map(with_contract_labels);
    let capi = [
        capi::Cluster::crd(),
        capi::Machine::crd(),
        capi::MachineDeployment::crd(),
        capi::MachineSet::crd(),
        capi::MachinePool::crd(),
        capi::KubeadmControlPlane::crd(),
        capi::KubeadmConfig::crd(),
        capi::KubeadmConfigTemplate::crd(),
    ];
    cloud
        .chain(observed)
        .chain(capz)
        .chain(capi)
        .map(|crd| CrdFile {
            file_name: format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or_default()),
            crd,
        })
        .collect()
}

/// Cluster API resolves an `infrastructureRef` (and an identity's, a template's) to an API version
/// through the referenced CRD's contract labels ([`crate::contract`]); a provider CRD without them
/// cannot be referenced at all, so every CRD that CAPI may meet carries one label per contract
/// Strata satisfies, naming the served versions that satisfy it.
fn with_contract_labels(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let labels = crd.metadata.labels.get_or_insert_with(Default::default);
    labels.extend(crate::contract::labels());
    crd
}

/// A ReferenceGrant names cloud kinds: the schema lists the registry's, so that a misspelt kind
/// is refused with the list of valid ones rather than granting nothing in silence.
fn with_grantable_kinds(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let kinds: Vec<JSON> = crate::azure::grantable_kinds()
        .into_iter()
        .map(|k| JSON(serde_json::Value::from(k)))
        .collect();
    for version in &mut crd.spec.versions {
        let spec = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| property(s, "spec"));
        let Some(spec) = spec else { continue };
        if let Some(kind) = property(spec, "to")
            .and_then(items)
            .and_then(|to| property(to, "kind"))
        {
            kind.enum_ = Some(kinds.clone());
        }
        if let Some(kind) = property(spec, "from")
            .and_then(items)
            .and_then(|from| property(from, "kinds"))
            .and_then(items)
        {
            kind.enum_ = Some(kinds.clone());
        }
    }
    crd
}

/// `metav1.Condition`'s schema as k8s-openapi renders it has no bounds; Kubernetes' own
/// (controller-gen's markers on the Go type) bound every field, and a cloud CR's size must be
/// bounded (docs/security.md, "Memory"): the same bounds here, at most
/// [`MAX_CONDITIONS`](crate::common::MAX_CONDITIONS) conditions, and messages of at most
/// [`MAX_CONDITION_MESSAGE`](crate::common::MAX_CONDITION_MESSAGE) bytes (the operator cuts
/// longer ones).
fn with_bounded_conditions(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    use crate::common::{MAX_CONDITION_MESSAGE, MAX_CONDITIONS};
    for version in &mut crd.spec.versions {
        let conditions = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| property(s, "status"))
            .and_then(|s| property(s, "conditions"));
        let Some(conditions) = conditions else {
            continue;
        };
        conditions.max_items = Some(MAX_CONDITIONS as i64);
        let Some(condition) = items(conditions) else {
            continue;
        };
        let bound = |c: &mut JSONSchemaProps, field: &str, max: usize| {
            if let Some(p) = property(c, field) {
                p.max_length = Some(max as i64);
            }
        };
        bound(condition, "type", 316);
        bound(condition, "reason", 1024);
        bound(condition, "message", MAX_CONDITION_MESSAGE);
        if let Some(status) = property(condition, "status") {
            status.enum_ = Some(
                ["True", "False", "Unknown"]
                    .map(|v| JSON(serde_json::Value::from(v)))
                    .to_vec(),
            );
        }
    }
    crd
}

fn property<'a>(schema: &'a mut JSONSchemaProps, name: &str) -> Option<&'a mut JSONSchemaProps> {
    schema.properties.as_mut()?.get_mut(name)
}

fn items(schema: &mut JSONSchemaProps) -> Option<&mut JSONSchemaProps> {
    match schema.items.as_mut()? {
        JSONSchemaPropsOrArray::Schema(s) => Some(s),
        JSONSchemaPropsOrArray::Schemas(_) => None,
    }
}

/// Every cloud CR shows the same state columns in `kubectl get` (docs/design.md: Ready, its reason,
/// the ARM provisioning state, age), with the kind's own columns between state and age.
fn with_cloud_columns(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let column = |name: &str, json_path: &str, description: &str| CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: "string".to_owned(),
        json_path: json_path.to_owned(),
        description: Some(description.to_owned()),
        ..Default::default()
    };
    for version in &mut crd.spec.versions {
        let own = version
            .additional_printer_columns
            .take()
            .unwrap_or_default();
        let mut columns = vec![
            column(
                "Ready",
                r#".status.conditions[?(@.type=="Ready")].status"#,
                "Ready condition status",
            ),
            column(
                "Reason",
                r#".status.conditions[?(@.type=="Ready")].reason"#,
                "Ready condition reason",
            ),
            column(
                "State",
                ".status.provisioningState",
                "ARM provisioning state",
            ),
        ];
        columns.extend(own);
        columns.push(CustomResourceColumnDefinition {
            type_: "date".to_owned(),
            ..column("Age", ".metadata.creationTimestamp", "Time since creation")
        });
        version.additional_printer_columns = Some(columns);
    }
    crd
}

/// Errors writing the generated CRDs.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The CRD could not be rendered as YAML.
    #[error("rendering {file}: {source}")]
    Render {
        /// File being rendered.
        file: String,
        /// Cause.
        source: serde_yaml_ng::Error,
    },
    /// The file could not be written.
    #[error("writing {path}: {source}")]
    Io {
        /// Path being written.
        path: std::path::PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// The YAML `crdgen` writes for one CRD (a header saying it is generated, then the object).
pub fn render(file: &CrdFile) -> Result<String, WriteError> {
    let yaml = serde_yaml_ng::to_string(&file.crd).map_err(|source| WriteError::Render {
        file: file.file_name.clone(),
        source,
    })?;
    Ok(format!(
        "# Generated by `make crds` (cargo run -p strata-crds --bin crdgen -- crds/generated). Do not edit.\n{yaml}"
    ))
}

/// `crds/kustomization.yaml`: the CRDs a management cluster installs — the cloud CRs (from the
/// registry) and the CAPZ-compatible types the translator serves; Cluster API's own CRDs come
/// with Cluster API, so `generated/` holds them for tests and the demo only.
pub fn kustomization() -> String {
    let mut out = String::from(
        "# Generated by `make crds` from the kind registry (crds/src/kinds.rs). Do not edit.\n\
         # The CRDs Strata ships for a management cluster: its cloud CRs (azure.strata.dev) and the\n\
         # CAPZ-compatible infrastructure types the translator serves. Cluster API's own CRDs\n\
         # (cluster.x-k8s.io, bootstrap, control plane) come with Cluster API; crds/generated holds\n\
         # them only for tests and the demo.\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\n\
         kind: Kustomization\n\
         resources:\n",
    );
    let mut files: Vec<String> = crds()
        .into_iter()
        .filter(|f| {
            let group = &f.crd.spec.group;
            group == crate::azure::GROUP || group == "infrastructure.cluster.x-k8s.io"
        })
        .map(|f| f.file_name)
        .collect();
    // Cloud CRs first, then CAPZ's, each by name (as kustomize lists them).
    files.sort_by_key(|f| (!f.ends_with(".azure.strata.dev.yaml"), f.clone()));
    for f in files {
        out.push_str(&format!("- generated/{f}\n"));
    }
    out
}

/// Writes every CRD into `dir` (created if missing), returning how many were written; and
/// [`kustomization`] beside `dir` (`crds/kustomization.yaml` for `crds/generated`).
pub fn write_all(dir: &std::path::Path) -> Result<usize, WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let files = crds();
    for file in &files {
        let path = dir.join(&file.file_name);
        std::fs::write(&path, render(file)?).map_err(|source| WriteError::Io { path, source })?;
    }
    let path = dir.join("..").join("kustomization.yaml");
    std::fs::write(&path, kustomization()).map_err(|source| WriteError::Io { path, source })?;
    Ok(files.len())
}
