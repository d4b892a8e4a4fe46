//! A node's database opener whose every store request goes through one
//! counting store, for benchmarks that report a node's requests.

use std::sync::Arc;

use object_store::ObjectStore;
use sleet::daemon::DatabaseOpener;
use sleet::fleet::database::{DatabaseError, DatabaseHandle};

/// Opens every database URL on `store` (which must hold them all: one
/// bucket, or the local file system), at the URL's own path.
pub fn counted_opener(store: Arc<dyn ObjectStore>) -> DatabaseOpener {
    Arc::new(move |url: &str| {
        let (_, path) = sleet::store::open_url(url).map_err(|source| DatabaseError::Store {
            url: url.to_string(),
            source,
        })?;
        Ok(DatabaseHandle::from_parts(
            url.to_string(),
            store.clone(),
            path,
        ))
    })
}
