//! Environment hygiene for runtime launches.
//!
//! The Exec, Extension, MCP and Memory variables are daemon-owned: whatever a shell captured, inherited
//! or spelled in mixed case is removed (names compared case-insensitively), and a launch gets
//! only the daemon's fresh pair of paths and URLs. A bearer token is never placed in an
//! environment variable or in argv.

/// Variable name prefixes the daemon owns, compared after ASCII upper-casing.
pub const DAEMON_OWNED_PREFIXES: &[&str] = &[
    "AGENTTEAM_EXEC_",
    "AGENTTEAM_EXTENSION_",
    "AGENTTEAM_MCP_",
    "AGENTTEAM_MEMORY_",
];
/// The canonical Exec base URL variable.
pub const EXEC_BASE_URL: &str = "AGENTTEAM_EXEC_BASE_URL";
/// The canonical Exec token file variable.
pub const EXEC_TOKEN_FILE: &str = "AGENTTEAM_EXEC_TOKEN_FILE";
/// The MCP route of the launch's server and agent.
pub const MCP_URL: &str = "AGENTTEAM_MCP_URL";
/// The launch's MCP-scope token file.
pub const MCP_TOKEN_FILE: &str = "AGENTTEAM_MCP_TOKEN_FILE";
/// The agent's managed memory directory (Markdown files `memory_search` finds).
pub const MEMORY_DIR: &str = "AGENTTEAM_MEMORY_DIR";

/// Hosts a runtime's own HTTP clients must reach directly, never through the user's proxy: the
/// daemon's loopback bridges (a runtime's MCP client sends its bearer there).
pub const LOOPBACK_NO_PROXY: [&str; 3] = ["127.0.0.1", "localhost", "::1"];

/// The daemon's fresh variables of one launch: paths and URLs only, never a token.
#[derive(Debug, Clone)]
pub struct LaunchVariables {
    pub exec_base_url: String,
    pub exec_token_file: String,
    pub mcp_url: String,
    pub mcp_token_file: String,
    /// The launch's private bin directory, put first on `PATH`: its `agentteam` is the daemon's
    /// own executable (spec: canonical binary path selection).
    pub bin_dir: String,
    /// The agent's memory directory.
    pub memory_dir: String,
}

/// True when `name` holds an OpenTelemetry collector's headers (`OTEL_EXPORTER_OTLP_HEADERS`, or
/// a signal's own), in any spelling: the daemon's export credential, never a runtime's.
pub fn is_collector_headers(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper
        .strip_prefix("OTEL_EXPORTER_OTLP_")
        .is_some_and(|rest| {
            matches!(
                rest,
                "HEADERS" | "TRACES_HEADERS" | "METRICS_HEADERS" | "LOGS_HEADERS"
            )
        })
}

/// True when `name` is daemon-owned in any spelling (`agentteam_exec_token`, `AgentTeam_Exec_X`).
pub fn is_daemon_owned(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    DAEMON_OWNED_PREFIXES
        .iter()
        .any(|prefix| upper.starts_with(prefix))
}

/// An environment fit for a child process of the daemon: every child it starts (a runtime, a
/// version probe, a helper) gets exactly one of these and nothing inherited. The only way to make
/// one from what a launcher sent is [`ChildEnv::inherit`], which strips every daemon-owned
/// variable in any spelling and the trace collector's headers; only [`runtime_env`] adds the
/// daemon's fresh variables back, for the runtime of a launch alone.
#[derive(Debug, Clone, Default)]
pub struct ChildEnv {
    vars: Vec<(String, String)>,
}

impl ChildEnv {
    /// `inherited` (a launcher's environment) without any daemon-owned variable (a parent
    /// runtime's credential paths and URLs, whatever their case) or collector headers.
    pub fn inherit(inherited: Vec<(String, String)>) -> ChildEnv {
        let mut withheld = Vec::new();
        let vars = inherited
            .into_iter()
            .filter(|(name, _)| {
                if is_collector_headers(name) {
                    withheld.push(name.clone());
                }
                !is_daemon_owned(name) && !is_collector_headers(name)
            })
            .collect();
        if !withheld.is_empty() {
            tracing::info!(
                variables = withheld.join(","),
                "the trace collector's headers are not passed to the daemon's child processes"
            );
        }
        ChildEnv { vars }
    }

    /// The variables, in order (a later one of the same name wins).
    pub fn vars(&self) -> &[(String, String)] {
        &self.vars
    }

    /// Adds a driver's own variables (paths and settings, never a token).
    pub fn extend(&mut self, extra: Vec<(String, String)>) {
        self.vars.extend(extra);
    }

    /// A command for `program` with exactly this environment (nothing inherited from the daemon),
    /// and the huge-page setting the daemon started with.
    pub fn command(&self, program: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .env_clear()
            .envs(self.vars.iter().map(|(k, v)| (k, v)));
        crate::platform::process::child_keeps_huge_pages(command.as_std_mut());
        command
    }
}

