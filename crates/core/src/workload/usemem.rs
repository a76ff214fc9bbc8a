//! usemem, after vm-scalability's: each process maps `size` (its threads split it),
//! optionally prefaults it, then makes `repeat` passes (0 = forever) of sequential writes
//! every `step` bytes, or of size/8 random word writes (`--random`), optionally paced to a
//! `rate` as fio paces (open or closed loop, [`Pace`]). This module holds all of it: the
//! schema and its checks, the memory-budget terms, the access sequence ([`UsememSeq`]),
//! the simulated processes and threads, and the host replay, whose threads keep the
//! simulator's pace.

use super::access::{task_rng, task_stream, Access};
use super::host::{
    HostArea, HostPace, HostPlan, HostPrepared, HostProcess, HostRefusal, HostThread,
};
use super::stats::Tally;
use super::task::{
    populate, run_text, tally, thread_done, thread_exit, thread_tally, touch, Runner, Work,
    LOOKAHEAD, SKEW_QUANTUM,
};
use super::{Check, Spawn, Workload};
use crate::budget::{Terms, CACHE_BYTES, PTE_BYTES};
use crate::engine::rng::{self, Rng};
use crate::error::Result;
use crate::mm::mm_types::pte;
use crate::mm::sampled_access::{SampledArea, CHUNK_SHIFT, SAMPLED_BYTES_PER_PAGE};
use crate::mm::{prefetch, File, MemcgId, MmStruct};
use crate::scenario::{
    one, one_u64, yes, Dur, Scenario, Size, MAX_AREA_PAGES, MAX_DURATION, PAGE_SIZE,
};
use crate::sim::Sim;
use rand::Rng as _;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

/// vm-scalability's usemem: each task maps `size` of anonymous memory and writes it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Usemem {
    /// Processes (`-n`); each has its own address space.
    #[serde(default = "one")]
    pub processes: u32,
    /// Threads per process (`-t`); the threads of a process split its area.
    #[serde(default = "one")]
    pub threads: u32,
    /// Bytes mapped per process, a multiple of 4096 (whole pages).
    pub size: Size,
    /// `--prealloc`: a parent process maps (and with `prefault` populates) the area, then
    /// forks the `processes` workers, which share its pages copy-on-write until each
    /// writes them (mm/fork.rs); an anonymous mapping only, without `unmap`.
    #[serde(default)]
    pub prealloc: bool,
    /// `--prefault`: populate the whole area before the timed passes (MAP_POPULATE: each
    /// page faulted in and its folio marked accessed, mm/gup.rs).
    #[serde(default)]
    pub prefault: bool,
    /// Write each page of a thread's span once, in address order, before the passes: a
    /// first sequential pass of ordinary write faults (not MAP_POPULATE: no folio is
    /// marked accessed), counted as accesses. Not with `prefault`.
    #[serde(default)]
    pub fill: bool,
    /// `--random`: each access writes a uniformly random page of the area; else sequential.
    #[serde(default)]
    pub random: bool,
    /// `--step` [bytes] for sequential passes, a multiple of the page size.
    #[serde(default = "page_step")]
    pub step: Size,
    /// Passes over the area (`--repeat`); 0 = until `runtime` or the end of the run.
    #[serde(default = "one_u64")]
    pub repeat: u64,
    /// With `random`: each thread's writes per pass (default: usemem's `--random` count,
    /// one write per 8-byte word of the thread's span, 512 per page). fio's `number_ios`:
    /// a random job bounded by its writes rather than by time, for kernel-run, which needs
    /// workloads that end by themselves. (Left out of the echoed scenario when absent.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_writes: Option<u64>,
    /// `--runtime`: stop after this much virtual time [ns]; absent = no limit.
    #[serde(default)]
    pub runtime: Option<Dur>,
    /// munmap the area after each pass and map it afresh, as will-it-scale's
    /// page_fault1 does (mmap, write every page, munmap; one op per page fault).
    #[serde(default)]
    pub unmap: bool,
    /// `anon` (default) or `shared_file`: each process maps a file of `size` MAP_SHARED
    /// (will-it-scale page_fault3); after the first pass its pages stay in the page cache
    /// and a write fault only maps them.
    #[serde(default)]
    pub mapping: MappingKind,
    /// Pace each thread's accesses to at most this many bytes per second (a page per
    /// access), sleeping when ahead of the pace, as fio's `rate` does; absent = as fast as
    /// possible (at least 1: fio's `rate = 0`, no limit, is said by leaving it out).
    #[serde(default)]
    pub rate: Option<Size>,
    /// With `rate`: whether a thread that fell behind its pace (stalled in a fault or in
    /// reclaim) catches up by running unpaced until it is back on schedule, as fio's rate
    /// does (true, the default: an open loop), or resumes the pace from where it is (false:
    /// a closed loop, a server whose client waits for each answer; time lost to stalls is
    /// work not done).
    #[serde(default = "yes")]
    pub rate_catch_up: bool,
    /// The program's hot text [bytes, a multiple of 4096; default 0]: the executable pages
    /// its access loop runs from, one file mapped VM_EXEC by all its processes after their
    /// areas. Every access runs from all of them (setting their PTEs young); the first run
    /// of a page, and the first after reclaim took it, faults it in from the disk, charged
    /// to the faulting process's memcg. 0 = the text is cached and charged outside the
    /// workload's memcg, out of its reclaim's reach.
    #[serde(default = "no_text")]
    pub text: Size,
    /// How the random passes' writes are simulated: `per_access` (default), each write an
    /// event that sets its PTE's bits; `sampled`, the writes that do not fault only counted,
    /// and the young bits they set drawn when the kernel reads them (mm/sampled_access.rs,
    /// docs/model.md "Sampled access"). Needs `random = true`, `mapping` anon or shmem and
    /// no `unmap`; kernel-run's model side runs per access.
    /// (Left out of the echoed scenario when per_access, so that results of scenarios
    /// older than the field keep their bytes.)
    #[serde(default, skip_serializing_if = "AccessModel::is_per_access")]
    pub access_model: AccessModel,
}

