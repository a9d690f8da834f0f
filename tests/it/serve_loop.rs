//! The shared accept loop closes connections that do not send a request head in time: idle
//! sockets and slowloris clients cannot pin the server.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::TestServer;

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
