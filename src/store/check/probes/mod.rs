//! The requests a store check makes, each under the run's scratch prefix.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
    ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, PutResult, UpdateVersion,
};

use super::judge::{self, ClockSkew};
use super::{CheckOptions, Form, Outcome, Property, PropertyResult};

/// Every S3-compatible store and GCS give `LastModified` to the second.
mod race;
mod reads;

const LAST_MODIFIED_RESOLUTION: Duration = Duration::from_secs(1);

/// The first part of the multipart upload: the smallest part S3 takes.
const FIRST_PART: usize = 5 * 1024 * 1024;

/// A race round that proves nothing (a lost reply, an error) is run again
/// on a fresh key, at most this many times.
const ROUND_ATTEMPTS: usize = 3;

/// Writes timed for the clock, spread so that their truncated
/// `LastModified` values fall at different places in their seconds.
const CLOCK_SAMPLES: usize = 3;
const CLOCK_SAMPLE_GAP: Duration = Duration::from_millis(350);

pub(super) struct Probes {
    pub store: Arc<dyn ObjectStore>,
    pub scratch: Path,
    pub options: CheckOptions,
}

/// How one conditional PUT (or copy) ended.
enum Attempt<T = PutResult> {
    Won(T),
    Refused,
    Unsupported,
    Failed(String),
}

fn attempt<T>(result: object_store::Result<T>) -> Attempt<T> {
    use object_store::Error;
    match result {
        Ok(put) => Attempt::Won(put),
        Err(Error::AlreadyExists { .. } | Error::Precondition { .. }) => Attempt::Refused,
        Err(Error::NotImplemented { .. } | Error::NotSupported { .. }) => Attempt::Unsupported,
        Err(e) => Attempt::Failed(e.to_string()),
    }
}

/// A result that proves nothing either way: the store could not be
/// reached, or a request failed. Only a wrong answer fails a property;
/// an error never does (a node cut off mid-check must not brand a good
/// store unsafe for a day).
fn unproven(property: Property, why: impl Into<String>) -> PropertyResult {
    PropertyResult::new(property, Outcome::Inconclusive, why)
}

fn create() -> PutOptions {
    PutOptions::from(PutMode::Create)
}

fn update(put: &PutResult) -> PutOptions {
    PutOptions::from(PutMode::Update(UpdateVersion {
        e_tag: put.e_tag.clone(),
        version: put.version.clone(),
    }))
}

impl Probes {
    fn key(&self, name: &str) -> Path {
        self.scratch.clone().join(name)
    }

    /// Every property this form checks, and the clock skew.
    pub async fn all(&self) -> (Vec<PropertyResult>, Option<ClockSkew>) {
        let mut results = vec![
            self.race(Property::AtomicCreate).await,
            self.race(Property::AtomicUpdate).await,
            self.create_over_existing().await,
            self.update_of_missing().await,
        ];
        let (read, etags, samples) = self.read_after_write().await;
        results.push(read);
        results.push(etags);
        if self.options.form == Form::Full {
            results.push(self.list_after_write().await);
            results.extend(self.copies().await);
            results.push(self.multipart().await);
        } else {
            for property in [
                Property::ListAfterWrite,
                Property::Copy,
                Property::ConditionalCopy,
                Property::Multipart,
            ] {
                results.push(PropertyResult::new(
                    property,
                    Outcome::Skipped,
                    "not in a node's short check",
                ));
            }
        }
        let skew = judge::clock_skew(&samples, LAST_MODIFIED_RESOLUTION, self.options.skew_bound);
        results.push(judge::clock(skew.as_ref()));
        (results, skew)
    }

    async fn read(&self, key: &Path) -> object_store::Result<Bytes> {
        self.store.get(key).await?.bytes().await
    }

    /// Whether `key` holds `body`; a read that failed proves nothing, and
    /// is the error (for an unproven result).
    async fn holds(&self, key: &Path, body: &[u8]) -> Result<bool, String> {
        match self.read(key).await {
            Ok(read) => Ok(read[..] == *body),
            Err(e) => Err(format!("reading {key} back: {e}")),
        }
    }

    /// A create-only PUT over an existing key: refused, and the key keeps
    /// its body.
    async fn create_over_existing(&self) -> PropertyResult {
        let key = self.key("exists");
        let property = Property::CreateOverExistingRefused;
        if let Err(e) = self.store.put(&key, "first".into()).await {
            return unproven(property, format!("PUT {key}: {e}"));
        }
        let again = attempt(self.store.put_opts(&key, "second".into(), create()).await);
        let kept = match self.holds(&key, b"first").await {
            Ok(kept) => kept,
            Err(why) => return unproven(property, why),
        };
        match (again, kept) {
            (Attempt::Refused, true) => {
                PropertyResult::new(property, Outcome::Pass, "refused; the body is unchanged")
            }
            (Attempt::Won(_), _) | (Attempt::Refused, false) => PropertyResult::new(
                property,
                Outcome::Fail,
                "the store accepted If-None-Match: * over an existing object",
            ),
            (Attempt::Unsupported, _) => PropertyResult::new(
                property,
                Outcome::Fail,
                "the store does not offer create-only PUTs",
            ),
            (Attempt::Failed(e), _) => unproven(property, e),
        }
    }

