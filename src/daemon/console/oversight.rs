//! The pages where a person oversees their agents: the approvals waiting for them, the runtimes
//! the daemon runs (and stopping one), the audit of their agents, what AgentTeam costs each
//! runtime, and attachments (downloads only).

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::html::{self, Nav, escape, url_part};
use super::markdown;
use super::pages::{call, names, page, request_id, see_other};
use super::session::Session;
use super::{CsrfForm, refusal};
use crate::contract::HumanActionId as H;
use crate::daemon::state::DaemonState;

/// How long a cost report is reused (it reads every runtime's session records).
const COSTS_FOR_MS: i64 = 60_000;
/// Sessions drawn in the cost chart.
const CHART_SESSIONS: usize = 20;
/// How long a stop waits for the run to end before the page follows.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// `GET /approvals`: what waits on the person first, with a decision form each; then the
/// decided ones.
pub async fn approvals(
    State(state): State<DaemonState>,
    Extension(session): Extension<Session>,
) -> Response {
    let names = match names(&state).await {
        Ok(names) => names,
        Err(refused) => return refused,
    };
    let pending = match call(
        &state,
        H::ApprovalList,
        json!({ "status": "pending", "limit": 100 }),
    )
    .await
    {
        Ok(pending) => pending,
        Err(refused) => return refused,
    };
    let recent = match call(&state, H::ApprovalList, json!({ "limit": 50 })).await {
        Ok(recent) => recent,
        Err(refused) => return refused,
    };
    let mut body = String::from("<h2>Waiting for you</h2>");
    let pending = pending["approvals"].as_array().cloned().unwrap_or_default();
    if pending.is_empty() {
        body.push_str("<p class=\"empty\">Nothing waits for a decision.</p>");
    }
    for approval in &pending {
        let id = approval["id"].as_str().unwrap_or_default();
        let _ = write!(
            body,
            "<article class=\"card approval\" id=\"a-{id}\" aria-labelledby=\"a-{id}-title\">\
             <h3 id=\"a-{id}-title\">{title}</h3><p class=\"meta\">Asked by {who}, {at}</p>{details}\
             <form method=\"post\" action=\"/approvals/{u}/decide\">{csrf}\
             <input type=\"hidden\" name=\"requestId\" value=\"{r}\">\
             <label for=\"c-{id}\">Comment (shown to the agent)</label>\
             <textarea id=\"c-{id}\" name=\"comment\" rows=\"2\" maxlength=\"4000\"></textarea>\
             <div class=\"buttons\"><button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button> \
             <button type=\"submit\" name=\"decision\" value=\"reject\" class=\"reject\">Reject</button></div></form></article>",
            id = escape(id),
            u = url_part(id),
            title = escape(approval["title"].as_str().unwrap_or_default()),
            who = escape(
                &approval["requestedByAgentId"]
                    .as_str()
                    .map(|a| names.of(a))
                    .unwrap_or_else(|| "a workflow".into())
            ),
            at = html::time(approval["createdAt"].as_str().unwrap_or_default()),
            details = approval["details"]
                .as_str()
                .map(|d| format!("<div class=\"text\">{}</div>", markdown::render(d)))
                .unwrap_or_default(),
            csrf = html::csrf_field(&session.csrf),
            r = request_id(),
        );
    }
    body.push_str("<h2>Decided</h2>");
    let decided: Vec<&Value> = recent["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["status"] != json!("pending"))
        .collect();
    if decided.is_empty() {
        body.push_str("<p class=\"empty\">No decision yet.</p>");
    } else {
        body.push_str(
            "<table><thead><tr><th scope=\"col\">Approval</th><th scope=\"col\">Decision</th>\
             <th scope=\"col\">By</th><th scope=\"col\">Comment</th><th scope=\"col\">When</th></tr></thead><tbody>",
        );
        for approval in decided {
            let _ = write!(
                body,
                "<tr id=\"a-{id}\"><td>{title}</td><td>{status}</td><td>{by}</td><td>{comment}</td><td>{at}</td></tr>",
                id = escape(approval["id"].as_str().unwrap_or_default()),
                title = escape(approval["title"].as_str().unwrap_or_default()),
                status = escape(approval["status"].as_str().unwrap_or_default()),
                by = escape(
                    &approval["decidedByHumanId"]
                        .as_str()
                        .map(|h| names.of(h))
                        .unwrap_or_default()
                ),
                comment = escape(approval["comment"].as_str().unwrap_or_default()),
                at = html::time(
                    approval["decidedAt"]
                        .as_str()
                        .or(approval["updatedAt"].as_str())
                        .unwrap_or_default()
                ),
            );
        }
        body.push_str("</tbody></table>");
    }
    page("Approvals", Nav::Approvals, &session, &body)
}

/// `POST /approvals/{id}/decide` with `decision` and `comment`.
pub async fn decide(
    State(state): State<DaemonState>,
    Path(approval): Path<String>,
    form: CsrfForm,
) -> Response {
    let mut input = json!({
        "approvalId": approval,
        "decision": form.field("decision").unwrap_or_default(),
    });
    if let Some(comment) = form.field("comment") {
        input["comment"] = json!(comment);
    }
    if let Some(id) = form.field("requestId") {
        input["requestId"] = json!(id);
    }
    match call(&state, H::ApprovalDecide, input).await {
        Ok(_) => see_other(&format!("/approvals#a-{}", url_part(&approval))),
        Err(refused) => refused,
    }
}

/// `GET /runtimes`: the runtimes this daemon runs now, each with a stop button.
pub async fn runtimes(
    State(state): State<DaemonState>,
    Extension(session): Extension<Session>,
) -> Response {
    let runs = state.dispatcher.runs();
    let mut body = String::new();
    if runs.is_empty() {
        body.push_str(
            "<p class=\"empty\">No runtime runs now. Start one with <code>agentteam run --agent \
             NAME -- PROGRAM</code>.</p>",
        );
    } else {
        body.push_str(
            "<table><thead><tr><th scope=\"col\">Agent</th><th scope=\"col\">Runtime</th>\
             <th scope=\"col\">Driver</th><th scope=\"col\">Turn</th><th scope=\"col\">Credential expires</th>\
             <th scope=\"col\">Requests in flight</th><th scope=\"col\">Started</th><th scope=\"col\">Stop</th></tr></thead><tbody>",
        );
        for run in &runs {
            let handle = state
                .agents
                .store
                .get(&run.agent_id)
                .map_or_else(|| run.agent_id.clone(), |stored| stored.profile.handle);
            let (expires, in_flight) = state
                .authorizations
                .of_run(&run.run_id)
                .unwrap_or((None, 0));
            let turn = run.turn.as_ref().map_or_else(
                || "none".to_string(),
                |turn| {
                    format!(
                        "<a href=\"/c/{}?around={}\">{}</a>",
                        url_part(&turn.target),
                        url_part(&turn.message_id),
                        escape(&turn.target)
                    )
                },
            );
            let _ = write!(
                body,
                "<tr id=\"r-{id}\"><td>{handle}</td><td>{program}</td><td>{driver}</td><td>{turn}</td>\
                 <td>{expires}</td><td>{in_flight}</td><td>{started}</td><td>\
                 <form method=\"post\" action=\"/runtimes/{u}/stop\">{csrf}\
                 <button type=\"submit\" class=\"reject\" aria-label=\"Stop {handle}'s {program} run\">Stop</button></form></td></tr>",
                id = escape(&run.run_id),
                u = url_part(&run.run_id),
                handle = escape(&handle),
                program = escape(&run.program),
                driver = escape(
                    serde_json::to_value(run.runtime)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .as_deref()
                        .unwrap_or("generic")
                ),
                expires = expires.map_or_else(|| "not issued".into(), html::time_ms),
                started = html::time_ms(run.started_at_ms),
                csrf = html::csrf_field(&session.csrf),
            );
        }
        body.push_str("</tbody></table>");
    }
    page("Runtimes", Nav::Runtimes, &session, &body)
}

/// `POST /runtimes/{runId}/stop`: ends that run (its credential revoked, its processes stopped).
pub async fn stop(
    State(state): State<DaemonState>,
    Path(run_id): Path<String>,
    _form: CsrfForm,
) -> Response {
    if let Some(mut ended) = state.dispatcher.stop(&run_id) {
        tracing::info!(run = %run_id, "run stopped from the console");
        // The page that follows no longer lists it (a lease's end is bounded).
        let _ = tokio::time::timeout(STOP_WAIT, ended.wait_for(|ended| *ended)).await;
        see_other("/runtimes")
    } else {
        refusal(
            StatusCode::NOT_FOUND,
            "No such run",
            "That run is not running any more.",
        )
    }
}

#[derive(serde::Deserialize)]
pub struct AuditQuery {
    agent: Option<String>,
    cursor: Option<String>,
}

/// `GET /audit?agent=&cursor=`: the records of the person's agents and devices, newest first.
pub async fn audit(
    State(state): State<DaemonState>,
    Extension(session): Extension<Session>,
    Query(query): Query<AuditQuery>,
) -> Response {
    let names = match names(&state).await {
        Ok(names) => names,
        Err(refused) => return refused,
    };
    let agent = query.agent.filter(|a| !a.is_empty());
    let mut input = json!({ "limit": 50 });
    if let Some(agent) = &agent {
        input["agentId"] = json!(agent);
    }
    if let Some(cursor) = &query.cursor {
        input["cursor"] = json!(cursor);
    }
    let answer = match call(&state, H::AuditList, input).await {
        Ok(answer) => answer,
        Err(refused) => return refused,
    };
    let mut body = String::from(
        "<form method=\"get\" action=\"/audit\" class=\"inline\"><label for=\"agent\">Agent</label> \
         <select id=\"agent\" name=\"agent\"><option value=\"\">All of yours</option>",
    );
    for (id, handle, owned) in &names.agents {
        if !owned {
            continue;
        }
        let _ = write!(
            body,
            "<option value=\"{id}\"{selected}>{handle}</option>",
            id = escape(id),
            selected = if agent.as_deref() == Some(id) {
                " selected"
            } else {
                ""
            },
            handle = escape(handle),
        );
    }
    body.push_str("</select> <button type=\"submit\">Show</button></form>");
    let records = answer["records"].as_array().cloned().unwrap_or_default();
    if records.is_empty() {
        body.push_str("<p class=\"empty\">No records.</p>");
    } else {
        body.push_str(
            "<table><thead><tr><th scope=\"col\">When</th><th scope=\"col\">Who</th><th scope=\"col\">Kind</th>\
             <th scope=\"col\">Action</th><th scope=\"col\">Outcome</th><th scope=\"col\">Time taken</th></tr></thead><tbody>",
        );
        for record in &records {
            let who = record["agentId"].as_str().map_or_else(
                || {
                    record["deviceId"]
                        .as_str()
                        .map_or_else(|| "?".into(), |d| format!("device {d}"))
                },
                |a| names.of(a),
            );
            let _ = write!(
                body,
                "<tr><td>{at}</td><td>{who}</td><td>{family}</td><td><code>{action}</code></td><td class=\"{class}\">{outcome}</td><td>{ms:.1} ms</td></tr>",
                at = html::time(record["at"].as_str().unwrap_or_default()),
                who = escape(&who),
                family = escape(record["family"].as_str().unwrap_or_default()),
                action = escape(record["action"].as_str().unwrap_or_default()),
                class = if record["outcome"] == json!("ok") {
                    "ok"
                } else {
                    "failed"
                },
                outcome = escape(record["outcome"].as_str().unwrap_or_default()),
                ms = record["durationUs"].as_f64().unwrap_or(0.0) / 1000.0,
            );
        }
        body.push_str("</tbody></table>");
    }
    if let Some(next) = answer["nextCursor"].as_str() {
        let _ = write!(
            body,
            "<p><a href=\"/audit?{}cursor={}\">Older records</a></p>",
            agent
                .as_deref()
                .map(|a| format!("agent={}&amp;", url_part(a)))
                .unwrap_or_default(),
            url_part(next)
        );
    }
    page("Audit", Nav::Audit, &session, &body)
}

/// `GET /costs`: what AgentTeam costs each runtime, from the runtimes' own session records on
/// this machine (`agentteam token analyze`), with the fixed and carried cost of each session.
pub async fn costs(
    State(state): State<DaemonState>,
    Extension(session): Extension<Session>,
) -> Response {
    let now = state.clock.now_ms();
    let report = {
        let mut cached = state.console.costs.lock().await;
        match cached.as_ref() {
            Some((at, report)) if now - at < COSTS_FOR_MS => report.clone(),
            _ => {
                let read = tokio::task::spawn_blocking(|| {
                    let options = crate::token::Options {
                        runtimes: crate::token::Options::with_runtimes(&[]),
                        top: 10,
                        ..Default::default()
                    };
                    crate::token::analyze(
                        &options,
                        &crate::token::read::Roots::from_env(),
                        |_, _| {},
                    )
                })
                .await;
                let Ok(report) = read else {
                    return refusal(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "Not possible",
                        "The session records could not be read.",
                    );
                };
                let report = Arc::new(report);
                *cached = Some((now, report.clone()));
                report
            }
        }
    };
    let mut body = String::from(
        "<p>From the session records the runtimes keep on this machine, as <code>agentteam token \
         analyze</code> reads them. <strong>Fixed</strong>: what AgentTeam adds to every request \
         (its tools, instructions and guidance) times the session's requests. \
         <strong>Carried</strong>: AgentTeam results re-read by later requests. Token counts \
         are estimates (o200k_base).</p><h2>Fixed cost per request</h2>\
         <table><thead><tr><th scope=\"col\">Runtime</th><th scope=\"col\">Tokens</th><th scope=\"col\">Bytes</th></tr></thead><tbody>",
    );
    for fixed in &report.fixed {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(fixed.runtime),
            fixed.tokens,
            html::size(fixed.bytes)
        );
    }
    body.push_str("</tbody></table><h2>Sessions</h2>");
    let mut sessions: Vec<&crate::token::SessionRow> = report
        .sessions
        .iter()
        .filter(|row| row.session.agentteam || row.call_tokens > 0)
        .collect();
    sessions.sort_by_key(|row| std::cmp::Reverse(row.fixed_tokens + row.carried_tokens));
    if sessions.is_empty() {
        let _ = write!(
            body,
            "<p class=\"empty\">No session of an AgentTeam launch found ({} record files read).</p>",
            report.files
        );
    } else {
        body.push_str(&chart(&sessions[..sessions.len().min(CHART_SESSIONS)]));
        body.push_str(
            "<table><thead><tr><th scope=\"col\">Runtime</th><th scope=\"col\">Session</th><th scope=\"col\">Requests</th>\
             <th scope=\"col\">Fixed</th><th scope=\"col\">Carried</th><th scope=\"col\">Share of input</th></tr></thead><tbody>",
        );
        for row in sessions.iter().take(100) {
            let _ = write!(
                body,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} %</td></tr>",
                escape(row.session.runtime),
                escape(&row.session.id.chars().take(36).collect::<String>()),
                row.session.requests,
                row.fixed_tokens,
                row.carried_tokens,
                row.fixed_share * 100.0
            );
        }
        body.push_str("</tbody></table>");
    }
    page("Costs", Nav::Costs, &session, &body)
}

