//! The aging: the generation bookkeeping of the "the aging" section of mm/vmscan.c
//! (v6.18): folio_update_gen, folio_inc_gen, inc_min_seq, try_to_inc_min_seq, inc_max_seq
//! and try_to_inc_max_seq. The page-table walk between them in that section
//! (update_batch_size to walk_mm) is in walk.rs.
//!
//! Aging opens a new youngest generation, max_seq + 1 (`inc_max_seq`). A type that
//! already has MAX_NR_GENS generations first retires its oldest (`inc_min_seq`): its
//! folios move, from the tail, to the next generation (or to the one the walk promoted
//! them to), counted as protected. Eviction advances min_seq too, past empty generations
//! (`try_to_inc_min_seq`). Before opening the generation, `try_to_inc_max_seq` walks the
//! page tables of the memcg's processes (walk.rs), once per generation however many
//! reclaimers age the lruvec at the same time (mm_list.rs). The walk promotes the folios
//! it finds young to max_seq (`folio_update_gen`) lazily: their gen counter changes, and
//! they stay on their old list until eviction or inc_min_seq sorts them.
//!
//! ```text
//!   try_to_inc_max_seq(seq): seq <= mm_state.seq: another aging covered it, false
//!     page-table walk (lru_gen 0x2): lru_gen_walk_mms -> iterate_mm_list, walk_mm
//!     without it:                    iterate_mm_list_nowalk
//!     [lru_lock] inc_max_seq: inc_min_seq of each full type (MAX_LRU_BATCH folios at a
//!                time, the lock dropped between batches), compat sizes, max_seq += 1
//! ```
//! Simplified: generations are born at virtual ns, not jiffies; the kernel's cmpxchg
//! loops on folio->flags are plain updates of the folio's byte; aging without the
//! page-table walk (lru_gen enabled without 0x2) relies on eviction's rmap walk alone
//! (lru_gen_look_around, walk.rs).

use super::*;
use crate::engine::Site;
use crate::mm::mmzone::{Lruvec, LRU_INACTIVE_FILE};
use crate::mm::{LruvecId, Mm, Pfn, NIL};
use crate::sim::Sim;
use crate::versions::Rules;

/// folio_update_gen() (the page-table walk found a young PTE). Rule
/// mglru_promote_second_sighting (6.14): like lru_gen_set_refs, a folio seen for the first
/// time only gets PG_referenced; otherwise its gen counter is set to `gen` (the walk's
/// max_seq generation) without moving it on the lists, its refs flags are cleared and
/// PG_workingset set. Before it (6.1, 6.12) the first sighting promotes, clearing the refs
/// flags (PG_workingset among them), and an isolated folio gets PG_referenced for
/// shrink_folio_list. Returns the previous generation, or None when only PG_referenced
/// was set or the folio is off the MGLRU lists (isolated). The caller accounts the move
/// (update_batch_size, or lru_gen_update_size under the lru_lock); the folio stays
/// physically on its old list until eviction or inc_min_seq sorts it.
pub fn folio_update_gen(frames: &mut Frames, pfn: Pfn, gen: usize, rules: &Rules) -> Option<usize> {
    debug_assert!(gen < MAX_NR_GENS as usize);
    let page = frames[pfn as usize];
    if !rules.mglru_promote_second_sighting {
        let Some(old) = folio_lru_gen(frames, pfn) else {
            frames[pfn as usize].set(PG_REFERENCED);
            return None;
        };
        set_byte_gen(frames, pfn, Some(gen));
        clear_refs_flags(frames, pfn, rules);
        return Some(old);
    }
    if !page.test(PG_REFERENCED) && !page.test(PG_WORKINGSET) {
        set_byte_refs(frames, pfn, 0);
        frames[pfn as usize].set(PG_REFERENCED);
        return None;
    }
    let old = folio_lru_gen(frames, pfn)?;
    set_byte_gen(frames, pfn, Some(gen));
    clear_refs_flags(frames, pfn, rules);
    frames[pfn as usize].set(PG_WORKINGSET);
    Some(old)
}

