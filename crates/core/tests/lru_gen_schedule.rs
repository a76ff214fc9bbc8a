//! /sys/kernel/debug/lru_gen writes: lru_gen_seq_write's run_aging and run_eviction on
//! hand-built lruvecs (reclaimsim_core::fixture), and the `[[lru_gen]]` schedule end to end.
//! Expected values follow the kernel's arithmetic (derivations in the comments).

mod common;
use reclaimsim_core::fixture::{one_node_machine, run_probe};
use reclaimsim_core::mm::lru_gen::{
    LruGenCommand, LruGenWrite, LRU_GEN_ANON, LRU_GEN_FILE, MAX_NR_GENS,
};
use reclaimsim_core::mm::memcontrol::Errno;
use reclaimsim_core::mm::vmstat::VmEvent;
use reclaimsim_core::scenario::LruGenCmd;
use reclaimsim_core::sim::Sim;
use reclaimsim_core::Scenario;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;

/// The memcg /a: index 1, kernel memcg id 2 (the root is 1).
const A: u16 = 1;
const A_ID: u32 = 2;

/// One node of 1G, no swap, MGLRU, the idle cgroup /a.
fn machine() -> Rc<Sim> {
    one_node_machine("1G", None, "lru = \"mglru\"")
}

/// (max_seq, min_seq) of /a's lruvec on node 0.
fn seqs(s: &Sim) -> (u64, [u64; 2]) {
    let mm = s.mm.borrow();
    let g = &mm.lruvecs[mm.lruvec_of(A, 0) as usize].lrugen;
    (g.max_seq, g.min_seq)
}

fn memcg_event(s: &Sim, ev: VmEvent) -> u64 {
    s.mm.borrow().memcgs[A as usize].vm_events[ev as usize]
}

fn cmd(cmd: LruGenCmd, seq: u64, swappiness: Option<u32>, opt: Option<u64>) -> LruGenCommand {
    LruGenCommand {
        cmd,
        memcg_id: A_ID,
        nid: 0,
        seq,
        swappiness,
        opt,
    }
}

/// Write `c` to debugfs from a task on CPU 0.
fn write(s: &Rc<Sim>, c: LruGenCommand) -> LruGenWrite {
    let out = Rc::new(RefCell::new(None));
    let o2 = out.clone();
    run_probe(s, 0, 0, move |s| async move {
        *o2.borrow_mut() = Some(s.lru_gen_seq_write(&c).await);
    });
    out.take().unwrap()
}

#[test]
fn each_age_command_adds_one_generation_and_retires_the_oldest() {
    let s = machine();
    // lru_gen_init_lruvec: max_seq = MIN_NR_GENS + 1 = 3, min_seq = 0: four generations.
    assert_eq!(seqs(&s), (3, [0, 0]));
    for n in 1..=6u64 {
        let max_seq = seqs(&s).0;
        let out = write(&s, cmd(LruGenCmd::Age, max_seq, None, None));
        assert_eq!(
            out,
            LruGenWrite {
                result: Ok(()),
                nr_reclaimed: 0
            },
            "write {n}"
        );
        // inc_max_seq: both types are at MAX_NR_GENS, so each first retires its oldest
        // generation (inc_min_seq; anon too, though not evictable without swap), then
        // max_seq advances: after n writes max_seq = 3 + n and min_seq = n.
        let (max_seq, min_seq) = seqs(&s);
        assert_eq!((max_seq, min_seq), (3 + n, [n, n]), "write {n}");
        for ty in [LRU_GEN_ANON, LRU_GEN_FILE] {
            assert!(max_seq - min_seq[ty] < MAX_NR_GENS);
        }
    }
}

#[test]
fn age_refuses_a_generation_beyond_max_seq_and_ages_from_max_seq_for_older_ones() {
    let s = machine();
    // run_aging: seq > max_seq is -EINVAL, and nothing changes.
    let out = write(&s, cmd(LruGenCmd::Age, 4, None, None));
    assert_eq!(out.result, Err(Errno::Einval));
    assert_eq!(seqs(&s), (3, [0, 0]));
    // An older (stale) generation is not refused: the kernel ages from max_seq anyway.
    let out = write(&s, cmd(LruGenCmd::Age, 0, Some(0), Some(0)));
    assert_eq!(out.result, Ok(()));
    assert_eq!(seqs(&s).0, 4);
}

