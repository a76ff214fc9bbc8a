//! What every simulated workload task shares: its CPU-local clock ([`Runner`]: user time
//! charged in quanta, synchronized at least every SKEW_QUANTUM), the work count the
//! engine's tick needs ([`Work`]), its counters, its end, and the accesses that enter the
//! kernel: an anonymous touch (with its page fault and the process's text), MAP_POPULATE's
//! page, and prefetches of the page-cache entries and PTEs an access will use.

use super::stats::{Tally, ThreadTally};
use crate::mm::memory::Fault;
use crate::mm::mm_types::pte;
use crate::mm::{prefetch, Mm, MmStruct};
use crate::sim::Sim;
use std::cell::Cell;
use std::rc::Rc;

pub use crate::engine::SKEW_QUANTUM;

/// Iterations a workload loop counts as work at once (see `Engine::work_points`): a
/// check per access would cost a loop of hits several instructions per access.
pub(super) const WORK_BATCH: u64 = 64;

/// Accesses a usemem or file_read thread draws ahead of the one it runs (for
/// prefetching).
pub(super) const LOOKAHEAD: usize = 8;

/// The CPU-local part of a task: pending cost not yet charged, and when it last synced.
pub(super) struct Runner {
    pub(super) pending: u64,
    since_sync: u64,
    /// The task's process (its engine tag), u32::MAX for a task of none.
    mm: u32,
}

impl Runner {
    /// A task of workload `wi` starts at `start`: the workload runs from its first task's
    /// start. Called in the task (its tag names its process).
    pub(super) fn new(s: &Sim, wi: usize, start: u64) -> Self {
        let mut ws = s.workloads.borrow_mut();
        ws[wi].start_ns = ws[wi].start_ns.min(start);
        Runner {
            pending: 0,
            since_sync: 0,
            mm: s.e.current_tag(),
        }
    }

    /// Accumulate `cost` of user-space time; once the quantum is used up, charge it and
    /// sync (the returned future; a ready one otherwise, so that the common case builds
    /// no state machine).
    #[inline]
    pub(super) fn tick<'s>(&mut self, s: &'s Sim, cost: u64) -> crate::engine::Yield<'s> {
        self.pending += cost;
        self.since_sync += cost;
        if self.since_sync >= SKEW_QUANTUM {
            self.flush(s);
            s.e.sync()
        } else {
            s.e.ready()
        }
    }

    /// Charge pending user time (before entering the kernel, at the end of a quantum and
    /// before a sleep). The task's process ran: lru_gen_use_mm, which the kernel calls
    /// when context_switch() puts a task of the mm on a CPU (the model has no scheduler;
    /// mm_list.rs says how the two differ).
    pub(super) fn flush(&mut self, s: &Sim) {
        if self.mm != u32::MAX {
            s.mm.borrow_mut().lru_gen_use_mm(self.mm);
        }
        s.e.charge(self.pending);
        self.pending = 0;
        self.since_sync = 0;
    }
}

/// A loop's work counted for the engine's tick (Ctrl-C, stalled clocks), WORK_BATCH
/// iterations at a time: `done()` is false once the run must end.
#[derive(Default)]
pub(super) struct Work(u64);

impl Work {
    #[inline]
    pub(super) fn done(&mut self, s: &Sim) -> bool {
        self.0 += 1;
        self.0.is_multiple_of(WORK_BATCH) && !s.e.work_points(WORK_BATCH)
    }
}

/// Workload `wi`'s live counters.
pub(super) fn tally(s: &Sim, wi: usize) -> Rc<Tally> {
    s.tallies.borrow()[wi].clone()
}

/// A new thread of workload `wi` with random stream `stream` starts now: its own tally,
/// counting into the workload's, registered for the report. [`thread_done`] ends it.
pub(super) fn thread_tally(s: &Sim, wi: usize, stream: u64) -> Rc<ThreadTally> {
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
pub(super) fn thread_done(s: &Sim, th: &ThreadTally) {
    if th.end.replace(Some(s.e.now())).is_none() {
        s.worker_on_cpu(false);
    }
}

/// A task of workload `wi` that started at `start` ends (`killed`: by the OOM killer).
pub(super) fn finish(s: &Sim, wi: usize, start: u64, killed: bool) {
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
pub(super) async fn thread_exit(
    s: &Sim,
    wi: usize,
    start: u64,
    mmid: u32,
    live: &std::cell::Cell<u32>,
) {
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
///
/// Written as a function returning an `async move` block, not as an `async fn`: an async
/// fn's first poll copies its arguments into locals with wide loads, which wait on the
/// narrower stores the caller just made (a store-forwarding stall on every access in the
/// plain release build; the PGO build measured the same either way). The block uses its
/// captures in place. See docs/bench.md, "Where `large`'s time goes now".
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn stalls on its arguments (above)"
)]
pub(super) fn touch<'a>(
    s: &'a Sim,
    r: &'a mut Runner,
    t: &'a Tally,
    mmid: u32,
    vpn: u32,
    cost: u64,
) -> impl std::future::Future<Output = bool> + 'a {
    async move {
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
                        // A write-protected PTE (fork) faults into do_wp_page.
                        let hit = !m.access_faults(vpn, true);
                        if hit {
                            m.ptes[vpn as usize] |= pte::YOUNG | pte::DIRTY;
                            m.pmd_mkyoung(vpn);
                        }
                        Ok(hit)
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
}

