//! The host's own check of what a copier says it copied, before any
//! manifest that references it is committed.
//!
//! A copier's report is a claim, not proof: a plugin (or an external tool)
//! may write part of an object, another name, or nothing at all and still
//! report success. So for every copier whose report the host did not make
//! itself, the pass reads both sides' metadata and compares: the object
//! must exist at the destination under the name asked for, with the
//! source's size, and with the source's content hash wherever both stores
//! offer a comparable one (single-part S3 ETags are MD5s of the bytes).

use futures::StreamExt;
use object_store::{ObjectMeta, ObjectStoreExt};

use super::MirrorError;
use crate::store::StoreRoot;

/// How a copied object differs from its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// Nothing at the destination under that name.
    Absent,
    Size {
        source: u64,
        destination: u64,
    },
    /// Same size, different content hash.
    Contents {
        source: String,
        destination: String,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Absent => write!(f, "the destination has no such object"),
            Mismatch::Size {
                source,
                destination,
            } => write!(
                f,
                "the destination has {destination} bytes, the source {source}"
            ),
            Mismatch::Contents {
                source,
                destination,
            } => write!(
                f,
                "the contents differ (ETag {destination} at the destination, {source} at the source)"
            ),
        }
    }
}

/// Compares a copy with its source; `None` when they agree.
pub fn compare(source: &ObjectMeta, destination: Option<&ObjectMeta>) -> Option<Mismatch> {
    let Some(destination) = destination else {
        return Some(Mismatch::Absent);
    };
    if source.size != destination.size {
        return Some(Mismatch::Size {
            source: source.size,
            destination: destination.size,
        });
    }
    match (content_hash(source), content_hash(destination)) {
        (Some(s), Some(d)) if s != d => Some(Mismatch::Contents {
            source: s.to_string(),
            destination: d.to_string(),
        }),
        _ => None,
    }
}

/// An ETag that is a plain MD5 of the bytes (32 hex digits, as S3 gives
/// single-part objects); multipart and filesystem ETags are not.
fn content_hash(meta: &ObjectMeta) -> Option<&str> {
    let tag = meta.e_tag.as_deref()?.trim_matches('"');
    (tag.len() == 32 && tag.bytes().all(|b| b.is_ascii_hexdigit())).then_some(tag)
}

/// What checking a batch found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Every object is at the destination as at the source, `bytes` in all
    /// (the sizes the destination reports: what was really copied).
    Intact { bytes: u64 },
    /// The source lost an object meanwhile (GC): the pass restarts.
    VanishedAtSource(String),
    /// The first copy that differs from its source.
    Differs(String, Mismatch),
}

/// HEADs of both sides at once.
const CHECKS_IN_FLIGHT: usize = 16;

/// Checks every named object at the destination against the source.
pub async fn check_copies(
    source: &StoreRoot,
    destination: &StoreRoot,
    names: &[String],
) -> Result<Checked, MirrorError> {
    let heads: Vec<_> = names
        .iter()
        .map(|name| {
            let (source, destination, name) = (source.clone(), destination.clone(), name.clone());
            async move {
                let at_source = head(&source, &name).await?;
                let at_destination = head(&destination, &name).await?;
                Ok::<_, MirrorError>((name, at_source, at_destination))
            }
        })
        .collect();
    let mut checks = futures::stream::iter(heads).buffer_unordered(CHECKS_IN_FLIGHT);
    let mut vanished = None;
    let mut differs: Option<(String, Mismatch)> = None;
    let mut bytes = 0;
    while let Some(checked) = checks.next().await {
        let (name, at_source, at_destination) = checked?;
        let Some(at_source) = at_source else {
            vanished.get_or_insert(name);
            continue;
        };
        match compare(&at_source, at_destination.as_ref()) {
            Some(mismatch) => {
                differs.get_or_insert((name, mismatch));
            }
            None => bytes += at_source.size,
        }
    }
    Ok(match (differs, vanished) {
        (Some((name, mismatch)), _) => Checked::Differs(name, mismatch),
        (None, Some(name)) => Checked::VanishedAtSource(name),
        (None, None) => Checked::Intact { bytes },
    })
}

async fn head(root: &StoreRoot, name: &str) -> Result<Option<ObjectMeta>, MirrorError> {
    match root.store.head(&root.path(name)).await {
        Ok(meta) => Ok(Some(meta)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(MirrorError::Store {
            action: "read".into(),
            location: format!("{}/{name}", root.url),
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(size: u64, e_tag: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            location: object_store::path::Path::from("compacted/a.sst"),
            last_modified: chrono::Utc::now(),
            size,
            e_tag: e_tag.map(str::to_string),
            version: None,
        }
    }

    const MD5_A: &str = "\"0cc175b9c0f1b6a831c399e269772661\"";
    const MD5_B: &str = "\"92eb5ffee6ae2fec3ad71c777531578f\"";

    #[test]
    fn copies_are_compared_by_presence_size_and_comparable_hashes() {
        let source = meta(10, Some(MD5_A));
        assert_eq!(compare(&source, None), Some(Mismatch::Absent));
        assert_eq!(
            compare(&source, Some(&meta(5, Some(MD5_A)))),
            Some(Mismatch::Size {
                source: 10,
                destination: 5
            })
        );
        assert!(matches!(
            compare(&source, Some(&meta(10, Some(MD5_B)))),
            Some(Mismatch::Contents { .. })
        ));
        assert_eq!(compare(&source, Some(&meta(10, Some(MD5_A)))), None);
        // Hashes that are not plain MD5s say nothing: sizes decide.
        for other in [None, Some("\"abc-2\""), Some("1f2e-5a-a")] {
            assert_eq!(compare(&source, Some(&meta(10, other))), None, "{other:?}");
        }
        let multipart = meta(10, Some("\"0cc175b9c0f1b6a831c399e269772661-3\""));
        assert_eq!(compare(&multipart, Some(&meta(10, Some(MD5_B)))), None);
    }
}
