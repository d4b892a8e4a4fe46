//! Which source a mirror destination belongs to.
//!
//! The first pass into a destination writes `sleet-mirror-source.json` at
//! its root, create-only, naming the source database. Every later pass
//! (before it copies, repairs or commits anything), every prune and
//! `verify` read it: a destination that belongs to another source is
//! refused with both names, so two databases mapped to one destination
//! can never overwrite each other's objects. The create-only write is
//! what `sleet store check`'s `atomic-create` proves: of two first passes
//! racing, exactly one claims the destination.
//!
//! A destination written before the record existed (by sleet 0.1.0, or
//! an earlier 0.2) is claimed only when its latest manifest is, byte for
//! byte, the source's manifest of that id: proof that it is this
//! source's mirror.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::MirrorError;
use super::io::{get_bytes, put_create_new, read_latest};
use super::layout::manifest_name;
use crate::fleet::database::DatabaseHandle;
use crate::model::coverage::{self, Mark};
use crate::model::planted::{Planted, planted};

/// The record's name at the destination root.
pub const OWNER_FILE: &str = "sleet-mirror-source.json";

/// Records larger than this are not a sleet record.
const MAX_OWNER_BYTES: usize = 64 * 1024;

/// The body of `sleet-mirror-source.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestinationOwner {
    /// The canonical URL of the source database.
    pub source: String,
    /// The target whose first pass claimed the destination.
    pub target: String,
    pub claimed_at: DateTime<Utc>,
    pub sleet_version: String,
}

/// What a destination's record says about `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    Ours,
    Theirs(String),
    Unclaimed,
}

/// Judges a destination's recorded owner against `source`.
pub fn judge(recorded: Option<&DestinationOwner>, source: &str) -> Ownership {
    match recorded {
        None => Ownership::Unclaimed,
        Some(owner) if owner.source == source => Ownership::Ours,
        Some(owner) => Ownership::Theirs(owner.source.clone()),
    }
}

/// The destination's record, if it has one.
pub async fn read(destination: &DatabaseHandle) -> Result<Option<DestinationOwner>, MirrorError> {
    let root = destination.root();
    let Some(body) = get_bytes(&root, OWNER_FILE).await? else {
        return Ok(None);
    };
    let unreadable = |why: String| MirrorError::OwnerUnreadable {
        destination: destination.url().to_string(),
        why,
    };
    if body.len() > MAX_OWNER_BYTES {
        return Err(unreadable(format!("over {MAX_OWNER_BYTES} bytes")));
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| unreadable(e.to_string()))
}

/// Proves `destination` is `source`'s, claiming it when it is new:
/// `Ok` only when the record names `source` (now, or after this call
/// wrote it).
pub async fn claim(
    destination: &DatabaseHandle,
    source: &DatabaseHandle,
    target: &str,
) -> Result<(), MirrorError> {
    let owned_by_other = |owner: String| MirrorError::DestinationOwned {
        destination: destination.url().to_string(),
        owner,
        source_url: source.url().to_string(),
    };
    if planted(Planted::OwnerClaimSkipped) {
        return Ok(());
    }
    match judge(read(destination).await?.as_ref(), source.url()) {
        Ownership::Ours => return Ok(()),
        Ownership::Theirs(owner) => {
            coverage::hit(Mark::MirrorDestinationRefused);
            return Err(owned_by_other(owner));
        }
        Ownership::Unclaimed => {}
    }
    if let Some(latest) = read_latest(destination).await? {
        prove_unclaimed_history(destination, source, latest.id()).await?;
    }
    let record = DestinationOwner {
        source: source.url().to_string(),
        target: target.to_string(),
        claimed_at: destination.now(),
        sleet_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let body = serde_json::to_vec_pretty(&record).expect("owner records serialize");
    if put_create_new(&destination.root(), OWNER_FILE, body.into()).await? {
        coverage::hit(Mark::MirrorDestinationClaimed);
        tracing::info!(destination = %destination.url(), source = %source.url(), "claimed the mirror destination");
        return Ok(());
    }
    // Another pass claimed it first.
    match judge(read(destination).await?.as_ref(), source.url()) {
        Ownership::Ours => Ok(()),
        Ownership::Theirs(owner) => {
            coverage::hit(Mark::MirrorDestinationRefused);
            Err(owned_by_other(owner))
        }
        Ownership::Unclaimed => Err(MirrorError::OwnerUnreadable {
            destination: destination.url().to_string(),
            why: "it vanished right after a create-only write found it".into(),
        }),
    }
}

/// A destination with manifests and no record: its latest manifest must
/// be the source's of the same id, byte for byte.
async fn prove_unclaimed_history(
    destination: &DatabaseHandle,
    source: &DatabaseHandle,
    latest: u64,
) -> Result<(), MirrorError> {
    let name = manifest_name(latest);
    let theirs = get_bytes(&destination.root(), &name).await?;
    let ours = get_bytes(&source.root(), &name).await?;
    match (theirs, ours) {
        (Some(theirs), Some(ours)) if theirs == ours => Ok(()),
        (_, None) => Err(MirrorError::DestinationUnproven {
            destination: destination.url().to_string(),
            source_url: source.url().to_string(),
            why: format!("its latest manifest {latest} is no longer at the source to compare with"),
        }),
        _ => Err(MirrorError::DestinationUnproven {
            destination: destination.url().to_string(),
            source_url: source.url().to_string(),
            why: format!("its latest manifest {latest} is not the source's"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_one_source() {
        let owner = DestinationOwner {
            source: "s3://b/a".into(),
            target: "dr".into(),
            claimed_at: Utc::now(),
            sleet_version: "x".into(),
        };
        assert_eq!(judge(None, "s3://b/a"), Ownership::Unclaimed);
        assert_eq!(judge(Some(&owner), "s3://b/a"), Ownership::Ours);
        assert_eq!(
            judge(Some(&owner), "s3://b/b"),
            Ownership::Theirs("s3://b/a".into())
        );
    }
}
