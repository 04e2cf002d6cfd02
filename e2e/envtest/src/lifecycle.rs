//! What the API server does to an object on create, update and delete: server-owned metadata,
//! generation, status subresource rules, finalizers, schema processing, and built-in kind hooks.

use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use crate::apply::{self, Scope};
use crate::error::{ApiError, Cause, Target};
use crate::resources::{self, ResourceType};
use crate::store::{Object, Store, Stored, finalizers, meta_str};
use crate::{events, object_meta, schema};

/// How unknown fields are reported (`fieldValidation` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    pub fn parse(s: Option<&str>) -> Result<Self, ApiError> {
        match s {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(o) => Err(ApiError::BadRequest(format!(
                "fieldValidation parameter unsupported: {o}"
            ))),
        }
    }
}

/// Options of one write request.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub manager: String,
    pub validation: FieldValidation,
    pub dry_run: bool,
    /// `managedFields` were already computed (server-side apply).
    pub managed: bool,
    /// Keys the JSON body repeated (`decode::duplicate_fields`), reported like unknown fields.
    pub duplicates: Vec<String>,
    /// Set for a write that admission or conversion webhooks see (`crate::webhooks`).
    pub phase: Phase,
    /// The nulls a server-side apply patch left in typed fields (`schema::nulls_in_apply`):
    /// refused unless mutating admission filled them.
    pub apply_nulls: Vec<Cause>,
}

/// What a write that webhooks see does differently in each of its runs.
#[derive(Debug, Clone, Default)]
pub struct Phase {
    pub mutation: Mutation,
    /// The resourceVersion of the object the webhooks were shown (`""`: there was none); a
    /// write that finds another one stops with [`ApiError::Stale`] and starts over.
    pub based_on: Option<String>,
    /// The stored object at the request's version, converted by the CRD's webhook, to base
    /// the write on (kube-apiserver reads it from etcd through the webhook).
    pub current: Option<Object>,
}

/// What happens where kube-apiserver calls mutating webhooks: after the body is decoded,
/// pruned and defaulted, before it is validated.
#[derive(Debug, Clone, Default)]
pub enum Mutation {
    #[default]
    None,
    /// Stop there with the object as formed ([`ApiError::Formed`]).
    Stop,
    /// Apply the webhooks' patch there, then prune and default again.
    Patch(Arc<json_patch::Patch>),
}

/// The stored object a write is based on: the converted copy of a phased write when there is
/// one, and [`ApiError::Stale`] when the store has moved on from the object its webhooks saw.
pub fn based_on(
    store: &Store,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    opts: &WriteOptions,
) -> Result<Option<Object>, ApiError> {
    let stored = store.get(&rt.key(), namespace, name);
    if let Some(rv) = &opts.phase.based_on
        && stored
            .as_ref()
            .map_or("", |s| meta_str(s, "resourceVersion"))
            != rv
    {
        return Err(ApiError::Stale);
    }
    Ok(match (&opts.phase.current, stored) {
        (Some(converted), Some(_)) => Some(converted.clone()),
        (_, stored) => stored,
    })
}

fn drop_null_members(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(drop_null_members);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_null_members),
        _ => {}
    }
}

/// The mutation point of a phased write (see [`Mutation`]); `true` when it patched `obj`.
fn mutation_point(obj: &mut Value, opts: &WriteOptions) -> Result<bool, ApiError> {
    match &opts.phase.mutation {
        Mutation::None => Ok(false),
        Mutation::Stop => Err(ApiError::Formed(Box::new(obj.clone()))),
        Mutation::Patch(patch) => {
            json_patch::patch(obj, patch).map_err(|e| {
                ApiError::Internal(format!("applying the admission webhooks' patch: {e}"))
            })?;
            Ok(true)
        }
    }
}

/// The outcome of a write: the stored object, its HTTP status and warnings.
pub struct Written {
    pub object: Object,
    pub created: bool,
    pub warnings: Vec<String>,
}

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn target(rt: &ResourceType, name: &str) -> Target {
    Target {
        group: rt.group.clone(),
        kind: rt.plural.clone(),
        name: name.to_string(),
    }
}

pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid(
        Target {
            group: rt.group.clone(),
            kind: rt.kind.clone(),
            name: name.to_string(),
        },
        causes,
    )
}

