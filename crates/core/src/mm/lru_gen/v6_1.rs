//! MGLRU's reclaim as Linux 6.1 has it: lru_gen_shrink_lruvec's own loop, its
//! get_nr_to_scan and should_abort_scan, and kswapd's lru_gen_age_node, which ages every
//! memcg that needs it (Debian's 6.1.176, mm/vmscan.c "the eviction" and "working set
//! protection").
//!
//! 6.1 is the first MGLRU. It has no memcg LRU, so root reclaim reaches here once per
//! memcg through shrink_node_memcgs, as memcg reclaim does. Its eviction loop differs from
//! 6.3's rewrite (try_to_shrink_lruvec, eviction.rs) in who ages and when it stops:
//!
//! - get_nr_to_scan stops a memcg below memory.min, or below memory.low unless this is the
//!   low-reclaim pass. When aging is needed (fewer than three generations, or three badly
//!   spread: should_run_aging before "rework aging feedback") it is skipped at
//!   DEF_PRIORITY, left to lru_gen_age_node for kswapd (nothing to scan), and done by any
//!   other reclaimer, which then goes on scanning its budget in the same call (6.3 on
//!   returns -1 after aging).
//! - should_abort_scan: a reclaimer other than kswapd stops once this memcg has been aged
//!   twice since the call began (fairness), once it has reclaimed its target while
//!   swapping anon (latency), or when its task is dying; cgroup reclaim stops nowhere else.
//!   Global reclaim and kswapd (which must have reclaimed its target since
//!   lru_gen_age_node) go on at priorities above DEF_PRIORITY - 2, and stop once every
//!   zone is above its low (direct) or high (kswapd) watermark, crediting MIN_LRU_BATCH
//!   pages. 6.8 on stops root reclaim at its target instead.
//! - A pass that reclaimed MIN_LRU_BATCH without needing aging clears
//!   sc->memcgs_need_aging, and kswapd's next lru_gen_age_node then skips its aging pass
//!   once; otherwise that pass runs age_lruvec over every memcg: protection, the min_ttl
//!   test, and try_to_inc_max_seq where should_run_aging says so. 6.1 starts kswapd at
//!   DEF_PRIORITY (no set_initial_priority).
//!
//! The three rules (`mglru_v61_reclaim_loop`, `mglru_v61_should_abort_scan`,
//! `mglru_v61_kswapd_ages_memcgs`, docs/versions.md) are on in 6.1 only. 6.1's
//! should_abort_scan is asked only by 6.1's loop.
//!
//! Simplified: one zone, so the watermark test reads the node; an mm_walk is kswapd's from
//! the start (set_mm_walk(pgdat)), another reclaimer's once its aging walked page tables.
//! Not modeled: a reclaimer whose aging lost the race to another sleeps in 6.1 until
//! max_seq moves (below DEF_PRIORITY - 2); here it goes on at once.

use super::*;
use crate::mm::mmzone::{WMARK_HIGH, WMARK_LOW};
use crate::mm::vmscan::ScanControl;
use crate::mm::{LruvecId, Mm, DEF_PRIORITY};
use crate::sim::Sim;

/// What 6.1's get_nr_to_scan decides before any aging: the budget (size >> priority),
/// and whether aging is needed and, if so, whether its failure (or DEF_PRIORITY) still
/// leaves that budget (three or more generations) or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NrToScanV61 {
    pub nr: u64,
    pub need_aging: bool,
    /// min_seq[!can_swap] + MIN_NR_GENS <= max_seq: eviction possible without aging.
    pub evictable: bool,
}

/// 6.1's get_nr_to_scan before aging (see the module essay): None below memory.min, or
/// below memory.low outside the low-reclaim pass.
pub fn get_nr_to_scan_v61(
    lrugen: &LruGenFolio,
    swappiness: u32,
    (below_min, below_low, low_reclaim): (bool, bool, bool),
    priority: i32,
) -> Option<NrToScanV61> {
    if below_min || (below_low && !low_reclaim) {
        return None;
    }
    let max_seq = lrugen.max_seq;
    let (need_aging, _) = should_run_aging(lrugen, max_seq, swappiness, false);
    let size = super::protection::lruvec_evictable_size(lrugen, swappiness);
    let oldest = lrugen.min_seq[(swappiness == 0) as usize];
    Some(NrToScanV61 {
        nr: size >> priority.clamp(0, 63),
        need_aging,
        evictable: oldest + MIN_NR_GENS <= max_seq,
    })
}

