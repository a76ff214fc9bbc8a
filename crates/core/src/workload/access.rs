//! The page-access sequences of the workloads, shared by the simulator (`workload::spawn_*`)
//! and the native runner that replays a scenario on the host kernel (`reclaimsim-host`).
//!
//! A generator yields one thread's accesses in program order from the thread's own random
//! stream; it knows nothing of time. The simulator stops a generator early at the run's end
//! or a workload's `runtime`; the native runner needs a bounded workload and runs every
//! access. For the same scenario and seed both sides therefore issue the same pages in the
//! same order, thread by thread (`tests/host_sequences.rs` dumps and compares them).

use crate::engine::rng::{self, Rng};
use crate::scenario::{FilePattern, FileRead, Scenario, Usemem, WorkloadSpec, PAGE_SIZE};
use rand::Rng as _;
use rand_distr::{Distribution, Zipf};
use serde::Serialize;

/// One step of a thread's access sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Access {
    /// Write one word of anonymous page `vpn`; `random` selects the random-access cost.
    Touch { vpn: u32, random: bool },
    /// Page `vpn` of usemem's --prefault walk: mmap's MAP_POPULATE faults it in for
    /// writing and marks the folio accessed (GUP's FOLL_TOUCH).
    Populate { vpn: u32 },
    /// munmap + mmap of pages [lo, hi) (usemem `unmap` between passes).
    Unmap { lo: u32, hi: u32 },
    /// Read page `page` of the workload's file `file` (an index into its `files`).
    Read { file: u32, page: u32 },
}

/// The random stream of thread `thread` of workload `wi`: tasks number their streams in
/// creation order, workload by workload (usemem: process-major, then thread).
pub fn task_stream(sc: &Scenario, wi: usize, thread: u32) -> u64 {
    let before: u64 = sc.workloads[..wi].iter().map(|w| w.nr_tasks()).sum();
    before + thread as u64
}

/// The random stream of a task of workload `wi` (see [`task_stream`]).
pub fn task_rng(sc: &Scenario, wi: usize, thread: u32) -> Rng {
    rng::stream(sc.seed, task_stream(sc, wi, thread))
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
/// writes (`--random` writes size/8 words); with `unmap`, each pass after the first starts
/// on a fresh mapping.
pub struct UsememSeq {
    lo: u32,
    hi: u32,
    step: u32,
    random: bool,
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
                let iters = (self.hi - self.lo) as u64 * (PAGE_SIZE / 8);
                if self.pos < iters {
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

enum FileState {
    Seq {
        pass: u64,
        file: usize,
        page: u32,
    },
    Draws {
        left: u64,
        zipf: Option<Zipf<f64>>,
    },
    Hotscan {
        stream_page: u32,
        hot_left: u32,
        n: u64,
    },
    Done,
}

/// One file_read thread: sequential passes over the files in turn, uniform or zipf draws
/// over the concatenated pages (rank 1 = page 0 of the first file), or `hotscan` (each
/// page of the second file streamed once, followed by `hot_per_stream` uniform reads of
/// the first).
pub struct FileReadSeq {
    pages: Vec<u32>,
    total: u64,
    pattern: FilePattern,
    passes: u64,
    hot_per_stream: u32,
    limit: u64,
    rng: Rng,
    state: FileState,
}

impl FileReadSeq {
    pub fn new(f: &FileRead, rng: Rng) -> Self {
        let pages: Vec<u32> = f.files.iter().map(|s| s.pages() as u32).collect();
        let total = pages.iter().map(|&p| p as u64).sum();
        let limit = if f.accesses == 0 {
            u64::MAX
        } else {
            f.accesses
        };
        let state = match f.pattern {
            FilePattern::Seq => FileState::Seq {
                pass: 1,
                file: 0,
                page: 0,
            },
            FilePattern::Uniform => FileState::Draws {
                left: limit,
                zipf: None,
            },
            FilePattern::Zipf => FileState::Draws {
                left: limit,
                zipf: Some(Zipf::new(total as f64, f.theta).expect("validated zipf parameters")),
            },
            FilePattern::Hotscan => FileState::Hotscan {
                stream_page: 0,
                hot_left: 0,
                n: 0,
            },
        };
        FileReadSeq {
            pages,
            total,
            pattern: f.pattern,
            passes: f.passes,
            hot_per_stream: f.hot_per_stream,
            limit,
            rng,
            state,
        }
    }

    /// Page n of the concatenated files, as (file, page).
    fn locate(&self, mut n: u64) -> Access {
        for (i, &p) in self.pages.iter().enumerate() {
            if n < p as u64 {
                return Access::Read {
                    file: i as u32,
                    page: n as u32,
                };
            }
            n -= p as u64;
        }
        unreachable!("page index beyond the files")
    }
}

impl Iterator for FileReadSeq {
    type Item = Access;

    fn next(&mut self) -> Option<Access> {
        match &mut self.state {
            FileState::Done => None,
            FileState::Seq { pass, file, page } => {
                while *file < self.pages.len() && *page >= self.pages[*file] {
                    *file += 1;
                    *page = 0;
                }
                if *file == self.pages.len() {
                    if (self.passes != 0 && *pass >= self.passes) || self.total == 0 {
                        self.state = FileState::Done;
                        return None;
                    }
                    *pass += 1;
                    *file = 0;
                    *page = 0;
                    return self.next();
                }
                let a = Access::Read {
                    file: *file as u32,
                    page: *page,
                };
                *page += 1;
                Some(a)
            }
            FileState::Draws { left, zipf } => {
                if *left == 0 {
                    return None;
                }
                *left -= 1;
                let n = match zipf {
                    None => self.rng.random_range(0..self.total),
                    Some(z) => (z.sample(&mut self.rng) as u64).clamp(1, self.total) - 1,
                };
                Some(self.locate(n))
            }
            FileState::Hotscan {
                stream_page,
                hot_left,
                n,
            } => {
                debug_assert_eq!(self.pattern, FilePattern::Hotscan);
                if *hot_left > 0 {
                    *hot_left -= 1;
                    let page = self.rng.random_range(0..self.pages[0]);
                    *n += 1;
                    if *n > self.limit {
                        self.state = FileState::Done;
                        return None;
                    }
                    return Some(Access::Read { file: 0, page });
                }
                if *stream_page >= self.pages[1] {
                    self.state = FileState::Done;
                    return None;
                }
                let a = Access::Read {
                    file: 1,
                    page: *stream_page,
                };
                *stream_page += 1;
                *hot_left = self.hot_per_stream;
                Some(a)
            }
        }
    }
}

/// Whether a workload ends by itself (a bounded number of accesses), as the native runner
/// needs; otherwise the reason and the fields to set.
pub fn bounded(w: &WorkloadSpec) -> std::result::Result<(), String> {
    match w {
        WorkloadSpec::Usemem(u) if u.repeat == 0 => {
            Err("usemem.repeat = 0 runs forever; set repeat".into())
        }
        WorkloadSpec::Usemem(u) if u.runtime.is_some() => {
            Err("usemem.runtime bounds the run by time; set repeat instead".into())
        }
        WorkloadSpec::FileRead(f) => match f.pattern {
            FilePattern::Seq if f.passes == 0 => {
                Err("file_read.passes = 0 runs forever; set passes".into())
            }
            FilePattern::Uniform | FilePattern::Zipf if f.accesses == 0 => {
                Err("file_read.accesses = 0 runs forever; set accesses".into())
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}
