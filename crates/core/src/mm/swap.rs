//! Per-CPU LRU batches, folio_mark_accessed, and the LRU reclaim cost (lru_note_cost).
//!
//! Models mm/swap.c (despite its name, the file of the LRU caches). Folios reach the LRU
//! through per-CPU batches of FOLIO_BATCH_SIZE (31):
//!
//! ```text
//!  fault / read --> folio_add_lru --> cpu batch [.. 31 ..] --full or lru_add_drain-->
//!      folio_batch_move_lru: lru_lock once per run of same-lruvec folios, add at head,
//!      then folios_put drops the batch references (a folio nobody else holds is freed,
//!      which takes the lru_lock again to unlink it: the dead-folio case of seed 003)
//! ```
//! Batches: lru_add, lru_activate (folio_mark_accessed of an inactive, referenced folio),
//! lru_move_tail (folio_rotate_reclaimable at writeback end). Simplified: the lru_deactivate,
//! lru_deactivate_file and lru_lazyfree batches are not modeled (no MADV_COLD/FREE, no
//! invalidation).
//!
//! The batch's reference is the flag PG_INBATCH (the frame has no refcount); a folio queued
//! twice (folio_activate takes any folio with PG_lru, even one already queued) keeps its
//! further references in `Mm::batch_refs`. Whether a queued folio still reads as on the LRU
//! is the one place where kernels differ ([`folio_test_lru`]): every modeled version leaves
//! PG_lru set on a folio queued for activation or rotation, so reclaim may isolate it
//! while it waits; the drain then finds PG_lru clear (folio_test_clear_lru fails) and skips
//! it, and reclaim cannot free it meanwhile (the batch's reference makes
//! is_page_cache_freeable and __remove_mapping's refcount freeze fail). Rule
//! lru_batch_clears_pg_lru is 6.11-6.16, which cleared PG_lru at queueing: isolation
//! skipped such folios and MGLRU's sort_folio aged them.

use super::mm_types::*;
use super::vmstat::VmEvent;
use super::{LruvecId, Mm, Pfn, NIL, SWAP_CLUSTER_MAX};
use crate::engine::Site;
use crate::sim::Sim;
use crate::versions::Rules;

/// folio_test_lru(): whether the kernel's PG_lru is set on this folio. The project keeps
/// PG_LRU on a folio that sits on a list while an lru_activate or lru_move_tail batch holds
/// it (PG_INBATCH); under rule lru_batch_clears_pg_lru (6.11-6.16) the kernel had cleared
/// PG_lru there, so such a folio reads as off the LRU. The rule's only reader: isolation,
/// sort_folio, folio_activate, folio_rotate_reclaimable, folio_mark_accessed and the
/// fault paths' drain decisions all ask here.
#[inline]
pub fn folio_test_lru(p: &Page, rules: &Rules) -> bool {
    p.test(PG_LRU) && !(rules.lru_batch_clears_pg_lru && p.test(PG_INBATCH))
}

/// The per-CPU batches of one CPU (struct cpu_fbatches).
#[derive(Default)]
pub struct CpuBatches {
    pub lru_add: Vec<Pfn>,
    pub lru_activate: Vec<Pfn>,
    pub lru_move_tail: Vec<Pfn>,
}

impl CpuBatches {
    pub fn is_empty(&self) -> bool {
        self.lru_add.is_empty() && self.lru_activate.is_empty() && self.lru_move_tail.is_empty()
    }
}

/// Which batch operation (the move_fn of folio_batch_move_lru).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp {
    /// lru_add: put the folio on its list (head).
    Add,
    /// lru_activate: inactive -> active head, PGACTIVATE.
    Activate,
    /// lru_move_tail: to the inactive tail, PGROTATED.
    MoveTail,
}

impl Mm {
    /// [`folio_test_lru`] of frame `pfn` under this run's rules.
    #[inline]
    pub fn folio_test_lru(&self, pfn: Pfn) -> bool {
        folio_test_lru(&self.pages[pfn as usize], &self.rules)
    }

