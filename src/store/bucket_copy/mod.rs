//! Server-side copies between two buckets (or Azure containers) of one
//! endpoint, which `object_store` does not make: its `copy` stays within
//! one bucket. Each cloud has its own request:
//!
//! - S3: `CopyObject` with a copy source in the other bucket, or for
//!   objects over 5 GiB a multipart upload of `UploadPartCopy`s;
//! - GCS: the JSON API's `rewriteTo`, called again with its token until
//!   it reports done;
//! - Azure: `Copy Blob` with the source blob's URL, waited on while the
//!   service reports it pending.
//!
//! The bytes never pass through the node. Requests are signed with
//! `object_store`'s own signers and the destination store's credentials.
//! A store that refuses (another account, a server without the request)
//! answers with an error, and the caller streams the object instead.

pub mod azure;
pub mod gcs;
pub mod s3;

use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpRequest, ReqwestConnector,
};
use object_store::path::Path;

pub use azure::AzureAddress;
pub use gcs::GcsAddress;
pub use s3::S3Address;

/// Why a server-side copy did not happen.
#[derive(Debug)]
pub enum CopyAcross {
    /// The source object does not exist.
    NotFound,
    /// The store would not copy it server-side: stream it instead, and
    /// from then on.
    Refused(String),
    /// The store failed or did not answer (a 5xx, a 429, a dropped
    /// connection): stream this object, and ask again for the next.
    Unavailable(String),
}

impl CopyAcross {
    /// A failed reply's meaning by its status: a store that is failing
    /// or busy will pass, anything else is a refusal.
    pub(crate) fn by_status(status: http::StatusCode, why: String) -> CopyAcross {
        if status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS {
            CopyAcross::Unavailable(why)
        } else {
            CopyAcross::Refused(why)
        }
    }
}

/// How to reach one bucket (or container) with plain HTTP requests, for
/// copies into it from another bucket of the same endpoint.
#[derive(Debug)]
pub enum BucketAddress {
    S3(S3Address),
    Gcs(GcsAddress),
    Azure(AzureAddress),
}

impl BucketAddress {
    /// Whether a copy request to this bucket can name an object of
    /// `source`: the same cloud, endpoint and account, another bucket
    /// (within one bucket `object_store` copies by itself).
    pub fn reaches(&self, source: &BucketAddress) -> bool {
        match (self, source) {
            (BucketAddress::S3(to), BucketAddress::S3(from)) => to.reaches(from),
            (BucketAddress::Gcs(to), BucketAddress::Gcs(from)) => to.reaches(from),
            (BucketAddress::Azure(to), BucketAddress::Azure(from)) => to.reaches(from),
            _ => false,
        }
    }

    /// Copies `from` (of `size` bytes) in `source`'s bucket to `to` in
    /// this one, server-side. Call only where [`BucketAddress::reaches`].
    pub async fn copy_from(
        &self,
        source: &BucketAddress,
        from: &Path,
        to: &Path,
        size: u64,
    ) -> Result<(), CopyAcross> {
        match (self, source) {
            (BucketAddress::S3(to_bucket), BucketAddress::S3(from_bucket)) => {
                to_bucket.copy_from_sized(from_bucket, from, to, size).await
            }
            (BucketAddress::Gcs(to_bucket), BucketAddress::Gcs(from_bucket)) => {
                to_bucket.copy_from(from_bucket, from, to).await
            }
            (BucketAddress::Azure(to_bucket), BucketAddress::Azure(from_bucket)) => {
                to_bucket.copy_from(from_bucket, from, to).await
            }
            _ => Err(CopyAcross::Refused(
                "the source is in another cloud".to_string(),
            )),
        }
    }
}

/// Bytes of a reply kept: the replies to these requests are small, and a
/// server that sends more is not read further.
const MAX_REPLY: usize = 64 * 1024;

/// How long one copy request may take. A server-side copy answers only
/// when done (S3 sends whitespace meanwhile; a GCS rewrite call may run
/// about 30 s by design), so the store's usual 30 s would stream a large
/// object that was still being copied.
const COPY_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// What a store answered: its status, headers and (bounded) body.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Reply {
    /// A header's value as text, if it is there and is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The HTTP client one bucket's copy requests go through, made at the
/// first copy: most roots are never copied across buckets.
#[derive(Default)]
pub(crate) struct Requests {
    client: OnceLock<HttpClient>,
}

impl Requests {
    fn client(&self, allow_http: bool) -> Result<&HttpClient, CopyAcross> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let client = ReqwestConnector::default()
            .connect(
                &ClientOptions::new()
                    .with_allow_http(allow_http)
                    .with_timeout(COPY_REQUEST_TIMEOUT),
            )
            .map_err(|e| CopyAcross::Refused(format!("no HTTP client: {e}")))?;
        Ok(self.client.get_or_init(|| client))
    }

    /// Sends a signed request; its reply with the body cut at
    /// [`MAX_REPLY`]. A request that gets no answer is a passing failure:
    /// the caller streams this object and asks again for the next.
    pub async fn send(&self, request: HttpRequest, allow_http: bool) -> Result<Reply, CopyAcross> {
        let response = self
            .client(allow_http)?
            .execute(request)
            .await
            .map_err(|e| CopyAcross::Unavailable(format!("request failed: {e}")))?;
        let (parts, body) = response.into_parts();
        let mut kept = Vec::new();
        let mut chunks = body.bytes_stream();
        while let Some(Ok(chunk)) = chunks.next().await {
            let room = MAX_REPLY - kept.len();
            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if kept.len() == MAX_REPLY {
                break;
            }
        }
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body: String::from_utf8_lossy(&kept).into_owned(),
        })
    }
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Requests")
    }
}

/// The current credential of a store's provider (fetched or refreshed as
/// the provider does); one that cannot be had is a passing failure.
pub(crate) async fn current_credential<P>(provider: &P) -> Result<Arc<P::Credential>, CopyAcross>
where
    P: object_store::CredentialProvider + ?Sized,
{
    provider
        .get_credential()
        .await
        .map_err(|e| CopyAcross::Unavailable(format!("no credentials: {e}")))
}

/// An unsigned request: `method` to `url` with `headers` and `body`.
pub(crate) fn request(
    method: http::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: String,
) -> Result<HttpRequest, CopyAcross> {
    let mut request = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
        .body(object_store::client::HttpRequestBody::from(body))
        .map_err(|e| CopyAcross::Refused(format!("bad request: {e}")))
}
