//! Workloads: the user-space side. Each task issues page accesses on its CPU; an access to
//! a resident page costs `access_seq`/`access_random` (anon) or `file_read_hit` (file) and
//! sets the PTE young bit or calls folio_mark_accessed; anything else enters the kernel
//! (a page fault or a page-cache miss).
//!
//! Between kernel entries a task runs ahead on its own clock; it stops at a synchronization
//! point at least every SKEW_QUANTUM of virtual time, so no task sets young bits more than
//! that far "in the future" of a reclaimer that clears them.
//!
//! - `usemem` follows vm-scalability's usemem: each process maps `size` (threads split it),
//!   optionally prefaults it, then makes `repeat` passes (0 = forever) of sequential writes
//!   every `step` bytes, or of size/8 random word writes (`--random`).
//! - `file_read` reads page-cache files with readahead off: sequential passes, uniform,
//!   zipf(theta) over all pages, or `hotscan` (a hot file read uniformly while a second file
//!   is streamed once, `hot_per_stream` hot reads per streamed page).
//! - `request_churn` serves short-lived requests through a pipeline of workers: each
//!   request's buffer is written on one CPU and freed (munmap) on the next, so which folios
//!   die in a remote lru_add batch follows from batch drains and request timing (seed 003).

pub mod access;

use crate::engine::{rng, Time};
use crate::mm::filemap::{Cached, Read};
use crate::mm::memory::Fault;
use crate::mm::mm_types::pte;
use crate::mm::{prefetch, File, MemcgId, MmStruct};
use crate::scenario::{FileRead, MappingKind, RequestChurn, Trace, TraceTarget, Usemem};
use crate::sim::Sim;
use access::{Access, FileReadSeq, UsememSeq};
use rand::Rng;
use serde::Serialize;
use std::cell::Cell;
use std::rc::Rc;

