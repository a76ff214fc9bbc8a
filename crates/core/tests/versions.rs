//! Kernel versions: a version is the set of its rules, each rule moves a run where its
//! path runs, and names outside the registry are refused.

use reclaimsim_core::versions::{KernelVersion, Rules, RULES};
use reclaimsim_core::Scenario;
use std::sync::LazyLock;

/// A scenario of this file: its length, LRU, CPUs and node memory, VERSION and RULES
/// left for [`run`] to fill in, then `body` (swap, cgroups, workloads, reclaim writes).
fn scenario(duration: &str, lru: &str, cpus: u32, mem: &str, body: &str) -> String {
    format!(
        "duration = \"{duration}\"\n[kernel]\nlru = \"{lru}\"\nversion = \"VERSION\"\nRULES\n\
         [machine]\ncpus = {cpus}\nmemory_per_node = \"{mem}\"\n{body}"
    )
}

/// Global reclaim on MGLRU with swap: two memcgs of 48M anon on a 96M node, one
/// protected by memory.low.
static MGLRU: LazyLock<String> = LazyLock::new(|| {
    scenario(
        "300ms",
        "mglru",
        2,
        "96M",
        r#"[machine.swap]
size = "256M"
[[cgroup]]
path = "/a"
memory.low = "24M"
[[cgroup]]
path = "/b"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "48M"
[[workload]]
type = "usemem"
cgroup = "/b"
size = "48M"
"#,
    )
});

/// Swap of 256M and one usemem of `size` in the cgroup /a, with `more` after it.
fn usemem_in_a(size: &str, more: &str) -> String {
    format!(
        "[machine.swap]\nsize = \"256M\"\n[[cgroup]]\npath = \"/a\"\n[[workload]]\n\
         type = \"usemem\"\ncgroup = \"/a\"\nsize = \"{size}\"\n{more}"
    )
}

/// MGLRU with swap: random touches of 80M of anon on a 64M node.
static SWAPIN: LazyLock<String> = LazyLock::new(|| {
    let body = usemem_in_a("80M", "random = true\nrepeat = 0\n");
    scenario("1s", "mglru", 2, "64M", &body)
});

/// MGLRU memory.reclaim of 16M from a memcg of 48M anon (cgroup reclaim, whose target is
/// met part way through a pass at a low priority).
static CGROUP_RECLAIM: LazyLock<String> = LazyLock::new(|| {
    let reclaim = "[[reclaim]]\ncgroup = \"/a\"\nat = \"200ms\"\nbytes = \"16M\"\n";
    let body = usemem_in_a("48M", &format!("repeat = 0\n{reclaim}"));
    scenario("300ms", "mglru", 2, "256M", &body)
});

/// MGLRU page cache: zipf reads through read() of a 64M file in a 24M cgroup (refaults
/// outside faults, folios protected by their tier).
static READS: LazyLock<String> = LazyLock::new(|| scenario("60s", "mglru", 2, "256M", ZIPF_READER));

/// A 24M cgroup and a reader in it of its own 64M file, zipf (theta 0.99) through read().
const ZIPF_READER: &str = r#"[[cgroup]]
path = "/reader"
memory.max = "24M"
[[workload]]
type = "file_read"
cgroup = "/reader"
files = ["64M"]
pattern = "zipf"
theta = 0.99
accesses = 40000
"#;

/// A run's result without the scenario it echoes.
fn run(t: &str, version: &str, rules: &[(&str, bool)]) -> serde_json::Value {
    let rules: String = rules
        .iter()
        .map(|(n, on)| format!("rules.{n} = {on}\n"))
        .collect();
    let t = t.replace("VERSION", version).replace("RULES", &rules);
    let sc = Scenario::from_toml(&t).expect("valid scenario");
    let r = reclaimsim_core::sim::run(&sc, &mut |_, _| true).expect("run");
    let mut v = serde_json::to_value(&r).unwrap();
    v.as_object_mut().unwrap().remove("scenario");
    v
}