/// How a usemem thread's random writes are simulated (`access_model`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessModel {
    /// One event per write.
    #[default]
    PerAccess,
    /// Only the faulting writes are events; the others' bits are drawn when read.
    Sampled,
}

impl AccessModel {
    fn is_per_access(&self) -> bool {
        *self == AccessModel::PerAccess
    }
}

fn no_text() -> Size {
    Size(0)
}

fn page_step() -> Size {
    Size(PAGE_SIZE)
}

/// What a usemem area maps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MappingKind {
    /// An anonymous private mapping.
    #[default]
    Anon,
    /// A file of the area's size mapped MAP_SHARED (page-cache folios on the file LRU).
    SharedFile,
    /// A shared anonymous mapping (MAP_SHARED of /dev/zero, as fio's mmap engine maps it):
    /// shmem folios, swap-backed, on the anon LRU, swapped through the swap cache; a
    /// swapped-out page comes back dirty and gives its swap slot up (shmem_swapin_folio).
    /// Every access writes, so in the model these folios behave as anonymous ones but
    /// for their swap-in, which reads ahead where the kernel version's does (mm/shmem.rs;
    /// simplified: memory.stat counts them as anon, not shmem).
    Shmem,
}

impl Usemem {
    /// Pages of all its areas: each process's, and with prealloc the parent's too.
    fn area_pages(&self) -> u64 {
        (self.processes as u64 + self.prealloc as u64) * self.size.pages()
    }

    /// The pace of a thread that starts at `start` [ns], if the workload has a `rate`.
    pub fn pace(&self, start: u64) -> Option<Pace> {
        self.rate.map(|b| Pace::new(start, b.0, self.rate_catch_up))
    }

    /// The area, its threads' spans, the step and the text.
    fn validate_area(&self, cx: &Check) -> Result<()> {
        let pages = self.size.pages();
        if !(1..=MAX_AREA_PAGES).contains(&pages) || !self.size.0.is_multiple_of(PAGE_SIZE) {
            return Err(cx.err(
                "size",
                format!("{} bytes: allowed a multiple of 4096 in 4K..=16T - 4K per process (page indices are 32-bit)", self.size.0),
            ));
        }
        if pages < self.threads as u64 {
            return Err(cx.err(
                "threads",
                format!(
                    "{} threads for {pages} pages: each thread needs at least one page",
                    self.threads
                ),
            ));
        }
        if self.step.0 == 0 || !self.step.0.is_multiple_of(PAGE_SIZE) || self.step.0 > self.size.0 {
            return Err(cx.err(
                "step",
                format!(
                    "{}: allowed a multiple of 4096 in 4096..=size ({})",
                    self.step.0, self.size.0
                ),
            ));
        }
        if !self.text.0.is_multiple_of(PAGE_SIZE) || pages + self.text.pages() > MAX_AREA_PAGES {
            return Err(cx.err(
                "text",
                format!(
                    "{} bytes: allowed a multiple of 4096, at most 16T - 4K with the area ({} bytes)",
                    self.text.0, self.size.0
                ),
            ));
        }
        Ok(())
    }

