//! The reconcile decision: a pure function from what the loop observed (the CR, its policies and
//! dependencies, and — once fetched — the Azure resource) to the one step to take now.
//!
//! Order, as in Crossplane's managed reconciler: paused → deletion → policy → dependencies →
//! observe → create if absent → refuse or adopt what is not ours → wait for a running operation →
//! update if drifted → ready. Nothing here does I/O; `reconcile/` carries the step out.

/// `strata.dev/reconcile-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    #[default]
    Manage,
    /// Read only: GET, never PUT or DELETE.
    Observe,
    /// Deleting the CR leaves the Azure resource.
    DetachOnDelete,
}

impl Policy {
    /// Reads the annotation value; `None` for a value that is not a policy.
    pub fn parse(value: Option<&str>) -> Option<Policy> {
        match value {
            None | Some("manage") => Some(Policy::Manage),
            Some("observe") => Some(Policy::Observe),
            Some("detach-on-delete") => Some(Policy::DetachOnDelete),
            Some(_) => None,
        }
    }
}

/// Whether the owner and the references of a CR are usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dependencies {
    Ready,
    /// The owner CR is missing or not Ready (its description).
    WaitingForOwner(String),
    /// A referenced CR is missing or not Ready (its description).
    WaitingForReference(String),
    /// An owner or reference by ARM ID reaches into another namespace's resource, and that
    /// namespace grants no such reference (what to fix).
    NotGranted(String),
}

/// Who the Azure resource belongs to, read from its `strata-owner` tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Tagged with this CR's own `<namespace>/<CloudKind>/<name>`.
    Ours,
    /// No `strata-owner` tag: created outside Strata.
    Untagged,
    /// Tagged by another CR of the same namespace (the tag's value).
    Other(String),
    /// Tagged by a CR of another namespace (the tag's value): Strata's resources belong to the
    /// namespace that created them, so no annotation of this one takes, uses or observes it
    /// (with a principal shared between namespaces, it would be a takeover of another tenant).
    OtherNamespace(String),
}

/// What a GET of the Azure resource showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Azure {
    Absent,
    Present {
        ownership: Ownership,
        /// `provisioningState` is not terminal (Creating, Updating, Deleting …): an operation runs.
        busy: bool,
        /// `provisioningState` is `Failed`: the last operation failed, a PUT retries it.
        failed: bool,
        /// The first field where Azure differs from the spec (`None`: up to date; not computed
        /// while deleting).
        drift: Option<String>,
    },
}

/// Everything `decide` looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub deleting: bool,
    pub has_finalizer: bool,
    /// The CR records that Strata creates (or created) its resource (`strata.dev/created`).
    pub recorded: bool,
    pub policy: Policy,
    pub paused: bool,
    pub adopt: bool,
    /// `strata.dev/use-existing`: a foreign resource is used as it is (read only).
    pub use_existing: bool,
    pub dependencies: Dependencies,
    /// The ARM ID is known (from status or from a Ready owner). Without it nothing was ever
    /// created, so a deletion has nothing to remove.
    pub id_known: bool,
    /// The last attempt failed in a way only a spec change can fix, for this generation.
    pub held: bool,
    /// `None` until the loop has fetched the resource.
    pub azure: Option<Azure>,
    /// The owner, named by ARM ID, is a Strata resource of another namespace (its tag, and
    /// the owner's ID): nothing is created, taken, used or deleted inside it.
    pub owner_elsewhere: Option<String>,
    /// PUT even when Azure matches the spec: the benchmark's model of ASO re-sends every
    /// resource on each resync, as ASO does by default (only with the `bench-hooks` feature).
    #[cfg(feature = "bench-hooks")]
    pub resync_put: bool,
    /// The kind asks for an action once Azure matches the spec (a scale set's rollout deletes
    /// outdated instances).
    pub follow_up: bool,
}

