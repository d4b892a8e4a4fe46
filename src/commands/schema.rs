//! JSON schemas of sleet's formats, generated from the Rust types.
//!
//! The committed files under `schema/` are these functions' output; a test
//! fails when they drift (`UPDATE_SCHEMAS=1` rewrites them).

use schemars::{JsonSchema, schema_for};
use serde::Serialize;

use crate::config::FleetConfig;
use crate::mirror::verify::VerifyReport;
use crate::model::heartbeat::HeartbeatBody;
use crate::model::response::{
    MirrorRestoreResponse, MirrorSyncResponse, RegisterResponse, StatusResponse,
};

/// Any response a one-shot command prints with `--format json`.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
#[schemars(title = "CliResponse")]
pub enum CliResponse {
    Status(StatusResponse),
    Register(RegisterResponse),
    MirrorSync(MirrorSyncResponse),
    MirrorRestore(MirrorRestoreResponse),
    MirrorVerify(VerifyReport),
    PluginCheck(crate::commands::plugin_check::PluginCheckResponse),
    StoreCheck(crate::store::check::StoreReport),
}

/// A schema file: its name under `schema/` and its pretty JSON text.
pub struct SchemaFile {
    pub name: &'static str,
    pub text: String,
}

fn pretty(schema: schemars::Schema) -> String {
    let mut text = serde_json::to_string_pretty(&schema).expect("schemas serialize");
    text.push('\n');
    text
}

/// Every schema sleet publishes.
pub fn all() -> Vec<SchemaFile> {
    vec![
        SchemaFile {
            name: "config.schema.json",
            text: pretty(schema_for!(FleetConfig)),
        },
        SchemaFile {
            name: "heartbeat.schema.json",
            text: pretty(schema_for!(HeartbeatBody)),
        },
        SchemaFile {
            name: "cli.schema.json",
            text: pretty(schema_for!(CliResponse)),
        },
    ]
}
