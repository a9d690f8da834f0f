//! `generated/` is the committed, reviewable mirror of what `build.rs` wrote to `OUT_DIR`.
//!
//! On a developer's machine a stale mirror is rewritten and the test fails once, naming what
//! changed; with `CI` set it only fails.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::support::repo_root;

#[test]
fn generated_mirror_matches_out_dir() {
    let out_dir = Path::new(env!("OUT_DIR"));
    let mirror = repo_root().join("generated");
    let manifest = fs::read_to_string(out_dir.join("MANIFEST")).expect("build.rs writes MANIFEST");
    let expected: BTreeSet<&str> = manifest.lines().chain(["MANIFEST"]).collect();

    let mut stale = Vec::new();
    for name in &expected {
        let fresh = fs::read_to_string(out_dir.join(name)).unwrap();
        let committed = fs::read_to_string(mirror.join(name))
            .ok()
            .map(|s| s.replace("\r\n", "\n"));
        if committed.as_deref() != Some(fresh.as_str()) {
            stale.push(name.to_string());
        }
    }
    let extra: Vec<String> = fs::read_dir(&mirror)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                // The man page is rendered from the CLI, not by build.rs (`completions.rs`).
                .filter(|n| !expected.contains(n.as_str()) && n != "agentteam.1")
                .collect()
        })
        .unwrap_or_default();
    if stale.is_empty() && extra.is_empty() {
        return;
    }

    if std::env::var_os("CI").is_some() {
        panic!(
            "generated/ is stale (changed: {stale:?}, orphaned: {extra:?}); run `cargo test` locally and commit generated/"
        );
    }
    fs::create_dir_all(&mirror).unwrap();
    for name in &stale {
        fs::copy(out_dir.join(name), mirror.join(name)).unwrap();
    }
    for name in &extra {
        fs::remove_file(mirror.join(name)).unwrap();
    }
    panic!(
        "generated/ was stale and has been refreshed (changed: {stale:?}, removed: {extra:?}); review and commit generated/"
    );
}

/// The tests' copy of the generator renders byte-for-byte what build.rs rendered, so the
/// pipeline tests below exercise the real thing.
#[test]
fn generator_in_tests_matches_build_script() {
    let (_model, artifacts) =
        crate::codegen::generate(&repo_root().join("schema")).expect("schema/ is valid");
    let out_dir = Path::new(env!("OUT_DIR"));
    for artifact in artifacts.iter().filter(|a| !a.name.ends_with(".rs")) {
        let built = fs::read_to_string(out_dir.join(artifact.name)).unwrap();
        assert_eq!(
            artifact.contents, built,
            "{} differs between build.rs and the test's generator",
            artifact.name
        );
    }
}