/// Longest a task runs ahead between synchronization points [ns].
pub const SKEW_QUANTUM: u64 = 2_000;

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
    fn inc(&self, f: fn(&Tally) -> &Cell<u64>) {
        bump(f(self));
        if let Some(p) = &self.parent {
            bump(f(p));
        }
    }

    /// Set counter `f` of this tally and of its workload's (a one-thread workload's
    /// gauge).
    fn set(&self, f: fn(&Tally) -> &Cell<u64>, v: u64) {
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

/// The CPU-local part of a task: pending cost not yet charged, and when it last synced.
struct Runner {
    pending: u64,
    since_sync: u64,
}

impl Runner {
    /// A task of workload `wi` starts at `start`: the workload runs from its first task's
    /// start.
    fn new(s: &Sim, wi: usize, start: u64) -> Self {
        let mut ws = s.workloads.borrow_mut();
        ws[wi].start_ns = ws[wi].start_ns.min(start);
        Runner {
            pending: 0,
            since_sync: 0,
        }
    }

    /// Charge the accumulated user-space time and sync if the quantum is used up.
    async fn tick(&mut self, s: &Sim, cost: u64) {
        self.pending += cost;
        self.since_sync += cost;
        if self.since_sync >= SKEW_QUANTUM {
            self.flush(s);
            s.e.sync().await;
        }
    }

    /// Charge pending user time (before entering the kernel).
    fn flush(&mut self, s: &Sim) {
        s.e.charge(self.pending);
        self.pending = 0;
        self.since_sync = 0;
    }
}

/// A loop's work counted for the engine's tick (Ctrl-C, stalled clocks), WORK_BATCH
/// iterations at a time: `done()` is false once the run must end.
#[derive(Default)]
struct Work(u64);

impl Work {
    #[inline]
    fn done(&mut self, s: &Sim) -> bool {
        self.0 += 1;
        self.0.is_multiple_of(WORK_BATCH) && !s.e.work_points(WORK_BATCH)
    }
}

/// Workload `wi`'s live counters.
fn tally(s: &Sim, wi: usize) -> Rc<Tally> {
    s.tallies.borrow()[wi].clone()
}

/// A new thread of workload `wi` with random stream `stream` starts now: its own tally,
/// counting into the workload's, registered for the report. [`thread_done`] ends it.
fn thread_tally(s: &Sim, wi: usize, stream: u64) -> Rc<ThreadTally> {
    let th = Rc::new(ThreadTally {
        wi,
        stream,
        tally: Rc::new(Tally {
            parent: Some(tally(s, wi)),
            ..Tally::default()
        }),
        start: s.e.now(),
        end: Cell::new(None),
    });
    s.threads.borrow_mut().push(th.clone());
    s.worker_on_cpu(true);
    th
}

/// The thread of `th` has done its last access.
fn thread_done(s: &Sim, th: &ThreadTally) {
    if th.end.replace(Some(s.e.now())).is_none() {
        s.worker_on_cpu(false);
    }
}

fn finish(s: &Sim, wi: usize, start: u64, killed: bool) {
    {
        let mut ws = s.workloads.borrow_mut();
        let w = &mut ws[wi];
        w.oom_killed |= killed;
        w.start_ns = w.start_ns.min(start);
        w.end_ns = w.end_ns.max(s.e.now().min(s.end));
        w.live -= 1;
    }
    s.task_exited();
}

/// A thread of process `mmid` ends: the last live thread of a process that was not
/// OOM-killed exits it (exit_mmap frees its memory).
async fn thread_exit(s: &Sim, wi: usize, start: u64, mmid: u32, live: &std::cell::Cell<u32>) {
    let killed = !s.mm.borrow().mms[mmid as usize].alive;
    live.set(live.get() - 1);
    if live.get() == 0 && !killed {
        s.mm.borrow_mut().mms[mmid as usize].alive = false;
        s.exit_mmap(mmid).await;
    }
    finish(s, wi, start, killed);
}

/// One anonymous access of a usemem task; false when the process was killed. The access
/// first runs the process's text (see [`text_fetch`]).
async fn touch(s: &Sim, r: &mut Runner, t: &Tally, mmid: u32, vpn: u32, cost: u64) -> bool {
    t.inc(|t| &t.accesses);
    // One look at the mm per access: the text's PTEs, then the data's.
    let hit = loop {
        let step = {
            let mut mm = s.mm.borrow_mut();
            let m = &mut mm.mms[mmid as usize];
            if !m.alive {
                return false;
            }
            match text_fetch(m) {
                Some(tv) => Err(tv),
                None => {
                    let wp = m.pte_wrprotected(vpn);
                    let v = &mut m.ptes[vpn as usize];
                    // A write-protected PTE (fork) faults into do_wp_page.
                    let present = pte::present(*v) && !wp;
                    if present {
                        *v |= pte::YOUNG | pte::DIRTY;
                        m.pmd_mkyoung(vpn);
                    }
                    Ok(present)
                }
            }
        };
        match step {
            Ok(hit) => break hit,
            Err(tv) => {
                // A text page reclaim took: fault it in, then run the access again.
                r.flush(s);
                s.e.sync().await;
                if !fault(s, t, mmid, tv, false).await {
                    return false;
                }
            }
        }
    };
    if hit {
        t.inc(|t| &t.hits);
        r.tick(s, cost).await;
        return true;
    }
    r.flush(s);
    s.e.sync().await;
    if !fault(s, t, mmid, vpn, true).await {
        return false;
    }
    r.tick(s, cost).await;
    true
}

/// One page of MAP_POPULATE (usemem --prefault): the page faulted in for writing as a
/// touch faults it, then marked accessed by GUP's FOLL_TOUCH (mm/gup.rs). False when the
/// process was killed.
async fn populate(s: &Sim, r: &mut Runner, t: &Tally, mmid: u32, vpn: u32) -> bool {
    if !touch(s, r, t, mmid, vpn, s.c.access_seq).await {
        return false;
    }
    s.follow_page_touch(mmid, vpn).await;
    true
}

/// The instruction fetches of an access by a process with text: every text page (the
/// loop's code) has its PTE made young, as the hardware sets the accessed bit; returns
/// the first that is not mapped (reclaim took it), for the caller to fault in.
#[inline]
fn text_fetch(m: &mut MmStruct) -> Option<u32> {
    let t = m.text?;
    for vpn in t.base..t.base + t.pages {
        let v = &mut m.ptes[vpn as usize];
        if !pte::present(*v) {
            return Some(vpn);
        }
        *v |= pte::YOUNG;
        m.pmd_mkyoung(vpn);
    }
    None
}

/// Fault `vpn` in until it is mapped (handle_mm_fault, again after a fault that backed
/// out); false when the process was killed. A data access's major fault is also a miss;
/// an instruction fetch's is not.
async fn fault(s: &Sim, t: &Tally, mmid: u32, vpn: u32, data: bool) -> bool {
    loop {
        match s.handle_mm_fault(mmid, vpn, data).await {
            Fault::Minor => t.inc(|t| &t.minor),
            Fault::Major => {
                t.inc(|t| &t.major);
                if data {
                    t.inc(|t| &t.misses);
                }
            }
            Fault::Retry { major } => {
                // The fault backed out: the access runs again (a fault if the PTE is
                // still not present, e.g. unmapped meanwhile).
                if major {
                    t.inc(|t| &t.major);
                    if data {
                        t.inc(|t| &t.misses);
                    }
                } else {
                    t.inc(|t| &t.minor);
                }
                let mm = s.mm.borrow();
                let m = &mm.mms[mmid as usize];
                if !m.alive {
                    return false;
                }
                if !pte::present(m.ptes[vpn as usize]) {
                    continue;
                }
            }
            Fault::Oom => {
                // Nothing could be killed for us: the fault kills the task itself.
                let must_exit = {
                    let mut mm = s.mm.borrow_mut();
                    std::mem::replace(&mut mm.mms[mmid as usize].alive, false)
                };
                if must_exit {
                    s.exit_mmap(mmid).await;
                }
                return false;
            }
        }
        return true;
    }
}

/// fio's rate limit: a thread may not run ahead of `bytes_per_s` (one page per access).
/// Without catch-up, a thread that fell behind moves its schedule to the present.
struct Pace {
    start: u64,
    bytes_per_s: u64,
    done: u64,
    catch_up: bool,
}

impl Pace {
    fn new(start: u64, bytes_per_s: u64, catch_up: bool) -> Self {
        Pace {
            start,
            bytes_per_s: bytes_per_s.max(1),
            done: 0,
            catch_up,
        }
    }

    /// One more access is done: sleep until the pace allows the next.
    async fn wait(&mut self, s: &Sim, r: &mut Runner) {
        self.done += crate::scenario::PAGE_SIZE;
        let due = self.start.saturating_add(
            (self.done as u128 * 1_000_000_000 / self.bytes_per_s as u128).min(u64::MAX as u128)
                as u64,
        );
        let now = s.e.now() + r.pending;
        if due > now {
            r.flush(s);
            s.e.sleep(due - s.e.now()).await;
        } else if !self.catch_up {
            // Closed loop: restart the schedule at this access, done now.
            self.start = now;
            self.done = 0;
        }
    }
}

/// Accesses a usemem thread draws ahead of the one it runs (for prefetching).
const USEMEM_LOOKAHEAD: usize = 8;

/// Prefetch the PTE of `vpn`.
#[inline]
fn prefetch_pte(s: &Sim, mmid: u32, vpn: u32) {
    let mm = s.mm.borrow();
    let m = &mm.mms[mmid as usize];
    if let Some(v) = m.ptes.get(vpn as usize) {
        prefetch(v);
    }
    // A forked process's write-protect bit too.
    if let Some(w) = m.wrprotect.get(vpn as usize / 64) {
        prefetch(w);
    }
}

/// If `vpn`'s PTE (prefetched earlier) is a swap entry, prefetch its swap-map entry.
#[inline]
fn prefetch_swap_entry(s: &Sim, mmid: u32, vpn: u32) {
    let mm = s.mm.borrow();
    if let Some(&v) = mm.mms[mmid as usize].ptes.get(vpn as usize) {
        if pte::is_swap(v) {
            if let Some(sw) = mm.swap.as_ref() {
                sw.prefetch(pte::slot(v));
            }
        }
    }
}

/// Create usemem's processes and threads. With `prealloc` (usemem --prealloc) a parent
/// process maps the area, populates it if `prefault`, and forks the workers, which share
/// its pages copy-on-write (fork.rs); without it each process maps and populates its own.
pub fn spawn_usemem(
    s: &Rc<Sim>,
    wi: usize,
    u: &Usemem,
    memcg: MemcgId,
    cpus: &[u32],
    stream: &mut u64,
) {
    let pages = u.size.pages() as u32;
    // The program's text: one file, mapped by each process after its area.
    let text = (u.text.pages() > 0).then(|| {
        let mut mm = s.mm.borrow_mut();
        mm.files
            .push(File::text(u.text.pages() as usize, memcg, pages));
        (mm.files.len() - 1) as u32
    });
    // Each process's CPUs and the first random stream of its threads.
    let procs: Vec<(Vec<u32>, u64)> = (0..u.processes)
        .map(|p| {
            let c = &cpus[(p * u.threads) as usize..((p + 1) * u.threads) as usize];
            (c.to_vec(), *stream + (p * u.threads) as u64)
        })
        .collect();
    *stream += (u.processes * u.threads) as u64;
    if u.prealloc {
        spawn_usemem_parent(s, wi, u, memcg, text, procs);
        return;
    }
    for (cpus, first_stream) in procs {
        let mmid = usemem_mm(s, wi, u, memcg, text, s.cpu_node[cpus[0] as usize]);
        spawn_usemem_threads(s, wi, u, mmid, &cpus, first_stream, u.placement.start.0);
    }
}

/// A usemem process's address space: its area, and its text and file if it has them.
fn usemem_mm(s: &Sim, wi: usize, u: &Usemem, memcg: MemcgId, text: Option<u32>, node: u32) -> u32 {
    let pages = u.size.pages() as u32;
    let mut mm = s.mm.borrow_mut();
    let mmid = mm.mm_alloc(MmStruct::new(pages as usize, memcg, node, wi as u32));
    if let Some(f) = text {
        mm.map_text(mmid, f);
    }
    if u.mapping == MappingKind::SharedFile {
        // A file of the area's size, mapped MAP_SHARED (will-it-scale page_fault3).
        mm.files.push(File::new(pages as usize, memcg, Some(mmid)));
        let f = (mm.files.len() - 1) as u32;
        mm.mms[mmid as usize].file = Some(f);
    }
    mmid
}

/// usemem --prealloc: the parent maps the area on the first worker's CPU, populates it
/// page by page if `prefault` (MAP_POPULATE), then forks each worker process, whose
/// threads start at once and do not populate again. The parent then waits for them, its
/// area staying mapped until the run ends (it exits after its children).
fn spawn_usemem_parent(
    s: &Rc<Sim>,
    wi: usize,
    u: &Usemem,
    memcg: MemcgId,
    text: Option<u32>,
    procs: Vec<(Vec<u32>, u64)>,
) {
    let cpu = procs[0].0[0];
    let parent = {
        let node = s.cpu_node[cpu as usize];
        let mut mm = s.mm.borrow_mut();
        let pages = u.size.pages() as usize;
        mm.mm_alloc(MmStruct::new(pages, memcg, node, wi as u32))
    };
    let sim = s.clone();
    let spec = u.clone();
    s.live_tasks.set(s.live_tasks.get() + 1);
    let id =
        s.e.spawn_tagged(u.placement.start.0, cpu, parent, async move {
            let s = &sim;
            let start = s.e.now();
            let mut r = Runner::new(s, wi, start);
            let t = tally(s, wi);
            if spec.prefault {
                for vpn in 0..spec.size.pages() as u32 {
                    if !populate(s, &mut r, &t, parent, vpn).await {
                        break;
                    }
                }
            }
            r.flush(s);
            if !s.mm.borrow().mms[parent as usize].alive {
                // OOM-killed while populating: no worker is forked.
                s.task_exited();
                return;
            }
            let workers = Usemem {
                prefault: false,
                ..spec.clone()
            };
            for (cpus, first_stream) in procs {
                let child = usemem_mm(s, wi, &spec, memcg, text, s.cpu_node[cpus[0] as usize]);
                if !s.dup_mmap(parent, child).await {
                    // fork() failed (-ENOMEM): the half-built child goes (mmput), and no
                    // further worker is forked.
                    s.mm.borrow_mut().mms[child as usize].alive = false;
                    s.exit_mmap(child).await;
                    break;
                }
                spawn_usemem_threads(s, wi, &workers, child, &cpus, first_stream, s.e.now());
            }
            s.task_exited();
        });
    s.mm.borrow_mut().mms[parent as usize].tasks.push(id);
}

/// Spawn the threads of usemem process `mmid`, thread t on `cpus[t]` with random stream
/// `first_stream + t`, starting at `start_at`.
fn spawn_usemem_threads(
    s: &Rc<Sim>,
    wi: usize,
    u: &Usemem,
    mmid: u32,
    cpus: &[u32],
    first_stream: u64,
    start_at: u64,
) {
    let mut stream = first_stream;
    let stream = &mut stream;
    let live = Rc::new(std::cell::Cell::new(u.threads));
    for t in 0..u.threads {
        let sim = s.clone();
        let spec = u.clone();
        let live = live.clone();
        let seq = UsememSeq::new(u, t, rng::stream(s.seed, *stream));
        let stream_id = *stream;
        *stream += 1;
        let cpu = cpus[t as usize];
        s.live_tasks.set(s.live_tasks.get() + 1);
        let id = s.e.spawn_tagged(start_at, cpu, mmid, async move {
            let s = &*sim;
            let start = s.e.now();
            let mut r = Runner::new(s, wi, start);
            let th = thread_tally(s, wi, stream_id);
            let t = th.tally.clone();
            let deadline = spec.runtime.map_or(u64::MAX, |d| start.saturating_add(d.0));
            let mut pace = spec.rate.map(|b| Pace::new(start, b.0, spec.rate_catch_up));
            let mut work = Work::default();
            // Accesses drawn ahead so their PTEs (and swap-map entries) are
            // prefetched while earlier ones run; results do not change.
            // (Sequential passes need none: the hardware prefetcher sees them.)
            let mut seq = seq;
            let depth = if spec.random { USEMEM_LOOKAHEAD } else { 1 };
            let mut ahead: std::collections::VecDeque<Access> =
                std::collections::VecDeque::with_capacity(depth);
            loop {
                let next = if depth == 1 {
                    seq.next()
                } else {
                    while ahead.len() < depth {
                        let Some(a) = seq.next() else { break };
                        if let Access::Touch { vpn, .. } | Access::Populate { vpn } = a {
                            prefetch_pte(s, mmid, vpn);
                        }
                        ahead.push_back(a);
                    }
                    if let Some(Access::Touch { vpn, .. }) = ahead.get(depth / 2) {
                        prefetch_swap_entry(s, mmid, *vpn);
                    }
                    ahead.pop_front()
                };
                let Some(a) = next else { break };
                s.record_access(stream_id, a);
                let alive = match a {
                    Access::Touch { vpn, random } => {
                        let cost = if random {
                            s.c.access_random
                        } else {
                            s.c.access_seq
                        };
                        touch(s, &mut r, &t, mmid, vpn, cost).await
                    }
                    Access::Populate { vpn } => populate(s, &mut r, &t, mmid, vpn).await,
                    Access::Unmap { lo, hi } => {
                        // munmap; the next pass faults a fresh mapping in.
                        r.flush(s);
                        s.zap_pte_range(mmid, lo, hi).await;
                        s.mm.borrow().mms[mmid as usize].alive
                    }
                    Access::Read { .. } => unreachable!("usemem reads no files"),
                };
                if !alive || s.e.now() + r.pending >= deadline || work.done(s) {
                    break;
                }
                if let Some(p) = pace.as_mut() {
                    p.wait(s, &mut r).await;
                }
            }
            r.flush(s);
            thread_done(s, &th);
            thread_exit(s, wi, start, mmid, &live).await;
        });
        s.mm.borrow_mut().mms[mmid as usize].tasks.push(id);
    }
}

/// Create file_read's files and reader threads.
pub fn spawn_file_read(
    s: &Rc<Sim>,
    wi: usize,
    f: &FileRead,
    memcg: MemcgId,
    cpus: &[u32],
    stream: &mut u64,
) {
    let mut files = Vec::new();
    {
        let mut mm = s.mm.borrow_mut();
        for sz in &f.files {
            mm.files.push(File::new(sz.pages() as usize, memcg, None));
            files.push((mm.files.len() - 1) as u32);
        }
    }
    let files = Rc::new(files);
    for &cpu in cpus.iter().take(f.threads as usize) {
        let sim = s.clone();
        let spec = f.clone();
        let files = files.clone();
        let seq = FileReadSeq::new(f, rng::stream(s.seed, *stream));
        let stream_id = *stream;
        *stream += 1;
        s.live_tasks.set(s.live_tasks.get() + 1);
        s.e.spawn(spec.placement.start.0, cpu, async move {
            let s = &*sim;
            let start = s.e.now();
            let node = s.cpu_node[cpu as usize];
            let mut r = Runner::new(s, wi, start);
            let th = thread_tally(s, wi, stream_id);
            let t = th.tally.clone();
            // Reads drawn ahead so their page-cache entries and folios are prefetched
            // while earlier ones run; results do not change.
            let mut seq = seq;
            let depth = if spec.pattern == crate::scenario::FilePattern::Seq {
                1
            } else {
                USEMEM_LOOKAHEAD
            };
            let mut ahead: std::collections::VecDeque<Access> =
                std::collections::VecDeque::with_capacity(depth);
            let mut work = Work::default();
            loop {
                let next = if depth == 1 {
                    seq.next()
                } else {
                    while ahead.len() < depth {
                        let Some(a) = seq.next() else { break };
                        if let Access::Read { file, page } = a {
                            prefetch_entry(s, TraceTarget::File, files[file as usize], page);
                        }
                        ahead.push_back(a);
                    }
                    if let Some(Access::Read { file, page }) = ahead.get(depth / 2) {
                        prefetch_folio(s, TraceTarget::File, files[*file as usize], *page);
                    }
                    ahead.pop_front()
                };
                let Some(a) = next else { break };
                s.record_access(stream_id, a);
                let Access::Read { file, page } = a else {
                    unreachable!("file_read only reads")
                };
                t.inc(|t| &t.accesses);
                r.flush(s);
                match s
                    .filemap_read(files[file as usize], page, memcg, node)
                    .await
                {
                    Read::Hit => t.inc(|t| &t.hits),
                    Read::Miss => t.inc(|t| &t.misses),
                    Read::Oom => break,
                }
                r.tick(s, 0).await;
                if s.e.now() >= s.end || work.done(s) {
                    break;
                }
            }
            r.flush(s);
            thread_done(s, &th);
            finish(s, wi, start, false);
        });
    }
}

/// Buffers (virtual page ranges) handed to a worker, to be freed by it.
type Inbox = std::collections::VecDeque<(u32, u32)>;

/// Requests in flight per worker ring: a buffer's virtual range is reused after this many
/// of the worker's requests (long after it was freed).
pub const REQUEST_RING: u64 = 64;

/// Create request_churn's process and its pipeline of workers.
pub fn spawn_request_churn(
    s: &Rc<Sim>,
    wi: usize,
    r: &RequestChurn,
    memcg: MemcgId,
    cpus: &[u32],
    stream: &mut u64,
) {
    let n = r.threads as usize;
    let req_pages = r.request_size.pages() as u32;
    let ring = REQUEST_RING as u32 * req_pages;
    let node = s.cpu_node[cpus[0] as usize];
    let mmid = {
        let mut mm = s.mm.borrow_mut();
        mm.mm_alloc(MmStruct::new(ring as usize * n, memcg, node, wi as u32))
    };
    // inbox[i]: buffers (vpn ranges) handed to worker i by worker i - 1, to be freed.
    let inbox: Rc<std::cell::RefCell<Vec<Inbox>>> =
        Rc::new(std::cell::RefCell::new(vec![Default::default(); n]));
    let live = Rc::new(std::cell::Cell::new(n as u32));
    for (i, &cpu) in cpus.iter().enumerate().take(n) {
        let sim = s.clone();
        let spec = r.clone();
        let inbox = inbox.clone();
        let live = live.clone();
        let mut rng = rng::stream(s.seed, *stream);
        *stream += 1;
        s.live_tasks.set(s.live_tasks.get() + 1);
        let id =
            s.e.spawn_tagged(spec.placement.start.0, cpu, mmid, async move {
                let s = &*sim;
                let start = s.e.now();
                let mut r = Runner::new(s, wi, start);
                let t = tally(s, wi);
                s.worker_on_cpu(true);
                let base = i as u32 * ring;
                let mut k = 0u64;
                let mut alive = true;
                while alive
                    && (spec.requests == 0 || k < spec.requests)
                    && s.e.now() < s.end
                    && s.e.work_point()
                {
                    let t0 = s.e.now() + r.pending;
                    // A request arrived: first free the buffers the previous worker handed us
                    // (munmap), then serve it.
                    let mine: Vec<(u32, u32)> = inbox.borrow_mut()[i].drain(..).collect();
                    for (a, b) in mine {
                        s.zap_pte_range(mmid, a, b).await;
                    }
                    // mmap + write the request's buffer.
                    let lo = base + (k % REQUEST_RING) as u32 * req_pages;
                    for v in lo..lo + req_pages {
                        alive = touch(s, &mut r, &t, mmid, v, s.c.access_seq).await;
                        if !alive {
                            break;
                        }
                    }
                    k += 1;
                    r.tick(s, spec.service.0).await;
                    r.flush(s);
                    // Hand the buffer to the next worker, which frees it.
                    inbox.borrow_mut()[(i + 1) % n].push_back((lo, lo + req_pages));
                    // Idle until the next request arrives: requests come as a Poisson process,
                    // with a mean gap that keeps the worker busy `load` of the time.
                    let busy = s.e.now() - t0;
                    let mean_idle = busy as f64 * (1.0 / spec.load - 1.0);
                    let u: f64 = rng.random_range(f64::EPSILON..1.0);
                    // At most past the longest run: a tiny load must not overflow a clock.
                    let idle = ((-u.ln() * mean_idle) as u64).min(crate::scenario::MAX_DURATION);
                    if idle > 0 {
                        s.e.sleep(idle).await;
                    }
                    alive &= s.mm.borrow().mms[mmid as usize].alive;
                }
                r.flush(s);
                s.worker_on_cpu(false);
                thread_exit(s, wi, start, mmid, &live).await;
            });
        s.mm.borrow_mut().mms[mmid as usize].tasks.push(id);
    }
}

/// Requests a trace task reads ahead of the one it runs (for prefetching); its id's slot
/// is prefetched this far ahead, its page-cache entry ENTRY_AHEAD, its folio FOLIO_AHEAD.
const LOOKAHEAD: usize = 32;
const ENTRY_AHEAD: usize = 20;
const FOLIO_AHEAD: usize = 10;

/// Iterations a workload loop counts as work at once (see `Engine::work_points`): a
/// check per access would cost a loop of hits several instructions per access.
const WORK_BATCH: u64 = 64;

/// Requests a trace task decodes at a time.
const TRACE_READ_BATCH: usize = 256;

/// Prefetch the page-cache entry or PTE of page `page` of a trace target.
fn prefetch_entry(s: &Sim, kind: TraceTarget, target: u32, page: u32) {
    let mm = s.mm.borrow();
    let p = match kind {
        TraceTarget::File => mm.files[target as usize]
            .cache
            .get(page as usize)
            .map(|e| e as *const u64 as *const u8),
        TraceTarget::Anon => mm.mms[target as usize]
            .ptes
            .get(page as usize)
            .map(|e| e as *const u32 as *const u8),
    };
    if let Some(p) = p {
        prefetch(p);
    }
}

/// Prefetch the folio a page-cache entry points to (its entry was prefetched earlier).
fn prefetch_folio(s: &Sim, kind: TraceTarget, target: u32, page: u32) {
    if kind != TraceTarget::File {
        return;
    }
    let mm = s.mm.borrow();
    if let Some(&e) = mm.files[target as usize].cache.get(page as usize) {
        if let Some(pg) =
            crate::mm::filemap::entry_page(e).and_then(|pfn| mm.pages.get(pfn as usize))
        {
            prefetch(pg);
        }
    }
}

/// A trace task's place in its trace: the requests read ahead, the object -> pages map,
/// and the request being replayed. [`Replay::next_page`] hands out pages one at a time and
/// does the work between requests synchronously: counting the finished request, reading
/// more of the trace, prefetching, mapping the next object.
struct Replay {
    src: Box<dyn crate::trace::Source>,
    path: String,
    kind: TraceTarget,
    target: u32,
    /// Object id -> (first page, pages).
    ids: crate::trace::PageMap,
    /// Requests read ahead, so the memory a request will touch (its id's slot, its
    /// page-cache entry, its folio) is prefetched while earlier ones run: replay is bound
    /// by memory latency. This changes no behavior, only when lines arrive.
    /// `window[pos..]` are the requests read and not yet replayed, refilled a batch at a
    /// time when fewer than LOOKAHEAD are left.
    window: Vec<crate::trace::Request>,
    pos: usize,
    eof: bool,
    /// A read error comes after every request read before it: it is reported when the
    /// replay reaches it.
    pending_err: Option<crate::error::Error>,
    /// Requests started, and the most to replay.
    requests: u64,
    limit: u64,
    /// The request being replayed: its next page and its end (next == end: none), and
    /// whether every page of it hit so far (set by the caller on a miss).
    next: u32,
    end: u32,
    in_request: bool,
    all_hit: bool,
}

impl Replay {
    fn new(
        src: Box<dyn crate::trace::Source>,
        path: String,
        limit: u64,
        kind: TraceTarget,
        target: u32,
    ) -> Self {
        Replay {
            src,
            path,
            kind,
            target,
            ids: crate::trace::PageMap::default(),
            window: Vec::with_capacity(TRACE_READ_BATCH + LOOKAHEAD),
            pos: 0,
            eof: false,
            pending_err: None,
            requests: 0,
            limit,
            next: 0,
            end: 0,
            in_request: false,
            all_hit: true,
        }
    }

    /// The next page to access, None when the replay ends: the trace is done, the request
    /// limit or the run's end is reached, or the trace is malformed (then the run fails
    /// with an error naming the record).
    #[inline]
    fn next_page(&mut self, s: &Sim, t: &Tally) -> Option<u32> {
        if self.next < self.end {
            // The pages of a large object count as work, WORK_BATCH at a time.
            if self.next.is_multiple_of(WORK_BATCH as u32) && !s.e.work_points(WORK_BATCH) {
                return None;
            }
            self.next += 1;
            return Some(self.next - 1);
        }
        if self.in_request {
            // Every page of the request was accessed: count it.
            self.in_request = false;
            t.inc(|t| &t.requests);
            t.inc(if self.all_hit {
                |t| &t.request_hits
            } else {
                |t| &t.request_misses
            });
            if s.e.now() >= s.end {
                return None;
            }
        }
        if self.requests >= self.limit {
            return None;
        }
        // Requests count as work (Ctrl-C, stalled clocks), WORK_BATCH at a time.
        if self.requests.is_multiple_of(WORK_BATCH) && !s.e.work_points(WORK_BATCH) {
            return None;
        }
        self.start_request(s, t)
    }

    /// Append the next batch of requests to the window.
    fn refill(&mut self) {
        match self.src.next_batch(&mut self.window, TRACE_READ_BATCH) {
            Ok(more) => self.eof = !more,
            Err(e) => {
                self.pending_err = Some(e);
                self.eof = true;
            }
        }
    }

    /// Read the next request and map its object; the first page to access.
    fn start_request(&mut self, s: &Sim, t: &Tally) -> Option<u32> {
        if !self.eof && self.window.len() - self.pos < LOOKAHEAD {
            self.window.drain(..self.pos);
            self.pos = 0;
            self.refill();
            // A source may return with nothing read yet (DAMON regions accessed at tiny
            // rates): come back, counting the work.
            while !self.eof && self.window.is_empty() {
                if !s.e.work_point() {
                    return None;
                }
                self.refill();
            }
        }
        // Three stages, each once the previous line has had time to arrive (none in the
        // trace's last LOOKAHEAD requests).
        let (kind, target) = (self.kind, self.target);
        if let Some(w) = self.window.get(self.pos..self.pos + LOOKAHEAD) {
            self.ids.prefetch(w[LOOKAHEAD - 1].obj);
            if let Some((b, _)) = self.ids.get(w[ENTRY_AHEAD].obj) {
                prefetch_entry(s, kind, target, b);
            }
            if let Some((b, _)) = self.ids.get(w[FOLIO_AHEAD].obj) {
                prefetch_folio(s, kind, target, b);
            }
        }
        let Some(&req) = self.window.get(self.pos) else {
            if let Some(e) = self.pending_err.take() {
                s.fail(e);
            } else if self.requests == 0 {
                // Validation saw a request to come; a DAMON trace can still draw none.
                s.fail(crate::error::Error::Trace {
                    file: self.path.clone(),
                    record: 0,
                    msg: "no requests: the trace yielded no access".into(),
                });
            }
            return None;
        };
        self.pos += 1;
        let (base, pages, new) = match self.ids.map(&req) {
            Ok(m) => m,
            Err(msg) => {
                s.fail(crate::error::Error::Trace {
                    file: self.path.clone(),
                    record: self.requests + 1,
                    msg,
                });
                return None;
            }
        };
        if new {
            t.set(|t| &t.objects, self.ids.len());
            t.set(|t| &t.pages, self.ids.pages());
            let mut mm = s.mm.borrow_mut();
            let end = self.ids.pages() as usize;
            match kind {
                TraceTarget::File => mm.files[target as usize].grow(end),
                TraceTarget::Anon => mm.mms[target as usize].grow(end),
            }
        }
        self.requests += 1;
        self.in_request = true;
        self.all_hit = true;
        self.next = base + 1;
        self.end = base + pages;
        Some(base)
    }
}

/// Create a trace workload's task: it streams the trace and replays each request against a
/// page-cache file or an anonymous area that grows as new objects appear (ids get dense
/// page ranges in order of first appearance; an object keeps the size it first had).
/// Requests run back to back; a malformed record stops the run with an error naming it.
pub fn spawn_trace(
    s: &Rc<Sim>,
    wi: usize,
    spec: &Trace,
    memcg: MemcgId,
    cpus: &[u32],
    stream: &mut u64,
) -> crate::error::Result<()> {
    let src = crate::trace::open(&spec.path, spec.format, spec.csv.as_ref(), s.seed)?;
    let spec_path = spec.path.clone();
    let stream_id = *stream;
    *stream += 1;
    let cpu = cpus[0];
    let node = s.cpu_node[cpu as usize];
    let target = {
        let mut mm = s.mm.borrow_mut();
        match spec.target {
            TraceTarget::File => {
                mm.files.push(File::new(0, memcg, None));
                (mm.files.len() - 1) as u32
            }
            TraceTarget::Anon => mm.mm_alloc(MmStruct::new(0, memcg, node, wi as u32)),
        }
    };
    let limit = if spec.requests == 0 {
        u64::MAX
    } else {
        spec.requests
    };
    let kind = spec.target;
    s.workloads.borrow_mut()[wi].trace = Some(TraceStats::default());
    s.live_tasks.set(s.live_tasks.get() + 1);
    let sim = s.clone();
    // Anon: the task belongs to the process (OOM kills reach it); file: no process.
    let tag = if kind == TraceTarget::Anon {
        target
    } else {
        u32::MAX
    };
    let id =
        s.e.spawn_tagged(spec.placement.start.0, cpu, tag, async move {
            let s = &*sim;
            let start = s.e.now();
            let mut r = Runner::new(s, wi, start);
            let th = thread_tally(s, wi, stream_id);
            let t = th.tally.clone();
            let mut rp = Replay::new(src, spec_path, limit, kind, target);
            // The trace's share of the memory budget: its id map and, per page, a
            // page-cache entry (file) or a PTE (anon).
            let page_bytes = match kind {
                TraceTarget::File => 8,
                TraceTarget::Anon => 4,
            };
            rp.ids.limit(s.trace_memory.get(), page_bytes);
            'replay: loop {
                // Page-cache hits run in this inner loop, which has no await (the hit path
                // of filemap_read is synchronous); it stops at the first access that needs
                // one.
                let (p, cached) = loop {
                    let Some(p) = rp.next_page(s, &t) else {
                        break 'replay;
                    };
                    match kind {
                        TraceTarget::File => {
                            s.record_access(stream_id, Access::Read { file: 0, page: p });
                            t.inc(|t| &t.accesses);
                            r.flush(s);
                            match s.filemap_read_hit(target, p) {
                                Cached::Hit => t.inc(|t| &t.hits),
                                c => break (p, c),
                            }
                        }
                        TraceTarget::Anon => {
                            s.record_access(
                                stream_id,
                                Access::Touch {
                                    vpn: p,
                                    random: true,
                                },
                            );
                            break (p, Cached::Miss);
                        }
                    }
                };
                match kind {
                    TraceTarget::File => {
                        let read = match cached {
                            Cached::HitActivate(pfn) => {
                                s.folio_activate(pfn).await;
                                Read::Hit
                            }
                            _ => s.filemap_read_miss(target, p, memcg, node).await,
                        };
                        match read {
                            Read::Hit => t.inc(|t| &t.hits),
                            Read::Miss => {
                                t.inc(|t| &t.misses);
                                rp.all_hit = false;
                            }
                            // The task dies; its unfinished request is not counted.
                            Read::Oom => break,
                        }
                    }
                    TraceTarget::Anon => {
                        let present =
                            pte::present(s.mm.borrow().mms[target as usize].ptes[p as usize]);
                        rp.all_hit &= present;
                        if !touch(s, &mut r, &t, target, p, s.c.access_random).await {
                            break;
                        }
                    }
                }
            }
            r.flush(s);
            thread_done(s, &th);
            if kind == TraceTarget::Anon {
                let live = std::cell::Cell::new(1);
                thread_exit(s, wi, start, target, &live).await;
            } else {
                finish(s, wi, start, false);
            }
        });
    if kind == TraceTarget::Anon {
        s.mm.borrow_mut().mms[target as usize].tasks.push(id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_fetch_makes_every_text_pte_young_and_stops_at_the_first_unmapped() {
        // A 600-page area with 3 pages of text at 600..603, in the second PTE table (512..
        // 1024): pages 600 and 601 mapped, 602 not. The fetch marks 600 and 601 young and
        // the table's PMD entry accessed, and returns 602 to be faulted in; once 602 is
        // mapped, it returns None with all three young.
        let mut m = MmStruct::new(600, 1, 0, 0);
        m.grow(603);
        m.text = Some(crate::mm::TextMap {
            file: 0,
            base: 600,
            pages: 3,
        });
        m.ptes[600] = pte::mk_present(7, false, false);
        m.ptes[601] = pte::mk_present(8, false, false);
        assert_eq!(text_fetch(&mut m), Some(602));
        assert!(m.ptes[600] & pte::YOUNG != 0 && m.ptes[601] & pte::YOUNG != 0);
        assert_eq!(m.pmd_young[0], 1 << 1);
        assert_eq!(m.ptes[..600].iter().filter(|&&v| v != 0).count(), 0);
        m.ptes[602] = pte::mk_present(9, false, false);
        assert_eq!(text_fetch(&mut m), None);
        assert!(m.ptes[600..603].iter().all(|&v| v & pte::YOUNG != 0));
        // No text: nothing to fetch.
        let mut plain = MmStruct::new(8, 1, 0, 0);
        assert_eq!(text_fetch(&mut plain), None);
    }
}
