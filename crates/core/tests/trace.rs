//! Trace replay: every format on small committed traces (tests/traces), malformed ones too.

use reclaimsim_core::{sim, Error, Scenario};
use serde_json::Value;

fn traces() -> String {
    format!("{}/../../tests/traces", env!("CARGO_MANIFEST_DIR"))
}

fn scenario(path: &str, extra: &str, limit: &str) -> String {
    format!(
        r#"
name = "trace"
duration = "60s"
[machine]
cpus = 2
memory_per_node = "1G"
[machine.swap]
size = "64M"
device = "zram"
[[cgroup]]
path = "/t"
memory.max = "{limit}"
[[workload]]
type = "trace"
cgroup = "/t"
path = "{}/{path}"
{extra}
"#,
        traces()
    )
}

fn run(t: &str) -> Result<Value, Error> {
    let sc = Scenario::from_toml(t)?;
    let r = sim::run_checked(&sc, true, &mut |_, _| true)?;
    Ok(serde_json::to_value(&r).unwrap())
}

fn trace_stats(r: &Value) -> &Value {
    &r["workloads"][0]["trace"]
}

#[test]
fn text_trace_counts_requests_objects_and_cold_misses() {
    for target in ["file", "anon"] {
        let r = run(&scenario(
            "small.txt",
            &format!("target = \"{target}\""),
            "max",
        ))
        .unwrap();
        let t = trace_stats(&r);
        // Ids 1 2 3 1 0x10 2 3: four objects, all of them missed once (cold), three hits.
        assert_eq!(t["requests"], 7, "{target}");
        assert_eq!(t["objects"], 4);
        assert_eq!(t["misses"], 4);
        assert_eq!(t["hits"], 3);
        assert!((t["miss_ratio"].as_f64().unwrap() - 4.0 / 7.0).abs() < 1e-12);
    }
}

