//! Nodes (pglist_data), their one zone, and lruvecs with their LRU lists.
//!
//! Models include/linux/mmzone.h. Simplified: each node has exactly one zone (ZONE_NORMAL),
//! so zone and node free counts coincide, `reclaim_idx` is always that zone and
//! lowmem_reserve is 0. The classic LRU lists are intrusive doubly linked lists threaded
//! through the frame table's link array (`Frames::links`); the head is the young end and
//! reclaim takes from the tail. The operations on them (include/linux/mm_inline.h) are
//! mm_inline.rs. MGLRU's generation lists are arrays (lru_gen/list.rs).

use super::vmstat::{NodeStat, LRU_STAT, NR_NODE_STAT};
use super::{LruvecId, MemcgId, Pfn, NIL};
use crate::engine::{LockId, TaskId};

pub const LRU_INACTIVE_ANON: usize = 0;
pub const LRU_ACTIVE_ANON: usize = 1;
pub const LRU_INACTIVE_FILE: usize = 2;
pub const LRU_ACTIVE_FILE: usize = 3;
pub const LRU_UNEVICTABLE: usize = 4;
pub const NR_LRU_LISTS: usize = 5;
/// The evictable lists in the order shrink_lruvec walks them (for_each_evictable_lru).
pub const EVICTABLE_LRUS: [usize; 4] = [
    LRU_INACTIVE_ANON,
    LRU_ACTIVE_ANON,
    LRU_INACTIVE_FILE,
    LRU_ACTIVE_FILE,
];

/// is_file_lru(): is this one of the file lists?
#[inline]
pub fn is_file_lru(lru: usize) -> bool {
    lru == LRU_INACTIVE_FILE || lru == LRU_ACTIVE_FILE
}
/// is_active_lru(): is this one of the active lists?
#[inline]
pub fn is_active_lru(lru: usize) -> bool {
    lru == LRU_ACTIVE_ANON || lru == LRU_ACTIVE_FILE
}

#[derive(Debug, Clone, Copy)]
pub struct ListHead {
    pub head: Pfn,
    pub tail: Pfn,
}

impl Default for ListHead {
    fn default() -> Self {
        ListHead {
            head: NIL,
            tail: NIL,
        }
    }
}

/// struct lruvec: the LRU lists of one (memcg, node) pair plus reclaim's per-lruvec state.
pub struct Lruvec {
    pub memcg: MemcgId,
    pub node: u32,
    pub lists: [ListHead; NR_LRU_LISTS],
    /// Exact local list sizes [pages] (mem_cgroup_get_zone_lru_size; maintained under lru_lock).
    pub nr: [u64; NR_LRU_LISTS],
    /// lru_lock, taken with interrupts disabled in the kernel.
    pub lock: LockId,
    /// The CPU that last wrote the list heads and size counters, plus one (lru_lines.rs).
    pub line_cpu: u8,
    /// Decaying reclaim cost of anon and file (lru_note_cost), [pages, IO weighted by 32].
    pub anon_cost: u64,
    pub file_cost: u64,
    /// The eviction/activation clock of workingset detection (atomic in the kernel).
    pub nonresident_age: u64,
    /// The parent memcg's lruvec on the same node (parent_lruvec), None for the root's.
    pub parent: Option<LruvecId>,
    /// WORKINGSET_ACTIVATE_{ANON,FILE} snapshot taken at the end of reclaim (snapshot_refaults).
    pub refaults: [u64; 2],
    /// Seed 000 (vmstat_scan_cost): the per-lruvec cost_lock, and the flushed
    /// [pageout, restore, rotate] counters of [anon, file] at the last fold.
    pub cost_lock: LockId,
    pub cost_seen: [[u64; 3]; 2],
    /// Local node_stat_item counters of this lruvec (exact).
    pub stat: [i64; NR_NODE_STAT],
    /// memcg_rstat_updated()'s count for this lruvec's items since its memcg was last
    /// flushed: the absolute value of every update of a memcg-accounted item (the LRU
    /// sizes, NR_FILE_PAGES, the mapped and swap-cache counts, the workingset events; not
    /// NR_ISOLATED_*, a node-only item), toward the memcg's flush threshold
    /// (`Mm::memcg_stats_need_flush`).
    pub rstat_updates: u64,
    /// Hierarchical counters (this memcg and its descendants on this node) as of the last
    /// rstat flush: what lruvec_page_state() returns.
    pub stat_flushed: [i64; NR_NODE_STAT],
    /// This lruvec's own LRU list sizes (not its descendants') as of the last rstat flush:
    /// what lruvec_page_state_local() returns for NR_LRU_BASE + lru.
    pub lru_flushed_local: [i64; NR_LRU_LISTS],
    /// Reclaim's read-ahead along the evictable lists (see `Mm::lru_prefetch_step`), by
    /// list: the folio last prefetched, and how many folios it is ahead of the tail. No
    /// behavior.
    pub prefetch_cursor: [Pfn; EVICTABLE_LRUS.len()],
    pub prefetch_ahead: [u32; EVICTABLE_LRUS.len()],
    /// MGLRU generations of this lruvec (struct lru_gen_folio); off (`enabled` false)
    /// unless the run uses lru_gen.
    pub lrugen: crate::mm::lru_gen::LruGenFolio,
    /// Shared lines of the lruvec statistics of the batched memcg_stats schemes (seed
    /// 004), per line group of counter items: [local, hierarchical] atomics
    /// (lruvec_stat_local and lruvec_stat of struct mem_cgroup_per_node).
    pub stat_lines: [[crate::engine::CacheLine; 2]; crate::mm::memcontrol::NR_STAT_LINES],
}

