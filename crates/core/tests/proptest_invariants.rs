//! Random small machines, cgroup trees and workloads, on the classic LRU or MGLRU (with
//! seed 001's iterator or the ablations): every run must keep the model's invariants after
//! every reclaim pass (checked by `run_checked`), end without an error, and give the same
//! bytes as the same run without the checks (determinism).
//! Cases: PROPTEST_CASES (default 24); seed: PROPTEST_RNG_SEED (docs/testing.md).

use proptest::prelude::*;
use reclaimsim_core::{sim, Scenario};

#[derive(Debug, Clone)]
struct Case {
    nodes: u32,
    mem_mb: u32,
    swap: u8,
    limits: Vec<(u32, u32, u32, u32)>,
    workloads: Vec<(bool, u32, u32, u8)>,
    /// 0: classic; 1: MGLRU; 2: MGLRU with mglru_memcg_iter; 3: MGLRU without tiers,
    /// look-around and Bloom filters, and without the page-table walk (enabled = 0x1).
    lru: u8,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1u32..=2,
        32u32..=96,
        0u8..3,
        prop::collection::vec((0u32..48, 0u32..48, 0u32..16, 0u32..16), 0..3),
        prop::collection::vec((any::<bool>(), 1u32..3, 4u32..48, 0u8..4), 1..3),
        0u8..4,
        0u64..(i64::MAX as u64),
    )
        .prop_map(|(nodes, mem_mb, swap, limits, workloads, lru, seed)| Case {
            nodes,
            mem_mb,
            swap,
            limits,
            workloads,
            lru,
            seed,
        })
}

fn toml(c: &Case) -> String {
    let mut t = format!(
        "duration = \"60ms\"\nseed = {}\nsample_interval = \"10ms\"\n[machine]\nnodes = {}\ncpus = 16\nmemory_per_node = \"{}M\"\n",
        c.seed, c.nodes, c.mem_mb
    );
    t += match c.lru {
        0 => "",
        1 => "[kernel]\nlru = \"mglru\"\n",
        2 => "[kernel]\nlru = \"mglru\"\n[variants]\nmglru_memcg_iter = true\n",
        _ => "[kernel]\nlru = \"mglru\"\n[kernel.lru_gen]\nenabled = 1\n[variants]\nmglru_tiers = false\nmglru_look_around = false\nmglru_bloom = false\n",
    };
    match c.swap {
        1 => t += "[machine.swap]\nsize = \"256M\"\ndevice = \"zram\"\n",
        2 => t += "[machine.swap]\nsize = \"256M\"\ndevice = \"ssd\"\n",
        _ => {}
    }
    // A chain /c0/c1/... with optional max/high/low/min (0 = unset).
    let mut path = String::new();
    let mut paths = vec!["/".to_string()];
    for (i, (max, high, low, min)) in c.limits.iter().enumerate() {
        path = format!("{path}/c{i}");
        t += &format!("[[cgroup]]\npath = \"{path}\"\n");
        if *max > 0 {
            t += &format!("memory.max = \"{}M\"\n", max + 8);
        }
        if *high > 0 {
            t += &format!("memory.high = \"{}M\"\n", high + 8);
        }
        if *low > 0 {
            t += &format!("memory.low = \"{low}M\"\n");
        }
        if *min > 0 {
            t += &format!("memory.min = \"{min}M\"\n");
        }
        paths.push(path.clone());
    }
    for (i, (anon, procs, mb, pat)) in c.workloads.iter().enumerate() {
        let cg = &paths[(i * 7 + *mb as usize) % paths.len()];
        if *anon && *pat == 3 {
            t += &format!(
                "[[workload]]\ntype = \"request_churn\"\ncgroup = \"{cg}\"\nthreads = {}\nrequest_size = \"{}K\"\nservice = \"5us\"\n",
                procs + 1,
                mb * 4
            );
        } else if *anon {
            t += &format!(
                "[[workload]]\ntype = \"usemem\"\ncgroup = \"{cg}\"\nprocesses = {procs}\nsize = \"{mb}M\"\nrandom = {}\nrepeat = 0\nprealloc = {}\nprefault = {}\ntext = \"{}K\"\n",
                pat % 2 == 0,
                // Half the areas forked from a parent that populated them (COW).
                mb % 2 == 1,
                mb % 2 == 1,
                // No text, or one or two pages of it (a program's hot code).
                (mb % 3) * 4
            );
        } else {
            let pattern = ["seq", "uniform", "zipf", "hotscan"][*pat as usize];
            let files = if pattern == "hotscan" {
                format!("[\"2M\", \"{mb}M\"]")
            } else {
                format!("[\"{mb}M\"]")
            };
            t += &format!(
                "[[workload]]\ntype = \"file_read\"\ncgroup = \"{cg}\"\nthreads = {procs}\nfiles = {files}\npattern = \"{pattern}\"\npasses = 0\n"
            );
        }
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(24), .. ProptestConfig::default() })]
    #[test]
    fn invariants_hold_on_random_scenarios(c in case()) {
        let t = toml(&c);
        let sc = Scenario::from_toml(&t).map_err(|e| TestCaseError::fail(format!("{e}\n{t}")))?;
        let r = sim::run_checked(&sc, true, &mut |_, _| true);
        prop_assert!(r.is_ok(), "{:?}\n{}", r.err(), t);
        let plain = sim::run(&sc, &mut |_, _| true).map_err(|e| TestCaseError::fail(format!("{e}\n{t}")))?;
        let (a, b) = (serde_json::to_string(&r.unwrap()).unwrap(), serde_json::to_string(&plain).unwrap());
        prop_assert!(a == b, "the run with checks differs from the run without\n{}", t);
    }
}
