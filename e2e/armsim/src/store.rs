//! The generic resource store: every resource body by case-insensitive ID, plus reference lookups.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::id::ResourceId;

/// A stored resource. `body` is what GET returns, except that inline children (a virtual network's
/// subnets) are stored as resources of their own and composed into the parent on read.
#[derive(Debug, Clone)]
pub struct Resource {
    pub id: ResourceId,
    pub type_name: &'static str,
    pub body: Value,
    /// The body of the last PUT as the client sent it (to recognise a repeated PUT).
    pub request: Value,
}

impl Resource {
    pub fn provisioning_state(&self) -> Option<&str> {
        self.body
            .pointer("/properties/provisioningState")
            .and_then(Value::as_str)
    }

    /// Sets the provisioning state of the resource and of the sub-resources kept inline in it
    /// (load balancer frontends, NIC IP configurations, default security rules…), which ARM
    /// reports with their parent's state.
    pub fn set_provisioning_state(&mut self, state: &str) {
        if let Some(props) = self
            .body
            .get_mut("properties")
            .and_then(Value::as_object_mut)
        {
            props.insert("provisioningState".into(), Value::from(state));
            for items in props.values_mut().filter_map(Value::as_array_mut) {
                for item in items {
                    let sub = item.get_mut("properties").and_then(Value::as_object_mut);
                    if let Some(sub) = sub.filter(|p| p.contains_key("provisioningState")) {
                        sub.insert("provisioningState".into(), Value::from(state));
                    }
                }
            }
        }
    }

    pub fn location(&self) -> Option<&str> {
        self.body.get("location").and_then(Value::as_str)
    }
}

#[derive(Debug, Default)]
pub struct Store {
    map: BTreeMap<String, Resource>,
    /// Who refers to what, kept as the store changes: a GET composes back-references (a NIC's
    /// `virtualMachine`, a subnet's `ipConfigurations`), and finding them by scanning every
    /// stored body made each GET cost as much as the store is large (a third of the emulator's
    /// CPU at a hundred clusters). In a `RefCell` because bodies handed out by
    /// [`Store::get_key_mut`] are read again on the next lookup, which only borrows the store.
    refs: RefCell<RefIndex>,
    /// How many times every stored body was scanned for references.
    #[cfg(test)]
    pub scans: std::cell::Cell<usize>,
}

/// The back-reference index of a [`Store`].
#[derive(Debug, Default)]
struct RefIndex {
    /// For each resource key: the IDs (lower case) its body refers to, each with the ID of the
    /// object holding the reference (the nearest enclosing object with an `id`).
    from: HashMap<String, Vec<(String, String)>>,
    /// For each referenced ID (lower case): the keys of the resources referring to it.
    to: HashMap<String, BTreeSet<String>>,
    /// Resources whose body may have changed since they were indexed.
    stale: BTreeSet<String>,
}

impl RefIndex {
    fn forget(&mut self, key: &str) {
        for (target, _) in self.from.remove(key).unwrap_or_default() {
            if let Some(set) = self.to.get_mut(&target) {
                set.remove(key);
                if set.is_empty() {
                    self.to.remove(&target);
                }
            }
        }
    }

    fn index(&mut self, key: &str, body: &Value) {
        self.forget(key);
        let mut found = Vec::new();
        walk_ids(body, &mut |id, holder| {
            found.push((id.to_ascii_lowercase(), holder.to_string()));
            true
        });
        for (target, _) in &found {
            self.to
                .entry(target.clone())
                .or_default()
                .insert(key.to_string());
        }
        if !found.is_empty() {
            self.from.insert(key.to_string(), found);
        }
    }
}

