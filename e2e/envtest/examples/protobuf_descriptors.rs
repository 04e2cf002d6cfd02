//! Writes `src/assets/protobuf.txt`, the descriptor table the server's protobuf codec
//! (`src/protobuf.rs`) is driven by:
//!
//! ```text
//! cargo run -p strata-envtest --example protobuf_descriptors
//! ```
//!
//! The messages, field tags and types come from the upstream `.proto` files as the `k8s-pb` crate
//! generated them (prost types; it ships no descriptor set), read here with `syn`. prost renames
//! fields to snake_case (`volumeID` → `volume_id`), so each field's JSON name is taken from
//! k8s-openapi's serializer of the same definition (`io.k8s.api.core.v1.…`), matching names
//! lowercased with only letters and digits kept (`x_kubernetes_validations` ↔
//! `x-kubernetes-validations`, `ref` ↔ `$ref`). `tests/protobuf.rs` regenerates the table and
//! fails when the committed one differs.
//!
//! Format, one line each: `= <apiVersion> <package>` (which package holds an apiVersion's kinds,
//! from k8s-pb's `Resource` impls); `<package>.<Message>` starts a message; its fields follow as
//! ` <tag> <jsonName> <type>`, where type is a scalar (`string`, `int32`, `int64`, `bool`,
//! `double`, `bytes`), a message name, `*<type>` for a repeated field or `{<type>}` for a map
//! with string keys, then ` !` when the OpenAPI definition lists the field as required (Go
//! writes it even when empty: no `omitempty`). A JSON name `-` marks a Go struct embedded inline: its fields are the
//! parent's in JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

/// The k8s-pb top-level modules whose messages the server serves (metrics are aggregated APIs).
const MODULES: &[&str] = &[
    "api",
    "apimachinery",
    "apiextensions_apiserver",
    "kube_aggregator",
];

#[allow(dead_code)]
fn main() -> Result<()> {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/assets/protobuf.txt");
    let table = generate()?;
    std::fs::write(&out, &table.text).with_context(|| format!("writing {}", out.display()))?;
    println!(
        "wrote {} ({} messages, {} fields; {} fields without a k8s-openapi definition)",
        out.display(),
        table.messages,
        table.fields,
        table.unmatched.len()
    );
    for u in &table.unmatched {
        println!("  {u}");
    }
    Ok(())
}

pub struct Table {
    pub text: String,
    pub messages: usize,
    pub fields: usize,
    /// `<message>.<field>` whose JSON name was not found in k8s-openapi.
    pub unmatched: Vec<String>,
}

/// The source directories of the packages named, from `cargo metadata`.
fn package_dirs() -> Result<BTreeMap<String, PathBuf>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut dirs = BTreeMap::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or_default();
        if name == "k8s-pb" || name == "k8s-openapi" {
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap_or_default());
            if let Some(dir) = manifest.parent() {
                dirs.insert(name.to_string(), dir.to_path_buf());
            }
        }
    }
    Ok(dirs)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// Only letters and digits, lowercased: how prost's and the JSON names are compared.
