//! Every copier against real stores, through the real binary configured
//! from the environment: builtin file to S3 and S3 to S3 across two
//! buckets of the local S3 server; rclone (the real binary) file to file
//! and S3 to file.

use sleet::Fleet;

use crate::common::*;
use crate::db;

/// A source database written at `url`, registered in a fresh `file://`
/// root whose `sleet.toml` has one target `t`.
struct OneTarget {
    root: FileRoot,
    source: String,
    destination: String,
}

impl OneTarget {
    async fn new(source: &str, destination: &str, copier: &str) -> OneTarget {
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
    fn sync_and_verify(&self, env: &[(&str, &str)]) -> serde_json::Value {
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

    let s3_source = format!("s3://{BUCKET}/{prefix}/source");
    let other_bucket = format!("s3://sleet-mirror/{prefix}/copy");
    let second = OneTarget::new(&s3_source, &other_bucket, "builtin").await;
    second.sync_and_verify(&as_refs(&env));
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
    let on_disk: u64 = ["compacted", "wal"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(data.path().join("copy").join(dir)).unwrap())
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
