//! Test and benchmark seams: object-store wrappers that count requests and
//! inject faults.
//!
//! Not covered by semver; used by sleet's own tests and benchmarks to
//! check request-cost promises against a real store.
//!
//! May import: `store`, `plugin` and `commands` (the scaffold its plugin
//! builds start from).

use std::sync::Arc;

use object_store::{ObjectStore, Result};

mod counting;
mod faults;
mod plugins;

pub use counting::{ALL_OPS, CountingStore, Op};
pub use faults::{Chaos, Faults, FaultyStore};
pub use plugins::{build_example, build_plugins, build_project, toolchain};

/// A client for `bucket` of the local test S3 server at `endpoint` (the one
/// `scripts/with-servers` starts), with its fixed test credentials and no
/// process environment.
pub fn local_s3_bucket(endpoint: &str, bucket: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        local_s3_builder(endpoint, bucket)
            .build()
            .expect("an S3 client"),
    )
}

/// The address of `bucket` on the local test S3 server, as a node would
/// derive it from its environment (for server-side copies across buckets).
pub fn local_s3_address(
    endpoint: &str,
    bucket: &str,
) -> Option<crate::store::bucket_copy::S3Address> {
    crate::store::bucket_copy::S3Address::from_builder(&local_s3_builder(endpoint, bucket))
}

/// [`local_s3_address`] as a root's address.
pub fn local_s3_bucket_address(
    endpoint: &str,
    bucket: &str,
) -> Option<Arc<crate::store::bucket_copy::BucketAddress>> {
    local_s3_address(endpoint, bucket)
        .map(|a| Arc::new(crate::store::bucket_copy::BucketAddress::S3(a)))
}

fn local_s3_builder(endpoint: &str, bucket: &str) -> object_store::aws::AmazonS3Builder {
    object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_allow_http(true)
}

/// The usual application counter, in Rust: values and operands are u64,
/// little-endian, added with wrapping. Tests and benchmarks write and read
/// with it; the `counter-merge` plugin must compute exactly the same.
#[derive(Debug, Clone, Copy)]
pub struct NativeCounter;

impl NativeCounter {
    /// A counter's value (panics on bytes that are not 8 long).
    pub fn read(bytes: &[u8]) -> u64 {
        u64::from_le_bytes(bytes.try_into().expect("8-byte counters"))
    }
}

impl slatedb::MergeOperator for NativeCounter {
    fn merge(
        &self,
        _key: &bytes::Bytes,
        existing: Option<bytes::Bytes>,
        value: bytes::Bytes,
    ) -> Result<bytes::Bytes, slatedb::MergeOperatorError> {
        self.merge_batch(_key, existing, std::slice::from_ref(&value))
    }

    fn merge_batch(
        &self,
        _key: &bytes::Bytes,
        existing: Option<bytes::Bytes>,
        operands: &[bytes::Bytes],
    ) -> Result<bytes::Bytes, slatedb::MergeOperatorError> {
        let start = existing.map_or(0, |e| Self::read(&e));
        let total = operands
            .iter()
            .fold(start, |sum, o| sum.wrapping_add(Self::read(o)));
        Ok(bytes::Bytes::copy_from_slice(&total.to_le_bytes()))
    }
}
