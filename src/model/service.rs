//! The background services sleet runs for each database.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One kind of background work for a database.
///
/// The kebab-case names appear in config files, heartbeat bodies and the
/// placement hash, and the one-letter codes appear in heartbeat object
/// names: both are frozen.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    /// Garbage collection of obsolete manifests, WAL and compacted SSTs.
    Gc,
    /// The standalone compaction coordinator (SlateDB RFC-0025).
    CompactorCoordinator,
    /// Standalone compaction workers (SlateDB RFC-0025).
    CompactionWorkers,
    /// Byte-for-byte copies of the database to other object-store roots.
    Mirror,
}

impl Service {
    /// Every service, in the default order of a database's `services` list.
    pub const ALL: [Service; 4] = [
        Service::Gc,
        Service::CompactorCoordinator,
        Service::CompactionWorkers,
        Service::Mirror,
    ];

    /// The kebab-case name used in config, hashes and output.
    pub const fn as_str(self) -> &'static str {
        match self {
            Service::Gc => "gc",
            Service::CompactorCoordinator => "compactor-coordinator",
            Service::CompactionWorkers => "compaction-workers",
            Service::Mirror => "mirror",
        }
    }

    /// The letter that stands for this service in heartbeat object names.
    pub const fn letter(self) -> char {
        match self {
            Service::Gc => 'g',
            Service::CompactorCoordinator => 'c',
            Service::CompactionWorkers => 'w',
            Service::Mirror => 'm',
        }
    }

    /// The service a heartbeat letter stands for; unknown letters (from a
    /// newer sleet) are `None` so old nodes ignore services they lack.
    pub fn from_letter(letter: char) -> Option<Service> {
        Service::ALL.into_iter().find(|s| s.letter() == letter)
    }

    /// A one-line description, shown in `--help`.
    pub const fn description(self) -> &'static str {
        match self {
            Service::Gc => "Garbage collection",
            Service::CompactorCoordinator => "Standalone compaction coordinator (RFC-0025)",
            Service::CompactionWorkers => "Compaction workers (RFC-0025)",
            Service::Mirror => "Mirroring to per-database targets (RFC 0002)",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a name that is not a service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown service \"{0}\" (expected one of gc, compactor-coordinator, compaction-workers, mirror)"
)]
pub struct UnknownService(pub String);

impl FromStr for Service {
    type Err = UnknownService;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Service::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| UnknownService(name.to_string()))
    }
}

/// The first service that a list names twice, if any.
pub fn first_duplicate(services: &[Service]) -> Option<Service> {
    services
        .iter()
        .enumerate()
        .find(|(i, s)| services[..*i].contains(s))
        .map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_letters_are_frozen() {
        let frozen: Vec<_> = Service::ALL
            .iter()
            .map(|s| (s.as_str(), s.letter()))
            .collect();
        assert_eq!(
            frozen,
            [
                ("gc", 'g'),
                ("compactor-coordinator", 'c'),
                ("compaction-workers", 'w'),
                ("mirror", 'm')
            ]
        );
        for s in Service::ALL {
            assert_eq!(Service::from_letter(s.letter()), Some(s));
            assert_eq!(s.as_str().parse::<Service>(), Ok(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        assert_eq!(Service::from_letter('x'), None);
        assert!("gcc".parse::<Service>().is_err());
    }

    #[test]
    fn duplicates_are_found() {
        use Service::*;
        assert_eq!(first_duplicate(&[Gc, Mirror, Gc]), Some(Gc));
        assert_eq!(first_duplicate(&[Gc, Mirror]), None);
        assert_eq!(first_duplicate(&[]), None);
    }
}