fn has_generation(rt: &ResourceType) -> bool {
    !rt.builtin || crate::defaults::has_generation(rt)
}

fn validate_name(name: &str) -> Option<String> {
    (!object_meta::is_dns1123_subdomain(name)).then(|| {
        format!(
            "Invalid value: {}: {}",
            go_quote(name),
            object_meta::DNS1123_SUBDOMAIN
        )
    })
}

/// Prune, default and validate a custom resource against its schema.
fn process_schema(
    rt: &ResourceType,
    version: &str,
    obj: &mut Value,
    old: Option<&Value>,
    opts: &WriteOptions,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let name = meta_str(obj, "name").to_string();
    let Some((v, schema)) = rt
        .version(version)
        .and_then(|v| Some((v, v.schema.clone()?)))
    else {
        mutation_point(obj, opts)?;
        let causes = object_meta::validate(obj);
        return match causes.is_empty() {
            true => Ok(()),
            false => Err(invalid(rt, &name, causes)),
        };
    };
    // Go's JSON decoder leaves a field it reads `null` for at its zero value (client-go sends
    // an Event's `eventTime: null`): a built-in kind never sees those nulls.
    if rt.builtin {
        drop_null_members(obj);
    }
    let mut unknown = schema::prune(&schema, obj);
    // kube-apiserver's strict decoder for custom resources lists repeated keys first (in
    // document order), then the unknown fields, sorted; for built-in kinds its typed decoder
    // lists the unknown fields first (in document order, which a parsed `Value` no longer
    // knows: sorted here), then the repeated keys.
    unknown.sort();
    let duplicates = opts
        .duplicates
        .iter()
        .map(|d| format!("duplicate field \"{d}\""));
    let unknown = unknown.iter().map(|u| format!("unknown field \"{u}\""));
    let problems: Vec<String> = if rt.builtin {
        unknown.chain(duplicates).collect()
    } else {
        duplicates.chain(unknown).collect()
    };
    if !problems.is_empty() {
        match opts.validation {
            FieldValidation::Strict => {
                return Err(ApiError::BadRequest(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                    problems.join(", "),
                    kind = rt.kind,
                )));
            }
            FieldValidation::Warn => warnings.extend(problems),
            FieldValidation::Ignore => {}
        }
    }
    if v.has_defaults {
        *obj = schema::apply_defaults(&schema, obj);
    }
    // kube-apiserver prunes and defaults a webhook-mutated object once more.
    if mutation_point(obj, opts)? {
        schema::prune(&schema, obj);
        if v.has_defaults {
            *obj = schema::apply_defaults(&schema, obj);
        }
    }
    let still_null: Vec<Cause> = opts
        .apply_nulls
        .iter()
        .filter(|c| schema::value_at(obj, &c.field).is_none_or(Value::is_null))
        .cloned()
        .collect();
    if !still_null.is_empty() {
        return Err(invalid(rt, &name, still_null));
    }
    let mut causes = Vec::new();
    schema::validate(&schema, obj, "", &mut causes);
    // Validation ratcheting (kube-apiserver ≥ 1.30, on by default): an update may keep a value
    // that a since-tightened schema refuses, as long as it leaves that value unchanged. Type
    // errors and list uniqueness do not ratchet.
    if let Some(old) = old.filter(|_| !rt.builtin) {
        causes.retain(|c| {
            matches!(
                c.reason.as_str(),
                "FieldValueTypeInvalid" | "FieldValueDuplicate"
            ) || !schema::unchanged_at(&schema, obj, old, &c.field)
        });
    }
    // `ValidateObjectMetaAccessor` runs before the schema's validation, and never ratchets.
    causes.splice(0..0, object_meta::validate(obj));
    // A built-in kind is decoded into its Go struct before any validation: a wrong JSON type is
    // a 400 from the decoder, not a 422.
    if rt.builtin
        && let Some(c) = causes.iter().find(|c| c.reason == "FieldValueTypeInvalid")
    {
        return Err(ApiError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {}",
            schema::go_decode_error(&schema, obj, &c.field, &rt.kind),
            kind = rt.kind,
        )));
    }
    // kube-apiserver skips CEL rules after a "blocking" schema error (wrong type, required,
    // enum, too long, too many) and says so in one more cause.
    let blocking = causes.iter().any(|c| {
        matches!(
            c.reason.as_str(),
            "FieldValueNotSupported"
                | "FieldValueRequired"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
                | "FieldValueTypeInvalid"
        )
    });
    if v.has_cel && blocking {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "<nil>",
            "Invalid value: \"null\": some validation rules were not checked because the object \
             was invalid; correct the existing errors to complete validation",
        ));
    } else if let Some(cel) = &v.cel {
        causes.extend(schema::validate_cel(
            cel,
            &schema,
            obj,
            old,
            &rt.kind,
            &rt.api_version(version),
        ));
    }
    if !causes.is_empty() {
        return Err(invalid(rt, &name, causes));
    }
    Ok(())
}

