//! The real runtimes under `agentteam run`, offline, with the default driver selection.
//!
//! Claude Code, Codex, OpenCode, Kimi Code, Copilot CLI and Gemini CLI, installed by `scripts/test` from npm
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
    Model, Runtime, UserFiles, UserSetup, channel_of, channel_tasks, drive, exec_as, runtime_tool,
    tool_results,
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
            // No allowance of the user's own for `message_send`: the driver pre-approves it.
            ["-p", "reply to the channel", "--output-format", "json"]
                .into_iter()
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
        exec: "agentteam exec",
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
        exec: "agentteam exec",
        sessions: ".kimi-code/sessions",
    })
    .await;
}

#[tokio::test]
async fn copilot_cli_gets_both_bridges_and_keeps_the_users_setup() {
    drive(Runtime {
        family: "copilot",
        executable: "AGENTTEAM_TEST_COPILOT",
        api: "chat",
        naming: RuntimeNaming::Copilot,
        shell: ("bash", "command"),
        user_tool: "mine-user_ping",
        args: || {
            ["-p", "reply to the channel", "--output-format", "json"]
                .into_iter()
                // No allowance of the user's own for the `agentteam` server: the driver
                // pre-approves each tool that is not destructive.
                .chain(["--no-auto-update"])
                .map(String::from)
                .collect()
        },
        run_flags: &[],
        setup: |user| {
            // Their own MCP server in their configuration; the model provider in their
            // environment, offline.
            let dir = user.home.join(".copilot");
            std::fs::create_dir_all(&dir).unwrap();
            let servers = json!({"mcpServers": {"mine": {
                "type": "local", "command": user.python, "args": [user.user_mcp], "tools": ["*"]}}});
            std::fs::write(dir.join("mcp-config.json"), servers.to_string()).unwrap();
            let cache = std::env::var("AGENTTEAM_TEST_COPILOT_CACHE")
                .expect("AGENTTEAM_TEST_COPILOT_CACHE is set by scripts/test");
            let env = [
                ("COPILOT_OFFLINE", "true".to_string()),
                ("COPILOT_PROVIDER_BASE_URL", format!("http://127.0.0.1:{}/v1", user.port)),
                ("COPILOT_PROVIDER_API_KEY", "scripted-model-key".to_string()),
                ("COPILOT_MODEL", "gpt-4.1".to_string()),
                ("COPILOT_AUTO_UPDATE", "false".to_string()),
                // The program it unpacked on its first run (scripts/lib/runtimes.sh).
                ("XDG_CACHE_HOME", cache),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec();
            (env, vec![dir.join("mcp-config.json")])
        },
        asks: true,
        refusal_ends_the_run: false,
        // Only under a flag that admits every server's: the guidance carries the MCP rules.
        shows_mcp_instructions: false,
        // Copilot approves a command by its first word: the alias is what it pre-approves.
        exec: "agentteam-exec",
        sessions: ".copilot/session-state",
    })
    .await;
}

#[tokio::test]
async fn gemini_cli_gets_both_bridges_and_keeps_the_users_setup() {
    drive(Runtime {
        family: "gemini",
        executable: "AGENTTEAM_TEST_GEMINI",
        api: "gemini",
        naming: RuntimeNaming::Gemini,
        shell: ("run_shell_command", "command"),
        user_tool: "mcp_mine_user_ping",
        args: || {
            ["-p", "reply to the channel", "-o", "json"]
                .into_iter()
                .map(String::from)
                .collect()
        },
        run_flags: &[],
        setup: |user| {
            // Their model provider and their own MCP server in their settings, their trust in
            // the working folder, and their own policy folder (a rule of theirs, for `echo`).
            let dir = user.home.join(".gemini");
            std::fs::create_dir_all(dir.join("policies")).unwrap();
            let settings = json!({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
                "privacy": {"usageStatisticsEnabled": false},
                "telemetry": {"enabled": false},
                "mcpServers": {"mine": {
                    "command": user.python, "args": [user.user_mcp], "trust": true}},
            });
            let files = [
                (dir.join("settings.json"), format!("// mine\n{settings:#}\n")),
                (
                    dir.join("trustedFolders.json"),
                    json!({ user.workdir.display().to_string(): "TRUST_FOLDER" }).to_string(),
                ),
                (
                    dir.join("policies").join("mine.toml"),
                    "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"echo\"\ndecision = \"allow\"\npriority = 50\n".to_string(),
                ),
            ];
            for (file, text) in &files {
                std::fs::write(file, text).unwrap();
            }
            let env = [
                ("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{}", user.port)),
                ("GEMINI_API_KEY", "scripted-model-key".to_string()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec();
            (env, files.into_iter().map(|(file, _)| file).collect())
        },
        asks: true,
        refusal_ends_the_run: false,
        shows_mcp_instructions: true,
        exec: "agentteam exec",
        sessions: ".gemini/tmp",
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
        exec: "agentteam exec",
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
        exec: "agentteam exec",
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
    let channel = &channel_of(&daemon);
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
        workdir: &workdir,
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
    let tasks = channel_tasks(&daemon, &agent, channel).await;
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

/// A desktop app drives Codex through `codex app-server` under `agentteam run`: the command's
/// stdin is relayed to it, and the daemon learns the threads from the protocol on the relayed
/// stdout. Two user threads each send a message; the first spawns a sub-agent, whose own
/// `message_send` is refused with "return your result to the leader". A user thread that starts
/// second, after the sub-agent, is still primary: only the protocol's marks make a child.
#[tokio::test]
async fn codex_app_server_gates_only_the_sub_agent() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let root = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_in(root.path(), &[]).await;
    let agent = daemon.add_agent("alpha").await;
    let target = format!("channel:{}", channel_of(&daemon));
    let send = |content: &str| {
        json!({"name": "message_send", "namespace": "mcp__agentteam",
               "args": {"target": target, "content": content}})
    };
    let script = json!({
        "PLEASE_SPAWN": [
            {"name": "spawn_agent", "namespace": "multi_agent_v1",
             "args": {"message": "SUBAGENT_TASK: report to the channel"}},
            send("from thread one"),
        ],
        "SUBAGENT_TASK": [send("from the sub-agent")],
        "THREAD_TWO": [send("from thread two")],
    });
    let model = Model::start_with(root.path(), "responses", RuntimeNaming::Claude, script, 0).await;
    let home = root.path().join("home");
    let workdir = root.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workdir).unwrap();
    let (env, _) = codex_user_config(&UserSetup {
        home: &home,
        workdir: &workdir,
        port: model.port,
        python: venv_tool("python"),
        user_mcp: repo_root().join("tests/it/user_mcp.py"),
    });
    let mut child = daemon
        .cli(&["run", "--agent", &agent])
        .arg("--workdir")
        .arg(&workdir)
        .arg("--")
        .arg(runtime_tool("AGENTTEAM_TEST_CODEX"))
        .arg("app-server")
        .env("HOME", &home)
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let mut stderr = stderr;
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        text
    });
    let mut send_line = async |message: Value| {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    };
    send_line(json!({"id": 1, "method": "initialize", "params": {
        "clientInfo": {"name": "agentteam_test", "title": null, "version": "0.0.1"}}}))
    .await;
    send_line(json!({"method": "initialized"})).await;
    let start = json!({"cwd": workdir, "approvalPolicy": "never", "sandbox": "read-only"});
    send_line(json!({"id": 2, "method": "thread/start", "params": start})).await;

    // The app's protocol, as `agentteam run` relays it: answers, notifications, and the
    // server's own requests, each answered.
    let mut users: Vec<String> = Vec::new();
    let mut completed: Vec<String> = Vec::new();
    let mut transcript = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("the app-server did not finish: {transcript:#?}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the app-server's stdout ended: {transcript:#?}"));
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("stdout is the protocol alone: {line}"));
        transcript.push(message.clone());
        let method = message["method"].as_str().unwrap_or("");
        if let Some(thread) = message.pointer("/result/thread/id").and_then(Value::as_str) {
            users.push(thread.to_string());
            let (id, text) = if users.len() == 1 {
                (3, "PLEASE_SPAWN: spawn one sub-agent, then report")
            } else {
                (5, "THREAD_TWO: report to the channel")
            };
            send_line(json!({"id": id, "method": "turn/start", "params": {
                "threadId": thread,
                "input": [{"type": "text", "text": text, "text_elements": []}]}}))
            .await;
        } else if method == "turn/completed" {
            let thread = message["params"]["threadId"].as_str().unwrap().to_string();
            completed.push(thread.clone());
            // The second user thread starts once the first thread's turn and its sub-agent's
            // are over: after the sub-agent, by design.
            if users.len() == 1
                && completed.contains(&users[0])
                && completed.iter().any(|t| !users.contains(t))
            {
                send_line(json!({"id": 4, "method": "thread/start", "params": start})).await;
            }
            if users.len() == 2 && completed.contains(&users[1]) {
                break;
            }
        } else if message.get("id").is_some() && !method.is_empty() {
            let answer = if method.ends_with("requestApproval") {
                json!({"decision": "accept"})
            } else if method == "mcpServer/elicitation/request" {
                json!({"action": "accept", "content": {}})
            } else {
                json!({})
            };
            send_line(json!({"id": message["id"], "result": answer})).await;
        }
    }
    // End of file on the relayed stdin ends the app-server, and `agentteam run` with it.
    drop(stdin);
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait())
        .await
        .expect("the app-server ends at the end of its stdin")
        .unwrap();
    let stderr = stderr.await.unwrap();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("agentteam: runtime driver: codex (from the program's name)")
            && stderr.contains("codex app-server: this command's stdin is relayed to it"),
        "{stderr}"
    );
    let mut sub_agents: Vec<&String> = completed.iter().filter(|t| !users.contains(t)).collect();
    sub_agents.dedup();
    assert_eq!(sub_agents.len(), 1, "{completed:?} {users:?}");

    // Both user threads acted; the sub-agent was told to return its result instead.
    let messages = crate::runtime_harness::channel_contents(&daemon, &agent, &target).await;
    assert!(
        messages.contains(&"from thread one".to_string())
            && messages.contains(&"from thread two".to_string()),
        "{messages:?}"
    );
    assert!(!messages.contains(&"from the sub-agent".to_string()));
    let requests = model.requests();
    let after_refusal = requests
        .iter()
        .find(|r| r["conversation"] == "SUBAGENT_TASK" && r["answer"] == "text")
        .unwrap_or_else(|| panic!("the sub-agent never had its answer: {requests:?}"));
    let refused = tool_results("responses", &model.body(after_refusal))
        .pop()
        .unwrap();
    assert!(
        refused.contains("return your result to the leader"),
        "{refused}"
    );
    // The daemon learned each thread from the protocol itself.
    let log = daemon.log();
    assert_eq!(
        log.matches("the Codex app-server started a user thread")
            .count(),
        2,
        "{log}"
    );
    assert_eq!(
        log.matches("the Codex app-server started a delegated thread")
            .count(),
        1,
        "{log}"
    );
    drop(model.child);
}

