//! A real runtime as an agent's launch recipe, offline under the scripted model: a person's
//! direct message and a person's mention in a thread each start one delivered run, the model's
//! `message_send` reply lands where it was asked, a second message in the same conversation is
//! the next turn of the same runtime session (the model's script goes on from where the
//! conversation's history left it, and its request holds the first turn), and `kb_search` in the
//! thread's turn finds the source granted to the thread's channel and not one granted to another
//! channel.

use std::path::Path;
use std::time::Duration;

use agentteam::contract::tool_guidance::{RuntimeNaming, ToolNamer};
use serde_json::{Value, json};

use crate::deliveries::{human, operator};
use crate::runtime_harness::{Model, runtime_tool};
use crate::support::TestDaemon;

/// `agentteam post TARGET TEXT --wait`: what it printed, once every agent it woke answered.
async fn post_and_wait(daemon: &TestDaemon, model: &Model, target: &str, text: &str) -> String {
    let output = tokio::time::timeout(
        Duration::from_secs(180),
        daemon.cli(&["post", target, text, "--wait"]).output(),
    )
    .await
    .unwrap_or_else(|_| panic!("no answer in time; the daemon's log:\n{}", daemon.log()))
    .unwrap();
    let out = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{out}{}\nthe model answered: {:?}\nthe daemon's log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        model
            .requests()
            .iter()
            .map(|r| format!("{} {}", r["conversation"], r["answer"]))
            .collect::<Vec<_>>(),
        daemon.log()
    );
    // Each state once, in the order the delivery took them: (waiting,) answering, answered.
    let ranks: Vec<usize> = out
        .lines()
        .filter(|l| l.starts_with("    -> "))
        .map(|l| {
            ["waiting for the daemon", "is answering", "alpha answered"]
                .iter()
                .position(|said| l.contains(said))
                .unwrap_or_else(|| panic!("{l}"))
        })
        .collect();
    assert!(
        ranks.windows(2).all(|w| w[0] < w[1]) && ranks.last() == Some(&2),
        "{out}"
    );
    out
}

/// Every message's content on `target`, oldest first.
async fn contents(daemon: &TestDaemon, target: &str) -> Vec<String> {
    let page = human(
        daemon,
        "history_read",
        json!({"target": target, "limit": 50}),
    )
    .await;
    let mut all: Vec<String> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    all.reverse();
    all
}

/// A runtime as a person sets it as an agent's recipe.
struct Delivered {
    /// The variable `scripts/test` names its executable in.
    executable: &'static str,
    api: &'static str,
    naming: RuntimeNaming,
    /// The namespace the model calls the AgentTeam tools in (Codex's), if any.
    namespace: Option<&'static str>,
    /// The recipe's arguments after the program (the message comes on stdin).
    args: &'static [&'static str],
    /// The turn comes in an owner-only file its prompt names, which the model reads first with
    /// the runtime's own `Read` tool (Kimi Code, whose prompt is only ever an argument).
    turn_in_file: bool,
    /// The person's own setup: writes their files under `home` (trusting `work` where the
    /// runtime asks that) and returns the environment the recipe copies from their shell.
    setup: fn(&Path, &Path, u16) -> Vec<(String, String)>,
}