    /// Take a batch reference (folio_get in __folio_batch_add_and_move).
    #[inline]
    fn batch_ref_get(&mut self, pfn: Pfn) {
        if self.pages[pfn as usize].test(PG_INBATCH) {
            *self.batch_refs.entry(pfn).or_insert(0) += 1;
        } else {
            self.pages[pfn as usize].set(PG_INBATCH);
        }
    }

    /// Drop a batch reference (the batch's share of folios_put); true when it was the
    /// folio's last one. Every drained folio comes here: the side table, nearly always
    /// empty, is looked up only when it holds something.
    fn batch_ref_put(&mut self, pfn: Pfn) -> bool {
        if !self.batch_refs.is_empty() {
            if let Some(n) = self.batch_refs.get_mut(&pfn) {
                *n -= 1;
                if *n == 0 {
                    self.batch_refs.remove(&pfn);
                }
                return false;
            }
        }
        self.pages[pfn as usize].clear(PG_INBATCH);
        true
    }

    /// The references per-CPU batches hold on a folio.
    pub fn folio_batch_refs(&self, pfn: Pfn) -> u32 {
        if !self.pages[pfn as usize].test(PG_INBATCH) {
            return 0;
        }
        if self.batch_refs.is_empty() {
            return 1;
        }
        1 + self.batch_refs.get(&pfn).copied().unwrap_or(0)
    }

    /// Apply one batch operation to a folio (the caller holds its lruvec's lru_lock).
    fn batch_apply(&mut self, op: BatchOp, lv: LruvecId, pfn: Pfn) {
        let memcg = self.pages[pfn as usize].memcg;
        match op {
            BatchOp::Add => {
                debug_assert_eq!(self.folio_lruvec(pfn), lv);
                self.lruvec_add_folio(pfn);
            }
            BatchOp::Activate => {
                // lru_activate(). MGLRU folios on the lists never carry PG_active: the
                // move lands them in a young generation (lru_gen_folio_seq).
                let p = self.pages[pfn as usize];
                if p.test(PG_LRU) && !p.test(PG_ACTIVE) && !p.test(PG_UNEVICTABLE) {
                    self.lruvec_del_folio(pfn);
                    self.pages[pfn as usize].set(PG_ACTIVE);
                    self.lruvec_add_folio(pfn);
                    self.count_event(VmEvent::Pgactivate, 1);
                    self.count_memcg_event(memcg, VmEvent::Pgactivate, 1);
                }
            }
            BatchOp::MoveTail => {
                let p = self.pages[pfn as usize];
                if p.test(PG_LRU) && !p.test(PG_UNEVICTABLE) {
                    self.lruvec_del_folio(pfn);
                    self.pages[pfn as usize].clear(PG_ACTIVE);
                    self.lruvec_add_folio_tail(pfn);
                    self.count_event(VmEvent::Pgrotated, 1);
                }
            }
        }
    }

    /// Take a batch out of a CPU's batches for draining; its folios stay held (PG_INBATCH)
    /// and are listed in `draining` until folios_put releases them. None for an empty
    /// batch, which stays in place, as lru_add_drain_cpu moves only a batch that holds
    /// folios (folio_batch_count); most drains find one or two of a CPU's three batches
    /// empty, and a spare list swapped in for an empty one would be dropped.
    fn take_batch(&mut self, cpu: u32, op: BatchOp) -> Option<Vec<Pfn>> {
        if self.batch_mut(cpu, op).is_empty() {
            return None;
        }
        let fresh = self.pfn_vec();
        let v = std::mem::replace(self.batch_mut(cpu, op), fresh);
        if self.track_draining {
            self.draining.extend_from_slice(&v);
        }
        Some(v)
    }

    /// Release drained folios from `draining`.
    fn release_drained(&mut self, batch: &[Pfn]) {
        if !self.track_draining {
            return;
        }
        for &p in batch {
            if let Some(i) = self.draining.iter().rposition(|&x| x == p) {
                self.draining.swap_remove(i);
            }
        }
    }