    /// The runtime, and the switches that exclude one another or need another.
    fn validate_modes(&self, cx: &Check) -> Result<()> {
        if let Some(r) = self.runtime {
            if r.0 > MAX_DURATION {
                return Err(cx.err(
                    "runtime",
                    format!("{} ns: allowed up to {MAX_DURATION} ns", r.0),
                ));
            }
        }
        if self.prealloc && (self.mapping != MappingKind::Anon || self.unmap) {
            return Err(cx.err(
                "prealloc",
                "true: the parent's area is shared copy-on-write with its forked workers, which needs mapping = \"anon\" and unmap = false",
            ));
        }
        if self.fill && self.prefault {
            return Err(cx.err(
                "fill",
                "true: the area is populated by `prefault` already; allowed: one of fill and prefault",
            ));
        }
        if let Some(n) = self.random_writes {
            if !self.random {
                return Err(cx.err(
                    "random_writes",
                    format!("{n}: a count of random writes needs random = true; allowed only with random"),
                ));
            }
            if n == 0 {
                return Err(cx.err(
                    "random_writes",
                    "0: allowed 1 or more; leave it out for usemem's count (size/8 writes per pass)",
                ));
            }
        }
        if self.rate == Some(Size(0)) {
            return Err(cx.err(
                "rate",
                "0 bytes per second: allowed 1 or more; to run without a limit (fio's rate = 0), leave `rate` out",
            ));
        }
        if self.access_model == AccessModel::Sampled {
            let why = if !self.random {
                Some("random = false: a sequential pass is not a memoryless draw; allowed with random = true")
            } else if self.mapping == MappingKind::SharedFile {
                Some("mapping = \"shared_file\": writeback write-protects its PTEs; allowed with mapping anon or shmem")
            } else if self.unmap {
                Some("unmap = true: the passes remap the area; allowed with unmap = false")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(cx.err("access_model", format!("\"sampled\" with {why}")));
            }
        }
        if !self.rate_catch_up && self.rate.is_none() {
            return Err(cx.err(
                "rate_catch_up",
                "false: needs a `rate` (an unpaced thread has no schedule to keep)",
            ));
        }
        Ok(())
    }
}

impl Workload for Usemem {
    fn nr_tasks(&self) -> u64 {
        self.processes as u64 * self.threads as u64
    }

    fn tasks_field(&self) -> (&'static str, String) {
        let n = self.nr_tasks();
        let (p, t) = (self.processes, self.threads);
        (
            "processes",
            format!("processes * threads = {p} * {t} = {n} tasks"),
        )
    }

    fn validate(&self, cx: &Check) -> Result<()> {
        self.validate_area(cx)?;
        self.validate_modes(cx)
    }

    fn demand(&self, _frames: u64) -> (u64, u64) {
        // With prealloc, the parent's area besides each worker's copies.
        let p = self.area_pages();
        match self.mapping {
            // Shmem folios are swap-backed, on the anon LRU, as anonymous ones.
            MappingKind::Anon | MappingKind::Shmem => (p, p),
            MappingKind::SharedFile => (p, 0),
        }
    }

    fn memory(&self, cx: &Check, terms: &mut Terms) {
        let (i, p) = (cx.index, self.area_pages());
        // A forked area also has its write-protect bits, one per page.
        let per = PTE_BYTES + if self.prealloc { 1.0 / 8.0 } else { 0.0 };
        terms.add(
            format!("page tables of workload[{i}] (usemem, {p} pages)"),
            cx.at("size"),
            (p as f64 * per) as u64,
        );
        if self.access_model == AccessModel::Sampled {
            let q = self.processes as u64 * self.size.pages();
            terms.add(
                format!("sampled access state of workload[{i}] ({q} pages)"),
                cx.at("access_model"),
                (q as f64 * SAMPLED_BYTES_PER_PAGE) as u64,
            );
        }
        if self.mapping == MappingKind::SharedFile {
            terms.add(
                format!("page-cache index of workload[{i}] (shared_file, {p} pages)"),
                cx.at("size"),
                (p as f64 * CACHE_BYTES) as u64,
            );
        }
    }

    fn spawn(&self, s: &Rc<Sim>, at: &Spawn, stream: &mut u64) -> Result<()> {
        spawn_usemem(s, at, self, stream);
        Ok(())
    }

    fn bounded(&self) -> std::result::Result<(), String> {
        if self.repeat == 0 {
            return Err("usemem.repeat = 0 runs forever; set repeat".into());
        }
        if self.runtime.is_some() {
            return Err("usemem.runtime bounds the run by time; set repeat instead".into());
        }
        Ok(())
    }

    fn host(&self) -> std::result::Result<HostPlan, HostRefusal> {
        if self.mapping == MappingKind::SharedFile {
            return Err(HostRefusal {
                field: None,
                msg: "kernel-run supports usemem mapping = \"anon\" only".into(),
            });
        }
        if self.prealloc {
            return Err(HostRefusal {
                field: Some("prealloc"),
                msg: "true: kernel-run maps each process's area in the process itself (its workers share no parent's pages copy-on-write); allowed: prealloc = false".into(),
            });
        }
        Ok(HostPlan {
            processes: self.processes,
            threads: self.threads,
            files: 0,
            populate: self.prefault.then_some("prefault"),
        })
    }

    /// A process's area (MAP_SHARED for shmem) and its threads, each with the
    /// simulator's sequence and pace.
    fn host_process<'a>(
        &'a self,
        sc: &Scenario,
        wi: usize,
        process: u32,
        _prepared: Option<&'a HostPrepared>,
    ) -> std::result::Result<HostProcess<'a>, String> {
        let threads = (0..self.threads)
            .map(|t| {
                let task = process * self.threads + t;
                let seq = UsememSeq::new(self, t, task_rng(sc, wi, task));
                HostThread {
                    stream: task_stream(sc, wi, task),
                    accesses: Box::new(seq.map(Ok)),
                    pace: self
                        .pace(0)
                        .map(|mut p| Box::new(move |now: u64| p.after_access(now)) as HostPace),
                }
            })
            .collect();
        Ok(HostProcess {
            area: Some(HostArea {
                pages: self.size.pages(),
                shared: self.mapping == MappingKind::Shmem,
            }),
            threads,
        })
    }
}

