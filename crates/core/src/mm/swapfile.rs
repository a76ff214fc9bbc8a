//! The swap device: slot allocation and the swap cache.
//!
//! Models mm/swapfile.c (swap_map, get_swap_pages, swap_free) and mm/swap_state.c
//! (add_to_swap_cache, __delete_from_swap_cache keeping a shadow), with swapfile.c's
//! folio_free_swap and folio_swapped; a folio's removal from the swap cache is
//! swap_state.rs. One entry per slot (u64):
//!
//! ```text
//!   0                      free
//!   CACHED | pfn           in use, the folio is in the swap cache
//!   SHADOW | shadow        in use, swapped out; the shadow is workingset_eviction()'s
//!   SWAPPED                in use, swapped out, no shadow (its xarray node was reclaimed)
//! ```
//! The first three are the swap cache's xarray as the kernel had it until 6.17 (a folio,
//! a shadow value or nothing); its leaf nodes (64 slots) are counted as the page cache's
//! are, for the shadow-node shrinker (swap_state.rs).
//! Simplified: one swap device, no clusters or per-CPU slot caches (slots come from a free
//! stack, then never-used slots in order), no swap.max, no readahead (one page per swapin).
//!
//! The swap count (swap_map's count of swap PTEs, beside SWAP_HAS_CACHE) is implicit for
//! a slot one process uses: one while its swap PTE exists, none once the folio is mapped
//! again. A slot of a folio that forked processes share (fork.rs) keeps its count
//! explicitly in `shared`: try_to_unmap adds one per PTE it replaces, fork one per swap
//! PTE it copies, and each swap-in or zap of such a PTE takes one off (swap_free).

use super::mm_types::{PG_DIRTY, PG_SWAPCACHE, PG_WRITEBACK};
use super::{Mm, Pfn, ShadowNode, XaLeaves};

const TAG_SHIFT: u32 = 62;
const CACHED: u64 = 1 << TAG_SHIFT;
const SHADOW: u64 = 2 << TAG_SHIFT;
const SWAPPED: u64 = 3 << TAG_SHIFT;
const VAL_MASK: u64 = (1 << TAG_SHIFT) - 1;

/// What a swap slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapEnt {
    Free,
    Cached(Pfn),
    Shadow(u64),
    /// Swapped out, its shadow gone with the xarray node that held it.
    Swapped,
}

pub struct SwapInfo {
    map: Vec<u64>,
    free_stack: Vec<u32>,
    next_unused: u32,
    nr_used: u64,
    /// True for a synchronous (zram-like) device: IO is CPU time of the caller.
    pub synchronous: bool,
    /// zram: CPU time per page read / written [ns].
    pub zram_read: u64,
    pub zram_write: u64,
    /// The block device (asynchronous swap).
    pub dev: crate::engine::blkdev::BlockDevice,
    /// Swap counts of the slots of shared folios (see the module comment).
    shared: rustc_hash::FxHashMap<u32, u32>,
    /// The swap cache's leaf xarray nodes.
    leaves: XaLeaves,
}

impl SwapInfo {
    pub fn new(
        slots: u64,
        synchronous: bool,
        zram_read: u64,
        zram_write: u64,
        dev: crate::engine::blkdev::BlockDevice,
    ) -> Self {
        SwapInfo {
            map: vec![0; slots as usize],
            free_stack: Vec::new(),
            next_unused: 0,
            nr_used: 0,
            synchronous,
            zram_read,
            zram_write,
            dev,
            shared: Default::default(),
            leaves: XaLeaves::new(slots as usize),
        }
    }

    /// Set slot `slot` to `v`, keeping its leaf node's counts: an entry of the xarray is
    /// a cached folio or a shadow, and a shadow is a value entry.
    fn store(&mut self, slot: u32, v: u64) -> ShadowNode {
        let old = std::mem::replace(&mut self.map[slot as usize], v);
        let kind = |e: u64| {
            let tag = e & !VAL_MASK;
            (tag == CACHED || tag == SHADOW, tag == SHADOW)
        };
        self.leaves.update(slot, kind(old), kind(v))
    }

    /// Is the leaf a node of shadow entries only, with this stamp?
    pub fn leaf_shadow_only(&self, leaf: u32, gen: u32) -> bool {
        self.leaves.shadow_only(leaf, gen)
    }

    /// swap_read_folio(): when the read of one page submitted at `now` completes.
    pub fn read_done(&mut self, now: u64) -> u64 {
        if self.synchronous {
            now + self.zram_read
        } else {
            self.dev.submit_read(now).done_at
        }
    }

