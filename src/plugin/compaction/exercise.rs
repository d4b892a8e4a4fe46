//! A few real calls into a compaction plugin, as SlateDB's compactor
//! would make them (`sleet plugin check --exercise`). Values of the shapes
//! the examples use (8-byte little-endian counters, short text): a plugin
//! that returns an error for them is warned about, as its own values may
//! differ; one that traps, times out or breaks the protocol fails.

use super::super::PluginError;
use super::super::PluginLimits;
use super::super::bindings::filter_world::exports::sleet::compaction::compaction_filter::{
    Entry, Job, Value,
};
use super::{FilterPlugin, MergePlugin, call_within, plugin_message};

/// What an exercise did, and what looked wrong without failing it.
#[derive(Debug, Default)]
pub struct Exercised {
    pub did: Vec<String>,
    pub warnings: Vec<String>,
}

/// One merge tried: what its values are, the existing value, the operands.
type MergeCase = (&'static str, Option<Vec<u8>>, Vec<Vec<u8>>);

/// Operands of the two shapes tried: counters, then text.
fn operand_sets() -> [MergeCase; 2] {
    let counter = |n: u64| n.to_le_bytes().to_vec();
    [
        (
            "8-byte little-endian counters",
            Some(counter(5)),
            vec![counter(1), counter(2)],
        ),
        ("text", None, vec![b"a".to_vec(), b"b".to_vec()]),
    ]
}

/// Merges each operand set into a key, in one configured instance.
pub fn merges(
    plugin: &MergePlugin,
    config: &[(String, String)],
    limits: &PluginLimits,
) -> Result<Exercised, PluginError> {
    let mut instance = plugin.instance(config, limits)?;
    let mut exercised = Exercised::default();
    for (shape, existing, operands) in operand_sets() {
        let (store, bindings) = (&mut instance.store, &instance.bindings);
        let merged = call_within(store, limits, |store| {
            bindings.sleet_compaction_merge_operator().call_merge_batch(
                store,
                b"exercise-key",
                existing.as_deref(),
                &operands,
            )
        })?;
        match merged {
            Ok(value) => exercised
                .did
                .push(format!("merged {shape} into {} bytes", value.len())),
            Err(message) => exercised.warnings.push(format!(
                "merging {shape} returned an error (fine if your values are of another shape): {}",
                plugin_message(message)
            )),
        }
    }
    Ok(exercised)
}

/// Starts a job, filters a value, a merge operand and a tombstone, and
/// ends the job, in one configured instance.
pub fn filters(
    plugin: &FilterPlugin,
    config: &[(String, String)],
    limits: &PluginLimits,
) -> Result<Exercised, PluginError> {
    let mut instance = plugin.instance(config, limits)?;
    let (store, bindings) = (&mut instance.store, &instance.bindings);
    let filter = bindings.sleet_compaction_compaction_filter();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let job = Job {
        destination: 0,
        is_dest_last_run: true,
        now_ms,
        retention_min_seq: None,
    };
    let mut exercised = Exercised::default();
    if let Err(message) = call_within(store, limits, |store| filter.call_start_job(store, job))? {
        exercised.warnings.push(format!(
            "start-job returned an error: {}",
            plugin_message(message)
        ));
        return Ok(exercised);
    }
    let entries = [
        ("a value", Value::Put(b"value".to_vec())),
        ("a merge operand", Value::Merge(1u64.to_le_bytes().to_vec())),
        ("a tombstone", Value::Tombstone),
    ];
    for (seq, (what, value)) in entries.into_iter().enumerate() {
        let entry = Entry {
            key: format!("exercise-key-{seq}").into_bytes(),
            value,
            seq: seq as u64 + 1,
            create_ts: Some(now_ms - 60_000),
            expire_ts: None,
        };
        match call_within(store, limits, |store| filter.call_filter(store, &entry))? {
            Ok(decision) => exercised.did.push(format!("filtered {what}: {decision:?}")),
            Err(message) => exercised.warnings.push(format!(
                "filtering {what} returned an error: {}",
                plugin_message(message)
            )),
        }
    }
    match call_within(store, limits, |store| filter.call_end_job(store))? {
        Ok(()) => exercised.did.push("ended the job".into()),
        Err(message) => exercised.warnings.push(format!(
            "end-job returned an error: {}",
            plugin_message(message)
        )),
    }
    Ok(exercised)
}
