//! Shared server state and the axum `Router`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use serde_json::json;

use crate::requests::RequestLog;
use crate::store::Store;
use crate::{builtin, discovery, gc, handlers, lifecycle, openapi};

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Run the `ownerReferences` garbage collector (a real cluster has one; envtest has none).
    pub garbage_collection: bool,
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK.
    pub bookmark_interval: Duration,
    /// How many changes the watch history keeps before older resourceVersions are `410 Expired`.
    pub history_limit: usize,
    /// How long the history keeps a change: etcd's compaction interval (kube-apiserver's
    /// `--etcd-compaction-interval`, 5 minutes), after which kube-apiserver can serve neither a
    /// watch nor a list from an older resourceVersion (its watch cache keeps less: at least 75 s
    /// of events of each resource, `eventFreshDuration`).
    pub history_age: Duration,
    /// How many requests the request log keeps ([`AppState::requests`]); 0 where nothing reads it.
    pub request_log: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            garbage_collection: true,
            bookmark_interval: Duration::from_secs(2),
            history_limit: 100_000,
            history_age: Duration::from_secs(5 * 60),
            request_log: crate::requests::CAPACITY,
        }
    }
}

/// The state behind one server; cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

pub struct Shared {
    store: Mutex<Store>,
    pub config: Config,
    requests: RequestLog,
    /// The FlowSchemas in matching order, rebuilt after a flowcontrol object changes.
    classifier: Mutex<Option<Arc<crate::flowcontrol::Classifier>>>,
    /// The OpenAPI v3 documents built so far (rebuilt when a CRD they show changes).
    openapi: crate::openapi::Documents,
    /// HTTPS clients for admission and conversion webhooks.
    webhooks: crate::webhooks::Clients,
}

impl AppState {
    /// A fresh store with the built-in kinds and the `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease` namespaces.
    pub fn new(config: Config) -> Self {
        let mut store = Store::new(config.history_limit, config.history_age);
        let requests = RequestLog::new(config.request_log);
        for rt in builtin::resource_types() {
            store.types.insert(rt.key(), Arc::new(rt));
        }
        let state = AppState(Arc::new(Shared {
            store: Mutex::new(store),
            config,
            requests,
            classifier: Mutex::new(None),
            openapi: crate::openapi::Documents::default(),
            webhooks: crate::webhooks::Clients::default(),
        }));
        {
            let mut store = state.store();
            let ns_type = store
                .find_type("", "v1", "namespaces")
                .cloned()
                .unwrap_or_else(|| unreachable!("namespaces is a built-in type"));
            let opts = lifecycle::WriteOptions {
                manager: "kube-apiserver".into(),
                validation: lifecycle::FieldValidation::Strict,
                dry_run: false,
                managed: false,
                duplicates: Vec::new(),
                phase: Default::default(),
                apply_nulls: Vec::new(),
            };
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                let obj =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                if let Err(e) = lifecycle::create(&mut store, &ns_type, "v1", None, obj, &opts) {
                    tracing::error!(%e, "could not create namespace {ns}");
                }
            }
            crate::flowcontrol::install_defaults(&mut store);
            // kube-apiserver's own Service, read by Go test frameworks before any test; its
            // targetPort becomes the serving port once the server listens (`serve_port`).
            if let Some(mut svc_type) = store.find_type("", "v1", "services").cloned() {
                builtin::hydrate_shared(&mut svc_type);
                let svc = crate::defaults::kubernetes_service(443);
                if let Err(e) =
                    lifecycle::create(&mut store, &svc_type, "v1", Some("default"), svc, &opts)
                {
                    tracing::error!(%e, "could not create the kubernetes Service");
                }
            }
        }
        state
    }

    /// The port the server listens on: the `kubernetes` Service's targetPort, as kube-apiserver
    /// points it at its secure port.
    pub fn serve_port(&self, port: u16) {
        let key = crate::resources::ResourceKey {
            group: String::new(),
            plural: "services".into(),
        };
        self.store().rewrite_in_place(&key, |svc| {
            if svc
                .pointer("/metadata/namespace")
                .and_then(serde_json::Value::as_str)
                != Some("default")
                || svc
                    .pointer("/metadata/name")
                    .and_then(serde_json::Value::as_str)
                    != Some("kubernetes")
            {
                return None;
            }
            let mut svc = svc.clone();
            svc["spec"]["ports"][0]["targetPort"] = json!(port);
            Some(svc)
        });
    }

    pub fn config(&self) -> &Config {
        &self.0.config
    }

    /// Lock the store. Every request holds the lock only while it computes and writes.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.0
            .store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Run the namespace controller and (when enabled) the garbage collector.
    pub fn reconcile(&self, store: &mut Store) {
        gc::reconcile(store, self.0.config.garbage_collection);
    }

    /// The OpenAPI v3 documents built so far.
    pub(crate) fn openapi_documents(&self) -> &crate::openapi::Documents {
        &self.0.openapi
    }

    /// The HTTPS clients of admission and conversion webhooks.
    pub fn webhooks(&self) -> &crate::webhooks::Clients {
        &self.0.webhooks
    }

    /// The log of resource requests (verb, group, resource, user agent, code).
    pub fn requests(&self) -> &RequestLog {
        &self.0.requests
    }

    /// The UIDs of the FlowSchema and priority level a request is classified into.
    pub fn classify(&self, req: &crate::flowcontrol::Request) -> Option<(String, String)> {
        // Built under the classifier's lock, so that an invalidation after a write cannot be
        // overtaken by a build from before it.
        let mut cached = self
            .0
            .classifier
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let classifier = cached
            .get_or_insert_with(|| crate::flowcontrol::classifier(&self.store()))
            .clone();
        drop(cached);
        classifier
            .classify(req)
            .map(|(fs, pl)| (fs.to_owned(), pl.to_owned()))
    }

    /// A FlowSchema or PriorityLevelConfiguration was written: classify from the store again.
    pub fn flowcontrol_changed(&self) {
        crate::flowcontrol::mark_dangling(&mut self.store());
        *self
            .0
            .classifier
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }

    /// Drop the watch history and end every open watch with `410 Expired` (to test relisting).
    pub fn compact(&self) {
        self.store().compact();
    }
}

/// The HTTP interface of one server.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(discovery::root_paths))
        .route("/version", get(discovery::version))
        .route("/metrics", get(discovery::metrics))
        .route("/healthz", get(discovery::healthz))
        .route("/readyz", get(discovery::readyz))
        .route("/livez", get(discovery::livez))
        .route("/healthz/{*check}", get(discovery::health_check))
        .route("/readyz/{*check}", get(discovery::health_check))
        .route("/livez/{*check}", get(discovery::health_check))
        .route("/api", get(discovery::api_versions))
        .route("/apis", get(discovery::api_groups))
        .route("/apis/{group}", get(discovery::api_group))
        // kube-apiserver serves the discovery documents with a trailing slash too.
        .route("/api/", get(discovery::api_versions))
        .route("/apis/", get(discovery::api_groups))
        .route("/apis/{group}/", get(discovery::api_group))
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::index))
        .route("/openapi/v3/{*gv}", get(openapi::group_version))
        .fallback(handlers::resource_request)
        // kube-apiserver accepts request bodies up to 3 MiB (large CRDs with last-applied annotations).
        .layer(axum::extract::DefaultBodyLimit::max(3 * 1024 * 1024))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::requests::record,
        ))
        .with_state(state)
}
