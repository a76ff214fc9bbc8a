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
//! Slots come from the cluster allocator ([`SwapClusters`]). Simplified: one swap device,
//! no per-CPU slot caches, no swap.max; readahead only for shmem
//! (swap_cluster_readahead, swap_state.rs), none for anonymous memory (one page per swapin).
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

/// SWAPFILE_CLUSTER: slots per swap cluster.
pub const SWAPFILE_CLUSTER: u32 = 512;

/// The swap cluster allocator of order-0 slots (cluster_alloc_swap_entry(), 6.12's form):
/// each CPU allocates from its own cluster, scanning forward from the slot after the one
/// it took last (percpu_cluster->next); when that cluster has no free slot left, the CPU
/// takes the first free cluster (every slot free) and, once there are none, the first
/// cluster with a free slot (the nonfull list). A freed slot makes its full cluster
/// nonfull, and its last freed slot makes it free again. So the pages one reclaimer swaps
/// out in a row get neighbouring slots, which is what swap_cluster_readahead reads
/// together. Simplified: no per-CPU slot cache in front of it (6.12 hands out slots 64 at
/// a time from the same clusters: the same order for one reclaimer), no frag or discard
/// lists, no large orders; a cluster some CPU is filling is not taken by another.
#[derive(Debug, Clone)]
pub struct SwapClusters {
    /// Free slots per cluster.
    nr_free: Vec<u16>,
    /// Per cluster: 1 on the free list, 2 on the nonfull list, 4 some CPU's current one.
    state: Vec<u8>,
    free: std::collections::VecDeque<u32>,
    nonfull: std::collections::VecDeque<u32>,
    /// Per CPU, the slot to scan from next (u32::MAX: no cluster).
    next: Vec<u32>,
    slots: u32,
}

const ON_FREE: u8 = 1;
const ON_NONFULL: u8 = 2;
const CURRENT: u8 = 4;

impl SwapClusters {
    pub fn new(slots: u64) -> Self {
        let n = (slots as u32).div_ceil(SWAPFILE_CLUSTER);
        let size = |c: u32| (slots as u32 - c * SWAPFILE_CLUSTER).min(SWAPFILE_CLUSTER) as u16;
        SwapClusters {
            nr_free: (0..n).map(size).collect(),
            state: vec![ON_FREE; n as usize],
            free: (0..n).collect(),
            nonfull: Default::default(),
            next: Vec::new(),
            slots: slots as u32,
        }
    }

    fn size(&self, c: u32) -> u16 {
        (self.slots - c * SWAPFILE_CLUSTER).min(SWAPFILE_CLUSTER) as u16
    }

    /// A free slot for `cpu` (`is_free` says which slots are), None when there is none.
    pub fn alloc(&mut self, cpu: u32, is_free: impl Fn(u32) -> bool) -> Option<u32> {
        let cpu = cpu as usize;
        if self.next.len() <= cpu {
            self.next.resize(cpu + 1, u32::MAX);
        }
        loop {
            let from = self.next[cpu];
            if from != u32::MAX {
                let c = from / SWAPFILE_CLUSTER;
                let end = ((c + 1) * SWAPFILE_CLUSTER).min(self.slots);
                if self.nr_free[c as usize] > 0 {
                    if let Some(slot) = (from..end).find(|&s| is_free(s)) {
                        self.take(slot);
                        self.next[cpu] = if slot + 1 < end { slot + 1 } else { u32::MAX };
                        if self.next[cpu] == u32::MAX {
                            self.leave(c);
                        }
                        return Some(slot);
                    }
                }
                // Nothing left after `from`: the CPU leaves the cluster.
                self.next[cpu] = u32::MAX;
                self.leave(c);
            }
            let c = self.pop_free().or_else(|| self.pop_nonfull())?;
            self.state[c as usize] |= CURRENT;
            self.next[cpu] = c * SWAPFILE_CLUSTER;
        }
    }

    /// A CPU is done with cluster `c`: with a free slot left, it is nonfull.
    fn leave(&mut self, c: u32) {
        self.state[c as usize] &= !CURRENT;
        if self.nr_free[c as usize] > 0 {
            self.list_nonfull(c);
        }
    }

    fn take(&mut self, slot: u32) {
        self.nr_free[(slot / SWAPFILE_CLUSTER) as usize] -= 1;
    }

    /// swap_range_free() of one slot: its cluster gets a free slot back.
    pub fn free(&mut self, slot: u32) {
        let c = slot / SWAPFILE_CLUSTER;
        let n = &mut self.nr_free[c as usize];
        *n += 1;
        let n = *n;
        if self.state[c as usize] & CURRENT != 0 {
            return;
        }
        if n == self.size(c) {
            if self.state[c as usize] & ON_FREE == 0 {
                self.state[c as usize] |= ON_FREE;
                self.free.push_back(c);
            }
        } else {
            self.list_nonfull(c);
        }
    }

    fn list_nonfull(&mut self, c: u32) {
        if self.state[c as usize] & ON_NONFULL == 0 {
            self.state[c as usize] |= ON_NONFULL;
            self.nonfull.push_back(c);
        }
    }

    /// The first free cluster no CPU holds (entries made stale by allocations are dropped).
    fn pop_free(&mut self) -> Option<u32> {
        while let Some(c) = self.free.pop_front() {
            self.state[c as usize] &= !ON_FREE;
            if self.state[c as usize] & CURRENT == 0 && self.nr_free[c as usize] == self.size(c) {
                return Some(c);
            }
        }
        None
    }

