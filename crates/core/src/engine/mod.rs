//! The engine: a conservative discrete-event simulation of a multi-CPU machine.
//!
//! ```text
//!   ready heap, ordered by (clock, cpu, seq)        parked (lock waiters, sleeping kswapd)
//!   +-----------------------------------+           +--------------------------+
//!   | (t=1200, cpu 3) (t=1250, cpu 0).. |  <-wake-- | lock waiters FIFO / wakeup|
//!   +-----------------------------------+           +--------------------------+
//!          | pop smallest
//!          v
//!   poll the task's future: it runs kernel code, charging costs to its own clock,
//!   until it reaches a synchronization point (lock, shared atomic, IO, sleep)
//! ```
//!
//! Contract (determinism): every task has its own clock; the executor always resumes the
//! task with the smallest `(clock, cpu, seq)`, so all shared state is touched in global
//! virtual-time order, ties going to the lower CPU id and then to the earlier enqueue.
//! Nothing depends on wall time, hash iteration order or host threads. A task only yields at
//! synchronization points ([`Engine::sync`], [`Engine::lock`], [`Engine::sleep`]); between
//! them it runs ahead on its own clock, and [`Engine::sync`] first yields if another task is
//! behind it, so no task touches shared state "in the future" of another.
//!
//! Tasks are `async` blocks on this single-threaded executor. The task being polled is
//! `current` (like the kernel's `current`): [`Engine::now`] and [`Engine::charge`] act on it.
//!
//! Spinlocks: a lock holder may run ahead of the others (it spends time without yielding),
//! so a lock keeps the virtual time of its last release (`free_at`). An acquirer whose clock
//! is earlier than `free_at` waits until then; an acquirer that finds the lock held by a
//! yielded task joins a FIFO queue and is handed the lock at release. Every acquisition is
//! recorded per lock class and per call site with what `perf lock contention` reports.

pub mod blk;
pub mod blkdev;
pub mod coherence;
pub mod cost;
pub mod cost_profile;
pub mod perf_lock;
pub mod rng;
pub mod streams;

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

pub use coherence::{CacheLine, Topology, Transfer};
use perf_lock::{joins_mcs_queue, Observe, TraceCost};

/// Virtual time [ns].
pub type Time = u64;
/// Index of a task in the engine's task table.
pub type TaskId = u32;
/// Index of a spinlock.
pub type LockId = u32;
/// Longest a task runs ahead between synchronization points [ns]: workload loops and
/// reclaim's per-folio loop over other processes' PTEs take [`Engine::sync_due`] with it.
pub const SKEW_QUANTUM: u64 = 2_000;

type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;

/// The tick of the running `run_until`, its lifetime erased (see `run_until`).
type TickFn = *mut (dyn FnMut(Time) -> bool + 'static);

/// How a `run_until` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The run reached its end, was stopped, or ran out of tasks.
    Done,
    /// The tick returned false (the progress callback asked to stop: Ctrl-C).
    Interrupted,
    /// Virtual time stopped advancing at this time: STALL_TICKS ticks in a row saw the
    /// same clocks (a zero cost can make work take no time).
    Stalled(Time),
}

/// Ticks in a row without any clock moving after which the run is declared stalled:
/// 64 ticks of 2^14 work units (polls or work points) each, about a million steps.
pub const STALL_TICKS: u32 = 64;

/// Lock classes, as `perf lock contention` would name the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockClass {
    /// lruvec->lru_lock.
    LruLock = 0,
    /// lruvec->cost_lock, added by seed 000 (vmstat_scan_cost) for the scan-balance cost.
    CostLock = 1,
    /// pgdat->memcg_lru.lock: MGLRU's per-node memcg LRU.
    MemcgLruLock = 2,
}

impl LockClass {
    pub const ALL: [LockClass; 3] = [
        LockClass::LruLock,
        LockClass::CostLock,
        LockClass::MemcgLruLock,
    ];
    pub fn name(self) -> &'static str {
        match self {
            LockClass::LruLock => "lru_lock",
            LockClass::CostLock => "cost_lock",
            LockClass::MemcgLruLock => "memcg_lru.lock",
        }
    }
}

