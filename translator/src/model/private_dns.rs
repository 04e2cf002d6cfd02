//! The private DNS of a private cluster as CAPZ makes it (`azure/scope/cluster.go`
//! `PrivateDNSSpec`, `azure/services/privatedns/`): when the API server load balancer is
//! `Internal`, a zone (`<cluster>.capz.io` unless `privateDNSZoneName`, in
//! `privateDNSZoneResourceGroup` or the cluster's resource group), a link per VNet — the
//! cluster's and each peered one, `<vnet>-link` — and an A record `apiserver` for the load
//! balancer's first frontend IP. `privateDNSZone: None` leaves DNS to the user: nothing is made.

use strata_crds::capz::{self, PrivateDnsZoneMode};

use super::LoadBalancerModel;
use crate::naming;

/// The private DNS of a private cluster, defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivateDnsModel {
    /// The zone's name, e.g. `my-cluster.capz.io`.
    pub zone: String,
    /// The zone's resource group.
    pub resource_group: String,
    /// One link per VNet, the cluster's first.
    pub links: Vec<LinkModel>,
    /// The A record's relative name (`apiserver`) and address.
    pub record: (String, String),
}

/// A virtual network link of the zone.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkModel {
    /// `<vnet>-link`.
    pub name: String,
    /// `None` for the cluster's own VNet; a peered VNet's resource group and name otherwise.
    pub peered: Option<(String, String)>,
}

/// The zone of a private cluster: `privateDNSZoneName` or `<cluster>.capz.io`
/// (`azure/scope/cluster.go` `GetPrivateDNSZoneName`).
fn zone_name(net: &capz::NetworkSpec, name: &str) -> String {
    net.private_dns_zone_name
        .clone()
        .unwrap_or_else(|| naming::private_dns_zone(name))
}

/// A private cluster's API server host as CAPZ sets `controlPlaneEndpoint.host`:
/// `apiserver.<zone>` whenever the API server load balancer is internal, whatever the zone mode
/// (`azure/scope/cluster.go` `APIServerHost`, `azure/defaults.go` `GeneratePrivateFQDN`).
pub(super) fn api_server_host(
    net: &capz::NetworkSpec,
    name: &str,
    api_server_lb: Option<&LoadBalancerModel>,
) -> Option<String> {
    api_server_lb.filter(|lb| lb.internal).map(|_| {
        format!(
            "{}.{}",
            naming::PRIVATE_API_SERVER_HOSTNAME,
            zone_name(net, name)
        )
    })
}

