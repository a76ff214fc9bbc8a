//! The simulated machine: builds the mm model and the tasks from a scenario and runs them.
//!
//! Tasks: one per workload thread (on its CPU), one kswapd per node, the periodic memcg
//! statistics flush (flush_memcg_stats_dwork, every 2 s), the time-series sampler, and
//! short-lived IO-completion tasks. kswapd and the periodic work run on one hidden kthread
//! CPU per node (simplified: kswapd is assumed to find an idle CPU on its node).

use crate::engine::cost::CostTable;
use crate::engine::TaskId;
use crate::engine::{Engine, EngineCosts, RunEnd, Time};
use crate::error::{Error, Result};
use crate::mm::memcontrol::{Memcg, FLUSH_TIME};
use crate::mm::mmzone::{default_min_free_kbytes, setup_zone_wmarks, Lruvec, PgData};
use crate::mm::swap::CpuBatches;
use crate::mm::swapfile::SwapInfo;
use crate::mm::vmstat::NR_VM_EVENTS;
use crate::mm::{MemcgId, Mm};
use crate::report::{Report, Sampler};
use crate::scenario::{parent_path, Scenario, SwapDevice};
use crate::workload::access::Access;
use crate::workload::{self, WorkloadStats};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::{Rc, Weak};

use crate::engine::streams::{
    FILE_DEV_STREAM, FIRST_TASK_STREAM, FLUSH_PHASE_STREAM, MEMCG_LRU_STREAM, MEMCG_STOCK_STREAM,
    SWAP_DEV_STREAM,
};

/// Run-wide measurements that are not kernel counters.
#[derive(Debug, Default, Clone)]
pub struct SimStats {
    /// CPU time kswapd spent in balance_pgdat, per node [ns] (finished runs).
    pub kswapd_ns: Vec<u64>,
    /// Start of the balance_pgdat run under way on each node, if any: the report adds
    /// its time up to the end, so a kswapd that never returns still shows its CPU.
    pub kswapd_since: Vec<Option<u64>>,
    /// Time tasks spent in direct (global or memcg) reclaim [ns], and how often.
    pub direct_reclaim_ns: u64,
    pub direct_reclaims: u64,
}

/// The simulator: engine, mm state, costs and run bookkeeping.
pub struct Sim {
    pub e: Engine,
    pub mm: RefCell<Mm>,
    pub c: CostTable,
    /// Where each cost came from (default, a profile, the scenario), for the report.
    pub cost_origins: BTreeMap<&'static str, crate::engine::cost_profile::Origin>,
    pub end: Time,
    pub seed: u64,
    /// kernel.memcg_flush_phase: the first periodic memcg flush (None = seeded).
    pub flush_phase: Option<Time>,
    /// The seed-patch switches of this run.
    pub v: crate::variant::Variants,
    /// Node of every CPU id (workload CPUs, then one kthread CPU per node).
    pub cpu_node: crate::engine::Topology,
    pub nr_cpus: u32,
    /// The random stream of MGLRU's memcg LRU bins.
    pub lru_gen_rng: RefCell<crate::engine::rng::Rng>,
    /// oom_lock (a mutex serializing OOM kills) and the tasks waiting for it.
    pub oom_lock: Cell<bool>,
    pub oom_wait: Rc<crate::sched::WaitQueue>,
    /// folio_wait_table: tasks in folio_wait_writeback(). The kernel hashes folios onto
    /// 256 queues; one queue here, each waiter re-checks its own folio when woken.
    pub folio_wait: Rc<crate::sched::WaitQueue>,
    /// Per task: pages charged while a memcg was over memory.high
    /// (current->memcg_nr_pages_over_high) and the memcg to pay them back to.
    pub over_high: RefCell<Vec<(u64, MemcgId)>>,
    pub stats: RefCell<SimStats>,
    /// The memory.reclaim writes of each `[[reclaim]]` entry (schedule.rs).
    pub schedules: RefCell<Vec<crate::schedule::ScheduleLog>>,
    /// The /sys/kernel/debug/lru_gen writes of each `[[lru_gen]]` entry (schedule.rs).
    pub lru_gen_logs: RefCell<Vec<crate::schedule::LruGenLog>>,
    pub workloads: RefCell<Vec<WorkloadStats>>,
    /// Each workload's live counters (its tasks count into them; the report reads them).
    pub tallies: RefCell<Vec<Rc<workload::Tally>>>,
    /// Each workload thread's own tally and times, in creation order.
    pub threads: RefCell<Vec<Rc<workload::ThreadTally>>>,
    /// The scenario's warmup, and each workload's accesses when it ended (report.rs
    /// measures throughput from there).
    pub warmup: (Time, RefCell<Option<Vec<u64>>>),
    pub live_tasks: Cell<u64>,
    /// Per CPU: the workload threads running on it; and how many CPUs run any (where a
    /// device's reads are submitted from: blkdev.rs).
    pub workers_on_cpu: RefCell<Vec<u32>>,
    pub cpus_occupied: Cell<u32>,
    pub sampler: RefCell<Sampler>,
    /// /sys/kernel/debug/lru_gen sampled with the time series (MGLRU only).
    pub lru_gen_samples: RefCell<crate::mm::lru_gen::LruGenSamples>,
    /// Per CPU: IOs whose completion runs on that CPU, in completion order (a FIFO device
    /// completes in submission order), and the CPU's completion task (None = not started,
    /// with a flag telling whether it is parked).
    bio_queues: RefCell<Vec<VecDeque<(Time, crate::mm::Pfn)>>>,
    bio_tasks: RefCell<Vec<Option<(TaskId, bool)>>>,
    /// Check the model's invariants after every reclaim pass (tests).
    pub check: Cell<bool>,
    /// Host memory each trace workload may take for its objects [bytes] (its share of
    /// the memory budget; `trace::PageMap::limit`).
    pub trace_memory: Cell<u64>,
    /// The first input error met while running (a malformed trace record); it ends the run.
    pub failure: RefCell<Option<Error>>,
    /// When set, every workload access in issue order, per task stream ([`record_accesses`]).
    pub access_log: RefCell<Option<BTreeMap<u64, Vec<Access>>>>,
    /// `access_log` is Some: the hot path tests this flag only.
    recording: Cell<bool>,
    /// The first invariant violation seen, and the event counters at the last check.
    pub violation: RefCell<Option<String>>,
    last_events: RefCell<Vec<u64>>,
    me: RefCell<Weak<Sim>>,
}