#[test]
fn a_version_is_its_rules() {
    // 6.12 with every rule set as 6.18 has it runs as 6.18, byte for byte.
    let as_618: Vec<(&str, bool)> = RULES
        .iter()
        .map(|r| (r.name, r.in_version(KernelVersion::V6_18)))
        .collect();
    let a = run(&MGLRU, "6.12", &as_618);
    let b = run(&MGLRU, "6.18", &[]);
    assert_eq!(a, b);
    // And the two versions differ on this run.
    assert_ne!(run(&MGLRU, "6.12", &[]), b);
}

#[test]
fn each_mglru_rule_alone_moves_a_run_that_takes_its_path() {
    // Each rule set alone on 6.18 the other way (as the older kernels have it, or 7.2's
    // on), on a run that takes its path: global reclaim with memory.low (MGLRU); random
    // touches of more anon than fits (swap-ins through the swap cache, rmap sightings,
    // refaults in faults: SWAPIN); zipf reads (refaults outside faults, protected
    // folios: READS); memory.reclaim of a memcg (cgroup reclaim: CGROUP_RECLAIM).
    let cases: [(&str, &str, bool); 18] = [
        (&*MGLRU, "mglru_aging_feedback_rework", false),
        (&*MGLRU, "mglru_scan_budget_nr_to_scan", false),
        (&*MGLRU, "mglru_proportional_protection", false),
        (&*MGLRU, "mglru_reclaim_loop_restructure", true),
        (&*MGLRU, "mglru_scan_batch_min_lru_batch", true),
        (&*MGLRU, "mglru_scan_exact_count", true),
        (&*CGROUP_RECLAIM, "mglru_abort_cgroup_reclaim", true),
        (&*SWAPIN, "mglru_fault_add_active_workingset_only", true),
        (&*SWAPIN, "mglru_placement_referenced", true),
        (&*SWAPIN, "mglru_set_refs_mark_accessed", true),
        (&*SWAPIN, "mglru_refault_activate_workingset", true),
        (&*SWAPIN, "mglru_refault_recent_window", false),
        (&*SWAPIN, "mglru_refault_counts_all", false),
        (&*SWAPIN, "mglru_refault_restore_rework", false),
        (&*READS, "mglru_refault_activate_in_fault", false),
        (&*READS, "mglru_protect_counts_activate", true),
        (&*READS, "mglru_tiers_rework", false),
        (&*SWAPIN, "mglru_promote_second_sighting", false),
    ];
    for (t, name, on) in cases {
        let base = run(t, "6.18", &[]);
        let other = run(t, "6.18", &[(name, on)]);
        assert_ne!(other["vmstat"], base["vmstat"], "{name} changed nothing");
    }
}

/// Two readers of their own 64M file on two CPUs in one 24M cgroup, classic LRU: a folio
/// read twice is queued for activation (folio_activate) on its reader's CPU, and the other
/// reader's limit reclaim meets it on the shared lists before that batch drains.
static TWO_READERS: LazyLock<String> = LazyLock::new(|| {
    let second = &ZIPF_READER[ZIPF_READER.find("[[workload]]").unwrap()..];
    scenario(
        "60s",
        "classic",
        2,
        "256M",
        &format!("{ZIPF_READER}{second}"),
    )
});

#[test]
fn a_batch_that_clears_pg_lru_moves_a_run_where_reclaim_meets_queued_folios() {
    // 6.11-6.16 behavior on 6.18: folios queued on the other CPU are skipped by isolation
    // (rotated) instead of isolated and kept for the batch's reference.
    let base = run(&TWO_READERS, "6.18", &[]);
    let other = run(&TWO_READERS, "6.18", &[("lru_batch_clears_pg_lru", true)]);
    assert_ne!(other["vmstat"], base["vmstat"], "the rule changed nothing");
}

/// Two 24M cgroups on the classic LRU, each with a zipf reader of its own 64M file.
static TWO_LIMITED_READERS: LazyLock<String> = LazyLock::new(|| {
    let other = ZIPF_READER.replace("/reader", "/other");
    scenario(
        "20s",
        "classic",
        2,
        "256M",
        &format!("{ZIPF_READER}{other}"),
    )
});

