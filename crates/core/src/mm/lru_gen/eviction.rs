//! The eviction: the "the eviction" section of mm/vmscan.c (v6.18), from sort_folio to
//! lru_gen_shrink_node: MGLRU's reclaim paths, from the folios at the tail of the oldest
//! generation up to the walk over a node's memcgs.
//!
//! ```text
//!  global (root) reclaim: shrink_node -> lru_gen_shrink_node -> shrink_many
//!        (the node's memcg LRU from a random bin; seed 001: mem_cgroup_iter instead)
//!          -> shrink_one (memory.min/low, rotation op) -> try_to_shrink_lruvec
//!  memcg reclaim: shrink_node -> shrink_node_memcgs -> shrink_lruvec -> lru_gen_shrink_lruvec
//!          -> try_to_shrink_lruvec
//!  try_to_shrink_lruvec: get_nr_to_scan (may age: try_to_inc_max_seq, aging.rs) then
//!          evict_folios until the scan target, should_abort_scan, or nothing more to evict
//!          (7.2: the target first, then per batch of 64 age if due, evict, check)
//!  evict_folios: [lru_lock] isolate_folios -> scan_folios (sort_folio / isolate_folio)
//!          try_to_inc_min_seq [unlock] shrink_folio_list, one retry pass for clean
//!          folios [lru_lock] move_folios_to_lru [unlock]
//!  kswapd: balance_pgdat -> lru_gen_age_node (set_initial_priority, protection, min_ttl;
//!          protection.rs)
//! ```
//! The classic paths MGLRU bypasses are bypassed where the kernel bypasses them:
//! prepare_scan_control and snapshot_refaults return at once, shrink_lruvec and shrink_node
//! branch here, kswapd_age_node becomes lru_gen_age_node, and neither eviction nor refault
//! records lru_note_cost; NR_ISOLATED_* is not counted and too_many_isolated not consulted.
//!
//! Simplified: one zone (scan_folios' zone loop has one turn, no PGSCAN_SKIP), no dirty
//! file folios (sc->nr.file_taken and unqueued_dirty stay 0, the flusher is never woken),
//! no demotion, no shrinker other than the shadow nodes', and memcgs are never offlined
//! (every memcg is online and pinnable).

use super::*;
use crate::engine::Site;
use crate::mm::mmzone::{Lruvec, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use crate::mm::swap::folio_test_lru;
use crate::mm::trace_vmscan::Tracepoint;
use crate::mm::vmscan::ScanControl;
use crate::mm::vmstat::{NodeStat, VmEvent};
use crate::mm::{LruvecId, MemcgId, Mm, Pfn, DEF_PRIORITY};
use crate::sim::Sim;
use crate::versions::Rules;

// ---------------------------------------------------------------------------------------
// Folios: sort, isolate, evict
// ---------------------------------------------------------------------------------------

/// sort_folio()'s verdict on a folio at the tail of the oldest generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortFolio {
    /// No longer evictable: off MGLRU, PG_unevictable, onto the unevictable list
    /// (UNEVICTABLE_PGCULLED).
    Unevictable,
    /// The page-table walk promoted it: move to the head of its generation.
    Promoted { gen: usize },
    /// A tier above tier_idx, or all tier bits set: folio_inc_gen, head of min_seq + 1;
    /// `tier` is counted in protected[hist][type][tier] unless all bits were set.
    Protected { tier: Option<usize> },
    /// Cannot be taken now (PG_lru clear: someone else holds it off the LRU; a zone above
    /// reclaim_idx cannot happen with one zone): folio_inc_gen, tail of min_seq + 1.
    Ineligible,
    /// Under writeback, or dirty file: folio_inc_gen with PG_reclaim, head of min_seq + 1.
    /// A dirty file folio adds to sc->nr.file_taken, and to sc->nr.unqueued_dirty when not
    /// under writeback.
    Writeback {
        file_taken: bool,
        unqueued_dirty: bool,
    },
    /// Not sorted: try isolate_folio.
    Isolate,
}

impl SortFolio {
    /// sort_folio()'s return value: true when the folio was sorted (counted in PGREFILL).
    pub fn sorted(&self) -> bool {
        !matches!(self, SortFolio::Isolate)
    }
}

/// sort_folio()'s decision, a pure function of the folio's flags and byte: `evictable` is
/// folio_evictable(); the kernel's PG_lru is folio_test_lru (under rule
/// lru_batch_clears_pg_lru clear while a batch holds the folio). The checks run in the
/// kernel's order. Rule mglru_sort_locked_as_writeback (6.1, 6.12): a locked folio is
/// sorted as one under writeback (moved on with PG_reclaim), not isolated.
pub fn sort_folio_decide(
    lrugen: &LruGenFolio,
    page: &Page,
    byte: u8,
    tier_idx: usize,
    evictable: bool,
    rules: &Rules,
) -> SortFolio {
    let on_lru = folio_test_lru(page, rules);
    let ty = folio_type(page);
    let refs = lru_refs(page, byte, rules);
    let ws = page.test(PG_WORKINGSET);
    let tier = refs_tier(refs, ws, rules);
    if !evictable {
        return SortFolio::Unevictable;
    }
    let min_gen = lru_gen_from_seq(lrugen.min_seq[ty]);
    match byte_gen(byte) {
        Some(gen) if gen != min_gen => return SortFolio::Promoted { gen },
        _ => {}
    }
    // Rule mglru_tiers_rework (6.14): every tier bit set is refs 4 with PG_workingset, and
    // such a folio is not counted; before, refs 4 (the counter full with PG_workingset),
    // counted like the others.
    let maxed = if rules.mglru_tiers_rework {
        refs + ws as usize == REFS_MAXED
    } else {
        refs == 1 << LRU_REFS_WIDTH
    };
    if tier > tier_idx || maxed {
        let counted = !maxed || !rules.mglru_tiers_rework;
        return SortFolio::Protected {
            tier: counted.then_some(tier),
        };
    }
    if !on_lru {
        return SortFolio::Ineligible;
    }
    let (dirty, writeback) = (page.test(PG_DIRTY), page.test(PG_WRITEBACK));
    let file_dirty = ty == LRU_GEN_FILE && dirty;
    let locked = rules.mglru_sort_locked_as_writeback && page.test(PG_LOCKED);
    if writeback || file_dirty || locked {
        return SortFolio::Writeback {
            file_taken: file_dirty,
            unqueued_dirty: file_dirty && !writeback,
        };
    }
    SortFolio::Isolate
}

/// sort_folio(): decide (see `sort_folio_decide`) and carry it out on the lists, except the
/// UNEVICTABLE_PGCULLED event and the sc->nr counts, which are the caller's. `evictable` is
/// folio_evictable(). Caller holds lru_lock. A protected folio of tier t counts in
/// protected[hist][type][t]; 6.1 and 6.12 store it at [t - 1] and read that for tier t
/// (their protected tiers are never 0), the same sums.
pub fn sort_folio(
    frames: &mut Frames,
    lv: &mut Lruvec,
    pfn: Pfn,
    (tier_idx, evictable): (usize, bool),
    rules: &Rules,
) -> SortFolio {
    let page = frames[pfn as usize];
    let verdict = sort_folio_decide(&lv.lrugen, &page, page.lru_gen, tier_idx, evictable, rules);
    match verdict {
        SortFolio::Unevictable => {
            lru_gen_del_folio(frames, lv, pfn, true);
            frames[pfn as usize].set(PG_UNEVICTABLE);
            crate::mm::mm_inline::lruvec_add_folio_untracked(frames, lv, pfn);
        }
        SortFolio::Promoted { gen } => gen_list_move(frames, &mut lv.lrugen, pfn, gen, false),
        SortFolio::Protected { tier } => {
            // Rule mglru_protected_to_head (6.14): to the head of the next generation;
            // before, to its tail, the first to be scanned once it is the oldest.
            let gen = folio_inc_gen(frames, lv, pfn, false, rules);
            let tail = !rules.mglru_protected_to_head;
            gen_list_move(frames, &mut lv.lrugen, pfn, gen, tail);
            if let Some(t) = tier {
                let ty = folio_type(&page);
                let hist = lru_hist_from_seq(lv.lrugen.min_seq[ty]);
                lv.lrugen.protected[hist][ty][t] += 1;
            }
        }
        SortFolio::Ineligible => {
            let gen = folio_inc_gen(frames, lv, pfn, false, rules);
            gen_list_move(frames, &mut lv.lrugen, pfn, gen, true);
        }
        SortFolio::Writeback { .. } => {
            let gen = folio_inc_gen(frames, lv, pfn, true, rules);
            gen_list_move(frames, &mut lv.lrugen, pfn, gen, false);
        }
        SortFolio::Isolate => {}
    }
    verdict
}

/// isolate_folio(): take an unsorted folio off the lists for shrink_folio_list. Refused
/// (false, nothing changed) when the reclaim may not do IO (`gfp_io` false, no __GFP_IO)
/// and the folio is dirty or anon outside the swap cache; when folio_try_get fails
/// (PG_DYING); when PG_lru cannot be cleared ([`folio_test_lru`]: not PG_LRU, or, under
/// rule lru_batch_clears_pg_lru, held by a per-CPU batch). Otherwise PG_LRU is cleared and
/// PG_ISOLATED set (the isolation reference), the refs counter is dropped unless
/// PG_referenced (before 6.14, rule mglru_tiers_rework, PG_workingset with it, and
/// PG_referenced is then cleared for shrink_folio_list), PG_reclaim is cleared, and the
/// folio leaves MGLRU as reclaiming (no PG_active). "Anon" is swap-backed here (no
/// lazyfree). Caller holds lru_lock; MGLRU does not count NR_ISOLATED_*.
pub fn isolate_folio(
    frames: &mut Frames,
    lv: &mut Lruvec,
    pfn: Pfn,
    gfp_io: bool,
    rules: &Rules,
) -> bool {
    let page = frames[pfn as usize];
    let anon_unswapped = page.test(PG_SWAPBACKED) && !page.test(PG_SWAPCACHE);
    if !gfp_io && (page.test(PG_DIRTY) || anon_unswapped) {
        return false;
    }
    if page.test(PG_DYING) || !folio_test_lru(&page, rules) {
        return false;
    }
    let p = &mut frames[pfn as usize];
    p.clear(PG_LRU | PG_RECLAIM);
    p.set(PG_ISOLATED);
    if !rules.mglru_tiers_rework {
        // 6.1, 6.12: without PG_referenced the refs flags go (PG_workingset among them);
        // PG_referenced is cleared for shrink_folio_list either way.
        if !page.test(PG_REFERENCED) {
            p.clear(PG_WORKINGSET);
        }
        p.clear(PG_REFERENCED);
    }
    if !page.test(PG_REFERENCED) {
        set_byte_refs(frames, pfn, 0);
    }
    let ok = lru_gen_del_folio(frames, lv, pfn, true);
    debug_assert!(ok, "pfn {pfn} isolated off no MGLRU list");
    true
}

/// How far ahead of the folio it sorts scan_folios fetches the folios it meets next (no
/// effect on results): the list is an array (list.rs), so they are known in advance.
const SCAN_AHEAD: usize = 8;

/// What one scan_folios() pass did: the folios it looked at, those it isolated, and
/// whether it stopped for its budget. The kernel returns `scanned` (before 7.2: 0 when it
/// isolated nothing without using up its budget) and hands `isolated` back through a
/// pointer; isolate_folios reads both (see `Mm::isolate_folios`).
#[derive(Debug, Clone, Copy, Default)]
struct ScanPass {
    scanned: u64,
    isolated: u64,
    budget_used: bool,
}

impl Mm {
    /// Prefetch the folio `d` places before the tail of lruvec `l`'s list (`gen`, `ty`):
    /// its frame (with its generation byte) and its list position (no effect on results).
    #[inline]
    fn prefetch_before_tail(&self, l: usize, gen: usize, ty: usize, d: usize) {
        if let Some(n) = self.lruvecs[l].lrugen.folios[gen][ty].before_tail(d) {
            crate::mm::prefetch(&self.pages[n as usize]);
            crate::mm::prefetch(&self.pages.lru_pos[n as usize]);
        }
    }

