use super::*;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::mpsc;

/// A body whose chunks arrive when the test sends them.
struct Chunks(mpsc::UnboundedReceiver<Bytes>);

impl HttpBody for Chunks {
    type Data = Bytes;
    type Error = Status;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.0.poll_recv(cx).map(|c| c.map(|c| Ok(Frame::data(c))))
    }
}

/// A budget of `bytes` where messages of up to 8 bytes are free.
fn budget(bytes: usize, wait_ms: u64) -> Arc<Budget> {
    let limits = RequestLimits {
        max_in_flight: 2,
        max_bytes_in_flight: bytes,
        max_wait: Duration::from_millis(wait_ms),
    };
    Budget::with_small_messages(limits, 8)
}

/// A gRPC message: the 5-byte header and `len` bytes of `fill`.
fn message(len: usize, fill: u8) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend(std::iter::repeat_n(fill, len));
    out
}

/// A metered body over `chunks`, already sent and the sender closed.
fn metered(chunks: &[&[u8]], budget: &Arc<Budget>) -> MeteredBody {
    let (tx, rx) = mpsc::unbounded_channel();
    for c in chunks {
        tx.send(Bytes::copy_from_slice(c)).unwrap();
    }
    MeteredBody::new(Body::new(Chunks(rx)), budget.clone())
}

async fn next(body: &mut MeteredBody) -> Option<Result<Bytes, Status>> {
    std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx))
        .await
        .map(|f| f.map(|f| f.into_data().expect("data frame")))
}

async fn read_all(body: &mut MeteredBody) -> Result<Vec<u8>, Status> {
    let mut out = Vec::new();
    while let Some(chunk) = next(body).await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out)
}

#[tokio::test]
async fn messages_pass_unchanged_however_they_are_cut() {
    let mut wire = message(10, 1);
    wire.extend(message(0, 0));
    wire.extend(message(300, 2));
    wire.extend(message(5, 4));
    let table: &[&[usize]] = &[
        &[],                   // one chunk
        &[1, 4],               // a header cut in three
        &[5, 15, 20, 325],     // cut at message boundaries
        &[3, 7, 16, 200, 327], // cuts inside headers and bodies
    ];
    for cuts in table {
        let b = budget(1000, 1000);
        let mut pieces: Vec<&[u8]> = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter() {
            pieces.push(&wire[at..cut]);
            at = cut;
        }
        pieces.push(&wire[at..]);
        let mut body = metered(&pieces, &b);
        assert_eq!(read_all(&mut body).await.unwrap(), wire, "cuts {cuts:?}");
        // A small message is free, and the large one before it gave its share back.
        assert_eq!(b.bytes.available_permits(), 1000, "cuts {cuts:?}");
        drop(body);
        assert_eq!(b.bytes.available_permits(), 1000, "cuts {cuts:?}");
    }
}

#[tokio::test]
async fn a_message_holds_its_share_until_the_body_goes() {
    let b = budget(1000, 1000);
    let mut body = metered(&[&message(300, 2)], &b);
    read_all(&mut body).await.unwrap();
    assert_eq!(b.bytes.available_permits(), 700);
    drop(body);
    assert_eq!(b.bytes.available_permits(), 1000);
}

#[tokio::test]
async fn small_messages_pass_while_the_budget_is_spent() {
    let b = budget(100, 50);
    let mut large = metered(&[&message(100, 1)], &b);
    read_all(&mut large).await.unwrap();
    let mut small = metered(&[&message(8, 2)], &b);
    assert_eq!(read_all(&mut small).await.unwrap().len(), 13);
}

#[tokio::test]
async fn a_message_waits_for_its_whole_share_then_is_refused_naming_the_limit() {
    let b = budget(100, 50);
    let mut first = metered(&[&message(80, 1)], &b);
    assert_eq!(read_all(&mut first).await.unwrap().len(), 85);
    let mut second = metered(&[&message(40, 2)], &b);
    let refused = read_all(&mut second).await.expect_err("over budget");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(
        refused
            .message()
            .contains("limits.max_request_bytes_in_flight"),
        "{}",
        refused.message()
    );
    // Waiting took nothing: the first body's share is all that is held.
    assert_eq!(b.bytes.available_permits(), 20);
}

#[tokio::test]
async fn a_waiting_message_goes_on_when_a_share_comes_back() {
    let b = budget(100, 5_000);
    let mut first = metered(&[&message(80, 1)], &b);
    read_all(&mut first).await.unwrap();
    let mut second = metered(&[&message(40, 2)], &b);
    let waiting = tokio::spawn(async move { read_all(&mut second).await.map(|d| d.len()) });
    // It cannot finish while the first holds its share, however often it is polled.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!waiting.is_finished());
    drop(first);
    assert_eq!(waiting.await.unwrap().unwrap(), 45);
}

#[tokio::test]
async fn a_message_larger_than_the_budget_is_charged_the_whole_budget() {
    let b = budget(100, 1000);
    let mut body = metered(&[&message(250, 3)], &b);
    assert_eq!(read_all(&mut body).await.unwrap().len(), 255);
    assert_eq!(b.bytes.available_permits(), 0);
}

/// A service that answers once the test adds a permit to `gate`.
fn held_service(
    gate: Arc<Semaphore>,
) -> impl tower::Service<
    http::Request<Body>,
    Response = http::Response<Body>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |_req: http::Request<Body>| {
        let gate = gate.clone();
        async move {
            gate.acquire().await.expect("gate open").forget();
            Ok(http::Response::new(Body::empty()))
        }
    })
}

fn grpc_status(res: &http::Response<Body>) -> Option<&str> {
    res.headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn requests_beyond_the_limit_wait_then_are_refused() {
    use tower::{Layer, Service, ServiceExt};
    let b = budget(1000, 50);
    let gate = Arc::new(Semaphore::new(0));
    let mut svc = LimitLayer(b.clone()).layer(held_service(gate.clone()));
    let request = || http::Request::new(Body::empty());
    let mut held = VecDeque::new();
    for _ in 0..2 {
        let call = svc.ready().await.unwrap().call(request());
        held.push_back(tokio::spawn(call));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while b.requests.available_permits() > 0 && tokio::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    let refused = svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(grpc_status(&refused), Some("8"), "RESOURCE_EXHAUSTED");
    gate.add_permits(2);
    for h in held {
        assert_eq!(grpc_status(&h.await.unwrap().unwrap()), None);
    }
    assert_eq!(b.requests.available_permits(), 2);
    gate.add_permits(1);
    let served = svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(grpc_status(&served), None);
}
