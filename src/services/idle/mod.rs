//! Idle databases cost almost nothing: the fleet runs a database's
//! compaction services only while the database has work, and watches an
//! idle one with one small request instead of SlateDB's own polling (the
//! coordinator and every worker read the manifest, `.compactions` and their
//! GC boundary objects every 5 s, about 100 requests a minute for a
//! database nobody writes).
//!
//! [`decide`] is the whole policy: a pure function of the phase a database
//! is in, what the last look at it saw, and how long it has been quiet.
//! The watcher that looks and the services it starts and stops are thin
//! shells around it.

pub mod flow;
pub mod wakes;
pub mod watch;

use std::time::Duration;

/// Where a database stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No compaction service runs; a watcher looks for a new manifest,
    /// less and less often up to `probe_max`.
    Idle,
    /// A look saw work: the services are starting.
    Waking,
    /// The services run; they stop once the database has been quiet for
    /// `sleep_after`.
    Busy,
}

/// What one look at a database saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// The manifest has not moved and no compaction is queued or running.
    Quiet,
    /// The manifest moved (a writer flushed, a checkpoint was taken) but
    /// there is no compaction work yet: L0 is below the trigger and the
    /// queue is empty. An idle database is looked at again soon, so the
    /// flush that reaches the trigger is seen within `probe_min`.
    Moved,
    /// There is compaction work: L0 reached the coordinator's trigger, or
    /// a compaction is queued or running.
    Activity,
    /// The look failed: the store did not answer.
    Failed,
}

pub use crate::model::policy::IdleSettings;

/// How one service of a database idles: the decision thresholds (with the
/// service's own `probe_max` and `sleep_after`), and whether every look
/// must LIST because garbage collection may delete a version the HEAD of
/// the next one would miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceIdle {
    pub settings: IdleSettings,
    pub list_always: bool,
}

impl IdleSettings {
    /// The coordinator watches `manifest/`, collected after `manifest_min_age`.
    pub fn for_coordinator(&self, manifest_min_age: Duration) -> ServiceIdle {
        self.service(self.probe_max, self.sleep_after, manifest_min_age)
    }

    /// Workers watch `.compactions`, collected after `compactions_min_age`.
    pub fn for_workers(&self, compactions_min_age: Duration) -> ServiceIdle {
        self.service(self.workers_probe, self.sleep_after, compactions_min_age)
    }

    /// GC watches `manifest/`; it keeps running for `linger` after the last
    /// change it saw (the longest `min_age` plus its interval: by then
    /// everything the change made garbage was collected), and looks at
    /// least twice per shortest `min_age`.
    pub fn for_gc(&self, linger: Duration, shortest_min_age: Duration) -> ServiceIdle {
        let probe = self.gc_probe.min(shortest_min_age / 2);
        self.service(probe, linger.max(self.sleep_after), shortest_min_age)
    }

    fn service(
        &self,
        probe_max: Duration,
        sleep_after: Duration,
        min_age: Duration,
    ) -> ServiceIdle {
        let probe_max = probe_max.max(self.probe_min);
        ServiceIdle {
            settings: IdleSettings {
                probe_max,
                sleep_after,
                ..*self
            },
            // A version written and collected between two looks leaves
            // nothing for the HEAD of the next id to find.
            list_always: min_age < probe_max * 2,
        }
    }
}

/// What to do after a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub phase: Phase,
    /// Whether the compaction services should be running now.
    pub run_services: bool,
    /// When to look again.
    pub next_look: Duration,
}

/// The next phase after `look`, given the phase the database was in, how
/// long it has been quiet (since the last look that saw activity), and the
/// interval between the last two looks.
///
/// A failed look never changes whether services run: an idle database is
/// looked at again soon, a busy one keeps its services (they see the same
/// store and fail or recover on their own).
pub fn decide(
    phase: Phase,
    look: Look,
    quiet_for: Duration,
    last_interval: Duration,
    settings: &IdleSettings,
) -> Decision {
    let busy = Decision {
        phase: Phase::Busy,
        run_services: true,
        next_look: settings.probe_min,
    };
    if !settings.enabled {
        return busy;
    }
    match (phase, look) {
        (Phase::Idle, Look::Activity) => Decision {
            phase: Phase::Waking,
            run_services: true,
            next_look: settings.probe_min,
        },
        (Phase::Idle, Look::Quiet) => Decision {
            phase: Phase::Idle,
            run_services: false,
            next_look: backed_off(last_interval, settings),
        },
        (Phase::Idle, Look::Failed | Look::Moved) => Decision {
            phase: Phase::Idle,
            run_services: false,
            next_look: settings.probe_min,
        },
        (Phase::Waking, _) => busy,
        (Phase::Busy, Look::Quiet) if quiet_for >= settings.sleep_after => Decision {
            phase: Phase::Idle,
            run_services: false,
            next_look: settings.probe_min,
        },
        (Phase::Busy, _) => busy,
    }
}

/// Twice the last interval, within `[probe_min, probe_max]`.
fn backed_off(last: Duration, settings: &IdleSettings) -> Duration {
    (last * 2).clamp(
        settings.probe_min,
        settings.probe_max.max(settings.probe_min),
    )
}