/// The private DNS CAPZ makes for `net`, if the API server load balancer is internal and the mode
/// is not `None`.
pub(super) fn private_dns(
    net: &capz::NetworkSpec,
    name: &str,
    resource_group: &str,
    vnet_name: &str,
    api_server_lb: Option<&LoadBalancerModel>,
    note: &mut impl FnMut(&str, &str),
) -> Option<PrivateDnsModel> {
    let lb = api_server_lb.filter(|lb| lb.internal)?;
    if net.private_dns_zone == Some(PrivateDnsZoneMode::None) {
        return None;
    }
    let ip = lb.frontends.first().and_then(|f| f.private_ip.clone())?;
    let mut links = vec![LinkModel {
        name: naming::vnet_link(vnet_name),
        peered: None,
    }];
    for (i, peering) in net.vnet.peerings.iter().enumerate() {
        let field = |f: &str| peering.0.get(f).and_then(|v| v.as_str()).map(str::to_owned);
        match field("remoteVnetName") {
            Some(remote) => links.push(LinkModel {
                name: naming::vnet_link(&remote),
                // CAPZ's default for a peering's resource group is the cluster's.
                peered: Some((
                    field("resourceGroup").unwrap_or_else(|| resource_group.to_owned()),
                    remote,
                )),
            }),
            None => note(
                &format!("spec.networkSpec.vnet.peerings[{i}].remoteVnetName"),
                "missing: the peered VNet gets no link to the private DNS zone",
            ),
        }
    }
    Some(PrivateDnsModel {
        zone: zone_name(net, name),
        resource_group: net
            .private_dns_zone_resource_group
            .clone()
            .unwrap_or_else(|| resource_group.to_owned()),
        links,
        record: (naming::PRIVATE_API_SERVER_HOSTNAME.to_owned(), ip),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::model::FrontendModel;

    fn internal_lb() -> LoadBalancerModel {
        LoadBalancerModel {
            name: "c-internal-lb".into(),
            internal: true,
            idle_timeout: 4,
            frontends: vec![FrontendModel {
                name: "f".into(),
                public_ip: None,
                private_ip: Some("10.0.0.100".into()),
            }],
            backend_pool: "p".into(),
            zones: Vec::new(),
        }
    }

    fn net(extra: serde_json::Value) -> capz::NetworkSpec {
        serde_json::from_value(extra).unwrap()
    }

    fn dns(
        n: &capz::NetworkSpec,
        lb: &LoadBalancerModel,
    ) -> (Option<PrivateDnsModel>, Vec<String>) {
        let mut notes = Vec::new();
        let m = private_dns(n, "c", "rg", "c-vnet", Some(lb), &mut |f, m| {
            notes.push(format!("{f}: {m}"))
        });
        (m, notes)
    }

    #[test]
    fn a_private_cluster_gets_capzs_zone_link_and_record() {
        let (m, notes) = dns(&net(serde_json::json!({})), &internal_lb());
        let m = m.unwrap();
        assert_eq!(m.zone, "c.capz.io");
        assert_eq!(m.resource_group, "rg");
        assert_eq!(
            m.links,
            vec![LinkModel {
                name: "c-vnet-link".into(),
                peered: None
            }]
        );
        assert_eq!(m.record, ("apiserver".into(), "10.0.0.100".into()));
        assert!(notes.is_empty());
    }

    #[test]
    fn a_private_clusters_api_server_host_is_apiserver_in_its_zone_whatever_the_mode() {
        let lb = internal_lb();
        let host = |extra| api_server_host(&net(extra), "c", Some(&lb));
        assert_eq!(
            host(serde_json::json!({})).as_deref(),
            Some("apiserver.c.capz.io")
        );
        assert_eq!(
            host(serde_json::json!({"privateDNSZoneName": "k8s.example.com"})).as_deref(),
            Some("apiserver.k8s.example.com")
        );
        // Mode None: CAPZ makes no zone but still points the endpoint at the name.
        assert_eq!(
            host(serde_json::json!({"privateDNSZone": "None"})).as_deref(),
            Some("apiserver.c.capz.io")
        );
        let public = LoadBalancerModel {
            internal: false,
            ..internal_lb()
        };
        assert_eq!(
            api_server_host(&net(serde_json::json!({})), "c", Some(&public)),
            None
        );
        assert_eq!(
            api_server_host(&net(serde_json::json!({})), "c", None),
            None
        );
    }

    #[test]
    fn zone_name_resource_group_and_peerings_are_honoured() {
        let n = net(serde_json::json!({
            "privateDNSZoneName": "k8s.example.com",
            "privateDNSZoneResourceGroup": "dns-rg",
            "vnet": {"peerings": [
                {"remoteVnetName": "hub", "resourceGroup": "hub-rg"},
                {"remoteVnetName": "spoke"},
                {"resourceGroup": "x"}
            ]}
        }));
        let (m, notes) = dns(&n, &internal_lb());
        let m = m.unwrap();
        assert_eq!(
            (m.zone.as_str(), m.resource_group.as_str()),
            ("k8s.example.com", "dns-rg")
        );
        let links: Vec<_> = m
            .links
            .iter()
            .map(|l| (l.name.as_str(), l.peered.clone()))
            .collect();
        assert_eq!(
            links,
            vec![
                ("c-vnet-link", None),
                ("hub-link", Some(("hub-rg".into(), "hub".into()))),
                // A peering's resource group defaults to the cluster's.
                ("spoke-link", Some(("rg".into(), "spoke".into()))),
            ]
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("spec.networkSpec.vnet.peerings[2].remoteVnetName"));
    }

    #[test]
    fn mode_none_and_public_clusters_get_no_zone() {
        let none = net(serde_json::json!({"privateDNSZone": "None"}));
        assert_eq!(dns(&none, &internal_lb()).0, None);
        let system = net(serde_json::json!({"privateDNSZone": "System"}));
        assert!(dns(&system, &internal_lb()).0.is_some());
        let public = LoadBalancerModel {
            internal: false,
            ..internal_lb()
        };
        assert_eq!(dns(&net(serde_json::json!({})), &public).0, None);
    }
}
