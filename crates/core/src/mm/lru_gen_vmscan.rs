//! The multi-gen LRU's reclaim paths: the half of mm/vmscan.c's lru_gen that sleeps or
//! takes locks in turn, built on the synchronous core in `lru_gen.rs`.
//!
//! ```text
//!  global (root) reclaim: shrink_node -> lru_gen_shrink_node -> shrink_many
//!        (the node's memcg LRU from a random bin; seed 001: mem_cgroup_iter instead)
//!          -> shrink_one (memory.min/low, rotation op) -> try_to_shrink_lruvec
//!  memcg reclaim: shrink_node -> shrink_node_memcgs -> shrink_lruvec -> lru_gen_shrink_lruvec
//!          -> try_to_shrink_lruvec
//!  try_to_shrink_lruvec: get_nr_to_scan (may age: try_to_inc_max_seq) then evict_folios
//!          until the scan target, should_abort_scan, or nothing more to evict
//!  evict_folios: [lru_lock] isolate_folios -> scan_folios (sort_folio / isolate_folio)
//!          try_to_inc_min_seq [unlock] shrink_folio_list, one retry pass for clean
//!          folios [lru_lock] move_folios_to_lru [unlock]
//!  kswapd: balance_pgdat -> lru_gen_age_node (set_initial_priority, protection, min_ttl)
//! ```
//! The classic paths MGLRU bypasses are bypassed where the kernel bypasses them:
//! prepare_scan_control and snapshot_refaults return at once, shrink_lruvec and shrink_node
//! branch here, kswapd_age_node becomes lru_gen_age_node, and neither eviction nor refault
//! records lru_note_cost; NR_ISOLATED_* is not counted and too_many_isolated not consulted.
//!
//! Simplified: one zone (scan_folios' zone loop has one turn, no PGSCAN_SKIP), no dirty
//! file folios (sc->nr.file_taken and unqueued_dirty stay 0, the flusher is never woken),
//! no demotion, no shrinker other than the shadow nodes', memcgs are never offlined (every
//! memcg is online and pinnable), and aging without the page-table walk (lru_gen enabled
//! without 0x2) relies on eviction's rmap walk alone.

use super::lru_gen::*;
use super::mm_types::*;
use super::vmscan::ScanControl;
use super::vmstat::{NodeStat, VmEvent};
use super::{LruvecId, MemcgId, Mm, Pfn};
use crate::engine::Site;
use crate::sim::Sim;

/// compact_gap(0): order-0 reclaim's floor in should_abort_scan.
const COMPACT_GAP_ORDER0: u64 = 2;

/// What evict_folios' isolation under the lru_lock produced.
struct Isolated {
    ty: usize,
    scanned: u64,
}

impl ScanControl {
    /// root_reclaim(): global reclaim, or reclaim on behalf of the root memcg
    /// (memory.reclaim on the root).
    #[inline]
    pub fn root_reclaim(&self) -> bool {
        matches!(self.target, None | Some(0))
    }
}

impl Mm {
    /// lru_gen_init_lruvec() for every lruvec, lru_gen_init_memcg(), and
    /// lru_gen_online_memcg() for every memcg in creation order (the root first), each
    /// drawing one random bin for all its nodes. Called once at boot with MGLRU on.
    pub fn lru_gen_init(&mut self, rng: &mut crate::engine::rng::Rng) {
        for lv in self.lruvecs.iter_mut() {
            lv.lrugen = LruGenFolio::init(true, 0);
        }
        self.mm_state = (0..self.lruvecs.len())
            .map(|_| LruGenMmState::new())
            .collect();
        self.mm_lists = (0..self.memcgs.len())
            .map(|_| LruGenMmList::default())
            .collect();
        self.lru_gen_walks = vec![0; self.lruvecs.len()];
        for m in 0..self.memcgs.len() {
            let bin = random_bin(rng);
            for n in 0..self.nodes.len() {
                let lv = self.memcgs[m].lruvecs[n];
                let Mm { nodes, lruvecs, .. } = self;
                lru_gen_online_memcg(
                    &mut nodes[n].memcg_lru,
                    lv,
                    &mut lruvecs[lv as usize].lrugen,
                    bin,
                );
            }
        }
    }