/// Idle looks wait for the next point of this grid (see [`on_grid`]).
pub const LOOK_GRID: Duration = Duration::from_millis(250);

/// `at`, put off to the next point of a `grid` laid from `origin` (at
/// most one step later): looks that fall due within one step fire
/// together, so a node over thousands of idle databases wakes once for
/// many looks, not once for each. An `at` before `origin` stays.
pub fn on_grid(
    at: tokio::time::Instant,
    origin: tokio::time::Instant,
    grid: Duration,
) -> tokio::time::Instant {
    let Some(since) = at.checked_duration_since(origin) else {
        return at;
    };
    let step = grid.as_nanos().max(1);
    let steps = since.as_nanos().div_ceil(step);
    let on = u64::try_from(steps * step).unwrap_or(u64::MAX);
    origin + Duration::from_nanos(on)
}

/// How one service's looks hear from the database's other services.
#[derive(Default, Clone, Copy)]
pub struct Signals<'a> {
    /// Notified when another service saw work coming (the workers, when
    /// the coordinator woke the database): look at once, then a few times
    /// soon after ([`next_follow_up`]) until the work shows.
    pub nudged: Option<&'a tokio::sync::Notify>,
    /// Called when this service's look woke the database (the
    /// coordinator tells the workers; see [`wakes`]).
    pub woke: Option<&'a (dyn Fn() + Sync)>,
    /// The node's event flow: while events flow, idle looks back off to
    /// its safety interval (see [`flow`]), and every look LISTs: GC
    /// may collect a version between two looks that far apart, which
    /// would leave the HEAD of the next one nothing to find.
    pub flow: Option<&'a flow::EventFlow>,
    /// Where the node's look grid starts (its start), so every database's
    /// looks share one grid; without it, each look's own time. Held by
    /// the node, not the process: simulated nodes share a process.
    pub grid_origin: Option<tokio::time::Instant>,
}

/// `settings` while events flow with `safety` as their safety interval:
/// looks back off to it (never below `probe_max`).
pub fn under_events(settings: &IdleSettings, safety: Option<Duration>) -> IdleSettings {
    match safety {
        Some(safety) => IdleSettings {
            probe_max: settings.probe_max.max(safety),
            ..*settings
        },
        None => *settings,
    }
}

/// How far apart the looks after a nudge are, while the nudged work has
/// not shown.
const FOLLOW_UP: Duration = Duration::from_millis(500);

/// Stands in for a service nobody nudges: never notified.
static NEVER_NUDGED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// The wait before the next look, `since_nudge` after the last nudge
/// (`None`: no nudge pending): every [`FOLLOW_UP`] until `probe_min` has
/// passed since the nudge (from there the idle cadence looks every
/// `probe_min`); `None` once the work showed or the window is over.
///
/// Evenly spaced, not doubling: the work comes when the nudging
/// coordinator has started and queued its job, which is usually within
/// half a second but takes longer on a loaded store. With looks 0.5, 1,
/// 2 and 4 s apart, a job queued 1.6 s after the nudge waited until the
/// look at 3.5 s, and one queued after 3.5 s until 7.5 s: an event wake
/// once took 5.6 s where the rest of the chain takes under 2.5 s. This
/// costs at most `probe_min / FOLLOW_UP` looks a nudge (10 at the
/// default 5 s) where doubling cost 4.
pub fn next_follow_up(
    look: Look,
    since_nudge: Option<Duration>,
    probe_min: Duration,
) -> Option<Duration> {
    match (look, since_nudge) {
        (Look::Moved | Look::Activity, _) | (_, None) => None,
        (_, Some(since)) => (since + FOLLOW_UP < probe_min).then_some(FOLLOW_UP),
    }
}

/// Completes when the event flow differs from `seen`; never without one.
async fn flow_changed(flow: Option<&flow::EventFlow>, seen: Option<Duration>) {
    match flow {
        Some(flow) => flow.changed_from(seen).await,
        None => std::future::pending().await,
    }
}

