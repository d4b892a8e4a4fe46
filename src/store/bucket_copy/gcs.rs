//! Server-side copies between GCS buckets with the JSON API's
//! `rewriteTo`. One call may copy only part of a large object (across
//! locations or storage classes) and answer with a token to continue
//! with; the copy is done when a reply says so.

use std::sync::Arc;

use object_store::ObjectStoreExt;
use object_store::gcp::{GoogleCloudStorage, GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::{CopyAcross, Requests, current_credential, request};

/// Where GCS is when nothing configures another base URL (as in
/// `object_store`).
const DEFAULT_BASE_URL: &str = "https://storage.googleapis.com";

/// Calls one rewrite may take before it counts as refused: GCS moves at
/// least tens of MiB a call, so this bounds a copy of many GiB, and a
/// server that never says done cannot hold a copy forever.
const MAX_REWRITE_CALLS: usize = 1000;

/// Characters a bucket or object name keeps unescaped in one path
/// segment of the JSON API (`/` is escaped: an object name is one
/// segment there).
const SEGMENT_SAFE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// How to reach one GCS bucket with plain HTTP requests.
pub struct GcsAddress {
    /// `https://storage.googleapis.com`, or an emulator's base URL.
    base_url: String,
    bucket: String,
    /// The bucket's own store: its credentials authorize the copies, and
    /// it tells a missing source from a missing bucket.
    store: Arc<GoogleCloudStorage>,
    requests: Requests,
}

impl std::fmt::Debug for GcsAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcsAddress")
            .field("base_url", &self.base_url)
            .field("bucket", &self.bucket)
            .finish()
    }
}

/// The parts of a rewrite reply the loop needs.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RewriteReply {
    done: bool,
    #[serde(default)]
    rewrite_token: String,
}

impl GcsAddress {
    /// The address of the bucket that `builder` configured and `store`
    /// was built from; `None` without a bucket name. The base URL is the
    /// builder's, else the service account's `gcs_base_url` (how
    /// emulators are reached), else GCS's own, as `object_store` decides.
    pub fn new(
        builder: &GoogleCloudStorageBuilder,
        store: Arc<GoogleCloudStorage>,
    ) -> Option<Self> {
        let value = |key| builder.get_config_value(&key);
        let base_url = value(GoogleConfigKey::BaseUrl)
            .or_else(|| service_account_base_url(builder))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        Some(GcsAddress {
            base_url: base_url.trim_end_matches('/').to_string(),
            bucket: value(GoogleConfigKey::Bucket)?,
            store,
            requests: Requests::default(),
        })
    }

    /// Whether a rewrite into this bucket can name `other`'s objects: the
    /// same base URL, another bucket.
    pub fn reaches(&self, other: &GcsAddress) -> bool {
        self.base_url == other.base_url && self.bucket != other.bucket
    }

    /// Copies `from` in `source`'s bucket to `to` in this one with
    /// `rewriteTo`, continuing with each reply's token until it is done.
    pub async fn copy_from(
        &self,
        source: &GcsAddress,
        from: &Path,
        to: &Path,
    ) -> Result<(), CopyAcross> {
        let url = rewrite_url(&self.base_url, &source.bucket, from, &self.bucket, to);
        let mut token = String::new();
        for _ in 0..MAX_REWRITE_CALLS {
            let call = if token.is_empty() {
                url.clone()
            } else {
                format!(
                    "{url}?rewriteToken={}",
                    utf8_percent_encode(&token, SEGMENT_SAFE)
                )
            };
            let reply = self.rewrite(&call).await?;
            if reply.status == http::StatusCode::NOT_FOUND {
                return Err(source.missing_or_refused(from, &reply.body).await);
            }
            if !reply.status.is_success() {
                return Err(CopyAcross::by_status(
                    reply.status,
                    format!("rewrite: {} {}", reply.status, error_message(&reply.body)),
                ));
            }
            let progress: RewriteReply = serde_json::from_str(&reply.body)
                .map_err(|e| CopyAcross::Refused(format!("rewrite: an unreadable reply ({e})")))?;
            if progress.done {
                return Ok(());
            }
            if progress.rewrite_token.is_empty() {
                return Err(CopyAcross::Refused(
                    "rewrite: not done, and no token to continue with".into(),
                ));
            }
            token = progress.rewrite_token;
        }
        Err(CopyAcross::Refused(format!(
            "rewrite: not done after {MAX_REWRITE_CALLS} calls"
        )))
    }

