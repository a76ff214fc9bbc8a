//! The vmscan tracepoints' table (`tracepoints = true`, mm/trace_vmscan.rs) against the
//! counters the kernel counts from the same variables at the same call sites: in
//! shrink_inactive_list, PGSTEAL_ANON/FILE from the nr_reclaimed the trace reports, and
//! PGSCAN_ANON/FILE from its nr_scanned (counted before the return for an empty
//! isolation, which fires no trace, so pgscan is at least the traced sum); in
//! shrink_active_list, PGDEACTIVATE from its nr_deactivate and the memcg's PGREFILL from
//! the scan that took its nr_taken (the global PGREFILL counts global reclaim only); in
//! MGLRU's evict_folios (6.12 on), PGSTEAL_* from the same nr_reclaimed.

mod common;

use common::cgroup;
use reclaimsim_core::fixture::run_toml;
use serde_json::Value;

/// Anonymous memory over a memcg limit with zram, and a file read beside it: both lists
/// of both types reclaimed on the classic LRU.
fn scenario(lru: &str, tracepoints: bool) -> String {
    versioned(lru, tracepoints, "6.18", "")
}

/// The scenario as kernel `version`, with `kernel_extra` lines under [kernel].
fn versioned(lru: &str, tracepoints: bool, version: &str, kernel_extra: &str) -> String {
    format!(
        r#"
duration = "2s"
tracepoints = {tracepoints}
[kernel]
lru = "{lru}"
version = "{version}"
{kernel_extra}
[machine]
cpus = 4
memory_per_node = "1G"
[machine.swap]
size = "256M"
[[cgroup]]
path = "/w"
memory.max = "24M"
[[workload]]
type = "usemem"
cgroup = "/w"
processes = 2
size = "16M"
prefault = false
random = true
repeat = 0
[[workload]]
type = "file_read"
cgroup = "/w"
files = ["16M"]
pattern = "zipf"
passes = 0
"#
    )
}

fn sum(table: &[Value], event: &str, field: &str) -> u64 {
    table
        .iter()
        .filter(|r| r["event"] == event)
        .map(|r| r[field].as_u64().unwrap())
        .sum()
}

#[test]
fn the_traced_sums_are_the_kernels_counters() {
    let r = run_toml(&scenario("classic", true), true);
    let t = r["tracepoints"].as_array().expect("a tracepoints table");
    let vm = &r["vmstat"];
    let get = |k: &str| vm[k].as_u64().unwrap();
    let inactive = "mm_vmscan_lru_shrink_inactive";
    let active = "mm_vmscan_lru_shrink_active";
    assert_eq!(
        sum(t, inactive, "nr_reclaimed"),
        get("pgsteal_anon") + get("pgsteal_file")
    );
    let scanned = sum(t, inactive, "nr_scanned");
    assert!(scanned <= get("pgscan_anon") + get("pgscan_file"));
    assert!(scanned >= sum(t, inactive, "nr_reclaimed"));
    assert_eq!(sum(t, active, "nr_deactivated"), get("pgdeactivate"));
    let refill = cgroup(&r, "/w")["memory.stat"]["pgrefill"]
        .as_u64()
        .unwrap();
    assert!(sum(t, active, "nr_taken") <= refill);
    assert!(sum(t, active, "nr_taken") >= sum(t, active, "nr_deactivated"));
    // Both events fired, at priorities reclaim can have, on the one node.
    assert!(sum(t, inactive, "hitcount") > 0 && sum(t, active, "hitcount") > 0);
    for row in t {
        let p = row["priority"].as_i64().unwrap();
        assert!((0..=12).contains(&p), "priority {p}");
        assert_eq!(row["nid"], 0);
    }
}

#[test]
fn no_table_unless_asked() {
    let r = run_toml(&scenario("classic", false), true);
    assert!(r.get("tracepoints").is_none());
}

/// MGLRU's evict_folios fires mm_vmscan_lru_shrink_inactive from 6.12 on (rule
/// mglru_vmscan_tracepoints) with each shrink_folio_list pass's nr_reclaimed, the sum of
/// which is PGSTEAL_ANON + PGSTEAL_FILE (counted from the same values), and the batch's
/// nr_scanned: what scan_folios looked at, at least what it isolated (PGSCAN_ANON +
/// PGSCAN_FILE under MGLRU), counted again on a retry pass. MGLRU has no active list:
/// no mm_vmscan_lru_shrink_active. 6.1's MGLRU fires nothing, nor does a later version
/// with the rule off.
#[test]
fn mglru_fires_shrink_inactive_from_evict_folios_from_6_12_on() {
    let inactive = "mm_vmscan_lru_shrink_inactive";
    for version in ["6.12", "7.3"] {
        let r = run_toml(&versioned("mglru", true, version, ""), true);
        let t = r["tracepoints"].as_array().expect("a tracepoints table");
        let get = |k: &str| r["vmstat"][k].as_u64().unwrap();
        let stolen = get("pgsteal_anon") + get("pgsteal_file");
        assert!(stolen > 0, "{version}: nothing reclaimed");
        assert_eq!(sum(t, inactive, "nr_reclaimed"), stolen, "{version}");
        let isolated = get("pgscan_anon") + get("pgscan_file");
        assert!(sum(t, inactive, "nr_scanned") >= isolated, "{version}");
        assert_eq!(sum(t, "mm_vmscan_lru_shrink_active", "hitcount"), 0);
        assert!(t.iter().all(|row| row["event"] == inactive));
    }
    let off = "rules = { mglru_vmscan_tracepoints = false }";
    for (version, extra) in [("6.1", ""), ("6.12", off)] {
        let r = run_toml(&versioned("mglru", true, version, extra), true);
        assert_eq!(r["tracepoints"], serde_json::json!([]), "{version} {extra}");
        assert!(r["vmstat"]["pgsteal_anon"].as_u64().unwrap() > 0);
    }
}
