//! `sleet events setup`: the queue, its access policy, and a bucket
//! notification of new manifests for every bucket registered databases
//! live in. Each step reads first and changes only what differs, so the
//! command can run again after a database in a new bucket is registered.
//!
//! A bucket's notification configuration is one document: the
//! configurations other tools set on it are kept, and only the one with
//! [`CONFIGURATION_ID`] is replaced.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::json;

use super::sqs::{AwsCalls, Sqs, SqsError};

/// The id of the queue configuration this command writes on a bucket.
pub const CONFIGURATION_ID: &str = "sleet-manifests";

/// What setup did, or would do with `--dry-run`.
#[derive(Debug, Clone, Serialize)]
pub struct SetupReport {
    pub queue_url: String,
    pub queue_arn: String,
    pub queue_created: bool,
    pub buckets: Vec<String>,
    pub dry_run: bool,
    /// The access policy set on the queue.
    pub policy: serde_json::Value,
    /// The queue configuration added to each bucket's notifications.
    pub notification: String,
}

impl SetupReport {
    /// The `[events]` table to add to `sleet.toml`.
    pub fn config_snippet(&self) -> String {
        format!(
            "[events]\nsource = \"sqs\"\nqueue_url = \"{}\"\n",
            self.queue_url
        )
    }
}

/// Where setup sends its requests: one endpoint that serves S3 and SQS
/// (a local server, as `AWS_ENDPOINT` names it), or AWS itself.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub calls: AwsCalls,
    pub endpoint: Option<String>,
}

impl Endpoints {
    /// From the environment: credentials and region as S3 takes them,
    /// and `AWS_ENDPOINT` if set.
    pub fn from_env() -> Result<Endpoints, SqsError> {
        Ok(Endpoints {
            calls: AwsCalls::from_env(None)?,
            endpoint: std::env::var("AWS_ENDPOINT")
                .ok()
                .filter(|e| !e.is_empty())
                .map(|e| e.trim_end_matches('/').to_string()),
        })
    }

    fn sqs_origin(&self) -> String {
        match &self.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => format!("https://sqs.{}.amazonaws.com", self.calls.region()),
        }
    }

    /// A bucket's notification URL: path style at a local endpoint, the
    /// bucket's own host on AWS.
    fn notification_url(&self, bucket: &str) -> String {
        match &self.endpoint {
            Some(endpoint) => format!("{endpoint}/{bucket}?notification"),
            None => format!(
                "https://{bucket}.s3.{}.amazonaws.com/?notification",
                self.calls.region()
            ),
        }
    }
}

/// The queue policy that lets these buckets' notifications reach it.
pub fn queue_policy(queue_arn: &str, buckets: &BTreeSet<String>) -> serde_json::Value {
    let sources: Vec<String> = buckets
        .iter()
        .map(|b| format!("arn:aws:s3:::{b}"))
        .collect();
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "sleet-bucket-notifications",
            "Effect": "Allow",
            "Principal": {"Service": "s3.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnLike": {"aws:SourceArn": sources}},
        }],
    })
}

/// This command's queue configuration for a bucket.
pub fn queue_configuration(queue_arn: &str) -> String {
    format!(
        "<QueueConfiguration><Id>{CONFIGURATION_ID}</Id><Queue>{queue_arn}</Queue>\
         <Event>s3:ObjectCreated:*</Event><Filter><S3Key><FilterRule><Name>suffix</Name>\
         <Value>.manifest</Value></FilterRule></S3Key></Filter></QueueConfiguration>"
    )
}

/// `existing` (a bucket's notification document) with this command's
/// queue configuration in place of any earlier one, other configurations
/// kept as they were.
pub fn merged_notifications(existing: &str, ours: &str) -> String {
    let inner = existing
        .split_once("<NotificationConfiguration")
        .and_then(|(_, rest)| rest.split_once('>'))
        .filter(|(attributes, _)| !attributes.ends_with('/'))
        .and_then(|(_, rest)| rest.rsplit_once("</NotificationConfiguration>"))
        .map_or("", |(inner, _)| inner);
    let mut kept = String::new();
    let mut rest = inner;
    while let Some((before, after)) = rest.split_once("<QueueConfiguration>") {
        kept.push_str(before);
        let Some((body, after)) = after.split_once("</QueueConfiguration>") else {
            rest = "";
            break;
        };
        if !body.contains(&format!("<Id>{CONFIGURATION_ID}</Id>")) {
            kept.push_str(&format!("<QueueConfiguration>{body}</QueueConfiguration>"));
        }
        rest = after;
    }
    kept.push_str(rest);
    format!(
        "<NotificationConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">{}{ours}</NotificationConfiguration>",
        kept.trim()
    )
}