    /// scan_folios(): sort or isolate folios from the tail of the oldest generation of
    /// `ty`, at most min(nr_to_scan, MAX_LRU_BATCH) of them (v6.18; older kernels always
    /// MAX_LRU_BATCH), stopping at MIN_LRU_BATCH isolated or skipped.
    /// Counts PGSCAN_* (isolated) and PGREFILL (sorted), globally only for global reclaim.
    /// Nothing is scanned when the type has only MIN_NR_GENS generations. Caller holds
    /// lru_lock.
    fn scan_folios(
        &mut self,
        lv: LruvecId,
        sc: &ScanControl,
        ty: usize,
        tier: usize,
        nr_to_scan: u64,
        list: &mut Vec<Pfn>,
    ) -> ScanPass {
        let l = lv as usize;
        if get_nr_gens(&self.lruvecs[l].lrugen, ty) == MIN_NR_GENS {
            return ScanPass::default();
        }
        let gen = lru_gen_from_seq(self.lruvecs[l].lrugen.min_seq[ty]);
        let (mut scanned, mut sorted, mut isolated, mut skipped) = (0u64, 0u64, 0u64, 0u64);
        let mut protected = 0u64;
        let mut remaining = nr_to_scan.clamp(1, MAX_LRU_BATCH);
        let mut moved = self.pfn_vec();
        for d in 1..SCAN_AHEAD {
            self.prefetch_before_tail(l, gen, ty, d);
        }
        loop {
            let pfn = self.lruvecs[l].lrugen.folios[gen][ty].tail();
            if pfn == crate::mm::NIL {
                break;
            }
            scanned += 1;
            self.prefetch_before_tail(l, gen, ty, SCAN_AHEAD);
            let Mm {
                pages,
                lruvecs,
                rules,
                ..
            } = self;
            let verdict = sort_folio(pages, &mut lruvecs[l], pfn, (tier, true), rules);
            if verdict.sorted() {
                sorted += 1;
                protected += matches!(verdict, SortFolio::Protected { .. }) as u64;
            } else if isolate_folio(pages, &mut lruvecs[l], pfn, true, rules) {
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
        let item = sc.reclaimer_offset(&self.rules).pgscan();
        self.count_reclaim_event(memcg, item, isolated, !sc.cgroup_reclaim());
        self.count_reclaim_event(memcg, VmEvent::Pgrefill, sorted, !sc.cgroup_reclaim());
        let by_type = if ty == LRU_GEN_FILE {
            VmEvent::PgscanFile
        } else {
            VmEvent::PgscanAnon
        };
        self.count_event(by_type, isolated);
        // trace_mm_vmscan_lru_isolate(reclaim_idx, order, nr_requested, scanned, skipped,
        // isolated, the type's inactive list), from 6.12 on: nr_requested is the budget
        // handed in (MAX_LRU_BATCH before rule mglru_scan_budget_nr_to_scan).
        if self.rules.mglru_vmscan_tracepoints {
            if let Some(t) = self.trace_hist.as_mut() {
                let lru = if ty == LRU_GEN_FILE {
                    LRU_INACTIVE_FILE
                } else {
                    LRU_INACTIVE_ANON
                };
                let vals = [nr_to_scan.min(MAX_LRU_BATCH), scanned, skipped, isolated];
                t.hit(Tracepoint::LruIsolate, [lru as i64, 0], vals);
            }
        }
        // Rule mglru_protect_counts_activate (6.1): sort_folio counts each folio it
        // protects as a workingset activation.
        if self.rules.mglru_protect_counts_activate {
            let item = if ty == LRU_GEN_FILE {
                NodeStat::WorkingsetActivateFile
            } else {
                NodeStat::WorkingsetActivateAnon
            };
            self.mod_lruvec_state(lv, item, protected);
        }
        ScanPass {
            scanned,
            isolated,
            budget_used: remaining == 0,
        }
    }
}

/// get_tier_idx(): the highest tier eviction takes from. Tier 0 is the set point, tiers 1,
/// 2, 3 in turn the process variable until one refaults more, weighed 2 to 3 (since the
/// 6.14 rework, `mglru_type_selection_rework`; 1 to 2 before), a margin for noise, since
/// folios of a higher tier were accessed at least twice as often and should refault more
/// anyway. Returns that tier - 1 (3 when none does); tiers above it are protected.
pub fn get_tier_idx(lrugen: &LruGenFolio, ty: usize, rework: bool) -> usize {
    let (sp_gain, pv_gain) = if rework { (2, 3) } else { (1, 2) };
    let sp = read_ctrl_pos(lrugen, ty, 0, sp_gain);
    let mut tier = 1;
    while tier < MAX_NR_TIERS {
        let pv = read_ctrl_pos(lrugen, ty, tier, pv_gain);
        if !positive_ctrl_err(&sp, &pv) {
            break;
        }
        tier += 1;
    }
    tier - 1
}

/// isolate_folios()'s first choice before 6.14 (`mglru_type_selection_rework` off), and
/// the tier when the choice gave one: the obvious type where there is one (file at
/// swappiness 0 or 1, anon when its oldest generation is older than file's or at
/// MAX_SWAPPINESS; never file for want of __GFP_IO, which the model's reclaimers all
/// have), else get_type_to_scan's verdict on the two types' first tiers, weighed by
/// swappiness and 200 - swappiness, which also gives the tier: the last of the chosen type
/// before one that refaults more than the other type's first tier.
pub fn first_type_to_scan_v612(lrugen: &LruGenFolio, swappiness: u32) -> (usize, Option<usize>) {
    if swappiness == MIN_SWAPPINESS {
        return (LRU_GEN_FILE, None);
    }
    if lrugen.min_seq[LRU_GEN_ANON] < lrugen.min_seq[LRU_GEN_FILE] {
        return (LRU_GEN_ANON, None);
    }
    if swappiness == MIN_SWAPPINESS + 1 {
        return (LRU_GEN_FILE, None);
    }
    if swappiness >= MAX_SWAPPINESS {
        return (LRU_GEN_ANON, None);
    }
    let gain = [swappiness as u64, (MAX_SWAPPINESS - swappiness) as u64];
    let sp = read_ctrl_pos(lrugen, LRU_GEN_ANON, 0, gain[LRU_GEN_ANON]);
    let pv = read_ctrl_pos(lrugen, LRU_GEN_FILE, 0, gain[LRU_GEN_FILE]);
    let ty = positive_ctrl_err(&sp, &pv) as usize;
    let sp = read_ctrl_pos(lrugen, 1 - ty, 0, gain[1 - ty]);
    let mut tier = 1;
    while tier < MAX_NR_TIERS {
        let pv = read_ctrl_pos(lrugen, ty, tier, gain[ty]);
        if !positive_ctrl_err(&sp, &pv) {
            break;
        }
        tier += 1;
    }
    (ty, Some(tier - 1))
}

/// get_type_to_scan(): the type eviction tries first. Swappiness 0 and 1 take file, 200
/// and 201 anon (v6.18's shortcuts); in between, all tiers of anon weighed by swappiness
/// are the set point and all tiers of file weighed by 200 - swappiness the process
/// variable: file unless file refaults more.
pub fn get_type_to_scan(lrugen: &LruGenFolio, swappiness: u32) -> usize {
    if swappiness <= MIN_SWAPPINESS + 1 {
        return LRU_GEN_FILE;
    }
    if swappiness >= MAX_SWAPPINESS {
        return LRU_GEN_ANON;
    }
    let sp = read_ctrl_pos(lrugen, LRU_GEN_ANON, MAX_NR_TIERS, swappiness as u64);
    let pv = read_ctrl_pos(
        lrugen,
        LRU_GEN_FILE,
        MAX_NR_TIERS,
        (MAX_SWAPPINESS - swappiness) as u64,
    );
    positive_ctrl_err(&sp, &pv) as usize
}

/// What evict_folios' isolation under the lru_lock produced.
struct Isolated {
    ty: usize,
    scanned: u64,
    /// What the pass that isolated scanned (7.2's `isolate_scanned`, the tracepoint's
    /// nr_scanned there); 0 when nothing was isolated.
    type_scanned: u64,
}

impl Mm {
    /// isolate_folios(): scan the type get_type_to_scan picks, at the tier get_tier_idx
    /// allows (all tiers when the tiers are switched off), then, once per evictable type,
    /// again. Before 7.2 a pass counts only if it isolated something or used up its
    /// budget, the first pass that counts ends it, and each other one turns to the other
    /// type. With `exact` (rule mglru_scan_exact_count, 7.2) every folio looked at counts,
    /// the first pass that isolates ends it, and the type turns only after a pass that
    /// found nothing to scan: one that only sorted scans the same type again. Returns the
    /// type isolated from and the folios scanned in all passes. Caller holds lru_lock.
    fn isolate_folios(
        &mut self,
        lv: LruvecId,
        sc: &ScanControl,
        (swappiness, tiers): (u32, bool),
        nr_to_scan: u64,
        exact: bool,
        list: &mut Vec<Pfn>,
    ) -> Isolated {
        // Rule mglru_type_selection_rework (6.14): the PID's choice over all tiers; before,
        // the obvious choice first, and the PID's over the first tiers.
        let rework = self.rules.mglru_type_selection_rework;
        let lrugen = &self.lruvecs[lv as usize].lrugen;
        let (mut ty, mut first_tier) = if rework {
            (get_type_to_scan(lrugen, swappiness), None)
        } else {
            first_type_to_scan_v612(lrugen, swappiness)
        };
        let mut out = Isolated {
            ty,
            scanned: 0,
            type_scanned: 0,
        };
        for _ in (0..ANON_AND_FILE).filter(|&t| type_is_evictable(t, swappiness)) {
            let lrugen = &self.lruvecs[lv as usize].lrugen;
            let tier = match first_tier.take() {
                _ if !tiers => MAX_NR_TIERS - 1,
                Some(tier) => tier,
                None => get_tier_idx(lrugen, ty, rework),
            };
            out.ty = ty;
            let pass = self.scan_folios(lv, sc, ty, tier, nr_to_scan, list);
            if exact {
                out.scanned += pass.scanned;
                if pass.isolated > 0 {
                    out.type_scanned = pass.scanned;
                    return out;
                }
                if pass.scanned == 0 {
                    ty = 1 - ty;
                }
            } else {
                if pass.isolated > 0 || pass.budget_used {
                    out.scanned = pass.scanned;
                    out.type_scanned = pass.scanned;
                    return out;
                }
                ty = 1 - ty;
            }
        }
        out
    }
}

impl Sim {
    /// evict_folios(): isolate a batch from the oldest generation under lru_lock, reclaim
    /// it, retry once the clean folios that may have missed folio_rotate_reclaimable, and
    /// put the rest back (none into the oldest generation). Returns the folios scanned
    /// (plus one when min_seq advanced), 0 when eviction must wait for aging. Rule
    /// mglru_scan_exact_count (7.2): min_seq is also advanced before isolating (empty
    /// generations that folio deletion left), and the answer is the folios scanned alone,
    /// sorted ones included (see `Mm::isolate_folios`).
    pub(super) async fn evict_folios(
        &self,
        nr_to_scan: u64,
        lv: LruvecId,
        sc: &mut ScanControl,
        swappiness: u32,
    ) -> u64 {
        self.evict_folios_typed(nr_to_scan, lv, sc, swappiness)
            .await
            .0
    }

    /// evict_folios() with the type it isolated from, None when it isolated nothing (6.1
    /// hands the caller `need_swapping` when that type was anon).
    pub(super) async fn evict_folios_typed(
        &self,
        nr_to_scan: u64,
        lv: LruvecId,
        sc: &mut ScanControl,
        swappiness: u32,
    ) -> (u64, Option<usize>) {
        self.lock_lruvec(lv, Site::EvictFolios).await;
        let mut list = self.mm.borrow_mut().pfn_vec();
        let (ty, scanned, traced) = {
            let mut mm = self.mm.borrow_mut();
            let tiers = self.v.mglru_tiers;
            // Rule mglru_scan_budget_nr_to_scan (v6.17): before it, scan_folios always
            // took up to MAX_LRU_BATCH, however small the target.
            let budget = if mm.rules.mglru_scan_budget_nr_to_scan {
                nr_to_scan
            } else {
                MAX_LRU_BATCH
            };
            let exact = mm.rules.mglru_scan_exact_count;
            if exact {
                try_to_inc_min_seq(&mut mm.lruvecs[lv as usize].lrugen, swappiness);
            }
            let how = (swappiness, tiers);
            let iso = mm.isolate_folios(lv, sc, how, budget, exact, &mut list);
            let g = &mut mm.lruvecs[lv as usize].lrugen;
            let scanned = if exact {
                if iso.scanned > 0 {
                    try_to_inc_min_seq(g, swappiness);
                }
                iso.scanned
            } else {
                let inc = try_to_inc_min_seq(g, swappiness) as u64;
                if evictable_min_seq(g.min_seq, swappiness) + MIN_NR_GENS > g.max_seq {
                    0 // only two generations left: eviction must wait for aging
                } else {
                    iso.scanned + inc
                }
            };
            // The tracepoint's nr_scanned: 7.2's isolate_scanned, before it the answer.
            let traced = if exact { iso.type_scanned } else { scanned };
            (iso.ty, scanned, traced)
        };
        self.e.charge(scanned * self.c.isolate_folio);
        self.unlock_lruvec(lv);
        let isolated = (!list.is_empty()).then_some(ty);
        let mut skip_retry = false;
        while !list.is_empty() {
            let stat = self.shrink_folio_list(&mut list, lv, sc).await;
            sc.nr_reclaimed += stat.nr_reclaimed;
            self.trace_evict_pass(lv, sc.priority, traced, stat.nr_reclaimed);
            let clean = self.lru_gen_sort_kept(lv, &mut list, skip_retry);
            self.lru_gen_putback(lv, sc, ty, &list, stat.nr_reclaimed)
                .await;
            self.mm
                .borrow_mut()
                .put_pfn_vec(std::mem::replace(&mut list, clean));
            skip_retry = true;
        }
        self.mm.borrow_mut().put_pfn_vec(list);
        (scanned, isolated)
    }

    /// evict_folios' trace_mm_vmscan_lru_shrink_inactive after a shrink_folio_list pass
    /// (rule mglru_vmscan_tracepoints; 6.1's MGLRU fires none): the pass's nr_reclaimed and
    /// the batch's nr_scanned, the same again on the retry pass, as the kernel's `goto
    /// retry` fires it again with the value it had.
    fn trace_evict_pass(&self, lv: LruvecId, priority: i32, scanned: u64, reclaimed: u64) {
        let mut mm = self.mm.borrow_mut();
        if !mm.rules.mglru_vmscan_tracepoints {
            return;
        }
        let node = mm.lruvecs[lv as usize].node;
        if let Some(t) = mm.trace_hist.as_mut() {
            let vals = [scanned, reclaimed, 0, 0];
            t.hit(
                Tracepoint::LruShrinkInactive,
                [node.into(), priority.into()],
                vals,
            );
        }
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
            if evict_folios_retries(&p, mm.folio_mapped(pfn), skip_retry, &mm.rules) {
                clean.push(pfn);
                continue;
            }
            let Mm {
                pages,
                lruvecs,
                rules,
                ..
            } = &mut *mm;
            evict_folios_keep_off_oldest(pages, &lruvecs[lv as usize].lrugen, pfn, rules);
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
            let item = sc.reclaimer_offset(&mm.rules).pgsteal();
            mm.count_reclaim_event(memcg, item, reclaimed, !sc.cgroup_reclaim());
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
}

/// evict_folios()' retry test for a folio shrink_folio_list kept: one that is inactive,
/// unmapped, clean and not under writeback may have missed folio_rotate_reclaimable and
/// gets a second pass (not after the second). Without rule mglru_rejected_active_if_oldest
/// (6.1, 6.12) a referenced or locked folio is no candidate either.
pub fn evict_folios_retries(
    page: &Page,
    mapped: bool,
    skip_retry: bool,
    rules: &crate::versions::Rules,
) -> bool {
    let mut no = PG_ACTIVE | PG_DIRTY | PG_WRITEBACK;
    if !rules.mglru_rejected_active_if_oldest {
        no |= PG_REFERENCED | PG_LOCKED;
    }
    !skip_retry && !mapped && !page.test(no)
}

/// evict_folios()' putback step for a folio shrink_folio_list kept (after the retry
/// check): if it would be added back to the oldest generation (lru_gen_folio_seq with
/// reclaiming false equals the type's min_seq, both read at that moment), clear its refs
/// flags and set PG_active so that it lands in a young generation instead. Returns whether
/// it did. The kernel does this without the lru_lock.
/// Without rule mglru_rejected_active_if_oldest (6.1, 6.12) every kept folio is treated
/// so, losing PG_workingset too (that LRU_REFS_FLAGS held it), except one with PG_reclaim
/// that is dirty or under writeback (pageout started its write): it keeps its flags and,
/// with PG_workingset, gets back the PG_referenced isolate_folio cleared.
pub fn evict_folios_keep_off_oldest(
    frames: &mut Frames,
    lrugen: &LruGenFolio,
    pfn: Pfn,
    rules: &crate::versions::Rules,
) -> bool {
    let page = frames[pfn as usize];
    if !rules.mglru_rejected_active_if_oldest {
        if page.test(PG_RECLAIM) && page.test(PG_DIRTY | PG_WRITEBACK) {
            if page.test(PG_WORKINGSET) {
                frames[pfn as usize].set(PG_REFERENCED);
            }
            return false;
        }
        clear_refs_flags(frames, pfn, rules);
        frames[pfn as usize].clear(PG_WORKINGSET);
        frames[pfn as usize].set(PG_ACTIVE);
        return true;
    }
    let min_seq = lrugen.min_seq[folio_type(&page)];
    if lru_gen_folio_seq(lrugen, &page, false, rules) != min_seq {
        return false;
    }
    clear_refs_flags(frames, pfn, rules);
    frames[pfn as usize].set(PG_ACTIVE);
    true
}

// ---------------------------------------------------------------------------------------
// Lruvecs and memcgs: how much, when to stop, which next
// ---------------------------------------------------------------------------------------

/// should_run_aging(): returns (need_aging, evictable pages). Aging is required when the
/// oldest evictable generation is fewer than MIN_NR_GENS below max_seq (only the two
/// youngest are left, which eviction may not take; the size is then 0). With exactly
/// MIN_NR_GENS + 1 generations left it is due: always since "mm/mglru: rework aging
/// feedback" (`feedback_rework`, rule mglru_aging_feedback_rework, v6.14); before it,
/// only when the youngest generation holds more than 1/MIN_NR_GENS of the evictable pages
/// or the oldest less than 1/(MIN_NR_GENS + 2) (the kernel's ideal spread). The size sums
/// nr_pages, a negative count as 0, over all generations of the evictable types.
pub fn should_run_aging(
    lrugen: &LruGenFolio,
    max_seq: u64,
    swappiness: u32,
    feedback_rework: bool,
) -> (bool, u64) {
    let oldest = evictable_min_seq(lrugen.min_seq, swappiness);
    if oldest + MIN_NR_GENS > max_seq {
        return (true, 0);
    }
    let (mut size, mut young, mut old) = (0u64, 0u64, 0u64);
    for ty in 0..ANON_AND_FILE {
        if !type_is_evictable(ty, swappiness) {
            continue;
        }
        for seq in lrugen.min_seq[ty]..=max_seq {
            let n = lrugen.nr_pages[lru_gen_from_seq(seq)][ty].max(0) as u64;
            size += n;
            if seq == max_seq {
                young += n;
            } else if seq + MIN_NR_GENS == max_seq {
                old += n;
            }
        }
    }
    let three_left = oldest + MIN_NR_GENS == max_seq;
    let due = three_left
        && (feedback_rework || young * MIN_NR_GENS > size || old * (MIN_NR_GENS + 2) < size);
    (due, size)
}

/// What get_nr_to_scan() asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NrToScan {
    /// -1: stop, and the lruvec should be rotated (below memory.min, or just aged).
    Stop,
    /// Scan up to this many pages (0 stops without rotating).
    Scan(u64),
    /// Aging is due: try_to_inc_max_seq(max_seq, swappiness, false); on success the
    /// answer is `Stop` (-1), else `Scan(0)`.
    Aging { max_seq: u64 },
}

impl Sim {
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
            let below_min = mm.mem_cgroup_below_min(sc.target_memcg(), memcg);
            let priority = sc.priority;
            get_nr_to_scan_decide(
                &mm.lruvecs[lv as usize].lrugen,
                (swappiness, mm.rules.mglru_aging_feedback_rework),
                below_min,
                true,
                priority,
                |nr| mm.lru_gen_proportional_protection(lv, sc, nr),
            )
        };
        match verdict {
            NrToScan::Stop => None,
            NrToScan::Scan(n) => Some(n),
            NrToScan::Aging { max_seq } => {
                if self
                    .try_to_inc_max_seq(lv, max_seq, swappiness, false, &mut sc.mm_walk)
                    .await
                {
                    None
                } else {
                    Some(0)
                }
            }
        }
    }
}

