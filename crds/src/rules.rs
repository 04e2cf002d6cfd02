//! CEL validation rules (`x-kubernetes-validations`) used by more than one kind, so that the same
//! invariant reads the same everywhere and the API server's message names the field to fix.

use kube::core::Rule;

/// A spec-level transition rule: `field` may be neither changed, set nor unset after creation.
/// It sits on the parent object (not the field) so that adding or removing an optional field is
/// caught too; `fieldPath` makes the API server's error name the field itself.
pub fn immutable(field: &str) -> Rule {
    Rule::new(format!(
        "has(self.{field}) == has(oldSelf.{field}) && (!has(self.{field}) || self.{field} == oldSelf.{field})"
    ))
    .message(kube::core::Message::Message(format!("{field} is immutable")))
    .field_path(format!(".{field}"))
}

/// A string field holding a CIDR block such as `10.0.0.0/16`.
pub fn cidr() -> Rule {
    Rule::new("isCIDR(self)").message("must be a CIDR block such as 10.0.0.0/16")
}

/// A list of CIDR blocks.
pub fn cidrs() -> Rule {
    Rule::new("self.all(p, isCIDR(p))")
        .message("every entry must be a CIDR block such as 10.0.0.0/16")
}

/// A string field holding an IP address.
pub fn ip() -> Rule {
    Rule::new("isIP(self)").message("must be an IP address such as 10.0.0.4")
}

/// A list of objects keyed by `name`: the names must be unique. A list that is a list-map keyed
/// by `name` (`ListMerge::Map`, as every cloud kind's named lists are) needs no rule: the API
/// server refuses a duplicate key itself, at a cost linear in the list's length, where this rule
/// is quadratic and exceeds CEL's cost limit at a few hundred entries.
pub fn unique_names() -> Rule {
    Rule::new("self.all(a, self.exists_one(b, b.name == a.name))").message("names must be unique")
}