/// What 6.1's should_abort_scan reads besides the ScanControl.
#[derive(Debug, Clone, Copy)]
pub struct AbortInputs {
    /// max_seq - the max_seq at the start of this lruvec's call: agings since.
    pub aged: u64,
    /// Some evict_folios call of this lruvec's call isolated anon.
    pub need_swapping: bool,
    pub killed: bool,
    /// The node's free pages above its low (direct) or high (kswapd) watermark.
    pub above_wmark: bool,
}

/// 6.1's should_abort_scan (see the module essay): whether to stop, and the pages it
/// credits to nr_reclaimed (MIN_LRU_BATCH for a dying task or a balanced node).
pub fn should_abort_scan_v61(sc: &ScanControl, a: AbortInputs) -> (bool, u64) {
    if !sc.kswapd {
        if a.aged > 1 || (sc.nr_reclaimed >= sc.nr_to_reclaim && a.need_swapping) {
            return (true, 0);
        }
        if a.killed {
            return (true, MIN_LRU_BATCH);
        }
        if sc.cgroup_reclaim() {
            return (false, 0);
        }
    } else if sc.nr_reclaimed - sc.last_reclaimed.min(sc.nr_reclaimed) < sc.nr_to_reclaim {
        return (false, 0);
    }
    if sc.priority > DEF_PRIORITY - 2 || !a.above_wmark {
        return (false, 0);
    }
    (true, MIN_LRU_BATCH)
}

impl Mm {
    /// 6.1's swappiness for MGLRU reclaim: the memcg's (get_swappiness) when the reclaim
    /// may swap; 1 for global reclaim that may not swap although it could (file first,
    /// anon only if file has nothing); else 0.
    pub(super) fn lru_gen_swappiness_v61(&self, lv: LruvecId, sc: &ScanControl) -> u32 {
        if sc.may_swap {
            return self.lru_gen_swappiness(lv, sc);
        }
        let memcg = self.lruvecs[lv as usize].memcg;
        let sw = sc
            .swappiness
            .unwrap_or_else(|| self.mem_cgroup_swappiness(memcg));
        let could = get_swappiness_decide(true, self.mem_cgroup_get_nr_swap_pages(memcg), sw);
        (!sc.cgroup_reclaim() && could != 0) as u32
    }

    /// The watermark 6.1's should_abort_scan asks for: free pages at least the low (direct)
    /// or high (kswapd) watermark.
    fn v61_above_wmark(&self, lv: LruvecId, kswapd: bool) -> bool {
        let nd = &self.nodes[self.lruvecs[lv as usize].node as usize];
        let mark = if kswapd { WMARK_HIGH } else { WMARK_LOW };
        nd.free >= nd.wmark[mark]
    }
}

impl Sim {
    /// lru_gen_shrink_lruvec() of 6.1 (rule mglru_v61_reclaim_loop): drain, plug, then
    /// evict until get_nr_to_scan's budget is scanned, it answers 0, evict_folios scans
    /// nothing, or should_abort_scan (6.1's under rule mglru_v61_should_abort_scan); a call
    /// that ended by the budget or the abort and reclaimed MIN_LRU_BATCH without needing
    /// aging clears memcgs_need_aging. No memcg LRU to rotate.
    pub(super) async fn lru_gen_shrink_lruvec_v61(&self, lv: LruvecId, sc: &mut ScanControl) {
        self.lru_add_drain().await;
        let plugged = self.blk_start_plug(sc);
        sc.mm_walk |= sc.kswapd; // set_mm_walk(pgdat): kswapd's own walk
        let seq = self.mm.borrow().lruvecs[lv as usize].lrugen.max_seq;
        let reclaimed = sc.nr_reclaimed;
        let (mut scanned, mut need_aging, mut need_swapping) = (0u64, false, false);
        let ended = loop {
            let swappiness = self.mm.borrow().lru_gen_swappiness_v61(lv, sc);
            let nr = self
                .lru_gen_nr_to_scan_v61(lv, sc, swappiness, &mut need_aging)
                .await;
            if nr == 0 {
                break false;
            }
            let (delta, ty) = self.evict_folios_typed(nr, lv, sc, swappiness).await;
            need_swapping |= ty == Some(LRU_GEN_ANON);
            if delta == 0 {
                break false;
            }
            scanned += delta;
            if scanned >= nr || self.v61_abort(lv, sc, seq, need_swapping) {
                break true;
            }
            self.e.sync().await;
        };
        if ended && sc.nr_reclaimed - reclaimed >= MIN_LRU_BATCH && !need_aging {
            sc.memcgs_need_aging = false;
        }
        sc.mm_walk = false; // clear_mm_walk()
        self.blk_finish_plug(sc, plugged).await;
    }

