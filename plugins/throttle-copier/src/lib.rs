//! A copier that caps bandwidth: each object moves with the host's
//! `copy-to` (its bytes never enter the plugin), and the plugin paces the
//! batch so it averages at most `bytes_per_second`.

wit_bindgen::generate!({ world: "copier-plugin", path: "../../wit" });

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use exports::sleet::plugin::copier::{CopyResult, Guest, Info};
use sleet::plugin::blob_store::Store;
use sleet::plugin::log::log;
use sleet::plugin::types::Level;

/// The cap; 0 means unlimited.
static BYTES_PER_SECOND: AtomicU64 = AtomicU64::new(0);

struct ThrottleCopier;

impl Guest for ThrottleCopier {
    fn describe() -> Info {
        Info {
            name: "throttle-copier".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            max_batch: 0,
        }
    }

    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        let mut limit = None;
        for (key, value) in cfg {
            match key.as_str() {
                "bytes_per_second" => {
                    let bps: u64 = value
                        .parse()
                        .map_err(|_| format!("bytes_per_second must be a whole number, got {value:?}"))?;
                    limit = Some(bps);
                }
                other => return Err(format!("unknown setting {other:?} (expected bytes_per_second)")),
            }
        }
        let limit = limit.ok_or("bytes_per_second is required")?;
        BYTES_PER_SECOND.store(limit, Ordering::Relaxed);
        Ok(())
    }

    fn copy(src: &Store, dst: &Store, paths: Vec<String>) -> Vec<CopyResult> {
        let limit = BYTES_PER_SECOND.load(Ordering::Relaxed);
        let start = Instant::now();
        let mut sent = 0u64;
        let mut results = Vec::with_capacity(paths.len());
        for path in paths {
            let outcome = src.copy_to(&path, dst, &path);
            if let Ok(meta) = &outcome {
                sent += meta.size;
                if limit > 0 {
                    // Sleep until the average rate is back under the cap.
                    let due = Duration::from_secs_f64(sent as f64 / limit as f64);
                    if let Some(wait) = due.checked_sub(start.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
            }
            results.push(CopyResult { path, outcome });
        }
        log(
            Level::Debug,
            &format!("copied {sent} bytes in {:?} (cap {limit} B/s)", start.elapsed()),
        );
        results
    }
}

export!(ThrottleCopier);
