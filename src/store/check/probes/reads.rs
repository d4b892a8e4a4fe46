//! Reads after writes: whether a write is seen at once, by GET and by
//! its ETag, and the clock samples taken on the way.

use bytes::Bytes;
use chrono::Utc;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutResult};

use super::{CLOCK_SAMPLE_GAP, CLOCK_SAMPLES, Probes, unproven};
use crate::store::check::judge::{self, ClockSample, SeenEtags};
use crate::store::check::{Outcome, Property, PropertyResult};

impl Probes {
    /// Writes read back at once, overwrites seen, and deletes seen; the
    /// ETags of one object by each request; and the clock samples.
    pub(super) async fn read_after_write(
        &self,
    ) -> (PropertyResult, PropertyResult, Vec<ClockSample>) {
        let key = self.key("read");
        let mut samples = Vec::new();
        let mut last_put = None;
        let mut failure = None;
        // Errors prove nothing either way; a wrong read does.
        let mut unreached = None;
        for sample in 0..CLOCK_SAMPLES {
            if sample > 0 {
                tokio::time::sleep(CLOCK_SAMPLE_GAP).await;
            }
            let body = Bytes::from(format!("version {sample}"));
            let before = Utc::now();
            let put = self.store.put(&key, body.clone().into()).await;
            let after = Utc::now();
            let (put, head) = match put {
                Ok(put) => (put, self.store.head(&key).await),
                Err(e) => {
                    unreached = Some(format!("PUT {key}: {e}"));
                    break;
                }
            };
            match (head, self.read(&key).await) {
                (Ok(head), Ok(read)) if read == body && head.size == body.len() as u64 => {
                    samples.push(ClockSample {
                        before,
                        after,
                        last_modified: head.last_modified,
                    });
                }
                (Ok(_), Ok(read)) => {
                    failure = Some(format!(
                        "wrote {:?}, read {:?}",
                        String::from_utf8_lossy(&body),
                        String::from_utf8_lossy(&read)
                    ));
                    break;
                }
                (Err(e), _) | (_, Err(e)) => {
                    unreached = Some(format!("read {key} after writing it: {e}"));
                    break;
                }
            }
            last_put = Some(put);
        }
        let etags = match (&failure, &unreached, last_put) {
            (None, None, Some(put)) => match self.seen_etags(&key, put).await {
                Ok(seen) => judge::etags(&seen),
                Err(e) => unproven(Property::Etag, e),
            },
            _ => PropertyResult::new(
                Property::Etag,
                Outcome::Inconclusive,
                "no object to compare",
            ),
        };
        if let Some(why) = unreached {
            let read = unproven(Property::ReadAfterWrite, why);
            return (read, etags, samples);
        }
        if failure.is_none() {
            if let Err(e) = self.store.delete(&key).await {
                let read = unproven(Property::ReadAfterWrite, format!("DELETE {key}: {e}"));
                return (read, etags, samples);
            }
            match self.store.head(&key).await {
                Ok(_) => failure = Some(format!("{key} is still there after a delete")),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    let read = unproven(
                        Property::ReadAfterWrite,
                        format!("HEAD {key} after deleting it: {e}"),
                    );
                    return (read, etags, samples);
                }
            }
        }
        let read = match failure {
            None => PropertyResult::new(
                Property::ReadAfterWrite,
                Outcome::Pass,
                format!("{CLOCK_SAMPLES} overwrites and a delete, each seen at once"),
            ),
            Some(why) => PropertyResult::new(Property::ReadAfterWrite, Outcome::Fail, why),
        };
        (read, etags, samples)
    }

    pub(super) async fn seen_etags(&self, key: &Path, put: PutResult) -> Result<SeenEtags, String> {
        let unreached = |e: object_store::Error| e.to_string();
        let head = self.store.head(key).await.map_err(unreached)?.e_tag;
        let get = self.store.get(key).await.map_err(unreached)?.meta.e_tag;
        let listed: Vec<_> = self
            .store
            .list(Some(&self.scratch))
            .try_collect()
            .await
            .map_err(unreached)?;
        let list = listed
            .into_iter()
            .find(|m| &m.location == key)
            .and_then(|m| m.e_tag);
        Ok(SeenEtags {
            put: put.e_tag,
            head,
            get,
            list,
        })
    }
}
