//! Server-side copies between containers of one Azure storage account
//! with `Copy Blob`: the destination is PUT with the source blob's URL.
//! Within one account the service usually copies at once; when it
//! answers "pending", the copy is waited on (bounded) through the
//! destination's properties, and aborted if it does not finish.

use std::sync::Arc;
use std::time::Duration;

use object_store::azure::{
    AzureAuthorizer, AzureConfigKey, AzureCredential, MicrosoftAzure, MicrosoftAzureBuilder,
};
use object_store::path::Path;
use url::Url;

use super::{CopyAcross, Reply, Requests, current_credential, request};

/// The account and service URL of Azurite, the emulator, as
/// `object_store` uses them when told to use it.
const EMULATOR_ACCOUNT: &str = "devstoreaccount1";
const EMULATOR_URL: &str = "http://127.0.0.1:10000";

/// How long a pending copy is waited on before it is aborted and the
/// object streamed instead.
const MAX_PENDING: Duration = Duration::from_secs(10 * 60);
/// The first and the longest wait between two looks at a pending copy.
const FIRST_LOOK: Duration = Duration::from_millis(100);
const LONGEST_LOOK: Duration = Duration::from_secs(5);

/// How to reach one Azure container with plain HTTP requests.
pub struct AzureAddress {
    /// `https://<account>.blob.core.windows.net`, or the emulator's URL
    /// (which puts the account in the path).
    service: Url,
    account: String,
    container: String,
    emulator: bool,
    /// The container's own store: its credentials sign the copies.
    store: Arc<MicrosoftAzure>,
    requests: Requests,
}

impl std::fmt::Debug for AzureAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureAddress")
            .field("service", &self.service.as_str())
            .field("account", &self.account)
            .field("container", &self.container)
            .finish()
    }
}

/// Where a copy stands, by its `x-ms-copy-status`.
#[derive(Debug, PartialEq)]
enum CopyState {
    Done,
    Pending,
    Failed(String),
}

impl AzureAddress {
    /// The address of the container that `builder` configured and
    /// `store` was built from, found as `object_store` finds it (the
    /// emulator from `AZURITE_BLOB_STORAGE_URL`); `None` without an
    /// account or container name.
    pub fn new(builder: &MicrosoftAzureBuilder, store: Arc<MicrosoftAzure>) -> Option<Self> {
        let value = |key| builder.get_config_value(&key);
        let emulator = value(AzureConfigKey::UseEmulator).is_some_and(|v| v == "true");
        let (account, service) = if emulator {
            let account = value(AzureConfigKey::AccountName).unwrap_or(EMULATOR_ACCOUNT.into());
            let service = std::env::var("AZURITE_BLOB_STORAGE_URL")
                .unwrap_or_else(|_| EMULATOR_URL.to_string());
            (account, service)
        } else {
            let account = value(AzureConfigKey::AccountName)?;
            let service = value(AzureConfigKey::Endpoint)
                .unwrap_or_else(|| format!("https://{account}.blob.core.windows.net"));
            (account, service)
        };
        Some(AzureAddress {
            service: Url::parse(&service).ok()?,
            account,
            container: value(AzureConfigKey::ContainerName)?,
            emulator,
            store,
            requests: Requests::default(),
        })
    }

    /// Whether a copy into this container can name `other`'s blobs: the
    /// same service and account (a blob in another account needs a SAS
    /// of that account), another container.
    pub fn reaches(&self, other: &AzureAddress) -> bool {
        self.service == other.service
            && self.account == other.account
            && self.container != other.container
    }

    /// The blob's URL, built as `object_store` builds it.
    fn blob_url(&self, path: &Path) -> Url {
        let mut url = self.service.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty();
            if self.emulator {
                segments.push(&self.account);
            }
            segments.push(&self.container).extend(path.parts());
        }
        url
    }

    /// Copies `from` in `source`'s container to `to` in this one with
    /// `Copy Blob`, and waits while the service reports it pending.
    pub async fn copy_from(
        &self,
        source: &AzureAddress,
        from: &Path,
        to: &Path,
    ) -> Result<(), CopyAcross> {
        let credential = current_credential(self.store.credentials().as_ref()).await?;
        let mut copy_source = source.blob_url(from);
        // A SAS authorizes a request through its URL: the source's too.
        if let AzureCredential::SASToken(pairs) = credential.as_ref() {
            copy_source.query_pairs_mut().extend_pairs(pairs);
        }
        let to_url = self.blob_url(to);
        let reply = self
            .send(
                &credential,
                http::Method::PUT,
                to_url.clone(),
                &[("x-ms-copy-source", copy_source.as_str())],
            )
            .await?;
        if !reply.status.is_success() {
            return Err(refusal_or_missing(&reply));
        }
        match copy_state(&reply) {
            CopyState::Done => Ok(()),
            CopyState::Failed(why) => Err(CopyAcross::Refused(why)),
            CopyState::Pending => {
                let id = reply.header("x-ms-copy-id").unwrap_or_default().to_string();
                self.await_copy(&credential, to_url, &id).await
            }
        }
    }

    /// Looks at a pending copy's state in the destination's properties,
    /// less often as it goes on, until it ends or [`MAX_PENDING`] has
    /// passed; then aborts it so that no half copy is left behind.
    async fn await_copy(
        &self,
        credential: &AzureCredential,
        to: Url,
        id: &str,
    ) -> Result<(), CopyAcross> {
        let started = tokio::time::Instant::now();
        let mut wait = FIRST_LOOK;
        while started.elapsed() < MAX_PENDING {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(LONGEST_LOOK);
            let reply = self
                .send(credential, http::Method::HEAD, to.clone(), &[])
                .await?;
            if !reply.status.is_success() {
                return Err(refusal_or_missing(&reply));
            }
            if reply.header("x-ms-copy-id") != Some(id) {
                return Err(CopyAcross::Refused(
                    "Copy Blob: another copy replaced this one".into(),
                ));
            }
            match copy_state(&reply) {
                CopyState::Done => return Ok(()),
                CopyState::Failed(why) => return Err(CopyAcross::Refused(why)),
                CopyState::Pending => {}
            }
        }
        let mut abort = to;
        abort
            .query_pairs_mut()
            .append_pair("comp", "copy")
            .append_pair("copyid", id);
        let aborted = self
            .send(
                credential,
                http::Method::PUT,
                abort,
                &[("x-ms-copy-action", "abort")],
            )
            .await;
        if !aborted.is_ok_and(|reply| reply.status.is_success()) {
            tracing::warn!(container = %self.container, copy = id, "could not abort a pending Copy Blob");
        }
        Err(CopyAcross::Refused(format!(
            "Copy Blob: still pending after {}s",
            MAX_PENDING.as_secs()
        )))
    }

    /// One request to this container's service, signed with its
    /// credentials (the authorizer puts a SAS into the URL).
    async fn send(
        &self,
        credential: &AzureCredential,
        method: http::Method,
        url: Url,
        headers: &[(&str, &str)],
    ) -> Result<Reply, CopyAcross> {
        let mut request = request(method, url.as_str(), headers, String::new())?;
        AzureAuthorizer::new(credential, &self.account)
            .try_authorize(&mut request)
            .map_err(|e| CopyAcross::Refused(format!("cannot sign: {e}")))?;
        let allow_http = self.service.scheme() == "http";
        self.requests.send(request, allow_http).await
    }
}