#[test]
fn age_fails_with_eexist_when_the_mm_list_walk_of_max_seq_is_done() {
    let s = machine();
    // try_to_inc_max_seq gives up when mm_state.seq has caught up with max_seq (another
    // aging finished the walk): run_aging returns -EEXIST and max_seq stays.
    {
        let mut mm = s.mm.borrow_mut();
        let lv = mm.lruvec_of(A, 0) as usize;
        mm.mm_state[lv].seq = 3;
    }
    let out = write(&s, cmd(LruGenCmd::Age, 3, None, None));
    assert_eq!(out.result, Err(Errno::Eexist));
    assert_eq!(seqs(&s), (3, [0, 0]));
}

#[test]
fn evict_takes_the_whole_oldest_generation_and_min_seq_moves_on() {
    let s = machine();
    // Clean, unreferenced file folios are added at max_seq + 1 - MAX_NR_GENS = 0: the
    // oldest generation.
    s.fixture_file_folios(A, 0, 1000, 0);
    {
        let mm = s.mm.borrow();
        let g = &mm.lruvecs[mm.lruvec_of(A, 0) as usize].lrugen;
        assert_eq!(g.nr_pages[0][LRU_GEN_FILE], 1000);
    }
    // No swap: get_swappiness is 0, file only. seq 0 + MIN_NR_GENS <= max_seq 3: allowed.
    let out = write(&s, cmd(LruGenCmd::Evict, 0, None, None));
    // Every folio of generation 0 is reclaimed (no nr_to_reclaim limit); then
    // try_to_inc_min_seq moves min_seq[file] past empty generations while
    // seq + MIN_NR_GENS <= max_seq: 0 -> 1 -> 2 (generation 1 is empty too).
    assert_eq!(
        out,
        LruGenWrite {
            result: Ok(()),
            nr_reclaimed: 1000
        }
    );
    assert_eq!(seqs(&s), (3, [0, 2]));
    // Proactive reclaim with the memcg as target: counted in the memcg's items only.
    assert_eq!(memcg_event(&s, VmEvent::PgstealProactive), 1000);
    assert_eq!(memcg_event(&s, VmEvent::PgscanProactive), 1000);
    assert_eq!(s.mm.borrow().events[VmEvent::PgstealProactive as usize], 0);
    // Generation 0 is gone now: writing it again evicts nothing and succeeds
    // (seq < evictable min_seq); generation 2 is too young (2 + 2 > 3): -EINVAL.
    let out = write(&s, cmd(LruGenCmd::Evict, 0, None, None));
    assert_eq!(
        out,
        LruGenWrite {
            result: Ok(()),
            nr_reclaimed: 0
        }
    );
    let out = write(&s, cmd(LruGenCmd::Evict, 2, None, None));
    assert_eq!(
        out,
        LruGenWrite {
            result: Err(Errno::Einval),
            nr_reclaimed: 0
        }
    );
    assert_eq!(memcg_event(&s, VmEvent::PgscanProactive), 1000);
}

#[test]
fn nr_to_reclaim_stops_the_eviction_at_exactly_that_many_pages() {
    for (limit, expect) in [(100u64, 100u64), (1, 1), (64, 64), (0, 0)] {
        let s = machine();
        s.fixture_file_folios(A, 0, 1000, 0);
        let out = write(&s, cmd(LruGenCmd::Evict, 0, Some(0), Some(limit)));
        // evict_folios(nr_to_reclaim - nr_reclaimed): scan_folios takes at most that many
        // (and stops at MIN_LRU_BATCH = 64 isolated): 100 = 64 + 36. (Before v6.16 every
        // call scanned a full batch, and 100 became 128.) 0 evicts nothing.
        assert_eq!(
            out,
            LruGenWrite {
                result: Ok(()),
                nr_reclaimed: expect
            },
            "{limit}"
        );
        assert_eq!(memcg_event(&s, VmEvent::PgscanProactive), expect, "{limit}");
        assert_eq!(seqs(&s), (3, [0, 0]), "{limit}");
    }
}

#[test]
fn run_cmd_refuses_unknown_memcgs_nodes_and_swappiness_above_201() {
    let s = machine();
    s.fixture_file_folios(A, 0, 100, 0);
    let bad = [
        LruGenCommand {
            memcg_id: 0,
            ..cmd(LruGenCmd::Evict, 0, None, None)
        },
        LruGenCommand {
            memcg_id: 99,
            ..cmd(LruGenCmd::Evict, 0, None, None)
        },
        LruGenCommand {
            nid: 1,
            ..cmd(LruGenCmd::Evict, 0, None, None)
        },
        cmd(LruGenCmd::Evict, 0, Some(202), None),
        cmd(LruGenCmd::Age, 3, Some(202), None),
    ];
    for c in bad {
        let out = write(&s, c);
        assert_eq!(out.result, Err(Errno::Einval), "{c:?}");
    }
    assert_eq!(seqs(&s), (3, [0, 0]));
    assert_eq!(memcg_event(&s, VmEvent::PgscanProactive), 0);
    // 201 ("max", anon only) is accepted: there is no anon, so nothing is evicted.
    let out = write(&s, cmd(LruGenCmd::Evict, 0, Some(201), None));
    assert_eq!(
        out,
        LruGenWrite {
            result: Ok(()),
            nr_reclaimed: 0
        }
    );
}

