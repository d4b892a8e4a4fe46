//! The node's HTTP endpoint (`sleet run --listen ADDR`): Prometheus
//! metrics, liveness and readiness probes, and the node's own view.
//!
//! - `GET /metrics`: the Prometheus text exposition (OpenMetrics).
//! - `GET /healthz`: 200 while the node loop ticks, else 503.
//! - `GET /readyz`: 200 once a tick read the config and wrote the
//!   heartbeat, 503 while either fails.
//! - `GET /status`: this node's assignments and their states, as JSON.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::observe::metrics::Metrics;
use crate::observe::probes::{NodeProbes, ProbeResult};

/// The port the documentation and `deploy/` use.
pub const DEFAULT_PORT: u16 = 9746;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    probes: Arc<NodeProbes>,
}

/// A bound, not yet serving, endpoint: binding first lets a bad address
/// fail the command before the node starts.
pub struct Endpoint {
    listener: tokio::net::TcpListener,
}

impl Endpoint {
    pub async fn bind(address: SocketAddr) -> std::io::Result<Endpoint> {
        Ok(Endpoint {
            listener: tokio::net::TcpListener::bind(address).await?,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled.
    pub fn serve(
        self,
        metrics: Arc<Metrics>,
        probes: Arc<NodeProbes>,
        shutdown: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let app = Router::new()
            .route("/metrics", get(metrics_text))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .route("/status", get(status))
            .with_state(Shared { metrics, probes });
        tokio::spawn(async move {
            let served = axum::serve(self.listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::warn!("the HTTP endpoint stopped: {e}");
            }
        })
    }
}

async fn metrics_text(State(shared): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, OPENMETRICS)],
        shared.metrics.encode(),
    )
        .into_response()
}

fn probe(result: ProbeResult) -> Response {
    match result {
        Ok(word) => (StatusCode::OK, format!("{word}\n")).into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response(),
    }
}

async fn healthz(State(shared): State<Shared>) -> Response {
    probe(shared.probes.live())
}

async fn readyz(State(shared): State<Shared>) -> Response {
    probe(shared.probes.ready())
}

async fn status(State(shared): State<Shared>) -> Response {
    axum::Json(shared.probes.report()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(address: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        let code = reply[9..12].parse().unwrap();
        (code, reply)
    }

    #[tokio::test]
    async fn serves_metrics_probes_and_status() {
        let endpoint = Endpoint::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let address = endpoint.local_addr().unwrap();
        let metrics = Arc::new(Metrics::default());
        let probes = Arc::new(NodeProbes::default());
        let stop = CancellationToken::new();
        let server = endpoint.serve(metrics.clone(), probes.clone(), stop.clone());

        let (code, body) = get(address, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("application/openmetrics-text"), "{body}");
        assert!(body.contains("sleet_node_ticks_total 0"), "{body}");
        assert_eq!(get(address, "/healthz").await.0, 200, "live while starting");
        let (code, body) = get(address, "/readyz").await;
        assert_eq!(code, 503, "not ready before a tick");
        assert!(body.contains("starting"), "{body}");

        let report = crate::observe::probes::NodeReport {
            node_id: "n1".into(),
            config_read: true,
            heartbeat_written: true,
            ..Default::default()
        };
        probes.ticked(report, std::time::Duration::from_secs(10));
        assert_eq!(get(address, "/readyz").await.0, 200);
        let (code, body) = get(address, "/status").await;
        assert_eq!(code, 200);
        assert!(body.contains("\"node_id\":\"n1\""), "{body}");
        assert_eq!(get(address, "/nope").await.0, 404);

        stop.cancel();
        server.await.unwrap();
    }
}