macro_rules! call_sites {
    ($($(#[doc = $doc:literal])* $v:ident => $name:literal,)*) => {
        /// Call sites of lock acquisitions, named after the kernel function that takes the lock.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Site { $($(#[doc = $doc])* $v,)* }
        impl Site {
            pub const ALL: &'static [Site] = &[$(Site::$v,)*];
            pub fn name(self) -> &'static str { match self { $(Site::$v => $name,)* } }
        }
    };
}

call_sites! {
    /// lru_add_drain_cpu -> folio_batch_move_lru: draining the local CPU's batches.
    LruAddDrainCpu => "lru_add_drain_cpu",
    /// folio_batch_add_and_move -> folio_batch_move_lru: a batch filled up (31 folios).
    FolioBatchMoveLru => "folio_batch_move_lru",
    /// shrink_inactive_list: isolate_lru_folios under lru_lock.
    ShrinkInactiveList => "shrink_inactive_list",
    /// shrink_inactive_list -> move_folios_to_lru: putback of the survivors.
    MoveFoliosToLru => "move_folios_to_lru",
    /// shrink_lruvec (inlined shrink_inactive_list): lru_note_cost of the scan's outcome.
    ShrinkLruvec => "shrink_lruvec",
    /// lru_note_cost_unlock_irq: cost recorded at each level of the lruvec hierarchy.
    LruNoteCost => "lru_note_cost_unlock_irq",
    /// shrink_active_list: isolation and putback.
    ShrinkActiveList => "shrink_active_list",
    /// workingset_refault -> lru_note_cost_refault: cost of a restored workingset refault.
    WorkingsetRefault => "workingset_refault",
    /// prepare_scan_control (inlined in shrink_node): snapshot of anon_cost/file_cost.
    PrepareScanControl => "shrink_node",
    /// folios_put_refs -> __page_cache_release: freeing a folio that is on an LRU.
    FoliosPutRefs => "folios_put_refs",
    /// MGLRU evict_folios: isolation from the oldest generation, and the putback.
    EvictFolios => "evict_folios",
    /// MGLRU inc_max_seq: opening a generation (and retiring the oldest).
    IncMaxSeq => "inc_max_seq",
    /// MGLRU walk_mm -> reset_batch_size: the page-table walk's batched size updates.
    WalkMm => "walk_mm",
    /// MGLRU lru_gen_rotate_memcg: moving an lruvec on the node's memcg LRU.
    LruGenRotateMemcg => "lru_gen_rotate_memcg",
}

/// Per (lock class, call site) statistics, as `perf lock contention` reports them.
#[derive(Debug, Clone, Copy, Default)]
pub struct SiteStats {
    pub acquisitions: u64,
    pub contended: u64,
    pub total_wait: Time,
    pub max_wait: Time,
    /// Time the lock was held by acquisitions at this site, from the moment the holder
    /// had it (after the lock word's transfer) to its release (lockstat's holdtime).
    pub total_hold: Time,
    /// Acquisitions that fired lock:contention_begin/end (perf_lock.rs), their waits
    /// (what `perf lock contention` reads) and the longest; counted only when observed.
    pub traced: u64,
    pub traced_wait: Time,
    pub traced_max_wait: Time,
}

/// An acquirer queued behind the holder.
struct Waiter {
    task: TaskId,
    /// When it called lock() (its wait counts from here).
    arrived: Time,
    site: Site,
    cpu: u32,
    /// It went to the MCS queue while observed: contention_end fires once it has the lock.
    traced: bool,
}

struct LockState {
    class: LockClass,
    held: bool,
    /// Virtual time of the last release.
    free_at: Time,
    /// CPU that last wrote the lock word (the holder's, or the last holder's).
    last_cpu: u32,
    /// The CPU of the holder before that one.
    prev_cpu: u32,
    /// When the holder (or the last holder) was given the lock: its predecessor's release,
    /// or its arrival at a free lock.
    granted_at: Time,
    /// FIFO of the acquirers waiting.
    waiters: VecDeque<Waiter>,
    /// The current holder's site and when it got the lock.
    holder: (Site, Time),
    /// The node whose memory holds the lock word (its home agent: coherence.rs).
    home: u32,
}

struct TaskState {
    clock: Time,
    cpu: u32,
    /// Set when the lock this task waited for has been handed over.
    granted: bool,
    alive: bool,
    /// Owner data set at spawn (the simulator stores the task's process id here).
    tag: u32,
    /// Interrupt time other tasks put on this one ([`Engine::interrupt`]), added to its
    /// clock before it next runs, or when it leaves its last spinlock.
    irq: Time,
    /// Spinlocks this task holds or waits for: its interrupts are off (spin_lock_irq).
    irq_off: u32,
}

/// A ready task's place in the order `(clock, cpu, seq)`: the CPU and the queueing
/// sequence share one word (`cpu << SEQ_BITS | seq`), so that the heap compares two words
/// and moves 24 bytes; the sequence is unique, so `task` never decides. The task id is
/// held in a whole word: as a u32 it left four bytes of padding that a key's copy writes
/// with a store of their own, and the heap's next 8-byte load of that half (its sift
/// after a yield replaced the top) then waited for both stores to reach the cache, as a
/// load spanning two stores cannot take its value from them (docs/bench.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ReadyKey {
    clock: Time,
    cpu_seq: u64,
    task: u64,
}

/// Bits of [`ReadyKey::cpu_seq`] for the sequence: 2^48 queueings (a run of years at
/// today's speed), and 16 bits for the CPU (MAX_CPUS is 4096).
const SEQ_BITS: u32 = 48;

impl ReadyKey {
    #[inline]
    fn cpu(&self) -> u32 {
        (self.cpu_seq >> SEQ_BITS) as u32
    }
}

/// Costs the engine itself charges (a copy of the relevant cost-table entries).
#[derive(Debug, Clone, Copy)]
pub struct EngineCosts {
    pub lock_uncontended: u64,
    pub cacheline_transfer: u64,
    pub cacheline_transfer_remote: u64,
    /// A line taken from the other hardware thread of the writer's core (coherence.rs).
    pub cacheline_transfer_smt: u64,
    pub atomic_rmw: u64,
    /// What each cross-node transfer of a line occupies its home node's agent [ns]; 0:
    /// lines are independent (coherence.rs).
    pub home_agent_occupancy: u64,
}

/// The executor and its synchronization primitives.
pub struct Engine {
    tasks: RefCell<Vec<TaskState>>,
    futures: RefCell<Vec<Option<BoxFuture>>>,
    free_ids: RefCell<Vec<TaskId>>,
    ready: RefCell<BinaryHeap<Reverse<ReadyKey>>>,
    cur: Cell<TaskId>,
    /// The current task's clock and CPU while it is polled: the hot path charges time
    /// without borrowing the task table (written back after each poll).
    cur_clock: Cell<Time>,
    cur_cpu: Cell<u32>,
    /// The `end` of the running `run_until` (0 outside it: every sleep yields).
    run_end: Cell<Time>,
    sleep_skips: Cell<u32>,
    seq: Cell<u64>,
    /// The key of the current task when it yields (consumed by `run_until`).
    requeue: Cell<Option<ReadyKey>>,
    locks: RefCell<Vec<LockState>>,
    stats: RefCell<Vec<SiteStats>>,
    costs: EngineCosts,
    /// Who observes lock contention, and what each traced event costs (perf_lock.rs).
    observe: Observe,
    trace: TraceCost,
    /// The slow path is __pv_queued_spin_lock_slowpath (a guest's): no pending spinner.
    paravirt: bool,
    /// Node of every CPU id, to tell local from remote cache-line transfers.
    topology: Topology,
    /// When each node's home agent is free again (coherence.rs).
    home_agents: RefCell<Vec<Time>>,
    /// The running `run_until`'s tick, callable from inside a poll ([`Engine::work_point`]).
    tick_fn: Cell<Option<TickFn>>,
    /// Work units (polls and work points) left before the next tick, and the period.
    work_left: Cell<u64>,
    tick_every: Cell<u64>,
    /// The clocks at the last tick (the polled task's key and current clock), and how
    /// many ticks in a row found them unchanged.
    last_tick: Cell<(Time, Time)>,
    still_ticks: Cell<u32>,
    /// The clock of the task being polled when its poll began.
    poll_clock: Cell<Time>,
    /// Why the run must end now (interrupted, or virtual time stalled), once known.
    halt: Cell<Option<RunEnd>>,
    /// Set to end the run at the next poll.
    pub stop: Cell<bool>,
    stop_at: Cell<Option<Time>>,
    pub polls: Cell<u64>,
    pub spawned: Cell<u64>,
    pub lock_acquisitions: Cell<u64>,
}

fn noop_waker() -> Waker {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(
        |_| RawWaker::new(std::ptr::null(), &VTABLE),
        |_| {},
        |_| {},
        |_| {},
    );
    // SAFETY: the vtable functions do nothing and never dereference the data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

impl Engine {
    pub fn new(costs: EngineCosts, topology: impl Into<Topology>) -> Self {
        let topology = topology.into();
        Engine {
            tasks: RefCell::new(Vec::new()),
            futures: RefCell::new(Vec::new()),
            free_ids: RefCell::new(Vec::new()),
            ready: RefCell::new(BinaryHeap::new()),
            cur: Cell::new(0),
            cur_clock: Cell::new(0),
            cur_cpu: Cell::new(0),
            run_end: Cell::new(0),
            sleep_skips: Cell::new(0),
            seq: Cell::new(0),
            requeue: Cell::new(None),
            locks: RefCell::new(Vec::new()),
            stats: RefCell::new(vec![
                SiteStats::default();
                LockClass::ALL.len() * Site::ALL.len()
            ]),
            costs,
            observe: Observe::None,
            trace: TraceCost::default(),
            paravirt: false,
            home_agents: RefCell::new(vec![0; topology.nodes()]),
            topology,
            tick_fn: Cell::new(None),
            work_left: Cell::new(u64::MAX),
            tick_every: Cell::new(u64::MAX),
            last_tick: Cell::new((0, 0)),
            still_ticks: Cell::new(0),
            poll_clock: Cell::new(0),
            halt: Cell::new(None),
            stop: Cell::new(false),
            stop_at: Cell::new(None),
            polls: Cell::new(0),
            spawned: Cell::new(0),
            lock_acquisitions: Cell::new(0),
        }
    }

    /// Observe lock contention as `observe` does, each traced event costing `trace`; with
    /// `paravirt`, on a guest's paravirtual spinlocks.
    pub fn with_observer(mut self, observe: Observe, trace: TraceCost, paravirt: bool) -> Self {
        self.observe = observe;
        self.trace = trace;
        self.paravirt = paravirt;
        self
    }

    pub fn observe(&self) -> Observe {
        self.observe
    }

    // -----------------------------------------------------------------------------------
    // Tasks
    // -----------------------------------------------------------------------------------

    /// Create a task that first runs at virtual time `at` on `cpu`.
    pub fn spawn(&self, at: Time, cpu: u32, fut: impl Future<Output = ()> + 'static) -> TaskId {
        self.spawn_tagged(at, cpu, u32::MAX, fut)
    }

    /// [`Engine::spawn`] with owner data readable through [`Engine::current_tag`].
    pub fn spawn_tagged(
        &self,
        at: Time,
        cpu: u32,
        tag: u32,
        fut: impl Future<Output = ()> + 'static,
    ) -> TaskId {
        let id = match self.free_ids.borrow_mut().pop() {
            Some(id) => {
                self.tasks.borrow_mut()[id as usize] = TaskState {
                    clock: at,
                    cpu,
                    granted: false,
                    alive: true,
                    tag,
                    irq: 0,
                    irq_off: 0,
                };
                self.futures.borrow_mut()[id as usize] = Some(Box::pin(fut));
                id
            }
            None => {
                let mut t = self.tasks.borrow_mut();
                t.push(TaskState {
                    clock: at,
                    cpu,
                    granted: false,
                    alive: true,
                    tag,
                    irq: 0,
                    irq_off: 0,
                });
                self.futures.borrow_mut().push(Some(Box::pin(fut)));
                (t.len() - 1) as TaskId
            }
        };
        if id == self.cur.get() {
            // Outside a poll `cur` names the last polled task (or 0 before the first):
            // a new task under that id must not read its predecessor's cached clock.
            self.cur_clock.set(at);
            self.cur_cpu.set(cpu);
        }
        self.spawned.set(self.spawned.get() + 1);
        self.enqueue(id);
        id
    }

    #[inline]
    fn key_of(&self, id: TaskId) -> ReadyKey {
        let (clock, cpu) = (self.clock_of(id), self.tasks.borrow()[id as usize].cpu);
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        debug_assert!(seq >> SEQ_BITS == 0 && cpu >> (64 - SEQ_BITS) == 0);
        ReadyKey {
            clock,
            cpu_seq: (cpu as u64) << SEQ_BITS | seq,
            task: id as u64,
        }
    }

    fn enqueue(&self, id: TaskId) {
        let k = self.key_of(id);
        self.ready.borrow_mut().push(Reverse(k));
    }

    /// The current task yields: its key goes to the executor directly (see `run_until`).
    fn requeue_current(&self) {
        let k = self.key_of(self.cur.get());
        debug_assert!(
            self.requeue.get().is_none(),
            "a task yielded twice in one poll"
        );
        self.requeue.set(Some(k));
    }

    /// Drop every task's future, once the run is over. A task's future holds the Sim
    /// (an Rc) that holds this engine, so a task still pending at the end (kswapd, the
    /// periodic flush, a workload cut by the duration) would keep the whole simulated
    /// machine alive after its run: in a process that runs several (compare, sweep,
    /// kernel-run's model side), every run's memory would stay. The futures are taken out
    /// before they are dropped, so a drop that reaches the engine finds it unborrowed.
    pub fn drop_tasks(&self) {
        let futures = std::mem::take(&mut *self.futures.borrow_mut());
        drop(futures);
    }

    /// Run until the smallest ready clock reaches `end` or nothing is runnable.
    /// `tick(now)` is called every `tick_every` work units (task polls, and
    /// [`Engine::work_point`]s inside long polls); returning false interrupts the run.
    /// Virtual time that stops advancing ends the run too ([`RunEnd::Stalled`]).
    pub fn run_until(
        &self,
        end: Time,
        tick_every: u64,
        tick: &mut dyn FnMut(Time) -> bool,
    ) -> RunEnd {
        /// Clears the run's state on every exit, unwinding included.
        struct Reset<'a>(&'a Engine);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                self.0.run_end.set(0);
                self.0.tick_fn.set(None);
                self.0.work_left.set(u64::MAX);
                self.0.tick_every.set(u64::MAX);
            }
        }
        let tick: *mut (dyn FnMut(Time) -> bool + '_) = tick;
        // SAFETY: only the lifetime of the trait object is erased. The pointer is set
        // here and cleared by `Reset` before `run_until` returns or unwinds, so it is
        // only called while `tick` is borrowed by this call; it is called from one place
        // at a time (`tick_now`, never re-entered: the tick does not run the engine).
        let tick: TickFn = unsafe { std::mem::transmute(tick) };
        let _reset = Reset(self);
        self.run_end.set(end);
        self.tick_fn.set(Some(tick));
        self.tick_every.set(tick_every.max(1));
        self.work_left.set(tick_every.max(1));
        self.halt.set(None);
        self.last_tick.set((Time::MAX, Time::MAX));
        self.still_ticks.set(0);
        self.run_loop(end);
        self.halt.get().unwrap_or(RunEnd::Done)
    }

    /// Count one unit of work done inside a poll (an access of a workload, a page of a
    /// trace); false when the run must end (interrupted or stalled): the caller's loop
    /// stops. Long loops that do not yield call this, so that Ctrl-C is seen and a clock
    /// that does not advance is caught within a bounded amount of work.
    #[inline]
    pub fn work_point(&self) -> bool {
        let w = self.work_left.get();
        if w > 1 {
            self.work_left.set(w - 1);
            return true;
        }
        self.tick_now()
    }

    /// [`Engine::work_point`] for `n` units of work at once (a loop that checks every
    /// `n` iterations).
    #[inline]
    pub fn work_points(&self, n: u64) -> bool {
        let w = self.work_left.get();
        if w > n {
            self.work_left.set(w - n);
            return true;
        }
        self.tick_now()
    }

    /// Has the run been interrupted or stalled?
    #[inline]
    pub fn halted(&self) -> bool {
        self.halt.get().is_some()
    }

    /// A tick: check that some clock moved since the last one, then call the tick.
    #[cold]
    #[inline(never)]
    fn tick_now(&self) -> bool {
        if self.halt.get().is_some() {
            return false;
        }
        self.work_left.set(self.tick_every.get());
        let Some(tick) = self.tick_fn.get() else {
            return true;
        };
        let clocks = (self.poll_clock.get(), self.cur_clock.get());
        if clocks == self.last_tick.get() {
            let n = self.still_ticks.get() + 1;
            self.still_ticks.set(n);
            if n >= STALL_TICKS {
                self.halt.set(Some(RunEnd::Stalled(clocks.1)));
                return false;
            }
        } else {
            self.last_tick.set(clocks);
            self.still_ticks.set(0);
        }
        // SAFETY: see `run_until`: set only while the tick it points to is borrowed.
        if !unsafe { (*tick)(clocks.0) } {
            self.halt.set(Some(RunEnd::Interrupted));
            return false;
        }
        true
    }

    fn run_loop(&self, end: Time) {
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        // The task to run next when the previous poll already chose it (see `requeue`).
        let mut next: Option<ReadyKey> = None;
        loop {
            if self.stop.get() {
                return;
            }
            let key = match next.take() {
                Some(k) if k.clock < end => k,
                Some(k) => {
                    self.ready.borrow_mut().push(Reverse(k));
                    return;
                }
                None => {
                    let mut r = self.ready.borrow_mut();
                    match r.peek() {
                        Some(Reverse(k)) if k.clock < end => r.pop().unwrap().0,
                        _ => return,
                    }
                }
            };
            let id = key.task as TaskId;
            if !self.prepare_resume(id, key) {
                continue;
            }
            self.cur.set(id);
            self.poll_clock.set(key.clock);
            let mut fut = self.futures.borrow_mut()[id as usize]
                .take()
                .expect("ready task has a future");
            let done = fut.as_mut().poll(&mut cx).is_ready();
            self.tasks.borrow_mut()[id as usize].clock = self.cur_clock.get();
            if done {
                self.tasks.borrow_mut()[id as usize].alive = false;
                self.free_ids.borrow_mut().push(id);
            } else {
                self.futures.borrow_mut()[id as usize] = Some(fut);
            }
            // A task that yielded left its key here instead of in the heap: run it again
            // at once if it is still the smallest, else swap it with the heap's top (one
            // sift instead of a push and a pop).
            if let Some(k) = self.requeue.take() {
                let mut r = self.ready.borrow_mut();
                next = Some(match r.peek_mut() {
                    Some(mut top) if top.0 < k => std::mem::replace(&mut *top, Reverse(k)).0,
                    _ => k,
                });
            }
            self.polls.set(self.polls.get() + 1);
            if !self.work_point() {
                if let Some(k) = next.take() {
                    self.ready.borrow_mut().push(Reverse(k));
                }
                return;
            }
        }
    }

    /// Interrupt task `id` (running on another CPU) for `ns`: the time its CPU spends in
    /// an interrupt handler, such as a TLB shootdown's. The interrupted task pays it
    /// before it next runs: its clock moves on by `ns` and it is queued again, so the
    /// order of resumption stays that of the clocks. A task that holds or waits for a
    /// spinlock has its interrupts off (the engine's locks are spin_lock_irq's): it pays
    /// when it releases its last one, after the release, so a lock's hold is never
    /// lengthened by a handler. Simplified: the handler's time is taken at the interrupted
    /// task's next resumption, not at the instant it arrives; a task interrupted while it
    /// sleeps pays once it is woken; the interrupting task does not wait for the
    /// interrupted one to turn its interrupts back on.
    pub fn interrupt(&self, id: TaskId, ns: Time) {
        if id == self.cur.get() {
            self.charge(ns);
        } else if let Some(t) = self.tasks.borrow_mut().get_mut(id as usize) {
            t.irq += ns;
        }
    }

    /// Before task `id` resumes from `key`, in one look at its entry: false if it is dead,
    /// or if interrupts were put on it (its clock then moves past them and it is queued
    /// again); else true, with the current clock and CPU set to its own.
    #[inline]
    fn prepare_resume(&self, id: TaskId, key: ReadyKey) -> bool {
        let irq = {
            let mut tasks = self.tasks.borrow_mut();
            let t = &mut tasks[id as usize];
            if !t.alive {
                return false;
            }
            if t.irq == 0 || t.irq_off > 0 {
                self.cur_clock.set(t.clock);
                self.cur_cpu.set(t.cpu);
                return true;
            }
            t.clock += t.irq;
            std::mem::take(&mut t.irq)
        };
        self.ready.borrow_mut().push(Reverse(ReadyKey {
            clock: key.clock + irq,
            ..key
        }));
        false
    }

    /// End the run at virtual time `t` (the caller's clock): no further task is resumed.
    pub fn request_stop(&self, t: Time) {
        self.stop.set(true);
        self.stop_at.set(Some(t));
    }

    /// When [`Engine::request_stop`] ended the run, if it did.
    pub fn stop_time(&self) -> Option<Time> {
        self.stop_at.get()
    }

    /// The task being polled.
    #[inline]
    pub fn current(&self) -> TaskId {
        self.cur.get()
    }

    /// The current task's owner data (u32::MAX for untagged tasks).
    #[inline]
    pub fn current_tag(&self) -> u32 {
        self.tasks.borrow()[self.cur.get() as usize].tag
    }

    /// The current task's clock.
    #[inline]
    pub fn now(&self) -> Time {
        self.cur_clock.get()
    }

    /// The CPU of task `id` if it is alive and was spawned with `tag` (a finished task's
    /// id can be reused by a task of another owner).
    pub fn task_cpu_tagged(&self, id: TaskId, tag: u32) -> Option<u32> {
        let tasks = self.tasks.borrow();
        let t = tasks.get(id as usize)?;
        (t.alive && t.tag == tag).then_some(t.cpu)
    }

    /// The current task's CPU.
    #[inline]
    pub fn cpu(&self) -> u32 {
        self.cur_cpu.get()
    }

    /// Charge `ns` of work to the current task's clock (no yield).
    #[inline]
    pub fn charge(&self, ns: u64) {
        self.cur_clock.set(self.cur_clock.get() + ns);
    }

    fn set_clock(&self, id: TaskId, t: Time) {
        if id == self.cur.get() {
            self.cur_clock.set(t);
        } else {
            self.tasks.borrow_mut()[id as usize].clock = t;
        }
    }

    pub fn clock_of(&self, id: TaskId) -> Time {
        if id == self.cur.get() {
            self.cur_clock.get()
        } else {
            self.tasks.borrow()[id as usize].clock
        }
    }

    /// True when another ready task is behind the current one in (clock, cpu) order.
    #[inline]
    fn behind_exists(&self) -> bool {
        self.ready_before_current(false)
    }

    /// Is a ready task before the current one in (clock, cpu) order (or level with it,
    /// when `or_level`: it would then run first, having queued earlier)?
    #[inline]
    fn ready_before_current(&self, or_level: bool) -> bool {
        let cur = (self.cur_clock.get(), self.cur_cpu.get());
        match self.ready.borrow().peek() {
            Some(Reverse(k)) if or_level => (k.clock, k.cpu()) <= cur,
            Some(Reverse(k)) => (k.clock, k.cpu()) < cur,
            None => false,
        }
    }

    /// A synchronization point: yield if another task is behind, so that shared state is
    /// touched in virtual-time order.
    pub fn sync(&self) -> Yield<'_> {
        Yield {
            e: self,
            state: if self.behind_exists() { 0 } else { 2 },
        }
    }

    /// Whether a loop over shared state that last synced at `last` is due for a
    /// synchronization point: the current task has run at least `quantum` ns since
    /// (bounded skew; the caller then awaits [`Engine::sync`] and notes the time).
    #[inline]
    pub fn sync_due(&self, last: Time, quantum: u64) -> bool {
        self.now() >= last + quantum
    }

    /// A [`Yield`] that needs no yield: for a synchronous function that returns a sync
    /// point only some of the time, so that its caller's await costs nothing otherwise.
    #[inline]
    pub fn ready(&self) -> Yield<'_> {
        Yield { e: self, state: 2 }
    }

    /// Yield unconditionally (requeue at the current clock).
    pub fn yield_now(&self) -> Yield<'_> {
        Yield { e: self, state: 0 }
    }

    /// Sleep (blocking IO, throttling): advance the clock and yield.
    ///
    /// The yield is skipped when the executor would resume this task at once anyway: no
    /// ready task is at or before its new (clock, CPU), the run's end is not reached and
    /// no stop is pending. The order of execution is the same either way.
    pub fn sleep(&self, ns: u64) -> Yield<'_> {
        self.charge(ns);
        // Yield now and then regardless, so the executor's tick (progress, interrupts)
        // still runs when one task sleeps alone.
        let skips = self.sleep_skips.get().wrapping_add(1);
        self.sleep_skips.set(skips);
        let must_yield = self.stop.get()
            || skips.is_multiple_of(1024)
            || self.cur_clock.get() >= self.run_end.get()
            || self.ready_before_current(true);
        Yield {
            e: self,
            state: if must_yield { 0 } else { 2 },
        }
    }

    /// Park the current task until [`Engine::wake`]. Used by kswapd's sleep.
    pub fn park(&self) -> Park<'_> {
        Park {
            e: self,
            parked: false,
        }
    }

    /// Wake a parked task no earlier than `at`.
    pub fn wake(&self, id: TaskId, at: Time) {
        {
            let mut t = self.tasks.borrow_mut();
            let ts = &mut t[id as usize];
            if !ts.alive {
                return;
            }
            ts.granted = true;
        }
        self.set_clock(id, self.clock_of(id).max(at));
        self.enqueue(id);
    }

    // -----------------------------------------------------------------------------------
    // Spinlocks
    // -----------------------------------------------------------------------------------

    /// A spinlock of `class` whose word lives in `home`'s memory.
    pub fn new_lock(&self, class: LockClass, home: u32) -> LockId {
        let mut l = self.locks.borrow_mut();
        l.push(LockState {
            class,
            held: false,
            free_at: 0,
            last_cpu: u32::MAX,
            prev_cpu: u32::MAX,
            granted_at: 0,
            waiters: VecDeque::new(),
            holder: (Site::ALL[0], 0),
            home,
        });
        (l.len() - 1) as LockId
    }

    fn record(&self, class: LockClass, site: Site, wait: Time, traced: bool) {
        let mut s = self.stats.borrow_mut();
        let st = &mut s[class as usize * Site::ALL.len() + site as usize];
        st.acquisitions += 1;
        if wait > 0 {
            st.contended += 1;
            st.total_wait += wait;
            st.max_wait = st.max_wait.max(wait);
        }
        if traced {
            st.traced += 1;
            st.traced_wait += wait;
            st.traced_max_wait = st.traced_max_wait.max(wait);
        }
        self.lock_acquisitions.set(self.lock_acquisitions.get() + 1);
    }

    /// queued_spin_lock_slowpath()'s choice (perf_lock.rs): does an acquirer on `cpu`
    /// arriving at `now` go to the MCS queue (and fire contention_begin/end)? The lock is busy when held, or released in the acquirer's
    /// future; its owner at `now` is the holder, unless the holder was itself still waiting
    /// then (it was given the lock after `now`), in which case it was its predecessor.
    fn joins_queue(&self, l: &LockState, now: Time, cpu: u32) -> bool {
        if !l.held && l.free_at <= now {
            return false;
        }
        let queued = l.waiters.iter().map(|w| w.cpu);
        if l.granted_at <= now {
            joins_mcs_queue(cpu, l.last_cpu, queued, self.paravirt)
        } else {
            let waiting = std::iter::once(l.last_cpu).chain(queued);
            joins_mcs_queue(cpu, l.prev_cpu, waiting, self.paravirt)
        }
    }

    /// Acquire a spinlock at `site` (models spin_lock_irq). A synchronization point.
    /// Observed (perf_lock.rs), an acquirer that goes to the MCS queue first pays the
    /// contention_begin event, then queues; once it has the lock it pays contention_end
    /// inside the hold.
    pub async fn lock(&self, lock: LockId, site: Site) {
        self.sync().await;
        let me = self.cur.get();
        self.tasks.borrow_mut()[me as usize].irq_off += 1;
        let arrived = self.now();
        let traced = self.observe != Observe::None
            && self.joins_queue(&self.locks.borrow()[lock as usize], arrived, self.cpu());
        if traced && self.trace.begin > 0 {
            self.charge(self.trace.begin);
            self.sync().await;
        }
        let (now, cpu) = (self.now(), self.cpu());
        let outcome = {
            let mut ls = self.locks.borrow_mut();
            let l = &mut ls[lock as usize];
            if l.held {
                l.waiters.push_back(Waiter {
                    task: me,
                    arrived,
                    site,
                    cpu,
                    traced,
                });
                None
            } else {
                let start = now.max(l.free_at);
                let c = self.lock_word_cost(l.last_cpu, cpu, l.home, start)
                    + self.costs.lock_uncontended;
                l.held = true;
                l.prev_cpu = l.last_cpu;
                l.last_cpu = cpu;
                l.granted_at = start;
                l.holder = (site, start + c);
                Some((l.class, start, start + c))
            }
        };
        match outcome {
            Some((class, start, t)) => {
                self.record(class, site, start - arrived, traced);
                let end = if traced { self.trace.end } else { 0 };
                self.set_clock(me, t + end);
                if start > now {
                    // We jumped forward: let tasks now behind us run first (we hold the lock,
                    // so they queue behind us, which is their arrival order).
                    self.sync().await;
                }
            }
            None => {
                self.tasks.borrow_mut()[me as usize].granted = false;
                Granted { e: self, me }.await;
            }
        }
    }

    /// Release a spinlock; hands it to the first waiter, if any.
    pub fn unlock(&self, lock: LockId) {
        let now = self.now();
        let next = {
            let mut ls = self.locks.borrow_mut();
            let l = &mut ls[lock as usize];
            debug_assert!(l.held, "unlock of a free lock");
            let (held_site, since) = l.holder;
            let mut st = self.stats.borrow_mut();
            st[l.class as usize * Site::ALL.len() + held_site as usize].total_hold +=
                now.saturating_sub(since);
            drop(st);
            match l.waiters.pop_front() {
                Some(w) => {
                    let at = now.max(w.arrived);
                    let c = self.lock_word_cost(l.last_cpu, w.cpu, l.home, at)
                        + self.costs.lock_uncontended;
                    l.prev_cpu = l.last_cpu;
                    l.last_cpu = w.cpu;
                    l.granted_at = now.max(w.arrived);
                    l.holder = (w.site, l.granted_at + c);
                    Some((l.class, w, c))
                }
                None => {
                    l.held = false;
                    l.free_at = now;
                    None
                }
            }
        };
        if let Some((class, w, c)) = next {
            let start = now.max(w.arrived);
            self.record(class, w.site, start - w.arrived, w.traced);
            let end = if w.traced { self.trace.end } else { 0 };
            self.set_clock(w.task, start + c + end);
            self.tasks.borrow_mut()[w.task as usize].granted = true;
            self.enqueue(w.task);
        }
        // spin_unlock_irq: interrupts back on, and the handlers that waited run now.
        let pending = {
            let mut tasks = self.tasks.borrow_mut();
            let t = &mut tasks[self.cur.get() as usize];
            debug_assert!(t.irq_off > 0, "unlock by a task that holds no lock");
            t.irq_off = t.irq_off.saturating_sub(1);
            if t.irq_off == 0 {
                std::mem::take(&mut t.irq)
            } else {
                0
            }
        };
        self.charge(pending);
    }

    /// Is the lock held right now (by a yielded task)?
    pub fn lock_held(&self, lock: LockId) -> bool {
        self.locks.borrow()[lock as usize].held
    }

    /// (class, site, stats) for every site that was used.
    pub fn lock_stats(&self) -> Vec<(LockClass, Site, SiteStats)> {
        let s = self.stats.borrow();
        let mut out = Vec::new();
        for c in LockClass::ALL {
            for site in Site::ALL {
                let st = s[c as usize * Site::ALL.len() + *site as usize];
                if st.acquisitions > 0 {
                    out.push((c, *site, st));
                }
            }
        }
        out
    }
}