    fn batch_mut(&mut self, cpu: u32, op: BatchOp) -> &mut Vec<Pfn> {
        let b = &mut self.batches[cpu as usize];
        match op {
            BatchOp::Add => &mut b.lru_add,
            BatchOp::Activate => &mut b.lru_activate,
            BatchOp::MoveTail => &mut b.lru_move_tail,
        }
    }

    /// folio_mark_accessed() by a task on `cpu`: the classic LRU's second-chance
    /// promotion of buffered accesses. First access sets PG_referenced; a second one
    /// activates an inactive folio, clears PG_referenced and ages the workingset clock
    /// (workingset_activation). Returns true when the folio has PG_lru
    /// ([`folio_test_lru`]): the caller then queues it with [`Sim::folio_activate`]. A
    /// folio off the LRU is marked active only when it sits in this CPU's lru_add batch
    /// (__lru_cache_activate_folio looks at the local batch alone): one isolated by
    /// reclaim or waiting in another CPU's batch keeps its list.
    /// With MGLRU the access only counts toward the folio's tier (lru_gen_inc_refs).
    pub fn folio_mark_accessed(&mut self, pfn: Pfn, cpu: u32) -> bool {
        if self.lru_gen_enabled() {
            super::lru_gen::lru_gen_inc_refs(&mut self.pages, pfn, &self.rules);
            return false;
        }
        let p = self.pages[pfn as usize];
        if !p.test(PG_REFERENCED) {
            self.pages[pfn as usize].set(PG_REFERENCED);
            return false;
        }
        if p.test(PG_UNEVICTABLE) || p.test(PG_ACTIVE) {
            return false;
        }
        let lru = self.folio_test_lru(pfn);
        if !lru && self.batches[cpu as usize].lru_add.contains(&pfn) {
            self.pages[pfn as usize].set(PG_ACTIVE);
        }
        self.pages[pfn as usize].clear(PG_REFERENCED);
        self.workingset_activation(pfn);
        lru
    }
}

impl Sim {
    /// folio_batch_move_lru(): apply `op` to every folio of this CPU's batch, taking each
    /// lruvec's lru_lock once per run of consecutive folios of that lruvec, then drop the
    /// batch's references (folios_put): a folio that nobody else holds is freed, which
    /// takes its lruvec's lru_lock again to unlink it. Simplified: the kernel claims an
    /// activate or move-tail folio (folio_test_clear_lru) before it waits for the lock,
    /// so a reclaimer that meets it on its list meanwhile passes it by; the model tests
    /// PG_lru before the wait, and a folio a reclaimer isolated during the wait is left
    /// to the reclaimer (batch_apply skips it).
    pub async fn folio_batch_move_lru(&self, cpu: u32, op: BatchOp, site: Site) {
        let Some(batch) = self.mm.borrow_mut().take_batch(cpu, op) else {
            return;
        };
        // Seed 003 (lru_add_dead_filter): folio_ref_freeze(folio, 1) picks out folios whose
        // only reference is the batch's; they are freed after the lock loop instead.
        let filter = op == BatchOp::Add && self.v.lru_add_dead_filter;
        let mut filtered = self.mm.borrow_mut().pfn_vec();
        let mut locked: Option<LruvecId> = None;
        for &pfn in &batch {
            let lv = {
                let mut mm = self.mm.borrow_mut();
                if op == BatchOp::Add {
                    let dead = !mm.pages[pfn as usize].test(PG_HELD & !PG_INBATCH);
                    if dead && filter {
                        mm.trace.lru_add_dead_filtered += 1;
                        filtered.push(pfn);
                        continue;
                    }
                    // The mm_lru_insertion tracepoint, and whether the folio was dead.
                    mm.trace.mm_lru_insertion += 1;
                    mm.trace.mm_lru_insertion_dead += dead as u64;
                } else if !mm.pages[pfn as usize].test(PG_LRU) {
                    // folio_test_clear_lru() fails: reclaim isolated it while it waited
                    // (under rule lru_batch_clears_pg_lru the batch holds PG_lru itself).
                    continue;
                }
                mm.folio_lruvec(pfn)
            };
            if locked != Some(lv) {
                if let Some(old) = locked {
                    self.unlock_lruvec(old);
                }
                self.lock_lruvec(lv, site).await;
                locked = Some(lv);
            }
            let mut mm = self.mm.borrow_mut();
            mm.batch_apply(op, lv, pfn);
            self.e.charge(self.c.list_op);
        }
        if let Some(old) = locked {
            self.unlock_lruvec(old);
        }
        // folios_put(): drop the batch references; the filtered folios are freed (and
        // uncharged) without touching an LRU.
        let mut dead = self.mm.borrow_mut().pfn_vec();
        {
            let mut mm = self.mm.borrow_mut();
            mm.release_drained(&batch);
            for &pfn in &batch {
                let last = mm.batch_ref_put(pfn);
                if last && !mm.pages[pfn as usize].test(PG_OWNED) && !filtered.contains(&pfn) {
                    dead.push(pfn);
                }
            }
            for &pfn in &filtered {
                mm.free_folio(pfn);
            }
        }
        self.e.charge(filtered.len() as u64 * self.c.page_free);
        self.folios_put_refs(&dead).await;
        let mut mm = self.mm.borrow_mut();
        mm.put_pfn_vec(batch);
        mm.put_pfn_vec(filtered);
        mm.put_pfn_vec(dead);
    }

