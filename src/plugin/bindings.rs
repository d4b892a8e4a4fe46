//! Host bindings generated from `wit/plugin.wit` and `wit/compaction`,
//! one module per world.
//! The hook world reuses the copier world's shared interfaces, so the
//! host implements `types` and `log` once.

pub mod copier_world {
    wasmtime::component::bindgen!({
        world: "copier-plugin",
        path: "wit",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "sleet:plugin/blob-store.store": crate::plugin::handles::StoreHandle,
            "sleet:plugin/blob-store.reader": crate::plugin::handles::ReaderHandle,
            "sleet:plugin/blob-store.writer": crate::plugin::handles::WriterHandle,
        },
    });
}

pub mod hook_world {
    wasmtime::component::bindgen!({
        world: "hook-plugin",
        path: "wit",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "sleet:plugin/types": super::copier_world::sleet::plugin::types,
            "sleet:plugin/log": super::copier_world::sleet::plugin::log,
        },
    });
}

/// The compaction worlds (`wit/compaction`): no sleet imports, and sync
/// exports, because SlateDB calls a merge operator from synchronous code
/// and a filter once per entry, where a fiber per call would cost more
/// than the work.
pub mod merge_world {
    wasmtime::component::bindgen!({
        world: "merge-operator-plugin",
        path: "wit/compaction",
    });
}

pub mod filter_world {
    wasmtime::component::bindgen!({
        world: "compaction-filter-plugin",
        path: "wit/compaction",
    });
}
