//! Each workload thread's own counts and elapsed time (`workloads[i].threads`), the rows
//! kernel-run compares with the kernel's hits#tN, misses#tN and elapsed_ms#tN.

mod common;

use serde_json::Value;

const PAGES: &str = r#"
duration = "1s"
[machine]
cpus = 10
memory_per_node = "256M"
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
processes = 2
threads = 3
size = "40K"
repeat = 2
[[workload]]
type = "usemem"
cgroup = "/a"
size = "20K"
repeat = 3
[[workload]]
type = "file_read"
cgroup = "/a"
threads = 2
files = ["40K"]
pattern = "seq"
passes = 2
"#;

fn threads(w: &Value) -> Vec<Value> {
    w["threads"].as_array().expect("threads").clone()
}

fn get(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn each_thread_counts_its_own_span_in_stream_order() {
    let out = common::run_json(PAGES);
    let ws = out["workloads"].as_array().unwrap();
    // usemem_span splits 10 pages over 3 threads as 3, 3 and 4; both processes alike.
    // Sequential passes: the first touch of a page is a minor fault (neither hit nor
    // miss), each later pass a hit. The second workload's one thread is stream 6.
    let spans = [
        (0, 3, 2),
        (1, 3, 2),
        (2, 4, 2),
        (3, 3, 2),
        (4, 3, 2),
        (5, 4, 2),
    ];
    let t0 = threads(&ws[0]);
    assert_eq!(t0.len(), spans.len());
    for (t, &(stream, span, passes)) in t0.iter().zip(&spans) {
        assert_eq!(get(t, "stream"), stream, "{t}");
        assert_eq!(get(t, "accesses"), span * passes, "{t}");
        assert_eq!(get(t, "hits"), span * (passes - 1), "{t}");
        assert_eq!(get(t, "misses"), 0, "{t}");
    }
    let t1 = threads(&ws[1]);
    assert_eq!(t1.len(), 1);
    assert_eq!(
        (
            get(&t1[0], "stream"),
            get(&t1[0], "accesses"),
            get(&t1[0], "hits")
        ),
        (6, 15, 10)
    );
    // file_read: 2 threads (streams 7 and 8) each read the 10 pages twice; a page is
    // read from the device once, by whichever thread reaches it first.
    let t2 = threads(&ws[2]);
    assert_eq!(
        t2.iter().map(|t| get(t, "stream")).collect::<Vec<_>>(),
        [7, 8]
    );
    for t in &t2 {
        assert_eq!(get(t, "accesses"), 20, "{t}");
        assert_eq!(get(t, "hits") + get(t, "misses"), 20, "{t}");
    }
    assert_eq!(t2.iter().map(|t| get(t, "misses")).sum::<u64>(), 10);
    for w in ws {
        for k in ["accesses", "hits", "misses"] {
            let sum: u64 = threads(w).iter().map(|t| get(t, k)).sum();
            assert_eq!(sum, get(w, k), "{k}: threads against the workload");
        }
    }
}

#[test]
fn a_threads_elapsed_time_ends_at_its_runtime_and_its_misses_sum_to_the_workloads() {
    // Two threads writing at random over 8M in a 4M memcg until their 50 ms runtime: each
    // stops at the first access that reaches it (one access or fault past it at most).
    let t = r#"
duration = "1s"
[machine]
cpus = 2
memory_per_node = "256M"
[machine.swap]
size = "64M"
device = "zram"
[[cgroup]]
path = "/a"
memory.max = "4M"
[[workload]]
type = "usemem"
cgroup = "/a"
threads = 2
size = "8M"
random = true
repeat = 0
runtime = "50ms"
"#;
    let out = common::run_json(t);
    let w = &out["workloads"][0];
    let ts = threads(w);
    assert_eq!(ts.len(), 2);
    for th in &ts {
        let e = get(th, "elapsed_ns");
        assert!(
            (50_000_000..50_200_000).contains(&e),
            "elapsed {e} ns: {th}"
        );
        assert!(
            e <= get(w, "runtime_ns"),
            "a thread within its workload: {th}"
        );
    }
    let sum: u64 = ts.iter().map(|t| get(t, "misses")).sum();
    assert_eq!(sum, get(w, "misses"));
    // Half the area is out at any time: both threads miss, neither alone makes the sum.
    assert!(ts.iter().all(|t| get(t, "misses") < sum), "{ts:?}");
}
