//! Fleet state: what the fleet root holds and what every node computes
//! from it alike.
//!
//! `root` reads and writes the root's objects (the registry, heartbeats,
//! config polling); `database` is one database's store and SlateDB admin
//! handle; `store_trust` records store checks under the root and judges
//! the trust they earn; `mirror_targets` and `ownership` are pure
//! functions of the resolved config and the live nodes: which mirror
//! targets apply to a database, and which node owns each service.
//!
//! May import: `config`, `store`, `model`.

pub mod database;
pub mod mirror_targets;
pub mod ownership;
pub mod root;
pub mod store_trust;