/// kube-apiserver's Event validation, the part clients trip over. An Event without eventTime
/// (the old core/v1 shape) lives in its involved object's namespace, or in "default" when that
/// object is cluster-scoped; a newer one about a cluster-scoped object lives in "default" or
/// "kube-system". Through events.k8s.io/v1 the type must be Normal or Warning.
fn event_causes(obj: &Value, events_group: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ns = meta_str(obj, "namespace");
    let involved_field = if events_group {
        "/regarding/namespace"
    } else {
        "/involvedObject/namespace"
    };
    let involved = obj
        .pointer(involved_field)
        .and_then(Value::as_str)
        .unwrap_or("");
    let ok = if obj.get("eventTime").is_none_or(Value::is_null) {
        if involved.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            involved == ns
        }
    } else {
        !involved.is_empty() || ns == "default" || ns == "kube-system"
    };
    if !ok {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "involvedObject.namespace",
            format!(
                "Invalid value: {}: does not match event.namespace",
                json!(involved)
            ),
        ));
    }
    let type_ = obj.get("type").and_then(Value::as_str).unwrap_or("");
    if events_group && type_ != "Normal" && type_ != "Warning" {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "type",
            format!(
                "Invalid value: {}: has invalid value: {type_}",
                json!(type_)
            ),
        ));
    }
    causes
}

/// Built-in kind behaviour on create and update.
fn builtin_hooks(store: &Store, rt: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Secret") => {
            if let Some(Value::Object(sd)) =
                obj.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                for (k, v) in sd {
                    let text = v.as_str().unwrap_or_default().to_string();
                    obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
            if obj.get("type").is_none() {
                obj["type"] = json!("Opaque");
            }
        }
        (group @ ("" | "events.k8s.io"), "Event") => {
            let causes = event_causes(obj, group == "events.k8s.io");
            if !causes.is_empty() {
                return Err(invalid(rt, meta_str(obj, "name"), causes));
            }
        }
        ("", "Namespace") => {
            if obj.pointer("/status/phase").is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
            if obj.pointer("/spec/finalizers").is_none() {
                obj["spec"]["finalizers"] = json!(["kubernetes"]);
            }
            let name = meta_str(obj, "name").to_string();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let new_type = resources::from_crd(obj).ok_or_else(|| {
                invalid(
                    rt,
                    meta_str(obj, "name"),
                    vec![Cause::new(
                        "FieldValueRequired",
                        "spec",
                        "Required value: group, names.kind, names.plural and versions are required",
                    )],
                )
            })?;
            let expected = format!("{}.{}", new_type.plural, new_type.group);
            if meta_str(obj, "name") != expected {
                return Err(invalid(
                    rt,
                    meta_str(obj, "name"),
                    vec![Cause::new(
                        "FieldValueInvalid",
                        "metadata.name",
                        format!(
                            "Invalid value: \"{}\": must be spec.names.plural+\".\"+spec.group",
                            meta_str(obj, "name")
                        ),
                    )],
                ));
            }
            let mut causes = Vec::new();
            if let Some(versions) = obj.pointer("/spec/versions").and_then(Value::as_array) {
                // kube-apiserver validates its internal form, where a schema shared by every
                // version is `spec.validation`: errors are reported there.
                let schemas: Vec<Option<&Value>> = versions
                    .iter()
                    .map(|v| v.pointer("/schema/openAPIV3Schema"))
                    .collect();
                let shared = schemas.windows(2).all(|w| w[0] == w[1]);
                let checked: Vec<(&Value, String)> = match schemas.first() {
                    Some(Some(s)) if shared => {
                        vec![(*s, "spec.validation.openAPIV3Schema".to_string())]
                    }
                    _ => schemas
                        .iter()
                        .enumerate()
                        .filter_map(|(i, s)| {
                            s.map(|s| (s, format!("spec.versions[{i}].schema.openAPIV3Schema")))
                        })
                        .collect(),
                };
                for (s, path) in checked {
                    schema::validate_crd_schema(s, &path, &mut causes);
                    schema::validate_defaults(s, &path, &mut causes);
                    schema::validate_crd_cel(s, &path, &mut causes);
                }
            }
            if !causes.is_empty() {
                return Err(invalid(rt, meta_str(obj, "name"), causes));
            }
            let taken = store.types.get(&new_type.key()).is_some_and(|t| t.builtin);
            let storage = obj
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .and_then(|vs| {
                    vs.iter()
                        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                })
                .and_then(|v| v.get("name"))
                .cloned()
                .unwrap_or(Value::Null);
            let mut stored = obj
                .pointer("/status/storedVersions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !storage.is_null() && !stored.contains(&storage) {
                stored.push(storage);
            }
            let status = if taken { "False" } else { "True" };
            // kube-apiserver's naming and establishing controllers set these two conditions and
            // leave the others a client wrote through /status alone.
            let mut conditions: Vec<Value> = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            set_condition(
                &mut conditions,
                json!({"type": "NamesAccepted", "status": status, "reason": if taken {"NameConflict"} else {"NoConflicts"},
                       "message": if taken {"the plural name is already served"} else {"no conflicts found"}}),
            );
            set_condition(
                &mut conditions,
                json!({"type": "Established", "status": status, "reason": if taken {"NotAccepted"} else {"InitialNamesAccepted"},
                       "message": if taken {"not all names are accepted"} else {"the initial names have been accepted"}}),
            );
            let mut new_status = obj.get("status").cloned().unwrap_or_else(|| json!({}));
            new_status["acceptedNames"] = obj["spec"]["names"].clone();
            new_status["storedVersions"] = json!(stored);
            new_status["conditions"] = json!(conditions);
            obj["status"] = new_status;
        }
        _ => {}
    }
    Ok(())
}

