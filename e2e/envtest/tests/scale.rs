//! The scale subresource of a CRD (`subresources.scale`), as kube-apiserver serves it: `GET /scale`
//! reads the replicas and selector paths, a merge patch or a PUT of the Scale writes only
//! `spec.replicas`, discovery lists `<plural>/scale`, and `kubectl scale` works. Found missing by
//! the demo's `kubectl scale machinedeployment …`. Runs on the embedded server and on
//! `KUBEBUILDER_ASSETS` alike.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use strata_envtest::TestEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_subresource_reads_and_writes_replicas_only() {
    let env = TestEnv::builder()
        .crd_dir(strata_crd_dir())
        .start()
        .await
        .unwrap();
    let ns = format!("scale-{}", std::process::id());
    let nss: Api<DynamicObject> = Api::all_with(
        env.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("", "v1", "Namespace"),
            "namespaces",
        ),
    );
    let _ = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .unwrap(),
        )
        .await;
    let gvk = GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "MachineDeployment");
    let mds: Api<DynamicObject> = Api::namespaced_with(
        env.client(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "machinedeployments"),
    );
    let md: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
        "metadata": {"name": "md"},
        "spec": {"clusterName": "c", "replicas": 2, "selector": {"matchLabels": {}},
            "template": {"spec": {"clusterName": "c", "bootstrap": {},
                "infrastructureRef": {"kind": "AzureMachineTemplate", "name": "t"}}}}
    }))
    .unwrap();
    mds.create(&PostParams::default(), &md).await.unwrap();
    mds.patch_status(
        "md",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 2, "selector": "a=b"}})),
    )
    .await
    .unwrap();

    let scale = mds.get_scale("md").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let status = scale.status.unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (2, Some("a=b"))
    );

    let scaled = mds
        .patch_scale(
            "md",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(4));
    let md = mds.get("md").await.unwrap();
    assert_eq!(md.data["spec"]["replicas"], 4);
    assert_eq!(md.data["spec"]["clusterName"], "c", "nothing else changed");
    assert_eq!(
        md.data["status"]["replicas"], 2,
        "status is not the scale's to write"
    );

    // kubectl scale finds the subresource through discovery.
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args([
            "--request-timeout=30s",
            "-n",
            &ns,
            "scale",
            "machinedeployment/md",
            "--replicas=1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mds.get("md").await.unwrap().data["spec"]["replicas"], 1);

    // A negative count is refused; the object keeps its replicas.
    let refused = mds
        .patch_scale(
            "md",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(mds.get("md").await.unwrap().data["spec"]["replicas"], 1);
}
