//! The deterministic simulation (`sleet::sim`, `scripts/simulate`): the CI
//! seeds pass, a seed replays to the same trace, each planted bug is found
//! within its stated seeds, and bad arguments are refused with exit 2.

use std::path::PathBuf;
use std::process::Command;

use sleet::sim::{FaultMix, Planted, SimOptions, run};

/// Seeds CI runs with every fault and no writers: ownership only (about
/// 40 s in a debug build).
const CI_SEEDS: u64 = 200;
/// Seeds CI runs with every fault and a writer per database (about 8 s a
/// seed in a debug build).
const CI_WRITER_SEEDS: u64 = 12;

fn without_writers(seed: u64) -> SimOptions {
    SimOptions {
        writers: false,
        ..SimOptions::new(seed)
    }
}

fn failures(runs: impl Iterator<Item = SimOptions>) -> Vec<String> {
    runs.filter_map(|options| {
        let report = run(&options);
        (!report.passed()).then(|| {
            format!(
                "seed {} (writers {}): {:?}\nlast events:\n{}",
                options.seed,
                options.writers,
                report.violations,
                report.last_events.join("\n")
            )
        })
    })
    .collect()
}

#[test]
fn the_ci_seeds_pass_with_every_fault() {
    let failed = failures((1..=CI_SEEDS).map(without_writers));
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn the_ci_seeds_pass_with_writers_and_every_fault() {
    let failed = failures((1..=CI_WRITER_SEEDS).map(SimOptions::new));
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn a_seed_replays_to_the_same_trace() {
    for options in [
        SimOptions::new(1),
        SimOptions::new(2),
        without_writers(3),
        without_writers(1_000_003),
    ] {
        let (first, again) = (run(&options), run(&options));
        let seed = options.seed;
        assert_eq!(first.hash, again.hash, "seed {seed}");
        assert_eq!(first.events, again.events, "seed {seed}");
        assert!(first.events > 500, "seed {seed}: {} events", first.events);
    }
    // Different seeds are different runs.
    assert_ne!(run(&without_writers(1)).hash, run(&without_writers(2)).hash);
}

/// A planted bug's control: the violation it must cause, the run that
/// finds it, and the seeds (from 1) within which it must be found.
struct Control {
    bug: Planted,
    violation: &'static str,
    writers: bool,
    /// The faults of the run (`None`: every fault).
    faults: Option<&'static str>,
    within: u64,
}

/// Measured: dead-nodes-stay-live by seed 3, the next three by seed 1,
/// outside-compactor-vet-skipped by seed 1, writer-acks-before-durable by
/// seed 2 under writer crashes alone (about one run in seven finds it under
/// every fault: the crash must fall between the early acknowledgement and
/// the WAL write, at most 100 ms), mirror-commits-before-copy by seed 2
/// (2 of seeds 1-10: a copy must fail after the early commit),
/// prune-keeps-latest-only by seed 1 (4 of seeds 1-10).
const CONTROLS: [Control; 9] = [
    Control {
        bug: Planted::DeadNodesStayLive,
        violation: "gone-node-still-live",
        writers: false,
        faults: None,
        within: 20,
    },
    Control {
        bug: Planted::TasksOutliveOwnership,
        violation: "ownership-did-not-converge",
        writers: false,
        faults: None,
        within: 5,
    },
    Control {
        bug: Planted::ConfigChangesIgnored,
        violation: "heartbeat-miscounts-tasks",
        writers: false,
        faults: None,
        within: 5,
    },
    Control {
        bug: Planted::StoppedTasksStayOnTheBoard,
        violation: "heartbeat-miscounts-tasks",
        writers: false,
        faults: None,
        within: 5,
    },
    Control {
        bug: Planted::OutsideCompactorVetSkipped,
        violation: "default-writer-fenced",
        writers: true,
        faults: None,
        within: 4,
    },
    Control {
        bug: Planted::WriterAcksBeforeDurable,
        violation: "acknowledged-write-lost",
        writers: true,
        faults: Some("writer-crash"),
        within: 5,
    },
    Control {
        bug: Planted::MirrorCommitsBeforeCopy,
        violation: "restore-point-broken",
        writers: true,
        faults: None,
        within: 3,
    },
    Control {
        bug: Planted::PruneKeepsLatestOnly,
        violation: "restore-point-broken",
        writers: true,
        faults: None,
        within: 2,
    },
    Control {
        bug: Planted::RestoreDropsWalTail,
        violation: "recovery-point-missed",
        writers: true,
        faults: None,
        within: 1,
    },
];

fn control_run(control: &Control, seed: u64, planted: bool) -> SimOptions {
    let mut options = SimOptions {
        writers: control.writers,
        ..SimOptions::new(seed)
    };
    if let Some(faults) = control.faults {
        options.faults = FaultMix::parse(faults).unwrap();
    }
    if planted {
        options.planted = vec![control.bug];
    }
    options
}

#[test]
fn every_planted_bug_is_found_within_its_seeds() {
    for control in &CONTROLS {
        let found = (1..=control.within).find(|&seed| {
            let report = run(&control_run(control, seed, true));
            report
                .violations
                .iter()
                .any(|v| v.name == control.violation)
        });
        let Some(seed) = found else {
            panic!(
                "{} not found in seeds 1..={}",
                control.bug.name(),
                control.within
            );
        };
        // The plant is the cause: the same run without it passes.
        let report = run(&control_run(control, seed, false));
        assert!(
            report.passed(),
            "{} unplanted at seed {seed}: {:?}",
            control.bug.name(),
            report.violations
        );
    }
}

#[test]
fn a_quiet_fleet_converges_too() {
    let mut options = without_writers(11);
    options.faults = FaultMix::none();
    options.nodes = 5;
    options.databases = 30;
    let report = run(&options);
    assert!(report.passed(), "{:?}", report.violations);
}

/// The example binary `cargo test` builds beside this test
/// (`examples/simulate-<hash>`; `cargo run --example` also links it as
/// `examples/simulate`), the newest if there are several.
fn simulate_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let examples = exe.parent()?.parent()?.join("examples");
    std::fs::read_dir(examples)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            (name == "simulate" || name.starts_with("simulate-")) && path.extension().is_none()
        })
        .max_by_key(|path| path.metadata().and_then(|m| m.modified()).ok())
}

#[test]
fn bad_arguments_are_refused_with_exit_2() {
    let Some(binary) = simulate_binary() else {
        panic!("no examples/simulate beside the tests: `cargo test` builds it");
    };
    for (args, says) in [
        (&["--seeds", "0"][..], "--seeds 0 runs nothing"),
        (
            &["--faults", "crash,meteor"][..],
            "unknown fault \"meteor\"",
        ),
        (&["--minutes", "-5"][..], "-5"),
        (&["--minutes", "2"][..], "at least 3"),
        (&["--plant", "gremlins"][..], "unknown planted bug"),
        (&["--trace"][..], "give it --seed"),
    ] {
        let out = Command::new(&binary).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let out = Command::new(&binary)
        .args(["--seed", "5", "--minutes", "4", "--no-writers"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 of 1 seeds passed"));
}