    /// get_swappiness(): 0 (file only) when the reclaim may not swap or the memcg has
    /// fewer than MIN_LRU_BATCH swap slots left; else memory.reclaim's swappiness= or the
    /// memcg's (sc_swappiness).
    pub fn lru_gen_swappiness(&self, lv: LruvecId, sc: &ScanControl) -> u32 {
        let memcg = self.lruvecs[lv as usize].memcg;
        let sw = sc
            .swappiness
            .unwrap_or_else(|| self.mem_cgroup_swappiness(memcg));
        get_swappiness(sc.may_swap, self.mem_cgroup_get_nr_swap_pages(memcg), sw)
    }

    /// scan_folios(): sort or isolate folios from the tail of the oldest generation of
    /// `ty`, at most min(nr_to_scan, MAX_LRU_BATCH) of them (v6.18; older kernels always
    /// MAX_LRU_BATCH), stopping at MIN_LRU_BATCH isolated or skipped.
    /// Counts PGSCAN_* (isolated) and PGREFILL (sorted), globally only for global reclaim.
    /// Returns the folios scanned (0 when the type has only MIN_NR_GENS generations, or
    /// when nothing was isolated although the batch was not used up). Caller holds
    /// lru_lock.
    fn scan_folios(
        &mut self,
        lv: LruvecId,
        sc: &ScanControl,
        ty: usize,
        tier: usize,
        nr_to_scan: u64,
        list: &mut Vec<Pfn>,
    ) -> u64 {
        let l = lv as usize;
        if get_nr_gens(&self.lruvecs[l].lrugen, ty) == MIN_NR_GENS {
            return 0;
        }
        let gen = lru_gen_from_seq(self.lruvecs[l].lrugen.min_seq[ty]);
        let (mut scanned, mut sorted, mut isolated, mut skipped) = (0u64, 0u64, 0u64, 0u64);
        let mut remaining = nr_to_scan.clamp(1, MAX_LRU_BATCH);
        let mut moved = self.pfn_vec();
        loop {
            let pfn = self.lruvecs[l].lrugen.folios[gen][ty].tail;
            if pfn == super::NIL {
                break;
            }
            scanned += 1;
            let next = self.pages.links[pfn as usize].prev;
            if next != super::NIL {
                // The folio scanned after this one: its frame, generation byte and links.
                let n = next as usize;
                super::prefetch(&self.pages[n]);
                super::prefetch(&self.pages.lru_gen[n]);
                super::prefetch(&self.pages.links[n]);
            }
            let Mm { pages, lruvecs, .. } = self;
            if sort_folio(pages, &mut lruvecs[l], pfn, tier, true).sorted() {
                sorted += 1;
            } else if isolate_folio(pages, &mut lruvecs[l], pfn, true) {
                list.push(pfn);
                isolated += 1;
            } else {
                lru_gen_list_unlink(pages, &mut lruvecs[l].lrugen, pfn);
                moved.push(pfn);
                skipped += 1;
            }
            remaining -= 1;
            if remaining == 0 || isolated.max(skipped) >= MIN_LRU_BATCH {
                break;
            }
        }
        {
            let Mm { pages, lruvecs, .. } = self;
            lru_gen_list_splice(pages, &mut lruvecs[l].lrugen, gen, &moved);
        }
        self.put_pfn_vec(moved);
        let memcg = self.lruvecs[l].memcg;
        let item = sc.reclaimer_offset().pgscan();
        self.count_reclaim_event(memcg, item, isolated, !sc.cgroup_reclaim());
        self.count_reclaim_event(memcg, VmEvent::Pgrefill, sorted, !sc.cgroup_reclaim());
        let by_type = if ty == LRU_GEN_FILE {
            VmEvent::PgscanFile
        } else {
            VmEvent::PgscanAnon
        };
        self.count_event(by_type, isolated);
        if isolated > 0 || remaining == 0 {
            scanned
        } else {
            0
        }
    }

