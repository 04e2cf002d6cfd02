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
