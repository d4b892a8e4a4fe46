//! How far a mirror destination trails its source, for `status --mirrors`.
//! Read-only at both ends.

use slatedb::seq_tracker::FindOption;

use super::MirrorError;
use super::io::{list_dir, read_latest};
use super::layout::{WAL_DIR, parse_wal_file};
use crate::fleet::database::DatabaseHandle;
use crate::model::response::MirrorStatus;
use crate::store::StoreRoot;

/// Fills the lag fields of `status` from the source and destination.
pub async fn probe(
    source: &DatabaseHandle,
    destination: &DatabaseHandle,
    status: &mut MirrorStatus,
) -> Result<(), MirrorError> {
    let head = read_latest(source)
        .await?
        .ok_or_else(|| MirrorError::NotADatabase {
            url: source.url().to_string(),
        })?;
    status.source_manifest_id = Some(head.id());
    let source_wal = highest_wal(&source.root()).await?;
    let dest_wal = highest_wal(&destination.root()).await?;
    status.wal_behind = source_wal.map(|s| s.saturating_sub(dest_wal.unwrap_or(0)));
    let Some(copy) = read_latest(destination).await? else {
        status.manifests_behind = Some(head.id());
        return Ok(());
    };
    status.dest_manifest_id = Some(copy.id());
    status.manifests_behind = Some(head.id().saturating_sub(copy.id()));
    let tracker = head.sequence_tracker();
    let at = |seq| tracker.find_ts(seq, FindOption::RoundDown);
    if let (Some(newest), Some(copied)) = (at(head.last_l0_seq()), at(copy.last_l0_seq())) {
        status.seconds_behind = Some((newest - copied).num_seconds().max(0) as u64);
    }
    Ok(())
}

async fn highest_wal(root: &StoreRoot) -> Result<Option<u64>, MirrorError> {
    Ok(list_dir(root, WAL_DIR)
        .await?
        .keys()
        .filter_map(|name| parse_wal_file(name.strip_prefix("wal/")?))
        .max())
}