/// fio's rate limit: a thread may not run ahead of `bytes_per_s` (one page per access).
/// With catch-up (fio's own, an open loop) a thread that fell behind runs unpaced until
/// it is back on its schedule; without (a closed loop) it moves its schedule to the
/// present, so the time it lost is work not done. The simulator's usemem threads and the
/// host replay's (crates/host) both ask it when the next access is due.
#[derive(Debug, Clone)]
pub struct Pace {
    start: u64,
    bytes_per_s: u64,
    done: u64,
    catch_up: bool,
}

impl Pace {
    /// The pace of a thread that starts at `start` [ns].
    pub fn new(start: u64, bytes_per_s: u64, catch_up: bool) -> Self {
        Pace {
            start,
            bytes_per_s: bytes_per_s.max(1),
            done: 0,
            catch_up,
        }
    }

    /// One more access ended at `now` [ns]: when the next may start, None when at once
    /// (the thread is not ahead of its pace; without catch-up its schedule then restarts
    /// at `now`, this access done now).
    pub fn after_access(&mut self, now: u64) -> Option<u64> {
        self.done += PAGE_SIZE;
        let due = self.start.saturating_add(
            (self.done as u128 * 1_000_000_000 / self.bytes_per_s as u128).min(u64::MAX as u128)
                as u64,
        );
        if due > now {
            return Some(due);
        }
        if !self.catch_up {
            self.start = now;
            self.done = 0;
        }
        None
    }

    /// The floor of one page's interval [ns].
    pub fn interval(&self) -> u64 {
        PAGE_SIZE * 1_000_000_000 / self.bytes_per_s
    }

    /// When the access `done` bytes into the schedule is due.
    fn due(&self, done: u64) -> u64 {
        self.start.saturating_add(
            (done as u128 * 1_000_000_000 / self.bytes_per_s as u128).min(u64::MAX as u128) as u64,
        )
    }

    /// `k` accesses of `cost` [ns] each, the first starting at `now`, each followed by the
    /// pace's wait: when the next access may start. The same as `k` rounds of `now +=
    /// cost` and [`Pace::after_access`] (a test compares them), in constant time: after
    /// the first access the due times step by `fp` or `fp + 1` ns (`fp` = the floor of a
    /// page's interval), so either each access waits for its due time or none does.
    /// Rounds run one by one only where `fp` equals `cost`, where the two alternate.
    pub fn run(&mut self, mut now: u64, k: u64, cost: u64) -> u64 {
        if k == 0 {
            return now;
        }
        now += cost;
        if let Some(due) = self.after_access(now) {
            now = due;
        }
        let k = k - 1;
        if k == 0 {
            return now;
        }
        let fp = PAGE_SIZE * 1_000_000_000 / self.bytes_per_s;
        let all = k.saturating_mul(PAGE_SIZE);
        if self.catch_up {
            // now_i = max(now_{i-1} + cost, due_i): the latest of the unpaced run and each
            // due time plus the accesses after it, which is the last one's when the due
            // times step by at least `cost`, else the first one's.
            let tail = if fp >= cost {
                self.due(self.done + all)
            } else {
                self.due(self.done + PAGE_SIZE) + (k - 1) * cost
            };
            self.done += all;
            return (now + k * cost).max(tail);
        }
        if fp > cost {
            // Each access waits for its due time; the schedule never restarts.
            self.done += all;
            return self.due(self.done);
        }
        if fp < cost {
            // Each access ends at or past its due time: the schedule restarts every time.
            now += k * cost;
            self.start = now;
            self.done = 0;
            return now;
        }
        for _ in 0..k {
            now += cost;
            if let Some(due) = self.after_access(now) {
                now = due;
            }
        }
        now
    }
}

/// Pages [lo, hi) of a usemem process that thread `t` of `threads` owns.
pub fn usemem_span(pages: u32, threads: u32, t: u32) -> (u32, u32) {
    let lo = (t as u64 * pages as u64 / threads as u64) as u32;
    let hi = ((t as u64 + 1) * pages as u64 / threads as u64) as u32;
    (lo, hi)
}

/// One usemem thread (vm-scalability usemem): prefault its span once (or, with `fill`,
/// write each of its pages once in address order), then `repeat` passes
/// (0 = unbounded) of sequential writes every `step` bytes, or of span*512 random-page
/// writes (`--random` writes size/8 words; `random_writes` if set); with `unmap`, each
/// pass after the first starts on a fresh mapping.
pub struct UsememSeq {
    lo: u32,
    hi: u32,
    step: u32,
    random: bool,
    /// The random writes of one pass.
    per_pass: u64,
    repeat: u64,
    unmap: bool,
    rng: Rng,
    /// Next page of the prefault walk, or None once done.
    prefault: Option<u32>,
    /// Next page of the `fill` pass, or None once done.
    fill: Option<u32>,
    /// Passes started.
    pass: u64,
    /// Position within the current pass (a page for sequential, a count for random).
    pos: u64,
    in_pass: bool,
}

