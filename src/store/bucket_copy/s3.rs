//! Server-side copies between S3 buckets: a `CopyObject` whose copy
//! source names another bucket, or for objects over 5 GiB a multipart
//! upload whose parts are `UploadPartCopy`s. Signed with
//! `object_store`'s own SigV4 signer.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer};
use object_store::path::Path;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::{CopyAcross, Reply, Requests, current_credential, request};

/// Largest object one `CopyObject` may copy; larger ones are copied in
/// parts with `UploadPartCopy`.
pub const MAX_COPY_OBJECT: u64 = 5 * 1024 * 1024 * 1024;
/// Bytes per `UploadPartCopy` part (S3 allows 5 MiB to 5 GiB): few
/// requests, each still well within one request's time.
pub const COPY_PART: u64 = 512 * 1024 * 1024;

/// Characters a key keeps unescaped in a URL path or copy source.
const KEY_SAFE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Characters a query value keeps unescaped.
const QUERY_SAFE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// How to reach one S3 bucket with plain HTTP requests.
pub struct S3Address {
    /// `http(s)://host[:port]`, or `None` for AWS itself.
    endpoint: Option<String>,
    region: String,
    bucket: String,
    virtual_hosted: bool,
    allow_http: bool,
    /// The bucket's own store: its credentials sign the copies.
    store: Arc<AmazonS3>,
    requests: Requests,
}

impl std::fmt::Debug for S3Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Address")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .finish()
    }
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
            requests: Requests::default(),
        })
    }

    /// [`S3Address::new`] for a builder not built yet (tests, benchmarks);
    /// `None` when it does not build.
    pub fn from_builder(builder: &AmazonS3Builder) -> Option<S3Address> {
        S3Address::new(builder, Arc::new(builder.clone().build().ok()?))
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

    /// Copies `from` (`size` bytes) in `source`'s bucket to `to` in this
    /// one, server-side: one `CopyObject` up to its 5 GiB limit, parts
    /// over it.
    pub async fn copy_from_sized(
        &self,
        source: &S3Address,
        from: &Path,
        to: &Path,
        size: u64,
    ) -> Result<(), CopyAcross> {
        if size > MAX_COPY_OBJECT {
            self.copy_from_in_parts(source, from, to, size, COPY_PART)
                .await
        } else {
            self.copy_from(source, from, to).await
        }
    }

    /// Copies `from` in `source`'s bucket to `to` in this one with one
    /// `CopyObject`.
    pub async fn copy_from(
        &self,
        source: &S3Address,
        from: &Path,
        to: &Path,
    ) -> Result<(), CopyAcross> {
        let copy_source = source.copy_source(from);
        let reply = self
            .send(
                http::Method::PUT,
                &self.object_url(to),
                &[("x-amz-copy-source", &copy_source)],
                "",
            )
            .await?;
        reply.expect("CopyObjectResult").map(drop)
    }

    /// A server-side copy of an object too large for one `CopyObject`
    /// (`size` bytes): a multipart upload here whose parts S3 copies from
    /// `source` with `UploadPartCopy`, `part` bytes each, several at once.
    /// A copy that fails midway aborts its upload.
    pub async fn copy_from_in_parts(
        &self,
        source: &S3Address,
        from: &Path,
        to: &Path,
        size: u64,
        part: u64,
    ) -> Result<(), CopyAcross> {
        let url = self.object_url(to);
        let created = self
            .send(http::Method::POST, &format!("{url}?uploads"), &[], "")
            .await?;
        let upload = created
            .expect("UploadId")?
            .field("UploadId")
            .ok_or_else(|| {
                CopyAcross::Refused("CreateMultipartUpload: no UploadId in the reply".into())
            })?;
        // As a query value: some servers' ids hold `+`, `/` or `=`.
        let upload = utf8_percent_encode(&upload, QUERY_SAFE).to_string();
        let copied = self
            .copy_parts(source, from, &url, &upload, size, part)
            .await;
        let completed = match copied {
            Ok(etags) => {
                let body = complete_body(&etags);
                let done = self
                    .send(
                        http::Method::POST,
                        &format!("{url}?uploadId={upload}"),
                        &[],
                        &body,
                    )
                    .await;
                done.and_then(|reply| reply.expect("CompleteMultipartUploadResult").map(drop))
            }
            Err(e) => Err(e),
        };
        if completed.is_err() {
            let abort = format!("{url}?uploadId={upload}");
            let aborted = self.send(http::Method::DELETE, &abort, &[], "").await;
            if !aborted
                .as_ref()
                .is_ok_and(|reply| reply.status.is_success())
            {
                tracing::warn!(bucket = %self.bucket, upload, "could not abort a part copy's multipart upload; the bucket's lifecycle rules must clear it");
            }
        }
        completed
    }

    /// Every part of `from` copied into upload `upload` at `url`; their
    /// ETags in part order.
    async fn copy_parts(
        &self,
        source: &S3Address,
        from: &Path,
        url: &str,
        upload: &str,
        size: u64,
        part: u64,
    ) -> Result<Vec<String>, CopyAcross> {
        let copy_source = source.copy_source(from);
        let ranges = part_ranges(size, part);
        futures::stream::iter(ranges.into_iter().enumerate())
            .map(|(index, (first, last))| {
                let part_url = format!("{url}?partNumber={}&uploadId={upload}", index + 1);
                let range = format!("bytes={first}-{last}");
                let copy_source = copy_source.clone();
                async move {
                    let headers = [
                        ("x-amz-copy-source", copy_source.as_str()),
                        ("x-amz-copy-source-range", range.as_str()),
                    ];
                    let reply = self
                        .send(http::Method::PUT, &part_url, &headers, "")
                        .await?;
                    reply.expect("CopyPartResult")?;
                    reply.field("ETag").ok_or_else(|| {
                        CopyAcross::Refused("UploadPartCopy: no ETag in the reply".into())
                    })
                }
            })
            .buffered(PART_COPIES_IN_FLIGHT)
            .try_collect()
            .await
    }

    /// `/bucket/key` of `from` here, as a copy source names it.
    fn copy_source(&self, from: &Path) -> String {
        format!(
            "/{}/{}",
            self.bucket,
            utf8_percent_encode(from.as_ref(), KEY_SAFE)
        )
    }

    /// One request to this bucket's endpoint, signed with its credentials;
    /// the reply's status and (bounded) body. A request that cannot be
    /// made or sent is a refusal: the caller streams instead.
    async fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Reply, CopyAcross> {
        let credential = current_credential(self.store.credentials().as_ref()).await?;
        let mut request = request(method, url, headers, body.to_string())?;
        AwsAuthorizer::new(&credential, "s3", &self.region)
            .try_authorize(&mut request, None)
            .map_err(|e| CopyAcross::Refused(format!("cannot sign: {e}")))?;
        self.requests.send(request, self.allow_http).await
    }
}