#[test]
fn csv_objects_span_pages_and_map_columns() {
    let r = run(&scenario("small.csv", "", "max")).unwrap();
    let t = trace_stats(&r);
    // 100 (1 page), 200 (3 pages), 100, 300 (100 bytes: 1 page), 200.
    assert_eq!(t["requests"], 5);
    assert_eq!(t["objects"], 3);
    assert_eq!(t["pages"], 5);
    assert_eq!(
        (t["hits"].as_u64(), t["misses"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(r["workloads"][0]["accesses"], 1 + 3 + 1 + 1 + 3);
    // The same columns by number, no header row skipped wrongly.
    let r = run(&scenario(
        "small.csv",
        "csv = { obj_id = 2, obj_size = \"obj_size\", op = 4 }",
        "max",
    ))
    .unwrap();
    assert_eq!(trace_stats(&r)["pages"], 5);
}

#[test]
fn oracle_general_plain_and_zstd_replay_the_same() {
    let a = run(&scenario("small.oracleGeneral", "", "256K")).unwrap();
    let b = run(&scenario("small.oracleGeneral.zst", "", "256K")).unwrap();
    assert_eq!(trace_stats(&a)["requests"], 2000);
    assert_eq!(trace_stats(&a)["misses"], trace_stats(&b)["misses"]);
    assert_eq!(a["vmstat"], b["vmstat"]);
    // A 256K limit holds fewer pages than the trace has objects: it reclaims.
    assert!(a["vmstat"]["pgscan_file"].as_u64().unwrap() > 0);
    let t = trace_stats(&a);
    assert!(t["misses"].as_u64().unwrap() > t["objects"].as_u64().unwrap());
    // `requests` stops early.
    let c = run(&scenario("small.oracleGeneral", "requests = 100", "256K")).unwrap();
    assert_eq!(trace_stats(&c)["requests"], 100);
}

#[test]
fn damon_records_become_page_accesses_at_their_rates() {
    let r = run(&scenario("small-damon.json", "target = \"anon\"", "max")).unwrap();
    let t = trace_stats(&r);
    // Region 1 (64 pages) is accessed in every sample: all its pages, both snapshots.
    // Region 2 (256 pages) at 2/20 then 10/20 of the samples.
    let n = t["requests"].as_u64().unwrap();
    assert!((128 + 10..=128 + 256).contains(&n), "{n}");
    assert!(t["objects"].as_u64().unwrap() <= 64 + 256);
    let again = run(&scenario("small-damon.json", "target = \"anon\"", "max")).unwrap();
    assert_eq!(
        trace_stats(&again)["requests"],
        n as i64,
        "seeded expansion"
    );
}

#[test]
fn malformed_traces_name_the_file_record_and_problem() {
    let cases = [
        (
            "bad.txt",
            "",
            "record 3",
            "\"three\" is not a page or object id",
        ),
        ("bad_id.csv", "", "record 3", "obj_id \"abc\""),
        // Records 2 and 3 are good ("SET" in any case); a typo is refused, not read.
        (
            "bad_op.csv",
            "",
            "record 4",
            "op \"wirte\" is not an operation",
        ),
        (
            "truncated.oracleGeneral",
            "",
            "record 51",
            "truncated: 10 of 24 bytes",
        ),
        ("truncated.oracleGeneral.zst", "", "record", ""),
        (
            "bad-damon.json",
            "",
            "record 1",
            "lacks numeric start, end or nr_accesses",
        ),
        (
            "small.csv",
            "csv = { obj_id = \"key\" }",
            "record 1",
            "no column \"key\"",
        ),
    ];
    for (file, extra, rec, what) in cases {
        let e = run(&scenario(file, extra, "max")).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Trace { .. }), "{file}: {msg}");
        assert!(
            msg.contains(file) && msg.contains(rec) && msg.contains(what),
            "{file}: {msg}"
        );
    }
    let e = run(&scenario("no-such.txt", "", "max")).unwrap_err();
    assert!(e.to_string().contains("scenario.workload[0].path"), "{e}");
}

#[test]
fn several_trace_workloads_run_at_once_in_their_own_cgroups() {
    let t = format!(
        r#"
name = "two"
duration = "60s"
[machine]
cpus = 2
memory_per_node = "1G"
[[cgroup]]
path = "/a"
memory.max = "256K"
[[cgroup]]
path = "/b"
[[workload]]
type = "trace"
cgroup = "/a"
path = "{t}/small.oracleGeneral"
[[workload]]
type = "trace"
cgroup = "/b"
path = "{t}/small.txt"
target = "anon"
"#,
        t = traces()
    );
    let r = run(&t).unwrap();
    assert_eq!(r["workloads"][0]["trace"]["requests"], 2000);
    assert_eq!(r["workloads"][1]["trace"]["requests"], 7);
    // Only the limited cgroup reclaimed.
    let pgscan = |i: usize| r["cgroups"][i]["memory.stat"]["pgscan"].as_u64().unwrap();
    let path = |i: usize| r["cgroups"][i]["path"].as_str().unwrap().to_string();
    let a = (0..3).find(|&i| path(i) == "/a").unwrap();
    let b = (0..3).find(|&i| path(i) == "/b").unwrap();
    assert!(pgscan(a) > 0 && pgscan(b) == 0);
}

#[test]
fn a_replay_cut_short_by_the_run_reports_the_requests_it_made() {
    let full = run(&scenario("small.oracleGeneral", "", "256K")).unwrap();
    let cut =
        run(&scenario("small.oracleGeneral", "", "256K").replace("\"60s\"", "\"20ms\"")).unwrap();
    let (f, t) = (trace_stats(&full), trace_stats(&cut));
    let n = t["requests"].as_u64().unwrap();
    assert!(n > 0 && n < 2000, "cut after {n} of 2000 requests");
    assert_eq!(
        t["hits"].as_u64().unwrap() + t["misses"].as_u64().unwrap(),
        n
    );
    assert!(t["objects"].as_u64().unwrap() > 0);
    assert!(t["objects"].as_u64() <= f["objects"].as_u64());
    // Every request replayed read its page; at most one more read was in flight.
    let accesses = cut["workloads"][0]["accesses"].as_u64().unwrap();
    assert!(
        (n..=n + 1).contains(&accesses),
        "{accesses} accesses, {n} requests"
    );
}