impl Mm {
    /// MGLRU's call of apply_proportional_protection() in get_nr_to_scan, under rule
    /// mglru_proportional_protection (v6.17); before it, MGLRU scanned a protected memcg's
    /// whole size.
    fn lru_gen_proportional_protection(&self, lv: LruvecId, sc: &mut ScanControl, nr: u64) -> u64 {
        if !self.rules.mglru_proportional_protection {
            return nr;
        }
        self.apply_proportional_protection(lv, sc, nr)
    }
}

/// get_nr_to_scan()'s decision (see `Sim::lru_gen_get_nr_to_scan`): how much
/// try_to_shrink_lruvec may scan. Below memory.min: stop. A deleted (offline) memcg has all
/// its pages scanned. Otherwise the size is scaled by memory.low/min (`protect`:
/// apply_proportional_protection, since v6.16 also for MGLRU) and, unless aging is due
/// outside DEF_PRIORITY, shifted by the priority.
fn get_nr_to_scan_decide(
    lrugen: &LruGenFolio,
    (swappiness, feedback_rework): (u32, bool),
    below_min: bool,
    online: bool,
    priority: i32,
    protect: impl FnOnce(u64) -> u64,
) -> NrToScan {
    if below_min {
        return NrToScan::Stop;
    }
    let max_seq = lrugen.max_seq;
    let (aging, nr) = should_run_aging(lrugen, max_seq, swappiness, feedback_rework);
    if nr != 0 && !online {
        return NrToScan::Scan(nr);
    }
    let nr = protect(nr);
    if !aging || priority == DEF_PRIORITY {
        return NrToScan::Scan(nr >> priority.clamp(0, 63));
    }
    NrToScan::Aging { max_seq }
}

/// compact_gap(0): order-0 reclaim's floor in should_abort_scan.
const COMPACT_GAP_ORDER0: u64 = 2;

impl Mm {
    /// should_abort_scan(): root reclaim stops once it has reclaimed its target; kswapd
    /// also once every eligible zone is MIN_LRU_BATCH above its HIGH watermark. Memcg
    /// reclaim never aborts (fairness among the memcgs of the subtree), except under rule
    /// mglru_abort_cgroup_reclaim (7.2), where it too stops at its target. Not modeled:
    /// 7.2's stop of proactive reclaim on a pending signal (a write to memory.reclaim is
    /// never interrupted here).
    pub fn should_abort_scan(&self, lv: LruvecId, sc: &ScanControl) -> bool {
        if !sc.root_reclaim() && !self.rules.mglru_abort_cgroup_reclaim {
            return false;
        }
        if sc.nr_reclaimed >= sc.nr_to_reclaim.max(COMPACT_GAP_ORDER0) {
            return true;
        }
        if !sc.kswapd {
            return false;
        }
        let nd = &self.nodes[self.lruvecs[lv as usize].node as usize];
        nd.free > nd.wmark[crate::mm::mmzone::WMARK_HIGH] + MIN_LRU_BATCH
    }
}

/// What try_to_shrink_lruvec hands one evict_folios call: its `budget` (the target before
/// 7.2, what is left of it in 7.2's loop), or, under rule mglru_scan_batch_min_lru_batch
/// (7.2), at most MIN_LRU_BATCH of the `left` it may still scan, so that should_abort_scan
/// is asked after every 64 folios.
fn eviction_batch(budget: u64, left: u64, rules: &Rules) -> u64 {
    if rules.mglru_scan_batch_min_lru_batch {
        left.clamp(1, MIN_LRU_BATCH)
    } else {
        budget
    }
}

