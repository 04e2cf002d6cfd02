//! Conformance tests driven through kube-rs. `make test` runs them twice: on the in-memory server
//! and with KUBEBUILDER_ASSETS on a real kube-apiserver + etcd. Where behaviour is identical on a
//! real API server, the test says so; the few that need the in-memory server's hooks or a
//! controller a bare control plane lacks skip there with a printed reason (`skip_if`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::runtime::watcher;
use serde_json::{Value, json};
use strata_envtest::TestEnv;

/// Poll until `f` returns `Some` (at most 30 s).
async fn eventually<T, F, Fut>(f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(v) = f().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("condition reached within 30 s")
}

/// The Widget CRD under another group and name (for tests that create and delete a CRD).
fn gadget_crd() -> Value {
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.gadget.strata.dev");
    crd["spec"]["group"] = json!("gadget.strata.dev");
    crd["spec"]["names"] = json!({"kind": "Gadget", "plural": "gadgets", "singular": "gadget"});
    crd
}

fn gadget_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("gadget.strata.dev", "v1", "Gadget"),
        "gadgets",
    )
}

/// A server (or the existing cluster) and a fresh namespace for one test.
async fn env_ns() -> (TestEnv, String) {
    in_new_namespace(env().await).await
}

/// [`env_ns`] with a cluster's garbage collector and namespace controller
/// (`TestEnvBuilder::controllers`).
async fn env_ns_with_controllers() -> (TestEnv, String) {
    in_new_namespace(env_with_controllers().await).await
}

/// The server with a cluster's garbage collector and namespace controller.
async fn env_with_controllers() -> TestEnv {
    TestEnv::builder()
        .crd(widget_crd())
        .controllers()
        .start()
        .await
        .unwrap()
}

async fn in_new_namespace(env: TestEnv) -> (TestEnv, String) {
    let ns = format!("t-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
    (env, ns)
}

async fn env() -> TestEnv {
    TestEnv::builder().crd(widget_crd()).start().await.unwrap()
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

// Identical on a real server.
#[tokio::test]
async fn discovery_serves_builtins_crds_and_health() {
    let env = env().await;
    let c = env.client();
    assert_eq!(c.apiserver_version().await.unwrap().major, "1");
    for p in ["/healthz", "/readyz", "/livez"] {
        assert_eq!(
            raw_text(&c, "GET", p, "text/plain", &[], None).await,
            (200, "ok".to_string())
        );
    }
    let core = c.list_core_api_resources("v1").await.unwrap();
    let names: Vec<&str> = core.resources.iter().map(|r| r.name.as_str()).collect();
    for want in [
        "namespaces",
        "namespaces/status",
        "secrets",
        "configmaps",
        "serviceaccounts",
        "events",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let groups = c.list_api_groups().await.unwrap();
    let gnames: Vec<&str> = groups.groups.iter().map(|g| g.name.as_str()).collect();
    for want in [
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "test.strata.dev",
    ] {
        assert!(gnames.contains(&want), "{want} missing");
    }
    let crds = c
        .list_api_group_resources("apiextensions.k8s.io/v1")
        .await
        .unwrap();
    let crd = crds
        .resources
        .iter()
        .find(|r| r.name == "customresourcedefinitions")
        .unwrap();
    assert_eq!(
        crd.short_names.as_deref(),
        Some(&["crd".to_string(), "crds".to_string()][..])
    );
    let w = c
        .list_api_group_resources("test.strata.dev/v1")
        .await
        .unwrap();
    let widgets = w.resources.iter().find(|r| r.name == "widgets").unwrap();
    assert!(widgets.namespaced);
    assert_eq!(
        widgets.short_names.as_deref(),
        Some(&["wd".to_string()][..])
    );
    assert_eq!(
        widgets.categories.as_deref(),
        Some(&["toys".to_string()][..])
    );
    for verb in [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ] {
        assert!(widgets.verbs.iter().any(|v| v == verb));
    }
    let status = w
        .resources
        .iter()
        .find(|r| r.name == "widgets/status")
        .unwrap();
    assert_eq!(status.verbs, vec!["get", "patch", "update"]);
}

// Identical on a real server (a new CRD is served once Established).
#[tokio::test]
async fn new_crd_is_established_and_discoverable_at_once() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let gadget = gadget_crd();
    let (code, crd) = raw(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        Some(gadget),
    )
    .await;
    assert_eq!(code, 201, "{crd}");
    // A real server establishes asynchronously (milliseconds); the embedded one at once.
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.gadget.strata.dev";
    let crd = eventually(|| async {
        let (_, crd) = raw(&c, "GET", path, "application/json", None).await;
        let established = crd["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
        established.then_some(crd)
    })
    .await;
    let conds = crd["status"]["conditions"].as_array().unwrap();
    for t in ["NamesAccepted", "Established"] {
        assert!(
            conds
                .iter()
                .any(|c| c["type"] == t && c["status"] == "True"),
            "{t}: {conds:?}"
        );
    }
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Gadget");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    eventually(|| async {
        let w = c
            .list_api_group_resources("gadget.strata.dev/v1")
            .await
            .ok()?;
        w.resources
            .iter()
            .any(|r| r.name == "gadgets")
            .then_some(())
    })
    .await;
    Api::<DynamicObject>::namespaced_with(c.clone(), "default", &gadget_resource())
        .create(&PostParams::default(), &{
            let mut g = DynamicObject::new("a", &gadget_resource());
            g.data = json!({"spec": {"size": 1}});
            g
        })
        .await
        .unwrap();
    // Deleting the CRD removes its objects and its discovery entry.
    let (code, _) = raw(
        &c,
        "DELETE",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.gadget.strata.dev",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200);
    eventually(|| async {
        let (code, _) = raw(
            &c,
            "GET",
            "/apis/gadget.strata.dev/v1/namespaces/default/gadgets/a",
            "application/json",
            None,
        )
        .await;
        (code == 404).then_some(())
    })
    .await;
}

// Identical on a real server.
#[tokio::test]
async fn builtin_kinds_and_default_namespaces_exist() {
    let (env, test_ns) = env_ns().await;
    let c = env.client();
    let ns: Api<Namespace> = Api::all(c.clone());
    for n in ["default", "kube-system"] {
        let got = ns.get(n).await.unwrap();
        assert_eq!(got.status.unwrap().phase.as_deref(), Some("Active"));
    }
    for (path, body) in [
        (
            &format!("/api/v1/namespaces/{test_ns}/secrets"),
            json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}),
        ),
        (
            &format!("/api/v1/namespaces/{test_ns}/serviceaccounts"),
            json!({"metadata": {"name": "sa"}}),
        ),
        (
            &format!("/api/v1/namespaces/{test_ns}/events"),
            json!({"metadata": {"name": "e"}, "involvedObject": {"name": "x", "namespace": test_ns}, "reason": "R"}),
        ),
        (
            &format!("/apis/events.k8s.io/v1/namespaces/{test_ns}/events"),
            json!({"metadata": {"name": "e2"}, "type": "Normal", "regarding": {"name": "x", "namespace": test_ns}, "reason": "R", "action": "A", "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "c", "reportingInstance": "i"}),
        ),
        (
            &format!("/apis/coordination.k8s.io/v1/namespaces/{test_ns}/leases"),
            json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
        ),
    ] {
        let (code, obj) = raw(&c, "POST", path, "application/json", Some(body)).await;
        assert_eq!(code, 201, "{path}: {obj}");
    }
    // A core/v1 Event lives in its involved object's namespace.
    let (code, refused) = raw(
        &c,
        "POST",
        &format!("/api/v1/namespaces/{test_ns}/events"),
        "application/json",
        Some(json!({"metadata": {"name": "elsewhere"}, "involvedObject": {"name": "x"}, "reason": "R"})),
    )
    .await;
    assert_eq!(code, 422, "{refused}");
    assert_eq!(
        refused["details"]["causes"][0]["field"],
        "involvedObject.namespace"
    );
    let (_, secret) = raw(
        &c,
        "GET",
        &format!("/api/v1/namespaces/{test_ns}/secrets/s"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(secret["data"]["a"], "Yg==");
    assert_eq!(secret["type"], "Opaque");
}

// Identical on a real server (messages and details as the real API server sends them).
#[tokio::test]
async fn crud_metadata_and_error_statuses() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let (code, created) = raw(
        &c,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        "application/json",
        Some(json!({"metadata": {"name": "a"}})),
    )
    .await;
    assert_eq!(code, 201);
    for field in ["uid", "creationTimestamp", "resourceVersion"] {
        assert!(created["metadata"][field].is_string(), "{field}");
    }
    let (code, dup) = raw(
        &c,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        "application/json",
        Some(json!({"metadata": {"name": "a"}})),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(dup["kind"], "Status");
    assert_eq!(dup["reason"], "AlreadyExists");
    assert_eq!(dup["message"], "configmaps \"a\" already exists");
    assert_eq!(dup["details"], json!({"name": "a", "kind": "configmaps"}));
    let (code, nf) = raw(
        &c,
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps/nope"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(nf["reason"], "NotFound");
    assert_eq!(nf["message"], "configmaps \"nope\" not found");
    // generateName
    let g: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let g = api.create(&PostParams::default(), &g).await.unwrap();
    let name = g.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    // stale resourceVersion → 409 Conflict
    let mut stale = api.get("a").await.unwrap();
    api.replace("a", &PostParams::default(), &cm("a"))
        .await
        .unwrap();
    stale.data = Some([("x".to_string(), "y".to_string())].into());
    let err = api
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("{err}")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message.contains("the object has been modified"),
        "{}",
        s.message
    );
    // 422 Invalid with causes
    let (code, inv) = raw(
        &c,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        "application/json",
        Some(json!({"metadata": {"name": "Bad_Name"}})),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(inv["reason"], "Invalid");
    assert_eq!(inv["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(inv["details"]["kind"], "ConfigMap");
    // unknown namespace → 404 for the namespace
    let (code, nsnf) = raw(
        &c,
        "POST",
        "/api/v1/namespaces/ghost/configmaps",
        "application/json",
        Some(json!({"metadata": {"name": "a"}})),
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(nsnf["message"], "namespaces \"ghost\" not found");
    // delete → gone
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
}

// Identical on a real server.
#[tokio::test]
async fn list_with_limit_continue_and_resource_versions() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i}")))
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = api.list(&lp).await.unwrap();
        assert!(page.metadata.resource_version.is_some());
        pages += 1;
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
    // deletecollection with a selector
    let (code, _) = raw(
        &env.client(),
        "DELETE",
        &format!("/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name%3Dcm-0"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        6
    );
}

// Identical on a real server.
#[tokio::test]
async fn generation_and_status_subresource() {
    let (env, ns) = env_ns().await;
    let api = widgets(&env.client(), &ns);
    let w = api
        .create(&PostParams::default(), &widget("w", 2))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(w.data["spec"]["color"], "red", "default applied");
    // status on create is dropped; status writes do not bump generation
    let st = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Up"}, "spec": {"size": 50}})),
        )
        .await
        .unwrap();
    assert_eq!(st.metadata.generation, Some(1));
    assert_eq!(st.data["status"]["phase"], "Up");
    assert_eq!(
        st.data["spec"]["size"], 2,
        "a /status write changes only status"
    );
    // main writes keep the old status and bump generation on spec changes only
    let m = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 3}, "status": {"phase": "Down"}})),
        )
        .await
        .unwrap();
    assert_eq!(m.metadata.generation, Some(2));
    assert_eq!(m.data["status"]["phase"], "Up");
    let l = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(l.metadata.generation, Some(2));
    // a no-op write keeps the resourceVersion
    let again = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version, l.metadata.resource_version);
}