    /// should_abort_scan() in 6.1's loop: 6.1's (`should_abort_scan_v61`, with its
    /// MIN_LRU_BATCH credit) under rule mglru_v61_should_abort_scan, else the later one.
    fn v61_abort(&self, lv: LruvecId, sc: &mut ScanControl, seq: u64, need_swapping: bool) -> bool {
        let mm = self.mm.borrow();
        if !mm.rules.mglru_v61_should_abort_scan {
            return mm.should_abort_scan(lv, sc);
        }
        let a = AbortInputs {
            aged: mm.lruvecs[lv as usize].lrugen.max_seq - seq,
            need_swapping,
            killed: self.current_killed(),
            above_wmark: mm.v61_above_wmark(lv, sc.kswapd),
        };
        let (stop, credit) = should_abort_scan_v61(sc, a);
        sc.nr_reclaimed += credit;
        stop
    }

    /// 6.1's get_nr_to_scan with its aging: the budget, or 0 (stop). Aging that is needed
    /// waits at DEF_PRIORITY, is left to lru_gen_age_node by kswapd, and is done by any
    /// other reclaimer, which keeps its budget on success; when it was not done (or lost
    /// the race) the budget stands only if three generations are left.
    async fn lru_gen_nr_to_scan_v61(
        &self,
        lv: LruvecId,
        sc: &mut ScanControl,
        swappiness: u32,
        need_aging: &mut bool,
    ) -> u64 {
        let (verdict, max_seq) = {
            let mm = self.mm.borrow();
            let memcg = mm.lruvecs[lv as usize].memcg;
            let target = sc.target_memcg();
            let protection = (
                mm.mem_cgroup_below_min(target, memcg),
                mm.mem_cgroup_below_low(target, memcg),
                sc.memcg_low_reclaim,
            );
            let g = &mm.lruvecs[lv as usize].lrugen;
            (
                get_nr_to_scan_v61(g, swappiness, protection, sc.priority),
                g.max_seq,
            )
        };
        let Some(v) = verdict else { return 0 };
        *need_aging = v.need_aging;
        if !v.need_aging {
            return v.nr;
        }
        if sc.priority != DEF_PRIORITY {
            if sc.kswapd {
                return 0;
            }
            if self
                .try_to_inc_max_seq(lv, max_seq, swappiness, false, &mut sc.mm_walk)
                .await
            {
                return v.nr;
            }
        }
        if v.evictable {
            v.nr
        } else {
            0
        }
    }

    /// lru_gen_age_node() of 6.1 (rule mglru_v61_kswapd_ages_memcgs): note where this
    /// balancing pass starts (last_reclaimed); skip the aging pass once when the last
    /// eviction cleared memcgs_need_aging; otherwise age_lruvec over every memcg. With
    /// min_ttl set and no memcg old enough (or all too small or below memory.min), OOM.
    pub(super) async fn lru_gen_age_node_v61(&self, node: u32, sc: &mut ScanControl) {
        sc.last_reclaimed = sc.nr_reclaimed;
        if !sc.memcgs_need_aging {
            sc.memcgs_need_aging = true;
            return;
        }
        let min_ttl = self.mm.borrow().lru_gen_min_ttl;
        let memcgs = self.mm.borrow().memcg_preorder.clone();
        let mut success = false;
        for m in memcgs {
            let lv = self.mm.borrow().lruvec_of(m, node);
            success |= self.age_lruvec_v61(lv, sc, min_ttl).await;
        }
        if !success && min_ttl != 0 && self.mutex_trylock_oom() {
            self.out_of_memory(None).await;
        }
    }