/// folio_inc_gen() (eviction's protection, inc_min_seq's folding): move a folio of the
/// oldest generation to the next one, clearing its refs flags (so lru_gen_inc_refs starts
/// over; PG_workingset too before 6.14, rule mglru_tiers_rework) and, when `reclaiming`,
/// setting PG_reclaim so folio_end_writeback rotates it. A folio the page-table walk
/// already promoted keeps its generation. Returns the new generation; the caller moves the
/// folio to that list. Caller holds lru_lock.
pub fn folio_inc_gen(
    frames: &mut Frames,
    lv: &mut Lruvec,
    pfn: Pfn,
    reclaiming: bool,
    rules: &Rules,
) -> usize {
    let ty = folio_type(&frames[pfn as usize]);
    let old_gen = lru_gen_from_seq(lv.lrugen.min_seq[ty]);
    let cur = folio_lru_gen(frames, pfn);
    debug_assert!(
        cur.is_some(),
        "pfn {pfn}: folio_inc_gen off the MGLRU lists"
    );
    if let Some(g) = cur {
        if g != old_gen {
            return g;
        }
    }
    let new_gen = (old_gen + 1) % MAX_NR_GENS as usize;
    set_byte_gen(frames, pfn, Some(new_gen));
    clear_refs_flags(frames, pfn, rules);
    if reclaiming {
        frames[pfn as usize].set(PG_RECLAIM);
    }
    lru_gen_update_size(lv, ty, Some(old_gen), Some(new_gen));
    new_gen
}

/// inc_min_seq(): retire the oldest generation of `ty` (its window is MAX_NR_GENS and
/// aging needs a slot). Its folios are moved, from the tail, to the tail of the next
/// generation (or of the one the walk promoted them to), each counted as protected except
/// those whose tier bits are all set (refs 4 and workingset, lazily promoted); before 6.14
/// (rule mglru_tiers_rework) none is counted. A type that is not evictable at this
/// swappiness keeps its folios where they are; they end up in the new youngest
/// generation (the kernel accepts this cold/hot inversion). Then the
/// controller carries over and min_seq advances. Returns false, with min_seq unchanged,
/// after moving MAX_LRU_BATCH folios: the caller drops the lru_lock, reschedules and
/// retries (inc_max_seq's restart). Caller holds lru_lock.
pub fn inc_min_seq(
    frames: &mut Frames,
    lv: &mut Lruvec,
    ty: usize,
    swappiness: u32,
    rules: &Rules,
) -> bool {
    let hist = lru_hist_from_seq(lv.lrugen.min_seq[ty]);
    let old_gen = lru_gen_from_seq(lv.lrugen.min_seq[ty]);
    if type_is_evictable(ty, swappiness) {
        let mut remaining = MAX_LRU_BATCH;
        loop {
            let pfn = lv.lrugen.folios[old_gen][ty].tail();
            if pfn == NIL {
                break;
            }
            let page = frames[pfn as usize];
            debug_assert!(!page.test(PG_UNEVICTABLE) && !page.test(PG_ACTIVE));
            let refs = lru_refs(&page, page.lru_gen, rules);
            let ws = page.test(PG_WORKINGSET);
            let new_gen = folio_inc_gen(frames, lv, pfn, false, rules);
            gen_list_move(frames, &mut lv.lrugen, pfn, new_gen, true);
            if rules.mglru_tiers_rework && refs + ws as usize != REFS_MAXED {
                lv.lrugen.protected[hist][ty][lru_tier_from_refs(refs, ws)] += 1;
            }
            remaining -= 1;
            if remaining == 0 {
                return false;
            }
        }
    }
    reset_ctrl_pos(&mut lv.lrugen, ty, true);
    lv.lrugen.min_seq[ty] += 1;
    true
}

