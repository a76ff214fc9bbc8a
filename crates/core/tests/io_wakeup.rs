//! A read of a device whose completion interrupt arrives on one CPU costs
//! `ssd_remote_wakeup` more when it is submitted from another (engine/blkdev.rs): with
//! workload threads on m CPUs, a read is on the interrupt's CPU 1 time in m.
//!
//! Oracle: the rule's arithmetic on thread elapsed times. Two readers of their own files in
//! their own memcgs (no shared LRU lock) do the same work; with a wakeup `W` far above
//! everything else a thread does, a thread's extra time is a whole number of wakeups, one
//! per read that paid, and the number that paid is binomial (reads, 1/2) while both run.
//! Swapping processes are held to the same bounds, their count of wakeups rounded (their
//! writes share the device queue, which the wakeups shift a little).

mod common;

use serde_json::Value;

/// A 1 ms wakeup, ten times the read latency, so that the other costs' noise (stat
/// flushes, a shared atomic) stays far below one wakeup.
const W: u64 = 1_000_000;

/// The device of every case: a 100 us read latency, no queueing, `wakeup` as
/// ssd_remote_wakeup.
fn device_costs(wakeup: u64) -> String {
    format!(
        "[costs]\nssd_read_latency = 100000\nssd_read_interval = 1\nssd_remote_wakeup = {wakeup}\n"
    )
}

/// Two file_read workloads of one thread each, on CPUs 0 and 1, reading `pages_a` and
/// `pages_b` pages once in order, with `wakeup` as ssd_remote_wakeup.
fn readers(pages_a: u64, pages_b: u64, wakeup: u64, readers: usize) -> String {
    let costs = device_costs(wakeup);
    let mut t = format!(
        r#"duration = "10s"
[machine]
cpus = 2
memory_per_node = "256M"
{costs}[[cgroup]]
path = "/a"
[[cgroup]]
path = "/b"
"#
    );
    for (cg, pages) in [("/a", pages_a), ("/b", pages_b)].iter().take(readers) {
        t += &format!(
            r#"[[workload]]
type = "file_read"
cgroup = "{cg}"
files = ["{}K"]
pattern = "seq"
passes = 1
"#,
            pages * 4
        );
    }
    t
}

