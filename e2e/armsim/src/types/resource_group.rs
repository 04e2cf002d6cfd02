//! `Microsoft.Resources/resourceGroups`: created at once; deleting one deletes its content.

use super::{NameRule, Spec};

pub static SPEC: Spec = Spec {
    type_name: "Microsoft.Resources/resourceGroups",
    api_versions: super::RESOURCES_API_VERSIONS,
    name_rule: NameRule {
        min: 1,
        max: 90,
        pattern: r"^[-\w._()]*[-\w_()]$",
        describe: "Resource group names only allow up to 90 characters and can only include alphanumeric, underscore, parentheses, hyphen, period (except at end), and Unicode characters that match the allowed characters.",
    },
    put_seconds: 0.0,
    delete_seconds: 20.0,
    creating_state: "Succeeded",
    updating_state: "Succeeded",
    resource_guid: false,
    in_use_code: "ResourceGroupInUse",
    ..Spec::network("Microsoft.Resources/resourceGroups", 0.0, "")
};