impl Sim {
    /// Build the machine of a validated scenario.
    pub fn build(sc: &Scenario) -> Result<Rc<Sim>> {
        let resolved = crate::engine::cost_profile::resolve(sc)?;
        let costs = resolved.table;
        let m = &sc.machine;
        let nodes = m.nodes as usize;
        let node_pages = m.memory_per_node.pages();
        // One more CPU per node for the kernel threads.
        let cpu_node =
            crate::engine::Topology::machine(m.cpus, m.nodes, m.threads_per_core, m.nodes);
        let e = Engine::new(
            EngineCosts {
                lock_uncontended: costs.lock_uncontended,
                cacheline_transfer: costs.cacheline_transfer,
                cacheline_transfer_remote: costs.cacheline_transfer_remote,
                cacheline_transfer_smt: costs.cacheline_transfer_smt,
                atomic_rmw: costs.atomic_rmw,
                home_agent_occupancy: costs.home_agent_occupancy,
            },
            cpu_node.clone(),
        )
        .with_observer(
            sc.observe,
            crate::engine::perf_lock::TraceCost::of(
                sc.observe,
                costs.perf_lock_record_event,
                costs.perf_lock_bpf_begin,
                costs.perf_lock_bpf_end,
            ),
            m.paravirt_spinlocks,
        );
        let lowmem = node_pages * nodes as u64;
        let mfk = sc
            .kernel
            .min_free_kbytes
            .unwrap_or_else(|| default_min_free_kbytes(lowmem));
        let mut pgdats = Vec::new();
        for n in 0..nodes {
            let base = (n as u64 * node_pages) as u32;
            pgdats.push(PgData {
                id: n as u32,
                base,
                managed: node_pages,
                free: node_pages,
                wmark: setup_zone_wmarks(
                    node_pages,
                    lowmem,
                    mfk,
                    sc.kernel.watermark_scale_factor as u64,
                ),
                free_head: crate::mm::NIL,
                next_unused: base,
                kswapd: 0,
                kswapd_wait: Default::default(),
                pfmemalloc_wait: Default::default(),
                reclaim_wait_isolated: Default::default(),
                memcg_lru: Default::default(),
                memcg_lru_lock: e.new_lock(crate::engine::LockClass::MemcgLruLock, n as u32),
                kswapd_failures: 0,
            });
        }
        // The memcg tree: the root, then the scenario's cgroups (parents first).
        let mut memcgs = vec![Memcg::new(0, "/".into(), None, nodes)];
        memcgs[0].swappiness = sc.kernel.swappiness;
        let mut ids: std::collections::HashMap<&str, MemcgId> =
            std::collections::HashMap::with_capacity(sc.cgroups.len() + 1);
        ids.insert("/", 0);
        for (i, c) in sc.cgroups.iter().enumerate() {
            let id = (i + 1) as MemcgId;
            let parent = ids.get(parent_path(&c.path)).copied().unwrap_or(0);
            ids.insert(&c.path, id);
            let mut mc = Memcg::new(id, c.path.clone(), Some(parent), nodes);
            mc.max = c.memory.max.map_or(u64::MAX, |l| l.pages());
            mc.high = c.memory.high.map_or(u64::MAX, |l| l.pages());
            mc.low = c.memory.low.map_or(0, |s| s.pages());
            mc.min = c.memory.min.map_or(0, |s| s.pages());
            mc.swap_max = c.memory.swap.max.map_or(u64::MAX, |l| l.pages());
            mc.swappiness = c
                .memory
                .swappiness
                .unwrap_or(memcgs[parent as usize].swappiness);
            let up = memcgs[parent as usize].ancestors.clone();
            mc.ancestors.extend_from_slice(&up);
            memcgs[parent as usize].children.push(id);
            memcgs.push(mc);
        }
        if memcgs.len() > 4096 {
            return Err(Error::scenario("scenario.cgroup", "at most 4095 cgroups"));
        }
        let mut preorder = Vec::new();
        let mut stack = vec![0 as MemcgId];
        while let Some(x) = stack.pop() {
            preorder.push(x);
            for &c in memcgs[x as usize].children.iter().rev() {
                stack.push(c);
            }
        }
        let mut lruvecs = Vec::new();
        for mc in memcgs.iter_mut() {
            for n in 0..nodes {
                let lock = e.new_lock(crate::engine::LockClass::LruLock, n as u32);
                let cost_lock = e.new_lock(crate::engine::LockClass::CostLock, n as u32);
                lruvecs.push(Lruvec::new(mc.id, n as u32, lock, cost_lock));
                mc.lruvecs.push((lruvecs.len() - 1) as u32);
            }
        }
        for mc in memcgs.iter() {
            if let Some(p) = mc.parent {
                for n in 0..nodes {
                    lruvecs[mc.lruvecs[n] as usize].parent = Some(memcgs[p as usize].lruvecs[n]);
                }
            }
        }
        let swap = m.swap.as_ref().map(|s| {
            let zram = s.device == SwapDevice::Zram;
            let mut dev = costs.ssd();
            dev.seed_placement(crate::engine::rng::stream(sc.seed, SWAP_DEV_STREAM));
            if let Some(d) = s.read_latency {
                dev.read_latency = d.0;
            }
            if let Some(d) = s.write_latency {
                dev.write_latency = d.0;
            }
            let mut info = SwapInfo::new(
                s.size.pages(),
                zram,
                s.read_latency.map_or(costs.zram_read, |d| d.0),
                s.write_latency.map_or(costs.zram_write, |d| d.0),
                dev,
            );
            info.rotational = s.rotational;
            if s.rotational {
                // Anonymous swap-ins read ahead by slots: record each slot's PTE.
                info.ra.track_owners(s.size.pages());
            }
            info
        });
        let all_cpus = cpu_node.len();
        let memcgs_len = memcgs.len();
        let lruvecs_len = lruvecs.len();
        let mut mm = Mm {
            pages: crate::mm::mm_types::Frames::zeroed((node_pages * nodes as u64) as usize),
            node_pages,
            nodes: pgdats,
            lruvecs,
            memcgs,
            memcg_preorder: preorder,
            mms: Vec::new(),
            files: Vec::new(),
            swap,
            shared_mapcount: Default::default(),
            batches: (0..all_cpus).map(|_| CpuBatches::default()).collect(),
            stock: vec![Default::default(); all_cpus],
            stock_rng: crate::engine::rng::stream(sc.seed, MEMCG_STOCK_STREAM),
            events: [0; NR_VM_EVENTS],
            vm_swappiness: sc.kernel.swappiness,
            memory_recursiveprot: sc.kernel.memory_recursiveprot,
            memory_cgrp_on_dfl: sc.kernel.cgroup_version == 2,
            lru_gen_caps: sc.kernel.lru_gen_caps(),
            lru_gen_min_ttl: sc.kernel.lru_gen.min_ttl_ms * 1_000_000,
            mm_state: Vec::new(),
            mm_lists: Vec::new(),
            lru_gen_walks: Vec::new(),
            nr_cpus: m.cpus,
            peak_used_frames: 0,
            used_frames: 0,
            oom_log: Vec::new(),
            oom_rs: Default::default(),
            stats_updates: 0,
            last_flush: 0,
            draining: Vec::new(),
            batch_refs: Default::default(),
            rules: sc.kernel.rules(),
            track_draining: false,
            pfn_vecs: Vec::new(),
            lines: crate::mm::lru_lines::LineTracker::new(cpu_node.clone()),
            radix_tree_node_cachep: Default::default(),
            trace: Default::default(),
            trace_hist: sc.tracepoints.then(Default::default),
            stat_pcpu: crate::mm::memcontrol::StatPcpu::new(all_cpus, memcgs_len, lruvecs_len),
            stat_pending: Default::default(),
            file_dev: {
                let mut dev = costs.ssd();
                dev.seed_placement(crate::engine::rng::stream(sc.seed, FILE_DEV_STREAM));
                dev
            },
        };
        let mut lru_gen_rng = crate::engine::rng::stream(sc.seed, MEMCG_LRU_STREAM);
        if mm.lru_gen_enabled() {
            mm.lru_gen_init(&mut lru_gen_rng);
        }
        #[cfg(test)]
        LIVE_SIMS.with(|n| n.set(n.get() + 1));
        let sim = Rc::new(Sim {
            e,
            mm: RefCell::new(mm),
            c: costs,
            cost_origins: resolved.origins,
            end: sc.duration.0,
            seed: sc.seed,
            flush_phase: sc.kernel.memcg_flush_phase.map(|d| d.0),
            v: sc.variants.clone(),
            cpu_node,
            nr_cpus: m.cpus,
            over_high: RefCell::new(Vec::new()),
            oom_lock: Cell::new(false),
            lru_gen_rng: RefCell::new(lru_gen_rng),
            oom_wait: Default::default(),
            folio_wait: Default::default(),
            stats: RefCell::new(SimStats {
                kswapd_ns: vec![0; nodes],
                kswapd_since: vec![None; nodes],
                ..Default::default()
            }),
            schedules: RefCell::new(Vec::new()),
            lru_gen_logs: RefCell::new(Vec::new()),
            workloads: RefCell::new(Vec::new()),
            tallies: RefCell::new(Vec::new()),
            threads: RefCell::new(Vec::new()),
            warmup: (sc.warmup.0, RefCell::new(None)),
            live_tasks: Cell::new(0),
            workers_on_cpu: RefCell::new(vec![0; all_cpus]),
            cpus_occupied: Cell::new(0),
            access_log: RefCell::new(None),
            recording: Cell::new(false),
            failure: RefCell::new(None),
            trace_memory: Cell::new(u64::MAX),
            sampler: RefCell::new(Sampler::new(sc.sample_interval.0)),
            lru_gen_samples: RefCell::new(Default::default()),
            bio_queues: RefCell::new(vec![VecDeque::new(); all_cpus]),
            bio_tasks: RefCell::new(vec![None; all_cpus]),
            check: Cell::new(false),
            violation: RefCell::new(None),
            last_events: RefCell::new(Vec::new()),
            me: RefCell::new(Weak::new()),
        });
        *sim.me.borrow_mut() = Rc::downgrade(&sim);
        sim.spawn_kernel_tasks();
        sim.spawn_workloads(sc)?;
        sim.spawn_warmup_end();
        crate::schedule::spawn_reclaim_schedules(&sim, sc);
        crate::schedule::spawn_lru_gen_schedules(&sim, sc);
        Ok(sim)
    }

