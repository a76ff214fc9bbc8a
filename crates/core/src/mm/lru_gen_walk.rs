//! MGLRU's accessed-bit harvesting: the page-table walk of aging and the rmap look-around
//! of eviction (the "page table walk" and "rmap/PT walk feedback" parts of mm/vmscan.c).
//!
//! Aging (try_to_inc_max_seq) walks the page tables of every process of the memcg that ran
//! on the node since the previous walk (mm_list, lru_gen_use_mm). Each PTE table whose
//! non-leaf PMD entry is young (lru_gen 0x4) and which the Bloom filter of this generation
//! lets through is scanned: every young PTE mapping a folio of this memcg and node is
//! cleared and its folio promoted to max_seq (folio_update_gen); tables where at least one
//! PTE in eight was young are recorded in the next generation's filter. Eviction's rmap
//! walk (folio_referenced) feeds the same filter: when it finds a young PTE it also clears
//! the young PTEs around it, within the PTE table and a 64-PTE window
//! (lru_gen_look_around), promoting their folios.
//!
//! ```text
//!   mm_list(memcg) --iterate_mm_list--> mm --walk_mm--> PMD: young? in Bloom(seq)?
//!        --walk_pte_range--> young PTE of this memcg/node: clear, folio_update_gen(max_seq)
//!        --> if young*8 >= total: Bloom(seq+1) += PMD
//! ```
//! Simplified: an mm is one VMA (its area, anonymous or a MAP_SHARED file) and a PTE table
//! covers 512 virtual pages of it; the non-leaf accessed bit of each table is a bitmap of
//! the mm (`MmStruct::pmd_young`), set whenever one of its PTEs is made young; an mm counts
//! as used on a node (lru_gen_use_mm) after each of its page faults rather than at each
//! context switch; the mmap_lock is never contended; the rmap look-around applies its
//! promotions at once rather than in the walk's batch.

use super::lru_gen::*;
use super::mm_types::*;
use super::{LruvecId, Mm, Pfn, PTRS_PER_PTE};
use crate::engine::Site;
use crate::sim::Sim;

/// What one PTE table's scan found.
struct PteScan {
    total: u64,
    young: u64,
}

/// How many PTEs ahead walk_pte_range prefetches the frame a PTE points to.
const WALK_PREFETCH: usize = 8;

impl Mm {
    /// Does the folio at `pfn` belong to lruvec `lv`'s memcg and node, on its MGLRU lists
    /// (get_pfn_folio)?
    fn get_pfn_folio(&self, pfn: Pfn, lv: LruvecId) -> bool {
        let l = &self.lruvecs[lv as usize];
        folio_lru_gen(&self.pages, pfn).is_some()
            && self.pages[pfn as usize].memcg == l.memcg
            && self.pfn_node(pfn) == l.node
    }

    /// walk_pte_range() over the PTE table `pmd` of mm `mmid`: clear each young PTE of a
    /// folio of `lv`, promote the folio into the walk's generation, mark a dirty swap-cache
    /// folio dirty (its swap copy is stale).
    fn walk_pte_range(
        &mut self,
        lv: LruvecId,
        mmid: u32,
        pmd: usize,
        walk: &mut LruGenMmWalk,
    ) -> PteScan {
        let new_gen = lru_gen_from_seq(walk.seq);
        let start = pmd * PTRS_PER_PTE;
        let end = (start + PTRS_PER_PTE).min(self.mms[mmid as usize].ptes.len());
        let mut scan = PteScan { total: 0, young: 0 };
        for vpn in start..end {
            scan.total += 1;
            // The young PTEs of a random-access workload point all over the frame table:
            // fetch the frame and its generation byte a few PTEs ahead.
            if let Some(&ahead) = self.mms[mmid as usize].ptes.get(vpn + WALK_PREFETCH) {
                if pte::present(ahead) {
                    let f = pte::pfn(ahead) as usize;
                    super::prefetch(&self.pages[f]);
                    super::prefetch(&self.pages.lru_gen[f]);
                }
            }
            let v = self.mms[mmid as usize].ptes[vpn];
            if !pte::present(v) || v & pte::YOUNG == 0 {
                continue;
            }
            let pfn = pte::pfn(v);
            if !self.get_pfn_folio(pfn, lv) {
                continue;
            }
            self.mms[mmid as usize].ptes[vpn] = v & !pte::YOUNG;
            scan.young += 1;
            walk.mm_stats[MM_LEAF_YOUNG] += 1;
            if v & pte::DIRTY != 0 && self.pages[pfn as usize].test(PG_SWAPCACHE) {
                self.pages[pfn as usize].set(PG_DIRTY);
            }
            walk_update_folio(&mut self.pages, Some(walk), pfn, new_gen);
        }
        walk.mm_stats[MM_LEAF_TOTAL] += scan.total;
        scan
    }

