//! The per-folio side of MGLRU: a folio's generation and its refs counter (tiers),
//! the generation lists and their sizes. Models the lru_gen part of
//! include/linux/mm_inline.h (lru_gen_folio_seq, lru_gen_update_size, lru_gen_add_folio,
//! lru_gen_del_folio, lru_tier_from_refs, folio_lru_refs, folio_lru_gen), mm/swap.c's
//! lru_gen_inc_refs (folio_mark_accessed with MGLRU) and mm/vmscan.c's lru_gen_set_refs
//! (folio_check_references' helper, just before the lru_gen sections), as of v6.18. The
//! two per-folio steps of vmscan.c's "the aging" section, folio_update_gen and
//! folio_inc_gen, are in aging.rs.
//!
//! The kernel keeps a folio's generation (gen + 1, 0 when it is on no MGLRU list) and its
//! refs counter in folio->flags; the model keeps them in a byte of the frame's `Page`
//! (its 16 flag bits are all taken), and PG_referenced and PG_workingset in the frame's
//! flags as usual:
//!
//! ```text
//!   Frames[pfn].lru_gen:    bits 0-2  gen + 1 (LRU_GEN_MASK; 0 = not on an MGLRU list)
//!                           bits 3-4  refs counter (LRU_REFS_MASK)
//!   Frames[pfn].flags:      PG_referenced (the first access), PG_workingset (the last tier)
//! ```
//! Each change is a read-modify-write of that byte, where the kernel loops on cmpxchg.
//!
//! Before 6.14 (6.1, 6.12; rule mglru_tiers_rework) the same bits count differently: the
//! second access sets PG_workingset and the counter counts the third to fifth, so
//! folio_lru_refs is the counter plus PG_workingset and the tier order_base_2(refs + 1);
//! both encodings put a folio read N times in tier order_base_2(N). Resets of the refs
//! then clear PG_workingset too (it was one of LRU_REFS_FLAGS).
//!
//! Simplified: every folio is one page (every size delta is 1), in one zone; the
//! compatibility sizes also go to `Lruvec::nr`, where the kernel's __update_lru_size
//! updates the lruvec and zone counters but not the memcg per-zone LRU sizes.

use super::list::pos_gen;
use super::*;
use crate::mm::mmzone::Lruvec;
use crate::mm::Pfn;
use crate::versions::Rules;

// ---------------------------------------------------------------------------------------
// Per-folio state: Page::lru_gen and the flags
// ---------------------------------------------------------------------------------------

/// The gen counter of a byte: None when not on an MGLRU list (the kernel's -1).
#[inline]
pub(super) fn byte_gen(b: u8) -> Option<usize> {
    match b & LRU_GEN_MASK {
        0 => None,
        g => Some(g as usize - 1),
    }
}

/// The refs counter of a byte (0..=3).
#[inline]
pub(super) fn byte_refs(b: u8) -> u8 {
    (b & LRU_REFS_MASK) >> LRU_REFS_PGOFF
}

/// Store gen+1 (0 for None) and keep the refs counter.
#[inline]
pub(super) fn set_byte_gen(frames: &mut Frames, pfn: Pfn, gen: Option<usize>) {
    let b = &mut frames[pfn as usize].lru_gen;
    *b = (*b & !LRU_GEN_MASK) | gen.map_or(0, |g| g as u8 + 1);
}

/// Store the refs counter and keep the gen counter.
#[inline]
pub(super) fn set_byte_refs(frames: &mut Frames, pfn: Pfn, refs: u8) {
    let b = &mut frames[pfn as usize].lru_gen;
    *b = (*b & !LRU_REFS_MASK) | ((refs << LRU_REFS_PGOFF) & LRU_REFS_MASK);
}

/// Clear LRU_REFS_FLAGS: the refs counter and PG_referenced. Rule mglru_tiers_rework
/// (6.14): before it (6.1, 6.12) PG_workingset was one of LRU_REFS_FLAGS and went too.
#[inline]
pub(super) fn clear_refs_flags(frames: &mut Frames, pfn: Pfn, rules: &Rules) {
    set_byte_refs(frames, pfn, 0);
    let mut flags = PG_REFERENCED;
    if !rules.mglru_tiers_rework {
        flags |= PG_WORKINGSET;
    }
    frames[pfn as usize].clear(flags);
}

/// folio_lru_gen(): the folio's generation, None (the kernel's -1) when it is not on an
/// MGLRU list.
#[inline]
pub fn folio_lru_gen(frames: &Frames, pfn: Pfn) -> Option<usize> {
    byte_gen(frames[pfn as usize].lru_gen)
}

/// folio_lru_refs() on a page and its byte. Rule mglru_tiers_rework (6.14): the accesses
/// through file descriptors, counting PG_referenced as the first; 0 when PG_referenced is
/// clear (the counter is then stale). Before it (6.1, 6.12): the accesses beyond the first,
/// the counter plus PG_workingset (which the second access set).
#[inline]
pub fn lru_refs(page: &Page, byte: u8, rules: &Rules) -> usize {
    if !rules.mglru_tiers_rework {
        return byte_refs(byte) as usize + page.test(PG_WORKINGSET) as usize;
    }
    if !page.test(PG_REFERENCED) {
        return 0;
    }
    byte_refs(byte) as usize + 1
}

