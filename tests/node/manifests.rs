//! Every manifest of a mirror copy, opened read-only where it stands.
//!
//! A continuous target commits a manifest every few hundred milliseconds,
//! too many to restore one by one into fresh roots. Its objects are
//! immutable (manifests are written create-only, SSTs and WAL objects
//! never change), so the suite keeps one in-memory snapshot of the copy,
//! fetching each object once, and opens each manifest on a view that holds
//! that manifest as the latest and only the WAL window a reader of it
//! replays: what a restore of that manifest would hold, without copying.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use slatedb::admin::AdminBuilder;
use slatedb::config::DbReaderOptions;
use slatedb::{DbReader, DbReaderMode};
use sleet::mirror::layout::{manifest_name, parse_manifest_file, wal_name};
use sleet::store::relative_to;

/// Where a view keeps its database.
const VIEW_ROOT: &str = "copy";

/// What a reader of one manifest saw.
pub struct ManifestRead {
    /// The manifest's `next_wal_sst_id`: every WAL below it is in the
    /// manifest's SSTs or in the window a reader replays.
    pub next_wal: u64,
    /// The manifest's replay window, and the WAL objects of it the copy
    /// lacks, for the failure message.
    pub window: std::ops::Range<u64>,
    pub lacking_wal: Vec<u64>,
    pub held: HashMap<Vec<u8>, Vec<u8>>,
}

/// The objects of one copy a reader needs, by name under the copy's root.
#[derive(Default)]
pub struct CopySnapshot {
    objects: BTreeMap<String, Bytes>,
}

impl CopySnapshot {
    /// Fetches what `url` holds that the snapshot lacks. Manifests are
    /// listed before SSTs and WAL objects: a pass commits a manifest only
    /// after copying its objects, so every manifest listed here finds its
    /// objects in the later listings (listed the other way round, a pass
    /// could copy an SST and commit its manifest between the two). An
    /// object pruned between the list and the read is skipped.
    pub async fn refresh(&mut self, url: &str) -> Result<(), String> {
        let (store, root) = crate::db::open_store(url);
        for dir in ["manifest", "compacted", "wal"] {
            let listed: Vec<_> = store
                .list(Some(&root.clone().join(dir)))
                .try_collect()
                .await
                .map_err(|e| format!("{url}: list {dir}/: {e}"))?;
            for meta in listed {
                let name = relative_to(&root, &meta.location).to_string();
                if self.objects.contains_key(&name) {
                    continue;
                }
                match store.get(&meta.location).await {
                    Ok(got) => {
                        let bytes = got
                            .bytes()
                            .await
                            .map_err(|e| format!("{url}: read {name}: {e}"))?;
                        self.objects.insert(name, bytes);
                    }
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(format!("{url}: read {name}: {e}")),
                }
            }
        }
        Ok(())
    }

    /// The manifest ids the copy holds.
    pub fn manifest_ids(&self) -> BTreeSet<u64> {
        self.objects
            .keys()
            .filter_map(|name| parse_manifest_file(name.strip_prefix("manifest/")?))
            .collect()
    }

    /// Every key and value a read-only reader of manifest `id` sees, from
    /// one full scan.
    pub async fn read_at(&self, id: u64) -> Result<ManifestRead, String> {
        let (view, window, lacking_wal) = self.view_of(id).await?;
        let reader = DbReader::open(
            Path::from(VIEW_ROOT),
            view,
            DbReaderMode::FollowLatest,
            DbReaderOptions::default(),
        )
        .await
        .map_err(|e| format!("manifest {id} does not open read-only: {e}"))?;
        let mut held = HashMap::new();
        let mut scan = reader
            .scan(..)
            .await
            .map_err(|e| format!("manifest {id}: scan: {e}"))?;
        while let Some(entry) = scan
            .next()
            .await
            .map_err(|e| format!("manifest {id}: scan: {e}"))?
        {
            held.insert(entry.key.to_vec(), entry.value.to_vec());
        }
        let _ = reader.close().await;
        Ok(ManifestRead {
            next_wal: window.end,
            window,
            lacking_wal,
            held,
        })
    }

    /// A store holding manifest `id` as the only manifest, every SST, and
    /// the WAL objects in the manifest's replay window; the window, and the
    /// WAL ids in it the copy lacks.
    async fn view_of(
        &self,
        id: u64,
    ) -> Result<(Arc<dyn ObjectStore>, std::ops::Range<u64>, Vec<u64>), String> {
        let view: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let manifest = manifest_name(id);
        for (name, bytes) in &self.objects {
            if name.starts_with("compacted/") || *name == manifest {
                put(&view, name, bytes).await;
            }
        }
        let read = AdminBuilder::new(Path::from(VIEW_ROOT), view.clone())
            .build()
            .read_manifest(Some(id))
            .await
            .map_err(|e| format!("manifest {id} does not parse: {e}"))?
            .ok_or_else(|| format!("manifest {id} is not in the snapshot"))?;
        let window = read.replay_after_wal_id() + 1..read.next_wal_sst_id();
        let mut lacking = Vec::new();
        for wal in window.clone() {
            let name = wal_name(wal);
            match self.objects.get(&name) {
                Some(bytes) => put(&view, &name, bytes).await,
                None => lacking.push(wal),
            }
        }
        Ok((view, window, lacking))
    }
}

async fn put(view: &Arc<dyn ObjectStore>, name: &str, bytes: &Bytes) {
    view.put(
        &Path::from(format!("{VIEW_ROOT}/{name}")),
        bytes.clone().into(),
    )
    .await
    .expect("an in-memory put");
}
