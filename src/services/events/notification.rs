//! What a queue message says, and which registered database it wakes:
//! pure functions over the message body, so duplicates, foreign buckets,
//! test events and junk are all decided here and cost nothing more.
//!
//! An S3 bucket notification is a JSON body with `Records`, each naming a
//! bucket and an object key (URL-encoded as in a form: `+` is a space).
//! `s3:TestEvent` (sent when a notification is configured) and anything
//! that does not parse name no object.

use std::collections::{BTreeSet, HashMap};

use percent_encoding::percent_decode_str;
use serde::Deserialize;

/// The most records one message is read for: S3 sends one per message.
const MAX_RECORDS: usize = 100;

/// The most check markers one batch of messages gets acknowledged (each a
/// PUT under the fleet root): a receive holds at most ten messages, and S3
/// sends one record a message, so genuine markers never come near it; a
/// forged message of a hundred markers costs no more than this.
pub const MAX_CHECKS: usize = 16;

#[derive(Deserialize)]
struct Body {
    #[serde(rename = "Records", default)]
    records: Vec<Record>,
}

#[derive(Deserialize)]
struct Record {
    #[serde(rename = "eventName", default)]
    event_name: String,
    s3: Option<S3Part>,
}

#[derive(Deserialize)]
struct S3Part {
    bucket: BucketPart,
    object: ObjectPart,
}

#[derive(Deserialize)]
struct BucketPart {
    name: String,
}

#[derive(Deserialize)]
struct ObjectPart {
    key: String,
}

/// Where a check's marker goes in a bucket.
pub const MARKER_DIR: &str = ".sleet-events-check";

/// The token of a check marker, if `object` is one.
pub fn check_token(object: &Created) -> Option<&str> {
    let name = object.key.strip_prefix(MARKER_DIR)?.strip_prefix('/')?;
    let token = name.strip_suffix(".manifest")?;
    let valid = !token.is_empty()
        && token.len() <= 64
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    valid.then_some(token)
}

/// One object a notification names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub bucket: String,
    pub key: String,
}

/// The objects created that a message body names; none for a test event,
/// a deletion, or a body that is not a bucket notification.
pub fn created_objects(body: &str) -> Vec<Created> {
    let Ok(body) = serde_json::from_str::<Body>(body) else {
        return Vec::new();
    };
    body.records
        .into_iter()
        .take(MAX_RECORDS)
        .filter(|r| r.event_name.starts_with("ObjectCreated:"))
        .filter_map(|r| r.s3)
        .filter_map(|s3| {
            let key = s3.object.key.replace('+', " ");
            let key = percent_decode_str(&key).decode_utf8().ok()?.into_owned();
            Some(Created {
                bucket: s3.bucket.name,
                key,
            })
        })
        .collect()
}

/// What a batch of messages asks of the node that received it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Routed {
    /// Registered databases with a new manifest.
    pub databases: BTreeSet<String>,
    /// Tokens of `sleet events check` markers (and canaries) in the
    /// buckets registered databases live in, each once, at most
    /// [`MAX_CHECKS`].
    pub checks: BTreeSet<String>,
}

/// The registered S3 databases by bucket and key prefix, to route an
/// object's event to the database it belongs to in one lookup.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DatabaseIndex {
    /// (bucket, prefix without slashes at either end) to database URL.
    by_place: HashMap<(String, String), String>,
    /// The buckets of `by_place`.
    buckets: BTreeSet<String>,
}

impl DatabaseIndex {
    /// The index of `urls` (canonical database URLs); those not on S3 are
    /// left out: no S3 notification names them.
    pub fn new<'a>(urls: impl IntoIterator<Item = &'a str>) -> DatabaseIndex {
        let by_place: HashMap<(String, String), String> = urls
            .into_iter()
            .filter_map(|url| Some((s3_place(url)?, url.to_string())))
            .collect();
        let buckets = by_place.keys().map(|(b, _)| b.clone()).collect();
        DatabaseIndex { by_place, buckets }
    }

    pub fn len(&self) -> usize {
        self.by_place.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_place.is_empty()
    }

    /// One database of each bucket (the first by URL), for at most
    /// `most` buckets.
    pub fn one_per_bucket(&self, most: usize) -> std::collections::BTreeMap<String, String> {
        let mut one = std::collections::BTreeMap::new();
        for ((bucket, _), url) in &self.by_place {
            let entry = one.entry(bucket.clone()).or_insert_with(|| url.clone());
            if url < entry {
                *entry = url.clone();
            }
        }
        one.into_iter().take(most).collect()
    }

    /// The buckets the databases live in.
    pub fn buckets(&self) -> &BTreeSet<String> {
        &self.buckets
    }

    /// The database `object` is a new manifest of, if it is one.
    pub fn database_of(&self, object: &Created) -> Option<&str> {
        let (dir, file) = object.key.rsplit_once('/')?;
        if !file.ends_with(".manifest") {
            return None;
        }
        let prefix = if dir == "manifest" {
            ""
        } else {
            dir.strip_suffix("/manifest")?
        };
        self.by_place
            .get(&(object.bucket.clone(), prefix.to_string()))
            .map(String::as_str)
    }

    /// What message `bodies` ask of a node: the databases to wake (each
    /// once) and the `sleet events check` markers to acknowledge. A
    /// marker in a bucket no registered database lives in is another
    /// fleet's (or forged), and gets nothing.
    pub fn route<'a>(&self, bodies: impl IntoIterator<Item = &'a str>) -> Routed {
        let mut routed = Routed::default();
        for object in bodies.into_iter().flat_map(created_objects) {
            if let Some(token) = check_token(&object) {
                if routed.checks.len() < MAX_CHECKS && self.buckets.contains(&object.bucket) {
                    routed.checks.insert(token.to_string());
                }
            } else if let Some(database) = self.database_of(&object) {
                routed.databases.insert(database.to_string());
            }
        }
        routed
    }
}

