//! The cluster as CAPZ v1beta1 would default it (its webhook fills names, CIDRs, load balancers
//! and NAT gateways in), computed without writing anything back to the AzureCluster. Both the
//! cluster and the machine translations read this model, so a machine finds its subnet and load
//! balancer pools under the names the cluster translation made. The subnets (with their NSGs,
//! route tables and NAT gateways) are `subnets.rs`, the load balancers `load_balancers.rs`.

mod bastion;
mod load_balancers;
mod private_dns;
mod subnets;

pub use bastion::BastionModel;
pub use private_dns::{LinkModel, PrivateDnsModel};

use std::collections::BTreeMap;

use strata_crds::capi::Cluster;
use strata_crds::capz::{self, AzureCluster, SubnetRole};
use strata_crds::common::{ExtendedLocation, Tags};

use crate::identity::IdentityRef;
use crate::{InputError, Note, annotations, naming, object_ref};

/// CAPZ's defaults.
pub const DEFAULT_VNET_CIDR: &str = "10.0.0.0/8";
pub const DEFAULT_CONTROL_PLANE_CIDR: &str = "10.0.0.0/16";
pub const DEFAULT_CLUSTER_SUBNET_CIDR: &str = "10.0.0.0/16";
pub const DEFAULT_INTERNAL_LB_IP: &str = "10.0.0.100";
pub const DEFAULT_IDLE_TIMEOUT: i32 = 4;
pub const DEFAULT_API_SERVER_PORT: i32 = 6443;

/// How the generated CRs are to be handled, from the Cluster's and AzureCluster's annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `Cluster.spec.paused` or `cluster.x-k8s.io/paused`: CRs get `strata.dev/paused`.
    pub paused: bool,
    /// `strata.dev/reconcile-policy: observe` on the AzureCluster: import without takeover.
    pub observe: bool,
    /// `strata.dev/adopt: "true"` on the AzureCluster: migrate a CAPZ-built cluster in place.
    pub adopt: bool,
    /// `cluster.x-k8s.io/managed-by` on the AzureCluster: the network is someone else's.
    pub managed_by: bool,
    /// The AzureCluster's `identityRef` (`strata.dev/identity` on every CR): credentials are
    /// granted by naming the administrator's identity, never copied into the namespace.
    pub identity: Option<IdentityRef>,
    /// `spec.subscriptionID`, passed on with the identity (`strata.dev/subscription`).
    pub subscription: Option<String>,
}

impl Policy {
    /// The policy the annotations and specs of `cluster` and `azure_cluster` ask for.
    pub fn of(cluster: &Cluster, azure_cluster: &AzureCluster) -> Self {
        fn ann<'a>(m: &'a Option<BTreeMap<String, String>>, k: &str) -> Option<&'a str> {
            m.as_ref().and_then(|m| m.get(k)).map(String::as_str)
        }
        let cl = &cluster.metadata.annotations;
        let azc = &azure_cluster.metadata.annotations;
        let identity = IdentityRef::of(azure_cluster);
        Policy {
            paused: cluster.spec.paused == Some(true)
                || ann(cl, annotations::CAPI_PAUSED).is_some()
                || ann(azc, annotations::CAPI_PAUSED).is_some(),
            observe: ann(azc, annotations::RECONCILE_POLICY) == Some("observe"),
            adopt: ann(azc, annotations::ADOPT) == Some("true"),
            managed_by: ann(azc, annotations::MANAGED_BY).is_some(),
            // The subscription only travels with an identity: without one the operator uses
            // none of its own settings for the CR.
            subscription: identity
                .as_ref()
                .and(azure_cluster.spec.subscription_id.clone()),
            identity,
        }
    }
}

/// The CAPI cluster name: CAPZ names everything after it.
pub fn cluster_name(cluster: &Cluster, azure_cluster: &AzureCluster) -> String {
    cluster
        .metadata
        .name
        .clone()
        .or_else(|| azure_cluster.metadata.name.clone())
        .unwrap_or_default()
}

/// A subnet, defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct SubnetModel {
    pub name: String,
    pub cr_name: String,
    pub role: SubnetRole,
    /// The address ranges: CAPZ's `cidrBlocks`, every one (azure/services/subnets/spec.go).
    pub cidrs: Vec<String>,
    /// NSG (Azure name) and its rules, if the subnet has one.
    pub security_group: Option<String>,
    pub route_table: Option<String>,
    /// NAT gateway and its public IP (Azure names).
    pub nat_gateway: Option<(String, String)>,
    pub service_endpoints: Vec<String>,
    /// The subnet exists already (CAPZ: `id` set); it is observed, not managed.
    pub existing: bool,
}

