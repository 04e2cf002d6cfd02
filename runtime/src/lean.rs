//! Watched objects decoded without `metadata.managedFields`: [`Lean`] wraps any typed object
//! and passes over that list while the JSON is read, instead of building it for
//! [`crate::cache::trim`] to drop.
//!
//! Server-side apply's field sets are the largest part of a CR's metadata, and each status write
//! sends the whole object to every watch again: decoding them (`ManagedFieldsEntry`) was 4.3 %
//! of strata-operator's CPU at 1,000 clusters (docs/performance.md, "Decoding").
//! Kubernetes cannot leave them out of a watch, and k8s-openapi's `ObjectMeta` decodes every
//! field it has, so the decoder given to the object's own `Deserialize` hides that one key: the
//! top-level map's `metadata` value is read through a map that skips `managedFields` (serde's
//! `IgnoredAny`: no allocation). Nothing else changes: every other key and value goes to the
//! object's own decoding as it came.
//!
//! The API server answers every write with the whole object, which kube's `Api` decodes; most
//! of Strata's writes do not read that answer. [`Unread`] is the answer type for those: the
//! JSON is checked and passed over, nothing built.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher::Event;
use serde::Deserialize;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// `K`, decoded without `metadata.managedFields`; its API is `K`'s (`Api<Lean<K>>` watches the
/// same objects).
#[derive(Clone, Debug, PartialEq)]
pub struct Lean<K>(pub K);

impl<K> Lean<K> {
    /// A watch event of lean objects as one of `K`.
    pub fn event(event: Event<Lean<K>>) -> Event<K> {
        map_event(event, |Lean(o)| o)
    }
}

/// A watch event with `f` applied to its object (a wrapper's event as its object's).
pub fn map_event<A, B>(event: Event<A>, f: impl FnOnce(A) -> B) -> Event<B> {
    match event {
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::InitDone => Event::InitDone,
    }
}

/// An object's metadata decoded without `managedFields`, for a decoder of its own (the
/// translator's `LeanObject`).
pub struct LeanMeta(pub ObjectMeta);

impl<'de> Deserialize<'de> for LeanMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ObjectMeta::deserialize(Filtered {
            inner: d,
            level: Level::Meta,
        })
        .map(LeanMeta)
    }
}

impl<'de, K: Deserialize<'de>> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::deserialize(Filtered {
            inner: d,
            level: Level::Object,
        })
        .map(Lean)
    }
}

/// `Resource` for a wrapper of `K`: `K`'s API (kind, group, version, plural: the same URLs),
/// its metadata reached through `$meta` / `$meta_mut` of `self`.
macro_rules! resource_of {
    ($wrapper:ident, |$this:ident| $meta:expr, $meta_mut:expr) => {
        impl<K: Resource> Resource for $wrapper<K> {
            type DynamicType = K::DynamicType;
            type Scope = K::Scope;

            fn kind(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                K::kind(dt)
            }
            fn group(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                K::group(dt)
            }
            fn version(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                K::version(dt)
            }
            fn plural(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                K::plural(dt)
            }
            fn api_version(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                K::api_version(dt)
            }
            fn meta(&self) -> &ObjectMeta {
                let $this = self;
                $meta
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                let $this = self;
                $meta_mut
            }
        }
    };
}

resource_of!(Lean, |this| this.0.meta(), this.0.meta_mut());

/// The answer to a write whose body nobody reads: an `Api<Unread<K>>` writes `K`'s objects
/// (same URLs) and passes over the object the API server sends back (serde's `IgnoredAny`:
/// the JSON is read, nothing is built). Its metadata is empty.
pub struct Unread<K> {
    meta: ObjectMeta,
    of: PhantomData<fn() -> K>,
}

impl<K> Clone for Unread<K> {
    fn clone(&self) -> Self {
        Unread {
            meta: self.meta.clone(),
            of: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Unread<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Unread")
    }
}

impl<'de, K> Deserialize<'de> for Unread<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d)?;
        Ok(Unread {
            meta: ObjectMeta::default(),
            of: PhantomData,
        })
    }
}

