//! One wasmtime engine per process: compilation (through an on-disk cache
//! of native code the node compiled itself), an epoch ticker so a busy
//! plugin yields to tokio, and the per-call store with its limits.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Engine, Store};

use super::PluginError;
use super::cache::{CompileCache, Rejected};
use super::host::{HostState, Scope};
use super::output::{GuestOutput, advice};

/// How often the engine's epoch advances; a running plugin yields to the
/// async runtime at each tick.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Plugin memory (linear memory plus host buffers) all concurrent calls on
/// a node may hold at once, in MiB: calls wait for their share rather than
/// exceed it, so `memory_mib` times `copy_parallelism` times targets
/// cannot outgrow it.
pub const NODE_PLUGIN_MEMORY_MIB: u32 = 2048;

/// The engine, the compile cache, and the node's plugin memory.
pub struct PluginRuntime {
    engine: Engine,
    cache: Option<CompileCache>,
    memory: Arc<tokio::sync::Semaphore>,
    observer: std::sync::OnceLock<PluginObserver>,
    /// When each plugin's ordinary output was last logged (rate limit).
    quiet_until: std::sync::Mutex<std::collections::BTreeMap<String, std::time::Instant>>,
}

/// A plugin's ordinary output (a call that returned) is logged at debug
/// at most once per this long per plugin.
const OUTPUT_LOG_EVERY: Duration = Duration::from_secs(10);

impl std::fmt::Debug for PluginRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRuntime")
            .field("cache", &self.cache)
            .finish()
    }
}

/// Whether `bytes` is a WebAssembly component (not a core module, not
/// something else): the magic number then the component layer.
pub fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [0x01, 0x00] && bytes[4] != 0x01
}

