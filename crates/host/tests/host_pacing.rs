//! The host replay keeps the simulator's pace: a usemem `rate` paces each thread, and with
//! `rate_catch_up = false` (a closed loop, as seed-001-scaling's servers) a thread that
//! fell behind resumes the pace where it is instead of running unpaced until it is back
//! on its old schedule. The schedules below are worked out by hand from the rate: 4096
//! bytes per access at 4,096,000 bytes per second is one access per millisecond.

use reclaimsim_core::Scenario;
use reclaimsim_host::{Clock, Options};
use std::sync::{Arc, Mutex};

const MS: u64 = 1_000_000;

/// 16 pages written once, one page per access, paced to one access per millisecond.
fn paced(catch_up: bool) -> Scenario {
    Scenario::from_toml(&format!(
        r#"
name = "pacing"
duration = "10s"
[machine]
cpus = 2
memory_per_node = "64M"
[[workload]]
type = "usemem"
size = "64K"
repeat = 1
rate = "4000K"
rate_catch_up = {catch_up}
"#
    ))
    .expect("valid scenario")
}

/// A clock that moves only when the thread sleeps, except that the third access takes
/// 3.5 ms (a stall in a fault or in reclaim). It keeps the times the thread slept until.
struct Stalling {
    now: u64,
    accesses: u64,
    sleeps: Arc<Mutex<Vec<u64>>>,
}

impl Clock for Stalling {
    /// Asked once after each access (the pace's question).
    fn now(&mut self) -> u64 {
        self.accesses += 1;
        if self.accesses == 3 {
            self.now += 3 * MS + MS / 2;
        }
        self.now
    }

    fn sleep_until(&mut self, t: u64) {
        self.sleeps.lock().unwrap().push(t);
        self.now = self.now.max(t);
    }
}

/// The times [ns] the replayed thread slept until, and its accesses.
fn sleeps(sc: &Scenario) -> (Vec<u64>, u64) {
    let sleeps = Arc::new(Mutex::new(Vec::new()));
    let s = sleeps.clone();
    let clocks = move || -> Box<dyn Clock + Send> {
        Box::new(Stalling {
            now: 0,
            accesses: 0,
            sleeps: s.clone(),
        })
    };
    let dir = std::env::temp_dir().join(format!("reclaimsim-pace-{}", std::process::id()));
    let o = Options {
        clocks: Some(&clocks),
        ..Options::default()
    };
    let st = reclaimsim_host::run_process_with(sc, 0, 0, &dir, &o).expect("native run");
    let v = sleeps.lock().unwrap().clone();
    (v, st.threads[0].accesses)
}

#[test]
fn a_closed_loop_replay_resumes_its_pace_after_a_stall() {
    // Accesses 1 and 2 end at 0 and 1 ms, each ahead of its due time (1, 2 ms): the
    // thread sleeps until then. Access 3 starts at 2 ms and ends at 5.5 ms, behind its due
    // time (3 ms): the schedule restarts at 5.5 ms with no sleep, so access k (4..=16)
    // ends at 5.5 + (k - 4) ms and sleeps until 5.5 + (k - 3) ms.
    let (got, accesses) = sleeps(&paced(false));
    assert_eq!(accesses, 16);
    let mut want = vec![MS, 2 * MS];
    want.extend((4..=16u64).map(|k| 5 * MS + MS / 2 + (k - 3) * MS));
    assert_eq!(got, want);
    assert_eq!(got.last(), Some(&(18 * MS + MS / 2)));
}

#[test]
fn an_open_loop_replay_catches_up_after_a_stall() {
    // The same stall with catch-up (fio's rate): access k is due at k ms from the start.
    // Accesses 3, 4 and 5 end at 5.5 ms, past their due times (3, 4, 5 ms): no sleep;
    // access 6 ends at 5.5 ms, before 6 ms, and from there on each sleeps until k ms.
    let (got, accesses) = sleeps(&paced(true));
    assert_eq!(accesses, 16);
    let mut want = vec![MS, 2 * MS];
    want.extend((6..=16u64).map(|k| k * MS));
    assert_eq!(got, want);
}

#[test]
fn seed_001_scaling_is_replayed_closed_loop() {
    // The built-in scenario's servers: rate = "256M" (268,435,456 bytes per second), so
    // access k is due k * 4096e9 / 268435456 = k * 15258.789... ns after the schedule's
    // start (rounded down). The host runner's pace for its first thread:
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/reclaimsim/scenarios/seed-001-scaling.toml"
    );
    let sc = Scenario::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
    let w = sc.workloads[0].spec();
    let mut p = w.host_process(&sc, 0, 0, None).expect("a host replay");
    let pace = p.threads[0].pace.as_mut().expect("a paced thread");
    // Access 1 ends at 0: the next is due at 15258 ns.
    assert_eq!(pace(0), Some(15_258));
    // Access 2 ends at 100 us, stalled past its due time (30517 ns): no wait, and the
    // schedule restarts there (an open loop would stay on the old one, due at 45776 ns
    // for access 3, and not wait after it either).
    assert_eq!(pace(100_000), None);
    // Access 3 ends at 100 us too: the next is due one period later.
    assert_eq!(pace(100_000), Some(115_258));
}

/// A clock that really sleeps (a millisecond at most) when the pace says to wait.
struct Sleeping {
    now: u64,
}

impl Clock for Sleeping {
    fn now(&mut self) -> u64 {
        self.now
    }

    fn sleep_until(&mut self, t: u64) {
        std::thread::sleep(std::time::Duration::from_millis(1));
        self.now = self.now.max(t);
    }
}

#[test]
fn a_paced_thread_counts_each_sleep_as_a_voluntary_switch() {
    // 16 accesses, each ahead of its due time on a clock that only the sleeps move: the
    // thread sleeps after every one (16 nanosleeps), each a voluntary context switch of
    // its own, counted from the thread's start. Each access is the first write to its
    // page of a fresh area: a minor fault apiece (getrusage's ru_minflt, the same call).
    let clocks = || -> Box<dyn Clock + Send> { Box::new(Sleeping { now: 0 }) };
    let dir = std::env::temp_dir().join(format!("reclaimsim-vcsw-{}", std::process::id()));
    let o = Options {
        clocks: Some(&clocks),
        ..Options::default()
    };
    let st = reclaimsim_host::run_process_with(&paced(false), 0, 0, &dir, &o).expect("native run");
    let t = &st.threads[0];
    assert_eq!(t.accesses, 16);
    assert!(t.minor_faults >= 16, "{} minor faults", t.minor_faults);
    let vol = t.voluntary_ctxt_switches.expect("the thread ended");
    assert!(vol >= 16, "{vol} voluntary switches");
    assert!(t.nonvoluntary_ctxt_switches.is_some());
}
