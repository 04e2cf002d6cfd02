//! `strata-translator render`: CAPI YAML in, the cloud CRs the controller would apply out, with
//! the same pure functions and no cluster.
//!
//! Objects are paired as CAPI pairs them: a Cluster with the AzureCluster its `infrastructureRef`
//! names, a Machine with its AzureMachine, a MachinePool with the AzureMachinePool its template
//! names. An AzureCluster without a Cluster in the input (a flavour's AzureCluster on its own) is
//! rendered as if a Cluster of the same name pointed at it. Templates and other kinds are read
//! past: templates are never translated, only AzureMachines and AzureMachinePools.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use strata_crds::capi::{Cluster, ClusterSpec, Machine, MachinePool};
use strata_crds::capz::{AzureCluster, AzureMachine, AzureMachinePool};

use crate::{CloudResource, InputError, Note, Translation, cluster, machine};

/// The CAPI objects of some YAML files, keyed by (namespace, name).
#[derive(Debug, Default, Clone)]
pub struct Inputs {
    pub clusters: BTreeMap<(String, String), Cluster>,
    pub azure_clusters: BTreeMap<(String, String), AzureCluster>,
    pub machines: BTreeMap<(String, String), Machine>,
    pub azure_machines: BTreeMap<(String, String), AzureMachine>,
    pub machine_pools: BTreeMap<(String, String), MachinePool>,
    pub azure_machine_pools: BTreeMap<(String, String), AzureMachinePool>,
    /// Fields of the CAPZ objects that their types do not declare (`coverage`).
    pub notes: Vec<Note>,
}

impl Inputs {
    /// Adds every object of a multi-document YAML text; `source` names it in errors.
    pub fn add_yaml(&mut self, source: &str, text: &str) -> Result<(), InputError> {
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let doc_err = |message: String| InputError {
                object: format!("{source}: document {}", i + 1),
                field: "-".to_owned(),
                message,
            };
            let value = serde_json::Value::deserialize(doc).map_err(|e| doc_err(e.to_string()))?;
            if value.is_null() {
                continue;
            }
            let api_version = value["apiVersion"].as_str().unwrap_or_default();
            let kind = value["kind"].as_str().unwrap_or_default();
            let name = value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let namespace = value["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned();
            let object = format!("{kind} {namespace}/{name}");
            let parse_err = |e: serde_json::Error| InputError {
                object: object.clone(),
                field: "spec".to_owned(),
                message: e.to_string(),
            };
            if name.is_empty() && !kind.is_empty() {
                return Err(InputError {
                    object,
                    field: "metadata.name".to_owned(),
                    message: "required".to_owned(),
                });
            }
            let key = (namespace.clone(), name.clone());
            let mut value = value.clone();
            value["metadata"]["namespace"] = serde_json::Value::String(namespace);
            match (api_version, kind) {
                ("cluster.x-k8s.io/v1beta1", "Cluster") => {
                    self.clusters
                        .insert(key, serde_json::from_value(value).map_err(parse_err)?);
                }
                ("cluster.x-k8s.io/v1beta1", "Machine") => {
                    self.machines
                        .insert(key, serde_json::from_value(value).map_err(parse_err)?);
                }
                ("infrastructure.cluster.x-k8s.io/v1beta1", "AzureCluster") => {
                    let typed: AzureCluster =
                        serde_json::from_value(value.clone()).map_err(parse_err)?;
                    self.note_undeclared(&object, &value, &typed);
                    self.azure_clusters.insert(key, typed);
                }
                ("infrastructure.cluster.x-k8s.io/v1beta1", "AzureMachine") => {
                    let typed: AzureMachine =
                        serde_json::from_value(value.clone()).map_err(parse_err)?;
                    self.note_undeclared(&object, &value, &typed);
                    self.azure_machines.insert(key, typed);
                }
                ("cluster.x-k8s.io/v1beta1", "MachinePool") => {
                    self.machine_pools
                        .insert(key, serde_json::from_value(value).map_err(parse_err)?);
                }
                ("infrastructure.cluster.x-k8s.io/v1beta1", "AzureMachinePool") => {
                    let typed: AzureMachinePool =
                        serde_json::from_value(value.clone()).map_err(parse_err)?;
                    self.note_undeclared(&object, &value, &typed);
                    self.azure_machine_pools.insert(key, typed);
                }
                (_, "") => return Err(doc_err("no kind".to_owned())),
                _ => {}
            }
        }
        Ok(())
    }

    /// Notes the spec fields of `raw` that its typed form `typed` dropped.
    fn note_undeclared(&mut self, object: &str, raw: &serde_json::Value, typed: &impl Serialize) {
        let typed = serde_json::to_value(typed).unwrap_or_default();
        self.notes.extend(crate::coverage::undeclared_fields(
            object,
            "spec",
            &raw["spec"],
            &typed["spec"],
        ));
    }

    /// Whether the input holds the AzureCluster of cluster `cluster` in `ns` (named by its Cluster,
    /// or of the same name).
    fn has_azure_cluster(&self, ns: &str, cluster: &str) -> bool {
        let named = self
            .clusters
            .get(&(ns.to_owned(), cluster.to_owned()))
            .and_then(|c| c.spec.infrastructure_ref.as_ref())
            .and_then(|r| r.name.as_ref());
        self.azure_clusters
            .keys()
            .any(|(cns, cname)| cns == ns && (cname == cluster || named == Some(cname)))
    }