/// How far ahead of the tail the lists are prefetched: three reclaim chunks.
pub const LRU_PREFETCH_AHEAD: u32 = 96;

impl Lruvec {
    pub fn new(memcg: MemcgId, node: u32, lock: LockId, cost_lock: LockId) -> Self {
        Lruvec {
            memcg,
            node,
            lists: [ListHead::default(); NR_LRU_LISTS],
            nr: [0; NR_LRU_LISTS],
            lock,
            line_cpu: 0,
            anon_cost: 0,
            file_cost: 0,
            nonresident_age: 0,
            parent: None,
            refaults: [0; 2],
            cost_lock,
            cost_seen: [[0; 3]; 2],
            stat: [0; NR_NODE_STAT],
            rstat_updates: 0,
            stat_flushed: [0; NR_NODE_STAT],
            lru_flushed_local: [0; NR_LRU_LISTS],
            prefetch_cursor: [NIL; EVICTABLE_LRUS.len()],
            prefetch_ahead: [0; EVICTABLE_LRUS.len()],
            lrugen: crate::mm::lru_gen::LruGenFolio::new(),
            stat_lines: [[crate::engine::CacheLine::homed(node); 2];
                crate::mm::memcontrol::NR_STAT_LINES],
        }
    }

    /// lruvec_page_state(): the hierarchical, last-flushed value.
    #[inline]
    pub fn page_state(&self, item: NodeStat) -> u64 {
        self.stat_flushed[item as usize].max(0) as u64
    }

    /// __mod_lruvec_state(): `delta` on the lruvec's local counter, and on its memcg's
    /// pending update count (memcg_rstat_updated).
    #[inline]
    pub fn mod_state(&mut self, item: NodeStat, delta: i64) {
        self.stat[item as usize] += delta;
        self.rstat_updates += delta.unsigned_abs();
    }

    /// __mod_node_page_state(): `delta` on an item the kernel keeps per node only
    /// (NR_ISOLATED_*, and the swap cache's share of NR_FILE_PAGES), kept here per lruvec
    /// for the node's sum; no memcg update (it counts toward no flush threshold, and the
    /// report takes the swap cache back out of a memcg's `file`).
    #[inline]
    pub fn mod_node_state(&mut self, item: NodeStat, delta: i64) {
        self.stat[item as usize] += delta;
    }

    /// __update_lru_size()'s counters: the list's size and its NR_{IN,}ACTIVE_* item, a
    /// memcg-accounted update (__mod_lruvec_state).
    #[inline]
    pub fn mod_lru_size(&mut self, lru: usize, delta: i64) {
        self.nr[lru] = self.nr[lru].wrapping_add_signed(delta);
        self.mod_state(LRU_STAT[lru], delta);
    }

    /// lruvec_lru_size(): exact local size of one list (all zones, as there is one).
    #[inline]
    pub fn lru_size(&self, lru: usize) -> u64 {
        self.nr[lru]
    }
}

/// Watermark indices (enum zone_watermarks).
pub const WMARK_MIN: usize = 0;
pub const WMARK_LOW: usize = 1;
pub const WMARK_HIGH: usize = 2;