    /// A workload thread starts (`on`) or ends on the current task's CPU: keeps the count
    /// of CPUs that run workload threads, from which a device's reads are submitted
    /// (BlockDevice::read_wakeup).
    pub fn worker_on_cpu(&self, on: bool) {
        let mut workers = self.workers_on_cpu.borrow_mut();
        let n = &mut workers[self.e.cpu() as usize];
        let (before, after) = if on { (*n, *n + 1) } else { (*n, *n - 1) };
        *n = after;
        if before == 0 {
            self.cpus_occupied.set(self.cpus_occupied.get() + 1);
        } else if after == 0 {
            self.cpus_occupied.set(self.cpus_occupied.get() - 1);
        }
    }

    /// A strong reference to this simulator, for tasks spawned from kernel paths.
    pub fn self_rc(&self) -> Rc<Sim> {
        self.me
            .borrow()
            .upgrade()
            .expect("simulator alive while running")
    }

    fn kthread_cpu(&self, node: u32) -> u32 {
        self.nr_cpus + node
    }

    fn spawn_kernel_tasks(self: &Rc<Self>) {
        let nodes = self.mm.borrow().nodes.len() as u32;
        for n in 0..nodes {
            let s = self.clone();
            let id = self
                .e
                .spawn(0, self.kthread_cpu(n), async move { s.kswapd(n).await });
            self.mm.borrow_mut().nodes[n as usize].kswapd = id;
        }
        // flush_memcg_stats_dwork: every FLUSH_TIME. It was queued at boot, long before the
        // workloads start, so its phase relative to them is arbitrary: drawn from the seed.
        // (Reclaim reads rstat values as of the last flush; when the flush falls decides,
        // e.g., when inactive_is_low first sees a drained inactive anon list.)
        let s = self.clone();
        let phase = self.flush_phase.unwrap_or_else(|| {
            use rand::Rng;
            crate::engine::rng::stream(self.seed, FLUSH_PHASE_STREAM).random_range(0..FLUSH_TIME)
        });
        self.e.spawn(phase, self.kthread_cpu(0), async move {
            loop {
                let n = {
                    let mut mm = s.mm.borrow_mut();
                    let now = s.e.now();
                    mm.flush_stats(now);
                    mm.memcgs.len() as u64
                };
                s.e.charge(n * s.c.memcg_flush_per_cgroup);
                s.e.sleep(FLUSH_TIME).await;
            }
        });
        // The time-series sampler.
        let s = self.clone();
        let interval = self.sampler.borrow().interval;
        self.e.spawn(interval, self.kthread_cpu(0), async move {
            loop {
                let now = s.e.now();
                s.sampler.borrow_mut().sample(now, &s.mm.borrow());
                s.lru_gen_samples.borrow_mut().sample(now, &s.mm.borrow());
                s.e.sleep(interval).await;
            }
        });
    }