    /// The wakeup of a reader at its read's completion, with workload threads on `cpus`
    /// CPUs (BlockDevice::read_wakeup). zram reads synchronously on the faulting CPU: no
    /// interrupt, no wakeup.
    pub fn read_wakeup(&mut self, cpus: u32) -> u64 {
        if self.synchronous {
            0
        } else {
            self.dev.read_wakeup(cpus)
        }
    }

    pub fn nr_slots(&self) -> u64 {
        self.map.len() as u64
    }

    /// get_nr_swap_pages().
    pub fn nr_free(&self) -> u64 {
        self.nr_slots() - self.nr_used
    }

    /// folio_alloc_swap() + add_to_swap_cache(): a free slot for a folio entering the
    /// swap cache, and how its leaf node changed.
    pub fn alloc_slot(&mut self, pfn: Pfn) -> Option<(u32, ShadowNode)> {
        let slot = match self.free_stack.pop() {
            Some(s) => s,
            None if (self.next_unused as usize) < self.map.len() => {
                self.next_unused += 1;
                self.next_unused - 1
            }
            None => return None,
        };
        self.nr_used += 1;
        Some((slot, self.store(slot, CACHED | pfn as u64)))
    }

    /// Prefetch a slot's map entry (no effect on results).
    #[inline]
    pub fn prefetch(&self, slot: u32) {
        if let Some(v) = self.map.get(slot as usize) {
            super::prefetch(v);
        }
    }

    pub fn get(&self, slot: u32) -> SwapEnt {
        let v = self.map[slot as usize];
        match v & !VAL_MASK {
            0 => SwapEnt::Free,
            CACHED => SwapEnt::Cached((v & VAL_MASK) as Pfn),
            SHADOW => SwapEnt::Shadow(v & VAL_MASK),
            _ => SwapEnt::Swapped,
        }
    }

    /// __delete_from_swap_cache() with a shadow: the slot stays in use for the PTE.
    #[must_use]
    pub fn set_shadow(&mut self, slot: u32, shadow: u64) -> ShadowNode {
        self.store(slot, SHADOW | (shadow & VAL_MASK))
    }

    /// shadow_lru_isolate() on the slot's leaf: the shadow is dropped, the slot stays in
    /// use for the PTE.
    #[must_use]
    pub fn clear_shadow(&mut self, slot: u32) -> ShadowNode {
        self.store(slot, SWAPPED)
    }

    /// add_to_swap_cache() on swapin.
    #[must_use]
    pub fn set_cached(&mut self, slot: u32, pfn: Pfn) -> ShadowNode {
        self.store(slot, CACHED | pfn as u64)
    }

    /// swap_free(): the last user of the slot is gone (swap_range_free clears its
    /// shadow, clear_shadow_from_swap_cache).
    #[must_use]
    pub fn free_slot(&mut self, slot: u32) -> ShadowNode {
        debug_assert!(
            self.map[slot as usize] != 0,
            "double free of swap slot {slot}"
        );
        let node = self.store(slot, 0);
        self.free_stack.push(slot);
        self.nr_used -= 1;
        if !self.shared.is_empty() {
            self.shared.remove(&slot);
        }
        node
    }

    /// __swap_count() of a slot whose count is explicit (a shared folio's); None for a
    /// slot one process uses.
    #[inline]
    pub fn swap_count(&self, slot: u32) -> Option<u32> {
        if self.shared.is_empty() {
            return None;
        }
        self.shared.get(&slot).copied()
    }

    /// swap_duplicate(), `n` times: `n` more swap PTEs refer to the slot; `implicit` is
    /// its count until now if it was not explicit yet.
    pub fn swap_duplicate(&mut self, slot: u32, implicit: u32, n: u32) {
        *self.shared.entry(slot).or_insert(implicit) += n;
    }

    /// The slots with an explicit count, and their counts (for the invariant checks).
    pub fn explicit_counts(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.shared.iter().map(|(&s, &c)| (s, c))
    }

    /// swap_free() of one swap PTE of a slot with an explicit count: the count left.
    pub fn swap_put(&mut self, slot: u32) -> u32 {
        let c = self
            .shared
            .get_mut(&slot)
            .expect("swap_put on a slot without an explicit count");
        debug_assert!(*c > 0, "swap count of slot {slot} underflows");
        *c -= 1;
        *c
    }

