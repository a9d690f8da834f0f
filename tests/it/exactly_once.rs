//! Nothing duplicated, nothing lost, under network faults between the daemon and the server: a
//! fault proxy at the network edge, in front of a real `agentteam server`, resets connections
//! before forwarding and after the server answered, stalls answers past the daemon's (shortened)
//! hop timeout, cuts answers short and answers 503 in the server's place, each at its rate, per
//! request. Eight writers send selector-carrying writes through both bridges (Exec `task create`
//! with `requestId`, MCP `message_send` with `requestId`) and natural-key writes (`task create`
//! without one). Read back through the daemon with the faults off: one record per selector, every
//! acknowledged write there, and no selector write left unknown; a natural-key write is there at
//! most once, and each whose answer was lost was answered `outcome_unknown` with the read that
//! settles it.
//!
//! Then crashes: the server killed between a mutation's commit and its answer (a debug build's
//! fault point), the server SIGKILLed halfway through the same load, and on PostgreSQL the
//! database itself restarted halfway through it (on a durable cluster of the test's own). A crash
//! may leave writes unknown or refused: each is listed with its selector and settled by the
//! repeat its answer advised, and nothing is duplicated or lost.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::support::{Launched, TestDaemon, sample};

/// Writers at once.
const WRITERS: usize = 8;
/// Selector-carrying writes per writer; every eighth goes through MCP.
const SELECTOR_WRITES: usize = 250;
/// Natural-key writes per writer.
const NATURAL_WRITES: usize = 25;
/// The daemon's hop timeout, which a stall outlasts.
const HOP_TIMEOUT_MS: u64 = 1000;
/// Each fault's rate.
const RATE: f64 = 0.01;