    /// The time series' sample at the run's end, when it falls on a multiple of the
    /// interval: the sampler task runs only before the end (the executor stops at it), so
    /// without this the last interval (all of a run whose interval is its duration) would
    /// have no row.
    fn sample_at_end(&self) {
        let end = self.e.stop_time().unwrap_or(self.end).min(self.end);
        let mut sampler = self.sampler.borrow_mut();
        if end > sampler.last && end.is_multiple_of(sampler.interval) {
            let mm = self.mm.borrow();
            sampler.sample(end, &mm);
            self.lru_gen_samples.borrow_mut().sample(end, &mm);
        }
    }

    /// At the end of the warmup, note each workload's accesses so far.
    fn spawn_warmup_end(self: &Rc<Self>) {
        if self.warmup.0 == 0 {
            return;
        }
        let s = self.clone();
        self.e
            .spawn(self.warmup.0, self.kthread_cpu(0), async move {
                let snap = s
                    .tallies
                    .borrow()
                    .iter()
                    .map(|t| t.accesses.get())
                    .collect();
                *s.warmup.1.borrow_mut() = Some(snap);
            });
    }

    fn spawn_workloads(self: &Rc<Self>, sc: &Scenario) -> Result<()> {
        // Placed by the function validation checked, so run and validate agree.
        let (placements, _) = sc.workload_cpus();
        let mut stream = FIRST_TASK_STREAM;
        for ((wi, w), cpus) in sc.workloads.iter().enumerate().zip(placements) {
            let pl = w.common();
            let n = cpus.len();
            let memcg = sc
                .cgroups
                .iter()
                .position(|c| c.path == pl.cgroup)
                .map_or(0, |i| (i + 1) as MemcgId);
            let name = if pl.name.is_empty() {
                format!("{}{}", w.type_name(), wi)
            } else {
                pl.name.clone()
            };
            self.workloads.borrow_mut().push(WorkloadStats::new(
                name,
                w.type_name(),
                &pl.cgroup,
                n as u32,
            ));
            self.tallies.borrow_mut().push(Rc::default());
            let at = workload::Spawn {
                wi,
                start: pl.start.0,
                memcg,
                cpus: &cpus,
            };
            w.spec().spawn(self, &at, &mut stream)?;
        }
        Ok(())
    }

