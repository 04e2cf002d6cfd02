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
