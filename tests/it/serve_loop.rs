//! The shared accept loop closes connections that do not send a request head in time (idle
//! sockets and slowloris clients cannot pin the server) and bounds the request head exactly.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{TestDaemon, TestServer};

/// Reads until the server closes the connection; returns how long that took.
async fn time_until_closed(stream: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut buffer = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(15), stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => continue,
            Err(_) => panic!("the server kept the connection open for 15 s"),
        }
    }
}

#[tokio::test]
async fn idle_and_slowloris_connections_are_closed_after_the_header_timeout() {
    let server = TestServer::start().await;
    let address = server.base_url.trim_start_matches("http://").to_string();

    let mut idle = TcpStream::connect(&address).await.unwrap();
    let mut slow = TcpStream::connect(&address).await.unwrap();
    slow.write_all(b"POST /admin/workspaces HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let (idle_after, slow_after) =
        tokio::join!(time_until_closed(&mut idle), time_until_closed(&mut slow));
    for elapsed in [idle_after, slow_after] {
        assert!(
            elapsed >= Duration::from_secs(4) && elapsed < Duration::from_secs(10),
            "closed after {elapsed:?}"
        );
    }
}

/// A request head of exactly `MAX_REQUEST_HEAD` bytes is served; one byte more is refused with
/// 431 and the connection closed, on a known route and an unknown one alike, and whichever
/// bound (hyper's read buffer or the exact count) catches it.
#[tokio::test]
async fn the_request_head_is_bounded_at_its_exact_size() {
    use agentteam::serve::MAX_REQUEST_HEAD;
    let server = TestServer::start().await;
    let address = server.base_url.trim_start_matches("http://").to_string();
    for path in ["/admin/workspaces", "/no/such/route"] {
        for (size, refused) in [
            (MAX_REQUEST_HEAD - 1, false),
            (MAX_REQUEST_HEAD, false),
            (MAX_REQUEST_HEAD + 1, true),
            (MAX_REQUEST_HEAD + 4096, true),
        ] {
            let start = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: ");
            let end = "\r\n\r\n";
            let pad = "p".repeat(size - start.len() - end.len());
            let request = format!("{start}{pad}{end}");
            assert_eq!(request.len(), size);
            let mut stream = TcpStream::connect(&address).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
                .await
                .expect("the connection ends after its one answer")
                .unwrap();
            let answer = String::from_utf8_lossy(&answer).to_lowercase();
            assert_eq!(
                answer.starts_with("http/1.1 431"),
                refused,
                "{path}, a {size}-byte head: {answer}"
            );
            assert!(answer.starts_with("http/1.1 "), "{path}, {size}: {answer}");
        }
    }
}

#[tokio::test]
async fn an_answer_before_the_body_ended_closes_the_connection_and_others_keep_it() {
    let server = TestServer::start().await;
    let address = server.base_url.trim_start_matches("http://").to_string();
    // The head of one response on a fresh connection.
    let head = |bearer: String, body: &'static str| {
        let address = address.clone();
        async move {
            let mut stream = TcpStream::connect(&address).await.unwrap();
            let request = format!(
                "POST /admin/workspaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {bearer}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut bytes = Vec::new();
            let mut buffer = [0u8; 4096];
            while !bytes.windows(4).any(|w| w == b"\r\n\r\n") {
                let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
                    .await
                    .unwrap()
                    .unwrap();
                assert!(read > 0, "closed before the response head");
                bytes.extend_from_slice(&buffer[..read]);
            }
            String::from_utf8_lossy(&bytes).to_lowercase()
        }
    };
    // Refused before its body is read: the client must not reuse the connection.
    let refused = head("ato_wrong".into(), r#"{"name": "acme"}"#).await;
    assert!(refused.starts_with("http/1.1 403"), "{refused}");
    assert!(refused.contains("connection: close"), "{refused}");
    // Read to the end and answered: the connection stays open for the next request.
    let answered = head(server.operator_token.clone(), r#"{"name": "acme"}"#).await;
    assert!(answered.starts_with("http/1.1 200"), "{answered}");
    assert!(!answered.contains("connection: close"), "{answered}");
}

/// The daemon raises its open-file soft limit (never past the hard one) so its connection cap
/// can hold: a desktop session's soft limit is often below it.
#[tokio::test]
async fn the_daemon_raises_its_open_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -Sn 512 && exec "$0" daemon --listen 127.0.0.1:0 --state-dir "$1""#)
        .arg(crate::support::bin())
        .arg(dir.path().join("state"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let line = lines.next_line().await.unwrap().unwrap();
    assert!(line.starts_with("listening on "), "{line}");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id().unwrap())).unwrap();
    let row: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .collect();
    let (soft, hard) = (row[3], row[4]);
    let expected = match hard.parse::<u64>() {
        Ok(hard) => agentteam::serve::WANTED_OPEN_FILES.min(hard),
        Err(_) => agentteam::serve::WANTED_OPEN_FILES,
    };
    assert_eq!(soft.parse::<u64>().unwrap(), expected.max(512), "{limits}");
}

/// A runtime's MCP route and token, read from a runtime `agentteam run` started.
async fn mcp_runtime(
    daemon: &TestDaemon,
    agent: &str,
) -> (crate::support::Launched, String, String) {
    let script = r#"echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 300"#;
    let mut launched = daemon.launch(agent, &[], script);
    let url = launched.line().await;
    let token = std::fs::read_to_string(launched.line().await)
        .unwrap()
        .trim()
        .to_string();
    (launched, url, token)
}

/// `tools/list` on `url` with `client`: status and how long it took.
async fn list(client: &reqwest::Client, url: &str, token: &str) -> (u16, Duration) {
    let started = Instant::now();
    let status = client
        .post(url)
        .bearer_auth(token)
        .header("MCP-Protocol-Version", "2025-11-25")
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0);
    (status, started.elapsed())
}

/// Hostile clients against the daemon, each closed or refused within its bound while a
/// well-behaved runtime (its own credential, its keep-alive connection) keeps getting answers,
/// every one measured:
/// - 2,100 idle connections (past the 2,048 cap) and 20 header dribblers are closed by the
///   5-second header timeout (those past the cap once a slot frees), and the daemon accepts new
///   connections again;
/// - a 256 KiB request head is refused (431);
/// - 2,000 concurrent clients of another runtime each get 200 or the admission refusal (429), none
///   waits past the bound, and 20 body dribblers of that runtime get 408 at the body deadline.
#[tokio::test]
async fn hostile_clients_are_bounded_while_a_good_client_is_served() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("good").await;
    daemon.add_agent("noisy").await;
    let (_good_runtime, good_url, good_token) = mcp_runtime(&daemon, "good").await;
    let (_noisy_runtime, noisy_url, noisy_token) = mcp_runtime(&daemon, "noisy").await;
    let address = daemon.base_url.trim_start_matches("http://").to_string();
    let good = reqwest::Client::builder().no_proxy().build().unwrap();
    assert_eq!(
        list(&good, &good_url, &good_token).await.0,
        200,
        "the good client connects"
    );

    // The good client's answers for as long as `attack` runs, one every 50 ms on its keep-alive
    // connection: each must be 200.
    async fn measured<F: std::future::Future>(
        good: &reqwest::Client,
        url: &str,
        token: &str,
        attack: F,
    ) -> (F::Output, Vec<Duration>) {
        let done = std::sync::atomic::AtomicBool::new(false);
        let attack = async {
            let out = attack.await;
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            out
        };
        let probing = async {
            let mut took = Vec::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let (status, elapsed) = list(good, url, token).await;
                assert_eq!(status, 200, "the good client was refused during the attack");
                took.push(elapsed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            took
        };
        tokio::join!(attack, probing)
    }

    // Connection-level: idle sockets past the cap, header dribble, an oversized head.
    let attack = async {
        let mut dribblers = Vec::new();
        for _ in 0..20 {
            let mut stream = TcpStream::connect(&address).await.unwrap();
            dribblers.push(tokio::spawn(async move {
                let started = Instant::now();
                for byte in b"POST /api/internal/mcp/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
                    .iter()
                    .cycle()
                {
                    if stream.write_all(&[*byte]).await.is_err() {
                        return started.elapsed();
                    }
                    let mut probe = [0u8; 1];
                    if let Ok(Ok(0) | Err(_)) =
                        tokio::time::timeout(Duration::from_millis(250), stream.read(&mut probe))
                            .await
                    {
                        return started.elapsed();
                    }
                    assert!(
                        started.elapsed() < Duration::from_secs(15),
                        "a dribbler kept its connection"
                    );
                }
                unreachable!()
            }));
        }
        let mut oversized = TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST /api/internal/mcp/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {}\r\n\r\n",
            "a".repeat(256 * 1024)
        );
        let _ = oversized.write_all(head.as_bytes()).await;
        // The dribblers and the oversized head were accepted first; now the flood past the cap.
        let mut idle = Vec::new();
        for _ in 0..2_100 {
            idle.push(TcpStream::connect(&address).await.unwrap());
        }
        let mut answer = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(10), oversized.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer).to_string();
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
            "an oversized head was served: {answer}"
        );
        // Every idle socket is closed within the header timeout, those past the cap once a slot
        // frees: 5 s, then 5 s again.
        let started = Instant::now();
        let closed = futures_util::future::join_all(idle.iter_mut().map(time_until_closed)).await;
        let slowest = closed.into_iter().max().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(13),
            "idle sockets held for {slowest:?}"
        );
        for dribbler in dribblers {
            let held = dribbler.await.unwrap();
            assert!(held < Duration::from_secs(12), "a dribbler held {held:?}");
        }
    };
    let ((), took) = measured(&good, &good_url, &good_token, attack).await;
    let slowest = took.iter().max().unwrap();
    eprintln!(
        "connection-level attack: the good client got {} answers, the slowest in {slowest:?}",
        took.len()
    );
    assert!(took.len() >= 10, "only {} answers measured", took.len());
    assert!(
        *slowest < Duration::from_secs(2),
        "the good client waited {slowest:?}"
    );
    // A new connection is accepted again.
    let fresh = reqwest::Client::builder().no_proxy().build().unwrap();
    assert_eq!(list(&fresh, &good_url, &good_token).await.0, 200);

    // Request-level: 2,000 concurrent clients of the noisy runtime and 20 of its body dribblers.
    let attack = async {
        let path = noisy_url.trim_start_matches(&daemon.base_url).to_string();
        let dribblers: Vec<_> = (0..20)
            .map(|_| {
                tokio::spawn(crate::exec_transport::raw_post(
                    address.clone(),
                    path.clone(),
                    noisy_token.clone(),
                    100,
                    b"{".to_vec(),
                ))
            })
            .collect();
        // One pooled client: as many connections as requests in flight at once.
        let noisy = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut clients = tokio::task::JoinSet::new();
        for _ in 0..2_000 {
            let (client, url, token) = (noisy.clone(), noisy_url.clone(), noisy_token.clone());
            clients.spawn(async move { list(&client, &url, &token).await });
        }
        let answers = clients.join_all().await;
        let ok = answers.iter().filter(|(s, _)| *s == 200).count();
        let refused = answers.iter().filter(|(s, _)| *s == 429).count();
        assert_eq!(ok + refused, 2_000, "an answer other than 200 or 429");
        assert!(ok > 0, "{ok} answered, {refused} refused");
        eprintln!("2,000 concurrent clients: {ok} answered, {refused} refused at admission");
        let slowest = answers.iter().map(|(_, t)| *t).max().unwrap();
        assert!(
            slowest < Duration::from_secs(30),
            "a client waited {slowest:?}"
        );
        for dribbler in dribblers {
            let mut stream = dribbler.await.unwrap();
            assert_eq!(crate::exec_transport::read_status(&mut stream).await, 408);
        }
    };
    let ((), took) = measured(&good, &good_url, &good_token, attack).await;
    let slowest = took.iter().max().unwrap();
    eprintln!(
        "request-level attack: the good client got {} answers, the slowest in {slowest:?}",
        took.len()
    );
    assert!(took.len() >= 10, "only {} answers measured", took.len());
    assert!(
        *slowest < Duration::from_secs(2),
        "the good client waited {slowest:?}"
    );
}
