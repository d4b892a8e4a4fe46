//! The few SQS calls a fleet makes (receive, delete, and for `sleet
//! events setup` create, attributes and policy), in the JSON protocol,
//! signed with `object_store`'s SigV4 signer and the credentials S3 uses:
//! the whole AWS SDK for five calls would double the build.
//!
//! A queue URL names where the queue is served: `https://sqs.<region>.
//! amazonaws.com/<account>/<name>` on AWS, the test server's own address
//! locally. Requests go to its origin.

use std::time::Duration;

use futures::StreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer, AwsCredentialProvider};
use object_store::client::{ClientOptions, HttpClient, HttpConnector, ReqwestConnector};
use serde::Deserialize;
use serde_json::{Value, json};

/// The longest a receive waits for a message (SQS's own limit).
pub const LONG_POLL: Duration = Duration::from_secs(20);

/// Messages one receive asks for (SQS's limit).
const MAX_MESSAGES: u32 = 10;

/// Bytes of a reply kept: ten messages of SQS's largest size and their
/// envelope; a server that sends more is refused, not read on.
const MAX_REPLY: usize = 4 * 1024 * 1024;

/// Why a call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SqsError {
    #[error("{0}")]
    Invalid(String),
    /// The call was made and refused (`code` is AWS's error type, such as
    /// `AWS.SimpleQueueService.NonExistentQueue`).
    #[error("{call} refused ({status}): {code}: {message}")]
    Refused {
        call: &'static str,
        status: u16,
        code: String,
        message: String,
    },
    /// No answer: the connection failed or timed out.
    #[error("{call}: no answer: {why}")]
    Unreachable { call: &'static str, why: String },
}

impl SqsError {
    /// Whether the queue itself does not exist.
    pub fn is_missing_queue(&self) -> bool {
        matches!(self, SqsError::Refused { code, .. } if code.contains("NonExistentQueue") || code.contains("QueueDoesNotExist"))
    }
}

pub use crate::model::policy::QueueAddress;

/// One message received.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    #[serde(rename = "ReceiptHandle")]
    pub receipt_handle: String,
    #[serde(rename = "Body", default)]
    pub body: String,
}

/// Signed calls to AWS services with the credentials and region the
/// environment gives S3 (`AWS_ACCESS_KEY_ID`, `AWS_REGION`, a web
/// identity or instance profile).
#[derive(Clone)]
pub struct AwsCalls {
    credentials: AwsCredentialProvider,
    region: String,
    client: HttpClient,
}

impl std::fmt::Debug for AwsCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCalls")
            .field("region", &self.region)
            .finish()
    }
}

/// A reply: status and (bounded) body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl AwsCalls {
    /// From the environment; `region` overrides its region (a queue URL
    /// on AWS names its own).
    pub fn from_env(region: Option<&str>) -> Result<AwsCalls, SqsError> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name("sleet-events");
        if let Some(region) = region {
            builder = builder.with_region(region);
        }
        let region = builder
            .get_config_value(&AmazonS3ConfigKey::Region)
            .unwrap_or_else(|| "us-east-1".into());
        let store = builder
            .build()
            .map_err(|e| SqsError::Invalid(format!("AWS settings from the environment: {e}")))?;
        let client = ReqwestConnector::default()
            .connect(
                &ClientOptions::new()
                    .with_allow_http(true)
                    .with_timeout(LONG_POLL + Duration::from_secs(10)),
            )
            .map_err(|e| SqsError::Invalid(format!("no HTTP client: {e}")))?;
        Ok(AwsCalls {
            credentials: store.credentials().clone(),
            region,
            client,
        })
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// Sends one request signed for `service`.
    pub async fn send(
        &self,
        call: &'static str,
        service: &str,
        request: http::Request<String>,
    ) -> Result<Reply, SqsError> {
        let unreachable = |why: String| SqsError::Unreachable { call, why };
        let credential = self
            .credentials
            .get_credential()
            .await
            .map_err(|e| unreachable(format!("no credentials: {e}")))?;
        let (parts, body) = request.into_parts();
        let mut request =
            http::Request::from_parts(parts, object_store::client::HttpRequestBody::from(body));
        AwsAuthorizer::new(&credential, service, &self.region)
            .try_authorize(&mut request, None)
            .map_err(|e| SqsError::Invalid(format!("{call}: cannot sign: {e}")))?;
        let response = self
            .client
            .execute(request)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let (parts, body) = response.into_parts();
        let mut kept = Vec::new();
        let mut chunks = body.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| unreachable(e.to_string()))?;
            if kept.len() + chunk.len() > MAX_REPLY {
                return Err(unreachable(format!("reply over {MAX_REPLY} bytes")));
            }
            kept.extend_from_slice(&chunk);
        }
        Ok(Reply {
            status: parts.status.as_u16(),
            body: String::from_utf8_lossy(&kept).into_owned(),
        })
    }
}

/// One SQS endpoint (a queue's origin, or a region's for setup).
#[derive(Debug, Clone)]
pub struct Sqs {
    calls: AwsCalls,
    origin: String,
}

impl Sqs {
    pub fn new(calls: AwsCalls, origin: impl Into<String>) -> Sqs {
        Sqs {
            calls,
            origin: origin.into(),
        }
    }