    /// folios_put_refs(): drop the last reference of each folio; folios on an LRU are
    /// unlinked under their lruvec's lru_lock, taken once per run of consecutive folios of
    /// the same lruvec (folio_lruvec_relock_irqsave), and freed once the lock is dropped:
    /// mem_cgroup_uncharge_folios and free_unref_folios run after the loop, outside any
    /// lru_lock (6.1's release_pages the same way, with pages_to_free). Folios still held
    /// elsewhere (a batch, an isolating reclaimer, writeback, a read) are left to that
    /// holder, who frees them when it lets go. 6.1's release_pages also drops the lock
    /// every SWAP_CLUSTER_MAX folios of one lruvec (lock_batch); the model's callers hand
    /// it a folio_batch (31) or fewer at a time, so no hold here is longer.
    pub async fn folios_put_refs(&self, folios: &[Pfn]) {
        let mut locked: Option<LruvecId> = None;
        let mut freed = self.mm.borrow_mut().pfn_vec();
        for &pfn in folios {
            let (on_lru, lv) = {
                let mut mm = self.mm.borrow_mut();
                let p = mm.pages[pfn as usize];
                if !p.test(PG_ALLOCATED) || p.test(PG_HELD | PG_DYING) {
                    continue;
                }
                // The refcount reaches zero: from here nobody can take a reference.
                mm.pages[pfn as usize].set(PG_DYING);
                (p.test(PG_LRU), mm.folio_lruvec(pfn))
            };
            if on_lru {
                if locked != Some(lv) {
                    if let Some(old) = locked {
                        self.unlock_lruvec(old);
                    }
                    self.lock_lruvec(lv, Site::FoliosPutRefs).await;
                    locked = Some(lv);
                }
                {
                    let mut mm = self.mm.borrow_mut();
                    mm.lruvec_del_folio(pfn);
                    mm.pages[pfn as usize].clear(PG_LRU);
                }
                self.e.charge(self.c.list_op);
            }
            freed.push(pfn);
        }
        if let Some(old) = locked {
            self.unlock_lruvec(old);
        }
        {
            let mut mm = self.mm.borrow_mut();
            for &pfn in &freed {
                mm.free_folio(pfn);
            }
        }
        self.e.charge(freed.len() as u64 * self.c.page_free);
        self.mm.borrow_mut().put_pfn_vec(freed);
        self.flush_stat_pending(false);
    }

    /// The last reference to a folio is gone: __folio_put -> __page_cache_release (unlink
    /// from its LRU under lru_lock) -> free. A folio that is isolated, batched or under
    /// writeback or locked for a read is freed by whoever holds it when they drop it.
    pub async fn folio_put_last(&self, pfn: Pfn) {
        self.folios_put_refs(&[pfn]).await;
    }

