//! crds/generated/ is exactly what `crdgen` writes today: a stale or stray file fails the build
//! with the command that fixes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

#[test]
fn checked_in_crds_are_fresh() {
    let dir = support::repo().join("crds/generated");
    let expected = strata_crds::crds();
    for file in &expected {
        let path = dir.join(&file.file_name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == strata_crds::render(file).unwrap(),
            "{} is stale or missing: run `make crds`",
            path.display()
        );
    }
    let wanted: BTreeSet<_> = expected.iter().map(|f| f.file_name.clone()).collect();
    let present: BTreeSet<_> = support::yaml_files("crds/generated")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        present, wanted,
        "stray files in crds/generated: run `make crds`"
    );
    let kustomization = std::fs::read_to_string(support::repo().join("crds/kustomization.yaml"))
        .unwrap_or_default();
    assert!(
        kustomization == strata_crds::kustomization(),
        "crds/kustomization.yaml is stale: run `make crds`"
    );
}

#[test]
fn every_kind_of_the_design_is_served() {
    let crds = strata_crds::crds();
    let kinds: BTreeSet<_> = crds
        .iter()
        .map(|f| f.crd.spec.names.kind.as_str())
        .collect();
    for kind in [
        "ResourceGroup",
        "VirtualNetwork",
        "Subnet",
        "NetworkSecurityGroup",
        "RouteTable",
        "NatGateway",
        "PublicIPAddress",
        "LoadBalancer",
        "NetworkInterface",
        "AvailabilitySet",
        "VirtualMachine",
        "AzureCluster",
        "AzureMachine",
        "AzureMachineTemplate",
        "AzureClusterIdentity",
        "Cluster",
        "Machine",
        "MachineDeployment",
        "MachineSet",
        "KubeadmControlPlane",
        "KubeadmConfig",
        "KubeadmConfigTemplate",
    ] {
        assert!(kinds.contains(kind), "{kind} missing");
    }
    for file in crds
        .iter()
        .filter(|f| f.crd.spec.group == "azure.strata.dev")
    {
        let names = &file.crd.spec.names;
        assert_eq!(
            names.categories.as_deref(),
            Some(&["azure".to_owned()][..]),
            "{}",
            names.kind
        );
        assert!(
            names.short_names.as_ref().is_some_and(|s| !s.is_empty()),
            "{} has no short name",
            names.kind
        );
        assert_eq!(file.crd.spec.scope, "Namespaced");
        let version = &file.crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        // ReferenceGrant is a permission: no Azure resource, no status, nothing to show but its
        // name and age.
        if names.kind == "ReferenceGrant" {
            assert!(columns.is_empty());
            assert!(version.subresources.is_none());
            continue;
        }
        // LocationZones is read from ARM, not a resource in it: no provisioning state.
        if names.kind != "LocationZones" {
            assert_eq!(
                &columns[..3],
                ["Ready", "Reason", "State"],
                "{}",
                names.kind
            );
            assert_eq!(columns.last(), Some(&"Age"));
        }
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
    }
}

/// Every infrastructure CRD in crds/generated resolves through its contract labels as Cluster API
/// resolves an `infrastructureRef` (the newest contract label, then its newest version), and every
/// version a label names is served: read from the YAML a management cluster installs, not from the
/// Rust types.
#[test]
fn every_infrastructure_crd_resolves_through_its_contract_labels_as_capi_does() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut resolved = Vec::new();
    for path in support::yaml_files("crds/generated") {
        let crd: CustomResourceDefinition =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if crd.spec.group != "infrastructure.cluster.x-k8s.io" {
            continue;
        }
        let name = crd.metadata.name.clone().unwrap();
        let labels = crd.metadata.labels.clone().unwrap_or_default();
        let served: Vec<String> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect();
        let r = strata_crds::contract::resolve(&name, &labels, &served)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Every contract label, not only the one CAPI picks, names served versions only.
        for (contract, _) in strata_crds::contract::STRATA_CONTRACTS {
            let value = labels
                .get(&format!("cluster.x-k8s.io/{contract}"))
                .unwrap_or_else(|| panic!("{name}: no label for contract {contract}"));
            for v in value.split('_') {
                assert!(served.iter().any(|s| s == v), "{name}: {v} not served");
            }
        }
        resolved.push((crd.spec.names.kind, r.contract, r.version));
    }
    resolved.sort();
    let kinds: Vec<&str> = resolved.iter().map(|(k, _, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "AzureCluster",
            "AzureClusterIdentity",
            "AzureMachine",
            "AzureMachinePool",
            "AzureMachineTemplate"
        ]
    );
    assert!(
        resolved
            .iter()
            .all(|(_, c, v)| *c == "v1beta1" && v == "v1beta1"),
        "{resolved:?}"
    );
}

