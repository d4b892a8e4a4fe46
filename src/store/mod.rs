//! The store: object stores opened from URLs, and what sleet asks of them
//! beyond `object_store`.
//!
//! `open` turns canonical URLs into stores (and says what a store can
//! do); `check` proves a store's conditional writes (`probes` make the
//! requests, `judge` decides); `bucket_copy` makes the server-side copies
//! across buckets that `object_store` does not; `upload` and
//! `object_copy` stream objects between stores.
//!
//! May import: `model`.

pub mod bucket_copy;
pub mod check;
pub mod object_copy;
mod open;
pub mod upload;

pub use open::{
    OpenedUrl, SharedStores, StoreRoot, child_path, open_url, open_url_with_address, relative_to,
    store_id, updates_in_place,
};