// Identical on a real server.
#[tokio::test]
async fn finalizers_defer_deletion_and_cannot_be_added_while_deleting() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let mut c = cm("f");
    c.metadata.finalizers = Some(vec!["test/one".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    let deleted = api.delete("f", &DeleteParams::default()).await.unwrap();
    let pending = deleted
        .left()
        .expect("object is returned while finalizers remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let err = api
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["test/one", "test/two"]}})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no new finalizers"), "{err}");
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("f").await.unwrap().is_none());
}

// Identical on a real server.
#[tokio::test]
async fn json_patch_null_test_for_absent_finalizers_succeeds() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(&PostParams::default(), &cm("jp")).await.unwrap();
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]}
    ]))
    .unwrap();
    let out = api
        .patch("jp", &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap();
    assert_eq!(out.metadata.finalizers, Some(vec!["x/y".to_string()]));
}

// Identical on a real server.
#[tokio::test]
async fn kube_rs_controller_with_finalizer_helper() {
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::finalizer::{Event, finalizer};
    use std::sync::Arc;
    let (env, ns) = env_ns().await;
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let ctl_api = api.clone();
    let controller = tokio::spawn(async move {
        Controller::new(ctl_api.clone(), watcher::Config::default())
            .run(
                move |obj: Arc<ConfigMap>, api: Arc<Api<ConfigMap>>| async move {
                    finalizer(&api, "strata.dev/test", obj, |ev| async {
                        match ev {
                            Event::Apply(cm) => {
                                let name = cm.metadata.name.clone().unwrap();
                                if cm.data.as_ref().and_then(|d| d.get("seen")).is_none() {
                                    api.patch(
                                        &name,
                                        &PatchParams::default(),
                                        &Patch::Merge(json!({"data": {"seen": "yes"}})),
                                    )
                                    .await?;
                                }
                                Ok::<_, kube::Error>(Action::await_change())
                            }
                            Event::Cleanup(_) => Ok(Action::await_change()),
                        }
                    })
                    .await
                },
                |_, _, _| Action::requeue(Duration::from_millis(200)),
                Arc::new(ctl_api),
            )
            .for_each(|_| async {})
            .await;
    });
    api.create(&PostParams::default(), &cm("ctl"))
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let c = api.get("ctl").await.unwrap();
            if c.data.as_ref().and_then(|d| d.get("seen")).is_some() {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("controller reconciled");
    assert_eq!(
        seen.metadata.finalizers,
        Some(vec!["strata.dev/test".to_string()])
    );
    api.delete("ctl", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while api.get_opt("ctl").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("finalizer removed by the controller");
    controller.abort();
}

// Identical on a real server.
#[tokio::test]
async fn watch_events_resource_versions_bookmarks_and_timeout() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(&PostParams::default(), &cm("w1")).await.unwrap();
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    // "0": synthetic ADDED for what exists
    let mut s = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(2), "0")
        .await
        .unwrap()
        .boxed();
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(c) => assert_eq!(c.metadata.name.as_deref(), Some("w1")),
        other => panic!("{other:?}"),
    }
    // From a given RV: only later events, in order
    let mut s = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(3), &rv)
        .await
        .unwrap()
        .boxed();
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    api.delete("w1", &DeleteParams::default()).await.unwrap();
    assert!(matches!(
        s.try_next().await.unwrap().unwrap(),
        WatchEvent::Modified(_)
    ));
    assert!(matches!(
        s.try_next().await.unwrap().unwrap(),
        WatchEvent::Deleted(_)
    ));
    // timeoutSeconds ends the stream: a give-up bound far above its 3 s, and far below the
    // server's default of about 30 minutes.
    tokio::time::timeout(Duration::from_secs(60), async {
        while s.try_next().await.unwrap().is_some() {}
    })
    .await
    .expect("timeoutSeconds ends the watch");
    // Bookmarks: the embedded server sends one every 2 s; kube-apiserver's watch cache shortly
    // before the watch times out, when it knows etcd's progress. A watch may end without one, so
    // watch again, within a bound.
    let ev = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let mut s = api
                .watch(&WatchParams::default().timeout(5), &rv)
                .await
                .unwrap()
                .boxed();
            while let Some(ev) = s.try_next().await.unwrap() {
                if let WatchEvent::Bookmark(b) = ev {
                    return b;
                }
            }
        }
    })
    .await
    .expect("a bookmark arrives within 30 s");
    assert!(!ev.metadata.resource_version.is_empty());
}