    /// age_lruvec() of 6.1: skip a memcg below memory.min; with min_ttl, one whose oldest
    /// file generation is younger than it, or (below DEF_PRIORITY) whose budget is 0; age
    /// the others that should_run_aging says need it. True when the memcg counts as
    /// reclaimable for the min_ttl rule.
    async fn age_lruvec_v61(&self, lv: LruvecId, sc: &mut ScanControl, min_ttl: u64) -> bool {
        let (need_aging, max_seq, swappiness) = {
            let mut mm = self.mm.borrow_mut();
            let memcg = mm.lruvecs[lv as usize].memcg;
            mm.mem_cgroup_calculate_protection(0, memcg);
            if mm.mem_cgroup_below_min(0, memcg) {
                return false;
            }
            let swappiness = mm.lru_gen_swappiness_v61(lv, sc);
            let g = &mm.lruvecs[lv as usize].lrugen;
            let Some(v) = get_nr_to_scan_v61(g, swappiness, (false, false, true), sc.priority)
            else {
                return false;
            };
            if min_ttl != 0 {
                let birth = g.timestamps[lru_gen_from_seq(g.min_seq[LRU_GEN_FILE])];
                if birth.saturating_add(min_ttl) > self.e.now() {
                    return false;
                }
                if v.nr == 0 && sc.priority != DEF_PRIORITY {
                    return false;
                }
            }
            (v.need_aging, g.max_seq, swappiness)
        };
        if need_aging {
            self.try_to_inc_max_seq(lv, max_seq, swappiness, false, &mut sc.mm_walk)
                .await;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::Rules;

    /// One lru_gen_shrink_lruvec of /a's lruvec on 6.1 (with `edit`; no swap: file only),
    /// max_seq 3, with `gens` (sequence number, plain clean page-cache folios in it) and
    /// then min_seq `oldest`, by `sc`. Returns (nr_reclaimed, max_seq, memcgs_need_aging
    /// after).
    fn shrink_gens_v61(
        edit: fn(&mut Rules),
        gens: &[(u64, u32)],
        oldest: u64,
        sc: ScanControl,
    ) -> (u64, u64, bool) {
        let s = crate::fixture::one_node_machine("64M", None, "lru = \"mglru\"\nversion = \"6.1\"");
        edit(&mut s.mm.borrow_mut().rules);
        let lv = s.mm.borrow().lruvec_of(1, 0);
        for &(seq, n) in gens {
            s.mm.borrow_mut().lruvecs[lv as usize].lrugen.min_seq = [seq; ANON_AND_FILE];
            s.fixture_file_folios(1, 0, n, 0);
        }
        s.mm.borrow_mut().lruvecs[lv as usize].lrugen.min_seq = [oldest; ANON_AND_FILE];
        let out = std::rc::Rc::new(std::cell::Cell::new((0, false)));
        let o = out.clone();
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            let mut sc = sc;
            s.lru_gen_shrink_lruvec(lv, &mut sc).await;
            o.set((sc.nr_reclaimed, sc.memcgs_need_aging));
        });
        let (reclaimed, need) = out.get();
        let max_seq = s.mm.borrow().lruvecs[lv as usize].lrugen.max_seq;
        (reclaimed, max_seq, need)
    }

    /// `shrink_gens_v61` with `n` folios in the oldest generation, `oldest`.
    fn shrink_v61(edit: fn(&mut Rules), oldest: u64, n: u32, sc: ScanControl) -> (u64, u64, bool) {
        shrink_gens_v61(edit, &[(oldest, n)], oldest, sc)
    }

    fn as_is(_: &mut Rules) {}

    /// Reclaim of `target` (None: global; Some(1): /a) at `priority`, asking 1024 pages.
    fn sc(target: Option<u16>, kswapd: bool, priority: i32, need_aging: bool) -> ScanControl {
        let mut sc = ScanControl::new(1024, target, kswapd);
        sc.priority = priority;
        sc.memcgs_need_aging = need_aging;
        sc
    }

