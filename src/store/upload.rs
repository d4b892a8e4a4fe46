//! Writing one object whose size is not known up front, as cheaply as
//! its size allows: held in memory while it stays within the policy's
//! threshold and sent with one PUT at the end, or, once it outgrows the
//! threshold, sent as a multipart upload of concurrent parts. Streamed
//! copies and plugins' writers both write through here.
//!
//! An upload that does not finish (an error, or its owner dropping it: a
//! cancelled pass, a plugin call past its deadline) is aborted, so no
//! multipart upload is left behind at the destination.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

/// Multipart parts in flight per object.
const PARTS_IN_FLIGHT: usize = 8;
pub use crate::model::policy::PART_SIZE;

pub use crate::model::policy::StreamPolicy;

/// One object being written under a [`StreamPolicy`].
pub struct Upload {
    store: Arc<dyn ObjectStore>,
    path: Path,
    threshold: u64,
    /// Bytes written so far.
    written: u64,
    state: State,
}

enum State {
    /// Still within the threshold: the chunks so far.
    Held(Vec<Bytes>),
    Parts(WriteMultipart),
    Over,
}

impl Upload {
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, policy: StreamPolicy) -> Upload {
        Upload {
            store,
            path,
            threshold: policy.multipart_threshold,
            written: 0,
            state: State::Held(Vec::new()),
        }
    }

    /// Adds `chunk`; past the threshold this starts (or feeds) the
    /// multipart upload, waiting while [`PARTS_IN_FLIGHT`] parts are out.
    pub async fn write(&mut self, chunk: Bytes) -> object_store::Result<()> {
        let length = chunk.len() as u64;
        if let State::Held(chunks) = &mut self.state {
            if self.written + length <= self.threshold {
                self.written += length;
                chunks.push(chunk);
                return Ok(());
            }
            let chunks = std::mem::take(chunks);
            let upload = self.store.put_multipart(&self.path).await?;
            let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
            for held in chunks {
                parts.put(held);
            }
            self.state = State::Parts(parts);
        }
        match &mut self.state {
            State::Parts(parts) => {
                parts.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                parts.put(chunk);
                self.written += length;
                Ok(())
            }
            // Held became Parts just above; only `finish`, `abort` and drop
            // leave Over, and each consumes or ends the upload.
            State::Held(_) | State::Over => unreachable!("an upload written after it ended"),
        }
    }

    /// Sends what is held with one PUT, or completes the multipart upload
    /// (aborting it if that fails); returns the bytes written.
    pub async fn finish(mut self) -> object_store::Result<u64> {
        match std::mem::replace(&mut self.state, State::Over) {
            State::Held(chunks) => {
                let payload: PutPayload = chunks.into_iter().collect();
                self.store.put(&self.path, payload).await?;
            }
            // `finish` aborts the upload itself when completing fails.
            State::Parts(parts) => drop(parts.finish().await?),
            State::Over => {}
        }
        Ok(self.written)
    }

    /// Abandons the object: nothing is committed at the destination.
    pub async fn abort(mut self) {
        if let State::Parts(parts) = std::mem::replace(&mut self.state, State::Over) {
            let _ = parts.abort().await;
        }
    }

    /// Whether dropping this upload would leave a multipart upload to abort.
    pub fn has_parts(&self) -> bool {
        matches!(self.state, State::Parts(_))
    }
}

/// An upload dropped mid-way aborts its multipart upload on a task of its
/// own (owners that must wait for it call [`Upload::abort`] instead).
impl Drop for Upload {
    fn drop(&mut self) {
        let State::Parts(parts) = std::mem::replace(&mut self.state, State::Over) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = parts.abort().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::CountingStore;

    /// Writes `chunks` (sizes in KiB) under a `threshold_mib` policy; the
    /// multipart uploads begun, and whether the object reads back whole.
    async fn write(chunks: &[usize], threshold_mib: u32) -> u64 {
        let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
        let path = Path::from("db/compacted/01.sst");
        let policy = StreamPolicy::with_threshold_mib(threshold_mib);
        let mut upload = Upload::new(store.clone(), path.clone(), policy);
        let mut expected = Vec::new();
        for (i, kib) in chunks.iter().enumerate() {
            let chunk: Vec<u8> = (0..kib * 1024).map(|j| (i * 31 + j % 251) as u8).collect();
            expected.extend_from_slice(&chunk);
            upload.write(chunk.into()).await.unwrap();
        }
        assert_eq!(upload.finish().await.unwrap(), expected.len() as u64);
        let landed = store.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(landed, expected, "the object reads back whole");
        store.multipart_uploads()
    }

    #[tokio::test]
    async fn a_writer_sends_one_put_until_it_outgrows_the_threshold() {
        assert_eq!(write(&[1024, 1024, 3072], 5).await, 0, "5 MiB in one PUT");
        assert_eq!(
            write(&[1024, 3072, 2048, 4096], 5).await,
            1,
            "10 MiB in parts"
        );
        assert_eq!(write(&[6144], 5).await, 1, "one chunk over the threshold");
        assert_eq!(write(&[], 5).await, 0, "an empty object is one PUT");
    }

    #[test]
    fn a_capped_policy_stays_within_the_cap_and_at_least_one_part() {
        let policy = StreamPolicy::with_threshold_mib(64);
        assert_eq!(policy.capped(32 << 20).multipart_threshold, 32 << 20);
        assert_eq!(policy.capped(1 << 30).multipart_threshold, 64 << 20);
        assert_eq!(policy.capped(0).multipart_threshold, PART_SIZE as u64);
    }
}