impl PluginRuntime {
    /// An engine with epoch interruption, and native code cached under
    /// `cache_dir` (not cached when `None`, or when the directory is not
    /// private to this user: then the node says why and compiles in
    /// memory).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Arc<PluginRuntime>, String> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| format!("failed to start wasmtime: {e}"))?;
        start_epoch_ticker(&engine);
        let cache = cache_dir.and_then(|dir| match CompileCache::open(&dir) {
            Ok(cache) => Some(cache),
            Err(reason) => {
                tracing::warn!(
                    "plugin cache {} is not used: {reason}; plugins compile in memory",
                    dir.display()
                );
                None
            }
        });
        let memory = Arc::new(tokio::sync::Semaphore::new(NODE_PLUGIN_MEMORY_MIB as usize));
        Ok(Arc::new(PluginRuntime {
            engine,
            cache,
            memory,
            observer: std::sync::OnceLock::new(),
            quiet_until: std::sync::Mutex::new(std::collections::BTreeMap::new()),
        }))
    }

    /// Waits until a call with a `memory_bytes` cap fits in the node's
    /// plugin memory, and holds its share until the permit is dropped. A
    /// call's share is twice its cap: its linear memory, and as much again
    /// for what the host buffers for it (open writers).
    pub async fn memory_share(&self, memory_bytes: u64) -> tokio::sync::OwnedSemaphorePermit {
        let mib = (2 * memory_bytes)
            .div_ceil(1024 * 1024)
            .clamp(1, u64::from(NODE_PLUGIN_MEMORY_MIB)) as u32;
        self.memory
            .clone()
            .acquire_many_owned(mib)
            .await
            .expect("the semaphore is never closed")
    }

    /// Whether compiled plugins are cached on disk.
    pub fn caches(&self) -> bool {
        self.cache.is_some()
    }

    /// The default cache: `$XDG_CACHE_HOME/sleet/plugins` or
    /// `~/.cache/sleet/plugins`, never a shared temporary directory
    /// (cached native code is trusted when loaded).
    pub fn default_cache_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("sleet").join("plugins"))
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The component for `bytes` (whose sha256 the host computed): from
    /// the cache when this node compiled it before and the entry's tag
    /// verifies, else compiled now (and cached).
    pub fn compile(
        &self,
        name: &str,
        bytes: &[u8],
        sha256: &str,
    ) -> Result<Component, PluginError> {
        let Some(cache) = &self.cache else {
            return Component::new(&self.engine, bytes).map_err(|e| load_error(name, e));
        };
        let compatibility = self.compatibility();
        match cache.load(sha256, &compatibility) {
            // Safety: the bytes carry this node's HMAC over the wasm's
            // sha256, this engine's compatibility hash and the bytes
            // themselves: this node compiled them with this engine.
            Ok(native) => match unsafe { Component::deserialize(&self.engine, &native) } {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!(plugin = name, "ignoring an unusable cache entry: {e}"),
            },
            Err(Rejected::Absent) => {}
            Err(reason) => tracing::warn!(
                plugin = name,
                "not loading the cached compile of {sha256}: {reason}; compiling again"
            ),
        }
        let native = self
            .engine
            .precompile_component(bytes)
            .map_err(|e| load_error(name, e))?;
        if let Err(e) = cache.store(sha256, &compatibility, &native) {
            tracing::warn!(plugin = name, "failed to cache the compiled plugin: {e}");
        }
        // Safety: `native` was produced by this engine just now.
        unsafe { Component::deserialize(&self.engine, &native) }.map_err(|e| load_error(name, e))
    }

    /// This engine's precompiled-code compatibility, as a short hex tag.
    fn compatibility(&self) -> String {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        format!("{:016x}", hasher.finish())
    }

    /// Links WASI (with nothing granted) and a world's imports, then
    /// type-checks `component` against them, once per plugin.
    pub fn instantiate_pre(
        &self,
        name: &str,
        component: &Component,
        add_world: impl FnOnce(&mut Linker<HostState>) -> wasmtime::Result<()>,
    ) -> Result<InstancePre<HostState>, PluginError> {
        let mut linker = Linker::new(&self.engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| load_error(name, e))?;
        add_world(&mut linker).map_err(|e| load_error(name, e))?;
        linker
            .instantiate_pre(component)
            .map_err(|e| load_error(name, e))
    }

    /// Type-checks a compaction component, which imports nothing from
    /// sleet: it gets WASI's clocks, randomness, an empty environment and
    /// `exit`, all answered without I/O. Every other import (streams,
    /// files, sockets) traps when called: a synchronous call cannot wait
    /// on I/O, and a merge or a filter has no use for it.
    pub fn instantiate_pre_pure(
        &self,
        name: &str,
        component: &Component,
    ) -> Result<InstancePre<HostState>, PluginError> {
        let mut linker = Linker::new(&self.engine);
        link_pure_wasi(&mut linker).map_err(|e| load_error(name, e))?;
        stub_impure_imports(&mut linker, component, &self.engine)
            .map_err(|e| load_error(name, e))?;
        linker
            .instantiate_pre(component)
            .map_err(|e| load_error(name, e))
    }

    /// The component's exported interface names.
    pub fn export_names(&self, component: &Component) -> Vec<String> {
        component
            .component_type()
            .exports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// A store for synchronous calls into a compaction plugin: the same
    /// caps as [`PluginRuntime::store`], but a call that outlives its
    /// epoch deadline traps (there is no async runtime to yield to). The
    /// caller sets the deadline before every call with
    /// [`deadline_ticks`].
    pub fn sync_store(&self, plugin: &str, memory_bytes: u64) -> Store<HostState> {
        let mut store = Store::new(
            &self.engine,
            HostState::new(plugin, memory_bytes, Scope::default()),
        );
        store.limiter(|state| state.limiter());
        store.set_hostcall_fuel(usize::try_from(memory_bytes).unwrap_or(usize::MAX));
        store.epoch_deadline_trap();
        store
    }

    /// A fresh store for one call: the plugin's memory cap, and an epoch
    /// deadline that yields at every tick rather than trapping (the
    /// caller's wall-clock timeout ends a runaway call).
    ///
    /// What the host copies out of the plugin per call (arguments to a
    /// host import, or an export's results) is held to the same cap:
    /// wasmtime's default of 128 MiB would let a 32 MiB plugin make the
    /// host hold 128 MiB by returning many results that alias one string.
    pub fn store(&self, plugin: &str, memory_bytes: u64, scope: Scope) -> Store<HostState> {
        let mut store = Store::new(&self.engine, HostState::new(plugin, memory_bytes, scope));
        store.limiter(|state| state.limiter());
        store.set_hostcall_fuel(usize::try_from(memory_bytes).unwrap_or(usize::MAX));
        store.set_epoch_deadline(1);
        store.epoch_deadline_async_yield_and_update(1);
        store
    }
}

/// The WASI interfaces a compaction plugin may call synchronously: none
/// of them does I/O (the stdio getters hand out streams whose methods
/// are not linked, so writing to them traps).
fn link_pure_wasi(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::WasiView;
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, random};
    use wasmtime_wasi::random::WasiRandom;
    let l = linker;
    clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(l, |t| t.clocks())?;
    clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(l, |t| t.clocks())?;
    random::random::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::environment::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    Ok(())
}

/// The interfaces [`link_pure_wasi`] links, without their versions.
const PURE_WASI: [&str; 7] = [
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/exit",
    "wasi:cli/environment",
];