    /// Translates everything: each AzureCluster with its Cluster, availability sets for its
    /// machines, and each Machine with its AzureMachine.
    pub fn translate(&self) -> Result<Translation, InputError> {
        let mut out = Translation {
            notes: self.notes.clone(),
            ..Default::default()
        };
        for ((ns, name), azc) in &self.azure_clusters {
            let cluster = self
                .clusters
                .iter()
                .find(|((cns, _), c)| {
                    cns == ns
                        && c.spec.infrastructure_ref.as_ref().is_some_and(|r| {
                            r.kind.as_deref() == Some("AzureCluster")
                                && r.name.as_deref() == Some(name)
                        })
                })
                .map(|(_, c)| c.clone())
                .unwrap_or_else(|| Cluster {
                    metadata: kube::api::ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(ns.clone()),
                        ..Default::default()
                    },
                    spec: ClusterSpec::default(),
                    status: None,
                });
            let cluster_name = cluster.metadata.name.clone().unwrap_or_default();
            let mut pairs = Vec::new();
            for ((mns, mname), m) in &self.machines {
                if mns != ns || m.spec.cluster_name != cluster_name {
                    continue;
                }
                let Some(azm_name) =
                    m.spec.infrastructure_ref.name.as_ref().filter(|_| {
                        m.spec.infrastructure_ref.kind.as_deref() == Some("AzureMachine")
                    })
                else {
                    continue;
                };
                let azm = self
                    .azure_machines
                    .get(&(ns.clone(), azm_name.clone()))
                    .ok_or_else(|| InputError {
                        object: format!("Machine {mns}/{mname}"),
                        field: "spec.infrastructureRef.name".to_owned(),
                        message: format!("no AzureMachine {azm_name:?} in the input"),
                    })?;
                pairs.push((m, azm));
            }
            let mut notes = Vec::new();
            let model = crate::model::ClusterModel::new(&cluster, azc, &mut notes)?;
            out.extend(cluster::translate_with(&model, notes, &pairs)?);
            for (m, azm) in pairs {
                out.extend(machine::translate_with(&model, m, azm)?);
            }
            for ((pns, pname), pool) in &self.machine_pools {
                let infra = &pool.spec.template.spec.infrastructure_ref;
                if pns != ns
                    || pool.spec.cluster_name != cluster_name
                    || infra.kind.as_deref() != Some("AzureMachinePool")
                {
                    continue;
                }
                let amp_name = infra.name.clone().unwrap_or_default();
                let amp = self
                    .azure_machine_pools
                    .get(&(ns.clone(), amp_name.clone()))
                    .ok_or_else(|| InputError {
                        object: format!("MachinePool {pns}/{pname}"),
                        field: "spec.template.spec.infrastructureRef.name".to_owned(),
                        message: format!("no AzureMachinePool {amp_name:?} in the input"),
                    })?;
                out.extend(machine::translate_pool(&model, pool, amp)?);
            }
        }
        for ((ns, name), m) in &self.machines {
            if !self.has_azure_cluster(ns, &m.spec.cluster_name) {
                out.notes.push(Note {
                    object: format!("Machine {ns}/{name}"),
                    field: "spec.clusterName".to_owned(),
                    message: format!(
                        "no AzureCluster of cluster {:?} in the input: not rendered",
                        m.spec.cluster_name
                    ),
                });
            }
        }
        for ((ns, name), p) in &self.machine_pools {
            if !self.has_azure_cluster(ns, &p.spec.cluster_name) {
                out.notes.push(Note {
                    object: format!("MachinePool {ns}/{name}"),
                    field: "spec.clusterName".to_owned(),
                    message: format!(
                        "no AzureCluster of cluster {:?} in the input: not rendered",
                        p.spec.cluster_name
                    ),
                });
            }
        }
        out.normalize();
        Ok(out)
    }
}

/// The CRs as a multi-document YAML stream, in the translator's order.
pub fn to_yaml(resources: &[CloudResource]) -> String {
    let mut out = String::new();
    for r in resources {
        out.push_str("---\n");
        // Serializing a JSON value to YAML cannot fail.
        out.push_str(&serde_yaml_ng::to_string(&r.to_value()).unwrap_or_default());
    }
    out
}

/// The render command: reads `files` (`-` is stdin), prints the CRs on stdout and notes on
/// stderr; exit code 2 with one line per error when the input is bad, 1 when a file cannot be
/// read.
pub fn main(files: &[String]) -> std::process::ExitCode {
    use std::io::{Read, Write};
    let mut inputs = Inputs::default();
    for file in files {
        let text = if file == "-" {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map(|_| s)
        } else {
            std::fs::read_to_string(file)
        };
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {file}: {e}");
                return std::process::ExitCode::from(1);
            }
        };
        if let Err(e) = inputs.add_yaml(file, &text) {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    }
    match inputs.translate() {
        Ok(t) => {
            for n in &t.notes {
                eprintln!("note: {n}");
            }
            let mut stdout = std::io::stdout().lock();
            if stdout.write_all(to_yaml(&t.resources).as_bytes()).is_err() {
                return std::process::ExitCode::from(1);
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
