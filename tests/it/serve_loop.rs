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