impl UsememSeq {
    pub fn new(u: &Usemem, thread_in_process: u32, rng: Rng) -> Self {
        let (lo, hi) = usemem_span(u.size.pages() as u32, u.threads, thread_in_process);
        UsememSeq {
            lo,
            hi,
            step: (u.step.0 / PAGE_SIZE).max(1) as u32,
            random: u.random,
            per_pass: u
                .random_writes
                .unwrap_or((hi - lo) as u64 * (PAGE_SIZE / 8)),
            repeat: u.repeat,
            unmap: u.unmap,
            rng,
            prefault: u.prefault.then_some(lo),
            fill: u.fill.then_some(lo),
            pass: 0,
            pos: 0,
            in_pass: false,
        }
    }

    pub fn span(&self) -> (u32, u32) {
        (self.lo, self.hi)
    }

    /// Whether the prefault walk and the `fill` pass are over (only passes remain).
    fn setup_done(&self) -> bool {
        self.prefault.is_none_or(|v| v >= self.hi) && self.fill.is_none_or(|v| v >= self.hi)
    }

    /// The random writes of the passes not started yet (None: unbounded, `repeat = 0`).
    fn random_writes_left(&self) -> Option<u64> {
        (self.repeat != 0).then(|| {
            self.repeat
                .saturating_sub(self.pass)
                .saturating_mul(self.per_pass)
        })
    }
}

impl Iterator for UsememSeq {
    type Item = Access;

    fn next(&mut self) -> Option<Access> {
        if let Some(v) = self.prefault {
            if v < self.hi {
                self.prefault = Some(v + 1);
                return Some(Access::Populate { vpn: v });
            }
            self.prefault = None;
        }
        if let Some(v) = self.fill {
            if v < self.hi {
                self.fill = Some(v + 1);
                return Some(Access::Touch {
                    vpn: v,
                    random: false,
                });
            }
            self.fill = None;
        }
        loop {
            if !self.in_pass {
                if self.repeat != 0 && self.pass >= self.repeat {
                    return None;
                }
                self.pass += 1;
                self.in_pass = true;
                self.pos = if self.random { 0 } else { self.lo as u64 };
                if self.unmap && self.pass > 1 {
                    return Some(Access::Unmap {
                        lo: self.lo,
                        hi: self.hi,
                    });
                }
            }
            if self.random {
                if self.pos < self.per_pass {
                    self.pos += 1;
                    let vpn = self.rng.random_range(self.lo..self.hi);
                    return Some(Access::Touch { vpn, random: true });
                }
            } else if self.pos < self.hi as u64 {
                let vpn = self.pos as u32;
                self.pos += self.step as u64;
                return Some(Access::Touch { vpn, random: false });
            }
            self.in_pass = false;
            if self.hi == self.lo && self.repeat == 0 {
                return None; // an empty span never ends otherwise
            }
        }
    }
}

