//! The pipeline on edited copies of `schema/`: adding a well-formed action makes it appear on
//! every surface with no hand-written Rust but its handler, and each broken contract is refused
//! with a diagnostic naming the file.
//!
//! These run the generator `build.rs` runs (the `generator_in_tests_matches_build_script` test
//! keeps the two byte-identical); `build_failure.rs` proves a refusal really fails `cargo build`.

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use crate::codegen::{self, Diagnostic, text};
use crate::support::schema_copy;

const INVENTORY: &str = "exec/agentteam-exec-action-inventory.json";

pub(crate) fn edit_inventory(schema: &Path, edit: impl FnOnce(&mut Value)) {
    let path = schema.join(INVENTORY);
    let mut inventory: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut inventory);
    fs::write(&path, serde_json::to_string_pretty(&inventory).unwrap()).unwrap();
}

fn write_json(path: &Path, value: Value) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
}

/// Adds `note pin`: an inventory row, a domain row and its two schemas.
pub(crate) fn add_note_pin(schema: &Path) {
    edit_inventory(schema, |inventory| {
        inventory["domains"].as_array_mut().unwrap().push(
            json!({"domain": "note", "summary": "Pinned notes of a thread.", "owner": "server"}),
        );
        inventory["actions"].as_array_mut().unwrap().push(json!({
            "domain": "note", "action": "pin", "summary": "Pin a note to an explicit thread",
            "risk": "write", "resultPolicy": "mutation", "promptInline": true,
            "example": {"threadId": "thr_01JD7M2Q8X", "text": "Deploy freeze until Monday"}
        }));
    });
    write_json(
        &schema.join("exec/note/pin.input.json"),
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "description": "Pin a note to a thread.",
            "type": "object",
            "required": ["threadId", "text"],
            "properties": {
                "threadId": {"$ref": "../../common.json#/$defs/ThreadId"},
                "text": {"description": "The note.", "type": "string", "minLength": 1, "maxLength": 500}
            },
            "additionalProperties": false
        }),
    );
    write_json(
        &schema.join("exec/note/pin.output.json"),
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": ["pinned"],
            "properties": {"pinned": {"type": "boolean"}},
            "additionalProperties": false
        }),
    );
}

#[track_caller]
fn generate_err(schema: &Path) -> Vec<Diagnostic> {
    match codegen::generate(schema) {
        Ok(_) => panic!("the generator accepted a broken schema/"),
        Err(diags) => diags,
    }
}

#[track_caller]
fn check_refused(schema: &Path, file: &str, message: &str) {
    let diags = generate_err(schema);
    assert!(
        diags
            .iter()
            .any(|d| d.file == file && d.to_string().contains(message)),
        "expected `{file}: …{message}…`, got:\n{}",
        render(&diags)
    );
}

fn render(diags: &[Diagnostic]) -> String {
    diags.iter().map(|d| format!("{d}\n")).collect()
}

