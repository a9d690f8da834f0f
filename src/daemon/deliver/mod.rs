//! Deliveries on the daemon's side: an agent's launch recipe, the daemon hosting the agents that
//! have one, and a run started for each of their pending deliveries.
//!
//! A recipe (which runtime family, the program and its arguments, the working directory, the
//! environment the runtime needs) is the person's alone: set through the person-checked admin
//! API (`agentteam agent recipe`), kept owner-only in `<state dir>/recipes/<agent id>.json`
//! (its environment may hold provider keys), never in an Exec projection.
//!
//! The deliverer claims each agent with a recipe on the server (`agent_host`, a new fence), marks
//! the deliveries it finds `started` from before as `interrupted` (the daemon that started them
//! stopped, and with it their runs), and starts each pending delivery of a hosted agent: first
//! `delivery_start` on the server (at most once), then the launch, exactly as `agentteam run`
//! launches (`launch::start`), with the turn bound to the delivery's
//! target and message, and the person's message and the target to answer on written to the
//! runtime's stdin, never its arguments (for Kimi Code, whose prompt is only an argument, to an
//! owner-only file of the turn that its `-p` names). When the run ends, `delivery_finish` records how, unless
//! the agent's reply already made it `answered` on the server. One run at a time per agent and
//! target: a delivery for a busy conversation waits for the next pass.
//!
//! The server may restart, and the connection to it break, at any point: the start, the finish
//! and the reads around them are sent again while the failure is the hop's ([`settled`]), each
//! write with a `requestId` of the delivery's state, so the server applies it once and a repeat
//! gets the first answer. Because a repeat gets that answer, a start is sent only by the daemon's
//! one attempt for that state of the delivery (`Deliverer::begun`), never by a later pass.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::runtime::{LaunchOptions, Output, driver};
use super::state::DaemonState;

pub mod recipe;
mod session;
use crate::contract::ActionResult;
use crate::contract::HumanActionId as H;
use crate::wire::turn::Turn;
pub use recipe::{Deliverer, RECIPES_DIR, Recipe, refused};

/// How long one delivered run may take before it is stopped.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Delivered runs of one agent at once (each in a conversation of its own).
pub const MAX_RUNS_PER_AGENT: usize = 8;
/// Pages of 100 deliveries one pass reads at most.
const MAX_LISTED_PAGES: usize = 10;
/// How often the deliverer looks for pending deliveries when nothing told it to.
const IDLE_PASS: Duration = Duration::from_secs(30);

/// How long the deliverer sends one of its records again while the server cannot be reached
/// (restarting, or the connection cut): past it, the record waits for the next pass.
const SETTLE_WINDOW: Duration = Duration::from_secs(10 * 60);
/// The first pause before a record is sent again, and the longest; each next one doubles.
const SETTLE_BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(5));

/// One human API action as the daemon's person.
async fn human(state: &DaemonState, action: H, input: Value) -> ActionResult<Value> {
    state
        .server_client
        .human(&state.identity.workspace_id, action, &input)
        .await
}

/// Whether a failure is the hop's (the server unreachable, restarting, its answer lost), and
/// so worth sending the same request again; a refusal the server answered is not.
fn transient(error: &crate::contract::ActionError) -> bool {
    use crate::contract::error::ErrorCode;
    matches!(
        error.code,
        ErrorCode::UpstreamUnavailable
            | ErrorCode::UpstreamTimeout
            | ErrorCode::UpstreamFailed
            | ErrorCode::IdempotencyInProgress
    )
}

