//! MGLRU end to end: small scenarios of each reclaim path run with every invariant checked
//! after every reclaim pass (generation windows, list sizes against the folios' gen
//! counters, compatibility sizes, memcg LRU membership), and the ablation switches.

mod common;
use reclaimsim_core::{sim, Scenario};
use serde_json::Value;

fn run(t: &str) -> Value {
    common::run_checked_json(t)
}

/// The run's result without the echo of its scenario (which names the switches).
fn bytes(t: &str) -> String {
    let sc = Scenario::from_toml(t).expect("valid scenario");
    let r = sim::run(&sc, &mut |_, _| true).expect("run");
    let mut v = serde_json::to_value(&r).unwrap();
    v.as_object_mut().unwrap().remove("scenario");
    v.to_string()
}

fn same(a: &str, b: &str) -> bool {
    bytes(a) == bytes(b)
}

/// kswapd's CPU summed over the nodes [ns].
fn kswapd_cpu(r: &Value) -> u64 {
    r["reclaim"]["kswapd_cpu_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

fn vm(r: &Value, k: &str) -> u64 {
    r["vmstat"][k]
        .as_u64()
        .unwrap_or_else(|| panic!("vmstat {k}"))
}

/// usemem over its memcg's limit, on zram: memcg reclaim (lru_gen_shrink_lruvec).
fn memcg_anon(kernel: &str, variants: &str) -> String {
    format!(
        r#"
duration = "400ms"
sample_interval = "50ms"
[machine]
cpus = 8
memory_per_node = "4G"
[machine.swap]
size = "1G"
device = "zram"
[kernel]
lru = "mglru"
{kernel}
[variants]
{variants}
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
prefault = true
random = true
repeat = 0
"#
    )
}

/// Readers in four memcgs over a small node: global reclaim by kswapd and direct
/// reclaimers (lru_gen_shrink_node, shrink_many over the memcg LRU).
fn global_files(variants: &str, pattern: &str) -> String {
    let mut t = format!(
        r#"
duration = "1500ms"
sample_interval = "100ms"
[machine]
cpus = 8
memory_per_node = "96M"
[kernel]
lru = "mglru"
[variants]
{variants}
"#
    );
    for i in 0..4 {
        t += &format!(
            "[[cgroup]]\npath = \"/m{i}\"\n[[workload]]\ntype = \"file_read\"\ncgroup = \"/m{i}\"\nfiles = [\"48M\"]\npattern = \"{pattern}\"\npasses = 0\n"
        );
    }
    t
}

#[test]
fn memcg_limit_reclaim_evicts_swaps_and_refaults() {
    let r = run(&memcg_anon("", ""));
    // 64 MiB of anon in a 32 MiB memcg: the working set thrashes through zram.
    assert!(vm(&r, "pswpout") > 8192, "{}", vm(&r, "pswpout"));
    assert!(vm(&r, "workingset_refault_anon") > 8192);
    // MGLRU counts scans as isolations from the oldest generation, and memcg reclaim is
    // not in the global pgscan_direct.
    assert_eq!(vm(&r, "pgscan_direct"), 0);
    assert!(vm(&r, "pgscan_anon") >= vm(&r, "pgsteal_anon"));
    // No file pages and swappiness 60: only anon is scanned.
    assert_eq!(vm(&r, "pgscan_file"), 0);
    // The classic-only bookkeeping is bypassed: nothing isolated is counted.
    assert_eq!(vm(&r, "nr_isolated_anon"), 0);
    // Lock sites of MGLRU, none of the classic inactive/active lists.
    let sites: Vec<&str> = r["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["caller"].as_str().unwrap())
        .collect();
    for s in ["evict_folios", "inc_max_seq", "walk_mm"] {
        assert!(sites.contains(&s), "{s} missing from {sites:?}");
    }
    for s in [
        "shrink_inactive_list",
        "shrink_active_list",
        "lru_note_cost_unlock_irq",
        "shrink_node",
    ] {
        assert!(!sites.contains(&s), "{s} in {sites:?}");
    }
}

#[test]
fn global_reclaim_walks_the_memcg_lru_and_stays_consistent() {
    for pattern in ["zipf", "seq"] {
        let r = run(&global_files("", pattern));
        assert!(
            vm(&r, "pgscan_kswapd") + vm(&r, "pgscan_direct") > 1000,
            "{pattern}"
        );
        assert!(vm(&r, "pgsteal_file") > 1000, "{pattern}");
        assert_eq!(vm(&r, "pgscan_anon"), 0);
    }
}

#[test]
fn seed_001_memcg_iter_runs_global_reclaim_without_the_memcg_lru() {
    let r = run(&global_files("mglru_memcg_iter = true", "zipf"));
    assert!(vm(&r, "pgsteal_file") > 1000);
    let sites: Vec<&str> = r["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["caller"].as_str().unwrap())
        .collect();
    assert!(!sites.contains(&"lru_gen_rotate_memcg"), "{sites:?}");
    let r = run(&global_files("", "zipf"));
    let sites: Vec<&str> = r["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["caller"].as_str().unwrap())
        .collect();
    assert!(sites.contains(&"lru_gen_rotate_memcg"), "{sites:?}");
}

#[test]
fn same_seed_same_bytes_with_mglru() {
    let t = global_files("", "zipf");
    assert!(same(&t, &t));
    assert!(same(&memcg_anon("", ""), &memcg_anon("", "")));
}

#[test]
fn an_ablation_changes_nothing_where_its_mechanism_never_fires() {
    // Without the page-table walk (enabled = 0x1) the Bloom filters are never consulted.
    let nowalk = memcg_anon("lru_gen.enabled = 1", "");
    let nowalk_nobloom = memcg_anon("lru_gen.enabled = 1", "mglru_bloom = false");
    assert!(same(&nowalk, &nowalk_nobloom));
    // Page-cache reads map nothing: eviction's rmap walk never finds a young PTE to look
    // around.
    assert!(same(
        &global_files("", "zipf"),
        &global_files("mglru_look_around = false", "zipf")
    ));
    // Where they fire, they change the run.
    let full = memcg_anon("", "");
    assert!(!same(&full, &memcg_anon("", "mglru_bloom = false")));
    assert!(!same(&full, &memcg_anon("", "mglru_look_around = false")));
    assert!(!same(&full, &nowalk));
}

/// The kernel-run calibration scenarios (python/reclaimsim/scenarios/calib-*.toml), run with
/// MGLRU: they reclaim, keep every invariant, and give the same bytes twice. calib-anon-cpu
/// and calib-anon-ssd (a minute of virtual time or more whole) run their first virtual
/// second; the others end by themselves in a few seconds.
#[test]
fn calibration_cases_run_with_mglru() {
    let mut n = 0;
    for (name, mut text) in common::builtin_scenarios() {
        if !name.starts_with("calib-") {
            continue;
        }
        // The two long cases run their first virtual second, reclaiming from their
        // prefault on.
        for (long, whole) in [
            ("calib-anon-cpu.toml", "1200s"),
            ("calib-anon-ssd.toml", "600s"),
        ] {
            if name == long {
                let cut = text.replace(&format!("duration = \"{whole}\""), "duration = \"1s\"");
                assert_ne!(cut, text, "{name}: its duration is no longer {whole}");
                text = cut;
            }
        }
        // A case that picks its LRU itself (calib-mglru-reclaim, calib-memcg-reclaim)
        // keeps it.
        let t = if text.contains("\nlru = ") {
            text
        } else {
            text.replace("[kernel]\n", "[kernel]\nlru = \"mglru\"\n")
        };
        assert!(
            t.contains("lru = \"mglru\""),
            "{name} has no [kernel] table"
        );
        let r = run(&t);
        let steal = vm(&r, "pgsteal_anon") + vm(&r, "pgsteal_file");
        assert!(steal > 1000, "{name}: {steal} pages reclaimed");
        assert!(
            r["lru_gen"]["rows"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
            "{name}"
        );
        assert!(same(&t, &t), "{name} not deterministic");
        n += 1;
    }
    assert_eq!(n, 10, "calibration scenarios found");
}

/// Two processes whose anonymous memory overflows the node into a zram swap that holds it
/// all: direct reclaimers find both generations too young and wait on an aging that
/// kswapd has under way. The kernel finishes that walk on another CPU (or a late joiner
/// completes the mm_list iteration); it never OOMs with swap to spare. A model in which the
/// walker ran ahead of the reclaimers in virtual time left them no aged generation and
/// killed a process after MAX_RECLAIM_RETRIES.
#[test]
fn global_anon_overflow_into_ample_swap_never_ooms() {
    let r = common::run_json(
        r#"
duration = "400ms"
sample_interval = "100ms"
[kernel]
lru = "mglru"
[machine]
cpus = 4
memory_per_node = "512M"
[machine.swap]
size = "1G"
device = "zram"
[[workload]]
type = "usemem"
processes = 2
size = "300M"
random = true
repeat = 0
"#,
    );
    assert_eq!(vm(&r, "oom_kill"), 0);
    // 2 x 300M = 153,600 pages against a 512M node of 131,072: at least the difference
    // has gone out to swap once the whole region has been touched.
    let overflow = 2 * (300 << 8) - (512 << 8);
    assert!(
        vm(&r, "pswpout") >= overflow,
        "pswpout {} < {overflow}",
        vm(&r, "pswpout")
    );
}

/// Seed 001's memcg walk on a machine that runs out of memory with no swap: three
/// processes of 16,068K (4,017 pages each) on a 21M node (5,376 pages). Only one fits, so
/// the OOM killer must take exactly two, and the run must end: the allocator used to
/// retry for ever inside one poll, never yielding.
#[test]
fn memcg_iter_without_swap_ooms_twice_and_ends() {
    let r = common::run_json(
        r#"
duration = "14ms"
[machine]
cpus = 7
memory_per_node = "21M"
[kernel]
lru = "mglru"
[variants]
mglru_memcg_iter = true
[[workload]]
type = "usemem"
processes = 3
size = "16068K"
"#,
    );
    assert_eq!(vm(&r, "oom_kill"), 2);
}

/// kswapd's CPU includes the balance_pgdat run still under way when the run ends: under
/// sustained pressure from many memcgs kswapd may never return from it, and then its
/// CPU read 0 while it scanned millions of folios. Each folio it scanned took at least
/// one list operation (cost `list_op`), and it cannot have run longer than the run.
#[test]
fn kswapd_cpu_counts_the_balance_pgdat_run_under_way() {
    let r = common::run_json(
        r#"
duration = "1s"
[machine]
nodes = 2
cpus = 16
memory_per_node = "2G"
[machine.swap]
size = "8G"
device = "zram"
[kernel]
lru = "mglru"
[variants]
mglru_memcg_iter = true
[[cgroup]]
path = "/server{i}"
copies = 16
[[workload]]
type = "usemem"
name = "server{i}"
cgroup = "/server{i}"
copies = 16
size = "320M"
prefault = true
random = true
repeat = 0
rate = "1G"
"#,
    );
    let cpu = kswapd_cpu(&r);
    let scanned = vm(&r, "pgscan_kswapd");
    assert!(
        scanned > 10_000,
        "the scenario must keep kswapd busy: {scanned}"
    );
    assert!(
        cpu >= scanned * 6,
        "kswapd CPU {cpu} ns for {scanned} folios scanned"
    );
    assert!(
        cpu <= 2 * 1_000_000_000,
        "two kswapds cannot run longer than the run: {cpu}"
    );
}

/// kswapd's finished balance_pgdat runs are counted, and only their time: one pass of a
/// process larger than its node wakes kswapd; the run then idles (a second workload keeps
/// it alive to 3 s) with kswapd asleep. kswapd's CPU lies between a list operation per
/// folio it scanned and the time the pass took (plus 100 ms for kswapd to finish its
/// last balance), far below the 3 s an unfinished run would add up to.
#[test]
fn kswapd_cpu_counts_finished_runs_and_not_its_sleep() {
    let r = common::run_json(
        r#"
duration = "3s"
[machine]
cpus = 2
memory_per_node = "256M"
[machine.swap]
size = "1G"
device = "zram"
[kernel]
lru = "mglru"
[[workload]]
type = "usemem"
name = "pass"
size = "320M"
[[workload]]
type = "usemem"
name = "later"
size = "4K"
start = "2900ms"
"#,
    );
    let cpu = kswapd_cpu(&r);
    let scanned = vm(&r, "pgscan_kswapd");
    let pass = r["workloads"][0]["runtime_ns"].as_u64().unwrap();
    assert!(scanned > 1000, "kswapd must have reclaimed: {scanned}");
    assert!(
        pass < 2_000_000_000,
        "the pass must end well before the run: {pass}"
    );
    assert!(
        cpu >= scanned * 6,
        "kswapd CPU {cpu} ns for {scanned} folios scanned"
    );
    assert!(
        cpu <= pass + 100_000_000,
        "kswapd CPU {cpu} ns for a pass of {pass} ns"
    );
}
