//! The harness of the real-runtime tests (`runtime_drivers`): the scripted model server, the
//! user's setup, and `drive`, which runs one real runtime under `agentteam run` offline and checks
//! everything a user would see (see `runtime_drivers` for what is asserted).

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentteam::contract::TOOLS;
use agentteam::contract::tool_guidance::{RuntimeNaming, ToolNamer};
use serde_json::{Value, json};

use crate::support::{TestDaemon, repo_root, venv_tool};

/// A pinned runtime's executable, installed by `scripts/test`.
pub(crate) fn runtime_tool(variable: &str) -> PathBuf {
    let path = std::env::var_os(variable).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{variable} is not set: run the tests with `scripts/test`, which installs the runtimes")
    });
    assert!(path.exists(), "{} is missing", path.display());
    // The runtime starts in its own working directory.
    std::path::absolute(&path).unwrap()
}

/// The scripted model server: its port, its request log and the request bodies it received.
pub(crate) struct Model {
    pub(crate) child: tokio::process::Child,
    pub(crate) port: u16,
    pub(crate) log: PathBuf,
    pub(crate) dump: PathBuf,
}

impl Model {
    pub(crate) async fn start(
        dir: &Path,
        api: &str,
        naming: RuntimeNaming,
        script: &[Value],
    ) -> Model {
        Model::start_with(dir, api, naming, Value::from(script.to_vec()), 3).await
    }

    /// A model with `script` (a list of steps, or lists by conversation marker) whose first
    /// step is held for `hold_secs`.
    pub(crate) async fn start_with(
        dir: &Path,
        api: &str,
        naming: RuntimeNaming,
        script: Value,
        hold_secs: u32,
    ) -> Model {
        use tokio::io::AsyncBufReadExt;
        let log = dir.join("model.log");
        let dump = dir.join("model-requests");
        std::fs::create_dir_all(&dump).unwrap();
        let script_file = dir.join("model-script.json");
        std::fs::write(&script_file, script.to_string()).unwrap();
        let prefix = naming.model_name("");
        let mut child = tokio::process::Command::new(venv_tool("python"))
            .arg(repo_root().join("tests/it/scripted_model.py"))
            .args(["--api", api, "--tool-prefix", &prefix])
            .args(["--hold-call", &hold_secs.to_string()])
            .arg("--script")
            .arg(&script_file)
            .arg("--log")
            .arg(&log)
            .arg("--dump")
            .arg(&dump)
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
        Model {
            child,
            port,
            log,
            dump,
        }
    }

    /// Every request logged so far; a line still being written is not one yet.
    pub(crate) fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .split_inclusive('\n')
            .filter_map(|l| l.strip_suffix('\n'))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The body of a logged request, as the runtime sent it.
    pub(crate) fn body(&self, request: &Value) -> String {
        std::fs::read_to_string(self.dump.join(request["body"].as_str().unwrap())).unwrap()
    }
}

/// A listener every proxy variable points at: it must never be connected to.
pub(crate) async fn proxy_trap() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
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
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
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
pub(crate) fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|path| path.file_name().and_then(|n| n.to_str()) == Some(name))
        .collect()
}

/// Which of `tokens` any process's argv or environment holds now.
pub(crate) fn tokens_in_processes(tokens: &[String]) -> Vec<String> {
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
pub(crate) fn any_argv_contains(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(needle))
    })
}