    /// folio_batch_add_and_move(): add to this CPU's batch; drain it when full.
    async fn batch_add(&self, pfn: Pfn, op: BatchOp) {
        if let Some(cpu) = self.folio_batch_add(pfn, op) {
            self.folio_batch_move_lru(cpu, op, Site::FolioBatchMoveLru)
                .await;
        }
    }

    /// folio_batch_add_and_move()'s add: the folio joins this CPU's batch; the CPU when
    /// that filled the batch (the caller then moves it, folio_batch_move_lru). Apart so
    /// that the common case, a batch with room, builds no future.
    #[inline(always)]
    fn folio_batch_add(&self, pfn: Pfn, op: BatchOp) -> Option<u32> {
        let cpu = self.e.cpu();
        let mut mm = self.mm.borrow_mut();
        mm.batch_ref_get(pfn);
        // Rule folio_batch_size_31 (v6.10): 15 folios before it.
        let cap = mm.rules.folio_batch_size();
        let b = mm.batch_mut(cpu, op);
        b.push(pfn);
        (b.len() >= cap).then_some(cpu)
    }

    /// folio_add_lru(): a new folio goes to the LRU through this CPU's lru_add batch.
    /// `in_fault` is lru_gen_in_fault(): with MGLRU a folio added by a page fault gets
    /// PG_active, so it starts in a young generation (reclaim never faults folios in).
    /// Rule mglru_fault_add_active_workingset_only (7.2): only a PG_workingset folio gets
    /// PG_active; another gets PG_referenced through folio_mark_accessed (unless it has it
    /// already), which lru_gen_folio_seq reads for a cache folio (rule
    /// mglru_placement_referenced). Simplified: no PF_MEMALLOC caller faults here.
    pub async fn folio_add_lru(&self, pfn: Pfn, in_fault: bool) {
        {
            let mut mm = self.mm.borrow_mut();
            let p = mm.pages[pfn as usize];
            if in_fault && mm.lru_gen_enabled() && !p.test(PG_UNEVICTABLE) {
                if !mm.rules.mglru_fault_add_active_workingset_only || p.test(PG_WORKINGSET) {
                    mm.pages[pfn as usize].set(PG_ACTIVE);
                } else if !p.test(PG_REFERENCED) {
                    let rules = mm.rules;
                    super::lru_gen::lru_gen_inc_refs(&mut mm.pages, pfn, &rules);
                }
            }
        }
        if let Some(cpu) = self.folio_batch_add(pfn, BatchOp::Add) {
            self.folio_batch_move_lru(cpu, BatchOp::Add, Site::FolioBatchMoveLru)
                .await;
        }
    }

    /// lru_add_drain() / lru_add_drain_cpu(): drain every batch of the current CPU.
    pub async fn lru_add_drain(&self) {
        let cpu = self.e.cpu();
        if self.mm.borrow().batches[cpu as usize].is_empty() {
            return;
        }
        for op in [BatchOp::Add, BatchOp::MoveTail, BatchOp::Activate] {
            self.folio_batch_move_lru(cpu, op, Site::LruAddDrainCpu)
                .await;
        }
    }

    /// folio_activate(): queue a folio on this CPU's lru_activate batch (moved to the
    /// active list, or a young generation, when the batch drains). Only a folio with
    /// PG_lru ([`folio_test_lru`]) can be queued, and one already queued can be queued
    /// again; an active or unevictable one is left alone.
    pub async fn folio_activate(&self, pfn: Pfn) {
        let ok = {
            let mm = self.mm.borrow();
            let p = mm.pages[pfn as usize];
            mm.folio_test_lru(pfn) && !p.test(PG_ACTIVE | PG_UNEVICTABLE)
        };
        if ok {
            self.batch_add(pfn, BatchOp::Activate).await;
        }
    }

