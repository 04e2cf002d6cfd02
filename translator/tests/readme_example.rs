//! The README's "test a translation without a cloud" example, compiled and run here so that it
//! stays true. Keep the two in step.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Discovery;
use strata_crds::azure::Subnet;
use strata_envtest::TestEnv;
use strata_translator::controller::{Settings, run};

#[tokio::test]
async fn my_cluster_gets_a_subnet_per_capz_subnet() {
    // An API server with Strata's CRDs in this process (or kube-apiserver + etcd when
    // KUBEBUILDER_ASSETS is set), and the translator. No cloud.
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let env = TestEnv::builder()
        .crd_dir(format!("{repo}/crds/generated"))
        .namespace("readme")
        .start()
        .await
        .unwrap();
    let client = env.client();
    let settings = Settings {
        namespace: Some("readme".into()),
        ..Settings::default()
    };
    tokio::spawn(run(client.clone(), settings));

    // Apply a CAPZ cluster template, as a user would (server-side apply of every document).
    let yaml =
        std::fs::read_to_string(format!("{repo}/samples/capi/default-cluster.yaml")).unwrap();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    for doc in serde_yaml_ng::Deserializer::from_str(&yaml) {
        let mut obj: DynamicObject = serde::Deserialize::deserialize(doc).unwrap();
        obj.metadata.namespace = Some("readme".into());
        let gvk = GroupVersionKind::try_from(obj.types.as_ref().unwrap()).unwrap();
        let (resource, _) = discovery.resolve_gvk(&gvk).unwrap();
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), "readme", &resource);
        let name = obj.metadata.name.clone().unwrap();
        api.patch(&name, &PatchParams::apply("me"), &Patch::Apply(&obj))
            .await
            .unwrap();
    }

    // The translator writes the cloud CRs: one Subnet CR per subnet of the AzureCluster.
    let subnets: Api<Subnet> = Api::namespaced(client, "readme");
    for _ in 0..100 {
        let mut names: Vec<String> = subnets
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .collect();
        names.sort();
        if names.len() >= 2 {
            assert_eq!(
                names,
                [
                    "strata-demo-vnet-control-plane-subnet",
                    "strata-demo-vnet-node-subnet"
                ]
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no Subnet CR after 10 s");
}