/// Which files under `dir` hold any of `tokens`.
pub(crate) fn tokens_in_files(dir: &Path, tokens: &[String]) -> Vec<String> {
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
pub(crate) async fn channel_contents(
    daemon: &TestDaemon,
    agent: &str,
    target: &str,
) -> Vec<String> {
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

/// The channel the daemon's identity names: where the runtime tests post and file tasks.
pub(crate) fn channel_of(daemon: &TestDaemon) -> String {
    let identity: Value =
        serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
            .unwrap();
    identity["channelId"].as_str().unwrap().to_string()
}

/// `task list` of `channel`, through a generic runtime of `agent`: its envelope.
pub(crate) async fn channel_tasks(daemon: &TestDaemon, agent: &str, channel: &str) -> Value {
    let location = json!({"location": {"kind": "channel", "channelId": channel}});
    exec_as(daemon, agent, &["task", "list", &location.to_string()]).await
}

/// One Exec call through a generic runtime of `agent`: its envelope.
pub(crate) async fn exec_as(daemon: &TestDaemon, agent: &str, args: &[&str]) -> Value {
    let words: Vec<String> = args
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let script = format!("agentteam exec {}", words.join(" "));
    let mut reader = daemon.launch(agent, &[], &script);
    serde_json::from_str(&reader.line().await).unwrap()
}

/// The text of every tool result in a request body of `api`, in order.
pub(crate) fn tool_results(api: &str, body: &str) -> Vec<String> {
    let body: Value = serde_json::from_str(body).unwrap();
    let text = |content: &Value| match content {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let items = |key: &str| body[key].as_array().cloned().unwrap_or_default();
    match api {
        "anthropic" => items("messages")
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| text(&b["content"]))
            .collect(),
        "chat" => items("messages")
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| text(&m["content"]))
            .collect(),
        "gemini" => items("contents")
            .iter()
            .filter_map(|c| c["parts"].as_array())
            .flatten()
            .filter(|p| p.get("functionResponse").is_some())
            .map(|p| {
                // Gemini wraps a tool's text as `{"output": …}` (or `{"error": …}`).
                let response = &p["functionResponse"]["response"];
                match (&response["output"], &response["error"]) {
                    (Value::String(output), _) => output.clone(),
                    (_, Value::String(error)) => error.clone(),
                    _ => text(response),
                }
            })
            .collect(),
        _ => items("input")
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| text(&i["output"]))
            .collect(),
    }
}

/// The user's own setup of a runtime, written into its `HOME` the way a user would: their model
/// provider, their own MCP server (`user_mcp.py`), and for `asks` a rule that asks before (or,
/// headless, refuses) every command they did not allow.
pub(crate) struct UserSetup<'a> {
    pub(crate) home: &'a Path,
    /// The runtime's working directory.
    pub(crate) workdir: &'a Path,
    pub(crate) port: u16,
    pub(crate) python: PathBuf,
    pub(crate) user_mcp: PathBuf,
}

/// What a user's setup sets in the environment, and the files of it that must end byte for byte
/// as they were.
pub(crate) type UserFiles = (Vec<(String, String)>, Vec<PathBuf>);

/// What a runtime needs beyond its family.
pub(crate) struct Runtime {
    pub(crate) family: &'static str,
    pub(crate) executable: &'static str,
    pub(crate) api: &'static str,
    pub(crate) naming: RuntimeNaming,
    /// The shell tool as the model sees it, and its command argument.
    pub(crate) shell: (&'static str, &'static str),
    /// The model-visible name of the user's own MCP tool.
    pub(crate) user_tool: &'static str,
    /// The runtime's own arguments.
    pub(crate) args: fn() -> Vec<String>,
    /// `agentteam run` flags beyond the agent and working directory.
    pub(crate) run_flags: &'static [&'static str],
    /// Writes the user's files; returns the environment they set and the files that must end
    /// byte for byte as they were.
    pub(crate) setup: fn(&UserSetup) -> UserFiles,
    /// Whether the user's setup asks before other commands (so refusals are checked).
    pub(crate) asks: bool,
    /// Whether a refused call ends the runtime's headless run.
    pub(crate) refusal_ends_the_run: bool,
    /// Whether the runtime shows its model a server's MCP `instructions`.
    pub(crate) shows_mcp_instructions: bool,
    /// The command the model runs an action with: `agentteam exec`, or the name the driver
    /// pre-approved it under where the runtime's rules cannot approve `agentteam exec` itself.
    pub(crate) exec: &'static str,
    /// Where under the user's `HOME` the runtime keeps its sessions: they land there.
    pub(crate) sessions: &'static str,
}

