//! What the host gives a plugin instance: logging, and object-store
//! handles scoped to the current batch. Each store (one per call) owns a
//! `HostState`; nothing outlives the call.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::buffered::BufWriter;
use object_store::{GetOptions, GetRange, ObjectStoreExt};
use tokio::io::AsyncWriteExt;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::copier_world::sleet::plugin::{blob_store, log, types};
use crate::copier::builtin::copy_between;
use crate::store::StoreRoot;

/// Bytes a single `read` may return, whatever the plugin asks for.
const MAX_READ: usize = 1024 * 1024;

/// The objects one call may touch: the batch's names, nothing else.
#[derive(Debug, Default)]
pub struct Scope {
    allowed: BTreeSet<String>,
}

impl Scope {
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

/// A root the plugin holds a handle to.
pub struct StoreHandle {
    pub root: StoreRoot,
    pub writable: bool,
}

pub struct ReaderHandle {
    stream: BoxStream<'static, object_store::Result<Bytes>>,
    leftover: Bytes,
}

pub struct WriterHandle {
    path: String,
    writer: Option<BufWriter>,
    written: u64,
}

/// Everything one instance's store holds.
pub struct HostState {
    pub plugin: String,
    table: ResourceTable,
    wasi: WasiCtx,
    limits: StoreLimits,
    scope: Scope,
    /// Bytes the plugin wrote at the destination (writers and `copy-to`).
    pub bytes_written: Arc<AtomicU64>,
}

impl HostState {
    /// A state with no filesystem, network or environment, and a memory cap.
    pub fn new(plugin: &str, memory_bytes: u64, scope: Scope) -> Self {
        HostState {
            plugin: plugin.to_string(),
            table: ResourceTable::new(),
            wasi: WasiCtx::builder().build(),
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes as usize)
                .instances(4)
                .trap_on_grow_failure(true)
                .build(),
            scope,
            bytes_written: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limits
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
        const MAX_LINE: usize = 4096;
        let message: String = message.chars().take(MAX_LINE).collect();
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
        if let Err(e) = self.scope.check(&path) {
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
        if let Err(e) = self.scope.check(&path) {
            return Ok(Err(e));
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
        if let Err(e) = self.scope.check(&path) {
            return Ok(Err(e));
        }
        let writer = WriterHandle {
            writer: Some(BufWriter::new(root.store.clone(), root.path(&path))),
            path,
            written: 0,
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
        if let Err(e) = self.scope.check(&path).and(self.scope.check(&dest_path)) {
            return Ok(Err(e));
        }
        Ok(
            match copy_between(&source, &path, &destination, &dest_path).await {
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
        if let Err(e) = inner.write_all(&chunk).await {
            return Ok(Err(store_error("unavailable", e.to_string())));
        }
        writer.written += chunk.len() as u64;
        Ok(Ok(()))
    }

    async fn finish(
        &mut self,
        handle: Resource<WriterHandle>,
    ) -> wasmtime::Result<Result<types::ObjectMeta, types::StoreError>> {
        let writer = self.table.get_mut(&handle)?;
        let Some(mut inner) = writer.writer.take() else {
            return Ok(Err(store_error("other", "finish called twice")));
        };
        if let Err(e) = inner.shutdown().await {
            return Ok(Err(store_error("unavailable", e.to_string())));
        }
        let (path, size) = (writer.path.clone(), writer.written);
        self.bytes_written.fetch_add(size, Ordering::Relaxed);
        Ok(Ok(types::ObjectMeta { path, size }))
    }

    /// An unfinished writer is abandoned: nothing is committed.
    async fn drop(&mut self, handle: Resource<WriterHandle>) -> wasmtime::Result<()> {
        let mut writer = self.table.delete(handle)?;
        if let Some(mut inner) = writer.writer.take() {
            let _ = inner.abort().await;
        }
        Ok(())
    }
}