/// The first thread of each workload that reports threads: (misses, elapsed ns).
fn threads(out: &Value) -> Vec<(u64, u64)> {
    out["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["threads"].get(0))
        .map(|t| {
            (
                t["misses"].as_u64().unwrap(),
                t["elapsed_ns"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// How many wakeups `with` adds to `base` [ns]: a whole number, or the test fails.
fn wakeups(with: u64, base: u64) -> u64 {
    let extra = with - base;
    let n = (extra + W / 2) / W;
    assert!(
        extra.abs_diff(n * W) < W / 100,
        "{extra} ns is no whole number of {W} ns"
    );
    n
}

/// How many wakeups `with` adds to `base` [ns], rounded: a swapping run's timing moves
/// its writes on the shared device queue too, by far less than a wakeup in all.
fn about_wakeups(with: u64, base: u64) -> u64 {
    (with - base + W / 2) / W
}

#[test]
fn with_two_cpus_running_readers_half_the_reads_pay_the_wakeup() {
    let base = threads(&common::run_json(&readers(400, 400, 0, 2)));
    let with = threads(&common::run_json(&readers(400, 400, W, 2)));
    // Every page is read from the device once.
    assert!(
        base.iter().chain(&with).all(|t| t.0 == 400),
        "{base:?} {with:?}"
    );
    // Without the wakeup the two threads take the same time (within 1% of one wakeup).
    assert!(base[0].1.abs_diff(base[1].1) < W / 100, "{base:?}");
    // With it, each thread pays on about half its 400 reads: binomial(400, 1/2) is 200
    // with a standard deviation of 10; 150..=250 is five of them either side.
    for (w, b) in with.iter().zip(&base) {
        let n = wakeups(w.1, b.1);
        assert!(
            (150..=250).contains(&n),
            "{n} wakeups of 400: {with:?} {base:?}"
        );
    }
}

#[test]
fn a_lone_reader_is_woken_where_it_runs() {
    let base = threads(&common::run_json(&readers(100, 0, 0, 1)));
    let with = threads(&common::run_json(&readers(100, 0, W, 1)));
    assert_eq!(base, with);
}

#[test]
fn once_the_other_thread_is_gone_a_reader_pays_no_more() {
    // Reader a ends after its 10 reads; b, with 400, pays only on reads that complete
    // while a runs: at most one per read latency (100 us) of a's elapsed time, plus one,
    // where b would pay about 200 if a's exit were ignored.
    let base = threads(&common::run_json(&readers(10, 400, 0, 2)));
    let with = threads(&common::run_json(&readers(10, 400, W, 2)));
    let n_a = wakeups(with[0].1, base[0].1);
    assert!(n_a <= 10, "{with:?} {base:?}");
    let bound = with[0].1 / 100_000 + 1;
    let n_b = wakeups(with[1].1, base[1].1);
    assert!(n_b <= bound, "b paid {n_b} wakeups, a ran {} ns", with[0].1);
    assert!(bound < 150, "a ran {} ns", with[0].1);
}

#[test]
fn a_request_churn_thread_on_the_other_cpu_counts_as_running_there() {
    // A reader on CPU 0 and request_churn's two workers on CPUs 1 and 2 for the whole
    // read: threads on three CPUs, so the reader pays on about 2/3 of its 400 reads
    // (binomial: 266.7, standard deviation 9.4; 220..=313 is five of them either side).
    let t = |wakeup: u64| {
        let costs = device_costs(wakeup);
        format!(
            r#"duration = "2s"
[machine]
cpus = 3
memory_per_node = "256M"
{costs}[[cgroup]]
path = "/a"
[[cgroup]]
path = "/b"
[[workload]]
type = "file_read"
cgroup = "/a"
files = ["1600K"]
pattern = "seq"
passes = 1
[[workload]]
type = "request_churn"
cgroup = "/b"
"#
        )
    };
    let base = threads(&common::run_json(&t(0)));
    let with = threads(&common::run_json(&t(W)));
    assert_eq!((base[0].0, with[0].0), (400, 400));
    let n = wakeups(with[0].1, base[0].1);
    assert!((220..=313).contains(&n), "{n} wakeups of 400");
}

/// Two usemem processes, each in its own memcg whose limit holds half its area, swapping
/// to the device: the second pass reads most of the area back.
fn swappers(wakeup: u64, seed: u64) -> String {
    swappers_on(wakeup, seed, "ssd")
}

/// Two processes writing 32M in order, twice, each in its own 4M memcg. On the block
/// device VMA swap readahead reads 8 pages a fault: each major fault waits for its read.
fn swappers_on(wakeup: u64, seed: u64, device: &str) -> String {
    let costs = device_costs(wakeup);
    format!(
        r#"duration = "20s"
seed = {seed}
[machine]
cpus = 2
memory_per_node = "256M"
[machine.swap]
size = "128M"
device = "{device}"
{costs}[[cgroup]]
path = "/a"
memory.max = "4M"
[[cgroup]]
path = "/b"
memory.max = "4M"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "32M"
repeat = 2
[[workload]]
type = "usemem"
cgroup = "/b"
size = "32M"
repeat = 2
"#
    )
}

#[test]
fn swap_ins_pay_the_wakeup_as_page_cache_reads_do() {
    let base = threads(&common::run_json(&swappers(0, 1)));
    let with = threads(&common::run_json(&swappers(W, 1)));
    for (w, b) in with.iter().zip(&base) {
        // The same swap-ins either way (each memcg reclaims its own process alone).
        assert_eq!(w.0, b.0, "{with:?} {base:?}");
        assert!(b.0 >= 1000, "{base:?}");
        // About half of them pay: binomial(misses, 1/2) within five standard deviations.
        let n = about_wakeups(w.1, b.1) as f64;
        let (mean, sd) = (b.0 as f64 / 2.0, (b.0 as f64).sqrt() / 2.0);
        assert!((n - mean).abs() <= 5.0 * sd, "{n} of {} misses paid", b.0);
    }
}

#[test]
fn zram_swap_ins_have_no_interrupt_to_wait_for() {
    let base = threads(&common::run_json(&swappers_on(0, 1, "zram")));
    let with = threads(&common::run_json(&swappers_on(W, 1, "zram")));
    assert!(base.iter().all(|t| t.0 >= 1000), "{base:?}");
    assert_eq!(base, with);
}

#[test]
fn each_device_draws_from_its_own_stream_of_the_scenario_seed() {
    use reclaimsim_core::{sim::Sim, Scenario};
    // 64 draws on two CPUs: two streams agree on all of them once in 2^64.
    let draws = |seed: u64| {
        let s = Sim::build(&Scenario::from_toml(&swappers(W, seed)).unwrap()).unwrap();
        let mut mm = s.mm.borrow_mut();
        let file: Vec<u64> = (0..64).map(|_| mm.file_dev.read_wakeup(2)).collect();
        let swap = mm.swap.as_mut().unwrap();
        let swap: Vec<u64> = (0..64).map(|_| swap.read_wakeup(2)).collect();
        (file, swap)
    };
    let (file1, swap1) = draws(1);
    assert_eq!((file1.clone(), swap1.clone()), draws(1));
    assert_ne!(file1, swap1);
    let (file2, swap2) = draws(2);
    assert_ne!(file1, file2);
    assert_ne!(swap1, swap2);
}