    /// Queue the completion of an IO on `cpu` at `at`, starting or waking that CPU's
    /// completion task (the hardirq/softirq side of blk-mq, one per CPU).
    pub fn queue_bio_completion(&self, cpu: u32, at: Time, pfn: crate::mm::Pfn) {
        self.bio_queues.borrow_mut()[cpu as usize].push_back((at, pfn));
        let state = self.bio_tasks.borrow()[cpu as usize];
        match state {
            None => {
                let s = self.self_rc();
                let id = self
                    .e
                    .spawn(at, cpu, async move { s.bio_completion(cpu).await });
                self.bio_tasks.borrow_mut()[cpu as usize] = Some((id, false));
            }
            Some((id, true)) => {
                self.bio_tasks.borrow_mut()[cpu as usize] = Some((id, false));
                self.e.wake(id, at);
            }
            Some((_, false)) => {}
        }
    }

    /// A CPU's IO completion context: ends the IOs that are due, in order, then sleeps
    /// until the next one (or parks when none is pending).
    async fn bio_completion(&self, cpu: u32) {
        loop {
            let next = self.bio_queues.borrow()[cpu as usize].front().copied();
            match next {
                None => {
                    if let Some(t) = self.bio_tasks.borrow_mut()[cpu as usize].as_mut() {
                        t.1 = true;
                    }
                    self.e.park().await;
                }
                Some((at, pfn)) => {
                    let now = self.e.now();
                    if at > now {
                        self.e.sleep(at - now).await;
                        continue;
                    }
                    self.bio_queues.borrow_mut()[cpu as usize].pop_front();
                    self.e.sync().await;
                    self.folio_end_writeback(pfn).await;
                }
            }
        }
    }