    /// A compare-and-swap PUT of a missing key, with a plausible ETag:
    /// refused, and the key stays missing (MinIO once wrote it,
    /// minio/minio#21526). Also a PUT with a stale ETag of an existing
    /// key, which must be refused.
    async fn update_of_missing(&self) -> PropertyResult {
        let property = Property::UpdateOfMissingRefused;
        let existing = self.key("stale");
        let first = match self.store.put(&existing, "one".into()).await {
            Ok(first) => first,
            Err(e) => return unproven(property, format!("PUT {existing}: {e}")),
        };
        let second = match attempt(
            self.store
                .put_opts(&existing, "two".into(), update(&first))
                .await,
        ) {
            Attempt::Won(second) => second,
            Attempt::Unsupported => {
                return PropertyResult::new(
                    property,
                    Outcome::NotApplicable,
                    "the store does not update in place (If-Match)",
                );
            }
            // The store applied it, and the reply was lost: the client's
            // retry was refused by its own write.
            Attempt::Refused => match self.holds(&existing, b"two").await {
                Ok(true) => {
                    return unproven(
                        property,
                        "a compare-and-swap PUT was applied but reported refused (a lost reply?)",
                    );
                }
                Err(why) => return unproven(property, why),
                Ok(false) => {
                    return PropertyResult::new(
                        property,
                        Outcome::Fail,
                        format!(
                            "a compare-and-swap PUT with the ETag the store had just returned \
                             ({}) was refused",
                            first.e_tag.as_deref().unwrap_or("none")
                        ),
                    );
                }
            },
            Attempt::Failed(e) => return unproven(property, e),
        };
        let stale = attempt(
            self.store
                .put_opts(&existing, "three".into(), update(&first))
                .await,
        );
        if let Attempt::Failed(e) = stale {
            return unproven(property, e);
        }
        if !matches!(stale, Attempt::Refused) {
            return PropertyResult::new(
                property,
                Outcome::Fail,
                "a compare-and-swap PUT with a replaced ETag was not refused",
            );
        }
        let missing = self.key("missing");
        let blind = attempt(
            self.store
                .put_opts(&missing, "x".into(), update(&second))
                .await,
        );
        let written = match self.store.head(&missing).await {
            Ok(_) => true,
            Err(object_store::Error::NotFound { .. }) => false,
            Err(e) => return unproven(property, format!("HEAD {missing}: {e}")),
        };
        match (blind, written) {
            (Attempt::Refused, false) => PropertyResult::new(
                property,
                Outcome::Pass,
                "refused for a missing key and for a replaced ETag",
            ),
            (Attempt::Failed(e), false) if e.to_lowercase().contains("not found") => {
                PropertyResult::new(
                    property,
                    Outcome::Pass,
                    "refused (not found) for a missing key, and for a replaced ETag",
                )
            }
            (Attempt::Failed(e), false) => unproven(property, e),
            _ => PropertyResult::new(
                property,
                Outcome::Fail,
                "a compare-and-swap PUT of a missing key created it",
            ),
        }
    }

    /// Three objects listed at once after their PUTs, and one gone from
    /// the listing at once after its delete.
    async fn list_after_write(&self) -> PropertyResult {
        let property = Property::ListAfterWrite;
        let dir = self.scratch.clone().join("listed");
        let names = ["a", "b", "c"];
        for name in names {
            if let Err(e) = self.store.put(&dir.clone().join(name), name.into()).await {
                return unproven(property, format!("PUT: {e}"));
            }
        }
        let listed = |store: Arc<dyn ObjectStore>, dir: Path| async move {
            store
                .list(Some(&dir))
                .map_ok(|m| m.location.filename().unwrap_or_default().to_string())
                .try_collect::<Vec<String>>()
                .await
                .map(|mut names| {
                    names.sort();
                    names
                })
        };
        match listed(self.store.clone(), dir.clone()).await {
            Ok(seen) if seen == names => {}
            Ok(seen) => {
                return PropertyResult::new(
                    property,
                    Outcome::Fail,
                    format!("wrote {names:?}, listed {seen:?}"),
                );
            }
            Err(e) => return unproven(property, format!("LIST: {e}")),
        }
        if let Err(e) = self.store.delete(&dir.clone().join("b")).await {
            return unproven(property, format!("DELETE: {e}"));
        }
        match listed(self.store.clone(), dir).await {
            Ok(seen) if seen == ["a", "c"] => PropertyResult::new(
                property,
                Outcome::Pass,
                "three writes and a delete, each listed at once",
            ),
            Ok(seen) => PropertyResult::new(
                property,
                Outcome::Fail,
                format!("deleted \"b\", listed {seen:?}"),
            ),
            Err(e) => unproven(property, format!("LIST: {e}")),
        }
    }

