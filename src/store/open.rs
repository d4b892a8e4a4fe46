//! Opening object stores from URLs, configured from the environment.
//!
//! Credentials, endpoints and client options come from the process
//! environment under the names the `object_store` crate reads (for example
//! `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, `AWS_ACCESS_KEY_ID`,
//! `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_NAME`). One process has
//! one credential domain per cloud.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::path::Path;

use crate::store::bucket_copy::{AzureAddress, BucketAddress, GcsAddress, S3Address};

/// Options every S3 store gets, after the environment: SlateDB's manifest
/// CAS and sleet's create-only registry writes need conditional PUTs
/// (`If-None-Match` / `If-Match`), so they cannot be turned off.
const S3_REQUIRED_OPTIONS: [(&str, &str); 1] = [("aws_conditional_put", "etag")];

/// Whether the store at `url` can update an object in place with
/// `If-Match` (SlateDB's GC boundary files need it): `file://` and HTTP
/// stores cannot.
pub fn updates_in_place(url: &str) -> bool {
    !(url.starts_with("file:") || url.starts_with("http"))
}

/// The store a canonical URL lives in, as a short name: `s3://bucket`,
/// `gs://bucket`, `az://container`, `http://host:port`, or `file://` and
/// `memory://` for the machine's filesystem and the process's memory.
/// Every URL of one store shares its properties, so a node checks each
/// store once.
pub fn store_id(canonical_url: &str) -> String {
    let Ok(url) = url::Url::parse(canonical_url) else {
        return canonical_url.to_string();
    };
    let scheme = match url.scheme() {
        "s3a" => "s3",
        "adl" | "azure" | "abfs" | "abfss" => "az",
        other => other,
    };
    let host = url.host_str().unwrap_or("");
    match (scheme, url.port()) {
        ("file" | "memory", _) => format!("{scheme}://"),
        (_, Some(port)) => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    }
}

/// Opens the store a canonical URL points into, and the path of the URL
/// inside that store.
pub fn open_url(canonical_url: &str) -> Result<(Arc<dyn ObjectStore>, Path), object_store::Error> {
    let (store, path, _) = open_url_with_address(canonical_url)?;
    Ok((store, path))
}

/// A store, the URL's path in it, and for a bucket of S3 or GCS or a
/// container of Azure its address.
pub type OpenedUrl = (Arc<dyn ObjectStore>, Path, Option<Arc<BucketAddress>>);

/// [`open_url`], and for an `s3://`, `gs://` or `az://` URL the bucket's
/// (or container's) address, so copies into other buckets of the same
/// endpoint can run server-side. One store serves both.
pub fn open_url_with_address(canonical_url: &str) -> Result<OpenedUrl, object_store::Error> {
    let (url, options) = parse_with_options(canonical_url)?;
    open_with_options(&url, options)
}

/// Opens `url` with `options`. For the URL forms whose bucket is the
/// host, the builder is made here rather than by `object_store`, so that
/// the address read from it names the URL's bucket (an `AWS_BUCKET` in the
/// environment does not win over the URL, in the store or the address).
fn open_with_options(
    url: &url::Url,
    options: Vec<(String, String)>,
) -> Result<OpenedUrl, object_store::Error> {
    let bucket = url.host_str().filter(|_| url.username().is_empty());
    let (store, address) = match (url.scheme(), bucket) {
        ("s3" | "s3a", Some(bucket)) => with_address(
            configured(
                AmazonS3Builder::new(),
                options,
                AmazonS3Builder::with_config,
            )
            .with_bucket_name(bucket),
            AmazonS3Builder::build,
            |builder, store| S3Address::new(builder, store).map(BucketAddress::S3),
        )?,
        ("gs", Some(bucket)) => with_address(
            configured(
                GoogleCloudStorageBuilder::new(),
                options,
                GoogleCloudStorageBuilder::with_config,
            )
            .with_bucket_name(bucket),
            GoogleCloudStorageBuilder::build,
            |builder, store| GcsAddress::new(builder, store).map(BucketAddress::Gcs),
        )?,
        // A container name never holds a dot: such a host is another URL
        // form, which `object_store` parses (or rejects) itself.
        ("az" | "adl" | "azure" | "abfs" | "abfss", Some(container))
            if !container.contains('.') =>
        {
            with_address(
                configured(
                    MicrosoftAzureBuilder::new(),
                    options,
                    MicrosoftAzureBuilder::with_config,
                )
                .with_container_name(container),
                MicrosoftAzureBuilder::build,
                |builder, store| AzureAddress::new(builder, store).map(BucketAddress::Azure),
            )?
        }
        _ => {
            let (store, path) = object_store::parse_url_opts(url, options)?;
            return Ok((Arc::from(store), path, None));
        }
    };
    Ok((store, Path::from_url_path(url.path())?, address))
}

