//! Runs the contract generator (`codegen/`) over `schema/` and writes every artifact to
//! `OUT_DIR`, which `src/` includes. It never writes outside `OUT_DIR`: the committed mirror in
//! `generated/` is refreshed and checked by the `generated_fresh` test.
//!
//! Every problem in `schema/` becomes a `cargo::error=` line naming the file, and the build fails.

#[path = "codegen/mod.rs"]
mod codegen;
#[path = "codegen/rust_types.rs"]
mod rust_types;

use std::path::{Path, PathBuf};
use std::{env, fs, process};

use codegen::{Artifact, Diagnostic, PREAMBLE};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=codegen");
    println!("cargo::rerun-if-changed=src/contract/kinds.rs");
    println!("cargo::rerun-if-changed=schema");

    let (model, mut artifacts) =
        codegen::generate(Path::new("schema")).unwrap_or_else(|diags| fail(&diags));
    let types = rust_types::render(&model).unwrap_or_else(|diag| fail(&[diag]));
    artifacts.push(Artifact {
        name: "types.rs",
        contents: types,
    });

    for artifact in &mut artifacts {
        if artifact.name.ends_with(".rs") {
            let formatted =
                format_rust(artifact.name, &artifact.contents).unwrap_or_else(|diag| fail(&[diag]));
            artifact.contents = format!("// {PREAMBLE}\n\n{formatted}");
        }
    }
    let manifest: String = artifacts.iter().map(|a| format!("{}\n", a.name)).collect();
    artifacts.push(Artifact {
        name: "MANIFEST",
        contents: manifest,
    });

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for artifact in &artifacts {
        write_if_changed(&out_dir.join(artifact.name), &artifact.contents);
    }
}

/// prettyplease drops plain comments, so the preamble is added after formatting.
fn format_rust(name: &str, source: &str) -> Result<String, Diagnostic> {
    let file: syn::File = syn::parse_file(source).map_err(|e| {
        Diagnostic::new(
            format!("codegen/ ({name})"),
            "",
            format!("generated Rust does not parse: {e}"),
        )
    })?;
    Ok(prettyplease::unparse(&file))
}

/// Writes through a temp file and a rename, so a concurrent reader (rust-analyzer runs build
/// scripts too) never sees half a file; an unchanged file keeps its mtime.
fn write_if_changed(path: &Path, contents: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return;
    }
    let tmp = path.with_extension("tmp~");
    let result = fs::write(&tmp, contents).and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = result {
        fail(&[Diagnostic::new(
            path.display().to_string(),
            "",
            format!("cannot write: {e}"),
        )]);
    }
}

fn fail(diags: &[Diagnostic]) -> ! {
    for diag in diags {
        println!("cargo::error={diag}");
    }
    process::exit(1);
}