    /// folio_rotate_reclaimable(): writeback ended on a PG_reclaim folio; move it to the
    /// inactive tail so the next scan frees it (through the lru_move_tail batch). Not a
    /// locked, dirty or unevictable folio, nor one without PG_lru ([`folio_test_lru`]).
    pub async fn folio_rotate_reclaimable(&self, pfn: Pfn) {
        let ok = {
            let mm = self.mm.borrow();
            let p = mm.pages[pfn as usize];
            mm.folio_test_lru(pfn) && !p.test(PG_LOCKED | PG_DIRTY | PG_UNEVICTABLE)
        };
        if ok {
            self.batch_add(pfn, BatchOp::MoveTail).await;
        }
    }

    /// lru_note_cost() from a caller holding no lru_lock: take `lv`'s lock at `site` and
    /// record the cost as [`Sim::lru_note_cost_unlock_irq`] does. With seed 000's
    /// `vmstat_scan_cost` producers only count (pgreclaim_pageout, pgrotate) and no lock is
    /// taken; prepare_scan_control turns the counts into cost (a restore refault is
    /// already counted in workingset_restore).
    pub async fn lru_note_cost(
        &self,
        lv: LruvecId,
        file: bool,
        nr_io: u64,
        nr_rotated: u64,
        site: Site,
    ) {
        if self.v.vmstat_scan_cost {
            if site != Site::WorkingsetRefault {
                self.count_reclaim_cost(lv, file, nr_io, nr_rotated);
            }
            return;
        }
        self.lock_lruvec(lv, site).await;
        self.lru_note_cost_unlock_irq(lv, file, nr_io, nr_rotated)
            .await;
    }

    /// Seed 000's producers: the pages written and rotated, counted in the lruvec's
    /// statistics for prepare_scan_control.
    pub(crate) fn count_reclaim_cost(&self, lv: LruvecId, file: bool, nr_io: u64, nr_rotated: u64) {
        use super::vmstat::NodeStat::*;
        let mut mm = self.mm.borrow_mut();
        let (po, rot) = if file {
            (PgreclaimPageoutFile, PgrotateFile)
        } else {
            (PgreclaimPageoutAnon, PgrotateAnon)
        };
        mm.mod_lruvec_state(lv, po, nr_io);
        mm.mod_lruvec_state(lv, rot, nr_rotated);
    }

    /// lru_note_cost_unlock_irq(), entered with `lv`'s lru_lock held: record the reclaim
    /// cost (nr_io * SWAP_CLUSTER_MAX + nr_rotated) in `lv` and every ancestor lruvec,
    /// releasing each level's lock and taking the next one's (site lru_note_cost_unlock_irq),
    /// halving both costs when they exceed a quarter of the level's LRU size
    /// (lruvec_page_state, hierarchical and as fresh as the last flush).
    ///
    /// With `lru_note_cost_unlock_irq` (6.17) a cost of 0 only releases the lock. Before,
    /// lru_note_cost took every level's lock whatever the cost: 6.1's shrink_inactive_list,
    /// whose cost is the pages written alone, walks the hierarchy after every chunk.
    pub async fn lru_note_cost_unlock_irq(
        &self,
        lv: LruvecId,
        file: bool,
        nr_io: u64,
        nr_rotated: u64,
    ) {
        let cost = self.reclaim_cost(nr_io, nr_rotated);
        if cost == 0 && self.mm.borrow().rules.lru_note_cost_unlock_irq {
            self.unlock_lruvec(lv);
            return;
        }
        let mut l = lv;
        loop {
            {
                let mut mm = self.mm.borrow_mut();
                let v = &mut mm.lruvecs[l as usize];
                if file {
                    v.file_cost += cost;
                } else {
                    v.anon_cost += cost;
                }
                use super::vmstat::NodeStat::*;
                let lrusize = v.page_state(NrInactiveAnon)
                    + v.page_state(NrActiveAnon)
                    + v.page_state(NrInactiveFile)
                    + v.page_state(NrActiveFile);
                if v.file_cost + v.anon_cost > lrusize / 4 {
                    v.file_cost /= 2;
                    v.anon_cost /= 2;
                }
            }
            self.unlock_lruvec(l);
            let Some(parent) = self.mm.borrow().parent_lruvec(l) else {
                break;
            };
            self.lock_lruvec(parent, Site::LruNoteCost).await;
            l = parent;
        }
    }

