//! ARM resource IDs and the routes of the ARM REST surface.

use std::fmt;

/// A resource ID: a resource group, or `providers/<ns>/<type>/<name>[/<type>/<name>…]` inside one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceId {
    pub subscription: String,
    pub resource_group: String,
    /// `None` for the resource group itself.
    pub provider: Option<String>,
    /// `(type, name)` pairs below the provider; empty for a resource group.
    pub segments: Vec<(String, String)>,
}

impl ResourceId {
    pub fn resource_group(subscription: &str, resource_group: &str) -> Self {
        Self {
            subscription: subscription.to_string(),
            resource_group: resource_group.to_string(),
            provider: None,
            segments: Vec::new(),
        }
    }

    /// Parses a full resource ID (not a collection).
    pub fn parse(id: &str) -> Option<Self> {
        match Route::parse(id)? {
            Route::Resource(id) => Some(id),
            _ => None,
        }
    }

    /// `Microsoft.Network/virtualNetworks/subnets`, `Microsoft.Resources/resourceGroups`, …
    pub fn type_name(&self) -> String {
        match &self.provider {
            None => "Microsoft.Resources/resourceGroups".to_string(),
            Some(p) => {
                let types: Vec<&str> = self.segments.iter().map(|(t, _)| t.as_str()).collect();
                format!("{p}/{}", types.join("/"))
            }
        }
    }

    pub fn name(&self) -> &str {
        self.segments
            .last()
            .map_or(self.resource_group.as_str(), |(_, n)| n.as_str())
    }

    /// The resource group holding this resource (itself for a resource group).
    pub fn group(&self) -> ResourceId {
        Self::resource_group(&self.subscription, &self.resource_group)
    }

    /// The parent resource of a nested resource (a subnet's virtual network).
    pub fn parent(&self) -> Option<ResourceId> {
        (self.segments.len() > 1).then(|| ResourceId {
            segments: self.segments[..self.segments.len() - 1].to_vec(),
            ..self.clone()
        })
    }

    /// The top-level resource (first type/name pair), or the resource group.
    pub fn top_level(&self) -> ResourceId {
        ResourceId {
            segments: self.segments.iter().take(1).cloned().collect(),
            ..self.clone()
        }
    }

    pub fn child(&self, type_segment: &str, name: &str) -> ResourceId {
        let mut child = self.clone();
        child
            .segments
            .push((type_segment.to_string(), name.to_string()));
        child
    }

    /// The case-insensitive key of this ID in the store.
    pub fn key(&self) -> String {
        self.to_string().to_ascii_lowercase()
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "/subscriptions/{}/resourceGroups/{}",
            self.subscription, self.resource_group
        )?;
        if let Some(p) = &self.provider {
            write!(f, "/providers/{p}")?;
            for (t, n) in &self.segments {
                write!(f, "/{t}/{n}")?;
            }
        }
        Ok(())
    }
}

/// What an ARM request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// One resource (or resource group).
    Resource(ResourceId),
    /// `GET …/virtualMachines/{vm}/instanceView`.
    InstanceView(ResourceId),
    /// A collection: the resource groups of a subscription, resources of a type in a group or
    /// subscription, or the children of a resource.
    List {
        subscription: String,
        /// `None`: subscription-wide.
        resource_group: Option<String>,
        parent: Option<ResourceId>,
        type_name: String,
    },
    /// An operation status (`operations`) or result (`operationResults`) URL.
    Operation {
        subscription: String,
        id: String,
        result: bool,
    },
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

impl Route {
    pub fn parse(path: &str) -> Option<Route> {
        let s: Vec<&str> = path.trim_matches('/').split('/').collect();
        if s.len() < 3 || !eq(s[0], "subscriptions") || s[1].is_empty() {
            return None;
        }
        let sub = s[1].to_string();
        if eq(s[2], "resourceGroups") {
            return match s.len() {
                3 => Some(Route::List {
                    subscription: sub,
                    resource_group: None,
                    parent: None,
                    type_name: "Microsoft.Resources/resourceGroups".into(),
                }),
                4 => Some(Route::Resource(ResourceId::resource_group(&sub, s[3]))),
                // A group's resources (`Resources_ListByResourceGroup`).
                5 if eq(s[4], "resources") => Some(Route::List {
                    subscription: sub.clone(),
                    resource_group: Some(s[3].to_string()),
                    parent: Some(ResourceId::resource_group(&sub, s[3])),
                    type_name: "Microsoft.Resources/resourceGroups/resources".into(),
                }),
                n if n >= 7 && eq(s[4], "providers") => {
                    let provider = s[5].to_string();
                    let rest = &s[6..];
                    if rest.iter().any(|x| x.is_empty()) {
                        return None;
                    }
                    let pairs: Vec<(String, String)> = rest
                        .chunks_exact(2)
                        .map(|c| (c[0].to_string(), c[1].to_string()))
                        .collect();
                    let id = ResourceId {
                        subscription: sub.clone(),
                        resource_group: s[3].to_string(),
                        provider: Some(provider.clone()),
                        segments: pairs,
                    };
                    if rest.len().is_multiple_of(2) {
                        return Some(Route::Resource(id));
                    }
                    let last = rest[rest.len() - 1];
                    if id.segments.is_empty() {
                        return Some(Route::List {
                            subscription: sub,
                            resource_group: Some(s[3].to_string()),
                            parent: None,
                            type_name: format!("{provider}/{last}"),
                        });
                    }
                    if eq(last, "instanceView") {
                        return Some(Route::InstanceView(id));
                    }
                    let type_name = format!("{}/{last}", id.type_name());
                    Some(Route::List {
                        subscription: sub,
                        resource_group: Some(s[3].to_string()),
                        parent: Some(id),
                        type_name,
                    })
                }
                _ => None,
            };
        }
        if eq(s[2], "providers") {
            if s.len() == 8 && eq(s[4], "locations") {
                let result = if eq(s[6], "operationResults") {
                    true
                } else if eq(s[6], "operations") {
                    false
                } else {
                    return None;
                };
                return Some(Route::Operation {
                    subscription: sub,
                    id: s[7].to_string(),
                    result,
                });
            }
            if s.len() == 5 {
                return Some(Route::List {
                    subscription: sub,
                    resource_group: None,
                    parent: None,
                    type_name: format!("{}/{}", s[3], s[4]),
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_ids_and_collections() {
        let id = ResourceId::parse(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a",
        )
        .unwrap();
        assert_eq!(id.type_name(), "Microsoft.Network/virtualNetworks/subnets");
        assert_eq!(id.name(), "a");
        assert_eq!(id.parent().unwrap().name(), "v");
        assert_eq!(
            id.to_string(),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a"
        );
        let rg = ResourceId::parse("/subscriptions/s/resourcegroups/RG").unwrap();
        assert_eq!(rg.type_name(), "Microsoft.Resources/resourceGroups");
        assert_eq!(rg.key(), "/subscriptions/s/resourcegroups/rg");
        match Route::parse(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets",
        ) {
            Some(Route::List {
                type_name,
                parent: Some(p),
                ..
            }) => {
                assert_eq!(type_name, "Microsoft.Network/virtualNetworks/subnets");
                assert_eq!(p.name(), "v");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            Route::parse(
                "/subscriptions/s/providers/Microsoft.Network/locations/westeurope/operations/abc"
            ),
            Some(Route::Operation { result: false, .. })
        ));
        assert_eq!(Route::parse("/foo/bar"), None);
    }
}
