//! Every copier against real stores, through the real binary configured
//! from the environment: builtin file to S3 and S3 to S3 across two
//! buckets of the local S3 server; rclone (the real binary) file to file
//! and S3 to file.

use sleet::Fleet;

use crate::common::*;
use crate::db;

/// A source database written at `url`, registered in a fresh `file://`
/// root whose `sleet.toml` has one target `t`.
pub struct OneTarget {
    root: FileRoot,
    source: String,
    destination: String,
}

impl OneTarget {
    pub async fn new(source: &str, destination: &str, copier: &str) -> OneTarget {
        let root = FileRoot::new();
        root.write(
            "sleet.toml",
            &format!(
                "[database.mirror.targets.t]\nurl = \"{destination}\"\ncopier = \"{copier}\"\n"
            ),
        );
        db::seed(source, 3).await;
        Fleet::open(&root.url())
            .unwrap()
            .register(source)
            .await
            .unwrap();
        OneTarget {
            root,
            source: source.to_string(),
            destination: destination.to_string(),
        }
    }

    /// `sleet mirror sync` then `sleet mirror verify`, both as JSON.
    pub fn sync_and_verify(&self, env: &[(&str, &str)]) -> serde_json::Value {
        let root = self.root.url();
        let synced = json(&ok(sleet_env(
            &[
                "mirror",
                "sync",
                &root,
                &self.source,
                "t",
                "--format",
                "json",
            ],
            env,
        )));
        assert_eq!(synced["committed"], true, "{synced}");
        assert!(synced["objects_copied"].as_u64().unwrap() >= 3, "{synced}");
        let verified = json(&ok(sleet_env(
            &["mirror", "verify", &self.destination, "--format", "json"],
            env,
        )));
        assert_eq!(
            verified["problems"].as_array().unwrap().len(),
            0,
            "{verified}"
        );
        synced
    }
}

fn env_pairs(endpoint: &str) -> Vec<(&'static str, String)> {
    s3_env(endpoint)
}

