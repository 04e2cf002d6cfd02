//! A map per object, keyed by `<namespace>/<CloudKind>/<name>`, for the loop's memories
//! (`reconcile::Memory`, and the pacing's failure counts): one type, so that the locking and its
//! poison handling are written once.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// A map from object key to `V`, shared by the workers of every kind.
#[derive(Debug)]
pub struct PerObject<V>(Mutex<HashMap<String, V>>);

impl<V> Default for PerObject<V> {
    fn default() -> Self {
        PerObject(Mutex::default())
    }
}

impl<V> PerObject<V> {
    /// Runs `f` on the object's entry (created with `V::default()` when missing). A worker that
    /// panicked while holding the lock leaves at worst one stale entry, so a poisoned lock is
    /// used as it is rather than turned into a second panic.
    pub fn update<R>(&self, key: &str, f: impl FnOnce(&mut V) -> R) -> R
    where
        V: Default,
    {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(map.entry(key.to_owned()).or_default())
    }

    /// Sets the object's entry.
    pub fn set(&self, key: &str, value: V) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.insert(key.to_owned(), value);
    }

    /// Reads the object's entry, if any.
    pub fn read<R>(&self, key: &str, f: impl FnOnce(Option<&V>) -> R) -> R {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(map.get(key))
    }

    /// Forgets the object.
    pub fn remove(&self, key: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(key);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_per_object_and_forgotten_on_remove() {
        let counts: PerObject<u32> = PerObject::default();
        assert_eq!(
            counts.update("ns/Subnet/a", |n| {
                *n += 1;
                *n
            }),
            1
        );
        assert_eq!(
            counts.update("ns/Subnet/a", |n| {
                *n += 1;
                *n
            }),
            2
        );
        assert_eq!(
            counts.update("ns/Subnet/b", |n| {
                *n += 1;
                *n
            }),
            1
        );
        counts.remove("ns/Subnet/a");
        assert_eq!(counts.read("ns/Subnet/a", |n| n.copied()), None);
        counts.set("ns/Subnet/a", 7);
        assert_eq!(counts.read("ns/Subnet/a", |n| n.copied()), Some(7));
    }
}