struct Rig {
    /// The server behind the proxy, which a test may kill and start again.
    server: tokio::sync::Mutex<tokio::process::Child>,
    server_url: String,
    database: String,
    token_file: PathBuf,
    proxy: FaultProxy,
    daemon: TestDaemon,
    _runtime: Launched,
    runtime_pid: i32,
    exec_base: String,
    exec_token: String,
    mcp_url: String,
    mcp_token: String,
    channel: String,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// On the pass's database (SQLite, or the PostgreSQL pass's cluster).
    async fn start() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let database = crate::support::database_url(dir.path()).await;
        Rig::start_on(dir, database, &[]).await
    }

    /// On `database`, the server's environment with `server_env` added (a fault point).
    async fn start_on(
        dir: tempfile::TempDir,
        database: String,
        server_env: &[(&str, &str)],
    ) -> Rig {
        let token_file = dir.path().join("operator.token");
        let (server, server_url, _) = crate::support::spawn_server_in_env(
            "127.0.0.1:0",
            &database,
            &token_file,
            None,
            &[],
            server_env,
        )
        .await;
        let proxy = FaultProxy::start(&server_url).await;
        let timeout = HOP_TIMEOUT_MS.to_string();
        let daemon = TestDaemon::start(&[
            "--server-url",
            &proxy.url,
            "--operator-token-file",
            token_file.to_str().unwrap(),
            "--server-timeout-ms",
            &timeout,
        ])
        .await;
        daemon.add_agent("alpha").await;
        let script = r#"echo $$; echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 600"#;
        let mut runtime = daemon.launch("alpha", &[], script);
        let runtime_pid = runtime.line().await.parse().unwrap();
        let exec_base = runtime.line().await;
        let exec_token = std::fs::read_to_string(PathBuf::from(runtime.line().await)).unwrap();
        let mcp_url = runtime.line().await;
        let mcp_token = std::fs::read_to_string(PathBuf::from(runtime.line().await)).unwrap();
        let identity: Value =
            serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
                .unwrap();
        let channel = identity["channelId"].as_str().unwrap().to_string();
        Rig {
            server: tokio::sync::Mutex::new(server),
            server_url,
            database,
            token_file,
            proxy,
            daemon,
            _runtime: runtime,
            runtime_pid,
            exec_base,
            exec_token,
            mcp_url,
            mcp_token,
            channel,
            _dir: dir,
        }
    }

    /// `POST …/{domain}/{action}` as `agentteam exec` sends it: `Ok(data)` or `Err(error)`.
    async fn exec(&self, domain: &str, action: &str, input: &Value) -> Result<Value, Value> {
        let response = self
            .daemon
            .client
            .post(format!("{}/{domain}/{action}", self.exec_base))
            .bearer_auth(&self.exec_token)
            .json(input)
            .send()
            .await
            .expect("the daemon answers");
        let envelope: Value = response.json().await.expect("an envelope");
        match envelope["ok"].as_bool() {
            Some(true) => Ok(envelope["data"].clone()),
            _ => Err(envelope["error"].clone()),
        }
    }

    /// `tools/call` of `tool`: `Ok(structuredContent)` or `Err(error)`.
    async fn call(&self, tool: &str, arguments: Value) -> Result<Value, Value> {
        let response = self
            .daemon
            .client
            .post(&self.mcp_url)
            .bearer_auth(&self.mcp_token)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}))
            .send()
            .await
            .expect("the daemon answers");
        assert_eq!(response.status(), 200);
        let result: Value = response.json().await.unwrap();
        let result = &result["result"];
        if result["isError"] == json!(true) {
            let text = result["content"][0]["text"].as_str().unwrap();
            let envelope: Value = serde_json::from_str(text).unwrap();
            return Err(envelope["error"].clone());
        }
        Ok(result["structuredContent"].clone())
    }

    /// SIGKILLs the server and starts it again on the same database and address.
    async fn kill_and_restart_server(&self) {
        self.server.lock().await.start_kill().unwrap();
        self.restart_server().await;
    }

    /// Waits for the server to die of SIGKILL (sent by the test or by a fault point), then starts
    /// it again on the same database and address, without the fault point.
    async fn restart_server(&self) {
        let mut server = self.server.lock().await;
        let status = server.wait().await.unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "{status}"
        );
        let listen = self.server_url.trim_start_matches("http://");
        let (restarted, _, _) =
            crate::support::spawn_server_at(listen, &self.database, &self.token_file, None, &[])
                .await;
        *server = restarted;
    }

    /// One write of `kind` named `name` (its title or text; its selector is `req-NAME`).
    async fn write(&self, name: &str, kind: Kind) -> Result<Value, Value> {
        let selector = format!("req-{name}");
        match kind {
            Kind::ExecSelector => {
                let input =
                    json!({"location": self.location(), "title": name, "requestId": selector});
                self.exec("task", "create", &input).await
            }
            Kind::Natural => {
                let input = json!({"location": self.location(), "title": name});
                self.exec("task", "create", &input).await
            }
            Kind::McpSelector => {
                let arguments = json!({"target": format!("channel:{}", self.channel), "content": name, "requestId": selector});
                self.call("message_send", arguments).await
            }
        }
    }

    fn location(&self) -> Value {
        json!({"kind": "channel", "channelId": self.channel})
    }

    /// Every audit record of the workspace, as the operator reads them.
    async fn audit_records(&self) -> Vec<Value> {
        let identity: Value = serde_json::from_slice(
            &std::fs::read(self.daemon.state_dir.join("identity.json")).unwrap(),
        )
        .unwrap();
        let workspace = identity["workspaceId"].as_str().unwrap();
        let operator = std::fs::read_to_string(&self.token_file).unwrap();
        let mut records = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut body = json!({"limit": 100});
            if let Some(cursor) = &cursor {
                body["cursor"] = json!(cursor);
            }
            let page: Value = self
                .daemon
                .client
                .post(format!(
                    "{}/admin/workspaces/{workspace}/audit/list",
                    self.server_url
                ))
                .bearer_auth(operator.trim())
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            records.extend(page["data"]["records"].as_array().unwrap().iter().cloned());
            cursor = page["data"]["nextCursor"].as_str().map(str::to_string);
            if cursor.is_none() {
                return records;
            }
        }
    }

    /// Every task title in the channel, with how many tasks hold it.
    async fn task_titles(&self) -> HashMap<String, usize> {
        let mut titles = HashMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut input = json!({"location": self.location(), "limit": 100});
            if let Some(cursor) = &cursor {
                input["cursor"] = json!(cursor);
            }
            let page = self.exec("task", "list", &input).await.expect("task list");
            for task in page["tasks"].as_array().unwrap() {
                *titles
                    .entry(task["title"].as_str().unwrap().to_string())
                    .or_default() += 1;
            }
            match page["nextCursor"].as_str() {
                Some(next) if page["hasMore"] == json!(true) => cursor = Some(next.to_string()),
                _ => return titles,
            }
        }
    }

    /// Every message text in the channel, with how many messages hold it.
    async fn message_texts(&self) -> HashMap<String, usize> {
        let mut texts = HashMap::new();
        let mut cursor: Option<String> = None;
        let target = format!("channel:{}", self.channel);
        loop {
            let mut arguments = json!({"target": target, "limit": 100});
            if let Some(cursor) = &cursor {
                arguments["cursor"] = json!(cursor);
            }
            let page = self
                .call("message_history_read", arguments)
                .await
                .expect("history read");
            for message in page["messages"].as_array().unwrap() {
                let text = message["content"]
                    .as_str()
                    .or_else(|| message["content"]["text"].as_str())
                    .unwrap_or_default()
                    .to_string();
                *texts.entry(text).or_default() += 1;
            }
            match page["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return texts,
            }
        }
    }
}