/// The stores a node has opened, one per bucket (container, file
/// system): every database in a bucket shares one client, its connection
/// pool and its credentials. A store per database held a client, and
/// between looks an idle connection, for each of a database's tasks:
/// 30,000 of each on a node serving 10,000 databases. `memory://` and
/// the other URL forms open a store each, as before (an in-memory store
/// shared by URLs that name different stores would merge them).
#[derive(Clone, Default)]
pub struct SharedStores {
    opened: Arc<std::sync::Mutex<std::collections::HashMap<String, StoreWithAddress>>>,
}

impl SharedStores {
    /// [`open_url_with_address`], reusing the store of the URL's bucket
    /// when this set has opened it before.
    pub fn open(&self, canonical_url: &str) -> Result<OpenedUrl, object_store::Error> {
        let (url, options) = parse_with_options(canonical_url)?;
        if !shareable(&url) {
            return open_with_options(&url, options);
        }
        let key = store_id(canonical_url);
        let path = Path::from_url_path(url.path())?;
        let cached = self.lock().get(&key).cloned();
        if let Some((store, address)) = cached {
            return Ok((store, path, address));
        }
        let (store, path, address) = open_with_options(&url, options)?;
        let (store, address) = self.lock().entry(key).or_insert((store, address)).clone();
        Ok((store, path, address))
    }

