//! The cluster as CAPZ v1beta1 would default it (its webhook fills names, CIDRs, load balancers
//! and NAT gateways in), computed without writing anything back to the AzureCluster. Both the
//! cluster and the machine translations read this model, so a machine finds its subnet and load
//! balancer pools under the names the cluster translation made.

use std::collections::BTreeMap;

use strata_crds::capi::Cluster;
use strata_crds::capz::{self, AzureCluster, LoadBalancerType, SubnetRole};
use strata_crds::common::Tags;

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
    pub cidr: String,
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
}

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
    pub security_groups: BTreeMap<String, (Vec<capz::SecurityRule>, Tags, String)>,
    pub api_server_lb: Option<LoadBalancerModel>,
    /// The internal companion of a public API server LB whose spec lists a private frontend
    /// (CAPZ's apiserver-ilb flavour): `<lb>-internal`, pool `<pool>-internal`. Azure does not
    /// mix public and private frontends in one load balancer.
    pub api_server_ilb: Option<LoadBalancerModel>,
    pub node_outbound_lb: Option<LoadBalancerModel>,
    pub control_plane_outbound_lb: Option<LoadBalancerModel>,
    pub api_server_port: i32,
    pub additional_tags: Tags,
    pub policy: Policy,
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
        if spec.bastion_spec.is_some() {
            note("spec.bastionSpec", "Azure Bastion is not translated yet");
        }
        if net.private_dns_zone_name.is_some() {
            note(
                "spec.networkSpec.privateDNSZoneName",
                "private DNS zones are not translated yet",
            );
        }
        let api_server_port = cluster
            .spec
            .cluster_network
            .as_ref()
            .and_then(|n| n.api_server_port)
            .unwrap_or(DEFAULT_API_SERVER_PORT);

        // Subnets: CAPZ adds a control-plane subnet and a node subnet when the spec has none (a
        // `cluster` subnet stands for both).
        let mut specs: Vec<(Option<usize>, capz::SubnetSpec)> = net
            .subnets
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, s)| (Some(i), s))
            .collect();
        let has = |role| net.subnets.iter().any(|s| s.role == role);
        let has_cluster = has(SubnetRole::Cluster);
        if !has(SubnetRole::ControlPlane) && !has_cluster {
            specs.push((
                None,
                capz::SubnetSpec {
                    role: SubnetRole::ControlPlane,
                    name: naming::control_plane_subnet(&name),
                    ..Default::default()
                },
            ));
        }
        let no_node_subnet = !has(SubnetRole::Node) && !has_cluster;
        if no_node_subnet {
            specs.push((
                None,
                capz::SubnetSpec {
                    role: SubnetRole::Node,
                    name: naming::node_subnet(&name),
                    ..Default::default()
                },
            ));
        }
        let mut subnets = Vec::new();
        let mut security_groups: BTreeMap<String, (Vec<capz::SecurityRule>, Tags, String)> =
            BTreeMap::new();
        let mut node_index = 0;
        for (i, s) in &specs {
            let field = match i {
                Some(i) => format!("spec.networkSpec.subnets[{i}]"),
                None => "spec.networkSpec.subnets".to_owned(),
            };
            let index = if s.role == SubnetRole::Node {
                node_index += 1;
                Some(node_index)
            } else {
                None
            };
            let default_cidr = match s.role {
                SubnetRole::ControlPlane => DEFAULT_CONTROL_PLANE_CIDR.to_owned(),
                SubnetRole::Cluster => DEFAULT_CLUSTER_SUBNET_CIDR.to_owned(),
                SubnetRole::Node => format!("10.{}.0.0/16", index.unwrap_or(1)),
                SubnetRole::Bastion => "10.255.255.224/27".to_owned(),
            };
            let cidr = s.cidr_blocks.first().cloned().unwrap_or(default_cidr);
            if s.cidr_blocks.len() > 1 {
                note(
                    &format!("{field}.cidrBlocks"),
                    "only the first CIDR block of a subnet is translated (as CAPZ does)",
                );
            }
            let ipv6 = s.cidr_blocks.iter().any(|c| c.contains(':'));
            let sg_name = s.security_group.as_ref().and_then(|g| g.name.clone());
            let security_group = match s.role {
                SubnetRole::ControlPlane => {
                    Some(sg_name.unwrap_or_else(|| naming::control_plane_nsg(&name)))
                }
                SubnetRole::Node => Some(sg_name.unwrap_or_else(|| naming::node_nsg(&name))),
                SubnetRole::Cluster => Some(sg_name.unwrap_or_else(|| naming::cluster_nsg(&name))),
                SubnetRole::Bastion => sg_name,
            };
            if let Some(sg) = &security_group {
                let given = s
                    .security_group
                    .as_ref()
                    .map(|g| g.security_rules.clone())
                    .unwrap_or_default();
                // CAPZ's control-plane NSG allows SSH and the API server unless the spec lists
                // rules of its own.
                let rules = if given.is_empty() && s.role == SubnetRole::ControlPlane {
                    default_control_plane_rules(api_server_port)
                } else {
                    given
                };
                let tags = s
                    .security_group
                    .as_ref()
                    .map(|g| g.tags.clone())
                    .unwrap_or_default();
                let entry = security_groups
                    .entry(sg.clone())
                    .or_insert_with(|| (Vec::new(), Tags::new(), format!("{field}.securityGroup")));
                for r in rules {
                    if !entry.0.iter().any(|e| e.name == r.name) {
                        entry.0.push(r);
                    }
                }
                entry.1.extend(tags);
            }
            let rt_name = s.route_table.as_ref().and_then(|r| r.name.clone());
            let route_table = match s.role {
                SubnetRole::Node => {
                    Some(rt_name.unwrap_or_else(|| naming::node_route_table(&name)))
                }
                SubnetRole::Cluster => {
                    Some(rt_name.unwrap_or_else(|| naming::cluster_route_table(&name)))
                }
                _ => rt_name,
            };
            let given_nat = s.nat_gateway.as_ref();
            let nat_name = match (s.role, given_nat) {
                (_, Some(n)) => Some(n.name.clone()),
                // CAPZ gives IPv4 node subnets that do not exist yet a NAT gateway for egress.
                (SubnetRole::Node, None) if !ipv6 && s.id.is_none() => Some(
                    naming::node_nat_gateway(&name, if no_node_subnet { None } else { index }),
                ),
                (SubnetRole::Cluster, None) if !ipv6 && s.id.is_none() => {
                    Some(naming::cluster_nat_gateway(&name))
                }
                _ => None,
            };
            let nat_gateway = nat_name.map(|n| {
                let ip = given_nat
                    .and_then(|g| g.nat_gateway_ip.as_ref())
                    .map(|p| p.name.clone())
                    .unwrap_or_else(|| naming::nat_gateway_ip(&n));
                (n, ip)
            });
            if !s.private_endpoints.is_empty() {
                note(
                    &format!("{field}.privateEndpoints"),
                    "private endpoints are not translated yet",
                );
            }
            let service_endpoints = s
                .service_endpoints
                .iter()
                .enumerate()
                .map(|(j, e)| {
                    if !e.locations.is_empty() && e.locations != ["*"] {
                        note(
                            &format!("{field}.serviceEndpoints[{j}].locations"),
                            "service endpoint locations other than * are not translated yet",
                        );
                    }
                    e.service.clone()
                })
                .collect();
            subnets.push(SubnetModel {
                cr_name: naming::subnet_cr_name(&name, &vnet_name, &s.name),
                name: s.name.clone(),
                role: s.role,
                cidr,
                security_group,
                route_table,
                nat_gateway,
                service_endpoints,
                existing: s.id.is_some(),
            });
        }

        // Load balancers.
        let api_server_ilb;
        let api_server_lb = {
            let lb = net.api_server_lb.clone().unwrap_or_default();
            let internal = lb.type_ == Some(LoadBalancerType::Internal);
            let lb_name = lb.name.clone().unwrap_or_else(|| {
                if internal {
                    naming::internal_lb(&name)
                } else {
                    naming::public_lb(&name)
                }
            });
            let frontends = if lb.frontend_ips.is_empty() {
                vec![if internal {
                    FrontendModel {
                        name: naming::frontend(&lb_name, None),
                        public_ip: None,
                        private_ip: Some(DEFAULT_INTERNAL_LB_IP.to_owned()),
                    }
                } else {
                    FrontendModel {
                        name: naming::frontend(&lb_name, None),
                        public_ip: Some((naming::api_server_ip(&name), None)),
                        private_ip: None,
                    }
                }]
            } else {
                frontends_of(&lb, "spec.networkSpec.apiServerLB", &location, &mut note)?
            };
            if frontends.iter().all(|f| f.public_ip.is_none()) && !internal {
                return Err(err(
                    "spec.networkSpec.apiServerLB.frontendIPs",
                    "a Public API server load balancer needs a frontend with a publicIP".into(),
                ));
            }
            if internal && frontends.iter().any(|f| f.public_ip.is_some()) {
                return Err(err(
                    "spec.networkSpec.apiServerLB.frontendIPs",
                    "an Internal API server load balancer cannot have a publicIP frontend".into(),
                ));
            }
            lb_sku_note(&lb, "spec.networkSpec.apiServerLB", &mut note);
            let (private, public): (Vec<_>, Vec<_>) =
                frontends.into_iter().partition(|f| f.public_ip.is_none());
            let pool = lb
                .backend_pool
                .as_ref()
                .and_then(|p| p.name.clone())
                .unwrap_or_else(|| naming::backend_pool(&lb_name));
            let idle_timeout = lb.idle_timeout_in_minutes.unwrap_or(DEFAULT_IDLE_TIMEOUT);
            let (frontends, ilb) = if internal || private.is_empty() {
                (if internal { private } else { public }, None)
            } else {
                (
                    public,
                    Some(LoadBalancerModel {
                        name: naming::internal_companion(&lb_name),
                        internal: true,
                        idle_timeout,
                        frontends: private,
                        backend_pool: naming::internal_companion(&pool),
                    }),
                )
            };
            api_server_ilb = ilb;
            Some(LoadBalancerModel {
                backend_pool: pool,
                name: lb_name,
                internal,
                idle_timeout,
                frontends,
            })
        };
        let node_outbound_lb = net
            .node_outbound_lb
            .as_ref()
            .map(|lb| {
                outbound_lb(
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
                outbound_lb(
                    lb,
                    "spec.networkSpec.controlPlaneOutboundLB",
                    lb_name,
                    |i| naming::control_plane_outbound_ip(&name, i),
                    &location,
                    &mut note,
                )
            })
            .transpose()?;

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
            api_server_port,
            additional_tags: spec.additional_tags.clone(),
            policy: Policy::of(cluster, azure_cluster),
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

/// CAPZ's default control-plane rules (before v1.9 its webhook added them; its templates since
/// carry the same two).
fn default_control_plane_rules(api_server_port: i32) -> Vec<capz::SecurityRule> {
    let rule = |name: &str, description: &str, priority: i32, port: String| capz::SecurityRule {
        name: name.to_owned(),
        description: Some(description.to_owned()),
        protocol: capz::SecurityProtocol::Tcp,
        direction: capz::SecurityRuleDirection::Inbound,
        priority: Some(priority),
        source_ports: Some("*".to_owned()),
        destination_ports: Some(port),
        source: Some("*".to_owned()),
        sources: Vec::new(),
        destination: Some("*".to_owned()),
        action: Some(capz::SecurityRuleAction::Allow),
    };
    vec![
        rule("allow_ssh", "Allow SSH", 2200, "22".to_owned()),
        rule(
            "allow_apiserver",
            "Allow K8s API Server",
            2201,
            api_server_port.to_string(),
        ),
    ]
}

fn lb_sku_note(lb: &capz::LoadBalancerSpec, field: &str, note: &mut impl FnMut(&str, &str)) {
    if lb.sku.as_deref().is_some_and(|s| s != "Standard") {
        note(
            &format!("{field}.sku"),
            "only the Standard SKU is supported; Standard is used",
        );
    }
    if lb.id.is_some() {
        note(
            &format!("{field}.id"),
            "existing load balancers are not adopted by ID; the named one is managed",
        );
    }
}

/// The DNS label of a CAPZ `dnsName` (`<label>.<location>.cloudapp.azure.com`).
fn dns_label(dns_name: &str) -> String {
    dns_name
        .split('.')
        .next()
        .unwrap_or_default()
        .to_lowercase()
}

fn frontends_of(
    lb: &capz::LoadBalancerSpec,
    field: &str,
    _location: &str,
    note: &mut impl FnMut(&str, &str),
) -> Result<Vec<FrontendModel>, InputError> {
    Ok(lb
        .frontend_ips
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let public_ip = f.public_ip.as_ref().map(|p| {
                if !p.ip_tags.is_empty() {
                    note(
                        &format!("{field}.frontendIPs[{i}].publicIP.ipTags"),
                        "IP tags are not translated yet",
                    );
                }
                (p.name.clone(), p.dns_name.as_deref().map(dns_label))
            });
            FrontendModel {
                name: f.name.clone(),
                private_ip: if public_ip.is_some() {
                    None
                } else {
                    Some(
                        f.private_ip
                            .clone()
                            .unwrap_or_else(|| DEFAULT_INTERNAL_LB_IP.to_owned()),
                    )
                },
                public_ip,
            }
        })
        .collect())
}

