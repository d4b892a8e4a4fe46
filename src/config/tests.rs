//! Config parsing, layering and checks.

use std::fmt;
use std::time::Duration;

use super::checks::line_and_column;
use super::*;
use crate::model::service::Service;

fn problems(result: Result<impl fmt::Debug, ConfigError>) -> Vec<String> {
    match result {
        Err(ConfigError::Invalid(p)) => p,
        other => panic!("expected validation problems, got {other:?}"),
    }
}

#[test]
fn empty_config_resolves_to_builtin_defaults() {
    let fleet = parse_fleet_config("").unwrap();
    let node = fleet.node.resolve();
    assert_eq!(node.heartbeat_interval, Duration::from_secs(10));
    assert_eq!(node.heartbeat_timeout, Duration::from_secs(30));
    assert_eq!(node.config_poll, Duration::from_secs(60));
    let db = fleet.resolve_database(&DatabaseConfig::default());
    assert_eq!(db.services, Service::ALL);
    assert!(db.mirror_targets.is_empty());
    assert_eq!(
        db.gc.manifest,
        GcDirectory {
            enabled: true,
            interval: Duration::from_secs(60),
            min_age: Duration::from_secs(300),
            dry_run: false
        }
    );
    assert!(db.gc.wal_fence.dry_run, "fences are dry-run by default");
    assert_eq!(
        db.gc.detach,
        GcDetach {
            enabled: true,
            interval: Duration::from_secs(60)
        }
    );
    assert_eq!(db.coordinator.poll_interval, Duration::from_secs(5));
    assert_eq!(
        db.coordinator.worker_heartbeat_timeout,
        Duration::from_secs(30)
    );
    assert_eq!(db.coordinator.max_compaction_sources, 8);
    assert_eq!(db.workers.count, 1);
    assert_eq!(db.workers.max_sst_size, 268_435_456);
    assert_eq!(db.workers.heartbeat_interval, Duration::from_secs(10));
    assert_eq!(db.workers.compression_codec, None);
}

#[test]
fn layers_apply_field_by_field_in_order() {
    let fleet = parse_fleet_config(
        r#"
            [database]
            services = ["gc", "compaction-workers"]
            [database.compaction-workers]
            count = 2
            max_fetch_tasks = 7
            [database.gc.compacted]
            min_age = "10m"
            "#,
    )
    .unwrap();
    let file = parse_database_config(
        &fleet,
        r#"
            [compaction-workers]
            count = 4
            [gc.compacted]
            interval = "2m"
            "#,
    )
    .unwrap();
    let db = fleet.resolve_database(&file);
    assert_eq!(db.workers.count, 4, "the file wins");
    assert_eq!(
        db.workers.max_fetch_tasks, 7,
        "the fleet layer falls through"
    );
    assert_eq!(
        db.workers.compactions_poll_interval,
        Duration::from_secs(5),
        "built-in"
    );
    assert_eq!(db.services, [Service::Gc, Service::CompactionWorkers]);
    assert_eq!(db.gc.compacted.min_age, Duration::from_secs(600));
    assert_eq!(db.gc.compacted.interval, Duration::from_secs(120));
}

#[test]
fn services_lists_replace_rather_than_merge() {
    let fleet = parse_fleet_config("[database]\nservices = [\"gc\", \"mirror\"]").unwrap();
    let file = parse_database_config(&fleet, "services = []").unwrap();
    assert!(fleet.resolve_database(&file).services.is_empty());
    let file = parse_database_config(&fleet, "services = [\"compactor-coordinator\"]").unwrap();
    assert_eq!(
        fleet.resolve_database(&file).services,
        [Service::CompactorCoordinator]
    );
}

#[test]
fn unknown_fields_are_rejected_with_their_location() {
    let err = parse_fleet_config("[node]\ntimeout = \"1s\"")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("failed to parse config: line 2, column 1: unknown field `timeout`"),
        "{err}"
    );
    let err = parse_fleet_config("[database.gc]\nwals = {}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `wals`"), "{err}");
    let err = parse_database_config(&FleetConfig::default(), "url = \"s3://x\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `url`"), "{err}");
    let err = parse_fleet_config("[node]\nheartbeat_interval = \"soon\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid duration \"soon\""), "{err}");
    let err = parse_fleet_config("[database]\nservices = [\"gcc\"]")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown variant `gcc`"), "{err}");
}