/// A frontend of a load balancer, defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontendModel {
    pub name: String,
    /// Public IP (Azure name, DNS label).
    pub public_ip: Option<(String, Option<String>)>,
    /// Private IP (internal frontend, in the control-plane subnet).
    pub private_ip: Option<String>,
}

/// A load balancer, defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadBalancerModel {
    pub name: String,
    pub internal: bool,
    pub idle_timeout: i32,
    pub frontends: Vec<FrontendModel>,
    pub backend_pool: String,
    /// Availability zones of the internal frontends (`availabilityZones`).
    pub zones: Vec<String>,
}

/// NSGs by Azure name: their rules, tags, and the field that first named them.
pub type SecurityGroups = BTreeMap<String, (Vec<capz::SecurityRule>, Tags, String)>;

/// The cluster's network and everything the translation needs, with CAPZ's defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterModel {
    /// `AzureCluster namespace/name`, for errors and notes.
    pub object: String,
    pub name: String,
    pub namespace: String,
    pub location: String,
    pub subscription_id: Option<String>,
    pub resource_group: String,
    pub vnet_name: String,
    pub vnet_resource_group: String,
    pub vnet_cidrs: Vec<String>,
    pub vnet_tags: Tags,
    /// The VNet is someone else's (another resource group, or `vnet.id` set): observed only.
    pub vnet_existing: bool,
    pub subnets: Vec<SubnetModel>,
    /// NSGs by Azure name with their rules (CAPZ's security rules, by subnet order).
    pub security_groups: SecurityGroups,
    pub api_server_lb: Option<LoadBalancerModel>,
    /// The internal companion of a public API server LB whose spec lists a private frontend
    /// (CAPZ's apiserver-ilb flavour): `<lb>-internal`, pool `<pool>-internal`. Azure does not
    /// mix public and private frontends in one load balancer.
    pub api_server_ilb: Option<LoadBalancerModel>,
    pub node_outbound_lb: Option<LoadBalancerModel>,
    pub control_plane_outbound_lb: Option<LoadBalancerModel>,
    /// The private DNS of a private cluster.
    pub private_dns: Option<PrivateDnsModel>,
    /// A private cluster's API server host, `apiserver.<private DNS zone>` (also with
    /// `privateDNSZone: None`, where the user provides the zone).
    pub private_api_server_host: Option<String>,
    /// The Azure Bastion host (its subnet is in `subnets`).
    pub bastion: Option<BastionModel>,
    pub api_server_port: i32,
    pub additional_tags: Tags,
    /// The VNet has an IPv6 range (CAPZ's `ClusterScope.IsIPv6Enabled`): every NIC gets an IPv6
    /// IP configuration too.
    pub ipv6: bool,
    pub policy: Policy,
    /// The cluster's edge zone: CAPZ puts it on the VNet, the load balancers and their public
    /// IPs, and the machines' NICs, public IPs and VMs.
    pub extended_location: Option<ExtendedLocation>,
}

