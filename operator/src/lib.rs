//! strata-operator: the generic convergent reconciler that syncs each cloud CR of
//! `azure.strata.dev` with Azure Resource Manager, in any order, until every resource is Ready.
//! It is the only crate that depends on the Azure SDK (`azure_mgmt_*`, pinned in the workspace).
//!
//! Nothing is reconciled yet: this crate exists so the workspace has its final shape.
