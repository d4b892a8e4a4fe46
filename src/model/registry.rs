//! Database URLs and registry file names: a frozen format.
//!
//! Every database a fleet manages has one registry file under `dbs/`, named
//! after the percent-encoded canonical database URL. The canonicalization and
//! the encoding are shared with sleet 0.1.0, so fleets written by either can
//! be read by the other; the golden tests below pin both.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use thiserror::Error;

/// URL schemes a fleet root or database may use (also listed in errors).
pub const SUPPORTED_SCHEMES: [&str; 12] = [
    "s3", "s3a", "gs", "az", "adl", "azure", "abfs", "abfss", "file", "memory", "http", "https",
];

/// The longest registry file name allowed, in bytes. Object-store keys cap
/// at 1024 bytes; this leaves room for the fleet-root prefix and `dbs/`.
pub const MAX_FILE_NAME: usize = 900;

/// The suffix of every registry file.
const REGISTRY_SUFFIX: &str = ".toml";

/// Bytes that registry file names keep literally: ASCII alphanumerics and
/// the RFC 3986 unreserved marks. Everything else (including `%` and `/`)
/// is percent-encoded, so a name is always a single path segment.
const ENCODE_SET: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UrlError {
    #[error("invalid URL \"{url}\": {reason}")]
    Invalid { url: String, reason: String },
    #[error("unsupported URL scheme \"{scheme}\" (expected one of {})", SUPPORTED_SCHEMES.join(", "))]
    UnsupportedScheme { scheme: String },
    #[error(
        "database URL too long: its registry file name is {len} bytes (max {MAX_FILE_NAME}; object-store keys cap at 1024)"
    )]
    TooLong { len: usize },
}

/// Canonicalizes a fleet-root or database URL.
///
/// The WHATWG parser lowercases the scheme and percent-encodes the path;
/// sleet also lowercases hosts of non-special schemes (`s3://Bucket`), and
/// strips every trailing `/` so `s3://b/db/` and `s3://b/db` are one
/// database. Path case is preserved. The result is idempotent.
pub fn canonicalize_url(input: &str) -> Result<String, UrlError> {
    let mut parsed = url::Url::parse(input).map_err(|e| UrlError::Invalid {
        url: input.to_string(),
        reason: e.to_string(),
    })?;
    if !SUPPORTED_SCHEMES.contains(&parsed.scheme()) {
        return Err(UrlError::UnsupportedScheme {
            scheme: parsed.scheme().to_string(),
        });
    }
    if let Some(host) = parsed.host_str()
        && host.bytes().any(|b| b.is_ascii_uppercase())
    {
        let lowered = host.to_ascii_lowercase();
        parsed
            .set_host(Some(&lowered))
            .map_err(|e| UrlError::Invalid {
                url: input.to_string(),
                reason: e.to_string(),
            })?;
    }
    Ok(parsed.as_str().trim_end_matches('/').to_string())
}

/// Canonicalizes a database URL and checks that its registry file name
/// fits under the object-store key limit.
pub fn canonicalize_database_url(input: &str) -> Result<String, UrlError> {
    let canonical = canonicalize_url(input)?;
    let len = file_name(&canonical).len();
    if len > MAX_FILE_NAME {
        return Err(UrlError::TooLong { len });
    }
    Ok(canonical)
}

/// The registry file name of a canonical database URL (no directory).
pub fn file_name(canonical_url: &str) -> String {
    format!("{}{REGISTRY_SUFFIX}", encoded_name(canonical_url))
}

/// A canonical database URL as one object-name segment: the registry file
/// name without its suffix, for other per-database objects under the root.
pub fn encoded_name(canonical_url: &str) -> String {
    utf8_percent_encode(canonical_url, ENCODE_SET).to_string()
}

