//! The real runtimes under `agentteam run --runtime X`, offline.
//!
//! Claude Code, Codex and OpenCode, installed by `scripts/test` from the npm registry at pinned
//! versions (`scripts/lib/runtimes.sh`), each run against a scripted model server on loopback
//! (`scripted_model.py`) whose first answer calls `message_send` under that runtime's
//! model-visible name, and which holds that answer past the launch's first credential generation
//! (`--token-ttl-secs 2`), so the call needs a rotated token. Each test checks that the message
//! reached the channel, that the runtime offered its model exactly the mapping's names for the
//! whole inventory, that no token appeared in any process's argv or environment while it ran
//! (sampled from `/proc`), in its `HOME` afterwards, or on the proxy every proxy variable points
//! at, and that the generated configuration went with the credentials.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentteam::contract::TOOLS;
use agentteam::contract::tool_guidance::{RuntimeNaming, ToolNamer};
use serde_json::{Value, json};

use crate::support::{TestDaemon, repo_root, venv_tool};

/// A pinned runtime's executable, installed by `scripts/test`.
fn runtime_tool(variable: &str) -> PathBuf {
    let path = std::env::var_os(variable).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{variable} is not set: run the tests with `scripts/test`, which installs the runtimes")
    });
    assert!(path.exists(), "{} is missing", path.display());
    // The runtime starts in its own working directory.
    std::path::absolute(&path).unwrap()
}

/// The scripted model server: its port and its request log.
struct Model {
    child: tokio::process::Child,
    port: u16,
    log: PathBuf,
}

impl Model {
    async fn start(
        dir: &Path,
        api: &str,
        naming: RuntimeNaming,
        target: &str,
        content: &str,
    ) -> Model {
        use tokio::io::AsyncBufReadExt;
        let log = dir.join("model.log");
        let prefix = naming.model_name("");
        let mut child = tokio::process::Command::new(venv_tool("python"))
            .arg(repo_root().join("tests/it/scripted_model.py"))
            .args(["--api", api, "--tool-prefix", &prefix, "--target", target])
            .args(["--content", content, "--hold-call", "3"])
            .arg("--log")
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the model server starts");
        let port = line.strip_prefix("listening on ").unwrap().parse().unwrap();
        Model { child, port, log }
    }

    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A listener every proxy variable points at: it must never be connected to.
async fn proxy_trap() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((_stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    (url, hits)
}

/// Every regular file under `dir` (links are not followed).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_symlink() {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Every file under `dir` whose name is `name`.
fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|path| path.file_name().and_then(|n| n.to_str()) == Some(name))
        .collect()
}

/// Which of `tokens` any process's argv or environment holds now.
fn tokens_in_processes(tokens: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        for part in ["cmdline", "environ"] {
            let Ok(bytes) = std::fs::read(entry.path().join(part)) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            for token in tokens {
                if text.contains(token.as_str()) {
                    found.push(format!("{} {part}", entry.path().display()));
                }
            }
        }
    }
    found
}

/// Whether any process's argv holds `needle`.
fn any_argv_contains(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(needle))
    })
}

/// Which files under `dir` hold any of `tokens`.
fn tokens_in_files(dir: &Path, tokens: &[String]) -> Vec<String> {
    files_under(dir)
        .into_iter()
        .filter(|path| {
            std::fs::read(path).is_ok_and(|bytes| {
                let text = String::from_utf8_lossy(&bytes);
                tokens.iter().any(|t| text.contains(t.as_str()))
            })
        })
        .map(|path| path.display().to_string())
        .collect()
}