// Identical on a real server whose etcd is >= 3.5 (skipped with etcd 3.4).
#[tokio::test]
async fn streaming_list_sends_initial_events_then_marked_bookmark() {
    // kube-apiserver serves streaming lists only when etcd can report watch progress on request
    // (RequestWatchProgress, etcd >= 3.5); with Debian's etcd 3.4 it answers 500.
    if let Server::Assets(dir) = server() {
        let version = etcd_version(&dir);
        if skip_if(
            version.is_none_or(|v| v < (3, 5)),
            "streaming_list_sends_initial_events_then_marked_bookmark",
            &format!(
                "sendInitialEvents needs etcd >= 3.5 (RequestWatchProgress); KUBEBUILDER_ASSETS has etcd {}",
                version.map_or("of unknown version".to_string(), |(a, b)| format!(
                    "{a}.{b}"
                ))
            ),
        ) {
            return;
        }
    }
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    for n in ["s1", "s2"] {
        api.create(&PostParams::default(), &cm(n)).await.unwrap();
    }
    let mut s = api
        .watch(&WatchParams::streaming_lists().timeout(3), "")
        .await
        .unwrap()
        .boxed();
    let mut added = Vec::new();
    loop {
        match s.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(c) => added.push(c.metadata.name.unwrap()),
            WatchEvent::Bookmark(b) => {
                assert_eq!(
                    b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(added, vec!["s1", "s2"]);
}

// Embedded only: forces history compaction.
#[tokio::test]
async fn too_old_resource_version_gives_in_stream_410_and_watcher_recovers() {
    if skip_unless_embedded(
        "too_old_resource_version_gives_in_stream_410_and_watcher_recovers",
        "forces history compaction through state().compact()",
    ) {
        return;
    }
    let env = TestEnv::builder().embedded().start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &cm("old"))
        .await
        .unwrap();
    // Raw watcher events, so a re-list (Init … InitDone) after the 410 is visible.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let wapi = api.clone();
    let w = tokio::spawn(async move {
        let mut s = watcher(wapi, watcher::Config::default()).boxed();
        while let Some(ev) = s.next().await {
            let _ = tx.send(match ev {
                Ok(watcher::Event::Init) => "init".to_string(),
                Ok(watcher::Event::InitApply(c)) => {
                    format!("init-apply {}", c.metadata.name.unwrap())
                }
                Ok(watcher::Event::InitDone) => "init-done".to_string(),
                Ok(watcher::Event::Apply(c)) => format!("apply {}", c.metadata.name.unwrap()),
                Ok(watcher::Event::Delete(c)) => format!("delete {}", c.metadata.name.unwrap()),
                Err(e) => format!("error {e}"),
            });
        }
    });
    async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a watcher event within 10 s")
            .unwrap()
    }
    assert_eq!(next(&mut rx).await, "init");
    assert_eq!(next(&mut rx).await, "init-apply old");
    assert_eq!(next(&mut rx).await, "init-done");
    // The watcher's watch is live once it sees a new object: the 410 must reach that watch.
    api.create(&PostParams::default(), &cm("probe"))
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, "apply probe");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    env.state().unwrap().compact();
    let (code, body) = raw_text(
        &env.client(),
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"),
        "application/json",
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200);
    let first: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ERROR");
    assert_eq!(first["object"]["code"], 410);
    assert_eq!(first["object"]["reason"], "Expired");
    // The live watch got 410 Expired: the watcher (after reporting the error) re-lists …
    let mut ev = next(&mut rx).await;
    while ev.starts_with("error") {
        ev = next(&mut rx).await;
    }
    assert_eq!(ev, "init", "the watcher re-lists after 410");
    assert_eq!(next(&mut rx).await, "init-apply old");
    assert_eq!(next(&mut rx).await, "init-apply probe");
    assert_eq!(next(&mut rx).await, "init-done");
    // … and then watches again from the new list.
    api.create(&PostParams::default(), &cm("new"))
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, "apply new");
    w.abort();
}

