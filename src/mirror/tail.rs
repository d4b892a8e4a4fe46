//! The WAL tail of a continuous mirror: between passes, copy each new WAL
//! object as soon as the source writer publishes it, so the destination
//! trails the source by seconds rather than by a manifest. A writer that
//! opens the destination later replays the tail like crash recovery.
//!
//! WAL ids are dense (fences are zero-byte WAL objects), so probing the
//! next id is one GET, and an idle tail costs exactly that.

use super::MirrorError;
use super::io::{get_bytes, list_dir};
use super::layout::{WAL_DIR, parse_wal_file, wal_name};
use crate::store::StoreRoot;
use object_store::ObjectStoreExt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// The next WAL id to look for at the source.
    next: u64,
}

impl Tail {
    /// Starts after the highest WAL id the destination already has, and
    /// never below `floor` (the last pass's `next_wal_sst_id`).
    pub async fn start(destination: &StoreRoot, floor: u64) -> Result<Tail, MirrorError> {
        let highest = list_dir(destination, WAL_DIR)
            .await?
            .keys()
            .filter_map(|name| parse_wal_file(name.strip_prefix("wal/")?))
            .max();
        Ok(Tail {
            next: highest.map_or(floor, |h| (h + 1).max(floor)),
        })
    }

    /// A pass committed up to `floor`: no need to look below it.
    pub fn advance_floor(&mut self, floor: u64) {
        self.next = self.next.max(floor);
    }

    pub fn next(&self) -> u64 {
        self.next
    }

    /// Copies every WAL object the source has from `next` on, in order.
    /// Returns how many it copied.
    pub async fn step(
        &mut self,
        source: &StoreRoot,
        destination: &StoreRoot,
    ) -> Result<u64, MirrorError> {
        let mut copied = 0;
        loop {
            let name = wal_name(self.next);
            let Some(body) = get_bytes(source, &name).await? else {
                return Ok(copied);
            };
            destination
                .store
                .put(&destination.path(&name), body.into())
                .await
                .map_err(|e| MirrorError::Store {
                    action: "write".into(),
                    location: format!("{}/{name}", destination.url),
                    message: e.to_string(),
                })?;
            self.next += 1;
            copied += 1;
        }
    }
}