/// One write and what the runtime was told.
#[derive(Debug)]
enum Told {
    Acknowledged,
    /// `outcome_unknown`, with its `next`.
    Unknown(String),
    /// Any other error: its code and message.
    Other(String),
}

fn told(answer: Result<Value, Value>) -> Told {
    match answer {
        Ok(_) => Told::Acknowledged,
        Err(error) if error["code"] == json!("outcome_unknown") => {
            Told::Unknown(error["next"].as_str().unwrap_or_default().to_string())
        }
        Err(error) => Told::Other(format!("{}: {}", error["code"], error["message"])),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ExecSelector,
    McpSelector,
    Natural,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn selector_writes_land_exactly_once_and_natural_key_writes_at_most_once_under_network_faults()
 {
    let rig = Arc::new(Rig::start().await);
    let stall = Duration::from_millis(HOP_TIMEOUT_MS * 3 / 2);
    let gateway = r#"{"message":"no healthy upstream"}"#.to_string();
    let mix = || {
        vec![
            (RATE, Fault::Drop),
            (RATE, Fault::DropAnswer),
            (RATE, Fault::Stall(stall)),
            (RATE, Fault::Truncate),
            (RATE, Fault::Answer(503, gateway.clone())),
        ]
    };
    rig.proxy.set_mix("/actions/task/create", mix());
    rig.proxy.set_mix("/tools/message_send", mix());

    let (outcomes, took) = load(&rig, SELECTOR_WRITES, NATURAL_WRITES, None).await;
    let injected = rig.proxy.injected();
    rig.proxy.clear();
    let (failures, figures) = verify(&rig, &outcomes, Unknowns::NotAllowed).await;
    let metrics = rig.daemon.metrics().await;
    let counter =
        |name: &str| sample(&metrics, &format!("agentteam_{name}_total")).unwrap_or(0.0) as u64;
    let resends = counter("server_resends");
    let unknown = counter("unknown_outcomes");
    println!(
        "exactly once: {} writes by {WRITERS} writers in {:.1} s; faults injected {injected:?}; resends {resends}; {figures:?}",
        outcomes.len(),
        took.as_secs_f64(),
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every fault mode was met, the daemon sent again, and each unknown it answered is counted.
    for fault in [
        "reset before forwarding",
        "reset after the answer",
        "stall",
        "truncated answer",
        "answer",
    ] {
        assert!(
            injected.get(fault).copied().unwrap_or(0) > 0,
            "{fault} never injected"
        );
    }
    assert!(resends > 0);
    assert_eq!(
        unknown as usize,
        figures.get("unknown (natural key)").copied().unwrap_or(0)
    );
}

/// A fault the load meets when `at` writes have been answered.
type MidLoad<'a> = (
    usize,
    std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>,
);

/// [`WRITERS`] writers, each sending `selector_writes` selector-carrying writes (every eighth
/// through MCP) and then `natural_writes` natural-key ones; `mid_load` runs once `at` writes were
/// answered, while the writers go on. Every write with what the runtime was told, and the time.
async fn load(
    rig: &Arc<Rig>,
    selector_writes: usize,
    natural_writes: usize,
    mid_load: Option<MidLoad<'_>>,
) -> (Vec<(String, Kind, Told)>, Duration) {
    let started = Instant::now();
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let progress = Arc::new(tokio::sync::Notify::new());
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let rig = rig.clone();
        let answered = answered.clone();
        let progress = progress.clone();
        writers.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for n in 0..selector_writes + natural_writes {
                let name = format!("eo-{writer}-{n}");
                let kind = match n {
                    n if n >= selector_writes => Kind::Natural,
                    n if n % 8 == 7 => Kind::McpSelector,
                    _ => Kind::ExecSelector,
                };
                let answer = rig.write(&name, kind).await;
                outcomes.push((name, kind, told(answer)));
                answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                progress.notify_waiters();
            }
            outcomes
        }));
    }
    if let Some((at, fault)) = mid_load {
        loop {
            let notified = progress.notified();
            if answered.load(std::sync::atomic::Ordering::SeqCst) >= at {
                break;
            }
            notified.await;
        }
        fault.await;
    }
    let mut outcomes = Vec::new();
    for writer in writers {
        outcomes.extend(writer.await.unwrap());
    }
    (outcomes, started.elapsed())
}

