//! The cluster's load balancers as CAPZ defaults them: the API server's (public, internal, or
//! public with an internal companion), and the optional outbound ones.

use strata_crds::capz::{self, LoadBalancerType};

use super::{DEFAULT_IDLE_TIMEOUT, DEFAULT_INTERNAL_LB_IP, FrontendModel, LoadBalancerModel};
use crate::{InputError, naming};

/// The API server load balancer and, when a public one also lists a private frontend, its
/// internal companion.
pub(super) fn api_server(
    net: &capz::NetworkSpec,
    name: &str,
    location: &str,
    err: &impl Fn(&str, String) -> InputError,
    note: &mut impl FnMut(&str, &str),
) -> Result<(Option<LoadBalancerModel>, Option<LoadBalancerModel>), InputError> {
    let api_server_ilb;
    let api_server_lb = {
        let lb = net.api_server_lb.clone().unwrap_or_default();
        let internal = lb.type_ == Some(LoadBalancerType::Internal);
        let lb_name = lb.name.clone().unwrap_or_else(|| {
            if internal {
                naming::internal_lb(name)
            } else {
                naming::public_lb(name)
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
                    public_ip: Some((naming::api_server_ip(name), None)),
                    private_ip: None,
                }
            }]
        } else {
            frontends_of(&lb, "spec.networkSpec.apiServerLB", location, note)?
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
        lb_sku_note(&lb, "spec.networkSpec.apiServerLB", note);
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
                    zones: lb.availability_zones.clone(),
                }),
            )
        };
        api_server_ilb = ilb;
        // An internal frontend carries the zones itself; a public one takes its public IP's
        // (CAPZ docs/book/src/self-managed/load-balancer-zone-redundancy.md).
        if !internal && !lb.availability_zones.is_empty() && api_server_ilb.is_none() {
            note(
                "spec.networkSpec.apiServerLB.availabilityZones",
                "a public load balancer's zones are its public IPs'; not translated",
            );
        }
        Some(LoadBalancerModel {
            backend_pool: pool,
            name: lb_name,
            internal,
            idle_timeout,
            frontends,
            zones: if internal {
                lb.availability_zones.clone()
            } else {
                Vec::new()
            },
        })
    };
    Ok((api_server_lb, api_server_ilb))
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

pub(super) fn frontends_of(
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

pub(super) fn outbound_lb(
    lb: &capz::LoadBalancerSpec,
    field: &str,
    default_name: String,
    ip_name: impl Fn(Option<usize>) -> String,
    location: &str,
    note: &mut impl FnMut(&str, &str),
) -> Result<LoadBalancerModel, InputError> {
    let name = lb.name.clone().unwrap_or(default_name);
    lb_sku_note(lb, field, note);
    if !lb.availability_zones.is_empty() {
        note(
            &format!("{field}.availabilityZones"),
            "an outbound load balancer's zones are its public IPs'; not translated",
        );
    }
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
        zones: Vec::new(),
    })
}