    /// should_skip_vma() for the one VMA of mm `mmid`: anonymous memory is skipped when
    /// anon may not be reclaimed (swappiness 0), file memory when only anon may be.
    fn should_skip_vma(&self, mmid: u32, swappiness: u32) -> bool {
        if self.mms[mmid as usize].file.is_some() {
            swappiness > MAX_SWAPPINESS
        } else {
            swappiness == 0
        }
    }

    /// pmdp_test_and_clear_young() on the non-leaf PMD entry of table `pmd`.
    fn pmd_test_and_clear_young(&mut self, mmid: u32, pmd: usize) -> bool {
        let w = &mut self.mms[mmid as usize].pmd_young[pmd / 64];
        let young = *w & (1 << (pmd % 64)) != 0;
        *w &= !(1 << (pmd % 64));
        young
    }

    /// lru_gen_look_around() for the young PTE at `vpn` of mm `mmid` that eviction's rmap
    /// walk just cleared: clear the young PTEs of the same table within a 64-PTE window
    /// around it, promote their folios (with a walk: folio_update_gen into max_seq; without:
    /// lru_gen_set_refs, and the folios to activate are appended to `activate`), and record
    /// the table in the Bloom filter of max_seq when one PTE in eight was young.
    pub fn lru_gen_look_around(
        &mut self,
        lv: LruvecId,
        mmid: u32,
        vpn: u32,
        with_walk: bool,
        activate: &mut Vec<Pfn>,
    ) {
        let (vm_start, vm_end) = self.mms[mmid as usize].vma_bounds(vpn);
        let Some((start, end)) = look_around_window(vpn as u64, vm_start, vm_end) else {
            return;
        };
        let pmd = vpn as u64 / PTRS_PER_PTE as u64;
        let max_seq = self.lruvecs[lv as usize].lrugen.max_seq;
        let gen = lru_gen_from_seq(max_seq);
        let mut walk = with_walk.then(|| LruGenMmWalk::new(max_seq, 0, false));
        let mut young = 1u64;
        for v in start..end {
            let e = self.mms[mmid as usize].ptes[v as usize];
            if !pte::present(e) || e & pte::YOUNG == 0 {
                continue;
            }
            let pfn = pte::pfn(e);
            if !self.get_pfn_folio(pfn, lv) {
                continue;
            }
            self.mms[mmid as usize].ptes[v as usize] = e & !pte::YOUNG;
            young += 1;
            if walk_update_folio(&mut self.pages, walk.as_mut(), pfn, gen) {
                activate.push(pfn);
            }
        }
        if let Some(w) = walk.as_mut() {
            reset_batch_size(w, &mut self.lruvecs[lv as usize]);
        }
        if suitable_to_scan(end - start, young) {
            let key = get_item_key(mmid, pmd as u32);
            update_bloom_filter(&mut self.mm_state[lv as usize], max_seq, key);
        }
    }

    /// Hand the mm_list the uses recorded since the last walk (lru_gen_use_mm).
    fn lru_gen_collect_uses(&mut self, memcg: usize) {
        let Mm { mm_lists, mms, .. } = self;
        for e in mm_lists[memcg].fifo.iter_mut() {
            if std::mem::take(&mut mms[e.mm as usize].lru_gen_used) {
                e.bitmap = !0;
            }
        }
    }
}

/// folio_check_references()'s verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolioRef {
    Activate,
    Keep,
    Reclaim,
}

