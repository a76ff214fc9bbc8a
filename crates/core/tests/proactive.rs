//! Proactive reclaim (memory.reclaim): user_proactive_reclaim's loop on hand-built lists
//! (reclaimsim_core::fixture), its counters, and the `[[reclaim]]` schedule end to end.
//! Expected values follow the kernel's arithmetic (derivations in the comments).

mod common;
use reclaimsim_core::engine::Site;
use reclaimsim_core::fixture::run_probe;
use reclaimsim_core::mm::memcontrol::{Errno, ProactiveCall, ProactiveReclaim};
use reclaimsim_core::mm::vmscan::MEMCG_RECLAIM_MAY_SWAP;
use reclaimsim_core::mm::vmstat::VmEvent;
use reclaimsim_core::sim::Sim;
use reclaimsim_core::Scenario;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;

/// The memcg /a (id 1).
const A: u16 = 1;

/// One node of `mem`, optional zram swap, the cgroup /a, a workload that never starts.
fn machine(mem: &str, swap: Option<&str>) -> Rc<Sim> {
    reclaimsim_core::fixture::one_node_machine(mem, swap, "")
}

fn event(s: &Sim, ev: VmEvent) -> u64 {
    s.mm.borrow().events[ev as usize]
}

fn memcg_event(s: &Sim, m: u16, ev: VmEvent) -> u64 {
    s.mm.borrow().memcgs[m as usize].vm_events[ev as usize]
}

/// Write `buf` to `memcg`'s memory.reclaim from a task on CPU 0.
fn write(s: &Rc<Sim>, buf: &'static str, memcg: u16) -> ProactiveReclaim {
    let out = Rc::new(RefCell::new(None));
    let o2 = out.clone();
    run_probe(s, 0, 0, move |s| async move {
        *o2.borrow_mut() = Some(s.user_proactive_reclaim(buf, memcg).await);
    });
    out.take().unwrap()
}

fn calls(batches: &[u64], reclaimed: &[u64]) -> Vec<ProactiveCall> {
    batches
        .iter()
        .zip(reclaimed)
        .map(|(&batch, &reclaimed)| ProactiveCall {
            batch,
            reclaimed,
            drained: false,
        })
        .collect()
}

#[test]
fn each_call_asks_for_a_quarter_of_what_is_left() {
    let s = machine("4G", None);
    s.fixture_file_folios(A, 0, 1 << 19, 0);
    let out = write(&s, "1M", A);
    // 1M = 256 pages. No swap: SCAN_FILE; clean unreferenced file folios, all reclaimable.
    // At DEF_PRIORITY the inactive file target is size >> 12 (127 or 128 here), scanned in
    // chunks of 32 until the call's goal max(batch, 32) is met:
    //   batch (256 - 0) / 4 = 64   -> two chunks, 64   (total 64)
    //   batch (256 - 64) / 4 = 48  -> two chunks, 64   (128)
    //   batch 128 / 4 = 32         -> one chunk, 32    (160)
    //   batch 96 / 4 = 24 -> 32    -> 32               (192)
    //   batch 64 / 4 = 16 -> 32    -> 32               (224)
    //   batch 32 / 4 = 8 -> 32     -> 32               (256: done)
    assert_eq!(out.nr_to_reclaim, 256);
    assert_eq!(
        out.calls,
        calls(&[64, 48, 32, 24, 16, 8], &[64, 64, 32, 32, 32, 32])
    );
    assert_eq!(out.nr_reclaimed, 256);
    assert_eq!(out.result, Ok(()));
    // Counted as proactive reclaim in the memcg; memcg reclaim (the target is set) is not
    // counted in the global pgscan/pgsteal_<reclaimer> items, only in pgscan_anon/file.
    assert_eq!(memcg_event(&s, A, VmEvent::PgscanProactive), 256);
    assert_eq!(memcg_event(&s, A, VmEvent::PgstealProactive), 256);
    assert_eq!(memcg_event(&s, A, VmEvent::PgscanDirect), 0);
    assert_eq!(event(&s, VmEvent::PgscanProactive), 0);
    assert_eq!(event(&s, VmEvent::PgstealProactive), 0);
    assert_eq!(event(&s, VmEvent::PgscanFile), 256);
    assert_eq!(event(&s, VmEvent::PgstealFile), 256);
}