impl ClusterModel {
    /// Defaults `azure_cluster` as CAPZ's webhook would, reporting fields Strata cannot honour in
    /// `notes`.
    pub fn new(
        cluster: &Cluster,
        azure_cluster: &AzureCluster,
        notes: &mut Vec<Note>,
    ) -> Result<Self, InputError> {
        let object = object_ref(azure_cluster);
        let name = cluster_name(cluster, azure_cluster);
        let spec = &azure_cluster.spec;
        let err = |field: &str, message: String| InputError {
            object: object.clone(),
            field: field.to_owned(),
            message,
        };
        let mut note = |field: &str, message: &str| {
            notes.push(Note {
                object: object.clone(),
                field: field.to_owned(),
                message: message.to_owned(),
            })
        };
        if name.is_empty() {
            return Err(err("metadata.name", "required".into()));
        }
        // CAPZ accepts `West Europe`; ARM's canonical spelling is what the CRs need.
        let location = spec.location.to_lowercase().replace(' ', "");
        if !location_ok(&location) {
            return Err(err(
                "spec.location",
                format!(
                    "{:?} is not an Azure location such as westeurope",
                    spec.location
                ),
            ));
        }
        let resource_group = spec.resource_group.clone().unwrap_or_else(|| name.clone());
        let net = &spec.network_spec;
        let vnet_name = net.vnet.name.clone().unwrap_or_else(|| naming::vnet(&name));
        let vnet_resource_group = net
            .vnet
            .resource_group
            .clone()
            .unwrap_or_else(|| resource_group.clone());
        let vnet_existing = vnet_resource_group != resource_group || net.vnet.id.is_some();
        let vnet_cidrs = if net.vnet.cidr_blocks.is_empty() {
            vec![DEFAULT_VNET_CIDR.to_owned()]
        } else {
            net.vnet.cidr_blocks.clone()
        };
        unsupported_fields(azure_cluster, &mut note);
        let api_server_port = cluster
            .spec
            .cluster_network
            .as_ref()
            .and_then(|n| n.api_server_port)
            .unwrap_or(DEFAULT_API_SERVER_PORT);

        let (mut subnets, mut security_groups) =
            subnets::subnets(net, &name, &vnet_name, api_server_port, &mut note);
        let bastion = spec
            .bastion_spec
            .as_ref()
            .and_then(|b| b.azure_bastion.as_ref())
            .map(|b| {
                bastion::bastion(
                    b,
                    &name,
                    &vnet_name,
                    &mut subnets,
                    &mut security_groups,
                    &mut note,
                )
            });

        // Load balancers.
        let (api_server_lb, api_server_ilb) =
            load_balancers::api_server(net, &name, &location, &err, &mut note)?;
        // CAPZ's webhook gives a public cluster whose node (or cluster) subnets have an IPv6
        // range a node outbound load balancer (api/v1beta1/azurecluster_default.go
        // SetNodeOutboundLBDefaults): such subnets get no NAT gateway.
        let default_node_outbound = capz::LoadBalancerSpec::default();
        let needs_node_outbound = net.node_outbound_lb.is_none()
            && spec.control_plane_enabled != Some(false)
            && net.api_server_lb.as_ref().and_then(|l| l.type_)
                != Some(capz::LoadBalancerType::Internal)
            && net.subnets.iter().any(|s| {
                matches!(s.role, SubnetRole::Node | SubnetRole::Cluster)
                    && s.cidr_blocks.iter().any(|c| c.contains(':'))
            });
        let node_outbound_lb = net
            .node_outbound_lb
            .as_ref()
            .or(needs_node_outbound.then_some(&default_node_outbound))
            .map(|lb| {
                load_balancers::outbound_lb(
                    lb,
                    "spec.networkSpec.nodeOutboundLB",
                    naming::node_outbound_lb(&name),
                    |i| naming::node_outbound_ip(&name, i),
                    &location,
                    &mut note,
                )
            })
            .transpose()?;
        let control_plane_outbound_lb = net
            .control_plane_outbound_lb
            .as_ref()
            .map(|lb| {
                let lb_name = naming::control_plane_outbound_lb(&name);
                load_balancers::outbound_lb(
                    lb,
                    "spec.networkSpec.controlPlaneOutboundLB",
                    lb_name,
                    |i| naming::control_plane_outbound_ip(&name, i),
                    &location,
                    &mut note,
                )
            })
            .transpose()?;
        let private_api_server_host =
            private_dns::api_server_host(net, &name, api_server_lb.as_ref());
        let private_dns = private_dns::private_dns(
            net,
            &name,
            &resource_group,
            &vnet_name,
            api_server_lb.as_ref(),
            &mut note,
        );

        let ipv6 = vnet_cidrs.iter().any(|c| c.contains(':'));
        Ok(ClusterModel {
            object,
            namespace: azure_cluster.metadata.namespace.clone().unwrap_or_default(),
            location,
            subscription_id: spec.subscription_id.clone(),
            resource_group,
            vnet_name,
            vnet_resource_group,
            vnet_cidrs,
            vnet_tags: net.vnet.tags.clone(),
            vnet_existing,
            subnets,
            security_groups,
            api_server_lb,
            api_server_ilb,
            node_outbound_lb,
            control_plane_outbound_lb,
            private_dns,
            private_api_server_host,
            bastion,
            api_server_port,
            additional_tags: spec.additional_tags.clone(),
            policy: Policy::of(cluster, azure_cluster),
            extended_location: spec.extended_location.clone(),
            ipv6,
            name,
        })
    }

    /// The subnet of a control-plane machine (or of a node when `control_plane` is false) when
    /// the machine names none: the first of its role, else the `cluster` subnet.
    pub fn default_subnet(&self, control_plane: bool) -> Option<&SubnetModel> {
        let role = if control_plane {
            SubnetRole::ControlPlane
        } else {
            SubnetRole::Node
        };
        self.subnets
            .iter()
            .find(|s| s.role == role)
            .or_else(|| self.subnets.iter().find(|s| s.role == SubnetRole::Cluster))
    }

    /// The subnet an internal API server frontend lives in.
    pub fn control_plane_subnet(&self) -> Option<&SubnetModel> {
        self.default_subnet(true)
    }

