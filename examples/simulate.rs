//! `scripts/simulate`: runs seeds of the deterministic fleet simulation
//! (`sleet::sim`) and reports every failing seed with its violations and
//! the last events of its trace. Exit 0 when every seed passed, 1 when
//! one failed, 2 for bad arguments.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use sleet::sim::{
    CONTROLS, Control, FaultMix, KEPT_EVENTS, Mark, SimOptions, SimReport, control_of,
    planted_by_name, run,
};

#[derive(Debug, Parser)]
#[command(
    name = "simulate",
    about = "Runs a fleet of real sleet nodes under deterministic simulation, a seed a run"
)]
struct Args {
    /// How many seeds to run, from --first on.
    #[arg(long, default_value_t = 1, conflicts_with = "seed")]
    seeds: u64,
    /// The first seed of --seeds.
    #[arg(long, default_value_t = 1)]
    first: u64,
    /// Run this one seed (to replay a failure).
    #[arg(long)]
    seed: Option<u64>,
    /// Simulated minutes per seed: faults, then two minutes and a half to
    /// settle and be judged. At least 3.
    #[arg(long, default_value_t = 10)]
    minutes: u64,
    /// Nodes in the fleet (3 to 5).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Databases registered at the start.
    #[arg(long, default_value_t = 10)]
    databases: usize,
    /// The faults to inject: all, none, or names joined by commas
    /// (crash, pause, 503, lost-reply, slow, skew, config, registry,
    /// writer-crash, partition).
    #[arg(long, default_value = "all")]
    faults: String,
    /// Plant a bug (a control; docs/reliability.md lists them all, e.g.
    /// dead-nodes-stay-live, prune-ignores-pin-floor). Repeatable.
    #[arg(long = "plant")]
    planted: Vec<String>,
    /// No application writers: databases stay empty and only ownership is
    /// judged (about 50 times faster).
    #[arg(long)]
    no_writers: bool,
    /// Print every event of the trace and its hash (with --seed).
    #[arg(long)]
    trace: bool,
    /// Run each seed twice and fail it if the two traces differ.
    #[arg(long)]
    replay: bool,
    /// Run exactly the fleet, faults and timings given. By default each
    /// seed draws its own (a swarm): 3 to 5 nodes whatever --nodes says,
    /// at most --databases databases, and its faults from the --faults
    /// pool.
    #[arg(long)]
    no_swarm: bool,
    /// Measure detection power: run every planted bug's control (or only
    /// those named with --plant) over the seeds and print the share of
    /// seeds that find each.
    #[arg(long)]
    power: bool,
}

/// A run of this many seeds or more, with writers and every fault, fails
/// when a coverage mark was never hit; a rare one (`Mark::rare`) from
/// [`RARE_MARKS_REQUIRED_FROM`] seeds.
const MARKS_REQUIRED_FROM: usize = 20;
const RARE_MARKS_REQUIRED_FROM: usize = 200;

