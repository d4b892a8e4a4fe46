//! The committed JSON schemas match the Rust types, and what sleet reads
//! and writes validates against them.

use serde_json::{Value, json};

use crate::common::*;

const SCHEMA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schema");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn committed(name: &str) -> Value {
    json(&std::fs::read_to_string(format!("{SCHEMA_DIR}/{name}")).unwrap())
}

/// Validation errors of `instance` against `schema`, as strings.
fn problems(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("a valid schema");
    validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

fn toml_as_json(path: &str) -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap();
    serde_json::to_value(toml::from_str::<toml::Value>(&text).unwrap()).unwrap()
}

/// A schema for one `$defs` entry of the config schema (for registry files).
fn database_schema() -> Value {
    let config = committed("config.schema.json");
    json!({"$ref": "#/$defs/DatabaseConfig", "$defs": config["$defs"]})
}

#[test]
fn committed_schemas_are_current() {
    let mut stale = Vec::new();
    for file in sleet::commands::schema::all() {
        let path = format!("{SCHEMA_DIR}/{}", file.name);
        if std::env::var_os("UPDATE_SCHEMAS").is_some() {
            std::fs::write(&path, &file.text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(file.text.as_str()) {
            stale.push(file.name);
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} drifted from the Rust types; run UPDATE_SCHEMAS=1 cargo test --test core schemas"
    );
}

#[test]
fn config_files_validate_against_the_config_schema() {
    let schema = committed("config.schema.json");
    for path in ["examples/sleet.toml", "tests/corpus/v0.1.0/sleet.toml"] {
        assert_eq!(
            problems(&schema, &toml_as_json(path)),
            Vec::<String>::new(),
            "{path}"
        );
    }
    let db = database_schema();
    for path in ["examples/db.toml", "tests/corpus/v0.1.0/db.toml"] {
        assert_eq!(
            problems(&db, &toml_as_json(path)),
            Vec::<String>::new(),
            "{path}"
        );
    }
    let typo = json!({"database": {"gc": {"wals": {}}}});
    assert!(
        !problems(&schema, &typo).is_empty(),
        "unknown keys are schema errors too"
    );
    let bad_duration = json!({"node": {"heartbeat_interval": "soon"}});
    assert!(!problems(&schema, &bad_duration).is_empty());
}

#[test]
fn heartbeat_bodies_validate() {
    let schema = committed("heartbeat.schema.json");
    let corpus = json(
        &std::fs::read_to_string(format!("{ROOT}/tests/corpus/v0.1.0/heartbeat.json")).unwrap(),
    );
    assert_eq!(problems(&schema, &corpus), Vec::<String>::new());
    let ours =
        serde_json::to_value(sleet::model::heartbeat::HeartbeatBody::new("n1", vec![])).unwrap();
    assert_eq!(problems(&schema, &ours), Vec::<String>::new());
    assert!(!problems(&schema, &json!({"version": 1})).is_empty());
}

#[test]
fn cli_responses_validate() {
    let schema = committed("cli.schema.json");
    let root = FileRoot::new();
    root.heartbeat(
        "n1.cgmw.json",
        r#"{"version":1,"node_id":"n1","sleet_version":"0.1.0","slatedb_version":"0.14.1","services":[]}"#,
        std::time::Duration::from_secs(1),
    );
    root.write("dbs/README", "x");
    let url = root.url();
    let register = json(&ok(sleet(&[
        "register",
        &url,
        "s3://b/db",
        "--no-check",
        "--format",
        "json",
    ])));
    let status = json(&ok(sleet(&["status", &url, "--format", "json"])));
    assert!(
        status["warnings"].is_array(),
        "the sample should exercise warnings"
    );
    for response in [register, status] {
        assert_eq!(
            problems(&schema, &response),
            Vec::<String>::new(),
            "{response:#}"
        );
    }
}