// Identical on a real server.
#[tokio::test]
async fn label_and_field_selectors_on_list_and_watch() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    for (n, app) in [("a", "web"), ("b", "db"), ("c", "cache")] {
        let mut c = cm(n);
        c.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app in (web,db)"))
                .await
                .unwrap()
        ),
        vec!["a", "b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app!=web"))
                .await
                .unwrap()
        ),
        vec!["b", "c"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app notin (web),app"))
                .await
                .unwrap()
        ),
        vec!["b", "c"]
    );
    assert!(
        names(
            api.list(&ListParams::default().labels("!app"))
                .await
                .unwrap()
        )
        .is_empty()
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=c"))
                .await
                .unwrap()
        ),
        vec!["c"]
    );
    assert_eq!(
        names(
            api.list(
                &ListParams::default()
                    .fields(&format!("metadata.namespace=={ns},metadata.name!=a"))
            )
            .await
            .unwrap()
        ),
        vec!["b", "c"]
    );
    // a watch with a selector sees an object leave the selection as DELETED
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut s = api
        .watch(
            &WatchParams::default()
                .disable_bookmarks()
                .labels("app=web")
                .timeout(3),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(c) => assert_eq!(c.metadata.name.as_deref(), Some("a")),
        other => panic!("{other:?}"),
    }
}

// Identical on a real server. The API test server answers `key=value` lists from a label index
// (store.rs): the answer must be the scan's, in every namespace, page by page, after a label
// changes or goes, and after a deletion.
#[tokio::test]
async fn a_list_selected_by_a_label_value_follows_every_write() {
    let (env, ns) = env_ns().await;
    let other = format!("{ns}-b");
    let body: Namespace = serde_json::from_value(json!({"metadata": {"name": other}})).unwrap();
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let labelled = |name: &str, labels: Value| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    };
    for (n, app) in [
        ("e", "web"),
        ("a", "web"),
        ("c", "db"),
        ("d", "web"),
        ("b", "web"),
    ] {
        api.create(
            &PostParams::default(),
            &labelled(n, json!({"app": app, "tier": "1"})),
        )
        .await
        .unwrap();
    }
    Api::<ConfigMap>::namespaced(env.client(), &other)
        .create(
            &PostParams::default(),
            &labelled("a", json!({"app": "web"})),
        )
        .await
        .unwrap();
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let web = || ListParams::default().labels("app=web");
    assert_eq!(names(api.list(&web()).await.unwrap()), ["a", "b", "d", "e"]);
    // Every requirement still holds, not only the one the index answers.
    assert_eq!(
        names(api.list(&web().labels("tier!=1")).await.unwrap()),
        Vec::<String>::new()
    );
    // Page by page: two, then the rest.
    let first = api.list(&web().limit(2)).await.unwrap();
    let cont = first.metadata.continue_.clone().unwrap();
    assert_eq!(names(first), ["a", "b"]);
    assert_eq!(
        names(
            api.list(&web().limit(2).continue_token(&cont))
                .await
                .unwrap()
        ),
        ["d", "e"]
    );
    // A changed value leaves the selection, a new one joins it, a deleted object is gone.
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "d",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": null}}})),
    )
    .await
    .unwrap();
    api.delete("e", &Default::default()).await.unwrap();
    assert_eq!(names(api.list(&web()).await.unwrap()), ["a", "c"]);
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app=db"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    // All namespaces: both `a`s.
    let all: Api<ConfigMap> = Api::all(env.client());
    let mut everywhere: Vec<_> = all
        .list(&web())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| {
            format!(
                "{}/{}",
                c.metadata.namespace.unwrap(),
                c.metadata.name.unwrap()
            )
        })
        .collect();
    everywhere.sort();
    let mut expected = [format!("{ns}/a"), format!("{ns}/c"), format!("{other}/a")];
    expected.sort();
    assert_eq!(everywhere, expected);
}

