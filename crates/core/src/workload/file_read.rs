//! file_read: buffered reads of page-cache files with readahead off (one page per
//! access): sequential passes over the files in turn, uniform or zipf(theta) draws over
//! all their pages, or `hotscan` (a hot file read uniformly while a second file is
//! streamed once, `hot_per_stream` hot reads per streamed page). This module holds all of
//! it: the schema and its checks, the budget's page-cache index, the access sequence
//! ([`FileReadSeq`]), the simulated reader threads and the host replay.

use super::access::{task_rng, task_stream, Access};
use super::host::{HostPlan, HostPrepared, HostProcess, HostRefusal, HostThread};
use super::task::{
    finish, prefetch_file_entry, prefetch_file_folio, thread_done, thread_tally, Runner, Work,
    LOOKAHEAD,
};
use super::{Check, Spawn, Workload};
use crate::budget::{Terms, CACHE_BYTES};
use crate::engine::rng::{self, Rng};
use crate::error::Result;
use crate::mm::filemap::Read;
use crate::mm::File;
use crate::scenario::{one, one_u64, Scenario, Size, MAX_AREA_PAGES, MAX_FILES, PAGE_SIZE};
use crate::sim::Sim;
use rand::Rng as _;
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::rc::Rc;

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FilePattern {
    /// Sequential passes over each file in turn.
    Seq,
    /// Uniformly random pages over all files.
    Uniform,
    /// Zipf-distributed pages over all files (rank 1 = page 0 of the first file).
    Zipf,
    /// A hot set (the first file) re-read uniformly while the second file streams once.
    Hotscan,
}

/// Buffered reads of page-cache files with readahead off (one page per access).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileRead {
    /// Reader threads, all reading the same files.
    #[serde(default = "one")]
    pub threads: u32,
    /// File sizes [bytes, each a multiple of 4096]; the workload creates one file per entry.
    pub files: Vec<Size>,
    /// `seq`, `uniform`, `zipf` or `hotscan`.
    #[serde(default = "default_pattern")]
    pub pattern: FilePattern,
    /// Zipf exponent (pattern = zipf), > 0 (checked with every pattern).
    #[serde(default = "default_theta")]
    pub theta: f64,
    /// Passes (pattern = seq); 0 = until the end of the run.
    #[serde(default = "one_u64")]
    pub passes: u64,
    /// Accesses per thread (uniform, zipf, hotscan); 0 = until the end of the run.
    #[serde(default)]
    pub accesses: u64,
    /// hotscan: hot-set accesses per streamed page.
    #[serde(default = "default_hot_ratio")]
    pub hot_per_stream: u32,
}

fn default_pattern() -> FilePattern {
    FilePattern::Seq
}
fn default_theta() -> f64 {
    0.99
}
fn default_hot_ratio() -> u32 {
    1
}

impl FileRead {
    /// Pages of all its files.
    fn pages(&self) -> u64 {
        self.files.iter().map(|s| s.pages()).sum()
    }
}

impl Workload for FileRead {
    fn nr_tasks(&self) -> u64 {
        self.threads as u64
    }

    fn validate(&self, cx: &Check) -> Result<()> {
        if self.files.is_empty() {
            return Err(cx.err(
                "files",
                "an empty list: one or more file sizes of at least one page",
            ));
        }
        if self.files.len() > MAX_FILES {
            return Err(cx.err(
                "files",
                format!(
                    "{} files: allowed at most {MAX_FILES} per workload",
                    self.files.len()
                ),
            ));
        }
        for (j, sz) in self.files.iter().enumerate() {
            if !(1..=MAX_AREA_PAGES).contains(&sz.pages()) || !sz.0.is_multiple_of(PAGE_SIZE) {
                return Err(cx.err(
                    &format!("files[{j}]"),
                    format!("{} bytes: allowed a multiple of 4096 in 4K..=16T - 4K per file (page indices are 32-bit)", sz.0),
                ));
            }
        }
        if self.pattern == FilePattern::Hotscan && self.files.len() != 2 {
            return Err(cx.err(
                "files",
                format!(
                    "{} files: pattern \"hotscan\" needs exactly two: [hot set, streamed file]",
                    self.files.len()
                ),
            ));
        }
        // Whatever the pattern: the normalized scenario echoes theta, so one that could
        // never be a zipf exponent is refused even where no zipf draw reads it.
        if !(self.theta > 0.0 && self.theta.is_finite()) {
            return Err(cx.err(
                "theta",
                format!(
                    "{}: allowed a finite number > 0 (checked with every pattern, read by zipf)",
                    self.theta
                ),
            ));
        }
        Ok(())
    }

