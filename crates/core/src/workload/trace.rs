//! trace: replay of a page-access trace (text, CSV, libCacheSim oracleGeneral, DAMON;
//! `crate::trace` reads them) through the full model by one task, against a page-cache
//! file or an anonymous area that grows as new objects appear: each request's object maps
//! to consecutive pages (objects larger than a page span several), ids get dense page
//! indices in order of first appearance, requests run back to back. This module holds all
//! of it: the schema and its checks, the budget (the id map grows outside the estimate),
//! the simulated task, and the host replay, which maps ids with the same `PageMap`.

use super::access::{task_stream, Access};
use super::host::{HostArea, HostPlan, HostPrepared, HostProcess, HostRefusal, HostThread};
use super::stats::{Tally, TraceStats};
use super::task::{
    finish, prefetch_anon_pte, prefetch_file_entry, prefetch_file_folio, thread_done, thread_exit,
    thread_tally, touch, Runner, WORK_BATCH,
};
use super::{Check, Spawn, Workload};
use crate::budget::Terms;
use crate::error::{quoted, Error, Result};
use crate::mm::filemap::{Cached, Read};
use crate::mm::mm_types::pte;
use crate::mm::{File, MemcgId, Mm, MmStruct};
use crate::scenario::{Scenario, PAGE_SIZE};
use crate::sim::Sim;
use crate::trace::{self as reader, CsvColumns, PageMap, Request, Source, TraceFormat};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::rc::Rc;

/// What a trace's ids address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceTarget {
    /// Pages of one page-cache file, read with readahead off.
    File,
    /// Pages of one anonymous area, written.
    Anon,
}

/// Replay of a page-access trace through the full model by one task: each request's
/// object maps to consecutive pages (objects larger than a page span several), ids are
/// given dense page indices in order of first appearance, requests run back to back.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// The trace file. The Python front resolves a relative path against the scenario
    /// file's directory; the core takes it as given (relative to the working directory).
    pub path: String,
    /// `auto`, `text`, `csv`, `oracle_general`, `oracle_general_zst` or `damon`.
    #[serde(default = "default_trace_format")]
    pub format: TraceFormat,
    /// `file` (page cache) or `anon`.
    #[serde(default = "default_trace_target")]
    pub target: TraceTarget,
    /// Requests to replay; 0 = the whole trace.
    #[serde(default)]
    pub requests: u64,
    /// Column mapping for `csv` (default: a header with `obj_id`, optional `obj_size`,
    /// `op`, `time`).
    #[serde(default)]
    pub csv: Option<CsvColumns>,
}

/// Host bytes per byte of a DAMON trace's JSON kept once parsed: a region accessed at a
/// positive rate keeps 24 bytes and takes 35 bytes of JSON at least, a snapshot a 24-byte
/// list for 14 bytes at least (`{"regions":[]}`); a list's growth doubles at most.
const DAMON_BYTES_PER_BYTE: u64 = 4;

/// The format as a scenario spells it (`oracle_general`).
fn format_name(f: TraceFormat) -> String {
    match serde_json::to_value(f) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{f:?}"),
    }
}

fn default_trace_format() -> TraceFormat {
    TraceFormat::Auto
}
fn default_trace_target() -> TraceTarget {
    TraceTarget::File
}

impl Trace {
    /// Open the trace (`seed`: the scenario's, DAMON's expansion draws from it).
    fn open(&self, seed: u64) -> Result<Box<dyn Source>> {
        reader::open(&self.path, self.format, self.csv.as_ref(), seed)
    }

    /// Requests to replay at most (0 in the scenario: all).
    fn limit(&self) -> u64 {
        if self.requests == 0 {
            u64::MAX
        } else {
            self.requests
        }
    }

    /// Pages the trace's objects span (one pass over the whole trace).
    fn pages(&self, seed: u64) -> std::result::Result<u64, String> {
        let (_, _, pages) = reader::count(&self.path, self.format, self.csv.as_ref(), seed)
            .map_err(|e| e.to_string())?;
        Ok(pages)
    }
}

impl Workload for Trace {
    fn nr_tasks(&self) -> u64 {
        1
    }