/// The calls the scripted model makes, in order: an MCP `message_send`, an `agentteam exec task
/// create` through the shell tool, and where the user's setup asks before other commands,
/// `agentteam run`, an unrelated command and a destructive action, each of which must be asked
/// (refused headless) and not run.
pub(crate) fn script(runtime: &Runtime, target: &str, content: &str, markers: &Path) -> Vec<Value> {
    let channel = target.strip_prefix("channel:").unwrap();
    let mcp = if runtime.family == "codex" {
        json!({"name": "message_send", "namespace": "mcp__agentteam",
               "args": {"target": target, "content": content}})
    } else {
        json!({"name": runtime.naming.model_name("message_send"),
               "args": {"target": target, "content": content}})
    };
    let shell = |command: String| {
        let mut args = json!({ runtime.shell.1: command });
        if runtime.family == "opencode" {
            args["description"] = json!("an AgentTeam call");
        }
        json!({"name": runtime.shell.0, "args": args})
    };
    let create = json!({"location": {"kind": "channel", "channelId": channel},
                        "title": format!("filed by {}", runtime.family)});
    let mut calls = vec![
        mcp,
        shell(format!("{} task create '{create}'", runtime.exec)),
    ];
    if runtime.asks {
        // At once: a runtime may end a headless run at its first refusal.
        let m = |name: &str| markers.join(name).display().to_string();
        calls.push(Value::from(vec![
            shell(format!(
                "agentteam run --agent alpha -- touch {}",
                m("ran-agentteam-run")
            )),
            shell(format!("touch {}", m("ran-unrelated"))),
            shell(
                r#"agentteam exec task cancel '{"taskId":"task_00000000000000000000000000"}'"#
                    .to_string(),
            ),
        ]));
    }
    calls
}

/// The files under `home`, each by its path relative to it with what differs from run to run made
/// the same: the run's temporary `root` (as it is, and as Claude Code spells a directory in a
/// file name), ids (a run of 8 or more hex digits and dashes with a digit in it: UUIDs, hashes,
/// dates) and numbers (process ids, times). A SQLite database's `-wal`, `-shm` and `-journal`
/// files are left out.
pub(crate) fn written_paths(home: &Path, root: &Path) -> std::collections::BTreeSet<String> {
    let root = root.display().to_string();
    let spelled: String = root
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let component = |name: &str| {
        let name = name.replace(&root, "ROOT").replace(&spelled, "ROOT");
        let chars: Vec<char> = name.chars().collect();
        let mut out = String::new();
        let mut at = 0;
        while at < chars.len() {
            let run = chars[at..]
                .iter()
                .take_while(|c| c.is_ascii_hexdigit() || **c == '-')
                .count();
            let id = &chars[at..at + run];
            if run >= 8 && id.iter().any(char::is_ascii_digit) {
                out.push('#');
                at += run;
            } else if chars[at].is_ascii_digit() {
                out.push('#');
                at += chars[at..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
            } else {
                out.push(chars[at]);
                at += 1;
            }
        }
        out
    };
    files_under(home)
        .iter()
        // A SQLite database's sidecars come and go with its connections and checkpoints.
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            !["-wal", "-shm", "-journal"]
                .iter()
                .any(|sidecar| name.ends_with(sidecar))
        })
        .map(|path| {
            path.strip_prefix(home)
                .unwrap()
                .components()
                .map(|c| component(&c.as_os_str().to_string_lossy()))
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect()
}

/// The same runtime and the same user setup without `agentteam run` (and without the proxy trap,
/// which `agentteam run` keeps loopback traffic away from): what its
/// own writes leave under the user's `HOME` (`written_paths`). It also checks that the runtime
/// leaves the user's files byte for byte as they were on its own, so that "as they were" is what
/// a run without `agentteam` leaves.
async fn baseline(runtime: &Runtime) -> std::collections::BTreeSet<String> {
    let root = tempfile::tempdir().unwrap();
    // No script: the model answers with text, and the runtime ends its run.
    let model = Model::start(root.path(), runtime.api, runtime.naming, &[]).await;
    let home = root.path().join("home");
    let workdir = root.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workdir).unwrap();
    let (env, files) = (runtime.setup)(&UserSetup {
        home: &home,
        workdir: &workdir,
        port: model.port,
        python: venv_tool("python"),
        user_mcp: repo_root().join("tests/it/user_mcp.py"),
    });
    let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let mut command = tokio::process::Command::new(runtime_tool(runtime.executable));
    command
        .args((runtime.args)())
        .current_dir(&workdir)
        .env("HOME", &home)
        .envs(env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap_or_else(|_| panic!("{}: the baseline run did not finish", runtime.family))
        .unwrap();
    assert!(
        output.status.success(),
        "{}: the baseline run failed ({}): {}\n{}\n{:?}",
        runtime.family,
        output.status,
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout),
        model.requests()
    );
    assert!(
        model.requests().iter().any(|r| r["all_tools"]
            .as_array()
            .is_some_and(|all| all.iter().any(|n| n == runtime.user_tool))),
        "{}: the baseline run never reached the model with the user's own MCP server",
        runtime.family
    );
    for (file, before) in files.iter().zip(&before) {
        assert_eq!(
            &std::fs::read(file).unwrap(),
            before,
            "{}: the runtime itself changed {}",
            runtime.family,
            file.display()
        );
    }
    written_paths(&home, root.path())
}