    /// isolate_folios(): scan the type get_type_to_scan picks, at the tier get_tier_idx
    /// allows (all tiers when the tiers are switched off), then the other evictable type
    /// if the first gave nothing. Caller holds lru_lock.
    fn isolate_folios(
        &mut self,
        lv: LruvecId,
        sc: &ScanControl,
        swappiness: u32,
        tiers: bool,
        nr_to_scan: u64,
        list: &mut Vec<Pfn>,
    ) -> Isolated {
        let mut ty = get_type_to_scan(&self.lruvecs[lv as usize].lrugen, swappiness);
        let mut out = Isolated { ty, scanned: 0 };
        for _ in (0..ANON_AND_FILE).filter(|&t| type_is_evictable(t, swappiness)) {
            let tier = if tiers {
                get_tier_idx(&self.lruvecs[lv as usize].lrugen, ty)
            } else {
                MAX_NR_TIERS - 1
            };
            out.ty = ty;
            out.scanned = self.scan_folios(lv, sc, ty, tier, nr_to_scan, list);
            if out.scanned > 0 {
                return out;
            }
            ty = 1 - ty;
        }
        out
    }

    /// should_abort_scan(): root reclaim stops once it has reclaimed its target; kswapd
    /// also once every eligible zone is MIN_LRU_BATCH above its HIGH watermark. Memcg
    /// reclaim never aborts (fairness among the memcgs of the subtree).
    pub fn should_abort_scan(&self, lv: LruvecId, sc: &ScanControl) -> bool {
        if !sc.root_reclaim() {
            return false;
        }
        if sc.nr_reclaimed >= sc.nr_to_reclaim.max(COMPACT_GAP_ORDER0) {
            return true;
        }
        if !sc.kswapd {
            return false;
        }
        let nd = &self.nodes[self.lruvecs[lv as usize].node as usize];
        nd.free > nd.wmark[super::mmzone::WMARK_HIGH] + MIN_LRU_BATCH
    }

    /// lruvec_is_reclaimable(): not below memory.min, big enough to matter, and its oldest
    /// evictable generation older than `min_ttl`.
    fn lruvec_is_reclaimable(
        &self,
        lv: LruvecId,
        sc: &ScanControl,
        min_ttl: u64,
        now: u64,
    ) -> bool {
        let memcg = self.lruvecs[lv as usize].memcg;
        if self.mem_cgroup_below_min(0, memcg) {
            return false;
        }
        let sw = self.lru_gen_swappiness(lv, sc);
        let g = &self.lruvecs[lv as usize].lrugen;
        lruvec_is_sizable(g, sw, true, sc.priority) && lru_gen_oldest_expired(g, sw, min_ttl, now)
    }

    /// The reclaimable pages set_initial_priority() sizes from: the node's inactive file,
    /// plus its inactive anon when swap space is left.
    fn lru_gen_reclaimable(&self, node: u32) -> u64 {
        let mut r = self.node_page_state(node, NodeStat::NrInactiveFile);
        if self.can_reclaim_anon_pages(0) {
            r += self.node_page_state(node, NodeStat::NrInactiveAnon);
        }
        r
    }
}

impl Sim {
    /// lru_gen_shrink_node(): root reclaim with MGLRU. Skipped when the reclaim may not
    /// write or unmap (unmapped clean folios are already taken first). Otherwise drain the
    /// local batches, set_initial_priority, and walk the memcgs (shrink_many); kswapd
    /// counts only this pass's reclaim for should_abort_scan. Progress resets
    /// kswapd_failures.
    pub async fn lru_gen_shrink_node(&self, node: u32, sc: &mut ScanControl) {
        let reclaimed = sc.nr_reclaimed;
        if sc.may_writepage && sc.may_unmap {
            self.lru_add_drain().await;
            sc.priority = {
                let mm = self.mm.borrow();
                set_initial_priority(sc.priority, sc.nr_to_reclaim, mm.lru_gen_reclaimable(node))
            };
            if sc.kswapd {
                sc.nr_reclaimed = 0;
            }
            if self.v.mglru_memcg_iter {
                self.shrink_many_memcg_iter(node, sc).await;
            } else {
                self.shrink_many(node, sc).await;
            }
            if sc.kswapd {
                sc.nr_reclaimed += reclaimed;
            }
        }
        if sc.nr_reclaimed > reclaimed {
            self.mm.borrow_mut().nodes[node as usize].kswapd_failures = 0;
        }
        self.after_reclaim_pass();
    }

