//! The fleet config, re-read beside the tick rather than inside it.
//!
//! A poll lists every registry file: at 100,000 databases that is 100
//! LIST pages on S3, seconds of requests. Run inside the tick and bounded
//! by the heartbeat interval, such a poll would be dropped before it
//! finished, every time, and the node would never see a registration
//! again; unbounded, it would hold heartbeats back past their timeout.
//! So a poll runs as a task of its own: the tick waits for it at most one
//! step, then goes on and collects it at a later tick.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::fleet::root::{ConfigPoller, FleetRoot, FleetView};
use crate::model::planted::{Planted, planted};

/// A node's config polls: at most one runs at a time.
pub(super) struct ConfigPolls {
    root: FleetRoot,
    /// Shared with the running poll; a poll that is dropped half-way
    /// leaves it as consistent as a cancelled `poll` does.
    poller: Arc<tokio::sync::Mutex<ConfigPoller>>,
    running: Option<RunningPoll>,
    last_started: Instant,
}

struct RunningPoll {
    task: JoinHandle<(FleetView, bool)>,
    started: Instant,
    /// Whether this poll was already reported as overdue.
    overdue: bool,
}

/// What a tick learns of the config polls.
#[derive(Debug)]
pub(super) enum PollOutcome {
    /// Nothing new: no poll was due, or the running one goes on.
    Pending,
    /// The running poll has taken longer than a poll interval (reported
    /// once per poll); it goes on, and the node keeps its last view.
    Overdue(Duration),
    /// A poll finished: what it saw, and whether it reached the root.
    Finished {
        view: Box<FleetView>,
        read_root: bool,
    },
    /// The poll panicked; the node keeps its last view.
    Failed(String),
}

impl ConfigPolls {
    /// `poller` has just made the node's first poll.
    pub(super) fn new(root: FleetRoot, poller: ConfigPoller) -> ConfigPolls {
        ConfigPolls {
            root,
            poller: Arc::new(tokio::sync::Mutex::new(poller)),
            running: None,
            last_started: Instant::now(),
        }
    }

    /// Starts a poll when one is due (`every` has passed since the last
    /// began, or `now` asks for one) and none is running. A poll started
    /// now is waited for up to `step`, so a quick store's view is taken at
    /// once; one started earlier is only collected if it has finished, so
    /// a slow poll never holds a later tick (and its heartbeat) back.
    pub(super) async fn advance(
        &mut self,
        now: bool,
        every: Duration,
        step: Duration,
    ) -> PollOutcome {
        let mut wait = Duration::ZERO;
        let ignored = planted(Planted::ConfigChangesIgnored);
        if self.running.is_none() && !ignored && (now || self.last_started.elapsed() >= every) {
            self.start();
            wait = step;
        }
        let Some(running) = self.running.as_mut() else {
            return PollOutcome::Pending;
        };
        match tokio::time::timeout(wait, &mut running.task).await {
            Ok(finished) => {
                self.running = None;
                match finished {
                    Ok((view, read_root)) => PollOutcome::Finished {
                        view: Box::new(view),
                        read_root,
                    },
                    Err(e) => PollOutcome::Failed(e.to_string()),
                }
            }
            Err(_) => {
                let ran = running.started.elapsed();
                if ran >= every && !running.overdue {
                    running.overdue = true;
                    return PollOutcome::Overdue(ran);
                }
                PollOutcome::Pending
            }
        }
    }

    fn start(&mut self) {
        let root = self.root.clone();
        let poller = self.poller.clone();
        let task = tokio::spawn(async move {
            let mut poller = poller.lock().await;
            let view = poller.poll(&root).await;
            (view, poller.read_root())
        });
        self.last_started = Instant::now();
        self.running = Some(RunningPoll {
            task,
            started: self.last_started,
            overdue: false,
        });
    }
}

impl Drop for ConfigPolls {
    fn drop(&mut self) {
        if let Some(running) = &self.running {
            running.task.abort();
        }
    }
}