#[test]
fn a_large_request_starts_with_a_quarter_batch() {
    let s = machine("4G", None);
    s.fixture_file_folios(A, 0, 1 << 19, 0);
    let out = write(&s, "256M", A);
    // 256M = 65536 pages: the first batch is 16384. With 2^19 folios the first call needs
    // several priorities; whatever each call gets, the next batch is a quarter of the rest.
    assert_eq!(out.nr_to_reclaim, 65536);
    assert_eq!(out.calls[0].batch, 16384);
    let mut done = 0;
    for c in &out.calls {
        assert_eq!(c.batch, (65536 - done) / 4);
        // Each call reclaims at least its goal (SWAP_CLUSTER_MAX chunks overshoot).
        assert!(c.reclaimed >= c.batch.max(32), "{c:?}");
        done += c.reclaimed;
    }
    assert_eq!(done, out.nr_reclaimed);
    assert!(out.nr_reclaimed >= 65536);
    // The last call was needed: before it, less than the request was reclaimed.
    assert!(done - out.calls.last().unwrap().reclaimed < 65536);
    assert_eq!(out.result, Ok(()));
}

#[test]
fn nothing_reclaimable_fails_with_eagain_after_the_retries() {
    let s = machine("1G", None);
    let out = write(&s, "1M", A);
    // Every call reclaims nothing: 16 retries are used up, then lru_add_drain_all() runs
    // before the 17th call, whose failure returns -EAGAIN. The batch stays 256 / 4.
    let mut want = calls(&[64; 17], &[0; 17]);
    want[16].drained = true;
    assert_eq!(out.calls, want);
    assert_eq!(out.result, Err(Errno::Eagain));
    assert_eq!(out.nr_reclaimed, 0);
}

#[test]
fn the_drain_before_the_last_retry_puts_batched_folios_on_the_lru() {
    let s = machine("1G", None);
    let (_, pfns) = s.fixture_file_folios(A, 0, 16, 0);
    // The 16 folios wait in CPU 2's lru_add batch: reclaim cannot see them.
    s.fixture_to_lru_add_batch(2, &pfns);
    let out = write(&s, "64K", A);
    // 64K = 16 pages, batch 16 / 4 = 4 (goal 32). 16 empty calls use up the retries; the
    // drain then moves the 16 folios to /a's inactive file list (CPU 2's drain work takes
    // the lru_lock once: one run of one lruvec), and the 17th call scans down the
    // priorities (16 >> 4 = 1, then 1, 3, 5, 6 at priorities 3..0) and reclaims all 16.
    let mut want = calls(&[4; 17], &[0; 17]);
    want[16] = ProactiveCall {
        batch: 4,
        reclaimed: 16,
        drained: true,
    };
    assert_eq!(out.calls, want);
    assert_eq!(out.result, Ok(()));
    assert!(s.mm.borrow().batches[2].is_empty());
    let drains: u64 =
        s.e.lock_stats()
            .iter()
            .filter(|(_, site, _)| *site == Site::LruAddDrainCpu)
            .map(|(_, _, st)| st.acquisitions)
            .sum();
    assert_eq!(drains, 1);
}

#[test]
fn swappiness_max_reclaims_anon_only_and_zero_file_only() {
    for (buf, anon, file) in [
        ("128K swappiness=max", 32, 0),
        ("128K swappiness=0", 0, 32),
        // The memcg's swappiness (60): plenty of inactive file and no refaults, so
        // cache_trim_mode scans file only; "max" overrides it (tested before it).
        ("128K", 0, 32),
    ] {
        let s = machine("2G", Some("1G"));
        s.fixture_anon_folios(A, 0, 1 << 17, false, 0);
        s.fixture_file_folios(A, 0, 1 << 17, 0);
        let out = write(&s, buf, A);
        // 32 pages, batch 8 -> goal 32; each type's inactive target at priority 12 is
        // 2^17 >> 12 = 32: one chunk of the scanned type, all reclaimed (the anon folios
        // are unreferenced: to zram and freed).
        assert_eq!(out.calls, calls(&[8], &[32]), "{buf}");
        assert_eq!(event(&s, VmEvent::PgscanAnon), anon, "{buf}");
        assert_eq!(event(&s, VmEvent::PgscanFile), file, "{buf}");
        assert_eq!(event(&s, VmEvent::Pswpout), anon, "{buf}");
        assert_eq!(memcg_event(&s, A, VmEvent::PgstealProactive), 32, "{buf}");
    }
}

