//! What the host gives a plugin instance: logging, and object-store
//! handles scoped to the current batch. Each store (one per call) owns a
//! `HostState`; nothing outlives the call.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectStoreExt};
use wasmtime::ResourceLimiter;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::copier_world::sleet::plugin::{blob_store, log, types};
use super::budget::Budget;
pub use super::handles::PendingAborts;
use super::handles::{ReaderHandle, StoreHandle, WriterHandle};
use super::output::GuestOutput;
use super::text::{MAX_LOG_LINE, bounded};
use crate::store::StoreRoot;
use crate::store::object_copy::copy_between;
use crate::store::upload::{StreamPolicy, Upload};

/// Bytes a single `read` may return, whatever the plugin asks for.
const MAX_READ: usize = 1024 * 1024;
/// Readers open at once per call (each holds at most a chunk or so).
const MAX_OPEN_READERS: usize = 16;
/// Store requests (`head`, `open-read`, `open-write`, `copy-to`) per
/// batch object, plus a fixed allowance: generous for any honest copier,
/// a ceiling for one that floods the bucket.
const REQUESTS_PER_OBJECT: u64 = 8;
const REQUESTS_PER_CALL: u64 = 16;
/// Log lines one call may write; the rest are counted and dropped.
const MAX_LOG_LINES: u32 = 64;

/// What one call may make the host do, beyond its linear memory.
#[derive(Debug)]
struct CallBudget {
    open_writers: usize,
    open_readers: usize,
    requests_left: u64,
    log_lines: u32,
    logs_dropped: u32,
}

impl CallBudget {
    /// Requests scale with the batch (open writers are bounded by
    /// [`HostState::max_open_writers`]).
    fn new(objects: usize) -> Self {
        CallBudget {
            open_writers: 0,
            open_readers: 0,
            requests_left: REQUESTS_PER_CALL + REQUESTS_PER_OBJECT * objects as u64,
            log_lines: 0,
            logs_dropped: 0,
        }
    }

    /// Spends one store request, or says the budget is gone.
    fn request(&mut self) -> Result<(), types::StoreError> {
        if self.requests_left == 0 {
            return Err(denied(
                "request budget spent: this call made more store requests than its batch needs"
                    .into(),
            ));
        }
        self.requests_left -= 1;
        Ok(())
    }
}

/// The objects one call may touch: the batch's names, nothing else.
#[derive(Debug, Default)]
pub struct Scope {
    allowed: BTreeSet<String>,
}

impl Scope {
    /// How many objects the call may touch.
    fn len(&self) -> usize {
        self.allowed.len()
    }

    pub fn new(objects: &[String]) -> Self {
        Scope {
            allowed: objects.iter().cloned().collect(),
        }
    }

    /// `Ok` when `path` is one of the batch's objects; otherwise why not.
    fn check(&self, path: &str) -> Result<(), types::StoreError> {
        let escape = path.is_empty()
            || path.starts_with('/')
            || path.contains('\\')
            || path
                .split('/')
                .any(|seg| seg.is_empty() || seg == "." || seg == "..");
        let reason = if escape {
            "path escape: only relative names inside the root are allowed"
        } else if path == "manifest" || path.starts_with("manifest/") {
            "manifests are written only by sleet itself"
        } else if !self.allowed.contains(path) {
            "not an object of the current batch"
        } else {
            return Ok(());
        };
        Err(denied(format!("{path}: {reason}")))
    }
}

fn store_error(kind: &str, message: impl Into<String>) -> types::StoreError {
    types::StoreError {
        kind: kind.into(),
        message: message.into(),
    }
}

fn denied(message: String) -> types::StoreError {
    store_error("denied", message)
}

/// An object-store error as a plugin sees it.
fn from_store(e: object_store::Error) -> types::StoreError {
    match e {
        object_store::Error::NotFound { path, .. } => store_error("not-found", path),
        other => store_error("unavailable", other.to_string()),
    }
}

/// Everything one instance's store holds.
pub struct HostState {
    pub plugin: String,
    table: ResourceTable,
    wasi: WasiCtx,
    /// Every memory and table of the instance, charged against `memory_mib`.
    memory: Budget,
    scope: Scope,
    budget: CallBudget,
    /// Bytes the plugin wrote at the destination (writers and `copy-to`).
    pub bytes_written: Arc<AtomicU64>,
    /// Aborts of writers the call left unfinished.
    pub aborts: PendingAborts,
    memory_bytes: u64,
    /// What the call wrote to stdout and stderr (bounded).
    pub output: GuestOutput,
    /// How `copy-to` streams when no server-side copy is possible, and
    /// (held to half the plugin's memory) how writers upload.
    pub stream_policy: StreamPolicy,
}

