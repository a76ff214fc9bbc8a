//! MGLRU's accessed-bit harvesting: the "Bloom filters" and "rmap/PT walk feedback"
//! sections of mm/vmscan.c (v6.18), and the page-table walk of its "the aging" section
//! (from update_batch_size to walk_mm; the generation bookkeeping of that section is in
//! aging.rs).
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
//! as used on a node (lru_gen_use_mm) whenever one of its tasks runs rather than at each
//! context switch (mm_list.rs); the mmap_lock is never contended; the rmap look-around
//! applies its promotions at once rather than in the walk's batch; Bloom filter keys hash
//! (mm, PMD index) instead of the address of the PMD entry.

use super::*;
use crate::engine::Site;
use crate::mm::mmzone::Lruvec;
use crate::mm::{LruvecId, Mm, Pfn, PAGEVEC_SIZE, PTRS_PER_PTE};
use crate::sim::Sim;

// ---------------------------------------------------------------------------------------
// Bloom filters
// ---------------------------------------------------------------------------------------

/// Knuth's multiplicative constant of the kernel's hash_64().
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;

/// hash_64(): the top `bits` bits of val * GOLDEN_RATIO_64.
#[inline]
pub fn hash_64(val: u64, bits: u32) -> u32 {
    (val.wrapping_mul(GOLDEN_RATIO_64) >> (64 - bits)) as u32
}

/// filter_gen_from_seq(): which of the two filters a sequence number uses.
#[inline]
pub fn filter_gen_from_seq(seq: u64) -> usize {
    (seq % NR_BLOOM_FILTERS as u64) as usize
}

/// get_item_key(): the two bit positions of a PTE table in a Bloom filter, from a
/// 2 * BLOOM_FILTER_SHIFT-bit hash. The kernel hashes the address of the PMD entry
/// (hash_ptr); the model hashes (mm index, PMD index = virtual page number / PTRS_PER_PTE)
/// packed as mm << 32 | pmd with hash_64.
pub fn get_item_key(mm: u32, pmd: u32) -> [usize; 2] {
    let hash = hash_64(((mm as u64) << 32) | pmd as u64, BLOOM_FILTER_SHIFT * 2);
    [
        (hash & ((1 << BLOOM_FILTER_SHIFT) - 1)) as usize,
        (hash >> BLOOM_FILTER_SHIFT) as usize,
    ]
}

#[inline]
fn test_bit(filter: &[u64], k: usize) -> bool {
    filter[k / 64] >> (k % 64) & 1 != 0
}

/// test_bloom_filter(): may the PTE table with this key have enough young entries (the
/// filter of `seq`)? True when that filter does not exist yet.
pub fn test_bloom_filter(state: &LruGenMmState, seq: u64, key: [usize; 2]) -> bool {
    match &state.filters[filter_gen_from_seq(seq)] {
        None => true,
        Some(f) => test_bit(f, key[0]) && test_bit(f, key[1]),
    }
}

/// update_bloom_filter(): record a PTE table in the filter of `seq` (if it exists).
pub fn update_bloom_filter(state: &mut LruGenMmState, seq: u64, key: [usize; 2]) {
    if let Some(f) = &mut state.filters[filter_gen_from_seq(seq)] {
        for k in key {
            f[k / 64] |= 1 << (k % 64);
        }
    }
}

/// reset_bloom_filter(): clear (or allocate, zeroed) the filter of `seq`.
pub fn reset_bloom_filter(state: &mut LruGenMmState, seq: u64) {
    let f = &mut state.filters[filter_gen_from_seq(seq)];
    match f {
        Some(bits) => bits.fill(0),
        None => *f = Some(vec![0u64; (1 << BLOOM_FILTER_SHIFT) / 64].into_boxed_slice()),
    }
}

// ---------------------------------------------------------------------------------------
// The page-table walk ("the aging")
// ---------------------------------------------------------------------------------------

/// struct lru_gen_mm_walk: one aging pass's state (per reclaimer; kswapd keeps one per
/// node).
#[derive(Debug, Clone)]
pub struct LruGenMmWalk {
    /// The max_seq this walk ages (may go stale).
    pub seq: u64,
    /// get_swappiness() of the reclaim: 0 skips anon VMAs, above 200 skips file VMAs.
    pub swappiness: u32,
    /// Walk every mm and PTE table, ignoring bitmaps and Bloom filters.
    pub force_scan: bool,
    /// Folios promoted since the last reset_batch_size.
    pub batched: u64,
    /// Promotions not yet applied to nr_pages, by generation and type.
    pub nr_pages: [[i64; ANON_AND_FILE]; MAX_NR_GENS as usize],
    /// Statistics not yet added to the mm_state (MM_*).
    pub mm_stats: [u64; NR_MM_STATS],
}

