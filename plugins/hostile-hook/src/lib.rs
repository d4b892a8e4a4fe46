//! A deliberately hostile hook for sleet's fail-closed tests. Its `mode`
//! setting picks the failure: `trap` panics in `pre-task`, `loop` never
//! returns from it. It is never an example to follow.

wit_bindgen::generate!({ world: "hook-plugin", path: "../../wit" });

use std::sync::Mutex;

use exports::sleet::plugin::hook::{Decision, Guest, Outcome, TaskContext};

static MODE: Mutex<String> = Mutex::new(String::new());

struct HostileHook;

impl Guest for HostileHook {
    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        let mode = cfg
            .into_iter()
            .find(|(k, _)| k == "mode")
            .map(|(_, v)| v)
            .ok_or("mode is required")?;
        *MODE.lock().unwrap() = mode;
        Ok(())
    }

    fn pre_task(_ctx: TaskContext) -> Decision {
        match MODE.lock().unwrap().as_str() {
            "trap" => panic!("hostile hook traps on purpose"),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            other => panic!("unknown mode {other}"),
        }
    }

    fn post_task(_ctx: TaskContext, _outcome: Outcome) {}
}

export!(HostileHook);
