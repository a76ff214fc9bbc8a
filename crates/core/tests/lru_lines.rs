//! The cache lines of LRU list operations (mm/lru_lines.rs): a lock hold pays one
//! transfer for each line another CPU wrote last, and none for lines it owns.

use reclaimsim_core::fixture::{one_node_machine, run_probe};
use reclaimsim_core::sim::Sim;
use reclaimsim_core::Scenario;

/// The memcg /a (id 1).
const A: u16 = 1;

#[test]
fn a_drain_after_another_cpus_pays_for_the_lock_word_the_head_folio_and_the_lruvec() {
    // A transfer costs 1 us here, so that it stands out.
    let s = one_node_machine("64M", None, "\n[costs]\ncacheline_transfer = 1000\n");
    let (_, pfns) = s.fixture_anon_folios(A, 0, 31, false, 0);
    // Placement moves no line. Three batches of 10; pfns[30] stays on the list.
    let drain = |cpu: u32, batch: std::ops::Range<usize>, at: u64| {
        s.fixture_to_lru_add_batch(cpu, &pfns[batch]);
        let end = run_probe(&s, cpu, at, |s| async move { s.lru_add_drain().await });
        end - at
    };
    let first = drain(0, 0..10, 1_000_000);
    // CPU 1 links 10 folios in front of CPU 0's last one: the lru_lock word, the old head
    // folio's lru.prev and the lruvec's head and counters were CPU 0's: 3 transfers. Its
    // own folios' lines are cold (never written under the lock), and after the first
    // insertion every line it writes is its own.
    let second = drain(1, 10..20, 2_000_000);
    // The same again on CPU 1: every line is its own.
    let third = drain(1, 20..30, 3_000_000);
    assert_eq!(
        second - third,
        3 * 1000,
        "durations {first} {second} {third}"
    );
    // CPU 0's drain found every line cold but the lock word, which it took from nobody.
    assert_eq!(first, third, "durations {first} {second} {third}");
}

#[test]
fn lines_from_another_node_cost_the_remote_transfer() {
    // Two nodes of two CPUs each (CPUs 0-1 on node 0, 2-3 on node 1); a same-node transfer
    // costs 1 us, a remote one 5 us.
    let t = r#"
duration = "1000s"
[machine]
nodes = 2
cpus = 4
memory_per_node = "64M"
[kernel]
memcg_flush_phase = "1.9s"
[costs]
cacheline_transfer = 1000
cacheline_transfer_remote = 5000
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "4K"
start = "900s"
"#;
    let s = Sim::build(&Scenario::from_toml(t).unwrap()).unwrap();
    let (_, pfns) = s.fixture_anon_folios(A, 0, 31, false, 0);
    let drain = |cpu: u32, batch: std::ops::Range<usize>, at: u64| {
        s.fixture_to_lru_add_batch(cpu, &pfns[batch]);
        let end = run_probe(&s, cpu, at, |s| async move { s.lru_add_drain().await });
        end - at
    };
    drain(0, 0..10, 1_000_000);
    // CPU 2 (node 1) after CPU 0 (node 0): the lock word, the head folio and the lruvec
    // line come from the other node.
    let second = drain(2, 10..20, 2_000_000);
    let third = drain(2, 20..30, 3_000_000);
    assert_eq!(second - third, 3 * 5000, "durations {second} {third}");
}
