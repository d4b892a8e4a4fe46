//! Whether the store's events reach this node (see `crate::services::events`).
//! While they do, an idle database's looks back off to the events' safety
//! interval instead of `probe_max`: a new manifest wakes it through its
//! event, and the looks only catch what a lost notification would miss.
//! When the events stop, every waiting look is told at once and falls
//! back to `probe_max`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// The node's event flow: the safety interval while events flow, `None`
/// while the node polls.
#[derive(Clone)]
pub struct EventFlow {
    state: Arc<watch::Sender<Option<Duration>>>,
}

impl Default for EventFlow {
    fn default() -> Self {
        EventFlow {
            state: Arc::new(watch::Sender::new(None)),
        }
    }
}

impl EventFlow {
    /// The safety interval while events flow; `None` while polling.
    pub fn safety(&self) -> Option<Duration> {
        *self.state.borrow()
    }

    /// Events flow, with this safety interval (`None`: they stopped).
    pub fn set(&self, safety: Option<Duration>) {
        self.state.send_if_modified(|now| {
            let changed = *now != safety;
            *now = safety;
            changed
        });
    }

    /// Completes once the flow differs from `seen`.
    pub async fn changed_from(&self, seen: Option<Duration>) {
        let mut receiver = self.state.subscribe();
        // The sender lives as long as `self`: this never errs.
        let _ = receiver.wait_for(|now| *now != seen).await;
    }
}