impl Sim {
    /// folio_check_references() with MGLRU: folio_referenced, whose rmap step runs
    /// lru_gen_look_around on a young PTE (unless `mglru_look_around` is off), then no
    /// young PTE: reclaim; else lru_gen_set_refs decides between activate and keep.
    /// `with_walk`: the reclaimer has an mm_walk (kswapd, proactive reclaim), so the
    /// look-around promotes in place instead of queueing activations.
    pub(crate) async fn lru_gen_check_references(&self, pfn: Pfn, with_walk: bool) -> FolioRef {
        let mut activate = Vec::new();
        let young = {
            let mut mm = self.mm.borrow_mut();
            let young = mm.folio_referenced(pfn);
            self.e.charge(self.c.pte_referenced);
            if young > 0 && self.v.mglru_look_around {
                if let Some(mmid) = mm.folio_mapper(pfn) {
                    let lv = mm.folio_lruvec(pfn);
                    let vpn = mm.folio_vpn(pfn);
                    mm.lru_gen_look_around(lv, mmid, vpn, with_walk, &mut activate);
                    self.e.charge(MIN_LRU_BATCH * self.c.walk_pte);
                }
            }
            young
        };
        for p in activate {
            self.folio_activate(p).await;
        }
        if young == 0 {
            return FolioRef::Reclaim;
        }
        let mut mm = self.mm.borrow_mut();
        if lru_gen_set_refs(&mut mm.pages, pfn) {
            FolioRef::Activate
        } else {
            FolioRef::Keep
        }
    }

    /// try_to_inc_max_seq()'s walk: iterate_mm_list hands out the memcg's mms to walk for
    /// `seq`, walk_mm walks each. Returns whether this walker finished the iteration (it
    /// may then inc_max_seq).
    pub(crate) async fn lru_gen_walk_mms(
        &self,
        lv: LruvecId,
        seq: u64,
        swappiness: u32,
        force_scan: bool,
    ) -> bool {
        let mut walk = LruGenMmWalk::new(seq, swappiness, force_scan);
        let mut prev = None;
        loop {
            // iterate_mm_list() runs under the mm_list lock: join the iteration in
            // virtual-time order, so a task behind this one can finish it first.
            self.e.sync().await;
            let (last, mm) = {
                let mut mm = self.mm.borrow_mut();
                let (memcg, node) = {
                    let l = &mm.lruvecs[lv as usize];
                    (l.memcg as usize, l.node)
                };
                mm.lru_gen_collect_uses(memcg);
                let Mm {
                    mm_lists,
                    mm_state,
                    mms,
                    ..
                } = &mut *mm;
                iterate_mm_list(
                    &mut mm_lists[memcg],
                    &mut mm_state[lv as usize],
                    &mut walk,
                    node,
                    prev,
                    |m| mms[m as usize].alive,
                )
            };
            match mm {
                Some(m) => {
                    self.walk_mm(lv, m, &mut walk).await;
                    prev = Some(m);
                }
                None => return last,
            }
        }
    }

    /// walk_mm(): walk one mm's PTE tables for `walk.seq` (stopping if another aging
    /// advanced max_seq), applying the batched promotions under lru_lock after every
    /// MAX_LRU_BATCH of them and at the end.
    async fn walk_mm(&self, lv: LruvecId, mmid: u32, walk: &mut LruGenMmWalk) {
        let tables = self.mm.borrow().mms[mmid as usize].pte_tables.len();
        let (nonleaf, bloom) = {
            let mm = self.mm.borrow();
            (
                mm.lru_gen_caps & (1 << LRU_GEN_NONLEAF_YOUNG) != 0,
                self.v.mglru_bloom,
            )
        };
        if self.mm.borrow().should_skip_vma(mmid, walk.swappiness) {
            return;
        }
        self.mm.borrow_mut().lru_gen_walks[lv as usize] += 1;
        for pmd in 0..tables {
            // Each PTE table is read under its PTE lock: touch it in virtual-time order.
            self.e.sync().await;
            if self.mm.borrow().lruvecs[lv as usize].lrugen.max_seq != walk.seq {
                break;
            }
            self.e.charge(self.c.walk_pmd);
            let scanned = {
                let mut mm = self.mm.borrow_mut();
                if !mm.mms[mmid as usize].pte_tables[pmd] {
                    continue;
                }
                if !walk.force_scan && nonleaf && !mm.pmd_test_and_clear_young(mmid, pmd) {
                    continue;
                }
                let key = get_item_key(mmid, pmd as u32);
                let state = &mm.mm_state[lv as usize];
                if !walk.force_scan && bloom && !test_bloom_filter(state, walk.seq, key) {
                    continue;
                }
                walk.mm_stats[MM_NONLEAF_FOUND] += 1;
                let s = mm.walk_pte_range(lv, mmid, pmd, walk);
                if suitable_to_scan(s.total, s.young) {
                    walk.mm_stats[MM_NONLEAF_ADDED] += 1;
                    update_bloom_filter(&mut mm.mm_state[lv as usize], walk.seq + 1, key);
                }
                s.total
            };
            self.e.charge(scanned * self.c.walk_pte);
            if walk.batched >= MAX_LRU_BATCH {
                self.walk_flush_batch(lv, walk).await;
            }
        }
        if walk.batched > 0 {
            self.walk_flush_batch(lv, walk).await;
        }
        self.mm.borrow_mut().lru_gen_walks[lv as usize] -= 1;
    }