/// Why setup stopped.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Sqs(#[from] SqsError),
    #[error("bucket {bucket}: {action}: {why}")]
    Bucket {
        bucket: String,
        action: &'static str,
        why: String,
    },
    #[error("no registered database is on S3: there is no bucket to notify")]
    NoBuckets,
}

/// Sets up (or with `dry_run` only reads and reports) `queue` for
/// notifications from `buckets`.
pub async fn setup(
    at: &Endpoints,
    queue: &str,
    buckets: &BTreeSet<String>,
    dry_run: bool,
) -> Result<SetupReport, SetupError> {
    if buckets.is_empty() {
        return Err(SetupError::NoBuckets);
    }
    let region = at.calls.region();
    let sqs = Sqs::new(at.calls.clone(), at.sqs_origin());
    let existing = sqs.queue_url(queue).await?;
    let queue_created = existing.is_none();
    let (queue_url, queue_arn) = match (existing, dry_run) {
        (Some(url), _) => {
            let arn = sqs.queue_arn(&url).await?;
            (url, arn)
        }
        (None, true) => (
            format!("{}/<account>/{queue}", at.sqs_origin()),
            format!("arn:aws:sqs:{region}:<account>:{queue}"),
        ),
        (None, false) => {
            let url = sqs.create_queue(queue).await?;
            let arn = sqs.queue_arn(&url).await?;
            (url, arn)
        }
    };
    let policy = queue_policy(&queue_arn, buckets);
    let ours = queue_configuration(&queue_arn);
    if !dry_run {
        sqs.set_policy(&queue_url, &policy.to_string()).await?;
        for bucket in buckets {
            notify(at, bucket, &ours).await?;
        }
    }
    Ok(SetupReport {
        queue_url,
        queue_arn,
        queue_created,
        buckets: buckets.iter().cloned().collect(),
        dry_run,
        policy,
        notification: ours,
    })
}

/// Puts this command's queue configuration on `bucket`, keeping the rest.
async fn notify(at: &Endpoints, bucket: &str, ours: &str) -> Result<(), SetupError> {
    let url = at.notification_url(bucket);
    let get = http::Request::get(&url).body(String::new());
    let existing = bucket_call(at, bucket, "read notifications", get).await?;
    let document = merged_notifications(&existing, ours);
    let put = http::Request::put(&url)
        .header("content-type", "application/xml")
        .body(document);
    bucket_call(at, bucket, "write notifications", put).await?;
    Ok(())
}

/// One signed request about `bucket`'s notifications; the reply's body.
async fn bucket_call(
    at: &Endpoints,
    bucket: &str,
    action: &'static str,
    request: Result<http::Request<String>, http::Error>,
) -> Result<String, SetupError> {
    let failed = |why: String| SetupError::Bucket {
        bucket: bucket.to_string(),
        action,
        why,
    };
    let request = request.map_err(|e| failed(e.to_string()))?;
    let reply = at
        .calls
        .send(action, "s3", request)
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !(200..300).contains(&reply.status) {
        return Err(failed(format!("{}: {}", reply.status, reply.body)));
    }
    Ok(reply.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_configuration_replaces_its_old_self_and_keeps_the_others() {
        let ours = queue_configuration("arn:new");
        let empty = merged_notifications(
            r#"<?xml version="1.0"?><NotificationConfiguration xmlns="x"/>"#,
            &ours,
        );
        assert_eq!(empty.matches("<QueueConfiguration>").count(), 1);
        let theirs = "<QueueConfiguration><Id>theirs</Id><Queue>arn:q</Queue></QueueConfiguration>\
                      <TopicConfiguration><Id>t</Id></TopicConfiguration>";
        let old = queue_configuration("arn:old");
        let existing = format!(
            r#"<NotificationConfiguration xmlns="x">{theirs}{old}</NotificationConfiguration>"#
        );
        let merged = merged_notifications(&existing, &ours);
        assert!(merged.contains(theirs), "{merged}");
        assert!(
            merged.contains("arn:new") && !merged.contains("arn:old"),
            "{merged}"
        );
        assert_eq!(merged_notifications(&merged, &ours), merged, "idempotent");
    }
}