    /// The cost of a reclaim event, as lru_note_cost computes it. Since v6.2 (seed 002,
    /// `rotation_cost`) IO weighs SWAP_CLUSTER_MAX times a rotation; before, only pages of
    /// IO counted and rotations were free.
    pub fn reclaim_cost(&self, nr_io: u64, nr_rotated: u64) -> u64 {
        if self.v.rotation_cost {
            nr_io * SWAP_CLUSTER_MAX + nr_rotated
        } else {
            nr_io
        }
    }
}

impl Mm {
    /// parent_lruvec(): the lruvec of the parent memcg on the same node.
    pub fn parent_lruvec(&self, lv: LruvecId) -> Option<LruvecId> {
        self.lruvecs[lv as usize].parent
    }

    /// Is the frame on a list and linked consistently? (For invariants.)
    pub fn lru_linked(&self, pfn: Pfn) -> bool {
        let p = &self.pages[pfn as usize];
        let link = self.pages.links[pfn as usize];
        let lv = &self.lruvecs[self.folio_lruvec(pfn) as usize];
        if super::lru_gen::folio::folio_lru_gen(&self.pages, pfn).is_some() {
            return p.test(PG_LRU)
                && super::lru_gen::folio::gen_list_holds(&self.pages, &lv.lrugen, pfn);
        }
        p.test(PG_LRU)
            && (link.prev != NIL || link.next != NIL || lv.lists[p.lru_list()].head == pfn)
    }
}

impl Sim {
    /// lru_add_drain_all(): drain the LRU batches of every CPU that has folios queued,
    /// and wait until all are drained. The work is queued on each such CPU and runs there
    /// (lru_add_drain_per_cpu -> lru_add_drain_cpu), so each drain takes the lru_lock from
    /// its own CPU under the lru_add_drain_cpu site, while the caller sleeps in flush_work
    /// until the last one is done.
    ///
    /// Simplified: no drain mutex or generation counter (concurrent callers each queue
    /// their own work); the per-CPU worker runs at once, queue_work_on and flush_work cost
    /// nothing; the bh LRUs and mlock batches are not modeled. The hidden kthread CPUs are
    /// CPUs like the others (their batches hold what kswapd and IO completion queued).
    pub async fn lru_add_drain_all(&self) {
        let cpus: Vec<u32> = {
            let mm = self.mm.borrow();
            (0..mm.batches.len() as u32)
                .filter(|&c| !mm.batches[c as usize].is_empty())
                .collect()
        };
        if cpus.is_empty() {
            return;
        }
        let waiter = self.e.current();
        let now = self.e.now();
        let pending = std::rc::Rc::new(std::cell::Cell::new(cpus.len()));
        let done_at = std::rc::Rc::new(std::cell::Cell::new(now));
        for cpu in cpus {
            let (s, pending, done_at) = (self.self_rc(), pending.clone(), done_at.clone());
            self.e.spawn(now, cpu, async move {
                s.lru_add_drain().await;
                done_at.set(done_at.get().max(s.e.now()));
                pending.set(pending.get() - 1);
                if pending.get() == 0 {
                    s.e.wake(waiter, done_at.get());
                }
            });
        }
        self.e.park().await;
    }
}

#[cfg(test)]
mod tests {
    use crate::fixture::{one_node_machine, run_probe};
    use crate::mm::lru_gen::folio_lru_gen;
    use crate::mm::mm_types::*;