    /// reset_batch_size() under lru_lock (walk_mm's periodic flush), then a scheduling point.
    async fn walk_flush_batch(&self, lv: LruvecId, walk: &mut LruGenMmWalk) {
        self.lock_lruvec(lv, Site::WalkMm).await;
        {
            let mut mm = self.mm.borrow_mut();
            reset_batch_size(walk, &mut mm.lruvecs[lv as usize]);
        }
        self.e.charge(self.c.list_op);
        self.unlock_lruvec(lv);
        self.e.sync().await;
    }
}

/// The PTEs lru_gen_look_around() looks at around the young PTE at `vpn` of a VMA
/// covering pages `vm_start..vm_end`: MIN_LRU_BATCH of them centred on it, kept inside its
/// page table and the VMA, moved to that range's first or last MIN_LRU_BATCH when it lies
/// within half a batch of either end; the whole range when it is smaller; None when it
/// holds one page.
pub fn look_around_window(vpn: u64, vm_start: u64, vm_end: u64) -> Option<(u64, u64)> {
    let table = vpn / PTRS_PER_PTE as u64 * PTRS_PER_PTE as u64;
    let start = table.max(vm_start);
    let end = (table + PTRS_PER_PTE as u64).min(vm_end);
    if end - start == 1 {
        return None;
    }
    let half = MIN_LRU_BATCH / 2;
    if end - start <= MIN_LRU_BATCH {
        Some((start, end))
    } else if vpn - start < half {
        Some((start, start + MIN_LRU_BATCH))
    } else if end - vpn < half {
        Some((end - MIN_LRU_BATCH, end))
    } else {
        Some((vpn - half, vpn + half))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_pte_range_takes_the_young_ptes_only() {
        // 20 anonymous folios of one process on an MGLRU machine, the PTEs of the even
        // pages young: walk_pte_range() looks at all 20 PTEs of the table and takes the 10
        // young ones (pte_young), clearing their young bits.
        let s = crate::fixture::one_node_machine("256M", Some("256M"), "lru = \"mglru\"");
        let (mmid, _) = s.fixture_anon_folios(1, 0, 20, true, 0);
        let mut mm = s.mm.borrow_mut();
        for vpn in (1..20).step_by(2) {
            mm.mms[mmid as usize].ptes[vpn] &= !pte::YOUNG;
        }
        let lv = mm.lruvec_of(1, 0);
        let max_seq = mm.lruvecs[lv as usize].lrugen.max_seq;
        let mut walk = LruGenMmWalk::new(max_seq, 60, false);
        let scan = mm.walk_pte_range(lv, mmid, 0, &mut walk);
        assert_eq!((scan.total, scan.young), (20, 10));
        assert_eq!(walk.mm_stats[MM_LEAF_YOUNG], 10);
        let ptes = &mm.mms[mmid as usize].ptes;
        assert!(ptes[..20].iter().all(|&v| v & pte::YOUNG == 0));
    }
}
