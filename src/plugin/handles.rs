//! The resources a copier plugin holds through `blob-store`: handles to
//! the call's two roots, open readers and open writers. The generated
//! bindings name these types and the host implements their methods, so
//! they sit below both and the two import in one direction.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;

use crate::store::StoreRoot;
use crate::store::upload::Upload;

/// A root the plugin holds a handle to.
pub struct StoreHandle {
    pub root: StoreRoot,
    pub writable: bool,
}

pub struct ReaderHandle {
    pub(super) stream: BoxStream<'static, object_store::Result<Bytes>>,
    pub(super) leftover: Bytes,
}

pub struct WriterHandle {
    pub(super) path: String,
    pub(super) writer: Option<Upload>,
    pub(super) aborts: PendingAborts,
}

/// A writer dropped unfinished (its call trapped, timed out or was
/// cancelled, and the store went with it) aborts its upload, so no
/// multipart upload is left behind at the destination. The abort runs on
/// its own task, recorded in the call's [`PendingAborts`] so the caller
/// can wait for it before it reports the call done.
impl Drop for WriterHandle {
    fn drop(&mut self) {
        let Some(writer) = self.writer.take().filter(Upload::has_parts) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            self.aborts.push(runtime.spawn(writer.abort()));
        }
    }
}

/// Upload aborts started when a call's store was dropped. A one-shot
/// `mirror sync` exits right after its last call; without waiting here an
/// abort still in flight would die with the process and leave the
/// multipart upload (and its storage bill) at the destination.
#[derive(Clone, Default)]
pub struct PendingAborts(Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>);

impl PendingAborts {
    pub(super) fn push(&self, task: tokio::task::JoinHandle<()>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(task);
    }

    /// Waits up to `limit` for every abort started so far; one that takes
    /// longer is left to finish on its own (the store's lifecycle rules
    /// are the last line).
    pub async fn wait(&self, limit: std::time::Duration) {
        let tasks = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        if tasks.is_empty() {
            return;
        }
        if tokio::time::timeout(limit, futures::future::join_all(tasks))
            .await
            .is_err()
        {
            tracing::warn!("aborting unfinished uploads took over {limit:?}; left running");
        }
    }
}