/// The one thing to do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `strata.dev/paused`: no Azure call at all.
    Paused,
    /// Nothing left to do for a CR that is gone from our point of view.
    Done,
    AddFinalizer,
    RemoveFinalizer,
    /// An owner or reference is not usable: no Azure call, woken when it becomes Ready.
    Wait(Dependencies),
    /// GET the resource, then decide again.
    Observe,
    Create,
    /// PUT over the existing resource: drift (its path), a failed operation, or adoption.
    Update(String),
    /// Azure matches the spec, and the kind's follow-up action is due (POST).
    FollowUp,
    Delete,
    /// An operation runs in Azure: check again shortly, send nothing.
    InProgress,
    /// Up to date.
    Ready,
    /// Observe policy and the resource does not exist: a stable state.
    NotFound,
    /// The resource exists and is not ours, and `adopt` is not set.
    AdoptionRefused(String),
    /// The resource exists, is not ours, and `use-existing` is set: Ready as it is, never
    /// written, never deleted.
    UseExisting,
    /// A spec error or a non-retryable ARM error for this generation: wait for a new spec.
    Hold,
}

pub fn decide(o: &Observation) -> Step {
    if o.paused {
        return Step::Paused;
    }
    if o.deleting {
        return decide_delete(o);
    }
    let manage = o.policy != Policy::Observe;
    // The finalizer guards what Strata created: it goes on with the creation record, in the
    // patch before the create (or adoption) PUT, as Crossplane's managed reconciler adds its
    // own only once it is about to create. A CR that waits, is refused or uses a foreign
    // resource as it is has nothing to clean up and carries none. One that lost it while
    // Strata's resource exists gets it back first.
    if manage && !o.has_finalizer && o.recorded {
        return Step::AddFinalizer;
    }
    if o.dependencies != Dependencies::Ready {
        return Step::Wait(o.dependencies.clone());
    }
    if manage && o.held {
        return Step::Hold;
    }
    let Some(azure) = &o.azure else {
        return Step::Observe;
    };
    if let Some(owner) = &o.owner_elsewhere {
        return Step::AdoptionRefused(format!(
            "it would be inside {owner}, a resource of another namespace"
        ));
    }
    match azure {
        // Before a running operation and the observe policy: nothing of it is ours to read.
        Azure::Present {
            ownership: Ownership::OtherNamespace(owner),
            ..
        } => elsewhere(owner),
        Azure::Absent if manage => Step::Create,
        Azure::Present {
            ownership: Ownership::Ours,
            ..
        } if manage && !o.has_finalizer => Step::AddFinalizer,
        Azure::Absent => Step::NotFound,
        Azure::Present { busy: true, .. } => Step::InProgress,
        Azure::Present { .. } if !manage => Step::Ready,
        Azure::Present {
            ownership,
            failed,
            drift,
            ..
        } => match ownership {
            Ownership::Untagged | Ownership::Other(_) if !o.adopt && o.use_existing => {
                Step::UseExisting
            }
            Ownership::Untagged | Ownership::Other(_) if !o.adopt => {
                Step::AdoptionRefused(match ownership {
                    Ownership::Other(owner) => format!("the resource belongs to {owner}"),
                    _ => "the resource exists and was not created by Strata".to_owned(),
                })
            }
            Ownership::Untagged | Ownership::Other(_) => Step::Update("adoption".to_owned()),
            Ownership::OtherNamespace(owner) => elsewhere(owner),
            Ownership::Ours if *failed => Step::Update("provisioningState Failed".to_owned()),
            Ownership::Ours => match drift {
                Some(path) => Step::Update(path.clone()),
                #[cfg(feature = "bench-hooks")]
                None if o.resync_put => Step::Update("resync".to_owned()),
                None if o.follow_up => Step::FollowUp,
                None => Step::Ready,
            },
        },
    }
}

/// The refusal of a resource another namespace's CR owns.
fn elsewhere(owner: &str) -> Step {
    Step::AdoptionRefused(format!(
        "the resource belongs to {owner}, a CR of another namespace"
    ))
}

