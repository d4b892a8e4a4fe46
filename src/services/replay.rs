//! SlateDB's service builders given a handle's seed and clock when the run
//! must replay (see [`Replay`]).

use object_store::path::Path;
use slatedb::{CompactionWorkerBuilder, CompactorBuilder, GarbageCollectorBuilder};

use crate::fleet::database::{DatabaseHandle, Replay, derived_seed};

/// A SlateDB builder that takes a seed and a clock.
pub(super) trait Replayable: Sized {
    /// Which service: each draws from its own stream of the seed.
    const STREAM: u64;

    fn seed_and_clock(self, replay: &Replay, seed: u64) -> Self;

    /// This builder with `db`'s seed and clock, if it has them.
    fn replaying(self, db: &DatabaseHandle) -> Self {
        match db.replay() {
            Some(replay) => self.seed_and_clock(replay, derived_seed(replay.seed, Self::STREAM)),
            None => self,
        }
    }
}

macro_rules! replayable {
    ($builder:ty, $stream:expr) => {
        impl Replayable for $builder {
            const STREAM: u64 = $stream;

            fn seed_and_clock(self, replay: &Replay, seed: u64) -> Self {
                self.with_seed(seed).with_system_clock(replay.clock.clone())
            }
        }
    };
}

replayable!(GarbageCollectorBuilder<Path>, 1);
replayable!(CompactorBuilder<Path>, 2);
replayable!(CompactionWorkerBuilder<Path>, 3);