// ---------------------------------------------------------------------------------------
// The [[lru_gen]] schedule
// ---------------------------------------------------------------------------------------

/// A 10 s run whose one workload (in /a) starts in its last nanosecond (a start must
/// come before the end): the schedules' writes find /a empty.
fn scenario(kernel: &str, entries: &str, cpus: u32) -> String {
    format!(
        r#"
duration = "10s"
[machine]
cpus = {cpus}
memory_per_node = "1G"
[kernel]
{kernel}
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "4K"
start = 9999999999
{entries}
"#
    )
}

fn run(t: &str) -> Value {
    common::run_checked_json(t)
}

fn log(r: &Value, i: usize) -> Vec<Value> {
    r["lru_gen_writes"]["schedules"][i]["log"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn scheduled_age_commands_read_max_seq_and_raise_it_once_each() {
    let r = run(&scenario(
        "lru = \"mglru\"",
        r#"
[[lru_gen]]
cmd = "+"
cgroup = "/a"
at = "1s"
every = "2s"
times = 4
"#,
        2,
    ));
    let w = log(&r, 0);
    assert_eq!(w.len(), 4);
    for (k, row) in w.iter().enumerate() {
        let k = k as u64;
        // Due at 1, 3, 5, 7 s; the k-th reads max_seq = 3 + k and writes it.
        assert_eq!(row[0], 1_000_000_000 + 2_000_000_000 * k);
        assert_eq!(row[2], format!("+ 2 0 {}", 3 + k));
        assert_eq!(row[3], "ok");
        assert_eq!(
            (row[4].as_u64(), row[5].as_u64()),
            (Some(3 + k), Some(4 + k))
        );
        assert_eq!(
            (row[8].as_u64(), row[9].as_u64()),
            (Some(k + 1), Some(k + 1))
        );
        assert_eq!(row[10], 0);
    }
    let p = &r["lru_gen_writes"];
    assert_eq!(
        (p["writes"].as_u64(), p["failures"].as_u64()),
        (Some(4), Some(0))
    );
    assert_eq!(p["schedules"][0]["cmd"], "+");
    // debugfs at the end shows /a (memcg 2) from min_seq 4 to max_seq 7.
    let seqs: Vec<u64> = r["lru_gen"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row[0] == 2)
        .map(|row| row[3].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 5, 6, 7]);
}

#[test]
fn scheduled_evict_commands_take_the_oldest_generation_until_it_is_too_young() {
    let r = run(&scenario(
        "lru = \"mglru\"",
        r#"
[[lru_gen]]
cmd = "-"
cgroup = "/a"
at = "1s"
every = "1s"
times = 2
"#,
        2,
    ));
    let w = log(&r, 0);
    // First: the oldest generation is 0 (min_seq [0, 0], max_seq 3): allowed, nothing to
    // evict, and try_to_inc_min_seq moves the empty file generations on to 2.
    assert_eq!(w[0][2], "- 2 0 0");
    assert_eq!(w[0][3], "ok");
    assert_eq!(w[0][9], 2);
    // Second: the oldest evictable is 2, and 2 + MIN_NR_GENS > max_seq 3: -EINVAL.
    assert_eq!(w[1][2], "- 2 0 2");
    assert_eq!(w[1][3], "-EINVAL");
    assert_eq!(r["lru_gen_writes"]["failures"], 1);
}

#[test]
fn each_schedule_entry_gets_its_own_cpu_and_explicit_fields_are_written() {
    let r = run(&scenario(
        "lru = \"mglru\"",
        r#"
[[reclaim]]
cgroup = "/a"
at = "1s"
bytes = "4K"
[[lru_gen]]
cmd = "+"
cgroup = "/"
at = "1s"
gen = 3
swappiness = "max"
force_scan = false
[[lru_gen]]
cmd = "-"
cgroup = "/a"
at = "2s"
gen = 0
swappiness = 0
nr_to_reclaim = 10
"#,
        4,
    ));
    assert_eq!(log(&r, 0)[0][2], "+ 1 0 3 max 0");
    assert_eq!(log(&r, 0)[0][3], "ok");
    assert_eq!(log(&r, 1)[0][2], "- 2 0 0 0 10");
    assert_eq!(r["proactive"]["writes"], 1);
}

#[test]
fn a_scenario_without_lru_gen_entries_has_no_lru_gen_writes_section() {
    let r = run(&scenario("lru = \"mglru\"", "", 1));
    assert!(r.get("lru_gen_writes").is_none());
    assert!(r["scenario"].get("lru_gen").is_none());
}

fn error_of(kernel: &str, entries: &str, cpus: u32) -> String {
    Scenario::from_toml(&scenario(kernel, entries, cpus))
        .expect_err("refused")
        .to_string()
}

#[test]
fn schedule_fields_are_checked_by_name() {
    let mg = "lru = \"mglru\"";
    let entry = |extra: &str| format!("[[lru_gen]]\nat = \"1s\"\ncgroup = \"/a\"\n{extra}\n");
    for (extra, path, msg) in [
        (
            "cmd = \"x\"",
            "scenario.lru_gen[0].cmd",
            "\"x\": allowed \"+\" or \"-\"",
        ),
        (
            "cmd = 1",
            "scenario.lru_gen[0].cmd",
            "allowed \"+\" or \"-\"",
        ),
        (
            "cmd = \"+\"\nnode = 1",
            "scenario.lru_gen[0].node",
            "1: allowed 0..=0",
        ),
        (
            "cmd = \"+\"\ntimes = 0",
            "scenario.lru_gen[0].times",
            "at least 1",
        ),
        (
            "cmd = \"+\"\ntimes = 2",
            "scenario.lru_gen[0].every",
            "need a period",
        ),
        (
            "cmd = \"+\"\nswappiness = 201",
            "scenario.lru_gen[0].swappiness",
            "0..=200",
        ),
        (
            "cmd = \"-\"\nforce_scan = true",
            "scenario.lru_gen[0].force_scan",
            "only with cmd = \"+\"",
        ),
        (
            "cmd = \"+\"\nnr_to_reclaim = 5",
            "scenario.lru_gen[0].nr_to_reclaim",
            "only with cmd = \"-\"",
        ),
        (
            "cmd = \"-\"\nnr_to_reclaim = 5",
            "scenario.lru_gen[0].nr_to_reclaim",
            "needs swappiness too",
        ),
        (
            "cmd = \"+\"\ncan_swap = true",
            "scenario.lru_gen[0]",
            "can_swap",
        ),
        (
            // Due at 1 s + k us: 9,000,000 of them fall within the 10 s run.
            "cmd = \"-\"\ntimes = 100000000\nevery = \"1us\"",
            "scenario.lru_gen[0].every",
            "9000000 writes within the run; allowed at most 1000000",
        ),
        ("", "scenario.lru_gen[0]", "cmd"),
    ] {
        let e = error_of(mg, &entry(extra), 2);
        assert!(e.contains(path) && e.contains(msg), "{extra}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let e = error_of(
        mg,
        "[[lru_gen]]\ncmd = \"+\"\ncgroup = \"/b\"\nat = \"1s\"\n",
        2,
    );
    assert!(
        e.contains("scenario.lru_gen[0].cgroup") && e.contains("\"/b\" is not a cgroup"),
        "{e}"
    );
    let e = error_of(mg, "[[lru_gen]]\ncmd = \"+\"\nat = \"10s\"\n", 2);
    assert!(
        e.contains("scenario.lru_gen[0].at") && e.contains("before the end"),
        "{e}"
    );
    let ok = "[[lru_gen]]\ncmd = \"+\"\nat = \"1s\"\n";
    let e = error_of("", ok, 2);
    assert!(
        e.contains("scenario.lru_gen[0]:") && e.contains("kernel.lru = \"mglru\""),
        "{e}"
    );
    // Two CPUs, one taken by the workload: one writer fits, a [[reclaim]] and an
    // [[lru_gen]] writer do not.
    let e = error_of(
        mg,
        &format!("[[reclaim]]\nat = \"1s\"\nbytes = \"4K\"\n{ok}"),
        2,
    );
    assert!(
        e.contains("scenario.lru_gen:") && e.contains("2 writer tasks"),
        "{e}"
    );
    assert!(Scenario::from_toml(&scenario(mg, ok, 2)).is_ok());
}