// Identical on a real server.
#[tokio::test]
async fn server_side_apply_managers_conflicts_and_list_maps() {
    let (env, ns) = env_ns().await;
    let api = widgets(&env.client(), &ns);
    let applied = |v: Value| -> DynamicObject {
        let mut w = DynamicObject::new("ssa", &widget_resource());
        w.data = v;
        w
    };
    let pp = PatchParams::apply("alice");
    // Creating through apply needs the name in the body: a `metadata` in `data` replaces the
    // object's, name included, and kube-apiserver answers 400.
    let (code, s) = raw(
        &env.client(),
        "PATCH",
        &format!("/apis/test.strata.dev/v1/namespaces/{ns}/widgets/ssa?fieldManager=alice"),
        "application/apply-patch+yaml",
        Some(json!({"apiVersion": "test.strata.dev/v1", "kind": "Widget", "metadata": {"labels": {"by": "alice"}}, "spec": {"size": 1}})),
    )
    .await;
    assert_eq!(code, 400, "{s}");
    assert_eq!(
        s["message"],
        "the name of the object (ssa based on URL) was undeterminable: name must be provided"
    );
    let out = api
        .patch("ssa", &pp, &Patch::Apply(applied(json!({"spec": {"size": 1, "ports": [{"name": "a", "port": 1}]}, "metadata": {"name": "ssa", "labels": {"by": "alice"}}}))))
        .await
        .unwrap();
    assert_eq!(
        out.metadata.managed_fields.as_ref().unwrap()[0]
            .manager
            .as_deref(),
        Some("alice")
    );
    // bob adds a port to the map-list, no conflict
    let out = api
        .patch(
            "ssa",
            &PatchParams::apply("bob"),
            &Patch::Apply(applied(
                json!({"spec": {"size": 1, "ports": [{"name": "b", "port": 2}]}}),
            )),
        )
        .await
        .unwrap();
    assert_eq!(
        out.data["spec"]["ports"],
        json!([{"name": "a", "port": 1}, {"name": "b", "port": 2}])
    );
    // bob changes alice's field: 409 naming alice, unless forced
    let err = api
        .patch(
            "ssa",
            &PatchParams::apply("bob"),
            &Patch::Apply(applied(json!({"spec": {"size": 9}}))),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else { panic!() };
    assert_eq!(s.code, 409);
    assert!(
        s.message.contains("conflict with \"alice\""),
        "{}",
        s.message
    );
    let forced = api
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(applied(
                json!({"spec": {"size": 9, "ports": [{"name": "b", "port": 2}]}}),
            )),
        )
        .await
        .unwrap();
    assert_eq!(forced.data["spec"]["size"], 9);
    // alice stops applying her label and port: both are removed
    let out = api
        .patch("ssa", &pp, &Patch::Apply(applied(json!({"spec": {}}))))
        .await
        .unwrap();
    assert!(
        out.metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key("by")),
        "{:?}",
        out.metadata.labels
    );
    assert_eq!(out.data["spec"]["ports"], json!([{"name": "b", "port": 2}]));
    // fieldManager is required
    let (code, s) = raw(&env.client(), "PATCH", &format!("/apis/test.strata.dev/v1/namespaces/{ns}/widgets/ssa"), "application/apply-patch+yaml", Some(json!({"apiVersion": "test.strata.dev/v1", "kind": "Widget", "metadata": {"name": "ssa"}}))).await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    // SSA status update
    let st = api
        .patch_status("ssa", &PatchParams::apply("ctl").force(), &Patch::Apply(applied(json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Done"}]}}))))
        .await
        .unwrap();
    assert_eq!(st.data["status"]["conditions"][0]["status"], "True");
    // Re-applying the same status is a no-op: same resourceVersion (controllers rely on this),
    // also in a later second (managedFields timestamps have second precision).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = api
        .patch_status("ssa", &PatchParams::apply("ctl").force(), &Patch::Apply(applied(json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Done"}]}}))))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        st.metadata.resource_version
    );
    assert!(
        st.metadata
            .managed_fields
            .unwrap()
            .iter()
            .any(|m| m.manager.as_deref() == Some("ctl")
                && m.subresource.as_deref() == Some("status"))
    );
}

// Identical on a real server (messages abbreviated in assertions).
#[tokio::test]
async fn schema_pruning_validation_cel_and_field_validation() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let path = &format!("/apis/test.strata.dev/v1/namespaces/{ns}/widgets");
    let body = |name: &str, spec: Value| json!({"apiVersion": "test.strata.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec});
    // Strict: 400 naming the field
    let (code, s) = raw(
        &c,
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        "application/json",
        Some(body("a", json!({"size": 1, "bogus": 1}))),
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.bogus\""),
        "{s}"
    );
    // Warn: created, pruned, warning header
    let (code, text) = raw_text(
        &c,
        "POST",
        &format!("{path}?fieldValidation=Warn"),
        "application/json",
        &[],
        Some(body("a", json!({"size": 1, "bogus": 1, "free": {"x": 1}})).to_string()),
    )
    .await;
    assert_eq!(code, 201);
    let obj: Value = serde_json::from_str(&text).unwrap();
    assert!(obj["spec"].get("bogus").is_none());
    assert_eq!(
        obj["spec"]["free"]["x"], 1,
        "preserve-unknown-fields keeps it"
    );
    // Ignore
    let (code, _) = raw(
        &c,
        "POST",
        &format!("{path}?fieldValidation=Ignore"),
        "application/json",
        Some(body("b", json!({"size": 1, "bogus": 1}))),
    )
    .await;
    assert_eq!(code, 201);
    // type, enum, min, required
    for (spec, field) in [
        (json!({"size": "x"}), "spec.size"),
        (json!({"size": 1, "color": "green"}), "spec.color"),
        (json!({"size": 0}), "spec.size"),
        (json!({}), "spec.size"),
    ] {
        let (code, s) = raw(
            &c,
            "POST",
            path,
            "application/json",
            Some(body("c", spec.clone())),
        )
        .await;
        assert_eq!(code, 422, "{spec}: {s}");
        assert_eq!(s["details"]["causes"][0]["field"], field, "{s}");
        let message = s["message"].as_str().unwrap();
        let causes = s["details"]["causes"].as_array().unwrap();
        // Type, enum and required errors block the CEL rules, which kube-apiserver reports as
        // one more cause; several causes are listed in brackets.
        let blocking = field != "spec.size" || spec["size"] != 0;
        if blocking {
            assert_eq!(causes.len(), 2, "{s}");
            assert_eq!(causes[1]["field"], "<nil>");
            assert!(
                message.starts_with(&format!(
                    "Widget.test.strata.dev \"c\" is invalid: [{field}: "
                )),
                "{s}"
            );
            assert!(
                message.contains("some validation rules were not checked"),
                "{s}"
            );
        } else {
            assert!(
                message.starts_with(&format!(
                    "Widget.test.strata.dev \"c\" is invalid: {field}: "
                )),
                "{s}"
            );
        }
    }
    // CEL transition rule
    let (code, s) = raw(
        &c,
        "PATCH",
        &format!("{path}/a"),
        "application/merge-patch+json",
        Some(json!({"spec": {"size": 5}})),
    )
    .await;
    assert_eq!(code, 200, "{s}");
    let (code, s) = raw(
        &c,
        "PATCH",
        &format!("{path}/a"),
        "application/merge-patch+json",
        Some(json!({"spec": {"size": 2}})),
    )
    .await;
    assert_eq!(code, 422, "{s}");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("size may not shrink"),
        "{s}"
    );
}

// Identical on a real cluster, whose garbage collector (kube-controller-manager) is asynchronous,
// hence `eventually`; skipped on a bare kube-apiserver + etcd, which has none.
#[tokio::test]
async fn garbage_collection_propagation_policies() {
    if skip_without_controllers(
        "garbage_collection_propagation_policies",
        "garbage collector",
    ) {
        return;
    }
    let (env, ns) = env_ns_with_controllers().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let owned_by = |name: &str, owner: &ConfigMap| -> ConfigMap {
        let mut c = cm(name);
        c.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: owner.metadata.name.clone().unwrap(),
                uid: owner.metadata.uid.clone().unwrap(),
                block_owner_deletion: Some(true),
                ..Default::default()
            },
        ]);
        c
    };
    // Background
    let o = api
        .create(&PostParams::default(), &cm("bg-owner"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned_by("bg-dep", &o))
        .await
        .unwrap();
    api.delete("bg-owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(|| async { api.get_opt("bg-dep").await.unwrap().is_none().then_some(()) }).await;
    // Orphan
    let o = api
        .create(&PostParams::default(), &cm("or-owner"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned_by("or-dep", &o))
        .await
        .unwrap();
    api.delete("or-owner", &DeleteParams::orphan())
        .await
        .unwrap();
    eventually(|| async {
        api.get_opt("or-owner")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    eventually(|| async {
        let dep = api.get("or-dep").await.unwrap();
        dep.metadata.owner_references.is_none().then_some(())
    })
    .await;
    // Foreground: owner waits for a dependent with a finalizer
    let o = api
        .create(&PostParams::default(), &cm("fg-owner"))
        .await
        .unwrap();
    let mut d = owned_by("fg-dep", &o);
    d.metadata.finalizers = Some(vec!["test/hold".into()]);
    api.create(&PostParams::default(), &d).await.unwrap();
    api.delete("fg-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let owner = api.get("fg-owner").await.unwrap();
    assert!(owner.metadata.deletion_timestamp.is_some());
    assert!(
        owner
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    eventually(|| async {
        let dep = api.get("fg-dep").await.unwrap();
        dep.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await;
    api.patch(
        "fg-dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(|| async { api.get_opt("fg-dep").await.unwrap().is_none().then_some(()) }).await;
    eventually(|| async {
        api.get_opt("fg-owner")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

// Identical on a bare kube-apiserver + etcd (KUBEBUILDER_ASSETS: no controller-manager, so no
// GC), which is what the switch imitates; skipped against an existing cluster.
#[tokio::test]
async fn garbage_collection_can_be_switched_off() {
    if skip_if(
        server() == Server::Existing,
        "garbage_collection_can_be_switched_off",
        "an existing cluster may run a garbage collector",
    ) {
        return;
    }
    let env = TestEnv::builder()
        .garbage_collection(false)
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let o = api
        .create(&PostParams::default(), &cm("owner"))
        .await
        .unwrap();
    let mut d = cm("dep");
    d.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: o.metadata.uid.unwrap(),
            ..Default::default()
        },
    ]);
    api.create(&PostParams::default(), &d).await.unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert!(
        api.get_opt("dep").await.unwrap().is_some(),
        "no GC: the dependent stays"
    );
}

// Identical on a real cluster (the namespace controller of kube-controller-manager empties a
// terminating namespace; polled with a bound); skipped on a bare kube-apiserver + etcd.
#[tokio::test]
async fn namespace_deletion_removes_its_objects() {
    if skip_without_controllers(
        "namespace_deletion_removes_its_objects",
        "namespace controller",
    ) {
        return;
    }
    let env = TestEnv::builder()
        .crd(widget_crd())
        .namespace("doomed")
        .controllers()
        .start()
        .await
        .unwrap();
    let c = env.client();
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "doomed");
    api.create(&PostParams::default(), &cm("x")).await.unwrap();
    widgets(&c, "doomed")
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let ns: Api<Namespace> = Api::all(c.clone());
    ns.delete("doomed", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while ns.get_opt("doomed").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("namespace goes away");
    let (code, _) = raw(
        &c,
        "GET",
        "/api/v1/namespaces/doomed/configmaps/x",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 404);
    let err = ns
        .delete("default", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("may not be deleted"));
}

// Identical on a real server.
#[tokio::test]
async fn strategic_merge_patch_for_builtins() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    api.create(&PostParams::default(), &cm("smp"))
        .await
        .unwrap();
    let out = api
        .patch(
            "smp",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"data": {"k": null, "n": "1"}, "metadata": {"finalizers": ["a/b"]}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        out.data.unwrap(),
        [("n".to_string(), "1".to_string())].into()
    );
    assert_eq!(out.metadata.finalizers, Some(vec!["a/b".to_string()]));
    let (code, _) = raw(
        &c,
        "PATCH",
        &format!("/apis/test.strata.dev/v1/namespaces/{ns}/widgets/x"),
        "application/strategic-merge-patch+json",
        Some(json!({})),
    )
    .await;
    assert!(code == 415 || code == 404, "{code}");
}

// Identical on a real server (columns come from additionalPrinterColumns).
#[tokio::test]
async fn table_output_from_printer_columns() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    widgets(&c, &ns)
        .create(&PostParams::default(), &widget("t", 7))
        .await
        .unwrap();
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let (code, text) = raw_text(
        &c,
        "GET",
        &format!("/apis/test.strata.dev/v1/namespaces/{ns}/widgets"),
        "application/json",
        &[("accept", accept)],
        None,
    )
    .await;
    assert_eq!(code, 200);
    let t: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // No Age: the CRD defines its own columns (kube-apiserver adds Age only when it has none).
    assert_eq!(cols, vec!["Name", "Size", "Ready", "Color"]);
    assert_eq!(t["rows"][0]["cells"][0], "t");
    assert_eq!(t["rows"][0]["cells"][1], 7);
    assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "t");
}

// Identical on a real server.
#[tokio::test]
async fn openapi_v3_has_field_validation_and_gvk_on_patch() {
    let env = env().await;
    let c = env.client();
    // kube-apiserver publishes a new CRD's OpenAPI asynchronously (about a second after it is
    // Established); the embedded server at once.
    let doc = eventually(|| async {
        let (code, index) = raw(&c, "GET", "/openapi/v3", "application/json", None).await;
        assert_eq!(code, 200);
        let url = index["paths"]["apis/test.strata.dev/v1"]["serverRelativeURL"].as_str()?;
        let (code, doc) = raw(&c, "GET", url, "application/json", None).await;
        assert_eq!(code, 200);
        doc["components"]["schemas"]["dev.strata.test.v1.Widget"]
            .is_object()
            .then_some(doc)
    })
    .await;
    let item =
        &doc["paths"]["/apis/test.strata.dev/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert_eq!(
        item["x-kubernetes-group-version-kind"],
        json!({"group": "test.strata.dev", "version": "v1", "kind": "Widget"})
    );
    assert!(
        item["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
    );
    assert!(doc["components"]["schemas"]["dev.strata.test.v1.Widget"]["x-kubernetes-group-version-kind"].is_array());
    let (code, v2) = raw(&c, "GET", "/openapi/v2", "application/json", None).await;
    assert_eq!(code, 200);
    assert_eq!(v2["swagger"], "2.0");
    let (code, proto) = raw_text(
        &c,
        "GET",
        "/openapi/v2",
        "application/json",
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )],
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert!(proto.starts_with("\n\u{3}2.0\u{12}"), "{proto:?}");
}

// Embedded only: many servers in one process, each with its own store.
#[tokio::test]
async fn servers_are_independent() {
    if skip_unless_embedded(
        "servers_are_independent",
        "several in-memory servers in one process",
    ) {
        return;
    }
    let a = TestEnv::builder().embedded().start().await.unwrap();
    let b = TestEnv::builder()
        .use_existing_cluster(false)
        .start()
        .await
        .unwrap();
    assert_ne!(a.url(), b.url());
    Api::<ConfigMap>::namespaced(a.client(), "default")
        .create(&PostParams::default(), &cm("only-a"))
        .await
        .unwrap();
    assert!(
        Api::<ConfigMap>::namespaced(b.client(), "default")
            .get_opt("only-a")
            .await
            .unwrap()
            .is_none()
    );
    let kc = std::fs::read_to_string(a.kubeconfig_path()).unwrap();
    assert!(kc.contains(a.url()));
    let path = a.kubeconfig_path().to_path_buf();
    drop(a);
    assert!(!path.exists(), "kubeconfig removed on drop");
}

// Identical on a real server: a CRD whose defaults break its own schema is refused.
#[tokio::test]
async fn crd_with_invalid_default_is_refused() {
    let env = TestEnv::start().await.unwrap();
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]
        ["default"] = json!(0);
    let (code, s) = raw(
        &env.client(),
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        Some(crd),
    )
    .await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["details"]["causes"][0]["field"],
        "spec.validation.openAPIV3Schema.properties[spec].properties[size].default"
    );
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .ends_with("default: Invalid value: 0:  in body should be greater than or equal to 1"),
        "{s}"
    );
}

// Identical on a real server: SSA status writes from a controller settle (a no-op apply does not
// bump the resourceVersion, so the controller is not woken again).
#[tokio::test]
async fn kube_rs_controller_ssa_status_settles() {
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::finalizer::{Event, finalizer};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (env, ns) = env_ns().await;
    let api = widgets(&env.client(), &ns);
    let count = Arc::new(AtomicUsize::new(0));
    let ctx = (Arc::new(api.clone()), count.clone());
    let controller = tokio::spawn(
        Controller::new_with(api.clone(), watcher::Config::default(), widget_resource())
            .run(
                |obj: Arc<DynamicObject>, ctx: Arc<(Arc<Api<DynamicObject>>, Arc<AtomicUsize>)>| async move {
                    ctx.1.fetch_add(1, Ordering::SeqCst);
                    let api = ctx.0.clone();
                    finalizer(&api, "strata.dev/test", obj, |ev| async {
                        match ev {
                            Event::Apply(w) => {
                                let mut status = DynamicObject::new(&w.metadata.name.clone().unwrap(), &widget_resource());
                                status.data = json!({"status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True", "reason": "Done"}]}});
                                api.patch_status(
                                    &w.metadata.name.clone().unwrap(),
                                    &PatchParams::apply("strata-test").force(),
                                    &Patch::Apply(status),
                                )
                                .await?;
                                Ok::<_, kube::Error>(Action::await_change())
                            }
                            Event::Cleanup(_) => Ok(Action::await_change()),
                        }
                    })
                    .await
                },
                |_, _, _| Action::requeue(Duration::from_millis(200)),
                Arc::new(ctx),
            )
            .for_each(|_| async {}),
    );
    api.create(&PostParams::default(), &widget("c", 1))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let w = api.get("c").await.unwrap();
            if w.data["status"]["phase"] == "Ready" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("status applied");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = count.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        count.load(Ordering::SeqCst),
        settled,
        "the controller keeps reconciling"
    );
    assert!(settled <= 6, "{settled} reconciles");
    api.delete("c", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while api.get_opt("c").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("finalizer removed");
    controller.abort();
}

// Identical on a real server: events.k8s.io/v1 and core/v1 Events are two views of one storage.
#[tokio::test]
async fn recorder_events_are_visible_as_core_events() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let (env, ns) = env_ns().await;
    let c = env.client();
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let target = cms
        .create(&PostParams::default(), &cm("target"))
        .await
        .unwrap();
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: target.metadata.name.clone(),
        namespace: Some(ns.clone()),
        uid: target.metadata.uid.clone(),
        ..Default::default()
    };
    let recorder = Recorder::new(
        c.clone(),
        Reporter {
            controller: "strata-test".into(),
            instance: None,
        },
    );
    let ev = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("all good".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let core: Api<CoreEvent> = Api::namespaced(c.clone(), &ns);
    let list = core
        .list(&ListParams::default().fields("involvedObject.name=target"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1, "{:?}", list.items);
    let e = &list.items[0];
    assert_eq!(e.message.as_deref(), Some("all good"));
    assert_eq!(e.reason.as_deref(), Some("Reconciled"));
    assert_eq!(e.reporting_component.as_deref(), Some("strata-test"));
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(Some(2)));
    core.delete(
        e.metadata.name.as_deref().unwrap(),
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    let (code, _) = raw(
        &c,
        "GET",
        &format!(
            "/apis/events.k8s.io/v1/namespaces/{ns}/events/{}",
            e.metadata.name.as_deref().unwrap()
        ),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 404);
}

// Embedded only: KUBEBUILDER_ASSETS without the binaries fails loudly, naming the missing file,
// never silently falling back to the embedded server.
#[tokio::test]
async fn kubebuilder_assets_without_binaries_names_the_missing_file() {
    let err = TestEnv::builder()
        .use_existing_cluster(false)
        .kubebuilder_assets("/opt/kubebuilder/bin")
        .start()
        .await
        .err()
        .expect("start fails");
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "KUBEBUILDER_ASSETS=/opt/kubebuilder/bin: /opt/kubebuilder/bin/kube-apiserver is missing"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("must contain the `kube-apiserver` and `etcd` binaries"),
        "{msg}"
    );
}