/// The instruction fetches of one write of a process with text ([`text_fetch`]), faulting
/// in each text page reclaim took; false when the process was killed. (A sampled thread's
/// chunk runs it once for its first write; [`touch`] does the same inline.)
pub(super) async fn run_text(s: &Sim, r: &mut Runner, t: &Tally, mmid: u32) -> bool {
    loop {
        let missing = {
            let mut mm = s.mm.borrow_mut();
            let m = &mut mm.mms[mmid as usize];
            if !m.alive {
                return false;
            }
            text_fetch(m)
        };
        let Some(tv) = missing else {
            return true;
        };
        r.flush(s);
        s.e.sync().await;
        if !fault(s, t, mmid, tv, false).await {
            return false;
        }
    }
}

/// One page of MAP_POPULATE (usemem --prefault): the page faulted in for writing as a
/// touch faults it, then marked accessed by GUP's FOLL_TOUCH (mm/gup.rs). False when the
/// process was killed.
pub(super) async fn populate(s: &Sim, r: &mut Runner, t: &Tally, mmid: u32, vpn: u32) -> bool {
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
pub(super) fn text_fetch(m: &mut MmStruct) -> Option<u32> {
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

/// Fault `vpn` in until it is mapped, and writable for a data access (a write):
/// handle_mm_fault, again after a fault that backed out; false when the process was
/// killed. A data access's major fault is also a miss; an instruction fetch's is not. An
/// `async move` block for the reason [`touch`] gives.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn stalls on its arguments (touch)"
)]
fn fault<'a>(
    s: &'a Sim,
    t: &'a Tally,
    mmid: u32,
    vpn: u32,
    data: bool,
) -> impl std::future::Future<Output = bool> + 'a {
    async move {
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
                    // The fault backed out: the access runs again, a fault again if the
                    // PTE still does not permit it (not present, e.g. unmapped meanwhile;
                    // or, for a write, write-protected, e.g. mapped back from a swap slot
                    // other processes share).
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
                    if m.access_faults(vpn, data) {
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
}

/// Prefetch page `page`'s page-cache entry of file `file`.
pub(super) fn prefetch_file_entry(mm: &Mm, file: u32, page: u32) {
    if let Some(e) = mm.files[file as usize].cache.get(page as usize) {
        prefetch(e);
    }
}

/// Prefetch the PTE of page `vpn` of process `mmid`.
pub(super) fn prefetch_anon_pte(mm: &Mm, mmid: u32, vpn: u32) {
    if let Some(e) = mm.mms[mmid as usize].ptes.get(vpn as usize) {
        prefetch(e);
    }
}

/// Prefetch the folio a page-cache entry of file `file` points to (its entry was
/// prefetched earlier).
pub(super) fn prefetch_file_folio(mm: &Mm, file: u32, page: u32) {
    if let Some(&e) = mm.files[file as usize].cache.get(page as usize) {
        if let Some(pg) =
            crate::mm::filemap::entry_page(e).and_then(|pfn| mm.pages.get(pfn as usize))
        {
            prefetch(pg);
        }
    }
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

    #[test]
    fn a_process_whose_sampled_threads_write_is_used_at_every_walk() {
        // Three mms of the root memcg, none marked by lru_gen_use_mm: one with a sampled
        // area whose thread is in its passes, one whose sampled thread is not, one plain.
        // The walk's collection of uses sets the bitmap of the first alone, and again
        // after the walk cleared it: a per-access writer would have marked it at each
        // write.
        use crate::mm::sampled_access::SampledArea;
        let s = crate::fixture::one_node_machine("64M", None, "lru = \"mglru\"");
        let mut mm = s.mm.borrow_mut();
        let ids: Vec<u32> = (0..3)
            .map(|i| {
                let mut m = MmStruct::new(64, 0, 0, 0);
                if i < 2 {
                    let rng = crate::engine::rng::stream(1, i);
                    let mut sa = SampledArea::new(64, vec![((0, 64), rng)], None, &m.ptes, &[]);
                    sa.writing = (i == 0) as u32;
                    m.sampled = Some(Box::new(sa));
                }
                mm.mm_alloc(m)
            })
            .collect();
        for _ in 0..2 {
            mm.lru_gen_collect_uses(0);
            let bits: Vec<u64> = ids
                .iter()
                .map(|&id| {
                    mm.mm_lists[0]
                        .fifo
                        .iter()
                        .find(|e| e.mm == id)
                        .unwrap()
                        .bitmap
                })
                .collect();
            assert_eq!(bits, vec![!0, 0, 0]);
            for e in mm.mm_lists[0].fifo.iter_mut() {
                e.bitmap = 0;
            }
        }
    }

    #[test]
    fn a_process_whose_task_runs_is_used_and_one_whose_task_sleeps_is_not() {
        // Two processes of /a, neither of which faults: a's task runs ten quanta of user
        // time, b's sleeps through them. lru_gen_use_mm marks a (its task was put on a
        // CPU: context_switch), never b.
        let s = crate::fixture::one_node_machine("64M", None, "lru = \"mglru\"");
        let (a, b) = {
            let mut mm = s.mm.borrow_mut();
            (
                mm.mm_alloc(MmStruct::new(8, 1, 0, 0)),
                mm.mm_alloc(MmStruct::new(8, 1, 0, 0)),
            )
        };
        let sa = s.clone();
        s.e.spawn_tagged(0, 0, a, async move {
            let mut r = Runner::new(&sa, 0, 0);
            for _ in 0..10 {
                r.tick(&sa, SKEW_QUANTUM).await;
            }
        });
        let sb = s.clone();
        s.e.spawn_tagged(0, 1, b, async move {
            sb.e.sleep(1_000_000).await;
        });
        crate::fixture::run_probe(&s, 2, 0, |s| async move {
            s.e.sleep(2_000_000).await;
        });
        let mm = s.mm.borrow();
        assert!(mm.mms[a as usize].lru_gen_used);
        assert!(!mm.mms[b as usize].lru_gen_used);
    }

    /// A task of memcg /a (id 1) with 16 pages, on a one-node machine with zram swap.
    fn sim_and_mm() -> (std::rc::Rc<Sim>, u32) {
        let s = crate::fixture::one_node_machine("64M", Some("64M"), "");
        let mmid = s.mm.borrow_mut().mm_alloc(MmStruct::new(16, 1, 0, 0));
        (s, mmid)
    }

    #[test]
    fn a_write_that_hits_makes_its_pte_young_and_dirty_and_its_pmd_entry_accessed() {
        // Page 5 faulted in by a first write; then its PTE made old and clean and the PMD
        // entry's accessed bit cleared (as reclaim's look and a writeback leave them). The
        // second write hits: the MMU sets the PTE's accessed and dirty bits and the PMD
        // entry's accessed bit, and nothing faults.
        let (s, mmid) = sim_and_mm();
        let tally = std::rc::Rc::new(Tally::default());
        let t2 = tally.clone();
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            let mut r = Runner::new(&s, 0, 0);
            assert!(touch(&s, &mut r, &t2, mmid, 5, 0).await);
            {
                let mut mm = s.mm.borrow_mut();
                let m = &mut mm.mms[mmid as usize];
                m.ptes[5] &= !(pte::YOUNG | pte::DIRTY);
                m.pmd_young[0] = 0;
            }
            assert!(touch(&s, &mut r, &t2, mmid, 5, 0).await);
            let mm = s.mm.borrow();
            let m = &mm.mms[mmid as usize];
            assert_eq!(
                m.ptes[5] & (pte::YOUNG | pte::DIRTY),
                pte::YOUNG | pte::DIRTY
            );
            assert_eq!(m.pmd_young[0], 1);
        });
        let t = &*tally;
        assert_eq!((t.accesses.get(), t.hits.get(), t.minor.get()), (2, 1, 1));
    }

    #[test]
    fn a_fault_that_backs_out_because_another_thread_mapped_the_page_is_done() {
        // Two threads of a child write page 0 at once (CPUs 0 and 1) while it is still
        // shared with the parent: one copies it (a minor fault), the other's
        // wp_page_copy finds the PTE changed and backs out (a minor fault that retries).
        // The retry finds the page mapped and writable, so the write is done: both
        // faults return true and count one minor fault each, no more.
        let (s, parent) = sim_and_mm();
        let child = s.mm.borrow_mut().mm_alloc(MmStruct::new(16, 1, 0, 0));
        let t = crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            s.handle_mm_fault(parent, 0, true).await;
            assert!(s.dup_mmap(parent, child).await);
        });
        let tallies: Vec<std::rc::Rc<Tally>> = (0..2).map(|_| Default::default()).collect();
        let done = std::rc::Rc::new(std::cell::Cell::new(0));
        for cpu in 0..2 {
            let (s2, t2, d2) = (s.clone(), tallies[cpu as usize].clone(), done.clone());
            s.e.spawn_tagged(t, cpu, child, async move {
                assert!(fault(&s2, &t2, child, 0, true).await);
                d2.set(d2.get() + 1);
            });
        }
        s.e.stop.set(false);
        s.e.run_until(t + 10_000_000, 1 << 20, &mut |_| true);
        assert_eq!(done.get(), 2);
        for t in &tallies {
            assert_eq!((t.minor.get(), t.major.get()), (1, 0));
        }
        let mm = s.mm.borrow();
        let v = mm.mms[child as usize].ptes[0];
        assert!(pte::present(v) && !mm.mms[child as usize].pte_wrprotected(0));
    }
}
