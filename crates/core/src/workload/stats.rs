//! What a workload did: the live counters its tasks bump ([`Tally`], one per workload
//! and one per thread) and the report's rows built from them ([`WorkloadStats`],
//! [`ThreadStats`]).

use crate::engine::Time;
use serde::Serialize;
use std::cell::Cell;
use std::rc::Rc;

/// What a workload did (reported per workload, summed over its tasks).
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadStats {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub cgroup: String,
    pub tasks: u32,
    /// Page accesses issued.
    pub accesses: u64,
    /// Accesses to resident pages (no fault, no page-cache miss).
    pub hits: u64,
    /// Accesses that had to read from a device (major faults, page-cache misses).
    pub misses: u64,
    pub major_faults: u64,
    pub minor_faults: u64,
    /// Virtual time from the workload's start to its last task's end (or the run's end) [ns].
    pub runtime_ns: u64,
    /// Accesses per virtual second, after the scenario's warmup if it has one.
    pub throughput: f64,
    pub oom_killed: bool,
    /// Trace workloads: requests and their hits and misses (a request misses when any of
    /// its pages missed), the libCacheSim view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceStats>,
    /// Each thread's counts and elapsed time, in stream order (usemem, file_read, trace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadStats>,
    #[serde(skip)]
    pub start_ns: u64,
    #[serde(skip)]
    pub end_ns: u64,
    #[serde(skip)]
    pub live: u32,
}

impl WorkloadStats {
    pub fn new(name: String, kind: &str, cgroup: &str, tasks: u32) -> Self {
        WorkloadStats {
            name,
            kind: kind.into(),
            cgroup: cgroup.into(),
            tasks,
            accesses: 0,
            hits: 0,
            misses: 0,
            major_faults: 0,
            minor_faults: 0,
            runtime_ns: 0,
            throughput: 0.0,
            oom_killed: false,
            trace: None,
            threads: Vec::new(),
            start_ns: u64::MAX,
            end_ns: 0,
            live: tasks,
        }
    }
}

/// A trace workload's request counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TraceStats {
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    /// misses / requests (0 with no requests).
    pub miss_ratio: f64,
    /// Distinct objects seen, and the pages they span.
    pub objects: u64,
    pub pages: u64,
}

/// A workload's live counters, shared by its tasks, or one thread's, which also count into
/// its workload's (`parent`). They are cells, so counting an access takes no borrow, and the
/// report reads them when it is built: a run that ends while a task is in the middle of an
/// access reports everything counted up to that point.
#[derive(Default, Debug)]
pub struct Tally {
    /// The workload's tally, for a thread's.
    pub parent: Option<Rc<Tally>>,
    pub accesses: Cell<u64>,
    pub hits: Cell<u64>,
    pub misses: Cell<u64>,
    pub major: Cell<u64>,
    pub minor: Cell<u64>,
    /// Trace workloads: requests replayed, and of those, requests that hit and missed.
    pub requests: Cell<u64>,
    pub request_hits: Cell<u64>,
    pub request_misses: Cell<u64>,
    /// Trace workloads: distinct objects seen, and the pages they span.
    pub objects: Cell<u64>,
    pub pages: Cell<u64>,
}

/// Add one to a counter.
#[inline]
fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

impl Tally {
    /// Add one to counter `f` of this tally and of its workload's.
    #[inline]
    pub(crate) fn inc(&self, f: fn(&Tally) -> &Cell<u64>) {
        bump(f(self));
        if let Some(p) = &self.parent {
            bump(f(p));
        }
    }

    /// Add `n` to counter `f` of this tally and of its workload's (a sampled chunk's
    /// writes).
    pub(crate) fn add(&self, f: fn(&Tally) -> &Cell<u64>, n: u64) {
        f(self).set(f(self).get() + n);
        if let Some(p) = &self.parent {
            f(p).set(f(p).get() + n);
        }
    }

    /// Set counter `f` of this tally and of its workload's (a one-thread workload's
    /// gauge).
    pub(crate) fn set(&self, f: fn(&Tally) -> &Cell<u64>, v: u64) {
        f(self).set(v);
        if let Some(p) = &self.parent {
            f(p).set(v);
        }
    }
}

/// One workload thread's counts and times in the report, as kernel-run counts each thread
/// of its workload processes (hits#tN, misses#tN, elapsed_ms#tN).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ThreadStats {
    /// The thread's random stream: its number among all workloads' threads, workload by
    /// workload, process-major ([`access::task_stream`]).
    pub stream: u64,
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    /// Virtual time from the thread's start to its end (or the run's end) [ns].
    pub elapsed_ns: u64,
}

/// A live thread's tally and times (the report turns it into [`ThreadStats`]).
#[derive(Debug)]
pub struct ThreadTally {
    pub wi: usize,
    pub stream: u64,
    pub tally: Rc<Tally>,
    pub start: Time,
    /// When the thread ended; None while it runs.
    pub end: Cell<Option<Time>>,
}

impl ThreadTally {
    /// The thread's report row, for a run that ended at `end_ns`.
    pub fn stats(&self, end_ns: Time) -> ThreadStats {
        let end = self.end.get().unwrap_or(end_ns).min(end_ns);
        ThreadStats {
            stream: self.stream,
            accesses: self.tally.accesses.get(),
            hits: self.tally.hits.get(),
            misses: self.tally.misses.get(),
            elapsed_ns: end.saturating_sub(self.start),
        }
    }
}

impl Tally {
    /// Copy the counts into a workload's report.
    pub fn report_into(&self, w: &mut WorkloadStats) {
        w.accesses = self.accesses.get();
        w.hits = self.hits.get();
        w.misses = self.misses.get();
        w.major_faults = self.major.get();
        w.minor_faults = self.minor.get();
        if let Some(ts) = w.trace.as_mut() {
            ts.requests = self.requests.get();
            ts.hits = self.request_hits.get();
            ts.misses = self.request_misses.get();
            ts.miss_ratio = if ts.requests == 0 {
                0.0
            } else {
                ts.misses as f64 / ts.requests as f64
            };
            ts.objects = self.objects.get();
            ts.pages = self.pages.get();
        }
    }
}
