//! Server-side copies on the GCS and Azure emulators `scripts/test`
//! starts: across two buckets of fake-gcs-server (behind its XML-API
//! front) with `rewriteTo`, and across two containers of Azurite with
//! `Copy Blob`. The bytes never pass through the node; into another cloud
//! they stream.

use std::sync::Arc;

use object_store::ObjectStoreExt;
use sleet::fleet::database::DatabaseHandle;
use sleet::store::StoreRoot;
use sleet::store::bucket_copy::CopyAcross;
use sleet::store::object_copy::copy_between;
use sleet::store::upload::StreamPolicy;
use sleet::testing::{CountingStore, Op};

use crate::common::*;
use crate::copiers::{OneTarget, builtin_pass};
use crate::db;

/// Across two containers of one Azure account, builtin copies with
/// `Copy Blob`: see [`server_side_between_buckets_and_streamed_elsewhere`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_copies_across_azure_containers_server_side() {
    let Some(_) = azure_endpoint() else { return };
    server_side_between_buckets_and_streamed_elsewhere("az").await;
}

/// Across two GCS buckets, builtin copies with `rewriteTo` (the database
/// written through the emulator's XML-API front, as object_store writes
/// to GCS): see [`server_side_between_buckets_and_streamed_elsewhere`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_copies_across_gcs_buckets_server_side() {
    let Some(_) = gcs_endpoint() else { return };
    server_side_between_buckets_and_streamed_elsewhere("gs").await;
}

/// A SlateDB database in bucket `sleet` of `scheme`'s emulator, mirrored
/// by a builtin pass into `sleet-mirror`: the node reads none of the data
/// objects, the copy verifies and a reader reads it back. Into S3
/// (another cloud) the same pass streams every object: the control that
/// shows the count sees a copy through the node.
async fn server_side_between_buckets_and_streamed_elsewhere(scheme: &str) {
    let prefix = unique_prefix(scheme);
    let source_url = format!("{scheme}://sleet/{prefix}/source");
    db::seed(&source_url, 3).await;
    let open = |url: &str| DatabaseHandle::open(url).expect("a root on the emulator");

    let copy = format!("{scheme}://sleet-mirror/{prefix}/server-side");
    let (outcome, data_reads) = builtin_pass(open(&source_url), open(&copy)).await;
    assert!(outcome.objects_copied >= 3, "{outcome:?}");
    assert_eq!(data_reads, 0, "no data object passed through the node");
    db::assert_reader_sees(&copy, 0..3).await;

    let Some(endpoint) = endpoint() else { return };
    let elsewhere = format!("s3://sleet-mirror/{prefix}/elsewhere");
    let destination = DatabaseHandle::from_parts(
        elsewhere.clone(),
        s3_bucket_store(&endpoint, "sleet-mirror"),
        object_store::path::Path::from(format!("{prefix}/elsewhere")),
    )
    .with_address(sleet::testing::local_s3_bucket_address(
        &endpoint,
        "sleet-mirror",
    ));
    let (outcome, data_reads) = builtin_pass(open(&source_url), destination).await;
    assert!(
        data_reads >= outcome.objects_copied,
        "into another cloud every object streams: {data_reads} reads for {outcome:?}"
    );
    db::assert_reader_sees(&elsewhere, 0..3).await;
}

/// The same through the real binary, configured from the environment as
/// an operator's node is (`AZURE_STORAGE_USE_EMULATOR`): `sleet mirror
/// sync` between two containers commits and verifies. A missing source
/// blob is "not found", not a refusal: the pass restarts instead of
/// streaming nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_sync_between_azure_containers_commits_and_verifies() {
    let Some(_) = azure_endpoint() else { return };
    let prefix = unique_prefix("azure-cli");
    let source = format!("az://sleet/{prefix}/source");
    let copy = format!("az://sleet-mirror/{prefix}/copy");
    let target = OneTarget::new(&source, &copy, "builtin").await;
    let synced = target.sync_and_verify(&[]);
    assert!(synced["bytes_copied"].as_u64().unwrap() > 0, "{synced}");
    db::assert_reader_sees(&copy, 0..3).await;

    let from = StoreRoot::open(&source).unwrap();
    let to = StoreRoot::open(&copy).unwrap();
    let (Some(src), Some(dst)) = (&from.address, &to.address) else {
        panic!("az:// roots have addresses");
    };
    assert!(dst.reaches(src));
    let missing = dst
        .copy_from(src, &from.path("compacted/none.sst"), &to.path("x.sst"), 1)
        .await;
    assert!(matches!(missing, Err(CopyAcross::NotFound)), "{missing:?}");
}

/// Uploads `body` as `name` in `bucket` of the GCS emulator with its JSON
/// API, past the XML-API front: the source of this test is written as
/// the emulator itself takes writes, not by the code under test.
async fn gcs_upload(endpoint: &str, bucket: &str, name: &str, body: Vec<u8>) {
    let name: String = url::form_urlencoded::byte_serialize(name.as_bytes()).collect();
    let url = format!("{endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}");
    let reply = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(url)
        .body(body)
        .send()
        .await
        .expect("the GCS emulator answers");
    assert!(reply.status().is_success(), "upload: {}", reply.status());
}