    /// Is the current task's process dead (OOM-killed)?
    #[inline]
    pub fn current_killed(&self) -> bool {
        let tag = self.e.current_tag();
        tag != u32::MAX && !self.mm.borrow().mms[tag as usize].alive
    }

    /// numa_node_id() of the current task.
    pub fn current_node(&self) -> u32 {
        self.cpu_node[self.e.cpu() as usize]
    }

    /// Add `nr` pages charged to `memcg` over memory.high to the current task's debt
    /// (current->memcg_nr_pages_over_high += batch; set_notify_resume). Any charging task
    /// owes it: a file reader as much as a faulting one. Returns the debt.
    pub fn add_over_high(&self, nr: u64, memcg: MemcgId) -> u64 {
        let id = self.e.current() as usize;
        let mut v = self.over_high.borrow_mut();
        if v.len() <= id {
            v.resize(id + 1, (0, 0));
        }
        let d = &mut v[id];
        if d.0 == 0 {
            d.1 = memcg;
        }
        d.0 += nr;
        d.0
    }

    /// The current task's over-high debt and its memcg, taken (zeroed).
    fn take_over_high(&self) -> Option<(u64, MemcgId)> {
        let id = self.e.current() as usize;
        let mut v = self.over_high.borrow_mut();
        match v.get_mut(id) {
            Some(d) if d.0 > 0 => Some(std::mem::take(d)),
            _ => None,
        }
    }

    /// __mem_cgroup_handle_over_high() for the current task's debt, if any: on return to
    /// user mode (resume_user_mode_work, after a fault or a read), or synchronously from
    /// try_charge_memcg once the debt exceeds MEMCG_CHARGE_BATCH.
    pub async fn handle_over_high_on_return(&self) {
        if let Some((debt, memcg)) = self.over_high_on_return() {
            self.mem_cgroup_handle_over_high(memcg, debt).await;
        }
    }

    /// The synchronous part of [`Sim::handle_over_high_on_return`]: the current task's
    /// debt and its memcg, taken, if any. Hot callers test it themselves, so that the
    /// common case (no debt) builds no future.
    pub fn over_high_on_return(&self) -> Option<(u64, MemcgId)> {
        // Uncharge statistics of folios this fault or read freed on its error paths.
        self.flush_stat_pending(false);
        self.take_over_high()
    }

    /// A task is gone: a debt it left is not paid by whoever reuses its id.
    pub fn forget_over_high(&self) {
        let _ = self.take_over_high();
    }