/// The channel's messages, read through a generic runtime's MCP route.
async fn channel_contents(daemon: &TestDaemon, agent: &str, target: &str) -> Vec<String> {
    let script = r#"echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 60"#;
    let mut reader = daemon.launch(agent, &[], script);
    let url = reader.line().await;
    let token = std::fs::read_to_string(reader.line().await).unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "message_history_read", "arguments": {"target": target, "limit": 50}}});
    let answer: Value = daemon
        .client
        .post(url)
        .bearer_auth(token.trim())
        .header("MCP-Protocol-Version", "2025-11-25")
        .header("Accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["result"]["structuredContent"]["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

/// What a runtime needs beyond its family: its executable's variable, the model API it speaks,
/// its arguments, and the environment that points it at the scripted model (given its port and
/// its `HOME`, where a configuration of the user's own may be written).
struct Runtime {
    family: &'static str,
    executable: &'static str,
    api: &'static str,
    naming: RuntimeNaming,
    args: fn(port: u16) -> Vec<String>,
    setup: fn(home: &Path, port: u16) -> Vec<(String, String)>,
}

async fn drive(runtime: Runtime) {
    let root = tempfile::tempdir().unwrap();
    let run_dir = root.path().join("run");
    let daemon = TestDaemon::start_in(
        root.path(),
        &[
            "--runtime-dir",
            run_dir.to_str().unwrap(),
            "--token-ttl-secs",
            "2",
            "--rotation-tick-ms",
            "100",
        ],
    )
    .await;
    let agent = daemon.add_agent("alpha").await;
    let identity: Value =
        serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
            .unwrap();
    let target = format!("channel:{}", identity["channelId"].as_str().unwrap());
    let content = format!("hello from {}", runtime.family);
    let model = Model::start(root.path(), runtime.api, runtime.naming, &target, &content).await;
    let (trap, trap_hits) = proxy_trap().await;
    let home = root.path().join("home");
    let workdir = root.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workdir).unwrap();

    let mut command = daemon.cli(&["run", "--runtime", runtime.family, "--agent", &agent]);
    command
        .arg("--workdir")
        .arg(&workdir)
        .arg("--")
        .arg(runtime_tool(runtime.executable))
        .args((runtime.args)(model.port))
        .env("HOME", &home)
        .envs((runtime.setup)(&home, model.port));
    for proxy in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        command.env(proxy, &trap);
    }
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let collect = |mut pipe: Box<dyn tokio::io::AsyncRead + Unpin + Send>| {
        tokio::spawn(async move {
            let mut text = String::new();
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut text).await;
            text
        })
    };
    let (stdout, stderr) = (collect(Box::new(stdout)), collect(Box::new(stderr)));

    // While it runs: every generation's tokens, and where they must never be.
    let mut tokens: Vec<String> = Vec::new();
    let mut leaks = Vec::new();
    // Codex runs its header helper with a cleared environment: the route travels in the helper
    // command itself, which the helper checks before it reads the token file.
    let mut helper_names_its_route = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        let files = files_named(&run_dir, "token")
            .into_iter()
            .chain(files_named(&run_dir, "mcp-token"));
        for file in files {
            if let Ok(token) = std::fs::read_to_string(&file) {
                let token = token.trim().to_string();
                if !token.is_empty() && !tokens.contains(&token) {
                    tokens.push(token);
                }
            }
        }
        leaks.extend(tokens_in_processes(&tokens));
        helper_names_its_route |= any_argv_contains("mcp headers --url http://127.0.0.1:");
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not finish",
            runtime.family
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (stdout, stderr) = (stdout.await.unwrap(), stderr.await.unwrap());
    assert!(status.success(), "{}: {stderr}\n{stdout}", runtime.family);
    leaks.sort();
    leaks.dedup();
    assert!(
        leaks.is_empty(),
        "a token in a process's argv or environment: {leaks:?}"
    );
    assert!(
        tokens.len() >= 4,
        "no rotation while the runtime ran: {} tokens",
        tokens.len()
    );

    // The model saw exactly the mapping's names for the whole inventory, and called once.
    let mut expected: Vec<String> = TOOLS
        .iter()
        .map(|t| runtime.naming.model_name(t.name))
        .collect();
    expected.sort();
    let requests = model.requests();
    let offered: Vec<&Value> = requests
        .iter()
        .filter(|r| r["tools"] != json!([]))
        .collect();
    assert!(
        !offered.is_empty(),
        "the model was never offered the tools: {requests:?}"
    );
    for request in &offered {
        let mut names: Vec<String> = serde_json::from_value(request["tools"].clone()).unwrap();
        names.sort();
        assert_eq!(names, expected, "{}", runtime.family);
    }
    assert_eq!(
        requests.iter().filter(|r| r["answer"] == "call").count(),
        1,
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r["answer"] == "text" && r["tools"] != json!([]))
    );

    // The call acted, with a rotated credential (the model held it past the first expiry).
    assert!(
        channel_contents(&daemon, &agent, &target)
            .await
            .contains(&content),
        "{}: the message did not reach the channel\n{stderr}\n{stdout}",
        runtime.family
    );
    // The configuration went with the credentials; nothing of them is left.
    for name in ["claude-mcp.json", "opencode.json", "token", "mcp-token"] {
        let left = files_named(&run_dir, name);
        // The reader launched above is still running: its own token files are its.
        assert!(
            name.ends_with("token") || left.is_empty(),
            "{name} left behind: {left:?}"
        );
    }
    let in_home = tokens_in_files(&home, &tokens);
    assert!(
        in_home.is_empty(),
        "a token in the runtime's HOME: {in_home:?}"
    );
    assert!(!stdout.contains(&tokens[0]) && !stderr.contains(&tokens[0]));
    assert_eq!(
        trap_hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "something went through the proxy"
    );
    if runtime.family == "codex" {
        // The primary thread came from Codex's own `thread.started`, and its call passed the gate.
        assert!(
            daemon
                .log()
                .contains("the Codex runtime named its primary thread")
        );
        assert!(helper_names_its_route, "the helper command lacks its route");
    }
    drop(model.child);
}

