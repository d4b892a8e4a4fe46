//! How far a mirror destination trails its source, for `status --mirrors`.
//! Read-only at both ends.

use slatedb::seq_tracker::FindOption;

use super::MirrorError;
use super::io::{list_manifest_ids, list_wal_after, read_latest};
use super::points::newest_restore_point;
use super::wal_run::{latest_end, replay_of};
use super::wal_times::WalListing;
use crate::fleet::database::DatabaseHandle;
use crate::model::response::MirrorStatus;

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
    let newest_durable = list_wal_after(&source.root(), 0).await?.pop_last();
    let mut copied = WalListing::list(&destination.root()).await?;
    let copied_ids = copied.ids();
    let dest_wal = copied_ids.last().copied();
    status.wal_behind = newest_durable
        .as_ref()
        .map(|(s, _)| s.saturating_sub(dest_wal.unwrap_or(0)));
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
    // The recovery point: the newest restore point's WAL run against the
    // source's newest WAL object, both dated by the source's clock.
    let listed = list_manifest_ids(&destination.root()).await?;
    let Some(point) =
        newest_restore_point(destination, &listed, destination.now(), |_| true).await?
    else {
        return Ok(());
    };
    let end = latest_end(replay_of(&point), &copied_ids);
    let Some((newest_id, newest_meta)) = newest_durable else {
        status.recovery_point_seconds = Some(0.0);
        return Ok(());
    };
    if newest_id <= end {
        status.recovery_point_seconds = Some(0.0);
        return Ok(());
    }
    copied
        .date(&destination.root(), |span| {
            span.first <= end && end <= span.last
        })
        .await?;
    if let Some(restorable) = copied.times.get(&end) {
        let trail = newest_meta.last_modified - *restorable;
        status.recovery_point_seconds = Some(trail.num_milliseconds().max(0) as f64 / 1000.0);
    }
    Ok(())
}