/// Parts copied at once by one [`S3Address::copy_from_in_parts`].
const PART_COPIES_IN_FLIGHT: usize = 8;
/// S3's XML replies.
impl Reply {
    /// The text of the first `<name>` element.
    fn field(&self, name: &str) -> Option<String> {
        let (_, rest) = self.body.split_once(&format!("<{name}>"))?;
        let (value, _) = rest.split_once(&format!("</{name}>"))?;
        Some(value.to_string())
    }

    /// `Ok` with itself when the request succeeded and the body holds
    /// `<element>` (S3 may answer 200 and put an error in the body);
    /// otherwise why not.
    fn expect(&self, element: &str) -> Result<&Reply, CopyAcross> {
        if self.status.is_success() && self.body.contains(&format!("<{element}")) {
            return Ok(self);
        }
        let code = self.field("Code");
        // A bare 404 (no error code, as some servers answer a part copy
        // of a missing key) comes right after the HEAD that found the
        // source: it went meanwhile.
        let bare_404 = self.status == http::StatusCode::NOT_FOUND && code.is_none();
        if code.as_deref() == Some("NoSuchKey") || bare_404 {
            return Err(CopyAcross::NotFound);
        }
        let code = code.unwrap_or_else(|| "no error code".into());
        // S3 may answer 200 and report its own failure in the body.
        let status = match code.as_str() {
            "InternalError" | "ServiceUnavailable" | "SlowDown" => {
                http::StatusCode::SERVICE_UNAVAILABLE
            }
            _ => self.status,
        };
        Err(CopyAcross::by_status(
            status,
            format!("{}: {code}", self.status),
        ))
    }
}

/// Inclusive byte ranges of `part` bytes (the last shorter) covering
/// `size` bytes.
fn part_ranges(size: u64, part: u64) -> Vec<(u64, u64)> {
    let part = part.max(1);
    (0..size.div_ceil(part))
        .map(|i| (i * part, ((i + 1) * part).min(size) - 1))
        .collect()
}

/// The `CompleteMultipartUpload` body listing `etags` as parts 1, 2, ...
fn complete_body(etags: &[String]) -> String {
    let parts: String = etags
        .iter()
        .enumerate()
        .map(|(i, etag)| {
            format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{etag}</ETag></Part>",
                i + 1
            )
        })
        .collect();
    format!("<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>")
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

    #[test]
    fn part_ranges_cover_every_byte_once() {
        assert_eq!(part_ranges(10, 4), vec![(0, 3), (4, 7), (8, 9)]);
        assert_eq!(part_ranges(8, 4), vec![(0, 3), (4, 7)]);
        assert_eq!(part_ranges(3, 4), vec![(0, 2)]);
        assert!(part_ranges(0, 4).is_empty());
    }

    #[test]
    fn replies_yield_fields_and_name_errors() {
        let ok = Reply {
            status: http::StatusCode::OK,
            headers: Default::default(),
            body: "<CopyPartResult><ETag>\"abc\"</ETag></CopyPartResult>".into(),
        };
        assert!(ok.expect("CopyPartResult").is_ok());
        assert_eq!(ok.field("ETag").as_deref(), Some("\"abc\""));
        let in_body = Reply {
            status: http::StatusCode::OK,
            headers: Default::default(),
            body: "<Error><Code>InternalError</Code></Error>".into(),
        };
        assert!(
            matches!(in_body.expect("CopyPartResult"), Err(CopyAcross::Unavailable(why)) if why.contains("InternalError"))
        );
        let missing = Reply {
            status: http::StatusCode::NOT_FOUND,
            headers: Default::default(),
            body: "<Error><Code>NoSuchKey</Code></Error>".into(),
        };
        assert!(matches!(
            missing.expect("CopyObjectResult"),
            Err(CopyAcross::NotFound)
        ));
        let bare = Reply {
            status: http::StatusCode::NOT_FOUND,
            headers: Default::default(),
            body: String::new(),
        };
        assert!(matches!(
            bare.expect("CopyPartResult"),
            Err(CopyAcross::NotFound)
        ));
        let no_bucket = Reply {
            status: http::StatusCode::NOT_FOUND,
            headers: Default::default(),
            body: "<Error><Code>NoSuchBucket</Code></Error>".into(),
        };
        assert!(matches!(
            no_bucket.expect("CopyPartResult"),
            Err(CopyAcross::Refused(_))
        ));
        assert_eq!(
            complete_body(&["a".into(), "b".into()]),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag></Part>\
             <Part><PartNumber>2</PartNumber><ETag>b</ETag></Part></CompleteMultipartUpload>"
        );
    }
}
