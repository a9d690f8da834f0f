//! House rules as tests: every hand-written Rust file opens with a `//!` line saying what it owns.

use std::path::Path;

use crate::support::repo_root;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let root = repo_root();
    let mut files = vec![root.join("build.rs")];
    for dir in ["src", "codegen", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let missing: Vec<String> = files
        .iter()
        .filter(|file| !std::fs::read_to_string(file).unwrap().starts_with("//!"))
        .map(|file| file.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading `//!` module doc: {missing:?}"
    );
}

/// The secret scanner the daemon tests run over every daemon log really finds each shape.
#[test]
fn the_log_secret_scanner_finds_every_secret_shape() {
    let token = format!("v1.{}.{}", "eyJhIjoiYXoxIiwiZyI6MX0", "A".repeat(43));
    let device = format!("dev_01M8MW93F5VQB87BZREWC35R3D.{}", "b".repeat(43));
    let operator = format!("ato_{}", "c".repeat(43));
    let admin = format!("adm_{}", "0123456789abcdef".repeat(2));
    for secret in [&token, &device, &operator, &admin] {
        let log = format!("2026-11-30 WARN something happened value={secret} and more");
        assert_eq!(crate::support::secret_shapes(&log), vec![secret.clone()]);
    }
    assert!(
        crate::support::secret_shapes(
            "authorization=az3f generation=2 class=\"expired\" dev_01M8 v1.short"
        )
        .is_empty()
    );
}
