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
