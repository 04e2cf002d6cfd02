//! The generic resource store: every resource body by case-insensitive ID, plus reference lookups.

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
    /// How many times back-references were searched for over the whole store.
    #[cfg(test)]
    pub scans: std::cell::Cell<usize>,
}

/// Back-references of the whole store, built in one pass ([`Store::back_refs`]): for each
/// referenced ID (lower case), the type of the referring resource and the ID of the object
/// holding the reference.
#[derive(Debug, Default)]
pub struct BackRefs(HashMap<String, Vec<(&'static str, String)>>);

impl BackRefs {
    /// The same as [`Store::referring_objects`], without a scan.
    pub fn referring_objects(&self, target_key: &str, from_type: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .0
            .get(&target_key.to_ascii_lowercase())
            .into_iter()
            .flatten()
            .filter(|(t, _)| *t == from_type)
            .map(|(_, holder)| holder.clone())
            .collect();
        out.sort();
        out.dedup();
        out
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
    pub fn get_key_mut(&mut self, key: &str) -> Option<&mut Resource> {
        self.map.get_mut(key)
    }
    pub fn insert(&mut self, resource: Resource) {
        self.map.insert(resource.id.key(), resource);
    }
    pub fn remove(&mut self, key: &str) -> Option<Resource> {
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
        #[cfg(test)]
        self.scans.set(self.scans.get() + 1);
        let mut out = Vec::new();
        for r in self.map.values().filter(|r| r.type_name == from_type) {
            walk_ids(&r.body, &mut |id, holder| {
                if id.eq_ignore_ascii_case(target_key) {
                    out.push(holder.to_string());
                    return false;
                }
                true
            });
        }
        out.sort();
        out.dedup();
        out
    }

    /// Every back-reference in the store, in one pass (for lists: one scan instead of one per item).
    pub fn back_refs(&self) -> BackRefs {
        #[cfg(test)]
        self.scans.set(self.scans.get() + 1);
        let mut index: HashMap<String, Vec<(&'static str, String)>> = HashMap::new();
        for r in self.map.values() {
            walk_ids(&r.body, &mut |id, holder| {
                index
                    .entry(id.to_ascii_lowercase())
                    .or_default()
                    .push((r.type_name, holder.to_string()));
                true
            });
        }
        BackRefs(index)
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
}