    /// CAPZ's tags for a resource of this cluster: the ownership tag, the role, the name and the
    /// cluster's additional tags.
    pub fn tags(&self, role: &str, azure_name: &str) -> Tags {
        let mut tags = self.additional_tags.clone();
        tags.insert(naming::owned_tag(&self.name), naming::OWNED.to_owned());
        tags.insert(naming::ROLE_TAG.to_owned(), role.to_owned());
        tags.insert("Name".to_owned(), azure_name.to_owned());
        tags
    }
}

fn location_ok(location: &str) -> bool {
    let mut chars = location.chars();
    matches!(chars.next(), Some('a'..='z'))
        && location.len() >= 2
        && location.len() <= 40
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

impl ClusterModel {
    /// Metadata of a CR of this cluster: name, namespace, the cluster label and the annotations
    /// the policy asks for. `existing` marks a resource that is someone else's (observed only);
    /// only CRs carrying CAPZ's ownership tag are marked for adoption.
    pub fn meta(
        &self,
        cr_name: &str,
        existing: bool,
        tags: Option<&Tags>,
    ) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        let mut ann = BTreeMap::new();
        if self.policy.paused {
            ann.insert(annotations::PAUSED.to_owned(), "true".to_owned());
        }
        if self.policy.observe || existing {
            ann.insert(
                annotations::RECONCILE_POLICY.to_owned(),
                "observe".to_owned(),
            );
        }
        let owned_tag = naming::owned_tag(&self.name);
        if self.policy.adopt
            && !existing
            && !self.policy.observe
            && tags.is_some_and(|t| t.get(&owned_tag).is_some_and(|v| v == naming::OWNED))
        {
            ann.insert(annotations::ADOPT.to_owned(), "true".to_owned());
            ann.insert(
                annotations::ADOPT_REQUIRES_TAG.to_owned(),
                format!("{owned_tag}={}", naming::OWNED),
            );
        }
        if let Some(identity) = &self.policy.identity {
            ann.insert(annotations::IDENTITY.to_owned(), identity.to_string());
        }
        if let Some(subscription) = &self.policy.subscription {
            ann.insert(annotations::SUBSCRIPTION.to_owned(), subscription.clone());
        }
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(cr_name.to_owned()),
            namespace: Some(self.namespace.clone()),
            labels: Some(BTreeMap::from([(
                naming::CLUSTER_NAME_LABEL.to_owned(),
                self.name.clone(),
            )])),
            annotations: (!ann.is_empty()).then_some(ann),
            ..Default::default()
        }
    }

    /// Marks the CR of a subnet of a bring-your-own VNet, or of an NSG or route table such a
    /// subnet names, `strata.dev/use-existing: "true"`: one that already exists and is not
    /// Strata's is used as it is (read, Ready, never written or deleted), a missing one is
    /// created. This follows CAPZ's "Custom Virtual Networks" (a VNet in another resource group
    /// or named by `id`): CAPZ creates the subnets that are missing, never updates a subnet that
    /// exists and never deletes one of a VNet it does not manage; it leaves NSGs and route tables
    /// of such a VNet alone ("custom VNet mode"). Strata creates a missing NSG or route table
    /// rather than leave the subnet without it, and leaves an existing one exactly as it is.
    ///
    /// Not for CRs already observed (nothing is written through them) nor for CRs marked for
    /// adoption (a migration from CAPZ adopts what CAPZ's tag says it owned, refuses the rest).
    pub fn mark_use_existing(
        &self,
        meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) {
        if !self.vnet_existing || self.policy.observe {
            return;
        }
        let ann = meta.annotations.as_ref();
        let has = |k: &str, v: &str| ann.and_then(|a| a.get(k)).is_some_and(|x| x == v);
        if has(annotations::RECONCILE_POLICY, "observe") || has(annotations::ADOPT, "true") {
            return;
        }
        meta.annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(annotations::USE_EXISTING.to_owned(), "true".to_owned());
    }

    /// `spec.azureName` for a CR: only when the Azure name differs from the CR's name.
    pub fn azure_name(cr_name: &str, azure_name: &str) -> Option<String> {
        (cr_name != azure_name).then(|| azure_name.to_owned())
    }

    /// A reference to the cluster's resource group: its CR, or its ARM ID when the network is
    /// managed by someone else (`managed-by`) and no CR of it exists.
    pub fn resource_group_ref(&self) -> Result<strata_crds::common::ResourceRef, InputError> {
        if self.policy.managed_by {
            Ok(strata_crds::common::ResourceRef::arm(
                naming::resource_group_id(self.subscription()?, &self.resource_group),
            ))
        } else {
            Ok(strata_crds::common::ResourceRef::named(naming::cr_name(
                &self.name,
                &self.resource_group,
            )))
        }
    }

    /// The subscription, needed for ARM-ID references.
    pub fn subscription(&self) -> Result<&str, InputError> {
        self.subscription_id.as_deref().ok_or_else(|| InputError {
            object: self.object.clone(),
            field: "spec.subscriptionID".to_owned(),
            message: "required when the cluster's network is managed elsewhere (managed-by)"
                .to_owned(),
        })
    }
}

