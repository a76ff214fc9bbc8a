//! The swap cache seen from a folio: taking a folio out of it.
//!
//! Models mm/swap_state.c's delete_from_swap_cache() together with the put_swap_folio()
//! that follows it (the slot goes back to the device, swapfile.rs) and the memcg's swap
//! uncharge: the one place a folio leaves the swap cache. Its callers are the teardown of a
//! folio whose owner goes away (zap_pte_range, reclaim of a folio nobody maps any more) and
//! folio_free_swap() (swapfile.rs), which also keeps the folio, now dirty anon. The slot
//! table itself (add_to_swap_cache, the shadow __delete_from_swap_cache leaves in the slot)
//! is `SwapInfo` in swapfile.rs. Simplified: the swap cache is not an address space of its
//! own (the slot holds the folio's pfn), so there is no xarray to update and no lock to take.

use super::mm_types::PG_SWAPCACHE;
use super::vmstat::NodeStat;
use super::{Mm, Pfn};

impl Mm {
    /// delete_from_swap_cache() + put_swap_folio(): the folio leaves the swap cache and
    /// its slot is freed (swap_free), the memcg's swap charge dropped. A no-op for a folio
    /// not in the swap cache.
    pub fn delete_from_swap_cache(&mut self, pfn: Pfn) {
        let p = self.pages[pfn as usize];
        if !p.test(PG_SWAPCACHE) {
            return;
        }
        if let Some(s) = self.swap.as_mut() {
            s.free_slot(p.private);
        }
        self.mem_cgroup_uncharge_swap(p.memcg);
        let lv = self.folio_lruvec(pfn) as usize;
        self.lruvecs[lv].mod_state(NodeStat::NrSwapcache, -1);
        self.lruvecs[lv].mod_state(NodeStat::NrFilePages, -1);
        self.pages[pfn as usize].clear(PG_SWAPCACHE);
    }
}
