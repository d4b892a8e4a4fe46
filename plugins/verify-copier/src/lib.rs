//! A copier that streams every object through the plugin, checksumming
//! the bytes as they pass, then reads the written copy back and checks it
//! matches before reporting the object copied.

wit_bindgen::generate!({ world: "copier-plugin", path: "../../wit" });

use std::sync::atomic::{AtomicU32, Ordering};

use exports::sleet::plugin::copier::{CopyResult, Guest, Info};
use sleet::plugin::blob_store::Store;
use sleet::plugin::log::log;
use sleet::plugin::types::{Level, ObjectMeta, StoreError};

/// Bytes asked for per read, from `chunk_kib` (default 256 KiB).
static CHUNK: AtomicU32 = AtomicU32::new(256 * 1024);

struct VerifyCopier;

/// FNV-1a 64, streamed: enough to catch a truncated or altered copy.
#[derive(Clone, Copy)]
struct Checksum(u64);

impl Checksum {
    fn new() -> Self {
        Checksum(0xcbf2_9ce4_8422_2325)
    }

    fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn error(kind: &str, message: String) -> StoreError {
    StoreError {
        kind: kind.into(),
        message,
    }
}

/// Reads `path` to the end, feeding `sink`; returns bytes and checksum.
fn read_all(
    store: &Store,
    path: &str,
    mut sink: impl FnMut(&[u8]) -> Result<(), StoreError>,
) -> Result<(u64, Checksum), StoreError> {
    let reader = store.open_read(path, 0)?;
    let (mut size, mut sum) = (0u64, Checksum::new());
    loop {
        let chunk = reader.read(CHUNK.load(Ordering::Relaxed))?;
        if chunk.is_empty() {
            return Ok((size, sum));
        }
        sum.update(&chunk);
        size += chunk.len() as u64;
        sink(&chunk)?;
    }
}

fn copy_one(src: &Store, dst: &Store, path: &str) -> Result<ObjectMeta, StoreError> {
    let writer = dst.open_write(path)?;
    let (size, sent) = read_all(src, path, |chunk| writer.write(chunk))?;
    let meta = writer.finish()?;
    let (copied, landed) = read_all(dst, path, |_| Ok(()))?;
    if copied != size || landed.0 != sent.0 {
        return Err(error(
            "other",
            format!("verification failed for {path}: wrote {size} bytes, read back {copied}"),
        ));
    }
    Ok(meta)
}

impl Guest for VerifyCopier {
    fn describe() -> Info {
        Info {
            name: "verify-copier".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            max_batch: 64,
        }
    }

    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        for (key, value) in cfg {
            match key.as_str() {
                "chunk_kib" => {
                    let kib: u32 = value
                        .parse()
                        .ok()
                        .filter(|k| (4..=1024).contains(k))
                        .ok_or_else(|| format!("chunk_kib must be 4..=1024, got {value:?}"))?;
                    CHUNK.store(kib * 1024, Ordering::Relaxed);
                }
                other => return Err(format!("unknown setting {other:?} (expected chunk_kib)")),
            }
        }
        Ok(())
    }

    fn copy(src: &Store, dst: &Store, paths: Vec<String>) -> Vec<CopyResult> {
        let results: Vec<CopyResult> = paths
            .into_iter()
            .map(|path| {
                let outcome = copy_one(src, dst, &path);
                CopyResult { path, outcome }
            })
            .collect();
        let verified = results.iter().filter(|r| r.outcome.is_ok()).count();
        log(
            Level::Info,
            &format!("verified {verified} of {} objects from {}", results.len(), src.describe()),
        );
        results
    }
}

export!(VerifyCopier);