    /// The client for the queue at `queue`, with the environment's
    /// credentials.
    pub fn for_queue(queue: &QueueAddress) -> Result<Sqs, SqsError> {
        Ok(Sqs::new(
            AwsCalls::from_env(queue.region.as_deref())?,
            &queue.origin,
        ))
    }

    /// One JSON-protocol call (`action` as `AmazonSQS.<action>`); its
    /// reply's JSON, or why the queue refused it.
    pub async fn call(&self, action: &'static str, body: Value) -> Result<Value, SqsError> {
        let request = http::Request::post(format!("{}/", self.origin))
            .header("content-type", "application/x-amz-json-1.0")
            .header("x-amz-target", format!("AmazonSQS.{action}"))
            .body(body.to_string())
            .map_err(|e| SqsError::Invalid(format!("{action}: {e}")))?;
        let reply = self.calls.send(action, "sqs", request).await?;
        let value: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
        if !(200..300).contains(&reply.status) {
            let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
            return Err(SqsError::Refused {
                call: action,
                status: reply.status,
                code: text("__type").unwrap_or_default(),
                message: text("message")
                    .or_else(|| text("Message"))
                    .unwrap_or_else(|| reply.body.chars().take(200).collect()),
            });
        }
        Ok(value)
    }

    /// Waits up to `wait` for messages (a long poll).
    pub async fn receive(&self, queue_url: &str, wait: Duration) -> Result<Vec<Message>, SqsError> {
        let reply = self
            .call(
                "ReceiveMessage",
                json!({
                    "QueueUrl": queue_url,
                    "MaxNumberOfMessages": MAX_MESSAGES,
                    "WaitTimeSeconds": wait.as_secs().min(LONG_POLL.as_secs()),
                }),
            )
            .await?;
        let messages = reply.get("Messages").cloned().unwrap_or(Value::Null);
        if messages.is_null() {
            return Ok(Vec::new());
        }
        serde_json::from_value(messages)
            .map_err(|e| SqsError::Invalid(format!("ReceiveMessage: unexpected reply: {e}")))
    }

    /// Deletes received messages (at most ten, as received).
    pub async fn delete(&self, queue_url: &str, messages: &[Message]) -> Result<(), SqsError> {
        if messages.is_empty() {
            return Ok(());
        }
        let entries: Vec<Value> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| json!({"Id": i.to_string(), "ReceiptHandle": m.receipt_handle}))
            .collect();
        self.call(
            "DeleteMessageBatch",
            json!({"QueueUrl": queue_url, "Entries": entries}),
        )
        .await
        .map(|_| ())
    }

    /// The queue's URL, creating the queue if it does not exist.
    pub async fn create_queue(&self, name: &str) -> Result<String, SqsError> {
        let reply = self.call("CreateQueue", json!({"QueueName": name})).await?;
        string_field(&reply, "QueueUrl", "CreateQueue")
    }

    /// The queue's URL, if the queue exists.
    pub async fn queue_url(&self, name: &str) -> Result<Option<String>, SqsError> {
        match self.call("GetQueueUrl", json!({"QueueName": name})).await {
            Ok(reply) => string_field(&reply, "QueueUrl", "GetQueueUrl").map(Some),
            Err(e) if e.is_missing_queue() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The queue's ARN (what a bucket notification names).
    pub async fn queue_arn(&self, queue_url: &str) -> Result<String, SqsError> {
        let reply = self
            .call(
                "GetQueueAttributes",
                json!({"QueueUrl": queue_url, "AttributeNames": ["QueueArn"]}),
            )
            .await?;
        reply
            .pointer("/Attributes/QueueArn")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| SqsError::Invalid("GetQueueAttributes: no QueueArn in the reply".into()))
    }

    /// Sets the queue's access policy.
    pub async fn set_policy(&self, queue_url: &str, policy: &str) -> Result<(), SqsError> {
        self.call(
            "SetQueueAttributes",
            json!({"QueueUrl": queue_url, "Attributes": {"Policy": policy}}),
        )
        .await
        .map(|_| ())
    }

    /// Deletes the queue.
    pub async fn delete_queue(&self, queue_url: &str) -> Result<(), SqsError> {
        self.call("DeleteQueue", json!({"QueueUrl": queue_url}))
            .await
            .map(|_| ())
    }

    pub fn calls(&self) -> &AwsCalls {
        &self.calls
    }
}

fn string_field(reply: &Value, field: &str, call: &str) -> Result<String, SqsError> {
    reply
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| SqsError::Invalid(format!("{call}: no {field} in the reply")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_name_their_origin_and_region() {
        let aws =
            QueueAddress::parse("https://sqs.eu-west-1.amazonaws.com/123456789012/sleet").unwrap();
        assert_eq!(aws.origin, "https://sqs.eu-west-1.amazonaws.com");
        assert_eq!(aws.region.as_deref(), Some("eu-west-1"));
        assert_eq!(aws.name, "sleet");
        let local = QueueAddress::parse("http://127.0.0.1:5000/123456789012/q").unwrap();
        assert_eq!(local.origin, "http://127.0.0.1:5000");
        assert_eq!(local.region, None);
        for bad in [
            "sqs://x/1/q",
            "https://sqs.amazonaws.com/q",
            "not a url",
            "https://h/1/q/extra",
        ] {
            assert!(QueueAddress::parse(bad).is_err(), "{bad}");
        }
    }
}
