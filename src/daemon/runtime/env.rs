//! Environment hygiene for runtime launches.
//!
//! The Exec, Extension and MCP variables are daemon-owned: whatever a shell captured, inherited
//! or spelled in mixed case is removed (names compared case-insensitively), and a launch gets
//! only the daemon's fresh pair of paths and URLs. A bearer token is never placed in an
//! environment variable or in argv.

/// Variable name prefixes the daemon owns, compared after ASCII upper-casing.
pub const DAEMON_OWNED_PREFIXES: &[&str] =
    &["AGENTTEAM_EXEC_", "AGENTTEAM_EXTENSION_", "AGENTTEAM_MCP_"];
/// The canonical Exec base URL variable.
pub const EXEC_BASE_URL: &str = "AGENTTEAM_EXEC_BASE_URL";
/// The canonical Exec token file variable.
pub const EXEC_TOKEN_FILE: &str = "AGENTTEAM_EXEC_TOKEN_FILE";
/// The MCP route of the launch's server and agent.
pub const MCP_URL: &str = "AGENTTEAM_MCP_URL";
/// The launch's MCP-scope token file.
pub const MCP_TOKEN_FILE: &str = "AGENTTEAM_MCP_TOKEN_FILE";

/// The daemon's fresh variables of one launch: paths and URLs only, never a token.
#[derive(Debug, Clone)]
pub struct LaunchVariables {
    pub exec_base_url: String,
    pub exec_token_file: String,
    pub mcp_url: String,
    pub mcp_token_file: String,
}

/// True when `name` is daemon-owned in any spelling (`agentteam_exec_token`, `AgentTeam_Exec_X`).
pub fn is_daemon_owned(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    DAEMON_OWNED_PREFIXES
        .iter()
        .any(|prefix| upper.starts_with(prefix))
}

/// The environment of a new runtime: `inherited` without any daemon-owned variable, plus the
/// launch's canonical URLs and token-file paths.
pub fn runtime_env(
    inherited: Vec<(String, String)>,
    fresh: &LaunchVariables,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = inherited
        .into_iter()
        .filter(|(name, _)| !is_daemon_owned(name))
        .collect();
    env.push((EXEC_BASE_URL.to_string(), fresh.exec_base_url.clone()));
    env.push((EXEC_TOKEN_FILE.to_string(), fresh.exec_token_file.clone()));
    env.push((MCP_URL.to_string(), fresh.mcp_url.clone()));
    env.push((MCP_TOKEN_FILE.to_string(), fresh.mcp_token_file.clone()));
    env
}

/// Removes every daemon-owned variable from this process's own environment, so a daemon started
/// inside another runtime does not carry its parent's credentials into anything it starts.
///
/// Call it first thing in `main`, before any thread exists.
pub fn scrub_own_env() -> usize {
    let owned: Vec<std::ffi::OsString> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| name.to_str().is_none_or(is_daemon_owned))
        .collect();
    for name in &owned {
        // SAFETY: called from `main` before the async runtime or any other thread starts, so no
        // other thread can read or write the environment concurrently.
        unsafe { std::env::remove_var(name) };
    }
    owned.len()
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

    #[test]
    fn a_runtime_gets_only_the_fresh_pair() {
        let inherited = vec![
            ("PATH".into(), "/bin".into()),
            ("agentteam_exec_token".into(), "x".into()),
            ("AGENTTEAM_EXEC_BASE_URL".into(), "http://evil".into()),
        ];
        let fresh = LaunchVariables {
            exec_base_url: "http://127.0.0.1:1/exec".into(),
            exec_token_file: "/run/t/token".into(),
            mcp_url: "http://127.0.0.1:1/mcp".into(),
            mcp_token_file: "/run/t/mcp-token".into(),
        };
        let env = runtime_env(inherited, &fresh);
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "PATH",
                EXEC_BASE_URL,
                EXEC_TOKEN_FILE,
                MCP_URL,
                MCP_TOKEN_FILE
            ]
        );
        assert_eq!(env[1].1, "http://127.0.0.1:1/exec");
    }
}
