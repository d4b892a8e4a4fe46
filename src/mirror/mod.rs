//! Mirroring databases into other object-store roots: byte-for-byte
//! copies whose every committed manifest is a valid SlateDB database.
//!
//! The rooms: `pass` (one copy and commit), `points` (restore points),
//! `wal_run` (the WAL a restore point carries) and `wal_times` (when the
//! source wrote it), `verify`, `prune`, `restore`, `tail` and `lag`, `owner` (the
//! destination's owner record), `run` (a node's mirror task), `copier`
//! (the copiers behind the `Copier` trait), all reading and writing through
//! `io` and `layout`.
//!
//! May import: `observe`, `plugin`, `fleet`, `config`, `store`, `model`.
//! Not `services`: the two wings of the work layer stand apart.

pub mod copier;
pub mod io;
pub mod lag;
pub mod layout;
pub mod owner;
pub mod pass;
pub mod points;
pub mod proof;
pub mod prune;
pub mod restore;
pub mod run;
pub mod tail;
pub mod verify;
pub mod wal_run;
pub mod wal_times;

use crate::fleet::database::DatabaseError;
use crate::mirror::copier::CopyError;

/// Why a mirror pass, prune, restore or verify failed.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("{url} is not a SlateDB database (no manifest)")]
    NotADatabase { url: String },
    #[error("{url} cannot be mirrored: {reason}")]
    Unsupported { url: String, reason: &'static str },
    #[error(
        "destination {destination} has diverged from source {source_url}: its manifest \
         {destination_id} is not the source's (the source is at manifest {source_id}); \
         something else wrote it, such as a writer or another database mirrored to the \
         same destination"
    )]
    Diverged {
        destination: String,
        source_url: String,
        destination_id: u64,
        source_id: u64,
    },
    #[error("mirror pass for target {target} kept restarting: {reason}")]
    Stalled { target: String, reason: String },
    #[error("failed to {action} {location}: {message}")]
    Store {
        action: String,
        location: String,
        message: String,
    },
    #[error("{copier} failed to copy {failed} objects, first {first}")]
    CopyFailed {
        copier: String,
        failed: usize,
        first: String,
    },
    #[error(transparent)]
    Copy(CopyError),
    /// The host's check of a reported copy found it wrong; nothing was
    /// committed.
    #[error("{copier} reported {object} copied, but {mismatch}; nothing was committed")]
    Unverified {
        copier: String,
        object: String,
        mismatch: String,
    },
    #[error(transparent)]
    Database(#[from] DatabaseError),
    #[error(transparent)]
    Plugin(#[from] crate::plugin::PluginError),
    #[error("destination {url} is not empty; restore never deletes, pick a fresh root")]
    DestinationNotEmpty { url: String },
    #[error(
        "restore point {manifest_id} is broken: {problems} objects are missing or short, first \
         {first}; run `sleet mirror verify` on the backup, or pass --force to restore what is there"
    )]
    BrokenRestorePoint {
        manifest_id: u64,
        problems: usize,
        first: String,
    },
    #[error("no restore point {at}: {reason}")]
    NoRestorePoint { at: String, reason: String },
    #[error(
        "mirror destination {destination} is itself a registered database; its services would \
         fork the mirror's history"
    )]
    DestinationRegistered { destination: String },
    /// A hook failed the pass, or could not answer.
    #[error("{0}")]
    Hook(String),
    #[error(
        "mirror destination {destination} belongs to {owner} (its sleet-mirror-source.json \
         says so); {source_url} cannot mirror there: give each database its own destination \
         (a target's source_prefix, or a url per database)"
    )]
    DestinationOwned {
        destination: String,
        owner: String,
        source_url: String,
    },
    #[error(
        "mirror destination {destination} holds manifests but no sleet-mirror-source.json, and \
         cannot be proven to be {source_url}'s: {why}; mirror into a fresh destination, or, once you \
         have checked it is this source's, write sleet-mirror-source.json there (docs/mirroring.md)"
    )]
    DestinationUnproven {
        destination: String,
        source_url: String,
        why: String,
    },
    #[error("mirror destination {destination}: sleet-mirror-source.json is unreadable: {why}")]
    OwnerUnreadable { destination: String, why: String },
    #[error(
        "mirror destination {destination} is also where {others} mirror to; neither runs until \
         each database has its own destination"
    )]
    DestinationShared { destination: String, others: String },
    #[error("cancelled")]
    Cancelled,
}