#[test]
fn malformed_toml_is_a_parse_error() {
    let err = parse_fleet_config("[node\n").unwrap_err();
    assert!(matches!(err, ConfigError::Parse(_)), "{err}");
    assert!(
        !err.to_string().contains('\n'),
        "one line for status warnings: {err}"
    );
}

#[test]
fn node_cadence_rules() {
    assert_eq!(
        problems(parse_fleet_config(
            "[node]\nheartbeat_interval = \"30s\"\nheartbeat_timeout = \"30s\""
        )),
        ["node.heartbeat_interval (30s) must be < node.heartbeat_timeout (30s)"]
    );
    assert_eq!(
        problems(parse_fleet_config("[node]\nheartbeat_interval = \"0s\"")),
        ["node.heartbeat_interval must be > 0"]
    );
    assert_eq!(
        problems(parse_fleet_config("[node]\nconfig_poll = \"0s\"")),
        ["node.config_poll must be > 0"]
    );
}

#[test]
fn every_layer_rule_has_its_message() {
    let text = r#"
            services = ["gc", "gc"]
            [gc.manifest]
            interval = "0s"
            [gc.wal]
            interval = "0s"
            [gc.wal_fence]
            interval = "0s"
            [gc.compacted]
            interval = "0s"
            [gc.compactions]
            interval = "0s"
            [gc.detach]
            interval = "0s"
            [compactor-coordinator]
            poll_interval = "0s"
            manifest_update_timeout = "0s"
            max_concurrent_compactions = 0
            commit_compacted_interval = "0s"
            worker_heartbeat_timeout = "0s"
            checkpoint_lifetime = "0s"
            [compactor-coordinator.scheduler]
            min_compaction_sources = 0
            max_compaction_sources = 0
            include_size_threshold = -1.0
            [compaction-workers]
            count = 0
            max_concurrent_compactions = 0
            compactions_poll_interval = "0s"
            heartbeat_interval = "0s"
            max_fetch_tasks = 0
            max_sst_size = 0
            bytes_to_fetch = 0
            [mirror.targets."bad name"]
            url = "s3://dr/x"
            [mirror.targets.dr]
            url = "s3://dr/y"
            poll = "0s"
            interval = "0s"
            min_age = "0s"
            checkpoint_lifetime = "0s"
            copy_parallelism = 0
            multipart_threshold_mib = 4
            retention = { keep = "0s" }
        "#;
    let found = problems(parse_database_config(&FleetConfig::default(), text));
    let expected = [
        "services lists \"gc\" more than once",
        "gc.manifest.interval must be > 0",
        "gc.wal.interval must be > 0",
        "gc.wal_fence.interval must be > 0",
        "gc.compacted.interval must be > 0",
        "gc.compactions.interval must be > 0",
        "gc.detach.interval must be > 0",
        "compactor-coordinator.poll_interval must be > 0",
        "compactor-coordinator.manifest_update_timeout must be > 0",
        "compactor-coordinator.max_concurrent_compactions must be >= 1",
        "compactor-coordinator.commit_compacted_interval must be > 0",
        "compactor-coordinator.worker_heartbeat_timeout must be > 0",
        "compactor-coordinator.checkpoint_lifetime must be > 0",
        "compactor-coordinator.scheduler.min_compaction_sources must be >= 1",
        "compactor-coordinator.scheduler.max_compaction_sources must be >= 1",
        "compactor-coordinator.scheduler.include_size_threshold must be a positive number",
        "mirror.targets.bad name: mirror target names are 1-128 chars of [A-Za-z0-9_-]",
        "mirror.targets.dr.poll must be > 0",
        "mirror.targets.dr.interval must be > 0",
        "mirror.targets.dr.min_age must be > 0",
        "mirror.targets.dr.checkpoint_lifetime must be > 0",
        "mirror.targets.dr.copy_parallelism must be >= 1",
        "mirror.targets.dr.multipart_threshold_mib must be 5 to 5120 (MiB): S3 parts are at least 5 MiB and one PUT at most 5 GiB",
        "mirror.targets.dr.retention.keep must be > 0",
        "compaction-workers.count must be >= 1 (drop \"compaction-workers\" from services to run none)",
        "compaction-workers.max_concurrent_compactions must be >= 1",
        "compaction-workers.compactions_poll_interval must be > 0",
        "compaction-workers.heartbeat_interval must be > 0",
        "compaction-workers.max_fetch_tasks must be >= 1",
        "compaction-workers.max_sst_size must be > 0",
        "compaction-workers.bytes_to_fetch must be > 0",
    ];
    assert_eq!(found, expected);
}