/// Every variable a runtime may take a proxy from.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

pub(crate) async fn drive(runtime: Runtime) {
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
    let target = format!("channel:{}", channel_of(&daemon));
    let content = format!("hello from {}", runtime.family);
    let markers = root.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let calls = script(&runtime, &target, &content, &markers);
    let model = Model::start(root.path(), runtime.api, runtime.naming, &calls).await;
    let (trap, trap_hits) = proxy_trap().await;
    let home = root.path().join("home");
    let workdir = root.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workdir).unwrap();
    let (user_env, user_files) = (runtime.setup)(&UserSetup {
        home: &home,
        workdir: &workdir,
        port: model.port,
        python: venv_tool("python"),
        user_mcp: repo_root().join("tests/it/user_mcp.py"),
    });
    let before: Vec<Vec<u8>> = user_files
        .iter()
        .map(|f| std::fs::read(f).unwrap())
        .collect();

    // The default driver selection: no `--runtime`.
    let mut command = daemon.cli(&["run", "--agent", &agent]);
    command
        .args(runtime.run_flags)
        .arg("--workdir")
        .arg(&workdir)
        .arg("--")
        .arg(runtime_tool(runtime.executable))
        .args((runtime.args)())
        .env("HOME", &home)
        .envs(user_env);
    for proxy in PROXY_VARIABLES {
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
    let mut guide_seen = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
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
        // The guidance directory holds no token file, and no file of it holds a token.
        for guide in files_named(
            &run_dir,
            agentteam::daemon::runtime::guidance::GUIDANCE_FILE,
        ) {
            let dir = guide.parent().unwrap();
            guide_seen = true;
            leaks.extend(tokens_in_files(dir, &tokens));
            assert!(
                files_named(dir, "token").is_empty() && files_named(dir, "mcp-token").is_empty()
            );
        }
        helper_names_its_route |= any_argv_contains("mcp headers --url http://127.0.0.1:");
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not finish; the model answered {:?}",
            runtime.family,
            model
                .requests()
                .iter()
                .map(|r| r["answer"].to_string())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (stdout, stderr) = (stdout.await.unwrap(), stderr.await.unwrap());
    assert!(status.success(), "{}: {stderr}\n{stdout}", runtime.family);
    assert!(guide_seen, "no guidance directory while it ran");
    leaks.sort();
    leaks.dedup();
    assert!(
        leaks.is_empty(),
        "a token in a process's argv or environment, or in the guidance: {leaks:?}"
    );
    assert!(
        tokens.len() >= 4,
        "no rotation while the runtime ran: {} tokens",
        tokens.len()
    );
    assert!(
        stderr.contains(&format!(
            "agentteam: runtime driver: {} (from the program's name)",
            runtime.family
        )),
        "{stderr}"
    );

    // The model saw exactly the mapping's names for the whole inventory, the user's own tool
    // beside them, and the script ran to its end.
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
        let all: Vec<String> = serde_json::from_value(request["all_tools"].clone()).unwrap();
        assert!(
            all.iter().any(|n| n == runtime.user_tool),
            "{}: the user's own MCP server is missing: {all:?}",
            runtime.family
        );
    }
    for step in 0..calls.len() {
        assert_eq!(
            requests
                .iter()
                .filter(|r| r["answer"] == format!("call {step}"))
                .count(),
            1,
            "step {step}: {requests:?}"
        );
    }
    assert!(
        runtime.refusal_ends_the_run
            || requests
                .iter()
                .any(|r| r["answer"] == "text" && r["tools"] != json!([]))
    );

    // The first request carried the guidance, the memory skill and the uncut MCP instructions.
    let first = model.body(offered[0]);
    assert!(
        first.contains(agentteam::daemon::runtime::guidance::HEADLINE),
        "{}: the guidance is not in the first request",
        runtime.family
    );
    assert!(
        first.contains("memory-maintenance"),
        "{}: no skill",
        runtime.family
    );
    let instructions = agentteam::contract::tool_guidance::mcp_instructions();
    let ending = instructions.lines().last().unwrap();
    assert!(
        !runtime.shows_mcp_instructions
            || first.contains(serde_json::to_string(ending).unwrap().trim_matches('"')),
        "{}: the MCP instructions did not arrive whole",
        runtime.family
    );

    // Each step's results, as the runtime handed them back to the model in its next request.
    let after = |step: usize| {
        requests.iter().find(|r| {
            r["answer"] == format!("call {}", step + 1)
                || (step + 1 == calls.len() && r["answer"] == "text" && r["tools"] != json!([]))
        })
    };
    let results_of = |step: usize| {
        let next = after(step).unwrap_or_else(|| panic!("no request after step {step}"));
        let all = tool_results(runtime.api, &model.body(next));
        let made = calls[step].as_array().map_or(1, Vec::len);
        all[all.len() - made..].to_vec()
    };
    // The MCP call acted, with a rotated credential (the model held it past the first expiry).
    assert!(
        channel_contents(&daemon, &agent, &target)
            .await
            .contains(&content),
        "{}: the message did not reach the channel\n{stderr}\n{stdout}",
        runtime.family
    );
    // The shell tool's `agentteam exec task create` created the task.
    let created = results_of(1).remove(0);
    let channel = target.strip_prefix("channel:").unwrap();
    let listed = channel_tasks(&daemon, &agent, channel).await;
    // The envelope the command printed, wherever the runtime put it in the tool result.
    let envelope: Value = created
        .find("{\"data\"")
        .and_then(|at| {
            serde_json::Deserializer::from_str(&created[at..])
                .into_iter::<Value>()
                .next()?
                .ok()
        })
        .unwrap_or_else(|| panic!("{}: no envelope in {created}", runtime.family));
    let task_id = envelope["data"]["task"]["id"].as_str().unwrap();
    let task = exec_as(
        &daemon,
        &agent,
        &["task", "get", &json!({"taskId": task_id}).to_string()],
    )
    .await;
    assert_eq!(
        task["data"]["task"]["title"],
        format!("filed by {}", runtime.family),
        "{task}"
    );
    assert_eq!(
        listed["data"]["tasks"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    if runtime.asks {
        // Not run; and asked (refused headless): the runtime said so to the model, or, where a
        // refusal ends a headless run, ended it there.
        assert!(
            !markers.join("ran-agentteam-run").exists(),
            "{}: `agentteam run` ran",
            runtime.family
        );
        assert!(
            !markers.join("ran-unrelated").exists(),
            "{}: an unrelated command ran",
            runtime.family
        );
        match after(2) {
            Some(_) => {
                for (answer, what) in results_of(2).iter().zip([
                    "agentteam run",
                    "an unrelated command",
                    "a destructive action",
                ]) {
                    assert!(
                        !answer.contains("\"ok\""),
                        "{}: {what} ran without asking: {answer}",
                        runtime.family
                    );
                }
            }
            None => assert!(
                runtime.refusal_ends_the_run,
                "{}: no answer to the refused calls",
                runtime.family
            ),
        }
    }
    // The configuration went with the credentials; nothing of them is left.
    for name in [
        "claude-mcp.json",
        "token",
        "mcp-token",
        "guidance.md",
        "SKILL.md",
    ] {
        let left = files_named(&run_dir, name);
        // The readers launched above are still running: their own files are theirs.
        assert!(
            name.ends_with("token") || name == "guidance.md" || left.is_empty(),
            "{name} left behind: {left:?}"
        );
    }
    token_analysis_reads_the_run(&runtime, &home, &model, &offered);
    // The user's own files end as they were.
    for (file, before) in user_files.iter().zip(&before) {
        assert_eq!(
            &std::fs::read(file).unwrap(),
            before,
            "{} changed",
            file.display()
        );
    }
    assert!(
        !files_under(&home.join(runtime.sessions)).is_empty(),
        "{}: no session under {} in the user's HOME",
        runtime.family,
        runtime.sessions
    );
    // Everything the runtime writes into the user's HOME on its own, it wrote there under
    // `agentteam run` too: nothing of its own state went into a launch's private directories.
    let native = baseline(&runtime).await;
    let ours = written_paths(&home, root.path());
    let missing: Vec<&String> = native.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "{}: without agentteam the runtime wrote these under HOME, under `agentteam run` it did not: {missing:?}\n(under agentteam run: {ours:?})",
        runtime.family
    );
    let in_home = tokens_in_files(&home, &tokens);
    assert!(
        in_home.is_empty(),
        "a token in the runtime's HOME (its transcripts included): {in_home:?}"
    );
    let seen = tokens_in_files(&model.dump, &tokens);
    assert!(seen.is_empty(), "a token reached the model: {seen:?}");
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

/// `agentteam token analyze` reads what the runtime recorded of this run: one session with the
/// requests and usage the scripted model answered, the AgentTeam calls by their names, and no
/// argument or result text; its rebuilt fixed cost is what the model received, tool by tool.
fn token_analysis_reads_the_run(runtime: &Runtime, home: &Path, model: &Model, offered: &[&Value]) {
    let family = runtime.family;
    let analyze = |filters: &[&str]| {
        let mut args = vec!["token", "analyze", "--json", "--runtime", family];
        args.extend(filters);
        String::from_utf8(run_in_home(
            Path::new(env!("CARGO_BIN_EXE_agentteam")),
            &args,
            home,
        ))
        .unwrap()
    };
    // Every file of the runtime's as it was, byte for byte and by its time (a SQLite reader's
    // shared-memory index is the one file a reader maps).
    let files = || -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
        files_under(home)
            .into_iter()
            .filter(|p| !p.to_string_lossy().ends_with("-shm"))
            .map(|p| {
                let modified = std::fs::metadata(&p).unwrap().modified().unwrap();
                (p.clone(), std::fs::read(&p).unwrap_or_default(), modified)
            })
            .collect()
    };
    let before = files();
    let stdout = analyze(&[]);
    assert!(
        before == files(),
        "{family}: token analyze changed the runtime's files"
    );
    for filter in [
        &["--session", "no-such-session"][..],
        &["--since", "2999-01-01"],
        &["--path", "/no/such/dir"],
    ] {
        let filtered: Value = serde_json::from_str(&analyze(filter)).unwrap();
        assert_eq!(
            filtered["data"]["sessions"],
            json!([]),
            "{family}: {filter:?}"
        );
    }
    assert!(
        !stdout.contains(&format!("hello from {family}")),
        "{family}: a call's argument is in the report"
    );
    assert!(
        !stdout.contains(&format!("filed by {family}")),
        "{family}: a result's text is in the report"
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["schemaVersion"], 1);
    let sessions = report["data"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{family}: {stdout}");
    let session = &sessions[0];
    // Every request that offered the tools, once; a runtime's side requests (a title, a router)
    // are recorded by no runtime.
    let sent: u64 = offered
        .iter()
        .map(|r| r["input_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(
        session["requests"],
        offered.len() as u64,
        "{family}: {session}"
    );
    // The records show the launch, so the session bears AgentTeam's fixed cost.
    assert_eq!(session["agentteam"], true, "{family}: {session}");
    let usage = &session["usage"];
    let context = ["input", "cacheRead", "cacheWrite"]
        .iter()
        .map(|k| usage[k].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(context, sent, "{family}: {usage}");
    assert_eq!(
        usage["output"],
        5 * offered.len() as u64,
        "{family}: {usage}"
    );
    let calls = session["calls"].as_array().unwrap();
    let call = |label: &dyn Fn(&Value) -> bool| {
        calls
            .iter()
            .find(|c| label(c))
            .unwrap_or_else(|| panic!("{family}: {calls:?}"))
            .clone()
    };
    let sent_message = call(&|c| c["bridge"] == "mcp" && c["tool"] == "message_send");
    let created =
        call(&|c| c["bridge"] == "exec" && c["domain"] == "task" && c["action"] == "create");
    for c in [&sent_message, &created] {
        assert!(c["resultBytes"].as_u64().unwrap() > 100, "{family}: {c}");
        assert!(c["resultTokens"].as_u64().unwrap() > 10, "{family}: {c}");
    }
    assert!(
        sent_message["carriedBy"].as_u64().unwrap() >= 1,
        "{family}: {sent_message}"
    );

    // The fixed cost, rebuilt, against the first request the model received.
    let body: Value = serde_json::from_str(&model.body(offered[0])).unwrap();
    let received: std::collections::BTreeMap<String, Value> = match runtime.api {
        "anthropic" => body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["name"].as_str().unwrap().to_string(), t.clone()))
            .collect(),
        "responses" => {
            let namespace = body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == "mcp__agentteam")
                .unwrap_or_else(|| panic!("no agentteam namespace"));
            let (name, description) = agentteam::token::fixed::codex_namespace();
            assert_eq!(namespace["name"], name);
            assert_eq!(namespace["description"], description);
            namespace["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        format!("mcp__agentteam__{}", t["name"].as_str().unwrap()),
                        t.clone(),
                    )
                })
                .collect()
        }
        "chat" => body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["function"]["name"].as_str().unwrap().to_string(),
                    t.clone(),
                )
            })
            .collect(),
        "gemini" => body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| {
                t["functionDeclarations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|t| (t["name"].as_str().unwrap().to_string(), t))
            .collect(),
        other => panic!("{other}"),
    };
    let fixed_family = agentteam::daemon::runtime::driver::Family::resolve(
        agentteam::daemon::runtime::driver::Family::Auto,
        family,
        "",
    )
    .0;
    let fixed = agentteam::token::fixed::fixed(fixed_family);
    for (name, ours) in agentteam::token::fixed::tool_definitions(fixed_family) {
        let theirs = received
            .get(&name)
            .unwrap_or_else(|| panic!("{family}: {name} was not sent"));
        assert_eq!(&ours, theirs, "{family}: {name} as rebuilt and as sent");
        assert_eq!(ours.to_string().len(), theirs.to_string().len());
    }
    let raw = model.body(offered[0]);
    let escaped = |text: &str| {
        serde_json::to_string(text)
            .unwrap()
            .trim_matches('"')
            .to_string()
    };
    for item in &fixed.items {
        let text = match item.kind {
            agentteam::token::fixed::ItemKind::Tool => continue,
            // The location in OpenCode's skill line is the launch's own directory.
            agentteam::token::fixed::ItemKind::Skill => {
                item.text.split("<location>").next().unwrap()
            }
            _ => item.text.as_str(),
        };
        assert!(
            raw.contains(&escaped(text.trim_end())),
            "{family}: the {} the report counts is not what was sent",
            item.name
        );
    }
    // The session's fixed cost: Claude Code records the request it sent (`api-request-shape`), so
    // its figure is read from the transcript and is what the model received, item by item (checked
    // above); every other runtime's is rebuilt from the catalog, and says so. Either is counted
    // from the JSON text, an estimate for every provider.
    let source = if family == "claude" {
        "transcript"
    } else {
        "rebuilt"
    };
    assert_eq!(session["fixedSource"], source, "{family}: {session}");
    assert_eq!(
        session["fixedPerRequest"], fixed.tokens,
        "{family}: {session}"
    );
    assert_eq!(session["fixedMethod"], "json_text", "{family}: {session}");
    assert_eq!(
        report["methods"]["json_text"],
        agentteam::token::count::JSON_TEXT_RULE
    );
    if family == "claude" {
        claude_fixed_cost_follows_the_recorded_request(home, fixed.tokens);
    }
    if family == "claude" || family == "codex" {
        agrees_with_ccusage(family, home, session);
    }
    let estimates = &report["data"]["estimates"];
    assert!(
        estimates["samples"].as_u64().unwrap() >= 1,
        "{family}: {estimates}"
    );
    // How far this runtime's counts are from the input growth it recorded, in the JSON and in the
    // fixed-cost table a person reads.
    let check = &report["data"]["estimatesByRuntime"][family];
    assert_eq!(check["samples"], estimates["samples"], "{family}: {check}");
    let median = check["medianError"].as_f64().unwrap();
    let table = String::from_utf8(run_in_home(
        Path::new(env!("CARGO_BIN_EXE_agentteam")),
        &["token", "analyze", "--runtime", family],
        home,
    ))
    .unwrap();
    let row = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(family))
        .unwrap_or_else(|| panic!("{family}: no fixed-cost row in {table}"));
    assert!(
        row.ends_with(&format!("{:.1}% ({})", median * 100.0, check["samples"])),
        "{family}: the median error is not in {row:?}"
    );
    assert!(
        table.contains("an estimate for every provider"),
        "{family}: {table}"
    );
    let reported = report["data"]["fixed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["runtime"] == family)
        .unwrap()["tokens"]
        .clone();
    assert_eq!(reported, fixed.tokens);
}