/// Set a condition as apiextensions' `SetCRDCondition` does: replaced in place (keeping its
/// `lastTransitionTime` while its status stays the same) or appended.
fn set_condition(conditions: &mut Vec<Value>, mut new: Value) {
    let existing = conditions
        .iter_mut()
        .find(|c| c.get("type") == new.get("type"));
    match existing {
        Some(c) => {
            new["lastTransitionTime"] = match c.get("lastTransitionTime") {
                Some(t) if c.get("status") == new.get("status") => t.clone(),
                _ => json!(now()),
            };
            *c = new;
        }
        None => {
            new["lastTransitionTime"] = json!(now());
            conditions.push(new);
        }
    }
}

/// After a CRD is stored, serve (or re-serve) its resource type.
fn install_crd(store: &mut Store, crd: &Value) {
    if let Some(rt) = resources::from_crd(crd)
        && !store.types.get(&rt.key()).is_some_and(|t| t.builtin)
    {
        let key = rt.key();
        let schemas = |t: &ResourceType| -> Vec<Option<Arc<Value>>> {
            t.versions.iter().map(|v| v.schema.clone()).collect()
        };
        let changed = store
            .types
            .get(&key)
            .is_some_and(|old| schemas(old) != schemas(&rt));
        // kube-apiserver defaults objects as it reads them from etcd, so a default added to the
        // schema later shows on objects stored before. The store keeps decoded objects, so they
        // take the new defaults now, in place (no new resourceVersion, no watch event: etcd's
        // bytes do not change either).
        let defaults = rt
            .versions
            .iter()
            .find(|v| v.has_defaults)
            .and_then(|v| v.schema.clone());
        if !store.types.contains_key(&key) {
            store.start_watch_window(key.clone());
        }
        store.types.insert(key.clone(), Arc::new(rt));
        if changed && let Some(schema) = defaults {
            store.rewrite_in_place(&key, |obj| {
                let defaulted = schema::apply_defaults(&schema, obj);
                (defaulted != *obj).then_some(defaulted)
            });
        }
    }
}

fn is_namespace(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.kind == "Namespace"
}

fn is_crd(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.kind == "CustomResourceDefinition"
}

