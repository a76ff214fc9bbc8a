//! request_churn: short-lived requests served by a pipeline of worker threads of one
//! process, so which folios die in a remote lru_add batch follows from batch drains and
//! request timing (seed 003). This module holds all of it: the schema and its checks, the
//! budget's page tables, the simulated workers, and the host runner's refusal (its
//! accesses depend on simulated timing).

use super::host::{HostPlan, HostPrepared, HostProcess, HostRefusal};
use super::stats::Tally;
use super::task::{tally, thread_exit, touch, Runner};
use super::{Check, Spawn, Workload};
use crate::budget::{Terms, PTE_BYTES};
use crate::engine::rng::{self, Rng};
use crate::error::Result;
use crate::mm::MmStruct;
use crate::scenario::{Dur, Scenario, Size, MAX_AREA_PAGES, MAX_DURATION, PAGE_SIZE};
use crate::sim::Sim;
use rand::Rng as _;
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// Short-lived requests served by a pipeline of worker threads of one process, as a busy
/// server serves them: when a request arrives, worker i first frees (munmap) the buffers
/// worker i-1 handed it, then maps a buffer, writes it (page faults put its folios in CPU
/// i's lru_add batch), spends `service` of CPU time, and hands the buffer to worker i+1. Requests arrive as a
/// Poisson process whose rate keeps each worker busy `load` of the time.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequestChurn {
    /// Worker threads (at least 2), each on its own CPU.
    #[serde(default = "two")]
    pub threads: u32,
    /// Anonymous memory each request maps and writes [bytes, a multiple of 4096].
    #[serde(default = "default_request_size")]
    pub request_size: Size,
    /// CPU time of a request besides its memory work [ns].
    #[serde(default = "default_service")]
    pub service: Dur,
    /// Busy fraction of each worker, in (0, 1].
    #[serde(default = "default_load")]
    pub load: f64,
    /// Requests per worker; 0 = until the end of the run.
    #[serde(default)]
    pub requests: u64,
}

fn two() -> u32 {
    2
}
fn default_request_size() -> Size {
    Size(64 << 10)
}
fn default_service() -> Dur {
    Dur(20_000)
}
fn default_load() -> f64 {
    0.95
}

/// Requests in flight per worker ring: a buffer's virtual range is reused after this many
/// of the worker's requests (long after it was freed).
pub const REQUEST_RING: u64 = 64;

impl RequestChurn {
    /// Pages of the process's area: each worker's ring of request buffers.
    fn area_pages(&self) -> u64 {
        self.request_size.pages() * REQUEST_RING * self.threads as u64
    }
}

impl Workload for RequestChurn {
    fn nr_tasks(&self) -> u64 {
        self.threads as u64
    }

    fn validate(&self, cx: &Check) -> Result<()> {
        if self.threads < 2 {
            return Err(cx.err(
                "threads",
                format!("{}: a pipeline needs at least 2 workers", self.threads),
            ));
        }
        let req = self.request_size.pages();
        if req == 0 || req > 65536 || !self.request_size.0.is_multiple_of(PAGE_SIZE) {
            return Err(cx.err(
                "request_size",
                format!(
                    "{} bytes: allowed a multiple of 4096 in 4K..=256M",
                    self.request_size.0
                ),
            ));
        }
        // Each worker's buffers are a ring of REQUEST_RING requests in the process's one
        // address space.
        let area = self.area_pages();
        if area > MAX_AREA_PAGES {
            return Err(cx.err(
                "request_size",
                format!(
                    "{} bytes * {REQUEST_RING} buffers * {} workers = {area} pages: the process's area holds at most {MAX_AREA_PAGES} pages (page indices are 32-bit)",
                    self.request_size.0, self.threads
                ),
            ));
        }
        if !(self.load > 0.0 && self.load <= 1.0) {
            return Err(cx.err("load", format!("{}: allowed (0, 1]", self.load)));
        }
        if self.service.0 > MAX_DURATION {
            return Err(cx.err(
                "service",
                format!("{} ns: allowed up to {MAX_DURATION} ns", self.service.0),
            ));
        }
        Ok(())
    }

    fn demand(&self, _frames: u64) -> (u64, u64) {
        let p = self.area_pages();
        (p, p)
    }

    fn memory(&self, cx: &Check, terms: &mut Terms) {
        let (i, p) = (cx.index, self.area_pages());
        terms.add(
            format!("page tables of workload[{i}] (request_churn, {p} pages)"),
            cx.at("request_size"),
            (p as f64 * PTE_BYTES) as u64,
        );
    }

    fn spawn(&self, s: &Rc<Sim>, at: &Spawn, stream: &mut u64) -> Result<()> {
        spawn_request_churn(s, at, self, stream);
        Ok(())
    }

    fn host(&self) -> std::result::Result<HostPlan, HostRefusal> {
        Err(HostRefusal {
            field: None,
            msg: "kernel-run does not replay request_churn (its accesses depend on simulated timing); allowed: usemem, file_read".into(),
        })
    }

