//! Mirroring databases into other object-store roots.

pub mod target;