/// Create usemem's processes and threads. With `prealloc` (usemem --prealloc) a parent
/// process maps the area, populates it if `prefault`, and forks the workers, which share
/// its pages copy-on-write (fork.rs); without it each process maps and populates its own.
fn spawn_usemem(s: &Rc<Sim>, at: &Spawn, u: &Usemem, stream: &mut u64) {
    let pages = u.size.pages() as u32;
    // The program's text: one file, mapped by each process after its area.
    let text = (u.text.pages() > 0).then(|| {
        let mut mm = s.mm.borrow_mut();
        mm.files
            .push(File::text(u.text.pages() as usize, at.memcg, pages));
        (mm.files.len() - 1) as u32
    });
    // Each process's CPUs and the first random stream of its threads.
    let procs: Vec<(Vec<u32>, u64)> = (0..u.processes)
        .map(|p| {
            let c = &at.cpus[(p * u.threads) as usize..((p + 1) * u.threads) as usize];
            (c.to_vec(), *stream + (p * u.threads) as u64)
        })
        .collect();
    *stream += (u.processes * u.threads) as u64;
    if u.prealloc {
        spawn_usemem_parent(s, at, u, text, procs);
        return;
    }
    for (cpus, first_stream) in procs {
        let node = s.cpu_node[cpus[0] as usize];
        let mmid = usemem_mm(s, at.wi, u, at.memcg, text, node);
        spawn_usemem_threads(s, at.wi, u, mmid, &cpus, first_stream, at.start);
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
    if u.mapping == MappingKind::Shmem {
        mm.mark_shmem(mmid);
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
    at: &Spawn,
    u: &Usemem,
    text: Option<u32>,
    procs: Vec<(Vec<u32>, u64)>,
) {
    let (wi, memcg) = (at.wi, at.memcg);
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
    let id = s.e.spawn_tagged(at.start, cpu, parent, async move {
        let s = &sim;
        if !parent_populate(s, wi, &spec, parent).await {
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

/// The prealloc parent's MAP_POPULATE of its area (with `prefault`); false when it was
/// OOM-killed meanwhile.
async fn parent_populate(s: &Sim, wi: usize, spec: &Usemem, parent: u32) -> bool {
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
    s.mm.borrow().mms[parent as usize].alive
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
    if u.access_model == AccessModel::Sampled {
        let pages = u.size.pages() as u32;
        let spans = (0..u.threads)
            .map(|t| {
                let rng = rng::stream(s.seed, first_stream + t as u64);
                (usemem_span(pages, u.threads, t), rng)
            })
            .collect();
        let mut mm = s.mm.borrow_mut();
        let m = &mut mm.mms[mmid as usize];
        let text = m.text.map(|t| (t.base, t.pages));
        m.sampled = Some(Box::new(SampledArea::new(
            pages,
            spans,
            text,
            &m.ptes,
            &m.wrprotect,
        )));
    }
    let live = Rc::new(Cell::new(u.threads));
    for t in 0..u.threads {
        let sim = s.clone();
        let spec = u.clone();
        let live = live.clone();
        let stream = first_stream + t as u64;
        let seq = UsememSeq::new(u, t, rng::stream(s.seed, stream));
        let cpu = cpus[t as usize];
        s.live_tasks.set(s.live_tasks.get() + 1);
        let id = s.e.spawn_tagged(start_at, cpu, mmid, async move {
            usemem_thread(&sim, wi, &spec, (mmid, t), seq, stream, &live).await;
        });
        s.mm.borrow_mut().mms[mmid as usize].tasks.push(id);
    }
}

/// One usemem thread (thread `ti` of process `mmid`): its accesses until the sequence,
/// its `runtime` or the run ends or the process is killed, each followed by the pace's
/// wait. With `access_model = "sampled"` the passes after the prefault or fill are
/// [`SampledRun::passes`].
async fn usemem_thread(
    s: &Sim,
    wi: usize,
    spec: &Usemem,
    (mmid, ti): (u32, u32),
    seq: UsememSeq,
    stream: u64,
    live: &Cell<u32>,
) {
    let start = s.e.now();
    let mut r = Runner::new(s, wi, start);
    let th = thread_tally(s, wi, stream);
    let t = th.tally.clone();
    let deadline = spec.runtime.map_or(u64::MAX, |d| start.saturating_add(d.0));
    let mut pace = spec.pace(start);
    let mut work = Work::default();
    let sampled = spec.access_model == AccessModel::Sampled;
    let depth = if spec.random && !sampled {
        LOOKAHEAD
    } else {
        1
    };
    let mut ahead = Ahead::new(seq, depth);
    let mut passes_left = sampled;
    while !(sampled && ahead.seq.setup_done()) {
        let Some(a) = ahead.next(s, mmid) else {
            passes_left = false;
            break;
        };
        s.record_access(stream, a);
        let alive = usemem_access(s, &mut r, &t, mmid, a).await;
        if !alive || s.e.now() + r.pending >= deadline || work.done(s) {
            passes_left = false;
            break;
        }
        if let Some(due) = pace
            .as_mut()
            .and_then(|p| p.after_access(s.e.now() + r.pending))
        {
            r.flush(s);
            s.e.sleep(due - s.e.now()).await;
        }
    }
    if passes_left {
        let left = ahead.seq.random_writes_left();
        let mut th = SampledRun {
            r: &mut r,
            t: &t,
            mmid,
            ti: ti as usize,
            pace: pace.as_mut(),
            deadline,
        };
        th.passes(s, left).await;
    }
    r.flush(s);
    thread_done(s, &th);
    thread_exit(s, wi, start, mmid, live).await;
}

/// A usemem thread's random passes with `access_model = "sampled"` (mm/sampled_access.rs):
/// the writes that do not fault are counted in chunks, their time charged (and paced) as
/// the per-access loop charges it, and their young bits left to be drawn when the kernel
/// reads them; the faulting writes run one by one as [`touch`]es.
struct SampledRun<'a> {
    r: &'a mut Runner,
    t: &'a Tally,
    mmid: u32,
    ti: usize,
    pace: Option<&'a mut Pace>,
    deadline: u64,
}

impl SampledRun<'_> {
    /// The passes' `left` writes (None: unbounded) until the thread's `runtime` or the
    /// run ends or the process is killed.
    async fn passes(&mut self, s: &Sim, left: Option<u64>) {
        self.set_writing(s, 1);
        self.write(s, left).await;
        self.set_writing(s, -1);
    }

    /// Count the thread in (or out of) the writers of its process's sampled area.
    fn set_writing(&self, s: &Sim, d: i32) {
        let mut mm = s.mm.borrow_mut();
        if let Some(sa) = mm.mms[self.mmid as usize].sampled.as_deref_mut() {
            sa.writing = sa.writing.saturating_add_signed(d);
        }
    }

    async fn write(&mut self, s: &Sim, mut left: Option<u64>) {
        let cost = s.c.access_random;
        loop {
            let now = s.e.now() + self.r.pending;
            let horizon = self.deadline.min(s.end);
            if left == Some(0) || now >= horizon {
                return;
            }
            // The chunk's first write runs the text (faulting in a page reclaim took).
            if !run_text(s, self.r, self.t, self.mmid).await {
                return;
            }
            let Some((k, fault)) = self.chunk(s, horizon - now, left) else {
                return;
            };
            self.t.add(|t| &t.accesses, k);
            self.t.add(|t| &t.hits, k);
            left = left.map(|l| l - k);
            self.advance(s, k, cost).await;
            if fault && left != Some(0) {
                let vpn = {
                    let mut mm = s.mm.borrow_mut();
                    let m = &mut mm.mms[self.mmid as usize];
                    let sa = m.sampled.as_deref_mut();
                    let sa = sa.expect("a sampled thread's area is sampled");
                    let vpn = sa.faulting_page(self.ti);
                    if let Some(v) = vpn {
                        sa.commit(self.ti, 1);
                        sa.prefetch_fault(v, &m.ptes);
                    }
                    vpn
                };
                if let Some(vpn) = vpn {
                    left = left.map(|l| l - 1);
                    if !touch(s, self.r, self.t, self.mmid, vpn, cost).await {
                        return;
                    }
                    self.pace_wait(s).await;
                }
            }
            if s.e.now() + self.r.pending >= self.deadline || !s.e.work_points(k + 1) {
                return;
            }
        }
    }

    /// The next chunk's writes that do not fault, committed to the thread's draw count,
    /// and whether a faulting write ends it; None when the process was killed. A chunk is
    /// at most `n >> CHUNK_SHIFT` writes and, at the pace's or the cost's rate, about
    /// `within` ns.
    fn chunk(&mut self, s: &Sim, within: u64, left: Option<u64>) -> Option<(u64, bool)> {
        let mut mm = s.mm.borrow_mut();
        let m = &mut mm.mms[self.mmid as usize];
        if !m.alive {
            return None;
        }
        let sa = m
            .sampled
            .as_deref_mut()
            .expect("a sampled thread's area is sampled");
        let th = &sa.threads[self.ti];
        let n = (th.hi - th.lo) as u64;
        let per_write = self
            .pace
            .as_ref()
            .map_or(0, |p| p.interval())
            .max(s.c.access_random)
            .max(1);
        // With a text, a reclaimed text page must be seen by the next write, as a
        // per-access thread sees it (within the quantum it may run ahead): a chunk of
        // one quantum's writes.
        let cap = if m.text.is_some() {
            (SKEW_QUANTUM / per_write).max(1)
        } else {
            (n >> CHUNK_SHIFT).max(1)
        };
        let mut k = cap
            .min(within.div_ceil(per_write))
            .min(left.unwrap_or(u64::MAX));
        let mut fault = false;
        if let Some(g) = sa.draws_before_fault(self.ti) {
            if g < k {
                k = g;
                fault = true;
                sa.prefetch_next_fault(self.ti, &m.ptes);
            }
        }
        sa.commit(self.ti, k);
        Some((k, fault))
    }

    /// Charge `k` writes of `cost` each, with the pace's waits between them.
    async fn advance(&mut self, s: &Sim, k: u64, cost: u64) {
        if k == 0 {
            return;
        }
        let next = self
            .pace
            .as_mut()
            .map(|p| p.run(s.e.now() + self.r.pending, k, cost));
        self.r.tick(s, k * cost).await;
        if let Some(next) = next {
            if next > s.e.now() + self.r.pending {
                self.r.flush(s);
                s.e.sleep(next - s.e.now()).await;
            }
        }
    }

    /// The pace's wait after one write.
    async fn pace_wait(&mut self, s: &Sim) {
        let now = s.e.now() + self.r.pending;
        if let Some(due) = self.pace.as_mut().and_then(|p| p.after_access(now)) {
            self.r.flush(s);
            s.e.sleep(due - s.e.now()).await;
        }
    }
}

/// One access of a usemem thread; false when the process was killed. An `async move`
/// block, not an `async fn`, for the reason task.rs's `touch` gives.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn stalls on its arguments (touch)"
)]
fn usemem_access<'a>(
    s: &'a Sim,
    r: &'a mut Runner,
    t: &'a Tally,
    mmid: u32,
    a: Access,
) -> impl std::future::Future<Output = bool> + 'a {
    async move {
        match a {
            Access::Touch { vpn, random } => {
                let cost = if random {
                    s.c.access_random
                } else {
                    s.c.access_seq
                };
                touch(s, r, t, mmid, vpn, cost).await
            }
            Access::Populate { vpn } => populate(s, r, t, mmid, vpn).await,
            Access::Unmap { lo, hi } => {
                // munmap; the next pass faults a fresh mapping in.
                r.flush(s);
                s.zap_pte_range(mmid, lo, hi).await;
                s.mm.borrow().mms[mmid as usize].alive
            }
            Access::Read { .. } => unreachable!("usemem reads no files"),
        }
    }
}