    #[test]
    fn on_6_1_a_reclaimer_ages_and_goes_on_evicting_and_kswapd_leaves_aging_alone() {
        // Two generations (min_seq 2, max_seq 3): aging is a must. Memcg reclaim of /a at
        // priority 1 ages (max_seq 4) and keeps its budget, 256 >> 1 = 128: a batch of 64
        // (6.1 isolates up to MIN_LRU_BATCH whatever the budget), then, with three
        // generations spread 192/0/0 (not due before "rework aging feedback"), 192 >> 1 =
        // 96, reached by the second batch: 128 reclaimed.
        assert_eq!(
            shrink_v61(as_is, 2, 256, sc(Some(1), false, 1, false)),
            (128, 4, false)
        );
        // The later loop ends the call at the aging.
        let later = |r: &mut Rules| r.mglru_v61_reclaim_loop = false;
        assert_eq!(shrink_v61(later, 2, 256, sc(Some(1), false, 1, false)).0, 0);
        // kswapd leaves the aging to lru_gen_age_node: nothing scanned, nothing aged.
        assert_eq!(
            shrink_v61(as_is, 2, 256, sc(None, true, 1, true)),
            (0, 3, true)
        );
    }

    #[test]
    fn on_6_1_a_pass_that_reclaims_a_batch_without_aging_skips_kswapds_next_aging() {
        // Four generations, nothing due. 256 folios at priority 1: 128 reclaimed, at least
        // MIN_LRU_BATCH, so memcgs_need_aging is cleared.
        assert_eq!(
            shrink_v61(as_is, 0, 256, sc(Some(1), false, 1, true)),
            (128, 3, false)
        );
        // Seq 0 holds 50 folios, seq 1 100; priority 2: budget 150 >> 2 = 37. One batch
        // isolates the 50 (scan_folios stops when the generation is empty) and counts 51
        // (min_seq advanced), which ends the call by its budget: 50 reclaimed, under
        // MIN_LRU_BATCH, so the flag stays.
        let two = [(1, 100), (0, 50)];
        let sc2 = sc(Some(1), false, 2, true);
        assert_eq!(shrink_gens_v61(as_is, &two, 0, sc2), (50, 3, true));
        // Aging needed at DEF_PRIORITY is put off, and the flag stays even after a full
        // batch: three generations, the youngest (seq 3) holding 8000 of 8200 (8000 * 2 >
        // 8200, due before "rework aging feedback"); budget 8200 >> 12 = 2, one batch of
        // 64 from seq 1.
        let young = [(3, 8000), (1, 200)];
        let def = sc(Some(1), false, DEF_PRIORITY, true);
        assert_eq!(shrink_gens_v61(as_is, &young, 1, def), (64, 3, true));
        // 50 folios alone: the batch empties seq 0, leaving two generations, so
        // evict_folios answers 0 and the call ends without looking at the flag.
        let sc0 = sc(Some(1), false, 0, true);
        assert_eq!(shrink_v61(as_is, 0, 50, sc0), (50, 3, true));
    }

    fn inputs(aged: u64, need_swapping: bool, killed: bool, above_wmark: bool) -> AbortInputs {
        AbortInputs {
            aged,
            need_swapping,
            killed,
            above_wmark,
        }
    }