fn decide_delete(o: &Observation) -> Step {
    if !o.has_finalizer {
        return Step::Done;
    }
    if o.policy != Policy::Manage || !o.id_known {
        return Step::RemoveFinalizer;
    }
    match &o.azure {
        None => Step::Observe,
        Some(Azure::Absent) => Step::RemoveFinalizer,
        // Never delete what Strata did not create (or what another CR owns).
        Some(Azure::Present {
            ownership: Ownership::Untagged | Ownership::Other(_) | Ownership::OtherNamespace(_),
            ..
        }) => Step::RemoveFinalizer,
        Some(Azure::Present { busy: true, .. }) => Step::InProgress,
        Some(Azure::Present { .. }) => Step::Delete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A managed CR with its finalizer, dependencies Ready, not yet observed.
    fn base() -> Observation {
        Observation {
            deleting: false,
            has_finalizer: true,
            recorded: true,
            policy: Policy::Manage,
            paused: false,
            adopt: false,
            use_existing: false,
            dependencies: Dependencies::Ready,
            id_known: true,
            held: false,
            azure: None,
            owner_elsewhere: None,
            #[cfg(feature = "bench-hooks")]
            resync_put: false,
            follow_up: false,
        }
    }

    fn present(ownership: Ownership) -> Option<Azure> {
        Some(Azure::Present {
            ownership,
            busy: false,
            failed: false,
            drift: None,
        })
    }

    /// Ours, with `tags.env` drifted.
    fn drifted() -> Option<Azure> {
        Some(Azure::Present {
            ownership: Ownership::Ours,
            busy: false,
            failed: false,
            drift: Some("tags.env".into()),
        })
    }

    /// Ours, an operation running.
    fn busy() -> Option<Azure> {
        Some(Azure::Present {
            ownership: Ownership::Ours,
            busy: true,
            failed: false,
            drift: None,
        })
    }

    #[test]
    fn decision_table() {
        let waiting = Dependencies::WaitingForOwner("ResourceGroup rg".into());
        let (drifted, busy) = (drifted(), busy());
        let failed = Some(Azure::Present {
            ownership: Ownership::Ours,
            busy: false,
            failed: true,
            drift: None,
        });
        let other = Ownership::Other("ns/VirtualNetwork/x".into());
        let elsewhere = Ownership::OtherNamespace("a/VirtualNetwork/x".into());
        let refused_elsewhere = || {
            Step::AdoptionRefused(
                "the resource belongs to a/VirtualNetwork/x, a CR of another namespace".into(),
            )
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, Observation, Step)> = vec![
            ("paused wins over everything", Observation { paused: true, deleting: true, ..base() }, Step::Paused),
            ("created, finalizer lost → put back first", Observation { has_finalizer: false, dependencies: waiting.clone(), ..base() }, Step::AddFinalizer),
            ("nothing created: waiting needs no finalizer", Observation { has_finalizer: false, recorded: false, dependencies: waiting.clone(), ..base() }, Step::Wait(waiting.clone())),
            ("nothing created: observed first", Observation { has_finalizer: false, recorded: false, ..base() }, Step::Observe),
            ("absent → create: the finalizer goes with the creation record", Observation { has_finalizer: false, recorded: false, azure: Some(Azure::Absent), ..base() }, Step::Create),
            ("ours in Azure, no finalizer → put back first", Observation { has_finalizer: false, recorded: false, azure: busy.clone(), ..base() }, Step::AddFinalizer),
            ("foreign and refused: no finalizer", Observation { has_finalizer: false, recorded: false, azure: present(Ownership::Untagged), ..base() }, Step::AdoptionRefused("the resource exists and was not created by Strata".into())),
            ("foreign, used as it is: no finalizer", Observation { has_finalizer: false, recorded: false, use_existing: true, azure: present(Ownership::Untagged), ..base() }, Step::UseExisting),
            ("adopting: the finalizer goes with the creation record", Observation { has_finalizer: false, recorded: false, adopt: true, azure: present(Ownership::Untagged), ..base() }, Step::Update("adoption".into())),
            ("observe needs no finalizer", Observation { has_finalizer: false, policy: Policy::Observe, ..base() }, Step::Observe),
            ("waiting: no Azure call", Observation { dependencies: waiting.clone(), ..base() }, Step::Wait(waiting.clone())),
            ("held until the spec changes", Observation { held: true, ..base() }, Step::Hold),
            ("observe first", base(), Step::Observe),
            ("absent → create", Observation { azure: Some(Azure::Absent), ..base() }, Step::Create),
            ("observe policy, absent → NotFound", Observation { policy: Policy::Observe, azure: Some(Azure::Absent), ..base() }, Step::NotFound),
            ("observe policy never writes", Observation { policy: Policy::Observe, azure: drifted.clone(), ..base() }, Step::Ready),
            ("up to date → ready", Observation { azure: present(Ownership::Ours), ..base() }, Step::Ready),
            ("up to date, an action due → follow up", Observation { azure: present(Ownership::Ours), follow_up: true, ..base() }, Step::FollowUp),
            ("drift comes before the action", Observation { azure: drifted.clone(), follow_up: true, ..base() }, Step::Update("tags.env".into())),
            ("an operation running comes before the action", Observation { azure: busy.clone(), follow_up: true, ..base() }, Step::InProgress),
            ("observe policy never acts", Observation { policy: Policy::Observe, azure: present(Ownership::Ours), follow_up: true, ..base() }, Step::Ready),
            ("drift → one update", Observation { azure: drifted.clone(), ..base() }, Step::Update("tags.env".into())),
            ("operation running → wait", Observation { azure: busy.clone(), ..base() }, Step::InProgress),
            ("failed operation → retry with a PUT", Observation { azure: failed, ..base() }, Step::Update("provisioningState Failed".into())),
            ("untagged → refused", Observation { azure: present(Ownership::Untagged), ..base() }, Step::AdoptionRefused("the resource exists and was not created by Strata".into())),
            ("other owner → refused", Observation { azure: present(other.clone()), ..base() }, Step::AdoptionRefused("the resource belongs to ns/VirtualNetwork/x".into())),
            ("adopt → update", Observation { adopt: true, azure: present(Ownership::Untagged), ..base() }, Step::Update("adoption".into())),
            ("use-existing, foreign → used as it is", Observation { use_existing: true, azure: present(Ownership::Untagged), ..base() }, Step::UseExisting),
            ("use-existing, another CR's → used as it is", Observation { use_existing: true, azure: present(other.clone()), ..base() }, Step::UseExisting),
            // Another namespace's resource: no annotation and no policy reaches it.
            ("another namespace's → refused", Observation { azure: present(elsewhere.clone()), ..base() }, refused_elsewhere()),
            ("another namespace's, adopt → still refused", Observation { adopt: true, has_finalizer: false, recorded: false, azure: present(elsewhere.clone()), ..base() }, refused_elsewhere()),
            ("another namespace's, use-existing → refused", Observation { use_existing: true, azure: present(elsewhere.clone()), ..base() }, refused_elsewhere()),
            ("another namespace's, observe policy → refused", Observation { policy: Policy::Observe, azure: present(elsewhere.clone()), ..base() }, refused_elsewhere()),
            ("another namespace's, busy → refused", Observation { azure: Some(Azure::Present { ownership: elsewhere.clone(), busy: true, failed: false, drift: None }), ..base() }, refused_elsewhere()),
            // Inside another namespace's resource (an owner named by ARM ID): nothing at all.
            ("owner elsewhere, absent → not created", Observation { owner_elsewhere: Some("a/VirtualNetwork/x (its owner /v)".into()), azure: Some(Azure::Absent), ..base() }, Step::AdoptionRefused("it would be inside a/VirtualNetwork/x (its owner /v), a resource of another namespace".into())),
            ("owner elsewhere, adopt → refused", Observation { owner_elsewhere: Some("a/VirtualNetwork/x (its owner /v)".into()), adopt: true, azure: present(Ownership::Untagged), ..base() }, Step::AdoptionRefused("it would be inside a/VirtualNetwork/x (its owner /v), a resource of another namespace".into())),
            ("owner elsewhere, delete: only what is ours", Observation { owner_elsewhere: Some("a/VirtualNetwork/x (its owner /v)".into()), deleting: true, azure: present(Ownership::Untagged), ..base() }, Step::RemoveFinalizer),
            ("use-existing + adopt → adoption wins", Observation { use_existing: true, adopt: true, azure: present(Ownership::Untagged), ..base() }, Step::Update("adoption".into())),
            ("use-existing, absent → created", Observation { use_existing: true, azure: Some(Azure::Absent), ..base() }, Step::Create),
            ("use-existing, ours → ordinary", Observation { use_existing: true, azure: present(Ownership::Ours), ..base() }, Step::Ready),
            ("use-existing, delete: never what is not ours", Observation { deleting: true, use_existing: true, azure: present(Ownership::Untagged), ..base() }, Step::RemoveFinalizer),
            // Deletion
            ("deleted, finalizer gone", Observation { deleting: true, has_finalizer: false, ..base() }, Step::Done),
            ("delete: observe first", Observation { deleting: true, ..base() }, Step::Observe),
            ("delete: waiting does not block", Observation { deleting: true, dependencies: waiting, azure: present(Ownership::Ours), ..base() }, Step::Delete),
            ("delete: absent → done", Observation { deleting: true, azure: Some(Azure::Absent), ..base() }, Step::RemoveFinalizer),
            ("delete: never created", Observation { deleting: true, id_known: false, ..base() }, Step::RemoveFinalizer),
            ("delete: running operation", Observation { deleting: true, azure: busy, ..base() }, Step::InProgress),
            ("delete: never what is not ours", Observation { deleting: true, azure: present(Ownership::Untagged), ..base() }, Step::RemoveFinalizer),
            ("delete: nor another CR's", Observation { deleting: true, azure: present(other), ..base() }, Step::RemoveFinalizer),
            ("delete: nor another namespace's", Observation { deleting: true, azure: present(elsewhere.clone()), ..base() }, Step::RemoveFinalizer),
            ("detach-on-delete", Observation { deleting: true, policy: Policy::DetachOnDelete, ..base() }, Step::RemoveFinalizer),
            ("observe never deletes", Observation { deleting: true, policy: Policy::Observe, ..base() }, Step::RemoveFinalizer),
        ];
        for (name, obs, want) in cases {
            assert_eq!(decide(&obs), want, "{name}");
        }
    }

    /// The benchmark's model of ASO (`bench-hooks`): a PUT on every resync, but never a write
    /// that Strata itself would not make for the other states.
    #[cfg(feature = "bench-hooks")]
    #[test]
    fn the_benchmark_models_resync_put() {
        let waiting = Dependencies::WaitingForOwner("ResourceGroup rg".into());
        let (drifted, busy) = (drifted(), busy());
        #[rustfmt::skip]
        let cases: Vec<(&str, Observation, Step)> = vec![
            ("up to date → PUT anyway", Observation { resync_put: true, azure: present(Ownership::Ours), ..base() }, Step::Update("resync".into())),
            ("drift wins over resync", Observation { resync_put: true, azure: drifted.clone(), ..base() }, Step::Update("tags.env".into())),
            ("operation running → wait", Observation { resync_put: true, azure: busy.clone(), ..base() }, Step::InProgress),
            ("waiting still makes no call", Observation { resync_put: true, dependencies: waiting.clone(), ..base() }, Step::Wait(waiting.clone())),
            ("observe policy never writes", Observation { resync_put: true, policy: Policy::Observe, azure: present(Ownership::Ours), ..base() }, Step::Ready),
            ("not ours → still refused", Observation { resync_put: true, azure: present(Ownership::Untagged), ..base() }, Step::AdoptionRefused("the resource exists and was not created by Strata".into())),
            ("deletion unchanged", Observation { resync_put: true, deleting: true, azure: present(Ownership::Ours), ..base() }, Step::Delete),
        ];
        for (name, obs, want) in cases {
            assert_eq!(decide(&obs), want, "{name}");
        }
    }

    #[test]
    fn policy_annotation() {
        assert_eq!(Policy::parse(None), Some(Policy::Manage));
        assert_eq!(Policy::parse(Some("observe")), Some(Policy::Observe));
        assert_eq!(
            Policy::parse(Some("detach-on-delete")),
            Some(Policy::DetachOnDelete)
        );
        assert_eq!(Policy::parse(Some("Observe")), None);
    }
}