#[test]
fn a_new_action_appears_on_every_surface() {
    let (_dir, schema) = schema_copy();
    add_note_pin(&schema);
    let (model, artifacts) =
        codegen::generate(&schema).unwrap_or_else(|diags| panic!("{}", render(&diags)));
    let artifact = |name: &str| &artifacts.iter().find(|a| a.name == name).unwrap().contents;
    let action = model
        .actions
        .iter()
        .find(|a| a.key() == "note.pin")
        .expect("note.pin is in the model");

    // `agentteam exec --help` and `agentteam exec note --help`.
    let root_help = text::root_help(&model);
    assert!(
        root_help.lines().any(|line| line
            .split_whitespace()
            .eq(["note", "Pinned", "notes", "of", "a", "thread."])),
        "{root_help}"
    );
    let domain = model.domains.iter().find(|d| d.name == "note").unwrap();
    let domain_help = text::domain_help(&model, domain);
    assert!(
        domain_help
            .lines()
            .any(|line| line.split_whitespace().take(2).eq(["pin", "write"])),
        "{domain_help}"
    );
    // `agentteam exec note pin --help`: fields and the one example.
    let help = text::action_help(&model, action);
    assert!(help.contains("threadId  required  string"), "{help}");
    assert!(help.contains(r#"agentteam exec note pin '{"text":"Deploy freeze until Monday","threadId":"thr_01JD7M2Q8X"}'"#), "{help}");
    // `--input-schema`: standalone, with the shared definition pulled in.
    let input = model.standalone("NotePinInput");
    assert_eq!(input["properties"]["threadId"]["$ref"], "#/$defs/ThreadId");
    assert!(input["$defs"]["ThreadId"].is_object());
    // The generated catalog carries the help and the schema text the CLI prints.
    assert!(artifact("catalog.rs").contains("ActionId::NotePin"));
    assert!(artifact("catalog.rs").contains("Pin a note to an explicit thread"));
    // OpenAPI, catalog.json, prompt.
    let openapi: Value = serde_json::from_str(artifact("openapi.json")).unwrap();
    assert_eq!(
        openapi["paths"]["/api/internal/exec/servers/{serverId}/agents/{agentId}/note/pin"]["post"]
            ["operationId"],
        "note.pin"
    );
    assert!(openapi["components"]["schemas"]["NotePinOutput"].is_object());
    let catalog: Value = serde_json::from_str(artifact("catalog.json")).unwrap();
    assert!(
        catalog["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["domain"] == "note" && a["action"] == "pin" && a["risk"] == "write")
    );
    assert!(artifact("prompt.md").contains("- `note`: Pinned notes of a thread. Actions: pin."));
    assert!(artifact("prompt.md").contains("agentteam exec note pin '"));
    // The only Rust to write by hand is the handler: the trait grows a typed method.
    assert!(
        artifact("handlers.rs")
            .contains("fn note_pin(&self, ctx: &Self::Context, input: types::NotePinInput)")
    );
}

#[test]
fn deleting_an_inventory_row_is_refused_naming_the_action() {
    let (_dir, schema) = schema_copy();
    add_note_pin(&schema);
    edit_inventory(&schema, |inventory| {
        inventory["actions"]
            .as_array_mut()
            .unwrap()
            .retain(|row| row["action"] != "pin")
    });
    check_refused(
        &schema,
        "schema/exec/note/pin.input.json",
        "action `note.pin` has schemas but no row",
    );
}

#[test]
fn a_row_without_schemas_is_refused() {
    let (_dir, schema) = schema_copy();
    add_note_pin(&schema);
    fs::remove_file(schema.join("exec/note/pin.output.json")).unwrap();
    check_refused(
        &schema,
        "schema/exec/agentteam-exec-action-inventory.json",
        "action `note.pin` has no output schema",
    );
    fs::remove_file(schema.join("exec/note/pin.input.json")).unwrap();
    check_refused(
        &schema,
        "schema/exec/agentteam-exec-action-inventory.json",
        "action `note.pin` has an inventory row but no schemas",
    );
}

#[test]
fn a_read_action_with_a_mutation_policy_is_refused() {
    let (_dir, schema) = schema_copy();
    edit_inventory(&schema, |inventory| {
        for row in inventory["actions"].as_array_mut().unwrap() {
            if row["domain"] == "task" && row["action"] == "get" {
                row["resultPolicy"] = json!("mutation");
            }
        }
    });
    check_refused(
        &schema,
        "schema/exec/agentteam-exec-action-inventory.json",
        "action `task.get` is a `read` action with a `mutation` result policy",
    );
}

#[test]
fn a_read_action_without_continuation_is_refused() {
    let (_dir, schema) = schema_copy();
    edit_inventory(&schema, |inventory| {
        for row in inventory["actions"].as_array_mut().unwrap() {
            if row["action"] == "list" {
                row.as_object_mut().unwrap().remove("next");
            }
        }
    });
    check_refused(
        &schema,
        "schema/exec/agentteam-exec-action-inventory.json",
        "read action `task.list` needs `next`",
    );
}

#[test]
fn an_exec_domain_colliding_with_an_mcp_tool_family_is_refused() {
    let (_dir, schema) = schema_copy();
    write_json(
        &schema.join("mcp/task_notify.json"),
        json!({"name": "task_notify"}),
    );
    check_refused(
        &schema,
        "schema/mcp/task_notify.json",
        "MCP tool `task_notify` collides with Exec domain `task`",
    );
}

/// Edits a copy of `schema/mcp/<tool>.json`.
fn edit_tool(schema: &Path, tool: &str, edit: impl FnOnce(&mut Value)) {
    let path = schema.join(format!("mcp/{tool}.json"));
    let mut value: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut value);
    write_json(&path, value);
}

#[test]
fn a_new_mcp_tool_joins_the_inventory_and_the_server_trait() {
    let (_dir, schema) = schema_copy();
    let mut tool: Value = serde_json::from_str(
        &fs::read_to_string(schema.join("mcp/message_history_read.json")).unwrap(),
    )
    .unwrap();
    tool["name"] = json!("note_lookup");
    write_json(&schema.join("mcp/note_lookup.json"), tool);
    let (model, artifacts) =
        codegen::generate(&schema).unwrap_or_else(|d| panic!("{}", render(&d)));
    let names: Vec<&str> = model.mcp_tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted: {names:?}");
    let artifact = |name: &str| &artifacts.iter().find(|a| a.name == name).unwrap().contents;
    let inventory: Value = serde_json::from_str(artifact("mcp_tools.json")).unwrap();
    assert!(
        inventory
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "note_lookup")
    );
    assert!(
        artifact("handlers.rs")
            .contains("fn note_lookup(&self, ctx: &Self::Context, input: types::NoteLookupInput)")
    );
    assert!(artifact("catalog.rs").contains("ToolId::NoteLookup"));
}

#[test]
fn an_mcp_tool_must_state_read_only_hint() {
    let (_dir, schema) = schema_copy();
    edit_tool(&schema, "message_send", |tool| {
        tool["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("readOnlyHint");
    });
    check_refused(
        &schema,
        "schema/mcp/message_send.json",
        "`readOnlyHint` must be stated explicitly",
    );
}

#[test]
fn an_mcp_tool_policy_must_match_its_read_only_hint() {
    let (_dir, schema) = schema_copy();
    edit_tool(&schema, "message_history_read", |tool| {
        tool["resultPolicy"] = json!("mutation");
    });
    check_refused(
        &schema,
        "schema/mcp/message_history_read.json",
        "a read-only tool cannot have the `mutation` result policy",
    );
    let (_dir, schema) = schema_copy();
    edit_tool(&schema, "message_send", |tool| {
        tool["resultPolicy"] = json!("cursor");
    });
    check_refused(
        &schema,
        "schema/mcp/message_send.json",
        "has the `mutation` result policy, not `cursor`",
    );
}

#[test]
fn mcp_tool_names_are_bounded_and_match_their_file() {
    let (_dir, schema) = schema_copy();
    let long = format!("x{}", "y".repeat(64));
    write_json(&schema.join(format!("mcp/{long}.json")), json!({}));
    check_refused(
        &schema,
        &format!("schema/mcp/{long}.json"),
        "at most 48 characters",
    );
    let (_dir, schema) = schema_copy();
    edit_tool(&schema, "reaction_add", |tool| {
        tool["name"] = json!("reaction_put")
    });
    check_refused(
        &schema,
        "schema/mcp/reaction_add.json",
        "must equal the file name",
    );
    let (_dir, schema) = schema_copy();
    edit_tool(&schema, "kb_fetch", |tool| {
        tool["inputSchema"]["type"] = json!("string")
    });
    check_refused(
        &schema,
        "schema/mcp/kb_fetch.json",
        "must be an object schema",
    );
}

#[test]
fn external_refs_other_than_common_are_refused() {
    let (_dir, schema) = schema_copy();
    add_note_pin(&schema);
    let path = schema.join("exec/note/pin.output.json");
    write_json(
        &path,
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"pinned": {"$ref": "https://example.invalid/other.json#/$defs/Flag"}},
            "additionalProperties": false
        }),
    );
    check_refused(
        &schema,
        "schema/exec/note/pin.output.json",
        "unsupported `$ref`",
    );
}

