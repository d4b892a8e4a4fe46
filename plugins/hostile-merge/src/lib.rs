//! A deliberately hostile merge operator for sleet's fail-closed tests.
//! Its `mode` setting picks the failure in `merge-batch`: `trap` panics,
//! `loop` never returns, `error` returns an error. It is never an example
//! to follow.

wit_bindgen::generate!({ world: "merge-operator-plugin", path: "../../wit/compaction" });

use std::sync::Mutex;

use exports::sleet::compaction::merge_operator::Guest;

static MODE: Mutex<String> = Mutex::new(String::new());

struct HostileMerge;

impl Guest for HostileMerge {
    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        let mode = cfg
            .into_iter()
            .find(|(k, _)| k == "mode")
            .map(|(_, v)| v)
            .ok_or("mode is required")?;
        *MODE.lock().unwrap() = mode;
        Ok(())
    }

    fn merge_batch(
        _key: Vec<u8>,
        _existing: Option<Vec<u8>>,
        _operands: Vec<Vec<u8>>,
    ) -> Result<Vec<u8>, String> {
        match MODE.lock().unwrap().as_str() {
            "trap" => panic!("hostile merge operator traps on purpose"),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "error" => Err("hostile merge operator refuses on purpose".into()),
            other => panic!("unknown mode {other}"),
        }
    }
}

export!(HostileMerge);