    /// Slots in use (for invariants).
    pub fn nr_used(&self) -> u64 {
        self.nr_used
    }
}

impl Mm {
    /// folio_free_swap(): drop a mapped folio's swap slot; the folio becomes dirty anon.
    pub fn folio_free_swap(&mut self, pfn: Pfn) {
        let p = self.pages[pfn as usize];
        if !p.test(PG_SWAPCACHE) || p.test(PG_WRITEBACK) || self.folio_swapped(pfn) {
            return;
        }
        self.delete_from_swap_cache(pfn);
        self.pages[pfn as usize].set(PG_DIRTY);
    }

    /// folio_swapped(): do swap PTEs of other processes still refer to the folio's slot?
    /// Only a shared folio's slot can have them while the folio is mapped (see the header).
    pub fn folio_swapped(&self, pfn: Pfn) -> bool {
        let p = &self.pages[pfn as usize];
        p.test(PG_SWAPCACHE)
            && self
                .swap
                .as_ref()
                .and_then(|s| s.swap_count(p.private))
                .is_some_and(|c| c > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swap_of(slots: u64) -> SwapInfo {
        SwapInfo::new(
            slots,
            true,
            1,
            1,
            crate::engine::blkdev::BlockDevice::new(1, 1, 1, 1),
        )
    }

    #[test]
    fn slots_cycle_through_cache_shadow_and_free() {
        let mut s = swap_of(2);
        let (a, _) = s.alloc_slot(7).unwrap();
        let (b, _) = s.alloc_slot(8).unwrap();
        assert_eq!(s.alloc_slot(9), None);
        assert_eq!(s.get(a), SwapEnt::Cached(7));
        let _ = s.set_shadow(a, 12345);
        assert_eq!(s.get(a), SwapEnt::Shadow(12345));
        let _ = s.clear_shadow(a);
        assert_eq!(s.get(a), SwapEnt::Swapped);
        let _ = s.free_slot(b);
        assert_eq!(s.nr_free(), 1);
        assert_eq!(s.alloc_slot(10).map(|(slot, _)| slot), Some(b));
    }

    /// workingset_update_node() on the swap cache's leaves: a leaf joins the shadow-node
    /// list when every entry it holds is a shadow (count == nr_values > 0), and leaves it
    /// when it holds a folio again or nothing; a slot whose shadow was dropped is no entry.
    #[test]
    fn a_swap_leaf_joins_the_list_when_it_holds_shadows_only() {
        let mut s = swap_of(128);
        let slots: Vec<u32> = (0..64).map(|p| s.alloc_slot(p).unwrap().0).collect();
        assert_eq!(slots, (0..64).collect::<Vec<_>>());
        // 63 of 64 folios evicted: a folio is left in the leaf.
        for &slot in &slots[..63] {
            assert_eq!(s.set_shadow(slot, 1), ShadowNode::Unchanged);
        }
        // The last one: all 64 entries are shadows.
        assert_eq!(s.set_shadow(63, 1), ShadowNode::Joined(0, 1));
        assert!(s.leaf_shadow_only(0, 1));
        // A swap-in puts a folio back: the leaf leaves the list, and the old stamp is stale.
        assert_eq!(s.set_cached(5, 99), ShadowNode::Left);
        assert!(!s.leaf_shadow_only(0, 1));
        // Evicted again: it rejoins under a new stamp.
        assert_eq!(s.set_shadow(5, 1), ShadowNode::Joined(0, 2));
        // Dropping shadows one by one keeps it a shadow-only leaf until the last goes.
        for slot in 0..63 {
            assert_eq!(s.clear_shadow(slot), ShadowNode::Unchanged);
        }
        assert_eq!(s.clear_shadow(63), ShadowNode::Left);
        // A slot without a shadow is no entry: freeing it changes nothing.
        assert_eq!(s.free_slot(10), ShadowNode::Unchanged);
        // The next leaf (slots 64..127) is untouched.
        assert_eq!(s.alloc_slot(1).map(|(slot, _)| slot), Some(10));
        let (c, n) = (s.alloc_slot(2).unwrap(), s.alloc_slot(3).unwrap());
        assert_eq!((c.0, n.0), (64, 65));
        assert_eq!(s.set_shadow(64, 1), ShadowNode::Unchanged);
        // Freeing the folio's slot leaves shadows only: the leaf joins.
        assert_eq!(s.free_slot(65), ShadowNode::Joined(1, 1));
    }
}