    /// shrink_many(): walk the old generation of the node's memcg LRU, one bin after
    /// another from a random first bin. Each lruvec's shrink_one answers how to rotate
    /// it, applied when the walk moves on; the walk stops on should_abort_scan, and
    /// restarts a bin whose end marker shows the generation changed under it.
    async fn shrink_many(&self, node: u32, sc: &mut ScanControl) {
        let gen = get_memcg_gen(self.mm.borrow().nodes[node as usize].memcg_lru.seq);
        let first_bin = self.memcg_lru_bin();
        let mut bin = first_bin;
        loop {
            let mut op = MemcgLruOp::Nop;
            let mut last: Option<LruvecId> = None;
            let mut pos = self.mm.borrow().nodes[node as usize]
                .memcg_lru
                .fifo_first(gen, bin);
            let mut aborted = false;
            while let MemcgLruPos::Entry(y) = pos {
                if let Some(prev) = last.filter(|_| op != MemcgLruOp::Nop) {
                    self.lru_gen_rotate_memcg(prev, op).await;
                    op = MemcgLruOp::Nop;
                }
                let other_gen = self.mm.borrow().lruvecs[y as usize].lrugen.gen as usize != gen;
                if other_gen {
                    pos = self.memcg_lru_next(node, y);
                    continue;
                }
                op = self.shrink_one(y, sc).await;
                last = Some(y);
                if self.mm.borrow().should_abort_scan(y, sc) {
                    aborted = true;
                    break;
                }
                pos = self.memcg_lru_next(node, y);
            }
            if let Some(prev) = last.filter(|_| op != MemcgLruOp::Nop) {
                self.lru_gen_rotate_memcg(prev, op).await;
            }
            if aborted {
                return;
            }
            if pos != MemcgLruPos::Nulls(gen) {
                continue; // raced with a rotation: restart this bin
            }
            bin = get_memcg_bin(bin + 1);
            if bin == first_bin {
                return;
            }
        }
    }

    /// The successor of `lv` on the memcg LRU list that holds it now.
    fn memcg_lru_next(&self, node: u32, lv: LruvecId) -> MemcgLruPos {
        let mm = self.mm.borrow();
        mm.nodes[node as usize]
            .memcg_lru
            .fifo_next(lv, &mm.lruvecs[lv as usize].lrugen)
    }

    /// shrink_many() as seed 001's patch makes it (`mglru_memcg_iter`): mem_cgroup_iter
    /// over the target's subtree, with a shared reclaim cookie unless this is kswapd or a
    /// full walk; memory.min skips, memory.low skips unless memcg_low_reclaim (then
    /// MEMCG_LOW); shrink_one without rotation; stop on should_abort_scan, and a partial
    /// walk once the target is met.
    async fn shrink_many_memcg_iter(&self, node: u32, sc: &mut ScanControl) {
        let target = sc.target_memcg();
        let partial = !sc.kswapd && !sc.memcg_full_walk;
        let mut cookie = super::memcontrol::ReclaimCookie {
            node,
            generation: 0,
        };
        let mut prev: Option<MemcgId> = None;
        loop {
            let next = {
                let mut mm = self.mm.borrow_mut();
                mm.mem_cgroup_iter(target, prev, partial.then_some(&mut cookie))
            };
            let Some(memcg) = next else { break };
            prev = Some(memcg);
            let lv = {
                let mut mm = self.mm.borrow_mut();
                mm.mem_cgroup_calculate_protection(target, memcg);
                if mm.mem_cgroup_below_min(target, memcg) {
                    continue;
                }
                if mm.mem_cgroup_below_low(target, memcg) {
                    if !sc.memcg_low_reclaim {
                        sc.memcg_low_skipped = true;
                        continue;
                    }
                    mm.memcg_memory_event(memcg, super::memcontrol::MemcgEvent::Low);
                }
                mm.lruvec_of(memcg, node)
            };
            self.try_to_shrink_lruvec(lv, sc).await;
            self.shrink_slab(memcg, sc.priority);
            let stop = self.mm.borrow().should_abort_scan(lv, sc)
                || (partial && sc.nr_reclaimed >= sc.nr_to_reclaim);
            if stop || self.current_killed() {
                break;
            }
        }
    }

