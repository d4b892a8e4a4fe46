//! A compaction filter that expires entries older than a configured age,
//! by the time they were written (`create-ts`) against the compaction's
//! clock.
//!
//! Settings:
//! - `max_age` (required): `500ms`, `90s`, `15m`, `12h` or `7d`.
//!
//! An expired value becomes a tombstone, so an older version of its key
//! in a lower sorted run cannot show through again; in the oldest run,
//! where nothing lies below, it is dropped outright. Expired merge
//! operands are dropped (a tombstone would delete the key's older
//! operands too). Entries that snapshots hold (at or above
//! `retention-min-seq`) and entries without a write time are kept.

wit_bindgen::generate!({ world: "compaction-filter-plugin", path: "../../wit/compaction" });

use std::sync::Mutex;

use exports::sleet::compaction::compaction_filter::{Decision, Entry, Guest, Job, Value};

struct Settings {
    max_age_ms: i64,
}

static SETTINGS: Mutex<Option<Settings>> = Mutex::new(None);
static JOB: Mutex<Option<Job>> = Mutex::new(None);

/// `90s` as milliseconds.
fn parse_age(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: i64 = number
        .parse()
        .map_err(|_| format!("max_age {text:?} does not start with a whole number"))?;
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("max_age {text:?}: the unit must be ms, s, m, h or d")),
    };
    number
        .checked_mul(unit_ms)
        .filter(|ms| *ms > 0)
        .ok_or_else(|| format!("max_age {text:?} must be above zero and below 292 million years"))
}

struct TtlFilter;

impl Guest for TtlFilter {
    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        let mut max_age_ms = None;
        for (key, value) in cfg {
            match key.as_str() {
                "max_age" => max_age_ms = Some(parse_age(&value)?),
                other => return Err(format!("ttl-filter has no setting {other:?}")),
            }
        }
        let max_age_ms = max_age_ms.ok_or("max_age is required, such as max_age = \"7d\"")?;
        *SETTINGS.lock().unwrap() = Some(Settings { max_age_ms });
        Ok(())
    }

    fn start_job(job: Job) -> Result<(), String> {
        *JOB.lock().unwrap() = Some(job);
        Ok(())
    }

    fn filter(entry: Entry) -> Result<Decision, String> {
        let settings = SETTINGS.lock().unwrap();
        let settings = settings.as_ref().ok_or("filter called before configure")?;
        let job = JOB.lock().unwrap();
        let job = job.as_ref().ok_or("filter called before start-job")?;
        let held_by_snapshot = job.retention_min_seq.is_some_and(|min| entry.seq >= min);
        let expired = entry
            .create_ts
            .is_some_and(|written| job.now_ms.saturating_sub(written) > settings.max_age_ms);
        if held_by_snapshot || !expired {
            return Ok(Decision::Keep);
        }
        Ok(match entry.value {
            Value::Tombstone => Decision::Keep,
            Value::Merge(_) => Decision::Drop,
            Value::Put(_) if job.is_dest_last_run => Decision::Drop,
            Value::Put(_) => Decision::Tombstone,
        })
    }

    fn end_job() -> Result<(), String> {
        *JOB.lock().unwrap() = None;
        Ok(())
    }
}

export!(TtlFilter);
