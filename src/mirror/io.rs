//! The store requests every mirror step makes of a root: manifests read
//! through SlateDB's admin, listings, probes and create-only writes, each
//! failure naming the object. A leaf of the mirror: pass, points, verify,
//! prune, restore, tail and lag import it, and it imports none of them.

use std::collections::BTreeMap;

use futures::StreamExt;
use object_store::{ObjectStoreExt, PutMode, PutOptions};
use slatedb::VersionedManifest;

use super::MirrorError;
use super::layout::{COMPACTED_DIR, WAL_DIR};
use crate::fleet::database::DatabaseHandle;
use crate::store::StoreRoot;

/// Concurrent HEADs when probing a destination.
pub const HEAD_PARALLELISM: usize = 16;

/// The database's latest manifest, within its handle's request bound.
pub(crate) async fn read_latest(
    db: &DatabaseHandle,
) -> Result<Option<VersionedManifest>, MirrorError> {
    Ok(db
        .bounded(
            "reading the latest manifest",
            db.admin().read_manifest(None),
        )
        .await?)
}

/// Manifest `id`, or `None` when it is gone.
pub(crate) async fn read_manifest(
    db: &DatabaseHandle,
    id: u64,
) -> Result<Option<VersionedManifest>, MirrorError> {
    Ok(db
        .bounded("reading a manifest", db.admin().read_manifest(Some(id)))
        .await?)
}

fn store_error(action: &str, root: &StoreRoot, name: &str, e: object_store::Error) -> MirrorError {
    MirrorError::Store {
        action: action.to_string(),
        location: format!("{}/{name}", root.url),
        message: e.to_string(),
    }
}

/// An object's bytes, or `None` when it does not exist.
pub(crate) async fn get_bytes(
    root: &StoreRoot,
    name: &str,
) -> Result<Option<bytes::Bytes>, MirrorError> {
    let fetched = async { root.store.get(&root.path(name)).await?.bytes().await };
    match fetched.await {
        Ok(body) => Ok(Some(body)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(store_error("read", root, name, e)),
    }
}

/// An object's bytes and metadata, or `None` when it does not exist.
pub(crate) async fn get_with_meta(
    root: &StoreRoot,
    name: &str,
) -> Result<Option<(bytes::Bytes, object_store::ObjectMeta)>, MirrorError> {
    let fetched = async {
        let got = root.store.get(&root.path(name)).await?;
        let meta = got.meta.clone();
        Ok::<_, object_store::Error>((got.bytes().await?, meta))
    };
    match fetched.await {
        Ok(found) => Ok(Some(found)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(store_error("read", root, name, e)),
    }
}

/// Writes `body` only if `name` does not exist; false when it does.
pub(crate) async fn put_create_new(
    root: &StoreRoot,
    name: &str,
    body: bytes::Bytes,
) -> Result<bool, MirrorError> {
    let options = PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    };
    match root
        .store
        .put_opts(&root.path(name), body.into(), options)
        .await
    {
        Ok(_) => Ok(true),
        Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(store_error("write", root, name, e)),
    }
}

/// What a create-only write of a manifest found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CreateOutcome {
    Written,
    /// The same bytes were there already (a racing twin, or an earlier
    /// pass that kept it as checkpoint support): nothing new committed.
    AlreadyThere,
    /// Other bytes under that name: the destination diverged.
    Differs,
}

/// Writes `body` only if `name` does not exist.
pub(crate) async fn put_create_or_match(
    root: &StoreRoot,
    name: &str,
    body: bytes::Bytes,
) -> Result<CreateOutcome, MirrorError> {
    if put_create_new(root, name, body.clone()).await? {
        return Ok(CreateOutcome::Written);
    }
    Ok(
        if get_bytes(root, name).await?.as_deref() == Some(&body[..]) {
            CreateOutcome::AlreadyThere
        } else {
            CreateOutcome::Differs
        },
    )
}

/// The objects under `dir/` of a root by root-relative name (empty when
/// the directory is missing).
pub(crate) async fn list_dir(
    root: &StoreRoot,
    dir: &str,
) -> Result<BTreeMap<String, object_store::ObjectMeta>, MirrorError> {
    let prefix = root.path(dir);
    let mut objects = BTreeMap::new();
    let mut listing = root.store.list(Some(&prefix));
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(|e| store_error("list", root, dir, e))?;
        objects.insert(root.relative(&meta.location).to_string(), meta);
    }
    Ok(objects)
}

/// The manifest ids under a root, by one listing.
pub(crate) async fn list_manifest_ids(
    root: &StoreRoot,
) -> Result<std::collections::BTreeSet<u64>, MirrorError> {
    Ok(list_dir(root, super::layout::MANIFEST_DIR)
        .await?
        .keys()
        .filter_map(|name| super::layout::parse_manifest_file(name.rsplit('/').next()?))
        .collect())
}

/// The root's WAL objects with ids above `after`, by id, from one listing
/// that starts there (a page per 1,000 objects, whatever lies below).
pub(crate) async fn list_wal_after(
    root: &StoreRoot,
    after: u64,
) -> Result<BTreeMap<u64, object_store::ObjectMeta>, MirrorError> {
    let prefix = root.path(WAL_DIR);
    let offset = root.path(&super::layout::wal_name(after));
    let mut objects = BTreeMap::new();
    let mut listing = root.store.list_with_offset(Some(&prefix), &offset);
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(|e| store_error("list", root, WAL_DIR, e))?;
        let relative = root.relative(&meta.location).to_string();
        let id = relative
            .strip_prefix("wal/")
            .and_then(super::layout::parse_wal_file);
        if let Some(id) = id.filter(|id| *id > after) {
            objects.insert(id, meta);
        }
    }
    Ok(objects)
}

/// Which of `names` the root lacks, by concurrent HEADs, in input order.
pub(crate) async fn missing_at(
    root: &StoreRoot,
    names: Vec<String>,
) -> Result<Vec<String>, MirrorError> {
    let probes = futures::stream::iter(names)
        .map(|name: String| async move {
            match root.store.head(&root.path(&name)).await {
                Ok(_) => Ok(None),
                Err(object_store::Error::NotFound { .. }) => Ok(Some(name)),
                Err(e) => Err(store_error("probe", root, &name, e)),
            }
        })
        .buffered(HEAD_PARALLELISM)
        .collect::<Vec<_>>()
        .await;
    probes.into_iter().filter_map(Result::transpose).collect()
}

/// Sizes of every data object (`compacted/`, `wal/`) under a root.
pub async fn data_sizes(root: &StoreRoot) -> Result<BTreeMap<String, u64>, MirrorError> {
    let mut sizes = list_sizes(root, COMPACTED_DIR).await?;
    sizes.extend(list_sizes(root, WAL_DIR).await?);
    Ok(sizes)
}

/// Names under `dir/` with their sizes.
pub(crate) async fn list_sizes(
    root: &StoreRoot,
    dir: &str,
) -> Result<BTreeMap<String, u64>, MirrorError> {
    Ok(list_dir(root, dir)
        .await?
        .into_iter()
        .map(|(name, meta)| (name, meta.size))
        .collect())
}
