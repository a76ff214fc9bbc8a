//! The vmscan tracepoints' table (`tracepoints = true`, mm/trace_vmscan.rs) against the
//! counters the kernel counts from the same variables at the same call sites: in
//! shrink_inactive_list, PGSTEAL_ANON/FILE from the nr_reclaimed the trace reports, and
//! PGSCAN_ANON/FILE from its nr_scanned (counted before the return for an empty
//! isolation, which fires no trace, so pgscan is at least the traced sum); in
//! shrink_active_list, PGDEACTIVATE from its nr_deactivate and the memcg's PGREFILL from
//! the scan that took its nr_taken (the global PGREFILL counts global reclaim only); in
//! MGLRU's evict_folios (6.12 on), PGSTEAL_* from the same nr_reclaimed. And
//! mm_vmscan_lru_isolate: in isolate_lru_folios its nr_scanned is what shrink_inactive_list
//! counts as PGSCAN_ANON/FILE and shrink_active_list as the memcg's PGREFILL, its nr_taken
//! what shrink_active_list traces again; in MGLRU's scan_folios (6.12 on) its nr_taken is
//! PGSCAN_ANON/FILE and the rest of its nr_scanned, less nr_skipped, the memcg's PGREFILL
//! (the folios sort_folio moved).

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

const ISOLATE: &str = "mm_vmscan_lru_isolate";

/// The kernel's enum lru_list: LRU_INACTIVE_ANON, LRU_ACTIVE_ANON, LRU_INACTIVE_FILE,
/// LRU_ACTIVE_FILE.
const INACTIVE: [i64; 2] = [0, 2];
const ACTIVE: [i64; 2] = [1, 3];

/// The sum of `field` over the mm_vmscan_lru_isolate rows of the lists `lrus`.
fn isolate_sum(table: &[Value], lrus: [i64; 2], field: &str) -> u64 {
    table
        .iter()
        .filter(|r| r["event"] == ISOLATE && lrus.contains(&r["lru"].as_i64().unwrap()))
        .map(|r| r[field].as_u64().unwrap())
        .sum()
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
    for row in t.iter().filter(|r| r["event"] != ISOLATE) {
        assert_eq!(row["nid"], 0);
        if row["event"] == "mm_shrink_slab_end" {
            continue; // no priority field
        }
        let p = row["priority"].as_i64().unwrap();
        assert!((0..=12).contains(&p), "priority {p}");
    }
    // Each node the shadow shrinker frees counts WORKINGSET_NODERECLAIM (shadow_lru_isolate)
    // and one in the scan's return, mm_shrink_slab_end's retval; it fired once per start.
    assert_eq!(
        sum(t, "mm_shrink_slab_end", "retval"),
        get("workingset_nodereclaim")
    );
    assert_eq!(
        sum(t, "mm_shrink_slab_end", "hitcount"),
        sum(t, "mm_shrink_slab_start", "hitcount")
    );
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
/// no mm_vmscan_lru_shrink_active. 6.1's MGLRU fires none of the LRU's events, nor does
/// a later version with the rule off (the shadow shrinker's, which are no LRU's, fire on
/// every version).
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
        assert!(t
            .iter()
            .all(|row| row["event"] == inactive || row["event"] == ISOLATE || is_shrinker(row)));
    }
    let off = "rules = { mglru_vmscan_tracepoints = false }";
    for (version, extra) in [("6.1", ""), ("6.12", off)] {
        let r = run_toml(&versioned("mglru", true, version, extra), true);
        let t = r["tracepoints"].as_array().expect("a tracepoints table");
        assert!(t.iter().all(is_shrinker), "{version} {extra}");
        assert!(r["vmstat"]["pgsteal_anon"].as_u64().unwrap() > 0);
    }
}

/// A row of the shadow shrinker's events (do_shrink_slab's, not the LRU's).
fn is_shrinker(row: &Value) -> bool {
    row["event"] == "mm_shrink_slab_start" || row["event"] == "mm_shrink_slab_end"
}