fn main() -> ExitCode {
    // Piped into `head`, stop quietly, as other command-line tools do.
    // SAFETY: restoring a signal's default disposition at start-up,
    // before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = Args::parse();
    let options = match options(&args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.first..args.first.saturating_add(args.seeds)).collect(),
    };
    if args.power {
        return power(&options, &seeds);
    }
    let started = Instant::now();
    let mut failed = 0u64;
    let mut marks: BTreeMap<Mark, (u64, u64)> = BTreeMap::new();
    for &seed in &seeds {
        let mut options = options.clone();
        options.seed = seed;
        let report = run(&options);
        for (mark, hits) in &report.marks {
            let (total, seeds_hit) = marks.entry(*mark).or_default();
            *total += hits;
            *seeds_hit += u64::from(*hits > 0);
        }
        let mut problems: Vec<String> = report.violations.iter().map(|v| v.to_string()).collect();
        if args.replay {
            let again = run(&options);
            if again.hash != report.hash {
                problems.push(format!(
                    "not-deterministic: the trace hashed {} then {}",
                    report.hash, again.hash
                ));
            }
        }
        if args.trace {
            for event in report.all_events.iter().flatten() {
                println!("{event}");
            }
            println!(
                "seed {seed} trace {} ({} events)",
                report.hash, report.events
            );
        }
        if !problems.is_empty() {
            failed += 1;
            print_failure(&report, &problems);
        }
    }
    let never_hit: Vec<&str> = print_marks(&marks, seeds.len())
        .into_iter()
        .filter(|mark| !mark.rare() || seeds.len() >= RARE_MARKS_REQUIRED_FROM)
        .map(|mark| mark.name())
        .collect();
    let marks_required = seeds.len() >= MARKS_REQUIRED_FROM
        && options.writers
        && options.faults == FaultMix::all()
        && options.planted.is_empty();
    let wall = started.elapsed().as_secs_f64();
    let runs = seeds.len() as u64 * if args.replay { 2 } else { 1 };
    let simulated = (runs * options.minutes) as f64;
    println!(
        "{} of {} seeds passed ({} failed); {simulated:.0} simulated minutes in {wall:.1} s, \
         {:.0} simulated minutes a wall second",
        seeds.len() as u64 - failed,
        seeds.len(),
        failed,
        simulated / wall.max(1e-9)
    );
    if marks_required && !never_hit.is_empty() {
        println!(
            "FAILED: {} coverage marks never hit in {} seeds: {}",
            never_hit.len(),
            seeds.len(),
            never_hit.join(", ")
        );
        return ExitCode::from(1);
    }
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn options(args: &Args) -> Result<SimOptions, String> {
    if args.seed.is_none() && args.seeds == 0 {
        return Err("--seeds 0 runs nothing; give at least 1".into());
    }
    if args.trace && args.seed.is_none() {
        return Err("--trace prints one seed's events: give it --seed".into());
    }
    let faults = FaultMix::parse(&args.faults)?;
    let planted = args
        .planted
        .iter()
        .map(|name| planted_by_name(name))
        .collect::<Result<Vec<_>, _>>()?;
    let options = SimOptions {
        seed: 0,
        minutes: args.minutes,
        nodes: args.nodes,
        databases: args.databases,
        faults,
        writers: !args.no_writers,
        trace: args.trace,
        planted,
        swarm: !args.no_swarm,
    };
    options.validate()?;
    Ok(options)
}

/// Prints each mark's hits and the seeds that hit it; returns the marks
/// never hit.
fn print_marks(marks: &BTreeMap<Mark, (u64, u64)>, seeds: usize) -> Vec<Mark> {
    println!("coverage marks (hits, seeds of {seeds} that hit it; * rare):");
    let mut never = Vec::new();
    for (mark, (hits, seeds_hit)) in marks {
        let rare = if mark.rare() { "*" } else { " " };
        println!("  {:<34}{rare} {hits:>8} {seeds_hit:>5}", mark.name());
        if *hits == 0 {
            never.push(*mark);
        }
    }
    never
}

/// Runs each control over `seeds`, planted, and prints how many find it.
fn power(options: &SimOptions, seeds: &[u64]) -> ExitCode {
    // A planted bug may make SlateDB panic (a found seed): the runs
    // report it, so its message and backtrace need not fill the table.
    std::panic::set_hook(Box::new(|_| {}));
    let controls: Vec<&Control> = if options.planted.is_empty() {
        CONTROLS.iter().collect()
    } else {
        options.planted.iter().map(|bug| control_of(*bug)).collect()
    };
    println!(
        "detection power over seeds {}..={} ({}):",
        seeds[0],
        seeds[seeds.len() - 1],
        if options.swarm { "swarm" } else { "fixed" }
    );
    println!("| switch | found in | of | share | first seed |");
    println!("| --- | --- | --- | --- | --- |");
    for control in controls {
        let started = Instant::now();
        let mut found = Vec::new();
        for &seed in seeds {
            let mut run_options = control.run_of(seed, true);
            run_options.swarm = options.swarm;
            run_options.minutes = options.minutes;
            run_options.nodes = options.nodes;
            run_options.databases = options.databases;
            if control.found_in(&run(&run_options)) {
                found.push(seed);
            }
        }
        println!(
            "| {} | {} | {} | {:.0}% | {} |   ({:.0} s)",
            control.bug.name(),
            found.len(),
            seeds.len(),
            100.0 * found.len() as f64 / seeds.len() as f64,
            found.first().map_or("-".to_string(), |s| s.to_string()),
            started.elapsed().as_secs_f64()
        );
    }
    ExitCode::SUCCESS
}

fn print_failure(report: &SimReport, problems: &[String]) {
    println!("seed {} FAILED (trace {}):", report.seed, report.hash);
    if let Some(swarm) = &report.swarm {
        println!("  {swarm}");
    }
    for problem in problems {
        println!("  {problem}");
    }
    println!(
        "  the last {} of its {} events:",
        report.last_events.len().min(KEPT_EVENTS),
        report.events
    );
    for event in &report.last_events {
        println!("    {event}");
    }
    println!(
        "  replay: scripts/simulate --seed {} --trace (same --minutes, --nodes, --databases, \
         --faults and --plant)",
        report.seed
    );
}