    /// A server-side copy, then a copy that must not overwrite onto an
    /// existing key.
    async fn copies(&self) -> [PropertyResult; 2] {
        let (from, to, taken) = (
            self.key("copy-from"),
            self.key("copy-to"),
            self.key("copy-taken"),
        );
        let written = async {
            self.store.put(&from, "copied".into()).await?;
            self.store.put(&taken, "taken".into()).await
        };
        if let Err(e) = written.await {
            let why = format!("PUT: {e}");
            return [
                unproven(Property::Copy, why.clone()),
                unproven(Property::ConditionalCopy, why),
            ];
        }
        let copy = match self.store.copy(&from, &to).await {
            Err(
                e @ (object_store::Error::NotImplemented { .. }
                | object_store::Error::NotSupported { .. }),
            ) => PropertyResult::new(Property::Copy, Outcome::Fail, e.to_string()),
            Err(e) => unproven(Property::Copy, e.to_string()),
            Ok(()) => match self.holds(&to, b"copied").await {
                Ok(true) => {
                    PropertyResult::new(Property::Copy, Outcome::Pass, "copied within the store")
                }
                Err(why) => unproven(Property::Copy, why),
                Ok(false) => PropertyResult::new(
                    Property::Copy,
                    Outcome::Fail,
                    "the copy does not hold the source's body",
                ),
            },
        };
        let conditional = match attempt(self.store.copy_if_not_exists(&from, &taken).await) {
            Attempt::Unsupported => PropertyResult::new(
                Property::ConditionalCopy,
                Outcome::NotApplicable,
                "the client offers no copy-if-not-exists for this store",
            ),
            Attempt::Failed(e) => unproven(Property::ConditionalCopy, e),
            Attempt::Refused => match self.holds(&taken, b"taken").await {
                Ok(true) => {
                    PropertyResult::new(Property::ConditionalCopy, Outcome::Pass, "refused")
                }
                Err(why) => unproven(Property::ConditionalCopy, why),
                Ok(false) => PropertyResult::new(
                    Property::ConditionalCopy,
                    Outcome::Fail,
                    "refused, yet the existing object was overwritten",
                ),
            },
            Attempt::Won(_) => PropertyResult::new(
                Property::ConditionalCopy,
                Outcome::Fail,
                "a copy-if-not-exists overwrote an existing object",
            ),
        };
        [copy, conditional]
    }

    /// Two parts, the first of the smallest size S3 takes, read back
    /// across the boundary.
    async fn multipart(&self) -> PropertyResult {
        let property = Property::Multipart;
        let key = self.key("multipart");
        let first = Bytes::from(vec![b'a'; FIRST_PART]);
        let second = Bytes::from_static(b"the second part");
        let uploaded = async {
            let mut upload = self.store.put_multipart(&key).await?;
            upload.put_part(PutPayload::from(first.clone())).await?;
            upload.put_part(PutPayload::from(second.clone())).await?;
            upload.complete().await
        };
        match uploaded.await {
            Ok(_) => {}
            Err(
                e @ (object_store::Error::NotImplemented { .. }
                | object_store::Error::NotSupported { .. }),
            ) => return PropertyResult::new(property, Outcome::Fail, e.to_string()),
            Err(e) => return unproven(property, e.to_string()),
        }
        let total = (FIRST_PART + second.len()) as u64;
        let boundary = (FIRST_PART as u64 - 3)..(FIRST_PART as u64 + 3);
        match (
            self.store.head(&key).await,
            self.store.get_range(&key, boundary).await,
        ) {
            (Ok(head), Ok(range)) if head.size == total && &range[..] == b"aaathe" => {
                PropertyResult::new(
                    property,
                    Outcome::Pass,
                    format!("2 parts, {total} bytes, read back across the boundary"),
                )
            }
            (Ok(head), Ok(range)) => PropertyResult::new(
                property,
                Outcome::Fail,
                format!(
                    "uploaded {total} bytes, HEAD says {}, the boundary reads {:?}",
                    head.size,
                    String::from_utf8_lossy(&range)
                ),
            ),
            (Err(e), _) | (_, Err(e)) => unproven(property, format!("reading it back: {e}")),
        }
    }

    /// Deletes everything under the scratch prefix; what could not be
    /// deleted.
    pub async fn clean_up(&self) -> Vec<String> {
        let listed: Vec<_> = match self.store.list(Some(&self.scratch)).try_collect().await {
            Ok(listed) => listed,
            Err(e) => return vec![format!("{}/ (listing failed: {e})", self.scratch)],
        };
        let mut left = Vec::new();
        for meta in listed {
            match self.store.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => left.push(format!("{} ({e})", meta.location)),
            }
        }
        left
    }
}