    /// After a reclaim pass: check invariants when enabled (and that no event counter
    /// went backwards), remembering the first violation.
    pub fn after_reclaim_pass(&self) {
        if !self.check.get() || self.violation.borrow().is_some() {
            return;
        }
        let mm = self.mm.borrow();
        let mut r = mm.check_invariants();
        let mut last = self.last_events.borrow_mut();
        if r.is_ok() {
            if let Some(i) = last.iter().zip(mm.events.iter()).position(|(a, b)| b < a) {
                r = Err(format!(
                    "event counter {} decreased",
                    crate::mm::vmstat::VM_EVENT_NAMES[i]
                ));
            }
        }
        *last = mm.events.to_vec();
        if let Err(e) = r {
            *self.violation.borrow_mut() = Some(format!("at t={} ns: {e}", self.e.now()));
        }
    }

    pub fn note_direct_reclaim(&self, ns: u64) {
        let mut s = self.stats.borrow_mut();
        s.direct_reclaim_ns += ns;
        s.direct_reclaims += 1;
    }

    /// A balance_pgdat run of `node`'s kswapd starts at `t0` (a measurement, not a kernel
    /// counter: the kernel's equivalent is kswapd's task CPU time).
    pub fn note_kswapd_start(&self, node: u32, t0: u64) {
        self.stats.borrow_mut().kswapd_since[node as usize] = Some(t0);
    }

    /// That run ended after `ns`.
    pub fn note_kswapd_run(&self, node: u32, ns: u64) {
        let mut st = self.stats.borrow_mut();
        st.kswapd_ns[node as usize] += ns;
        st.kswapd_since[node as usize] = None;
    }

    /// kswapd's CPU per node up to `end`: finished balance_pgdat runs plus the one under way.
    pub fn kswapd_cpu_ns(&self, end: u64) -> Vec<u64> {
        let st = self.stats.borrow();
        st.kswapd_ns
            .iter()
            .zip(&st.kswapd_since)
            .map(|(&done, since)| done + since.map_or(0, |t0| end.saturating_sub(t0)))
            .collect()
    }

    /// A workload task finished: the run ends when the last one does.
    pub fn task_exited(&self) {
        self.forget_over_high();
        let n = self.live_tasks.get() - 1;
        self.live_tasks.set(n);
        if n == 0 {
            self.e.request_stop(self.e.now().min(self.end));
        }
    }
}

impl Sim {
    /// The kernel version's modeled rules (kept once, in the Mm).
    pub fn rules(&self) -> crate::versions::Rules {
        self.mm.borrow().rules
    }

    /// Stop the run on an input error (the first one is reported).
    pub fn fail(&self, e: Error) {
        let mut f = self.failure.borrow_mut();
        if f.is_none() {
            *f = Some(e);
            self.e.request_stop(self.e.now().min(self.end));
        }
    }

    /// Log an access a workload task issues (only while recording).
    #[inline(always)]
    pub fn record_access(&self, stream: u64, a: Access) {
        if self.recording.get() {
            self.log_access(stream, a);
        }
    }

    #[cold]
    #[inline(never)]
    fn log_access(&self, stream: u64, a: Access) {
        if let Some(log) = self.access_log.borrow_mut().as_mut() {
            log.entry(stream).or_default().push(a);
        }
    }
}

/// Run a scenario and return the accesses its workload tasks issued, per task stream in
/// creation order (the native runner's sequences are checked against these).
pub fn record_accesses(sc: &Scenario) -> Result<Vec<(u64, Vec<Access>)>> {
    let sim = Sim::build(sc)?;
    *sim.access_log.borrow_mut() = Some(BTreeMap::new());
    sim.recording.set(true);
    let end = sim.end;
    let ran = sim.e.run_until(end, 1 << 14, &mut |_| true);
    sim.e.drop_tasks();
    if let RunEnd::Stalled(t) = ran {
        return Err(stalled(sc, t));
    }
    let log = sim.access_log.borrow_mut().take().unwrap_or_default();
    Ok(log.into_iter().collect())
}

/// The error of a run whose virtual time stopped advancing at `t`: bad input when the
/// scenario sets costs or latencies to zero (the likely cause), else a bug.
fn stalled(sc: &Scenario, t: Time) -> Error {
    let mut zeros: Vec<String> = sc
        .costs
        .iter()
        .filter(|(_, v)| **v == 0)
        .map(|(k, _)| format!("costs.{k}"))
        .collect();
    if let Some(sw) = &sc.machine.swap {
        for (f, l) in [
            ("read_latency", sw.read_latency),
            ("write_latency", sw.write_latency),
        ] {
            if l == Some(crate::scenario::Dur(0)) {
                zeros.push(format!("machine.swap.{f}"));
            }
        }
    }
    let what = format!(
        "virtual time stopped advancing at t={t} ns ({} steps without a clock moving)",
        crate::engine::STALL_TICKS as u64 * TICK_EVERY
    );
    if zeros.is_empty() {
        Error::Internal(what)
    } else {
        Error::scenario(
            "scenario.costs",
            format!(
                "{what}: likely because {} = 0, which makes work take no time; allowed: costs that let time advance (at least 1 ns)",
                zeros.join(", ")
            ),
        )
    }
}