#[test]
fn proactive_and_limit_reclaim_count_under_their_own_names() {
    let s = machine("4G", None);
    s.fixture_file_folios(A, 0, 1 << 18, 0);
    // Limit reclaim of 32 pages (as try_charge_memcg asks): pgscan_direct in the memcg.
    // Target 2^18 >> 12 = 64 at priority 12: one chunk of 32 meets the goal.
    run_probe(&s, 0, 0, move |s| async move {
        s.try_to_free_mem_cgroup_pages(A, 32, MEMCG_RECLAIM_MAY_SWAP, None)
            .await;
    });
    assert_eq!(memcg_event(&s, A, VmEvent::PgscanDirect), 32);
    assert_eq!(memcg_event(&s, A, VmEvent::PgstealDirect), 32);
    assert_eq!(memcg_event(&s, A, VmEvent::PgscanProactive), 0);
    // memory.reclaim of 32 pages (batch 8, goal 32): (2^18 - 32) >> 12 = 63, one chunk.
    let out = write(&s, "128K", A);
    assert_eq!(out.calls, calls(&[8], &[32]));
    assert_eq!(memcg_event(&s, A, VmEvent::PgscanDirect), 32);
    assert_eq!(memcg_event(&s, A, VmEvent::PgscanProactive), 32);
    assert_eq!(memcg_event(&s, A, VmEvent::PgstealProactive), 32);
    // Neither is in the global per-reclaimer items (cgroup reclaim).
    assert_eq!(event(&s, VmEvent::PgscanDirect), 0);
    assert_eq!(event(&s, VmEvent::PgscanProactive), 0);
    assert_eq!(event(&s, VmEvent::PgscanFile), 64);
    // Limit reclaim adds to the direct-reclaim time; the proactive write does not.
    assert_eq!(s.stats.borrow().direct_reclaims, 1);
}

#[test]
fn root_memory_reclaim_walks_the_whole_tree_as_cgroup_reclaim() {
    let s = machine("4G", None);
    s.fixture_file_folios(A, 0, 1 << 17, 0);
    let out = write(&s, "128K", 0);
    // Target: the root memcg. The walk visits / (nothing on its lists) then /a, whose
    // inactive file target at priority 12 is 2^17 >> 12 = 32: one chunk, 32 reclaimed.
    assert_eq!(out.calls, calls(&[8], &[32]));
    // The folios are /a's: its lruvec's memcg counts them; the root's memory.stat shows
    // them hierarchically. A root target is still a target: the global pgscan_proactive
    // (6.18: only !cgroup_reclaim) stays 0.
    assert_eq!(memcg_event(&s, A, VmEvent::PgscanProactive), 32);
    assert_eq!(memcg_event(&s, 0, VmEvent::PgscanProactive), 0);
    assert_eq!(event(&s, VmEvent::PgscanProactive), 0);
    assert_eq!(event(&s, VmEvent::PgscanFile), 32);
    // And it is not global reclaim: no allocation stall is counted.
    assert_eq!(event(&s, VmEvent::Allocstall), 0);
}

#[test]
fn mglru_counts_memory_reclaim_as_proactive_too() {
    for target in [A, 0] {
        let s = reclaimsim_core::fixture::one_node_machine("4G", None, "lru = \"mglru\"");
        s.fixture_file_folios(A, 0, 1 << 17, 0);
        let out = write(&s, "128K", target);
        // memcg reclaim (lru_gen_shrink_lruvec) for /a, root reclaim (lru_gen_shrink_node)
        // for /: either way evict_folios counts what it scans and reclaims under the
        // proactive items of /a's memcg, and not in the global per-reclaimer items.
        assert_eq!(out.result, Ok(()), "target {target}");
        assert!(out.nr_reclaimed >= 32, "target {target}");
        assert_eq!(
            memcg_event(&s, A, VmEvent::PgstealProactive),
            out.nr_reclaimed,
            "target {target}"
        );
        assert_eq!(
            memcg_event(&s, A, VmEvent::PgscanProactive),
            event(&s, VmEvent::PgscanFile),
            "target {target}"
        );
        assert_eq!(memcg_event(&s, A, VmEvent::PgscanDirect), 0);
        assert_eq!(event(&s, VmEvent::PgscanProactive), 0);
        assert_eq!(event(&s, VmEvent::PgstealProactive), 0);
    }
}