/// [`human`], sent again while its failure is [`transient`], for up to [`SETTLE_WINDOW`]: a read,
/// or a write with its `requestId`, which the server answers once (a repeat replays the first
/// answer), so a record whose answer was lost is neither lost nor made twice.
async fn settled(state: &DaemonState, action: H, input: Value) -> ActionResult<Value> {
    let deadline = tokio::time::Instant::now() + SETTLE_WINDOW;
    let mut pause = SETTLE_BACKOFF.0;
    loop {
        match human(state, action, input.clone()).await {
            Err(error) if transient(&error) && tokio::time::Instant::now() + pause < deadline => {
                tracing::debug!(action = action.descriptor().name, error = %error.message, "the server did not answer; sending again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(SETTLE_BACKOFF.1);
            }
            answered => return answered,
        }
    }
}

/// Runs the deliverer until `stop`: a pass at start, after each delivery change in the person's
/// feed, when woken, and at least every [`IDLE_PASS`].
pub async fn run(state: DaemonState, stop: CancellationToken) {
    let mut swept = false;
    let mut cursor: Option<i64> = None;
    let mut pause = SETTLE_BACKOFF.0;
    loop {
        if let Err(error) = pass(&state, &mut swept).await {
            // The server restarting, or the connection cut: the pass is tried again soon, not
            // only at the next change the feed shows.
            tracing::warn!(error = %error.message, "delivery pass failed; retrying");
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return,
            }
            pause = (pause * 2).min(SETTLE_BACKOFF.1);
            continue;
        }
        pause = SETTLE_BACKOFF.0;
        let deliverer = &state.deliverer;
        // Until a delivery changes in the person's feed, or a while passed.
        let feed = async {
            loop {
                let Ok(page) = state.feed.read(cursor, IDLE_PASS, 100).await else {
                    tokio::time::sleep(IDLE_PASS).await;
                    return;
                };
                let first = cursor.is_none();
                cursor = page["cursor"].as_i64().or(cursor);
                let events = page["events"].as_array().map_or(&[][..], Vec::as_slice);
                let delivered = events.iter().any(|e| e["kind"] == json!("delivery"));
                for event in events
                    .iter()
                    .filter(|e| e["delivery"]["state"] == json!("pending"))
                {
                    // With its time in the log: where the daemon's part of a delivery begins.
                    tracing::debug!(delivery = %event["delivery"]["id"].as_str().unwrap_or_default(), "delivery in the feed");
                }
                if first || delivered || events.is_empty() || page["resync"] == json!(true) {
                    return;
                }
            }
        };
        tokio::select! {
            () = feed => {}
            () = deliverer.wake.notified() => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Every delivery of the person's in `state` (of `agent_id` when given), oldest first, at most
/// [`MAX_LISTED_PAGES`] pages.
async fn listed(
    state: &DaemonState,
    agent_id: Option<&str>,
    wanted: &str,
) -> ActionResult<Vec<Value>> {
    let mut input = json!({ "state": wanted, "limit": 100 });
    if let Some(agent_id) = agent_id {
        input["agentId"] = json!(agent_id);
    }
    let mut all = Vec::new();
    for _ in 0..MAX_LISTED_PAGES {
        let page = settled(state, H::DeliveryList, input.clone()).await?;
        all.extend(page["deliveries"].as_array().cloned().unwrap_or_default());
        match page["nextCursor"].as_str() {
            Some(next) => input["cursor"] = json!(next),
            None => break,
        }
    }
    // Oldest first: the list is newest first.
    all.reverse();
    Ok(all)
}

/// Hosts every agent with a recipe, sweeps what an earlier daemon left started (once), and
/// starts the pending deliveries of hosted agents that are not paused, each when its
/// conversation has no live run, its working directory is free (unless the recipe shares it),
/// the agent runs fewer than [`MAX_RUNS_PER_AGENT`] and the daemon has room for a runtime.
async fn pass(state: &DaemonState, swept: &mut bool) -> ActionResult<()> {
    let deliverer = &state.deliverer;
    let mut hosted = Vec::new();
    for agent_id in state.agents.store.ids() {
        let recipe = match deliverer.recipe(&agent_id) {
            Ok(Some(recipe)) => recipe,
            Ok(None) => continue,
            Err(error) => {
                tracing::warn!(agent = %agent_id, %error, "cannot read the agent's recipe");
                continue;
            }
        };
        let known = deliverer
            .fences
            .lock()
            .expect("not poisoned")
            .get(&agent_id)
            .copied();
        let fence = match known {
            Some(fence) => fence,
            None => {
                let claimed = human(state, H::AgentHost, json!({ "agentId": agent_id })).await?;
                let fence = claimed["fence"].as_i64().unwrap_or(0);
                tracing::info!(agent = %agent_id, fence, "this daemon hosts the agent's deliveries");
                deliverer
                    .fences
                    .lock()
                    .expect("not poisoned")
                    .insert(agent_id.clone(), fence);
                fence
            }
        };
        hosted.push((agent_id, recipe, fence));
    }
    if !*swept {
        for (agent_id, _, fence) in &hosted {
            for delivery in listed(state, Some(agent_id), "started").await? {
                finish(
                    state,
                    &delivery,
                    *fence,
                    "interrupted",
                    "the daemon that started it stopped",
                )
                .await;
            }
        }
        *swept = true;
    }
    if hosted.is_empty() {
        return Ok(());
    }
    // Each hosted agent's own (the person's list also holds what they sent to others' agents).
    let mut pending = Vec::new();
    for (agent_id, _, _) in &hosted {
        pending.extend(listed(state, Some(agent_id), "pending").await?);
    }
    let key_of = delivery_key;
    // What the server refused, or this daemon began, and is still pending, unchanged: not tried
    // again. Passes run one after the other, so once a delivery is not in a pass's list, no later
    // pass lists it as it was.
    for keys in [&deliverer.refused, &deliverer.begun] {
        keys.lock()
            .expect("not poisoned")
            .retain(|key| pending.iter().any(|d| key_of(d) == *key));
    }
    for delivery in pending {
        let agent_id = delivery["agentId"].as_str().unwrap_or_default().to_string();
        let target = delivery["target"].as_str().unwrap_or_default().to_string();
        let Some((_, recipe, fence)) = hosted.iter().find(|(id, _, _)| *id == agent_id) else {
            continue;
        };
        if deliverer.is_paused(&agent_id)
            || [&deliverer.refused, &deliverer.begun].iter().any(|keys| {
                keys.lock()
                    .expect("not poisoned")
                    .contains(&key_of(&delivery))
            })
        {
            continue;
        }
        if state.dispatcher.leases() >= super::runtime::MAX_LEASES {
            // No room for another runtime: it waits for a run to end.
            break;
        }
        let key = (agent_id.clone(), target.clone());
        {
            let mut busy = deliverer.busy.lock().expect("not poisoned");
            let mut workdirs = deliverer.workdirs.lock().expect("not poisoned");
            let runs_of_agent = busy.iter().filter(|(agent, _)| *agent == agent_id).count();
            if busy.contains(&key)
                || runs_of_agent >= MAX_RUNS_PER_AGENT
                || (!recipe.shared_workdir && workdirs.contains(&recipe.workdir))
            {
                continue;
            }
            busy.insert(key.clone());
            if !recipe.shared_workdir {
                workdirs.insert(recipe.workdir.clone());
            }
            deliverer
                .begun
                .lock()
                .expect("not poisoned")
                .insert(key_of(&delivery));
        }
        let (state, recipe, fence) = (state.clone(), recipe.clone(), *fence);
        tokio::spawn(async move {
            deliver(&state, &delivery, &recipe, fence).await;
            let deliverer = &state.deliverer;
            deliverer.busy.lock().expect("not poisoned").remove(&key);
            if !recipe.shared_workdir {
                deliverer
                    .workdirs
                    .lock()
                    .expect("not poisoned")
                    .remove(&recipe.workdir);
            }
            deliverer.wake.notify_one();
        });
    }
    Ok(())
}

/// Records how a started delivery ended (best effort: a refusal is logged, and an answered
/// delivery stays answered on the server). `delivery` is as it was when it started.
async fn finish(state: &DaemonState, delivery: &Value, fence: i64, ended: &str, reason: &str) {
    let id = delivery["id"].as_str().unwrap_or_default();
    let input = json!({
        "deliveryId": id,
        "fence": fence,
        "state": ended,
        "reason": reason,
        // Once per start: a retried delivery's next start has another `updatedAt`.
        "requestId": format!("dlv-finish-{id}-{}", delivery["updatedAt"].as_str().unwrap_or_default()),
    });
    if let Err(error) = settled(state, H::DeliveryFinish, input).await {
        tracing::warn!(delivery = %id, error = %error.message, "cannot record how a delivery ended");
    }
}

/// A delivery as it is now: `(id, updatedAt)` (a retry changes the second).
fn delivery_key(delivery: &Value) -> (String, String) {
    (
        delivery["id"].as_str().unwrap_or_default().to_string(),
        delivery["updatedAt"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// The session a conversation's deliveries run in: one per agent and target.
fn session_of(target: &str) -> String {
    format!(
        "dlv-{}",
        &hex::encode(Sha256::digest(target.as_bytes()))[..24]
    )
}

/// Starts one pending delivery: on the server first (at most once), then the runtime.
async fn deliver(state: &DaemonState, delivery: &Value, recipe: &Recipe, fence: i64) {
    let id = delivery["id"].as_str().unwrap_or_default();
    let target = delivery["target"].as_str().unwrap_or_default();
    let message_id = delivery["messageId"].as_str().unwrap_or_default();
    let agent_id = delivery["agentId"].as_str().unwrap_or_default();
    let session = session_of(target);
    let start = json!({
        "deliveryId": id,
        "fence": fence,
        "runId": session,
        // Once per time it is pending: a retry gives it another `updatedAt`.
        "requestId": format!("dlv-start-{id}-{}", delivery["updatedAt"].as_str().unwrap_or_default()),
    });
    fault::kill_at("claim");
    let started = match settled(state, H::DeliveryStart, start).await {
        Ok(started) => started["delivery"].clone(),
        Err(error) if transient(&error) => {
            // No answer for a while: the next pass sends the same start again (still pending,
            // it has the same `requestId`, so the server starts it at most once).
            tracing::warn!(delivery = %id, error = %error.message, "cannot reach the server to start a delivery");
            state
                .deliverer
                .begun
                .lock()
                .expect("not poisoned")
                .remove(&delivery_key(delivery));
            return;
        }
        Err(error) => {
            // Another daemon's, started already, or expired: not this daemon's to run, until
            // it changes.
            tracing::info!(delivery = %id, error = %error.message, "delivery not started here");
            state
                .deliverer
                .refused
                .lock()
                .expect("not poisoned")
                .insert(delivery_key(delivery));
            return;
        }
    };
    fault::kill_at("start");
    // The conversation's runtime session: this turn follows the ones before in it.
    let resumed = state.deliverer.sessions.next(agent_id, target);
    let ran = launch(
        state,
        recipe,
        id,
        (agent_id, target, message_id),
        (&session, &resumed),
    )
    .await;
    let (ended, reason) = match ran {
        Ran::Exited { code, named } => {
            if let Some(named) = named {
                state
                    .deliverer
                    .sessions
                    .ended(agent_id, target, &resumed, code == 0, named);
            }
            match code {
                0 => ("ended", "the run ended without a reply".to_string()),
                code => ("failed", format!("the run exited with status {code}")),
            }
        }
        Ran::Stopped(why) => {
            // The runtime ran: its session counts the failure.
            state.deliverer.sessions.ended(
                agent_id,
                target,
                &resumed,
                false,
                session::Named::Given,
            );
            ("failed", why)
        }
        Ran::NotStarted(why) => {
            // Its details (paths of this machine) stay in this daemon's log: the delivery is
            // seen by its sender too.
            tracing::warn!(delivery = %id, reason = %why, "the delivered runtime could not be started");
            (
                "failed",
                "the runtime could not be started (its daemon's log says why)".to_string(),
            )
        }
    };
    finish(state, &started, fence, ended, &reason).await;
}

/// The person's message, as the runtime is handed it on stdin.
async fn prompt(state: &DaemonState, target: &str, message_id: &str) -> Result<String, String> {
    let page = settled(
        state,
        H::HistoryRead,
        json!({ "target": target, "around": message_id, "limit": 1 }),
    )
    .await
    .map_err(|error| format!("cannot read the message: {}", error.message))?;
    let message = page["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["id"] == json!(message_id))
        .ok_or_else(|| "the message is no longer readable".to_string())?;
    let author = message["authorId"].as_str().unwrap_or_default();
    let who = if author == state.identity.human_id {
        "Your owner wrote to you in AgentTeam.".to_string()
    } else {
        format!(
            "A person your owner allowed to wake you ({author}), not your owner, wrote to you in \
             AgentTeam."
        )
    };
    Ok(format!(
        "{who}\nTarget: {target}\nMessage: {message_id}\n\n{}\n\n\
         Answer with the message_send tool on exactly this target: {target}\n",
        message["content"].as_str().unwrap_or_default()
    ))
}

/// How a delivered run went.
enum Ran {
    /// The runtime exited with `code`; `named`: who named its session, when the driver put it
    /// in the conversation's session (`None`: it did not).
    Exited {
        code: i32,
        named: Option<session::Named>,
    },
    /// The runtime ran and was stopped (it took too long, or its output ended unexplained).
    Stopped(String),
    /// Nothing was started: why.
    NotStarted(String),
}

/// Launches the recipe for one delivery and waits for its end (bounded by [`RUN_TIMEOUT`]).
async fn launch(
    state: &DaemonState,
    recipe: &Recipe,
    delivery_id: &str,
    (agent_id, target, message_id): (&str, &str, &str),
    (session, resumed): (&str, &super::runtime::driver::RuntimeSession),
) -> Ran {
    let text = match prompt(state, target, message_id).await {
        Ok(text) => text,
        Err(why) => return Ran::NotStarted(why),
    };
    let program = recipe.argv.first().map(String::as_str).unwrap_or_default();
    let profile_family = state
        .agents
        .store
        .find(agent_id)
        .map(|agent| agent.profile.runtime_family)
        .unwrap_or_default();
    let family = recipe.runtime.resolve(program, &profile_family).0;
    let mut argv = recipe.argv.clone();
    // Kimi Code takes its prompt only as an argument: the message goes in an owner-only file,
    // and the argument names the file.
    let turn_file = match family {
        driver::Family::Kimi => {
            if let Some(why) = driver::kimi_recipe_refusal(argv.get(1..).unwrap_or_default()) {
                // A recipe set before this check, or a profile changed since.
                return Ran::NotStarted(why);
            }
            match state.deliverer.turn_file(delivery_id, &text) {
                Ok(file) => {
                    argv.extend(["-p".to_string(), driver::kimi_turn_prompt(&file)]);
                    Some(file)
                }
                Err(error) => {
                    return Ran::NotStarted(format!("cannot write the turn's file: {error}"));
                }
            }
        }
        _ => None,
    };
    let ran = run_delivered(
        state,
        recipe,
        delivery_id,
        (agent_id, target, message_id),
        (session, resumed),
        (family, argv, turn_file.is_none().then_some(text)),
    )
    .await;
    if turn_file.is_some() {
        state.deliverer.forget_turn(delivery_id);
    }
    ran
}

/// Runs the delivered launch `argv` of `family`, handing it `stdin` (nothing where the message is
/// in a file), and waits for its end (bounded by [`RUN_TIMEOUT`]).
async fn run_delivered(
    state: &DaemonState,
    recipe: &Recipe,
    delivery_id: &str,
    (agent_id, target, message_id): (&str, &str, &str),
    (session, resumed): (&str, &super::runtime::driver::RuntimeSession),
    (family, argv, stdin): (driver::Family, Vec<String>, Option<String>),
) -> Ran {
    // Whether the driver puts the run in the conversation's session, and for a runtime that
    // names its own sessions, reading the id from its JSON output.
    let placed = driver::put_in_session(family, &mut argv.clone(), resumed).is_some();
    let names = driver::names_its_sessions(family, &argv);
    let mut said = (placed && names).then(SaidSession::default);
    let options = LaunchOptions {
        agent: agent_id.to_string(),
        workdir: recipe.workdir.clone(),
        argv,
        env: recipe.env.clone(),
        session: Some(session.to_string()),
        replace: false,
        turn: Some(Turn {
            target: target.to_string(),
            message_id: message_id.to_string(),
        }),
        primary_thread: None,
        runtime: recipe.runtime,
        sandbox_network: false,
        stdin: true,
        resume: Some(resumed.clone()),
    };
    let mut output = match super::launch::start(state, options).await {
        Ok(output) => output,
        Err(error) => return Ran::NotStarted(error.message),
    };
    let ran = async {
        while let Some(frame) = output.recv().await {
            match frame {
                Output::StdinRun(run_id) => {
                    tracing::debug!(delivery = %delivery_id, run = %run_id, "delivered runtime started");
                    if let Ok((mut pipe, _)) = state.dispatcher.take_stdin(&run_id) {
                        use tokio::io::AsyncWriteExt;
                        if let Some(text) = &stdin {
                            let _ = pipe.write_all(text.as_bytes()).await;
                        }
                        let _ = pipe.shutdown().await;
                    }
                    fault::kill_at("spawn");
                }
                Output::Exited(code) => {
                    let named = match (placed, said.take()) {
                        (false, _) => None,
                        (true, Some(said)) => Some(session::Named::Output(said.id)),
                        (true, None) if names => Some(session::Named::Output(None)),
                        (true, None) => Some(session::Named::Given),
                    };
                    return Ran::Exited { code, named };
                }
                Output::Stdout(bytes) => {
                    if let Some(said) = said.as_mut() {
                        said.read(family, &bytes);
                    }
                }
                Output::Stderr(_) => {}
            }
        }
        Ran::Stopped("the run ended without an exit status".to_string())
    };
    match tokio::time::timeout(RUN_TIMEOUT, ran).await {
        Ok(ended) => ended,
        Err(_) => {
            // Dropping the output stream ends the lease: the runtime is stopped.
            Ran::Stopped(format!(
                "the run took longer than {} minutes and was stopped",
                RUN_TIMEOUT.as_secs() / 60
            ))
        }
    }
}

/// The session id a runtime's JSON output names, read from at most [`MAX_SAID`] bytes: on its
/// first line (the runtime's own event, before anything the model wrote), or for a runtime that
/// names it in an object of its own after the turn, on the last line that does
/// ([`driver::session_on_first_line`]).
#[derive(Default)]
struct SaidSession {
    line: Vec<u8>,
    /// The line being read was longer than [`MAX_SAID_LINE`]: it names nothing.
    overlong: bool,
    read: usize,
    id: Option<String>,
    done: bool,
}

/// Output read for a runtime's session id at most (its first line names it).
const MAX_SAID: usize = 1024 * 1024;
/// A line of output kept at most while looking for the id.
const MAX_SAID_LINE: usize = 64 * 1024;

impl SaidSession {
    fn read(&mut self, family: driver::Family, bytes: &[u8]) {
        if self.done || self.read >= MAX_SAID {
            return;
        }
        self.read += bytes.len();
        let first_only = driver::session_on_first_line(family);
        for &byte in bytes {
            if byte == b'\n' {
                let named = match self.overlong {
                    true => None,
                    false => std::str::from_utf8(&self.line)
                        .ok()
                        .and_then(|line| driver::session_in_output(family, line)),
                };
                self.line.clear();
                self.overlong = false;
                if first_only {
                    // Only the first line: a later one may carry what the model wrote.
                    self.done = true;
                    self.id = named;
                    return;
                }
                if named.is_some() {
                    self.id = named;
                }
            } else if self.line.len() < MAX_SAID_LINE {
                self.line.push(byte);
            } else {
                self.overlong = true;
            }
        }
    }
}

/// A test-only fault point of debug builds: `AGENTTEAM_FAULT_KILL_DELIVERY=<point>` kills the
/// daemon with SIGKILL at that point of a delivery: `claim` (before the server records its start),
/// `start` (once it did, before the spawn) or `spawn` (once the runtime has its message).
#[cfg(debug_assertions)]
mod fault {
    pub fn kill_at(point: &str) {
        static POINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let armed = POINT.get_or_init(|| std::env::var("AGENTTEAM_FAULT_KILL_DELIVERY").ok());
        if armed.as_deref() == Some(point) {
            use crate::platform::process::{Pid, Signal, signal};
            let me = Pid::new(std::process::id()).expect("this process has an id");
            let _ = signal(me, Signal::Kill);
        }
    }
}

#[cfg(not(debug_assertions))]
mod fault {
    pub fn kill_at(_point: &str) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtimes_session_is_read_from_its_output_within_bounds() {
        let family = driver::Family::Opencode;
        let mut said = SaidSession::default();
        // The first line, split anywhere; a later line is never looked at.
        said.read(family, b"{\"type\":\"step_start\",\"sessio");
        assert_eq!(said.id, None);
        said.read(
            family,
            b"nID\":\"ses_abc123\"}\n{\"sessionID\":\"ses_other\"}\n",
        );
        assert_eq!(said.id.as_deref(), Some("ses_abc123"));
        let mut first = SaidSession::default();
        first.read(family, b"not json\n{\"sessionID\":\"ses_later\"}\n");
        assert_eq!(first.id, None);
        // Past what is read for it, a later line is not looked at.
        let mut late = SaidSession::default();
        late.read(family, &vec![b'x'; MAX_SAID]);
        late.read(family, b"\n{\"sessionID\":\"ses_late\"}\n");
        assert_eq!(late.id, None);
        // A line past its bound is cut, and names nothing.
        let mut long = SaidSession::default();
        let mut line = b"{\"sessionID\":\"ses_long\",\"pad\":\"".to_vec();
        line.extend(vec![b'x'; MAX_SAID_LINE]);
        line.extend(b"\"}\n");
        long.read(family, &line);
        assert_eq!(long.id, None);
    }

    /// Kimi Code names its session after the turn, in an object of its own: any line may, the
    /// last one that does wins, and a line past its bound names nothing.
    #[test]
    fn kimi_codes_session_is_read_from_its_hint_after_the_turn() {
        let family = driver::Family::Kimi;
        let hint = |id: &str| {
            format!(
                "{{\"role\":\"meta\",\"type\":\"session.resume_hint\",\"session_id\":\"{id}\"}}\n"
            )
        };
        let mut said = SaidSession::default();
        said.read(family, b"{\"role\":\"meta\",\"type\":\"system.version\"}\n");
        said.read(family, b"{\"role\":\"assistant\",\"content\":\"hi\"}\n");
        said.read(family, hint("first").as_bytes());
        said.read(family, hint("last").as_bytes());
        assert_eq!(said.id.as_deref(), Some("last"));
        let mut long = SaidSession::default();
        let mut line = hint("long").trim_end().to_string();
        line.push_str(&" ".repeat(MAX_SAID_LINE));
        line.push('\n');
        long.read(family, line.as_bytes());
        assert_eq!(long.id, None);
    }

    #[test]
    fn each_conversation_has_a_session_of_its_own() {
        let sessions = [session_of("channel:chn_a"), session_of("thread:thr_a")];
        assert_ne!(sessions[0], sessions[1]);
        assert!(
            sessions
                .iter()
                .all(|s| s.len() <= 64 && s.starts_with("dlv-"))
        );
    }
}