/// Whether a selector write may be left without an acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unknowns {
    /// Network faults only: every selector write ends acknowledged.
    NotAllowed,
    /// A crash mid-load: a selector write may end unknown (or refused), each then listed.
    Listed,
}

/// Reads everything back through the daemon (faults off) and holds each write to its rules:
/// what failed, and the figures.
async fn verify(
    rig: &Rig,
    outcomes: &[(String, Kind, Told)],
    unknowns: Unknowns,
) -> (Vec<String>, BTreeMap<&'static str, usize>) {
    let tasks = rig.task_titles().await;
    let messages = rig.message_texts().await;
    let mut failures = Vec::new();
    let mut figures: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, kind, told) in outcomes {
        let records = match kind {
            Kind::McpSelector => messages.get(name),
            _ => tasks.get(name),
        }
        .copied()
        .unwrap_or(0);
        let selector = *kind != Kind::Natural;
        *figures
            .entry(if selector {
                "selector writes"
            } else {
                "natural-key writes"
            })
            .or_default() += 1;
        if records > 1 {
            *figures.entry("duplicates").or_default() += 1;
            failures.push(format!("{name} ({kind:?}): {records} records"));
        }
        match told {
            Told::Acknowledged if records != 1 => {
                *figures.entry("lost").or_default() += 1;
                failures.push(format!(
                    "{name} ({kind:?}) was acknowledged and is not there"
                ));
            }
            Told::Acknowledged => {}
            Told::Unknown(next) => {
                *figures
                    .entry(if selector {
                        "unknown (selector)"
                    } else {
                        "unknown (natural key)"
                    })
                    .or_default() += 1;
                if selector && unknowns == Unknowns::NotAllowed {
                    failures.push(format!("{name} ({kind:?}) was left unknown"));
                }
                if !next.contains("agentteam exec task") && !next.contains("message_history_read") {
                    failures.push(format!(
                        "{name}: `next` names no read that settles it: {next}"
                    ));
                }
            }
            Told::Other(error) if unknowns == Unknowns::Listed => {
                *figures
                    .entry("refused while the server was down")
                    .or_default() += 1;
                println!("  {name} ({kind:?}): {error}");
            }
            Told::Other(error) => {
                failures.push(format!("{name} ({kind:?}) was answered {error}"));
            }
        }
    }
    (failures, figures)
}

/// Holds a load that met a crash to the rules: nothing duplicated, nothing acknowledged lost,
/// every selector write left unknown or refused listed; then repeats each of those as its answer
/// advised, and each is then there exactly once. How many calls the daemon sent again.
async fn settle_and_check(
    rig: &Rig,
    outcomes: Vec<(String, Kind, Told)>,
    took: Duration,
    what: &str,
) -> f64 {
    println!("{what}: writes not acknowledged:");
    let (failures, figures) = verify(rig, &outcomes, Unknowns::Listed).await;
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let mut unsettled = Vec::new();
    for (name, kind, told) in &outcomes {
        if *kind == Kind::Natural || matches!(told, Told::Acknowledged) {
            continue;
        }
        if let Told::Unknown(_) = told {
            println!("  unknown: req-{name}");
        }
        unsettled.push((name.clone(), *kind));
        let repeat = rig.write(name, *kind).await;
        assert!(repeat.is_ok(), "the repeat of req-{name}: {repeat:?}");
    }
    let tasks = rig.task_titles().await;
    let messages = rig.message_texts().await;
    for (name, kind) in &unsettled {
        let records = match kind {
            Kind::McpSelector => messages.get(name),
            _ => tasks.get(name),
        };
        assert_eq!(records, Some(&1), "req-{name} after its repeat");
    }
    let metrics = rig.daemon.metrics().await;
    let resends = sample(&metrics, "agentteam_server_resends_total").unwrap_or(0.0);
    println!(
        "{what}: {} writes by {WRITERS} writers in {:.1} s; sent again {resends}; {figures:?}; {} settled by their repeat, each once",
        outcomes.len(),
        took.as_secs_f64(),
        unsettled.len(),
    );
    resends
}

