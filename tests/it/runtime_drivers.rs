//! The real runtimes under `agentteam run`, offline, with the default driver selection.
//!
//! Claude Code, Codex, OpenCode and Kimi Code, installed by `scripts/test` from the npm registry
//! at pinned versions (`scripts/lib/runtimes.sh`), each run against a scripted model server on
//! loopback (`scripted_model.py`) and with the user's own setup in their files: their model
//! provider, their own MCP server (`user_mcp.py`) and, where the runtime has them, command rules
//! that ask before (headless: refuse) everything they did not allow. The model's script: an MCP
//! `message_send` held past the first credential generation (so it needs a rotated token), an
//! `agentteam exec task create` through the runtime's own shell tool, and where the user's rules
//! ask, `agentteam run`, an unrelated command and a destructive action at once. Each test checks
//! (in `runtime_harness::drive`) that the message reached the channel, the task exists (read back
//! with `task get`), the refused commands did not run, the first request carried the guidance, the
//! memory skill and (where the runtime shows them) the whole MCP instructions, the model saw
//! exactly the mapping's names and the user's own tool, no token appeared in any process's argv or
//! environment (sampled from `/proc`), the guidance directory, the runtime's `HOME`, the model's
//! requests or the proxy every proxy variable points at, the user's files end byte for byte as
//! they were and the runtime's sessions land in the user's `HOME`.

use agentteam::contract::tool_guidance::RuntimeNaming;
use serde_json::{Value, json};

use crate::runtime_harness::{
    Model, Runtime, UserFiles, UserSetup, drive, exec_as, runtime_tool, tool_results,
};
use crate::support::{TestDaemon, repo_root, venv_tool};

const OFFLINE_CLAUDE: [(&str, &str); 3] = [
    ("ANTHROPIC_API_KEY", "scripted-model-key"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
];

#[tokio::test]
async fn claude_code_gets_both_bridges_and_keeps_the_users_setup() {
    drive(Runtime {
        family: "claude",
        executable: "AGENTTEAM_TEST_CLAUDE",
        api: "anthropic",
        naming: RuntimeNaming::Claude,
        shell: ("Bash", "command"),
        user_tool: "mcp__mine__user_ping",
        args: || {
            ["-p", "reply to the channel", "--output-format", "json"]
                .into_iter()
                .chain(["--allowedTools", "mcp__agentteam__message_send"])
                .map(String::from)
                .collect()
        },
        run_flags: &[],
        setup: |user| {
            // Their own MCP server, in their user configuration.
            let config = user.home.join(".claude.json");
            let servers = json!({"mcpServers": {"mine": {
                "type": "stdio",
                "command": user.python,
                "args": [user.user_mcp],
                "alwaysLoad": true,
            }}});
            std::fs::write(&config, servers.to_string()).unwrap();
            let mut env: Vec<(String, String)> = OFFLINE_CLAUDE
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            env.push((
                "ANTHROPIC_BASE_URL".into(),
                format!("http://127.0.0.1:{}", user.port),
            ));
            // Claude Code keeps its own state in that file: it is not byte-stable.
            (env, Vec::new())
        },
        asks: true,
        refusal_ends_the_run: false,
        shows_mcp_instructions: true,
        sessions: ".claude/projects",
    })
    .await;
}

#[tokio::test]
async fn kimi_code_gets_both_bridges_and_keeps_the_users_setup() {
    drive(Runtime {
        family: "kimi",
        executable: "AGENTTEAM_TEST_KIMI",
        api: "chat",
        naming: RuntimeNaming::Kimi,
        shell: ("Bash", "command"),
        user_tool: "mcp__mine__user_ping",
        args: || {
            [
                "-p",
                "reply to the channel",
                "--output-format",
                "stream-json",
            ]
            .into_iter()
            .map(String::from)
            .collect()
        },
        run_flags: &[],
        setup: |user| {
            // Their own home: their MCP server and their global instructions.
            let dir = user.home.join(".kimi-code");
            std::fs::create_dir_all(&dir).unwrap();
            let servers = json!({"mcpServers": {"mine": {
                "command": user.python, "args": [user.user_mcp]}}});
            std::fs::write(dir.join("mcp.json"), servers.to_string()).unwrap();
            std::fs::write(dir.join("AGENTS.md"), "The user's own instructions.\n").unwrap();
            let env = [
                ("KIMI_MODEL_NAME", "scripted-model".to_string()),
                ("KIMI_MODEL_API_KEY", "scripted-model-key".to_string()),
                (
                    "KIMI_MODEL_BASE_URL",
                    format!("http://127.0.0.1:{}/v1", user.port),
                ),
                ("KIMI_MODEL_PROVIDER_TYPE", "kimi".to_string()),
                ("KIMI_DISABLE_TELEMETRY", "1".to_string()),
                ("KIMI_CODE_NO_AUTO_UPDATE", "1".to_string()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec();
            (env, vec![dir.join("mcp.json"), dir.join("AGENTS.md")])
        },
        asks: false,
        refusal_ends_the_run: false,
        // Kimi Code does not show them; the guidance carries the MCP rules.
        shows_mcp_instructions: false,
        sessions: ".kimi-code/sessions",
    })
    .await;
}

/// The user's Codex configuration: their model provider and their own MCP server.
fn codex_user_config(user: &UserSetup) -> UserFiles {
    let dir = user.home.join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "model_provider = \"scripted\"\nmodel = \"scripted-model\"\n\n\
         [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"http://127.0.0.1:{}/v1\"\n\
         wire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n\n\
         [analytics]\nenabled = false\n\n[features]\nplugins = false\n\n\
         [mcp_servers.mine]\ncommand = {}\nargs = [{}]\n",
        user.port,
        Value::from(user.python.display().to_string()),
        Value::from(user.user_mcp.display().to_string()),
    );
    std::fs::write(dir.join("config.toml"), config).unwrap();
    (
        vec![("SCRIPTED_API_KEY".into(), "scripted-model-key".into())],
        vec![dir.join("config.toml")],
    )
}

#[tokio::test]
async fn codex_gets_both_bridges_and_keeps_the_users_setup() {
    drive(Runtime {
        family: "codex",
        executable: "AGENTTEAM_TEST_CODEX",
        api: "responses",
        naming: RuntimeNaming::Claude,
        shell: ("exec_command", "cmd"),
        user_tool: "mcp__mine__user_ping",
        args: || {
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "workspace-write",
            ]
            .into_iter()
            .chain(["reply to the channel"])
            .map(String::from)
            .collect()
        },
        run_flags: &["--sandbox-network"],
        setup: codex_user_config,
        asks: false,
        refusal_ends_the_run: false,
        shows_mcp_instructions: true,
        sessions: ".codex/sessions",
    })
    .await;
}

#[tokio::test]
async fn opencode_gets_both_bridges_and_keeps_the_users_setup() {
    drive(Runtime {
        family: "opencode",
        executable: "AGENTTEAM_TEST_OPENCODE",
        api: "chat",
        naming: RuntimeNaming::Opencode,
        shell: ("bash", "command"),
        user_tool: "mine_user_ping",
        args: || {
            ["run", "--format", "json", "reply to the channel"]
                .into_iter()
                .map(String::from)
                .collect()
        },
        run_flags: &[],
        setup: |user| {
            // Their model provider, their own MCP server, and every command refused unless they
            // allowed it; ours is merged over it.
            let dir = user.home.join(".config/opencode");
            std::fs::create_dir_all(&dir).unwrap();
            let config = json!({
                "$schema": "https://opencode.ai/config.json",
                "provider": {"scripted": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "scripted",
                    "options": {"baseURL": format!("http://127.0.0.1:{}/v1", user.port), "apiKey": "scripted-model-key"},
                    "models": {"m": {"name": "m", "tool_call": true}},
                }},
                "model": "scripted/m",
                "autoupdate": false,
                "share": "disabled",
                "mcp": {"mine": {"type": "local", "command": [user.python, user.user_mcp], "enabled": true}},
                "permission": {"bash": {"*": "ask"}},
            });
            std::fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
            (
                vec![
                    ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
                    ("npm_config_offline".into(), "true".into()),
                ],
                vec![dir.join("opencode.json")],
            )
        },
        asks: true,
        refusal_ends_the_run: true,
        shows_mcp_instructions: true,
        sessions: ".local/share/opencode",
    })
    .await;
}