// Identical on a real server: built-in kinds prune and refuse unknown fields too.
#[tokio::test]
async fn builtin_unknown_fields_follow_field_validation() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let body =
        |name: &str| json!({"metadata": {"name": name}, "data": {"a": "b"}, "dat": {"typo": "x"}});
    let (code, s) = raw(
        &c,
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        "application/json",
        Some(body("strict")),
    )
    .await;
    assert_eq!(code, 400, "{s}");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"dat\""),
        "{s}"
    );
    let (code, text) = raw_text(
        &c,
        "POST",
        &path,
        "application/json",
        &[],
        Some(body("warn").to_string()),
    )
    .await;
    assert_eq!(code, 201, "{text}");
    let obj: Value = serde_json::from_str(&text).unwrap();
    assert!(obj.get("dat").is_none(), "{obj}");
    let (code, s) = raw(
        &c,
        "POST",
        &path,
        "application/json",
        Some(json!({"metadata": {"name": "typed"}, "data": {"a": 1}})),
    )
    .await;
    // Built-ins are decoded into Go structs first: a wrong type is the decoder's 400.
    assert_eq!(code, 400, "{s}");
    assert_eq!(
        s["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal \
         number into Go struct field ConfigMap.data of type string"
    );
}

/// The `Status` of a failed kube-rs call: (code, reason).
fn api_error(err: kube::Error) -> (u16, String) {
    let kube::Error::Api(s) = err else {
        panic!("not an API error: {err}")
    };
    (s.code, s.reason.clone())
}