    #[test]
    fn should_abort_scan_of_6_1() {
        let quiet = inputs(1, false, false, true);
        // Memcg reclaim with its target met: goes on (fairness) unless it swapped, aged
        // the memcg twice, or is dying (credited MIN_LRU_BATCH).
        let mut memcg = sc(Some(1), false, 5, false);
        memcg.nr_reclaimed = 2048;
        assert_eq!(should_abort_scan_v61(&memcg, quiet), (false, 0));
        assert_eq!(
            should_abort_scan_v61(&memcg, inputs(1, true, false, true)),
            (true, 0)
        );
        assert_eq!(
            should_abort_scan_v61(&memcg, inputs(2, false, false, true)),
            (true, 0)
        );
        assert_eq!(
            should_abort_scan_v61(&memcg, inputs(1, false, true, true)),
            (true, 64)
        );
        // Not yet at the target, swapping: goes on.
        memcg.nr_reclaimed = 1000;
        assert_eq!(
            should_abort_scan_v61(&memcg, inputs(1, true, false, true)),
            (false, 0)
        );
        // Global direct reclaim: never above priority 10, whatever it reclaimed (6.8 on
        // stops at the target); at 10 once the zone is above its low watermark.
        let mut global = sc(None, false, 11, false);
        assert_eq!(should_abort_scan_v61(&global, quiet), (false, 0));
        global.priority = 10;
        assert_eq!(should_abort_scan_v61(&global, quiet), (true, 64));
        assert_eq!(
            should_abort_scan_v61(&global, inputs(1, false, false, false)),
            (false, 0)
        );
        // kswapd: only once it reclaimed nr_to_reclaim since lru_gen_age_node.
        let mut kswapd = sc(None, true, 10, false);
        kswapd.nr_reclaimed = 2000;
        kswapd.last_reclaimed = 1000;
        assert_eq!(
            should_abort_scan_v61(&kswapd, quiet),
            (false, 0),
            "1000 < 1024"
        );
        kswapd.last_reclaimed = 976;
        assert_eq!(should_abort_scan_v61(&kswapd, quiet), (true, 64), "1024");
        kswapd.priority = 11;
        assert_eq!(should_abort_scan_v61(&kswapd, quiet), (false, 0));
    }

    #[test]
    fn the_6_1_loop_asks_6_1s_should_abort_scan() {
        // Global direct reclaim of /a's lruvec (four generations, 2048 folios) at priority
        // 1, asking 32 pages: the first batch of 64 meets that. 6.1's should_abort_scan
        // does not stop at the target; at priority 1 (not above 10) with the node above its
        // low watermark it stops, crediting MIN_LRU_BATCH. Without the rule the later one
        // stops at the target, with no credit.
        let mut global = sc(None, false, 1, false);
        global.nr_to_reclaim = 32;
        let (credited, _, _) = shrink_v61(as_is, 0, 2048, global.clone());
        assert_eq!(credited, 64 + MIN_LRU_BATCH);
        let later = |r: &mut Rules| r.mglru_v61_should_abort_scan = false;
        assert_eq!(shrink_v61(later, 0, 2048, global).0, 64);
    }

    /// Two lru_gen_age_node passes of kswapd on 6.1 (with `edit`) over a node where /a has
    /// two generations (aging is a must): max_seq of /a after each, and memcgs_need_aging
    /// and last_reclaimed after the first.
    fn age_node_twice(edit: fn(&mut Rules)) -> (u64, u64, bool, u64) {
        let s = crate::fixture::one_node_machine("64M", None, "lru = \"mglru\"\nversion = \"6.1\"");
        edit(&mut s.mm.borrow_mut().rules);
        let lv = s.mm.borrow().lruvec_of(1, 0);
        s.mm.borrow_mut().lruvecs[lv as usize].lrugen.min_seq = [2; ANON_AND_FILE];
        s.fixture_file_folios(1, 0, 64, 0);
        let out = std::rc::Rc::new(std::cell::Cell::new((0, 0, false, 0)));
        let o = out.clone();
        crate::fixture::run_probe(&s, 0, 0, move |s| async move {
            let mut sc = sc(None, true, DEF_PRIORITY, false);
            sc.nr_reclaimed = 7;
            let seq = |s: &Sim| s.mm.borrow().lruvecs[lv as usize].lrugen.max_seq;
            s.lru_gen_age_node(0, &mut sc).await;
            let first = (seq(&s), sc.memcgs_need_aging, sc.last_reclaimed);
            s.lru_gen_age_node(0, &mut sc).await;
            o.set((first.0, seq(&s), first.1, first.2));
        });
        out.get()
    }

    #[test]
    fn kswapd_ages_memcgs_in_lru_gen_age_node_on_6_1() {
        // First pass: memcgs_need_aging was clear, so it is set and nothing is aged;
        // last_reclaimed notes the 7 reclaimed so far. Second pass: /a is aged.
        assert_eq!(age_node_twice(as_is), (3, 4, true, 7));
        // Later kernels age only in the reclaim loop.
        let later = |r: &mut Rules| r.mglru_v61_kswapd_ages_memcgs = false;
        assert_eq!(age_node_twice(later), (3, 3, false, 0));
    }
}