/// A person's direct message starts a run that answers there; their next one is the same
/// session's next turn; their mention in a thread starts a run of its own session there.
async fn answers_and_resumes(runtime: Delivered) {
    let root = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_in(root.path(), &[]).await;
    let agent = daemon.add_agent("alpha").await;
    let dm = human(&daemon, "dm_open", json!({"handle": "alpha"})).await["target"]
        .as_str()
        .unwrap()
        .to_string();
    let workspace = daemon.workspace_id();
    let channel = crate::runtime_harness::channel_of(&daemon);
    let thread = format!(
        "thread:{}",
        operator(
            &daemon,
            &[
                "thread",
                "--workspace",
                &workspace,
                "--channel",
                &channel,
                "--title",
                "release"
            ]
        )
        .await["threadId"]
            .as_str()
            .unwrap()
    );
    // Knowledge: a source granted to the thread's channel, and one granted to another channel
    // only. A turn in the thread searches the first and never the second.
    let me = human(&daemon, "me", json!({})).await["humanId"]
        .as_str()
        .unwrap()
        .to_string();
    let elsewhere = operator(
        &daemon,
        &[
            "channel",
            "--workspace",
            &workspace,
            "--name",
            "elsewhere",
            "--member",
            &me,
            "--member",
            &agent,
        ],
    )
    .await["channelId"]
        .as_str()
        .unwrap()
        .to_string();
    let docs = root.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (name, granted, file, text) in [
        (
            "handbook",
            &channel,
            "checklist.md",
            "The release checklist: freeze, tag, announce.",
        ),
        (
            "vault",
            &elsewhere,
            "vault.md",
            "The release vault holds what is elsewhere-only.",
        ),
    ] {
        let source = operator(
            &daemon,
            &["kb", "source", "--workspace", &workspace, "--name", name],
        )
        .await["sourceId"]
            .as_str()
            .unwrap()
            .to_string();
        operator(
            &daemon,
            &[
                "kb",
                "grant",
                "--workspace",
                &workspace,
                "--source",
                &source,
                "--channel",
                granted,
            ],
        )
        .await;
        let path = docs.join(file);
        std::fs::write(&path, text).unwrap();
        operator(
            &daemon,
            &[
                "kb",
                "add",
                "--workspace",
                &workspace,
                "--source",
                &source,
                path.to_str().unwrap(),
            ],
        )
        .await;
    }

    // The model, by the marker the request's last user message holds: each turn's steps go on
    // from the results the conversation's history holds (a chat API's last user message is the
    // turn's prompt until the turn ends, so a turn's marker names no more steps than it takes).
    let call = |tool: &str, args: Value| match runtime.namespace {
        Some(namespace) => json!({"name": tool, "namespace": namespace, "args": args}),
        None => json!({"name": runtime.naming.model_name(tool), "args": args}),
    };
    let send = |target: &str, content: &str| {
        call(
            "message_send",
            json!({"target": target, "content": content}),
        )
    };
    // In the thread, a search, then the answer: one after the other where the turn's prompt stays
    // its last user message (chat and Responses APIs: the answer then comes from a request that
    // holds the search's result), at once where a tool result is a user message of its own
    // (Anthropic, Gemini: the marker ends there).
    let search = call("kb_search", json!({"query": "release"}));
    let answer = send(&thread, "answered in the thread");
    let thread_steps = match runtime.api {
        "chat" | "responses" => json!([search, answer]),
        _ => json!([[search, answer]]),
    };
    let mut script = json!({
        "DM-ONE": [send(&dm, "first answer, in private")],
        "DM-TWO": [send(&dm, "first answer, in private"), send(&dm, "second answer, same session")],
        "THREAD-CONV": thread_steps,
    });
    if runtime.turn_in_file {
        // Each turn begins with the file read (its result holds the turn's marker), so each
        // conversation's steps hold one more before each turn's own.
        let read = json!({"name": "Read", "args": {"path": "$PATH_IN_PROMPT"}});
        let mut with_reads = |marker: &str, turns: &[usize]| {
            let steps = script[marker].as_array().unwrap().clone();
            let mut read_first = Vec::new();
            for (n, step) in steps.into_iter().enumerate() {
                if turns.contains(&n) {
                    read_first.push(read.clone());
                }
                read_first.push(step);
            }
            script[marker] = json!(read_first);
        };
        with_reads("DM-ONE", &[0]);
        with_reads("DM-TWO", &[0, 1]);
        with_reads("THREAD-CONV", &[0]);
        script["*"] = json!([read]);
    }
    let model = Model::start_with(root.path(), runtime.api, runtime.naming, script, 0).await;

    // The recipe, set by the person from a shell with the runtime's provider settings.
    let home = root.path().join("home");
    let work = root.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let program = runtime_tool(runtime.executable);
    let provider = (runtime.setup)(&home, &work, model.port);
    let mut recipe = daemon.cli(&[
        "agent",
        "recipe",
        "alpha",
        "--workdir",
        work.to_str().unwrap(),
    ]);
    for (name, value) in &provider {
        recipe.args(["--env", name]).env(name, value);
    }
    let set = recipe
        .args(["--", program.to_str().unwrap()])
        .args(runtime.args)
        .env("HOME", &home)
        .output()
        .await
        .unwrap();
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );

    // A direct message starts a run; its reply lands in the direct conversation.
    let first = post_and_wait(&daemon, &model, &dm, "DM-ONE is the release ready?").await;
    assert!(first.contains("first answer, in private"), "{first}");
    // The next one is the same session's next turn: the script goes on, and the model is
    // handed the first turn with it.
    let requests_before = model.requests().len();
    let second = post_and_wait(&daemon, &model, &dm, "DM-TWO and the changelog?").await;
    assert!(
        second.contains("second answer, same session"),
        "{second}\nthe daemon's log:\n{}",
        daemon.log()
    );
    // The turn's own requests: a runtime's side requests (a title, a router) offer no tools.
    let turn_two: Vec<Value> = model.requests()[requests_before..]
        .iter()
        .filter(|r| r["conversation"] == "DM-TWO" && r["tools"] != json!([]))
        .cloned()
        .collect();
    assert!(!turn_two.is_empty(), "{:?}", model.requests());
    let body = model.body(&turn_two[0]);
    assert!(
        body.contains("is the release ready?") && body.contains("first answer, in private"),
        "the second turn's request does not hold the first: {body}"
    );
    assert_eq!(
        contents(&daemon, &dm).await,
        [
            "DM-ONE is the release ready?",
            "first answer, in private",
            "DM-TWO and the changelog?",
            "second answer, same session",
        ]
    );

    // A mention in a thread starts a run of its own session, which answers in the thread.
    let requests_before = model.requests().len();
    let asked = post_and_wait(&daemon, &model, &thread, "@alpha THREAD-CONV what is left?").await;
    // The search in that turn saw the thread's channel's source, and not the other channel's.
    // Where the search and the answer come in one model reply (Anthropic, Gemini), the answer
    // may land before the runtime sends the request that carries the search's result.
    let bodies = || -> Vec<String> {
        model.requests()[requests_before..]
            .iter()
            .filter(|r| r.get("body").is_some())
            .map(|r| model.body(r))
            .collect()
    };
    crate::support::wait_for(
        "kb_search in the thread to find its channel's source",
        Duration::from_secs(60),
        || bodies().iter().any(|b| b.contains("freeze, tag, announce")),
    )
    .await;
    let bodies = bodies();
    assert!(
        !bodies.iter().any(|b| b.contains("elsewhere-only")),
        "kb_search in the thread saw another channel's source"
    );
    assert!(asked.contains("answered in the thread"), "{asked}");
    assert_eq!(
        contents(&daemon, &thread).await,
        ["@alpha THREAD-CONV what is left?", "answered in the thread"]
    );
    let deliveries = human(&daemon, "delivery_list", json!({"limit": 100})).await;
    let states: Vec<&str> = deliveries["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["answered"; 3], "one run per message: {deliveries}");
    // A turn's file lives only while its run does (which may end after its answer landed).
    let turns = daemon.state_dir.join("recipes/turns");
    crate::support::wait_for("the turn files gone", Duration::from_secs(30), || {
        std::fs::read_dir(&turns).map_or(true, |mut left| left.next().is_none())
    })
    .await;
}

