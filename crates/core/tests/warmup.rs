//! The scenario's warmup: a workload's throughput counts the accesses after it, over the
//! time after it (will-it-scale's per_process_ops discards its warmup seconds), while its
//! counts stay whole-run.

mod common;

const RUN: &str = r#"
duration = "DUR"
WARMUP
[machine]
cpus = 2
memory_per_node = "256M"
[[cgroup]]
path = "/a"
memory.max = "48M"
[machine.swap]
size = "256M"
device = "zram"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "64M"
repeat = 0
"#;

fn run(duration: &str, warmup: &str) -> serde_json::Value {
    let t = RUN.replace("DUR", duration).replace("WARMUP", warmup);
    common::run_json(&t)["workloads"][0].clone()
}

#[test]
fn throughput_after_the_warmup_is_the_later_accesses_over_the_later_time() {
    // The first pass faults its region in (no reclaim until 48M), the later ones reclaim:
    // the rate changes after the warmup, so a rate over the whole run would differ.
    let whole = run("400ms", "");
    let first = run("100ms", "");
    let warm = run("400ms", "warmup = \"100ms\"");
    let acc = |w: &serde_json::Value| w["accesses"].as_u64().unwrap();
    assert_eq!(acc(&warm), acc(&whole), "counts stay whole-run");
    // A run cut at the warmup's end saw what the warmup saw (nothing after a time changes
    // what happened before it).
    let expect = (acc(&whole) - acc(&first)) as f64 * 1e9 / 300e6;
    let got = warm["throughput"].as_f64().unwrap();
    assert!(
        (got - expect).abs() <= expect * 1e-3,
        "throughput {got} vs {expect} (whole-run {})",
        whole["throughput"]
    );
    let overall = whole["throughput"].as_f64().unwrap();
    assert!(
        (overall - expect).abs() > expect * 0.05,
        "the warmup must matter here: {overall} vs {expect}"
    );
}

#[test]
fn a_warmup_not_shorter_than_the_run_is_refused() {
    let t = RUN
        .replace("DUR", "100ms")
        .replace("WARMUP", "warmup = \"100ms\"");
    let e = reclaimsim_core::Scenario::from_toml(&t)
        .and_then(|s| s.validate().map(|_| s))
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("scenario.warmup") && e.contains("100000000 ns"),
        "{e}"
    );
}

#[test]
fn a_workload_that_ended_before_the_warmup_keeps_its_whole_run_rate() {
    // One pass over 4M (no reclaim), long over before the warmup ends at 300ms, while
    // another workload runs on to the end.
    let t = r#"
duration = "400ms"
warmup = "300ms"
[machine]
cpus = 2
memory_per_node = "256M"
[[workload]]
type = "usemem"
size = "4M"
repeat = 1
[[workload]]
type = "usemem"
size = "8M"
repeat = 0
"#;
    let w = common::run_json(t)["workloads"][0].clone();
    let (acc, ns) = (
        w["accesses"].as_u64().unwrap(),
        w["runtime_ns"].as_u64().unwrap(),
    );
    assert!(ns > 0 && ns < 300_000_000, "runtime {ns}");
    let expect = acc as f64 * 1e9 / ns as f64;
    assert_eq!(w["throughput"].as_f64().unwrap(), expect);
}

#[test]
fn the_normalized_scenario_keeps_a_warmup_and_omits_a_zero_one() {
    let t = RUN.replace("DUR", "400ms");
    let with =
        reclaimsim_core::Scenario::from_toml(&t.replace("WARMUP", "warmup = \"100ms\"")).unwrap();
    let without = reclaimsim_core::Scenario::from_toml(&t.replace("WARMUP", "")).unwrap();
    assert_eq!(serde_json::to_value(&with).unwrap()["warmup"], 100_000_000);
    assert!(serde_json::to_value(&without)
        .unwrap()
        .get("warmup")
        .is_none());
}
