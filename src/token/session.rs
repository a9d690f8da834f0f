//! One session as every reader reports it: its model requests with their recorded usage, the
//! AgentTeam calls in it with their results' sizes, and where its context was compacted. Readers
//! feed a `Builder` in the order the runtime wrote its records; `Builder::finish` works out the
//! carried cost of every result.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::contract::preapproval::EXEC_ALIAS;
use crate::contract::tool_guidance::RuntimeNaming;
use crate::daemon::runtime::driver::Family;

use super::count::{self, Method};

/// Tokens as a runtime recorded them for one request, with cache reads and writes apart from the
/// uncached input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Usage {
    /// The context the request carried: every input token, cached or not.
    pub fn context(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    pub fn total(&self) -> u64 {
        self.context().saturating_add(self.output)
    }

    /// Adds `other` (saturating: the figures are a runtime's, written as it pleased).
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
    }
}

/// What an AgentTeam call was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "bridge", rename_all = "snake_case")]
pub enum Bridge {
    /// An MCP tool, by its raw name.
    Mcp { tool: String },
    /// `agentteam exec <domain> <action>` through the shell tool.
    Exec { domain: String, action: String },
}

impl Bridge {
    /// `message_send`, `exec task create`.
    pub fn label(&self) -> String {
        match self {
            Bridge::Mcp { tool } => tool.clone(),
            Bridge::Exec { domain, action } => format!("exec {domain} {action}"),
        }
    }
}

/// One AgentTeam call and what its result costs. Ids and sizes only: never the call's arguments
/// or its result's text.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    pub id: String,
    /// The name the model called (`mcp__agentteam__message_send`, `Bash`).
    pub name: String,
    #[serde(flatten)]
    pub bridge: Bridge,
    pub result_bytes: u64,
    pub result_tokens: u64,
    /// The later requests that carried the result (until a compaction or the end).
    pub carried_by: u64,
    /// `result_tokens` times `carried_by`.
    pub carried_tokens: u64,
    #[serde(skip)]
    entered_at: Option<usize>,
    /// The compactions recorded before the result: the next one ends its carry.
    #[serde(skip)]
    compactions_before: usize,
}

/// One session, read.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub runtime: &'static str,
    pub id: String,
    #[serde(serialize_with = "lossy_path")]
    pub path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    pub requests: u64,
    pub usage: Usage,
    pub compactions: u64,
    /// How the calls' result tokens were obtained.
    pub count_method: Method,
    pub calls: Vec<Call>,
    /// Each estimate's error against the growth of the recorded input it caused, as a fraction
    /// (`estimate / growth - 1`), for results that were alone between two requests.
    #[serde(skip)]
    pub estimate_errors: Vec<f64>,
    pub malformed_lines: u64,
    pub unknown_records: u64,
    /// AgentTeam's fixed cost per request as the runtime recorded the request it sent
    /// (`(bytes, tokens)`), where it records it.
    #[serde(skip)]
    pub recorded_fixed: Option<(u64, u64)>,
    /// Whether the records show an AgentTeam launch (only such a session bears the fixed cost).
    pub agentteam: bool,
}

