//! A fault-injecting HTTP proxy in front of the local S3 server. Each
//! client that the chaos suite disturbs (a `sleet run` process, a
//! writer) talks to the store through its own proxy, so faults are real
//! HTTP failures that object_store's and SlateDB's retries see exactly as
//! they would in production:
//!
//! - an error reply (503 SlowDown) before the request reaches the store;
//! - a reply lost after the store applied the request (the connection
//!   drops before the answer): a PUT happened, the client thinks it failed;
//! - latency before forwarding;
//! - a cut-off: every request dropped, as when a node loses the store while
//!   the others keep it;
//! - a refused server-side copy (403 AccessDenied for `x-amz-copy-source`),
//!   as from a bucket in another account, or a shed one (503 SlowDown);
//! - an Azure copy's state restated (in front of Azurite, which copies at
//!   once): pending in the copy's reply, or failed in every reply;
//! - a store that is wrong about conditional writes: one that looks the
//!   condition up and then writes unconditionally (not atomic, as some
//!   S3-compatible servers are), or one whose ETags lose their quotes.
//!
//! Draws come from a seeded generator, so a seed replays the same faults
//! for the same sequence of requests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use sleet::testing::Chaos;

/// What one proxy does to the requests through it; all settings start off.
#[derive(Debug)]
pub struct ProxyFaults {
    chaos: Mutex<Chaos>,
    error_per_mille: AtomicU64,
    lost_reply_per_mille: AtomicU64,
    max_latency_ms: AtomicU64,
    cut_off: AtomicBool,
    /// Answer every server-side copy (`x-amz-copy-source`) with 403, as a
    /// store does for a source in another account.
    refuse_copies: AtomicBool,
    /// Answer every server-side copy with 503 `SlowDown`, as a busy store
    /// does.
    shed_copies: AtomicBool,
    /// Report Azure copies (`x-ms-copy-source`) as pending while this is
    /// above zero, as Azure does for a copy it has not finished, and as
    /// many later reads of a copy state: each such read counts it down,
    /// after which Azurite's own answer shows.
    pending_copies: AtomicU64,
    /// Report every copy state in Azure blob properties as failed.
    failed_copies: AtomicBool,
    /// Turn every conditional PUT into a HEAD, a pause, and an
    /// unconditional PUT.
    look_then_write: AtomicBool,
    /// Strip the quotes from every ETag header in replies.
    unquote_etags: AtomicBool,
    pub counts: FaultCounts,
}

/// How many of each fault a proxy injected, and how many requests it saw.
#[derive(Debug, Default)]
pub struct FaultCounts {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub lost_replies: AtomicU64,
    pub cut_off: AtomicU64,
    pub refused_copies: AtomicU64,
    /// Server-side copy requests (`x-amz-copy-source`) seen, whatever
    /// their fate.
    pub copy_requests: AtomicU64,
    /// Requests under a store check's scratch prefix.
    pub store_check_requests: AtomicU64,
}