/// folio_lru_refs(): see `lru_refs`.
#[inline]
pub fn folio_lru_refs(frames: &Frames, pfn: Pfn, rules: &Rules) -> usize {
    lru_refs(&frames[pfn as usize], frames[pfn as usize].lru_gen, rules)
}

/// The tier of a folio whose folio_lru_refs() is `refs` (lru_tier_from_refs with the
/// workingset bit as the version reads it): see `lru_tier_from_refs` (rule
/// mglru_tiers_rework, 6.14) and `lru_tier_from_refs_v612` (before).
#[inline]
pub fn refs_tier(refs: usize, workingset: bool, rules: &Rules) -> usize {
    if rules.mglru_tiers_rework {
        lru_tier_from_refs(refs, workingset)
    } else {
        lru_tier_from_refs_v612(refs)
    }
}

/// order_base_2(n) = ceil(log2(n)), and 0 for n <= 1.
#[inline]
fn order_base_2(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }
}

/// lru_tier_from_refs() since 6.14: workingset folios are in the last tier, the rest in
/// order_base_2(refs): refs 0 and 1 -> 0, 2 -> 1, 3 and 4 -> 2.
#[inline]
pub fn lru_tier_from_refs(refs: usize, workingset: bool) -> usize {
    debug_assert!(refs <= 1 << LRU_REFS_WIDTH);
    if workingset {
        return MAX_NR_TIERS - 1;
    }
    order_base_2(refs)
}

/// lru_tier_from_refs() before 6.14 (6.1, 6.12), whose refs count the accesses beyond the
/// first: order_base_2(refs + 1), so refs 0 -> 0, 1 -> 1, 2 and 3 -> 2, 4 -> 3.
#[inline]
pub fn lru_tier_from_refs_v612(refs: usize) -> usize {
    debug_assert!(refs <= 1 << LRU_REFS_WIDTH);
    order_base_2(refs + 1)
}

/// lru_gen_inc_refs() (folio_mark_accessed with MGLRU, mm/swap.c): one access through a
/// file descriptor. Rule mglru_tiers_rework (6.14): the first sets PG_referenced (and
/// restarts the counter), the next three step the counter, and the one after that sets
/// PG_workingset. Before it (6.1 and 6.12's folio_inc_refs): the first sets PG_referenced,
/// the second PG_workingset, the next three step the counter. Unevictable folios are left
/// alone. No lock: the kernel does it with atomic flag operations.
pub fn lru_gen_inc_refs(frames: &mut Frames, pfn: Pfn, rules: &Rules) {
    let page = frames[pfn as usize];
    if page.test(PG_UNEVICTABLE) {
        return;
    }
    if !page.test(PG_REFERENCED) {
        if rules.mglru_tiers_rework {
            set_byte_refs(frames, pfn, 0);
        }
        frames[pfn as usize].set(PG_REFERENCED);
        return;
    }
    if !rules.mglru_tiers_rework && !page.test(PG_WORKINGSET) {
        frames[pfn as usize].set(PG_WORKINGSET);
        return;
    }
    let refs = byte_refs(frames[pfn as usize].lru_gen);
    if refs == (1 << LRU_REFS_WIDTH) - 1 {
        if rules.mglru_tiers_rework {
            frames[pfn as usize].set(PG_WORKINGSET);
        }
        return;
    }
    set_byte_refs(frames, pfn, refs + 1);
}

/// lru_gen_set_refs() (folio_check_references in the eviction's rmap walk, and
/// lru_gen_look_around without a page-table walk): a young PTE was found. A folio seen
/// young for the first time only gets PG_referenced (second chance); one seen before
/// (referenced or workingset) loses its refs flags, gets PG_workingset, and is to be
/// activated: returns true (FOLIOREF_ACTIVATE), false otherwise (FOLIOREF_KEEP).
/// Rule mglru_set_refs_mark_accessed (7.2): a folio seen again gets PG_workingset only
/// when folio_lru_refs (PG_referenced plus the counter) is above one; otherwise one more
/// reference (folio_mark_accessed, lru_gen_inc_refs); it is to be activated either way.
pub fn lru_gen_set_refs(frames: &mut Frames, pfn: Pfn, rules: &Rules) -> bool {
    let page = frames[pfn as usize];
    if !page.test(PG_REFERENCED) && !page.test(PG_WORKINGSET) {
        set_byte_refs(frames, pfn, 0);
        frames[pfn as usize].set(PG_REFERENCED);
        return false;
    }
    if rules.mglru_set_refs_mark_accessed && folio_lru_refs(frames, pfn, rules) <= 1 {
        lru_gen_inc_refs(frames, pfn, rules);
        return true;
    }
    clear_refs_flags(frames, pfn, rules);
    frames[pfn as usize].set(PG_WORKINGSET);
    true
}

// ---------------------------------------------------------------------------------------
// Sizes, placement and the generation lists
// ---------------------------------------------------------------------------------------

/// __update_lru_size(): the compatibility size of a classic list, in `Lruvec::nr` and its
/// NR_{IN,}ACTIVE_* item. `nr` wraps while a walk batch holds the count transiently
/// negative, as the kernel's long counters go negative.
#[inline]
pub fn update_lru_size(lv: &mut Lruvec, lru: usize, delta: i64) {
    lv.mod_lru_size(lru, delta);
}

