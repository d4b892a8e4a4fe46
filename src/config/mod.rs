//! Fleet policy: `sleet.toml` and the per-database `dbs/<db>.toml` files.
//!
//! Files hold *overrides*: every field is optional. A database's settings
//! are resolved field by field, last writer wins, from three layers:
//! built-in defaults, the `[database]` table of `sleet.toml`, then the
//! database's own registry file. The schema is a superset of sleet 0.1.0's,
//! so a 0.1.0 config parses unchanged; unknown keys are errors, so a typo
//! never silently falls back to a default.
//!
//! One module per layer: [`files`] holds the shapes the files parse into,
//! [`resolve`] layers them into settings with defaults applied, and
//! [`checks`] parses text and reports every problem at once.
//!
//! `sections` holds each section's shape and `layering` lays a section's
//! overrides over the defaults.
//!
//! May import: `model` and `store` (URL rules): plain data, never a layer
//! that uses it.

/// Copies every field of `$upper` that is set onto `$lower`.
macro_rules! overlay_fields {
    ($lower:expr, $upper:expr; $($field:ident),+ $(,)?) => {
        $( if $upper.$field.is_some() { $lower.$field = $upper.$field.clone(); } )+
    };
}

mod checks;
mod files;
mod hazards;
mod layering;
mod resolve;
mod sections;

pub use checks::*;
pub use files::*;
pub use hazards::*;
pub use resolve::*;
pub use sections::*;

#[cfg(test)]
mod tests;
