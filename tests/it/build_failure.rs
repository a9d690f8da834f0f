//! A refused contract fails the real `cargo build`, with a `cargo::error=` line naming the file
//! and the action. The fixture is a copy of the crate built in its own target dir, so it never
//! touches the binary under test.

use std::fs;
use std::process::Command;

use serde_json::Value;

use crate::support::{copy_tree, repo_root};

#[test]
fn deleting_an_inventory_row_fails_the_build() {
    let fixture = tempfile::tempdir().unwrap();
    let root = repo_root();
    for dir in ["codegen", "schema", "src", "tests"] {
        copy_tree(&root.join(dir), &fixture.path().join(dir));
    }
    for file in ["Cargo.toml", "Cargo.lock", "build.rs"] {
        fs::copy(root.join(file), fixture.path().join(file)).unwrap();
    }
    let inventory_path = fixture
        .path()
        .join("schema/exec/agentteam-exec-action-inventory.json");
    let mut inventory: Value =
        serde_json::from_str(&fs::read_to_string(&inventory_path).unwrap()).unwrap();
    inventory["actions"]
        .as_array_mut()
        .unwrap()
        .retain(|row| !(row["domain"] == "task" && row["action"] == "cancel"));
    fs::write(
        &inventory_path,
        serde_json::to_string_pretty(&inventory).unwrap(),
    )
    .unwrap();

    let output = Command::new(env!("CARGO"))
        .args(["check", "--offline", "--locked", "--lib"])
        .current_dir(fixture.path())
        .env("CARGO_TARGET_DIR", root.join("target/fixture-build"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the build accepted a schema pair without an inventory row:\n{stderr}"
    );
    assert!(
        stderr.contains("schema/exec/task/cancel.input.json: action `task.cancel` has schemas but no row in schema/exec/agentteam-exec-action-inventory.json"),
        "the build failed for another reason:\n{stderr}"
    );
}