/// Create an object from a request body.
pub fn create(
    store: &mut Store,
    rt: &ResourceType,
    version: &str,
    namespace: Option<&str>,
    mut obj: Value,
    opts: &WriteOptions,
) -> Result<Written, ApiError> {
    if !obj.is_object() {
        return Err(ApiError::BadRequest(
            "the request body must be an object".into(),
        ));
    }
    object_meta::coerce(&mut obj);
    let mut warnings = Vec::new();
    let api_version = rt.api_version(version);
    if let Some(kind) = obj.get("kind").and_then(Value::as_str)
        && kind != rt.kind
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({}) does not match the expected API version ({api_version})",
            obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
        )));
    }
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(rt.kind);
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    if rt.namespaced {
        let ns = namespace.unwrap_or("");
        let body_ns = meta_str(&obj, "namespace");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        obj["metadata"]["namespace"] = json!(ns);
        let ns_key = crate::resources::ResourceKey {
            group: String::new(),
            plural: "namespaces".into(),
        };
        match store.get(&ns_key, "", ns) {
            None => {
                return Err(ApiError::NotFound(Target {
                    group: String::new(),
                    kind: "namespaces".into(),
                    name: ns.into(),
                }));
            }
            Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => {
                return Err(ApiError::Forbidden(
                    target(rt, meta_str(&obj, "name")),
                    format!(
                        "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        rt.plural,
                        meta_str(&obj, "name")
                    ),
                ));
            }
            Some(_) => {}
        }
    } else if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    if meta_str(&obj, "name").is_empty() {
        let prefix = meta_str(&obj, "generateName").to_string();
        if prefix.is_empty() {
            return Err(invalid(
                rt,
                "",
                vec![Cause::new(
                    "FieldValueRequired",
                    "metadata.name",
                    "Required value: name or generateName is required",
                )],
            ));
        }
        let suffix: String = (0..5)
            .map(|_| {
                let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
                alphabet[rand::random_range(0..alphabet.len())] as char
            })
            .collect();
        obj["metadata"]["name"] = json!(format!("{prefix}{suffix}"));
    }
    let name = meta_str(&obj, "name").to_string();
    based_on(
        store,
        rt,
        namespace.filter(|_| rt.namespaced).unwrap_or(""),
        &name,
        opts,
    )?;
    if let Some(msg) = validate_name(&name) {
        return Err(invalid(
            rt,
            &name,
            vec![Cause::new("FieldValueInvalid", "metadata.name", msg)],
        ));
    }
    if rt.has_status()
        && !rt.builtin
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    process_schema(rt, version, &mut obj, None, opts, &mut warnings)?;
    builtin_hooks(store, rt, &mut obj)?;
    // Validation comes first, as in kube-apiserver (BeforeCreate, then the storage's create): an
    // invalid object whose name is taken is a 422, not a 409.
    if store
        .get(
            &rt.key(),
            namespace.filter(|_| rt.namespaced).unwrap_or(""),
            &name,
        )
        .is_some()
    {
        return Err(ApiError::AlreadyExists(target(rt, &name)));
    }
    {
        let meta = obj["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::Internal("metadata".into()))?;
        for k in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(k);
        }
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now()));
        if has_generation(rt) {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
    }
    crate::defaults::apply(store, rt, &mut obj, None);
    crate::admission::admit(
        store,
        &crate::admission::Attributes {
            rt,
            version,
            operation: "CREATE",
            namespace: namespace.filter(|_| rt.namespaced).unwrap_or(""),
            object: &obj,
            old: None,
        },
    )?;
    if !opts.managed {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        let schema = rt.version(version).and_then(|v| v.schema.as_deref());
        apply::record_update(None, &mut obj, &opts.manager, schema, Scope::Main);
    }
    if opts.dry_run {
        return Ok(Written {
            object: Stored::new(obj),
            created: true,
            warnings,
        });
    }
    let stored = store.insert(&rt.key(), obj);
    if is_crd(rt) {
        install_crd(store, &stored);
    }
    events::mirror_write(store, rt, &stored);
    Ok(Written {
        object: stored,
        created: true,
        warnings,
    })
}

fn without(obj: &Value, keys: &[&str]) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        for k in keys {
            m.remove(*k);
        }
    }
    o
}