/// Defines every import of `component` outside [`PURE_WASI`] as a trap.
///
/// wasmtime's `define_unknown_imports_as_traps` would also stub a pure
/// interface imported at another patch version than the host links
/// (componentize-py imports `wasi:cli/environment@0.2.9`, wasmtime-wasi
/// defines `@0.2.12`): it looks names up exactly, so CPython's start-up
/// call to `get-environment` trapped. Here a pure interface is left to the
/// linker's semver matching, whatever its version.
fn stub_impure_imports(
    linker: &mut Linker<HostState>,
    component: &Component,
    engine: &Engine,
) -> wasmtime::Result<()> {
    use wasmtime::component::ResourceType;
    use wasmtime::component::types::ComponentItem;
    let trap = |name: String| {
        move |_: wasmtime::StoreContextMut<'_, HostState>,
              _: wasmtime::component::types::ComponentFunc,
              _: &[wasmtime::component::Val],
              _: &mut [wasmtime::component::Val]| {
            wasmtime::bail!("{name} is not available to compaction plugins")
        }
    };
    for (import, item) in component.component_type().imports(engine) {
        let interface = import.split_once('@').map_or(import, |(name, _)| name);
        if PURE_WASI.contains(&interface) {
            continue;
        }
        match item.ty {
            ComponentItem::ComponentInstance(instance) => {
                let mut stubs = linker.instance(import)?;
                for (export, item) in instance.exports(engine) {
                    match item.ty {
                        ComponentItem::ComponentFunc(_) => {
                            stubs.func_new(export, trap(format!("{import}#{export}")))?
                        }
                        // The clocks' `subscribe-*` return wasi:io's pollable,
                        // which other interfaces (streams) use too: it must
                        // be the type wasmtime-wasi links the clocks with.
                        ComponentItem::Resource(_) if export == "pollable" => stubs.resource(
                            export,
                            ResourceType::host::<wasmtime_wasi::p2::DynPollable>(),
                            |_, _| Ok(()),
                        )?,
                        ComponentItem::Resource(_) => {
                            stubs.resource(export, ResourceType::host::<()>(), |_, _| Ok(()))?
                        }
                        _ => {}
                    }
                }
            }
            ComponentItem::ComponentFunc(_) => {
                linker.root().func_new(import, trap(import.into()))?
            }
            _ => {}
        }
    }
    Ok(())
}

/// Epoch ticks that cover `timeout`, for a synchronous call's deadline.
pub fn deadline_ticks(timeout: Duration) -> u64 {
    (timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64 + 1
}

/// Advances the engine's epoch every tick until the engine is dropped.
fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("sleet-plugin-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("the epoch ticker thread starts");
}

/// A plugin that failed to compile, link or type-check.
pub fn load_error(name: &str, e: wasmtime::Error) -> PluginError {
    PluginError::Load {
        name: name.into(),
        message: format!("{e:#}"),
    }
}

/// Maps a failed call to a plugin error that names the plugin and, when
/// its output shows one, the guest's own error (and advice for the
/// commonest mistake); the guest's last lines go to the log.
pub fn call_error(name: &str, e: wasmtime::Error, output: &GuestOutput) -> PluginError {
    let trap = format!("{:#}", e.root_cause());
    let captured = output.captured();
    if !captured.is_empty() {
        tracing::warn!(plugin = %name, "the plugin's output before it failed: {}", captured.last_lines());
    }
    let message = match captured.guest_error() {
        Some(error) => match advice(&error) {
            Some(advice) => format!("{error} ({advice}; wasm: {trap})"),
            None => format!("{error} (wasm: {trap})"),
        },
        None => trap,
    };
    PluginError::Trap {
        name: name.into(),
        message,
    }
}

/// How a call into a plugin ended, as the runtime saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallResult {
    /// It returned (whatever it returned).
    Returned,
    Trap,
    Timeout,
}

impl CallResult {
    pub fn as_str(self) -> &'static str {
        match self {
            CallResult::Returned => "ok",
            CallResult::Trap => "trap",
            CallResult::Timeout => "timeout",
        }
    }
}

/// What the runtime tells whoever watches its plugins (the node's
/// metrics): plain values, so the plugin wing knows nothing of them.
#[derive(Debug, Clone, Copy)]
pub enum PluginEvent<'a> {
    Call {
        plugin: &'a str,
        export: &'static str,
        took: Duration,
        result: CallResult,
    },
    /// A pre-task hook's answer: `allow`, `skip` or `fail`.
    Decision {
        plugin: &'a str,
        decision: &'static str,
    },
}