#[tokio::test]
async fn claude_code_answers_a_persons_messages_and_resumes_its_session() {
    answers_and_resumes(Delivered {
        executable: "AGENTTEAM_TEST_CLAUDE",
        api: "anthropic",
        naming: RuntimeNaming::Claude,
        namespace: None,
        turn_in_file: false,
        args: &["-p", "--output-format", "json"],
        setup: |_, _, port| {
            [
                ("ANTHROPIC_API_KEY", "scripted-model-key".to_string()),
                ("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}")),
                ("DISABLE_AUTOUPDATER", "1".to_string()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec()
        },
    })
    .await;
}

#[tokio::test]
async fn gemini_cli_answers_a_persons_messages_and_resumes_its_session() {
    answers_and_resumes(Delivered {
        executable: "AGENTTEAM_TEST_GEMINI",
        api: "gemini",
        naming: RuntimeNaming::Gemini,
        namespace: None,
        turn_in_file: false,
        // Gemini appends `-p`'s text to what comes on stdin.
        args: &["-p", "Answer the message above.", "-o", "json"],
        setup: |home, work, port| {
            let dir = home.join(".gemini");
            std::fs::create_dir_all(&dir).unwrap();
            let settings = json!({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
                "privacy": {"usageStatisticsEnabled": false},
                "telemetry": {"enabled": false},
            });
            std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
            let trusted = json!({ work.display().to_string(): "TRUST_FOLDER" });
            std::fs::write(dir.join("trustedFolders.json"), trusted.to_string()).unwrap();
            [
                ("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}")),
                ("GEMINI_API_KEY", "scripted-model-key".to_string()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec()
        },
    })
    .await;
}

#[tokio::test]
async fn copilot_cli_answers_a_persons_messages_and_resumes_its_session() {
    answers_and_resumes(Delivered {
        executable: "AGENTTEAM_TEST_COPILOT",
        api: "chat",
        naming: RuntimeNaming::Copilot,
        namespace: None,
        turn_in_file: false,
        // The message comes on stdin, which Copilot takes as its prompt.
        args: &["--output-format", "json", "--no-auto-update"],
        setup: |_, _, port| {
            let cache = std::env::var("AGENTTEAM_TEST_COPILOT_CACHE")
                .expect("AGENTTEAM_TEST_COPILOT_CACHE is set by scripts/test");
            [
                ("COPILOT_OFFLINE", "true".to_string()),
                (
                    "COPILOT_PROVIDER_BASE_URL",
                    format!("http://127.0.0.1:{port}/v1"),
                ),
                ("COPILOT_PROVIDER_API_KEY", "scripted-model-key".to_string()),
                ("COPILOT_MODEL", "gpt-4.1".to_string()),
                ("COPILOT_AUTO_UPDATE", "false".to_string()),
                // The program it unpacked on its first run (scripts/lib/runtimes.sh).
                ("XDG_CACHE_HOME", cache),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec()
        },
    })
    .await;
}

#[tokio::test]
async fn opencode_answers_a_persons_messages_and_resumes_its_session() {
    answers_and_resumes(Delivered {
        executable: "AGENTTEAM_TEST_OPENCODE",
        api: "chat",
        naming: RuntimeNaming::Opencode,
        namespace: None,
        turn_in_file: false,
        // `--format json` names the session on each line: the driver reads it from there.
        args: &["run", "--format", "json"],
        setup: |home, _, port| {
            let dir = home.join(".config/opencode");
            std::fs::create_dir_all(&dir).unwrap();
            let config = json!({
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
            std::fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
            [
                ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
                ("npm_config_offline", "true"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .to_vec()
        },
    })
    .await;
}

#[tokio::test]
async fn codex_answers_a_persons_messages_and_resumes_its_session() {
    answers_and_resumes(Delivered {
        executable: "AGENTTEAM_TEST_CODEX",
        api: "responses",
        naming: RuntimeNaming::Claude,
        namespace: Some("mcp__agentteam"),
        turn_in_file: false,
        // `--json` names the thread (`thread.started`): the driver reads it from there, and a
        // later run is `codex exec resume THREAD … -`.
        args: &[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "-",
        ],
        setup: |home, _, port| {
            let dir = home.join(".codex");
            std::fs::create_dir_all(&dir).unwrap();
            let config = format!(
                "model_provider = \"scripted\"\nmodel = \"scripted-model\"\n\n\
                 [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
                 wire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n\n\
                 [analytics]\nenabled = false\n\n[features]\nplugins = false\n"
            );
            std::fs::write(dir.join("config.toml"), config).unwrap();
            vec![("SCRIPTED_API_KEY".to_string(), "scripted-model-key".to_string())]
        },
    })
    .await;
}

#[tokio::test]
async fn kimi_code_answers_a_persons_messages_and_resumes_its_session() {
    answers_and_resumes(Delivered {
        executable: "AGENTTEAM_TEST_KIMI",
        api: "chat",
        naming: RuntimeNaming::Kimi,
        namespace: None,
        // `-p` is the daemon's (naming the turn's file); `stream-json` names the session after
        // the turn, and a later run is `--session ID`.
        turn_in_file: true,
        args: &["--output-format", "stream-json"],
        setup: |home, _, port| {
            std::fs::create_dir_all(home.join(".kimi-code")).unwrap();
            [
                ("KIMI_MODEL_NAME", "scripted-model".to_string()),
                ("KIMI_MODEL_API_KEY", "scripted-model-key".to_string()),
                ("KIMI_MODEL_BASE_URL", format!("http://127.0.0.1:{port}/v1")),
                ("KIMI_MODEL_PROVIDER_TYPE", "kimi".to_string()),
                ("KIMI_DISABLE_TELEMETRY", "1".to_string()),
                ("KIMI_CODE_NO_AUTO_UPDATE", "1".to_string()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec()
        },
    })
    .await;
}
