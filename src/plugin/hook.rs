//! Hook plugins: asked before every task run and mirror pass whether it
//! may go ahead, and told how it went afterwards. Each call runs in a
//! fresh instance.

use std::sync::Arc;

use wasmtime::component::{Component, HasSelf};

use super::bindings::hook_world::exports::sleet::plugin::hook::{
    Decision as WitDecision, Outcome as WitOutcome, TaskContext,
};
use super::bindings::hook_world::{HookPlugin as Bindings, HookPluginPre};
use super::host::{HostState, Scope};
use super::runtime::{PluginEvent, PluginRuntime, load_error};
use super::{PluginError, PluginInfo, PluginLimits};

/// What a run is, for a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    pub database: String,
    pub service: crate::Service,
    pub target: Option<String>,
    /// `"task"` or `"mirror-pass"`.
    pub run: &'static str,
    pub node_id: String,
    pub attempt: u32,
    pub last_error: Option<String>,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// A hook's answer before a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Skip(String),
    Fail(String),
}

/// How a run ended, for `post-task`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// `"ok"`, `"error"`, `"cancelled"` or `"skipped"`.
    pub status: &'static str,
    pub error: Option<String>,
    pub duration: std::time::Duration,
}

/// A compiled hook plugin.
pub struct HookPlugin {
    runtime: Arc<PluginRuntime>,
    info: PluginInfo,
    pre: HookPluginPre<HostState>,
}

impl RunContext {
    fn to_wit(&self) -> TaskContext {
        TaskContext {
            database: self.database.clone(),
            service: self.service.to_string(),
            target: self.target.clone(),
            run: self.run.to_string(),
            node_id: self.node_id.clone(),
            attempt: self.attempt,
            last_error: self.last_error.clone(),
            now_unix_ms: self.now.timestamp_millis().max(0) as u64,
        }
    }
}

impl HookPlugin {
    pub(super) fn new(
        runtime: Arc<PluginRuntime>,
        info: PluginInfo,
        component: &Component,
    ) -> Result<HookPlugin, PluginError> {
        let pre = runtime.instantiate_pre(&info.name, component, |linker| {
            Bindings::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
        })?;
        let pre = HookPluginPre::new(pre).map_err(|e| load_error(&info.name, e))?;
        Ok(HookPlugin { runtime, info, pre })
    }

    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// Instantiates and configures the plugin (`sleet plugin check`):
    /// the most memory the instance held, in bytes.
    pub async fn check(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
    ) -> Result<u64, PluginError> {
        let mut peak = 0;
        self.call_measured(config, limits, HookCall::Configure, &mut peak)
            .await?;
        Ok(peak)
    }

    /// Asks whether the run may start.
    pub async fn pre_run(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
        context: &RunContext,
    ) -> Result<Decision, PluginError> {
        let ctx = context.to_wit();
        let decision = self.call(config, limits, HookCall::Pre(&ctx)).await?;
        let decision = match decision {
            None | Some(WitDecision::Allow) => Decision::Allow,
            Some(WitDecision::Skip(reason)) => Decision::Skip(truncate(reason)),
            Some(WitDecision::Fail(reason)) => Decision::Fail(truncate(reason)),
        };
        self.runtime.report(PluginEvent::Decision {
            plugin: &self.info.name,
            decision: match decision {
                Decision::Allow => "allow",
                Decision::Skip(_) => "skip",
                Decision::Fail(_) => "fail",
            },
        });
        Ok(decision)
    }

    /// Reports how the run went.
    pub async fn post_run(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
        context: &RunContext,
        outcome: &RunOutcome,
    ) -> Result<(), PluginError> {
        let ctx = context.to_wit();
        let outcome = WitOutcome {
            status: outcome.status.to_string(),
            error: outcome.error.clone(),
            duration_ms: outcome.duration.as_millis() as u64,
        };
        self.call(config, limits, HookCall::Post(&ctx, &outcome))
            .await
            .map(|_| ())
    }

    /// A fresh instance, `configure`, then the call, all under the deadline.
    async fn call(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
        what: HookCall<'_>,
    ) -> Result<Option<WitDecision>, PluginError> {
        self.call_measured(config, limits, what, &mut 0).await
    }

    /// [`HookPlugin::call`], noting the most memory the instance held.
    async fn call_measured(
        &self,
        config: &[(String, String)],
        limits: &PluginLimits,
        what: HookCall<'_>,
        peak: &mut u64,
    ) -> Result<Option<WitDecision>, PluginError> {
        let name = &self.info.name;
        let _memory = self.runtime.memory_share(limits.memory_bytes).await;
        let mut store = self
            .runtime
            .store(name, limits.memory_bytes, Scope::default());
        let output = store.data().output.clone();
        let call = async {
            let instance = self.pre.instantiate_async(&mut store).await?;
            let hook = instance.sleet_plugin_hook();
            if let Err(message) = hook.call_configure(&mut store, &config.to_vec()).await? {
                return Ok(Err(truncate(message)));
            }
            let reply = match what {
                HookCall::Configure => None,
                HookCall::Pre(ctx) => Some(hook.call_pre_task(&mut store, ctx).await?),
                HookCall::Post(ctx, outcome) => {
                    hook.call_post_task(&mut store, ctx, outcome).await?;
                    None
                }
            };
            Ok(Ok(reply))
        };
        let export = match what {
            HookCall::Configure => "configure",
            HookCall::Pre(_) => "pre-task",
            HookCall::Post(..) => "post-task",
        };
        let replied = self
            .runtime
            .with_deadline(name, export, limits.call_timeout, &output, call)
            .await;
        *peak = store.data().peak_memory();
        match replied? {
            Ok(reply) => Ok(reply),
            Err(message) => Err(PluginError::Config {
                name: name.clone(),
                message,
            }),
        }
    }
}

