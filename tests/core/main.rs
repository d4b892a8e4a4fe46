//! Fleet-core integration tests: the real `sleet` binary over real roots.
//!
//! One test binary (modules below) so the heavy dependency tree links once.

mod architecture;
mod cli;
mod common;
mod corpus;
mod deploy;
mod import_graph;
mod props;
mod s3;
mod schemas;
mod simulate;