/// Future of [`Engine::sync`] / [`Engine::yield_now`] / [`Engine::sleep`].
pub struct Yield<'a> {
    e: &'a Engine,
    /// 0 = must yield, 1 = yielded (ready on next poll), 2 = no yield needed.
    state: u8,
}

impl Future for Yield<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        match self.state {
            0 => {
                self.state = 1;
                self.e.requeue_current();
                Poll::Pending
            }
            _ => Poll::Ready(()),
        }
    }
}

/// Future waiting for a lock hand-over.
struct Granted<'a> {
    e: &'a Engine,
    me: TaskId,
}

impl Future for Granted<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.e.tasks.borrow()[self.me as usize].granted {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Future of [`Engine::park`].
pub struct Park<'a> {
    e: &'a Engine,
    parked: bool,
}

impl Future for Park<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let me = self.e.cur.get();
        if !self.parked {
            self.parked = true;
            self.e.tasks.borrow_mut()[me as usize].granted = false;
            return Poll::Pending;
        }
        if self.e.tasks.borrow()[me as usize].granted {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn costs() -> EngineCosts {
        EngineCosts {
            lock_uncontended: 10,
            cacheline_transfer: 100,
            cacheline_transfer_remote: 200,
            cacheline_transfer_smt: 7,
            atomic_rmw: 5,
            home_agent_occupancy: 0,
        }
    }

    #[test]
    fn a_loop_over_shared_state_syncs_once_it_has_run_a_quantum_ahead() {
        // Task A on CPU 0 runs ten steps of 700 ns, taking a sync point whenever it has run
        // SKEW_QUANTUM (2000 ns) since the last: at 2100, 4200 and 6300. Task B on CPU 1,
        // due at 0, gets the CPU at A's first sync point (it is behind) and logs at 1000.
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let log = Rc::new(RefCell::new(Vec::new()));
        {
            let (e2, l2) = (e.clone(), log.clone());
            e.spawn(0, 0, async move {
                let mut last = 0;
                for _ in 0..10 {
                    e2.charge(700);
                    if e2.sync_due(last, SKEW_QUANTUM) {
                        e2.sync().await;
                        last = e2.now();
                        l2.borrow_mut().push(("A", last));
                    }
                }
            });
        }
        {
            let (e2, l2) = (e.clone(), log.clone());
            e.spawn(0, 1, async move {
                e2.sleep(1000).await;
                l2.borrow_mut().push(("B", e2.now()));
            });
        }
        e.run_until(1_000_000, 1 << 14, &mut |_| true);
        assert_eq!(
            *log.borrow(),
            vec![("B", 1000), ("A", 2100), ("A", 4200), ("A", 6300)]
        );
    }

    /// Sets its flag when dropped.
    struct DropFlag(Rc<Cell<bool>>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }

    #[test]
    fn a_task_still_waiting_when_the_run_ends_is_dropped_with_its_locals() {
        // A parked task (kswapd asleep at the end of a run) holds a value across its
        // wait; drop_tasks drops it (as the simulator's tasks drop the Rc of the Sim they
        // hold, which would otherwise keep the whole machine alive) without running the
        // rest of the task.
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let dropped = Rc::new(Cell::new(false));
        let reached = Rc::new(Cell::new(false));
        {
            let (e2, f, r) = (e.clone(), DropFlag(dropped.clone()), reached.clone());
            e.spawn(0, 0, async move {
                let _held = f;
                e2.park().await;
                r.set(true);
            });
        }
        e.run_until(1_000_000, 1 << 14, &mut |_| true);
        assert!(!dropped.get(), "dropped before the run's end");
        e.drop_tasks();
        assert!(dropped.get(), "not dropped by drop_tasks");
        assert!(!reached.get(), "the parked task ran on");
    }

    #[test]
    #[should_panic(expected = "a task's own panic")]
    fn a_panic_inside_a_task_reaches_the_caller_of_run_until() {
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let e2 = e.clone();
        e.spawn(0, 0, async move {
            e2.yield_now().await;
            panic!("a task's own panic");
        });
        e.run_until(1_000_000, 1 << 14, &mut |_| true);
    }

    #[test]
    fn a_sync_point_yields_to_a_task_level_with_it_on_a_lower_cpu_only() {
        // Task X on CPU 1 runs from 0 to 100 and takes a sync point there; task Y, due at
        // 100 on CPU `c`, is behind X in (clock, CPU) order only on a lower CPU: on CPU 0
        // X yields and Y logs first (three polls: X, Y, X again), on CPU 2 X goes on
        // without a yield (two polls).
        for (c, want, polls) in [(0, ["Y", "X"], 3), (2, ["X", "Y"], 2)] {
            let e = Rc::new(Engine::new(costs(), vec![0; 64]));
            let log = Rc::new(RefCell::new(Vec::new()));
            {
                let (e2, l2) = (e.clone(), log.clone());
                e.spawn(0, 1, async move {
                    e2.charge(100);
                    e2.sync().await;
                    l2.borrow_mut().push("X");
                });
            }
            let l2 = log.clone();
            e.spawn(100, c, async move { l2.borrow_mut().push("Y") });
            e.run_until(1_000_000, 1 << 14, &mut |_| true);
            assert_eq!(*log.borrow(), want, "Y on CPU {c}");
            assert_eq!(e.polls.get(), polls, "Y on CPU {c}");
        }
    }

    #[test]
    fn a_lone_sleeper_runs_on_and_still_lets_the_executor_tick() {
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let log = Rc::new(RefCell::new(Vec::new()));
        {
            let (e2, l2) = (e.clone(), log.clone());
            e.spawn(0, 0, async move {
                for _ in 0..10_000 {
                    e2.sleep(10).await;
                }
                l2.borrow_mut().push(e2.now());
            });
        }
        // A task far in the future: the sleeper is always first, so it need not yield.
        {
            let (e2, l2) = (e.clone(), log.clone());
            e.spawn(1_000_000, 1, async move {
                l2.borrow_mut().push(e2.now());
            });
        }
        let mut ticks = 0;
        e.run_until(10_000_000, 1, &mut |_| {
            ticks += 1;
            true
        });
        assert_eq!(*log.borrow(), vec![100_000, 1_000_000]);
        // One sleep in 1024 yields anyway, so the tick (progress, interrupts) still runs.
        assert!((9..=20).contains(&ticks), "{ticks} ticks");
        assert!(e.polls.get() < 100, "{} polls", e.polls.get());
    }

    #[test]
    fn an_interrupted_task_pays_the_handler_before_it_runs_again_in_clock_order() {
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let log = Rc::new(RefCell::new(Vec::new()));
        // Task 0 on CPU 0: yields at 100 and 400. Task 1 on CPU 1 interrupts it for 500
        // at time 200. Task 2 on CPU 2 logs at 350 and 600.
        let (e0, l0) = (e.clone(), log.clone());
        let victim = e.spawn(0, 0, async move {
            e0.sleep(100).await;
            l0.borrow_mut().push(("victim", e0.now()));
            e0.sleep(300).await;
            l0.borrow_mut().push(("victim", e0.now()));
        });
        let e1 = e.clone();
        e.spawn(200, 1, async move {
            e1.interrupt(victim, 500);
            // Interrupting oneself is charging oneself.
            e1.interrupt(e1.current(), 7);
            assert_eq!(e1.now(), 207);
        });
        let (e2, l2) = (e.clone(), log.clone());
        e.spawn(350, 2, async move {
            l2.borrow_mut().push(("other", e2.now()));
            e2.sleep(250).await;
            l2.borrow_mut().push(("other", e2.now()));
        });
        e.run_until(10_000, 1 << 20, &mut |_| true);
        // The victim's resumption at 100 came before the interrupt; the next one, due at
        // 400, is at 900: after the other task's 350 and 600, which it must not precede.
        assert_eq!(
            *log.borrow(),
            vec![
                ("victim", 100),
                ("other", 350),
                ("other", 600),
                ("victim", 900)
            ]
        );
    }

    #[test]
    fn a_lock_holder_takes_its_interrupts_after_the_release() {
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let lock = e.new_lock(LockClass::LruLock, 0);
        let log = Rc::new(RefCell::new(Vec::new()));
        // Task A on CPU 0 takes the lock at 0 (a cold line: 10 ns) and holds it until
        // 1000, yielding inside the hold. Task B interrupts it for 500 at 100. Task C on
        // CPU 2 asks for the lock at 200.
        let (ea, la) = (e.clone(), log.clone());
        let a = e.spawn(0, 0, async move {
            ea.lock(lock, Site::ShrinkInactiveList).await;
            ea.sleep(990).await;
            ea.unlock(lock);
            la.borrow_mut().push(("A after unlock", ea.now()));
        });
        let eb = e.clone();
        e.spawn(100, 1, async move {
            eb.interrupt(a, 500);
        });
        let (ec, lc) = (e.clone(), log.clone());
        e.spawn(200, 2, async move {
            ec.lock(lock, Site::ShrinkInactiveList).await;
            lc.borrow_mut().push(("C holds", ec.now()));
            ec.unlock(lock);
        });
        e.run_until(10_000, 1 << 20, &mut |_| true);
        // C gets the lock at the release, 1000, plus the handoff (a line from CPU 0: 100,
        // and 10): the handler did not lengthen A's hold. A pays it after the release.
        let mut got = log.borrow().clone();
        got.sort();
        assert_eq!(got, vec![("A after unlock", 1500), ("C holds", 1110)]);
    }

    #[test]
    fn smallest_clock_runs_first_ties_by_cpu() {
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let log = Rc::new(RefCell::new(Vec::new()));
        for (cpu, start) in [(2u32, 100u64), (1, 100), (0, 300)] {
            let (e2, l2) = (e.clone(), log.clone());
            e.spawn(start, cpu, async move {
                l2.borrow_mut().push((e2.now(), e2.cpu()));
                e2.sleep(150).await;
                l2.borrow_mut().push((e2.now(), e2.cpu()));
            });
        }
        e.run_until(10_000, 1 << 20, &mut |_| true);
        assert_eq!(
            *log.borrow(),
            vec![(100, 1), (100, 2), (250, 1), (250, 2), (300, 0), (450, 0)]
        );
    }

    type LockTable = Vec<(LockClass, Site, SiteStats)>;

    /// cpu0 takes the lock at 0 and holds it across a sleep of `hold`; each of `arrivals`
    /// (cpu, time) then takes it and holds it 50 ns. Returns when each had the lock (cpu0:
    /// when it let go) in that order, and the lock table.
    fn contend(e: Rc<Engine>, hold: u64, arrivals: &[(u32, u64)]) -> (Vec<(u32, Time)>, LockTable) {
        let l = e.new_lock(LockClass::LruLock, 0);
        let order = Rc::new(RefCell::new(Vec::new()));
        {
            let (e2, o2) = (e.clone(), order.clone());
            e.spawn(0, 0, async move {
                e2.lock(l, Site::ShrinkInactiveList).await;
                e2.sleep(hold).await;
                o2.borrow_mut().push((0u32, e2.now()));
                e2.unlock(l);
            });
        }
        for &(cpu, t) in arrivals {
            let (e2, o2) = (e.clone(), order.clone());
            e.spawn(t, cpu, async move {
                e2.lock(l, Site::MoveFoliosToLru).await;
                o2.borrow_mut().push((cpu, e2.now()));
                e2.charge(50);
                e2.unlock(l);
            });
        }
        e.run_until(100_000, 1 << 20, &mut |_| true);
        let o = order.borrow().clone();
        (o, e.lock_stats())
    }

    #[test]
    fn lock_waiters_queue_in_arrival_order_and_wait_is_recorded() {
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let (o, st) = contend(e, 1000, &[(2, 300), (1, 200)]);
        assert_eq!(o.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        // cpu1 arrived at 200, got it at 1010 (+ line transfer 100 + lock 10).
        assert_eq!(o[1].1, 1010 + 110);
        let m = st
            .iter()
            .find(|(_, s, _)| *s == Site::MoveFoliosToLru)
            .unwrap()
            .2;
        assert_eq!(m.acquisitions, 2);
        assert_eq!(m.contended, 2);
        // waits: cpu1 1010-200 = 810; cpu2 (1120+50)-300 = 870.
        assert_eq!(m.total_wait, 810 + 870);
        assert_eq!(m.max_wait, 870);
        // Held: cpu0 from 10 (once it had the lock word) to its release at 1010; cpu1 and
        // cpu2 for their 50 ns each, counted from after their handoffs.
        assert_eq!(m.total_hold, 50 + 50);
        let first = st
            .iter()
            .find(|(_, s, _)| *s == Site::ShrinkInactiveList)
            .unwrap()
            .2;
        assert_eq!(first.total_hold, 1000);
    }

    fn observed_engine(observe: Observe, begin: u64, end: u64, paravirt: bool) -> Rc<Engine> {
        let trace = TraceCost { begin, end };
        Rc::new(Engine::new(costs(), vec![0; 64]).with_observer(observe, trace, paravirt))
    }

    fn perf_lock_engine(paravirt: bool) -> Rc<Engine> {
        observed_engine(Observe::PerfLock, 1000, 1000, paravirt)
    }

    /// `contend` observed by perf lock (each event 1000 ns): cpu1 arrives at 200, cpu2 at
    /// 300. The times cpu1 and cpu2 had the lock, and the stats of their site.
    fn observed_three_cpus(hold: u64) -> (Vec<(u32, Time)>, SiteStats) {
        observed_three_cpus_by(perf_lock_engine(false), hold)
    }

    fn observed_three_cpus_by(e: Rc<Engine>, hold: u64) -> (Vec<(u32, Time)>, SiteStats) {
        let (o, st) = contend(e, hold, &[(1, 200), (2, 300)]);
        let m = st
            .iter()
            .find(|(_, s, _)| *s == Site::MoveFoliosToLru)
            .unwrap()
            .2;
        (o[1..].to_vec(), m)
    }

    #[test]
    fn the_pending_spinner_is_untraced_and_a_queued_waiter_pays_both_events() {
        // cpu1 finds only the owner: it spins on the pending bit, untraced, and gets the
        // lock at cpu0's release (1010) plus the handoff (110), as unobserved. cpu2 finds
        // cpu1 waiting: contention_begin (1000) before it queues, so at 1300 the lock is
        // free (cpu1 left at 1170): trylock at 1300, +110, then contention_end inside the
        // hold: it runs its section at 2410 and leaves at 2460.
        let (o, m) = observed_three_cpus(1000);
        assert_eq!(o, vec![(1, 1120), (2, 2410)]);
        assert_eq!((m.acquisitions, m.contended, m.traced), (2, 2, 1));
        assert_eq!(m.total_wait, (1010 - 200) + (1300 - 300));
        assert_eq!((m.traced_wait, m.traced_max_wait), (1000, 1000));
        // cpu1 50 ns; cpu2 from 1410 to 2460: the end event is inside its hold.
        assert_eq!(m.total_hold, 50 + 1050);
    }

    #[test]
    fn perf_lock_bpf_pays_the_stack_before_queueing_and_little_inside() {
        // As the first case, with perf lock contention -b's programs: 1000 ns at
        // contention_begin (the stack), 200 at contention_end. cpu2 takes the free lock at
        // 1300, +110, and runs its section after the end program, at 1610.
        let e = observed_engine(Observe::PerfLockBpf, 1000, 200, false);
        let (o, m) = observed_three_cpus_by(e, 1000);
        assert_eq!(o, vec![(1, 1120), (2, 1410 + 200)]);
        assert_eq!((m.traced, m.traced_wait), (1, 1300 - 300));
        assert_eq!(m.total_hold, 50 + (200 + 50));
    }

    #[test]
    fn a_traced_waiter_handed_the_lock_pays_contention_end_inside_the_hold() {
        // cpu0 holds until 5010: cpu2 queues at 1300 behind cpu1, which leaves at 5170;
        // cpu2 gets it then, +110, +1000 for contention_end.
        let (o, m) = observed_three_cpus(5000);
        assert_eq!(o, vec![(1, 5120), (2, 5170 + 110 + 1000)]);
        assert_eq!(m.total_wait, (5010 - 200) + (5170 - 300));
        assert_eq!((m.traced, m.traced_wait), (1, 5170 - 300));
        assert_eq!(m.total_hold, 50 + 1050);
    }

    /// `tasks` tasks on two CPUs take one lock 50 times each, holding it 300 ns.
    fn two_cpus_in_turns(paravirt: bool, tasks: u32) -> SiteStats {
        let e = perf_lock_engine(paravirt);
        let l = e.new_lock(LockClass::LruLock, 0);
        for i in 0..tasks {
            let e2 = e.clone();
            e.spawn(i as u64 * 7, i % 2, async move {
                for _ in 0..50 {
                    e2.lock(l, Site::LruAddDrainCpu).await;
                    e2.charge(300);
                    e2.unlock(l);
                    e2.charge(20);
                }
            });
        }
        e.run_until(10_000_000, 1 << 20, &mut |_| true);
        let m = e.lock_stats()[0].2;
        assert_eq!(m.acquisitions, 50 * tasks as u64);
        assert!(
            m.contended > 25 * tasks as u64,
            "the tasks did contend: {m:?}"
        );
        m
    }

    #[test]
    fn on_two_cpus_no_waiter_is_ever_traced() {
        // The only waiter the kernel can have is the other CPU's pending spinner.
        let m = two_cpus_in_turns(false, 4);
        assert_eq!((m.traced, m.traced_wait), (0, 0));
    }

    #[test]
    fn a_lock_found_free_is_never_traced_even_on_paravirt_spinlocks() {
        // cpu0 takes and drops the lock at once; cpu1 comes at 1000 to a free lock
        // (released at 30): the fast path, no slow path, nothing traced or waited.
        let e = perf_lock_engine(true);
        let l = e.new_lock(LockClass::LruLock, 0);
        for (cpu, t) in [(0u32, 0u64), (1, 1000)] {
            let e2 = e.clone();
            e.spawn(t, cpu, async move {
                e2.lock(l, Site::LruAddDrainCpu).await;
                e2.unlock(l);
            });
        }
        e.run_until(100_000, 1 << 20, &mut |_| true);
        let m = e.lock_stats()[0].2;
        assert_eq!((m.acquisitions, m.contended, m.traced), (2, 0, 0));
    }

    #[test]
    fn on_paravirt_spinlocks_every_waiter_is_traced() {
        // __pv_queued_spin_lock_slowpath has no pending spinner: whoever waits, queues.
        // (One task per CPU: tasks sharing a CPU cannot both be inside a spinlock.)
        let m = two_cpus_in_turns(true, 2);
        assert_eq!((m.traced, m.traced_wait), (m.contended, m.total_wait));
    }

    #[test]
    fn holder_running_ahead_makes_later_acquirer_wait() {
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let l = e.new_lock(LockClass::LruLock, 0);
        let got = Rc::new(Cell::new(0));
        {
            let e2 = e.clone();
            e.spawn(0, 0, async move {
                e2.lock(l, Site::ShrinkActiveList).await;
                e2.charge(500); // critical section without a yield
                e2.unlock(l);
            });
        }
        {
            let (e2, g) = (e.clone(), got.clone());
            e.spawn(100, 1, async move {
                e2.lock(l, Site::ShrinkActiveList).await;
                g.set(e2.now());
                e2.unlock(l);
            });
        }
        e.run_until(100_000, 1 << 20, &mut |_| true);
        // released at 10 + 500 = 510; cpu1 pays a line transfer and the lock.
        assert_eq!(got.get(), 510 + 110);
        let s = e.lock_stats()[0].2;
        assert_eq!((s.acquisitions, s.contended, s.total_wait), (2, 1, 410));
    }

    #[test]
    fn hold_time_is_recorded_under_the_lock_class_and_site() {
        let e = Rc::new(Engine::new(costs(), vec![0; 64]));
        let lru = e.new_lock(LockClass::LruLock, 0);
        let cost = e.new_lock(LockClass::CostLock, 0);
        let e2 = e.clone();
        e.spawn(0, 0, async move {
            e2.lock(cost, Site::PrepareScanControl).await;
            e2.charge(300);
            e2.unlock(cost);
            e2.lock(lru, Site::PrepareScanControl).await;
            e2.charge(70);
            e2.unlock(lru);
        });
        e.run_until(100_000, 1 << 20, &mut |_| true);
        let st = e.lock_stats();
        let hold = |c| st.iter().find(|x| x.0 == c).unwrap().2.total_hold;
        // Same caller, two classes: each keeps its own hold.
        assert_eq!(
            (hold(LockClass::CostLock), hold(LockClass::LruLock)),
            (300, 70)
        );
    }
}
