//! Writes every Strata CRD as YAML: `cargo run -p strata-crds --bin crdgen -- crds/generated`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: crdgen <output directory>");
        return ExitCode::from(2);
    };
    match strata_crds::write_all(&dir) {
        Ok(n) => {
            println!("wrote {n} CRDs to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crdgen: {e}");
            ExitCode::FAILURE
        }
    }
}
