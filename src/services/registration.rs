//! What `sleet register` warns about a database it just registered.

use super::ServiceError;
use crate::fleet::database::{DatabaseError, DatabaseHandle};
use crate::services::outside_compactor::records::EpochRecords;

/// What `sleet register` tells an operator about a database it just
/// registered: above all a compactor running inside its writer, which the
/// fleet will not fence. A database that cannot be read yet gets no
/// warning (registering before the first writer opens is normal).
pub async fn registration_warnings(records: &EpochRecords, url: &str) -> Vec<String> {
    let db = match DatabaseHandle::open(url) {
        Ok(db) => db,
        Err(e) => return vec![format!("could not open {url} to check it: {e}")],
    };
    let defaults = crate::config::DatabaseConfig::default().resolve();
    match db.may_compact(records, &defaults.outside_compactor).await {
        Ok(_) | Err(ServiceError::Database(DatabaseError::NotADatabase { .. })) => Vec::new(),
        Err(e @ ServiceError::OutsideCompactor { .. }) => vec![e.to_string()],
        Err(e) => vec![format!(
            "could not check {url} for a compactor outside the fleet: {e}"
        )],
    }
}