/// The state of a copy from a reply's `x-ms-copy-status`; none (a
/// service that copied at once and said nothing) counts as done.
fn copy_state(reply: &Reply) -> CopyState {
    match reply.header("x-ms-copy-status") {
        None | Some("success") => CopyState::Done,
        Some("pending") => CopyState::Pending,
        Some(other) => CopyState::Failed(format!(
            "Copy Blob: {other}: {}",
            reply
                .header("x-ms-copy-status-description")
                .unwrap_or("no description")
        )),
    }
}

/// A failed request: "not found" when the source blob is missing,
/// otherwise a refusal (or a passing failure, by status) naming Azure's
/// error code.
fn refusal_or_missing(reply: &Reply) -> CopyAcross {
    let code = reply.header("x-ms-error-code").unwrap_or("no error code");
    let missing_source = reply.status == http::StatusCode::NOT_FOUND
        && matches!(code, "BlobNotFound" | "CannotVerifyCopySource");
    if missing_source {
        return CopyAcross::NotFound;
    }
    CopyAcross::by_status(reply.status, format!("Copy Blob: {}: {code}", reply.status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(builder: MicrosoftAzureBuilder, container: &str) -> AzureAddress {
        let builder = builder.with_container_name(container);
        let store = Arc::new(builder.clone().build().expect("an Azure client"));
        AzureAddress::new(&builder, store).expect("an address")
    }

    fn account(name: &str) -> MicrosoftAzureBuilder {
        MicrosoftAzureBuilder::new()
            .with_account(name)
            .with_access_key("aGVsbG8=")
    }

    fn reply(status: http::StatusCode, headers: &[(&'static str, &'static str)]) -> Reply {
        let mut map = http::HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, http::HeaderValue::from_static(value));
        }
        Reply {
            status,
            headers: map,
            body: String::new(),
        }
    }

    #[test]
    fn blob_urls_name_the_account_and_container_as_object_store_does() {
        let key = Path::from("db/compacted/a b+c.sst");
        assert_eq!(
            address(account("acct"), "dst").blob_url(&key).as_str(),
            "https://acct.blob.core.windows.net/dst/db/compacted/a%20b+c.sst"
        );
        let emulator = address(MicrosoftAzureBuilder::new().with_use_emulator(true), "dst");
        assert!(
            emulator
                .blob_url(&key)
                .path()
                .starts_with("/devstoreaccount1/dst/db/compacted/")
        );
    }

    #[test]
    fn only_other_containers_of_the_same_account_are_reached() {
        let dst = address(account("acct"), "dst");
        assert!(dst.reaches(&address(account("acct"), "src")));
        assert!(!dst.reaches(&address(account("acct"), "dst")));
        assert!(!dst.reaches(&address(account("other"), "src")));
    }

    #[test]
    fn copy_states_and_errors_read_from_headers() {
        use http::StatusCode;
        let status = |value| reply(StatusCode::ACCEPTED, &[("x-ms-copy-status", value)]);
        assert_eq!(copy_state(&status("success")), CopyState::Done);
        assert_eq!(copy_state(&status("pending")), CopyState::Pending);
        assert!(matches!(
            copy_state(&status("failed")),
            CopyState::Failed(_)
        ));
        assert_eq!(
            copy_state(&reply(StatusCode::ACCEPTED, &[])),
            CopyState::Done
        );
        let missing = reply(
            StatusCode::NOT_FOUND,
            &[("x-ms-error-code", "CannotVerifyCopySource")],
        );
        assert!(matches!(refusal_or_missing(&missing), CopyAcross::NotFound));
        let no_container = reply(
            StatusCode::NOT_FOUND,
            &[("x-ms-error-code", "ContainerNotFound")],
        );
        assert!(
            matches!(refusal_or_missing(&no_container), CopyAcross::Refused(why) if why.contains("ContainerNotFound"))
        );
        let busy = reply(
            StatusCode::SERVICE_UNAVAILABLE,
            &[("x-ms-error-code", "ServerBusy")],
        );
        assert!(matches!(
            refusal_or_missing(&busy),
            CopyAcross::Unavailable(_)
        ));
    }
}
