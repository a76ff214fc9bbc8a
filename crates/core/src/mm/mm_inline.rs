//! The LRU list helpers of include/linux/mm_inline.h: which list a folio belongs on
//! (folio_is_file_lru, folio_lru_list), adding it to and taking it off its lruvec's list
//! (lruvec_add_folio, lruvec_add_folio_tail, lruvec_del_folio), and the size accounting
//! that goes with it (update_lru_size).
//!
//! Two versions of the list operations live here, on purpose:
//!
//! - the methods of [`Mm`] (`Mm::lruvec_add_folio`, `Mm::lruvec_add_folio_tail`,
//!   `Mm::lruvec_del_folio`) are what the kernel's helpers do for their callers: MGLRU
//!   takes the folio first (lru_gen_add_folio / lru_gen_del_folio, lru_gen/folio.rs), else
//!   the folio is linked on its classic list; then the cache lines the operation wrote are
//!   recorded for the lock holder (lru_lines.rs) and the memcg side of update_lru_size is
//!   queued (StatPending);
//! - the free functions `lruvec_add_folio_untracked`, `lruvec_add_folio_tail_untracked`
//!   and `lruvec_del_folio_untracked` are the bare list step: link or unlink on the classic
//!   list and count the lruvec's exact sizes, nothing else. The methods above call them,
//!   and so does isolation (isolate_lru_folios putting back a folio it cannot take, and
//!   MGLRU's eviction for the same), whose writes to the lists and counters are not
//!   tracked as cache lines or memcg statistics.
//!
//! The difference is a simplification of the contention model, not of the kernel (which has
//! one lruvec_add_folio): isolation's list writes would cost the same lines. Unifying the two
//! belongs to the contention work, which must then recalibrate what the lines cost; until
//! then the split keeps the simulator's output unchanged.
//!
//! Simplified: MGLRU folios count on the inactive lists in update_lru_size (see there);
//! lru_gen's own size bookkeeping (lru_gen_update_size) is lru_gen/folio.rs.

use super::mm_types::{Frames, LruLink, Page, PG_ACTIVE, PG_LRU, PG_SWAPBACKED, PG_UNEVICTABLE};
use super::mmzone::{Lruvec, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE, LRU_UNEVICTABLE};
use super::{LruvecId, Mm, Pfn, NIL};

impl Page {
    /// folio_is_file_lru(): file LRU (not swap-backed).
    #[inline]
    pub fn is_file_lru(&self) -> bool {
        self.flags & PG_SWAPBACKED == 0
    }
    /// folio_lru_list(): which list the folio belongs on.
    #[inline]
    pub fn lru_list(&self) -> usize {
        if self.test(PG_UNEVICTABLE) {
            return LRU_UNEVICTABLE;
        }
        let base = if self.is_file_lru() {
            LRU_INACTIVE_FILE
        } else {
            LRU_INACTIVE_ANON
        };
        base + self.test(PG_ACTIVE) as usize
    }
}

impl Mm {
    /// lruvec_add_folio() on the folio's own lruvec: MGLRU places it in a generation
    /// (lru_gen_add_folio); the classic LRU links it at the head of the list its flags
    /// select.
    pub fn lruvec_add_folio(&mut self, pfn: Pfn) {
        let lv = self.folio_lruvec(pfn);
        let Mm {
            pages,
            lruvecs,
            rules,
            ..
        } = self;
        let l = &mut lruvecs[lv as usize];
        let gen =
            l.lrugen.enabled && super::lru_gen::lru_gen_add_folio(pages, l, pfn, false, rules);
        if !gen {
            lruvec_add_folio_untracked(pages, l, pfn);
        }
        self.write_list_lines(lv, pfn, gen);
        self.update_lru_size(lv, pfn, 1);
    }

    /// lruvec_add_folio_tail(): the next folio reclaim takes (MGLRU: the tail of the
    /// oldest generation, lru_gen_add_folio with `reclaiming`).
    pub fn lruvec_add_folio_tail(&mut self, pfn: Pfn) {
        let lv = self.folio_lruvec(pfn);
        let Mm {
            pages,
            lruvecs,
            rules,
            ..
        } = self;
        let l = &mut lruvecs[lv as usize];
        let gen = l.lrugen.enabled && super::lru_gen::lru_gen_add_folio(pages, l, pfn, true, rules);
        if !gen {
            lruvec_add_folio_tail_untracked(pages, l, pfn);
        }
        self.write_list_lines(lv, pfn, gen);
        self.update_lru_size(lv, pfn, 1);
    }

    /// lruvec_del_folio() from the folio's own lruvec (MGLRU: lru_gen_del_folio, which
    /// leaves a folio of an active generation with PG_active). PG_lru is the caller's.
    pub fn lruvec_del_folio(&mut self, pfn: Pfn) {
        let lv = self.folio_lruvec(pfn);
        // The lines are those of the folio's neighbours before it goes.
        let gen = super::lru_gen::folio::folio_lru_gen(&self.pages, pfn).is_some();
        self.write_list_lines(lv, pfn, gen);
        let Mm { pages, lruvecs, .. } = self;
        let l = &mut lruvecs[lv as usize];
        if !super::lru_gen::lru_gen_del_folio(pages, l, pfn, false) {
            lruvec_del_folio_untracked(pages, l, pfn);
        }
        self.update_lru_size(lv, pfn, -1);
    }