/// The name Copilot pre-approves, `agentteam-exec`, is `agentteam exec` for the actions that are
/// not destructive and nothing else: a destructive action is refused before anything is sent,
/// naming the `agentteam exec` command that asks; a word that is no action (`run`, `admin`) gets
/// `agentteam exec`'s own refusal; help still works.
#[tokio::test]
async fn the_pre_approved_name_runs_only_actions_that_are_not_destructive() {
    let root = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_in(root.path(), &[]).await;
    let agent = daemon.add_agent("alpha").await;
    let channel = &channel_of(&daemon);
    let create = json!({"location": {"kind": "channel", "channelId": channel}, "title": "kept"});
    let alias = root.path().join("alias");
    std::fs::create_dir_all(&alias).unwrap();
    // As the Copilot driver links it: the daemon's own executable under the other name.
    let script = format!(
        r#"ln -s "$(command -v agentteam)" {dir}/agentteam-exec
a={dir}/agentteam-exec
id=$($a task create '{create}' | sed 's/.*"id":"\(task_[^"]*\)".*/\1/')
echo "$id"
$a task cancel "{{\"taskId\":\"$id\"}}" 2>{dir}/cancel.err; echo "cancel $?"
$a run --agent alpha -- touch {dir}/ran 2>{dir}/run.err; echo "run $?"
$a admin kb list 2>/dev/null; echo "admin $?"
$a task --help >/dev/null; echo "help $?""#,
        dir = alias.display()
    );
    let mut launched = daemon.launch(&agent, &[], &script);
    let task_id = launched.line().await;
    assert!(task_id.starts_with("task_"), "{task_id}");
    assert_eq!(launched.line().await, "cancel 2");
    let refusal = std::fs::read_to_string(alias.join("cancel.err")).unwrap();
    assert!(
        refusal.contains("runs only actions that are not destructive")
            && refusal.contains("agentteam exec task cancel"),
        "{refusal}"
    );
    assert_eq!(launched.line().await, "run 2");
    assert!(!alias.join("ran").exists());
    assert!(
        std::fs::read_to_string(alias.join("run.err"))
            .unwrap()
            .contains("unknown domain"),
    );
    assert_eq!(launched.line().await, "admin 2");
    assert_eq!(launched.line().await, "help 0");
    // The task is still open.
    let task = exec_as(
        &daemon,
        &agent,
        &["task", "get", &json!({"taskId": task_id}).to_string()],
    )
    .await;
    assert_eq!(task["data"]["task"]["status"], "open", "{task}");
}

