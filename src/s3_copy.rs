//! Server-side copies between S3 buckets: a `CopyObject` whose copy
//! source names another bucket, which `object_store` does not make (its
//! copy stays within one bucket). The bytes never pass through the node.
//!
//! The request is signed with `object_store`'s own SigV4 signer and the
//! destination's credentials. A store that refuses (another account,
//! another endpoint, a server without cross-bucket copy) answers with an
//! error, and the caller streams the object instead.

use std::sync::{Arc, OnceLock};

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer};
use object_store::client::{ClientOptions, HttpClient, HttpConnector, ReqwestConnector};
use object_store::path::Path;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Largest object one `CopyObject` may copy; larger ones need
/// `UploadPartCopy`, which is not built: they stream.
pub const MAX_COPY_OBJECT: u64 = 5 * 1024 * 1024 * 1024;

/// Characters a key keeps unescaped in a URL path or copy source.
const KEY_SAFE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// How to reach one S3 bucket with plain HTTP requests.
#[derive(Clone)]
pub struct S3Address {
    /// `http(s)://host[:port]`, or `None` for AWS itself.
    endpoint: Option<String>,
    region: String,
    bucket: String,
    virtual_hosted: bool,
    allow_http: bool,
    /// The bucket's own store: its credentials sign the copies.
    store: Arc<AmazonS3>,
    /// Made at the first copy: most roots are never copied across buckets.
    client: OnceLock<HttpClient>,
}

impl std::fmt::Debug for S3Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Address")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .finish()
    }
}

/// Why a cross-bucket copy did not happen.
#[derive(Debug)]
pub enum CopyAcross {
    /// The source object does not exist.
    NotFound,
    /// The store would not copy it server-side: stream it instead.
    Refused(String),
}

impl S3Address {
    /// The address of the bucket that `builder` configured and `store`
    /// was built from; `None` without a bucket name.
    pub fn new(builder: &AmazonS3Builder, store: Arc<AmazonS3>) -> Option<S3Address> {
        let value = |key| builder.get_config_value(&key);
        let flag = |key| value(key).is_some_and(|v| v == "true");
        Some(S3Address {
            endpoint: value(AmazonS3ConfigKey::Endpoint).map(|e| e.trim_end_matches('/').into()),
            region: value(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into()),
            bucket: value(AmazonS3ConfigKey::Bucket)?,
            virtual_hosted: flag(AmazonS3ConfigKey::VirtualHostedStyleRequest),
            allow_http: flag(AmazonS3ConfigKey::Client(
                object_store::ClientConfigKey::AllowHttp,
            )),
            store,
            client: OnceLock::new(),
        })
    }

    /// [`S3Address::new`] for a builder not built yet (tests, benchmarks);
    /// `None` when it does not build.
    pub fn from_builder(builder: &AmazonS3Builder) -> Option<S3Address> {
        S3Address::new(builder, Arc::new(builder.clone().build().ok()?))
    }

    /// The HTTP client copies go through, made once.
    fn client(&self) -> Result<&HttpClient, CopyAcross> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let client = ReqwestConnector::default()
            .connect(&ClientOptions::new().with_allow_http(self.allow_http))
            .map_err(|e| CopyAcross::Refused(format!("no HTTP client: {e}")))?;
        Ok(self.client.get_or_init(|| client))
    }

    /// Whether a request to this bucket's endpoint can name `other`'s
    /// bucket as a copy source: the same endpoint and region, another
    /// bucket (within one bucket `object_store` copies by itself).
    pub fn reaches(&self, other: &S3Address) -> bool {
        self.endpoint == other.endpoint
            && self.region == other.region
            && self.virtual_hosted == other.virtual_hosted
            && self.bucket != other.bucket
    }

    fn object_url(&self, key: &Path) -> String {
        let key = utf8_percent_encode(key.as_ref(), KEY_SAFE);
        match (&self.endpoint, self.virtual_hosted) {
            (Some(endpoint), false) => format!("{endpoint}/{}/{key}", self.bucket),
            (Some(endpoint), true) => {
                let (scheme, host) = endpoint.split_once("://").unwrap_or(("https", endpoint));
                format!("{scheme}://{}.{host}/{key}", self.bucket)
            }
            (None, _) => format!(
                "https://{}.s3.{}.amazonaws.com/{key}",
                self.bucket, self.region
            ),
        }
    }

    /// Copies `from` in `source`'s bucket to `to` in this one, server-side.
    pub async fn copy_from(
        &self,
        source: &S3Address,
        from: &Path,
        to: &Path,
    ) -> Result<(), CopyAcross> {
        let refused = |why: String| CopyAcross::Refused(why);
        let credential = self
            .store
            .credentials()
            .get_credential()
            .await
            .map_err(|e| refused(format!("no credentials: {e}")))?;
        let copy_source = format!(
            "/{}/{}",
            source.bucket,
            utf8_percent_encode(from.as_ref(), KEY_SAFE)
        );
        let mut request = http::Request::builder()
            .method(http::Method::PUT)
            .uri(self.object_url(to))
            .header("x-amz-copy-source", copy_source)
            .body(object_store::client::HttpRequestBody::empty())
            .map_err(|e| refused(format!("bad request: {e}")))?;
        AwsAuthorizer::new(&credential, "s3", &self.region)
            .try_authorize(&mut request, None)
            .map_err(|e| refused(format!("cannot sign: {e}")))?;
        let response = self
            .client()?
            .execute(request)
            .await
            .map_err(|e| refused(format!("request failed: {e}")))?;
        let status = response.status();
        let body = response.into_body().bytes().await.unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        // S3 may answer 200 and put the error in the body.
        if status.is_success() && body.contains("CopyObjectResult") {
            return Ok(());
        }
        if body.contains("<Code>NoSuchKey</Code>") {
            return Err(CopyAcross::NotFound);
        }
        let code = body
            .split_once("<Code>")
            .and_then(|(_, rest)| rest.split_once("</Code>"))
            .map_or("no error code", |(code, _)| code);
        Err(refused(format!("{status}: {code}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(endpoint: Option<&str>, bucket: &str, virtual_hosted: bool) -> S3Address {
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region("eu-west-1")
            .with_access_key_id("k")
            .with_secret_access_key("s")
            .with_virtual_hosted_style_request(virtual_hosted);
        if let Some(endpoint) = endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(true);
        }
        S3Address::from_builder(&builder).expect("an address")
    }

    #[test]
    fn urls_follow_the_endpoint_style_and_escape_keys() {
        let key = Path::from("db/compacted/a b+c.sst");
        assert_eq!(
            address(Some("http://127.0.0.1:9000/"), "dst", false).object_url(&key),
            "http://127.0.0.1:9000/dst/db/compacted/a%20b%2Bc.sst"
        );
        assert_eq!(
            address(Some("https://minio.local"), "dst", true).object_url(&key),
            "https://dst.minio.local/db/compacted/a%20b%2Bc.sst"
        );
        assert_eq!(
            address(None, "dst", false).object_url(&key),
            "https://dst.s3.eu-west-1.amazonaws.com/db/compacted/a%20b%2Bc.sst"
        );
    }

    #[test]
    fn only_other_buckets_behind_the_same_endpoint_are_reached() {
        let a = address(Some("http://127.0.0.1:9000"), "a", false);
        assert!(a.reaches(&address(Some("http://127.0.0.1:9000"), "b", false)));
        assert!(!a.reaches(&address(Some("http://127.0.0.1:9000"), "a", false)));
        assert!(!a.reaches(&address(Some("http://127.0.0.1:9001"), "b", false)));
        assert!(!a.reaches(&address(None, "b", false)));
    }
}