// Identical on a real server.
#[tokio::test]
async fn server_side_apply_with_stale_resource_version_conflicts() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let pp = PatchParams::apply("alice");
    let body = |rv: Option<&str>, v: &str| {
        let mut b = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "rv"}, "data": {"k": v}});
        if let Some(rv) = rv {
            b["metadata"]["resourceVersion"] = json!(rv);
        }
        b
    };
    let first = api
        .patch("rv", &pp, &Patch::Apply(body(None, "1")))
        .await
        .unwrap();
    let stale = first.metadata.resource_version.unwrap();
    let second = api
        .patch("rv", &pp, &Patch::Apply(body(Some(&stale), "2")))
        .await
        .unwrap();
    assert_eq!(second.data.unwrap()["k"], "2");
    let err = api
        .patch("rv", &pp, &Patch::Apply(body(Some(&stale), "3")))
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (409, "Conflict".to_string()));
    assert_eq!(api.get("rv").await.unwrap().data.unwrap()["k"], "2");
}

// Identical on a real server.
#[tokio::test]
async fn server_side_apply_with_another_name_is_bad_request() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let err = api
        .patch(
            "url-name",
            &PatchParams::apply("alice"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "body-name"}, "data": {"k": "v"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (400, "BadRequest".to_string()));
    assert!(api.get_opt("url-name").await.unwrap().is_none());
    assert!(api.get_opt("body-name").await.unwrap().is_none());
}