#[test]
fn the_statistics_flush_rules_of_6_1_each_move_a_classic_run() {
    // Limit reclaim on the classic LRU reads flushed list sizes (inactive_is_low, the
    // refault test). Reclaim's unratelimited flush (6.1) alone on 6.18; 6.1's
    // machine-wide flush count (the other memcg's updates count too) turned off on 6.1,
    // where reclaim's flushes are the ones it decides (on 6.18 the periodic flush is
    // never late enough for a ratelimited one).
    for (version, name, on) in [
        ("6.1", "memcg_flush_global_threshold", false),
        ("6.18", "reclaim_flush_ratelimited", false),
    ] {
        let base = run(&TWO_LIMITED_READERS, version, &[]);
        let other = run(&TWO_LIMITED_READERS, version, &[(name, on)]);
        assert_ne!(other["vmstat"], base["vmstat"], "{name} changed nothing");
    }
}

#[test]
fn the_6_1_mglru_loop_rules_each_move_a_run() {
    // Each of 6.1's loop rules turned off alone on 6.1: global reclaim on MGLRU (kswapd
    // and direct reclaim over two memcgs), memory.reclaim of a memcg swapping anon (6.1's
    // should_abort_scan stops it at its target).
    for (t, name) in [
        (&*MGLRU, "mglru_v61_reclaim_loop"),
        (&*CGROUP_RECLAIM, "mglru_v61_should_abort_scan"),
        (&*MGLRU, "mglru_v61_kswapd_ages_memcgs"),
    ] {
        let base = run(t, "6.1", &[]);
        let other = run(t, "6.1", &[(name, false)]);
        assert_ne!(other["vmstat"], base["vmstat"], "{name} changed nothing");
    }
}

