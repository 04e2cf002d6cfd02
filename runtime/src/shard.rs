//! Which objects a replica owns when the work is split with `--shard i/n`.
//!
//! An object belongs to shard `label` when it carries the label `strata.dev/shard` with a shard
//! number below `n` (a user pins it), otherwise to shard `FNV-1a("namespace/name") mod n`. FNV-1a
//! is fixed by its definition, so every replica and every version agrees on the owner without
//! talking to the others; the API server's watches carry everything else (status, readiness)
//! between shards.

use std::fmt;
use std::hash::Hasher;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The label that pins an object to a shard.
pub const SHARD_LABEL: &str = "strata.dev/shard";

/// Shard `index` of `count`. The default, `0/1`, owns everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    #[error("a shard is written <i>/<n>, e.g. 0/2; got {0:?}")]
    Syntax(String),
    #[error("shard {index}/{count}: the count must be at least 1 and the index below it")]
    Range { index: u32, count: u32 },
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || ShardError::Syntax(s.to_owned());
        let (i, n) = s.split_once('/').ok_or_else(syntax)?;
        let index: u32 = i.trim().parse().map_err(|_| syntax())?;
        let count: u32 = n.trim().parse().map_err(|_| syntax())?;
        if count == 0 || index >= count {
            return Err(ShardError::Range { index, count });
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether the work is split at all.
    pub fn is_sharded(&self) -> bool {
        self.count > 1
    }

    /// The shard an object belongs to.
    pub fn of(count: u32, meta: &ObjectMeta) -> u32 {
        let pinned = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(SHARD_LABEL))
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|&s| s < count);
        pinned.unwrap_or_else(|| {
            let mut h = fnv::FnvHasher::default();
            h.write(meta.namespace.as_deref().unwrap_or_default().as_bytes());
            h.write(b"/");
            h.write(meta.name.as_deref().unwrap_or_default().as_bytes());
            // The remainder is below `count`, which is a u32.
            (h.finish() % u64::from(count.max(1))) as u32
        })
    }

    /// Whether this replica reconciles the object.
    pub fn owns(&self, meta: &ObjectMeta) -> bool {
        !self.is_sharded() || Shard::of(self.count, meta) == self.index
    }

    /// The Lease of this shard: `base` alone when not sharded, `base-<i>-of-<n>` otherwise, so
    /// that each shard elects its own leader.
    pub fn lease_name(&self, base: &str) -> String {
        if self.is_sharded() {
            format!("{base}-{}-of-{}", self.index, self.count)
        } else {
            base.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn meta(ns: &str, name: &str, label: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            labels: label.map(|l| [(SHARD_LABEL.to_owned(), l.to_owned())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn parses_and_refuses_with_a_message() {
        assert_eq!("1/3".parse::<Shard>().unwrap().to_string(), "1/3");
        assert_eq!(
            "3/3".parse::<Shard>(),
            Err(ShardError::Range { index: 3, count: 3 })
        );
        assert!(matches!(
            "0/0".parse::<Shard>(),
            Err(ShardError::Range { .. })
        ));
        assert!(matches!("two".parse::<Shard>(), Err(ShardError::Syntax(_))));
        assert!(matches!("1/x".parse::<Shard>(), Err(ShardError::Syntax(_))));
    }

    #[test]
    fn every_object_has_exactly_one_owner_and_the_split_is_even_enough() {
        let shards: Vec<Shard> = (0..3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        let mut per_shard = [0u32; 3];
        for n in 0..3000 {
            let m = meta(&format!("ns{}", n % 7), &format!("vm-{n}"), None);
            let owners: Vec<u32> = shards
                .iter()
                .filter(|s| s.owns(&m))
                .map(Shard::index)
                .collect();
            assert_eq!(owners.len(), 1, "{m:?}");
            per_shard[owners[0] as usize] += 1;
        }
        assert!(
            per_shard.iter().all(|&c| (800..1200).contains(&c)),
            "{per_shard:?}"
        );
    }

    #[test]
    fn the_hash_is_fixed_across_builds() {
        // FNV-1a of "team-a/strata-demo-vnet" — recomputed by hand from the algorithm's
        // definition, so a change of hash (and so of every object's owner) cannot slip in.
        let m = meta("team-a", "strata-demo-vnet", None);
        let mut h: u64 = 0xcbf29ce484222325;
        for b in b"team-a/strata-demo-vnet" {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
        assert_eq!(Shard::of(5, &m), (h % 5) as u32);
    }

    #[test]
    fn a_label_pins_an_object_and_a_bad_label_falls_back_to_the_hash() {
        let pinned = meta("ns", "x", Some("1"));
        assert!("1/2".parse::<Shard>().unwrap().owns(&pinned));
        assert!(!"0/2".parse::<Shard>().unwrap().owns(&pinned));
        let bad = meta("ns", "x", Some("7"));
        assert_eq!(Shard::of(2, &bad), Shard::of(2, &meta("ns", "x", None)));
        assert!(Shard::default().owns(&bad));
    }

    #[test]
    fn each_shard_has_its_own_lease() {
        assert_eq!(
            Shard::default().lease_name("strata-operator"),
            "strata-operator"
        );
        assert_eq!(
            "1/2"
                .parse::<Shard>()
                .unwrap()
                .lease_name("strata-operator"),
            "strata-operator-1-of-2"
        );
    }
}