/// should_run_aging() as 7.2's reclaim loop asks it: aging is a must when fewer than
/// MIN_NR_GENS + 1 evictable generations are left, at any priority; merely due (see
/// `should_run_aging`) it waits while the priority is DEF_PRIORITY.
pub fn should_run_aging_in_loop(
    lrugen: &LruGenFolio,
    (swappiness, feedback_rework): (u32, bool),
    priority: i32,
) -> bool {
    let max_seq = lrugen.max_seq;
    if evictable_min_seq(lrugen.min_seq, swappiness) + MIN_NR_GENS > max_seq {
        return true;
    }
    priority != DEF_PRIORITY && should_run_aging(lrugen, max_seq, swappiness, feedback_rework).0
}

impl Sim {
    /// try_to_shrink_lruvec(): evict until get_nr_to_scan's target is scanned, nothing
    /// more can be evicted, or should_abort_scan. Returns whether the lruvec was just aged
    /// or is below memory.min (get_nr_to_scan's -1): the caller rotates it. Rule
    /// mglru_reclaim_loop_restructure (7.2) runs 7.2's loop instead
    /// (`try_to_shrink_lruvec_aging_in_loop`).
    async fn try_to_shrink_lruvec(&self, lv: LruvecId, sc: &mut ScanControl) -> bool {
        self.e.charge(self.c.shrink_lruvec_setup);
        let swappiness = self.mm.borrow().lru_gen_swappiness(lv, sc);
        if self.rules().mglru_reclaim_loop_restructure {
            return self
                .try_to_shrink_lruvec_aging_in_loop(lv, sc, swappiness)
                .await;
        }
        let mut scanned = 0u64;
        loop {
            let nr_to_scan = self.lru_gen_get_nr_to_scan(lv, sc, swappiness).await;
            let Some(nr) = nr_to_scan.filter(|&n| n > 0) else {
                return nr_to_scan.is_none();
            };
            let batch = eviction_batch(nr, nr.saturating_sub(scanned), &self.rules());
            let delta = self.evict_folios(batch, lv, sc, swappiness).await;
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

    /// try_to_shrink_lruvec() as 7.2 restructured it (rule mglru_reclaim_loop_restructure):
    /// the budget is computed once, without aging (`lru_gen_nr_to_scan_budget`). Each turn
    /// stops below memory.min (asking for rotation), runs try_to_inc_max_seq when
    /// should_run_aging says so (rotation if it aged) and evicts a batch in the same turn;
    /// it stops when nothing was scanned, on should_abort_scan, and in root reclaim after
    /// the batch that followed an aging (the memcg LRU's rotation gives the next memcg its
    /// turn; memcg reclaim gets its fairness from the iterator). Returns whether the lruvec
    /// should be rotated.
    async fn try_to_shrink_lruvec_aging_in_loop(
        &self,
        lv: LruvecId,
        sc: &mut ScanControl,
        swappiness: u32,
    ) -> bool {
        let mut left = self.lru_gen_nr_to_scan_budget(lv, sc, swappiness) as i64;
        let (mut need_rotate, mut should_age) = (false, false);
        while left > 0 {
            let (below_min, aging, max_seq) = {
                let mm = self.mm.borrow();
                let memcg = mm.lruvecs[lv as usize].memcg;
                let g = &mm.lruvecs[lv as usize].lrugen;
                let how = (swappiness, mm.rules.mglru_aging_feedback_rework);
                let aging = should_run_aging_in_loop(g, how, sc.priority);
                (
                    mm.mem_cgroup_below_min(sc.target_memcg(), memcg),
                    aging,
                    g.max_seq,
                )
            };
            if below_min {
                need_rotate = true;
                break;
            }
            if aging {
                need_rotate |= self
                    .try_to_inc_max_seq(lv, max_seq, swappiness, false, &mut sc.mm_walk)
                    .await;
                should_age = true;
            }
            let batch = eviction_batch(left as u64, left as u64, &self.rules());
            let delta = self.evict_folios(batch, lv, sc, swappiness).await;
            if delta == 0 || self.mm.borrow().should_abort_scan(lv, sc) {
                break;
            }
            if sc.root_reclaim() && should_age {
                break;
            }
            if self.current_killed() {
                break;
            }
            left -= delta as i64;
            self.e.sync().await;
        }
        need_rotate
    }

    /// get_nr_to_scan() of 7.2 (rule mglru_reclaim_loop_restructure): the evictable size
    /// (lruvec_evictable_size), scaled by memory.low/min (apply_proportional_protection,
    /// rule mglru_proportional_protection) and shifted by the priority; no aging, no
    /// memory.min test (the loop makes both). Simplified: every memcg is online, and the
    /// anon-only proactive reclaim's early 0 without swap is folded into the swappiness.
    fn lru_gen_nr_to_scan_budget(
        &self,
        lv: LruvecId,
        sc: &mut ScanControl,
        swappiness: u32,
    ) -> u64 {
        let mm = self.mm.borrow();
        let size =
            super::protection::lruvec_evictable_size(&mm.lruvecs[lv as usize].lrugen, swappiness);
        mm.lru_gen_proportional_protection(lv, sc, size) >> sc.priority.clamp(0, 63)
    }

    /// shrink_one(): one memcg's lruvec in shrink_many. Below memory.min (as
    /// lru_gen_age_node last computed it): young. Below memory.low: once to the tail, the
    /// next time reclaimed with MEMCG_LOW. After reclaim: aged means young; not aged but
    /// sizable means stay; otherwise once to the tail, then young.
    async fn shrink_one(&self, lv: LruvecId, sc: &mut ScanControl) -> MemcgLruOp {
        let (memcg, node, seg) = {
            let mm = self.mm.borrow();
            let l = &mm.lruvecs[lv as usize];
            (l.memcg, l.node, l.lrugen.seg)
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
                mm.memcg_memory_event(memcg, crate::mm::memcontrol::MemcgEvent::Low);
            }
        }
        let aged = self.try_to_shrink_lruvec(lv, sc).await;
        sc.reclaim_state += self.shrink_slab(memcg, node, sc.priority);
        self.flush_reclaim_state(sc);
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
    /// walk once the target is met, checked after every memcg, skipped ones too (the
    /// patch's `next:`).
    async fn shrink_many_memcg_iter(&self, node: u32, sc: &mut ScanControl) {
        let target = sc.target_memcg();
        let partial = !sc.kswapd && !sc.memcg_full_walk;
        let mut cookie = crate::mm::memcontrol::ReclaimCookie {
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
            if let Some(lv) = self.memcg_iter_protected(target, memcg, node, sc) {
                self.try_to_shrink_lruvec(lv, sc).await;
                // The patch's shrink_one: shrink_slab, then flush_reclaim_state.
                sc.reclaim_state += self.shrink_slab(memcg, node, sc.priority);
                self.flush_reclaim_state(sc);
                if self.mm.borrow().should_abort_scan(lv, sc) || self.current_killed() {
                    break;
                }
            }
            // The patch's `next:` label, where a protected memcg's skip goes too.
            if partial && sc.nr_reclaimed >= sc.nr_to_reclaim {
                break;
            }
        }
    }

    /// Seed 001's protection check in shrink_many: the lruvec to shrink, or None for a
    /// memcg below memory.min, or below memory.low while memcg_low_reclaim is off (noted
    /// in memcg_low_skipped); a memcg reclaimed below low counts MEMCG_LOW.
    fn memcg_iter_protected(
        &self,
        target: MemcgId,
        memcg: MemcgId,
        node: u32,
        sc: &mut ScanControl,
    ) -> Option<LruvecId> {
        let mut mm = self.mm.borrow_mut();
        mm.mem_cgroup_calculate_protection(target, memcg);
        if mm.mem_cgroup_below_min(target, memcg) {
            return None;
        }
        if mm.mem_cgroup_below_low(target, memcg) {
            if !sc.memcg_low_reclaim {
                sc.memcg_low_skipped = true;
                return None;
            }
            mm.memcg_memory_event(memcg, crate::mm::memcontrol::MemcgEvent::Low);
        }
        Some(mm.lruvec_of(memcg, node))
    }

    /// lru_gen_shrink_lruvec(): memcg (non-root) reclaim of one lruvec; an lruvec that had
    /// to be aged moves to the young generation of the memcg LRU (not with seed 001's
    /// patch, which has no memcg LRU, nor before the memcg LRU existed: rule
    /// mglru_memcg_lru, off in 6.1, where root reclaim comes here for every memcg too).
    /// 6.1 (rule mglru_v61_reclaim_loop) has its own loop here: v6_1.rs.
    pub async fn lru_gen_shrink_lruvec(&self, lv: LruvecId, sc: &mut ScanControl) {
        // Rule mglru_v61_reclaim_loop: 6.1's own loop (v6_1.rs).
        if self.rules().mglru_v61_reclaim_loop {
            return self.lru_gen_shrink_lruvec_v61(lv, sc).await;
        }
        // set_mm_walk(NULL, sc->proactive): kswapd's and proactive reclaim's walk.
        sc.mm_walk |= sc.kswapd || sc.proactive;
        self.lru_add_drain().await;
        let plugged = self.blk_start_plug(sc);
        if self.try_to_shrink_lruvec(lv, sc).await
            && self.rules().mglru_memcg_lru
            && !self.v.mglru_memcg_iter
        {
            self.lru_gen_rotate_memcg(lv, MemcgLruOp::Young).await;
        }
        self.blk_finish_plug(sc, plugged).await;
        sc.mm_walk = false; // clear_mm_walk()
    }

    /// lru_gen_shrink_node(): root reclaim with MGLRU. Skipped when the reclaim may not
    /// write or unmap (unmapped clean folios are already taken first). Otherwise drain the
    /// local batches, set_initial_priority, and walk the memcgs (shrink_many); kswapd
    /// counts only this pass's reclaim for should_abort_scan. Progress resets
    /// kswapd_failures.
    pub async fn lru_gen_shrink_node(&self, node: u32, sc: &mut ScanControl) {
        let reclaimed = sc.nr_reclaimed;
        if sc.may_writepage && sc.may_unmap {
            sc.mm_walk = sc.kswapd || sc.proactive; // set_mm_walk(pgdat, sc->proactive)
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
            sc.mm_walk = false; // clear_mm_walk()
        }
        if sc.nr_reclaimed > reclaimed {
            self.mm.borrow_mut().nodes[node as usize].kswapd_failures = 0;
        }
        self.after_reclaim_pass();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::lru_gen::test_util::*;
    use crate::mm::mmzone::{LRU_ACTIVE_ANON, LRU_UNEVICTABLE};
    use crate::versions::DEFAULT_RULES;

    /// Seed 001's shrink_many on one node of a root reclaim whose target is `met` already
    /// (by an earlier node), the shared iterator standing at the root: the memcgs' usage
    /// after it, and where the iterator stands.
    fn seed_001_walk_after_root(met: bool) -> (Vec<u64>, Option<MemcgId>) {
        let t = r#"
duration = "1000s"
[machine]
cpus = 2
memory_per_node = "256M"
[kernel]
lru = "mglru"
memcg_flush_phase = "1.9s"
[variants]
mglru_memcg_iter = true
[[cgroup]]
path = "/b"
memory.min = "64M"
[[cgroup]]
path = "/c"
[[workload]]
type = "usemem"
cgroup = "/c"
size = "4K"
start = "900s"
"#;
        let s = Sim::build(&crate::Scenario::from_toml(t).unwrap()).unwrap();
        s.fixture_file_folios(1, 0, 256, 0);
        s.fixture_file_folios(2, 0, 256, 0);
        s.mm.borrow_mut().memcgs[0].iter[0].position = Some(0);
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            let mut sc = ScanControl::new(32, None, false);
            // A late pass, so that 256 folios give something to scan (256 >> 1).
            sc.priority = 1;
            sc.nr_reclaimed = if met { 32 } else { 0 };
            s.shrink_many_memcg_iter(0, &mut sc).await;
        });
        let mm = s.mm.borrow();
        let usage = mm.memcgs.iter().map(|m| m.usage).collect();
        (usage, mm.memcgs[0].iter[0].position)
    }

    #[test]
    fn seed_001_walk_ends_at_a_protected_memcg_once_the_target_is_met() {
        // The patch's `next:`: /b (memcg 1, below memory.min) is skipped to the check of
        // the target, which is met, so the walk ends there and /c (2) keeps its folios;
        // the iterator stands at /b for the next walker.
        let before = seed_001_walk_after_root(true);
        let (usage, pos) = before;
        assert_eq!(pos, Some(1));
        let (fresh, _) = seed_001_walk_after_root(false);
        // Not met: the same walk goes past /b and reclaims from /c (the path is taken).
        assert!(fresh[2] < usage[2], "{fresh:?} vs {usage:?}");
        assert_eq!(fresh[1], usage[1], "/b is never reclaimed");
    }

    #[test]
    fn aging_that_walks_page_tables_leaves_the_reclaimer_an_mm_walk() {
        // try_to_inc_max_seq's set_mm_walk(NULL, true): a direct reclaimer (no walk of its
        // own) has one once aging walks page tables (lru_gen 0x7), not when aging only
        // iterates the mm list (0x5: no 0x2, no page-table walk), nor when another aging already
        // covered the sequence number (mm_state.seq caught up).
        for (caps, walked) in [("0x7", true), ("0x5", false)] {
            let extra = format!("lru = \"mglru\"\nlru_gen.enabled = {caps}");
            let s = crate::fixture::one_node_machine("64M", None, &extra);
            let lv = s.mm.borrow().lruvec_of(1, 0);
            let got = std::rc::Rc::new(std::cell::Cell::new((false, false)));
            let g = got.clone();
            crate::fixture::run_probe(&s, 0, 0, move |s| async move {
                let max_seq = s.mm.borrow().lruvecs[lv as usize].lrugen.max_seq;
                let mut sc = ScanControl::new(32, Some(1), false);
                let aged = s
                    .try_to_inc_max_seq(lv, max_seq, 60, false, &mut sc.mm_walk)
                    .await;
                let first = sc.mm_walk;
                // The same sequence number again: covered, no walk.
                let mut again = ScanControl::new(32, Some(1), false);
                assert!(
                    !s.try_to_inc_max_seq(lv, max_seq, 60, false, &mut again.mm_walk)
                        .await
                );
                assert!(aged);
                g.set((first, again.mm_walk));
            });
            assert_eq!(got.get(), (walked, false), "lru_gen {caps}");
        }
    }

    #[test]
    fn protected_folios_count_as_activations_on_6_1() {
        // Four page-cache folios of /a in the oldest generation, page 0 at the tail: page 0
        // refs 3 (tier 2), page 1 refs 4 with PG_workingset (maxed), pages 2 and 3 unused.
        // With tier_idx 0, sort_folio protects pages 0 and 1 and isolates 2 and 3; 6.1
        // counts the two protected ones as WORKINGSET_ACTIVATE, later kernels none.
        for (version, activations) in [("6.1", 2), ("6.12", 0), ("6.18", 0)] {
            let extra = format!("lru = \"mglru\"\nversion = \"{version}\"");
            let s = crate::fixture::one_node_machine("64M", None, &extra);
            let (_, pfns) = s.fixture_file_folios(1, 0, 4, 0);
            let mut mm = s.mm.borrow_mut();
            let (p0, p1) = (pfns[0] as usize, pfns[1] as usize);
            mm.pages[p0].set(PG_REFERENCED);
            mm.pages[p0].lru_gen |= 2 << LRU_REFS_PGOFF;
            mm.pages[p1].set(PG_REFERENCED | PG_WORKINGSET);
            mm.pages[p1].lru_gen |= 3 << LRU_REFS_PGOFF;
            let lv = mm.lruvec_of(1, 0);
            let sc = ScanControl::new(32, Some(1), false);
            let mut list = Vec::new();
            let scanned = mm.scan_folios(lv, &sc, LRU_GEN_FILE, 0, 4, &mut list);
            assert_eq!(
                (scanned.scanned, scanned.isolated, list.len()),
                (4, 2, 2),
                "{version}"
            );
            let stat = |item: NodeStat| mm.lruvecs[lv as usize].stat[item as usize];
            assert_eq!(
                stat(NodeStat::WorkingsetActivateFile),
                activations,
                "{version}"
            );
            assert_eq!(stat(NodeStat::WorkingsetActivateAnon), 0);
        }
    }

    #[test]
    fn get_tier_idx_cases() {
        let f = LRU_GEN_FILE;
        // No refaults anywhere: every tier is positive, tier_idx 3 (nothing protected).
        let mut g = LruGenFolio::init(true, 0);
        assert_eq!(get_tier_idx(&g, f, true), 3);
        // Set point tier 0: refaulted 5 + 5 = 10, total 500 + 300 + 200 = 1000, gain 2.
        g.avg_refaulted[f][0] = 5;
        g.refaulted[0][f][0] = 5;
        g.avg_total[f][0] = 500;
        g.protected[0][f][0] = 300;
        g.evicted[0][f][0] = 200;
        // Tier 1: refaulted 30 + 40 = 70, total 50 + 30 + 20 = 100, gain 3.
        // 70 * 1064 * 2 = 148960 > 11 * 100 * 3 = 3300: negative, tier_idx 0. (Without
        // the average, 40 < 64 refaults would have passed.)
        g.avg_refaulted[f][1] = 30;
        g.refaulted[0][f][1] = 40;
        g.avg_total[f][1] = 50;
        g.protected[0][f][1] = 30;
        g.evicted[0][f][1] = 20;
        assert_eq!(get_tier_idx(&g, f, true), 0);
        assert_eq!(
            get_tier_idx(&g, LRU_GEN_ANON, true),
            3,
            "types are separate"
        );
        // Tier 1 down to 63 refaults: positive; tier 2 with 200 of 300:
        // 200 * 1064 * 2 = 425600 > 11 * 300 * 3 = 9900: negative, tier_idx 1.
        g.refaulted[0][f][1] = 33;
        g.refaulted[0][f][2] = 200;
        g.evicted[0][f][2] = 300;
        assert_eq!(get_tier_idx(&g, f, true), 1);
        // Gains 2 (set point) against 3: sp = (0, 0): tier 1 with 64 refaults of T is
        // positive iff 64 * 64 * 2 = 8192 <= 3 * T, i.e. T >= 2731.
        let mut g = LruGenFolio::init(true, 0);
        g.refaulted[0][f][1] = 64;
        g.evicted[0][f][1] = 2731;
        assert_eq!(get_tier_idx(&g, f, true), 3);
        g.evicted[0][f][1] = 2730;
        assert_eq!(get_tier_idx(&g, f, true), 0);
    }

    /// Before 6.14 (mglru_type_selection_rework off) the gains are 1 (set point) to 2:
    /// tier 0 with 100 refaults of 1000, tier 1 with 150 of 1000: 150 * 1064 * 1 = 159600
    /// <= 101 * 1000 * 2 = 202000, positive (tiers 2 and 3 have no refaults): nothing
    /// protected, tier_idx 3. With 2 to 3, 319200 > 303000: tier 1 protected, tier_idx 0.
    #[test]
    fn get_tier_idx_gains_before_and_after_6_14() {
        let f = LRU_GEN_FILE;
        let mut g = LruGenFolio::init(true, 0);
        g.refaulted[0][f][0] = 100;
        g.evicted[0][f][0] = 1000;
        g.refaulted[0][f][1] = 150;
        g.evicted[0][f][1] = 1000;
        assert_eq!(get_tier_idx(&g, f, false), 3);
        assert_eq!(get_tier_idx(&g, f, true), 0);
    }

    /// try_to_inc_max_seq twice at swappiness 60: from a fresh lruvec, max_seq 5 and both
    /// types' oldest generation seq 2.
    async fn age_twice(s: &Sim, lv: LruvecId, sc: &mut ScanControl) {
        for _ in 0..2 {
            let max_seq = s.mm.borrow().lruvecs[lv as usize].lrugen.max_seq;
            assert!(
                s.try_to_inc_max_seq(lv, max_seq, 60, false, &mut sc.mm_walk)
                    .await
            );
        }
        assert_eq!(s.mm.borrow().lruvecs[lv as usize].lrugen.min_seq, [2, 2]);
    }

    /// The PID counters of [`first_type_by_version`]: anon's first tier 0 refaults of 1000,
    /// file's first tier 0 of 1000 and its third 500 of 1000.
    fn file_refaults_in_tier_2() -> LruGenFolio {
        let (a, f) = (LRU_GEN_ANON, LRU_GEN_FILE);
        let mut g = LruGenFolio::init(true, 0);
        g.evicted[0][a][0] = 1000;
        g.evicted[0][f][0] = 1000;
        g.refaulted[0][f][2] = 500;
        g.evicted[0][f][2] = 1000;
        g
    }

    /// isolate_folios' first type before 6.14: the obvious choices, then the PID on the
    /// first tiers alone. At swappiness 60 (gains 60 for anon, 140 for file) file's first
    /// tier has no refaults (fewer than MIN_LRU_BATCH: positive), so file; its tier 1 is
    /// positive too, its tier 2 is not against anon's first tier (500 * 1064 * 60 >
    /// 1 * 1000 * 140), so tier_idx 1. Since 6.14 (get_type_to_scan) every tier counts:
    /// file's 500 of 2000 against anon's 0 of 1000, negative: anon.
    #[test]
    fn the_first_type_to_scan_before_6_14() {
        let (a, f) = (LRU_GEN_ANON, LRU_GEN_FILE);
        let mut g = file_refaults_in_tier_2();
        assert_eq!(first_type_to_scan_v612(&g, 60), (f, Some(1)));
        assert_eq!(get_type_to_scan(&g, 60), a);
        // The obvious choices come first.
        assert_eq!(first_type_to_scan_v612(&g, 0), (f, None));
        assert_eq!(first_type_to_scan_v612(&g, 1), (f, None));
        assert_eq!(first_type_to_scan_v612(&g, 200), (a, None));
        // Anon's oldest generation older than file's: anon (except at swappiness 0).
        g.min_seq = [3, 4];
        assert_eq!(first_type_to_scan_v612(&g, 60), (a, None));
        assert_eq!(first_type_to_scan_v612(&g, 1), (a, None));
        assert_eq!(first_type_to_scan_v612(&g, 0), (f, None));
    }

    /// One evict_folios of /a's 100 anon and 100 file folios (zram, swappiness 60, aged
    /// twice) with the PID counters of [`file_refaults_in_tier_2`]: (pgscan_file,
    /// pgscan_anon).
    fn first_type_by_version(version: &str, edit: fn(&mut Rules)) -> (u64, u64) {
        let extra = format!("lru = \"mglru\"\nversion = \"{version}\"");
        let s = crate::fixture::one_node_machine("64M", Some("64M"), &extra);
        edit(&mut s.mm.borrow_mut().rules);
        let lv = s.mm.borrow().lruvec_of(1, 0);
        s.fixture_file_folios(1, 0, 100, 0);
        s.fixture_anon_folios(1, 0, 100, false, 0);
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            let mut sc = ScanControl::new(1024, Some(1), false);
            sc.priority = 4;
            age_twice(&s, lv, &mut sc).await;
            {
                let mut mm = s.mm.borrow_mut();
                let g = &mut mm.lruvecs[lv as usize].lrugen;
                let pid = file_refaults_in_tier_2();
                (g.refaulted, g.evicted) = (pid.refaulted, pid.evicted);
            }
            s.evict_folios(64, lv, &mut sc, 60).await;
        });
        let mm = s.mm.borrow();
        (
            mm.events[VmEvent::PgscanFile as usize],
            mm.events[VmEvent::PgscanAnon as usize],
        )
    }

    #[test]
    fn eviction_picks_its_type_by_the_versions_rule() {
        // 6.12 scans file first, 6.18 anon; 64 folios of the type either way.
        assert_eq!(first_type_by_version("6.12", as_is), (64, 0));
        assert_eq!(first_type_by_version("6.18", as_is), (0, 64));
        let rework = |r: &mut Rules| r.mglru_type_selection_rework = true;
        assert_eq!(first_type_by_version("6.12", rework), (0, 64));
    }

    #[test]
    fn get_type_to_scan_cases() {
        let (a, f) = (LRU_GEN_ANON, LRU_GEN_FILE);
        let mut g = LruGenFolio::init(true, 0);
        // No refaults: file (pv) has fewer than 64, positive: file.
        assert_eq!(get_type_to_scan(&g, 2), f);
        // Anon set point (0, 0) with gain sw; file (64 refaults in tier 1, 4096 total in
        // tier 3, so all tiers are summed) with gain 200 - sw. Positive iff
        // 64 * 64 * sw <= 1 * 4096 * (200 - sw), i.e. sw <= 100.
        g.refaulted[0][f][1] = 64;
        g.avg_total[f][3] = 4096;
        // sw 60: 245760 <= 573440; sw 100: equal; sw 101: 413696 > 405504; sw 140:
        // 573440 > 245760.
        assert_eq!(get_type_to_scan(&g, 60), f);
        assert_eq!(get_type_to_scan(&g, 100), f);
        assert_eq!(get_type_to_scan(&g, 101), a);
        assert_eq!(get_type_to_scan(&g, 140), a);
        // The shortcuts: 0 and 1 always file, 200 and 201 always anon.
        assert_eq!(get_type_to_scan(&g, 0), f);
        assert_eq!(get_type_to_scan(&g, 1), f);
        g.refaulted[0][a][0] = 1 << 20;
        g.refaulted[0][f][1] = 0;
        assert_eq!(
            get_type_to_scan(&g, 199),
            f,
            "anon refaults: the PID says file"
        );
        assert_eq!(get_type_to_scan(&g, 200), a);
        assert_eq!(get_type_to_scan(&g, 201), a);
    }

    #[test]
    fn should_run_aging_and_get_nr_to_scan() {
        let mut g = LruGenFolio::init(true, 0);
        g.max_seq = 5;
        // seq 2 = gen 2, seq 3 = gen 3, seq 4 = gen 0, seq 5 = gen 1.
        g.nr_pages[2] = [1000, 0];
        g.nr_pages[3] = [10, 20];
        g.nr_pages[0] = [1, 2];
        g.nr_pages[1] = [100, -5];
        g.min_seq = [3, 3];
        // Oldest 3 + 2 == 5: due; anon 10 + 1 + 100, file 20 + 2 + 0 (negative) = 133.
        assert_eq!(should_run_aging(&g, 5, 60, true), (true, 133));
        g.min_seq = [4, 4];
        assert_eq!(
            should_run_aging(&g, 5, 60, true),
            (true, 0),
            "4 + 2 > 5: must age"
        );
        g.min_seq = [2, 3];
        // Oldest 2: not due; anon seqs 2..=5: 1111, file seqs 3..=5: 22.
        assert_eq!(should_run_aging(&g, 5, 60, true), (false, 1133));
        assert_eq!(
            should_run_aging(&g, 5, 0, true),
            (true, 22),
            "file only, oldest 3"
        );
        assert_eq!(
            should_run_aging(&g, 5, 201, true),
            (false, 1111),
            "anon only"
        );

        // Before "rework aging feedback" (6.1, 6.12), three generations are not enough:
        // anon seq 3 = 400 (oldest), seq 4 = 100, seq 5 = 500 (youngest), 1000 in all.
        let mut h = LruGenFolio::init(true, 0);
        h.max_seq = 5;
        h.min_seq = [3, 3];
        let spread = |h: &mut LruGenFolio, old: i64, mid: i64, young: i64| {
            h.nr_pages[lru_gen_from_seq(3)] = [old, 0];
            h.nr_pages[lru_gen_from_seq(4)] = [mid, 0];
            h.nr_pages[lru_gen_from_seq(5)] = [young, 0];
        };
        spread(&mut h, 400, 100, 500);
        // young * 2 = 1000 is not above 1000, old * 4 = 1600 not below it.
        assert_eq!(should_run_aging(&h, 5, 60, false), (false, 1000));
        assert_eq!(should_run_aging(&h, 5, 60, true), (true, 1000));
        // One more young page: 502 * 2 > 1001.
        spread(&mut h, 400, 100, 501);
        assert_eq!(should_run_aging(&h, 5, 60, false), (true, 1001));
        // Few cold pages: 200 * 4 = 800 < 1000.
        spread(&mut h, 200, 400, 400);
        assert_eq!(should_run_aging(&h, 5, 60, false), (true, 1000));
        // Four generations: neither form ages.
        h.min_seq = [2, 2];
        assert!(!should_run_aging(&h, 5, 60, false).0);
        h.min_seq = [3, 3];
        // get_nr_to_scan at priority 4 then scans 1000 >> 4 = 62 instead of aging.
        spread(&mut h, 400, 100, 500);
        assert_eq!(
            get_nr_to_scan_decide(&h, (60, false), false, true, 4, |n| n),
            NrToScan::Scan(62)
        );
        assert_eq!(
            get_nr_to_scan_decide(&h, (60, true), false, true, 4, |n| n),
            NrToScan::Aging { max_seq: 5 }
        );

        // get_nr_to_scan on the same lruvec (not due, 1133 pages).
        assert_eq!(
            get_nr_to_scan_decide(&g, (60, true), true, true, 4, |n| n),
            NrToScan::Stop
        );
        // Offline: everything, protection not applied.
        assert_eq!(
            get_nr_to_scan_decide(&g, (60, true), false, false, 4, |_| 0),
            NrToScan::Scan(1133)
        );
        // Online: protected to 566, >> 4 = 35.
        assert_eq!(
            get_nr_to_scan_decide(&g, (60, true), false, true, 4, |n| n / 2),
            NrToScan::Scan(35)
        );
        // Due (min_seq 3): at DEF_PRIORITY, 133 >> 12 = 0; below it, aging.
        g.min_seq = [3, 3];
        assert_eq!(
            get_nr_to_scan_decide(&g, (60, true), false, true, 12, |n| n),
            NrToScan::Scan(0)
        );
        assert_eq!(
            get_nr_to_scan_decide(&g, (60, true), false, true, 11, |n| n),
            NrToScan::Aging { max_seq: 5 }
        );
        // Must age with nothing evictable: offline does not short-cut a size of 0.
        g.min_seq = [4, 4];
        assert_eq!(
            get_nr_to_scan_decide(&g, (60, true), false, false, 11, |n| n),
            NrToScan::Aging { max_seq: 5 }
        );

        // 7.2's loop asks should_run_aging itself: a must (two generations left) at any
        // priority, DEF_PRIORITY included, where get_nr_to_scan above answers 0.
        assert!(should_run_aging_in_loop(&g, (60, true), DEF_PRIORITY));
        assert_eq!(
            get_nr_to_scan_decide(&g, (60, true), false, true, DEF_PRIORITY, |n| n),
            NrToScan::Scan(0)
        );
        // Due (three left) only below DEF_PRIORITY; not due with four.
        g.min_seq = [3, 3];
        assert!(!should_run_aging_in_loop(&g, (60, true), DEF_PRIORITY));
        assert!(should_run_aging_in_loop(&g, (60, true), 11));
        g.min_seq = [2, 3];
        assert!(!should_run_aging_in_loop(&g, (60, true), 11));
        // Before the feedback rework, three balanced generations are not due either.
        assert!(!should_run_aging_in_loop(&h, (60, false), 4));
        assert!(should_run_aging_in_loop(&h, (60, true), 4));
    }

    /// Before 6.14 sort_folio puts a protected folio at the tail of the next generation
    /// (list_move_tail), since then at its head; and 6.1 and 6.12 sort a locked folio as
    /// one under writeback (to the head of the next generation with PG_reclaim), where
    /// later kernels isolate it.
    #[test]
    fn sort_folio_places_protected_and_locked_folios_by_version() {
        let f_ = LRU_GEN_FILE;
        let mut old = *DEFAULT_RULES;
        assert!(old.set("mglru_protected_to_head", false));
        assert!(old.set("mglru_sort_locked_as_writeback", true));
        // pfn 1 and 2: refs maxed, protected; sorted 1 then 2 into gen 1 (list head first).
        for (rules, want) in [(&*DEFAULT_RULES, vec![2, 1]), (&old, vec![1, 2])] {
            let mut f = frames(&[FILE; 3]);
            let mut lv = lruvec();
            for pfn in 0..3 {
                lru_gen_add_folio(&mut f, &mut lv, pfn, false, rules);
            }
            for pfn in [1usize, 2] {
                f[pfn].set(PG_REFERENCED | PG_WORKINGSET);
                f[pfn].lru_gen |= 3 << LRU_REFS_PGOFF;
            }
            for pfn in [1, 2] {
                let v = sort_folio(&mut f, &mut lv, pfn, (3, true), rules);
                assert_eq!(v, SortFolio::Protected { tier: None });
            }
            assert_eq!(list(&f, &lv.lrugen.folios[1][f_]), want);
            // pfn 0: clean, locked.
            f[0].set(PG_LOCKED);
            let v = sort_folio(&mut f, &mut lv, 0, (3, true), rules);
            if std::ptr::eq(rules, &old) {
                let wb = SortFolio::Writeback {
                    file_taken: false,
                    unqueued_dirty: false,
                };
                assert_eq!(v, wb);
                assert!(f[0].test(PG_RECLAIM));
                assert_eq!(list(&f, &lv.lrugen.folios[1][f_])[0], 0);
            } else {
                assert_eq!(v, SortFolio::Isolate);
                assert!(!f[0].test(PG_RECLAIM));
            }
        }
    }

    #[test]
    fn a_kept_folio_before_6_14_is_always_activated_and_a_referenced_or_locked_one_not_retried() {
        use crate::versions::KernelVersion;
        let (v6_12, v6_18) = (
            Rules::of(KernelVersion::V6_12),
            Rules::of(KernelVersion::V6_18),
        );
        // evict_folios' retry test: (flags, mapped, skip_retry) -> (6.12, 6.18).
        for (flags, mapped, skip, r12, r18) in [
            (FILE, false, false, true, true),
            (FILE | PG_REFERENCED, false, false, false, true),
            (FILE | PG_LOCKED, false, false, false, true),
            (FILE | PG_ACTIVE, false, false, false, false),
            (FILE | PG_DIRTY, false, false, false, false),
            (FILE | PG_WRITEBACK, false, false, false, false),
            (FILE, true, false, false, false),
            (FILE, false, true, false, false),
        ] {
            let p = page(flags);
            assert_eq!(
                evict_folios_retries(&p, mapped, skip, &v6_12),
                r12,
                "6.12 {flags:#x}"
            );
            assert_eq!(
                evict_folios_retries(&p, mapped, skip, &v6_18),
                r18,
                "6.18 {flags:#x}"
            );
        }
        // The putback: max_seq 7, min_seq 4 for both types. A swap-cache folio with
        // PG_workingset, PG_referenced and refs 2 would land at 7 - 3 + 1 = 5 on 6.18,
        // not the oldest: left alone. On 6.12 it is activated and loses all three.
        let g = window([4, 4]);
        let ws = ANON | PG_SWAPCACHE | PG_WORKINGSET | PG_REFERENCED;
        let mut f = frames(&[ws, ws, ANON | PG_SWAPCACHE | PG_WORKINGSET]);
        for pfn in 0..3 {
            super::super::folio::set_byte_refs(&mut f, pfn, 2);
        }
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 0, &v6_18));
        assert_eq!((f[0].flags, folio_lru_refs(&f, 0, &DEFAULT_RULES)), (ws, 3));
        assert!(evict_folios_keep_off_oldest(&mut f, &g, 1, &v6_12));
        assert_eq!(f[1].flags, ANON | PG_SWAPCACHE | PG_ACTIVE);
        assert_eq!(super::super::folio::byte_refs(f[1].lru_gen), 0);
        // On 6.18 without PG_referenced... still PG_workingset: 5, left alone; a plain
        // swap-cache folio lands at 4 = min_seq: activated, refs cleared, nothing else.
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 2, &v6_18));
        let mut f = frames(&[ANON | PG_SWAPCACHE | PG_REFERENCED]);
        assert!(evict_folios_keep_off_oldest(&mut f, &g, 0, &v6_18));
        assert_eq!(f[0].flags, ANON | PG_SWAPCACHE | PG_ACTIVE);
    }

    #[test]
    fn sort_folio_verdicts_and_moves() {
        let f_ = LRU_GEN_FILE;
        let mut flags = vec![FILE; 10];
        flags[6] = ANON | PG_SWAPCACHE;
        flags[7] = ANON | PG_SWAPCACHE;
        let mut f = frames(&flags);
        let mut lv = lruvec();
        // All land in gen 0 (the oldest; max_seq 3, min_seq 0).
        for pfn in 0..10 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &DEFAULT_RULES);
            assert_eq!(folio_lru_gen(&f, pfn), Some(0));
        }
        // pfn 0: promoted by the walk to gen 3 (accounted as reset_batch_size would).
        f[0].set(PG_REFERENCED);
        assert_eq!(folio_update_gen(&mut f, 0, 3, &DEFAULT_RULES), Some(0));
        lru_gen_update_size(&mut lv, f_, Some(0), Some(3));
        // pfn 1: refs 3 (tier 2); pfn 2: refs 4 + workingset; pfn 3: in a batch;
        // pfn 4 dirty; pfn 5 dirty under writeback; pfn 6 anon under writeback; pfn 7
        // dirty anon; pfn 8 clean; pfn 9 no longer evictable.
        f[1].set(PG_REFERENCED);
        f[1].lru_gen |= 2 << LRU_REFS_PGOFF;
        f[2].set(PG_REFERENCED | PG_WORKINGSET);
        f[2].lru_gen |= 3 << LRU_REFS_PGOFF;
        f[3].set(PG_INBATCH);
        f[4].set(PG_DIRTY);
        f[5].set(PG_DIRTY | PG_WRITEBACK);
        f[6].set(PG_WRITEBACK);
        f[7].set(PG_DIRTY);
        // 6.11-6.16 (rule lru_batch_clears_pg_lru): the batch holds pfn 3's PG_lru.
        let mut batch_clears = *DEFAULT_RULES;
        assert!(batch_clears.set("lru_batch_clears_pg_lru", true));
        let decide_as = |f: &Frames, lv: &Lruvec, pfn: u32, tier_idx, evictable, r: &Rules| {
            let p = f[pfn as usize];
            sort_folio_decide(
                &lv.lrugen,
                &p,
                f[pfn as usize].lru_gen,
                tier_idx,
                evictable,
                r,
            )
        };
        let decide = |f: &Frames, lv: &Lruvec, pfn: u32, tier_idx, evictable| {
            decide_as(f, lv, pfn, tier_idx, evictable, &batch_clears)
        };
        // Every modeled version: the queued folio keeps PG_lru and is isolated.
        assert_eq!(
            decide_as(&f, &lv, 3, 3, true, &DEFAULT_RULES),
            SortFolio::Isolate
        );
        assert_eq!(decide(&f, &lv, 0, 0, true), SortFolio::Promoted { gen: 3 });
        assert_eq!(
            decide(&f, &lv, 1, 1, true),
            SortFolio::Protected { tier: Some(2) }
        );
        // Tier 2 is not above tier_idx 2: no protection, and clean: isolate.
        assert_eq!(decide(&f, &lv, 1, 2, true), SortFolio::Isolate);
        assert_eq!(
            decide(&f, &lv, 2, 3, true),
            SortFolio::Protected { tier: None }
        );
        assert_eq!(decide(&f, &lv, 3, 3, true), SortFolio::Ineligible);
        let wb = |file_taken, unqueued_dirty| SortFolio::Writeback {
            file_taken,
            unqueued_dirty,
        };
        assert_eq!(decide(&f, &lv, 4, 3, true), wb(true, true));
        assert_eq!(decide(&f, &lv, 5, 3, true), wb(true, false));
        assert_eq!(decide(&f, &lv, 6, 3, true), wb(false, false));
        assert_eq!(
            decide(&f, &lv, 7, 3, true),
            SortFolio::Isolate,
            "dirty anon"
        );
        assert_eq!(decide(&f, &lv, 8, 3, true), SortFolio::Isolate);
        assert_eq!(decide(&f, &lv, 9, 3, false), SortFolio::Unevictable);
        // Unevictable comes first, even for a promoted folio.
        assert_eq!(decide(&f, &lv, 0, 3, false), SortFolio::Unevictable);

        // Carry them out: pfn 0 to the head of gen 3; 1, 2 (head), 3 (tail), 4, 5 (head)
        // into gen 1: 5, 4, 2, 1, 3.
        assert!(sort_folio(&mut f, &mut lv, 0, (1, true), &DEFAULT_RULES).sorted());
        assert_eq!(list(&f, &lv.lrugen.folios[3][f_]), vec![0]);
        for pfn in 1..6 {
            assert!(sort_folio(&mut f, &mut lv, pfn, (1, true), &batch_clears).sorted());
        }
        assert_eq!(list(&f, &lv.lrugen.folios[1][f_]), vec![5, 4, 2, 1, 3]);
        assert_eq!(list(&f, &lv.lrugen.folios[0][f_]), vec![9, 8]);
        assert_eq!(
            lv.lrugen.protected[0][f_],
            [0, 0, 1, 0],
            "only pfn 1, tier 2"
        );
        assert!(f[4].test(PG_RECLAIM) && f[5].test(PG_RECLAIM) && !f[1].test(PG_RECLAIM));
        assert!(!f[1].test(PG_REFERENCED) && byte_refs(f[1].lru_gen) == 0);
        assert_eq!(lv.lrugen.nr_pages[1][f_], 5);
        assert_eq!(lv.lrugen.nr_pages[0][f_], 2);
        assert!(!sort_folio(&mut f, &mut lv, 8, (1, true), &DEFAULT_RULES).sorted());
        // pfn 9: onto the classic unevictable list.
        assert_eq!(
            sort_folio(&mut f, &mut lv, 9, (1, false), &DEFAULT_RULES),
            SortFolio::Unevictable
        );
        assert!(f[9].test(PG_UNEVICTABLE) && f[9].lru_gen & LRU_GEN_MASK == 0);
        assert_eq!(lv.nr[LRU_UNEVICTABLE], 1);
        assert_eq!(lv.lrugen.nr_pages[0][f_], 1);
        assert_eq!(list(&f, &lv.lrugen.folios[0][f_]), vec![8]);
    }

    #[test]
    fn isolate_folio_cases() {
        let mut f = frames(&[ANON, FILE | PG_DIRTY, FILE, FILE, FILE, FILE]);
        let mut lv = lruvec();
        for pfn in 0..6 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &DEFAULT_RULES);
        }
        // Without __GFP_IO: anon outside the swap cache and dirty folios stay.
        assert!(!isolate_folio(&mut f, &mut lv, 0, false, &DEFAULT_RULES));
        assert!(!isolate_folio(&mut f, &mut lv, 1, false, &DEFAULT_RULES));
        // Dying (folio_try_get fails): stays.
        f[2].set(PG_DYING);
        assert!(!isolate_folio(&mut f, &mut lv, 2, true, &DEFAULT_RULES));
        // In a batch: PG_lru held by it in 6.11-6.16 (rule lru_batch_clears_pg_lru) only.
        f[3].set(PG_INBATCH);
        let mut batch_clears = *DEFAULT_RULES;
        assert!(batch_clears.set("lru_batch_clears_pg_lru", true));
        assert!(!isolate_folio(&mut f, &mut lv, 3, true, &batch_clears));
        assert_eq!(lv.lrugen.nr_pages[0][LRU_GEN_FILE], 5);
        assert!(isolate_folio(&mut f, &mut lv, 3, true, &DEFAULT_RULES));
        assert!(f[3].test(PG_ISOLATED) && f[3].test(PG_INBATCH) && !f[3].test(PG_LRU));
        assert_eq!(lv.lrugen.nr_pages[0][LRU_GEN_FILE], 4);
        // The anon folio is in gen 2, active: isolated without PG_active.
        assert!(isolate_folio(&mut f, &mut lv, 0, true, &DEFAULT_RULES));
        assert!(!f[0].test(PG_ACTIVE | PG_LRU) && f[0].test(PG_ISOLATED));
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 0);
        // Referenced: the refs counter is kept; PG_reclaim goes.
        f[4].set(PG_REFERENCED | PG_RECLAIM);
        f[4].lru_gen |= 2 << LRU_REFS_PGOFF;
        assert!(isolate_folio(&mut f, &mut lv, 4, true, &DEFAULT_RULES));
        assert_eq!(f[4].lru_gen, 2 << LRU_REFS_PGOFF, "gen cleared, refs kept");
        assert!(!f[4].test(PG_RECLAIM));
        // Not referenced: the stale counter goes too.
        f[5].lru_gen |= 3 << LRU_REFS_PGOFF;
        assert!(isolate_folio(&mut f, &mut lv, 5, true, &DEFAULT_RULES));
        assert_eq!(f[5].lru_gen, 0);
        // Left: the dirty and the dying folio (pfn 3 was isolated from its batch).
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 2);
        assert_eq!(list(&f, &lv.lrugen.folios[0][LRU_GEN_FILE]), vec![2, 1]);
    }

    #[test]
    fn keep_off_oldest_after_reclaim() {
        // max_seq 3, min_seq 0 and 0: a clean file folio would go back to seq 0, the
        // oldest: it gets PG_active and loses its refs flags.
        let mut f = frames(&[FILE | PG_REFERENCED, FILE | PG_WORKINGSET, ANON]);
        f[0].lru_gen = 2 << LRU_REFS_PGOFF;
        let mut g = LruGenFolio::init(true, 0);
        assert!(evict_folios_keep_off_oldest(&mut f, &g, 0, &DEFAULT_RULES));
        assert!(f[0].test(PG_ACTIVE) && !f[0].test(PG_REFERENCED));
        assert_eq!(f[0].lru_gen, 0);
        // Workingset goes to seq 1, anon outside swap cache to seq 2: left alone.
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 1, &DEFAULT_RULES));
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 2, &DEFAULT_RULES));
        // With file min_seq 1, seq 1 is the oldest: clamped, so marked.
        g.min_seq[LRU_GEN_FILE] = 1;
        assert!(evict_folios_keep_off_oldest(&mut f, &g, 1, &DEFAULT_RULES));
        assert!(f[1].test(PG_ACTIVE));
    }

    #[test]
    fn isolation_and_putback_before_6_14_move_pg_referenced() {
        // 6.12's isolate_folio: a referenced folio keeps its counter and PG_workingset but
        // loses PG_referenced (shrink_folio_list must not read it as a second reference);
        // an unreferenced one loses the counter and PG_workingset too.
        let r = v6_12();
        let mut f = frames(&[FILE | PG_REFERENCED | PG_WORKINGSET, FILE | PG_WORKINGSET]);
        let mut lv = lruvec();
        lru_gen_add_folio(&mut f, &mut lv, 0, false, &r);
        lru_gen_add_folio(&mut f, &mut lv, 1, false, &r);
        f[0].lru_gen |= 2 << LRU_REFS_PGOFF;
        f[1].lru_gen |= 2 << LRU_REFS_PGOFF;
        assert!(isolate_folio(&mut f, &mut lv, 0, true, &r));
        assert!(isolate_folio(&mut f, &mut lv, 1, true, &r));
        assert_eq!(f[0].flags & (PG_REFERENCED | PG_WORKINGSET), PG_WORKINGSET);
        assert_eq!(f[0].lru_gen, 2 << LRU_REFS_PGOFF);
        assert_eq!(
            (f[1].test(PG_REFERENCED | PG_WORKINGSET), f[1].lru_gen),
            (false, 0)
        );
        // 6.12's evict_folios: a kept folio whose write pageout started (PG_reclaim, under
        // writeback) keeps its generation flags, PG_referenced restored for PG_workingset,
        // and no PG_active; any other kept folio gets PG_active and loses them all.
        let g = LruGenFolio::init(true, 0);
        let mut f = frames(&[
            ANON | PG_SWAPCACHE | PG_RECLAIM | PG_WRITEBACK | PG_WORKINGSET,
            ANON | PG_SWAPCACHE | PG_RECLAIM | PG_WRITEBACK,
            ANON | PG_SWAPCACHE | PG_WORKINGSET | PG_REFERENCED,
        ]);
        f[0].lru_gen = 1 << LRU_REFS_PGOFF;
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 0, &r));
        assert!(f[0].test(PG_REFERENCED | PG_WORKINGSET) && !f[0].test(PG_ACTIVE));
        assert_eq!(byte_refs(f[0].lru_gen), 1);
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 1, &r));
        assert!(!f[1].test(PG_REFERENCED | PG_ACTIVE));
        assert!(evict_folios_keep_off_oldest(&mut f, &g, 2, &r));
        assert_eq!(f[2].flags, ANON | PG_SWAPCACHE | PG_ACTIVE);
        // Dirty without PG_reclaim (no write started), or PG_reclaim alone: activated.
        for fl in [PG_DIRTY, PG_RECLAIM] {
            let mut f = frames(&[ANON | PG_SWAPCACHE | PG_WORKINGSET | fl]);
            assert!(evict_folios_keep_off_oldest(&mut f, &g, 0, &r));
            assert_eq!(f[0].flags, ANON | PG_SWAPCACHE | PG_ACTIVE | fl);
        }
        // 6.18 asks lru_gen_folio_seq instead: the written folio is left as it is.
        let mut f = frames(&[ANON | PG_SWAPCACHE | PG_RECLAIM | PG_WRITEBACK | PG_WORKINGSET]);
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 0, &DEFAULT_RULES));
        assert!(!f[0].test(PG_REFERENCED));
    }

    #[test]
    fn sort_folio_before_6_14_protects_refs_4_and_counts_it() {
        // 6.12: refs = counter + PG_workingset, tier order_base_2(refs + 1); a folio with
        // refs 4 (counter 3 and PG_workingset) is protected whatever tier_idx and counted
        // in its tier, 3 (6.18 does not count a maxed folio). Counter 2 with PG_workingset
        // is refs 3, tier 2: protected above tier_idx 1, isolated at tier_idx 2.
        let r = v6_12();
        let g = LruGenFolio::init(true, 0);
        let page = |fl: u16| frames(&[fl])[0];
        let ws = page(FILE | PG_LRU | PG_WORKINGSET);
        let gen0 = 1u8; // gen 0, the oldest
        let byte = |c: u8| gen0 | c << LRU_REFS_PGOFF;
        let d = |byte: u8, tier_idx: usize| sort_folio_decide(&g, &ws, byte, tier_idx, true, &r);
        assert_eq!(d(byte(3), 3), SortFolio::Protected { tier: Some(3) });
        assert_eq!(d(byte(2), 1), SortFolio::Protected { tier: Some(2) });
        assert_eq!(d(byte(2), 2), SortFolio::Isolate);
        // Without PG_workingset, counter 1: refs 1, tier 1.
        let plain = page(FILE | PG_LRU);
        let d = |byte: u8, tier_idx: usize| sort_folio_decide(&g, &plain, byte, tier_idx, true, &r);
        assert_eq!(d(byte(1), 0), SortFolio::Protected { tier: Some(1) });
        assert_eq!(d(byte(1), 1), SortFolio::Isolate);
    }

    /// What one try_to_shrink_lruvec of /a's lruvec did (see `shrink_a`).
    #[derive(Debug, PartialEq, Eq)]
    struct Shrunk {
        rotate: bool,
        max_seq: u64,
        reclaimed: u64,
        /// PGREFILL of /a: folios sort_folio moved on.
        sorted: u64,
        /// pgscan_file: folios isolated.
        isolated: u64,
    }

    /// One try_to_shrink_lruvec of memcg /a's lruvec (no swap: file only), by reclaim of /a
    /// (memcg reclaim) or of the root, at `priority`, with nr_to_reclaim `target`, on the
    /// rules of `version` as `edit` changes them. Max_seq is 3; `gens` lists, per sequence
    /// number, how many clean unmapped page-cache folios it holds whose refs are maxed
    /// (sort_folio protects them whatever the tier: PG_referenced, refs 3, PG_workingset;
    /// at the tail) and how many plain ones; min_seq is then `oldest`.
    fn shrink_a(
        (version, edit): (&str, fn(&mut Rules)),
        gens: &[(u64, u32, u32)],
        oldest: u64,
        (root, priority, target): (bool, i32, u64),
    ) -> Shrunk {
        let extra = format!("lru = \"mglru\"\nversion = \"{version}\"");
        let s = crate::fixture::one_node_machine("64M", None, &extra);
        edit(&mut s.mm.borrow_mut().rules);
        let lv = s.mm.borrow().lruvec_of(1, 0);
        for &(seq, maxed, plain) in gens {
            s.mm.borrow_mut().lruvecs[lv as usize].lrugen.min_seq = [seq; ANON_AND_FILE];
            let (_, pfns) = s.fixture_file_folios(1, 0, maxed + plain, 0);
            let mut mm = s.mm.borrow_mut();
            for &pfn in &pfns[..maxed as usize] {
                mm.pages[pfn as usize].set(PG_REFERENCED | PG_WORKINGSET);
                set_byte_refs(&mut mm.pages, pfn, 3);
            }
        }
        s.mm.borrow_mut().lruvecs[lv as usize].lrugen.min_seq = [oldest; ANON_AND_FILE];
        let out = std::rc::Rc::new(std::cell::Cell::new((false, 0)));
        let o = out.clone();
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            let mut sc = ScanControl::new(target, (!root).then_some(1), false);
            sc.priority = priority;
            let rotate = s.try_to_shrink_lruvec(lv, &mut sc).await;
            o.set((rotate, sc.nr_reclaimed));
        });
        let mm = s.mm.borrow();
        let (rotate, reclaimed) = out.get();
        Shrunk {
            rotate,
            max_seq: mm.lruvecs[lv as usize].lrugen.max_seq,
            reclaimed,
            sorted: mm.memcgs[1].vm_events[VmEvent::Pgrefill as usize],
            isolated: mm.events[VmEvent::PgscanFile as usize],
        }
    }

    fn as_is(_: &mut Rules) {}

    fn shrunk(rotate: bool, max_seq: u64, reclaimed: u64, sorted: u64, isolated: u64) -> Shrunk {
        Shrunk {
            rotate,
            max_seq,
            reclaimed,
            sorted,
            isolated,
        }
    }

    #[test]
    fn the_7_2_loop_evicts_after_aging_and_root_reclaim_leaves_after_one_batch() {
        // Three generations (min_seq 1, max_seq 3), 256 plain folios in the oldest; priority
        // 1. Aging is due (1 + MIN_NR_GENS == 3) and succeeds: max_seq 4, rotation asked.
        let three = [(1, 0, 256)];
        let memcg = (false, 1, 1024);
        // 6.18: get_nr_to_scan ages and answers -1: nothing evicted.
        assert_eq!(
            shrink_a(("6.18", as_is), &three, 1, memcg),
            shrunk(true, 4, 0, 0, 0)
        );
        // 7.3: the budget 256 >> 1 = 128 was fixed before the aging; two batches of 64.
        assert_eq!(
            shrink_a(("7.3", as_is), &three, 1, memcg),
            shrunk(true, 4, 128, 0, 128)
        );
        // Root reclaim leaves after the batch that followed the aging.
        let root = (true, 1, 1024);
        assert_eq!(
            shrink_a(("7.3", as_is), &three, 1, root),
            shrunk(true, 4, 64, 0, 64)
        );
        // Without the restructure, 7.3's other rules keep 6.18's answer.
        let old_loop = |r: &mut Rules| r.mglru_reclaim_loop_restructure = false;
        assert_eq!(
            shrink_a(("7.3", old_loop), &three, 1, root),
            shrunk(true, 4, 0, 0, 0)
        );
        // Four generations: nothing due; the same 128 in either loop.
        let four = [(0, 0, 256)];
        for v in ["6.18", "7.3"] {
            assert_eq!(
                shrink_a((v, as_is), &four, 0, memcg),
                shrunk(false, 3, 128, 0, 128)
            );
        }
    }

    #[test]
    fn memcg_reclaim_stops_at_its_target_from_7_2() {
        // As above, memcg reclaim of nr_to_reclaim 32: 7.3 stops after the first batch of
        // 64 (64 >= max(32, compact_gap 2)); without the rule, memcg reclaim never aborts
        // and the budget of 128 is used.
        let three = [(1, 0, 256)];
        let memcg = (false, 1, 32);
        assert_eq!(
            shrink_a(("7.3", as_is), &three, 1, memcg),
            shrunk(true, 4, 64, 0, 64)
        );
        let no_abort = |r: &mut Rules| r.mglru_abort_cgroup_reclaim = false;
        assert_eq!(
            shrink_a(("7.3", no_abort), &three, 1, memcg),
            shrunk(true, 4, 128, 0, 128)
        );
    }

    #[test]
    fn root_reclaim_after_aging_scans_one_batch_of_64_from_7_2() {
        // Three generations; the oldest holds 100 maxed folios at the tail, then 156 plain.
        // Root reclaim at priority 1 ages and evicts one batch: 7.3's batch is 64 folios,
        // all maxed, all sorted; with the whole budget of 128 as one batch, scan_folios
        // sorts the 100 and isolates 28 before the budget is used.
        let three = [(1, 100, 156)];
        let root = (true, 1, 1024);
        assert_eq!(
            shrink_a(("7.3", as_is), &three, 1, root),
            shrunk(true, 4, 0, 64, 0)
        );
        let whole = |r: &mut Rules| r.mglru_scan_batch_min_lru_batch = false;
        assert_eq!(
            shrink_a(("7.3", whole), &three, 1, root),
            shrunk(true, 4, 28, 100, 28)
        );
    }

    #[test]
    fn a_batch_that_only_sorts_counts_what_it_scanned_from_7_2() {
        // Four generations: seq 0 holds 50 maxed folios, seq 1 206 plain; memcg reclaim at
        // priority 1, budget 256 >> 1 = 128.
        let gens = [(1, 0, 206), (0, 50, 0)];
        let memcg = (false, 1, 1024);
        // 7.3: the first batch sorts the 50 and counts 50; min_seq moves to 1, so aging is
        // due and succeeds, and the other 78 are isolated (64 + 14).
        assert_eq!(
            shrink_a(("7.3", as_is), &gens, 0, memcg),
            shrunk(true, 4, 78, 50, 78)
        );
        // Counting as before 7.2: that batch counts 1 (min_seq advanced), 127 are left.
        let old_count = |r: &mut Rules| r.mglru_scan_exact_count = false;
        assert_eq!(
            shrink_a(("7.3", old_count), &gens, 0, memcg),
            shrunk(true, 4, 127, 50, 127)
        );
        // 6.18: after that batch get_nr_to_scan ages and ends the call.
        assert_eq!(
            shrink_a(("6.18", as_is), &gens, 0, memcg),
            shrunk(true, 4, 0, 50, 0)
        );
    }

    /// One evict_folios(64) of /a on `version` (with `edit`) where both types are
    /// evictable (zram, swappiness 60) and aged twice (max_seq 5; anon's and file's oldest
    /// generation is seq 2): the file type, scanned first (no refaults yet), holds 10 maxed
    /// folios, anon 100 plain ones. Returns (evict_folios' answer, pgscan_file,
    /// pgscan_anon, PGREFILL of /a).
    fn evict_after_sorting_file(version: &str, edit: fn(&mut Rules)) -> (u64, u64, u64, u64) {
        let extra = format!("lru = \"mglru\"\nversion = \"{version}\"");
        let s = crate::fixture::one_node_machine("64M", Some("64M"), &extra);
        edit(&mut s.mm.borrow_mut().rules);
        let lv = s.mm.borrow().lruvec_of(1, 0);
        let (_, files) = s.fixture_file_folios(1, 0, 10, 0);
        s.fixture_anon_folios(1, 0, 100, false, 0);
        let out = std::rc::Rc::new(std::cell::Cell::new(0));
        let o = out.clone();
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            let mut sc = ScanControl::new(1024, Some(1), false);
            sc.priority = 4;
            age_twice(&s, lv, &mut sc).await;
            {
                let mut mm = s.mm.borrow_mut();
                for &pfn in &files {
                    mm.pages[pfn as usize].set(PG_REFERENCED | PG_WORKINGSET);
                    set_byte_refs(&mut mm.pages, pfn, 3);
                }
            }
            o.set(s.evict_folios(64, lv, &mut sc, 60).await);
        });
        let mm = s.mm.borrow();
        let ev = |e: VmEvent| mm.events[e as usize];
        let refill = mm.memcgs[1].vm_events[VmEvent::Pgrefill as usize];
        (
            out.get(),
            ev(VmEvent::PgscanFile),
            ev(VmEvent::PgscanAnon),
            refill,
        )
    }

    #[test]
    fn a_pass_that_only_sorts_keeps_its_type_from_7_2() {
        // 7.3: the file pass sorts the 10 and counts them; having scanned something it does
        // not turn to anon but scans file again, whose oldest generation is now empty: 10
        // scanned, nothing isolated.
        assert_eq!(evict_after_sorting_file("7.3", as_is), (10, 0, 0, 10));
        // Before 7.2 that pass counts 0 (nothing isolated, budget not used): anon is
        // scanned and 64 isolated; file's min_seq advancing adds one.
        let old = |r: &mut Rules| r.mglru_scan_exact_count = false;
        assert_eq!(evict_after_sorting_file("7.3", old), (65, 0, 64, 10));
        assert_eq!(evict_after_sorting_file("6.18", as_is), (65, 0, 64, 10));
    }
}