impl HostState {
    /// A state with no filesystem, network or environment, and a memory cap;
    /// stdout and stderr go to a bounded buffer the host reads back.
    pub fn new(plugin: &str, memory_bytes: u64, scope: Scope) -> Self {
        let output = GuestOutput::default();
        HostState {
            plugin: plugin.to_string(),
            table: ResourceTable::new(),
            wasi: WasiCtx::builder()
                .stdout(output.clone())
                .stderr(output.clone())
                .build(),
            output,
            memory: Budget::new(memory_bytes),
            budget: CallBudget::new(scope.len()),
            scope,
            bytes_written: Arc::new(AtomicU64::new(0)),
            aborts: PendingAborts::default(),
            memory_bytes,
            stream_policy: StreamPolicy::default(),
        }
    }

    /// How a writer uploads: the call's policy, its threshold held to
    /// half the plugin's memory.
    fn writer_policy(&self) -> StreamPolicy {
        self.stream_policy.capped(self.memory_bytes / 2)
    }

    /// A writer holds up to its threshold in host memory before it
    /// switches to parts, so the writers open at once are what the
    /// plugin's memory holds of them (at least one).
    fn max_open_writers(&self) -> usize {
        (self.memory_bytes / self.writer_policy().multipart_threshold).max(1) as usize
    }

    pub fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.memory
    }

    /// The most the instance's memories and tables held at once, in bytes.
    pub fn peak_memory(&self) -> u64 {
        self.memory.peak()
    }

    /// Hands the plugin a handle to `root`.
    pub fn push_store(
        &mut self,
        root: StoreRoot,
        writable: bool,
    ) -> wasmtime::Result<Resource<StoreHandle>> {
        Ok(self.table.push(StoreHandle { root, writable })?)
    }

    fn root(&self, handle: &Resource<StoreHandle>) -> wasmtime::Result<(StoreRoot, bool)> {
        let store = self.table.get(handle)?;
        Ok((store.root.clone(), store.writable))
    }
}