/// A path as text, whatever its bytes (a JSON string must be UTF-8).
fn lossy_path<S: serde::Serializer>(
    path: &std::path::Path,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

/// What a reader found besides sessions.
/// Collects one session in the order its records were written.
pub struct Builder {
    family: Family,
    id: String,
    path: PathBuf,
    pub cwd: Option<String>,
    pub model: Option<String>,
    started: Option<String>,
    ended: Option<String>,
    usages: Vec<Usage>,
    keys: HashMap<String, usize>,
    compactions: Vec<usize>,
    calls: Vec<Call>,
    by_id: HashMap<String, usize>,
    /// Tool results (any tool) that entered before each request.
    results_before: HashMap<usize, u32>,
    tokenize: bool,
    pub malformed: u64,
    pub unknown: u64,
    /// The records show an AgentTeam launch: the guidance, the MCP instructions or a call.
    pub agentteam: bool,
}

/// Words only an AgentTeam launch's records hold: the guidance's headline, the MCP instructions'.
pub const LAUNCH_MARKS: [&str; 2] = [
    "You are running as an AgentTeam agent",
    "AgentTeam tools for this agent.",
];

impl Builder {
    pub fn new(family: Family, id: impl Into<String>, path: PathBuf, tokenize: bool) -> Builder {
        Builder {
            family,
            id: id.into(),
            path,
            cwd: None,
            model: None,
            started: None,
            ended: None,
            usages: Vec::new(),
            keys: HashMap::new(),
            compactions: Vec::new(),
            calls: Vec::new(),
            by_id: HashMap::new(),
            results_before: HashMap::new(),
            tokenize,
            malformed: 0,
            unknown: 0,
            agentteam: false,
        }
    }

    pub fn set_id(&mut self, id: &str) {
        if !id.is_empty() {
            self.id = id.to_string();
        }
    }

    /// A record's time (RFC 3339): the session spans the first to the last.
    pub fn time(&mut self, at: &str) {
        if at.is_empty() {
            return;
        }
        if self.started.as_deref().is_none_or(|s| at < s) {
            self.started = Some(at.to_string());
        }
        if self.ended.as_deref().is_none_or(|e| at > e) {
            self.ended = Some(at.to_string());
        }
    }

    /// One model request's recorded usage. A `key` seen before is the same request written again
    /// (a streaming snapshot, a block split): the copy with the larger total stands.
    pub fn request(&mut self, key: Option<&str>, usage: Usage) {
        if let Some(key) = key {
            if let Some(&at) = self.keys.get(key) {
                if usage.total() > self.usages[at].total() {
                    self.usages[at] = usage;
                }
                return;
            }
            self.keys.insert(key.to_string(), self.usages.len());
        }
        self.usages.push(usage);
    }

    /// Whether a request with `key` is in this session already.
    pub fn has_key(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }

    pub fn requests(&self) -> usize {
        self.usages.len()
    }

    /// The context was compacted before the next request: results before it are no longer carried.
    pub fn compaction(&mut self) {
        self.compactions.push(self.usages.len());
    }

    /// A tool call: kept when it is an AgentTeam call. `command` is a shell tool's command line.
    pub fn call(&mut self, id: &str, name: &str, command: Option<&str>) {
        let bridge = classify(self.family, name, command);
        self.call_as(id, name, bridge);
    }

    /// A Codex call: a function in a namespace (`mcp__agentteam`) or a shell command.
    pub fn codex_call(
        &mut self,
        id: &str,
        namespace: Option<&str>,
        name: &str,
        command: Option<&str>,
    ) {
        let bridge = match namespace {
            Some(namespace) => {
                RuntimeNaming::resolve_codex(namespace, name).map(|tool| Bridge::Mcp {
                    tool: tool.tool.name.to_string(),
                })
            }
            None if name == "shell" => command.and_then(exec_call),
            // `exec_command`, and an older rollout's flat `mcp__agentteam__<tool>`.
            None => classify(self.family, name, command),
        };
        let shown = namespace.map_or(name.to_string(), |ns| format!("{ns}__{name}"));
        self.call_as(id, &shown, bridge);
    }

    fn call_as(&mut self, id: &str, name: &str, bridge: Option<Bridge>) {
        let Some(bridge) = bridge else { return };
        self.agentteam = true;
        // The usage pass reads no call.
        if !self.tokenize {
            return;
        }
        if self.by_id.contains_key(id) {
            return;
        }
        self.by_id.insert(id.to_string(), self.calls.len());
        self.calls.push(Call {
            id: id.to_string(),
            name: name.to_string(),
            bridge,
            result_bytes: 0,
            result_tokens: 0,
            carried_by: 0,
            carried_tokens: 0,
            entered_at: None,
            compactions_before: 0,
        });
    }

    /// Whether results are read and counted (not a usage-totals pass).
    pub fn tokenizes(&self) -> bool {
        self.tokenize
    }

    /// The AgentTeam calls whose results have not come yet.
    pub fn pending(&self) -> impl Iterator<Item = &str> {
        self.calls
            .iter()
            .filter(|c| c.entered_at.is_none())
            .map(|c| c.id.as_str())
    }

    /// `n` results of other tools, skipped unread: they entered before the next request.
    pub fn other_results(&mut self, n: usize) {
        if n > 0 {
            let before = self.results_before.entry(self.usages.len()).or_default();
            *before = before.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        }
    }

    /// Whether `id` is an AgentTeam call's: only its result needs reading.
    pub fn is_ours(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// A tool result, as the model was handed it. The first result of a call stands.
    pub fn result(&mut self, id: &str, text: &str) {
        self.other_results(1);
        let Some(&at) = self.by_id.get(id) else {
            return;
        };
        let entered = self.usages.len();
        let compactions = self.compactions.len();
        let tokenize = self.tokenize;
        let call = &mut self.calls[at];
        if call.entered_at.is_some() {
            return;
        }
        call.entered_at = Some(entered);
        call.compactions_before = compactions;
        call.result_bytes = text.len() as u64;
        if tokenize {
            call.result_tokens = count::tokens(text);
        }
    }

    pub fn finish(self) -> Session {
        let Builder {
            family,
            id,
            path,
            cwd,
            model,
            started,
            ended,
            usages,
            compactions,
            mut calls,
            results_before,
            malformed,
            unknown,
            agentteam,
            ..
        } = self;
        let requests = usages.len();
        let mut estimate_errors = Vec::new();
        for call in &mut calls {
            let Some(entered) = call.entered_at else {
                continue;
            };
            // Carried until the first compaction recorded after the result, whether it came
            // before the next request or later.
            let until = compactions
                .get(call.compactions_before)
                .copied()
                .unwrap_or(requests)
                .min(requests);
            call.carried_by = until.saturating_sub(entered) as u64;
            call.carried_tokens = call.carried_by.saturating_mul(call.result_tokens);
            // The growth of recorded context across the gap the result alone entered in.
            if entered >= 1
                && entered < requests
                && results_before.get(&entered) == Some(&1)
                && !compactions.contains(&entered)
                && call.result_tokens > 0
            {
                let before = &usages[entered - 1];
                let growth = usages[entered].context().saturating_sub(before.total());
                if growth > 0 {
                    estimate_errors.push(call.result_tokens as f64 / growth as f64 - 1.0);
                }
            }
        }
        let mut usage = Usage::default();
        for u in &usages {
            usage.add(u);
        }
        Session {
            runtime: family.as_str(),
            count_method: count::method_for(model.as_deref()),
            id,
            path,
            cwd,
            model,
            started,
            ended,
            requests: requests as u64,
            usage,
            compactions: compactions.len() as u64,
            calls,
            estimate_errors,
            malformed_lines: malformed,
            unknown_records: unknown,
            recorded_fixed: None,
            agentteam,
        }
    }
}

/// What an `agentteam exec` call's domain or action is shown as when it is not a built-in
/// action's (an extension's, or a word that may be the call's argument).
pub const OTHER: &str = "(other)";

/// What a call of `family`'s named `name` (with a shell tool's `command`) is, when it is
/// AgentTeam's: one of its MCP tools under the runtime's name, or `agentteam exec` through the
/// runtime's shell tool.
pub fn classify(family: Family, name: &str, command: Option<&str>) -> Option<Bridge> {
    if let Some(tool) = family.naming().resolve(name) {
        Some(Bridge::Mcp {
            tool: tool.tool.name.to_string(),
        })
    } else if Some(name) == family.shell_tool() {
        command.and_then(exec_call)
    } else {
        None
    }
}

/// `agentteam exec <domain> <action> …` or the pre-approved `agentteam-exec <domain> <action> …`,
/// at the start of a command line (after `cd …&&` or an environment assignment, as a model may
/// write it).
pub fn exec_call(command: &str) -> Option<Bridge> {
    let mut words = command.split_whitespace().peekable();
    while let Some(word) = words.next() {
        let program = word.rsplit('/').next().unwrap_or(word);
        let rest: Vec<&str> = if program == "agentteam" {
            if words.peek() != Some(&"exec") {
                return None;
            }
            words.next();
            words.by_ref().take(2).collect()
        } else if program == EXEC_ALIAS {
            words.by_ref().take(2).collect()
        } else if word.contains('=') || word == "&&" || word == ";" || word == "cd" {
            continue;
        } else if words.peek() == Some(&"&&") {
            // `cd <dir> &&`: the directory.
            continue;
        } else {
            return None;
        };
        let [domain, action] = rest[..] else {
            return None;
        };
        if domain.starts_with('-') || action.starts_with('-') {
            return None;
        }
        // Only names the catalog knows are shown: any other word may be the call's argument.
        let (domain, action) = if crate::contract::catalog::find_action(domain, action).is_some() {
            (domain, action)
        } else if crate::contract::catalog::find_domain(domain).is_some() {
            (domain, OTHER)
        } else {
            (OTHER, OTHER)
        };
        return Some(Bridge::Exec {
            domain: domain.to_string(),
            action: action.to_string(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_calls_are_told_by_their_program_and_words() {
        let exec = |d: &str, a: &str| {
            Some(Bridge::Exec {
                domain: d.into(),
                action: a.into(),
            })
        };
        assert_eq!(
            exec_call("agentteam exec task create '{}'"),
            exec("task", "create")
        );
        assert_eq!(
            exec_call("agentteam-exec task get '{}'"),
            exec("task", "get")
        );
        assert_eq!(
            exec_call("cd /tmp && agentteam exec review add '{}'"),
            exec("review", "add")
        );
        assert_eq!(
            exec_call("/usr/bin/agentteam exec team list"),
            exec("team", "list")
        );
        assert_eq!(
            exec_call("agentteam exec task {\"secret\":1}"),
            exec("task", OTHER)
        );
        assert_eq!(
            exec_call("agentteam exec my words here"),
            exec(OTHER, OTHER)
        );
        assert_eq!(exec_call("agentteam run --agent a"), None);
        assert_eq!(exec_call("agentteam exec --help"), None);
        assert_eq!(exec_call("echo agentteam exec task create"), None);
        assert_eq!(exec_call("touch x"), None);
    }

    #[test]
    fn a_compaction_right_after_a_result_ends_its_carry() {
        let mut b = Builder::new(Family::Claude, "s", PathBuf::new(), true);
        b.request(None, Usage::default());
        b.call("c1", "mcp__agentteam__kb_search", None);
        b.result("c1", "found");
        b.compaction();
        b.request(None, Usage::default());
        b.request(None, Usage::default());
        let s = b.finish();
        assert!(s.agentteam);
        assert_eq!((s.calls[0].carried_by, s.calls[0].carried_tokens), (0, 0));
    }

    #[test]
    fn a_result_is_carried_until_the_next_compaction() {
        let mut b = Builder::new(Family::Claude, "s", PathBuf::new(), true);
        let u = |input| Usage {
            input,
            ..Usage::default()
        };
        b.request(None, u(100));
        b.call("c1", "mcp__agentteam__message_send", None);
        b.result("c1", "hello world");
        b.request(None, u(102));
        b.request(Some("k"), u(110));
        b.request(Some("k"), u(120)); // the same request again, fuller: it replaces
        b.compaction();
        b.request(None, u(50));
        let s = b.finish();
        assert_eq!(s.requests, 4);
        assert_eq!(s.usage.input, 100 + 102 + 120 + 50);
        let call = &s.calls[0];
        assert_eq!(
            (call.result_tokens, call.carried_by, call.carried_tokens),
            (2, 2, 4)
        );
        assert_eq!(s.estimate_errors, vec![0.0]);
    }
}
