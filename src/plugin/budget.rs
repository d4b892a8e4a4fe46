//! What one plugin instance may hold: a byte budget over everything it
//! allocates (all its linear memories and table elements together), not a
//! count of memories. Toolchains shape components differently: a Rust
//! `wasm32-wasip2` or componentize-js component instantiates 3 core
//! modules, while componentize-py links CPython, libc and its runtime
//! dynamically as 14 (one shared memory, 2 tables). A count sized for the
//! first refused the second for no gain (sleet 0.2 allowed 4 instances);
//! summing bytes bounds every shape the same way.
//!
//! The counts are still bounded, generously, because each instance, table
//! and memory costs the host a little beyond its bytes.

use wasmtime::ResourceLimiter;

/// Core instances per store: componentize-py 0.25.1 makes 14,
/// componentize-js 0.23 and Rust's wasm32-wasip2 make 3.
pub const MAX_INSTANCES: usize = 64;
/// Linear memories per store (each toolchain above defines 1).
pub const MAX_MEMORIES: usize = 16;
/// Tables per store (each toolchain above defines 2).
pub const MAX_TABLES: usize = 64;
/// What one table element costs the host: wasmtime stores a pointer per
/// element, for funcref and externref tables alike.
pub const TABLE_ELEMENT_BYTES: u64 = 8;

/// How a trap for a spent budget starts, for whoever explains it.
pub const EXCEEDED: &str = "memory budget exceeded";

/// A [`ResourceLimiter`] that charges every memory and table of a store
/// against one byte budget, and remembers the most it ever held.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: u64,
    peak: u64,
}

impl Budget {
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit,
            used: 0,
            peak: 0,
        }
    }

    /// The most this store's memories and tables held at once, in bytes.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// Charges growth from `current` to `desired` units of `unit_bytes`,
    /// or refuses it with a trap that says what ran out. A growth past the
    /// memory's or table's own maximum is refused without a charge
    /// (wasmtime fails it anyway).
    fn grow(
        &mut self,
        what: &str,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
        unit_bytes: u64,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        let extra = (desired.saturating_sub(current) as u64).saturating_mul(unit_bytes);
        let wanted = self.used.saturating_add(extra);
        if wanted > self.limit {
            wasmtime::bail!(
                "{EXCEEDED}: growing a {what} would make the instance hold {} MiB of memories \
                 and tables, over its memory_mib of {} MiB",
                wanted.div_ceil(1 << 20),
                self.limit >> 20
            );
        }
        self.used = wanted;
        self.peak = self.peak.max(wanted);
        Ok(true)
    }
}

impl ResourceLimiter for Budget {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow("linear memory", current, desired, maximum, 1)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(error.context("growing a linear memory failed"))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow("table", current, desired, maximum, TABLE_ELEMENT_BYTES)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(error.context("growing a table failed"))
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut budget = Budget::new(10 * MIB as u64);
        assert!(budget.memory_growing(0, 4 * MIB, None).unwrap());
        assert!(budget.memory_growing(0, 4 * MIB, None).unwrap());
        // 8 MiB held: a third memory of 4 MiB would pass a per-memory cap.
        let err = budget.memory_growing(0, 4 * MIB, None).unwrap_err();
        assert!(format!("{err}").contains("memory budget exceeded"), "{err}");
        // A table of the 2 MiB left (262,144 elements) fits, one more does not.
        let elements = 2 * MIB / TABLE_ELEMENT_BYTES as usize;
        assert!(budget.table_growing(0, elements, None).unwrap());
        assert!(budget.table_growing(elements, elements + 1, None).is_err());
        assert_eq!(budget.peak(), 10 * MIB as u64);
    }

    #[test]
    fn growth_past_its_own_maximum_is_refused_without_a_charge() {
        let mut budget = Budget::new(MIB as u64);
        assert!(!budget.memory_growing(0, 2 * 65536, Some(65536)).unwrap());
        assert_eq!(budget.peak(), 0);
        assert!(budget.memory_growing(0, MIB, None).unwrap());
    }
}