    fn validate(&self, cx: &Check) -> Result<()> {
        if self.csv.is_some() && !matches!(self.format, TraceFormat::Csv | TraceFormat::Auto) {
            return Err(cx.err(
                "csv",
                format!(
                    "a csv table with format = {:?}: the table maps the columns of a CSV trace; allowed only with format = \"csv\" (or \"auto\" finding a CSV file)",
                    format_name(self.format)
                ),
            ));
        }
        if let Some(c) = &self.csv {
            c.check()
                .map_err(|(f, msg)| cx.err(&format!("csv.{f}"), msg))?;
        }
        if !std::path::Path::new(&self.path).is_file() {
            return Err(cx.err("path", format!("{}: no such file", quoted(&self.path))));
        }
        if self.csv.is_some() {
            let found = reader::detect(&self.path, self.format)?;
            if found != TraceFormat::Csv {
                return Err(cx.err(
                    "csv",
                    format!(
                        "a csv table, but format = \"auto\" reads {} as {:?} (by its name or content): the table maps the columns of a CSV trace; remove it, or set format = \"csv\"",
                        quoted(&self.path),
                        format_name(found)
                    ),
                ));
            }
        }
        // The trace opens and has a first request (an empty trace, a CSV with only a
        // header or an empty DAMON list is refused here).
        reader::probe(&self.path, self.format, self.csv.as_ref(), cx.scenario.seed)
    }

    /// A trace's footprint is unknown until it is read: the machine's frames.
    fn demand(&self, frames: u64) -> (u64, u64) {
        match self.target {
            TraceTarget::File => (frames, 0),
            TraceTarget::Anon => (frames, frames),
        }
    }

    /// Its page index grows as objects appear, outside the estimate ([`Workload::grows`]);
    /// DAMON records keep their regions for the replay (the file is parsed as a stream),
    /// their size bounded by the file's.
    fn memory(&self, cx: &Check, terms: &mut Terms) {
        if reader::detect(&self.path, self.format).ok() == Some(TraceFormat::Damon) {
            let bytes = std::fs::metadata(&self.path).map_or(0, |m| m.len());
            terms.add(
                format!("DAMON regions of workload[{}]", cx.index),
                cx.at("path"),
                bytes.saturating_mul(DAMON_BYTES_PER_BYTE),
            );
        }
    }

    fn grows(&self) -> bool {
        true
    }

    fn spawn(&self, s: &Rc<Sim>, at: &Spawn, stream: &mut u64) -> Result<()> {
        spawn_trace(s, at, self, stream)
    }

    fn host(&self) -> std::result::Result<HostPlan, HostRefusal> {
        Ok(HostPlan {
            processes: 1,
            threads: 1,
            files: usize::from(self.target == TraceTarget::File),
            populate: None,
        })
    }

    /// A file target reads one file as long as the pages the trace's objects map to.
    fn host_files(&self, seed: u64) -> std::result::Result<Vec<u64>, String> {
        match self.target {
            TraceTarget::File => Ok(vec![self.pages(seed)?.max(1) * PAGE_SIZE]),
            TraceTarget::Anon => Ok(Vec::new()),
        }
    }

    /// The id-to-page map, built in one pass over the replayed requests.
    fn host_prepare(&self, seed: u64) -> std::result::Result<Option<HostPrepared>, String> {
        let mut src = self.open(seed).map_err(|e| e.to_string())?;
        let mut map = PageMap::default();
        let mut n = 0u64;
        while let Some(r) = src.next_request().map_err(|e| e.to_string())? {
            n += 1;
            if self.requests != 0 && n > self.requests {
                break;
            }
            map.map(&r)?;
        }
        Ok(Some(Box::new(map)))
    }

    /// One thread: a file target reads the pages of file 0, an anon target writes the
    /// pages of an area sized from a first pass over the trace. Objects map to the same
    /// pages with the prepared map or without: both assign them in order of first
    /// appearance over the same stream.
    fn host_process<'a>(
        &'a self,
        sc: &Scenario,
        wi: usize,
        _process: u32,
        prepared: Option<&'a HostPrepared>,
    ) -> std::result::Result<HostProcess<'a>, String> {
        let src = self.open(sc.seed).map_err(|e| e.to_string())?;
        let area = match self.target {
            TraceTarget::File => None,
            TraceTarget::Anon => Some(HostArea {
                pages: self.pages(sc.seed)?.max(1),
                shared: false,
            }),
        };
        let seq = HostSeq {
            src,
            prebuilt: prepared.and_then(|p| p.downcast_ref::<PageMap>()),
            own: PageMap::default(),
            left: self.limit(),
            next: 0,
            end: 0,
            file: self.target == TraceTarget::File,
        };
        Ok(HostProcess {
            area,
            threads: vec![HostThread {
                stream: task_stream(sc, wi, 0),
                accesses: Box::new(seq),
                pace: None,
            }],
        })
    }
}