    /// The first cluster with a free slot no CPU holds.
    fn pop_nonfull(&mut self) -> Option<u32> {
        while let Some(c) = self.nonfull.pop_front() {
            self.state[c as usize] &= !ON_NONFULL;
            if self.state[c as usize] & CURRENT == 0 && self.nr_free[c as usize] > 0 {
                return Some(c);
            }
        }
        None
    }
}

pub struct SwapInfo {
    map: Vec<u64>,
    /// Which free slot a CPU gets next (the cluster allocator).
    clusters: SwapClusters,
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
    /// The block device reports itself rotational: swap readahead goes by slots
    /// (swap_cluster_readahead), not by the faulting VMA (swap_use_vma_readahead).
    pub rotational: bool,
    /// Swap readahead's state (swap_state.rs): the folios with PG_readahead, the hits,
    /// and where cluster readahead runs, each slot's PTE.
    pub ra: super::swap_state::SwapReadahead,
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
            map: crate::mm::mm_types::zeroed_table(slots as usize),
            clusters: SwapClusters::new(slots),
            nr_used: 0,
            synchronous,
            zram_read,
            zram_write,
            dev,
            shared: Default::default(),
            leaves: XaLeaves::new(slots as usize),
            rotational: false,
            ra: super::swap_state::SwapReadahead::default(),
        }
    }

    /// Set slot `slot` to `v`, keeping its leaf node's counts: an entry of the xarray is
    /// a cached folio or a shadow, and a shadow is a value entry.
    fn store(&mut self, slot: u32, v: u64) -> ShadowNode {
        let old = std::mem::replace(&mut self.map[slot as usize], v);
        // A folio leaving the slot takes its PG_readahead with it.
        self.ra.forget(slot);
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
    /// swap cache by reclaim on `cpu`, and how its leaf node changed.
    pub fn alloc_slot(&mut self, pfn: Pfn, cpu: u32) -> Option<(u32, ShadowNode)> {
        let map = &self.map;
        let slot = self.clusters.alloc(cpu, |s| map[s as usize] == 0)?;
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
        self.clusters.free(slot);
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
        let (a, _) = s.alloc_slot(7, 0).unwrap();
        let (b, _) = s.alloc_slot(8, 0).unwrap();
        assert_eq!(s.alloc_slot(9, 0), None);
        assert_eq!(s.get(a), SwapEnt::Cached(7));
        let _ = s.set_shadow(a, 12345);
        assert_eq!(s.get(a), SwapEnt::Shadow(12345));
        let _ = s.clear_shadow(a);
        assert_eq!(s.get(a), SwapEnt::Swapped);
        let _ = s.free_slot(b);
        assert_eq!(s.nr_free(), 1);
        assert_eq!(s.alloc_slot(10, 0).map(|(slot, _)| slot), Some(b));
    }

    /// workingset_update_node() on the swap cache's leaves: a leaf joins the shadow-node
    /// list when every entry it holds is a shadow (count == nr_values > 0), and leaves it
    /// when it holds a folio again or nothing; a slot whose shadow was dropped is no entry.
    #[test]
    fn a_swap_leaf_joins_the_list_when_it_holds_shadows_only() {
        let mut s = swap_of(128);
        let slots: Vec<u32> = (0..64).map(|p| s.alloc_slot(p, 0).unwrap().0).collect();
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
        // The allocator goes on forward in its cluster, to the next leaf (slots 64..127).
        let (c, n) = (s.alloc_slot(2, 0).unwrap(), s.alloc_slot(3, 0).unwrap());
        assert_eq!((c.0, n.0), (64, 65));
        assert_eq!(s.set_shadow(64, 1), ShadowNode::Unchanged);
        // Freeing the folio's slot leaves shadows only: the leaf joins.
        assert_eq!(s.free_slot(65), ShadowNode::Joined(1, 1));
    }

    /// cluster_alloc_swap_entry(): a CPU fills its own cluster forward; a new one comes
    /// from the free clusters first, then from the nonfull ones.
    #[test]
    fn each_cpu_fills_its_own_cluster_then_takes_a_free_one_before_a_nonfull_one() {
        let c = SWAPFILE_CLUSTER;
        let mut s = swap_of(3 * c as u64);
        let a = |s: &mut SwapInfo, cpu| s.alloc_slot(1, cpu).unwrap().0;
        assert_eq!(
            [a(&mut s, 0), a(&mut s, 0), a(&mut s, 1), a(&mut s, 0)],
            [0, 1, c, 2]
        );
        // A slot freed behind CPU 0's position is not reused while the cluster is its own.
        let _ = s.free_slot(1);
        assert_eq!(a(&mut s, 0), 3);
        // CPU 0 fills cluster 0 (slot 1 comes when its scan has passed the end: no).
        for want in 4..c {
            assert_eq!(a(&mut s, 0), want);
        }
        // Cluster 0 has slot 1 free: nonfull. CPU 0 takes the free cluster 2 first.
        assert_eq!(a(&mut s, 0), 2 * c);
        // CPU 1 fills cluster 1, then there is no free cluster left: cluster 0's slot 1.
        for want in c + 1..2 * c {
            assert_eq!(a(&mut s, 1), want);
        }
        assert_eq!(a(&mut s, 1), 1);
        // Every slot of cluster 1 freed: it is a free cluster again, and comes before
        // cluster 2's remaining slots for a CPU that has no cluster.
        for slot in c..2 * c {
            let _ = s.free_slot(slot);
        }
        assert_eq!(a(&mut s, 1), c);
        assert_eq!(a(&mut s, 0), 2 * c + 1);
        // Cluster 0 full, slot c of cluster 1, slots 2c and 2c + 1 of cluster 2.
        assert_eq!(s.nr_used(), c as u64 + 3);
    }
}
