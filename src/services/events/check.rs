//! `sleet events check`: writes a marker object that the bucket
//! notification matches into every bucket registered databases live in,
//! and reports whether and how fast each one's event arrives.
//!
//! SQS hands a message to one consumer, so while nodes run one of them
//! receives the marker's event: it acknowledges it under the fleet root
//! (`events-check/<token>`, with its node id), and the check waits for
//! that. With no node live, the check receives from the queue itself,
//! deleting only its own messages.

use std::collections::BTreeSet;
use std::time::Duration;

use object_store::{ObjectStoreExt, PutPayload};
use serde::Serialize;
use tokio::time::Instant;

use super::notification::{MARKER_DIR, check_token};
use super::sqs::{QueueAddress, Sqs};
use crate::fleet::root::FleetRoot;

/// Where a node acknowledges a check's event under the fleet root.
pub const ACK_DIR: &str = "events-check";

/// How old an acknowledgement is before any node's canary round deletes
/// it. A waiting check reads its acknowledgement within a second of its
/// writing; one older than this belongs to a check that gave up (the
/// event came late) or to a marker nobody waits for, and would otherwise
/// stay under the root for good.
pub const ACK_LIFETIME: Duration = Duration::from_secs(600);

/// The gaps between reads of an awaited acknowledgement: from 100 ms,
/// doubling to a second, so a quick event is timed closely and one that
/// never comes costs about a read a second.
const ACK_POLL_MIN: Duration = Duration::from_millis(100);
const ACK_POLL_MAX: Duration = Duration::from_secs(1);

/// What one bucket's marker showed.
#[derive(Debug, Clone, Serialize)]
pub struct BucketCheck {
    pub bucket: String,
    /// Seconds from the marker's PUT to its event, if it arrived.
    pub arrived_after_secs: Option<f64>,
    /// The node that received it, or `sleet events check` itself.
    pub received_by: Option<String>,
    pub problem: Option<String>,
}

/// The whole check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub queue_url: String,
    pub buckets: Vec<BucketCheck>,
}

impl CheckReport {
    pub fn failed(&self) -> usize {
        self.buckets
            .iter()
            .filter(|b| b.arrived_after_secs.is_none())
            .count()
    }
}

/// Checks `buckets` against the queue at `queue_url`; `nodes_live` says
/// whether to wait for a node's acknowledgement or receive directly.
pub async fn run(
    root: &FleetRoot,
    queue_url: &str,
    buckets: &BTreeSet<String>,
    nodes_live: bool,
    timeout: Duration,
) -> CheckReport {
    let mut checks = Vec::new();
    for bucket in buckets {
        checks.push(check_bucket(root, queue_url, bucket, nodes_live, timeout).await);
    }
    CheckReport {
        queue_url: queue_url.to_string(),
        buckets: checks,
    }
}

async fn check_bucket(
    root: &FleetRoot,
    queue_url: &str,
    bucket: &str,
    nodes_live: bool,
    timeout: Duration,
) -> BucketCheck {
    match crate::store::open_url(&format!("s3://{bucket}")) {
        Ok((store, _)) => {
            let how = if nodes_live {
                Arrival::Acknowledged
            } else {
                Arrival::Received(queue_url)
            };
            probe_bucket(root, store.as_ref(), bucket, how, timeout).await
        }
        Err(e) => BucketCheck {
            bucket: bucket.to_string(),
            arrived_after_secs: None,
            received_by: None,
            problem: Some(format!("cannot open s3://{bucket}: {e}")),
        },
    }
}

/// How a marker's event is seen to arrive.
pub enum Arrival<'a> {
    /// A node acknowledges it under the fleet root.
    Acknowledged,
    /// This process receives it from the queue at this URL.
    Received(&'a str),
}

/// Writes a marker into `bucket` (through `store`, rooted at the bucket)
/// and waits up to `timeout` for its event.
pub async fn probe_bucket(
    root: &FleetRoot,
    store: &dyn object_store::ObjectStore,
    bucket: &str,
    how: Arrival<'_>,
    timeout: Duration,
) -> BucketCheck {
    let mut check = BucketCheck {
        bucket: bucket.to_string(),
        arrived_after_secs: None,
        received_by: None,
        problem: None,
    };
    let token = uuid::Uuid::new_v4().to_string();
    let marker = object_store::path::Path::from(format!("{MARKER_DIR}/{token}.manifest"));
    let written = Instant::now();
    if let Err(e) = store
        .put(&marker, PutPayload::from_static(b"sleet events check"))
        .await
    {
        check.problem = Some(format!("cannot write the marker: {e}"));
        return check;
    }
    let arrived = match how {
        Arrival::Acknowledged => wait_for_ack(root, &token, timeout).await,
        Arrival::Received(queue_url) => receive_own(queue_url, bucket, &token, timeout).await,
    };
    match arrived {
        Ok(Some(by)) => {
            check.arrived_after_secs = Some(written.elapsed().as_secs_f64());
            check.received_by = Some(by);
        }
        Ok(None) => {
            check.problem = Some(format!(
                "no event within {}: is the bucket notification set (sleet events setup)?",
                crate::model::duration::HumanDuration(timeout)
            ))
        }
        Err(problem) => check.problem = Some(problem),
    }
    let _ = store.delete(&marker).await;
    check
}