impl LruGenMmWalk {
    /// A walk for `seq` (set_mm_walk, then try_to_inc_max_seq's fields), nothing batched.
    pub fn new(seq: u64, swappiness: u32, force_scan: bool) -> Self {
        LruGenMmWalk {
            seq,
            swappiness,
            force_scan,
            batched: 0,
            nr_pages: [[0; ANON_AND_FILE]; MAX_NR_GENS as usize],
            mm_stats: [0; NR_MM_STATS],
        }
    }
}

/// update_batch_size(): remember a promotion from `old_gen` to `new_gen` of a page of `ty`
/// for reset_batch_size (no lru_lock taken per folio).
pub fn update_batch_size(walk: &mut LruGenMmWalk, ty: usize, old_gen: usize, new_gen: usize) {
    walk.batched += 1;
    walk.nr_pages[old_gen][ty] -= 1;
    walk.nr_pages[new_gen][ty] += 1;
}

/// reset_batch_size(): apply the walk's pending promotions to nr_pages and to the
/// compatibility sizes (each generation's delta to its active or inactive side). The walk
/// calls it after each stretch of page tables and evict_folios after putback, both under
/// the lru_lock.
pub fn reset_batch_size(walk: &mut LruGenMmWalk, lv: &mut Lruvec) {
    walk.batched = 0;
    for gen in 0..MAX_NR_GENS as usize {
        for ty in 0..ANON_AND_FILE {
            let delta = std::mem::take(&mut walk.nr_pages[gen][ty]);
            if delta == 0 {
                continue;
            }
            lv.lrugen.nr_pages[gen][ty] += delta;
            let lru = compat_lru(&lv.lrugen, ty, gen);
            update_lru_size(lv, lru, delta);
        }
    }
}

/// walk_update_folio() for a folio with a young PTE (the caller has cleared the young bit
/// and handles the dirty bit): with a walk, folio_update_gen to `new_gen` (the max_seq
/// generation) and batch the move; without one (lru_gen_look_around from an rmap walk
/// without an mm walk), lru_gen_set_refs, and if that says activate and the folio is on
/// the lists in another generation, return true: the caller calls folio_activate.
/// Without rule mglru_promote_second_sighting (6.1, 6.12, where lru_gen_look_around does
/// this inline) no lru_gen_set_refs: an isolated folio gets PG_referenced, one on the
/// lists in another generation is activated at once (6.1 promotes them in place instead
/// when 15 or more are: `Mm::look_around_promote_in_place`).
pub fn walk_update_folio(
    frames: &mut Frames,
    walk: Option<&mut LruGenMmWalk>,
    pfn: Pfn,
    new_gen: usize,
    rules: &crate::versions::Rules,
) -> bool {
    let ty = folio_type(&frames[pfn as usize]);
    match walk {
        Some(w) => {
            if let Some(old) = folio_update_gen(frames, pfn, new_gen, rules) {
                if old != new_gen {
                    update_batch_size(w, ty, old, new_gen);
                }
            }
            false
        }
        None if !rules.mglru_promote_second_sighting => match folio_lru_gen(frames, pfn) {
            None => {
                frames[pfn as usize].set(PG_REFERENCED);
                false
            }
            Some(old) => old != new_gen,
        },
        None => {
            lru_gen_set_refs(frames, pfn, rules)
                && folio_lru_gen(frames, pfn).is_some_and(|old| old != new_gen)
        }
    }
}

/// suitable_to_scan(): is a PTE table worth the walk next time, i.e. at least one young
/// PTE per cache line on average (x86-64: 64-byte lines of 8-byte PTEs, n = 8)?
pub fn suitable_to_scan(total: u64, young: u64) -> bool {
    young * 8 >= total
}

/// What one PTE table's scan found.
struct PteScan {
    total: u64,
    young: u64,
}

/// How many PTEs ahead walk_pte_range prefetches the frame a PTE points to.
const WALK_PREFETCH: usize = 8;

/// How many PTEs ahead look-around prefetches the frame a PTE points to: its window is
/// short (64 PTEs) and mostly young where it runs at all, so more frames are fetched at
/// once, from the window's start.
const LOOK_AROUND_PREFETCH: usize = 16;

impl Mm {
    /// Does the folio at `pfn` belong to lruvec `lv`'s memcg and node, on its MGLRU lists
    /// (get_pfn_folio)? Before 6.14 (rule mglru_promote_second_sighting off: 6.1, 6.12)
    /// get_pfn_folio does not ask whether the folio is on the lists, so the walk and the
    /// look-around also clear the young PTE of a folio reclaim has isolated, and
    /// folio_update_gen marks it PG_referenced for shrink_folio_list. Simplified: no
    /// can_swap test (an anonymous COW folio in a file VMA when anon may not be
    /// reclaimed: the model's file mappings hold no anonymous folios).
    fn get_pfn_folio(&self, pfn: Pfn, lv: LruvecId) -> bool {
        let l = &self.lruvecs[lv as usize];
        (!self.rules.mglru_promote_second_sighting || folio_lru_gen(&self.pages, pfn).is_some())
            && self.pages[pfn as usize].memcg == l.memcg
            && self.pfn_node(pfn) == l.node
    }

