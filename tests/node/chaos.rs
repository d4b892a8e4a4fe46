//! Chaos: rounds of random node crashes, clean stops and restarts while
//! the store the nodes see fails and delays requests. After every round
//! the faults stop and the test checks that no key is lost, every database
//! opens read-only, and placement converges on the surviving nodes.
//!
//! The seed is printed; `SLEET_CHAOS_SEED=<n>` replays a run.

use std::time::Duration;

use sleet::testing::{Chaos, Faults};

use crate::cluster::{Cluster, Seeded, expected_tasks, fast_fleet, ownership_matches};
use crate::db;

const ROUNDS: usize = 8;
const NODE_POOL: [&str; 4] = ["c1", "c2", "c3", "c4"];
/// 5% of requests fail, each waits up to 40ms: SlateDB's retries absorb
/// most errors, some surface as task failures and backoff.
const FAULT_PER_MILLE: u64 = 50;
const FAULT_LATENCY: Duration = Duration::from_millis(40);

/// One random disturbance: crash a node, stop one cleanly, or start one.
/// At least one node always stays up.
async fn disturb(cluster: &mut Cluster, chaos: &mut Chaos) -> String {
    let running = cluster.running_ids();
    let stopped: Vec<String> = NODE_POOL
        .iter()
        .map(|s| s.to_string())
        .filter(|id| !running.contains(id))
        .collect();
    match chaos.draw() % 3 {
        0 if running.len() > 1 => {
            let id = chaos.pick(&running).to_string();
            cluster.kill(&id);
            format!("crash {id}")
        }
        1 if running.len() > 1 => {
            let id = chaos.pick(&running).to_string();
            cluster.stop(&id).await;
            format!("stop {id}")
        }
        _ if !stopped.is_empty() => {
            let id = chaos.pick(&stopped).to_string();
            cluster.spawn(&id);
            format!("start {id}")
        }
        _ => "none".to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_crashes_restarts_and_store_faults_lose_nothing() {
    let _alone = crate::HEAVY.lock().await;
    let mut chaos = Chaos::from_env();
    let faults = Faults::new();
    let fleet = fast_fleet().replace("min_age = \"1s\"", "min_age = \"10s\"");
    let mut cluster = Cluster::new(&fleet).with_faults(faults.clone());
    let seeded = Seeded::new(&cluster, 4).await;
    let dbs = seeded.placement();
    for id in &NODE_POOL[..3] {
        cluster.spawn(id);
    }

    let mut rounds_written = 4;
    for round in 0..ROUNDS {
        faults.set(FAULT_PER_MILLE, FAULT_LATENCY);
        let mut actions = Vec::new();
        for _ in 0..2 {
            actions.push(disturb(&mut cluster, &mut chaos).await);
        }
        // The live writer keeps writing while the fleet is disturbed.
        db::write_rounds(&seeded.writer, rounds_written..rounds_written + 2).await;
        rounds_written += 2;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        faults.clear();

        let live = cluster.running_ids();
        let live: Vec<&str> = live.iter().map(String::as_str).collect();
        eprintln!("round {round}: {actions:?}, live {live:?}");
        let started = std::time::Instant::now();
        while !ownership_matches(&cluster, &live, &dbs, 2).await {
            if started.elapsed() > Duration::from_secs(45) {
                eprintln!("expected: {:?}", expected_tasks(&live, &dbs, 2));
                for id in &live {
                    eprintln!("{id}: {:?}", cluster.body(id).await);
                }
                panic!("ownership over {live:?} did not converge after round {round}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        db::assert_all_keys(&seeded.writer, 0..rounds_written).await;
        for url in &seeded.urls[1..] {
            db::assert_reader_sees(url, 0..4).await;
        }
    }
    eprintln!("chaos: {} faults injected", faults.injected());
    assert!(faults.injected() > 0, "the store really failed requests");

    // The fleet still did its work through all of it.
    seeded.assert_compacted_and_collected().await;
    seeded.writer.close().await.unwrap();
    db::assert_reader_sees(&seeded.urls[0], 0..rounds_written).await;
    for id in cluster.running_ids() {
        cluster.stop(&id).await;
    }
}
