//! The memory budget: the estimate adds up the model's tables, and a run beyond the
//! limit is refused (by validate too) with the estimate and its largest term.

mod common;

use common::toml;
use reclaimsim_core::{sim, Scenario};

#[test]
fn the_memory_budget_refuses_with_the_estimate_and_its_largest_term() {
    // A century sampled every second: billions of time-series rows.
    let t = toml("", "").replace("duration = \"10ms\"", "duration = \"3155760000s\"");
    let sc = Scenario::from_toml(&t).unwrap();
    let e = sim::run_with(&sc, false, Some(8 << 30), &mut |_, _| true)
        .map(|_| ())
        .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.starts_with("scenario.sample_interval: the run needs an estimated")
            && msg.contains("above the 8.0 GiB allowed")
            && msg.contains("time series (3155760000 samples of 2 cgroups"),
        "{msg}"
    );
    // validate refuses it the same way.
    let json = serde_json::to_string(&sc).unwrap();
    assert_eq!(
        reclaimsim_core::validate_json_limited(&json, Some(8 << 30))
            .unwrap_err()
            .to_string(),
        msg
    );
    // A 1 ns sample interval over 10 s, and a usemem area of terabytes on a small node.
    let t = toml("sample_interval = 1", "").replace("\"10ms\"", "\"10s\"");
    let e = sim::run_with(
        &Scenario::from_toml(&t).unwrap(),
        false,
        Some(8 << 30),
        &mut |_, _| true,
    )
    .map(|_| ())
    .expect_err("refused");
    assert!(e.to_string().contains("10000000000 samples"), "{e}");
    let t = toml("", "").replace("size = \"1M\"", "size = \"8T\"");
    let e = sim::run_with(
        &Scenario::from_toml(&t).unwrap(),
        false,
        Some(8 << 30),
        &mut |_, _| true,
    )
    .map(|_| ())
    .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.starts_with("scenario.workload[0].size:")
            && msg.contains("page tables of workload[0] (usemem, 2147483648 pages): 8.0 GiB"),
        "{msg}"
    );
}

#[test]
fn the_estimate_adds_up_the_models_tables() {
    // Two usemem processes of 64M in a cgroup limited to 32M, 1G of swap, one file of
    // 16M at the root, on a 256M node with 4 CPUs, 100 ms sampled every 10 ms.
    let t = r#"duration = "100ms"
sample_interval = "10ms"
[machine]
cpus = 4
memory_per_node = "256M"
[machine.swap]
size = "1G"
[[cgroup]]
path = "/a"
memory.max = "32M"
[[workload]]
type = "usemem"
cgroup = "/a"
processes = 2
size = "64M"
[[workload]]
type = "file_read"
files = ["16M"]
"#;
    let e = reclaimsim_core::budget::estimate(&Scenario::from_toml(t).unwrap());
    let term = |prefix: &str| term_of(&e, prefix);
    // Frames: 32M of the cgroup (8192 pages) plus the 16M file (4096), 25 bytes each
    // (Page 16, LruLink 8, the line-owner byte 1).
    assert_eq!(term("frame table"), (8192 + 4096) * 25);
    // With MGLRU the same: the generation byte is in the Page (std::mem::size_of is the
    // independent check of the 16 and 8).
    assert_eq!(
        std::mem::size_of::<reclaimsim_core::mm::mm_types::Page>(),
        16
    );
    assert_eq!(
        std::mem::size_of::<reclaimsim_core::mm::mm_types::LruLink>(),
        8
    );
    let mg = format!("{t}[kernel]\nlru = \"mglru\"\n");
    let e2 = reclaimsim_core::budget::estimate(&Scenario::from_toml(&mg).unwrap());
    assert_eq!(term_of(&e2, "frame table"), (8192 + 4096) * 25);
    // And the lru_gen file sampled with the time series: ten samples of a row for each
    // of the MAX_NR_GENS = 4 generations of 2 cgroups on 1 node, 256 bytes each; none
    // with the classic LRU.
    assert_eq!(term_of(&e2, "lru_gen samples"), 10 * 2 * 4 * 256);
    assert!(!e.terms.iter().any(|t| t.name.starts_with("lru_gen")));
    // PTEs: 2 * 16384 pages, 4 bytes each and a byte per 512.
    assert_eq!(term("page tables of workload[0]"), 32768 * 4 + 32768 / 512);
    // The swap map: the anonymous pages beyond the cgroup's 8192, 8 bytes each.
    assert_eq!(term("swap map"), (32768 - 8192) * 8);
    // Ten samples of two cgroups.
    assert_eq!(term("time series"), 10 * 2 * 2560);
    // Two cgroups (the root and /a) on one node and 5 CPUs (4 and kswapd's): per cgroup
    // its struct (4096) and lruvec (1200), and per CPU the statistics batches of its 9
    // counter items, a [local, hierarchical] pair of i64 for the memcg (and rstat's u64)
    // and one for the lruvec of each node.
    let per_cpu = (9 * 2 * 8 + 8) + 9 * 2 * 8;
    assert_eq!(term("memcg state"), 2 * (4096 + 1200 + 5 * per_cpu));
    // Two nodes (6 CPUs with the two kswapds): a lruvec and its per-CPU batches more per
    // cgroup.
    let two = t.replace("cpus = 4\n", "cpus = 4\nnodes = 2\n");
    let e3 = reclaimsim_core::budget::estimate(&Scenario::from_toml(&two).unwrap());
    assert_eq!(
        term_of(&e3, "memcg state"),
        2 * (4096 + 2 * 1200 + 6 * (per_cpu + 9 * 2 * 8))
    );
    assert_eq!(e.total, e.terms.iter().map(|t| t.bytes).sum::<u64>());
}

/// The bytes of the term of estimate `e` whose name starts with `prefix`.
fn term_of(e: &reclaimsim_core::budget::Estimate, prefix: &str) -> u64 {
    e.terms
        .iter()
        .find(|t| t.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("{prefix}: {:?}", e.terms))
        .bytes
}
