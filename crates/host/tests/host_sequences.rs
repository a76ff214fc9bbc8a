//! The native runner issues exactly the simulator's page-access sequences: both are dumped,
//! thread by thread (keyed by the task's random stream), and compared; trace workloads
//! (CSV with multi-page objects, zstd oracleGeneral on anon, DAMON) included.

use reclaimsim_core::workload::access::Access;
use reclaimsim_core::{sim, Scenario};
use std::collections::BTreeMap;

const SCENARIO: &str = r#"
name = "sequences"
seed = 7
duration = "600s"
[machine]
cpus = 16
memory_per_node = "2G"
[[cgroup]]
path = "/a"
memory.max = "8M"
[[workload]]
type = "usemem"
cgroup = "/a"
processes = 2
threads = 2
size = "2M"
prefault = true
random = true
repeat = 2
unmap = true
[[workload]]
type = "usemem"
size = "1M"
step = "8K"
repeat = 3
fill = true
[[workload]]
type = "file_read"
cgroup = "/a"
files = ["256K", "128K"]
pattern = "seq"
passes = 2
[[workload]]
type = "file_read"
files = ["512K"]
pattern = "uniform"
accesses = 500
threads = 2
[[workload]]
type = "file_read"
files = ["1M"]
pattern = "zipf"
theta = 0.99
accesses = 700
[[workload]]
type = "file_read"
files = ["64K", "256K"]
pattern = "hotscan"
hot_per_stream = 3
accesses = 100
[[workload]]
type = "trace"
cgroup = "/a"
path = "TRACES/small.csv"
[[workload]]
type = "trace"
path = "TRACES/small.oracleGeneral.zst"
target = "anon"
requests = 500
[[workload]]
type = "trace"
path = "TRACES/small-damon.json"
"#;

fn scenario_text() -> String {
    SCENARIO.replace(
        "TRACES",
        &format!("{}/../../tests/traces", env!("CARGO_MANIFEST_DIR")),
    )
}

#[test]
fn native_runner_issues_the_simulated_sequences() {
    let sc = Scenario::from_toml(&scenario_text()).expect("valid scenario");
    let simulated: BTreeMap<u64, Vec<Access>> = sim::record_accesses(&sc)
        .expect("simulation")
        .into_iter()
        .collect();

    let dir = std::env::temp_dir().join(format!("reclaimsim-seq-{}", std::process::id()));
    let mut native = BTreeMap::new();
    for wi in 0..sc.workloads.len() {
        reclaimsim_host::create_files(&sc, wi, &dir).expect("files");
        for p in 0..reclaimsim_host::processes(&sc, wi).expect("replayable") {
            let st =
                reclaimsim_host::run_process(&sc, wi, p, &dir, true, None).expect("native run");
            for t in st.threads {
                assert_eq!(
                    t.accesses as usize,
                    t.log
                        .as_ref()
                        .unwrap()
                        .iter()
                        .filter(|a| !matches!(a, Access::Unmap { .. }))
                        .count()
                );
                native.insert(t.stream, t.log.unwrap());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);

    let tasks: u64 = sc.workloads.iter().map(|w| w.nr_tasks()).sum();
    assert_eq!(native.len() as u64, tasks, "one native log per task");
    assert_eq!(
        simulated.keys().collect::<Vec<_>>(),
        native.keys().collect::<Vec<_>>()
    );
    for (stream, sim_log) in &simulated {
        let nat = &native[stream];
        assert!(!sim_log.is_empty(), "task {stream} issued no accesses");
        assert_eq!(sim_log.len(), nat.len(), "task {stream}: length");
        if let Some(i) = sim_log.iter().zip(nat).position(|(a, b)| a != b) {
            panic!(
                "task {stream}: access {i} differs: sim {:?}, native {:?}",
                sim_log[i], nat[i]
            );
        }
    }
    // The usemem random workload unmapped between its passes, on both sides.
    assert!(native[&0].iter().any(|a| matches!(a, Access::Unmap { .. })));
    // Its prefault populated the thread's span (2M over 2 threads: 256 pages) first.
    let populated = native[&0]
        .iter()
        .take_while(|a| matches!(a, Access::Populate { .. }))
        .count();
    assert_eq!(populated, 256);
    // The second usemem (1M, one thread) wrote its 256 pages in order first, then its
    // passes every 8K.
    let filled: Vec<Access> = (0..256)
        .map(|vpn| Access::Touch { vpn, random: false })
        .collect();
    let log = native
        .values()
        .find(|l| l.len() == 256 + 3 * 128)
        .expect("the filled usemem's log");
    assert_eq!(&log[..256], &filled[..]);
    assert_eq!(
        log[256],
        Access::Touch {
            vpn: 0,
            random: false
        }
    );
    assert_eq!(
        log[257],
        Access::Touch {
            vpn: 2,
            random: false
        }
    );
}

#[test]
fn unbounded_and_timed_workloads_are_refused() {
    let t = scenario_text().replacen("repeat = 2", "repeat = 0", 1);
    let sc = Scenario::from_toml(&t).unwrap();
    let e = reclaimsim_host::processes(&sc, 0).unwrap_err();
    assert!(e.contains("repeat"), "{e}");
    let t = scenario_text().replacen("accesses = 500", "accesses = 0", 1);
    let sc = Scenario::from_toml(&t).unwrap();
    let e = reclaimsim_host::processes(&sc, 3).unwrap_err();
    assert!(
        e.contains("scenario.workload[3]") && e.contains("accesses"),
        "{e}"
    );
}