/// Decodes a registry file name back into the URL it names, or `None` when
/// the name is not a registry file (wrong suffix or not UTF-8 once decoded).
pub fn parse_file_name(name: &str) -> Option<String> {
    let encoded = name.strip_suffix(REGISTRY_SUFFIX)?;
    percent_decode_str(encoded)
        .decode_utf8()
        .ok()
        .map(|decoded| decoded.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalization_folds_case_and_trailing_slashes() {
        assert_eq!(
            canonicalize_url("S3://Bucket/Path/db/").unwrap(),
            "s3://bucket/Path/db"
        );
        assert_eq!(canonicalize_url("s3://b/db///").unwrap(), "s3://b/db");
        assert_eq!(
            canonicalize_url("file:///var/data/db1").unwrap(),
            "file:///var/data/db1"
        );
        assert_eq!(
            canonicalize_url("memory:///fleet").unwrap(),
            "memory:///fleet"
        );
        assert_eq!(
            canonicalize_url("s3://bucket/tenants/acme db").unwrap(),
            "s3://bucket/tenants/acme%20db"
        );
        assert_eq!(
            canonicalize_url("s3://bucket/uniçode/päth").unwrap(),
            "s3://bucket/uni%C3%A7ode/p%C3%A4th"
        );
    }

    #[test]
    fn canonicalization_is_idempotent() {
        for url in [
            "S3://Bucket/Path/db/",
            "s3://bucket/tenants/acme db",
            "gs://analytics/events",
            "az://Container/x/",
            "https://Example.com/a/b/",
        ] {
            let once = canonicalize_url(url).unwrap();
            assert_eq!(canonicalize_url(&once).unwrap(), once, "{url}");
        }
    }

    #[test]
    fn bad_urls_are_rejected_with_the_reason() {
        assert_eq!(
            canonicalize_url("not a url").unwrap_err().to_string(),
            "invalid URL \"not a url\": relative URL without a base"
        );
        assert_eq!(
            canonicalize_url("ftp://host/db").unwrap_err().to_string(),
            "unsupported URL scheme \"ftp\" (expected one of s3, s3a, gs, az, adl, azure, abfs, abfss, file, memory, http, https)"
        );
    }

    #[test]
    fn file_names_encode_everything_but_unreserved_marks() {
        assert_eq!(file_name("s3://bucket/db"), "s3%3A%2F%2Fbucket%2Fdb.toml");
        let raw = "s3://bucket/tenants/acme db";
        assert_eq!(
            file_name(raw),
            "s3%3A%2F%2Fbucket%2Ftenants%2Facme%20db.toml"
        );
        assert_eq!(parse_file_name(&file_name(raw)).unwrap(), raw);
        // Canonical URLs carry %XX escapes, so `%` itself is encoded again.
        let canonical = canonicalize_url(raw).unwrap();
        assert_eq!(
            file_name(&canonical),
            "s3%3A%2F%2Fbucket%2Ftenants%2Facme%2520db.toml"
        );
        assert_eq!(
            file_name("file:///a-b.c_d~e"),
            "file%3A%2F%2F%2Fa-b.c_d~e.toml"
        );
    }

    #[test]
    fn non_registry_names_are_ignored() {
        assert_eq!(parse_file_name("README.md"), None);
        assert_eq!(parse_file_name("s3%FF.toml"), None);
    }

    #[test]
    fn oversized_database_urls_are_rejected() {
        let long = format!("s3://bucket/{}", "x".repeat(1000));
        assert!(matches!(
            canonicalize_database_url(&long),
            Err(UrlError::TooLong { .. })
        ));
        // Each µ becomes %C2%B5 in the URL, then %25C2%25B5 in the name.
        let wide = format!("s3://bucket/{}", "µ".repeat(400));
        assert!(matches!(
            canonicalize_database_url(&wide),
            Err(UrlError::TooLong { len }) if len > MAX_FILE_NAME
        ));
        assert!(
            canonicalize_url(&long).is_ok(),
            "only database URLs are capped"
        );
        let fits = format!("s3://bucket/{}", "x".repeat(800));
        assert!(canonicalize_database_url(&fits).is_ok());
    }
}