    /// How many stores are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, StoreWithAddress>> {
        // Poison-tolerant: the map is complete after every insert.
        self.opened.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether every URL of `url`'s store can share one client: the file
/// system, and the buckets and containers [`open_with_options`] builds
/// stores for itself (one per name, whatever the path).
fn shareable(url: &url::Url) -> bool {
    let bucket = url.host_str().filter(|_| url.username().is_empty());
    match (url.scheme(), bucket) {
        ("file", _) => true,
        ("s3" | "s3a" | "gs", Some(_)) => true,
        ("az" | "adl" | "azure" | "abfs" | "abfss", Some(container)) => !container.contains('.'),
        _ => false,
    }
}

/// A store, and the address of its bucket where it has one.
type StoreWithAddress = (Arc<dyn ObjectStore>, Option<Arc<BucketAddress>>);

/// The store `builder` builds, and the address `address` reads from the
/// builder and that store.
fn with_address<B: Clone, S: ObjectStore>(
    builder: B,
    build: fn(B) -> object_store::Result<S>,
    address: fn(&B, Arc<S>) -> Option<BucketAddress>,
) -> object_store::Result<StoreWithAddress> {
    let store = Arc::new(build(builder.clone())?);
    let address = address(&builder, store.clone()).map(Arc::new);
    Ok((store, address))
}

fn is_s3(url: &url::Url) -> bool {
    matches!(url.scheme(), "s3" | "s3a")
}

/// The URL and the store options for it: the environment's, then the
/// ones S3 stores cannot do without.
fn parse_with_options(
    canonical_url: &str,
) -> Result<(url::Url, Vec<(String, String)>), object_store::Error> {
    let url = url::Url::parse(canonical_url).map_err(|e| object_store::Error::Generic {
        store: "url",
        source: Box::new(e),
    })?;
    let mut options: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    if is_s3(&url) {
        options.extend(
            S3_REQUIRED_OPTIONS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
    }
    Ok((url, options))
}

/// `builder` with every option whose name it recognises (any case), as
/// `object_store::parse_url_opts` configures one.
fn configured<B, K: std::str::FromStr>(
    builder: B,
    options: Vec<(String, String)>,
    with_config: fn(B, K, String) -> B,
) -> B {
    options.into_iter().fold(builder, |builder, (key, value)| {
        match key.to_ascii_lowercase().parse() {
            Ok(key) => with_config(builder, key, value),
            Err(_) => builder,
        }
    })
}

/// `prefix/relative`, or `relative` when the prefix is the store root.
///
/// `relative` is already in object-store form (segments percent-encoded
/// where needed), so it is parsed rather than joined: joining would encode
/// the `%` of registry names a second time.
pub fn child_path(prefix: &Path, relative: &str) -> Path {
    let joined = if prefix.as_ref().is_empty() {
        relative.to_string()
    } else {
        format!("{prefix}/{relative}")
    };
    Path::parse(&joined).unwrap_or_else(|_| Path::from(joined.as_str()))
}

/// `location` relative to `prefix` (`dbs/x.toml` under the fleet root).
pub fn relative_to<'a>(prefix: &Path, location: &'a Path) -> &'a str {
    let full = location.as_ref();
    if prefix.as_ref().is_empty() {
        return full;
    }
    full.strip_prefix(prefix.as_ref())
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_ids_name_the_bucket_not_the_path() {
        assert_eq!(store_id("s3://ops/fleet/root"), "s3://ops");
        assert_eq!(store_id("s3a://ops/db"), "s3://ops");
        assert_eq!(store_id("gs://b/x"), "gs://b");
        assert_eq!(store_id("abfs://c/x"), "az://c");
        assert_eq!(store_id("file:///srv/a"), "file://");
        assert_eq!(store_id("memory:///x"), "memory://");
        assert_eq!(store_id("http://127.0.0.1:8080/d"), "http://127.0.0.1:8080");
    }

    #[test]
    fn child_paths_keep_percent_escapes() {
        let prefix = Path::from("fleet");
        assert_eq!(
            child_path(&prefix, "dbs/s3%3A%2F%2Fb%2Fdb.toml").as_ref(),
            "fleet/dbs/s3%3A%2F%2Fb%2Fdb.toml"
        );
        assert_eq!(
            child_path(&Path::default(), "sleet.toml").as_ref(),
            "sleet.toml"
        );
        let full = child_path(&prefix, "nodes/n1.g.json");
        assert_eq!(relative_to(&prefix, &full), "nodes/n1.g.json");
    }

    /// Databases in one bucket share its store; other buckets, schemes
    /// and `memory://` URLs get their own. Builds clients only: no
    /// request is made.
    #[test]
    fn databases_in_one_bucket_share_its_store() {
        let stores = SharedStores::default();
        let open = |url: &str| stores.open(url).unwrap();
        let (a, path_a, _) = open("s3://bucket/db-a");
        let (b, path_b, address) = open("s3://bucket/team/db-b");
        assert!(Arc::ptr_eq(&a, &b), "one store for one bucket");
        assert_eq!((path_a.as_ref(), path_b.as_ref()), ("db-a", "team/db-b"));
        assert!(address.is_some(), "the bucket's address comes with it");
        let (other, ..) = open("s3://other/db");
        assert!(!Arc::ptr_eq(&a, &other), "another bucket, another store");
        let (f1, p1, _) = open("file:///tmp/x");
        let (f2, ..) = open("file:///var/y");
        assert!(Arc::ptr_eq(&f1, &f2));
        assert_eq!(p1.as_ref(), "tmp/x");
        let (m1, ..) = open("memory:///a");
        let (m2, ..) = open("memory:///a");
        assert!(!Arc::ptr_eq(&m1, &m2), "memory stores stay apart");
        assert_eq!(stores.len(), 3);
    }