fn as_refs<'a>(pairs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_copies_file_to_s3_and_s3_to_s3_across_buckets() {
    let Some(endpoint) = endpoint() else { return };
    let env = env_pairs(&endpoint);
    let prefix = unique_prefix("builtin");
    let data = tempfile::tempdir().unwrap();

    let file_source = format!("file://{}/source", data.path().display());
    let on_s3 = format!("s3://{BUCKET}/{prefix}/copy");
    let first = OneTarget::new(&file_source, &on_s3, "builtin").await;
    let synced = first.sync_and_verify(&as_refs(&env));
    assert!(synced["bytes_copied"].as_u64().unwrap() > 0, "{synced}");
    db::assert_reader_sees(&on_s3, 0..3).await;

    // Across buckets the binary, configured from the environment alone,
    // copies server-side: its requests (through a counting proxy) name
    // the source bucket in a copy source, one per data object.
    let s3_source = format!("s3://{BUCKET}/{prefix}/source");
    let other_bucket = format!("s3://sleet-mirror/{prefix}/copy");
    let second = OneTarget::new(&s3_source, &other_bucket, "builtin").await;
    let proxy = crate::proxy::FaultProxy::start(&endpoint, 14).await;
    let synced = second.sync_and_verify(&as_refs(&env_pairs(&proxy.endpoint)));
    let copies = crate::proxy::FaultCounts::get(&proxy.faults.counts.copy_requests);
    assert_eq!(
        copies,
        synced["objects_copied"].as_u64().unwrap(),
        "every object copied server-side: {synced}"
    );
    db::assert_reader_sees(&other_bucket, 0..3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rclone_copies_file_to_file_and_s3_to_file() {
    let data = tempfile::tempdir().unwrap();
    let source = format!("file://{}/source", data.path().display());
    let copy = format!("file://{}/copy", data.path().display());
    let local = OneTarget::new(&source, &copy, "rclone").await;
    let synced = local.sync_and_verify(&[]);
    // The bytes the destination holds, as the host verified them (rclone
    // itself reports none per object).
    // A directory whose objects no manifest of the closure needs is never
    // created: the WAL window is empty when the last memtable flush
    // covered every WAL SST (seen under load: window (16, 17), once in
    // about 50 runs beside four busy cores' worth of load).
    if !data.path().join("copy/wal").exists() {
        let (replay_after, next) = db::wal_window(&copy).await;
        eprintln!("no wal/ at the copy: WAL window ({replay_after}, {next})");
        assert!(
            replay_after + 1 >= next,
            "WAL SSTs {replay_after}..{next} are needed"
        );
    }
    let on_disk: u64 = ["compacted", "wal"]
        .iter()
        .filter_map(|dir| std::fs::read_dir(data.path().join("copy").join(dir)).ok())
        .flatten()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum();
    assert!(on_disk > 0);
    assert_eq!(synced["bytes_copied"], on_disk, "{synced}");
    db::assert_reader_sees(&copy, 0..3).await;

    let Some(endpoint) = endpoint() else { return };
    let env = env_pairs(&endpoint);
    let s3_source = format!("s3://{BUCKET}/{}/source", unique_prefix("rclone"));
    let s3_copy = format!("file://{}/from-s3", data.path().display());
    let remote = OneTarget::new(&s3_source, &s3_copy, "rclone").await;
    remote.sync_and_verify(&as_refs(&env));
    db::assert_reader_sees(&s3_copy, 0..3).await;
}

#[test]
fn a_missing_rclone_binary_is_a_clear_error() {
    let root = FileRoot::new();
    let data = tempfile::tempdir().unwrap();
    let source = format!("file://{}/source", data.path().display());
    let copy = format!("file://{}/copy", data.path().display());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        root.write(
            "sleet.toml",
            &format!("[database.mirror.targets.t]\nurl = \"{copy}\"\ncopier = \"rclone\"\n"),
        );
        db::seed(&source, 1).await;
        Fleet::open(&root.url())
            .unwrap()
            .register(&source)
            .await
            .unwrap();
    });
    fails_with(
        sleet(&[
            "mirror",
            "sync",
            &root.url(),
            &source,
            "t",
            "--rclone",
            "/nonexistent/rclone",
        ]),
        1,
        "rclone: failed to run \"/nonexistent/rclone\"",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_external_copier_backfills_what_replication_missed() {
    let data = tempfile::tempdir().unwrap();
    let source = format!("file://{}/source", data.path().display());
    let copy = format!("file://{}/copy", data.path().display());
    let external = OneTarget::new(&source, &copy, "external").await;
    // Nothing replicated the objects: the pass probes and backfills them all.
    let synced = external.sync_and_verify(&[]);
    assert!(synced["bytes_copied"].as_u64().unwrap() > 0, "{synced}");
    db::assert_reader_sees(&copy, 0..3).await;
}

/// One builtin pass from `source_url` (in `BUCKET`) into `sleet-mirror`,
/// the source reached through `via` and the destination through
/// `destination_via`; returns the outcome, how many data objects the
/// node read from the source (see [`builtin_pass`]), and the copy's URL.
async fn builtin_pass_across(
    via: &str,
    destination_via: &str,
    source_url: &str,
    prefix: &str,
    name: &str,
) -> (sleet::mirror::pass::PassOutcome, u64, String) {
    use object_store::path::Path;
    use sleet::fleet::database::DatabaseHandle;
    use sleet::testing::local_s3_bucket_address;

    let source = DatabaseHandle::from_parts(
        source_url.to_string(),
        s3_bucket_store(via, BUCKET),
        Path::from(format!("{prefix}/source")),
    )
    .with_address(local_s3_bucket_address(via, BUCKET));
    let destination_url = format!("s3://sleet-mirror/{prefix}/{name}");
    let destination = DatabaseHandle::from_parts(
        destination_url.clone(),
        s3_bucket_store(destination_via, "sleet-mirror"),
        Path::from(format!("{prefix}/{name}")),
    )
    .with_address(local_s3_bucket_address(destination_via, "sleet-mirror"));
    let (outcome, data_reads) = builtin_pass(source, destination).await;
    (outcome, data_reads, destination_url)
}

/// One builtin pass from `source` to `destination`, which must verify;
/// returns the outcome and how many data objects (`wal/`, `compacted/`)
/// the node read from the source.
pub async fn builtin_pass(
    source: sleet::fleet::database::DatabaseHandle,
    destination: sleet::fleet::database::DatabaseHandle,
) -> (sleet::mirror::pass::PassOutcome, u64) {
    use std::sync::Arc;

    use sleet::mirror::copier::builtin::BuiltinCopier;
    use sleet::mirror::pass::{DeepCheck, MirrorPair};
    use sleet::testing::CountingStore;

    let counting = Arc::new(CountingStore::new(source.store().clone()));
    let source = source.wrap_store(|_| counting.clone());
    // Named by the copy's last segment, so that passes from one source
    // into several copies keep apart.
    let target = destination
        .url()
        .rsplit('/')
        .next()
        .unwrap_or("t")
        .to_string();
    let pair = MirrorPair {
        target,
        source,
        destination: destination.clone(),
        copier: Arc::new(BuiltinCopier::new(8)),
        checkpoint_lifetime: std::time::Duration::from_secs(60),
        progress: sleet::mirror::copier::CopyProgress::new(),
        deep_check: DeepCheck::every(std::time::Duration::from_secs(3600)),
        pin_source: true,
    };
    let outcome = pair
        .sync_pass(&sleet::CancellationToken::new())
        .await
        .expect("the pass commits");
    let by_kind = counting.by_kind();
    let data_reads = by_kind.get("get compacted").copied().unwrap_or(0)
        + by_kind.get("get wal").copied().unwrap_or(0);
    let report = sleet::mirror::verify::verify(&destination)
        .await
        .expect("verify runs");
    assert!(
        report.problems.is_empty(),
        "{}: {:#?}",
        destination.url(),
        report.problems
    );
    (outcome, data_reads)
}

/// Across two buckets of one S3 endpoint, builtin copies with S3's
/// `CopyObject`: the node reads none of the data objects it copies, the
/// copy verifies and reads back. A store that refuses (a proxy answering
/// every server-side copy with 403, as for a source in another account)
/// gets the same objects streamed, and the copy verifies too; that run is
/// also the control: the same count sees every object the node streams.
/// A destination on a second server streams as well, and verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_copies_across_buckets_server_side_and_streams_when_refused() {
    let Some(endpoint) = endpoint() else { return };
    let prefix = unique_prefix("across");
    let source_url = format!("s3://{BUCKET}/{prefix}/source");
    db::seed(&source_url, 3).await;

    let (outcome, data_reads, copy) =
        builtin_pass_across(&endpoint, &endpoint, &source_url, &prefix, "server-side").await;
    assert!(outcome.objects_copied >= 3, "{outcome:?}");
    assert_eq!(data_reads, 0, "no data object passed through the node");
    db::assert_reader_sees(&copy, 0..3).await;

    let refusing = crate::proxy::FaultProxy::start(&endpoint, 11).await;
    refusing.faults.refuse_copies(true);
    let via = &refusing.endpoint;
    let (outcome, data_reads, copy) =
        builtin_pass_across(via, via, &source_url, &prefix, "refused").await;
    let refused = crate::proxy::FaultCounts::get(&refusing.faults.counts.refused_copies);
    assert!(refused >= 1, "a server-side copy was tried and refused");
    assert!(
        data_reads >= outcome.objects_copied,
        "refused copies stream: {data_reads} reads for {outcome:?}"
    );
    db::assert_reader_sees(&copy, 0..3).await;

    // A destination on another server: no copy request can name the
    // source there, so the objects stream without asking, and verify.
    let Some(second) = second_endpoint() else {
        return;
    };
    let (outcome, data_reads, copy) =
        builtin_pass_across(&endpoint, &second, &source_url, &prefix, "elsewhere").await;
    assert!(outcome.objects_copied >= 3, "{outcome:?}");
    assert!(
        data_reads >= outcome.objects_copied,
        "another endpoint's objects stream: {data_reads} reads for {outcome:?}"
    );
    let store = s3_bucket_store(&second, "sleet-mirror");
    let root = object_store::path::Path::from(format!("{prefix}/elsewhere"));
    db::assert_reader_sees_in(&copy, (store, root), 0..3).await;
}