    fn demand(&self, _frames: u64) -> (u64, u64) {
        (self.pages(), 0)
    }

    fn memory(&self, cx: &Check, terms: &mut Terms) {
        let (i, p) = (cx.index, self.pages());
        terms.add(
            format!("page-cache index of workload[{i}] (file_read, {p} pages)"),
            cx.at("files"),
            (p as f64 * CACHE_BYTES) as u64,
        );
    }

    fn spawn(&self, s: &Rc<Sim>, at: &Spawn, stream: &mut u64) -> Result<()> {
        spawn_file_read(s, at, self, stream);
        Ok(())
    }

    fn bounded(&self) -> std::result::Result<(), String> {
        match self.pattern {
            FilePattern::Seq if self.passes == 0 => {
                Err("file_read.passes = 0 runs forever; set passes".into())
            }
            FilePattern::Uniform | FilePattern::Zipf if self.accesses == 0 => {
                Err("file_read.accesses = 0 runs forever; set accesses".into())
            }
            _ => Ok(()),
        }
    }

    fn host(&self) -> std::result::Result<HostPlan, HostRefusal> {
        Ok(HostPlan {
            processes: 1,
            threads: self.threads,
            files: self.files.len(),
            populate: None,
        })
    }

    fn host_files(&self, _seed: u64) -> std::result::Result<Vec<u64>, String> {
        Ok(self.files.iter().map(|s| s.pages() * PAGE_SIZE).collect())
    }

    /// One process whose threads all read the workload's files.
    fn host_process<'a>(
        &'a self,
        sc: &Scenario,
        wi: usize,
        _process: u32,
        _prepared: Option<&'a HostPrepared>,
    ) -> std::result::Result<HostProcess<'a>, String> {
        let threads = (0..self.threads)
            .map(|t| HostThread {
                stream: task_stream(sc, wi, t),
                accesses: Box::new(FileReadSeq::new(self, task_rng(sc, wi, t)).map(Ok)),
                pace: None,
            })
            .collect();
        Ok(HostProcess {
            area: None,
            threads,
        })
    }
}

/// Create file_read's files and reader threads.
fn spawn_file_read(s: &Rc<Sim>, at: &Spawn, f: &FileRead, stream: &mut u64) {
    let mut files = Vec::new();
    {
        let mut mm = s.mm.borrow_mut();
        for sz in &f.files {
            mm.files
                .push(File::new(sz.pages() as usize, at.memcg, None));
            files.push((mm.files.len() - 1) as u32);
        }
    }
    let files = Rc::new(files);
    let (wi, memcg) = (at.wi, at.memcg);
    for &cpu in at.cpus.iter().take(f.threads as usize) {
        let sim = s.clone();
        let spec = f.clone();
        let files = files.clone();
        let seq = FileReadSeq::new(f, rng::stream(s.seed, *stream));
        let stream_id = *stream;
        *stream += 1;
        s.live_tasks.set(s.live_tasks.get() + 1);
        s.e.spawn(at.start, cpu, async move {
            let s = &*sim;
            let start = s.e.now();
            let node = s.cpu_node[cpu as usize];
            let mut r = Runner::new(s, wi, start);
            let th = thread_tally(s, wi, stream_id);
            let t = th.tally.clone();
            let depth = if spec.pattern == FilePattern::Seq {
                1
            } else {
                LOOKAHEAD
            };
            let mut ahead = Ahead::new(seq, depth);
            let mut work = Work::default();
            while let Some(a) = ahead.next(s, &files) {
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

/// A reader's reads drawn `depth` ahead of the one it runs, so their page-cache entries
/// and folios are prefetched while earlier ones run; results do not change. (Sequential
/// passes need none, depth 1.)
struct Ahead {
    seq: FileReadSeq,
    depth: usize,
    queue: VecDeque<Access>,
}

impl Ahead {
    fn new(seq: FileReadSeq, depth: usize) -> Self {
        Ahead {
            seq,
            depth,
            queue: VecDeque::with_capacity(depth),
        }
    }

    /// The next read; `files` are the simulator's files of the workload's.
    fn next(&mut self, s: &Sim, files: &[u32]) -> Option<Access> {
        if self.depth == 1 {
            return self.seq.next();
        }
        let mm = s.mm.borrow();
        while self.queue.len() < self.depth {
            let Some(a) = self.seq.next() else { break };
            if let Access::Read { file, page } = a {
                prefetch_file_entry(&mm, files[file as usize], page);
            }
            self.queue.push_back(a);
        }
        if let Some(Access::Read { file, page }) = self.queue.get(self.depth / 2) {
            prefetch_file_folio(&mm, files[*file as usize], *page);
        }
        self.queue.pop_front()
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
