//! The contract pipeline through real cargo builds of a copy of this crate: a new action added as
//! schema files plus its server handler (the compiler refuses the build without it) reaches every
//! surface of the built binary, and deleting its inventory row fails the build with a
//! `cargo::error=` line naming the action.
//!
//! The copy builds in its own target dir (`target/fixture-build`), so it never replaces the
//! binary under test; the first run compiles the dependencies once more, later runs reuse them.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::codegen_pipeline::{add_note_pin, edit_inventory};
use crate::support::{copy_tree, repo_root};

fn cargo(fixture: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO"))
        .args(args)
        .args(["--offline", "--locked"])
        .current_dir(fixture)
        .env("CARGO_TARGET_DIR", repo_root().join("target/fixture-build"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs")
}

#[track_caller]
fn fixture_run(fixture_bin: &Path, args: &[&str]) -> String {
    let output = Command::new(fixture_bin).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "fixture agentteam {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_new_action_reaches_the_binary_and_its_missing_row_fails_the_build() {
    let fixture = tempfile::tempdir().unwrap();
    let root = repo_root();
    for dir in ["codegen", "schema", "src", "tests"] {
        copy_tree(&root.join(dir), &fixture.path().join(dir));
    }
    for file in ["Cargo.toml", "Cargo.lock", "build.rs"] {
        fs::copy(root.join(file), fixture.path().join(file)).unwrap();
    }
    let schema = fixture.path().join("schema");
    add_note_pin(&schema);

    // The compiler enforces the contract: the server does not build until it handles `note pin`.
    let build = cargo(fixture.path(), &["build", "--bin", "agentteam"]);
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(
        !build.status.success() && stderr.contains("missing: `note_pin`"),
        "the server built without a `note pin` handler:\n{stderr}"
    );

    // Its handler is the only Rust to write; everything else comes from the schema files.
    let handlers = fixture.path().join("src/server/actions/mod.rs");
    let source = fs::read_to_string(&handlers).unwrap();
    let anchor = "    type Context = Caller;\n";
    assert!(
        source.contains(anchor),
        "the server's ActionHandler impl moved; update this test"
    );
    let handler = "    async fn note_pin(&self, _caller: &Caller, _input: crate::contract::types::NotePinInput) \
                   -> ActionResult<crate::contract::types::NotePinOutput> {\n        \
                   Err(ActionError::new(ErrorCode::NotFound, \"no notes in this fixture\"))\n    }\n";
    fs::write(
        &handlers,
        source.replacen(anchor, &format!("{anchor}{handler}"), 1),
    )
    .unwrap();
    let build = cargo(fixture.path(), &["build", "--bin", "agentteam"]);
    assert!(
        build.status.success(),
        "the fixture with `note pin` and its handler does not build:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let bin = root.join("target/fixture-build/debug/agentteam");
    let has_row = |text: &str, row: &[&str]| {
        text.lines().any(|line| {
            line.split_whitespace()
                .take(row.len())
                .eq(row.iter().copied())
        })
    };
    assert!(has_row(
        &fixture_run(&bin, &["exec", "--help"]),
        &["note", "Pinned", "notes", "of", "a", "thread."]
    ));
    assert!(has_row(
        &fixture_run(&bin, &["exec", "note", "--help"]),
        &["pin", "write"]
    ));
    let help = fixture_run(&bin, &["exec", "note", "pin", "--help"]);
    assert!(help.contains("agentteam exec note pin '{\"text\":\"Deploy freeze until Monday\",\"threadId\":\"thr_01JD7M2Q8X\"}'"), "{help}");
    let input: Value = serde_json::from_str(&fixture_run(
        &bin,
        &["exec", "note", "pin", "--input-schema"],
    ))
    .unwrap();
    assert_eq!(input["required"], serde_json::json!(["threadId", "text"]));
    let openapi: Value = serde_json::from_str(&fixture_run(&bin, &["openapi"])).unwrap();
    assert!(
        openapi["paths"]["/api/internal/exec/servers/{serverId}/agents/{agentId}/note/pin"]["post"]
            .is_object()
    );
    assert!(fixture_run(&bin, &["catalog"]).lines().any(|line| {
        line.split_whitespace()
            .take(4)
            .eq(["note", "pin", "write", "mutation"])
    }));
    assert!(fixture_run(&bin, &["prompt"]).contains("agentteam exec note pin '"));

    // Without its inventory row, the schema pair fails the build, naming the action.
    edit_inventory(&schema, |inventory| {
        inventory["actions"]
            .as_array_mut()
            .unwrap()
            .retain(|row| row["action"] != "pin")
    });
    let build = cargo(fixture.path(), &["build", "--bin", "agentteam"]);
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(
        !build.status.success(),
        "the build accepted a schema pair without an inventory row:\n{stderr}"
    );
    assert!(
        stderr.contains("schema/exec/note/pin.input.json: action `note.pin` has schemas but no row in schema/exec/agentteam-exec-action-inventory.json"),
        "the build failed for another reason:\n{stderr}"
    );

    // A daemon-owned action is the daemon's to implement: without it the build fails,
    // naming the missing method of `DaemonActionHandler`.
    fs::write(&handlers, &source).unwrap();
    edit_inventory(&schema, |inventory| {
        inventory["domains"]
            .as_array_mut()
            .unwrap()
            .retain(|row| row["domain"] != "note");
        inventory["actions"].as_array_mut().unwrap().push(serde_json::json!({
            "domain": "agent", "action": "pause", "summary": "Pause an agent",
            "risk": "write", "resultPolicy": "mutation", "example": {"agentId": "agt_01JD7M1A2B"}
        }));
    });
    fs::copy(
        schema.join("exec/agent/get.input.json"),
        schema.join("exec/agent/pause.input.json"),
    )
    .unwrap();
    fs::copy(
        schema.join("exec/agent/get.output.json"),
        schema.join("exec/agent/pause.output.json"),
    )
    .unwrap();
    fs::remove_file(schema.join("exec/note/pin.input.json")).unwrap();
    fs::remove_file(schema.join("exec/note/pin.output.json")).unwrap();
    let build = cargo(fixture.path(), &["build", "--bin", "agentteam"]);
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(
        !build.status.success() && stderr.contains("missing: `agent_pause`"),
        "the daemon built without an `agent pause` handler:\n{stderr}"
    );
}