fn outbound_lb(
    lb: &capz::LoadBalancerSpec,
    field: &str,
    default_name: String,
    ip_name: impl Fn(Option<usize>) -> String,
    location: &str,
    note: &mut impl FnMut(&str, &str),
) -> Result<LoadBalancerModel, InputError> {
    let name = lb.name.clone().unwrap_or(default_name);
    lb_sku_note(lb, field, note);
    if lb.type_ == Some(LoadBalancerType::Internal) {
        note(
            &format!("{field}.type"),
            "outbound load balancers are always Public (as in CAPZ)",
        );
    }
    // CAPZ derives an outbound LB's frontends from frontendIPsCount and ignores frontendIPs.
    let count = lb.frontend_ips_count.unwrap_or(1).max(0) as usize;
    let frontends = if !lb.frontend_ips.is_empty() && lb.frontend_ips_count.is_none() {
        frontends_of(lb, field, location, note)?
    } else {
        match count {
            0 => Vec::new(),
            1 => vec![FrontendModel {
                name: naming::frontend(&name, None),
                public_ip: Some((ip_name(None), None)),
                private_ip: None,
            }],
            n => (1..=n)
                .map(|i| FrontendModel {
                    name: naming::frontend(&name, Some(i)),
                    public_ip: Some((ip_name(Some(i)), None)),
                    private_ip: None,
                })
                .collect(),
        }
    };
    Ok(LoadBalancerModel {
        backend_pool: lb
            .backend_pool
            .as_ref()
            .and_then(|p| p.name.clone())
            .unwrap_or_else(|| naming::outbound_backend_pool(&name)),
        name,
        internal: false,
        idle_timeout: lb.idle_timeout_in_minutes.unwrap_or(DEFAULT_IDLE_TIMEOUT),
        frontends,
    })
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
