//! Machine level: Machine + AzureMachine (+ the cluster's model) → NICs in the right subnet with
//! their load balancer pool memberships, an optional public IP (`network.rs`), and — once CAPI's
//! bootstrap data exists — the VM with its image, size, disks, SSH key, custom data (a Secret
//! reference, never inline), zone, identity and tags (`vm.rs`). Availability sets are
//! cluster-level CRs (several machines share one); [`availability_set_name`] says which one a
//! machine uses.

mod disks;
mod image;
mod network;
mod pool;
mod vm;

use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{self, AzureCluster, AzureMachine};
use strata_crds::common::{ResourceRef, Tags};

use crate::model::ClusterModel;
use crate::{InputError, Note, Translation, naming, object_ref};

pub use pool::translate_pool;
pub(crate) use vm::check_names;

/// CAPZ's admin user on its VMs.
pub const ADMIN_USERNAME: &str = "capi";
/// CAPZ's reference image when an AzureMachine names none. CAPZ picks the newest version for the
/// Machine's Kubernetes version through Azure's image list; the translator never calls Azure, so
/// it asks for `latest` and says so in a note.
const DEFAULT_IMAGE: (&str, &str, &str) = ("cncf-upstream", "capi", "ubuntu-2204-gen1");

/// CAPZ's community gallery of reference images (`azure.DefaultPublicGalleryName`).
const DEFAULT_PUBLIC_GALLERY: &str = "ClusterAPI-f72ceb4f-5159-4c26-a0fe-2ea738f0d019";
/// CAPZ's Windows reference image in that gallery (Windows Server 2019, containerd).
const DEFAULT_WINDOWS_IMAGE: &str = "capi-win-2019-containerd";

/// Whether `machine` belongs to the control plane.
pub fn is_control_plane(machine: &Machine) -> bool {
    machine
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(naming::CONTROL_PLANE_LABEL))
}

/// The availability zone of a machine: CAPI's `Machine.spec.failureDomain`, else the
/// AzureMachine's own.
pub fn zone(machine: &Machine, azure_machine: &AzureMachine) -> Option<String> {
    machine
        .spec
        .failure_domain
        .clone()
        .or_else(|| azure_machine.spec.machine.failure_domain.clone())
}

/// The Azure name of the availability set a machine without a zone goes into, as CAPZ names it
/// (`<cluster>_<control-plane | deployment | set>-as`); none for a zoned machine, one that
/// belongs to no node group, or one in an edge zone (CAPZ's `MachineScope.AvailabilitySet`:
/// edge zones have no availability sets).
pub fn availability_set_name(
    model: &ClusterModel,
    machine: &Machine,
    azure_machine: &AzureMachine,
) -> Option<String> {
    if zone(machine, azure_machine).is_some() || model.extended_location.is_some() {
        return None;
    }
    let labels = machine.metadata.labels.as_ref();
    let group = if is_control_plane(machine) {
        Some("control-plane".to_owned())
    } else {
        labels.and_then(|l| {
            l.get(naming::DEPLOYMENT_NAME_LABEL)
                .or_else(|| l.get(naming::SET_NAME_LABEL))
                .cloned()
        })
    };
    group.map(|g| naming::availability_set(&model.name, &g))
}

/// The desired CRs of one machine.
pub fn translate(
    cluster: &Cluster,
    azure_cluster: &AzureCluster,
    machine: &Machine,
    azure_machine: &AzureMachine,
) -> Result<Translation, InputError> {
    // The cluster's own notes belong to the AzureCluster, not to each machine.
    let model = ClusterModel::new(cluster, azure_cluster, &mut Vec::new())?;
    translate_with(&model, machine, azure_machine)
}

/// What every part of a machine's translation reads.
struct Input<'a> {
    model: &'a ClusterModel,
    machine: &'a Machine,
    azure_machine: &'a AzureMachine,
    spec: &'a capz::AzureMachineTemplateFields,
    /// `AzureMachine <namespace>/<name>`, for errors and notes.
    object: String,
    vm_name: String,
    /// The name the VM and its NICs and public IP get in Azure: `vm_name`, shortened for a
    /// Windows VM to its 15-character computer name as CAPZ's `MachineScope.Name` does.
    azure_vm_name: String,
    control_plane: bool,
    /// CAPZ's role tag: `control-plane` or `node`.
    role: &'static str,
    /// The cluster's resource group, every CR's owner.
    rg: ResourceRef,
}

