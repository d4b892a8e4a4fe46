//! A merge operator for counters: every value and operand is a u64,
//! little-endian, and merging adds them (wrapping, as the usual native
//! counter does with `wrapping_add`). A database written with the same
//! operator in Rust can be compacted by sleet with this one.
//!
//! Settings: none.

wit_bindgen::generate!({ world: "merge-operator-plugin", path: "../../wit/compaction" });

use exports::sleet::compaction::merge_operator::Guest;

struct CounterMerge;

/// A counter's value, or why the bytes are not one.
fn counter(bytes: &[u8], what: &str) -> Result<u64, String> {
    let array: [u8; 8] = bytes
        .try_into()
        .map_err(|_| format!("{what} is {} bytes; a counter is 8 (u64, little-endian)", bytes.len()))?;
    Ok(u64::from_le_bytes(array))
}

impl Guest for CounterMerge {
    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        match cfg.first() {
            None => Ok(()),
            Some((key, _)) => Err(format!("counter-merge takes no settings, got {key:?}")),
        }
    }

    fn merge_batch(
        _key: Vec<u8>,
        existing: Option<Vec<u8>>,
        operands: Vec<Vec<u8>>,
    ) -> Result<Vec<u8>, String> {
        let mut total = match existing {
            Some(bytes) => counter(&bytes, "the existing value")?,
            None => 0,
        };
        for operand in &operands {
            total = total.wrapping_add(counter(operand, "an operand")?);
        }
        Ok(total.to_le_bytes().to_vec())
    }
}

export!(CounterMerge);