#[test]
fn invalid_buffers_are_refused_without_reclaim() {
    let s = machine("1G", None);
    s.fixture_file_folios(A, 0, 1024, 0);
    for buf in ["", "1M swappiness=201", "1MB", "1M swappiness=maxx"] {
        let out = write(&s, buf, A);
        assert_eq!(out.result, Err(Errno::Einval), "{buf:?}");
        assert!(out.calls.is_empty(), "{buf:?}");
    }
    // Less than a page asks for nothing: success without a call.
    let out = write(&s, "4095", A);
    assert_eq!((out.result, out.calls.len()), (Ok(()), 0));
    assert_eq!(event(&s, VmEvent::PgscanFile), 0);
}

// ---------------------------------------------------------------------------------------
// The [[reclaim]] schedule
// ---------------------------------------------------------------------------------------

/// A run of `duration` whose one workload (in /a) starts in the run's last nanosecond
/// (a start must come before the end): the schedules' writes find /a empty.
fn schedule_scenario(duration: &str, reclaim: &str, cpus: u32) -> String {
    let last = serde_json::from_value::<reclaimsim_core::scenario::Dur>(duration.into())
        .unwrap()
        .0
        - 1;
    format!(
        r#"
duration = "{duration}"
[machine]
cpus = {cpus}
memory_per_node = "1G"
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "4K"
start = {last}
{reclaim}
"#
    )
}

fn run(t: &str) -> Value {
    common::run_checked_json(t)
}

