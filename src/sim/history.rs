//! Every manifest version a run wrote, read back by SlateDB's own reader:
//! the epoch and collection invariants judge the run by them. The store
//! keeps each version's bytes as written (GC may have deleted the object
//! by the end), so they are decoded from a scratch store holding exactly
//! what was written.

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use slatedb::VersionedManifest;
use slatedb::admin::AdminBuilder;

use super::store::ManifestWrite;
use crate::mirror::layout::parse_manifest_file;

/// One manifest version as written, decoded.
pub struct Decoded<'a> {
    pub id: u64,
    pub write: &'a ManifestWrite,
    pub manifest: VersionedManifest,
}

/// Each database's history (its store path, and its versions decoded in
/// id order, or why they could not be), decoded once for every check.
pub type Histories<'a> = Vec<(String, Result<Vec<Decoded<'a>>, String>)>;

/// Every database's history in `writes`.
pub async fn histories(writes: &[ManifestWrite]) -> Histories<'_> {
    let mut all = Vec::new();
    for (database, writes) in by_database(writes) {
        let decoded = decoded(&database, &writes).await;
        all.push((database, decoded));
    }
    all
}

/// The writes grouped by the database (its store path) they belong to.
fn by_database(writes: &[ManifestWrite]) -> BTreeMap<String, Vec<&ManifestWrite>> {
    let mut grouped: BTreeMap<String, Vec<&ManifestWrite>> = BTreeMap::new();
    for write in writes {
        if let Some((database, _)) = write.location.as_ref().rsplit_once("/manifest/") {
            grouped.entry(database.to_string()).or_default().push(write);
        }
    }
    grouped
}

/// One database's versions, decoded, in id order.
async fn decoded<'a>(
    database: &str,
    writes: &[&'a ManifestWrite],
) -> Result<Vec<Decoded<'a>>, String> {
    let scratch: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let mut ids = Vec::new();
    for write in writes {
        let id = write
            .location
            .filename()
            .and_then(parse_manifest_file)
            .ok_or_else(|| format!("{} is not a manifest version", write.location))?;
        scratch
            .put(&write.location, PutPayload::from(write.bytes.clone()))
            .await
            .map_err(|e| e.to_string())?;
        ids.push((id, *write));
    }
    let admin = AdminBuilder::new(Path::from(database), scratch).build();
    let mut versions = Vec::new();
    for (id, write) in ids {
        let manifest = admin
            .read_manifest(Some(id))
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("manifest {id} is missing"))?;
        versions.push(Decoded {
            id,
            write,
            manifest,
        });
    }
    versions.sort_by_key(|v| v.id);
    Ok(versions)
}