/// The server SIGKILLed halfway through the load and started again on the same database and
/// address: while it is down, a write may end unknown or refused; none is duplicated, nothing
/// acknowledged is lost, and each write left so is settled by the repeat its answer advised. On
/// SQLite here, on PostgreSQL in its pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_server_killed_and_restarted_mid_load_duplicates_and_loses_nothing() {
    let rig = Arc::new(Rig::start().await);
    let half = WRITERS * (SELECTOR_WRITES + NATURAL_WRITES) / 2;
    let crash: MidLoad<'_> = (half, Box::pin(rig.kill_and_restart_server()));
    let (outcomes, took) = load(&rig, SELECTOR_WRITES, NATURAL_WRITES, Some(crash)).await;
    let resends = settle_and_check(&rig, outcomes, took, "server SIGKILLed mid-load").await;
    // The crash was met: calls in flight lost their answers and were sent again.
    assert!(resends > 0.0, "no call was sent again");
    // Every committed write has its audit record, committed with it: a natural-key task (never
    // repeated, so no replay's record can stand in for a lost one) has exactly one `ok` record.
    let natural_tasks: usize = rig
        .task_titles()
        .await
        .into_iter()
        .filter(|(title, _)| {
            let n: usize = title.rsplit('-').next().unwrap().parse().unwrap();
            n >= SELECTOR_WRITES
        })
        .map(|(_, count)| count)
        .sum();
    let records = rig.audit_records().await;
    let natural_records = records
        .iter()
        .filter(|r| {
            r["family"] == "actions"
                && r["action"] == "task create"
                && r["outcome"] == "ok"
                && r["keyHash"].is_null()
        })
        .count();
    assert!(natural_tasks > 0);
    assert_eq!(
        natural_records, natural_tasks,
        "a committed natural-key write without its audit record, or a record without its write"
    );
}

/// A PostgreSQL cluster of the test's own (`scripts/pg-cluster`), stopped and removed on drop.
struct OwnCluster {
    dir: PathBuf,
    url: String,
}

