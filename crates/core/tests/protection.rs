//! memory.low under limit reclaim of a parent: a child below its protection is skipped
//! while a sibling has reclaimable memory (mem_cgroup_below_low in shrink_node_memcgs).

mod common;

const T: &str = r#"
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

fn stat(r: &serde_json::Value, path: &str, key: &str) -> u64 {
    let c = r["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == path)
        .unwrap();
    c["memory.stat"][key].as_u64().unwrap()
}

#[test]
fn a_child_below_memory_low_is_left_to_its_unprotected_sibling() {
    // /p's limit reclaim walks /p/c1 and /p/c2. With reclaim targeting /p, a child's
    // effective low is its own memory.low (its parent is the target): c1 uses 8M of its
    // 32M, so mem_cgroup_below_low() skips it, and c2 (64M in a 32M parent) has enough to
    // reclaim on every pass, so the memcg_low_reclaim retry never comes.
    let r = common::run_json(&T.replace("LOW", "32M"));
    assert_eq!(stat(&r, "/p/c1", "pgscan"), 0);
    assert_eq!(stat(&r, "/p/c2", "pgscan"), stat(&r, "/p", "pgscan"));
    assert_eq!(stat(&r, "/p/c1", "anon"), 8 << 20);
    // Protection below the usage (4M of 8M) leaves c1 to reclaim like any child.
    let r = common::run_json(&T.replace("LOW", "4M"));
    assert!(stat(&r, "/p/c1", "pgscan") > 0);
}
