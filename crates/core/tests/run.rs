//! End-to-end runs of small scenarios through the whole model.

mod common;

use common::cgroup;
use reclaimsim_core::fixture::run_toml;
use reclaimsim_core::{run_json, Error, Scenario};
use serde_json::Value;

/// Four processes writing at random over 16M each under a 32M limit. Not prefaulted:
/// MAP_POPULATE of the four areas (prefault) ends in an OOM kill, on the kernel as in the
/// model (tests/gup_populate.rs).
fn memcg_usemem(seed: u64, device: &str, duration: &str) -> String {
    format!(
        r#"
name = "t"
seed = {seed}
duration = "{duration}"
sample_interval = "50ms"
[machine]
cpus = 8
memory_per_node = "4G"
[machine.swap]
size = "1G"
device = "{device}"
[[cgroup]]
path = "/w"
[[cgroup]]
path = "/w/leaf"
memory.max = "32M"
[[workload]]
type = "usemem"
cgroup = "/w/leaf"
processes = 4
size = "16M"
prefault = false
random = true
repeat = 0
"#
    )
}

#[test]
fn memcg_limit_reclaim_swaps_and_refaults_with_kernel_lock_sites() {
    for device in ["ssd", "zram"] {
        let r = run_toml(&memcg_usemem(1, device, "300ms"), true);
        let leaf = cgroup(&r, "/w/leaf");
        let st = &leaf["memory.stat"];
        assert!(st["pgscan"].as_u64().unwrap() > 0, "{device}");
        assert!(st["pgsteal"].as_u64().unwrap() > 0);
        assert!(st["workingset_refault_anon"].as_u64().unwrap() > 0);
        assert!(r["vmstat"]["pswpout"].as_u64().unwrap() > 0);
        // Limit reclaim is cgroup reclaim: not counted in the global direct counters.
        assert_eq!(r["vmstat"]["pgscan_direct"], 0);
        assert_eq!(r["vmstat"]["pgscan_anon"], st["pgscan"]);
        assert!(leaf["memory.events"]["max"].as_u64().unwrap() > 0);
        // memory.current never above memory.max in any sample.
        let cols: Vec<&str> = r["timeseries"]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let ci = cols.iter().position(|c| *c == "memory.current").unwrap();
        let rows = r["timeseries"]["rows"].as_array().unwrap();
        assert!(rows.len() >= 5);
        // Each row has every column, led by its time and a cgroup of the run.
        let paths: Vec<&str> = r["cgroups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["path"].as_str().unwrap())
            .collect();
        let interval = r["timeseries"]["interval_ns"].as_u64().unwrap();
        for row in rows {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), cols.len(), "{row:?}");
            assert_eq!(row[0].as_u64().unwrap() % interval, 0, "{row:?}");
            assert!(paths.contains(&row[1].as_str().unwrap()), "{row:?}");
            assert!(row[2..].iter().all(|v| v.is_u64()), "{row:?}");
        }
        for row in rows.iter().filter(|row| row[1] == "/w/leaf") {
            assert!(row[ci].as_u64().unwrap() <= 32 << 20);
        }
        let sites: Vec<&str> = r["locks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["caller"].as_str().unwrap())
            .collect();
        for s in [
            "shrink_inactive_list",
            "move_folios_to_lru",
            "shrink_node",
            "lru_note_cost_unlock_irq",
        ] {
            assert!(sites.contains(&s), "{s} missing from {sites:?}");
        }
        if device == "ssd" {
            // Async writeback ends with a rotation to the inactive tail.
            assert!(r["vmstat"]["pgrotated"].as_u64().unwrap() > 0);
        }
    }
}

#[test]
fn same_seed_same_bytes_other_seed_differs() {
    let a = run_json(
        &toml_to_json(&memcg_usemem(7, "ssd", "100ms")),
        &mut |_, _| true,
    )
    .unwrap();
    let b = run_json(
        &toml_to_json(&memcg_usemem(7, "ssd", "100ms")),
        &mut |_, _| true,
    )
    .unwrap();
    let c = run_json(
        &toml_to_json(&memcg_usemem(8, "ssd", "100ms")),
        &mut |_, _| true,
    )
    .unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
}

