//! A deliberately hostile copier for sleet's containment tests. Its
//! `mode` setting picks the attack; it is never an example to follow.

wit_bindgen::generate!({ world: "copier-plugin", path: "../../wit" });

use std::sync::Mutex;

use exports::sleet::plugin::copier::{CopyResult, Guest, Info};
use sleet::plugin::blob_store::Store;
use sleet::plugin::types::{ObjectMeta, StoreError};

static MODE: Mutex<String> = Mutex::new(String::new());

struct Hostile;

/// For each batch path, tries to write one of `names` instead, reporting
/// what the host said under the batch path.
fn attempt_writes(dst: &Store, paths: &[String], names: &[&str]) -> Vec<CopyResult> {
    paths
        .iter()
        .enumerate()
        .map(|(i, path)| CopyResult {
            path: path.clone(),
            outcome: dst.open_write(names[i % names.len()]).and_then(|w| {
                w.write(b"not a real object")?;
                w.finish()
            }),
        })
        .collect()
}

/// Reads a whole object from `src`.
fn read_all(src: &Store, path: &str) -> Result<Vec<u8>, StoreError> {
    let reader = src.open_read(path, 0)?;
    let mut bytes = Vec::new();
    loop {
        let chunk = reader.read(1 << 20)?;
        if chunk.is_empty() {
            return Ok(bytes);
        }
        bytes.extend_from_slice(&chunk);
    }
}

/// Writes `bytes` to `dst` at `path` and reports `claimed_size` for it.
fn write_reporting(dst: &Store, path: &str, bytes: &[u8], claimed_size: u64) -> Result<ObjectMeta, StoreError> {
    let writer = dst.open_write(path)?;
    writer.write(bytes)?;
    writer.finish()?;
    Ok(ObjectMeta {
        path: path.to_string(),
        size: claimed_size,
    })
}

/// The same error for every path.
fn fail_all(paths: &[String], error: StoreError) -> Vec<CopyResult> {
    paths
        .iter()
        .map(|path| CopyResult {
            path: path.clone(),
            outcome: Err(error.clone()),
        })
        .collect()
}