#[test]
fn lint_problems_fail_generation_with_the_pointer() {
    let (_dir, schema) = schema_copy();
    add_note_pin(&schema);
    let path = schema.join("exec/note/pin.input.json");
    let mut input: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    input["required"] = json!(["threadId", "txet"]);
    write_json(&path, input);
    let diags = generate_err(&schema);
    assert!(
        diags
            .iter()
            .any(|d| d.file == "schema/exec/note/pin.input.json"
                && d.pointer == "/required"
                && d.message.contains("\"txet\"")),
        "{}",
        render(&diags)
    );
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let (_dir, schema) = schema_copy();
    edit_inventory(&schema, |inventory| {
        for row in inventory["actions"].as_array_mut().unwrap() {
            if row["action"] == "get" || row["action"] == "list" {
                row["resultPolicy"] = json!("mutation");
            }
        }
    });
    let diags = generate_err(&schema);
    assert!(diags.len() >= 2, "{}", render(&diags));
}

/// Families compare with `-` and `_` as one separator, so a tool named after a
/// hyphenated domain is caught too, and a tool that merely shares a prefix is not.
#[test]
fn a_tool_in_a_hyphenated_domains_family_is_refused() {
    let (_dir, schema) = schema_copy();
    write_json(
        &schema.join("mcp/scheduled_message_x.json"),
        json!({"name": "scheduled_message_x"}),
    );
    check_refused(
        &schema,
        "schema/mcp/scheduled_message_x.json",
        "MCP tool `scheduled_message_x` collides with Exec domain `scheduled-message`",
    );
    use crate::codegen::model::collides;
    assert!(collides("scheduled_message", "scheduled-message"));
    assert!(collides("task_notify", "task"));
    assert!(
        !collides("tasks_notify", "task"),
        "a shared prefix is not a family"
    );
    assert!(!collides("scheduled_messages", "scheduled-message"));
}