fn toml_to_json(t: &str) -> String {
    let v: toml::Value = toml::from_str(t).unwrap();
    serde_json::to_string(&v).unwrap()
}

#[test]
fn global_pressure_wakes_kswapd_and_direct_reclaim() {
    let t = r#"
duration = "400ms"
[machine]
cpus = 4
memory_per_node = "64M"
[machine.swap]
size = "256M"
device = "zram"
[[workload]]
type = "usemem"
processes = 2
size = "40M"
random = true
repeat = 0
"#;
    let r = run_toml(t, true);
    let v = &r["vmstat"];
    assert!(v["pgscan_kswapd"].as_u64().unwrap() > 0, "{v}");
    assert!(v["pageoutrun"].as_u64().unwrap() > 0);
    assert!(v["pswpout"].as_u64().unwrap() > 0);
    // The root memcg's memory.stat sees global reclaim too.
    assert!(
        cgroup(&r, "/")["memory.stat"]["pgscan_kswapd"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn file_set_that_fits_misses_only_on_the_first_pass() {
    let t = r#"
duration = "5s"
[machine]
cpus = 2
memory_per_node = "1G"
[[cgroup]]
path = "/f"
memory.max = "64M"
[[workload]]
type = "file_read"
cgroup = "/f"
files = ["8M", "8M"]
pattern = "seq"
passes = 3
"#;
    let r = run_toml(t, true);
    let w = &r["workloads"][0];
    let pages = 2 * (8 << 20) / 4096;
    assert_eq!(w["accesses"], 3 * pages);
    assert_eq!(w["misses"], pages);
    assert_eq!(w["hits"], 2 * pages);
    // Second reads activate: the workingset ends up on the active list.
    let st = &cgroup(&r, "/f")["memory.stat"];
    // (up to one lru_add batch may still be waiting for its drain)
    assert!(
        st["active_file"].as_u64().unwrap() >= (pages - 31) * 4096,
        "{st}"
    );
    assert!(
        r["end_ns"].as_u64().unwrap() < 5_000_000_000,
        "the run ends when the workload does"
    );
}

#[test]
fn file_set_larger_than_the_limit_reclaims_file_and_refaults() {
    for pattern in ["seq", "uniform", "zipf", "hotscan"] {
        let files = if pattern == "hotscan" {
            r#"["4M", "64M"]"#
        } else {
            r#"["24M"]"#
        };
        let t = format!(
            r#"
duration = "1s"
[machine]
cpus = 2
memory_per_node = "1G"
[[cgroup]]
path = "/f"
memory.max = "16M"
[[workload]]
type = "file_read"
cgroup = "/f"
files = {files}
pattern = "{pattern}"
passes = 0
"#
        );
        let r = run_toml(&t, true);
        let st = &cgroup(&r, "/f")["memory.stat"];
        assert!(st["pgsteal"].as_u64().unwrap() > 0, "{pattern}");
        assert!(r["vmstat"]["pgscan_file"].as_u64().unwrap() > 0);
        if pattern != "hotscan" {
            assert!(
                st["workingset_refault_file"].as_u64().unwrap() > 0,
                "{pattern}"
            );
        }
        assert!(r["workloads"][0]["misses"].as_u64().unwrap() > 0);
    }
}

#[test]
fn oom_is_an_event_not_a_crash() {
    // 3 processes of 24M in 32M without swap: the memcg OOM killer must act.
    let t = r#"
duration = "200ms"
[machine]
cpus = 4
memory_per_node = "1G"
[[cgroup]]
path = "/o"
memory.max = "32M"
[[workload]]
type = "usemem"
cgroup = "/o"
processes = 3
size = "24M"
repeat = 0
"#;
    let r = run_toml(t, true);
    assert!(r["vmstat"]["oom_kill"].as_u64().unwrap() >= 1);
    assert!(
        cgroup(&r, "/o")["memory.events"]["oom_kill"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert!(!r["oom_kills"].as_array().unwrap().is_empty());
}

#[test]
fn memory_min_protects_a_sibling() {
    let t = r#"
duration = "300ms"
[machine]
cpus = 4
memory_per_node = "1G"
[machine.swap]
size = "256M"
device = "zram"
[[cgroup]]
path = "/p"
memory.max = "48M"
[[cgroup]]
path = "/p/protected"
memory.min = "24M"
[[cgroup]]
path = "/p/other"
[[workload]]
type = "usemem"
name = "protected"
cgroup = "/p/protected"
size = "20M"
repeat = 0
[[workload]]
type = "usemem"
name = "other"
cgroup = "/p/other"
start = "20ms"
size = "64M"
random = true
repeat = 0
"#;
    let r = run_toml(t, true);
    assert_eq!(cgroup(&r, "/p/protected")["memory.stat"]["pgsteal"], 0);
    assert!(
        cgroup(&r, "/p/other")["memory.stat"]["pgsteal"]
            .as_u64()
            .unwrap()
            > 0
    );
}

/// /p with a child below its memory.low beside an unprotected one (LOW: its protection).
const MEMORY_LOW: &str = r#"
duration = "300ms"
[machine]
cpus = 2
memory_per_node = "1G"
[machine.swap]
size = "256M"
device = "zram"
[[cgroup]]
path = "/p"
memory.max = "32M"
[[cgroup]]
path = "/p/c1"
memory.low = "LOW"
[[cgroup]]
path = "/p/c2"
[[workload]]
type = "usemem"
cgroup = "/p/c1"
size = "8M"
repeat = 0
[[workload]]
type = "usemem"
cgroup = "/p/c2"
size = "64M"
repeat = 0
start = "20ms"
"#;

#[test]
fn a_child_below_memory_low_is_left_to_its_unprotected_sibling() {
    // /p's limit reclaim walks /p/c1 and /p/c2. With reclaim targeting /p, a child's
    // effective low is its own memory.low (its parent is the target): c1 uses 8M of its
    // 32M, so mem_cgroup_below_low() skips it, and c2 (64M in a 32M parent) has enough to
    // reclaim on every pass, so the memcg_low_reclaim retry never comes.
    let stat = |r: &Value, p: &str, k: &str| cgroup(r, p)["memory.stat"][k].as_u64().unwrap();
    let r = run_toml(&MEMORY_LOW.replace("LOW", "32M"), false);
    assert_eq!(stat(&r, "/p/c1", "pgscan"), 0);
    assert_eq!(stat(&r, "/p/c2", "pgscan"), stat(&r, "/p", "pgscan"));
    assert_eq!(stat(&r, "/p/c1", "anon"), 8 << 20);
    // Protection below the usage (4M of 8M) leaves c1 to reclaim like any child.
    let r = run_toml(&MEMORY_LOW.replace("LOW", "4M"), false);
    assert!(stat(&r, "/p/c1", "pgscan") > 0);
}

#[test]
fn bad_scenarios_name_the_field() {
    let cases = [
        (
            r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "1G"}, "workload": [], "bogus": 1}"#,
            "scenario.bogus",
        ),
        (
            r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "12X"}, "workload": []}"#,
            "scenario.machine.memory_per_node",
        ),
        (
            r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "1G"}, "kernel": {"swappiness": 300}, "workload": [{"type": "usemem", "size": "1M"}]}"#,
            "scenario.kernel.swappiness",
        ),
        (
            r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "1G"}, "cgroup": [{"path": "/a/b"}], "workload": [{"type": "usemem", "size": "1M"}]}"#,
            "scenario.cgroup[0].path",
        ),
        (
            r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "1G"}, "workload": [{"type": "usemem", "size": "1M", "processes": 3}]}"#,
            "scenario.machine.cpus",
        ),
        (
            r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "1G", "swap": {"size": "1G", "device": "floppy"}}, "workload": [{"type": "usemem", "size": "1M"}]}"#,
            "scenario.machine.swap.device",
        ),
        (
            r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "1G"}, "costs": {"nope": 1}, "workload": [{"type": "usemem", "size": "1M"}]}"#,
            "scenario.costs.nope",
        ),
        (
            r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "1G"}, "workload": [{"type": "usemem", "size": "1M", "prealloc": true, "mapping": "shared_file"}]}"#,
            "scenario.workload[0].prealloc",
        ),
    ];
    for (json, path) in cases {
        match Scenario::from_json(json) {
            Err(Error::Scenario { path: p, msg, .. }) => assert_eq!(p, path, "{msg}"),
            other => panic!("{json}: expected a scenario error at {path}, got {other:?}"),
        }
    }
    let e = Scenario::from_json(cases[5].0).unwrap_err().to_string();
    assert!(
        e.contains("zram") && e.contains("ssd"),
        "allowed values listed: {e}"
    );
}