/// The host replay's accesses: each request's pages in turn, read from file 0 or written
/// in the area.
struct HostSeq<'a> {
    src: Box<dyn Source>,
    prebuilt: Option<&'a PageMap>,
    own: PageMap,
    /// Requests left to replay.
    left: u64,
    /// The request being replayed: its next page and its end.
    next: u32,
    end: u32,
    file: bool,
}

impl HostSeq<'_> {
    /// The pages of the next request, None at the end of the replay.
    fn next_request(&mut self) -> std::result::Result<Option<(u32, u32)>, String> {
        if self.left == 0 {
            return Ok(None);
        }
        let Some(req) = self.src.next_request().map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        self.left -= 1;
        match self.prebuilt {
            Some(m) => m
                .get(req.obj)
                .map(Some)
                .ok_or_else(|| "trace changed since it was prepared".to_string()),
            None => self.own.map(&req).map(|(b, p, _)| Some((b, p))),
        }
    }
}

impl Iterator for HostSeq<'_> {
    type Item = std::result::Result<Access, String>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.next == self.end {
            match self.next_request() {
                Ok(Some((base, pages))) => (self.next, self.end) = (base, base + pages),
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        let page = self.next;
        self.next += 1;
        Some(Ok(if self.file {
            Access::Read { file: 0, page }
        } else {
            Access::Touch {
                vpn: page,
                random: true,
            }
        }))
    }
}

/// Requests a trace task reads ahead of the one it runs (for prefetching); its id's slot
/// is prefetched this far ahead, its page-cache entry ENTRY_AHEAD, its folio FOLIO_AHEAD.
const LOOKAHEAD: usize = 32;
const ENTRY_AHEAD: usize = 20;
const FOLIO_AHEAD: usize = 10;

/// Requests a trace task decodes at a time.
const TRACE_READ_BATCH: usize = 256;

/// Prefetch the page-cache entry or PTE of page `page` of a trace target.
fn prefetch_entry(mm: &Mm, kind: TraceTarget, target: u32, page: u32) {
    match kind {
        TraceTarget::File => prefetch_file_entry(mm, target, page),
        TraceTarget::Anon => prefetch_anon_pte(mm, target, page),
    }
}

/// Prefetch the folio a page-cache entry points to (its entry was prefetched earlier).
fn prefetch_folio(mm: &Mm, kind: TraceTarget, target: u32, page: u32) {
    if kind == TraceTarget::File {
        prefetch_file_folio(mm, target, page);
    }
}