    fn host_process<'a>(
        &'a self,
        _sc: &Scenario,
        _wi: usize,
        _process: u32,
        _prepared: Option<&'a HostPrepared>,
    ) -> std::result::Result<HostProcess<'a>, String> {
        Err("request_churn has no host replay".into())
    }
}

/// Buffers (virtual page ranges) handed to a worker, to be freed by it.
type Inbox = VecDeque<(u32, u32)>;

/// One worker of the pipeline: its number among `n`, its process and its ring of
/// request buffers (`base`, `req_pages` each).
struct Worker {
    i: usize,
    n: usize,
    mmid: u32,
    base: u32,
    req_pages: u32,
}

/// Create request_churn's process and its pipeline of workers.
fn spawn_request_churn(s: &Rc<Sim>, at: &Spawn, r: &RequestChurn, stream: &mut u64) {
    let (wi, n) = (at.wi, r.threads as usize);
    let req_pages = r.request_size.pages() as u32;
    let ring = REQUEST_RING as u32 * req_pages;
    let node = s.cpu_node[at.cpus[0] as usize];
    let mmid = {
        let mut mm = s.mm.borrow_mut();
        mm.mm_alloc(MmStruct::new(ring as usize * n, at.memcg, node, wi as u32))
    };
    // inbox[i]: buffers (vpn ranges) handed to worker i by worker i - 1, to be freed.
    let inbox: Rc<RefCell<Vec<Inbox>>> = Rc::new(RefCell::new(vec![Default::default(); n]));
    let live = Rc::new(Cell::new(n as u32));
    for (i, &cpu) in at.cpus.iter().enumerate().take(n) {
        let sim = s.clone();
        let spec = r.clone();
        let inbox = inbox.clone();
        let live = live.clone();
        let rng = rng::stream(s.seed, *stream);
        *stream += 1;
        s.live_tasks.set(s.live_tasks.get() + 1);
        let w = Worker {
            i,
            n,
            mmid,
            base: i as u32 * ring,
            req_pages,
        };
        let id = s.e.spawn_tagged(at.start, cpu, mmid, async move {
            worker(&sim, wi, &spec, &w, &inbox, rng, &live).await;
        });
        s.mm.borrow_mut().mms[mmid as usize].tasks.push(id);
    }
}

/// A worker's loop: serve a request, then idle until the next arrives, until its
/// `requests`, the run's end or its process's death.
async fn worker(
    s: &Sim,
    wi: usize,
    spec: &RequestChurn,
    w: &Worker,
    inbox: &RefCell<Vec<Inbox>>,
    mut rng: Rng,
    live: &Cell<u32>,
) {
    let start = s.e.now();
    let mut r = Runner::new(s, wi, start);
    let t = tally(s, wi);
    s.worker_on_cpu(true);
    let mut k = 0u64;
    let mut alive = true;
    while alive
        && (spec.requests == 0 || k < spec.requests)
        && s.e.now() < s.end
        && s.e.work_point()
    {
        let t0 = s.e.now() + r.pending;
        alive = serve(s, &mut r, &t, spec, w, inbox, k).await;
        k += 1;
        // Idle until the next request arrives: requests come as a Poisson process, with a
        // mean gap that keeps the worker busy `load` of the time.
        let busy = s.e.now() - t0;
        let mean_idle = busy as f64 * (1.0 / spec.load - 1.0);
        let u: f64 = rng.random_range(f64::EPSILON..1.0);
        // At most past the longest run: a tiny load must not overflow a clock.
        let idle = ((-u.ln() * mean_idle) as u64).min(MAX_DURATION);
        if idle > 0 {
            s.e.sleep(idle).await;
        }
        alive &= s.mm.borrow().mms[w.mmid as usize].alive;
    }
    r.flush(s);
    s.worker_on_cpu(false);
    thread_exit(s, wi, start, w.mmid, live).await;
}

/// Request `k` arrived at worker `w`: first free the buffers the previous worker handed
/// it (munmap), then map and write the request's buffer, spend the service time, and hand
/// the buffer to the next worker, which frees it. False when the process was killed.
async fn serve(
    s: &Sim,
    r: &mut Runner,
    t: &Tally,
    spec: &RequestChurn,
    w: &Worker,
    inbox: &RefCell<Vec<Inbox>>,
    k: u64,
) -> bool {
    let mine: Vec<(u32, u32)> = inbox.borrow_mut()[w.i].drain(..).collect();
    for (a, b) in mine {
        s.zap_pte_range(w.mmid, a, b).await;
    }
    // mmap + write the request's buffer.
    let lo = w.base + (k % REQUEST_RING) as u32 * w.req_pages;
    let mut alive = true;
    for v in lo..lo + w.req_pages {
        alive = touch(s, r, t, w.mmid, v, s.c.access_seq).await;
        if !alive {
            break;
        }
    }
    r.tick(s, spec.service.0).await;
    r.flush(s);
    inbox.borrow_mut()[(w.i + 1) % w.n].push_back((lo, lo + w.req_pages));
    alive
}