/// Receives every [`PluginEvent`]; must be cheap (it runs on the call path).
pub type PluginObserver = Arc<dyn Fn(PluginEvent<'_>) + Send + Sync>;

impl PluginRuntime {
    /// Logs what a call that returned wrote, at debug under the plugin's
    /// name, at most once per [`OUTPUT_LOG_EVERY`] per plugin.
    fn log_output(&self, name: &str, output: &GuestOutput) {
        // Every call that returned comes here: nothing is copied unless
        // it would be logged.
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let now = std::time::Instant::now();
        let mut quiet = self.quiet_until.lock().unwrap_or_else(|e| e.into_inner());
        if quiet.get(name).is_some_and(|until| now < *until) {
            return;
        }
        let captured = output.captured();
        if captured.is_empty() {
            return;
        }
        quiet.insert(name.to_string(), now + OUTPUT_LOG_EVERY);
        tracing::debug!(plugin = %name, "plugin output: {}", captured.last_lines());
    }

    /// Tells `observer` of every call and decision from now on (once).
    pub fn observe(&self, observer: PluginObserver) {
        let _ = self.observer.set(observer);
    }

    pub(super) fn report(&self, event: PluginEvent<'_>) {
        if let Some(observer) = self.observer.get() {
            observer(event);
        }
    }

    /// Runs one call of `export` under the plugin's wall-clock limit, and
    /// reports how it ended; `output` is the call's store's.
    pub async fn with_deadline<T>(
        &self,
        name: &str,
        export: &'static str,
        timeout: Duration,
        output: &GuestOutput,
        call: impl Future<Output = wasmtime::Result<T>>,
    ) -> Result<T, PluginError> {
        let started = std::time::Instant::now();
        let (result, outcome) = match tokio::time::timeout(timeout, call).await {
            Ok(Ok(value)) => {
                self.log_output(name, output);
                (CallResult::Returned, Ok(value))
            }
            Ok(Err(e)) => (CallResult::Trap, Err(call_error(name, e, output))),
            Err(_) => (
                CallResult::Timeout,
                Err(PluginError::Timeout {
                    name: name.into(),
                    after: timeout,
                }),
            ),
        };
        self.report(PluginEvent::Call {
            plugin: name,
            export,
            took: started.elapsed(),
            result,
        });
        outcome
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::component::Linker;

    use super::*;

    const MIB: u64 = 1024 * 1024;

    /// Instantiates hand-written component text in a plugin call's store.
    async fn instantiate(
        runtime: &PluginRuntime,
        text: &str,
    ) -> (
        wasmtime::Result<wasmtime::component::Instance>,
        Store<HostState>,
    ) {
        let bytes = wat::parse_str(text).expect("valid component text");
        let component = Component::new(runtime.engine(), &bytes).expect("compiles");
        let mut store = runtime.store("hostile", 64 * MIB, Scope::default());
        let linker = Linker::<HostState>::new(runtime.engine());
        let instance = linker.instantiate_async(&mut store, &component).await;
        (instance, store)
    }

    /// A component of `memories` core memories of `pages` each.
    fn memories(memories: usize, pages: u32) -> String {
        let declared = format!("(memory {pages}) ").repeat(memories);
        format!(
            "(component
               (core module $m {declared})
               (core instance (instantiate $m)))"
        )
    }

    /// The budget is a sum over every memory, not a cap per memory: three
    /// memories of 30 MiB each fit a per-memory cap of 64 MiB, but not a
    /// 64 MiB budget, while the several small memories that real
    /// toolchains link (componentize-py: 4) are welcome.
    #[tokio::test]
    async fn an_instance_s_memories_share_one_budget() {
        let runtime = PluginRuntime::new(None).unwrap();
        let (instance, _) = instantiate(&runtime, &memories(3, 480)).await;
        let err = format!("{:#}", instance.expect_err("refused"));
        assert!(err.contains("memory budget exceeded"), "{err}");
        let (two, store) = instantiate(&runtime, &memories(2, 480)).await;
        assert!(two.is_ok(), "60 MiB in two memories fits: {:?}", two.err());
        assert_eq!(store.data().peak_memory(), 60 * MIB);
        let (small, _) = instantiate(&runtime, &memories(8, 16)).await;
        assert!(small.is_ok(), "eight 1 MiB memories: {:?}", small.err());
        let (many, _) = instantiate(&runtime, &memories(17, 1)).await;
        let err = format!("{:#}", many.expect_err("refused"));
        assert!(err.contains("memory count"), "{err}");
    }

    #[tokio::test]
    async fn a_table_cannot_grow_without_bound() {
        let runtime = PluginRuntime::new(None).unwrap();
        let (instance, mut store) = instantiate(
            &runtime,
            "(component
               (core module $m
                 (table $t 1 funcref)
                 (func (export \"grow\")
                   (loop $again
                     (drop (table.grow $t (ref.null func) (i32.const 10000)))
                     (br $again))))
               (core instance $i (instantiate $m))
               (func (export \"grow\") (canon lift (core func $i \"grow\"))))",
        )
        .await;
        let instance = instance.expect("instantiates");
        let grow = instance
            .get_typed_func::<(), ()>(&mut store, "grow")
            .expect("exported");
        let call = grow.call_async(&mut store, ());
        let err = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("the growth is stopped, not endless")
            .expect_err("a trap");
        assert!(format!("{err:#}").contains("growing a table"), "{err:#}");
    }
}