/// Claude Code's fixed cost is the request its transcript recorded: one AgentTeam tool fewer in
/// the record is that tool's tokens fewer in the report, and without the record the report falls
/// back to the cost rebuilt from the catalog, labelled so. Each on a copy of the run's transcript.
fn claude_fixed_cost_follows_the_recorded_request(home: &Path, rebuilt: u64) {
    let transcript = files_under(home)
        .into_iter()
        .find(|p| {
            let p = p.to_string_lossy();
            p.contains("/.claude/projects/") && p.ends_with(".jsonl") && !p.contains("/subagents/")
        })
        .expect("Claude Code's transcript");
    let lines: Vec<Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shape_at = lines
        .iter()
        .position(|l| l["type"] == "api-request-shape")
        .expect("Claude Code records the request's shape");
    let tools = lines[shape_at]["shape"]["tools"].as_array().unwrap();
    let dropped = tools
        .iter()
        .rposition(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("mcp__agentteam__"))
        })
        .expect("the recorded request carries AgentTeam's tools");
    let dropped_tokens = agentteam::token::count::tokens(&tools[dropped].to_string());
    let analyze_copy = |lines: &[Value]| -> Value {
        let copy = tempfile::tempdir().unwrap();
        let dir = copy.path().join(".claude/projects/copy");
        std::fs::create_dir_all(&dir).unwrap();
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.join(transcript.file_name().unwrap()), text).unwrap();
        let stdout = run_in_home(
            Path::new(env!("CARGO_BIN_EXE_agentteam")),
            &["token", "analyze", "--json", "--runtime", "claude"],
            copy.path(),
        );
        let report: Value = serde_json::from_slice(&stdout).unwrap();
        report["data"]["sessions"][0].clone()
    };
    let mut fewer = lines.clone();
    fewer[shape_at]["shape"]["tools"]
        .as_array_mut()
        .unwrap()
        .remove(dropped);
    let session = analyze_copy(&fewer);
    assert_eq!(session["fixedSource"], "transcript", "{session}");
    assert_eq!(
        session["fixedPerRequest"],
        rebuilt - dropped_tokens,
        "{session}"
    );
    let mut without = lines;
    without.remove(shape_at);
    let session = analyze_copy(&without);
    assert_eq!(session["fixedSource"], "rebuilt", "{session}");
    assert_eq!(session["fixedPerRequest"], rebuilt, "{session}");
}