    /// The memcg side of update_lru_size() (__mod_lruvec_state of NR_LRU_BASE + lru): its
    /// cost is queued for the lock holder (StatPending). Simplified: MGLRU folios count on
    /// the inactive lists (the kernel's lru_gen_update_size picks the list by generation);
    /// list operations outside an lru_lock (a fixture's placement) cost nothing.
    #[inline(always)]
    fn update_lru_size(&mut self, lv: LruvecId, pfn: Pfn, delta: i64) {
        if !self.lines.armed() {
            return;
        }
        let lru = self.pages[pfn as usize].lru_list();
        if lru == LRU_UNEVICTABLE {
            return;
        }
        // The folio's own lruvec: its memcg and node are the folio's.
        let l = &self.lruvecs[lv as usize];
        // lru_gen_del_folio leaves PG_active on a folio of an active generation: under
        // MGLRU the add and the delete must count on the same (inactive) list.
        let lru = if l.lrugen.enabled { lru & !1 } else { lru };
        let (memcg, nid) = (l.memcg, l.node);
        self.stat_pending
            .push_held(memcg, nid, super::memcontrol::StatKind::lru(lru), delta);
    }

    /// The cache lines a list operation on `lv` wrote: list_add/__list_del_entry write the
    /// folio's struct page and its neighbours' links, update_lru_size the lruvec's counters
    /// (lru_lines.rs). The neighbours are those of the folio on its list, a generation list
    /// with `gen` (the folio added there, or still there before it is deleted), else a
    /// classic one. Simplified: the lruvec's heads and counters are one line; MGLRU's
    /// in-place moves between generations do not come through here.
    #[inline(always)]
    fn write_list_lines(&mut self, lv: LruvecId, pfn: Pfn, gen: bool) {
        if !self.lines.armed() {
            return;
        }
        let (prev, next) = if gen {
            let g = &self.lruvecs[lv as usize].lrugen;
            super::lru_gen::folio::gen_list_neighbours(&self.pages, g, pfn)
        } else {
            let link = self.pages.links[pfn as usize];
            (link.prev, link.next)
        };
        let Mm {
            pages,
            lruvecs,
            lines,
            ..
        } = self;
        for f in [pfn, prev, next] {
            if f != NIL {
                lines.write(&mut pages.line_cpu[f as usize]);
            }
        }
        lines.write(&mut lruvecs[lv as usize].line_cpu);
    }
}

/// lruvec_add_folio()'s list step, untracked (see the file's header): link at the head (young end) of the folio's list.
#[inline(always)]
pub fn lruvec_add_folio_untracked(pages: &mut Frames, lv: &mut Lruvec, pfn: Pfn) {
    let lru = {
        let p = &mut pages[pfn as usize];
        p.set(PG_LRU);
        p.lru_list()
    };
    let old = lv.lists[lru].head;
    pages.links[pfn as usize] = LruLink {
        prev: NIL,
        next: old,
    };
    if old != NIL {
        pages.links[old as usize].prev = pfn;
    } else {
        lv.lists[lru].tail = pfn;
    }
    lv.lists[lru].head = pfn;
    lv.mod_lru_size(lru, 1);
}

/// lruvec_add_folio_tail()'s list step, untracked: link at the tail (the next to be reclaimed).
pub fn lruvec_add_folio_tail_untracked(pages: &mut Frames, lv: &mut Lruvec, pfn: Pfn) {
    let lru = {
        let p = &mut pages[pfn as usize];
        p.set(PG_LRU);
        p.lru_list()
    };
    let old = lv.lists[lru].tail;
    pages.links[pfn as usize] = LruLink {
        prev: old,
        next: NIL,
    };
    if old != NIL {
        pages.links[old as usize].next = pfn;
    } else {
        lv.lists[lru].head = pfn;
    }
    lv.lists[lru].tail = pfn;
    lv.mod_lru_size(lru, 1);
}

/// lruvec_del_folio()'s list step, untracked: unlink from its list (the caller clears PG_lru when isolating).
#[inline(always)]
pub fn lruvec_del_folio_untracked(pages: &mut Frames, lv: &mut Lruvec, pfn: Pfn) {
    let lru = pages[pfn as usize].lru_list();
    let LruLink { prev, next } = pages.links[pfn as usize];
    if prev != NIL {
        pages.links[prev as usize].next = next;
    } else {
        lv.lists[lru].head = next;
    }
    if next != NIL {
        pages.links[next as usize].prev = prev;
    } else {
        lv.lists[lru].tail = prev;
    }
    pages.links[pfn as usize] = LruLink {
        prev: NIL,
        next: NIL,
    };
    lv.mod_lru_size(lru, -1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::mmzone::LRU_INACTIVE_FILE;
    use crate::mm::vmstat::NodeStat;

    #[test]
    fn list_ops_keep_order_and_counts() {
        let mut pages = Frames::zeroed(8);
        let mut lv = Lruvec::new(0, 0, 0, 0);
        for pfn in 0..4 {
            lruvec_add_folio_untracked(&mut pages, &mut lv, pfn);
        }
        lruvec_add_folio_tail_untracked(&mut pages, &mut lv, 4);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 5);
        assert_eq!(lv.lists[LRU_INACTIVE_FILE].head, 3);
        assert_eq!(lv.lists[LRU_INACTIVE_FILE].tail, 4);
        lruvec_del_folio_untracked(&mut pages, &mut lv, 4);
        assert_eq!(lv.lists[LRU_INACTIVE_FILE].tail, 0);
        lruvec_del_folio_untracked(&mut pages, &mut lv, 2);
        let mut walk = vec![];
        let mut p = lv.lists[LRU_INACTIVE_FILE].head;
        while p != NIL {
            walk.push(p);
            p = pages.links[p as usize].next;
        }
        assert_eq!(walk, vec![3, 1, 0]);
        assert_eq!(lv.stat[NodeStat::NrInactiveFile as usize], 3);
    }
}