/// A bar per session: its fixed and its carried tokens, stacked; the numbers are in the table
/// below it too.
fn chart(rows: &[&crate::token::SessionRow]) -> String {
    const WIDTH: f64 = 640.0;
    const LABEL: f64 = 200.0;
    const BAR: f64 = 18.0;
    let most = rows
        .iter()
        .map(|row| row.fixed_tokens + row.carried_tokens)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let height = rows.len() as f64 * (BAR + 6.0) + 30.0;
    let mut out = format!(
        "<figure><svg class=\"chart\" viewBox=\"0 0 {w} {height}\" role=\"img\" aria-labelledby=\"chart-title\">\
         <title id=\"chart-title\">Fixed and carried tokens per session</title>",
        w = WIDTH + LABEL + 80.0,
    );
    for (i, row) in rows.iter().enumerate() {
        let y = i as f64 * (BAR + 6.0);
        let fixed = row.fixed_tokens as f64 / most * WIDTH;
        let carried = row.carried_tokens as f64 / most * WIDTH;
        let _ = write!(
            out,
            "<text x=\"0\" y=\"{ty}\" class=\"label\">{runtime} {id}</text>\
             <rect x=\"{LABEL}\" y=\"{y}\" width=\"{fixed:.1}\" height=\"{BAR}\" class=\"fixed\"></rect>\
             <rect x=\"{cx:.1}\" y=\"{y}\" width=\"{carried:.1}\" height=\"{BAR}\" class=\"carried\"></rect>\
             <text x=\"{tx:.1}\" y=\"{ty}\" class=\"label\">{total}</text>",
            ty = y + BAR - 4.0,
            runtime = escape(row.session.runtime),
            id = escape(&row.session.id.chars().take(12).collect::<String>()),
            cx = LABEL + fixed,
            tx = LABEL + fixed + carried + 4.0,
            total = row.fixed_tokens + row.carried_tokens,
        );
    }
    let legend = height - 10.0;
    let _ = write!(
        out,
        "<rect x=\"{LABEL}\" y=\"{ly}\" width=\"12\" height=\"12\" class=\"fixed\"></rect>\
         <text x=\"{a}\" y=\"{legend}\" class=\"label\">fixed</text>\
         <rect x=\"{b}\" y=\"{ly}\" width=\"12\" height=\"12\" class=\"carried\"></rect>\
         <text x=\"{c}\" y=\"{legend}\" class=\"label\">carried</text></svg>\
         <figcaption>Fixed and carried tokens of the heaviest sessions.</figcaption></figure>",
        ly = legend - 10.0,
        a = LABEL + 16.0,
        b = LABEL + 80.0,
        c = LABEL + 96.0,
    );
    out
}

/// `GET /attachments/{id}`: the file, as a download only: never rendered on the console's
/// origin, whatever it claims to be.
pub async fn attachment(
    State(state): State<DaemonState>,
    Path(attachment): Path<String>,
) -> Response {
    let downloaded = match call(
        &state,
        H::AttachmentDownload,
        json!({ "attachmentId": attachment }),
    )
    .await
    {
        Ok(downloaded) => downloaded,
        Err(refused) => return refused,
    };
    use base64::Engine;
    let Ok(bytes) = base64::engine::general_purpose::STANDARD
        .decode(downloaded["contentBase64"].as_str().unwrap_or_default())
    else {
        return refusal(
            StatusCode::BAD_GATEWAY,
            "Not possible",
            "The server sent an attachment that is not base64.",
        );
    };
    let name = downloaded["attachment"]["name"]
        .as_str()
        .unwrap_or("attachment");
    // The name as a quoted ASCII fallback and as RFC 8187 UTF-8.
    let fallback: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ' ') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = format!(
        "attachment; filename=\"{fallback}\"; filename*=UTF-8''{}",
        url_part(name)
    );
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    response
}