#[test]
fn fleet_layer_problems_are_prefixed_with_database() {
    assert_eq!(
        problems(parse_fleet_config(
            "[database.compaction-workers]\ncount = 0"
        )),
        [
            "database.compaction-workers.count must be >= 1 (drop \"compaction-workers\" from services to run none)"
        ]
    );
    let err = parse_fleet_config("[database.gc.wal]\ninterval = \"0s\"").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid config:\n  database.gc.wal.interval must be > 0"
    );
}

#[test]
fn scheduler_bounds_check_the_layered_result() {
    let fleet = parse_fleet_config(
        "[database.compactor-coordinator.scheduler]\nmin_compaction_sources = 6",
    )
    .unwrap();
    let file = "[compactor-coordinator.scheduler]\nmax_compaction_sources = 4";
    assert!(parse_database_config(&FleetConfig::default(), file).is_ok());
    assert_eq!(
        problems(parse_database_config(&fleet, file)),
        [
            "resolved.compactor-coordinator.scheduler: min_compaction_sources (6) exceeds max_compaction_sources (4)"
        ]
    );
    assert_eq!(
        problems(parse_fleet_config(
            "[database.compactor-coordinator.scheduler]\nmin_compaction_sources = 9"
        )),
        [
            "database.compactor-coordinator.scheduler: min_compaction_sources (9) exceeds max_compaction_sources (8)"
        ]
    );
}

#[test]
fn mirror_targets_layer_and_travel_together() {
    let fleet = parse_fleet_config(
        r#"
            [database.mirror.targets.dr]
            url = "s3://dr-bucket/mirrors"
            source_prefix = "s3://user-data"
            poll = "30s"
            multipart_threshold_mib = 16
            [database.mirror.targets.backup]
            url = "gs://backups"
            "#,
    )
    .unwrap();
    let file = parse_database_config(
        &fleet,
        r#"
            [mirror.targets.dr]
            url = "s3://elsewhere/db1"
            [mirror.targets.backup]
            disabled = true
            mode = "periodic"
            copier = "external"
            interval = "24h"
            retention.keep = "30d"
            "#,
    )
    .unwrap();
    let db = fleet.resolve_database(&file);
    let dr = &db.mirror_targets["dr"];
    assert_eq!(dr.url.as_deref(), Some("s3://elsewhere/db1"));
    assert_eq!(
        dr.source_prefix, None,
        "a bare url clears the inherited prefix"
    );
    assert_eq!(
        dr.poll,
        Duration::from_secs(30),
        "other fields fall through"
    );
    assert_eq!(dr.checkpoint_lifetime, Duration::from_secs(900));
    assert_eq!(dr.stream.multipart_threshold, 16 << 20);
    assert!(!dr.disabled);
    let backup = &db.mirror_targets["backup"];
    assert_eq!(
        backup.stream.multipart_threshold,
        64 << 20,
        "the default threshold"
    );
    assert!(backup.disabled);
    assert_eq!(
        backup.url.as_deref(),
        Some("gs://backups"),
        "disabled keeps its url"
    );
    assert_eq!(backup.mode, MirrorMode::Periodic);
    assert_eq!(backup.copier, CopierKind::External);
    assert_eq!(backup.retention_keep, Some(Duration::from_secs(30 * 86400)));
}