#[test]
fn memory_high_reclaims_and_throttles_near_the_limit() {
    let t = r#"
duration = "500ms"
[machine]
cpus = 4
memory_per_node = "1G"
[machine.swap]
size = "256M"
device = "zram"
[[cgroup]]
path = "/h"
memory.high = "16M"
[[workload]]
type = "usemem"
cgroup = "/h"
processes = 2
size = "24M"
random = true
repeat = 0
"#;
    let r = run_toml(t, true);
    let h = cgroup(&r, "/h");
    assert!(h["memory.events"]["high"].as_u64().unwrap() > 0);
    assert_eq!(h["memory.events"]["max"], 0);
    assert!(h["memory.stat"]["pgsteal"].as_u64().unwrap() > 0);
    // memory.high is not a hard limit, but reclaim on return to user keeps it close.
    let peak = h["memory.peak"].as_u64().unwrap();
    assert!(
        peak > 16 << 20 && peak < (16 << 20) * 11 / 10,
        "peak {peak}"
    );
}

#[test]
fn shared_file_mappings_are_reclaimed_by_unmapping_and_refault_from_the_cache() {
    let t = r#"
duration = "300ms"
[machine]
cpus = 4
memory_per_node = "128M"
[[cgroup]]
path = "/m"
memory.max = "16M"
[[workload]]
type = "usemem"
cgroup = "/m"
processes = 2
size = "16M"
mapping = "shared_file"
random = true
repeat = 0
"#;
    let r = run_toml(t, true);
    let st = &cgroup(&r, "/m")["memory.stat"];
    assert!(st["pgsteal"].as_u64().unwrap() > 0, "{st}");
    assert!(st["workingset_refault_file"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(r["vmstat"]["pswpout"], 0, "file pages are not swapped");
    assert!(r["vmstat"]["nr_mapped"].as_u64().unwrap() > 0);
}

#[test]
fn page_cache_xarray_nodes_are_charged_to_the_reader_memcg() {
    // A 1M file (256 pages) read once: its xarray has 4 nodes of 64 slots under one root
    // node, 5 * 576 bytes of slab, which take a whole page of the memcg's charge.
    let t = r#"
name = "xa"
duration = "1s"
[machine]
cpus = 2
memory_per_node = "1G"
[[cgroup]]
path = "/r"
[[workload]]
type = "file_read"
cgroup = "/r"
files = ["1M"]
passes = 1
"#;
    let r = run_toml(t, true);
    let c = cgroup(&r, "/r");
    let st = &c["memory.stat"];
    assert_eq!(st["slab_reclaimable"], 5 * 576);
    assert_eq!(st["kernel"], 5 * 576);
    assert_eq!(st["file"], 256 * 4096);
    assert_eq!(c["memory.current"].as_u64().unwrap() % 4096, 0);
    // Page-cache pages plus one page of slab, less what sits in per-CPU charge stocks.
    let current = c["memory.current"].as_u64().unwrap() / 4096;
    assert!(current >= 257, "memory.current {current} pages");
}

#[test]
fn page_tables_are_charged_while_the_process_lives() {
    // 8M of anon under a 6M limit: the 4 PTE pages are charged too, and the limit holds
    // (invariants checked); they are uncharged when the process exits.
    let t = r#"
name = "pt"
duration = "10s"
[machine]
cpus = 2
memory_per_node = "1G"
[machine.swap]
size = "64M"
device = "zram"
[[cgroup]]
path = "/a"
memory.max = "6M"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "8M"
repeat = 1
"#;
    let r = run_toml(t, true);
    let st = &cgroup(&r, "/a")["memory.stat"];
    assert_eq!(st["pagetables"], 0, "freed at exit");
    assert!(r["vmstat"]["pswpout"].as_u64().unwrap() > 0);
}

/// A paced usemem thread under memcg limit reclaim: its faults and reclaim stall it now
/// and then. fio's open-loop pace catches up after each stall, so it makes exactly
/// duration x rate / 4096 accesses (1 ms at 1 GB/s: 244,140.625, so 244,140 or 244,141);
/// a closed loop (rate_catch_up = false) loses the stalled time and makes fewer.
#[test]
fn a_closed_loop_pace_loses_the_time_of_its_stalls() {
    let t = |catch_up: bool| {
        format!(
            r#"
duration = "1s"
[machine]
cpus = 2
memory_per_node = "1G"
[machine.swap]
size = "1G"
device = "zram"
[[cgroup]]
path = "/a"
memory.max = "32M"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "48M"
random = true
repeat = 0
rate = "1000000000"
rate_catch_up = {catch_up}
"#
        )
    };
    let accesses = |r: &Value| r["workloads"][0]["accesses"].as_u64().unwrap();
    let open = run_toml(&t(true), false);
    let closed = run_toml(&t(false), false);
    let cap = 1_000_000_000u64 / 4096;
    assert!(
        (cap..=cap + 1).contains(&accesses(&open)),
        "open loop: {}",
        accesses(&open)
    );
    assert!(
        accesses(&closed) < cap - cap / 100,
        "closed loop: {} of {cap}",
        accesses(&closed)
    );
    // The stalls are real: the run reclaimed from the limit.
    assert!(closed["vmstat"]["pswpout"].as_u64().unwrap() > 1000);
}

/// The error a scenario is refused with, parsed and validated ("" if it is accepted).
fn refusal(t: &str) -> String {
    Scenario::from_toml(t)
        .and_then(|sc| sc.validate().map(|_| sc))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

#[test]
fn rate_catch_up_without_a_rate_is_refused() {
    let t = r#"
duration = "1s"
[machine]
cpus = 1
memory_per_node = "1G"
[[workload]]
type = "usemem"
size = "4M"
rate_catch_up = false
"#;
    let msg = refusal(t);
    assert!(
        msg.contains("workload[0].rate_catch_up") && msg.contains("needs a `rate`"),
        "{msg}"
    );
}

#[test]
fn fill_with_prefault_is_refused() {
    let t = r#"
duration = "1s"
[machine]
cpus = 1
memory_per_node = "1G"
[[workload]]
type = "usemem"
size = "4M"
prefault = true
fill = true
"#;
    let msg = refusal(t);
    assert!(
        msg.contains("workload[0].fill") && msg.contains("one of fill and prefault"),
        "{msg}"
    );
}

#[test]
fn fill_is_a_first_pass_of_write_faults_that_marks_nothing_accessed() {
    // One thread, 1M (256 pages) filled, then one sequential pass, no memory pressure:
    // the fill's 256 writes each fault a page in (do_anonymous_page) and the pass's 256
    // find them mapped. Unlike prefault's MAP_POPULATE, no folio gets PG_referenced, so
    // nothing is activated by mark_page_accessed (pgactivate 0).
    let t = r#"
duration = "10s"
[machine]
cpus = 1
memory_per_node = "1G"
[[workload]]
type = "usemem"
size = "1M"
fill = true
"#;
    let v = reclaimsim_core::fixture::run_toml(t, true);
    let w = &v["workloads"][0];
    assert_eq!(w["accesses"].as_u64(), Some(512));
    assert_eq!(w["minor_faults"].as_u64(), Some(256));
    assert_eq!(w["hits"].as_u64(), Some(256));
    assert_eq!(v["vmstat"]["pgactivate"].as_u64(), Some(0));
}

#[test]
fn a_programs_text_is_read_once_shared_by_its_processes_and_charged_to_their_memcg() {
    // Two processes of one program, 8K of text (2 pages) and 16K of anon each, no memory
    // pressure, three passes. Each text page is read from the disk once, by whichever process runs it
    // first (do_read_fault: a major fault, PGMAJFAULT), and charged to the memcg; the
    // other process maps the cached folio (a minor fault). So: 2 major faults, 2 minor
    // text faults and 2 x 4 minor anon faults; 2 file pages in the memcg, which stay
    // cached after both processes exit (NR_FILE_MAPPED back to 0).
    let t = r#"
duration = "1s"
[machine]
cpus = 2
memory_per_node = "1G"
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
processes = 2
size = "16K"
text = "8K"
repeat = 3
"#;
    let r = run_toml(t, true);
    let w = &r["workloads"][0];
    // Three passes: the first faults every page in, the next two find them all mapped.
    assert_eq!(w["accesses"], 24);
    assert_eq!(w["hits"], 16);
    assert_eq!(w["major_faults"], 2);
    assert_eq!(w["minor_faults"], 10);
    assert_eq!(r["vmstat"]["pgmajfault"], 2);
    assert_eq!(r["vmstat"]["nr_mapped"], 0);
    let st = &cgroup(&r, "/a")["memory.stat"];
    assert_eq!(st["file"], 8192);
    assert_eq!(st["workingset_refault_file"], 0);
}

/// The time series samples every multiple of its interval up to and including the run's
/// end, so its per-interval deltas cover the whole run: summed, they are each cgroup's
/// whole-run memory.stat counters. A run whose interval is its duration has one row per
/// cgroup, at the end.
#[test]
fn the_time_series_covers_the_whole_run_through_its_last_interval() {
    // 70 ms does not divide 300: its rows stop at 280 ms, the last 20 ms unsampled.
    for (interval, rows_per_cgroup) in [("50ms", 6u64), ("300ms", 1), ("70ms", 4)] {
        let t = memcg_usemem(1, "zram", "300ms").replace(
            "sample_interval = \"50ms\"",
            &format!("sample_interval = \"{interval}\""),
        );
        let r = run_toml(&t, false);
        let ts = &r["timeseries"];
        let cols: Vec<&str> = ts["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let step = ts["interval_ns"].as_u64().unwrap();
        for cg in r["cgroups"].as_array().unwrap() {
            let path = cg["path"].as_str().unwrap();
            let rows: Vec<&Vec<Value>> = ts["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| row.as_array().unwrap())
                .filter(|row| row[1] == path)
                .collect();
            let times: Vec<u64> = rows.iter().map(|row| row[0].as_u64().unwrap()).collect();
            let want: Vec<u64> = (1..=rows_per_cgroup).map(|k| k * step).collect();
            assert_eq!(times, want, "{interval} {path}");
            if !r["end_ns"].as_u64().unwrap().is_multiple_of(step) {
                continue;
            }
            assert_eq!(*times.last().unwrap(), r["end_ns"].as_u64().unwrap());
            for item in ["pgscan", "pgsteal", "pgfault", "pgmajfault"] {
                let c = cols.iter().position(|c| *c == item).unwrap();
                let sum: u64 = rows.iter().map(|row| row[c].as_u64().unwrap()).sum();
                assert_eq!(
                    sum,
                    cg["memory.stat"][item].as_u64().unwrap(),
                    "{interval} {path} {item}"
                );
            }
        }
        assert!(
            cgroup(&r, "/w/leaf")["memory.stat"]["pgsteal"]
                .as_u64()
                .unwrap()
                > 0
        );
    }
}