/// `(bucket, prefix)` of an `s3://` database URL.
fn s3_place(url: &str) -> Option<(String, String)> {
    let parsed = url::Url::parse(url).ok()?;
    if parsed.scheme() != "s3" {
        return None;
    }
    let bucket = parsed.host_str()?.to_string();
    let path = percent_decode_str(parsed.path()).decode_utf8().ok()?;
    Some((bucket, path.trim_matches('/').to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(bucket: &str, key: &str) -> String {
        serde_json::json!({"Records": [{
            "eventVersion": "2.1", "eventSource": "aws:s3",
            "eventName": "ObjectCreated:Put",
            "s3": {"bucket": {"name": bucket}, "object": {"key": key, "size": 1}}
        }]})
        .to_string()
    }

    #[test]
    fn a_new_manifest_wakes_its_database_and_nothing_else_does() {
        let index = DatabaseIndex::new(["s3://b/apps/one", "s3://b/two", "s3://c", "file:///x"]);
        assert_eq!(index.len(), 3);
        let woken = |body: &str| {
            index
                .route([body])
                .databases
                .into_iter()
                .collect::<Vec<_>>()
        };
        // Keys arrive URL-encoded, as S3 and the test server send them.
        assert_eq!(
            woken(&put(
                "b",
                "apps%2Fone%2Fmanifest%2F00000000000000000007.manifest"
            )),
            ["s3://b/apps/one"]
        );
        assert_eq!(
            woken(&put("b", "two/manifest/00000000000000000001.manifest")),
            ["s3://b/two"]
        );
        let check = put("c", ".sleet-events-check/tok-1.manifest");
        assert_eq!(
            index.route([check.as_str()]),
            Routed {
                databases: BTreeSet::new(),
                checks: BTreeSet::from(["tok-1".to_string()]),
            },
            "a check marker is acknowledged, not woken"
        );
        let elsewhere = put("other", ".sleet-events-check/tok-2.manifest");
        assert_eq!(
            index.route([elsewhere.as_str()]),
            Routed::default(),
            "a marker in a bucket of no registered database is not acknowledged"
        );
        let many: Vec<String> = (0..100)
            .map(|i| put("b", &format!(".sleet-events-check/tok-{}.manifest", i % 40)))
            .collect();
        assert_eq!(
            index.route(many.iter().map(String::as_str)).checks.len(),
            MAX_CHECKS,
            "markers are acknowledged once each, and a flood of them only up to a bound"
        );
        assert_eq!(
            woken(&put("c", "manifest/00000000000000000001.manifest")),
            ["s3://c"]
        );
        // Another database's path, another bucket, other objects, junk.
        for body in [
            put("b", "apps/manifest/00000000000000000001.manifest"),
            put("b", "apps/one/two/manifest/00000000000000000001.manifest"),
            put("other", "two/manifest/00000000000000000001.manifest"),
            put("b", "two/wal/00000000000000000001.sst"),
            put("b", "two/compactions/00000000000000000001.compactions"),
            r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"b"}"#.to_string(),
            "not json".to_string(),
            r#"{"Records":[{"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"two/manifest/1.manifest"}}}]}"#.to_string(),
        ] {
            assert!(woken(&body).is_empty(), "{body}");
        }
    }

    #[test]
    fn a_key_with_spaces_decodes_as_a_form() {
        let index = DatabaseIndex::new(["s3://b/my%20db"]);
        assert_eq!(
            index
                .route([put("b", "my+db/manifest/00000000000000000001.manifest").as_str()])
                .databases,
            BTreeSet::from(["s3://b/my%20db".to_string()])
        );
    }

    #[test]
    fn only_check_markers_carry_a_token() {
        let at = |key: &str| Created {
            bucket: "b".into(),
            key: key.into(),
        };
        assert_eq!(
            check_token(&at(".sleet-events-check/abc-1.manifest")),
            Some("abc-1")
        );
        for other in [
            "db/manifest/00000000000000000001.manifest",
            ".sleet-events-check/a/b.manifest",
            ".sleet-events-check/.manifest",
            ".sleet-events-check/x.sst",
        ] {
            assert_eq!(check_token(&at(other)), None, "{other}");
        }
    }
}
