//! How both controllers put errors in front of a person: a failure to start as one line without
//! repetition, a Kubernetes API error as its code, reason and message, and a routine write
//! conflict — retried at once — as something not worth a warning.

use std::error::Error;
use std::fmt;

/// An error and its causes on one line, `outer: cause: …`, leaving out each cause whose text
/// the line already holds. Many errors embed their source's message in their own and return
/// it as `source()` too (kube's `InferConfigError` embeds two), so printing the whole chain
/// (anyhow's `{:#}`) said the same thing up to four times.
pub fn one_line(err: &(dyn Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

/// Whether a Kubernetes API error is an optimistic-concurrency conflict: 409 `Conflict`, "the
/// object has been modified; please apply your changes to the latest version". Another writer
/// got there first; the controller retries with the fresher object and nobody needs to act, so
/// it is logged at debug. A server-side apply refused for another field manager's fields is also
/// 409 `Conflict` but is no such race — it repeats until a person resolves it — and is not
/// routine.
pub fn is_routine_conflict(e: &kube::Error) -> bool {
    let kube::Error::Api(status) = e else {
        return false;
    };
    let field_manager = status
        .details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "FieldManagerConflict"));
    status.code == 409 && status.reason == "Conflict" && !field_manager
}

/// A Kubernetes API error for a log line: `409 Conflict: <message>` for an API status (kube's
/// own `Display` appends the whole `Status` in Rust debug form), kube's text otherwise.
pub struct Brief<'a>(pub &'a kube::Error);

impl fmt::Display for Brief<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            kube::Error::Api(s) => write!(f, "{} {}: {}", s.code, s.reason, s.message),
            other => other.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use kube::core::Status;
    use kube::core::response::{StatusCause, StatusDetails};

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
    }

    const MODIFIED: &str = "Operation cannot be fulfilled on azureclusters.infrastructure.cluster.x-k8s.io \"c\": the object has been modified; please apply your changes to the latest version and try again";

    #[test]
    fn only_an_optimistic_concurrency_conflict_is_routine() {
        assert!(is_routine_conflict(&api(409, "Conflict", MODIFIED)));
        // A create that lost the race is a different 409, and not this one.
        assert!(!is_routine_conflict(&api(
            409,
            "AlreadyExists",
            "already exists"
        )));
        assert!(!is_routine_conflict(&api(
            500,
            "InternalError",
            "etcd timed out"
        )));
        assert!(!is_routine_conflict(&api(
            422,
            "Invalid",
            "spec.x: Invalid value"
        )));
        // Server-side apply against another manager's field: needs a person.
        let ssa = kube::Error::Api(
            Status::failure("Apply failed with 1 conflict", "Conflict")
                .with_code(409)
                .with_details(StatusDetails {
                    causes: vec![StatusCause {
                        reason: "FieldManagerConflict".into(),
                        message: "conflict with \"kubectl\"".into(),
                        field: ".spec.location".into(),
                    }],
                    name: "web-rg".into(),
                    group: "azure.strata.dev".into(),
                    kind: "resourcegroups".into(),
                    uid: String::new(),
                    retry_after_seconds: 0,
                })
                .boxed(),
        );
        assert!(!is_routine_conflict(&ssa));
        assert!(!is_routine_conflict(
            &kube::Error::LinesCodecMaxLineLengthExceeded
        ));
    }

    #[test]
    fn an_api_error_is_brief_without_the_status_struct() {
        let e = api(409, "Conflict", MODIFIED);
        let brief = Brief(&e).to_string();
        assert_eq!(brief, format!("409 Conflict: {MODIFIED}"));
        // What kube's own Display adds, and Brief leaves out.
        assert!(e.to_string().contains("Status {"), "{e}");
        assert!(!brief.contains("Status {"));
        let other = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(Brief(&other).to_string(), other.to_string());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Embeds(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot start")]
    struct Wraps(#[source] Embeds);

    #[test]
    fn one_line_says_each_cause_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        // The source's text is already in the error's own: said once.
        assert_eq!(one_line(&Embeds(io())), "outer: no such file");
        // A wrapper that does not embed its source gets it appended, once.
        assert_eq!(
            one_line(&Wraps(Embeds(io()))),
            "cannot start: outer: no such file"
        );
        let chained = anyhow::Error::new(Embeds(io())).context("starting");
        assert_eq!(one_line(&*chained), "starting: outer: no such file");
    }
}
