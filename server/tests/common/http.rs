//! Plain HTTP/1.1 over loopback, for the endpoints tests read without a client library
//! (`/metrics`).

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A plain HTTP/1.1 GET over loopback; answers the status line and the body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    tokio::time::timeout(super::DEADLINE, conn.read_to_string(&mut raw))
        .await
        .expect("answer in time")
        .unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, body.to_string())
}

/// The value of the series `name` (with its labels, as the page spells them) in a
/// `/metrics` page.
pub fn metric(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