/// Fields of the AzureCluster the translation does not carry to Azure yet, and a missing
/// `identityRef`: each gets a note.
fn unsupported_fields(azure_cluster: &AzureCluster, note: &mut impl FnMut(&str, &str)) {
    let spec = &azure_cluster.spec;
    let net = &spec.network_spec;
    if !net.vnet.peerings.is_empty() {
        note(
            "spec.networkSpec.vnet.peerings",
            "VNet peerings are not translated yet",
        );
    }
    if IdentityRef::of(azure_cluster).is_none() {
        // `render` still shows the CRs; the controller writes none of them (Ready=False,
        // IdentityRefMissing) until the reference is set.
        note(
            "spec.identityRef",
            "missing: CAPZ requires an AzureClusterIdentity reference; the controller refuses \
             this cluster (Ready=False, IdentityRefMissing) and writes none of these CRs until \
             it is set",
        );
    }
    if let Some(r) = &spec.identity_ref {
        for (set, field) in [
            (r.uid.is_some(), "uid"),
            (r.resource_version.is_some(), "resourceVersion"),
            (r.field_path.is_some(), "fieldPath"),
        ] {
            if set {
                note(
                    &format!("spec.identityRef.{field}"),
                    "ignored (as by CAPZ): the identity is named by its kind, name and namespace",
                );
            }
        }
    }
    // CAPZ writes these IDs back once the resources exist and finds the resources by name.
    for (i, s) in net.subnets.iter().enumerate() {
        for (set, part) in [
            (
                s.security_group.as_ref().is_some_and(|g| g.id.is_some()),
                "securityGroup.id",
            ),
            (
                s.route_table.as_ref().is_some_and(|r| r.id.is_some()),
                "routeTable.id",
            ),
            (
                s.nat_gateway.as_ref().is_some_and(|n| n.id.is_some()),
                "natGateway.id",
            ),
        ] {
            if set {
                note(
                    &format!("spec.networkSpec.subnets[{i}].{part}"),
                    "ignored (as by CAPZ, which sets it): the resource is found by name",
                );
            }
        }
    }
    if !net.additional_api_server_lb_ports.is_empty() {
        note(
            "spec.networkSpec.additionalAPIServerLBPorts",
            "extra API server load balancer ports are not translated yet",
        );
    }
    if !spec.failure_domains.is_empty() {
        note(
            "spec.failureDomains",
            "not translated: the AzureCluster's failure domains are the location's zones from \
             ARM (or the translator's --zones), as CAPZ sets them in the status",
        );
    }
    if spec.control_plane_enabled == Some(false) {
        note(
            "spec.controlPlaneEnabled",
            "false is not translated: Strata builds the API server load balancer as for a \
             cluster with control-plane machines",
        );
    }
    if spec
        .azure_environment
        .as_deref()
        .is_some_and(|e| e != "AzurePublicCloud")
    {
        note(
            "spec.azureEnvironment",
            "not translated: the operator reaches the cloud its own settings name",
        );
    }
    if spec.cloud_provider_config_overrides.is_some() {
        note(
            "spec.cloudProviderConfigOverrides",
            "not translated: CAPZ writes them into the cloud-provider configuration Secret, \
             which Strata does not write",
        );
    }
    let internal = net
        .api_server_lb
        .as_ref()
        .is_some_and(|lb| lb.type_ == Some(capz::LoadBalancerType::Internal));
    if !internal {
        // As CAPZ: only a private cluster (Internal API server load balancer) gets a zone.
        for (set, field) in [
            (net.private_dns_zone_name.is_some(), "privateDNSZoneName"),
            (
                net.private_dns_zone_resource_group.is_some(),
                "privateDNSZoneResourceGroup",
            ),
            (net.private_dns_zone.is_some(), "privateDNSZone"),
        ] {
            if set {
                note(
                    &format!("spec.networkSpec.{field}"),
                    "used only when apiServerLB.type is Internal (as in CAPZ); no private DNS zone is made",
                );
            }
        }
    }
}