/// A raw MCP tool name is refused when its longest model-visible form
/// (`mcp__agentteam__<tool>`) would exceed 64 characters: 48 characters is the edge.
#[test]
fn a_tool_whose_model_visible_name_exceeds_64_characters_is_refused() {
    use crate::codegen::model::{MAX_TOOL_NAME, is_tool_name};
    assert_eq!(MAX_TOOL_NAME, 64 - "mcp__agentteam__".len());
    let at_edge = format!("m{}", "x".repeat(MAX_TOOL_NAME - 1));
    assert!(is_tool_name(&at_edge));
    assert!(!is_tool_name(&format!("{at_edge}x")));
    let (_dir, schema) = schema_copy();
    let over = format!("{at_edge}x");
    write_json(
        &schema.join(format!("mcp/{over}.json")),
        json!({"name": over}),
    );
    check_refused(
        &schema,
        &format!("schema/mcp/{over}.json"),
        "model-visible form `mcp__agentteam__<tool>` must stay within 64",
    );
}

/// A daemon-owned domain's actions belong to `DaemonActionHandler` alone: the server's
/// `ActionHandler` never sees them.
#[test]
fn a_daemon_domain_stays_out_of_the_servers_handler_trait() {
    let (_dir, schema) = schema_copy();
    let (model, artifacts) = codegen::generate(&schema).unwrap();
    let handlers = &artifacts
        .iter()
        .find(|a| a.name == "handlers.rs")
        .unwrap()
        .contents;
    let server_trait = handlers
        .split("pub trait ActionHandler")
        .nth(1)
        .unwrap()
        .split("\n}\n")
        .next()
        .unwrap();
    let daemon_trait = handlers
        .split("pub trait DaemonActionHandler")
        .nth(1)
        .unwrap()
        .split("\n}\n")
        .next()
        .unwrap();
    let daemon_actions: Vec<_> = model
        .actions
        .iter()
        .filter(|a| a.owner == codegen::model::DomainOwner::Daemon)
        .collect();
    assert!(
        !daemon_actions.is_empty(),
        "the `agent` domain is daemon-owned"
    );
    for action in &daemon_actions {
        let method = format!("fn {}(", action.method_name());
        assert!(!server_trait.contains(&method), "{method} in ActionHandler");
        assert!(
            daemon_trait.contains(&method),
            "{method} missing from DaemonActionHandler"
        );
    }
    for action in model
        .actions
        .iter()
        .filter(|a| a.owner == codegen::model::DomainOwner::Server)
    {
        assert!(server_trait.contains(&format!("fn {}(", action.method_name())));
    }
}

