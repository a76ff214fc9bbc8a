//! The report's hierarchical cgroup counters: a parent's are the sum over its subtree,
//! and a tree of 4095 cgroups is summed in one bottom-up pass per sample (not once per
//! cgroup per ancestor, which never ends on a deep chain).

mod common;

use common::{cgroup, within};
use reclaimsim_core::{sim, Scenario};

#[test]
fn a_parent_counts_its_subtree() {
    let t = r#"duration = "20ms"
[machine]
cpus = 2
memory_per_node = "256M"
[[cgroup]]
path = "/a"
[[cgroup]]
path = "/a/b"
[[cgroup]]
path = "/a/c"
[[workload]]
type = "usemem"
cgroup = "/a/b"
size = "4M"
prefault = true
repeat = 0
[[workload]]
type = "file_read"
cgroup = "/a/c"
files = ["512K"]
passes = 0
"#;
    let r = sim::run(&Scenario::from_toml(t).unwrap(), &mut |_, _| true).unwrap();
    let r = serde_json::to_value(&r).unwrap();
    let stat = |p: &str, k: &str| cgroup(&r, p)["memory.stat"][k].as_u64().unwrap();
    // usemem prefaulted 4M of anon in b; file_read cached 512K of file in c (128 reads of 80 us) (both run on
    // to the end, nothing is reclaimed: 256M is plenty).
    assert_eq!(stat("/a/b", "anon"), 4 << 20);
    assert_eq!(stat("/a/c", "file"), 512 << 10);
    for k in ["anon", "file", "pgfault", "pagetables", "slab_reclaimable"] {
        assert_eq!(stat("/a", k), stat("/a/b", k) + stat("/a/c", k), "{k}");
    }
    assert_eq!(stat("/", "anon"), stat("/a", "anon"));
}

#[test]
fn a_chain_of_4095_cgroups_is_sampled_and_reported() {
    let mut t = String::from(
        "duration = \"5ms\"\nsample_interval = \"1ms\"\n[machine]\ncpus = 1\nmemory_per_node = \"64M\"\n",
    );
    let mut p = String::new();
    for i in 0..4095 {
        p += &format!("/{}", i % 10);
        t += &format!("[[cgroup]]\npath = \"{p}\"\n");
    }
    t += &format!("[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\nprefault = true\nrepeat = 0\ncgroup = \"{p}\"\n");
    let (rows, anon) = within(600, move || {
        let r = sim::run(&Scenario::from_toml(&t).unwrap(), &mut |_, _| true).unwrap();
        let r = serde_json::to_value(&r).unwrap();
        (
            r["timeseries"]["rows"].as_array().unwrap().len(),
            cgroup(&r, "/")["memory.stat"]["anon"].as_u64().unwrap(),
        )
    });
    // Five samples (1..5 ms, the last at the run's end) of 4096 cgroups; the leaf's anon
    // counted at the root.
    assert_eq!(rows, 5 * 4096);
    assert_eq!(anon, 1 << 20);
}