/// lru_gen_update_size(): move one page of type `ty` from generation `old` to `new` (None
/// = off the lists) in nr_pages and in the compatibility sizes: an addition counts in the
/// active or inactive list of its generation, a deletion uncounts, and a move from an
/// inactive to an active generation moves the page between the two. A move from active to
/// inactive never happens here (demotion goes through isolation). Caller holds lru_lock.
pub fn lru_gen_update_size(lv: &mut Lruvec, ty: usize, old: Option<usize>, new: Option<usize>) {
    debug_assert!(old.is_some() || new.is_some());
    if let Some(o) = old {
        lv.lrugen.nr_pages[o][ty] -= 1;
    }
    if let Some(n) = new {
        lv.lrugen.nr_pages[n][ty] += 1;
    }
    let g = &lv.lrugen;
    match (old, new) {
        (None, Some(n)) => {
            let lru = compat_lru(g, ty, n);
            update_lru_size(lv, lru, 1);
        }
        (Some(o), None) => {
            let lru = compat_lru(g, ty, o);
            update_lru_size(lv, lru, -1);
        }
        (Some(o), Some(n)) => {
            let (was, is) = (lru_gen_is_active(g, o), lru_gen_is_active(g, n));
            debug_assert!(!was || is, "demotion of gen {o} to {n} without isolation");
            if !was && is {
                update_lru_size(lv, ty * LRU_INACTIVE_FILE, -1);
                update_lru_size(lv, ty * LRU_INACTIVE_FILE + 1, 1);
            }
        }
        (None, None) => {}
    }
}

/// lru_gen_folio_seq(): the generation a folio joins when added to the lists.
///
/// - PG_active (set only while off the lists, e.g. faulted in, or activated by reclaim):
///   the second youngest, or the youngest with PG_workingset;
/// - `reclaiming` (lruvec_add_folio_tail: rotated at writeback end): the oldest;
/// - anon not in the swap cache, or PG_reclaim with dirty or writeback: the second youngest,
///   since it cannot be evicted right away;
/// - otherwise (page cache, swap cache): the oldest, or the second oldest with
///   PG_workingset (or, with rule mglru_placement_referenced of 7.2, PG_referenced).
///
/// The result is never below the type's min_seq (a narrow window clamps "oldest" up).
///
/// Without rule mglru_placement_from_max_seq (6.1, 6.12): lru_gen_add_folio's placement,
/// [`lru_gen_add_folio_seq_v61`].
pub fn lru_gen_folio_seq(
    lrugen: &LruGenFolio,
    page: &Page,
    reclaiming: bool,
    rules: &Rules,
) -> u64 {
    if !rules.mglru_placement_from_max_seq {
        return lru_gen_add_folio_seq_v61(lrugen, page, reclaiming);
    }
    let ws = page.test(PG_WORKINGSET) as u64;
    // Rule mglru_placement_referenced (7.2): PG_referenced lifts a cache folio too.
    let lift = (page.test(PG_WORKINGSET)
        || (rules.mglru_placement_referenced && page.test(PG_REFERENCED))) as u64;
    let gen = if page.test(PG_ACTIVE) {
        MIN_NR_GENS - ws
    } else if reclaiming {
        MAX_NR_GENS
    } else if (!page.is_file_lru() && !page.test(PG_SWAPCACHE))
        || (page.test(PG_RECLAIM) && (page.test(PG_DIRTY) || page.test(PG_WRITEBACK)))
    {
        MIN_NR_GENS
    } else {
        MAX_NR_GENS - lift
    };
    // max_seq >= MIN_NR_GENS + 1 and gen <= MAX_NR_GENS: no underflow.
    (lrugen.max_seq + 1 - gen).max(lrugen.min_seq[folio_type(page)])
}

/// lru_gen_add_folio()'s placement before v6.14 (6.1 to 6.12): PG_active to the youngest
/// generation; anon not in the swap cache, or PG_reclaim with dirty or writeback, to the
/// second youngest; rotated at writeback end (`reclaiming`), or with no more than
/// MIN_NR_GENS + 1 generations of the type, to the oldest (min_seq); anything else to
/// the second oldest. PG_workingset and PG_referenced are not read.
fn lru_gen_add_folio_seq_v61(lrugen: &LruGenFolio, page: &Page, reclaiming: bool) -> u64 {
    let min_seq = lrugen.min_seq[folio_type(page)];
    if page.test(PG_ACTIVE) {
        lrugen.max_seq
    } else if (!page.is_file_lru() && !page.test(PG_SWAPCACHE))
        || (page.test(PG_RECLAIM) && (page.test(PG_DIRTY) || page.test(PG_WRITEBACK)))
    {
        lrugen.max_seq - 1
    } else if reclaiming || min_seq + MIN_NR_GENS >= lrugen.max_seq {
        min_seq
    } else {
        min_seq + 1
    }
}

/// list_del() from whichever generation list of type `ty` holds the folio: the one its
/// position names (its gen counter does not say: a promoted folio waits on its old list to
/// be sorted). Returns the folios that were before and after it.
#[inline]
fn gen_list_del(frames: &mut Frames, lrugen: &mut LruGenFolio, ty: usize, pfn: Pfn) -> (Pfn, Pfn) {
    let gen = pos_gen(frames.lru_pos[pfn as usize]);
    lrugen.folios[gen][ty].del(&mut frames.lru_pos, pfn)
}