impl Input<'_> {
    fn err(&self, field: &str, message: String) -> InputError {
        InputError {
            object: self.object.clone(),
            field: field.to_owned(),
            message,
        }
    }

    /// The tags of a resource named `name`: CAPZ's, and the machine's additional tags.
    fn tags(&self, name: &str) -> Tags {
        let mut t = self.model.tags(self.role, name);
        t.extend(self.spec.additional_tags.clone());
        t
    }
}

/// [`translate`] against a cluster model already built: the machine's unsupported fields, its
/// public IP, its NICs and — once the bootstrap data exists — its VM.
pub fn translate_with(
    model: &ClusterModel,
    machine: &Machine,
    azure_machine: &AzureMachine,
) -> Result<Translation, InputError> {
    let object = object_ref(azure_machine);
    let mut out = Translation::default();
    let mut note = |field: &str, message: &str| {
        out.notes.push(Note {
            object: object.clone(),
            field: field.to_owned(),
            message: message.to_owned(),
        })
    };
    let control_plane = is_control_plane(machine);
    let vm_name = azure_machine.metadata.name.clone().unwrap_or_default();
    let windows = azure_machine.spec.machine.os_disk.os_type == capz::OSType::Windows;
    let azure_vm_name = windows
        .then(|| vm::windows_name(&vm_name))
        .flatten()
        .unwrap_or_else(|| vm_name.clone());
    let i = Input {
        model,
        machine,
        azure_machine,
        spec: &azure_machine.spec.machine,
        object: object.clone(),
        vm_name,
        azure_vm_name,
        control_plane,
        role: if control_plane {
            "control-plane"
        } else {
            "node"
        },
        rg: model.resource_group_ref()?,
    };
    if !vm::vm_name_ok(&i.vm_name) {
        return Err(i.err(
            "metadata.name",
            "a VM name is 1 to 64 letters, digits and '-', not starting or ending with '-'".into(),
        ));
    }
    unsupported_fields(&i, &mut note);
    let public_ip = network::public_ip(&i, &mut out.resources, &mut note);
    let nics = network::network_interfaces(&i, public_ip, &mut out.resources, &mut note)?;
    // The VM waits for CAPI's bootstrap data (the infrastructure-machine contract).
    if machine.spec.bootstrap.data_secret_name.is_some() {
        let vm = vm::virtual_machine(&i, nics, &mut note)?;
        out.resources.push(vm.into());
    }
    check_names(&object, &out.resources)?;
    out.normalize();
    Ok(out)
}

/// Fields of the AzureMachine the translation does not carry to Azure yet: each gets a note.
fn unsupported_fields(i: &Input, note: &mut impl FnMut(&str, &str)) {
    let spec = i.spec;
    for (present, field) in [
        (spec.spot_vm_options.is_some(), "spec.spotVMOptions"),
        (spec.security_profile.is_some(), "spec.securityProfile"),
        (!spec.vm_extensions.is_empty(), "spec.vmExtensions"),
        (
            spec.system_assigned_identity_role.is_some(),
            "spec.systemAssignedIdentityRole",
        ),
        (
            spec.os_disk
                .managed_disk
                .as_ref()
                .is_some_and(|m| m.disk_encryption_set.is_some()),
            "spec.osDisk.managedDisk.diskEncryptionSet",
        ),
        (
            spec.os_disk
                .managed_disk
                .as_ref()
                .is_some_and(|m| m.security_profile.is_some()),
            "spec.osDisk.managedDisk.securityProfile",
        ),
        (
            spec.additional_capabilities.is_some(),
            "spec.additionalCapabilities",
        ),
        (
            spec.capacity_reservation_group_id.is_some(),
            "spec.capacityReservationGroupID",
        ),
        (
            spec.role_assignment_name.is_some(),
            "spec.roleAssignmentName",
        ),
    ] {
        if present {
            note(field, "not translated yet");
        }
    }
    // Strata installs no VM extensions, so disabling them is what it does anyway; asking for
    // CAPZ's bootstrap-detection extension is not honoured.
    if spec.disable_vm_bootstrap_extension == Some(false) {
        note(
            "spec.disableVMBootstrapExtension",
            "false is not translated: Strata installs no bootstrap-detection extension",
        );
    }
}