    /// Prefetch the frame (with its generation byte) of the folio the PTE at `vpn` of mm
    /// `mmid` maps, if it is present and young (walk_pte_range and look-around read it next).
    #[inline]
    fn prefetch_young_frame(&self, mmid: u32, vpn: usize) {
        if let Some(&e) = self.mms[mmid as usize].ptes.get(vpn) {
            if pte::present(e) && e & pte::YOUNG != 0 {
                let f = pte::pfn(e) as usize;
                crate::mm::prefetch(&self.pages[f]);
            }
        }
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
        self.mms[mmid as usize].sampled_sync(start as u32, end as u32);
        let mut scan = PteScan { total: 0, young: 0 };
        for vpn in start..end {
            scan.total += 1;
            // The young PTEs of a random-access workload point all over the frame table:
            // fetch the frame and its generation byte a few PTEs ahead.
            self.prefetch_young_frame(mmid, vpn + WALK_PREFETCH);
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
            walk_update_folio(&mut self.pages, Some(walk), pfn, new_gen, &self.rules);
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
        let start = (pmd * PTRS_PER_PTE) as u32;
        self.mms[mmid as usize].sampled_sync(start, start + PTRS_PER_PTE as u32);
        let w = &mut self.mms[mmid as usize].pmd_young[pmd / 64];
        let young = *w & (1 << (pmd % 64)) != 0;
        *w &= !(1 << (pmd % 64));
        young
    }
}

impl Sim {
    /// try_to_inc_max_seq()'s walk: iterate_mm_list hands out the memcg's mms to walk for
    /// `seq`, walk_mm walks each. Returns whether this walker finished the iteration (it
    /// may then inc_max_seq).
    pub(super) async fn lru_gen_walk_mms(
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

// ---------------------------------------------------------------------------------------
// rmap/PT walk feedback
// ---------------------------------------------------------------------------------------

impl Mm {
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
        let queued = activate.len();
        let mut young = 1u64;
        self.mms[mmid as usize].sampled_sync(start as u32, end as u32);
        // As in walk_pte_range, the frames of the young PTEs are fetched ahead: the
        // window's first LOOK_AROUND_PREFETCH at once, then each that far ahead.
        for v in start..(start + LOOK_AROUND_PREFETCH as u64).min(end) {
            self.prefetch_young_frame(mmid, v as usize);
        }
        for v in start..end {
            if v + (LOOK_AROUND_PREFETCH as u64) < end {
                self.prefetch_young_frame(mmid, (v + LOOK_AROUND_PREFETCH as u64) as usize);
            }
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
            if walk_update_folio(&mut self.pages, walk.as_mut(), pfn, gen, &self.rules) {
                activate.push(pfn);
            }
        }
        if let Some(w) = walk.as_mut() {
            reset_batch_size(w, &mut self.lruvecs[lv as usize]);
        }
        if self.rules.mglru_v61_look_around_in_place && activate.len() - queued >= PAGEVEC_SIZE {
            self.look_around_promote_in_place(lv, gen, activate, queued);
        }
        if suitable_to_scan(end - start, young) {
            let key = get_item_key(mmid, pmd as u32);
            update_bloom_filter(&mut self.mm_state[lv as usize], max_seq, key);
        }
    }
}

impl Mm {
    /// 6.1's lru_gen_look_around without an mm_walk, once PAGEVEC_SIZE or more folios of
    /// the window are to be promoted (rule mglru_v61_look_around_in_place): under the
    /// lru_lock, folio_update_gen moves each to `gen` (max_seq's) in place, its sizes
    /// through lru_gen_update_size, instead of queueing `activate[queued..]` for
    /// folio_activate (no PGACTIVATE). Simplified: the lru_lock taken under the PTL costs
    /// nothing here.
    fn look_around_promote_in_place(
        &mut self,
        lv: LruvecId,
        gen: usize,
        activate: &mut Vec<Pfn>,
        queued: usize,
    ) {
        let rules = self.rules;
        let (pages, l) = (&mut self.pages, &mut self.lruvecs[lv as usize]);
        for pfn in activate.drain(queued..) {
            let ty = folio_type(&pages[pfn as usize]);
            if let Some(old) = folio_update_gen(pages, pfn, gen, &rules) {
                if old != gen {
                    lru_gen_update_size(l, ty, Some(old), Some(gen));
                }
            }
        }
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

/// folio_check_references()'s verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolioRef {
    Activate,
    Keep,
    Reclaim,
    /// FOLIOREF_RECLAIM_CLEAN: reclaim if clean (the classic form's referenced file
    /// folio), a dirty one is kept for writeback.
    ReclaimClean,
}

impl Sim {
    /// folio_check_references() with MGLRU: folio_referenced, whose rmap step
    /// (folio_referenced_one, once per mapping) runs lru_gen_look_around on each young PTE
    /// in that mapping's page table (unless `mglru_look_around` is off), then no young
    /// PTE: reclaim; else lru_gen_set_refs decides between activate and keep (6.1 and
    /// 6.12, rule mglru_promote_second_sighting off: `folio_check_references_v612`).
    /// `with_walk`: the reclaimer has an mm_walk (`ScanControl::mm_walk`: kswapd, proactive
    /// reclaim, or any reclaimer after its aging walked page tables), so the look-around
    /// promotes in place instead of queueing activations. On 6.1 (rule
    /// mglru_v61_look_around_sees_target) the look-around runs before the folio's own
    /// young bit is cleared and marks the isolated folio PG_referenced. Simplified: the
    /// model clears that bit first and marks the folio after the window's scan.
    pub(crate) async fn lru_gen_check_references(&self, pfn: Pfn, with_walk: bool) -> FolioRef {
        let mut activate = Vec::new();
        let young = {
            let mut mm = self.mm.borrow_mut();
            // The young mappings' mm ids, in a pooled vector (pfn_vec holds u32s).
            let mut young_mms = mm.pfn_vec();
            let look = self.v.mglru_look_around;
            let young = mm.folio_referenced_mms(pfn, look.then_some(&mut young_mms));
            self.e.charge(self.c.pte_referenced);
            if !young_mms.is_empty() {
                let lv = mm.folio_lruvec(pfn);
                let vpn = mm.folio_vpn(pfn);
                for &mmid in &young_mms {
                    mm.lru_gen_look_around(lv, mmid, vpn, with_walk, &mut activate);
                    self.e.charge(MIN_LRU_BATCH * self.c.walk_pte);
                }
                // Rule mglru_v61_look_around_sees_target: 6.1's folio_referenced_one runs
                // the look-around before it clears the young bit, so the window's scan
                // meets the folio itself, isolated: PG_referenced.
                if mm.rules.mglru_v61_look_around_sees_target
                    && folio_lru_gen(&mm.pages, pfn).is_none()
                {
                    mm.pages[pfn as usize].set(PG_REFERENCED);
                }
            }
            mm.put_pfn_vec(young_mms);
            young
        };
        for p in activate {
            self.folio_activate(p).await;
        }
        let mut mm = self.mm.borrow_mut();
        let rules = mm.rules;
        if !rules.mglru_promote_second_sighting {
            return folio_check_references_v612(&mut mm, pfn, young);
        }
        if young == 0 {
            return FolioRef::Reclaim;
        }
        if lru_gen_set_refs(&mut mm.pages, pfn, &rules) {
            FolioRef::Activate
        } else {
            FolioRef::Keep
        }
    }
}

/// folio_check_references() after its rmap walk found `young` young PTEs, as 6.1 and 6.12
/// run it under MGLRU (without rule mglru_promote_second_sighting): the classic verdict.
/// PG_referenced is tested and cleared (isolate_folio cleared it, so it is set only when a
/// page-table walk or another folio's look-around met this one while isolated); a young
/// PTE sets it again and activates the folio if it was set, if several PTEs were young, or
/// if it is a program's text; else the folio is kept for another trip. No young PTE:
/// reclaim, clean only for a referenced file folio.
fn folio_check_references_v612(mm: &mut Mm, pfn: Pfn, young: u32) -> FolioRef {
    let referenced_folio = mm.pages[pfn as usize].test_clear(PG_REFERENCED);
    if young > 0 {
        mm.pages[pfn as usize].set(PG_REFERENCED);
        if referenced_folio || young > 1 || mm.folio_exec(pfn) {
            return FolioRef::Activate;
        }
        return FolioRef::Keep;
    }
    if referenced_folio && mm.pages[pfn as usize].is_file_lru() {
        FolioRef::ReclaimClean
    } else {
        FolioRef::Reclaim
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::lru_gen::test_util::*;
    use crate::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON};
    use crate::versions::DEFAULT_RULES;

    #[test]
    fn bloom_filters_double_buffer() {
        // hash_64(mm << 32 | pmd, 30) = (x * 0x61C8864680B583EB mod 2^64) >> 34, split into
        // the low and high 15 bits (computed apart from this code): (1, 0) -> 539844858 =
        // 16474 << 15 | 24826; (1, 1) -> 949977740; (2, 0) -> 5947893.
        let a = get_item_key(1, 0);
        let b = get_item_key(1, 1);
        let c = get_item_key(2, 0);
        assert_eq!(a, [24826, 16474]);
        assert_eq!(b, [652, 28991]);
        assert_eq!(c, [16885, 181]);
        let mut s = LruGenMmState::new();
        // No filters yet: everything passes, updates go nowhere.
        assert!(test_bloom_filter(&s, 3, b));
        update_bloom_filter(&mut s, 3, a);
        assert!(s.filters.iter().all(|f| f.is_none()));
        // seq 4 uses filter 0.
        reset_bloom_filter(&mut s, 4);
        assert!(!test_bloom_filter(&s, 4, a));
        update_bloom_filter(&mut s, 4, a);
        assert!(test_bloom_filter(&s, 4, a) && test_bloom_filter(&s, 6, a));
        assert!(!test_bloom_filter(&s, 4, b));
        assert!(test_bloom_filter(&s, 5, b), "filter 1 not allocated yet");
        // One bit of two is not a match.
        assert!(!test_bloom_filter(&s, 4, [a[0], b[1]]));
        // seq 5 uses filter 1, independent of filter 0.
        reset_bloom_filter(&mut s, 5);
        update_bloom_filter(&mut s, 5, c);
        assert!(test_bloom_filter(&s, 5, c) && !test_bloom_filter(&s, 5, a));
        assert!(!test_bloom_filter(&s, 4, c));
        // seq 6 reuses and clears filter 0; filter 1 keeps c.
        reset_bloom_filter(&mut s, 6);
        assert!(!test_bloom_filter(&s, 4, a));
        assert!(test_bloom_filter(&s, 7, c));
    }

    #[test]
    fn walk_batch_and_look_around_updates() {
        let f_ = LRU_GEN_FILE;
        let mut f = frames(&[FILE, FILE, ANON | PG_SWAPCACHE, FILE]);
        let mut lv = lruvec();
        for pfn in 0..4 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &DEFAULT_RULES);
        }
        // All in gen 0 (inactive); max_seq 3 is gen 3 (active).
        let mut w = LruGenMmWalk::new(3, 60, false);
        assert!(!walk_update_folio(
            &mut f,
            Some(&mut w),
            0,
            3,
            &DEFAULT_RULES
        ));
        assert_eq!(w.batched, 0, "first sighting: PG_referenced only");
        walk_update_folio(&mut f, Some(&mut w), 0, 3, &DEFAULT_RULES);
        f[2].set(PG_WORKINGSET);
        walk_update_folio(&mut f, Some(&mut w), 2, 3, &DEFAULT_RULES);
        assert_eq!(w.batched, 2);
        assert_eq!(w.nr_pages[0], [-1, -1]);
        assert_eq!(w.nr_pages[3], [1, 1]);
        assert_eq!(lv.lrugen.nr_pages[0], [1, 3], "not applied yet");
        reset_batch_size(&mut w, &mut lv);
        assert_eq!((w.batched, w.nr_pages), (0, [[0; 2]; 4]));
        assert_eq!(lv.lrugen.nr_pages[0], [0, 2]);
        assert_eq!(lv.lrugen.nr_pages[3], [1, 1]);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 2);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE + 1], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 0);
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 1);
        // The promoted folios still sit on gen 0's list until sorted.
        assert_eq!(list(&f, &lv.lrugen.folios[0][f_]), vec![3, 1, 0]);
        // Without a walk: first sighting keeps, second activates a folio of another gen.
        assert!(!walk_update_folio(&mut f, None, 1, 3, &DEFAULT_RULES));
        assert!(walk_update_folio(&mut f, None, 1, 3, &DEFAULT_RULES));
        // Already in the max_seq generation (pfn 0, workingset): nothing to activate.
        assert!(!walk_update_folio(&mut f, None, 0, 3, &DEFAULT_RULES));
        assert!(suitable_to_scan(64, 8) && !suitable_to_scan(64, 7) && suitable_to_scan(0, 0));
    }
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

    #[test]
    fn walk_pte_range_meets_isolated_folios_before_6_14() {
        // 20 anonymous folios of one process, every PTE young, pages 0..5 isolated by
        // eviction. 6.12's get_pfn_folio does not skip a folio off the lists: the walk
        // clears all 20 young PTEs, counts them, and folio_update_gen marks the five
        // isolated ones PG_referenced. 6.18's skips them: 15 cleared, the five left young.
        let run = |version: &str| {
            let extra = format!("lru = \"mglru\"\nversion = \"{version}\"");
            let s = crate::fixture::one_node_machine("256M", Some("256M"), &extra);
            let (mmid, pfns) = s.fixture_anon_folios(1, 0, 20, true, 0);
            let mut mm = s.mm.borrow_mut();
            let lv = mm.lruvec_of(1, 0);
            let rules = mm.rules;
            {
                let Mm { pages, lruvecs, .. } = &mut *mm;
                for &p in &pfns[..5] {
                    let l = &mut lruvecs[lv as usize];
                    assert!(super::super::eviction::isolate_folio(
                        pages, l, p, true, &rules
                    ));
                }
            }
            let max_seq = mm.lruvecs[lv as usize].lrugen.max_seq;
            let mut walk = LruGenMmWalk::new(max_seq, 60, false);
            let scan = mm.walk_pte_range(lv, mmid, 0, &mut walk);
            let young = mm.mms[mmid as usize].ptes[..20]
                .iter()
                .filter(|&&v| v & pte::YOUNG != 0)
                .count();
            let marked = pfns[..5]
                .iter()
                .filter(|&&p| mm.pages[p as usize].test(PG_REFERENCED))
                .count();
            (scan.young, young, marked)
        };
        assert_eq!(run("6.12"), (20, 0, 5));
        assert_eq!(run("6.18"), (15, 5, 0));
    }

    #[test]
    fn look_around_runs_in_every_mapping_whose_pte_is_young() {
        // Eight page-cache folios of one file, mapped by two processes, every PTE young
        // (6.18, MGLRU, no mm_walk). Eviction's check of page 0 finds it young in both
        // mappings; folio_referenced_one runs lru_gen_look_around in each mapping's page
        // table, so every neighbour (pages 1..8) is seen young twice: lru_gen_set_refs
        // gives PG_referenced at the first sighting and PG_workingset (activate) at the
        // second. Every PTE of both processes ends old.
        use crate::fixture::{Mapped, MAPPED_FILE_BASE};
        let s = crate::fixture::one_node_machine("64M", None, "lru = \"mglru\"");
        let how = Mapped {
            exec: false,
            mappers: 2,
            young: true,
        };
        let (_, mms, pfns) = s.fixture_mapped_file_folios(1, 0, 8, how, 0);
        let p0 = pfns[0];
        let verdict = std::rc::Rc::new(std::cell::Cell::new(None));
        let v = verdict.clone();
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            v.set(Some(s.lru_gen_check_references(p0, false).await));
        });
        // Page 0 itself: young in two mappings, seen for the first time: keep.
        assert_eq!(verdict.get(), Some(FolioRef::Keep));
        let mm = s.mm.borrow();
        for &m in &mms {
            for i in 0..8 {
                let e = mm.mms[m as usize].ptes[(MAPPED_FILE_BASE + i) as usize];
                assert_eq!(e & pte::YOUNG, 0, "mm {m} page {i} still young");
            }
        }
        for &p in &pfns[1..] {
            assert!(mm.pages[p as usize].test(PG_WORKINGSET), "pfn {p}");
        }
    }

    /// folio_check_references() on page 0 of eight page-cache folios of one file, on
    /// Linux 6.12 with MGLRU and no mm_walk: `mappers` processes map the file, every PTE
    /// young when `young`, page 0 isolated, then given PG_referenced when `referenced`. Returns the verdict,
    /// page 0's PG_referenced after it, and the folios queued for activation on CPU 0.
    fn check_v612(exec: bool, mappers: u32, young: bool, referenced: bool) -> Checked {
        check_refs("6.12", exec, mappers, young, referenced)
    }

    /// `check_v612` on another version.
    fn check_refs(
        version: &str,
        exec: bool,
        mappers: u32,
        young: bool,
        referenced: bool,
    ) -> Checked {
        use crate::fixture::Mapped;
        let extra = format!("lru = \"mglru\"\nversion = \"{version}\"");
        let s = crate::fixture::one_node_machine("64M", None, &extra);
        let how = Mapped {
            exec,
            mappers,
            young,
        };
        let (_, _, pfns) = s.fixture_mapped_file_folios(1, 0, 8, how, 0);
        let p0 = pfns[0];
        {
            // Eviction checks an isolated folio (isolate_folio, as scan_folios does).
            let mut mm = s.mm.borrow_mut();
            let lv = mm.lruvec_of(1, 0) as usize;
            let rules = mm.rules;
            let Mm { pages, lruvecs, .. } = &mut *mm;
            assert!(super::super::eviction::isolate_folio(
                pages,
                &mut lruvecs[lv],
                p0,
                true,
                &rules
            ));
            if referenced {
                pages[p0 as usize].set(PG_REFERENCED);
            }
        }
        let verdict = std::rc::Rc::new(std::cell::Cell::new(None));
        let v = verdict.clone();
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            v.set(Some(s.lru_gen_check_references(p0, false).await));
        });
        let mm = s.mm.borrow();
        for &p in &pfns[1..] {
            assert!(!mm.pages[p as usize].test(PG_REFERENCED | PG_WORKINGSET));
        }
        Checked {
            verdict: verdict.get().unwrap(),
            referenced: mm.pages[p0 as usize].test(PG_REFERENCED),
            activated: mm.batches[0].lru_activate.len(),
        }
    }

    #[derive(Debug, PartialEq, Eq)]
    struct Checked {
        verdict: FolioRef,
        referenced: bool,
        activated: usize,
    }

    #[test]
    fn check_references_before_6_14_takes_the_classic_verdict() {
        let c = |verdict, referenced, activated| Checked {
            verdict,
            referenced,
            activated,
        };
        // 6.12 (folio_check_references, classic form, under MGLRU): young in two
        // mappings activates at the first sighting; the look-around (pages 1..8 young in
        // both tables, in an older generation than max_seq's) queues the seven neighbours
        // for activation at once, once per table (folio_activate queues a folio already
        // queued; the drain activates it once), leaving their flags alone (6.18 marks them
        // at the first sighting and activates them at the second).
        let two = check_v612(false, 2, true, false);
        assert_eq!(two, c(FolioRef::Activate, true, 14));
        // One young PTE: kept for another trip, PG_referenced set; a second reference
        // (PG_referenced already set) or a program's text activates. No young PTE:
        // reclaim, clean only for a referenced file folio; PG_referenced is tested and
        // cleared. (exec, young, referenced) -> (verdict, PG_referenced after, queued)
        let table = [
            ((false, true, false), (FolioRef::Keep, true, 7)),
            ((false, true, true), (FolioRef::Activate, true, 7)),
            ((true, true, false), (FolioRef::Activate, true, 7)),
            ((false, false, true), (FolioRef::ReclaimClean, false, 0)),
            ((false, false, false), (FolioRef::Reclaim, false, 0)),
        ];
        for ((exec, young, referenced), (verdict, r, n)) in table {
            let got = check_v612(exec, 1, young, referenced);
            assert_eq!(got, c(verdict, r, n), "{exec} {young} {referenced}");
        }
    }

    #[test]
    fn look_around_without_a_walk_before_6_14() {
        // 6.12's lru_gen_look_around without an mm_walk: an isolated folio (no gen) gets
        // PG_referenced; one on the lists in another generation is to be activated at its
        // first sighting, its flags left alone; one in max_seq's generation is left alone.
        let r = v6_12();
        let mut f = frames(&[FILE, FILE, FILE]);
        f[1].lru_gen = 1 + 1; // gen 1
        f[2].lru_gen = 3 + 1; // gen 3 = max_seq's
        assert!(!walk_update_folio(&mut f, None, 0, 3, &r));
        assert!(f[0].test(PG_REFERENCED));
        assert!(walk_update_folio(&mut f, None, 1, 3, &r));
        assert!(!f[1].test(PG_REFERENCED | PG_WORKINGSET));
        assert_eq!(folio_lru_gen(&f, 1), Some(1));
        assert!(!walk_update_folio(&mut f, None, 2, 3, &r));
        assert!(!f[2].test(PG_REFERENCED));
    }

    #[test]
    fn look_around_on_6_1_promotes_fifteen_or_more_in_place() {
        // Page 0 of `n` page-cache folios of one file, mapped by one process, every PTE
        // young, checked by eviction without an mm_walk: the look-around finds the n - 1
        // neighbours young in an older generation. 6.1 activates them through
        // folio_activate when fewer than 15, else moves them to max_seq's generation in
        // place (queueing none); 6.12 always queues them. The count is per window: with
        // two mappings, 8 folios give two windows of 7, each activated.
        use crate::fixture::Mapped;
        let run = |version: &str, n: u32, mappers: u32| {
            let extra = format!("lru = \"mglru\"\nversion = \"{version}\"");
            let s = crate::fixture::one_node_machine("64M", None, &extra);
            let how = Mapped {
                exec: false,
                mappers,
                young: true,
            };
            let (_, _, pfns) = s.fixture_mapped_file_folios(1, 0, n, how, 0);
            let p0 = pfns[0];
            crate::fixture::run_probe(&s, 0, 0, move |s| async move {
                s.lru_gen_check_references(p0, false).await;
            });
            let mm = s.mm.borrow();
            let lv = mm.lruvec_of(1, 0) as usize;
            let g = &mm.lruvecs[lv].lrugen;
            let young = lru_gen_from_seq(g.max_seq);
            let promoted = pfns[1..]
                .iter()
                .filter(|&&p| folio_lru_gen(&mm.pages, p) == Some(young))
                .count();
            let pgactivate = mm.events[crate::mm::vmstat::VmEvent::Pgactivate as usize];
            (
                mm.batches[0].lru_activate.len(),
                promoted,
                g.nr_pages[young][LRU_GEN_FILE],
                pgactivate,
            )
        };
        // (queued for activation, neighbours in max_seq's generation, its size, PGACTIVATE)
        assert_eq!(run("6.1", 15, 1), (14, 0, 0, 0));
        // In place: no PGACTIVATE (15 activations would fill 6.1's 15-folio batch, drain
        // it and count 15).
        assert_eq!(run("6.1", 16, 1), (0, 15, 15, 0));
        assert_eq!(run("6.12", 16, 1), (15, 0, 0, 0));
        assert_eq!(run("6.1", 8, 2), (14, 0, 0, 0));
    }

    #[test]
    fn look_around_before_6_14_marks_the_isolated_batch() {
        // Eight page-cache folios of one file, mapped by one process, every PTE young;
        // eviction has isolated pages 0..4 (one batch) and checks page 0 without an
        // mm_walk. Before 6.14 get_pfn_folio takes any folio of the memcg and node, so
        // the look-around clears the young PTEs of isolated pages 1..3 too and marks them
        // PG_referenced (shrink_folio_list then keeps them: "folio_update_gen() tried to
        // promote this page?"); pages 4..7, on the lists in an older generation, are
        // queued for activation. From 6.14 get_pfn_folio skips a folio off the lists:
        // pages 1..3 stay young and unmarked, and pages 4..7 get PG_referenced at this
        // first sighting (lru_gen_set_refs), none queued.
        use crate::fixture::{Mapped, MAPPED_FILE_BASE};
        let run = |version: &str| {
            let extra = format!("lru = \"mglru\"\nversion = \"{version}\"");
            let s = crate::fixture::one_node_machine("64M", None, &extra);
            let how = Mapped {
                exec: false,
                mappers: 1,
                young: true,
            };
            let (_, mms, pfns) = s.fixture_mapped_file_folios(1, 0, 8, how, 0);
            {
                let mut mm = s.mm.borrow_mut();
                let lv = mm.lruvec_of(1, 0) as usize;
                let rules = mm.rules;
                let Mm { pages, lruvecs, .. } = &mut *mm;
                for &p in &pfns[..4] {
                    let l = &mut lruvecs[lv];
                    assert!(super::super::eviction::isolate_folio(
                        pages, l, p, true, &rules
                    ));
                }
            }
            let p0 = pfns[0];
            crate::fixture::run_probe(&s, 0, 0, move |s| async move {
                s.lru_gen_check_references(p0, false).await;
            });
            let mm = s.mm.borrow();
            let young: Vec<bool> = (1..8)
                .map(|i| {
                    let vpn = (MAPPED_FILE_BASE + i) as usize;
                    mm.mms[mms[0] as usize].ptes[vpn] & pte::YOUNG != 0
                })
                .collect();
            let marked: Vec<bool> = pfns[1..]
                .iter()
                .map(|&p| mm.pages[p as usize].test(PG_REFERENCED))
                .collect();
            let kept: Vec<bool> = pfns[1..4]
                .iter()
                .map(|&p| mm.pages[p as usize].test(PG_REFERENCED) && mm.folio_mapped(p))
                .collect();
            (young, marked, kept, mm.batches[0].lru_activate.len())
        };
        let (f, t) = (false, true);
        for v in ["6.1", "6.12"] {
            assert_eq!(
                run(v),
                (vec![f; 7], vec![t, t, t, f, f, f, f], vec![t; 3], 4),
                "{v}"
            );
        }
        assert_eq!(
            run("6.18"),
            (
                vec![t, t, t, f, f, f, f],
                vec![f, f, f, t, t, t, t],
                vec![f; 3],
                0
            )
        );
    }

    #[test]
    fn look_around_on_6_1_marks_the_folio_it_was_called_for() {
        // 6.1's folio_referenced_one runs lru_gen_look_around before clearing the young
        // bit: the window's scan meets page 0 itself, off the lists, and sets its
        // PG_referenced, which folio_check_references then reads as a second reference:
        // one young PTE activates (6.12 keeps it). The look-around still queues the
        // seven neighbours. Rule mglru_v61_look_around_sees_target.
        let c = |verdict, referenced, activated| Checked {
            verdict,
            referenced,
            activated,
        };
        assert_eq!(
            check_refs("6.1", false, 1, true, false),
            c(FolioRef::Activate, true, 7)
        );
        assert_eq!(
            check_refs("6.12", false, 1, true, false),
            c(FolioRef::Keep, true, 7)
        );
        // Not young: no look-around, nothing marked.
        assert_eq!(
            check_refs("6.1", false, 1, false, false),
            c(FolioRef::Reclaim, false, 0)
        );
    }
}