/// try_to_inc_min_seq(): advance the min_seq of each evictable type past its empty oldest
/// generations, keeping at least MIN_NR_GENS. When both types are evictable, neither may
/// get ahead of max_seq - MIN_NR_GENS while the other lags behind it, so that anon and file
/// stay within reach of each other. Returns whether any min_seq advanced. Caller holds
/// lru_lock.
pub fn try_to_inc_min_seq(lrugen: &mut LruGenFolio, swappiness: u32) -> bool {
    let mut min_seq = lrugen.min_seq;
    for (ty, seq) in min_seq.iter_mut().enumerate() {
        if !type_is_evictable(ty, swappiness) {
            continue;
        }
        while *seq + MIN_NR_GENS <= lrugen.max_seq
            && lrugen.folios[lru_gen_from_seq(*seq)][ty].is_empty()
        {
            *seq += 1;
        }
    }
    if swappiness != 0 && swappiness <= MAX_SWAPPINESS {
        let seq = lrugen.max_seq - MIN_NR_GENS;
        let (anon, file) = (LRU_GEN_ANON, LRU_GEN_FILE);
        if min_seq[anon] > seq && min_seq[file] < seq {
            min_seq[anon] = seq;
        } else if min_seq[file] > seq && min_seq[anon] < seq {
            min_seq[file] = seq;
        }
    }
    let mut success = false;
    for (ty, &seq) in min_seq.iter().enumerate() {
        if !type_is_evictable(ty, swappiness) || seq <= lrugen.min_seq[ty] {
            continue;
        }
        reset_ctrl_pos(lrugen, ty, true);
        lrugen.min_seq[ty] = seq;
        success = true;
    }
    success
}

/// What inc_max_seq() did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncMaxSeq {
    /// `seq` is no longer max_seq: someone else aged this lruvec (the kernel's false).
    Stale,
    /// inc_min_seq spent its batch; drop the lru_lock, reschedule, call again.
    Busy,
    /// max_seq advanced (the kernel's true).
    Done,
}

/// inc_max_seq(): open a new youngest generation. A type at MAX_NR_GENS first retires its
/// oldest (inc_min_seq). The generation max_seq - 1 stops counting as active and the one
/// about to become max_seq + 1 starts (it can still hold folios of a type that was not
/// evictable, see inc_min_seq), so their sizes swap sides in the compatibility counts. The
/// new generation is born at `now` [virtual ns; the kernel uses jiffies]. Caller holds
/// lru_lock.
pub fn inc_max_seq(
    frames: &mut Frames,
    lv: &mut Lruvec,
    seq: u64,
    swappiness: u32,
    now: u64,
    rules: &Rules,
) -> IncMaxSeq {
    if seq != lv.lrugen.max_seq {
        return IncMaxSeq::Stale;
    }
    for ty in 0..ANON_AND_FILE {
        if get_nr_gens(&lv.lrugen, ty) == MAX_NR_GENS
            && !inc_min_seq(frames, lv, ty, swappiness, rules)
        {
            return IncMaxSeq::Busy;
        }
    }
    let prev = lru_gen_from_seq(lv.lrugen.max_seq - 1);
    let next = lru_gen_from_seq(lv.lrugen.max_seq + 1);
    for ty in 0..ANON_AND_FILE {
        let delta = lv.lrugen.nr_pages[prev][ty] - lv.lrugen.nr_pages[next][ty];
        if delta != 0 {
            update_lru_size(lv, ty * LRU_INACTIVE_FILE, delta);
            update_lru_size(lv, ty * LRU_INACTIVE_FILE + 1, -delta);
        }
    }
    for ty in 0..ANON_AND_FILE {
        reset_ctrl_pos(&mut lv.lrugen, ty, false);
    }
    lv.lrugen.timestamps[next] = now;
    lv.lrugen.max_seq += 1;
    IncMaxSeq::Done
}

