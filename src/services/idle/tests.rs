//! Tests of the idle policy and of `run_while_busy` against real
//! stores (in memory) and real SlateDB databases.

use super::*;

const PHASES: [Phase; 3] = [Phase::Idle, Phase::Waking, Phase::Busy];
const LOOKS: [Look; 4] = [Look::Quiet, Look::Moved, Look::Activity, Look::Failed];

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Every phase, look, quiet time and interval around the thresholds.
fn every_case(
    settings: &IdleSettings,
    mut check: impl FnMut(Phase, Look, Duration, Duration, Decision),
) {
    let around = |d: Duration| {
        [
            Duration::ZERO,
            d / 2,
            d.saturating_sub(secs(1)),
            d,
            d + secs(1),
            d * 10,
        ]
    };
    for phase in PHASES {
        for look in LOOKS {
            for quiet in around(settings.sleep_after) {
                for last in around(settings.probe_max) {
                    check(
                        phase,
                        look,
                        quiet,
                        last,
                        decide(phase, look, quiet, last, settings),
                    );
                }
            }
        }
    }
}

#[test]
fn services_run_exactly_when_the_phase_says_busy_or_waking() {
    every_case(&IdleSettings::default(), |_, _, _, _, d| {
        assert_eq!(d.run_services, d.phase != Phase::Idle, "{d:?}");
    });
}

#[test]
fn activity_always_runs_the_services() {
    every_case(&IdleSettings::default(), |phase, look, _, _, d| {
        if look == Look::Activity {
            assert!(d.run_services, "{phase:?}: {d:?}");
        }
    });
}

#[test]
fn a_failed_or_moved_look_never_starts_or_stops_services() {
    every_case(&IdleSettings::default(), |phase, look, _, _, d| {
        if look == Look::Failed || look == Look::Moved {
            let was_running = phase != Phase::Idle;
            assert_eq!(d.run_services, was_running, "{phase:?}: {d:?}");
        }
    });
}

#[test]
fn only_a_quiet_look_after_sleep_after_stops_a_busy_database() {
    let settings = IdleSettings::default();
    every_case(&settings, |phase, look, quiet, _, d| {
        let stops = phase != Phase::Idle && !d.run_services;
        let may_stop = phase == Phase::Busy && look == Look::Quiet && quiet >= settings.sleep_after;
        assert_eq!(stops, may_stop, "{phase:?} {look:?} quiet {quiet:?}: {d:?}");
    });
}

#[test]
fn waking_always_becomes_busy() {
    every_case(&IdleSettings::default(), |phase, _, _, _, d| {
        if phase == Phase::Waking {
            assert_eq!(d.phase, Phase::Busy);
        }
    });
}

#[test]
fn looks_stay_within_the_probe_bounds_and_back_off_only_while_quiet() {
    let settings = IdleSettings::default();
    every_case(&settings, |phase, look, _, last, d| {
        assert!(
            d.next_look >= settings.probe_min && d.next_look <= settings.probe_max,
            "{d:?}"
        );
        if d.phase != Phase::Idle || look != Look::Quiet || phase != Phase::Idle {
            assert_eq!(d.next_look, settings.probe_min, "{phase:?} {look:?}: {d:?}");
        } else {
            assert!(
                d.next_look >= last.min(settings.probe_max),
                "{last:?}: {d:?}"
            );
        }
    });
}

#[test]
fn an_idle_database_backs_off_to_the_probe_budget() {
    let settings = IdleSettings::default();
    let mut interval = settings.probe_min;
    let mut looks = Vec::new();
    for _ in 0..6 {
        let d = decide(Phase::Idle, Look::Quiet, secs(3600), interval, &settings);
        interval = d.next_look;
        looks.push(interval.as_secs());
    }
    assert_eq!(looks, [10, 20, 20, 20, 20, 20]);
}

/// Default settings and `min_age`s: every look of an idle database by
/// all three services, LISTs included, stays within 5 a minute.
#[test]
fn an_idle_database_stays_within_five_requests_a_minute() {
    let settings = IdleSettings::default();
    let min_age = Duration::from_secs(300);
    let services = [
        settings.for_coordinator(min_age),
        settings.for_workers(min_age),
        settings.for_gc(Duration::from_secs(360), min_age),
    ];
    let per_minute: f64 = services
        .iter()
        .map(|s| {
            assert!(!s.list_always, "{s:?}");
            60.0 / s.settings.probe_max.as_secs_f64()
        })
        .sum();
    assert!(per_minute <= 4.5, "{per_minute} looks a minute");
}