/// Inside Codex's own sandbox, without the user's `--sandbox-network`, `agentteam exec` cannot
/// connect to the daemon: it says exactly that and what to do, and nothing runs.
#[tokio::test]
async fn codex_sandbox_refusal_is_said_plainly() {
    let root = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_in(root.path(), &[]).await;
    let agent = daemon.add_agent("alpha").await;
    let identity: Value =
        serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
            .unwrap();
    let channel = identity["channelId"].as_str().unwrap();
    let create =
        json!({"location": {"kind": "channel", "channelId": channel}, "title": "sandboxed"});
    let calls = [json!({"name": "exec_command",
                        "args": {"cmd": format!("agentteam exec task create '{create}'")}})];
    let model = Model::start(root.path(), "responses", RuntimeNaming::Claude, &calls).await;
    let home = root.path().join("home");
    let workdir = root.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workdir).unwrap();
    let (env, _) = codex_user_config(&UserSetup {
        home: &home,
        port: model.port,
        python: venv_tool("python"),
        user_mcp: repo_root().join("tests/it/user_mcp.py"),
    });
    let output = daemon
        .cli(&["run", "--agent", &agent])
        .arg("--workdir")
        .arg(&workdir)
        .arg("--")
        .arg(runtime_tool("AGENTTEAM_TEST_CODEX"))
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
        ])
        .arg("file a task")
        .env("HOME", &home)
        .envs(env)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("pass `--sandbox-network`"), "{stderr}");
    let requests = model.requests();
    let next = requests
        .iter()
        .find(|r| r["answer"] == "text" && r["tools"] != json!([]))
        .expect("the model got the command's result");
    let result = tool_results("responses", &model.body(next)).pop().unwrap();
    assert!(
        result.contains("refused by this process's sandbox")
            && result.contains("agentteam run --sandbox-network"),
        "{result}"
    );
    let tasks = exec_as(
        &daemon,
        &agent,
        &[
            "task",
            "list",
            &json!({"location": {"kind": "channel", "channelId": channel}}).to_string(),
        ],
    )
    .await;
    assert_eq!(tasks["data"]["tasks"], json!([]), "{tasks}");
}

/// A `kimi` that is not Kimi Code (the Python kimi-cli stub prints a notice and exits 0 doing
/// nothing) is refused, having been asked its version and nothing else.
#[tokio::test]
async fn a_kimi_that_is_not_kimi_code_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_in(root.path(), &[]).await;
    let agent = daemon.add_agent("alpha").await;
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = root.path().join("calls");
    let stub = bin.join("kimi");
    std::fs::write(
        &stub,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\necho 'kimi-cli is no longer maintained. Please use the new Kimi Code CLI.'\n",
            calls.display()
        ),
    )
    .unwrap();
    agentteam::platform::fs::set_mode(&stub, 0o755).unwrap();
    let output = daemon
        .cli(&["run", "--agent", &agent])
        .arg("--")
        .arg(&stub)
        .args(["-p", "hi"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("is not Kimi Code"), "{stderr}");
    assert!(stderr.contains("--runtime generic"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&calls).unwrap(), "--version\n");
}