/// A store that fails a server-side copy (503 `SlowDown`, as a busy S3
/// does) gets those objects streamed, and is asked again at the next pass:
/// the new objects go server-side. One that refuses (403) is not asked
/// again: its new objects stream without a copy request. The refusing
/// pair is also the control: the same count sees objects streamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_server_side_copy_is_asked_again_and_a_refused_one_is_not() {
    let Some(endpoint) = endpoint() else { return };
    let prefix = unique_prefix("busy");
    let source_url = format!("s3://{BUCKET}/{prefix}/source");
    db::seed(&source_url, 2).await;
    let proxy = crate::proxy::FaultProxy::start(&endpoint, 13).await;
    let via = &proxy.endpoint;
    for (round, (name, refuse)) in [("busy", false), ("refusing", true)]
        .into_iter()
        .enumerate()
    {
        proxy.faults.shed_copies(!refuse);
        proxy.faults.refuse_copies(refuse);
        let (first, reads, _) = builtin_pass_across(via, via, &source_url, &prefix, name).await;
        assert!(
            first.objects_copied >= 2 && reads >= first.objects_copied,
            "{name}: the first pass streams: {reads} reads for {first:?}"
        );
        proxy.faults.shed_copies(false);
        proxy.faults.refuse_copies(false);

        let writer = db::open_writer(&source_url).await;
        db::write_rounds(&writer, 2 + round..3 + round).await;
        writer.close().await.expect("close");
        let (second, reads, copy) = builtin_pass_across(via, via, &source_url, &prefix, name).await;
        assert!(second.objects_copied >= 1, "{name}: {second:?}");
        if refuse {
            assert!(
                reads >= second.objects_copied,
                "a refusing pair streams from then on: {reads} reads for {second:?}"
            );
        } else {
            assert_eq!(reads, 0, "a busy store is asked again: {second:?}");
        }
        db::assert_reader_sees(&copy, 0..3 + round).await;
    }
}

