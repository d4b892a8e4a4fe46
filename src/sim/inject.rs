//! The fault mix at work: one fault at a time, chosen by the seed.

use super::store::FaultLevels;
use super::world::{SimNode, World, database_url};
use super::{Fault, FaultMix};

/// Injects one fault of the mix, chosen by the seed.
pub(super) async fn inject(world: &mut World, nodes: &mut [SimNode], mix: &FaultMix) {
    let faults: Vec<Fault> = mix.0.iter().copied().collect();
    let fault = faults[world.draw(faults.len() as u64) as usize];
    let which = world.draw(nodes.len() as u64) as usize;
    match fault {
        Fault::Crash => {
            if !crash(world, &mut nodes[which]).await {
                world.start(&mut nodes[which]);
            }
        }
        Fault::Pause => {
            if let Some(verb) = nodes[which].toggle_pause(&world.timings) {
                world.note(format!("{verb} {}", nodes[which].id));
            }
        }
        Fault::Errors | Fault::LostReplies | Fault::Slow => {
            let mut levels = FaultLevels::default();
            match fault {
                Fault::Errors => levels.error_per_mille = 20 + world.draw(180),
                Fault::LostReplies => levels.lost_per_mille = 10 + world.draw(90),
                _ => levels.max_latency_ms = 200 + world.draw(4_800),
            }
            world.store.set_levels(levels);
            world.note(format!("levels {levels:?}"));
        }
        Fault::Skew => {
            // Within the store check's default bound, ahead or behind.
            let millis = world.draw(8_000) as i64 - 4_000;
            nodes[which].skew.set(millis);
            world.note(format!("skew {} {millis:+} ms", nodes[which].id));
        }
        Fault::Config => {
            world.narrowed = !world.narrowed;
            world.write_config().await;
            world.note(format!("config narrowed={}", world.narrowed));
        }
        Fault::WriterCrash => {
            let indexes: Vec<usize> = world.apps.keys().copied().collect();
            if indexes.is_empty() {
                return;
            }
            let index = indexes[world.draw(indexes.len() as u64) as usize];
            world.apps[&index].crash();
            world.note(format!("crash the writer of {}", database_url(index)));
        }
        Fault::Partition => {
            if let Some(run) = &nodes[which].run {
                let cut = run.pause.toggle_root_cut();
                let verb = if cut { "cut" } else { "heal" };
                world.note(format!("{verb} {} from the fleet root", nodes[which].id));
            }
        }
        Fault::Registry => {
            if world.draw(2) == 0 && world.databases.len() > 1 {
                let present: Vec<usize> = world.databases.keys().copied().collect();
                let index = present[world.draw(present.len() as u64) as usize];
                world.remove(index).await;
            } else {
                let index = world.next_database;
                world.next_database += 1;
                world.register(index).await;
            }
        }
    }
}

/// Crashes `node` if it runs; false if it was down already.
pub(super) async fn crash(world: &World, node: &mut SimNode) -> bool {
    let Some(run) = node.run.take() else {
        return false;
    };
    // A dead process's requests never come: SlateDB's tasks, which
    // aborting the node's task does not end, wait on this gate for good.
    run.pause.pause();
    run.handle.abort();
    let _ = run.handle.await;
    node.paused_since = None;
    world.note(format!("crash {}", node.id));
    true
}
