//! The swap cache seen from a folio: taking a folio out of it.
//!
//! Models mm/swap_state.c's delete_from_swap_cache() together with the put_swap_folio()
//! that follows it (the slot goes back to the device, swapfile.rs) and the memcg's swap
//! uncharge: the one place a folio leaves the swap cache. Its callers are the teardown of a
//! folio whose owner goes away (zap_pte_range, reclaim of a folio nobody maps any more) and
//! folio_free_swap() (swapfile.rs), which also keeps the folio, now dirty anon. The slot
//! table itself (add_to_swap_cache, the shadow __delete_from_swap_cache leaves in the slot)
//! is `SwapInfo` in swapfile.rs; every store to it goes through here, for the shadow nodes.
//!
//! Shadow nodes. Until 6.17 the swap cache is an xarray per 64M of swap, and a leaf node
//! whose entries are all shadows stays allocated for them, as the page cache's do
//! (workingset.rs). From 6.3 ("swap_state: update shadow_nodes for anonymous page") its
//! stores carry workingset_update_node as their update callback, so such a leaf joins the
//! shadow-node list and the shadow shrinker can free it: the slot stays in use for its swap
//! PTE, but a later swap-in finds no shadow and is no refault (pswpin counts it,
//! workingset_refault_anon does not). 6.1 has no callback (its swap shadows live until
//! their slot is freed) and 6.18's swap table keeps shadows outside any xarray: the rule
//! `swap_shadow_nodes_shrinkable` says which. The swap cache's xarrays are not
//! XA_FLAGS_ACCOUNT, so their nodes are no memcg's: they are on the list of kmemcg id -1,
//! the one the root's shrink_slab counts (count_shadow_nodes against the root's own LRU
//! pages). Simplified: the swap cache is not an address space of its own (the slot holds
//! the folio's pfn), so there is no lock to take; the nodes above the leaves are not
//! counted.

use super::mm_types::PG_SWAPCACHE;
use super::swapfile::SwapInfo;
use super::vmstat::NodeStat;
use super::{Mm, Pfn, ShadowNode};

/// The file number under which the shadow-node list holds the swap cache's leaves.
pub const SWAP_CACHE: u32 = u32::MAX;

impl Mm {
    /// workingset_update_node() for a store to the swap cache: with
    /// `swap_shadow_nodes_shrinkable` a leaf of shadows only joins the root's shadow-node
    /// list and one holding a folio again (or nothing) leaves it; without, the swap
    /// cache's leaves are never on it.
    fn swap_update_node(&mut self, node: ShadowNode) {
        if !self.rules.swap_shadow_nodes_shrinkable {
            return;
        }
        let root = &mut self.memcgs[0];
        match node {
            ShadowNode::Joined(leaf, gen) => {
                root.shadow_nodes.push_back((SWAP_CACHE, leaf, gen));
                root.nr_shadow_nodes += 1;
            }
            ShadowNode::Left => root.nr_shadow_nodes -= 1,
            ShadowNode::Unchanged => {}
        }
    }

    /// folio_alloc_swap() + add_to_swap_cache() in reclaim: a slot for `pfn`, None when
    /// swap is full or absent.
    pub fn add_to_swap_cache(&mut self, pfn: Pfn) -> Option<u32> {
        let (slot, node) = self.swap.as_mut()?.alloc_slot(pfn)?;
        self.swap_update_node(node);
        Some(slot)
    }

    /// One store to the slot table of a swap that exists (a swap entry or a swap-cache
    /// folio implies it), then its leaf's place on the shadow-node list.
    fn swap_cache_store(&mut self, store: impl FnOnce(&mut SwapInfo) -> ShadowNode) {
        let node = store(self.swap.as_mut().expect("a swap cache store without swap"));
        self.swap_update_node(node);
    }

    /// add_to_swap_cache() on swap-in: `pfn` takes the slot's place in the swap cache.
    pub fn swap_cache_add_swapin(&mut self, slot: u32, pfn: Pfn) {
        self.swap_cache_store(|s| s.set_cached(slot, pfn));
    }

    /// __delete_from_swap_cache() with a shadow: reclaim evicted the slot's folio.
    pub fn swap_cache_set_shadow(&mut self, slot: u32, shadow: u64) {
        self.swap_cache_store(|s| s.set_shadow(slot, shadow));
    }

    /// swap_free() of a slot's last user: the slot and its shadow go.
    pub fn swap_free_slot(&mut self, slot: u32) {
        if let Some(s) = self.swap.as_mut() {
            let node = s.free_slot(slot);
            self.swap_update_node(node);
        }
    }

    /// shadow_lru_isolate() of the swap cache's leaf `leaf`: its shadows are dropped, its
    /// slots stay in use.
    pub fn swap_cache_drop_shadows(&mut self, leaf: u32) {
        let Some(s) = self.swap.as_ref() else {
            return;
        };
        let first = leaf << super::XA_CHUNK_SHIFT;
        let end = (first + (1 << super::XA_CHUNK_SHIFT)).min(s.nr_slots() as u32);
        for slot in first..end {
            let s = self.swap.as_mut().unwrap();
            if let super::swapfile::SwapEnt::Shadow(_) = s.get(slot) {
                let node = s.clear_shadow(slot);
                self.swap_update_node(node);
            }
        }
    }

    /// delete_from_swap_cache() + put_swap_folio(): the folio leaves the swap cache and
    /// its slot is freed (swap_free), the memcg's swap charge dropped. A no-op for a folio
    /// not in the swap cache.
    pub fn delete_from_swap_cache(&mut self, pfn: Pfn) {
        let p = self.pages[pfn as usize];
        if !p.test(PG_SWAPCACHE) {
            return;
        }
        self.swap_free_slot(p.private);
        self.mem_cgroup_uncharge_swap(p.memcg);
        let lv = self.folio_lruvec(pfn) as usize;
        self.lruvecs[lv].mod_state(NodeStat::NrSwapcache, -1);
        self.lruvecs[lv].mod_state(NodeStat::NrFilePages, -1);
        self.pages[pfn as usize].clear(PG_SWAPCACHE);
    }
}
