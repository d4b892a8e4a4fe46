//! Handing memory the node freed back to the system.
//!
//! glibc's allocator keeps what a burst of work freed in its arenas for
//! reuse, and a node's bursts are large: starting 30,000 tasks over 10,000
//! databases, or GC lingering on every database copied moments before,
//! frees most of what it allocated, but the node's resident memory stays
//! at the burst's peak. Measured on a plain `sleet run` over 10,000 fresh
//! copies (`cargo bench --bench fleet -- scale-cli`): 505 MiB resident
//! seven minutes after the linger ended, 362 MiB after one `malloc_trim`.
//! So the node trims once a minute, from its tick: the call walks the
//! arenas' free lists and returns whole free pages, a few milliseconds.
//! A no-op where the allocator is not glibc's.
//!
//! The `sleet` binary allocates with jemalloc (see `src/main.rs`), which
//! returns freed pages by itself and fragments less: there the trim only
//! reaches what C code allocates. It stays for programs that embed the
//! library on glibc's allocator (the benches, the tests).

use std::time::{Duration, Instant};

/// How often a node hands freed memory back.
pub const TRIM_EVERY: Duration = Duration::from_secs(60);

/// When the node last trimmed.
#[derive(Debug)]
pub struct Trimmer {
    last: Instant,
}

impl Trimmer {
    pub fn new() -> Trimmer {
        Trimmer {
            last: Instant::now(),
        }
    }

    /// Trims if [`TRIM_EVERY`] has passed since the last time.
    pub fn tick(&mut self) {
        if self.last.elapsed() >= TRIM_EVERY {
            release_freed();
            self.last = Instant::now();
        }
    }
}

/// Returns the allocator's free pages to the system.
fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and shrinks the allocator's own free
    // lists; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
