//! A hook that logs every run's outcome, one line per run:
//! `audit: <service> [<target>] of <db> on <node> (<run> #<attempt>): <status> in <ms> ms`.
//! It never blocks anything.

wit_bindgen::generate!({ world: "hook-plugin", path: "../../wit" });

use exports::sleet::plugin::hook::{Decision, Guest, Outcome, TaskContext};
use sleet::plugin::log::log;
use sleet::plugin::types::Level;

struct AuditHook;

impl Guest for AuditHook {
    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        match cfg.first() {
            None => Ok(()),
            Some((key, _)) => Err(format!("audit-hook takes no settings, got {key:?}")),
        }
    }

    fn pre_task(_ctx: TaskContext) -> Decision {
        Decision::Allow
    }

    fn post_task(ctx: TaskContext, outcome: Outcome) {
        let target = ctx.target.map(|t| format!(" [{t}]")).unwrap_or_default();
        let error = outcome.error.map(|e| format!(": {e}")).unwrap_or_default();
        log(
            Level::Info,
            &format!(
                "audit: {}{target} of {} on {} ({} #{}): {} in {} ms{error}",
                ctx.service,
                ctx.database,
                ctx.node_id,
                ctx.run,
                ctx.attempt,
                outcome.status,
                outcome.duration_ms
            ),
        );
    }
}

export!(AuditHook);