impl Sim {
    /// try_to_inc_max_seq(): age the lruvec from `seq`: unless another aging already
    /// covered it (mm_state.seq), walk the page tables of the memcg's processes (lru_gen
    /// 0x2; without it only the mm_list iteration's bookkeeping), then inc_max_seq under
    /// lru_lock, giving the lock up between batches of inc_min_seq. Returns whether
    /// max_seq advanced. A walk of the page tables leaves the reclaimer with an mm_walk
    /// (`mm_walk` set: set_mm_walk(NULL, true) stays on current->reclaim_state until the
    /// caller's clear_mm_walk).
    pub async fn try_to_inc_max_seq(
        &self,
        lv: LruvecId,
        seq: u64,
        swappiness: u32,
        force_scan: bool,
        mm_walk: &mut bool,
    ) -> bool {
        let success = {
            let walk_mmu = self.mm.borrow().should_walk_mmu();
            if seq <= self.mm.borrow().mm_state[lv as usize].seq {
                return false;
            }
            if walk_mmu {
                *mm_walk = true;
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
                let Mm {
                    pages,
                    lruvecs,
                    rules,
                    ..
                } = &mut *mm;
                inc_max_seq(
                    pages,
                    &mut lruvecs[lv as usize],
                    seq,
                    swappiness,
                    now,
                    rules,
                )
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::lru_gen::test_util::*;
    use crate::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON};
    use crate::versions::DEFAULT_RULES;

    #[test]
    fn update_gen_promotes_only_on_second_sighting() {
        let mut f = frames(&[FILE, FILE]);
        f[0].lru_gen = 1 + 1; // gen 1
        assert_eq!(folio_update_gen(&mut f, 0, 3, &DEFAULT_RULES), None);
        assert!(f[0].test(PG_REFERENCED));
        assert_eq!(
            folio_lru_gen(&f, 0),
            Some(1),
            "first sighting does not move it"
        );
        f[0].lru_gen |= 1 << LRU_REFS_PGOFF;
        assert_eq!(folio_update_gen(&mut f, 0, 3, &DEFAULT_RULES), Some(1));
        assert_eq!(folio_lru_gen(&f, 0), Some(3));
        assert!(f[0].test(PG_WORKINGSET) && !f[0].test(PG_REFERENCED));
        assert_eq!(byte_refs(f[0].lru_gen), 0);
        // Referenced but isolated (gen 0 in the byte): nothing to promote.
        f[1].set(PG_REFERENCED);
        assert_eq!(folio_update_gen(&mut f, 1, 3, &DEFAULT_RULES), None);
        assert_eq!(f[1].lru_gen, 0);
    }

    #[test]
    fn update_gen_before_6_14_promotes_at_the_first_sighting() {
        // 6.12's folio_update_gen: a folio on the lists moves to the walk's generation at
        // its first young PTE, losing its refs counter, PG_referenced and PG_workingset;
        // an isolated one (no gen) only gets PG_referenced, for shrink_folio_list.
        let r = v6_12();
        let mut f = frames(&[FILE, FILE | PG_REFERENCED | PG_WORKINGSET, ANON]);
        f[0].lru_gen = 1 + 1; // gen 1, never referenced
        assert_eq!(folio_update_gen(&mut f, 0, 3, &r), Some(1));
        assert_eq!(folio_lru_gen(&f, 0), Some(3));
        assert!(!f[0].test(PG_REFERENCED | PG_WORKINGSET));
        f[1].lru_gen = (2 << LRU_REFS_PGOFF) + 1; // gen 0, counter 2
        assert_eq!(folio_update_gen(&mut f, 1, 3, &r), Some(0));
        assert_eq!(
            (folio_lru_gen(&f, 1), byte_refs(f[1].lru_gen)),
            (Some(3), 0)
        );
        assert!(!f[1].test(PG_REFERENCED | PG_WORKINGSET));
        assert_eq!(folio_update_gen(&mut f, 2, 3, &r), None);
        assert!(f[2].test(PG_REFERENCED) && f[2].lru_gen == 0);
    }

    #[test]
    fn inc_min_seq_before_6_14_counts_no_protection_and_clears_workingset() {
        // 6.12's inc_min_seq folds the oldest generation without counting protected
        // folios, and its folio_inc_gen clears PG_workingset with the other refs flags.
        let f_ = LRU_GEN_FILE;
        let r = v6_12();
        let mut f = frames(&[FILE, FILE, FILE]);
        let mut lv = lruvec();
        for pfn in 0..3 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &r);
        }
        f[1].set(PG_REFERENCED | PG_WORKINGSET);
        f[1].lru_gen |= 2 << LRU_REFS_PGOFF;
        // All three in one generation (6.12 places them at min_seq + 1); make it the oldest.
        let gen = folio_lru_gen(&f, 0).unwrap();
        lv.lrugen.min_seq[f_] = gen as u64;
        lv.lrugen.avg_total[f_] = [9; 4];
        assert!(inc_min_seq(&mut f, &mut lv, f_, 60, &r));
        // Nothing protected: the carry-over only halves the averages, 9 / 2 = 4.
        assert_eq!(lv.lrugen.avg_total[f_], [4; 4]);
        assert!(!f[1].test(PG_REFERENCED | PG_WORKINGSET));
        assert_eq!(byte_refs(f[1].lru_gen), 0);
        assert_eq!(list(&f, &lv.lrugen.folios[(gen + 1) % 4][f_]).len(), 3);
    }