#[test]
fn the_lru_batches_of_6_1_hold_15_folios() {
    // Rules::folio_batch_size is what batch_add fills to: PAGEVEC_SIZE before 6.10.
    assert_eq!(Rules::of(KernelVersion::V6_1).folio_batch_size(), 15);
    assert_eq!(Rules::of(KernelVersion::V6_12).folio_batch_size(), 31);
    // A classic run: lru_add drains take lru_lock about twice as often with 15.
    let classic = MGLRU.replace("lru = \"mglru\"", "lru = \"classic\"");
    let drains = |v: &serde_json::Value| -> u64 {
        v["locks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["caller"] == "folio_batch_move_lru")
            .map(|l| l["acquisitions"].as_u64().unwrap_or(0))
            .sum()
    };
    let small = drains(&run(&classic, "6.18", &[("folio_batch_size_31", false)]));
    let big = drains(&run(&classic, "6.18", &[]));
    assert!(
        big > 0 && small * 10 > big * 17 && small * 10 < big * 23,
        "{small} vs {big}"
    );
}

#[test]
fn rules_outside_the_registry_are_refused() {
    let t = MGLRU
        .replace("VERSION", "6.12")
        .replace("RULES", "rules.no_such_rule = true");
    let e = Scenario::from_toml(&t)
        .expect_err("no_such_rule")
        .to_string();
    assert!(
        e.starts_with("scenario.kernel.rules.no_such_rule:")
            && e.contains("no such rule")
            && e.contains("mglru_aging_feedback_rework"),
        "{e}"
    );
    let t = MGLRU.replace("VERSION", "6.5").replace("RULES", "");
    let e = Scenario::from_toml(&t).expect_err("6.5").to_string();
    assert!(
        e.contains("scenario.kernel.version") && e.contains("allowed: 6.1, 6.12, 6.18, 7.3"),
        "{e}"
    );
}

/// Root memory.reclaim of 1M over eight memcgs of 8M anon each (populated, then touched
/// over and over at 16M/s, so that aging finds most of it cold), MGLRU, no other
/// pressure.
static ROOT_RECLAIM: LazyLock<String> = LazyLock::new(|| {
    scenario(
        "150ms",
        "mglru",
        9,
        "512M",
        r#"[machine.swap]
size = "256M"
[[reclaim]]
cgroup = "/"
at = "100ms"
bytes = "1M"
"#,
    )
});

fn root_reclaim_scenario() -> String {
    let mut t = ROOT_RECLAIM.clone();
    for i in 0..8 {
        t += &format!("[[cgroup]]\npath = \"/m{i}\"\n[[workload]]\ntype = \"usemem\"\ncgroup = \"/m{i}\"\nsize = \"8M\"\nprefault = true\nrepeat = 0\nrate = \"16M\"\n");
    }
    t
}

/// The memcgs whose folios root reclaim scanned.
fn memcgs_scanned(r: &serde_json::Value) -> usize {
    r["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["path"].as_str().is_some_and(|p| p.starts_with("/m")))
        .filter(|c| c["memory.stat"]["pgscan"].as_u64().unwrap_or(0) > 0)
        .count()
}

#[test]
fn root_reclaim_before_the_memcg_lru_visits_every_memcg() {
    // 6.1 (no memcg LRU): shrink_node_memcgs walks every memcg under the root and each
    // lruvec evicts at least one batch before should_abort_scan is asked.
    let t = root_reclaim_scenario();
    let before = run(&t, "6.18", &[("mglru_memcg_lru", false)]);
    assert_eq!(memcgs_scanned(&before), 8, "{}", before["cgroups"]);
    // The memcg LRU walk (shrink_many, aging memcgs on the way) is another path.
    let with = run(&t, "6.18", &[]);
    assert_ne!(before["cgroups"], with["cgroups"]);
    // The version carries the rule.
    assert_eq!(
        run(&t, "6.1", &[])["vmstat"],
        run(&t, "6.1", &[("mglru_memcg_lru", false)])["vmstat"]
    );
}

/// The memory.reclaim of a memcg: a 16M file read into /a's page cache, 4M reclaimed
/// from it at 200ms.
static PROACTIVE: LazyLock<String> = LazyLock::new(|| {
    scenario(
        "300ms",
        "classic",
        2,
        "256M",
        r#"[[cgroup]]
path = "/a"
[[workload]]
type = "file_read"
cgroup = "/a"
files = ["16M"]
[[reclaim]]
cgroup = "/a"
at = "200ms"
bytes = "4M"
"#,
    )
});

#[test]
fn memory_reclaim_counts_as_direct_reclaim_before_the_proactive_items() {
    // e452872b40e3: memory.reclaim's scans and steals go to the PROACTIVE items; before
    // it (6.1, 6.12), to the DIRECT ones. Nothing else reclaims here, and the reclaim
    // itself is the same: the counts move from one item to the other.
    let item = |r: &serde_json::Value, name: &str| {
        let a = r["cgroups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["path"] == "/a");
        a.and_then(|c| c["memory.stat"][name].as_u64())
            .unwrap_or_else(|| panic!("no {name} in /a's memory.stat"))
    };
    let new = run(&PROACTIVE, "6.18", &[]);
    let old = run(&PROACTIVE, "6.18", &[("pgscan_proactive", false)]);
    assert!(item(&new, "pgsteal_proactive") >= 1024, "4M reclaimed");
    for what in ["pgscan", "pgsteal"] {
        let p = format!("{what}_proactive");
        let d = format!("{what}_direct");
        assert_eq!((item(&new, &d), item(&old, &p)), (0, 0), "{what}");
        assert_eq!(item(&old, &d), item(&new, &p), "{what}");
    }
    // 6.12 has the old form.
    assert_eq!(
        item(&run(&PROACTIVE, "6.12", &[]), "pgsteal_direct"),
        item(&new, "pgsteal_proactive")
    );
}

#[test]
fn memory_reclaim_by_version_asks_for_all_at_once_on_6_1_and_refuses_swappiness() {
    // The one write's log row: [t, duration, requested, reclaimed, calls, result].
    let row = |r: &serde_json::Value| r["proactive"]["schedules"][0]["log"][0].clone();
    // 6.1 hands try_to_free_mem_cgroup_pages all 1024 pages at once, which 4096 clean
    // file pages cover in one call; 6.12 a quarter of what is left each call.
    let old = row(&run(&PROACTIVE, "6.1", &[]));
    assert_eq!(old[4], 1, "6.1: one call ({old})");
    assert!(old[3].as_u64().unwrap() >= 4 << 20, "{old}");
    let new = row(&run(&PROACTIVE, "6.12", &[]));
    assert!(
        new[4].as_u64().unwrap() >= 2,
        "6.12: a quarter per call ({new})"
    );
    assert_eq!(new[5], "ok");
    // The rule alone.
    let alone = row(&run(
        &PROACTIVE,
        "6.12",
        &[("memory_reclaim_quarter_batch", false)],
    ));
    assert_eq!(alone[4], 1, "{alone}");
    // swappiness=: -EINVAL on 6.1, taken on 6.12; swappiness=max from 6.16 (6.18).
    let with = |s: &str| {
        PROACTIVE.replace(
            "bytes = \"4M\"",
            &format!("bytes = \"4M\"\nswappiness = {s}"),
        )
    };
    let result = |t: &str, v: &str| row(&run(t, v, &[]))[5].clone();
    assert_eq!(result(&with("60"), "6.1"), "-EINVAL");
    assert_eq!(result(&with("60"), "6.12"), "ok");
    assert_eq!(result(&with("\"max\""), "6.12"), "-EINVAL");
    assert_eq!(result(&with("\"max\""), "6.18"), "ok");
}

#[test]
fn vmstat_counts_cgroup_reclaim_once_reclaim_events_are_node_stats() {
    // memory.reclaim of /a is cgroup reclaim: before 7.2, /proc/vmstat's pgscan/pgsteal
    // items leave it out and only /a's memory.stat has it; from 7.2 (node statistics)
    // /proc/vmstat has it too, the same count.
    let memcg = |r: &serde_json::Value, name: &str| {
        let a = r["cgroups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["path"] == "/a");
        a.and_then(|c| c["memory.stat"][name].as_u64()).unwrap()
    };
    let global = |r: &serde_json::Value, name: &str| r["vmstat"][name].as_u64().unwrap();
    let old = run(&PROACTIVE, "6.18", &[]);
    let new = run(&PROACTIVE, "7.3", &[]);
    let alone = run(&PROACTIVE, "6.18", &[("vmstat_reclaim_node_stats", true)]);
    for name in ["pgscan_proactive", "pgsteal_proactive"] {
        assert!(memcg(&old, name) >= 1024, "{name}");
        assert_eq!(global(&old, name), 0, "{name} on 6.18");
        assert_eq!(global(&new, name), memcg(&new, name), "{name} on 7.3");
        assert_eq!(
            global(&alone, name),
            memcg(&alone, name),
            "{name}, the rule alone"
        );
    }
}

/// Limit reclaim of /p (memory.reclaim of 128K, one try_to_free_mem_cgroup_pages call of
/// SWAP_CLUSTER_MAX) over its four children, each reading a 512M file (about 223M of page
/// cache each by the write), classic LRU.
fn partial_walk_scenario() -> String {
    let mut t = scenario(
        "4600ms",
        "classic",
        5,
        "4G",
        r#"[[cgroup]]
path = "/p"
[[reclaim]]
cgroup = "/p"
at = "4500ms"
bytes = "128K"
"#,
    );
    for i in 0..4 {
        t += &format!("[[cgroup]]\npath = \"/p/m{i}\"\n[[workload]]\ntype = \"file_read\"\ncgroup = \"/p/m{i}\"\nfiles = [\"512M\"]\n");
    }
    t
}

/// The memcgs under /p whose folios reclaim scanned.
fn children_scanned(r: &serde_json::Value) -> usize {
    r["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["path"].as_str().is_some_and(|p| p.starts_with("/p/m")))
        .filter(|c| c["memory.stat"]["pgscan"].as_u64().unwrap_or(0) > 0)
        .count()
}

#[test]
fn limit_reclaim_before_6_11_walks_every_memcg_each_pass() {
    // 6be5e186fd65 (6.11): the walk stops once SWAP_CLUSTER_MAX is reclaimed. At
    // DEF_PRIORITY each child's ~57k inactive file pages give 57k >> 12 = 13 to scan, so
    // the 32 pages are met at the third child and the fourth is not visited; 6.1 shrinks
    // every child on every pass.
    let t = partial_walk_scenario();
    let new = run(&t, "6.12", &[]);
    let old = run(&t, "6.1", &[]);
    assert_eq!(children_scanned(&new), 3, "{}", new["cgroups"]);
    assert_eq!(children_scanned(&old), 4, "{}", old["cgroups"]);
    assert_eq!(
        children_scanned(&run(&t, "6.12", &[("memcg_partial_walk", false)])),
        4
    );
}