/// A thread's accesses drawn `depth` ahead of the one it runs, so their PTEs (and
/// swap-map entries) are prefetched while earlier ones run; results do not change.
/// (Sequential passes need none, depth 1: the hardware prefetcher sees them.)
struct Ahead {
    seq: UsememSeq,
    depth: usize,
    queue: VecDeque<Access>,
}

impl Ahead {
    fn new(seq: UsememSeq, depth: usize) -> Self {
        Ahead {
            seq,
            depth,
            queue: VecDeque::with_capacity(depth),
        }
    }

    /// The next access of process `mmid`'s thread.
    fn next(&mut self, s: &Sim, mmid: u32) -> Option<Access> {
        if self.depth == 1 {
            return self.seq.next();
        }
        while self.queue.len() < self.depth {
            let Some(a) = self.seq.next() else { break };
            if let Access::Touch { vpn, .. } | Access::Populate { vpn } = a {
                prefetch_pte(s, mmid, vpn);
            }
            self.queue.push_back(a);
        }
        if let Some(Access::Touch { vpn, .. }) = self.queue.get(self.depth / 2) {
            prefetch_swap_entry(s, mmid, *vpn);
        }
        self.queue.pop_front()
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A usemem of `pages` pages from its TOML fields.
    fn usemem(pages: u64, fields: &str) -> Usemem {
        toml::from_str(&format!("size = {}\n{fields}", pages * PAGE_SIZE)).unwrap()
    }

    /// The random touches of thread `t`'s sequence, each checked to lie in its span.
    fn random_touches(u: &Usemem, t: u32) -> u64 {
        let seq = UsememSeq::new(u, t, rng::stream(7, t as u64));
        let (lo, hi) = seq.span();
        seq.map(|a| match a {
            Access::Touch { vpn, random: true } => {
                assert!((lo..hi).contains(&vpn), "{vpn} outside {lo}..{hi}");
                1
            }
            other => panic!("not a random touch: {other:?}"),
        })
        .sum()
    }

    #[test]
    fn a_random_pass_is_usemem_word_count_or_random_writes() {
        // usemem --random: a write per 8-byte word of the thread's span, 512 per page;
        // 10 pages over 2 threads are spans of 5.
        let u = usemem(10, "threads = 2\nrandom = true\nrepeat = 3");
        assert_eq!(random_touches(&u, 0), 3 * 5 * 512);
        assert_eq!(random_touches(&u, 1), 3 * 5 * 512);
        // random_writes: each thread's writes per pass, whatever the span.
        let u = usemem(
            10,
            "threads = 2\nrandom = true\nrepeat = 3\nrandom_writes = 7",
        );
        assert_eq!(random_touches(&u, 0), 21);
        assert_eq!(random_touches(&u, 1), 21);
        let seq = UsememSeq::new(&u, 0, rng::stream(7, 0));
        assert_eq!(seq.random_writes_left(), Some(21));
    }

    proptest! {
        /// Pace::run's k accesses at once end where k rounds of the per-access loop do
        /// (`now += cost`, then after_access's wait), and leave the pace in the same
        /// state: open and closed loops, paces slower and faster than the cost, a thread
        /// behind or ahead of its schedule.
        #[test]
        fn k_accesses_at_once_are_k_accesses_one_by_one(
            bytes_per_s in prop_oneof![1u64..100_000_000, 4096u64..10_000_000_000],
            cost in 0u64..5_000,
            start in 0u64..1_000_000,
            now in 0u64..2_000_000,
            done_before in 0u64..50,
            k in 0u64..3_000,
            catch_up in any::<bool>(),
        ) {
            let mut a = Pace::new(start, bytes_per_s, catch_up);
            for _ in 0..done_before {
                a.after_access(now);
            }
            let mut b = a.clone();
            let mut t = now;
            for _ in 0..k {
                t += cost;
                if let Some(due) = a.after_access(t) {
                    t = due;
                }
            }
            prop_assert_eq!(b.run(now, k, cost), t);
            prop_assert_eq!((b.start, b.done), (a.start, a.done));
        }
    }

    #[test]
    fn a_pace_within_a_nanosecond_of_the_cost_alternates_and_run_follows_it() {
        // 4096 bytes at 3e9 B/s: a page every 1365.33 ns, due steps of 1365 or 1366 ns;
        // with cost 1365 a closed loop restarts on the 1365 steps and waits on the
        // others: the case Pace::run takes round by round.
        let (mut a, mut b) = (
            Pace::new(0, 3_000_000_000, false),
            Pace::new(0, 3_000_000_000, false),
        );
        let mut t = 0;
        for _ in 0..1000 {
            t += 1365;
            if let Some(d) = a.after_access(t) {
                t = d;
            }
        }
        assert_eq!(b.run(0, 1000, 1365), t);
        assert_eq!((a.start, a.done), (b.start, b.done));
    }
}
