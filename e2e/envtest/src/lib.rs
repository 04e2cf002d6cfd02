//! Being written: see its issue.
