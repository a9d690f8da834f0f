//! The console against a real daemon and its embedded server: over HTTP, what it refuses (another
//! Host, another Origin, no session, no CSRF proof, a replayed code, a bearer of any kind) and
//! what it never lets out (a credential, an attachment rendered on its origin); then in a real
//! browser (Debian's Chromium driven by playwright-core, `tests/console/console.test.js`), a
//! person reading, answering and deciding, live across tabs, with hostile agent text.

use std::time::Duration;

use serde_json::{Value, json};

use super::person::{run_script, section};
use super::reader::{as_agent, identity};
use super::support::*;

const REFUSED: &str = "a runtime may not act as its person or as the operator";

/// The console as a test reaches it: its name resolved to the daemon's loopback listener.
struct Console {
    origin: String,
    host: String,
    port: u16,
    client: reqwest::Client,
}

impl Console {
    fn of(daemon: &TestDaemon) -> Console {
        let kept: Value =
            serde_json::from_slice(&std::fs::read(daemon.state_dir.join("console.json")).unwrap())
                .unwrap();
        let host = kept["name"].as_str().unwrap().to_string();
        let port = kept["port"].as_u64().unwrap() as u16;
        let client = reqwest::Client::builder()
            .resolve(&host, std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .unwrap();
        Console {
            origin: format!("http://{host}:{port}"),
            host,
            port,
            client,
        }
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(format!("{}{path}", self.origin))
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.post(format!("{}{path}", self.origin))
    }
}

/// `agentteam open --no-browser --json`: exit code, the answer, and stdout as printed.
async fn open(daemon: &TestDaemon) -> (i32, Value, String) {
    let output = daemon
        .cli(&["open", "--no-browser", "--json"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    (
        output.status.code().unwrap_or(-1),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stdout,
    )
}

/// The one-time code in a login page.
fn code_in(page: &str) -> String {
    let (_, rest) = page.split_once("name=\"code\" value=\"").unwrap();
    rest.split('"').next().unwrap().to_string()
}

/// The session cookie a login answer sets (`name=value`) and its whole header.
fn session_cookie(response: &reqwest::Response) -> (String, String) {
    let header = response
        .headers()
        .get("set-cookie")
        .expect("a login sets the session cookie")
        .to_str()
        .unwrap()
        .to_string();
    (header.split(';').next().unwrap().to_string(), header)
}

/// The CSRF proof a console page carries.
fn csrf_in(page: &str) -> String {
    let (_, rest) = page.split_once("<meta name=\"csrf\" content=\"").unwrap();
    rest.split('"').next().unwrap().to_string()
}

#[tokio::test]
async fn the_console_answers_only_its_own_origin_and_session() {
    let daemon = TestDaemon::start(&[]).await;
    let builder = daemon.add_agent("builder").await;
    let id = identity(&daemon);
    let general = format!("channel:{}", id["channelId"].as_str().unwrap());
    as_agent(
        &daemon,
        &builder,
        "tools/message_send",
        json!({"target": general, "content": "ready to ship?"}),
    )
    .await;
    let console = Console::of(&daemon);

    // `agentteam open` names the console and an owner-only page; the code is in the page only.
    let (code, opened, stdout) = open(&daemon).await;
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(opened["url"], json!(format!("{}/", console.origin)));
    let login_file = std::path::PathBuf::from(opened["loginFile"].as_str().unwrap());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&login_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let login_page = std::fs::read_to_string(&login_file).unwrap();
    let first = code_in(&login_page);
    assert_eq!(first.len(), 64, "{login_page}");
    assert!(
        login_page.contains(&format!("action=\"{}/login\"", console.origin)),
        "{login_page}"
    );
    assert!(!stdout.contains(&first), "the code is never printed");

    // Another Host (a rebinding page's own name, or the bare loopback address) is refused, and
    // not told the console's name.
    for host in [
        format!("127.0.0.1:{}", console.port),
        format!("localhost:{}", console.port),
        format!("evil.example:{}", console.port),
        console.host.clone(),
        format!("{}:{}", console.host, console.port + 1),
    ] {
        let refused = console.get("/").header("host", &host).send().await.unwrap();
        assert_eq!(refused.status(), 421, "{host}");
        let body = refused.text().await.unwrap();
        assert!(!body.contains(&console.host), "{host}: {body}");
    }
    // No session: a page says how to sign in, and shows nothing.
    let signed_out = console.get("/").send().await.unwrap();
    assert_eq!(signed_out.status(), 401);
    let body = signed_out.text().await.unwrap();
    assert!(body.contains("agentteam open"), "{body}");
    assert!(!body.contains("general"), "{body}");
    // A bearer of any kind is no session: the admin token, the device credential.
    let admin_token = std::fs::read_to_string(daemon.state_dir.join("admin.token")).unwrap();
    for bearer in [admin_token.trim(), id["deviceCredential"].as_str().unwrap()] {
        let refused = console.get("/").bearer_auth(bearer).send().await.unwrap();
        assert_eq!(refused.status(), 401);
    }

    // The login: a wrong code, then the right code from another origin, are refused (and the
    // code survives that); the right one from the `file:` page (`Origin: null`) opens a session
    // once.
    let login = |code: String, origin: Option<&str>| {
        let mut request = console
            .post("/login")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("code={code}"));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    assert_eq!(
        login("0".repeat(64), Some("null")).await.unwrap().status(),
        403
    );
    assert_eq!(
        login(first.clone(), Some("http://127.0.0.1:3000"))
            .await
            .unwrap()
            .status(),
        403
    );
    let signed_in = login(first.clone(), Some("null")).await.unwrap();
    assert_eq!(signed_in.status(), 200);
    let (cookie, header) = session_cookie(&signed_in);
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(header.contains(attribute), "{header}");
    }
    assert!(
        !header.to_ascii_lowercase().contains("domain"),
        "host-only: {header}"
    );
    assert!(!login_file.exists(), "the used code goes with its page");
    let replayed = login(first.clone(), Some("null")).await.unwrap();
    assert_eq!(replayed.status(), 403, "a code opens one session");
    assert!(replayed.headers().get("set-cookie").is_none());

    // With the session: pages, under the console's policy; no credential in any of them.
    let home = console
        .get("/")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), 200);
    let policy = home.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(home.headers()["x-content-type-options"], "nosniff");
    let home = home.text().await.unwrap();
    assert!(home.contains("#general"), "{home}");
    let csrf = csrf_in(&home);
    let operator_token = std::fs::read_to_string(&daemon.operator_token_file).unwrap();
    for path in [
        "/".to_string(),
        format!("/c/{general}"),
        format!("/c/{general}/work"),
        "/approvals".into(),
        "/runtimes".into(),
        "/audit".into(),
        "/costs".into(),
    ] {
        let page = console
            .get(&path)
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200, "{path}");
        let page = page.text().await.unwrap();
        assert!(
            secret_shapes(&page).is_empty(),
            "{path}: {:?}",
            secret_shapes(&page)
        );
        for secret in [
            admin_token.trim(),
            operator_token.trim(),
            id["deviceCredential"].as_str().unwrap(),
        ] {
            assert!(!page.contains(secret), "{path}");
        }
    }
    // A page of another origin cannot read with the session, nor write.
    let read = console
        .get("/")
        .header("cookie", &cookie)
        .header("origin", "http://127.0.0.1:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 403);
    let post = |origin: Option<&str>, proof: &str, content: &str| {
        let mut request = console
            .post(&format!("/c/{general}/post"))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={proof}&content={content}"));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let own = console.origin.clone();
    for (origin, proof, why) in [
        (Some(own.as_str()), "", "no proof"),
        (Some(own.as_str()), "0000", "a forged proof"),
        (
            Some("http://127.0.0.1:3000"),
            csrf.as_str(),
            "another origin",
        ),
        (Some("null"), csrf.as_str(), "an opaque origin"),
        (None, csrf.as_str(), "no origin"),
    ] {
        let refused = post(origin, proof, "forged").await.unwrap();
        assert_eq!(refused.status(), 403, "{why}");
    }
    let posted = post(Some(&own), &csrf, "from+the+console").await.unwrap();
    assert_eq!(posted.status(), 303);
    let seen = as_agent(
        &daemon,
        &builder,
        "tools/message_history_read",
        json!({"target": general}),
    )
    .await;
    let contents: Vec<&str> = seen["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        ["from the console", "ready to ship?"],
        "nothing forged landed"
    );
    assert_eq!(seen["messages"][0]["authorId"], id["humanId"]);

    // An attachment is a download, never a page of the console's origin.
    // The person posts `content` with one attachment through the operator API: its answer.
    let post_attached = async |content: &str, name: &str, media_type: &str, text: &str| -> Value {
        let token = std::fs::read_to_string(&daemon.operator_token_file).unwrap();
        daemon
            .client
            .post(format!(
                "{}/admin/workspaces/{}/messages",
                daemon.server_url,
                daemon.workspace_id()
            ))
            .bearer_auth(token.trim())
            .json(
                &json!({"authorHumanId": id["humanId"], "channelId": id["channelId"],
                "content": content,
                "attachments": [{"name": name, "mediaType": media_type, "text": text}]}),
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    };
    let hostile = "<html><script>parent.document.title='owned'</script></html>";
    let sent = post_attached("see attached", "report.html", "text/html", hostile).await;
    assert_eq!(sent["ok"], true, "{sent}");
    let page = console
        .get(&format!("/c/{general}"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let (_, rest) = page.split_once("href=\"/attachments/").expect("listed");
    let attachment = rest.split('"').next().unwrap();
    let download = console
        .get(&format!("/attachments/{attachment}"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    let headers = download.headers().clone();
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let disposition = headers["content-disposition"].to_str().unwrap();
    assert!(disposition.starts_with("attachment;"), "{disposition}");
    assert!(disposition.contains("report.html"), "{disposition}");
    let sandbox = headers["content-security-policy"].to_str().unwrap();
    assert!(sandbox.starts_with("sandbox"), "{sandbox}");
    assert_eq!(download.text().await.unwrap(), hostile);
    // An attachment whose base64 passes 1 MiB (the most a request to post one may carry is
    // 1 MiB) downloads whole.
    let largest = "x".repeat(1_000_000);
    let sent = post_attached("the whole log", "log.txt", "text/plain", &largest).await;
    let attachment = sent["data"]["attachmentIds"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"));
    let download = console
        .get(&format!("/attachments/{attachment}"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    assert!(
        download.text().await.unwrap() == largest,
        "the whole attachment"
    );

    // From inside a runtime: `agentteam open` is refused; the runtime's own bearer opens no
    // console page, and the console's session opens no MCP or Exec route.
    let state = daemon.state_dir.display().to_string();
    let script = format!(
        r#"echo "BEGIN open"
agentteam open --state-dir '{state}' --no-browser
echo "exit=$?"
echo "END open"
echo "BEGIN bearer"
curl -s -o /dev/null -w '%{{http_code}}\n' --resolve '{host}:{port}:127.0.0.1' \
  -H "Authorization: Bearer $(cat "$AGENTTEAM_MCP_TOKEN_FILE")" '{origin}/'
curl -s -o /dev/null -w '%{{http_code}}\n' --resolve '{host}:{port}:127.0.0.1' \
  -H "Authorization: Bearer $(cat "$AGENTTEAM_EXEC_TOKEN_FILE")" '{origin}/approvals'
echo "END bearer"
echo "BEGIN cookie"
curl -s -w '\n%{{http_code}}\n' -H 'Cookie: {cookie}' -H 'Content-Type: application/json' \
  -d '{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}' "$AGENTTEAM_MCP_URL"
curl -s -w '\n%{{http_code}}\n' -H 'Cookie: {cookie}' -H 'Content-Type: application/json' \
  -d '{{"title":"x"}}' "$AGENTTEAM_EXEC_BASE_URL/approval/request"
echo "END cookie"
"#,
        host = console.host,
        port = console.port,
        origin = console.origin,
    );
    let output = run_script(&daemon, &builder, &script, &[]).await;
    let refused = section(&output, "open");
    assert!(refused.contains(REFUSED), "{output}");
    assert!(!refused.contains("exit=0"), "{output}");
    assert_eq!(
        section(&output, "bearer").lines().collect::<Vec<_>>(),
        ["401", "401"],
        "{output}"
    );
    let cookie_answers = section(&output, "cookie");
    let codes: Vec<&str> = cookie_answers
        .lines()
        .filter(|l| l.len() == 3 && l.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    assert_eq!(codes.len(), 2, "{output}");
    assert!(codes.iter().all(|c| ["401", "403"].contains(c)), "{output}");
    assert!(!cookie_answers.contains("\"tools\""), "{output}");

    // A second `agentteam open` before the first page is used: the first code still opens a
    // session, and the page that holds the newer code stays for it.
    let (_, older, _) = open(&daemon).await;
    let older_code = code_in(&std::fs::read_to_string(&login_file).unwrap());
    let (_, newer, _) = open(&daemon).await;
    assert_eq!(older["loginFile"], newer["loginFile"]);
    let newer_code = code_in(&std::fs::read_to_string(&login_file).unwrap());
    assert_ne!(older_code, newer_code);
    assert_eq!(login(older_code, Some("null")).await.unwrap().status(), 200);
    assert_eq!(
        code_in(&std::fs::read_to_string(&login_file).unwrap()),
        newer_code,
        "a login leaves a newer page alone"
    );
    assert_eq!(login(newer_code, Some("null")).await.unwrap().status(), 200);
    assert!(!login_file.exists(), "the used code goes with its page");

    // The live stream: it starts, and signing out ends it before anything newer is sent.
    let mut live = console
        .get("/live")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    // Bounded as a whole: a stream sending only keep-alives would never say it is ready.
    let mut said = String::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !said.contains("event: ready") {
            let chunk = live
                .chunk()
                .await
                .unwrap()
                .expect("the stream stays open until it is ready");
            said.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the stream says it is ready: {said}"));

    // Signing out ends the session.
    let out = console
        .post("/logout")
        .header("cookie", &cookie)
        .header("origin", &console.origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 200);
    let after = console
        .get("/")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401);
    // A change after that wakes the stream, which ends without sending it.
    as_agent(
        &daemon,
        &builder,
        "tools/message_send",
        json!({"target": general, "content": "after the sign-out"}),
    )
    .await;
    // The stream's keep-alive comes every 15 s: the whole wait is bounded, not each read.
    let mut after_sign_out = String::new();
    let ended = tokio::time::timeout(Duration::from_secs(40), async {
        while let Some(chunk) = live.chunk().await.unwrap() {
            after_sign_out.push_str(&String::from_utf8_lossy(&chunk));
            if after_sign_out.contains("event: change") {
                break;
            }
        }
    })
    .await;
    assert!(
        !after_sign_out.contains("after the sign-out") && !after_sign_out.contains("event: change"),
        "{after_sign_out}"
    );
    assert!(ended.is_ok(), "the stream ends once a change comes");
    assert!(
        !daemon.log().contains(&first),
        "the daemon never logs a login code"
    );
}

/// What the browser test needs: Node, the pinned playwright-core and axe-core, and Chromium.
fn browser() -> Option<(String, String)> {
    let modules = std::env::var("AGENTTEAM_TEST_BROWSER_MODULES").ok()?;
    let chromium = std::env::var("AGENTTEAM_TEST_CHROMIUM").ok()?;
    let found = std::path::Path::new(&modules)
        .join("playwright-core")
        .exists()
        && std::path::Path::new(&chromium).exists();
    found.then_some((modules, chromium))
}

#[tokio::test]
async fn a_person_reads_answers_and_decides_in_a_real_browser() {
    let Some((modules, chromium)) = browser() else {
        missing_precondition(
            "Chromium and playwright-core (scripts/test installs them)",
            "THE CONSOLE'S BROWSER TEST",
        );
        return;
    };
    // A session Claude Code recorded, for the costs page's chart: two requests, one AgentTeam
    // call whose result the second request carried.
    let records = tempfile::tempdir().unwrap();
    let transcript = records
        .path()
        .join("projects/-home-dev-project/ses-console.jsonl");
    std::fs::create_dir_all(transcript.parent().unwrap()).unwrap();
    let line = |rest: Value| {
        let mut line = json!({"sessionId": "ses-console", "cwd": "/home/dev/project",
                              "timestamp": "2026-12-01T10:00:00.000Z"});
        line.as_object_mut()
            .unwrap()
            .extend(rest.as_object().unwrap().clone());
        format!("{line}\n")
    };
    let usage = |input: u64| json!({"input_tokens": input, "output_tokens": 5});
    let lines = [
        line(json!({"type": "user", "message": {"role": "user", "content": "post the plan"}})),
        line(
            json!({"type": "assistant", "requestId": "req_1", "message": {"id": "m1",
            "model": "claude-sonnet-4-5", "usage": usage(9000), "content": [{"type": "tool_use",
            "id": "toolu_1", "name": "mcp__agentteam__message_history_read",
            "input": {"target": "channel:x"}}]}}),
        ),
        line(
            json!({"type": "user", "message": {"role": "user", "content": [{"type":
            "tool_result", "tool_use_id": "toolu_1", "content": "the plan is ready ".repeat(200)}]}}),
        ),
        line(
            json!({"type": "assistant", "requestId": "req_2", "message": {"id": "m2",
            "model": "claude-sonnet-4-5", "usage": usage(9900),
            "content": [{"type": "text", "text": "done"}]}}),
        ),
    ];
    std::fs::write(&transcript, lines.concat()).unwrap();
    let claude_dir = records.path().display().to_string();
    let daemon = TestDaemon::start_with_env(&[], &[("CLAUDE_CONFIG_DIR", &claude_dir)]).await;
    let builder = daemon.add_agent("builder").await;
    daemon.add_agent("reviewer").await;
    let id = identity(&daemon);
    let general = format!("channel:{}", id["channelId"].as_str().unwrap());
    let send = |content: &str, target: &str| {
        as_agent(
            &daemon,
            &builder,
            "tools/message_send",
            json!({"target": target, "content": content}),
        )
    };
    send(
        "ready to ship? the **release notes** are in `docs/`",
        &general,
    )
    .await;
    // What an agent may post, hostile: none of it may run, load or navigate.
    for hostile in [
        "<script>window.__owned = 'script'</script>",
        "<img src=x onerror=\"window.__owned='onerror'\">",
        "[click me](javascript:window.__owned='javascript')",
        "[or me](data:text/html,<script>alert(1)</script>)",
        "<svg onload=\"window.__owned='svg'\"><script>window.__owned='svg-script'</script></svg>",
        "![tracker](http://127.0.0.1:9/pixel.png)",
        "[docs](https://example.com/docs)",
    ] {
        send(hostile, &general).await;
    }
    let token = std::fs::read_to_string(&daemon.operator_token_file).unwrap();
    let operator = |path: &str, body: Value| {
        daemon
            .client
            .post(format!(
                "{}/admin/workspaces/{}{path}",
                daemon.server_url,
                daemon.workspace_id()
            ))
            .bearer_auth(token.trim())
            .json(&body)
            .send()
    };
    let attached: Value = operator(
        "/messages",
        json!({"authorHumanId": id["humanId"], "channelId": id["channelId"],
            "content": "two attachments",
            "attachments": [
                {"name": "page.html", "mediaType": "text/html",
                 "text": "<script>window.opener && (window.opener.__owned = 'html')</script>"},
                {"name": "image.svg", "mediaType": "image/svg+xml",
                 "text": "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"}]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(attached["ok"], true, "{attached}");
    let thread: Value = operator(
        &format!("/channels/{}/threads", id["channelId"].as_str().unwrap()),
        json!({"title": "release"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let thread_id = thread["data"]["threadId"]
        .as_str()
        .or(thread["data"]["id"].as_str())
        .unwrap_or_else(|| panic!("{thread}"))
        .to_string();
    let in_thread = format!("thread:{thread_id}");
    send("the release branch is cut", &in_thread).await;
    let task = as_agent(
        &daemon,
        &builder,
        "actions/task/create",
        json!({"location": {"kind": "thread", "threadId": thread_id},
               "title": "Write the release notes"}),
    )
    .await;
    as_agent(
        &daemon,
        &builder,
        "actions/review/add",
        json!({"threadId": thread_id, "taskId": task["task"]["id"], "verdict": "approve",
               "body": "Looks *good* to me"}),
    )
    .await;
    let approval = as_agent(
        &daemon,
        &builder,
        "actions/approval/request",
        json!({"title": "Deploy to production", "details": "Version **1.4**, all checks green"}),
    )
    .await;
    let approval_id = approval["approval"]["id"].as_str().unwrap().to_string();
    // A runtime the person will stop from its page.
    let mut running = daemon.launch("builder", &[], "echo started; exec sleep 600");
    assert_eq!(running.line().await, "started");
    let run_id = daemon.admin_get("runs").await["runs"][0]["runId"]
        .as_str()
        .unwrap()
        .to_string();

    // The reviewer answers when mentioned: its launch recipe is a stand-in runtime that waits
    // to be released on a FIFO, so the page can see it answering first.
    let answering = tempfile::tempdir().unwrap();
    super::deliveries::make_go(answering.path());
    let workdir = answering.path().display().to_string();
    let script = super::deliveries::stand_in("the notes are ready", super::deliveries::Wait::Go);
    let (code, _, err) = {
        let output = daemon
            .cli(&[
                "agent",
                "recipe",
                "reviewer",
                "--workdir",
                &workdir,
                "--",
                "sh",
                "-c",
                &script,
            ])
            .output()
            .await
            .unwrap();
        (
            output.status.code(),
            output.stdout,
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    assert_eq!(code, Some(0), "{err}");

    let shots = repo_root().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let fixture = json!({
        "bin": bin(),
        "stateDir": daemon.state_dir,
        "chromium": chromium,
        "screenshots": shots,
        "general": general,
        "thread": in_thread,
        "approvalId": approval_id,
        "runId": run_id,
        "go": answering.path().join("go"),
    });
    let output = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new("node")
            .arg("--test")
            .arg("--test-concurrency=1")
            .arg("--test-reporter=spec")
            .arg(repo_root().join("tests/console/console.test.js"))
            .env("NODE_PATH", &modules)
            .env("CONSOLE_FIXTURE", fixture.to_string())
            .env("AGENTTEAM_NO_START", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser test ends in time")
    .expect("node runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // On failure, what the daemon logged of its runs and deliveries, to tell a page's fault
    // from the deliverer's.
    let runs_logged = || {
        daemon
            .log()
            .lines()
            .filter(|line| line.contains("deliver") || line.contains("runtime"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        output.status.success(),
        "the browser test failed:\n{said}\nthe daemon's log of runs and deliveries:\n{}",
        runs_logged()
    );
    assert!(said.contains("ℹ fail 0"), "{said}");
    assert!(said.contains("ℹ pass 10"), "{said}");

    // What the browser did, as the runtime sees it: the approval decided by the person, the
    // person's messages in the conversation, the run stopped.
    let got = as_agent(
        &daemon,
        &builder,
        "actions/approval/get",
        json!({"approvalId": approval_id}),
    )
    .await;
    assert_eq!(got["approval"]["status"], "approved", "{got}");
    assert_eq!(got["approval"]["decidedByHumanId"], id["humanId"]);
    assert_eq!(got["approval"]["comment"], "ship it, keyboard only");
    let seen = as_agent(
        &daemon,
        &builder,
        "tools/message_history_read",
        json!({"target": general, "limit": 100}),
    )
    .await;
    let contents: Vec<&str> = seen["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        contents.contains(&"@builder typed without a mouse"),
        "{contents:?}"
    );
    assert!(
        !contents.iter().any(|c| c.contains("forged")),
        "{contents:?}"
    );
    let exited = tokio::time::timeout(Duration::from_secs(30), running.child.wait())
        .await
        .expect("the stopped run ended")
        .unwrap();
    assert!(!exited.success(), "stopped, not finished: {exited:?}");
    // The retried delivery's run may still be ending after its answer landed.
    crate::support::wait_until("no run left", Duration::from_secs(30), async || {
        daemon.admin_get("runs").await["runs"]
            .as_array()
            .unwrap()
            .is_empty()
    })
    .await;
    for page in [
        "conversations",
        "conversation",
        "thread",
        "work",
        "approvals",
        "runtimes",
        "audit",
        "costs",
    ] {
        assert!(
            shots.join(format!("{page}.png")).exists(),
            "no screenshot of {page}"
        );
    }
}