/// Runs `service` only while the database has work: looks at it through
/// `watch` (every `probe_min` while busy, backing off to `probe_max`
/// while idle), starts the service on activity and stops it, through the
/// token it was given, once the database has been quiet for
/// `sleep_after`. A service that ends by itself ends this too (the
/// supervisor restarts it as before), as does `token`.
///
/// `vet` runs whenever an idle look saw the database change, before the
/// decision: its error ends this (the coordinator and workers look for a
/// compactor outside the fleet there, which must stand them down even
/// while they sleep; a change is the only time one can have appeared).
/// The first look's "move" is no change but the first sighting, and the
/// callers ran the same check as they started, so it is not vetted: at
/// 1,000 databases that was 2,000 more outside-compactor looks (about
/// 12,000 requests) for every node start.
/// `signals` connect the looks with the database's other services.
pub async fn run_while_busy<E, F, Fut, V, VFut>(
    watch: &mut watch::VersionWatch,
    settings: &IdleSettings,
    token: &tokio_util::sync::CancellationToken,
    signals: &Signals<'_>,
    mut vet: V,
    mut service: F,
) -> Result<(), E>
where
    F: FnMut(tokio_util::sync::CancellationToken) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    V: FnMut() -> VFut,
    VFut: std::future::Future<Output = Result<(), E>>,
{
    let mut phase = Phase::Idle;
    let mut interval = Duration::ZERO;
    let mut last_active = tokio::time::Instant::now();
    // After a nudge: a look every 0.5 s until the work shows or
    // `probe_min` has passed (see `next_follow_up`).
    let mut nudged_at: Option<tokio::time::Instant> = None;
    let mut follow_up: Option<Duration> = None;
    loop {
        // Idle: look until there is work.
        loop {
            let safety = signals.flow.and_then(flow::EventFlow::safety);
            let now_settings = under_events(settings, safety);
            interval = interval.min(now_settings.probe_max);
            watch.set_list_always_beyond(now_settings.probe_max > settings.probe_max);
            let wait = watch.due_in().map_or(interval, |due| due.min(interval));
            let wait = follow_up.map_or(wait, |soon| soon.min(wait));
            let now = tokio::time::Instant::now();
            let due = on_grid(now + wait, signals.grid_origin.unwrap_or(now), LOOK_GRID);
            let mut nudged = false;
            tokio::select! {
                biased;
                () = token.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(due) => {}
                () = signals.nudged.unwrap_or(&NEVER_NUDGED).notified() => nudged = true,
                // Boxed: inline, every idle task would carry it.
                () = Box::pin(flow_changed(signals.flow, safety)) => continue,
            }
            if nudged {
                nudged_at = Some(tokio::time::Instant::now());
            }
            let first_sighting = !watch.has_sighted();
            let mut look = watch.look(false).await;
            if matches!(look, Look::Moved | Look::Activity) {
                last_active = tokio::time::Instant::now();
                if !first_sighting {
                    vet().await?;
                }
            }
            let since_nudge = nudged_at.map(|at| at.elapsed());
            follow_up = next_follow_up(look, since_nudge, settings.probe_min);
            if follow_up.is_none() {
                nudged_at = None;
            }
            if (nudged || follow_up.is_some()) && look == Look::Quiet {
                // The work is on its way (a job about to be queued): look
                // again soon, not after the backed-off interval.
                look = Look::Moved;
            }
            let decision = decide(phase, look, last_active.elapsed(), interval, &now_settings);
            if decision.phase != phase {
                tracing::debug!(?look, nudged, from = ?phase, to = ?decision.phase, "idle watch");
            }
            if decision.phase == Phase::Waking
                && let Some(woke) = signals.woke
            {
                woke();
            }
            phase = decision.phase;
            interval = decision.next_look;
            if decision.run_services {
                break;
            }
        }
        // Busy: run the service, looking every `probe_min` for quiet. The
        // service's future lives on the heap only while it runs: inline,
        // every idle database's task would carry its largest state. The
        // look is one of the raced futures, not awaited in a branch: a
        // branch's body holds the service still, and on a slow store a
        // busy look (three or four requests) took so long that a starting
        // worker only moved in the `probe_min` gaps between looks.
        let child = token.child_token();
        let _awake = Awake::count(watch.watched());
        let mut run = Box::pin(service(child.clone()));
        loop {
            tokio::select! {
                biased;
                result = &mut run => return result,
                () = token.cancelled() => {
                    child.cancel();
                    return run.await;
                }
                look = async {
                    tokio::time::sleep(settings.probe_min).await;
                    watch.look(true).await
                } => {
                    tracing::trace!(?look, "busy look");
                    if matches!(look, Look::Moved | Look::Activity) {
                        last_active = tokio::time::Instant::now();
                    }
                    let decision =
                        decide(phase, look, last_active.elapsed(), settings.probe_min, settings);
                    if decision.phase != phase {
                        tracing::debug!(?look, from = ?phase, to = ?decision.phase, "idle watch");
                    }
                    phase = decision.phase;
                    interval = decision.next_look;
                    if !decision.run_services {
                        child.cancel();
                        run.await?;
                        break;
                    }
                }
            }
        }
    }
}

/// Services running now by what they watch (coordinators, workers, GC),
/// counted across every node of this process: what a benchmark reads to
/// see how many of its databases are awake.
static AWAKE: [std::sync::atomic::AtomicUsize; 3] =
    [const { std::sync::atomic::AtomicUsize::new(0) }; 3];

/// Coordinators, workers and GC services awake in this process.
pub fn awake_services() -> [usize; 3] {
    AWAKE
        .each_ref()
        .map(|n| n.load(std::sync::atomic::Ordering::Relaxed))
}

/// One awake service in [`AWAKE`], for as long as it lives.
struct Awake(usize);

impl Awake {
    fn count(watched: watch::Watched) -> Awake {
        let slot = match watched {
            watch::Watched::Manifest { .. } => 0,
            watch::Watched::Compactions => 1,
            watch::Watched::Changes => 2,
        };
        AWAKE[slot].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Awake(slot)
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        AWAKE[self.0].fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