#[test]
fn mirror_targets_need_a_valid_url_unless_disabled() {
    let none = FleetConfig::default();
    assert_eq!(
        problems(parse_database_config(
            &none,
            "[mirror.targets.dr]\npoll = \"1s\""
        )),
        ["resolved.mirror.targets.dr: url is required unless the target is disabled"]
    );
    assert!(parse_database_config(&none, "[mirror.targets.dr]\ndisabled = true").is_ok());
    assert_eq!(
        problems(parse_database_config(
            &none,
            "[mirror.targets.dr]\nurl = \"ftp://x/y\""
        )),
        [
            "resolved.mirror.targets.dr.url: unsupported URL scheme \"ftp\" (expected one of s3, s3a, gs, az, adl, azure, abfs, abfss, file, memory, http, https)"
        ]
    );
    assert_eq!(
        problems(parse_database_config(
            &none,
            "[mirror.targets.dr]\nurl = \"s3://x/y\"\nsource_prefix = \"nope\""
        )),
        [
            "resolved.mirror.targets.dr.source_prefix: invalid URL \"nope\": relative URL without a base"
        ]
    );
    let fleet = parse_fleet_config("[database.mirror.targets.dr]\ndisabled = true").unwrap();
    assert_eq!(
        problems(parse_database_config(
            &fleet,
            "[mirror.targets.dr]\ndisabled = false"
        )),
        ["resolved.mirror.targets.dr: url is required unless the target is disabled"]
    );
}

#[test]
fn a_sleet_0_1_worker_table_still_parses() {
    let file = parse_database_config(
        &FleetConfig::default(),
        "[compaction-workers]\nheartbeat_bytes = 5242880\nheartbeat_min_interval = \"5s\"",
    )
    .unwrap();
    assert_eq!(file.compaction_workers.heartbeat_bytes, Some(5_242_880));
}

#[test]
fn line_and_column_count_characters() {
    assert_eq!(line_and_column("ab\ncµd", 6), (2, 3));
    assert_eq!(line_and_column("ab\ncµd", 5), (2, 2), "inside a character");
    assert_eq!(line_and_column("x", 0), (1, 1));
}

#[test]
fn plugin_copiers_hooks_and_grants_parse_layer_and_flatten() {
    let fleet = parse_fleet_config(
        r#"
            [database.mirror.targets.dr]
            url = "s3://dr/x"
            copier = "plugin:throttle-copier"
            [database.mirror.targets.dr.copier_config]
            bytes_per_second = 1000
            tags = { team = "data", tier = 2 }
            [database.hooks.window]
            plugin = "maintenance-window"
            services = ["mirror"]
            [database.hooks.window.config]
            start = "01:00"
            [plugins.throttle-copier]
            memory_mib = 16
            call_timeout = "30s"
            "#,
    )
    .unwrap();
    let file = parse_database_config(
            &fleet,
            "[mirror.targets.dr.copier_config]\nbytes_per_second = 5\n[hooks.window]\ndisabled = true\n",
        )
        .unwrap();
    let db = fleet.resolve_database(&file);
    let dr = &db.mirror_targets["dr"];
    assert_eq!(dr.copier, CopierKind::Plugin("throttle-copier".into()));
    assert_eq!(
        dr.copier_config,
        [
            ("bytes_per_second".to_string(), "5".to_string()),
            ("tags.team".to_string(), "data".to_string()),
            ("tags.tier".to_string(), "2".to_string()),
        ],
        "merged by key, nested tables dotted"
    );
    assert!(
        db.hooks.is_empty(),
        "a registry file disables the hook by name"
    );
    let window = &fleet.database.resolve().hooks["window"];
    assert!(window.applies_to(Service::Mirror) && !window.applies_to(Service::Gc));
    let limits = fleet.plugin_limits("throttle-copier", crate::model::policy::PluginKind::Copier);
    assert_eq!(limits.memory_bytes, 16 << 20);
    assert_eq!(limits.call_timeout, Duration::from_secs(30));
    assert_eq!(
        fleet
            .plugin_limits("other", crate::model::policy::PluginKind::Hook)
            .call_timeout,
        Duration::from_secs(5),
        "hooks default to 5s"
    );
}

#[test]
fn bad_plugin_config_is_named() {
    let err = |toml: &str| parse_fleet_config(toml).unwrap_err().to_string();
    assert!(
        err("[database.mirror.targets.dr]\nurl = \"s3://x/y\"\ncopier = \"plugin:bad name\"")
            .contains("invalid plugin name \"bad name\"")
    );
    assert!(
        err("[database.mirror.targets.dr]\nurl = \"s3://x/y\"\ncopier = \"ftp\"")
            .contains("unknown copier \"ftp\"")
    );
    assert!(
        err("[database.hooks.h]\nservices = [\"gc\"]")
            .contains("database.hooks.h: plugin is required unless the hook is disabled")
    );
    assert!(
        err("[plugins.p]\nsha256 = \"abc\"").contains("plugins.p.sha256 must be 64 hex digits")
    );
    assert!(err("[plugins.p]\nmemory_mib = 0").contains("plugins.p.memory_mib must be 1..=4096"));
}

