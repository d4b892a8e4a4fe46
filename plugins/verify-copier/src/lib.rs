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

/// A streamed 64-bit checksum, enough to catch a truncated or altered
/// copy. FNV-1a folds one byte per multiply, a chain of dependent
/// multiplies that made the checksum, not the copy, this plugin's cost;
/// this one folds 8-byte words in four independent lanes (32 bytes per
/// round, which the CPU overlaps) and does not depend on how the stream
/// was cut into chunks: a partial block waits for the next chunk.
#[derive(Clone, Copy)]
struct Checksum {
    lanes: [u64; 4],
    pending: [u8; BLOCK],
    held: usize,
    length: u64,
}

const BLOCK: usize = 32;
const PRIME: u64 = 0x0000_0100_0000_01b3;

impl Checksum {
    fn new() -> Self {
        Checksum {
            lanes: [
                0xcbf2_9ce4_8422_2325,
                0x9e37_79b9_7f4a_7c15,
                0xc2b2_ae3d_27d4_eb4f,
                0x1656_67b1_9e37_79f9,
            ],
            pending: [0; BLOCK],
            held: 0,
            length: 0,
        }
    }

    fn update(&mut self, mut bytes: &[u8]) {
        self.length += bytes.len() as u64;
        if self.held > 0 {
            let take = (BLOCK - self.held).min(bytes.len());
            self.pending[self.held..self.held + take].copy_from_slice(&bytes[..take]);
            self.held += take;
            bytes = &bytes[take..];
            if self.held < BLOCK {
                return;
            }
            let block = self.pending;
            self.fold(&block);
            self.held = 0;
        }
        let mut blocks = bytes.chunks_exact(BLOCK);
        for block in &mut blocks {
            self.fold(block);
        }
        let rest = blocks.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.held = rest.len();
    }

    fn fold(&mut self, block: &[u8]) {
        for (lane, word) in self.lanes.iter_mut().zip(block.chunks_exact(8)) {
            let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = (*lane ^ word).wrapping_mul(PRIME).rotate_left(29);
        }
    }

    /// The checksum of everything fed so far, length included.
    fn value(&self) -> u64 {
        let mut total = self.length.wrapping_mul(PRIME);
        for byte in &self.pending[..self.held] {
            total = (total ^ u64::from(*byte)).wrapping_mul(PRIME);
        }
        for lane in self.lanes {
            total = (total ^ lane).wrapping_mul(PRIME).rotate_left(29);
        }
        total
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
    if copied != size || landed.value() != sent.value() {
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

#[cfg(test)]
mod tests {
    use super::Checksum;

    fn sum_in_pieces(bytes: &[u8], piece: usize) -> u64 {
        let mut sum = Checksum::new();
        for chunk in bytes.chunks(piece) {
            sum.update(chunk);
        }
        sum.value()
    }

    #[test]
    fn the_checksum_ignores_how_the_stream_was_cut() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let whole = sum_in_pieces(&bytes, bytes.len());
        for piece in [1, 3, 8, 31, 32, 33, 100, 999] {
            assert_eq!(sum_in_pieces(&bytes, piece), whole, "pieces of {piece}");
        }
    }

    #[test]
    fn the_checksum_sees_truncation_alteration_and_reordering() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let whole = sum_in_pieces(&bytes, 64);
        assert_ne!(sum_in_pieces(&bytes[..999], 64), whole);
        assert_ne!(sum_in_pieces(&bytes[..992], 64), whole, "one block short");
        let mut altered = bytes.clone();
        altered[500] ^= 1;
        assert_ne!(sum_in_pieces(&altered, 64), whole);
        let mut swapped = bytes.clone();
        swapped.swap(0, 8);
        assert_ne!(sum_in_pieces(&swapped, 64), whole, "lanes are not interchangeable");
        let mut padded = bytes.clone();
        padded.push(0);
        assert_ne!(sum_in_pieces(&padded, 64), whole, "a trailing zero counts");
    }
}