    /// One `rewriteTo` call, authorized with this bucket's credentials.
    async fn rewrite(&self, url: &str) -> Result<super::Reply, CopyAcross> {
        let credential = current_credential(self.store.credentials().as_ref()).await?;
        let bearer = format!("Bearer {}", credential.bearer);
        let mut headers = vec![("content-type", "application/json")];
        // An emulator without OAuth has an empty token: send none.
        if !credential.bearer.is_empty() {
            headers.push(("authorization", bearer.as_str()));
        }
        let request = request(http::Method::POST, url, &headers, String::new())?;
        let allow_http = self.base_url.starts_with("http://");
        self.requests.send(request, allow_http).await
    }

    /// After a 404 (GCS answers one for a missing source object and for a
    /// missing bucket alike): `NotFound` if the source object is gone,
    /// else a refusal.
    async fn missing_or_refused(&self, from: &Path, body: &str) -> CopyAcross {
        match self.store.head(from).await {
            Err(object_store::Error::NotFound { .. }) => CopyAcross::NotFound,
            _ => CopyAcross::Refused(format!("rewrite: 404 {}", error_message(body))),
        }
    }
}

/// `{base}/storage/v1/b/{bucket}/o/{object}/rewriteTo/b/{bucket}/o/{object}`
/// with each name one escaped path segment.
fn rewrite_url(base: &str, from_bucket: &str, from: &Path, to_bucket: &str, to: &Path) -> String {
    let segment = |name: &str| utf8_percent_encode(name, SEGMENT_SAFE).to_string();
    format!(
        "{base}/storage/v1/b/{}/o/{}/rewriteTo/b/{}/o/{}",
        segment(from_bucket),
        segment(from.as_ref()),
        segment(to_bucket),
        segment(to.as_ref())
    )
}

/// The `error.message` of a JSON API error reply, or the reply's start.
fn error_message(body: &str) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorReply {
        error: ErrorBody,
    }
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        message: String,
    }
    match serde_json::from_str::<ErrorReply>(body) {
        Ok(reply) => reply.error.message,
        Err(_) => body.chars().take(200).collect(),
    }
}

/// The `gcs_base_url` of the service account the builder names (a file
/// or an inline key), where test servers and emulators are configured.
fn service_account_base_url(builder: &GoogleCloudStorageBuilder) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct ServiceAccount {
        gcs_base_url: Option<String>,
    }
    let key = match builder.get_config_value(&GoogleConfigKey::ServiceAccountKey) {
        Some(key) => key,
        None => {
            let path = builder.get_config_value(&GoogleConfigKey::ServiceAccount)?;
            std::fs::read_to_string(path).ok()?
        }
    };
    serde_json::from_str::<ServiceAccount>(&key)
        .ok()?
        .gcs_base_url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(service_account: &str, bucket: &str) -> GcsAddress {
        let builder = GoogleCloudStorageBuilder::new()
            .with_bucket_name(bucket)
            .with_service_account_key(service_account);
        let store = Arc::new(builder.clone().build().expect("a GCS client"));
        GcsAddress::new(&builder, store).expect("an address")
    }

    const EMULATOR: &str = r#"{"gcs_base_url": "http://127.0.0.1:4443/", "disable_oauth": true,
        "client_email": "", "private_key": "", "private_key_id": ""}"#;
    const ELSEWHERE: &str = r#"{"gcs_base_url": "http://127.0.0.1:4444", "disable_oauth": true,
        "client_email": "", "private_key": "", "private_key_id": ""}"#;

    #[test]
    fn the_base_url_comes_from_the_service_account_and_names_are_one_segment() {
        let dst = address(EMULATOR, "dst");
        assert_eq!(dst.base_url, "http://127.0.0.1:4443");
        assert_eq!(
            rewrite_url(
                &dst.base_url,
                "src",
                &Path::from("db/compacted/a b+c.sst"),
                "dst",
                &Path::from("m/x.sst")
            ),
            "http://127.0.0.1:4443/storage/v1/b/src/o/db%2Fcompacted%2Fa%20b%2Bc.sst\
             /rewriteTo/b/dst/o/m%2Fx.sst"
        );
    }

    #[test]
    fn only_other_buckets_behind_the_same_base_url_are_reached() {
        let dst = address(EMULATOR, "dst");
        assert!(dst.reaches(&address(EMULATOR, "src")));
        assert!(!dst.reaches(&address(EMULATOR, "dst")));
        assert!(!dst.reaches(&address(ELSEWHERE, "src")));
    }

    #[test]
    fn error_replies_give_their_message() {
        assert_eq!(
            error_message(r#"{"error":{"code":403,"message":"no access"}}"#),
            "no access"
        );
        assert_eq!(error_message("plain"), "plain");
    }
}
