//! A hook that lets chosen services run only inside a daily UTC window:
//! outside it, their task runs and mirror passes are deferred (skipped
//! until the next tick or poll). Other services always run.
//!
//! Config: `start = "HH:MM"`, `end = "HH:MM"` (UTC; a window may wrap past
//! midnight), `services = "mirror,gc"` (default: `mirror`).

wit_bindgen::generate!({ world: "hook-plugin", path: "../../wit" });

use std::sync::Mutex;

use exports::sleet::plugin::hook::{Decision, Guest, Outcome, TaskContext};

struct Window {
    start_minute: u32,
    end_minute: u32,
    services: Vec<String>,
}

static WINDOW: Mutex<Option<Window>> = Mutex::new(None);

fn minute_of(text: &str) -> Result<u32, String> {
    let bad = || format!("expected HH:MM (UTC), got {text:?}");
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    let (h, m): (u32, u32) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

impl Window {
    fn contains(&self, minute: u32) -> bool {
        if self.start_minute <= self.end_minute {
            (self.start_minute..self.end_minute).contains(&minute)
        } else {
            minute >= self.start_minute || minute < self.end_minute
        }
    }
}

struct MaintenanceWindow;

impl Guest for MaintenanceWindow {
    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        let (mut start, mut end, mut services) = (None, None, vec!["mirror".to_string()]);
        for (key, value) in cfg {
            match key.as_str() {
                "start" => start = Some(minute_of(&value)?),
                "end" => end = Some(minute_of(&value)?),
                "services" => {
                    services = value.split(',').map(|s| s.trim().to_string()).collect();
                }
                other => return Err(format!("unknown setting {other:?} (expected start, end, services)")),
            }
        }
        let window = Window {
            start_minute: start.ok_or("start is required")?,
            end_minute: end.ok_or("end is required")?,
            services,
        };
        *WINDOW.lock().unwrap() = Some(window);
        Ok(())
    }

    fn pre_task(ctx: TaskContext) -> Decision {
        let guard = WINDOW.lock().unwrap();
        let Some(window) = guard.as_ref() else {
            return Decision::Fail("maintenance-window was not configured".into());
        };
        if !window.services.iter().any(|s| *s == ctx.service) {
            return Decision::Allow;
        }
        let minute = ((ctx.now_unix_ms / 60_000) % (24 * 60)) as u32;
        if window.contains(minute) {
            Decision::Allow
        } else {
            Decision::Skip(format!(
                "outside the maintenance window {:02}:{:02}-{:02}:{:02} UTC",
                window.start_minute / 60,
                window.start_minute % 60,
                window.end_minute / 60,
                window.end_minute % 60
            ))
        }
    }

    fn post_task(_ctx: TaskContext, _outcome: Outcome) {}
}

export!(MaintenanceWindow);
