//! Scenario knobs that exist in one cgroup version only, and their errors.

use reclaimsim_core::{Error, Scenario};

fn scenario(kernel: &str, memory: &str) -> Result<Scenario, Error> {
    Scenario::from_toml(&format!(
        r#"
duration = "1s"
[machine]
cpus = 2
memory_per_node = "1G"
[kernel]
{kernel}
[[cgroup]]
path = "/a"
{memory}
[[workload]]
type = "usemem"
cgroup = "/a"
size = "1M"
"#
    ))
}

fn error_of(kernel: &str, memory: &str) -> String {
    scenario(kernel, memory).expect_err("refused").to_string()
}

#[test]
fn cgroup_version_is_one_or_two() {
    assert!(scenario("cgroup_version = 1", "").is_ok());
    assert!(scenario("", "").unwrap().kernel.cgroup_version == 2);
    let e = error_of("cgroup_version = 3", "");
    assert!(
        e.contains("scenario.kernel.cgroup_version") && e.contains("allowed 1 or 2"),
        "{e}"
    );
}

#[test]
fn each_knob_belongs_to_its_cgroup_version() {
    for knob in [
        "memory.high = \"1M\"",
        "memory.low = \"1M\"",
        "memory.min = \"1M\"",
        "memory.swap.max = \"1M\"",
    ] {
        assert!(scenario("", knob).is_ok(), "{knob} on v2");
        let e = error_of("cgroup_version = 1", knob);
        let field = knob.split(" =").next().unwrap();
        assert!(e.contains(&format!("scenario.cgroup[0].{field}")), "{e}");
        assert!(e.contains("cgroup v1 has no such knob"), "{e}");
    }
    assert!(scenario("cgroup_version = 1", "memory.swappiness = 10").is_ok());
    let e = error_of("", "memory.swappiness = 10");
    assert!(
        e.contains("scenario.cgroup[0].memory.swappiness")
            && e.contains("cgroup v2 has no per-cgroup swappiness"),
        "{e}"
    );
}

#[test]
fn swap_max_takes_a_size_or_max() {
    let sc = scenario("", "memory.swap.max = \"max\"").unwrap();
    assert!(sc.cgroups[0].memory.swap.max.is_some());
    let e = error_of("", "memory.swap.maxx = \"1M\"");
    assert!(e.contains("maxx"), "{e}");
}

#[test]
fn copies_expand_cgroups_and_workloads_in_order() {
    let t = r#"
duration = "100ms"
[machine]
cpus = 8
memory_per_node = "1G"
[[cgroup]]
path = "/m{i}"
copies = 3
memory.max = "64M"
[[workload]]
type = "usemem"
name = "job{i}"
cgroup = "/m{i}"
size = "1M"
copies = 3
"#;
    let sc = Scenario::from_toml(t).unwrap();
    let paths: Vec<&str> = sc.cgroups.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["/m0", "/m1", "/m2"]);
    let names: Vec<(&str, &str)> = sc
        .workloads
        .iter()
        .map(|w| (w.common().name.as_str(), w.common().cgroup.as_str()))
        .collect();
    assert_eq!(names, [("job0", "/m0"), ("job1", "/m1"), ("job2", "/m2")]);
    // The normalized scenario is expanded: it reads back the same.
    let json = serde_json::to_string(&sc).unwrap();
    assert!(!json.contains("copies") && !json.contains("{i}"));
    let e = Scenario::from_toml(&t.replace("path = \"/m{i}\"", "path = \"/m\""))
        .expect_err("copies without {i}")
        .to_string();
    assert!(
        e.contains("scenario.cgroup[0].path") && e.contains("{i}"),
        "{e}"
    );
    let e = Scenario::from_toml(&t.replace("copies = 3\nmemory", "copies = 0\nmemory"))
        .expect_err("zero copies")
        .to_string();
    assert!(
        e.contains("scenario.cgroup[0].copies") && e.contains("allowed 1..=4095"),
        "{e}"
    );
}

#[test]
fn a_rate_limited_usemem_thread_keeps_its_pace() {
    // 4 MiB/s = 1024 pages/s on an idle machine: in 500 ms, access k (from 1) starts at
    // (k - 1) / 1024 s, so 512 start within the run (the 513th at 500 ms is the end).
    let t = r#"
duration = "500ms"
[machine]
cpus = 2
memory_per_node = "1G"
[[workload]]
type = "usemem"
size = "64M"
random = true
repeat = 0
rate = "4M"
mapping = "shmem"
"#;
    let sc = Scenario::from_toml(t).unwrap();
    let r = reclaimsim_core::sim::run(&sc, &mut |_, _| true).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    let n = v["workloads"][0]["accesses"].as_u64().unwrap();
    assert!((512..=513).contains(&n), "{n} accesses");
}