/// list_add() (or list_add_tail() with `tail`) to generation `gen` of the folio's type.
#[inline]
fn gen_list_add(frames: &mut Frames, lrugen: &mut LruGenFolio, pfn: Pfn, gen: usize, tail: bool) {
    let ty = folio_type(&frames[pfn as usize]);
    let list = &mut lrugen.folios[gen][ty];
    if tail {
        list.add_tail(&mut frames.lru_pos, gen, pfn);
    } else {
        list.add(&mut frames.lru_pos, gen, pfn);
    }
}

/// The folios before and after `pfn` on its generation list (NIL past the ends): the
/// neighbours list_del writes, or those list_add wrote.
pub fn gen_list_neighbours(frames: &Frames, lrugen: &LruGenFolio, pfn: Pfn) -> (Pfn, Pfn) {
    let ty = folio_type(&frames[pfn as usize]);
    let gen = pos_gen(frames.lru_pos[pfn as usize]);
    lrugen.folios[gen][ty].neighbours(&frames.lru_pos, pfn)
}

/// Whether `pfn` is on the generation list its position names.
pub fn gen_list_holds(frames: &Frames, lrugen: &LruGenFolio, pfn: Pfn) -> bool {
    let ty = folio_type(&frames[pfn as usize]);
    let gen = pos_gen(frames.lru_pos[pfn as usize]);
    lrugen.folios[gen][ty].holds(&frames.lru_pos, pfn)
}

/// list_move() / list_move_tail() of a folio to the head (or tail) of generation `gen`.
pub(super) fn gen_list_move(
    frames: &mut Frames,
    lrugen: &mut LruGenFolio,
    pfn: Pfn,
    gen: usize,
    tail: bool,
) {
    let ty = folio_type(&frames[pfn as usize]);
    gen_list_del(frames, lrugen, ty, pfn);
    gen_list_add(frames, lrugen, pfn, gen, tail);
}

/// lru_gen_add_folio() (lruvec_add_folio, and lruvec_add_folio_tail with `reclaiming`): put
/// a folio on the generation lru_gen_folio_seq picks, at the head, or at the tail when
/// `reclaiming` so it is the next to go. Clears PG_active and sets PG_lru (the project's
/// lruvec_add_folio sets PG_lru too). Returns false, touching nothing, for an unevictable
/// folio or a lruvec with MGLRU off: the caller then uses the classic lists. Caller holds
/// lru_lock.
pub fn lru_gen_add_folio(
    frames: &mut Frames,
    lv: &mut Lruvec,
    pfn: Pfn,
    reclaiming: bool,
    rules: &Rules,
) -> bool {
    debug_assert!(
        folio_lru_gen(frames, pfn).is_none(),
        "pfn {pfn} added twice"
    );
    let page = frames[pfn as usize];
    if page.test(PG_UNEVICTABLE) || !lv.lrugen.enabled {
        return false;
    }
    let ty = folio_type(&page);
    let gen = lru_gen_from_seq(lru_gen_folio_seq(&lv.lrugen, &page, reclaiming, rules));
    set_byte_gen(frames, pfn, Some(gen));
    frames[pfn as usize].clear(PG_ACTIVE);
    frames[pfn as usize].set(PG_LRU);
    lru_gen_update_size(lv, ty, None, Some(gen));
    gen_list_add(frames, &mut lv.lrugen, pfn, gen, reclaiming);
    true
}

/// lru_gen_del_folio() (lruvec_del_folio, isolate_folio): take a folio off the MGLRU
/// lists. Unless `reclaiming`, a folio of an active generation leaves with PG_active so
/// that it comes back active (folio_migrate_flags). Leaves PG_lru to the caller. Returns
/// false when the folio is not on the MGLRU lists. Caller holds lru_lock.
#[inline]
pub fn lru_gen_del_folio(frames: &mut Frames, lv: &mut Lruvec, pfn: Pfn, reclaiming: bool) -> bool {
    let Some(gen) = folio_lru_gen(frames, pfn) else {
        return false;
    };
    let page = frames[pfn as usize];
    debug_assert!(!page.test(PG_ACTIVE) && !page.test(PG_UNEVICTABLE));
    let ty = folio_type(&page);
    if !reclaiming && lru_gen_is_active(&lv.lrugen, gen) {
        frames[pfn as usize].set(PG_ACTIVE);
    }
    set_byte_gen(frames, pfn, None);
    lru_gen_update_size(lv, ty, Some(gen), None);
    gen_list_del(frames, &mut lv.lrugen, ty, pfn);
    true
}

/// Take a folio off its generation list without uncounting it: scan_folios parks the
/// folios it could not isolate on a private list (list_move to `moved`) until the zone is
/// done. Put them back with `lru_gen_list_splice`.
pub fn lru_gen_list_unlink(frames: &mut Frames, lrugen: &mut LruGenFolio, pfn: Pfn) {
    let ty = folio_type(&frames[pfn as usize]);
    gen_list_del(frames, lrugen, ty, pfn);
}