impl Guest for Hostile {
    fn describe() -> Info {
        Info {
            name: "hostile-copier".into(),
            version: "0.0.0".into(),
            max_batch: 0,
        }
    }

    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        let mode = cfg
            .into_iter()
            .find(|(k, _)| k == "mode")
            .map(|(_, v)| v)
            .ok_or("mode is required")?;
        *MODE.lock().unwrap() = mode;
        Ok(())
    }

    fn copy(src: &Store, dst: &Store, paths: Vec<String>) -> Vec<CopyResult> {
        let mode = MODE.lock().unwrap().clone();
        match mode.as_str() {
            "trap" => panic!("hostile copier traps on purpose"),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![7u8; 16 * 1024 * 1024]);
                    std::hint::black_box(&hoard);
                }
            }
            "escape" => attempt_writes(
                dst,
                &paths,
                &["../escaped.sst", "/etc/escaped.sst", "compacted/../../escaped.sst", "compacted/not-in-batch.sst"],
            ),
            "manifest" => {
                let mut results = attempt_writes(dst, &paths, &["manifest/00000000000000000001.manifest"]);
                if let Some(first) = results.first_mut() {
                    first.outcome =
                        src.copy_to(&first.path, dst, "manifest/99999999999999999999.manifest");
                }
                results
            }
            "huge" => (0..100_000)
                .map(|i| CopyResult {
                    path: format!("compacted/{i:0>100}.sst"),
                    outcome: Err(StoreError {
                        kind: "other".into(),
                        message: "x".repeat(16),
                    }),
                })
                .collect(),
            // Writes the first half of each object, reports the whole.
            "partial" => paths
                .iter()
                .map(|path| CopyResult {
                    path: path.clone(),
                    outcome: read_all(src, path).and_then(|bytes| {
                        write_reporting(dst, path, &bytes[..bytes.len() / 2], bytes.len() as u64)
                    }),
                })
                .collect(),
            // Writes each object with its first byte flipped: same size.
            "corrupt" => paths
                .iter()
                .map(|path| CopyResult {
                    path: path.clone(),
                    outcome: read_all(src, path).and_then(|mut bytes| {
                        if let Some(first) = bytes.first_mut() {
                            *first ^= 0xff;
                        }
                        write_reporting(dst, path, &bytes, bytes.len() as u64)
                    }),
                })
                .collect(),
            // Opens writers without finishing them, 8 MiB each, until the
            // host refuses; reports the refusal.
            "writers" => {
                let chunk = vec![1u8; 1024 * 1024];
                let mut open = Vec::new();
                let refusal = 'refused: loop {
                    let path = &paths[open.len() % paths.len()];
                    match dst.open_write(path) {
                        Ok(writer) => {
                            for _ in 0..8 {
                                if let Err(e) = writer.write(&chunk) {
                                    break 'refused e;
                                }
                            }
                            open.push(writer);
                        }
                        Err(e) => break e,
                    }
                    if open.len() > 400 {
                        panic!("the host let 400 writers stay open");
                    }
                };
                fail_all(&paths, refusal)
            }
            // Writes 12 MiB to one object (past the host's 10 MiB buffer, so
            // a multipart upload starts), then traps or never returns.
            "upload-then-trap" | "upload-then-hang" => {
                let writer = dst.open_write(&paths[0]).expect("a writer in the batch");
                let chunk = vec![3u8; 1024 * 1024];
                for _ in 0..12 {
                    writer.write(&chunk).expect("the host takes the chunk");
                }
                if mode == "upload-then-trap" {
                    panic!("hostile copier traps mid-upload");
                }
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            // HEADs one object until the host refuses; reports the refusal.
            "flood" => {
                let refusal = loop {
                    if let Err(e) = src.head(&paths[0]) {
                        break e;
                    }
                };
                fail_all(&paths, refusal)
            }
            // Logs many multi-line lines, then fails every object.
            "logs" => {
                for i in 0..10_000 {
                    sleet::plugin::log::log(
                        sleet::plugin::types::Level::Warn,
                        &format!("line {i}\nINFO sleet: forged line {i}"),
                    );
                }
                fail_all(
                    &paths,
                    StoreError {
                        kind: "other".into(),
                        message: "logged".into(),
                    },
                )
            }
            // Fails the first object with a 16 MiB message, the rest
            // with a short one.
            "huge-error" => {
                let mut results = fail_all(
                    &paths,
                    StoreError {
                        kind: "other".into(),
                        message: "x".into(),
                    },
                );
                if let Some(first) = results.first_mut() {
                    first.outcome = Err(StoreError {
                        kind: "other".into(),
                        message: "E".repeat(16 * 1024 * 1024),
                    });
                }
                results
            }
            // Writes nothing, reports every object copied.
            "lie" => paths
                .iter()
                .map(|path| CopyResult {
                    path: path.clone(),
                    outcome: src.head(path).and_then(|meta| {
                        meta.ok_or(StoreError {
                            kind: "not-found".into(),
                            message: path.clone(),
                        })
                    }),
                })
                .collect(),
            // Writes each object under the next one's name (the last under
            // the first's), reporting each under its own.
            "swap" => paths
                .iter()
                .enumerate()
                .map(|(i, path)| {
                    let other = &paths[(i + 1) % paths.len()];
                    CopyResult {
                        path: path.clone(),
                        outcome: read_all(src, path).and_then(|bytes| {
                            write_reporting(dst, other, &bytes, bytes.len() as u64)
                                .map(|_| ObjectMeta { path: path.clone(), size: bytes.len() as u64 })
                        }),
                    }
                })
                .collect(),
            other => panic!("unknown mode {other}"),
        }
    }
}

export!(Hostile);