/// Waits for a node's acknowledgement of `token`; the node's id.
async fn wait_for_ack(
    root: &FleetRoot,
    token: &str,
    timeout: Duration,
) -> Result<Option<String>, String> {
    let ack = root.path(&format!("{ACK_DIR}/{token}"));
    let deadline = Instant::now() + timeout;
    let mut gap = ACK_POLL_MIN;
    while Instant::now() < deadline {
        match root.get_bytes(&ack).await {
            Ok(body) => {
                let _ = root.store().delete(&ack).await;
                return Ok(Some(String::from_utf8_lossy(&body).into_owned()));
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                return Err(format!(
                    "reading {}: {e}",
                    root.describe(&format!("{ACK_DIR}/{token}"))
                ));
            }
        }
        tokio::time::sleep(gap).await;
        gap = (gap * 2).min(ACK_POLL_MAX);
    }
    Ok(None)
}

/// Receives from the queue until this check's own message shows.
async fn receive_own(
    queue_url: &str,
    bucket: &str,
    token: &str,
    timeout: Duration,
) -> Result<Option<String>, String> {
    let queue = QueueAddress::parse(queue_url)?;
    let sqs = Sqs::for_queue(&queue).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let wait = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let messages = sqs
            .receive(queue_url, wait)
            .await
            .map_err(|e| e.to_string())?;
        let ours: Vec<_> = messages
            .into_iter()
            .filter(|m| {
                super::notification::created_objects(&m.body)
                    .iter()
                    .any(|o| o.bucket == bucket && check_token(o) == Some(token))
            })
            .collect();
        if !ours.is_empty() {
            let _ = sqs.delete(queue_url, &ours).await;
            return Ok(Some("sleet events check".to_string()));
        }
    }
    Ok(None)
}

/// A node's acknowledgement of a check marker it received.
pub async fn acknowledge(root: &FleetRoot, token: &str, node_id: &str) {
    let ack = root.path(&format!("{ACK_DIR}/{token}"));
    if let Err(e) = root.store().put(&ack, node_id.to_string().into()).await {
        tracing::debug!("could not acknowledge events check {token}: {e}");
    }
}

/// Deletes acknowledgements older than [`ACK_LIFETIME`]; how many.
pub async fn sweep_stale_acks(root: &FleetRoot) -> Result<usize, object_store::Error> {
    use futures::TryStreamExt;
    let acks: Vec<object_store::ObjectMeta> = root
        .store()
        .list(Some(&root.path(ACK_DIR)))
        .try_collect()
        .await?;
    let stale = stale_acks(&acks, chrono::Utc::now());
    for location in &stale {
        match root.store().delete(location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(stale.len())
}

/// The acknowledgements among `acks` written over [`ACK_LIFETIME`]
/// before `now`.
fn stale_acks(
    acks: &[object_store::ObjectMeta],
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<object_store::path::Path> {
    let lifetime = chrono::Duration::from_std(ACK_LIFETIME).expect("a short lifetime");
    acks.iter()
        .filter(|meta| now - meta.last_modified > lifetime)
        .map(|meta| meta.location.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_acknowledgements_past_their_lifetime_are_swept() {
        let now = chrono::Utc::now();
        let ack = |name: &str, age_secs: i64| object_store::ObjectMeta {
            location: object_store::path::Path::from(format!("root/{ACK_DIR}/{name}")),
            last_modified: now - chrono::Duration::seconds(age_secs),
            size: 8,
            e_tag: None,
            version: None,
        };
        let acks = [
            ack("fresh", 1),
            ack("waited-for", 599),
            ack("late", 601),
            ack("old", 86_400),
        ];
        assert_eq!(
            stale_acks(&acks, now),
            [
                object_store::path::Path::from(format!("root/{ACK_DIR}/late")),
                object_store::path::Path::from(format!("root/{ACK_DIR}/old")),
            ]
        );
    }
}