/// Walks the `properties` of a body, calling `found(id, holder)` for each object with an `id`
/// inside another object with one (the holder: the nearest enclosing object with an `id`, the
/// resource itself at the top); descends into the object unless `found` returns false.
fn walk_ids(body: &Value, found: &mut impl FnMut(&str, &str) -> bool) {
    fn walk(v: &Value, holder: Option<&str>, found: &mut impl FnMut(&str, &str) -> bool) {
        match v {
            Value::Object(map) => {
                let own = map.get("id").and_then(Value::as_str);
                if let (Some(id), Some(h)) = (own, holder)
                    && !found(id, h)
                {
                    return;
                }
                let holder = own.or(holder);
                for (k, child) in map {
                    if k != "id" {
                        walk(child, holder, found);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, holder, found)),
            _ => {}
        }
    }
    if let Some(props) = body.get("properties") {
        walk(props, body.get("id").and_then(Value::as_str), found);
    }
}

impl Store {
    pub fn get(&self, id: &ResourceId) -> Option<&Resource> {
        self.map.get(&id.key())
    }
    pub fn get_key(&self, key: &str) -> Option<&Resource> {
        self.map.get(key)
    }
    /// The resource to change in place; its references are indexed again on the next lookup.
    pub fn get_key_mut(&mut self, key: &str) -> Option<&mut Resource> {
        let resource = self.map.get_mut(key)?;
        self.refs.get_mut().stale.insert(key.to_string());
        Some(resource)
    }
    pub fn insert(&mut self, resource: Resource) {
        let key = resource.id.key();
        let refs = self.refs.get_mut();
        refs.stale.remove(&key);
        refs.index(&key, &resource.body);
        self.map.insert(key, resource);
    }
    pub fn remove(&mut self, key: &str) -> Option<Resource> {
        let refs = self.refs.get_mut();
        refs.stale.remove(key);
        refs.forget(key);
        self.map.remove(key)
    }
    pub fn all(&self) -> impl Iterator<Item = &Resource> {
        self.map.values()
    }

    /// Keys of everything below `key` (children, or the content of a resource group), not `key`.
    pub fn descendants(&self, key: &str) -> Vec<String> {
        let prefix = format!("{key}/");
        self.map
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The direct children of `parent` of one type segment (`subnets`), in name order.
    pub fn children<'a>(
        &'a self,
        parent: &ResourceId,
        type_segment: &str,
    ) -> impl Iterator<Item = &'a Resource> + 'a {
        let depth = parent.segments.len() + 1;
        let ty = type_segment.to_ascii_lowercase();
        self.descendants(&parent.key())
            .into_iter()
            .filter_map(move |k| self.map.get(&k))
            .filter(move |r| {
                r.id.segments.len() == depth && r.id.segments[depth - 1].0.eq_ignore_ascii_case(&ty)
            })
    }

    /// Finds the stored resource that holds a referenced ID: the resource itself, or for a
    /// sub-resource kept inline (a load balancer's backend pool) its owner, if the owner's body
    /// holds an element of that name.
    pub fn resolve(&self, reference: &str) -> Option<&Resource> {
        let id = ResourceId::parse(reference)?;
        if let Some(r) = self.get(&id) {
            return Some(r);
        }
        let mut owner = id.parent()?;
        let mut rest = vec![id.segments[id.segments.len() - 1].clone()];
        loop {
            if let Some(r) = self.get(&owner) {
                let mut node = &r.body;
                for (ty, name) in rest.iter().rev() {
                    let items = node
                        .get("properties")
                        .and_then(|p| find_key_ci(p, ty))
                        .and_then(Value::as_array)?;
                    node = items.iter().find(|x| {
                        x.get("name")
                            .and_then(Value::as_str)
                            .is_some_and(|n| n.eq_ignore_ascii_case(name))
                    })?;
                }
                return Some(r);
            }
            rest.push(owner.segments[owner.segments.len() - 1].clone());
            owner = owner.parent()?;
        }
    }

    /// The resources (other than those in `deleting`) referring to any key in `deleting` or below it.
    pub fn referrers(&self, deleting: &BTreeSet<String>) -> Vec<(String, String)> {
        // Every PUT asks (for the children it drops), and nearly always about none: a scan of
        // every stored body for nothing was most of the emulator's CPU at a hundred clusters.
        if deleting.is_empty() {
            return Vec::new();
        }
        #[cfg(test)]
        self.scans.set(self.scans.get() + 1);
        let mut found = Vec::new();
        for r in self.map.values() {
            let key = r.id.key();
            if deleting.contains(&key) {
                continue;
            }
            for reference in references(&r.body, &key) {
                let hit = deleting
                    .iter()
                    .any(|d| reference == *d || reference.starts_with(&format!("{d}/")));
                if hit {
                    found.push((r.id.to_string(), reference));
                }
            }
        }
        found
    }
}

impl Store {
    /// IDs of the objects, in resources of `from_type`, that refer to `target_key`: the nearest
    /// enclosing object with an `id` (a NIC's IP configuration, a VM, a subnet).
    pub fn referring_objects(&self, target_key: &str, from_type: &str) -> Vec<String> {
        let refs = self.fresh_refs();
        let target = target_key.to_ascii_lowercase();
        let mut out: Vec<String> = refs
            .to
            .get(&target)
            .into_iter()
            .flatten()
            .filter(|key| self.map.get(*key).is_some_and(|r| r.type_name == from_type))
            .flat_map(|key| refs.from.get(key).into_iter().flatten())
            .filter(|(id, _)| *id == target)
            .map(|(_, holder)| holder.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

impl Store {
    /// The resources whose bodies refer to `target_key` (an ID in lower case), in key order: the
    /// NICs and load balancers holding addresses in a subnet, without a scan of the store (the
    /// scan on every NIC PUT was nine tenths of the emulator's CPU at a thousand clusters).
    pub fn referring(&self, target_key: &str) -> Vec<&Resource> {
        let refs = self.fresh_refs();
        refs.to
            .get(target_key)
            .into_iter()
            .flatten()
            .filter_map(|key| self.map.get(key))
            .collect()
    }

    /// The back-reference index, after indexing again the resources changed in place since.
    fn fresh_refs(&self) -> std::cell::RefMut<'_, RefIndex> {
        let mut refs = self.refs.borrow_mut();
        for key in std::mem::take(&mut refs.stale) {
            match self.map.get(&key) {
                Some(r) => refs.index(&key, &r.body),
                None => refs.forget(&key),
            }
        }
        refs
    }
}

fn find_key_ci<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

/// Every ARM ID a body refers to under `properties` (objects `{"id": "/subscriptions/…"}`), in lower
/// case, leaving out the resource's own sub-resources (IDs below `self_key`).
pub fn references(body: &Value, self_key: &str) -> Vec<String> {
    fn walk(v: &Value, self_prefix: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    if k == "id"
                        && let Some(s) = v.as_str()
                    {
                        let lower = s.to_ascii_lowercase();
                        if lower.starts_with("/subscriptions/") && !lower.starts_with(self_prefix) {
                            out.push(lower);
                        }
                    } else {
                        walk(v, self_prefix, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, self_prefix, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(props) = body.get("properties") {
        walk(props, &format!("{self_key}/"), &mut out);
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RG: &str = "/subscriptions/s/resourceGroups/g";

    fn put(store: &mut Store, id: &str, type_name: &'static str, body: Value) {
        let id = ResourceId::parse(id).unwrap();
        store.insert(Resource {
            id,
            type_name,
            body,
            request: Value::Null,
        });
    }

    #[test]
    fn references_leave_out_own_sub_resources() {
        let nic = format!("{RG}/providers/Microsoft.Network/networkInterfaces/nic");
        let body = json!({ "id": nic, "properties": { "ipConfigurations": [ {
            "id": format!("{nic}/ipConfigurations/ip"),
            "properties": { "subnet": { "id": format!("{RG}/providers/Microsoft.Network/virtualNetworks/V/subnets/A") } }
        } ] } });
        let refs = references(&body, &nic.to_ascii_lowercase());
        assert_eq!(
            refs,
            [
                format!("{RG}/providers/microsoft.network/virtualnetworks/v/subnets/a")
                    .to_ascii_lowercase()
            ]
        );
    }

    #[test]
    fn resolve_finds_inline_sub_resources_and_referrers() {
        let mut store = Store::default();
        let lb = format!("{RG}/providers/Microsoft.Network/loadBalancers/lb");
        put(
            &mut store,
            &lb,
            "Microsoft.Network/loadBalancers",
            json!({ "properties": { "backendAddressPools": [ { "name": "pool" } ] } }),
        );
        assert!(
            store
                .resolve(&format!("{lb}/backendAddressPools/POOL"))
                .is_some()
        );
        assert!(
            store
                .resolve(&format!("{lb}/backendAddressPools/other"))
                .is_none()
        );
        assert!(store.resolve(&format!("{lb}/probes/pool")).is_none());
        let nic = format!("{RG}/providers/Microsoft.Network/networkInterfaces/nic");
        put(
            &mut store,
            &nic,
            "Microsoft.Network/networkInterfaces",
            json!({ "properties": { "ipConfigurations": [ { "properties": {
            "loadBalancerBackendAddressPools": [ { "id": format!("{lb}/backendAddressPools/pool") } ] } } ] } }),
        );
        let deleting = BTreeSet::from([lb.to_ascii_lowercase()]);
        let referrers = store.referrers(&deleting);
        assert_eq!(referrers.len(), 1);
        // Nothing being deleted (every PUT that drops no child) costs no scan of the store.
        let scans = store.scans.get();
        assert!(store.referrers(&BTreeSet::new()).is_empty());
        assert_eq!(store.scans.get(), scans, "no scan for an empty set");
        assert_eq!(referrers[0].0, nic);
        assert_eq!(
            store
                .descendants(&ResourceId::parse(RG).unwrap().key())
                .len(),
            2
        );
    }

    /// What the index must answer: every stored body of `from_type` walked for `target`.
    fn referring_by_scan(store: &Store, target: &str, from_type: &str) -> Vec<String> {
        let mut out = Vec::new();
        for r in store.all().filter(|r| r.type_name == from_type) {
            walk_ids(&r.body, &mut |id, holder| {
                if id.eq_ignore_ascii_case(target) {
                    out.push(holder.to_string());
                }
                true
            });
        }
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn the_back_reference_index_follows_every_change_to_the_store() {
        const NIC: &str = "Microsoft.Network/networkInterfaces";
        const VM: &str = "Microsoft.Compute/virtualMachines";
        let mut store = Store::default();
        let nic = |i: u32| format!("{RG}/providers/Microsoft.Network/networkInterfaces/nic{i}");
        let vm = |i: u32| format!("{RG}/providers/Microsoft.Compute/virtualMachines/vm{i}");
        let vm_body = |i: u32, nics: &[u32]| {
            let refs: Vec<Value> = nics
                .iter()
                .map(|n| json!({ "id": nic(*n).to_uppercase() }))
                .collect();
            json!({ "id": vm(i), "properties": { "networkProfile": { "networkInterfaces": refs } } })
        };
        let check = |store: &Store| {
            for n in 0..4 {
                for ty in [NIC, VM] {
                    assert_eq!(
                        store.referring_objects(&nic(n).to_ascii_lowercase(), ty),
                        referring_by_scan(store, &nic(n), ty),
                        "nic{n} from {ty}"
                    );
                }
            }
        };
        for n in 0..4 {
            put(
                &mut store,
                &nic(n),
                NIC,
                json!({ "id": nic(n), "properties": {} }),
            );
        }
        put(&mut store, &vm(0), VM, vm_body(0, &[0, 1]));
        put(&mut store, &vm(1), VM, vm_body(1, &[1]));
        check(&store);
        assert_eq!(
            store.referring_objects(&nic(1).to_ascii_lowercase(), VM),
            [vm(0), vm(1)]
        );
        // A PUT that replaces the body drops the old references and adds the new ones.
        put(&mut store, &vm(0), VM, vm_body(0, &[2]));
        check(&store);
        assert_eq!(
            store.referring_objects(&nic(1).to_ascii_lowercase(), VM),
            [vm(1)]
        );
        // A change in place (drift, an operation's result) is seen by the next lookup.
        let key = ResourceId::parse(&vm(1)).unwrap().key();
        store.get_key_mut(&key).unwrap().body = vm_body(1, &[3]);
        check(&store);
        assert!(
            store
                .referring_objects(&nic(1).to_ascii_lowercase(), VM)
                .is_empty()
        );
        assert_eq!(
            store.referring_objects(&nic(3).to_ascii_lowercase(), VM),
            [vm(1)]
        );
        // A removed resource refers to nothing any more.
        store.remove(&key);
        check(&store);
        assert!(
            store
                .referring_objects(&nic(3).to_ascii_lowercase(), VM)
                .is_empty()
        );
        assert_eq!(store.scans.get(), 0, "no lookup scanned the store");
    }
}