/// Which export a hook call makes after `configure`.
enum HookCall<'a> {
    Configure,
    Pre(&'a TaskContext),
    Post(&'a TaskContext, &'a WitOutcome),
}

/// Reasons end up in heartbeats and status lines: one short line.
fn truncate(reason: String) -> String {
    super::text::bounded(&reason, super::text::MAX_MESSAGE)
}

/// One hook a task runs, with everything a config change could alter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    /// The hook's name in config.
    pub name: String,
    pub plugin: String,
    pub config: Vec<(String, String)>,
    pub limits: PluginLimits,
}

/// The clock hooks are told about (tests drive it).
pub type Clock = Arc<dyn Fn() -> chrono::DateTime<chrono::Utc> + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(chrono::Utc::now)
}

/// What the hooks of a run decided, most restrictive first: any `Fail`
/// fails the run, else any `Skip` defers it, else it goes ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Skip(String),
    Fail(String),
}

/// Runs a task's hooks around its runs and passes.
#[derive(Clone)]
pub struct HookRunner {
    pub hooks: Vec<HookSpec>,
    pub plugins: Option<Arc<super::PluginSet>>,
    pub node_id: String,
    pub clock: Clock,
}

impl std::fmt::Debug for HookRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookRunner")
            .field("hooks", &self.hooks)
            .finish()
    }
}

impl HookRunner {
    /// A runner with no hooks: every run goes ahead.
    pub fn none(node_id: &str) -> HookRunner {
        HookRunner {
            hooks: Vec::new(),
            plugins: None,
            node_id: node_id.to_string(),
            clock: system_clock(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// A context for a run of `service` on `database`, stamped now.
    pub fn context(
        &self,
        database: &str,
        service: crate::Service,
        target: Option<&str>,
        run: &'static str,
        attempt: u32,
        last_error: Option<String>,
    ) -> RunContext {
        RunContext {
            database: database.to_string(),
            service,
            target: target.map(str::to_string),
            run,
            node_id: self.node_id.clone(),
            attempt,
            last_error,
            now: (self.clock)(),
        }
    }

    fn plugin(&self, spec: &HookSpec) -> Result<&Arc<HookPlugin>, PluginError> {
        let plugins =
            super::PluginSet::required(self.plugins.as_deref(), &spec.plugin, &self.node_id)?;
        let plugin = plugins.hook(&spec.plugin, &self.node_id)?;
        super::check_pin(plugin.info(), spec.limits.sha256.as_deref())?;
        Ok(plugin)
    }

    /// Asks every hook; a hook that cannot answer (not loaded, trapped,
    /// timed out) fails the run, naming the hook.
    pub async fn before(&self, context: &RunContext) -> Verdict {
        let mut skip = None;
        for spec in &self.hooks {
            let decision = match self.plugin(spec) {
                Ok(plugin) => plugin.pre_run(&spec.config, &spec.limits, context).await,
                Err(e) => Err(e),
            };
            match decision {
                Ok(Decision::Allow) => {}
                Ok(Decision::Skip(reason)) => {
                    skip.get_or_insert(format!("hook {} skipped it: {reason}", spec.name));
                }
                Ok(Decision::Fail(reason)) => {
                    return Verdict::Fail(format!("hook {} failed it: {reason}", spec.name));
                }
                Err(e) => return Verdict::Fail(format!("hook {}: {e}", spec.name)),
            }
        }
        skip.map_or(Verdict::Allow, Verdict::Skip)
    }

    /// Tells every hook how the run went, in the background: a slow hook
    /// never delays supervision. Failures are logged.
    pub fn after(&self, context: RunContext, outcome: RunOutcome) {
        if self.hooks.is_empty() {
            return;
        }
        let runner = self.clone();
        tokio::spawn(async move { runner.after_waiting(context, outcome).await });
    }

    /// [`HookRunner::after`], done before it returns: a one-shot command
    /// would exit before a background call finished.
    pub async fn after_waiting(&self, context: RunContext, outcome: RunOutcome) {
        for spec in &self.hooks {
            let told = match self.plugin(spec) {
                Ok(plugin) => {
                    plugin
                        .post_run(&spec.config, &spec.limits, &context, &outcome)
                        .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = told {
                tracing::warn!(hook = %spec.name, "post-task hook failed: {e}");
            }
        }
    }
}