    /// shrink_one(): one memcg's lruvec in shrink_many. Below memory.min (as
    /// lru_gen_age_node last computed it): young. Below memory.low: once to the tail, the
    /// next time reclaimed with MEMCG_LOW. After reclaim: aged means young; not aged but
    /// sizable means stay; otherwise once to the tail, then young.
    async fn shrink_one(&self, lv: LruvecId, sc: &mut ScanControl) -> MemcgLruOp {
        let (memcg, seg) = {
            let mm = self.mm.borrow();
            let l = &mm.lruvecs[lv as usize];
            (l.memcg, l.lrugen.seg)
        };
        {
            let mut mm = self.mm.borrow_mut();
            if mm.mem_cgroup_below_min(0, memcg) {
                return MemcgLruOp::Young;
            }
            if mm.mem_cgroup_below_low(0, memcg) {
                if seg != MEMCG_LRU_TAIL {
                    return MemcgLruOp::Tail;
                }
                mm.memcg_memory_event(memcg, super::memcontrol::MemcgEvent::Low);
            }
        }
        let aged = self.try_to_shrink_lruvec(lv, sc).await;
        self.shrink_slab(memcg, sc.priority);
        if aged {
            return MemcgLruOp::Young;
        }
        let sizable = {
            let mm = self.mm.borrow();
            let sw = mm.lru_gen_swappiness(lv, sc);
            lruvec_is_sizable(&mm.lruvecs[lv as usize].lrugen, sw, true, sc.priority)
        };
        if sizable {
            MemcgLruOp::Nop
        } else if seg != MEMCG_LRU_TAIL {
            MemcgLruOp::Tail
        } else {
            MemcgLruOp::Young
        }
    }

    /// lru_gen_shrink_lruvec(): memcg (non-root) reclaim of one lruvec; an lruvec that had
    /// to be aged moves to the young generation of the memcg LRU (not with seed 001's
    /// patch, which has no memcg LRU).
    pub async fn lru_gen_shrink_lruvec(&self, lv: LruvecId, sc: &mut ScanControl) {
        self.lru_add_drain().await;
        let plugged = self.blk_start_plug(sc);
        if self.try_to_shrink_lruvec(lv, sc).await && !self.v.mglru_memcg_iter {
            self.lru_gen_rotate_memcg(lv, MemcgLruOp::Young).await;
        }
        self.blk_finish_plug(sc, plugged).await;
    }

    /// try_to_shrink_lruvec(): evict until get_nr_to_scan's target is scanned, nothing
    /// more can be evicted, or should_abort_scan. Returns whether the lruvec was just aged
    /// or is below memory.min (get_nr_to_scan's -1): the caller rotates it.
    async fn try_to_shrink_lruvec(&self, lv: LruvecId, sc: &mut ScanControl) -> bool {
        self.e.charge(self.c.shrink_lruvec_setup);
        let swappiness = self.mm.borrow().lru_gen_swappiness(lv, sc);
        let mut scanned = 0u64;
        loop {
            let nr_to_scan = self.lru_gen_get_nr_to_scan(lv, sc, swappiness).await;
            let Some(nr) = nr_to_scan.filter(|&n| n > 0) else {
                return nr_to_scan.is_none();
            };
            let delta = self.evict_folios(nr, lv, sc, swappiness).await;
            if delta == 0 {
                return false;
            }
            scanned += delta;
            if scanned >= nr || self.mm.borrow().should_abort_scan(lv, sc) {
                return false;
            }
            if self.current_killed() {
                return false;
            }
            self.e.sync().await;
        }
    }

    /// get_nr_to_scan(): Some(pages to scan), or None for the kernel's -1 (below
    /// memory.min, or aged just now: stop and rotate). Aging that is only due is skipped
    /// at DEF_PRIORITY; otherwise try_to_inc_max_seq runs, and its failure means 0.
    async fn lru_gen_get_nr_to_scan(
        &self,
        lv: LruvecId,
        sc: &mut ScanControl,
        swappiness: u32,
    ) -> Option<u64> {
        let verdict = {
            let mm = self.mm.borrow();
            let memcg = mm.lruvecs[lv as usize].memcg;
            let target = sc.target_memcg();
            let below_min = mm.mem_cgroup_below_min(target, memcg);
            let (min, low) = mm.mem_cgroup_protection(target, memcg);
            let usage = mm.memcgs[memcg as usize].usage;
            let low_reclaim = sc.memcg_low_reclaim;
            let mut low_skipped = false;
            let v = get_nr_to_scan(
                &mm.lruvecs[lv as usize].lrugen,
                swappiness,
                below_min,
                true,
                sc.priority,
                |nr| {
                    let (n, skipped) =
                        apply_proportional_protection(nr, min, low, usage, low_reclaim);
                    low_skipped = skipped;
                    n
                },
            );
            sc.memcg_low_skipped |= low_skipped;
            v
        };
        match verdict {
            NrToScan::Stop => None,
            NrToScan::Scan(n) => Some(n),
            NrToScan::Aging { max_seq } => {
                if self
                    .try_to_inc_max_seq(lv, max_seq, swappiness, false)
                    .await
                {
                    None
                } else {
                    Some(0)
                }
            }
        }
    }