/// A trace task's place in its trace: the requests read ahead, the object -> pages map,
/// and the request being replayed. [`Replay::next_page`] hands out pages one at a time and
/// does the work between requests synchronously: counting the finished request, reading
/// more of the trace, prefetching, mapping the next object.
struct Replay {
    src: Box<dyn Source>,
    path: String,
    kind: TraceTarget,
    target: u32,
    /// Object id -> (first page, pages).
    ids: PageMap,
    /// Requests read ahead, so the memory a request will touch (its id's slot, its
    /// page-cache entry, its folio) is prefetched while earlier ones run: replay is bound
    /// by memory latency. This changes no behavior, only when lines arrive.
    /// `window[pos..]` are the requests read and not yet replayed, refilled a batch at a
    /// time when fewer than LOOKAHEAD are left.
    window: Vec<Request>,
    pos: usize,
    eof: bool,
    /// A read error comes after every request read before it: it is reported when the
    /// replay reaches it.
    pending_err: Option<Error>,
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
    fn new(src: Box<dyn Source>, path: String, limit: u64, kind: TraceTarget, target: u32) -> Self {
        Replay {
            src,
            path,
            kind,
            target,
            ids: PageMap::default(),
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
            let mm = s.mm.borrow();
            if let Some((b, _)) = self.ids.get(w[ENTRY_AHEAD].obj) {
                prefetch_entry(&mm, kind, target, b);
            }
            if let Some((b, _)) = self.ids.get(w[FOLIO_AHEAD].obj) {
                prefetch_folio(&mm, kind, target, b);
            }
        }
        let Some(&req) = self.window.get(self.pos) else {
            if let Some(e) = self.pending_err.take() {
                s.fail(e);
            } else if self.requests == 0 {
                // Validation saw a request to come; a DAMON trace can still draw none.
                s.fail(Error::Trace {
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
                s.fail(Error::Trace {
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
fn spawn_trace(s: &Rc<Sim>, at: &Spawn, spec: &Trace, stream: &mut u64) -> Result<()> {
    let src = spec.open(s.seed)?;
    let stream_id = *stream;
    *stream += 1;
    let (wi, memcg, cpu) = (at.wi, at.memcg, at.cpus[0]);
    let node = s.cpu_node[cpu as usize];
    let kind = spec.target;
    let target = {
        let mut mm = s.mm.borrow_mut();
        match kind {
            TraceTarget::File => {
                mm.files.push(File::new(0, memcg, None));
                (mm.files.len() - 1) as u32
            }
            TraceTarget::Anon => mm.mm_alloc(MmStruct::new(0, memcg, node, wi as u32)),
        }
    };
    let rp = Replay::new(src, spec.path.clone(), spec.limit(), kind, target);
    s.workloads.borrow_mut()[wi].trace = Some(TraceStats::default());
    s.live_tasks.set(s.live_tasks.get() + 1);
    let sim = s.clone();
    // Anon: the task belongs to the process (OOM kills reach it); file: no process.
    let tag = if kind == TraceTarget::Anon {
        target
    } else {
        u32::MAX
    };
    let id = s.e.spawn_tagged(at.start, cpu, tag, async move {
        trace_task(&sim, wi, memcg, node, rp, stream_id).await;
    });
    if kind == TraceTarget::Anon {
        s.mm.borrow_mut().mms[target as usize].tasks.push(id);
    }
    Ok(())
}

/// A trace task: the replay to its end, then the task's (and an anon target's process's)
/// exit.
async fn trace_task(s: &Sim, wi: usize, memcg: MemcgId, node: u32, mut rp: Replay, stream: u64) {
    let start = s.e.now();
    let mut r = Runner::new(s, wi, start);
    let th = thread_tally(s, wi, stream);
    let t = th.tally.clone();
    // The trace's share of the memory budget: its id map and, per page, a page-cache
    // entry (file) or a PTE (anon).
    let page_bytes = match rp.kind {
        TraceTarget::File => 8,
        TraceTarget::Anon => 4,
    };
    rp.ids.limit(s.trace_memory.get(), page_bytes);
    match rp.kind {
        TraceTarget::File => replay_file(s, &mut r, &t, &mut rp, memcg, node, stream).await,
        TraceTarget::Anon => replay_anon(s, &mut r, &t, &mut rp, stream).await,
    }
    r.flush(s);
    thread_done(s, &th);
    if rp.kind == TraceTarget::Anon {
        let live = Cell::new(1);
        thread_exit(s, wi, start, rp.target, &live).await;
    } else {
        finish(s, wi, start, false);
    }
}

/// Replay against a page-cache file. Hits run in the inner loop, which has no await (the
/// hit path of filemap_read is synchronous); it stops at the first access that needs one.
async fn replay_file(
    s: &Sim,
    r: &mut Runner,
    t: &Tally,
    rp: &mut Replay,
    memcg: MemcgId,
    node: u32,
    stream: u64,
) {
    let target = rp.target;
    loop {
        let (p, cached) = loop {
            let Some(p) = rp.next_page(s, t) else {
                return;
            };
            s.record_access(stream, Access::Read { file: 0, page: p });
            t.inc(|t| &t.accesses);
            r.flush(s);
            match s.filemap_read_hit(target, p) {
                Cached::Hit => t.inc(|t| &t.hits),
                c => break (p, c),
            }
        };
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
            Read::Oom => return,
        }
    }
}

/// Replay against an anonymous area: each page written as usemem writes it.
async fn replay_anon(s: &Sim, r: &mut Runner, t: &Tally, rp: &mut Replay, stream: u64) {
    let target = rp.target;
    while let Some(p) = rp.next_page(s, t) {
        let a = Access::Touch {
            vpn: p,
            random: true,
        };
        s.record_access(stream, a);
        let present = pte::present(s.mm.borrow().mms[target as usize].ptes[p as usize]);
        rp.all_hit &= present;
        if !touch(s, r, t, target, p, s.c.access_random).await {
            return;
        }
    }
}