#[test]
fn stores_settings_default_and_bad_trust_is_named() {
    let defaults = parse_fleet_config("").unwrap().stores.resolve();
    assert_eq!(defaults.recheck_after, Duration::from_secs(24 * 3600));
    assert!(defaults.trusted.is_empty());
    let fleet = parse_fleet_config(
        "[stores]\nrecheck_after = \"1h\"\n[stores.trusted]\n\"gs://b\" = \"our own GCS\"",
    )
    .unwrap();
    let stores = fleet.stores.resolve();
    assert_eq!(stores.recheck_after, Duration::from_secs(3600));
    assert_eq!(stores.trusted["gs://b"], "our own GCS");
    let err = |toml: &str| parse_fleet_config(toml).unwrap_err().to_string();
    let path = err("[stores.trusted]\n\"s3://b/fleet\" = \"why\"");
    assert!(
        path.contains(
            "stores.trusted.\"s3://b/fleet\": name a whole store as scheme://bucket (\"s3://b\")"
        ),
        "{path}"
    );
    assert!(err("[stores.trusted]\n\"s3://b\" = \" \"").contains("give the reason"));
    assert!(err("[stores]\nrecheck_after = \"0s\"").contains("stores.recheck_after must be > 0"));
}

#[test]
fn events_settings_default_and_bad_ones_are_named() {
    assert_eq!(parse_fleet_config("").unwrap().events.resolve(), None);
    let queue = "https://sqs.us-east-1.amazonaws.com/123456789012/sleet";
    let fleet = parse_fleet_config(&format!(
        "[events]\nsource = \"sqs\"\nqueue_url = \"{queue}\""
    ))
    .unwrap();
    let events = fleet.events.resolve().unwrap();
    assert_eq!(events.queue_url, queue);
    assert_eq!(events.safety_interval, Duration::from_secs(600));
    assert_eq!(events.relay_interval, Duration::from_secs(1));
    let off = parse_fleet_config("[events]\nsource = \"none\"").unwrap();
    assert_eq!(off.events.resolve(), None);
    let err = |toml: &str| parse_fleet_config(toml).unwrap_err().to_string();
    assert!(err("[events]\nsource = \"sqs\"").contains("events.queue_url is required"));
    assert!(err(&format!("[events]\nqueue_url = \"{queue}\"")).contains("events.source is not"));
    let bad = err("[events]\nsource = \"sqs\"\nqueue_url = \"sqs://q\"");
    assert!(
        bad.contains("events.queue_url \"sqs://q\": must be an http(s) URL"),
        "{bad}"
    );
    let short =
        format!("[events]\nsource = \"sqs\"\nqueue_url = \"{queue}\"\nsafety_interval = \"5s\"");
    assert!(err(&short).contains("events.safety_interval must be at least 20s"));
    assert!(
        err("[events]\nsource = \"kafka\"").contains("line 2, column 10: unknown variant `kafka`")
    );
}

#[test]
fn outside_compactor_settings_default_layer_and_check() {
    let fleet =
        parse_fleet_config("[database.outside-compactor]\nrecheck = \"10s\"\ntakeover_backlog = 0")
            .unwrap();
    let defaults = fleet.resolve_database(&DatabaseConfig::default());
    let outside = defaults.outside_compactor;
    assert!(outside.enabled);
    assert_eq!(outside.recheck, Duration::from_secs(10));
    assert_eq!(outside.takeover_backlog, 0);
    assert_eq!(outside.active_within, Duration::from_secs(120));
    assert_eq!(outside.takeover_after, Duration::from_secs(120));
    let db = parse_database_config(&fleet, "[outside-compactor]\nenabled = false").unwrap();
    let layered = fleet.resolve_database(&db).outside_compactor;
    assert!(!layered.enabled);
    assert_eq!(layered.recheck, Duration::from_secs(10), "fleet layer kept");
    let bad = problems(parse_database_config(
        &fleet,
        "[outside-compactor]\nrecheck = \"0s\"\nactive_within = \"0s\"\ntakeover_after = \"0s\"",
    ));
    for field in ["recheck", "active_within", "takeover_after"] {
        assert!(
            bad.contains(&format!("outside-compactor.{field} must be > 0")),
            "{bad:?}"
        );
    }
    let typo = parse_database_config(&fleet, "[outside-compactor]\nrechek = \"1s\"");
    assert!(
        matches!(&typo, Err(ConfigError::Parse(m)) if m.contains("unknown field `rechek`")),
        "{typo:?}"
    );
}

