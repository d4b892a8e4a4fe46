use super::*;

#[test]
fn every_family_is_exported_with_its_help() {
    let metrics = Metrics::default();
    metrics.tick_took(Duration::from_millis(3));
    metrics
        .tasks
        .restarts
        .get_or_create(&ServiceLabels {
            service: "gc".into(),
        })
        .inc();
    let text = metrics.encode();
    assert!(text.contains("sleet_node_ticks_total 1"), "{text}");
    assert!(text.contains("sleet_task_restarts_total{service=\"gc\"} 1"));
    assert!(text.contains("sleet_node_config_age_seconds "));
    assert!(text.ends_with("# EOF\n"));
    let catalogue = Metrics::catalogue();
    for family in ["sleet_mirror_passes", "sleet_plugin_call_duration_seconds"] {
        assert!(
            catalogue.contains(&format!("# TYPE {family} ")),
            "{catalogue}"
        );
    }
}

#[test]
fn each_detail_labels_what_it_says() {
    let url = "s3://b/db";
    let node = Metrics::new(Detail::Node);
    assert_eq!(node.slatedb_database_label(url), "");
    assert_eq!(node.target_labels(url, "t"), TargetLabels::default());
    let mirror = Metrics::new(Detail::Mirror);
    assert_eq!(mirror.slatedb_database_label(url), "");
    assert_eq!(mirror.target_labels(url, "t").target, "t");
    let database = Metrics::new(Detail::Database);
    assert_eq!(database.slatedb_database_label(url), url);
}