/// Work units (polls, work points) between two calls of the progress callback.
const TICK_EVERY: u64 = 1 << 14;

/// Run a validated scenario to the end (or until every workload task has finished).
pub fn run(sc: &Scenario, progress: &mut dyn FnMut(u64, u64) -> bool) -> Result<Report> {
    run_checked(sc, false, progress)
}

/// [`run`], optionally checking the model's invariants after every reclaim pass; a
/// violation is reported as an internal error. The memory budget is the machine's
/// available memory.
pub fn run_checked(
    sc: &Scenario,
    check: bool,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<Report> {
    run_with(sc, check, None, progress)
}

/// [`run_checked`] with a memory limit [bytes] (None: the memory this process may take, budget::available_memory):
/// a run whose estimate ([`crate::budget::estimate`]) is above it is refused before it
/// is built, and trace workloads share what the estimate leaves.
pub fn run_with(
    sc: &Scenario,
    check: bool,
    max_memory: Option<u64>,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<Report> {
    let limit = crate::budget::limit(max_memory);
    let estimate = crate::budget::check_available(sc, max_memory)?;
    let traces = sc.workloads.iter().filter(|w| w.spec().grows()).count() as u64;
    let sim = Sim::build(sc)?;
    let report = run_built(&sim, sc, check, (limit, estimate.total, traces), progress);
    sim.e.drop_tasks();
    report
}

/// [`run_with`]'s run of the built machine `sim` and its report; `(limit, estimate,
/// traces)` share the memory limit among the trace workloads.
fn run_built(
    sim: &Sim,
    sc: &Scenario,
    check: bool,
    (limit, estimate, traces): (Option<u64>, u64, u64),
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<Report> {
    if let (Some(l), true) = (limit, traces > 0) {
        sim.trace_memory.set(l.saturating_sub(estimate) / traces);
    }
    sim.check.set(check);
    sim.mm.borrow_mut().track_draining = check;
    let end = sim.end;
    match sim
        .e
        .run_until(end, TICK_EVERY, &mut |now| progress(now, end))
    {
        RunEnd::Done => {}
        RunEnd::Interrupted => return Err(Error::Interrupted),
        RunEnd::Stalled(t) => return Err(stalled(sc, t)),
    }
    if let Some(e) = sim.failure.borrow_mut().take() {
        return Err(e);
    }
    sim.sample_at_end();
    let _ = progress(end, end);
    if let Some(v) = sim.violation.borrow().clone() {
        return Err(Error::Internal(format!("invariant violated {v}")));
    }
    Ok(Report::build(sim, sc))
}

// The Sims built on this thread and not yet dropped (tests: a run frees its machine).
#[cfg(test)]
thread_local! {
    static LIVE_SIMS: Cell<usize> = const { Cell::new(0) };
}

#[cfg(test)]
impl Drop for Sim {
    fn drop(&mut self) {
        LIVE_SIMS.with(|n| n.set(n.get() - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run ends with tasks still pending (an endless writer cut by the duration, kswapd
    /// asleep): their futures hold the Sim, which holds them. The run drops them, so the
    /// machine is freed when the run returns, not kept for the life of the process.
    #[test]
    fn a_finished_run_frees_its_machine() {
        let t = r#"
duration = "20ms"
[machine]
cpus = 2
memory_per_node = "64M"
[[workload]]
type = "usemem"
size = "8M"
repeat = 0
"#;
        let sc = Scenario::from_toml(t).unwrap();
        let live = || LIVE_SIMS.with(|n| n.get());
        let before = live();
        run(&sc, &mut |_, _| true).unwrap();
        assert_eq!(live(), before, "run_with");
        record_accesses(&sc).unwrap();
        assert_eq!(live(), before, "record_accesses");
        // Without the drop, the pending tasks keep it.
        let sim = Sim::build(&sc).unwrap();
        sim.e.run_until(sim.end, 1 << 14, &mut |_| true);
        assert!(Rc::strong_count(&sim) > 1);
        sim.e.drop_tasks();
        assert_eq!(Rc::strong_count(&sim), 1);
        drop(sim);
        assert_eq!(live(), before);
    }
}
