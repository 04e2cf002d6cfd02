//! strata-translator: pure functions from CAPI + CAPZ v1beta1 objects to the cloud CRs of
//! `azure.strata.dev`, and (with its issue) the controller that server-side applies them and
//! reports their state back to CAPI. See DESIGN.md "Translator contract".
//!
//! Nothing is translated yet: this crate exists so the workspace has its final shape.
