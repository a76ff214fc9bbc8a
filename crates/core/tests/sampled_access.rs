//! `access_model = "sampled"` (mm/sampled_access.rs) in whole runs: its faulting bitmap
//! stays the PTEs' through reclaim, swap-in, fork and exit (every invariant checked after
//! every reclaim pass), and the mode is refused where its argument does not hold.

mod common;

/// A memcg-limited random usemem on `lru`, with or without prealloc's fork.
fn scenario(lru: &str, model: &str, prealloc: bool) -> String {
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
        ("random = true\ntext = \"8K\"", "text > 0"),
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
