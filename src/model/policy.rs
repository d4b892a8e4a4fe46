//! Settings as plain data: what the config layer resolves from
//! `sleet.toml` and hands down, and what the layers below it (idle
//! watching, uploads, the plugin sandbox) are run with. A leaf: it
//! imports nothing of sleet's, so `config` depends on none of the layers
//! that use these values, and each of those layers re-exports the type it
//! is run with under its own name.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bytes per multipart part (S3's smallest part).
pub const PART_SIZE: usize = 5 * 1024 * 1024;

/// The thresholds (`[database.idle]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleSettings {
    /// `false` runs the services all the time, as sleet 0.1.0 did.
    pub enabled: bool,
    /// The first look after a database goes idle, and after a failed look.
    pub probe_min: Duration,
    /// Looks at an idle database back off to this interval.
    pub probe_max: Duration,
    /// How long a busy database must stay quiet before its services stop.
    pub sleep_after: Duration,
    /// Looks of idle workers back off to this interval: a queued job waits
    /// at most this long for them.
    pub workers_probe: Duration,
    /// Looks of an idle GC back off to this interval (capped at half the
    /// shortest `min_age`, so garbage is still collected in time).
    pub gc_probe: Duration,
}

impl Default for IdleSettings {
    /// One idle database: the coordinator's look every 20 s (3 a minute),
    /// the workers' every minute and GC's every 2 minutes, with a LIST in
    /// place of every few looks (`idle::watch::LIST_EVERY`): under 5 requests a minute.
    fn default() -> Self {
        IdleSettings {
            enabled: true,
            probe_min: Duration::from_secs(5),
            probe_max: Duration::from_secs(20),
            sleep_after: Duration::from_secs(120),
            workers_probe: Duration::from_secs(60),
            gc_probe: Duration::from_secs(120),
        }
    }
}

/// `[events]` with defaults applied, when a source is set: where a
/// node receives the store's notifications of new manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsSettings {
    /// The SQS queue's URL.
    pub queue_url: String,
    /// Idle looks back off to this while events flow.
    pub safety_interval: Duration,
    /// How often `wakes/` is listed while events flow.
    pub relay_interval: Duration,
}

/// A parsed SQS queue URL (`[events] queue_url`): where its requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueAddress {
    pub url: String,
    /// `scheme://host[:port]`, where requests go.
    pub origin: String,
    /// The region named by an AWS host, if it names one.
    pub region: Option<String>,
    pub name: String,
}

impl QueueAddress {
    pub fn parse(url: &str) -> Result<QueueAddress, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("must be an http(s) URL, as SQS gives it".into());
        }
        let host = parsed.host_str().ok_or("has no host")?;
        let segments: Vec<&str> = parsed
            .path_segments()
            .map_or(Vec::new(), |s| s.filter(|p| !p.is_empty()).collect());
        let [_account, name] = segments[..] else {
            return Err("must end in /<account>/<queue name>".into());
        };
        let region = host
            .strip_prefix("sqs.")
            .and_then(|rest| rest.split_once('.'))
            .map(|(region, _)| region.to_string());
        let origin = match parsed.port() {
            Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
            None => format!("{}://{host}", parsed.scheme()),
        };
        Ok(QueueAddress {
            url: url.to_string(),
            origin,
            region,
            name: name.to_string(),
        })
    }
}

/// How a streamed object is written: up to `multipart_threshold` bytes
/// it is held and sent with one PUT, beyond that as a multipart upload.
/// One PUT costs the destination one request and no reassembly, and holds
/// the object in memory while it goes; a multipart upload holds only
/// a few parts (`upload`'s parts in flight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPolicy {
    pub multipart_threshold: u64,
}

impl StreamPolicy {
    /// The default threshold, in MiB: `cargo bench --bench mirror --
    /// multipart` found one PUT faster at every size it tried (16 to 128
    /// MiB); 64 MiB keeps SlateDB's default L0 SSTs in one PUT and bounds
    /// what a target holds in memory (see docs/performance.md).
    pub const DEFAULT_MULTIPART_THRESHOLD_MIB: u32 = 64;

    pub fn with_threshold_mib(mib: u32) -> StreamPolicy {
        StreamPolicy {
            multipart_threshold: u64::from(mib) << 20,
        }
    }

    /// The same policy with its threshold at most `bytes` (and at least
    /// one part): for a writer whose memory is bounded by other means.
    pub fn capped(self, bytes: u64) -> StreamPolicy {
        StreamPolicy {
            multipart_threshold: self.multipart_threshold.min(bytes).max(PART_SIZE as u64),
        }
    }
}

impl Default for StreamPolicy {
    fn default() -> Self {
        StreamPolicy::with_threshold_mib(StreamPolicy::DEFAULT_MULTIPART_THRESHOLD_MIB)
    }
}

/// What a plugin is, from the interface it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PluginKind {
    Copier,
    Hook,
    MergeOperator,
    CompactionFilter,
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::Copier => "copier",
            PluginKind::Hook => "hook",
            PluginKind::MergeOperator => "merge-operator",
            PluginKind::CompactionFilter => "compaction-filter",
        })
    }
}

/// What a node enforces on each call into one plugin: plain values the
/// config layer resolves, so the sandbox knows nothing of config files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLimits {
    pub sha256: Option<String>,
    pub memory_bytes: u64,
    pub call_timeout: std::time::Duration,
}
