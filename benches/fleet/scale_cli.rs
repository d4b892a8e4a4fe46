//! `cargo bench --bench fleet -- scale-cli`: what a user sees who runs a
//! plain `sleet run` over many idle databases. The node is the release
//! binary, started as the README starts it (default settings, default
//! logging, no counting wrapper); the databases are copies of one small
//! detached database, registered by writing their registry files, as in
//! `scale`. Its resident memory and CPU (from `/proc/<pid>`) are printed
//! every minute for `SLEET_BENCH_SCALE_MINUTES` (30), so a start-up spike
//! or a slow drift shows; then the start-up times and one `sleet status`.
//!
//! `SLEET_BENCH_SCALE_DATABASES` (10,000); `SLEET_BENCH_SCALE_FRESH=1`
//! copies written moments ago (a user who just made them) instead of an
//! hour ago (a node restarting over a quiet fleet);
//! `SLEET_BENCH_SCALE_CONFIG=<file>` the fleet's `sleet.toml` (the
//! defaults without it), to measure what an operator's settings cost.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{IdleFleet, env_number, time_start_up};

/// Resident MiB and CPU seconds (user + system) of process `pid`.
fn sample(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let resident_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis: utime is the 12th
    // and stime the 13th of them (fields 14 and 15 of the line).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((resident_kib / 1024.0, ticks / per_second))
}

pub async fn scale_cli_bench() {
    let count = env_number("SLEET_BENCH_SCALE_DATABASES").map_or(10_000, |n| n as usize);
    let minutes = env_number("SLEET_BENCH_SCALE_MINUTES").unwrap_or(30);
    let fresh = std::env::var_os("SLEET_BENCH_SCALE_FRESH").is_some();
    let age = (!fresh).then_some(Duration::from_secs(3600));
    let idle = IdleFleet::copies_aged(count, age, |_| true).await;
    let root_url = idle.fleet.root().url().to_string();
    let root_dir = std::path::PathBuf::from(root_url.trim_start_matches("file://"));
    if let Some(config) = std::env::var_os("SLEET_BENCH_SCALE_CONFIG") {
        let text = std::fs::read_to_string(&config).expect("SLEET_BENCH_SCALE_CONFIG's file");
        std::fs::write(root_dir.join("sleet.toml"), &text).expect("the fleet's sleet.toml");
        println!(
            "scale-cli: sleet.toml from {}:\n{}",
            std::path::Path::new(&config).display(),
            text.trim_end()
        );
    }
    let log = std::fs::File::create(root_dir.join("node.log")).expect("the node's log file");
    let binary = env!("CARGO_BIN_EXE_sleet");
    let mut node = Command::new(binary)
        .args(["run", &root_url, "--node-id", "scale-node"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("sleet run starts");
    let pid = node.id();
    let started = Instant::now();
    let start_up = tokio::spawn(time_start_up(root_dir.clone(), count * 3));
    println!(
        "scale-cli: `sleet run` over {count} idle databases ({}), sampled every minute for \
         {minutes} minutes",
        if fresh {
            "copies written moments before"
        } else {
            "copies written an hour before"
        }
    );
    println!("scale-cli: minute, resident MiB, KiB per database, % of a core over the minute");
    let (mut last_cpu, mut cpu_samples) = (0.0, Vec::new());
    for minute in 1..=minutes {
        let due = started + Duration::from_secs(60 * minute);
        tokio::time::sleep_until(due.into()).await;
        let Some((resident, cpu)) = sample(pid) else {
            println!("scale-cli: the node is gone at minute {minute}");
            break;
        };
        let percent = (cpu - last_cpu) / 60.0 * 100.0;
        last_cpu = cpu;
        cpu_samples.push(percent);
        println!(
            "scale-cli: {minute:>3} {resident:>8.1} {:>7.1} {percent:>6.2}",
            resident * 1024.0 / count as f64
        );
    }
    let tail: Vec<f64> = cpu_samples.iter().rev().take(5).copied().collect();
    if let (Some((resident, _)), false) = (sample(pid), tail.is_empty()) {
        println!(
            "scale-cli: at the end {:.1} KiB per database ({resident:.1} MiB), {:.2}% of a core \
             over the last {} minutes",
            resident * 1024.0 / count as f64,
            tail.iter().sum::<f64>() / tail.len() as f64,
            tail.len()
        );
    }
    match start_up.await.expect("the start-up timer") {
        Some((heartbeat, all)) => println!(
            "scale-cli: first heartbeat {heartbeat:.1} s after start, all {} tasks started after \
             {all:.1} s",
            count * 3
        ),
        None => println!("scale-cli: the node did not report all its tasks"),
    }
    let asked = Instant::now();
    let status = Command::new(binary)
        .args(["status", &root_url])
        .env_remove("RUST_LOG")
        .output()
        .expect("sleet status runs");
    println!(
        "scale-cli: `sleet status` took {:.2} s (exit {:?})",
        asked.elapsed().as_secs_f64(),
        status.status.code()
    );
    // SAFETY: a signal to the child this bench started.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let _ = node.wait();
    let warnings = std::fs::read_to_string(root_dir.join("node.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .count();
    println!("scale-cli: the node logged {warnings} warnings or errors");
}