/// Every string, list and map of Strata's own CRDs (`azure.strata.dev`) has a bound, so that the
/// API server refuses an oversized field at once and the size of each CR is bounded by its
/// schema; the largest object each kind's schema admits is printed (`--nocapture`). CAPZ's and
/// CAPI's types keep their publishers' schemas (free-form fields included) and are not checked.
#[test]
fn every_field_of_strata_s_own_crds_is_bounded_and_each_kinds_largest_object_is_printed() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
    let mut open = Vec::new();
    let mut printed = 0;
    for file in strata_crds::crds() {
        let crd = &file.crd;
        if crd.spec.group != strata_crds::azure::GROUP {
            continue;
        }
        for version in &crd.spec.versions {
            let root = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("every version has a schema");
            let part = |name: &str, open: &mut Vec<String>| {
                let empty = JSONSchemaProps::default();
                let schema = root
                    .properties
                    .as_ref()
                    .and_then(|p| p.get(name))
                    .unwrap_or(&empty);
                let path = format!("{}/{}.{name}", crd.spec.names.kind, version.name);
                largest(schema, &path, open)
            };
            let spec = part("spec", &mut open);
            let status = part("status", &mut open);
            println!(
                "{:<36} largest spec {:>9} characters, status {:>9}",
                format!("{}/{}", crd.spec.names.kind, version.name),
                spec,
                status
            );
            printed += 1;
        }
    }
    // Every cloud kind, LocationZones and ReferenceGrant, in each of their versions.
    let kinds = strata_crds::CloudKind::ALL.len() + 2;
    assert!(
        printed >= kinds,
        "{printed} schemas checked of {kinds} kinds"
    );
    assert!(
        open.is_empty(),
        "unbounded fields (give each a maxLength, maxItems or maxProperties):\n{}",
        open.join("\n")
    );
}

/// The longest JSON text, in characters, that `s` admits (every string, list and map at its
/// bound, every optional field present); each field without a bound is added to `open`.
fn largest(
    s: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
    path: &str,
    open: &mut Vec<String>,
) -> u64 {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    };
    let bound = |n: Option<i64>, what: &str, open: &mut Vec<String>| -> u64 {
        n.map(|n| n as u64).unwrap_or_else(|| {
            open.push(format!("{path}: {what}"));
            0
        })
    };
    if let Some(values) = &s.enum_ {
        return values
            .iter()
            .map(|v| v.0.to_string().len() as u64)
            .max()
            .unwrap_or(0);
    }
    if s.x_kubernetes_int_or_string == Some(true) {
        return s.max_length.map_or(20, |n| n as u64 + 2);
    }
    if s.x_kubernetes_preserve_unknown_fields == Some(true) {
        open.push(format!("{path}: free-form"));
    }
    match s.type_.as_deref() {
        Some("string") => match s.format.as_deref() {
            // RFC 3339, which the API server checks.
            Some("date-time") if s.max_length.is_none() => 37,
            _ => bound(s.max_length, "a string without maxLength", open) + 2,
        },
        Some("integer" | "number") => 20,
        Some("boolean") => 5,
        Some("array") => {
            let n = bound(s.max_items, "a list without maxItems", open);
            let item = match &s.items {
                Some(JSONSchemaPropsOrArray::Schema(item)) => {
                    largest(item, &format!("{path}[]"), open)
                }
                _ => 0,
            };
            n * (item + 1) + 2
        }
        _ => {
            let mut size = 2;
            for (name, field) in s.properties.iter().flatten() {
                size += name.len() as u64 + 4 + largest(field, &format!("{path}.{name}"), open);
            }
            if let Some(JSONSchemaPropsOrBool::Schema(value)) = &s.additional_properties {
                let n = bound(s.max_properties, "a map without maxProperties", open);
                // A key's length is bounded by a rule `self.all(k, size(k) <= N)`.
                let key = s.x_kubernetes_validations.iter().flatten().find_map(|r| {
                    let rest = r.rule.strip_prefix("self.all(k, size(k) <= ")?;
                    rest.strip_suffix(')')?.parse::<u64>().ok()
                });
                let key = bound(
                    key.map(|k| k as i64),
                    "a map without a bound on its keys",
                    open,
                );
                size += n * (key + 4 + largest(value, &format!("{path}{{}}"), open));
            } else if s.additional_properties.is_some() {
                open.push(format!("{path}: a map of anything"));
            }
            size
        }
    }
}