/// Replace an object (PUT, or the result of a PATCH) on the main resource or `/status`.
#[allow(clippy::too_many_arguments)]
pub fn update(
    store: &mut Store,
    rt: &ResourceType,
    version: &str,
    namespace: &str,
    name: &str,
    mut obj: Value,
    scope: Scope,
    require_rv: bool,
    opts: &WriteOptions,
) -> Result<Written, ApiError> {
    let old = based_on(store, rt, namespace, name, opts)?
        .ok_or_else(|| ApiError::NotFound(target(rt, name)))?;
    if !obj.is_object() {
        return Err(ApiError::BadRequest(
            "the request body must be an object".into(),
        ));
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    object_meta::coerce(&mut obj);
    let mut warnings = Vec::new();
    let body_name = meta_str(&obj, "name");
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_ns = meta_str(&obj, "namespace");
    if rt.namespaced && !body_ns.is_empty() && body_ns != namespace {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    let rv = meta_str(&obj, "resourceVersion");
    if rv.is_empty() {
        if require_rv && !rt.builtin {
            // kube-apiserver's registry names the resource (plural), not the kind, here.
            return Err(ApiError::Invalid(
                target(rt, name),
                vec![Cause::new(
                    "FieldValueInvalid",
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update",
                )],
            ));
        }
    } else if rv != meta_str(&old, "resourceVersion") {
        return Err(ApiError::Conflict(
            target(rt, name),
            "the object has been modified; please apply your changes to the latest version and try again".into(),
        ));
    }
    obj["apiVersion"] = json!(rt.api_version(version));
    obj["kind"] = json!(rt.kind);
    match scope {
        Scope::Main if rt.has_status() => match old.get("status") {
            Some(s) => obj["status"] = s.clone(),
            None => {
                if let Some(m) = obj.as_object_mut() {
                    m.remove("status");
                }
            }
        },
        Scope::Main => {}
        Scope::Status => {
            let status = obj.get("status").cloned();
            let managed = obj.pointer("/metadata/managedFields").cloned();
            obj = (*old).clone();
            match status {
                Some(s) => obj["status"] = s,
                None => {
                    if let Some(m) = obj.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            if let Some(mf) = managed.filter(|_| opts.managed) {
                obj["metadata"]["managedFields"] = mf;
            }
        }
    }
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
        "resourceVersion",
    ] {
        match old["metadata"].get(k) {
            Some(v) => obj["metadata"][k] = v.clone(),
            None => {
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove(k);
                }
            }
        }
    }
    let deleting = old.pointer("/metadata/deletionTimestamp").is_some();
    if deleting {
        let before = finalizers(&old);
        // kube-apiserver names the new finalizers as a sorted Go `[]string` literal, and checks
        // object metadata twice on update (generic and per-kind), so the cause appears twice
        // while the aggregated message keeps it once.
        let mut added: Vec<String> = finalizers(&obj)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            added.sort();
            added.dedup();
            let quoted: Vec<String> = added.iter().map(|f| go_quote(f)).collect();
            let cause = Cause::new(
                "FieldValueForbidden",
                "metadata.finalizers",
                format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    quoted.join(", ")
                ),
            );
            return Err(invalid(rt, name, vec![cause.clone(), cause]));
        }
    }
    process_schema(rt, version, &mut obj, Some(&old), opts, &mut warnings)?;
    builtin_hooks(store, rt, &mut obj)?;
    crate::defaults::apply(store, rt, &mut obj, Some(&old));
    // A policy's rules name the main resource; subresource writes (`status`) are not matched.
    if scope == Scope::Main {
        crate::admission::admit(
            store,
            &crate::admission::Attributes {
                rt,
                version,
                operation: "UPDATE",
                namespace,
                object: &obj,
                old: Some(&old),
            },
        )?;
    }
    if has_generation(rt) {
        let ignore: &[&str] = if rt.has_status() {
            &["metadata", "status"]
        } else {
            &["metadata"]
        };
        if without(&obj, ignore) != without(&old, ignore) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            obj["metadata"]["generation"] = json!(g + 1);
        }
    }
    if !opts.managed {
        let schema = rt.version(version).and_then(|v| v.schema.as_deref());
        if let Some(m) = obj["metadata"].as_object_mut() {
            match old.pointer("/metadata/managedFields") {
                Some(mf) => m.insert("managedFields".into(), mf.clone()),
                None => m.remove("managedFields"),
            };
        }
        apply::record_update(Some(&old), &mut obj, &opts.manager, schema, scope);
    }
    if obj == **old {
        return Ok(Written {
            object: old,
            created: false,
            warnings,
        });
    }
    if opts.dry_run {
        return Ok(Written {
            object: Stored::new(obj),
            created: false,
            warnings,
        });
    }
    // Namespaces keep their finalizers in spec: the namespace controller removes them once empty.
    // As kube-apiserver: the DELETED event carries the last stored state (finalizers included)
    // with the deletion's resourceVersion; the response is the object as written, still at the
    // stored resourceVersion.
    if deleting && finalizers(&obj).is_empty() && !is_namespace(rt) {
        let gone = store
            .remove(
                &rt.key(),
                meta_str(&old, "namespace"),
                meta_str(&old, "name"),
            )
            .ok_or_else(|| ApiError::Internal("object vanished".into()))?;
        after_removal(store, rt, &gone);
        obj["metadata"]["resourceVersion"] = json!(meta_str(&old, "resourceVersion"));
        return Ok(Written {
            object: Stored::new(obj),
            created: false,
            warnings,
        });
    }
    let stored = store.replace(&rt.key(), obj);
    if is_crd(rt) {
        install_crd(store, &stored);
    }
    events::mirror_write(store, rt, &stored);
    Ok(Written {
        object: stored,
        created: false,
        warnings,
    })
}

