//! A copier that moves each object with the host's `copy-to`: the bytes
//! never enter the plugin, and the copy is server-side wherever both roots
//! share a store. The copier to start from (`sleet plugin new --kind
//! copier` writes it).
//!
//! Settings: none.

wit_bindgen::generate!({ world: "copier-plugin", path: "../../wit" });

use exports::sleet::plugin::copier::{CopyResult, Guest, Info};
use sleet::plugin::blob_store::Store;

struct CopyCopier;

impl Guest for CopyCopier {
    fn describe() -> Info {
        // max_batch 0: the host's default batch size.
        Info { name: "copy-copier".into(), version: "0.1.0".into(), max_batch: 0 }
    }

    fn configure(cfg: Vec<(String, String)>) -> Result<(), String> {
        match cfg.first() {
            None => Ok(()),
            Some((key, _)) => Err(format!("copy-copier takes no settings, got {key:?}")),
        }
    }

    fn copy(src: &Store, dst: &Store, paths: Vec<String>) -> Vec<CopyResult> {
        paths
            .into_iter()
            .map(|path| CopyResult { outcome: src.copy_to(&path, dst, &path), path })
            .collect()
    }
}

export!(CopyCopier);