/// The environment of a new runtime: `inherited` (already stripped), plus the launch's canonical
/// URLs and token-file paths; `PATH` starts with the launch's bin directory; `NO_PROXY` and
/// `no_proxy` name the loopback hosts (the user's proxy stays for everything else, such as the
/// runtime's model traffic).
pub fn runtime_env(inherited: ChildEnv, fresh: &LaunchVariables) -> ChildEnv {
    let mut path = None;
    let mut no_proxy: [Option<String>; 2] = [None, None];
    let mut env: Vec<(String, String)> = Vec::with_capacity(inherited.vars.len() + 8);
    for (name, value) in inherited.vars {
        match name.as_str() {
            "PATH" => path = Some(value),
            "NO_PROXY" => no_proxy[0] = Some(value),
            "no_proxy" => no_proxy[1] = Some(value),
            _ => env.push((name, value)),
        }
    }
    let path = match path.filter(|p| !p.is_empty()) {
        Some(rest) => format!("{}:{rest}", fresh.bin_dir),
        None => format!("{}:/usr/local/bin:/usr/bin:/bin", fresh.bin_dir),
    };
    env.push(("PATH".to_string(), path));
    for (name, value) in ["NO_PROXY", "no_proxy"].into_iter().zip(no_proxy) {
        env.push((name.to_string(), with_loopback(value.as_deref())));
    }
    env.push((EXEC_BASE_URL.to_string(), fresh.exec_base_url.clone()));
    env.push((EXEC_TOKEN_FILE.to_string(), fresh.exec_token_file.clone()));
    env.push((MCP_URL.to_string(), fresh.mcp_url.clone()));
    env.push((MCP_TOKEN_FILE.to_string(), fresh.mcp_token_file.clone()));
    env.push((MEMORY_DIR.to_string(), fresh.memory_dir.clone()));
    ChildEnv { vars: env }
}

/// `list` (a `NO_PROXY` value) with every loopback host added once.
fn with_loopback(list: Option<&str>) -> String {
    let mut hosts: Vec<&str> = list
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    for host in LOOPBACK_NO_PROXY {
        if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            hosts.push(host);
        }
    }
    hosts.join(",")
}

/// Removes every daemon-owned variable from this process's own environment, so a daemon started
/// inside another runtime does not carry its parent's credentials into anything it starts.
///
/// Call it first thing in `main`, before any thread exists. Returns the removed names (lossy
/// UTF-8) for the log; their values, which may name credential files, are never kept.
pub fn scrub_own_env() -> Vec<String> {
    let owned: Vec<std::ffi::OsString> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| name.to_str().is_none_or(is_daemon_owned))
        .collect();
    for name in &owned {
        // SAFETY: called from `main` before the async runtime or any other thread starts, so no
        // other thread can read or write the environment concurrently.
        unsafe { std::env::remove_var(name) };
    }
    owned
        .iter()
        .map(|name| name.to_string_lossy().into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_owned_names_are_matched_in_any_case() {
        for name in [
            "AGENTTEAM_EXEC_TOKEN",
            "agentteam_exec_token",
            "AgentTeam_Exec_Base_Url",
            "AGENTTEAM_EXTENSION_X",
            "agentteam_mcp_token_file",
        ] {
            assert!(is_daemon_owned(name), "{name}");
        }
        for name in ["PATH", "AGENTTEAM_SERVER_URL", "MY_AGENTTEAM_EXEC_TOKEN"] {
            assert!(!is_daemon_owned(name), "{name}");
        }
    }

    fn fresh() -> LaunchVariables {
        LaunchVariables {
            exec_base_url: "http://127.0.0.1:1/exec".into(),
            exec_token_file: "/run/t/token".into(),
            mcp_url: "http://127.0.0.1:1/mcp".into(),
            mcp_token_file: "/run/t/mcp-token".into(),
            bin_dir: "/run/t/bin".into(),
            memory_dir: "/state/memory/agt_1".into(),
        }
    }

    #[test]
    fn a_runtime_gets_only_the_fresh_pair() {
        let inherited = vec![
            ("PATH".into(), "/bin".into()),
            ("agentteam_exec_token".into(), "x".into()),
            ("AGENTTEAM_EXEC_BASE_URL".into(), "http://evil".into()),
            ("AgentTeam_Memory_Dir".into(), "/elsewhere".into()),
            (
                "OTEL_EXPORTER_OTLP_HEADERS".into(),
                "authorization=s3cret".into(),
            ),
            (
                "otel_exporter_otlp_traces_headers".into(),
                "x=s3cret".into(),
            ),
        ];
        let env = runtime_env(ChildEnv::inherit(inherited), &fresh());
        let env = env.vars();
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "PATH",
                "NO_PROXY",
                "no_proxy",
                EXEC_BASE_URL,
                EXEC_TOKEN_FILE,
                MCP_URL,
                MCP_TOKEN_FILE,
                MEMORY_DIR
            ]
        );
        assert_eq!(env[7].1, "/state/memory/agt_1");
        assert_eq!(
            env[0].1, "/run/t/bin:/bin",
            "the launch's bin dir comes first"
        );
        assert_eq!(env[3].1, "http://127.0.0.1:1/exec");
        // The collector's endpoint is the user's to pass on; its headers are the daemon's secret.
        assert!(is_collector_headers("OTEL_EXPORTER_OTLP_LOGS_HEADERS"));
        assert!(!is_collector_headers("OTEL_EXPORTER_OTLP_ENDPOINT"));
    }

    #[test]
    fn loopback_is_added_to_the_users_no_proxy_lists() {
        let inherited = vec![
            ("HTTPS_PROXY".into(), "http://proxy:3128".into()),
            ("NO_PROXY".into(), "corp.example, localhost".into()),
        ];
        let env = runtime_env(ChildEnv::inherit(inherited), &fresh());
        let get = |name: &str| {
            env.vars()
                .iter()
                .find(|(n, _)| n == name)
                .unwrap()
                .1
                .clone()
        };
        assert_eq!(
            get("HTTPS_PROXY"),
            "http://proxy:3128",
            "the user's proxy stays"
        );
        assert_eq!(get("NO_PROXY"), "corp.example,localhost,127.0.0.1,::1");
        assert_eq!(get("no_proxy"), "127.0.0.1,localhost,::1");
    }
}