impl Drop for HostState {
    fn drop(&mut self) {
        if self.budget.logs_dropped > 0 {
            tracing::warn!(
                plugin = %self.plugin,
                "dropped {} log lines of one call (at most {MAX_LOG_LINES} a call)",
                self.budget.logs_dropped
            );
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for HostState {}

impl log::Host for HostState {
    async fn log(&mut self, level: types::Level, message: String) -> wasmtime::Result<()> {
        let budget = &mut self.budget;
        if budget.log_lines >= MAX_LOG_LINES {
            budget.logs_dropped += 1;
            return Ok(());
        }
        budget.log_lines += 1;
        let message = bounded(&message, MAX_LOG_LINE);
        let plugin = &self.plugin;
        match level {
            types::Level::Trace => tracing::trace!(plugin, "{message}"),
            types::Level::Debug => tracing::debug!(plugin, "{message}"),
            types::Level::Info => tracing::info!(plugin, "{message}"),
            types::Level::Warn => tracing::warn!(plugin, "{message}"),
            types::Level::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }
}

impl blob_store::Host for HostState {}

impl blob_store::HostStore for HostState {
    async fn describe(&mut self, handle: Resource<StoreHandle>) -> wasmtime::Result<String> {
        Ok(self.root(&handle)?.0.url)
    }

    async fn head(
        &mut self,
        handle: Resource<StoreHandle>,
        path: String,
    ) -> wasmtime::Result<Result<Option<types::ObjectMeta>, types::StoreError>> {
        let (root, _) = self.root(&handle)?;
        if let Err(e) = self.scope.check(&path).and_then(|()| self.budget.request()) {
            return Ok(Err(e));
        }
        Ok(match root.store.head(&root.path(&path)).await {
            Ok(meta) => Ok(Some(types::ObjectMeta {
                path,
                size: meta.size,
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(from_store(e)),
        })
    }

    async fn open_read(
        &mut self,
        handle: Resource<StoreHandle>,
        path: String,
        offset: u64,
    ) -> wasmtime::Result<Result<Resource<ReaderHandle>, types::StoreError>> {
        let (root, _) = self.root(&handle)?;
        if let Err(e) = self.scope.check(&path).and_then(|()| self.budget.request()) {
            return Ok(Err(e));
        }
        if self.budget.open_readers >= MAX_OPEN_READERS {
            return Ok(Err(denied(format!(
                "{path}: at most {MAX_OPEN_READERS} readers may be open at once"
            ))));
        }
        let options = GetOptions {
            range: (offset > 0).then_some(GetRange::Offset(offset)),
            ..GetOptions::default()
        };
        let stream = match root.store.get_opts(&root.path(&path), options).await {
            Ok(got) => got.into_stream(),
            Err(e) => return Ok(Err(from_store(e))),
        };
        let reader = ReaderHandle {
            stream,
            leftover: Bytes::new(),
        };
        self.budget.open_readers += 1;
        Ok(Ok(self.table.push(reader)?))
    }

    async fn open_write(
        &mut self,
        handle: Resource<StoreHandle>,
        path: String,
    ) -> wasmtime::Result<Result<Resource<WriterHandle>, types::StoreError>> {
        let (root, writable) = self.root(&handle)?;
        if !writable {
            return Ok(Err(denied(format!("{path}: the source is read-only"))));
        }
        if let Err(e) = self.scope.check(&path).and_then(|()| self.budget.request()) {
            return Ok(Err(e));
        }
        if self.budget.open_writers >= self.max_open_writers() {
            return Ok(Err(denied(format!(
                "{path}: at most {} writers may be open at once within this plugin's memory \
                 budget; finish or drop one first",
                self.max_open_writers()
            ))));
        }
        self.budget.open_writers += 1;
        let upload = Upload::new(root.store.clone(), root.path(&path), self.writer_policy());
        let writer = WriterHandle {
            writer: Some(upload),
            path,
            aborts: self.aborts.clone(),
        };
        Ok(Ok(self.table.push(writer)?))
    }

    async fn copy_to(
        &mut self,
        handle: Resource<StoreHandle>,
        path: String,
        dest: Resource<StoreHandle>,
        dest_path: String,
    ) -> wasmtime::Result<Result<types::ObjectMeta, types::StoreError>> {
        let (source, _) = self.root(&handle)?;
        let (destination, writable) = self.root(&dest)?;
        if !writable {
            return Ok(Err(denied(format!("{dest_path}: the source is read-only"))));
        }
        if let Err(e) = self
            .scope
            .check(&path)
            .and(self.scope.check(&dest_path))
            .and_then(|()| self.budget.request())
        {
            return Ok(Err(e));
        }
        Ok(
            match copy_between(&source, &path, &destination, &dest_path, self.stream_policy).await {
                Ok(size) => {
                    self.bytes_written.fetch_add(size, Ordering::Relaxed);
                    Ok(types::ObjectMeta {
                        path: dest_path,
                        size,
                    })
                }
                Err(e) => Err(from_store(e)),
            },
        )
    }

    async fn drop(&mut self, handle: Resource<StoreHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl blob_store::HostReader for HostState {
    async fn read(
        &mut self,
        handle: Resource<ReaderHandle>,
        max: u32,
    ) -> wasmtime::Result<Result<Vec<u8>, types::StoreError>> {
        let reader = self.table.get_mut(&handle)?;
        let want = (max as usize).clamp(1, MAX_READ);
        while reader.leftover.is_empty() {
            match reader.stream.next().await {
                None => return Ok(Ok(Vec::new())),
                Some(Ok(chunk)) => reader.leftover = chunk,
                Some(Err(e)) => return Ok(Err(from_store(e))),
            }
        }
        let take = want.min(reader.leftover.len());
        Ok(Ok(reader.leftover.split_to(take).to_vec()))
    }

    async fn drop(&mut self, handle: Resource<ReaderHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        self.budget.open_readers = self.budget.open_readers.saturating_sub(1);
        Ok(())
    }
}

impl blob_store::HostWriter for HostState {
    async fn write(
        &mut self,
        handle: Resource<WriterHandle>,
        chunk: Vec<u8>,
    ) -> wasmtime::Result<Result<(), types::StoreError>> {
        let writer = self.table.get_mut(&handle)?;
        let Some(inner) = writer.writer.as_mut() else {
            return Ok(Err(store_error("other", "write after finish")));
        };
        if let Err(e) = inner.write(Bytes::from(chunk)).await {
            return Ok(Err(store_error("unavailable", e.to_string())));
        }
        Ok(Ok(()))
    }

    async fn finish(
        &mut self,
        handle: Resource<WriterHandle>,
    ) -> wasmtime::Result<Result<types::ObjectMeta, types::StoreError>> {
        let writer = self.table.get_mut(&handle)?;
        let Some(inner) = writer.writer.take() else {
            return Ok(Err(store_error("other", "finish called twice")));
        };
        self.budget.open_writers = self.budget.open_writers.saturating_sub(1);
        // A failed finish has aborted its own multipart upload.
        let size = match inner.finish().await {
            Ok(size) => size,
            Err(e) => return Ok(Err(store_error("unavailable", e.to_string()))),
        };
        let path = writer.path.clone();
        self.bytes_written.fetch_add(size, Ordering::Relaxed);
        Ok(Ok(types::ObjectMeta { path, size }))
    }

    /// An unfinished writer is abandoned: nothing is committed.
    async fn drop(&mut self, handle: Resource<WriterHandle>) -> wasmtime::Result<()> {
        let mut writer = self.table.delete(handle)?;
        if let Some(inner) = writer.writer.take() {
            self.budget.open_writers = self.budget.open_writers.saturating_sub(1);
            inner.abort().await;
        }
        Ok(())
    }
}