/// (start, duration) of each logged write of schedule `i`.
fn starts(r: &Value, i: usize) -> Vec<(u64, u64)> {
    r["proactive"]["schedules"][i]["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w[0].as_u64().unwrap(), w[1].as_u64().unwrap()))
        .collect()
}

#[test]
fn the_schedule_writes_times_times_at_at_plus_k_every() {
    let r = run(&schedule_scenario(
        "10s",
        r#"
[[reclaim]]
cgroup = "/a"
at = "1s"
every = "2s"
times = 3
bytes = "1M"
"#,
        2,
    ));
    let p = &r["proactive"];
    // Nothing to reclaim in /a: each write makes 17 calls and fails quickly.
    let s: Vec<u64> = starts(&r, 0).iter().map(|w| w.0).collect();
    assert_eq!(s, [1_000_000_000, 3_000_000_000, 5_000_000_000]);
    assert_eq!(p["writes"], 3);
    assert_eq!(p["failures"], 3);
    assert_eq!(p["requested_bytes"], 3 << 20);
    assert_eq!(p["reclaimed_bytes"], 0);
    let sch = &p["schedules"][0];
    assert_eq!(sch["buffer"], "1048576");
    assert_eq!(sch["in_flight_since_ns"], Value::Null);
    for w in sch["log"].as_array().unwrap() {
        assert_eq!(w[4], 17);
        assert_eq!(w[5], "-EAGAIN");
    }
    // The writer sits on CPU 1 (the workload's task takes CPU 0): a scenario with no
    // spare CPU is refused (see the validation test).
}

#[test]
fn a_late_write_delays_the_next_which_follows_back_to_back() {
    let r = run(&schedule_scenario(
        "10s",
        r#"
[[reclaim]]
cgroup = "/"
at = "2s"
every = 1
times = 4
bytes = "8K"
swappiness = "max"
"#,
        2,
    ));
    let w = starts(&r, 0);
    assert_eq!(w.len(), 4);
    assert_eq!(w[0].0, 2_000_000_000);
    // Each write takes longer than 1 ns, so each next one starts when the last returns.
    for k in 1..4 {
        assert!(w[k - 1].1 > 1);
        assert_eq!(w[k].0, w[k - 1].0 + w[k - 1].1);
    }
    assert_eq!(
        r["proactive"]["schedules"][0]["buffer"],
        "8192 swappiness=max"
    );
}

#[test]
fn writes_due_after_the_end_are_not_made() {
    let r = run(&schedule_scenario(
        "10s",
        r#"
[[reclaim]]
at = "1s"
every = "4s"
times = 10
bytes = "4K"
"#,
        2,
    ));
    // Due at 1, 5, 9, 13, ... s: three fall within the 10 s run.
    let s: Vec<u64> = starts(&r, 0).iter().map(|w| w.0).collect();
    assert_eq!(s, [1_000_000_000, 5_000_000_000, 9_000_000_000]);
    assert_eq!(r["proactive"]["schedules"][0]["cgroup"], "/");
}

#[test]
fn a_scenario_without_a_schedule_has_no_proactive_section() {
    let r = run(&schedule_scenario("1s", "", 1));
    assert!(r.get("proactive").is_none());
    assert!(r["scenario"].get("reclaim").is_none());
    assert_eq!(r["vmstat"]["pgscan_proactive"], 0);
}

fn error_of(reclaim: &str, cpus: u32, kernel: &str) -> String {
    let t = format!("{}\n{kernel}", schedule_scenario("10s", reclaim, cpus));
    Scenario::from_toml(&t).expect_err("refused").to_string()
}

#[test]
fn schedule_fields_are_checked_by_name() {
    let entry = |extra: &str| format!("[[reclaim]]\nat = \"1s\"\n{extra}\n");
    for (extra, path, msg) in [
        (
            "bytes = 0",
            "scenario.reclaim[0].bytes",
            "at least one page",
        ),
        (
            "bytes = \"2K\"",
            "scenario.reclaim[0].bytes",
            "at least one page",
        ),
        (
            "bytes = \"1M\"\ncgroup = \"/b\"",
            "scenario.reclaim[0].cgroup",
            "not a cgroup of the scenario",
        ),
        (
            "bytes = \"1M\"\ntimes = 3",
            "scenario.reclaim[0].every",
            "need a period",
        ),
        (
            "bytes = \"1M\"\ntimes = 3\nevery = 0",
            "scenario.reclaim[0].every",
            "must be > 0",
        ),
        (
            "bytes = \"1M\"\ntimes = 0",
            "scenario.reclaim[0].times",
            "at least 1",
        ),
        (
            "bytes = \"1M\"\nswappiness = 201",
            "scenario.reclaim[0].swappiness",
            "0..=200",
        ),
        (
            "bytes = \"1M\"\nswappiness = \"maxx\"",
            "scenario.reclaim[0].swappiness",
            "\"max\"",
        ),
        ("", "scenario.reclaim[0]", "bytes"),
        (
            "bytes = \"1M\"\nperiod = \"1s\"",
            "scenario.reclaim[0]",
            "period",
        ),
    ] {
        let e = error_of(&entry(extra), 2, "");
        assert!(e.contains(path) && e.contains(msg), "{extra}: {e}");
    }
    let late = "[[reclaim]]\nat = \"10s\"\nbytes = \"1M\"\n";
    let e = error_of(late, 2, "");
    assert!(
        e.contains("scenario.reclaim[0].at") && e.contains("before the end"),
        "{e}"
    );
    let ok = "[[reclaim]]\nat = \"1s\"\nbytes = \"1M\"\n";
    let e = error_of(ok, 2, "[kernel]\ncgroup_version = 1");
    assert!(
        e.contains("scenario.reclaim[0].cgroup") && e.contains("cgroup v2 file"),
        "{e}"
    );
    // One CPU, taken by the workload's task: no CPU for the writer.
    let e = error_of(ok, 1, "");
    assert!(
        e.contains("scenario.reclaim:") && e.contains("CPUs that no workload"),
        "{e}"
    );
    // The second entry is named too.
    let two = format!("{ok}[[reclaim]]\nat = \"1s\"\nbytes = \"1\"\n");
    let e = error_of(&two, 3, "");
    assert!(e.contains("scenario.reclaim[1].bytes"), "{e}");
}