/// An object too large for one `CopyObject` (over 5 GiB) is copied across
/// buckets in parts with `UploadPartCopy`; here a 12 MiB object in 5 MiB
/// parts: the copy is the source byte for byte. A missing source is "not
/// found" (the pass restarts), and a server that refuses part copies gets
/// its upload aborted (the abort request is counted) and leaves no object
/// (the caller streams instead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_in_parts_across_buckets_is_the_source_byte_for_byte() {
    use object_store::ObjectStoreExt;
    use object_store::path::Path;
    use sleet::store::bucket_copy::CopyAcross;
    use sleet::testing::local_s3_address;

    let Some(endpoint) = endpoint() else { return };
    let prefix = unique_prefix("parts");
    let from = Path::from(format!("{prefix}/compacted/big.sst"));
    let body: Vec<u8> = (0..(12u32 << 20) + 123)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let source = s3_bucket_store(&endpoint, BUCKET);
    source.put(&from, body.clone().into()).await.unwrap();
    let part = 5 << 20;
    let size = body.len() as u64;
    let (src, dst) = (
        local_s3_address(&endpoint, BUCKET).unwrap(),
        local_s3_address(&endpoint, "sleet-mirror").unwrap(),
    );
    let to = Path::from(format!("{prefix}/compacted/copy.sst"));
    dst.copy_from_in_parts(&src, &from, &to, size, part)
        .await
        .expect("copies in parts");
    let mirror = s3_bucket_store(&endpoint, "sleet-mirror");
    let copied = mirror.get(&to).await.unwrap().bytes().await.unwrap();
    assert!(copied == body, "the copy differs from the source");

    let missing = Path::from(format!("{prefix}/compacted/missing.sst"));
    let gone = dst
        .copy_from_in_parts(&src, &missing, &to, size, part)
        .await;
    assert!(matches!(gone, Err(CopyAcross::NotFound)), "{gone:?}");

    let refusing = crate::proxy::FaultProxy::start(&endpoint, 12).await;
    refusing.faults.refuse_copies(true);
    let (src, dst) = (
        local_s3_address(&refusing.endpoint, BUCKET).unwrap(),
        local_s3_address(&refusing.endpoint, "sleet-mirror").unwrap(),
    );
    let refused_to = Path::from(format!("{prefix}/compacted/refused.sst"));
    let refused = dst
        .copy_from_in_parts(&src, &from, &refused_to, size, part)
        .await;
    assert!(
        matches!(refused, Err(CopyAcross::Refused(_))),
        "{refused:?}"
    );
    assert!(
        matches!(
            mirror.head(&refused_to).await,
            Err(object_store::Error::NotFound { .. })
        ),
        "a refused part copy leaves no object"
    );
    // Through the proxy: the upload's creation, the refused part copies,
    // and the abort (nothing else).
    let counts = &refusing.faults.counts;
    let refused_parts = crate::proxy::FaultCounts::get(&counts.refused_copies);
    assert!(refused_parts >= 1);
    assert_eq!(
        crate::proxy::FaultCounts::get(&counts.requests),
        refused_parts + 2,
        "the upload was created, its parts refused, and it was aborted"
    );
}
