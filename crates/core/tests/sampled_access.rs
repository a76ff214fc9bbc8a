//! `access_model = "sampled"` (mm/sampled_access.rs) in whole runs: its faulting bitmap
//! stays the PTEs' through reclaim, swap-in, fork, a text's refaults and exit (every
//! invariant checked after every reclaim pass), and the mode is refused where its
//! argument does not hold.

mod common;

/// A memcg-limited random usemem on `lru`, with or without prealloc's fork (and then
/// with a text of two pages, which reclaim takes and the writes fault back).
fn scenario(lru: &str, model: &str, prealloc: bool) -> String {
    let text = if prealloc { "8K" } else { "0" };
    format!(
        r#"duration = "300ms"
[kernel]
lru = "{lru}"
[machine]
cpus = 4
memory_per_node = "256M"
[machine.swap]
size = "64M"
device = "zram"
[[cgroup]]
path = "/a"
memory.max = "12M"
[[workload]]
type = "usemem"
cgroup = "/a"
processes = 2
threads = 2
size = "8M"
random = true
repeat = 0
prealloc = {prealloc}
prefault = {prealloc}
text = "{text}"
access_model = "{model}"
"#
    )
}

#[test]
fn a_sampled_area_keeps_its_faulting_bitmap_through_reclaim_fork_and_exit() {
    for lru in ["classic", "mglru"] {
        for prealloc in [false, true] {
            // run_checked fails the run at the first broken invariant.
            let r = common::run_checked_json(&scenario(lru, "sampled", prealloc));
            // 16M of areas in 12M: pages went to swap and came back.
            let v = &r["vmstat"];
            assert!(
                v["pswpout"].as_u64() > Some(1000) && v["pswpin"].as_u64() > Some(1000),
                "{lru} prealloc={prealloc}: {v}"
            );
        }
    }
}

#[test]
fn a_sampled_writer_faults_its_reclaimed_text_back() {
    // calib-anon-random's shape, sampled: two threads writing 48M at random in a 32M
    // memcg with 12K of text, for 3 virtual seconds. Reclaim takes text pages (file
    // refaults: a text page was faulted back after reclaim took it).
    for lru in ["classic", "mglru"] {
        let t = format!(
            r#"duration = "3s"
[kernel]
lru = "{lru}"
[machine]
cpus = 2
memory_per_node = "1G"
[machine.swap]
size = "256M"
device = "zram"
[[cgroup]]
path = "/anon"
memory.max = "32M"
[[workload]]
type = "usemem"
cgroup = "/anon"
threads = 2
size = "48M"
prefault = true
random = true
repeat = 1
text = "12K"
access_model = "sampled"
"#
        );
        let r = common::run_json(&t);
        let v = &r["vmstat"];
        assert!(
            v["workingset_refault_file"].as_u64() > Some(0) && v["pswpin"].as_u64() > Some(1000),
            "{lru}: {v}"
        );
    }
}

/// The error of validating a usemem of `fields` with access_model = "sampled".
fn refusal(fields: &str) -> String {
    let t = format!(
        r#"duration = "1s"
[machine]
cpus = 1
memory_per_node = "1G"
[[workload]]
type = "usemem"
size = "4M"
access_model = "sampled"
{fields}
"#
    );
    match reclaimsim_core::Scenario::from_toml(&t) {
        Ok(_) => panic!("accepted: {fields}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn sampled_access_is_refused_where_writes_are_not_memoryless_draws() {
    // Each case: the fields, and what the error must say of them.
    for (fields, says) in [
        ("random = false", "random = false"),
        ("random = true\nmapping = \"shared_file\"", "shared_file"),
        ("random = true\nunmap = true", "unmap = true"),
    ] {
        let msg = refusal(fields);
        assert!(
            msg.contains("scenario.workload[0].access_model")
                && msg.contains("\"sampled\"")
                && msg.contains(says),
            "{fields}: {msg}"
        );
    }
    // The mode's name is checked against the allowed ones.
    let t = common::toml("", "random = true\naccess_model = \"poisson\"");
    let msg = reclaimsim_core::Scenario::from_toml(&t)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("access_model") && msg.contains("per_access") && msg.contains("sampled"),
        "{msg}"
    );
}