    #[test]
    fn inc_gen_moves_oldest_up_and_keeps_promoted() {
        // max_seq 3, min_seq 0: gen 0 -> gen 1, both inactive: no compat move.
        let mut f = frames(&[FILE | PG_REFERENCED, FILE]);
        let mut lv = lruvec();
        lru_gen_add_folio(&mut f, &mut lv, 0, false, &DEFAULT_RULES);
        lru_gen_add_folio(&mut f, &mut lv, 1, false, &DEFAULT_RULES);
        f[0].lru_gen |= 2 << LRU_REFS_PGOFF;
        assert_eq!(folio_inc_gen(&mut f, &mut lv, 0, true, &DEFAULT_RULES), 1);
        assert_eq!(folio_lru_gen(&f, 0), Some(1));
        assert!(!f[0].test(PG_REFERENCED) && f[0].test(PG_RECLAIM));
        assert_eq!(byte_refs(f[0].lru_gen), 0);
        assert_eq!(lv.lrugen.nr_pages[0][1], 1);
        assert_eq!(lv.lrugen.nr_pages[1][1], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 2);
        // A folio the walk promoted to gen 3 keeps it and nothing is counted.
        f[1].lru_gen = (f[1].lru_gen & !LRU_GEN_MASK) | 4;
        assert_eq!(folio_inc_gen(&mut f, &mut lv, 1, false, &DEFAULT_RULES), 3);
        assert_eq!(lv.lrugen.nr_pages[0][1], 1);
        // With min_seq 1 (window 3), gen 1 -> gen 2 is a move from inactive to active.
        lv.lrugen.min_seq = [1, 1];
        assert_eq!(folio_inc_gen(&mut f, &mut lv, 0, false, &DEFAULT_RULES), 2);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE + 1], 1);
    }

    #[test]
    fn inc_max_seq_folds_oldest_and_moves_compat_sizes() {
        let f_ = LRU_GEN_FILE;
        // max_seq 3: gens 2, 3 active. pfn 0 anon -> gen 2; pfn 1 file -> gen 0;
        // pfn 2 file workingset -> seq 1, gen 1; pfns 3, 4 file -> gen 0 (list 4, 3, 1).
        let mut f = frames(&[ANON, FILE, FILE | PG_WORKINGSET, FILE, FILE]);
        let mut lv = lruvec();
        for pfn in 0..5 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &DEFAULT_RULES);
        }
        // Then pfn 3 gets all its tier bits (refs 4 + workingset = 5) and pfn 4 refs 2.
        f[3].set(PG_REFERENCED | PG_WORKINGSET);
        f[3].lru_gen |= 3 << LRU_REFS_PGOFF;
        f[4].set(PG_REFERENCED);
        f[4].lru_gen |= 1 << LRU_REFS_PGOFF;
        // Averages of 9 make the protected counts visible after the carry-over halves.
        lv.lrugen.avg_total[f_] = [9; 4];
        assert_eq!(
            inc_max_seq(&mut f, &mut lv, 3, 60, 100, &DEFAULT_RULES),
            IncMaxSeq::Done
        );
        // Both windows were 4: anon gen 0 empty -> min 1; file gen 0 folded into gen 1
        // from the tail, each to the tail: gen 1 = 2, 1, 3, 4.
        assert_eq!(lv.lrugen.min_seq, [1, 1]);
        assert_eq!(lv.lrugen.max_seq, 4);
        assert_eq!(list(&f, &lv.lrugen.folios[1][f_]), vec![2, 1, 3, 4]);
        // Protected: pfn 1 tier 0, pfn 4 tier 1 (refs 2), pfn 3 not counted (maxed);
        // carried over: (9 + 1) / 2 = 5 for tiers 0 and 1, 9 / 2 = 4 for tiers 2 and 3.
        assert_eq!(lv.lrugen.avg_total[f_], [5, 5, 4, 4]);
        assert!(!f[3].test(PG_REFERENCED) && f[3].test(PG_WORKINGSET));
        assert!(!f[4].test(PG_REFERENCED));
        // Compat: prev = gen 2 (seq 2) stops being active, next = gen 0 (seq 4) starts:
        // anon delta = 1 - 0 moves the anon folio to inactive; file delta = 0 - 0.
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 1);
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 0);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 4);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE + 1], 0);
        assert_eq!(lv.lrugen.timestamps, [100, 0, 0, 0]);
        // A stale seq does nothing.
        assert_eq!(
            inc_max_seq(&mut f, &mut lv, 3, 60, 150, &DEFAULT_RULES),
            IncMaxSeq::Stale
        );
        assert_eq!(lv.lrugen.max_seq, 4);
        // Again at seq 4: windows 4 again; file gen 1 -> gen 2 from the tail: 4, 3, 1, 2.
        assert_eq!(
            inc_max_seq(&mut f, &mut lv, 4, 60, 200, &DEFAULT_RULES),
            IncMaxSeq::Done
        );
        assert_eq!(lv.lrugen.min_seq, [2, 2]);
        assert_eq!(lv.lrugen.max_seq, 5);
        assert_eq!(list(&f, &lv.lrugen.folios[2][f_]), vec![4, 3, 1, 2]);
        // prev = gen 3, next = gen 1: both empty, no compat move.
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 4);
        assert_eq!(lv.lrugen.timestamps, [100, 200, 0, 0]);
    }

    #[test]
    fn inc_max_seq_keeps_unevictable_type_in_place() {
        // Swappiness 0: anon is not evictable. pfn 0 anon in the swap cache -> gen 0.
        let mut f = frames(&[ANON | PG_SWAPCACHE, FILE]);
        let mut lv = lruvec();
        lru_gen_add_folio(&mut f, &mut lv, 0, false, &DEFAULT_RULES);
        lru_gen_add_folio(&mut f, &mut lv, 1, false, &DEFAULT_RULES);
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 1);
        assert_eq!(
            inc_max_seq(&mut f, &mut lv, 3, 0, 7, &DEFAULT_RULES),
            IncMaxSeq::Done
        );
        // Anon's min_seq advanced without moving the folio; it is now in gen 0 = seq 4,
        // the youngest: prev = gen 2 (0 pages), next = gen 0 (1 page), delta -1 makes it
        // active.
        assert_eq!(lv.lrugen.min_seq, [1, 1]);
        assert_eq!(folio_lru_gen(&f, 0), Some(0));
        assert_eq!(list(&f, &lv.lrugen.folios[0][LRU_GEN_ANON]), vec![0]);
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 0);
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 1);
        assert_eq!(folio_lru_gen(&f, 1), Some(1), "file is evictable and moves");
    }

    #[test]
    fn inc_min_seq_yields_after_max_lru_batch() {
        // 4096 file folios in gen 0: inc_min_seq moves all of them, and the 4096th spends
        // the batch, so it reports false before advancing min_seq; the retry finds gen 0
        // empty and finishes.
        let n = MAX_LRU_BATCH as usize;
        let mut f = frames(&vec![FILE; n]);
        let mut lv = lruvec();
        for pfn in 0..n as u32 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &DEFAULT_RULES);
        }
        assert_eq!(
            inc_max_seq(&mut f, &mut lv, 3, 60, 0, &DEFAULT_RULES),
            IncMaxSeq::Busy
        );
        assert_eq!(lv.lrugen.min_seq, [1, 0]);
        assert_eq!(lv.lrugen.max_seq, 3);
        assert_eq!(lv.lrugen.nr_pages[1][LRU_GEN_FILE], n as i64);
        assert_eq!(
            inc_max_seq(&mut f, &mut lv, 3, 60, 0, &DEFAULT_RULES),
            IncMaxSeq::Done
        );
        assert_eq!(lv.lrugen.min_seq, [1, 1]);
        // All 4096 counted as protected in tier 0, then halved: 2048.
        assert_eq!(lv.lrugen.avg_total[LRU_GEN_FILE][0], 2048);
    }

    #[test]
    fn try_to_inc_min_seq_cases() {
        let (a, f) = (LRU_GEN_ANON, LRU_GEN_FILE);
        // max_seq 5, min_seq 2 and 2. Anon: seqs 2, 3 empty, 4 (gen 0) not; file: seq 2
        // (gen 2) not empty. Only whether a list is empty is read.
        let mut pos = vec![0u32; 16];
        let mut base = LruGenFolio::init(true, 0);
        base.max_seq = 5;
        base.min_seq = [2, 2];
        base.folios[0][a].add(&mut pos, 0, 7);
        base.folios[2][f].add(&mut pos, 2, 8);
        base.avg_refaulted = [[10; 4]; 2];
        // Swappiness 60: anon would reach 4 (stops when 4 + 2 > 5), but file lags at 2 <
        // max_seq - 2 = 3, so anon is held at 3.
        let mut g = base.clone();
        assert!(try_to_inc_min_seq(&mut g, 60));
        assert_eq!(g.min_seq, [3, 2]);
        assert_eq!(g.avg_refaulted[a], [5; 4], "carried over");
        assert_eq!(g.avg_refaulted[f], [10; 4]);
        // Swappiness 0: anon is not evictable and file cannot move.
        let mut g = base.clone();
        assert!(!try_to_inc_min_seq(&mut g, 0));
        assert_eq!(g.min_seq, [2, 2]);
        // Swappiness 201: file is not evictable; anon goes to 4 unheld.
        let mut g = base.clone();
        assert!(try_to_inc_min_seq(&mut g, 201));
        assert_eq!(g.min_seq, [4, 2]);
        // File runs ahead (seqs 2, 3 empty, 4 not) while anon lags at 2 (not empty):
        // with both evictable, file is held at max_seq - 2 = 3; with swappiness 0 anon does
        // not count and file reaches 4.
        let mut ahead = LruGenFolio::init(true, 0);
        ahead.max_seq = 5;
        ahead.min_seq = [2, 2];
        ahead.folios[2][a].add(&mut pos, 2, 7);
        ahead.folios[0][f].add(&mut pos, 0, 8);
        let mut g = ahead.clone();
        assert!(try_to_inc_min_seq(&mut g, 60));
        assert_eq!(g.min_seq, [2, 3]);
        let mut g = ahead.clone();
        assert!(try_to_inc_min_seq(&mut g, 0));
        assert_eq!(g.min_seq, [2, 4]);
        // Empty lists stop at max_seq - MIN_NR_GENS + 1 = 4 (two gens left).
        let mut g = LruGenFolio::init(true, 0);
        g.max_seq = 5;
        g.min_seq = [2, 2];
        assert!(try_to_inc_min_seq(&mut g, 60));
        assert_eq!(g.min_seq, [4, 4]);
    }
}