/// The one rule of what runs unasked, where the daemon enforces it: Kimi Code's print mode runs
/// every tool without asking, so a destructive `agentteam exec` of that launch is refused by the
/// daemon with an answer that says why, while reads and writes run; an interactive Kimi Code
/// asks its person, so the same action goes through.
#[tokio::test]
async fn a_destructive_call_nobody_would_be_asked_about_is_refused_saying_why() {
    let root = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_in(root.path(), &[]).await;
    let agent = daemon.add_agent("alpha").await;
    let doomed = daemon.add_agent("doomed").await;
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(root.path().join("home")).unwrap();
    let stub = bin.join("kimi");
    // A stand-in Kimi Code: its version, then the shell commands its model would run.
    std::fs::write(
        &stub,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 2.1.0; exit 0; }}\nagentteam exec agent get '{{\"agentId\":\"{doomed}\"}}' >/dev/null && echo read-ok\nagentteam exec agent delete '{{\"agentId\":\"{doomed}\"}}'; echo \"delete-exit $?\"\n"
        ),
    )
    .unwrap();
    agentteam::platform::fs::set_mode(&stub, 0o755).unwrap();
    let run = |args: &[&str]| {
        let mut command = daemon.cli(&["run", "--agent", &agent]);
        command
            .arg("--")
            .arg(&stub)
            .args(args)
            .env("HOME", root.path().join("home"));
        command.output()
    };
    let output = run(&["-p", "tidy up"]).await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("read-ok"), "{stdout}");
    assert!(stdout.contains("delete-exit 1"), "{stdout}");
    let refused: Value = stdout
        .lines()
        .find(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap())
        .unwrap_or_else(|| panic!("no answer in {stdout}"));
    assert_eq!(refused["error"]["code"], "forbidden", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`agent delete` is destructive")
            && message.contains("Kimi Code runs every tool without asking in print mode"),
        "{message}"
    );
    assert!(
        refused["error"]["next"]
            .as_str()
            .unwrap()
            .contains("your person")
    );

    // Interactive, Kimi Code asks its person first: the daemon lets the same call through.
    let output = run(&[]).await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("delete-exit 0"), "{stdout}");
    let listed = daemon
        .cli(&["agent", "list", "--json"])
        .output()
        .await
        .unwrap();
    assert!(!String::from_utf8_lossy(&listed.stdout).contains(&doomed));
}