    /// A new anonymous folio of memcg 1 with the extra page flags `flags`, added to the
    /// LRU as a fault adds it (folio_add_lru on CPU 0) and drained (lru_add_drain).
    fn added_and_drained(s: &std::rc::Rc<crate::sim::Sim>, flags: u16) -> u32 {
        let pfn = {
            let mut mm = s.mm.borrow_mut();
            let pfn = mm.rmqueue(0).unwrap();
            mm.page_counter_try_charge(1, 1).unwrap();
            let p = &mut mm.pages[pfn as usize];
            p.memcg = 1;
            p.clear(PG_LOCKED);
            p.set(PG_SWAPBACKED | PG_OWNED | flags);
            pfn
        };
        run_probe(s, 0, 0, move |s| async move {
            s.folio_add_lru(pfn, true).await;
            s.lru_add_drain().await;
        });
        pfn
    }

    /// The generation a fault-added swap-cache folio with page flags `flags` lands in
    /// (folio_add_lru, in a fault, then the drain), and its flags, on kernel `version`
    /// with the extra `[kernel]` lines `extra`; with the lruvec's max_seq.
    fn fault_added(version: &str, extra: &str, flags: u16) -> (usize, u64, Page) {
        let s = one_node_machine(
            "64M",
            Some("64M"),
            &format!("lru = \"mglru\"\nversion = \"{version}\"\n{extra}"),
        );
        let pfn = added_and_drained(&s, PG_SWAPCACHE | flags);
        let mm = s.mm.borrow();
        let lv = mm.folio_lruvec(pfn) as usize;
        let gen = folio_lru_gen(&mm.pages, pfn).expect("on an MGLRU list");
        (gen, mm.lruvecs[lv].lrugen.max_seq, mm.pages[pfn as usize])
    }

    #[test]
    fn a_fault_adds_only_workingset_folios_as_active_from_7_2() {
        // A swap-in that stays in the swap cache, no PG_workingset. 6.18: PG_active, so
        // lru_gen_folio_seq gives max_seq - MIN_NR_GENS + 1 = max_seq - 1. 7.2 on:
        // PG_referenced instead (folio_mark_accessed), which places a swap-cache folio at
        // max_seq - (MAX_NR_GENS - 1) + 1 = max_seq - 2 (the initial window is 0..=3).
        let gen_of = |seq: u64| (seq % 4) as usize;
        let (g, max, p) = fault_added("6.18", "", 0);
        assert_eq!(g, gen_of(max - 1));
        assert!(!p.test(PG_REFERENCED));
        let (g, max, p) = fault_added("7.3", "", 0);
        assert_eq!(g, gen_of(max - 2));
        assert!(p.test(PG_REFERENCED) && !p.test(PG_ACTIVE));
        // The rule alone on 6.18: PG_referenced, which 6.18's placement ignores, so the
        // folio goes to max_seq - MAX_NR_GENS + 1 = max_seq - 3, the oldest (min_seq 0).
        let (g, max, p) = fault_added(
            "6.18",
            "rules.mglru_fault_add_active_workingset_only = true",
            0,
        );
        assert_eq!(g, gen_of(max - 3));
        assert!(p.test(PG_REFERENCED));
        // A workingset folio is added active in both: MIN_NR_GENS - 1 = 1, at max_seq.
        for v in ["6.18", "7.3"] {
            let (g, max, _) = fault_added(v, "", PG_WORKINGSET);
            assert_eq!(g, gen_of(max), "{v}");
        }
    }

    #[test]
    fn a_drain_leaves_its_empty_batches_and_keeps_the_spare_folio_lists() {
        // Eight spare lists; each round adds one folio to the lru_add batch and drains:
        // the lru_add batch swaps a spare in and returns to the spares when it is done,
        // while the empty lru_move_tail and lru_activate batches are left in place (they
        // used to take a spare each and drop the empty list: eight spares gone after
        // four rounds, then an allocation per empty batch drained).
        let s = one_node_machine("64M", Some("64M"), "");
        s.mm.borrow_mut().pfn_vecs = (0..8).map(|_| Vec::with_capacity(64)).collect();
        for _ in 0..10 {
            let pfn = added_and_drained(&s, 0);
            let mm = s.mm.borrow();
            assert!(
                mm.pages[pfn as usize].test(PG_LRU),
                "the drain put it on its LRU"
            );
            assert_eq!(mm.pfn_vecs.len(), 8);
        }
    }
}