    /// evict_folios(): isolate a batch from the oldest generation under lru_lock, reclaim
    /// it, retry once the clean folios that may have missed folio_rotate_reclaimable, and
    /// put the rest back (none into the oldest generation). Returns the folios scanned
    /// (plus one when min_seq advanced), 0 when eviction must wait for aging.
    pub(crate) async fn evict_folios(
        &self,
        nr_to_scan: u64,
        lv: LruvecId,
        sc: &mut ScanControl,
        swappiness: u32,
    ) -> u64 {
        self.lock_lruvec(lv, Site::EvictFolios).await;
        let mut list = self.mm.borrow_mut().pfn_vec();
        let (ty, scanned) = {
            let mut mm = self.mm.borrow_mut();
            let tiers = self.v.mglru_tiers;
            let iso = mm.isolate_folios(lv, sc, swappiness, tiers, nr_to_scan, &mut list);
            let g = &mut mm.lruvecs[lv as usize].lrugen;
            let mut scanned = iso.scanned + try_to_inc_min_seq(g, swappiness) as u64;
            if evictable_min_seq(g.min_seq, swappiness) + MIN_NR_GENS > g.max_seq {
                scanned = 0;
            }
            (iso.ty, scanned)
        };
        self.e.charge(scanned * self.c.isolate_folio);
        self.unlock_lruvec(lv);
        let mut skip_retry = false;
        while !list.is_empty() {
            let stat = self.shrink_folio_list(&mut list, lv, sc).await;
            sc.nr_reclaimed += stat.nr_reclaimed;
            let clean = self.lru_gen_sort_kept(lv, &mut list, skip_retry);
            self.lru_gen_putback(lv, sc, ty, &list, stat.nr_reclaimed)
                .await;
            self.mm
                .borrow_mut()
                .put_pfn_vec(std::mem::replace(&mut list, clean));
            skip_retry = true;
        }
        self.mm.borrow_mut().put_pfn_vec(list);
        scanned
    }

    /// evict_folios' look at what shrink_folio_list kept, from the last: folios that are
    /// inactive, unmapped, clean and not under writeback go to a second pass (they may have
    /// missed folio_rotate_reclaimable); the rest stay in `list`, kept out of the oldest
    /// generation. Returns the second-pass folios.
    fn lru_gen_sort_kept(&self, lv: LruvecId, list: &mut Vec<Pfn>, skip_retry: bool) -> Vec<Pfn> {
        let mut mm = self.mm.borrow_mut();
        let mut clean = mm.pfn_vec();
        let mut keep = mm.pfn_vec();
        for &pfn in list.iter().rev() {
            let p = mm.pages[pfn as usize];
            let retry = !skip_retry
                && !p.test(PG_ACTIVE)
                && !mm.folio_mapped(pfn)
                && !p.test(PG_DIRTY)
                && !p.test(PG_WRITEBACK);
            if retry {
                clean.push(pfn);
                continue;
            }
            let Mm { pages, lruvecs, .. } = &mut *mm;
            evict_folios_keep_off_oldest(pages, &lruvecs[lv as usize].lrugen, pfn);
            keep.push(pfn);
        }
        keep.reverse();
        clean.reverse();
        mm.put_pfn_vec(std::mem::replace(list, keep));
        clean
    }

