//! The cloud CR kinds. The registry (the one list, and each kind's owner, ARM type and API
//! version) is `strata_crds::kinds`.

pub use strata_crds::kinds::CloudKind;