#[test]
fn a_short_min_age_makes_every_look_list_and_gc_look_more_often() {
    let settings = IdleSettings::default();
    let short = Duration::from_secs(10);
    assert!(settings.for_coordinator(short).list_always);
    assert!(settings.for_workers(short).list_always);
    let gc = settings.for_gc(Duration::from_secs(20), short);
    assert_eq!(gc.settings.probe_max, Duration::from_secs(5));
    assert!(
        !settings
            .for_coordinator(Duration::from_secs(60))
            .list_always
    );
}

#[test]
fn a_nudge_brings_looks_half_a_second_apart_until_the_work_shows() {
    let probe_min = secs(5);
    let mut since = Duration::ZERO;
    let mut waits = Vec::new();
    while let Some(wait) = next_follow_up(Look::Quiet, Some(since), probe_min) {
        waits.push(wait.as_millis());
        since += wait;
    }
    assert_eq!(
        waits, [500; 9],
        "the nudged look and nine more within probe_min"
    );
    let found = next_follow_up(Look::Activity, Some(secs(1)), probe_min);
    assert_eq!(found, None, "the work showed");
    let moved = next_follow_up(Look::Moved, Some(secs(1)), probe_min);
    assert_eq!(
        moved, None,
        "the database moved: the idle cadence takes over"
    );
    assert_eq!(next_follow_up(Look::Quiet, None, probe_min), None);
    assert_eq!(
        next_follow_up(Look::Failed, Some(Duration::ZERO), probe_min),
        Some(FOLLOW_UP),
        "a failed look is followed up too"
    );
}