    #[test]
    fn urls_open_their_stores() {
        let (_, path) = open_url("memory:///fleet/a").unwrap();
        assert_eq!(path.as_ref(), "fleet/a");
        let (_, path) = open_url("file:///tmp/x").unwrap();
        assert_eq!(path.as_ref(), "tmp/x");
    }

    /// The bucket (or container) of a root's address is the URL's, even
    /// with another one in the environment: a copy aimed by the address
    /// lands where the root's store writes.
    #[test]
    fn addresses_name_the_buckets_of_their_urls() {
        let bucket_of = |url: &str, options: &[(&str, &str)]| {
            let url = url::Url::parse(url).unwrap();
            let options = options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let (_, path, address) = open_with_options(&url, options).unwrap();
            (
                path.to_string(),
                format!("{:?}", address.expect("an address")),
            )
        };
        let (path, s3) = bucket_of(
            "s3://data/db/x",
            &[("AWS_BUCKET", "elsewhere"), ("AWS_REGION", "eu-west-1")],
        );
        assert_eq!(path, "db/x");
        assert!(s3.contains("bucket: \"data\""), "{s3}");
        let (_, gcs) = bucket_of(
            "gs://data/db",
            &[
                ("GOOGLE_BUCKET", "elsewhere"),
                (
                    "GOOGLE_SERVICE_ACCOUNT_KEY",
                    r#"{"disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}"#,
                ),
            ],
        );
        assert!(gcs.contains("bucket: \"data\""), "{gcs}");
        let (_, azure) = bucket_of(
            "az://data/db",
            &[
                ("AZURE_CONTAINER_NAME", "elsewhere"),
                ("AZURE_STORAGE_USE_EMULATOR", "true"),
            ],
        );
        assert!(azure.contains("container: \"data\""), "{azure}");
        let dotted = url::Url::parse("az://acct.blob.core.windows.net/db").unwrap();
        let emulator = vec![("AZURE_STORAGE_USE_EMULATOR".to_string(), "true".to_string())];
        assert!(
            open_with_options(&dotted, emulator.clone()).is_err(),
            "a dotted host is no container: object_store rejects the URL, as before"
        );
    }
}

/// A root inside a store: a database, a mirror destination, a backup.
/// Names under it are root-relative (`compacted/<ULID>.sst`).
#[derive(Clone)]
pub struct StoreRoot {
    pub url: String,
    pub store: Arc<dyn ObjectStore>,
    pub prefix: Path,
    /// For a root in an S3 or GCS bucket or an Azure container: its
    /// address, for server-side copies from other buckets of the same
    /// endpoint.
    pub address: Option<Arc<BucketAddress>>,
}

impl std::fmt::Debug for StoreRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StoreRoot").field(&self.url).finish()
    }
}

impl StoreRoot {
    /// Opens a canonical URL, with store options from the environment.
    pub fn open(canonical_url: &str) -> Result<StoreRoot, object_store::Error> {
        let (store, prefix, address) = open_url_with_address(canonical_url)?;
        Ok(StoreRoot {
            url: canonical_url.to_string(),
            store,
            prefix,
            address,
        })
    }

    /// The store path of a root-relative name.
    pub fn path(&self, relative: &str) -> Path {
        child_path(&self.prefix, relative)
    }

    /// A store path as a root-relative name.
    pub fn relative<'a>(&self, location: &'a Path) -> &'a str {
        relative_to(&self.prefix, location)
    }

    /// Whether both roots sit in the same bucket (or file system), so one
    /// store can copy between them server-side.
    pub fn shares_store_with(&self, other: &StoreRoot) -> bool {
        let origin = |u: &str| {
            url::Url::parse(u)
                .ok()
                .filter(|u| u.scheme() != "memory") // each open is a new store
                .map(|u| (u.scheme().to_string(), u.host_str().map(str::to_string)))
        };
        origin(&self.url).is_some() && origin(&self.url) == origin(&other.url)
    }
}