resource_of!(Unread, |this| &this.meta, &mut this.meta);

/// Which map a [`Filtered`] decoder reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The object: its `metadata` value is read at [`Level::Meta`].
    Object,
    /// The metadata: `managedFields` is passed over.
    Meta,
}

/// A decoder that hands the object's own decoding a map without `managedFields` in its
/// metadata; any value that is not a map goes through unchanged.
struct Filtered<D> {
    inner: D,
    level: Level,
}

/// Forwards decoding methods to the inner decoder, their arguments and visitor unchanged.
macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method($($arg,)* visitor)
        }
    )*};
}

/// The same, the visitor wrapped to filter the map it is given ([`FilteredVisitor`]).
macro_rules! filter {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            let level = self.level;
            self.inner.$method($($arg,)* FilteredVisitor { visitor, level })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filtered<D> {
    type Error = D::Error;

    // A map may be filtered: as a map, a struct, or an optional one (k8s-openapi's objects read
    // their metadata as an `Option<ObjectMeta>`).
    filter!(
        deserialize_map(),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_option(),
    );

    forward!(
        deserialize_any(),
        deserialize_bool(),
        deserialize_i8(),
        deserialize_i16(),
        deserialize_i32(),
        deserialize_i64(),
        deserialize_i128(),
        deserialize_u8(),
        deserialize_u16(),
        deserialize_u32(),
        deserialize_u64(),
        deserialize_u128(),
        deserialize_f32(),
        deserialize_f64(),
        deserialize_char(),
        deserialize_str(),
        deserialize_string(),
        deserialize_bytes(),
        deserialize_byte_buf(),
        deserialize_unit(),
        deserialize_seq(),
        deserialize_identifier(),
        deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    );

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// The object's own visitor, given a [`FilteredMap`] when the value is a map (or an optional
/// one).
struct FilteredVisitor<V> {
    visitor: V,
    level: Level,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilteredVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Filtered {
            inner: d,
            level: self.level,
        })
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(FilteredMap {
            map,
            level: self.level,
            metadata_next: false,
        })
    }
}

