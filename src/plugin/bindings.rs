//! Host bindings generated from `wit/plugin.wit`, one module per world.
//! The hook world reuses the copier world's shared interfaces, so the
//! host implements `types` and `log` once.

pub mod copier_world {
    wasmtime::component::bindgen!({
        world: "copier-plugin",
        path: "wit",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "sleet:plugin/blob-store.store": crate::plugin::host::StoreHandle,
            "sleet:plugin/blob-store.reader": crate::plugin::host::ReaderHandle,
            "sleet:plugin/blob-store.writer": crate::plugin::host::WriterHandle,
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
