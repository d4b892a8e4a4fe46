//! A destination that is not this fleet's to write: some swarm seeds
//! start with `db000`'s mirror destination already claimed by a database
//! of another fleet (`s3://elsewhere/db000`, its owner record written
//! as a sleet of theirs would), the collision no config check of this
//! fleet can see. The owner record (`mirror::owner`) must keep every
//! pass and prune of this fleet out of it.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::check::Violation;
use super::world::{database_path, mirror_url};
use crate::mirror::owner::{DestinationOwner, OWNER_FILE};

/// The database whose destination another fleet holds.
pub(super) const FOREIGN_INDEX: usize = 0;
const FOREIGN_SOURCE: &str = "s3://elsewhere/db000";

/// This fleet's mirror wrote into a destination another source owns.
pub const DESTINATION_TAKEN_OVER: &str = "destination-taken-over";

fn destination() -> Path {
    database_path(&mirror_url(FOREIGN_INDEX))
}

/// Writes the other fleet's owner record at the destination.
pub(super) async fn claim_for_elsewhere(store: &dyn ObjectStore, now: DateTime<Utc>) {
    let owner = DestinationOwner {
        source: FOREIGN_SOURCE.to_string(),
        target: "dr".to_string(),
        claimed_at: now,
        sleet_version: "0.2.0".to_string(),
    };
    let body = serde_json::to_vec(&owner).expect("an owner record serializes");
    store
        .put(
            &Path::from(format!("{}/{OWNER_FILE}", destination())),
            PutPayload::from(body),
        )
        .await
        .expect("the checker's writes never fail");
}

/// The destination holds its owner record and nothing of this fleet's.
pub(super) async fn judge(store: &dyn ObjectStore) -> Vec<Violation> {
    let listed: Vec<Path> = match store
        .list(Some(&destination()))
        .try_collect::<Vec<_>>()
        .await
    {
        Ok(objects) => objects.into_iter().map(|o| o.location).collect(),
        Err(e) => {
            return vec![Violation {
                name: DESTINATION_TAKEN_OVER,
                detail: format!("cannot list {}: {e}", destination()),
            }];
        }
    };
    let written: Vec<&Path> = listed
        .iter()
        .filter(|p| p.filename() != Some(OWNER_FILE))
        .collect();
    match written.first() {
        None => Vec::new(),
        Some(first) => vec![Violation {
            name: DESTINATION_TAKEN_OVER,
            detail: format!(
                "{} belongs to {FOREIGN_SOURCE}, yet this fleet wrote {} objects into it, \
                 first {first}",
                mirror_url(FOREIGN_INDEX),
                written.len()
            ),
        }],
    }
}