// Identical on a real server.
#[tokio::test]
async fn delete_collection_dry_run_deletes_nothing() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    for n in ["d1", "d2"] {
        api.create(&PostParams::default(), &cm(n)).await.unwrap();
    }
    let dp = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    let out = api
        .delete_collection(&dp, &ListParams::default())
        .await
        .unwrap();
    let names: Vec<String> = out
        .left()
        .expect("the would-be-deleted objects")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    assert_eq!(names, vec!["d1", "d2"]);
    for n in ["d1", "d2"] {
        assert!(api.get_opt(n).await.unwrap().is_some(), "{n} was deleted");
    }
    // Also with dryRun only in the query.
    let (code, body) = raw(
        &env.client(),
        "DELETE",
        &format!("/api/v1/namespaces/{ns}/configmaps?dryRun=All"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(api.get_opt("d1").await.unwrap().is_some());
}

// Identical on a real cluster (the namespace controller of kube-controller-manager empties a
// terminating namespace; polled with a bound); skipped on a bare kube-apiserver + etcd.
#[tokio::test]
async fn updating_a_terminating_namespace_keeps_it_until_its_objects_are_gone() {
    if skip_without_controllers(
        "updating_a_terminating_namespace_keeps_it_until_its_objects_are_gone",
        "namespace controller",
    ) {
        return;
    }
    let env = env_with_controllers().await;
    let ns = format!("t-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let nsapi = Api::<Namespace>::all(env.client());
    let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    nsapi.create(&PostParams::default(), &body).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let mut c = cm("held");
    c.metadata.finalizers = Some(vec!["test/hold".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    nsapi.delete(&ns, &DeleteParams::default()).await.unwrap();
    eventually(|| async {
        let c = api.get_opt("held").await.unwrap()?;
        c.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    nsapi
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    let n = nsapi
        .get_opt(&ns)
        .await
        .unwrap()
        .expect("a terminating namespace stays while it has objects");
    assert!(n.metadata.deletion_timestamp.is_some());
    assert_eq!(n.status.unwrap().phase.as_deref(), Some("Terminating"));
    assert!(api.get_opt("held").await.unwrap().is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(|| async { nsapi.get_opt(&ns).await.unwrap().is_none().then_some(()) }).await;
}

// Identical on a real server.
#[tokio::test]
async fn delete_on_status_subresource_is_method_not_allowed() {
    let (env, ns) = env_ns().await;
    let w = widgets(&env.client(), &ns);
    w.create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let (code, body) = raw(
        &env.client(),
        "DELETE",
        &format!("/apis/test.strata.dev/v1/namespaces/{ns}/widgets/w/status"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 405, "{body}");
    assert_eq!(body["reason"], "MethodNotAllowed", "{body}");
    assert!(w.get_opt("w").await.unwrap().is_some());
}

fn owned_by_missing(name: &str) -> ConfigMap {
    let mut c = cm(name);
    c.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "never-existed".into(),
            uid: uuid::Uuid::new_v4().to_string(),
            ..Default::default()
        },
    ]);
    c
}

// Identical on a real cluster (its GC is asynchronous, hence `eventually`); skipped on a bare
// kube-apiserver + etcd, which has no GC.
#[tokio::test]
async fn garbage_collection_deletes_object_created_with_missing_owner() {
    if skip_without_controllers(
        "garbage_collection_deletes_object_created_with_missing_owner",
        "garbage collector",
    ) {
        return;
    }
    let (env, ns) = env_ns_with_controllers().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(&PostParams::default(), &owned_by_missing("orphan"))
        .await
        .unwrap();
    eventually(|| async { api.get_opt("orphan").await.unwrap().is_none().then_some(()) }).await;
}

// Identical on a bare kube-apiserver + etcd (KUBEBUILDER_ASSETS: no controller-manager, so no
// GC), which is what the switch imitates; skipped against an existing cluster.
#[tokio::test]
async fn without_garbage_collection_object_with_missing_owner_stays() {
    if skip_if(
        server() == Server::Existing,
        "without_garbage_collection_object_with_missing_owner_stays",
        "an existing cluster may run a garbage collector",
    ) {
        return;
    }
    let env = TestEnv::builder()
        .garbage_collection(false)
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &owned_by_missing("orphan"))
        .await
        .unwrap();
    assert!(api.get_opt("orphan").await.unwrap().is_some());
}

// Identical on a real server.
#[tokio::test]
async fn removing_the_last_finalizer_emits_only_deleted() {
    let (env, ns) = env_ns().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let mut c = cm("fin");
    c.metadata.finalizers = Some(vec!["test/one".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    let pending = api
        .delete("fin", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    let rv = pending.metadata.resource_version.unwrap();
    let mut s = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(3), &rv)
        .await
        .unwrap()
        .boxed();
    api.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let mut events = Vec::new();
    while let Some(ev) = s.try_next().await.unwrap() {
        events.push(ev);
    }
    assert_eq!(events.len(), 1, "{events:?}");
    let WatchEvent::Deleted(gone) = &events[0] else {
        panic!("{events:?}")
    };
    // The last stored state, finalizer included (as kube-apiserver sends it).
    assert_eq!(
        gone.metadata.finalizers.as_deref(),
        Some(&["test/one".to_string()][..]),
        "{gone:?}"
    );
    assert!(gone.metadata.deletion_timestamp.is_some());
    assert!(gone.metadata.resource_version.as_deref() != Some(rv.as_str()));
}

// Identical on a real server: a CRD that is not a structural schema, or whose CEL rule does not
// parse, is refused naming the schema field, with kube-apiserver's messages.
#[tokio::test]
async fn crd_with_structural_or_cel_errors_is_refused() {
    let env = env().await;
    let c = env.client();
    let base = "spec.validation.openAPIV3Schema.properties[spec].properties[c]";
    let cases = [
        (
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "properties": {"type": {"type": "string"}}}}),
            format!("{base}.items.properties[type].default"),
            "Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
        ),
        (
            json!({"type": "array", "x-kubernetes-list-type": "map",
                "items": {"type": "object", "properties": {"type": {"type": "string"}}}}),
            format!("{base}.x-kubernetes-list-map-keys"),
            "Required value: must not be empty if x-kubernetes-list-type is map",
        ),
        (
            json!({"properties": {"a": {"type": "string"}}}),
            format!("{base}.type"),
            "Required value: must not be empty for specified object fields",
        ),
        (
            json!({"type": "string", "x-kubernetes-validations": [{"rule": "self.("}]}),
            format!("{base}.x-kubernetes-validations[0].rule"),
            "Invalid value: apiextensions.ValidationRule{Rule:\"self.(\", Message:\"\"",
        ),
    ];
    for (prop, field, message) in cases {
        let mut crd = gadget_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["c"] = prop.clone();
        let (code, s) = raw(
            &c,
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "application/json",
            Some(crd),
        )
        .await;
        assert_eq!(code, 422, "{prop}: {s}");
        let causes = s["details"]["causes"].as_array().unwrap();
        assert!(
            causes.iter().any(|c| c["field"] == field.as_str()
                && c["message"].as_str().unwrap().starts_with(message)),
            "{prop}: wanted {field}: {message}; got {s}"
        );
    }
}
