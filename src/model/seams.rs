//! Seams: the risky moments of the real code, where the simulator may
//! hold a task still for a while (FoundationDB's BUGGIFY). A race a guard
//! is there for needs another node's work to land in a window that is
//! milliseconds wide in a plain run; held open at the seam, the window is
//! seconds wide in some seeds, and the guard's control is found often,
//! not by luck.
//!
//! Nothing holds unless the simulator installs a hook on its thread (it
//! runs a fleet on one thread): elsewhere a seam is one thread-local read
//! and no await.

use std::cell::RefCell;
use std::time::Duration;

/// A moment the simulator may stretch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Seam {
    /// A mirror pass pinned the source and has not read the pinned
    /// manifest yet.
    BetweenPinAndRead,
    /// A mirror pass copied its objects and has not committed them.
    AfterCopyBeforeCommit,
    /// Retention listed the destination and has not deleted yet.
    BetweenListAndDelete,
    /// A restore read its restore point and has not copied it yet.
    BetweenRestorePointAndCopy,
    /// A coordinator decided it may start and has not started.
    BeforeCoordinatorStart,
    /// A node computed what it owns and has not acted on it.
    BetweenOwnershipAndReconcile,
}

impl Seam {
    pub const ALL: [Seam; 6] = [
        Seam::BetweenPinAndRead,
        Seam::AfterCopyBeforeCommit,
        Seam::BetweenListAndDelete,
        Seam::BetweenRestorePointAndCopy,
        Seam::BeforeCoordinatorStart,
        Seam::BetweenOwnershipAndReconcile,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Seam::BetweenPinAndRead => "between-pin-and-read",
            Seam::AfterCopyBeforeCommit => "after-copy-before-commit",
            Seam::BetweenListAndDelete => "between-list-and-delete",
            Seam::BetweenRestorePointAndCopy => "between-restore-point-and-copy",
            Seam::BeforeCoordinatorStart => "before-coordinator-start",
            Seam::BetweenOwnershipAndReconcile => "between-ownership-and-reconcile",
        }
    }
}

/// Decides how long a task holds at a seam (zero: not at all).
pub type Hook = Box<dyn FnMut(Seam) -> Duration>;

thread_local! {
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// How long to hold at `seam`, as the installed hook decides.
fn hold_for(seam: Seam) -> Duration {
    HOOK.try_with(|cell| match cell.try_borrow_mut() {
        Ok(mut hook) => hook.as_mut().map(|hook| hook(seam)),
        Err(_) => None,
    })
    .ok()
    .flatten()
    .unwrap_or_default()
}

/// Holds the calling task at `seam` for as long as the simulator's hook
/// says (in virtual time); returns at once without one.
pub async fn at(seam: Seam) {
    let hold = hold_for(seam);
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
}

/// Installs `hook` on this thread until the guard is dropped.
pub fn install(hook: Hook) -> HookGuard {
    HOOK.with(|cell| *cell.borrow_mut() = Some(hook));
    HookGuard
}

/// Removes the hook when dropped.
#[derive(Debug)]
pub struct HookGuard;

impl Drop for HookGuard {
    fn drop(&mut self) {
        let _ = HOOK.try_with(|cell| *cell.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_seam_holds_only_with_a_hook() {
        let started = tokio::time::Instant::now();
        at(Seam::AfterCopyBeforeCommit).await;
        assert_eq!(started.elapsed(), Duration::ZERO);
        {
            let _hook = install(Box::new(|seam| match seam {
                Seam::AfterCopyBeforeCommit => Duration::from_secs(3),
                _ => Duration::ZERO,
            }));
            at(Seam::BetweenPinAndRead).await;
            assert_eq!(started.elapsed(), Duration::ZERO);
            at(Seam::AfterCopyBeforeCommit).await;
            assert_eq!(started.elapsed(), Duration::from_secs(3));
        }
        at(Seam::AfterCopyBeforeCommit).await;
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}