fn squash(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// JSON property names per OpenAPI definition, from k8s-openapi's serializers.
fn json_names(openapi: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    // The newest Kubernetes version module (the `latest` feature).
    let src = openapi.join("src");
    let latest = std::fs::read_dir(&src)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("v1_"))
        .max_by_key(|n| n[3..].parse::<u32>().unwrap_or(0))
        .ok_or_else(|| anyhow!("no v1_* module in {}", src.display()))?;
    let schema_name = regex::Regex::new(r#"fn schema_name\(\)[^{]*\{\s*"([^"]+)""#)?;
    let field = regex::Regex::new(r#"serialize_field\(\s*&mut state,\s*"([^"]+)""#)?;
    let required = regex::Regex::new(r#""required":\s*\[([^\]]*)\]"#)?;
    let quoted = regex::Regex::new(r#""([^"]+)""#)?;
    let mut files = Vec::new();
    rust_files(&src.join(latest), &mut files)?;
    let mut out = BTreeMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f)?;
        if let Some(c) = schema_name.captures(&text) {
            let names = field.captures_iter(&text).map(|c| c[1].to_string());
            let required: Vec<String> = required
                .captures(&text)
                .map(|r| {
                    quoted
                        .captures_iter(&r[1])
                        .map(|q| format!("!{}", &q[1]))
                        .collect()
                })
                .unwrap_or_default();
            // Required names are listed again with a `!` in front.
            out.insert(c[1].to_string(), names.chain(required).collect());
        }
    }
    Ok(out)
}

/// `io.k8s.api.core.v1` for k8s-pb's module `api::core::v1` (the OpenAPI definition prefix).
fn package(module: &[String]) -> String {
    let mut parts = vec!["io".to_string(), "k8s".to_string()];
    for (i, m) in module.iter().enumerate() {
        parts.push(if i == 0 {
            m.replace('_', "-")
        } else {
            m.clone()
        });
    }
    parts.join(".")
}

/// The message type a field's Rust type names (inside `Option`, `Vec`, `Box`, `BTreeMap`), as a
/// full name resolved from the module the field is declared in.
fn message_type(ty: &syn::Type, module: &[String]) -> Result<String> {
    let syn::Type::Path(p) = ty else {
        bail!("unexpected field type");
    };
    let last = p
        .path
        .segments
        .last()
        .ok_or_else(|| anyhow!("empty type path"))?;
    let wrapper = ["Option", "Vec", "Box", "BTreeMap"].contains(&last.ident.to_string().as_str());
    if wrapper {
        if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
            // A map's value type is its last argument.
            if let Some(syn::GenericArgument::Type(inner)) = args.args.last() {
                return message_type(inner, module);
            }
        }
        bail!("wrapper type without an argument");
    }
    let mut base: Vec<String> = module.to_vec();
    let mut rest = Vec::new();
    for seg in &p.path.segments {
        let s = seg.ident.to_string();
        match s.as_str() {
            "super" => {
                base.pop();
            }
            "crate" => base.clear(),
            _ => rest.push(s),
        }
    }
    let name = rest.pop().ok_or_else(|| anyhow!("type without a name"))?;
    base.extend(rest);
    Ok(format!("{}.{name}", package(&base)))
}

/// The table's type of one prost field.
fn field_type(attr: &str, ty: &syn::Type, module: &[String]) -> Result<String> {
    let repeated = attr.contains("repeated");
    if let Some(map) = regex::Regex::new(r#"btree_map\s*=\s*"([^"]+)""#)?.captures(attr) {
        let value = map[1]
            .split(',')
            .nth(1)
            .map(str::trim)
            .ok_or_else(|| anyhow!("map without a value type: {attr}"))?;
        let value = if value == "message" {
            message_type(ty, module)?
        } else {
            value.to_string()
        };
        return Ok(format!("{{{value}}}"));
    }
    let first = attr
        .split([',', ' ', '='])
        .find(|s| !s.is_empty())
        .ok_or_else(|| anyhow!("empty prost attribute"))?;
    let base = match first {
        "message" => message_type(ty, module)?,
        "string" | "int32" | "int64" | "bool" | "double" | "bytes" => first.to_string(),
        other => bail!("unsupported prost type {other} in {attr}"),
    };
    Ok(if repeated { format!("*{base}") } else { base })
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.trim_start_matches("r#").chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

pub fn generate() -> Result<Table> {
    let dirs = package_dirs()?;
    let pb = dirs.get("k8s-pb").ok_or_else(|| {
        anyhow!("k8s-pb is not in cargo metadata (a dev-dependency of strata-envtest)")
    })?;
    let openapi = dirs
        .get("k8s-openapi")
        .ok_or_else(|| anyhow!("k8s-openapi is not in cargo metadata"))?;
    let names = json_names(openapi)?;
    let tag = regex::Regex::new(r#"tag\s*=\s*"(\d+)""#)?;
    let const_str = regex::Regex::new(r#"const (API_VERSION|KIND)\s*:[^=]*=\s*"([^"]*)""#)?;

    // prost renames messages too (`JSONSchemaProps` → `JsonSchemaProps`): first every struct
    // under its prost name, then each renamed to the k8s-openapi definition it squashes to.
    let mut api_versions = BTreeMap::new();
    let mut structs = Vec::new();
    for top in MODULES {
        let mut files = Vec::new();
        rust_files(&pb.join("src").join(top), &mut files)?;
        for file in files {
            // apimachinery's own test API group.
            if file.to_string_lossy().contains("testapigroup") {
                continue;
            }
            let rel = file.strip_prefix(pb.join("src"))?;
            let module: Vec<String> = rel
                .parent()
                .map(|p| {
                    p.components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            let text = std::fs::read_to_string(&file)?;
            let parsed = syn::parse_file(&text).with_context(|| format!("{}", file.display()))?;
            for item in parsed.items {
                match item {
                    syn::Item::Struct(s) => {
                        let full = format!("{}.{}", package(&module), s.ident);
                        let mut fields = Vec::new();
                        for f in &s.fields {
                            let Some(attr) = f.attrs.iter().find(|a| a.path().is_ident("prost"))
                            else {
                                continue;
                            };
                            let syn::Meta::List(list) = &attr.meta else {
                                continue;
                            };
                            let attr = list.tokens.to_string();
                            let number: u32 = tag
                                .captures(&attr)
                                .ok_or_else(|| anyhow!("{full}: field without a tag: {attr}"))?[1]
                                .parse()?;
                            let rust = f
                                .ident
                                .as_ref()
                                .map(|i| i.to_string())
                                .ok_or_else(|| anyhow!("{full}: unnamed field"))?;
                            let ty = field_type(&attr, &f.ty, &module)
                                .with_context(|| format!("{full}.{rust}"))?;
                            fields.push((number, rust, ty));
                        }
                        fields.sort();
                        structs.push((full, fields));
                    }
                    syn::Item::Impl(i) => {
                        let is_resource = i.trait_.as_ref().is_some_and(|(_, p, _)| {
                            p.segments.last().is_some_and(|s| s.ident == "Resource")
                        });
                        if is_resource {
                            let body: String = i
                                .items
                                .iter()
                                .map(quote_item)
                                .collect::<Vec<_>>()
                                .join("\n");
                            for c in const_str.captures_iter(&body) {
                                if &c[1] == "API_VERSION" {
                                    api_versions.insert(c[2].to_string(), package(&module));
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let by_squash: BTreeMap<String, &String> = names.keys().map(|k| (squash(k), k)).collect();
    let upstream = |prost: &str| -> String {
        by_squash
            .get(&squash(prost))
            .map(|n| n.to_string())
            .unwrap_or_else(|| prost.to_string())
    };
    let rename = |ty: &str| -> String {
        let (prefix, rest, suffix) = if let Some(inner) = ty.strip_prefix('{') {
            ("{", inner.trim_end_matches('}'), "}")
        } else if let Some(inner) = ty.strip_prefix('*') {
            ("*", inner, "")
        } else {
            ("", ty, "")
        };
        if rest.contains('.') {
            format!("{prefix}{}{suffix}", upstream(rest))
        } else {
            ty.to_string()
        }
    };
    let mut global: BTreeMap<String, String> = BTreeMap::new();
    for n in names.values().flatten().filter(|n| !n.starts_with('!')) {
        global.entry(squash(n)).or_insert_with(|| n.clone());
    }
    let mut messages = BTreeMap::new();
    let mut unmatched = Vec::new();
    let mut field_count = 0;
    for (prost_name, fields) in structs {
        let full = upstream(&prost_name);
        let json = names.get(&full);
        let mut lines = Vec::new();
        for (number, rust, ty) in fields {
            let key = squash(rust.trim_start_matches("r#"));
            let is_required =
                json.is_some_and(|j| j.iter().any(|n| n.starts_with('!') && squash(n) == key));
            let name = match json
                .and_then(|j| j.iter().find(|n| !n.starts_with('!') && squash(n) == key))
            {
                Some(n) => n.clone(),
                // A Go struct embedded with `json:",inline"` (Volume's VolumeSource, Probe's
                // ProbeHandler): a nested message in protobuf, its fields flattened in JSON.
                None if json.is_some() && ty.contains('.') && !ty.starts_with(['*', '{']) => {
                    "-".to_string()
                }
                // Types k8s-openapi does not have (lists, `EphemeralContainerCommon`, the
                // autoscaling/v1 metric types): the name any definition uses for that field.
                None => {
                    unmatched.push(format!("{full}.{rust}"));
                    global
                        .get(&key)
                        .cloned()
                        .unwrap_or_else(|| lower_camel(&rust))
                }
            };
            let mark = if is_required { " !" } else { "" };
            lines.push((number, format!(" {number} {name} {}{mark}", rename(&ty))));
        }
        field_count += lines.len();
        messages.insert(full, lines);
    }
    let mut text = String::from(
        "# Generated by `cargo run -p strata-envtest --example protobuf_descriptors` from k8s-pb's\n\
         # prost types and k8s-openapi's JSON names; do not edit (tests/protobuf.rs checks it).\n",
    );
    for (v, p) in &api_versions {
        text.push_str(&format!("= {v} {p}\n"));
    }
    for (name, lines) in &messages {
        text.push_str(name);
        text.push('\n');
        for (_, l) in lines {
            text.push_str(l);
            text.push('\n');
        }
    }
    Ok(Table {
        text,
        messages: messages.len(),
        fields: field_count,
        unmatched,
    })
}

/// The source text of an impl item's constant (enough for the `API_VERSION` regex).
fn quote_item(item: &syn::ImplItem) -> String {
    match item {
        syn::ImplItem::Const(c) => match &c.expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => format!("const {}: &str = \"{}\"", c.ident, s.value()),
            _ => String::new(),
        },
        _ => String::new(),
    }
}