/// ccusage, run offline on the same records, counts the same session the same way: its input
/// (uncached), output, cache-read and cache-write totals are ours.
fn agrees_with_ccusage(family: &str, home: &Path, ours: &Value) {
    let ccusage = runtime_tool("AGENTTEAM_TEST_CCUSAGE");
    let output = run_in_home(&ccusage, &[family, "session", "--json", "--offline"], home);
    let theirs: Value = serde_json::from_slice(&output).unwrap();
    let sessions = theirs["sessions"]
        .as_array()
        .or(theirs["session"].as_array())
        .unwrap();
    assert_eq!(sessions.len(), 1, "ccusage: {theirs}");
    let theirs = &sessions[0];
    let usage = &ours["usage"];
    for (mine, their) in [
        ("input", "inputTokens"),
        ("output", "outputTokens"),
        ("cacheRead", "cacheReadTokens"),
        ("cacheWrite", "cacheCreationTokens"),
    ] {
        assert_eq!(
            usage[mine], theirs[their],
            "{family}: {mine} against ccusage's {their}: {theirs}"
        );
    }
    assert!(
        usage["cacheRead"].as_u64().unwrap() > 0,
        "{family}: no cache read to compare"
    );
}

/// Runs a session reader (ours or the peer) over `home` alone: a cleared environment with only
/// `HOME` and `PATH`; its stdout, once it has exited 0.
fn run_in_home(program: &Path, args: &[&str], home: &Path) -> Vec<u8> {
    let output = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{} {args:?}: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}
