//! The bridge URLs a runtime receives (`AGENTTEAM_EXEC_BASE_URL`, `AGENTTEAM_MCP_URL`), checked
//! before any credential is read: a client of ours sends its bearer only to the daemon's
//! canonical route on a literal loopback address, never to a host name (which DNS could point
//! anywhere) and never to another path.
//!
//! Accepted: `http://` + `127.0.0.0/8` or `[::1]` (+ optional port) + exactly
//! `/api/internal/exec/servers/{serverId}/agents/{agentId}` (or `…/mcp/…` for the MCP route), with
//! no user info, query or fragment, and ids of `A-Za-z0-9_-`.

use std::net::IpAddr;

/// Which bridge a URL must be the canonical route of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bridge {
    Exec,
    /// `AGENTTEAM_MCP_URL`, read by `agentteam mcp stdio`.
    Mcp,
}

impl Bridge {
    fn segment(self) -> &'static str {
        match self {
            Bridge::Exec => "exec",
            Bridge::Mcp => "mcp",
        }
    }
}

/// A checked bridge URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeUrl {
    /// The URL as given, without a trailing slash.
    pub url: String,
    pub server_id: String,
    pub agent_id: String,
}

/// Checks `text` as the canonical route of `bridge`; the error says what is wrong, never more.
pub fn parse(text: &str, bridge: Bridge) -> Result<RuntimeUrl, String> {
    let url = reqwest::Url::parse(text).map_err(|_| "it is not a URL".to_string())?;
    if url.scheme() != "http" {
        return Err("it must be an `http://` URL of the local daemon".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("it must not carry user info".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("it must not carry a query or fragment".into());
    }
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        _ => false,
    };
    if !loopback {
        return Err("its host must be a literal loopback address (127.0.0.1 or [::1])".into());
    }
    let segments: Vec<&str> = url.path().split('/').skip(1).collect();
    let id = |s: &str| {
        (1..=128).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    match segments.as_slice() {
        [
            "api",
            "internal",
            family,
            "servers",
            server,
            "agents",
            agent,
        ] if *family == bridge.segment() && id(server) && id(agent) => Ok(RuntimeUrl {
            url: text.trim_end_matches('/').to_string(),
            server_id: server.to_string(),
            agent_id: agent.to_string(),
        }),
        _ => Err(format!(
            "its path must be `/api/internal/{}/servers/{{serverId}}/agents/{{agentId}}`",
            bridge.segment()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_canonical_loopback_route_is_accepted() {
        for good in [
            "http://127.0.0.1:4100/api/internal/exec/servers/wsp_1/agents/agt_2",
            "http://127.8.9.10/api/internal/exec/servers/wsp_1/agents/agt_2",
            "http://[::1]:4100/api/internal/exec/servers/wsp_1/agents/agt_2",
        ] {
            let parsed = parse(good, Bridge::Exec).unwrap();
            assert_eq!(
                (parsed.server_id.as_str(), parsed.agent_id.as_str()),
                ("wsp_1", "agt_2")
            );
        }
        for bad in [
            "https://127.0.0.1:4100/api/internal/exec/servers/wsp_1/agents/agt_2",
            "http://localhost:4100/api/internal/exec/servers/wsp_1/agents/agt_2",
            "http://10.0.0.1:4100/api/internal/exec/servers/wsp_1/agents/agt_2",
            "http://example.com/api/internal/exec/servers/wsp_1/agents/agt_2",
            "http://u:p@127.0.0.1/api/internal/exec/servers/wsp_1/agents/agt_2",
            "http://127.0.0.1/api/internal/exec/servers/wsp_1/agents/agt_2?x=1",
            "http://127.0.0.1/api/internal/exec/servers/wsp_1/agents/agt_2#f",
            "http://127.0.0.1/api/internal/exec/servers/wsp_1/agents/agt_2/task",
            "http://127.0.0.1/api/internal/exec/servers/wsp%2F1/agents/agt_2",
            "http://127.0.0.1/api/internal/mcp/servers/wsp_1/agents/agt_2",
            "http://127.0.0.1/other",
            "not a url",
        ] {
            assert!(parse(bad, Bridge::Exec).is_err(), "{bad}");
        }
        assert!(
            parse(
                "http://127.0.0.1:1/api/internal/mcp/servers/w/agents/a",
                Bridge::Mcp
            )
            .is_ok()
        );
    }
}
