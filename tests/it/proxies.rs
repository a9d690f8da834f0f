//! Named proxies through a real SOCKS5 server (`support::Dante`): a daemon reaches a remote
//! server with `--server-proxy socks5h://…` (the name resolved by the proxy alone) and
//! `socks5://…` (resolved by the daemon), while nothing that carries a credential to a loopback
//! peer goes through it, even with every proxy variable pointing at it; a loopback server is
//! reached directly whatever proxy is named.

use serde_json::Value;

use crate::support::{Dante, Launched, TestCa, TestDaemon, TlsFront, spawn_server};

/// A name only the SOCKS server resolves (in its private `/etc/hosts`).
const REMOTE_NAME: &str = "agentteam.test";

/// The proxy variables of a runtime's shell, every one pointing at `proxy`.
fn proxy_env(proxy: &str) -> Vec<(&'static str, String)> {
    [
        "ALL_PROXY",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "all_proxy",
        "https_proxy",
        "http_proxy",
    ]
    .into_iter()
    .map(|name| (name, proxy.to_string()))
    .collect()
}

/// A daemon on `server_url` through `proxy`; an agent added with the CLI and a runtime that
/// reads the server through `agentteam exec`, both with every proxy variable set to the proxy.
async fn drive(
    server_url: &str,
    proxy: &str,
    extra: &[&str],
    token_file: &std::path::Path,
) -> TestDaemon {
    let env = proxy_env(proxy);
    let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let mut args = vec![
        "--server-url",
        server_url,
        "--server-proxy",
        proxy,
        "--operator-token-file",
        token_file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let daemon = TestDaemon::start_with_env(&args, &env).await;
    let added = daemon
        .cli(&["agent", "add", "far", "--json"])
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let mut command = daemon.cli(&[
        "run",
        "--agent",
        "far",
        "--",
        "sh",
        "-c",
        "agentteam exec team list '{}'",
    ]);
    command.envs(env.iter().copied());
    let mut runtime = Launched::spawn(command);
    let listed: Value = serde_json::from_str(&runtime.line().await).unwrap();
    assert_eq!(listed["ok"], true, "{listed}");
    assert_eq!(runtime.child.wait().await.unwrap().code(), Some(0));
    daemon
}

#[tokio::test]
async fn a_remote_server_is_reached_through_socks5h_and_socks5() {
    let Some(dante) = Dante::start(&[(REMOTE_NAME, "127.0.0.1")]).await else {
        return;
    };
    let server_dir = tempfile::tempdir().unwrap();
    let (_server, server_url, _) = spawn_server(server_dir.path()).await;
    let token_file = server_dir.path().join("operator.token");
    let ca = TestCa::new();
    let ca_file = ca.pem_file.to_str().unwrap().to_string();

    // socks5h: the name goes to the proxy, which alone can resolve it.
    let front =
        TlsFront::start_named(&ca, &server_url, REMOTE_NAME, "127.0.0.1".parse().unwrap()).await;
    assert!(
        tokio::net::lookup_host((REMOTE_NAME, 443)).await.is_err(),
        "this machine must not resolve {REMOTE_NAME} itself"
    );
    let daemon = drive(
        &front.url,
        &dante.url(true),
        &["--server-ca-file", &ca_file],
        &token_file,
    )
    .await;
    let through = dante.destinations();
    assert!(!through.is_empty(), "nothing went through the proxy");
    let front_destination = format!("127.0.0.1.{}", front.port);
    assert!(
        through.iter().all(|d| *d == front_destination),
        "only the remote server is reached through the proxy, never a loopback peer: {through:?}"
    );
    drop(daemon);

    // socks5 with the same name: the daemon resolves it itself, cannot, and says so; the proxy
    // is never asked.
    let asked_before = dante.destinations().len();
    let refused = crate::support::agentteam(&[
        "daemon",
        "--listen",
        "127.0.0.1:0",
        "--state-dir",
        server_dir.path().join("refused").to_str().unwrap(),
        "--server-url",
        &front.url,
        "--server-ca-file",
        &ca_file,
        "--server-proxy",
        &dante.url(false),
        "--operator-token-file",
        token_file.to_str().unwrap(),
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("the connection failed"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        dante.destinations().len(),
        asked_before,
        "the proxy was asked"
    );
    assert!(
        !refused.stderr.contains("ato_"),
        "the operator token is in a message: {}",
        refused.stderr
    );

    // socks5 with a name this machine resolves: the proxy gets the address.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let Some(ip) = tokio::net::lookup_host((host.as_str(), 443))
        .await
        .ok()
        .and_then(|mut addresses| addresses.find(|a| a.is_ipv4()))
        .map(|a| a.ip())
    else {
        crate::support::missing_precondition(
            &format!("this machine's name `{host}` does not resolve"),
            "the socks5 (local DNS) half",
        );
        return;
    };
    let named = TlsFront::start_named(&ca, &server_url, &host, ip).await;
    let before = dante.destinations().len();
    let _daemon = drive(
        &named.url,
        &dante.url(false),
        &["--server-ca-file", &ca_file],
        &token_file,
    )
    .await;
    let through = &dante.destinations()[before..];
    let destination = format!("{ip}.{}", named.port);
    assert!(!through.is_empty(), "nothing went through the proxy");
    assert!(
        through.iter().all(|d| *d == destination),
        "only {destination} goes through the proxy: {through:?}"
    );
}

/// A loopback server is never reached through a named proxy: not `127.0.0.1`, and not any other
/// address of `127.0.0.0/8`.
#[tokio::test]
async fn a_loopback_server_is_reached_directly_whatever_proxy_is_named() {
    let Some(dante) = Dante::start(&[]).await else {
        return;
    };
    let server_dir = tempfile::tempdir().unwrap();
    let database = crate::support::database_url(server_dir.path()).await;
    let token_file = server_dir.path().join("operator.token");
    let (_server, server_url, _) =
        crate::support::spawn_server_at("127.0.0.2:0", &database, &token_file, None, &[]).await;
    assert!(server_url.starts_with("http://127.0.0.2:"), "{server_url}");
    let _daemon = drive(&server_url, &dante.url(false), &[], &token_file).await;
    assert_eq!(dante.destinations(), Vec::<String>::new());
}

/// A proxy's credential comes from its owner-only file and reaches the proxy (as HTTP basic
/// authentication of the tunnel), never a log or a message.
#[tokio::test]
async fn a_proxy_credential_file_authenticates_the_tunnel() {
    use base64::Engine;
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let credential = dir.path().join("proxy.credential");
    std::fs::write(&credential, "ops:pa ss:word\n").unwrap();
    std::fs::set_permissions(
        &credential,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let token_file = dir.path().join("operator.token");
    std::fs::write(&token_file, "ato_x").unwrap();
    // A proxy that keeps the head of the first request it gets, and refuses the tunnel.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = format!("http://{}", listener.local_addr().unwrap());
    let heard = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buffer = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            let n = stream.read(&mut buffer).await.unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buffer[..n]);
        }
        let _ = tokio::io::AsyncWriteExt::write_all(
            &mut stream,
            b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n",
        )
        .await;
        String::from_utf8_lossy(&head).into_owned()
    });
    let refused = crate::support::agentteam(&[
        "daemon",
        "--listen",
        "127.0.0.1:0",
        "--state-dir",
        dir.path().join("state").to_str().unwrap(),
        "--server-url",
        "https://agentteam.example",
        "--server-proxy",
        &proxy,
        "--server-proxy-credential-file",
        credential.to_str().unwrap(),
        "--operator-token-file",
        token_file.to_str().unwrap(),
    ]);
    assert_eq!(
        refused.code, 2,
        "the tunnel was refused: {}",
        refused.stderr
    );
    let head = heard.await.unwrap();
    assert!(head.starts_with("CONNECT agentteam.example:443 "), "{head}");
    let expected = base64::engine::general_purpose::STANDARD.encode("ops:pa ss:word");
    assert!(
        head.to_ascii_lowercase().contains(&format!(
            "proxy-authorization: basic {}",
            expected.to_ascii_lowercase()
        )),
        "{head}"
    );
    assert!(!refused.stderr.contains("pa ss") && !refused.stdout.contains("pa ss"));
}