#[tokio::test]
async fn claude_code_calls_the_daemon_through_its_own_mcp_config() {
    drive(Runtime {
        family: "claude",
        executable: "AGENTTEAM_TEST_CLAUDE",
        api: "anthropic",
        naming: RuntimeNaming::Claude,
        args: |_| {
            ["-p", "reply to the channel", "--output-format", "json"]
                .into_iter()
                .chain(["--allowedTools", "mcp__agentteam__message_send"])
                .map(String::from)
                .collect()
        },
        setup: |_, port| {
            vec![
                (
                    "ANTHROPIC_BASE_URL".into(),
                    format!("http://127.0.0.1:{port}"),
                ),
                ("ANTHROPIC_API_KEY".into(), "scripted-model-key".into()),
                ("DISABLE_AUTOUPDATER".into(), "1".into()),
                (
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                    "1".into(),
                ),
            ]
        },
    })
    .await;
}

#[tokio::test]
async fn codex_calls_the_daemon_through_its_config_overrides() {
    drive(Runtime {
        family: "codex",
        executable: "AGENTTEAM_TEST_CODEX",
        api: "responses",
        naming: RuntimeNaming::Claude,
        args: |port| {
            let mut args: Vec<String> = ["exec", "--json", "--skip-git-repo-check"]
                .into_iter()
                .map(String::from)
                .collect();
            for set in [
                "model_provider=\"scripted\"".to_string(),
                "model_providers.scripted.name=\"scripted\"".into(),
                format!("model_providers.scripted.base_url=\"http://127.0.0.1:{port}/v1\""),
                "model_providers.scripted.wire_api=\"responses\"".into(),
                "model_providers.scripted.env_key=\"SCRIPTED_API_KEY\"".into(),
                "model=\"scripted-model\"".into(),
                "analytics.enabled=false".into(),
                "features.plugins=false".into(),
            ] {
                args.push("-c".into());
                args.push(set);
            }
            args.push("reply to the channel".into());
            args
        },
        setup: |_, _| vec![("SCRIPTED_API_KEY".into(), "scripted-model-key".into())],
    })
    .await;
}

#[tokio::test]
async fn opencode_calls_the_daemon_through_the_stdio_bridge() {
    drive(Runtime {
        family: "opencode",
        executable: "AGENTTEAM_TEST_OPENCODE",
        api: "chat",
        naming: RuntimeNaming::Opencode,
        args: |_| {
            ["run", "--format", "json", "reply to the channel"]
                .into_iter()
                .map(String::from)
                .collect()
        },
        setup: |home, port| {
            // The user's own configuration names the model provider; ours (OPENCODE_CONFIG) is
            // merged over it.
            let config = home.join(".config/opencode");
            std::fs::create_dir_all(&config).unwrap();
            let user = json!({
                "$schema": "https://opencode.ai/config.json",
                "provider": {"scripted": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "scripted",
                    "options": {"baseURL": format!("http://127.0.0.1:{port}/v1"), "apiKey": "scripted-model-key"},
                    "models": {"m": {"name": "m", "tool_call": true}},
                }},
                "model": "scripted/m",
                "autoupdate": false,
                "share": "disabled",
            });
            std::fs::write(config.join("opencode.json"), user.to_string()).unwrap();
            vec![
                ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
                ("npm_config_offline".into(), "true".into()),
            ]
        },
    })
    .await;
}