fn edit_human(schema: &Path, action: &str, edit: impl FnOnce(&mut Value)) {
    let path = schema.join(format!("human/{action}.json"));
    let mut value: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut value);
    write_json(&path, value);
}

#[test]
fn a_new_human_action_joins_the_handler_the_client_and_the_openapi_document() {
    let (_dir, schema) = schema_copy();
    let mut action: Value =
        serde_json::from_str(&fs::read_to_string(schema.join("human/message_post.json")).unwrap())
            .unwrap();
    action["name"] = json!("note_post");
    write_json(&schema.join("human/note_post.json"), action);
    let (model, artifacts) =
        codegen::generate(&schema).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(model.human_actions.iter().any(|a| a.name == "note_post"));
    let artifact = |name: &str| &artifacts.iter().find(|a| a.name == name).unwrap().contents;
    let handlers = artifact("handlers.rs");
    assert!(
        handlers
            .contains("fn note_post(&self, ctx: &Self::Context, input: types::HumanNotePostInput)")
    );
    assert!(handlers.contains("pub async fn note_post(&self, input: &types::HumanNotePostInput)"));
    assert!(artifact("catalog.rs").contains("HumanActionId::NotePost"));
    let openapi: Value = serde_json::from_str(artifact("human_openapi.json")).unwrap();
    assert!(openapi["paths"]["/human/servers/{serverId}/actions/note_post"]["post"].is_object());
}

#[test]
fn a_human_write_takes_a_request_id_and_a_read_none() {
    let (_dir, schema) = schema_copy();
    edit_human(&schema, "message_post", |action| {
        action["inputSchema"]["properties"]
            .as_object_mut()
            .unwrap()
            .remove("requestId");
    });
    check_refused(
        &schema,
        "schema/human/message_post.json",
        "a human write takes `requestId`",
    );
    let (_dir, schema) = schema_copy();
    edit_human(&schema, "me", |action| {
        action["inputSchema"]["properties"]["requestId"] =
            json!({"$ref": "../common.json#/$defs/RequestId"});
    });
    check_refused(
        &schema,
        "schema/human/me.json",
        "a read takes no `requestId`",
    );
}

#[test]
fn a_human_action_shares_only_an_exec_read_of_the_server() {
    let (_dir, schema) = schema_copy();
    edit_human(&schema, "task_list", |action| {
        action["sameAs"] = json!("task.create");
    });
    check_refused(
        &schema,
        "schema/human/task_list.json",
        "must be a read of a server-owned domain",
    );
    let (_dir, schema) = schema_copy();
    edit_human(&schema, "task_list", |action| {
        action["sameAs"] = json!("agent.list");
    });
    check_refused(
        &schema,
        "schema/human/task_list.json",
        "must be a read of a server-owned domain",
    );
    let (_dir, schema) = schema_copy();
    edit_human(&schema, "task_list", |action| {
        action["sameAs"] = json!("task.nothing");
    });
    check_refused(&schema, "schema/human/task_list.json", "is no Exec action");
}