/// isolate_lru_folios fires mm_vmscan_lru_isolate for every isolation, from either list:
/// an inactive list's nr_scanned is the PGSCAN_ANON/FILE shrink_inactive_list counts from
/// the same variable, an active list's the memcg's PGREFILL (all reclaim here is the
/// memcg's); shrink_active_list fires once per isolation of its own, nothing taken
/// included, with the same nr_taken. Nothing is skipped (one zone), the order is 0, and
/// no isolation scans more than it was asked to.
#[test]
fn isolate_lru_folios_fires_lru_isolate_for_both_lists() {
    let r = run_toml(&scenario("classic", true), true);
    let t = r["tracepoints"].as_array().expect("a tracepoints table");
    let get = |k: &str| r["vmstat"][k].as_u64().unwrap();
    let (anon, file) = ([0, 0], [2, 2]);
    assert_eq!(isolate_sum(t, anon, "nr_scanned"), get("pgscan_anon"));
    assert_eq!(isolate_sum(t, file, "nr_scanned"), get("pgscan_file"));
    assert!(get("pgscan_anon") > 0 && get("pgscan_file") > 0);
    let refill = cgroup(&r, "/w")["memory.stat"]["pgrefill"]
        .as_u64()
        .unwrap();
    assert_eq!(isolate_sum(t, ACTIVE, "nr_scanned"), refill);
    let active = "mm_vmscan_lru_shrink_active";
    assert_eq!(
        isolate_sum(t, ACTIVE, "hitcount"),
        sum(t, active, "hitcount")
    );
    assert_eq!(
        isolate_sum(t, ACTIVE, "nr_taken"),
        sum(t, active, "nr_taken")
    );
    let inactive = "mm_vmscan_lru_shrink_inactive";
    assert!(isolate_sum(t, INACTIVE, "hitcount") >= sum(t, inactive, "hitcount"));
    assert!(isolate_sum(t, INACTIVE, "nr_taken") >= sum(t, inactive, "nr_reclaimed"));
    let all = [0, 1, 2, 3].map(|l| [l, l]);
    let requested: u64 = all.iter().map(|&l| isolate_sum(t, l, "nr_requested")).sum();
    let looked: u64 = all.iter().map(|&l| isolate_sum(t, l, "nr_scanned")).sum();
    assert!(looked > 0 && requested >= looked);
    for row in t.iter().filter(|r| r["event"] == ISOLATE) {
        assert_eq!(
            (row["order"].as_i64(), row["nr_skipped"].as_u64()),
            (Some(0), Some(0))
        );
    }
}

/// MGLRU's scan_folios fires mm_vmscan_lru_isolate from 6.12 on, keyed by the inactive
/// list of the type it scanned: nr_taken sums to PGSCAN_ANON + PGSCAN_FILE (MGLRU counts
/// the isolated), nr_scanned less nr_taken and nr_skipped to the memcg's PGREFILL (what
/// sort_folio moved). 6.12 asks for MAX_LRU_BATCH (4096) every time; 7.3 hands it what
/// its reclaim loop allows, at most MIN_LRU_BATCH (64) a call (rule
/// mglru_scan_batch_min_lru_batch).
#[test]
fn mglru_scan_folios_fires_lru_isolate_from_6_12_on() {
    for (version, per_call) in [("6.12", 4096), ("7.3", 64)] {
        let r = run_toml(&versioned("mglru", true, version, ""), true);
        let t = r["tracepoints"].as_array().expect("a tracepoints table");
        let get = |k: &str| r["vmstat"][k].as_u64().unwrap();
        let taken = isolate_sum(t, INACTIVE, "nr_taken");
        // Each type's isolation is keyed by its own inactive list.
        assert_eq!(
            isolate_sum(t, [0, 0], "nr_taken"),
            get("pgscan_anon"),
            "{version}"
        );
        assert_eq!(
            isolate_sum(t, [2, 2], "nr_taken"),
            get("pgscan_file"),
            "{version}"
        );
        assert!(
            get("pgscan_anon") > 0 && get("pgscan_file") > 0,
            "{version}"
        );
        let refill = cgroup(&r, "/w")["memory.stat"]["pgrefill"]
            .as_u64()
            .unwrap();
        let moved =
            isolate_sum(t, INACTIVE, "nr_scanned") - taken - isolate_sum(t, INACTIVE, "nr_skipped");
        assert_eq!(moved, refill, "{version}");
        assert_eq!(isolate_sum(t, ACTIVE, "hitcount"), 0, "{version}");
        let hits = isolate_sum(t, INACTIVE, "hitcount");
        let requested = isolate_sum(t, INACTIVE, "nr_requested");
        assert!(hits > 0, "{version}");
        if version == "6.12" {
            assert_eq!(requested, per_call * hits);
        } else {
            assert!(
                requested <= per_call * hits && requested >= hits,
                "{version}"
            );
        }
    }
}
