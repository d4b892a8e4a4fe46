//! The one rule for names that end up inside object names and config keys:
//! node ids, mirror target names, plugin and hook names. A leaf module, so
//! the frozen formats and the plugin host can share it without importing
//! each other.

/// The longest identifier, in characters.
pub const MAX_IDENTIFIER: usize = 128;

/// Whether `id` is 1-128 characters of `[A-Za-z0-9_-]`.
///
/// The charset keeps ids safe inside object names and free of the `.` that
/// separates a heartbeat's node id from its service letters.
pub fn is_valid_identifier(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_IDENTIFIER
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