#[test]
fn a_short_manifest_min_age_without_boundary_files_is_a_hazard() {
    let settings = |toml: &str| {
        parse_fleet_config(toml)
            .unwrap()
            .resolve_database(&DatabaseConfig::default())
    };
    let defaults = settings("");
    assert!(hazards(&defaults, None).is_empty());
    assert!(hazards(&defaults, Some("file:///data/db")).is_empty());

    let short = settings("[database.gc.manifest]\nmin_age = \"1s\"");
    let on_file = hazards(&short, Some("file:///data/db"));
    assert_eq!(on_file.len(), 1, "{on_file:?}");
    assert!(
        on_file[0].contains("gc.manifest.min_age = 1s")
            && on_file[0].contains("file:///data/db")
            && on_file[0].contains("at least 1m"),
        "{on_file:?}"
    );
    assert_eq!(hazards(&short, None).len(), 1, "any store may lack them");
    assert!(
        hazards(&short, Some("s3://bucket/db")).is_empty(),
        "S3 has boundary files"
    );

    let forced_off =
        settings("[database.gc]\nboundary_files = false\n[database.gc.manifest]\nmin_age = \"1s\"");
    assert_eq!(hazards(&forced_off, Some("s3://bucket/db")).len(), 1);
    let at_floor = settings("[database.gc.manifest]\nmin_age = \"1m\"");
    assert!(hazards(&at_floor, Some("file:///data/db")).is_empty());
    let no_gc = settings(
        "[database]\nservices = [\"compactor-coordinator\"]\n[database.gc.manifest]\nmin_age = \"1s\"",
    );
    assert!(
        hazards(&no_gc, Some("file:///data/db")).is_empty(),
        "GC does not run"
    );
}

#[test]
fn compaction_code_layers_and_bad_values_are_named() {
    let fleet = parse_fleet_config(
        "[database]\nmerge_operator = \"plugin:counter-merge\"\n\
         [database.compaction_filter_config]\nmax_age = \"7d\"\nnested.deep = 1\n",
    )
    .unwrap();
    let inherited = fleet.resolve_database(&DatabaseConfig::default());
    let code = &inherited.compaction_code;
    assert_eq!(
        code.merge_operator,
        Some(CodeSettings {
            plugin: "counter-merge".into(),
            config: Vec::new()
        })
    );
    assert_eq!(
        code.compaction_filter, None,
        "a config table alone names no filter"
    );

    let file: DatabaseConfig = toml::from_str(
        "merge_operator = \"none\"\ncompaction_filter = \"plugin:ttl-filter\"\n\
         [compaction_filter_config]\nmax_age = \"1h\"\n",
    )
    .unwrap();
    let own = fleet.resolve_database(&file).compaction_code;
    assert_eq!(
        own.merge_operator, None,
        "none opts out of the fleet's operator"
    );
    let filter = own.compaction_filter.expect("the database's filter");
    assert_eq!(filter.plugin, "ttl-filter");
    assert_eq!(
        filter.config,
        vec![
            ("max_age".to_string(), "1h".to_string()),
            ("nested.deep".to_string(), "1".to_string())
        ],
        "config tables merge by key across layers"
    );

    let err = |toml: &str| parse_fleet_config(toml).unwrap_err().to_string();
    let bare = err("[database]\nmerge_operator = \"counter\"");
    assert!(
        bare.contains("\"counter\" is not plugin:<name> or none"),
        "{bare}"
    );
    assert!(bare.contains("merge_operator"), "names the field: {bare}");
    let bad = err("[database]\ncompaction_filter = \"plugin:no spaces\"");
    assert!(bad.contains("invalid plugin name \"no spaces\""), "{bad}");
}
