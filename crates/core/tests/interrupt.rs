//! Ctrl-C and virtual time that stops: a run busy inside one task is stopped by its
//! progress callback, and a clock that no longer moves ends the run with an error naming
//! the likely cause. Guard timeouts only catch hangs; no test asserts a wall time.

mod common;

use common::within;
use reclaimsim_core::{sim, Error, Scenario};

/// usemem over a small area that stays resident: after the prefault every access is a
/// hit, so the task runs on inside one poll while nothing else is due.
fn busy_one_task(access_seq: u64) -> Scenario {
    Scenario::from_toml(&format!(
        r#"duration = "100ms"
sample_interval = "10ms"
[kernel]
memcg_flush_phase = "1900ms"
[costs]
access_seq = {access_seq}
[machine]
cpus = 1
memory_per_node = "64M"
[[workload]]
type = "usemem"
size = "1M"
prefault = true
repeat = 0
"#
    ))
    .unwrap()
}

#[test]
fn a_run_busy_inside_one_task_is_interrupted_by_its_progress_callback() {
    // Ticks come from inside the poll (work points), not only between polls: the
    // callback runs many times while the task polls only a few times.
    let (calls, polls) = within(300, || {
        let sc = busy_one_task(1);
        let mut calls = 0u64;
        let r = sim::run(&sc, &mut |_, _| {
            calls += 1;
            true
        })
        .unwrap();
        let polls = serde_json::to_value(&r).unwrap()["engine"]["polls"]
            .as_u64()
            .unwrap();
        (calls, polls)
    });
    // 10^8 accesses of 1 ns: a tick every 2^14 accesses, about 6,100 of them; the task
    // yields only to the sampler, every 10 ms.
    assert!(polls < 200, "{polls} polls");
    assert!(
        (5_000..=7_000).contains(&calls),
        "{calls} calls, {polls} polls"
    );
    // And returning false stops it at the first tick.
    let e = within(300, || {
        let sc = busy_one_task(1);
        let mut calls = 0;
        let r = sim::run(&sc, &mut |_, _| {
            calls += 1;
            false
        });
        (r.map(|_| ()), calls)
    });
    assert_eq!(e, (Err(Error::Interrupted), 1));
}

#[test]
fn virtual_time_that_stops_is_an_error_naming_the_zero_cost() {
    // access_seq = 0: every hit takes no time and the task never reaches a sync point.
    let e = within(300, || {
        sim::run(&busy_one_task(0), &mut |_, _| true).map(|_| ())
    });
    match e {
        Err(Error::Scenario { path, msg, .. }) => {
            assert_eq!(path, "scenario.costs");
            assert!(
                msg.contains("stopped advancing") && msg.contains("costs.access_seq = 0"),
                "{msg}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Ctrl-C still works there.
    let e = within(300, || {
        sim::run(&busy_one_task(0), &mut |_, _| false).map(|_| ())
    });
    assert_eq!(e, Err(Error::Interrupted));
}