/// Follow-ups of an object leaving the store (its CRD type, its Event twin).
pub fn after_removal(store: &mut Store, rt: &ResourceType, gone: &Value) {
    events::mirror_remove(store, rt, gone);
    if is_crd(rt)
        && let Some(t) = resources::from_crd(gone)
    {
        store.remove_type(&t.key());
    }
}

/// How dependents are treated when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// The result of a delete: the object still exists (being finalized) or is gone.
pub enum Deleted {
    Pending(Object),
    Gone(Object),
}

/// Delete an object: with finalizers it gets a deletionTimestamp, otherwise it is removed.
pub fn delete(
    store: &mut Store,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    propagation: Propagation,
    preconditions: Option<&Value>,
) -> Result<Deleted, ApiError> {
    let key = rt.key();
    let old = store
        .get(&key, namespace, name)
        .ok_or_else(|| ApiError::NotFound(target(rt, name)))?;
    if let Some(p) = preconditions {
        for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            if let Some(want) = p.get(field).and_then(Value::as_str)
                && want != meta_str(&old, field)
            {
                return Err(ApiError::Conflict(
                    target(rt, name),
                    format!(
                        "Precondition failed: {what} in precondition: {want}, {what} in object meta: {}",
                        meta_str(&old, field)
                    ),
                ));
            }
        }
    }
    if rt.group.is_empty()
        && rt.kind == "Namespace"
        && matches!(name, "default" | "kube-system" | "kube-public")
    {
        return Err(ApiError::Forbidden(
            target(rt, name),
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
        ));
    }
    let mut obj = Value::clone(&old);
    let mut finalizers = finalizers(&obj);
    let extra = match propagation {
        Propagation::Foreground => Some("foregroundDeletion"),
        Propagation::Orphan => Some("orphan"),
        Propagation::Background => None,
    };
    if let Some(f) = extra
        && !finalizers.iter().any(|x| x == f)
    {
        finalizers.push(f.to_string());
    }
    let is_namespace = is_namespace(rt);
    if finalizers.is_empty() && !is_namespace {
        let gone = store
            .remove(&key, namespace, name)
            .ok_or_else(|| ApiError::Internal("object vanished".into()))?;
        after_removal(store, rt, &gone);
        return Ok(Deleted::Gone(gone));
    }
    if !finalizers.is_empty() {
        obj["metadata"]["finalizers"] = json!(finalizers);
    }
    if obj.pointer("/metadata/deletionTimestamp").is_none() {
        obj["metadata"]["deletionTimestamp"] = json!(now());
        obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if let Some(g) = obj.pointer("/metadata/generation").and_then(Value::as_i64) {
            obj["metadata"]["generation"] = json!(g + 1);
        }
        if is_namespace {
            obj["status"]["phase"] = json!("Terminating");
        }
    }
    if obj == **old {
        return Ok(Deleted::Pending(old));
    }
    Ok(Deleted::Pending(store.replace(&key, obj)))
}

/// A string as Go's `%q` writes it (what kube-apiserver's `%#v` of a `[]string` shows).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