    /// evict_folios' putback: move_folios_to_lru under lru_lock and PGSTEAL_* of the pass.
    async fn lru_gen_putback(
        &self,
        lv: LruvecId,
        sc: &ScanControl,
        ty: usize,
        list: &[Pfn],
        reclaimed: u64,
    ) {
        self.lock_lruvec(lv, Site::EvictFolios).await;
        let dead = {
            let mut mm = self.mm.borrow_mut();
            let mut dead = mm.pfn_vec();
            mm.move_folios_to_lru(lv, list, &mut dead);
            let memcg = mm.lruvecs[lv as usize].memcg;
            mm.count_reclaim_event(
                memcg,
                sc.reclaimer_offset().pgsteal(),
                reclaimed,
                !sc.cgroup_reclaim(),
            );
            let by_type = if ty == LRU_GEN_FILE {
                VmEvent::PgstealFile
            } else {
                VmEvent::PgstealAnon
            };
            mm.count_event(by_type, reclaimed);
            dead
        };
        self.e.charge(list.len() as u64 * self.c.list_op);
        self.unlock_lruvec(lv);
        self.free_unref_folios(dead);
    }

    /// try_to_inc_max_seq(): age the lruvec from `seq`: unless another aging already
    /// covered it (mm_state.seq), walk the page tables of the memcg's processes (lru_gen
    /// 0x2; without it only the mm_list iteration's bookkeeping), then inc_max_seq under
    /// lru_lock, giving the lock up between batches of inc_min_seq. Returns whether
    /// max_seq advanced.
    pub async fn try_to_inc_max_seq(
        &self,
        lv: LruvecId,
        seq: u64,
        swappiness: u32,
        force_scan: bool,
    ) -> bool {
        let success = {
            let walk_mmu = self.mm.borrow().should_walk_mmu();
            if seq <= self.mm.borrow().mm_state[lv as usize].seq {
                return false;
            }
            if walk_mmu {
                self.lru_gen_walk_mms(lv, seq, swappiness, force_scan).await
            } else {
                let mut mm = self.mm.borrow_mut();
                iterate_mm_list_nowalk(&mut mm.mm_state[lv as usize], seq)
            }
        };
        if !success {
            return false;
        }
        loop {
            self.lock_lruvec(lv, Site::IncMaxSeq).await;
            let r = {
                let now = self.e.now();
                let mut mm = self.mm.borrow_mut();
                let Mm { pages, lruvecs, .. } = &mut *mm;
                inc_max_seq(pages, &mut lruvecs[lv as usize], seq, swappiness, now)
            };
            self.e.charge(self.c.shrink_lruvec_setup);
            self.unlock_lruvec(lv);
            match r {
                IncMaxSeq::Done => return true,
                IncMaxSeq::Stale => return false,
                IncMaxSeq::Busy => {
                    self.e.charge(MAX_LRU_BATCH * self.c.list_op);
                    self.e.sync().await;
                }
            }
        }
    }

    /// lru_gen_age_node(): kswapd's look at the node before balancing it: the initial
    /// priority, every memcg's protection, and the min_ttl rule: with min_ttl set, if no
    /// memcg has an evictable generation older than it (or all are too small or below
    /// memory.min), invoke the OOM killer rather than thrash.
    pub async fn lru_gen_age_node(&self, node: u32, sc: &mut ScanControl) {
        let min_ttl = self.mm.borrow().lru_gen_min_ttl;
        let reclaimable = {
            let mut mm = self.mm.borrow_mut();
            sc.priority =
                set_initial_priority(sc.priority, sc.nr_to_reclaim, mm.lru_gen_reclaimable(node));
            let now = self.e.now();
            let mut reclaimable = min_ttl == 0;
            let order = mm.memcg_preorder.clone();
            for m in order {
                mm.mem_cgroup_calculate_protection(0, m);
                if !reclaimable {
                    let lv = mm.lruvec_of(m, node);
                    reclaimable = mm.lruvec_is_reclaimable(lv, sc, min_ttl, now);
                }
            }
            reclaimable
        };
        if !reclaimable && self.mutex_trylock_oom() {
            self.out_of_memory(None).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_reclaim_is_global_or_the_root_memcg() {
        assert!(ScanControl::new(32, None, false).root_reclaim());
        assert!(ScanControl::new(32, Some(0), false).root_reclaim());
        assert!(!ScanControl::new(32, Some(3), false).root_reclaim());
    }
}