/// Across two GCS buckets, an object is copied with `rewriteTo`: the node
/// reads none of its bytes and the copy is the source byte for byte. A
/// missing source is "not found", a missing destination bucket a refusal.
/// Into a local directory (another store) the same object streams: the
/// count sees its one read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_cross_gcs_buckets_with_rewrite_and_stream_elsewhere() {
    let Some(gcs) = gcs_endpoint() else { return };
    let prefix = unique_prefix("gcs");
    let body: Vec<u8> = (0..(3u32 << 20) + 17)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let name = "compacted/01.sst";
    gcs_upload(&gcs, "sleet", &format!("{prefix}/{name}"), body.clone()).await;

    let opened = StoreRoot::open(&format!("gs://sleet/{prefix}")).unwrap();
    let counting = Arc::new(CountingStore::new(opened.store.clone()));
    let source = StoreRoot {
        store: counting.clone(),
        ..opened.clone()
    };
    let destination = StoreRoot::open(&format!("gs://sleet-mirror/{prefix}")).unwrap();
    let policy = StreamPolicy::default();
    let copied = copy_between(&source, name, &destination, name, policy)
        .await
        .expect("a server-side copy");
    assert_eq!(copied, body.len() as u64);
    assert_eq!(
        counting.count(Op::Get),
        0,
        "no byte passed through the node"
    );
    let landed = destination
        .store
        .get(&destination.path(name))
        .await
        .unwrap();
    assert!(landed.bytes().await.unwrap() == body, "the copy differs");

    let (Some(src), Some(dst)) = (&source.address, &destination.address) else {
        panic!("gs:// roots have addresses");
    };
    let missing = dst
        .copy_from(
            src,
            &source.path("compacted/none.sst"),
            &destination.path("x"),
            1,
        )
        .await;
    assert!(matches!(missing, Err(CopyAcross::NotFound)), "{missing:?}");
    let nowhere = StoreRoot::open(&format!("gs://no-such-bucket/{prefix}")).unwrap();
    let refused = nowhere
        .address
        .as_ref()
        .unwrap()
        .copy_from(src, &source.path(name), &nowhere.path(name), 1)
        .await;
    assert!(
        matches!(refused, Err(CopyAcross::Refused(_))),
        "{refused:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let local = StoreRoot::open(&format!("file://{}", dir.path().display())).unwrap();
    let streamed = copy_between(&source, name, &local, name, policy)
        .await
        .expect("a streamed copy");
    assert_eq!(streamed, body.len() as u64);
    assert_eq!(
        counting.count(Op::Get),
        1,
        "the stream read the object once"
    );
    let landed = std::fs::read(dir.path().join(name)).unwrap();
    assert!(landed == body, "the streamed copy differs");
}

/// The well-known key of Azurite's account `devstoreaccount1`, which
/// `object_store` also uses for the emulator.
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The address of `container` on Azurite reached through `proxy`,
/// configured as for a real account with its own endpoint.
fn azurite_via(proxy: &str, container: &str) -> sleet::store::bucket_copy::BucketAddress {
    use object_store::azure::MicrosoftAzureBuilder;
    let builder = MicrosoftAzureBuilder::new()
        .with_account("devstoreaccount1")
        .with_access_key(AZURITE_KEY)
        .with_endpoint(format!("{proxy}/devstoreaccount1"))
        .with_allow_http(true)
        .with_container_name(container);
    let store = Arc::new(builder.clone().build().expect("an Azure client"));
    let address =
        sleet::store::bucket_copy::AzureAddress::new(&builder, store).expect("an address");
    sleet::store::bucket_copy::BucketAddress::Azure(address)
}

/// Azure answers a `Copy Blob` it has not finished with "pending" (large
/// blobs, busy accounts); sleet then waits on the destination's
/// properties. Azurite always copies at once, so a proxy restates its
/// replies: with the copy and the next two looks at its state reported
/// pending, the copy completes after exactly three looks and is the
/// source byte for byte; with the properties saying failed, the copy is
/// refused (the caller streams).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_azure_copy_is_waited_on_until_it_ends() {
    let Some(azure) = azure_endpoint() else {
        return;
    };
    let prefix = unique_prefix("pending");
    let source = StoreRoot::open(&format!("az://sleet/{prefix}")).unwrap();
    let destination = StoreRoot::open(&format!("az://sleet-mirror/{prefix}")).unwrap();
    let body: Vec<u8> = (0..(1u32 << 20) + 5).map(|i| (i % 253) as u8).collect();
    let from = source.path("compacted/01.sst");
    source.store.put(&from, body.clone().into()).await.unwrap();

    let proxy = crate::proxy::FaultProxy::start(&azure, 15).await;
    proxy.faults.pending_copies(2);
    let (src, dst) = (
        azurite_via(&proxy.endpoint, "sleet"),
        azurite_via(&proxy.endpoint, "sleet-mirror"),
    );
    assert!(dst.reaches(&src));
    let to = destination.path("compacted/01.sst");
    dst.copy_from(&src, &from, &to, body.len() as u64)
        .await
        .expect("the pending copy completes");
    let requests = crate::proxy::FaultCounts::get(&proxy.faults.counts.requests);
    assert_eq!(requests, 4, "the copy, then three looks at its state");
    let landed = destination.store.get(&to).await.unwrap();
    assert!(landed.bytes().await.unwrap() == body, "the copy differs");

    proxy.faults.failed_copies(true);
    let failed = dst
        .copy_from(&src, &from, &destination.path("compacted/02.sst"), 1)
        .await;
    assert!(
        matches!(&failed, Err(CopyAcross::Refused(why)) if why.contains("failed")),
        "{failed:?}"
    );
}
