//! One look at a database: its epochs, its L0 backlog, and the newest
//! `.compactions` write. Reads only (a LIST and a GET of the manifest, a
//! LIST of `compactions/` and a GET of the newest version), so it is safe
//! beside any writer.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use slatedb::admin::Admin;

use crate::store::child_path;

/// What a database's manifest and `.compactions` say about its compactor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseState {
    pub writer_epoch: u64,
    pub compactor_epoch: u64,
    /// L0 SSTs over the root tree and every segment.
    pub l0_ssts: usize,
    /// The epoch of the newest `.compactions` version and when it was
    /// written (the store's clock).
    pub last_compactions_write: Option<(u64, DateTime<Utc>)>,
}

/// Why a look failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    SlateDb(#[from] slatedb::Error),
    #[error("failed to list compactions/: {0}")]
    Store(#[from] object_store::Error),
}

/// Reads the database's state, or `None` when it has no manifest yet.
pub async fn read_state(
    admin: &Admin,
    store: &Arc<dyn ObjectStore>,
    root: &Path,
) -> Result<Option<DatabaseState>, ProbeError> {
    // `.compactions` before the manifest, as SlateDB itself reads them: a
    // compactor that claims in between shows up in the manifest's epoch.
    let newest = newest_compactions(store, root).await?;
    let last_compactions_write = match newest {
        Some((id, written)) => admin
            .read_compactions(Some(id))
            .await?
            .map(|c| (c.compactor_epoch(), written)),
        None => None,
    };
    let Some(manifest) = admin.read_manifest(None).await? else {
        return Ok(None);
    };
    let l0_ssts = manifest.l0().len()
        + manifest
            .segments()
            .iter()
            .map(|s| s.l0().len())
            .sum::<usize>();
    Ok(Some(DatabaseState {
        writer_epoch: manifest.writer_epoch(),
        compactor_epoch: manifest.compactor_epoch(),
        l0_ssts,
        last_compactions_write,
    }))
}

/// The id and write time of the newest `compactions/<id>.compactions`.
async fn newest_compactions(
    store: &Arc<dyn ObjectStore>,
    root: &Path,
) -> Result<Option<(u64, DateTime<Utc>)>, object_store::Error> {
    let dir = child_path(root, "compactions");
    let listed: Vec<_> = store.list(Some(&dir)).try_collect().await?;
    Ok(listed
        .iter()
        .filter_map(|meta| {
            let id = meta
                .location
                .filename()?
                .strip_suffix(".compactions")?
                .parse::<u64>()
                .ok()?;
            Some((id, meta.last_modified))
        })
        .max_by_key(|(id, _)| *id))
}