/// A nudged service finds work that shows 2.2 s after the nudge (its
/// coordinator slow to queue the job) within half a second plus the
/// look grid: a real manifest reaching the trigger, on paused time. The
/// control: with the former follow-ups 0.5, 1, 2 and 4 s apart, the
/// look that found it came 4.25 s after the nudge, 2.05 s after the
/// work showed (an event wake took 5.6 s in a full run).
#[tokio::test]
async fn work_that_shows_late_after_a_nudge_is_found_within_half_a_second() {
    use crate::fleet::database::DatabaseHandle;
    use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
    use std::sync::Arc;
    // A database before and after its first L0 SST, made for real.
    let made: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let db = slatedb::Db::open("db", made.clone()).await.unwrap();
    db.close().await.unwrap();
    let manifests = |store: Arc<dyn ObjectStore>| async move {
        let prefix = object_store::path::Path::from("db/manifest");
        let mut listed: Vec<_> =
            futures::TryStreamExt::try_collect::<Vec<_>>(store.list(Some(&prefix)))
                .await
                .unwrap()
                .into_iter()
                .map(|meta| meta.location)
                .collect();
        listed.sort();
        listed
    };
    let before = manifests(made.clone()).await;
    let db = slatedb::Db::open("db", made.clone()).await.unwrap();
    db.put(b"key", b"value").await.unwrap();
    db.close().await.unwrap();
    let after = manifests(made.clone()).await;
    let flushed = made
        .get(after.last().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let watched: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    for location in &before {
        let bytes = made.get(location).await.unwrap().bytes().await.unwrap();
        watched
            .put(location, PutPayload::from(bytes))
            .await
            .unwrap();
    }
    let last_id =
        crate::mirror::layout::parse_manifest_file(before.last().unwrap().filename().unwrap())
            .unwrap();
    let next_location = object_store::path::Path::from(format!(
        "db/{}",
        crate::mirror::layout::manifest_name(last_id + 1)
    ));

    tokio::time::pause();
    let handle = DatabaseHandle::from_parts("memory:///db".into(), watched.clone(), "db".into());
    let mut watch =
        watch::VersionWatch::new(handle, watch::Watched::Manifest { trigger: 1 }, false);
    let settings = IdleSettings {
        probe_min: secs(5),
        ..IdleSettings::default()
    };
    let nudge = tokio::sync::Notify::new();
    let signals = Signals {
        nudged: Some(&nudge),
        ..Signals::default()
    };
    let token = tokio_util::sync::CancellationToken::new();
    let started = std::sync::Mutex::new(None);
    let vet = || async { Ok::<(), ()>(()) };
    let service = |_| {
        *started.lock().unwrap() = Some(tokio::time::Instant::now());
        async { Ok::<(), ()>(()) }
    };
    let run = run_while_busy(&mut watch, &settings, &token, &signals, vet, service);
    let work = async {
        tokio::time::sleep(secs(1)).await;
        nudge.notify_one();
        tokio::time::sleep(Duration::from_millis(2200)).await;
        watched
            .put(&next_location, PutPayload::from(flushed))
            .await
            .unwrap();
        tokio::time::Instant::now()
    };
    let (ran, showed) = tokio::join!(run, work);
    ran.unwrap();
    let found = started.lock().unwrap().expect("the service started") - showed;
    assert!(
        found <= Duration::from_millis(750),
        "found {found:?} after the work showed"
    );
}

/// The busy look runs beside the service, not instead of it: with
/// every look slowed to 300 ms and a service of 20 short steps, the
/// service finishes within a look or two. Awaited in a `select!`
/// branch, the look held the service still, which then took one step
/// per look (on the S3 server a starting worker took 23 s to build).
#[tokio::test]
async fn a_slow_busy_look_does_not_hold_the_service_up() {
    use crate::fleet::database::DatabaseHandle;
    use crate::testing::{Faults, FaultyStore};
    use std::sync::Arc;
    let faults = Faults::new();
    faults.slow_down("manifest", Duration::from_millis(300));
    let store = Arc::new(FaultyStore::new(
        Arc::new(object_store::memory::InMemory::new()),
        faults.clone(),
    ));
    let db = DatabaseHandle::from_parts("memory:///db".into(), store, "db".into());
    let mut watch = watch::VersionWatch::new(db, watch::Watched::Changes, false);
    // Disabled: busy from the first look, looking every `probe_min`.
    let settings = IdleSettings {
        enabled: false,
        probe_min: Duration::from_millis(10),
        ..IdleSettings::default()
    };
    let token = tokio_util::sync::CancellationToken::new();
    let looks_while_serving = Arc::new(std::sync::Mutex::new(None));
    let vet = || async { Ok::<(), ()>(()) };
    let service = |_| {
        let (faults, looks) = (faults.clone(), looks_while_serving.clone());
        async move {
            let before = faults.requests();
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            *looks.lock().unwrap() = Some(faults.requests() - before);
            Ok(())
        }
    };
    let signals = Signals::default();
    run_while_busy(&mut watch, &settings, &token, &signals, vet, service)
        .await
        .unwrap();
    let looks = looks_while_serving
        .lock()
        .unwrap()
        .expect("the service ran");
    assert!(
        looks <= 3,
        "{looks} look requests while the service took 20 steps"
    );
}

/// While events flow an idle look LISTs (looks that far apart could
/// miss a version written and collected between them), but the busy
/// looks, `probe_min` apart, HEAD the next version. The control: with
/// the busy looks left LISTing, the service saw a LIST per look.
#[tokio::test]
async fn busy_looks_head_while_events_flow() {
    use crate::fleet::database::DatabaseHandle;
    use crate::testing::{CountingStore, Op};
    use std::sync::Arc;
    let counting = Arc::new(CountingStore::new(Arc::new(
        object_store::memory::InMemory::new(),
    )));
    let db = DatabaseHandle::from_parts("memory:///db".into(), counting.clone(), "db".into());
    let mut watch = watch::VersionWatch::new(db, watch::Watched::Changes, false);
    let settings = IdleSettings {
        probe_min: Duration::from_millis(10),
        ..IdleSettings::default()
    };
    let flow = flow::EventFlow::default();
    flow.set(Some(secs(600)));
    let signals = Signals {
        flow: Some(&flow),
        ..Signals::default()
    };
    let token = tokio_util::sync::CancellationToken::new();
    let busy_looks = Arc::new(std::sync::Mutex::new(None));
    let service = |_| {
        let (counting, looks) = (counting.clone(), busy_looks.clone());
        async move {
            let before = (counting.count(Op::List), counting.count(Op::Head));
            tokio::time::sleep(Duration::from_millis(200)).await;
            *looks.lock().unwrap() = Some((
                counting.count(Op::List) - before.0,
                counting.count(Op::Head) - before.1,
            ));
            Ok(())
        }
    };
    let vet = || async { Ok::<(), ()>(()) };
    run_while_busy(&mut watch, &settings, &token, &signals, vet, service)
        .await
        .unwrap();
    let (lists, heads) = busy_looks.lock().unwrap().expect("the service ran");
    assert!(heads >= 3, "{heads} HEADs while busy");
    assert_eq!(lists, 0, "{lists} LISTs while busy ({heads} HEADs)");
}

/// A busy look does not wait for the node's look permit: with every
/// permit held elsewhere (idle looks queued on a slow store), the
/// busy looks still run, and the service sleeps on time. The control:
/// with busy looks taking a permit, none ran and the service never
/// slept.
#[tokio::test]
async fn busy_looks_need_no_look_permit() {
    use crate::fleet::database::DatabaseHandle;
    use crate::testing::{CountingStore, Op};
    use std::sync::Arc;
    let counting = Arc::new(CountingStore::new(Arc::new(
        object_store::memory::InMemory::new(),
    )));
    let permits = Arc::new(tokio::sync::Semaphore::new(1));
    let db = DatabaseHandle::from_parts("memory:///db".into(), counting.clone(), "db".into())
        .with_look_limit(permits.clone());
    let mut watch = watch::VersionWatch::new(db, watch::Watched::Changes, false);
    let settings = IdleSettings {
        probe_min: Duration::from_millis(10),
        sleep_after: Duration::from_millis(300),
        ..IdleSettings::default()
    };
    let token = tokio_util::sync::CancellationToken::new();
    let slept = Arc::new(tokio::sync::Notify::new());
    let service = |child: tokio_util::sync::CancellationToken| {
        let (permits, slept) = (permits.clone(), slept.clone());
        async move {
            // The first look is done: from now on every permit is
            // someone else's.
            let _all = permits.acquire_owned().await.unwrap();
            child.cancelled().await;
            slept.notify_one();
            Ok(())
        }
    };
    let vet = || async { Ok::<(), ()>(()) };
    let signals = Signals::default();
    let heads_before = counting.count(Op::Head);
    let run = run_while_busy(&mut watch, &settings, &token, &signals, vet, service);
    tokio::select! {
        biased;
        _ = run => panic!("the task ended"),
        () = slept.notified() => {}
        () = tokio::time::sleep(Duration::from_secs(5)) => {
            panic!(
                "the service never slept: {} busy looks",
                counting.count(Op::Head) - heads_before
            )
        }
    }
}

/// The first look's sighting of a database is not vetted (the task
/// checked as it started); a new manifest after it is. On a real
/// SlateDB database: reopening its writer writes a manifest. The
/// control: vetting every move, the first assertion fails (one vet
/// before anything changed).
#[tokio::test]
async fn only_a_change_after_the_first_sighting_is_vetted() {
    use crate::fleet::database::DatabaseHandle;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let store: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let reopen = || async {
        let db = slatedb::Db::open("db", store.clone()).await.unwrap();
        db.close().await.unwrap();
    };
    reopen().await;
    let db = DatabaseHandle::from_parts("memory:///db".into(), store.clone(), "db".into());
    let mut watch = watch::VersionWatch::new(db, watch::Watched::Manifest { trigger: 100 }, false);
    let settings = IdleSettings {
        probe_min: Duration::from_millis(10),
        probe_max: Duration::from_millis(20),
        ..IdleSettings::default()
    };
    let token = tokio_util::sync::CancellationToken::new();
    let vets = Arc::new(AtomicUsize::new(0));
    let vet = || {
        vets.fetch_add(1, Ordering::SeqCst);
        async { Ok::<(), ()>(()) }
    };
    let service = |_| async { Ok::<(), ()>(()) };
    let signals = Signals::default();
    let run = run_while_busy(&mut watch, &settings, &token, &signals, vet, service);
    let check = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(vets.load(Ordering::SeqCst), 0, "vetted before any change");
        reopen().await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while vets.load(Ordering::SeqCst) == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the new manifest was never vetted"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        token.cancel();
    };
    let (ran, ()) = tokio::join!(run, check);
    ran.unwrap();
}

#[test]
fn a_look_goes_on_the_grid_at_most_one_step_late() {
    let origin = tokio::time::Instant::now();
    let grid = Duration::from_millis(100);
    let ms = |n: u64| origin + Duration::from_millis(n);
    assert_eq!(on_grid(ms(0), origin, grid), ms(0));
    assert_eq!(on_grid(ms(1), origin, grid), ms(100));
    assert_eq!(on_grid(ms(100), origin, grid), ms(100));
    assert_eq!(on_grid(ms(20_050), origin, grid), ms(20_100));
    let before = origin - Duration::from_millis(30);
    assert_eq!(
        on_grid(before, origin, grid),
        before,
        "before the origin: as it was"
    );
    for n in (0..1000).step_by(7) {
        let put = on_grid(ms(n), origin, grid);
        assert!(put >= ms(n) && put < ms(n) + grid, "{n} ms");
    }
}

#[test]
fn disabled_always_runs_the_services() {
    let settings = IdleSettings {
        enabled: false,
        ..IdleSettings::default()
    };
    every_case(&settings, |_, _, _, _, d| {
        assert_eq!(d.phase, Phase::Busy);
        assert!(d.run_services);
    });
}
