//! One-shot mirror commands (`sleet mirror sync|restore|verify`) and the
//! pieces the node's mirror tasks share with them.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::fleet::database::DatabaseHandle;
use crate::fleet::mirror_targets::{AppliedTarget, applied_targets, target_limits};
use crate::fleet::root::{ConfigPoller, FleetRoot, FleetView};
use crate::mirror::MirrorError;
use crate::mirror::copier::{CopierOptions, CopyProgress, for_target};
use crate::mirror::pass::{DeepCheck, MirrorPair};
use crate::mirror::restore::{RestorePoint, restore};
use crate::mirror::run::{PassGate, PassHooks, ended, skipped};
use crate::mirror::verify::{VerifyReport, verify_tracked};
use crate::model::registry::canonicalize_database_url;
use crate::model::response::{MirrorRestoreResponse, MirrorSyncResponse};
use crate::plugin::hook::{HookRunner, system_clock};
use crate::{Error, Service};

/// Builds the pair a target copies, refusing a destination that is itself
/// a registered database: its own services would write manifests there
/// and fork the mirror's history.
pub async fn mirror_pair(
    database: &str,
    target: &AppliedTarget<'_>,
    view: &FleetView,
    copiers: &CopierOptions,
    progress: Arc<CopyProgress>,
) -> Result<MirrorPair, MirrorError> {
    let registered = &view.databases;
    if registered.contains_key(&target.destination) {
        return Err(MirrorError::DestinationRegistered {
            destination: target.destination.clone(),
        });
    }
    let settings = target.settings;
    Ok(MirrorPair {
        target: target.name.to_string(),
        source: DatabaseHandle::open(database)?,
        destination: DatabaseHandle::open(&target.destination)?,
        copier: for_target(settings, &target_limits(&view.fleet, settings), copiers).await?,
        checkpoint_lifetime: settings.checkpoint_lifetime,
        progress,
        // An operator's one-shot pass always re-checks what is committed.
        deep_check: DeepCheck::always(),
        pin_source: true,
    })
}

/// Whether a one-shot pass asks the database's mirror hooks first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks {
    /// As a node would: a hook may defer or fail the pass, and is told
    /// how it went.
    Ask,
    /// The operator overrides them (`--no-hooks`).
    Bypass,
}

/// `sleet mirror sync`: one pass for one (database, target), whatever the
/// target's mode, then a prune when retention is set. With [`Hooks::Ask`]
/// the database's mirror hooks are asked first, as before a node's pass:
/// a deferral or a failure ends the command with the hook's reason.
pub async fn sync_once(
    root: &FleetRoot,
    database: &str,
    target_name: &str,
    copiers: &CopierOptions,
    hooks: Hooks,
    progress: Arc<CopyProgress>,
    cancel: &CancellationToken,
) -> Result<MirrorSyncResponse, Error> {
    let database = canonicalize_database_url(database)?;
    let view = ConfigPoller::new().poll(root).await;
    let file = view
        .databases
        .get(&database)
        .ok_or_else(|| Error::NotRegistered(database.clone()))?;
    let settings = view.fleet.resolve_database(file);
    let targets = applied_targets(&database, &settings);
    let target = targets
        .iter()
        .find(|t| t.name == target_name)
        .ok_or_else(|| Error::NoSuchTarget {
            target: target_name.to_string(),
            database: database.clone(),
            hint: if view.warnings.is_empty() {
                String::new()
            } else {
                format!(" (config problems: {})", view.warnings.join("; "))
            },
        })?;
    if let Some(users) =
        crate::fleet::mirror_targets::shared_destinations(&view).get(&target.destination)
    {
        let others: Vec<(String, String)> = users
            .iter()
            .filter(|(db, t)| !(*db == database && t == target.name))
            .cloned()
            .collect();
        return Err(crate::mirror::MirrorError::DestinationShared {
            destination: target.destination.clone(),
            others: crate::fleet::mirror_targets::describe_users(&others),
        }
        .into());
    }
    // The destination's store is proven (or its recorded check reused)
    // before the pass writes there, as a node's would be.
    let (store, base) =
        crate::store::open_url(&target.destination).map_err(|source| Error::Store {
            action: "open",
            location: target.destination.clone(),
            source,
        })?;
    crate::fleet::store_trust::require(
        root,
        &target.destination,
        store,
        &base,
        &view.fleet.stores.resolve(),
        crate::fleet::store_trust::skew_bound_for(&view),
    )
    .await?;
    let pair = mirror_pair(&database, target, &view, copiers, progress).await?;
    let hooks = PassHooks {
        runner: HookRunner {
            hooks: match hooks {
                Hooks::Ask => {
                    crate::services::hooks::specs(Service::Mirror, &settings, &view.fleet)
                }
                Hooks::Bypass => Vec::new(),
            },
            plugins: copiers.plugins.clone(),
            node_id: copiers.node_id.clone(),
            clock: system_clock(),
        },
        report_skip: Arc::new(|_| {}),
    };
    // As a node's pass, but the post-task calls finish before the
    // command exits.
    let context = match hooks.before(&pair).await? {
        PassGate::Go(context) => context,
        PassGate::Defer { reason, context } => {
            let told = skipped(reason.clone());
            hooks.runner.after_waiting(context, told).await;
            return Err(Error::PassDeferred(reason));
        }
    };
    let started = tokio::time::Instant::now();
    let pass = pair.sync_pass(cancel).await;
    if let Some(context) = context {
        let told = ended(&pass, started.elapsed());
        hooks.runner.after_waiting(context, told).await;
    }
    let pass = pass?;
    let pruned = match target.settings.retention_keep {
        Some(keep) => Some(
            pair.prune(keep, target.settings.min_age, chrono::Utc::now())
                .await?,
        ),
        None => None,
    };
    Ok(MirrorSyncResponse {
        database,
        target: target.name.to_string(),
        destination: target.destination.clone(),
        head: pass.head,
        committed: pass.committed,
        manifests_committed: pass.manifests_committed,
        objects_copied: pass.objects_copied,
        bytes_copied: pass.bytes_copied,
        pruned_manifests: pruned.map_or(0, |p| p.deleted_manifests),
        pruned_objects: pruned.map_or(0, |p| p.deleted_objects),
    })
}

/// `sleet mirror restore`: a restore point of `backup` into the empty `destination`.
pub async fn restore_urls(
    backup: &str,
    destination: &str,
    at: RestorePoint,
    force: bool,
    progress: Arc<CopyProgress>,
    cancel: &CancellationToken,
) -> Result<MirrorRestoreResponse, Error> {
    let source = DatabaseHandle::open(backup).map_err(MirrorError::from)?;
    let target = DatabaseHandle::open(destination).map_err(MirrorError::from)?;
    let outcome = restore(&source, &target, at, force, progress, cancel).await?;
    Ok(MirrorRestoreResponse {
        backup: backup.to_string(),
        destination: destination.to_string(),
        source: outcome.source,
        manifest_id: outcome.manifest_id,
        wal_end: outcome.wal_end,
        newest_write: outcome.newest_write,
        manifests_committed: outcome.manifests_committed,
        objects_copied: outcome.objects_copied,
        bytes_copied: outcome.bytes_copied,
    })
}

/// `sleet mirror verify`: is the destination at `url` restorable? The
/// manifests read are counted into `progress`.
pub async fn verify_url(url: &str, progress: Arc<CopyProgress>) -> Result<VerifyReport, Error> {
    let target = DatabaseHandle::open(url).map_err(MirrorError::from)?;
    Ok(verify_tracked(&target, &progress).await?)
}