/// struct pglist_data with its single zone folded in.
pub struct PgData {
    pub id: u32,
    /// First pfn of this node.
    pub base: Pfn,
    /// Managed pages of the node's zone.
    pub managed: u64,
    /// NR_FREE_PAGES.
    pub free: u64,
    /// _watermark[MIN, LOW, HIGH] [pages].
    pub wmark: [u64; 3],
    /// Frames freed and reusable, a stack linked through the free frames' own page
    /// offset (`Page::index`, unused while free; the buddy free lists link through
    /// page->buddy_list): its top, NIL when empty.
    /// No memory beyond the frame table, however many frames are freed.
    pub free_head: Pfn,
    /// Frames never used yet start here (the zeroed tail of the node's range).
    pub next_unused: Pfn,
    /// kswapd's task, and the queue it sleeps on (kswapd_wait).
    pub kswapd: TaskId,
    pub kswapd_wait: std::rc::Rc<crate::sched::WaitQueue>,
    /// Direct reclaimers throttled until kswapd restores the pfmemalloc reserve
    /// (pfmemalloc_wait).
    pub pfmemalloc_wait: std::rc::Rc<crate::sched::WaitQueue>,
    /// Reclaimers throttled by too_many_isolated (reclaim_wait[VMSCAN_THROTTLE_ISOLATED]).
    pub reclaim_wait_isolated: std::rc::Rc<crate::sched::WaitQueue>,
    /// MGLRU's memcg LRU of this node (pgdat->memcg_lru) and its spinlock.
    pub memcg_lru: crate::mm::lru_gen::LruGenMemcg,
    pub memcg_lru_lock: LockId,
    /// kswapd_failures: balance_pgdat runs that reclaimed nothing (atomic in the kernel).
    pub kswapd_failures: u32,
}

impl PgData {
    /// zone_watermark_ok() for order 0 with one zone: free pages must exceed the mark.
    #[inline]
    pub fn watermark_ok(&self, mark: usize) -> bool {
        self.free > self.wmark[mark]
    }
}

/// Integer square root (int_sqrt).
pub fn int_sqrt(x: u64) -> u64 {
    if x < 2 {
        return x;
    }
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

/// The default vm.min_free_kbytes: calculate_min_free_kbytes() in mm/page_alloc.c,
/// clamp(int_sqrt(lowmem_kbytes * 16), 128, 262144).
pub fn default_min_free_kbytes(lowmem_pages: u64) -> u64 {
    let lowmem_kbytes = lowmem_pages * 4;
    int_sqrt(lowmem_kbytes * 16).clamp(128, 262_144)
}

/// Watermarks of one zone: __setup_per_zone_wmarks() in mm/page_alloc.c.
///
/// pages_min = min_free_kbytes / 4 is split among zones by managed size; min is the zone's
/// share; the gap to low and to high is max(min / 4, managed * watermark_scale_factor / 10000).
/// Simplified: no highmem/movable zones, no watermark_boost.
pub fn setup_zone_wmarks(
    managed: u64,
    lowmem_pages: u64,
    min_free_kbytes: u64,
    wsf: u64,
) -> [u64; 3] {
    let pages_min = min_free_kbytes >> 2;
    let tmp = pages_min * managed / lowmem_pages.max(1);
    let min = tmp;
    let delta = (tmp >> 2).max(managed * wsf / 10_000);
    [min, min + delta, min + 2 * delta]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_match_kernel_arithmetic() {
        // One 64 GiB node: lowmem 16777216 pages = 67108864 KiB; sqrt(16 * that) = 32768 KiB.
        let pages = 64u64 << 18;
        let mfk = default_min_free_kbytes(pages);
        assert_eq!(mfk, 32768);
        let w = setup_zone_wmarks(pages, pages, mfk, 10);
        // min = 8192 pages; delta = max(2048, 16777216 * 10 / 10000 = 16777) = 16777.
        assert_eq!(w, [8192, 8192 + 16777, 8192 + 2 * 16777]);
        // Two nodes share pages_min by size.
        let w2 = setup_zone_wmarks(pages, 2 * pages, default_min_free_kbytes(2 * pages), 10);
        assert_eq!(w2[WMARK_MIN], (default_min_free_kbytes(2 * pages) / 4) / 2);
        // Clamped at both ends.
        assert_eq!(default_min_free_kbytes(1024), 256);
        assert_eq!(default_min_free_kbytes(1 << 40 >> 12 << 8), 262_144);
        assert_eq!(default_min_free_kbytes(16), 128);
    }

    #[test]
    fn int_sqrt_floors() {
        for x in [0u64, 1, 2, 3, 4, 15, 16, 17, 1 << 40, (1 << 40) - 1] {
            let r = int_sqrt(x);
            assert!(r * r <= x && (r + 1) * (r + 1) > x, "{x}");
        }
    }
}
