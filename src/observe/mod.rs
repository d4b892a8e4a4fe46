//! Observation: what a node tells the outside about itself.
//!
//! `metrics` (the Prometheus families, SlateDB's own recorder among
//! them), `probes` (the liveness and readiness a node reports) and
//! `endpoint` (the HTTP server for `/metrics`, `/healthz`, `/readyz` and
//! `/status`, which is handed the status to serve rather than computing
//! it).
//!
//! May import: `plugin` (its call observer), `config`, `store`, `model`.

pub mod endpoint;
pub mod metrics;
pub mod probes;