/// list_splice(&moved, head) in scan_folios: put the folios parked with
/// `lru_gen_list_unlink` back at the head of generation `gen`, given in the order they were
/// parked; the last parked ends up first, as the kernel's head-inserted `moved` list does.
pub fn lru_gen_list_splice(
    frames: &mut Frames,
    lrugen: &mut LruGenFolio,
    gen: usize,
    parked: &[Pfn],
) {
    for &pfn in parked {
        gen_list_add(frames, lrugen, pfn, gen, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::lru_gen::test_util::*;
    use crate::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON, LRU_UNEVICTABLE};
    use crate::mm::vmstat::NodeStat;
    use crate::mm::NIL;
    use crate::versions::DEFAULT_RULES;

    #[test]
    fn placement_follows_lru_gen_folio_seq() {
        // max_seq 7, min_seq anon 4 (window 4), file 5 (window 3). seq = max_seq - gen + 1
        // with gen 2 - ws when active, 4 when reclaiming, 2 for anon outside the swap cache
        // or reclaim+dirty/writeback, else 4 - ws; then max(seq, min_seq[type]).
        let g = window([4, 5]);
        let v6_18 = Rules::of(crate::versions::KernelVersion::V6_18);
        let v7_3 = Rules::of(crate::versions::KernelVersion::V7_3);
        let seq = |flags, reclaiming| lru_gen_folio_seq(&g, &page(flags), reclaiming, &v6_18);
        // Active: 7 - 2 + 1 = 6; active and workingset: 7 - 1 + 1 = 7.
        assert_eq!(seq(FILE | PG_ACTIVE, false), 6);
        assert_eq!(seq(FILE | PG_ACTIVE | PG_WORKINGSET, false), 7);
        // Active wins over reclaiming.
        assert_eq!(seq(ANON | PG_ACTIVE, true), 6);
        // Reclaiming: 7 - 4 + 1 = 4 for anon (min 4); file clamps up to its min_seq 5.
        assert_eq!(seq(ANON | PG_SWAPCACHE, true), 4);
        assert_eq!(seq(FILE, true), 5);
        // Reclaiming ignores workingset: still 4.
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_WORKINGSET, true), 4);
        // Anon outside the swap cache: 7 - 2 + 1 = 6, with or without workingset.
        assert_eq!(seq(ANON, false), 6);
        assert_eq!(seq(ANON | PG_WORKINGSET, false), 6);
        // PG_reclaim with dirty, or with writeback: 6. PG_reclaim alone: default.
        assert_eq!(seq(FILE | PG_RECLAIM | PG_DIRTY, false), 6);
        assert_eq!(seq(FILE | PG_RECLAIM | PG_WRITEBACK, false), 6);
        assert_eq!(
            seq(FILE | PG_DIRTY, false),
            5,
            "dirty without PG_reclaim: default"
        );
        assert_eq!(seq(FILE | PG_RECLAIM, false), 5);
        // Default: 7 - 4 + 1 = 4, anon in swap cache keeps 4, file clamps to 5.
        assert_eq!(seq(ANON | PG_SWAPCACHE, false), 4);
        assert_eq!(seq(FILE, false), 5);
        // Default with workingset: 7 - 3 + 1 = 5 for both.
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_WORKINGSET, false), 5);
        assert_eq!(seq(FILE | PG_WORKINGSET, false), 5);
        // PG_referenced: nothing before 7.2 (4); with mglru_placement_referenced it lifts
        // a swap-cache folio as workingset does (7 - 3 + 1 = 5), and only that default
        // case: anon outside the swap cache stays at 6, reclaiming at 4.
        let seq73 = |flags, reclaiming| lru_gen_folio_seq(&g, &page(flags), reclaiming, &v7_3);
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_REFERENCED, false), 4);
        assert_eq!(seq73(ANON | PG_SWAPCACHE | PG_REFERENCED, false), 5);
        assert_eq!(seq73(ANON | PG_SWAPCACHE, false), 4);
        assert_eq!(seq73(ANON | PG_REFERENCED, false), 6);
        assert_eq!(seq73(ANON | PG_SWAPCACHE | PG_REFERENCED, true), 4);
        let mut only = v6_18;
        assert!(only.set("mglru_placement_referenced", true));
        assert_eq!(
            lru_gen_folio_seq(&g, &page(ANON | PG_SWAPCACHE | PG_REFERENCED), false, &only),
            5,
            "the rule alone"
        );
    }

    #[test]
    fn placement_before_6_14_is_lru_gen_add_folios() {
        // max_seq 7, min_seq anon 4 (window 4), file 5 (window 3: min_seq + MIN_NR_GENS
        // >= max_seq, so the "second oldest" case goes to the oldest). 6.12's
        // lru_gen_add_folio: active -> max_seq; anon outside the swap cache or PG_reclaim
        // with dirty/writeback -> max_seq - 1; reclaiming or a narrow window -> min_seq;
        // else min_seq + 1. PG_workingset and PG_referenced are never read.
        let g = window([4, 5]);
        let v6_12 = Rules::of(crate::versions::KernelVersion::V6_12);
        let v6_1 = Rules::of(crate::versions::KernelVersion::V6_1);
        let seq = |flags, reclaiming| lru_gen_folio_seq(&g, &page(flags), reclaiming, &v6_12);
        assert_eq!(seq(FILE | PG_ACTIVE, false), 7);
        assert_eq!(seq(FILE | PG_ACTIVE | PG_WORKINGSET, false), 7);
        assert_eq!(seq(ANON | PG_ACTIVE, true), 7, "active before reclaiming");
        assert_eq!(seq(ANON, false), 6);
        assert_eq!(
            seq(ANON, true),
            6,
            "anon outside the swap cache before reclaiming"
        );
        assert_eq!(seq(FILE | PG_RECLAIM | PG_WRITEBACK, false), 6);
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_RECLAIM | PG_DIRTY, false), 6);
        // PG_reclaim alone, or dirty alone: the default case.
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_RECLAIM, false), 5);
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_DIRTY, false), 5);
        assert_eq!(seq(ANON | PG_SWAPCACHE, true), 4);
        assert_eq!(seq(ANON | PG_SWAPCACHE, false), 5);
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_WORKINGSET, false), 5);
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_REFERENCED, false), 5);
        // File: window 3, so the oldest even when not reclaiming.
        assert_eq!(seq(FILE, false), 5);
        assert_eq!(seq(FILE | PG_WORKINGSET, false), 5);
        // 6.1 places the same way.
        assert_eq!(
            lru_gen_folio_seq(&g, &page(ANON | PG_SWAPCACHE), false, &v6_1),
            5
        );
        // The rule alone, on 6.18: that version's placement (the other test's 4 and 6).
        let mut only = Rules::of(crate::versions::KernelVersion::V6_18);
        assert_eq!(
            lru_gen_folio_seq(&g, &page(ANON | PG_SWAPCACHE), false, &only),
            4
        );
        assert!(only.set("mglru_placement_from_max_seq", false));
        assert_eq!(
            lru_gen_folio_seq(&g, &page(ANON | PG_SWAPCACHE), false, &only),
            5
        );
        assert_eq!(
            lru_gen_folio_seq(&g, &page(FILE | PG_ACTIVE), false, &only),
            7
        );
    }

    #[test]
    fn add_folio_head_tail_and_compat_sizes() {
        // Initial window: max_seq 3, so gens 3 and 2 are active, 1 and 0 inactive.
        let mut f = frames(&[ANON, FILE, FILE, FILE | PG_ACTIVE]);
        let mut lv = lruvec();
        // Anon outside the swap cache: seq 3 - 2 + 1 = 2 -> gen 2, active.
        assert!(lru_gen_add_folio(&mut f, &mut lv, 0, false, &DEFAULT_RULES));
        // Clean file: seq 3 - 4 + 1 = 0 -> gen 0, inactive; pfn 1 at the head, then pfn 2
        // at the tail (reclaiming), so the list reads 1, 2.
        assert!(lru_gen_add_folio(&mut f, &mut lv, 1, false, &DEFAULT_RULES));
        assert!(lru_gen_add_folio(&mut f, &mut lv, 2, true, &DEFAULT_RULES));
        // Active file: seq 2 -> gen 2; PG_active is cleared, PG_lru set.
        assert!(lru_gen_add_folio(&mut f, &mut lv, 3, false, &DEFAULT_RULES));
        assert!(!f[3].test(PG_ACTIVE) && f[3].test(PG_LRU));
        assert_eq!(folio_lru_gen(&f, 0), Some(2));
        assert_eq!(folio_lru_gen(&f, 1), Some(0));
        assert_eq!(folio_lru_gen(&f, 3), Some(2));
        assert_eq!(list(&f, &lv.lrugen.folios[0][LRU_GEN_FILE]), vec![1, 2]);
        assert_eq!(lv.lrugen.nr_pages[2], [1, 1]);
        assert_eq!(lv.lrugen.nr_pages[0], [0, 2]);
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 0);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 2);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE + 1], 1);
        assert_eq!(lv.stat[NodeStat::NrActiveAnon as usize], 1);
        assert_eq!(lv.stat[NodeStat::NrInactiveFile as usize], 2);
        assert_eq!(lv.stat[NodeStat::NrActiveFile as usize], 1);
    }

    #[test]
    fn add_folio_refuses_unevictable_and_disabled() {
        let mut f = frames(&[FILE | PG_UNEVICTABLE, FILE]);
        let mut lv = lruvec();
        assert!(!lru_gen_add_folio(
            &mut f,
            &mut lv,
            0,
            false,
            &DEFAULT_RULES
        ));
        lv.lrugen.enabled = false;
        assert!(!lru_gen_add_folio(
            &mut f,
            &mut lv,
            1,
            false,
            &DEFAULT_RULES
        ));
        assert_eq!([f[0].lru_gen, f[1].lru_gen], [0, 0]);
        assert_eq!(lv.nr, [0; 5]);
        assert!(!f[1].test(PG_LRU));
        assert_eq!(lv.nr[LRU_UNEVICTABLE], 0);
    }

    #[test]
    fn del_folio_sets_active_unless_reclaiming() {
        // Both go to gen 2 (active at max_seq 3).
        let mut f = frames(&[ANON, ANON, FILE]);
        let mut lv = lruvec();
        for pfn in 0..3 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &DEFAULT_RULES);
        }
        assert!(lru_gen_del_folio(&mut f, &mut lv, 0, false));
        assert!(f[0].test(PG_ACTIVE), "leaves an active generation active");
        assert!(lru_gen_del_folio(&mut f, &mut lv, 1, true));
        assert!(!f[1].test(PG_ACTIVE), "reclaiming: not reactivated");
        // The file folio is in gen 0, inactive: no PG_active either way.
        assert!(lru_gen_del_folio(&mut f, &mut lv, 2, false));
        assert!(!f[2].test(PG_ACTIVE));
        assert!(
            !lru_gen_del_folio(&mut f, &mut lv, 2, false),
            "not on a list"
        );
        assert_eq!(lv.nr, [0; 5]);
        assert_eq!(lv.lrugen.nr_pages, [[0; 2]; 4]);
        for l in lv.lrugen.folios.iter().flatten() {
            assert!(l.is_empty() && (l.head(), l.tail()) == (NIL, NIL));
        }
    }

    #[test]
    fn tier_from_refs() {
        // order_base_2: 0 and 1 -> 0, 2 -> 1, 3 and 4 -> 2; workingset -> MAX_NR_TIERS - 1.
        let tiers: Vec<usize> = (0..=4).map(|r| lru_tier_from_refs(r, false)).collect();
        assert_eq!(tiers, vec![0, 0, 1, 2, 2]);
        for r in 0..=4 {
            assert_eq!(lru_tier_from_refs(r, true), 3);
        }
        // folio_lru_refs: the counter only counts with PG_referenced.
        let refs_byte = 3 << LRU_REFS_PGOFF;
        assert_eq!(lru_refs(&page(FILE), refs_byte, &DEFAULT_RULES), 0);
        assert_eq!(lru_refs(&page(FILE | PG_REFERENCED), 0, &DEFAULT_RULES), 1);
        assert_eq!(
            lru_refs(&page(FILE | PG_REFERENCED), refs_byte, &DEFAULT_RULES),
            4
        );
        assert_eq!(
            lru_refs(
                &page(FILE | PG_REFERENCED),
                1 << LRU_REFS_PGOFF | 2,
                &DEFAULT_RULES
            ),
            2
        );
    }

    #[test]
    fn inc_refs_steps_to_workingset() {
        // Accesses: 1st sets PG_referenced (refs 1), 2nd-4th step the counter (refs 2, 3,
        // 4), the 5th sets PG_workingset; tiers 0, 1, 2, 2, then 3.
        let mut f = frames(&[FILE]);
        f[0].lru_gen = 2 << LRU_REFS_PGOFF | 3; // a stale counter and gen 2
        let mut seen = vec![];
        for _ in 0..6 {
            lru_gen_inc_refs(&mut f, 0, &DEFAULT_RULES);
            let ws = f[0].test(PG_WORKINGSET);
            seen.push((folio_lru_refs(&f, 0, &DEFAULT_RULES), ws));
        }
        assert_eq!(
            seen,
            vec![
                (1, false),
                (2, false),
                (3, false),
                (4, false),
                (4, true),
                (4, true)
            ]
        );
        assert_eq!(
            folio_lru_gen(&f, 0),
            Some(2),
            "the gen counter is untouched"
        );
        // Unevictable folios are not counted.
        let mut u = frames(&[FILE | PG_UNEVICTABLE]);
        lru_gen_inc_refs(&mut u, 0, &DEFAULT_RULES);
        assert!(!u[0].test(PG_REFERENCED));
    }

    #[test]
    fn set_refs_second_chance_then_activate() {
        let mut f = frames(&[FILE, FILE | PG_WORKINGSET]);
        f[0].lru_gen = 3 << LRU_REFS_PGOFF;
        // First young PTE: PG_referenced only, counter restarted, keep.
        assert!(!lru_gen_set_refs(&mut f, 0, &DEFAULT_RULES));
        assert!(f[0].test(PG_REFERENCED) && !f[0].test(PG_WORKINGSET));
        assert_eq!(byte_refs(f[0].lru_gen), 0);
        // Second: refs flags cleared, workingset set, activate.
        f[0].lru_gen |= 2 << LRU_REFS_PGOFF;
        assert!(lru_gen_set_refs(&mut f, 0, &DEFAULT_RULES));
        assert!(!f[0].test(PG_REFERENCED) && f[0].test(PG_WORKINGSET));
        assert_eq!(byte_refs(f[0].lru_gen), 0);
        // Workingset alone is enough to activate.
        assert!(lru_gen_set_refs(&mut f, 1, &DEFAULT_RULES));
    }

    #[test]
    fn set_refs_counts_a_reference_before_workingset_on_7_2_on() {
        // 7.2's lru_gen_set_refs: a folio seen again with folio_lru_refs <= 1 gets one more
        // reference (folio_mark_accessed); with more than one, PG_workingset. ACTIVATE
        // either way.
        let v7_3 = Rules::of(crate::versions::KernelVersion::V7_3);
        let mut f = frames(&[FILE, FILE | PG_WORKINGSET]);
        // First sighting as before: PG_referenced, counter 0 (refs 1), keep.
        assert!(!lru_gen_set_refs(&mut f, 0, &v7_3));
        assert_eq!(
            (
                folio_lru_refs(&f, 0, &DEFAULT_RULES),
                f[0].test(PG_WORKINGSET)
            ),
            (1, false)
        );
        // Second: refs 1 -> the counter steps (refs 2), no PG_workingset, activate.
        assert!(lru_gen_set_refs(&mut f, 0, &v7_3));
        assert_eq!(
            (
                folio_lru_refs(&f, 0, &DEFAULT_RULES),
                f[0].test(PG_WORKINGSET)
            ),
            (2, false)
        );
        // Third: refs 2 > 1 -> refs flags cleared, PG_workingset.
        assert!(lru_gen_set_refs(&mut f, 0, &v7_3));
        assert!(!f[0].test(PG_REFERENCED) && f[0].test(PG_WORKINGSET));
        assert_eq!(byte_refs(f[0].lru_gen), 0);
        // Workingset without PG_referenced: refs 0 -> folio_mark_accessed sets
        // PG_referenced, PG_workingset stays; activate.
        assert!(lru_gen_set_refs(&mut f, 1, &v7_3));
        assert!(f[1].test(PG_REFERENCED) && f[1].test(PG_WORKINGSET));
        // 6.18 with the rule alone on behaves as 7.3; without it, the second sighting
        // sets PG_workingset.
        let mut g = frames(&[FILE, FILE]);
        let mut only = Rules::of(crate::versions::KernelVersion::V6_18);
        only.set("mglru_set_refs_mark_accessed", true);
        let v6_18 = Rules::of(crate::versions::KernelVersion::V6_18);
        for (pfn, r) in [(0, &only), (1, &v6_18)] {
            lru_gen_set_refs(&mut g, pfn, r);
            lru_gen_set_refs(&mut g, pfn, r);
        }
        assert!(!g[0].test(PG_WORKINGSET) && g[1].test(PG_WORKINGSET));
    }

    #[test]
    fn list_unlink_and_splice_order() {
        // Four clean file folios added at the head of gen 0: list 3, 2, 1, 0.
        let mut f = frames(&[FILE; 4]);
        let mut lv = lruvec();
        for pfn in 0..4 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &DEFAULT_RULES);
        }
        // Park 0 then 1 (taken from the tail, as scan_folios does), splice them back: the
        // kernel's `moved` list is 1, 0 and goes in front: 1, 0, 3, 2.
        lru_gen_list_unlink(&mut f, &mut lv.lrugen, 0);
        lru_gen_list_unlink(&mut f, &mut lv.lrugen, 1);
        assert_eq!(list(&f, &lv.lrugen.folios[0][1]), vec![3, 2]);
        assert_eq!(lv.lrugen.nr_pages[0][1], 4, "parked folios stay counted");
        lru_gen_list_splice(&mut f, &mut lv.lrugen, 0, &[0, 1]);
        assert_eq!(list(&f, &lv.lrugen.folios[0][1]), vec![1, 0, 3, 2]);
        assert_eq!(lv.lrugen.folios[0][1].tail(), 2);
    }

    #[test]
    fn n_accesses_land_in_tier_order_base_2_of_n_in_both_encodings() {
        // include/linux/mmzone.h (6.1 to 6.18): "A page accessed N times through file
        // descriptors is in tier order_base_2(N)", capped at MAX_NR_TIERS - 1 = 3: N = 0..=8
        // gives 0, 0, 1, 2, 2, 3, 3, 3, 3. The two encodings get there differently: 6.18
        // counts PG_referenced as the first access and sets PG_workingset at the fifth;
        // 6.12 sets PG_workingset at the second and counts the rest beyond it.
        let want_tier = [0, 0, 1, 2, 2, 3, 3, 3, 3];
        // (rules, folio_lru_refs after N accesses, N at which PG_workingset appears)
        let v6_18 = *DEFAULT_RULES;
        let cases = [
            (v6_18, [0, 1, 2, 3, 4, 4, 4, 4, 4], 5),
            (v6_12(), [0, 0, 1, 2, 3, 4, 4, 4, 4], 2),
        ];
        for (rules, want_refs, ws_at) in cases {
            let mut f = frames(&[FILE]);
            for n in 0..=8usize {
                if n > 0 {
                    lru_gen_inc_refs(&mut f, 0, &rules);
                }
                let refs = folio_lru_refs(&f, 0, &rules);
                let ws = f[0].test(PG_WORKINGSET);
                assert_eq!(refs, want_refs[n], "{rules:?} N={n}");
                assert_eq!(ws, n >= ws_at, "N={n}");
                assert_eq!(refs_tier(refs, ws, &rules), want_tier[n], "N={n}");
            }
        }
        // 6.12's tier of refs 0..=4: order_base_2(refs + 1) = 0, 1, 2, 2, 3.
        let t: Vec<usize> = (0..=4).map(lru_tier_from_refs_v612).collect();
        assert_eq!(t, [0, 1, 2, 2, 3]);
        // An unevictable folio is left alone by both.
        let mut f = frames(&[FILE | PG_UNEVICTABLE]);
        lru_gen_inc_refs(&mut f, 0, &v6_12());
        assert!(!f[0].test(PG_REFERENCED));
    }

    #[test]
    fn refs_flags_before_6_14_hold_pg_workingset() {
        // LRU_REFS_FLAGS: 6.18 PG_referenced (and the counter), 6.12 PG_workingset too.
        for (rules, ws_left) in [(*DEFAULT_RULES, true), (v6_12(), false)] {
            let mut f = frames(&[FILE | PG_REFERENCED | PG_WORKINGSET]);
            f[0].lru_gen = 3 << LRU_REFS_PGOFF;
            clear_refs_flags(&mut f, 0, &rules);
            assert_eq!(byte_refs(f[0].lru_gen), 0);
            assert!(!f[0].test(PG_REFERENCED));
            assert_eq!(f[0].test(PG_WORKINGSET), ws_left);
        }
    }
}