impl FaultCounts {
    pub fn add(&self, other: &FaultCounts) {
        for (mine, theirs) in [
            (&self.requests, &other.requests),
            (&self.errors, &other.errors),
            (&self.lost_replies, &other.lost_replies),
            (&self.cut_off, &other.cut_off),
        ] {
            mine.fetch_add(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// The fate of one request.
enum Fate {
    Error,
    LoseReply,
    Forward,
}

impl ProxyFaults {
    fn new(seed: u64) -> Self {
        ProxyFaults {
            chaos: Mutex::new(Chaos::with_seed(seed)),
            error_per_mille: AtomicU64::new(0),
            lost_reply_per_mille: AtomicU64::new(0),
            max_latency_ms: AtomicU64::new(0),
            cut_off: AtomicBool::new(false),
            refuse_copies: AtomicBool::new(false),
            shed_copies: AtomicBool::new(false),
            pending_copies: AtomicU64::new(0),
            failed_copies: AtomicBool::new(false),
            look_then_write: AtomicBool::new(false),
            unquote_etags: AtomicBool::new(false),
            counts: FaultCounts::default(),
        }
    }

    /// Errors and lost replies per 1000 requests, and a latency ceiling.
    pub fn set(&self, error_per_mille: u64, lost_reply_per_mille: u64, max_latency: Duration) {
        self.error_per_mille
            .store(error_per_mille, Ordering::Relaxed);
        self.lost_reply_per_mille
            .store(lost_reply_per_mille, Ordering::Relaxed);
        self.max_latency_ms
            .store(max_latency.as_millis() as u64, Ordering::Relaxed);
    }

    /// Only the mirror binary's tests refuse copies.
    #[allow(dead_code)]
    pub fn refuse_copies(&self, refuse: bool) {
        self.refuse_copies.store(refuse, Ordering::Relaxed);
    }

    /// Only the mirror binary's tests shed copies.
    #[allow(dead_code)]
    pub fn shed_copies(&self, shed: bool) {
        self.shed_copies.store(shed, Ordering::Relaxed);
    }

    /// Only the mirror binary's tests report Azure copies pending: the
    /// copy's reply and the next `looks` reads of its state.
    #[allow(dead_code)]
    pub fn pending_copies(&self, looks: u64) {
        self.pending_copies.store(looks + 1, Ordering::Relaxed);
    }

    /// Only the mirror binary's tests report Azure copies failed.
    #[allow(dead_code)]
    pub fn failed_copies(&self, failed: bool) {
        self.failed_copies.store(failed, Ordering::Relaxed);
    }

    /// Only the store-check tests break conditional writes.
    #[allow(dead_code)]
    pub fn look_then_write(&self, on: bool) {
        self.look_then_write.store(on, Ordering::Relaxed);
    }

    /// Only the store-check tests unquote ETags.
    #[allow(dead_code)]
    pub fn unquote_etags(&self, on: bool) {
        self.unquote_etags.store(on, Ordering::Relaxed);
    }

    pub fn cut_off(&self, cut: bool) {
        self.cut_off.store(cut, Ordering::Relaxed);
    }

    /// No faults: every request goes through at once.
    pub fn clear(&self) {
        self.set(0, 0, Duration::ZERO);
        self.cut_off(false);
    }

    fn draw(&self) -> u64 {
        self.chaos.lock().unwrap().draw()
    }

    fn latency(&self) -> Duration {
        let max = self.max_latency_ms.load(Ordering::Relaxed);
        if max == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(self.draw() % max)
    }

    fn fate(&self) -> Fate {
        let roll = self.draw() % 1000;
        let errors = self.error_per_mille.load(Ordering::Relaxed);
        let lost = self.lost_reply_per_mille.load(Ordering::Relaxed);
        if roll < errors {
            Fate::Error
        } else if roll < errors + lost {
            Fate::LoseReply
        } else {
            Fate::Forward
        }
    }
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    pub endpoint: String,
    pub faults: Arc<ProxyFaults>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FaultProxy {
    /// A proxy on a free loopback port forwarding to `upstream`
    /// (`http://127.0.0.1:PORT`), with faults drawn from `seed`.
    pub async fn start(upstream: &str, seed: u64) -> FaultProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address: SocketAddr = listener.local_addr().unwrap();
        let faults = Arc::new(ProxyFaults::new(seed));
        let forward = Arc::new(Forward {
            upstream: upstream.trim_end_matches('/').to_string(),
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("an HTTP client"),
            faults: faults.clone(),
        });
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let forward = forward.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let forward = forward.clone();
                        async move { forward.handle(request).await }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FaultProxy {
            endpoint: format!("http://{address}"),
            faults,
            server,
        }
    }
}

/// Why a connection was dropped without an answer.
#[derive(Debug)]
struct Dropped(&'static str);

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Dropped {}

struct Forward {
    upstream: String,
    client: reqwest::Client,
    faults: Arc<ProxyFaults>,
}

impl Forward {
    /// One request's fate: an `Err` makes hyper drop the connection
    /// without a reply, which the client sees as a transport error.
    async fn handle(&self, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Dropped> {
        let counts = &self.faults.counts;
        counts.requests.fetch_add(1, Ordering::Relaxed);
        if request.headers().contains_key("x-amz-copy-source") {
            counts.copy_requests.fetch_add(1, Ordering::Relaxed);
        }
        if request
            .uri()
            .to_string()
            .contains(sleet::store::check::SCRATCH_DIR)
        {
            counts.store_check_requests.fetch_add(1, Ordering::Relaxed);
        }
        if self.faults.cut_off.load(Ordering::Relaxed) {
            counts.cut_off.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(Dropped("cut off from the store"));
        }
        if self.faults.refuse_copies.load(Ordering::Relaxed)
            && request.headers().contains_key("x-amz-copy-source")
        {
            counts.refused_copies.fetch_add(1, Ordering::Relaxed);
            return Ok(access_denied());
        }
        if self.faults.shed_copies.load(Ordering::Relaxed)
            && request.headers().contains_key("x-amz-copy-source")
        {
            counts.errors.fetch_add(1, Ordering::Relaxed);
            return Ok(slow_down());
        }
        tokio::time::sleep(self.faults.latency()).await;
        if self.faults.look_then_write.load(Ordering::Relaxed)
            && request.method() == hyper::Method::PUT
            && (request.headers().contains_key("if-match")
                || request.headers().contains_key("if-none-match"))
        {
            return self.look_then_write(request).await;
        }
        match self.faults.fate() {
            Fate::Error => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                Ok(slow_down())
            }
            Fate::LoseReply => {
                let _applied = self.send(request).await;
                counts.lost_replies.fetch_add(1, Ordering::Relaxed);
                Err(Dropped("the reply was lost"))
            }
            Fate::Forward => {
                let copies = request.headers().contains_key("x-ms-copy-source");
                match self.send(request).await {
                    Some(response) => Ok(self.restate_copy(response, copies)),
                    None => Err(Dropped("the store did not answer")),
                }
            }
        }
    }

    /// A conditional PUT made the wrong way: the condition is checked
    /// with a HEAD, and after a pause (any server's gap between the two,
    /// widened) the PUT goes on without it.
    async fn look_then_write(
        &self,
        mut request: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Dropped> {
        let path = request.uri().path().to_string();
        // The PUT's credentials go with the look: the server wants a
        // signed request, and the test server does not check signatures.
        let mut look = self.client.head(format!("{}{path}", self.upstream));
        for name in ["authorization", "x-amz-date", "x-amz-content-sha256"] {
            if let Some(value) = request.headers().get(name) {
                look = look.header(name, value);
            }
        }
        let current = look
            .send()
            .await
            .map_err(|_| Dropped("the store did not answer the look"))?;
        let etag = current
            .headers()
            .get("etag")
            .filter(|_| current.status() == StatusCode::OK)
            .and_then(|v| v.to_str().ok())
            .map(|e| e.trim_matches('"').to_string());
        let headers = request.headers_mut();
        let holds = match (headers.remove("if-none-match"), headers.remove("if-match")) {
            (Some(_), _) => etag.is_none(),
            (None, Some(wanted)) => {
                let wanted = wanted.to_str().unwrap_or("").trim_matches('"').to_string();
                etag.as_deref() == Some(wanted.as_str())
            }
            (None, None) => true,
        };
        tokio::time::sleep(Duration::from_millis(30)).await;
        if !holds {
            return Ok(precondition_failed());
        }
        match self.send(request).await {
            Some(response) => Ok(response),
            None => Err(Dropped("the store did not answer")),
        }
    }

    /// An Azure reply with its copy state restated as the faults say: a
    /// copy's own reply (`copies`) and the next reads of its state
    /// pending, or any state failed.
    fn restate_copy(
        &self,
        mut response: Response<Full<Bytes>>,
        copies: bool,
    ) -> Response<Full<Bytes>> {
        const STATE: &str = "x-ms-copy-status";
        let headers = response.headers_mut();
        let pending = &self.faults.pending_copies;
        if self.faults.failed_copies.load(Ordering::Relaxed) && headers.contains_key(STATE) {
            headers.insert(STATE, http::HeaderValue::from_static("failed"));
        } else if (copies || headers.contains_key(STATE))
            && pending
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
        {
            headers.insert(STATE, http::HeaderValue::from_static("pending"));
        }
        response
    }

    /// Forwards the request as it came and returns the store's answer.
    async fn send(&self, request: Request<Incoming>) -> Option<Response<Full<Bytes>>> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.ok()?.to_bytes();
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let mut forwarded = self
            .client
            .request(parts.method, format!("{}{path}", self.upstream))
            .body(body);
        for (name, value) in &parts.headers {
            if !is_hop_by_hop(name.as_str()) {
                forwarded = forwarded.header(name, value);
            }
        }
        let reply = forwarded.send().await.ok()?;
        let mut response = Response::builder().status(reply.status());
        for (name, value) in reply.headers() {
            if !is_hop_by_hop(name.as_str()) {
                response = response.header(name, value);
            }
        }
        let body = reply.bytes().await.ok()?;
        let mut response = response.body(Full::new(body)).ok()?;
        if self.faults.unquote_etags.load(Ordering::Relaxed)
            && let Some(etag) = response.headers().get("etag").and_then(|v| v.to_str().ok())
        {
            let bare = http::HeaderValue::from_str(etag.trim_matches('"')).ok()?;
            response.headers_mut().insert("etag", bare);
        }
        Some(response)
    }
}

fn is_hop_by_hop(header: &str) -> bool {
    matches!(
        header,
        "connection" | "transfer-encoding" | "keep-alive" | "host"
    )
}

/// S3's answer to a copy from a bucket the caller may not read.
fn access_denied() -> Response<Full<Bytes>> {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
        <Error><Code>AccessDenied</Code><Message>refused by the test proxy</Message></Error>";
    Response::builder()
        .status(StatusCode::FORBIDDEN)
        .header("content-type", "application/xml")
        .body(Full::new(Bytes::from(body)))
        .expect("a static response")
}

/// S3's answer to a conditional write whose condition does not hold.
fn precondition_failed() -> Response<Full<Bytes>> {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
        <Error><Code>PreconditionFailed</Code><Message>looked up by the test proxy</Message></Error>";
    Response::builder()
        .status(StatusCode::PRECONDITION_FAILED)
        .header("content-type", "application/xml")
        .body(Full::new(Bytes::from(body)))
        .expect("a static response")
}

/// The answer S3 gives when it sheds load; clients retry it.
fn slow_down() -> Response<Full<Bytes>> {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
        <Error><Code>SlowDown</Code><Message>injected by the chaos proxy</Message></Error>";
    Response::builder()
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .header("content-type", "application/xml")
        .body(Full::new(Bytes::from(body)))
        .expect("a static response")
}