/// A map whose `managedFields` key is passed over ([`Level::Meta`]), or whose `metadata` value
/// is read at that level ([`Level::Object`]).
struct FilteredMap<A> {
    map: A,
    level: Level,
    /// The key just read was the object's `metadata`.
    metadata_next: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilteredMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            let name = match &key {
                Key::Borrowed(k) => *k,
                Key::Owned(k) => k.as_str(),
            };
            if self.level == Level::Meta && name == "managedFields" {
                self.map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.metadata_next = self.level == Level::Object && name == "metadata";
            return match key {
                Key::Borrowed(k) => seed.deserialize(BorrowedStrDeserializer::new(k)),
                Key::Owned(k) => seed.deserialize(StringDeserializer::new(k)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.map.next_value_seed(MetaSeed(seed))
        } else {
            self.map.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// Decodes the metadata value at [`Level::Meta`].
struct MetaSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetaSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Filtered {
            inner: d,
            level: Level::Meta,
        })
    }
}

/// A map key as read: borrowed from the input where it holds no escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, k: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(k))
            }
            fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(k.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, k: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(k))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::WatchEvent;

    /// A ConfigMap as the API server sends it: every metadata field, server-side apply's field
    /// sets, data, and a `managedFields` key outside the metadata (data is the user's: kept).
    const CONFIG_MAP: &str = r#"{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "c", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
            "generation": 3, "creationTimestamp": "2026-11-29T10:00:00Z",
            "labels": {"team": "a"}, "annotations": {"strata.dev/identity": "ns/id"},
            "finalizers": ["azure.strata.dev/finalizer"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Secret", "name": "s",
                "uid": "o-1", "controller": true}],
            "managedFields": [{"manager": "strata-operator", "operation": "Update",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]
        },
        "data": {"a": "1", "managedFields": "mine"}
    }"#;

    #[test]
    fn decodes_as_the_object_does_but_without_managed_fields() {
        let lean: Lean<ConfigMap> = serde_json::from_str(CONFIG_MAP).unwrap();
        let mut full: ConfigMap = serde_json::from_str(CONFIG_MAP).unwrap();
        assert!(
            full.metadata.managed_fields.is_some(),
            "the full decode keeps them"
        );
        full.metadata.managed_fields = None;
        assert_eq!(lean.0, full);
        assert_eq!(lean.0.data.unwrap()["managedFields"], "mine");
    }

    #[test]
    fn a_derived_object_reads_its_metadata_lean_too() {
        // As kube's `CustomResource` derive declares a CR: the metadata not optional.
        #[derive(Deserialize, Debug, PartialEq)]
        struct Cr {
            metadata: ObjectMeta,
            data: serde_json::Value,
        }
        let lean: Lean<Cr> = serde_json::from_str(CONFIG_MAP).unwrap();
        let mut full: Cr = serde_json::from_str(CONFIG_MAP).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        full.metadata.managed_fields = None;
        assert_eq!(lean.0, full);
    }

    #[test]
    fn escaped_keys_are_read_as_well() {
        // `\u006d` is `m`: keys with escapes are not borrowed from the input.
        let escaped = CONFIG_MAP
            .replace("\"metadata\"", r#""\u006detadata""#)
            .replace("\"managedFields\": [", r#""\u006danagedFields": ["#);
        let lean: Lean<ConfigMap> = serde_json::from_str(&escaped).unwrap();
        assert_eq!(lean.0.metadata.managed_fields, None);
        assert_eq!(lean.0.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(lean.0.metadata.finalizers.unwrap().len(), 1);
    }

    #[test]
    fn a_watch_event_decodes_its_object_lean_and_bad_input_is_an_error() {
        let event = format!(r#"{{"type":"MODIFIED","object":{CONFIG_MAP}}}"#);
        let e: WatchEvent<Lean<ConfigMap>> = serde_json::from_str(&event).unwrap();
        let WatchEvent::Modified(Lean(o)) = e else {
            panic!("not a modification: {e:?}");
        };
        assert_eq!(o.metadata.name.as_deref(), Some("c"));
        assert_eq!(o.metadata.managed_fields, None);
        let bad = r#"{"metadata": {"name": 7}}"#;
        assert!(serde_json::from_str::<Lean<ConfigMap>>(bad).is_err());
        assert!(serde_json::from_str::<Lean<ConfigMap>>(r#"{"metadata": []}"#).is_err());
    }

    #[test]
    fn an_unread_answer_is_checked_not_built_and_has_the_objects_api() {
        let answer: Unread<ConfigMap> = serde_json::from_str(CONFIG_MAP).unwrap();
        assert_eq!(answer.meta(), &ObjectMeta::default());
        assert!(serde_json::from_str::<Unread<ConfigMap>>("{\"metadata\": ").is_err());
        assert_eq!(
            Unread::<ConfigMap>::url_path(&(), Some("ns")),
            ConfigMap::url_path(&(), Some("ns"))
        );
        assert_eq!(
            Lean::<ConfigMap>::url_path(&(), Some("ns")),
            ConfigMap::url_path(&(), Some("ns"))
        );
    }

    #[test]
    fn a_lean_event_is_the_objects_event() {
        let lean: Lean<ConfigMap> = serde_json::from_str(CONFIG_MAP).unwrap();
        let Event::Apply(o) = Lean::event(Event::Apply(lean.clone())) else {
            panic!("an apply stays an apply");
        };
        assert_eq!(o, lean.0);
        assert!(matches!(
            Lean::<ConfigMap>::event(Event::InitDone),
            Event::InitDone
        ));
    }
}