impl OwnCluster {
    fn start() -> OwnCluster {
        let dir = std::env::temp_dir().join(format!("agentteam-own-pg-{}", std::process::id()));
        // PostgreSQL's own durability: a crash keeps every commit it acknowledged.
        let output =
            std::process::Command::new(crate::support::repo_root().join("scripts/pg-cluster"))
                .env("DURABLE", "1")
                .arg("start")
                .arg(&dir)
                .output()
                .unwrap();
        assert!(
            output.status.success(),
            "scripts/pg-cluster start: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let url = String::from_utf8(output.stdout).unwrap().trim().to_string();
        OwnCluster { dir, url }
    }

    /// Stops PostgreSQL at once, as a crash would, and starts it again (crash recovery).
    async fn restart(&self) {
        let status =
            tokio::process::Command::new(crate::support::repo_root().join("scripts/pg-cluster"))
                .arg("restart")
                .arg(&self.dir)
                .status()
                .await
                .unwrap();
        assert!(status.success(), "scripts/pg-cluster restart");
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(crate::support::repo_root().join("scripts/pg-cluster"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// PostgreSQL itself stopped at once and restarted halfway through the load, on a cluster of the
/// test's own: the same rules as a server crash. Only in the PostgreSQL pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pg_postgresql_restarted_mid_load_duplicates_and_loses_nothing() {
    let cluster = OwnCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let rig = Arc::new(Rig::start_on(dir, cluster.url.clone(), &[]).await);
    let half = WRITERS * (SELECTOR_WRITES + NATURAL_WRITES) / 2;
    let crash: MidLoad<'_> = (half, Box::pin(cluster.restart()));
    let (outcomes, took) = load(&rig, SELECTOR_WRITES, NATURAL_WRITES, Some(crash)).await;
    // While PostgreSQL is down the server answers its own failure (nothing was committed): those
    // are refusals, listed and settled, not lost answers.
    let met = outcomes
        .iter()
        .filter(|(_, _, told)| !matches!(told, Told::Acknowledged))
        .count();
    let resends = settle_and_check(&rig, outcomes, took, "PostgreSQL restarted mid-load").await;
    // The outage was met: writes in flight while PostgreSQL was down were refused, or lost their
    // answers and were sent again.
    assert!(
        met > 0 || resends > 0.0,
        "no write was in flight while PostgreSQL was down"
    );
}

/// Sends of one call at most (the daemon's bound).
const MAX_SENDS: u64 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_that_runs_out_says_the_outcome_is_unknown_and_its_advice_settles_it() {
    let rig = Rig::start().await;
    // Every answer is lost after the server applied the write.
    rig.proxy.set("/actions/task/create", Fault::DropAnswer);
    rig.proxy.set("/tools/message_send", Fault::DropAnswer);
    let task = json!({"location": rig.location(), "title": "exhausted", "requestId": "req-exhausted-task"});
    let error = rig.exec("task", "create", &task).await.unwrap_err();
    assert_eq!(error["code"], "outcome_unknown", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("`req-exhausted-task`"), "{message}");
    let next = error["next"].as_str().unwrap();
    assert!(
        next.contains("repeat it with the same `requestId` (`req-exhausted-task`)")
            && next.contains("agentteam exec task"),
        "{next}"
    );
    assert_eq!(rig.proxy.injected()["reset after the answer"], MAX_SENDS);
    // The receipt is ambiguous until the server answers: the selector with another payload
    // cannot be matched to it and is refused before it is sent.
    let other =
        json!({"location": rig.location(), "title": "another", "requestId": "req-exhausted-task"});
    let error = rig.exec("task", "create", &other).await.unwrap_err();
    assert_eq!(error["code"], "idempotency_key_reused", "{error}");
    assert_eq!(
        rig.proxy.injected()["reset after the answer"],
        MAX_SENDS,
        "the mismatched request was sent"
    );

    let arguments = json!({"target": format!("channel:{}", rig.channel), "content": "exhausted", "requestId": "req-exhausted-message"});
    let error = rig
        .call("message_send", arguments.clone())
        .await
        .unwrap_err();
    assert_eq!(error["code"], "outcome_unknown", "{error}");
    let next = error["next"].as_str().unwrap();
    assert!(next.contains("message_history_read"), "{next}");
    assert_eq!(
        rig.proxy.injected()["reset after the answer"],
        2 * MAX_SENDS
    );

    // The faults gone, the repeat the error advises answers what was applied, once.
    rig.proxy.clear();
    let created = rig.exec("task", "create", &task).await.unwrap();
    assert_eq!(created["task"]["title"], "exhausted");
    let sent = rig.call("message_send", arguments).await.unwrap();
    assert_eq!(sent["message"]["content"], "exhausted");
    assert_eq!(rig.task_titles().await.get("exhausted"), Some(&1));
    assert_eq!(rig.message_texts().await.get("exhausted"), Some(&1));

    // A natural-key write is sent once, and told so.
    rig.proxy.set("/actions/task/create", Fault::DropAnswer);
    let natural = json!({"location": rig.location(), "title": "natural"});
    let error = rig.exec("task", "create", &natural).await.unwrap_err();
    assert_eq!(error["code"], "outcome_unknown", "{error}");
    assert!(!error["message"].as_str().unwrap().contains("requestId"));
    assert_eq!(
        rig.proxy.injected()["reset after the answer"],
        2 * MAX_SENDS + 1
    );
    rig.proxy.clear();
    assert_eq!(rig.task_titles().await.get("natural"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_waits_without_its_admission_and_ends_at_once_when_the_runtime_is_revoked() {
    let rig = Arc::new(Rig::start().await);
    // The server never sees these: each send is reset before it is forwarded.
    rig.proxy.set("/actions/task/create", Fault::Drop);
    let mut writes = Vec::new();
    // The authorization's whole admission: 32 requests at once.
    for n in 0..32 {
        let rig = rig.clone();
        writes.push(tokio::spawn(async move {
            let input = json!({"location": rig.location(), "title": format!("waiting-{n}"), "requestId": format!("req-waiting-{n}")});
            rig.exec("task", "create", &input).await
        }));
    }
    rig.proxy.wait_injected("reset before forwarding", 32).await;
    // Each of the 32 has sent once and waits to send again, holding no slot: a read is admitted.
    let read = rig
        .exec("task", "list", &json!({"location": rig.location()}))
        .await;
    assert!(read.is_ok(), "a read while 32 replays wait: {read:?}");
    for write in writes {
        let error = write.await.unwrap().unwrap_err();
        assert_eq!(error["code"], "outcome_unknown", "{error}");
    }

    // A replay under way ends when the runtime's credential is revoked, without another send.
    rig.proxy
        .set("/actions/task/create", Fault::Stall(Duration::from_secs(5)));
    let write = {
        let rig = rig.clone();
        tokio::spawn(async move {
            let input = json!({"location": rig.location(), "title": "revoked", "requestId": "req-revoked-1"});
            rig.exec("task", "create", &input).await
        })
    };
    rig.proxy.wait_injected("stall", 1).await;
    // The runtime exits: the daemon revokes its authorization.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(rig.runtime_pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let error = write.await.unwrap().unwrap_err();
    assert_eq!(error["code"], "forbidden", "{error}");
    assert_eq!(rig.proxy.injected()["stall"], 1, "a send after revocation");
}

/// The server is killed (SIGKILL, by the debug build's fault point) right after a mutation with a
/// selector committed and before it answered, then started again on the same database and
/// address: the daemon told the runtime the outcome is unknown, and the repeat it advised finds
/// the receipt the mutation committed with, at once (no claim is left in progress for a lease to
/// run out), so there is one record. On SQLite here, on PostgreSQL in its pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_killed_between_commit_and_answer_leaves_a_receipt_the_repeat_finds() {
    let dir = tempfile::tempdir().unwrap();
    let database = crate::support::database_url(dir.path()).await;
    let fault = [("AGENTTEAM_FAULT_KILL_AFTER_COMMIT", "task.create")];
    let rig = Rig::start_on(dir, database, &fault).await;
    let input =
        json!({"location": rig.location(), "title": "crashed", "requestId": "req-crashed-0001"});
    let error = rig.exec("task", "create", &input).await.unwrap_err();
    assert_eq!(error["code"], "outcome_unknown", "{error}");
    // The fault point killed the server; it starts again without it.
    rig.restart_server().await;
    let created = rig
        .exec("task", "create", &input)
        .await
        .expect("the repeat finds the receipt");
    assert_eq!(created["task"]["title"], "crashed");
    assert_eq!(rig.task_titles().await.get("crashed"), Some(&1));
}

/// `--server-timeout-ms` takes 100 to 120000: past either edge the daemon refuses to start
/// (exit 2, saying why); at each edge it starts and records the flag for its next start.
#[tokio::test]
async fn the_hop_timeout_is_refused_past_its_bounds_and_kept_at_them() {
    for refused in ["99", "120001"] {
        let dir = tempfile::tempdir().unwrap();
        let output = tokio::process::Command::new(crate::support::bin())
            .args(["daemon", "--state-dir"])
            .arg(dir.path())
            .args(["--server-timeout-ms", refused])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{refused}: {stderr}");
        assert!(
            stderr.contains("`--server-timeout-ms` must be between 100 and 120000"),
            "{stderr}"
        );
    }
    for kept in ["100", "120000"] {
        let daemon = TestDaemon::start(&["--server-timeout-ms", kept]).await;
        let recorded: Vec<String> =
            serde_json::from_slice(&std::fs::read(daemon.state_dir.join("daemon.args")).unwrap())
                .unwrap();
        let at = recorded
            .iter()
            .position(|flag| flag == "--server-timeout-ms")
            .expect("the flag is recorded");
        assert_eq!(recorded[at + 1], kept);
    }
}
