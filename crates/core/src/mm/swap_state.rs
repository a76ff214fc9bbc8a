//! The swap cache seen from a folio: taking a folio out of it, and shmem's swap readahead.
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
//!
//! Swap readahead. A shmem swap-in that does not bypass the swap cache (shmem.rs) goes
//! through swap_cluster_readahead(): it reads the aligned block of slots around the
//! faulting one, each slot in use and not cached becoming a locked swap-cache folio
//! (charged to the memcg the slot was charged to, refault-tested against its shadow, put
//! on the LRU with PG_readahead) whose read is submitted with the faulting one's. The
//! block's size is swapin_nr_pages(): a window of `hits + 2` rounded up to a power of two
//! (hits: faults that found a PG_readahead folio in the swap cache since the last
//! window), 1 without hits unless the fault is next to the previous one, at most
//! 1 << page_cluster, and no less than half the last window. A later fault that finds such
//! a folio is a minor fault; it clears PG_readahead and counts a hit (SWAP_RA_HIT).
//! Which PTE a slot serves is what the model needs to set the folio up (its owner and
//! index); the kernel keeps only the memcg (swap_cgroup), so the model records both when
//! reclaim gives a folio its slot, in runs that can read ahead only. Simplified: the
//! slots' order is the model's allocator's (a free stack, not per-CPU clusters), so which
//! pages are neighbours on swap differs from the kernel's; the readahead folios unlock
//! when their reads complete on zram, and when the faulting read completes on a block
//! device (the kernel unlocks each at its own completion, no later on a device that
//! serves reads in order); anonymous memory's VMA-based readahead is not modeled (its
//! faults read one page).

use super::mm_types::{pte, PG_HELD, PG_LOCKED, PG_OWNED, PG_SWAPBACKED, PG_SWAPCACHE};
use super::swapfile::{SwapEnt, SwapInfo};
use super::vmstat::{NodeStat, VmEvent};
use super::{MemcgId, Mm, Pfn, ShadowNode};
use crate::engine::Time;
use crate::sim::Sim;

/// vm.page-cluster's default: swap readahead reads at most 1 << 3 slots.
pub const PAGE_CLUSTER: u32 = 3;

/// __swapin_nr_pages(): the readahead window for a fault at swap offset `offset`, the
/// previous window's fault having been at `prev_offset`, with `hits` readahead hits since
/// and a last window of `prev_win` pages.
pub fn __swapin_nr_pages(
    prev_offset: u32,
    offset: u32,
    hits: u32,
    max_pages: u32,
    prev_win: u32,
) -> u32 {
    let mut pages = hits + 2;
    if pages == 2 {
        // No hits to judge by: read ahead only for a fault next to the previous one.
        if offset != prev_offset.wrapping_add(1) && offset != prev_offset.wrapping_sub(1) {
            pages = 1;
        }
    } else {
        pages = pages.next_power_of_two().max(4);
    }
    // Never more than max_pages, never below half the last window.
    pages.min(max_pages).max(prev_win / 2)
}

/// swap_cluster_readahead()'s state: swapin_nr_pages()'s statics, the folios with
/// PG_readahead, and where each slot's swap PTE is.
pub struct SwapReadahead {
    /// swapin_readahead_hits.
    hits: u32,
    /// swapin_nr_pages()'s prev_offset.
    prev_offset: u32,
    /// last_readahead_pages.
    last_pages: u32,
    /// Per slot, the PTE that refers to it: (mm + 1) << 32 | vpn, 0 when unknown.
    owner: Vec<u64>,
    /// The slots whose swap-cache folio has PG_readahead.
    readahead: rustc_hash::FxHashSet<u32>,
}

impl SwapReadahead {
    pub fn new(slots: u64) -> Self {
        SwapReadahead {
            hits: 0,
            prev_offset: 0,
            last_pages: 0,
            owner: vec![0; slots as usize],
            readahead: Default::default(),
        }
    }

    /// swapin_nr_pages(): this fault's window, taking the hits since the last one.
    pub fn swapin_nr_pages(&mut self, offset: u32) -> u32 {
        let hits = std::mem::take(&mut self.hits);
        let pages = __swapin_nr_pages(
            self.prev_offset,
            offset,
            hits,
            1 << PAGE_CLUSTER,
            self.last_pages,
        );
        if hits == 0 {
            self.prev_offset = offset;
        }
        self.last_pages = pages;
        pages
    }

    /// The slot's folio left the swap cache (its PG_readahead goes with it).
    pub(super) fn forget(&mut self, slot: u32) {
        if !self.readahead.is_empty() {
            self.readahead.remove(&slot);
        }
    }

    /// The PTE (mm, vpn) that refers to `slot`, if recorded.
    fn owner(&self, slot: u32) -> Option<(u32, u32)> {
        let v = self.owner[slot as usize];
        (v != 0).then(|| ((v >> 32) as u32 - 1, v as u32))
    }
}

/// The folios one readahead set up: locked until their reads complete.
pub(crate) struct Readahead {
    folios: Vec<Pfn>,
    /// When the last of their reads completes.
    done_at: Time,
}

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

    /// folio_alloc_swap() + add_to_swap_cache() in reclaim on `cpu`: a slot for `pfn`,
    /// None when swap is full or absent.
    pub fn add_to_swap_cache(&mut self, pfn: Pfn, cpu: u32) -> Option<u32> {
        let s = self.swap.as_mut()?;
        let (slot, node) = s.alloc_slot(pfn, cpu)?;
        if let Some(ra) = s.ra.as_deref_mut() {
            let p = &self.pages[pfn as usize];
            ra.owner[slot as usize] = (p.owner as u64 + 1) << 32 | p.index as u64;
        }
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

    /// __read_swap_cache_async()'s new folio: `pfn`, locked for its read, becomes the
    /// swap-cache folio of `slot`, whose swap PTE is page `vpn` of mm `owner`; counted in
    /// NR_SWAPCACHE and NR_FILE_PAGES.
    pub fn swap_cache_add_read_folio(&mut self, pfn: Pfn, owner: u32, vpn: u32, slot: u32) {
        let p = &mut self.pages[pfn as usize];
        p.set(PG_SWAPBACKED | PG_SWAPCACHE | PG_OWNED | PG_LOCKED);
        p.owner = owner;
        p.index = vpn;
        p.private = slot;
        self.swap_cache_add_swapin(slot, pfn);
        let lv = self.folio_lruvec(pfn) as usize;
        self.lruvecs[lv].mod_state(NodeStat::NrSwapcache, 1);
        self.lruvecs[lv].mod_state(NodeStat::NrFilePages, 1);
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

impl Mm {
    /// swap_cache_get_folio()'s readahead accounting, for a fault of `mmid` that found
    /// `slot`'s folio in the swap cache: a folio read ahead loses PG_readahead and counts
    /// SWAP_RA_HIT, and a shmem fault's hit (no VMA readahead state) feeds the next window.
    pub fn swap_cache_readahead_hit(&mut self, mmid: u32, slot: u32) {
        let Some(ra) = self.swap.as_mut().and_then(|s| s.ra.as_deref_mut()) else {
            return;
        };
        if ra.readahead.remove(&slot) {
            if self.mms[mmid as usize].shmem {
                ra.hits += 1;
            }
            self.count_event(VmEvent::SwapRaHit, 1);
        }
    }

    /// __read_swap_cache_async()'s test of a neighbouring slot: in use, not in the swap
    /// cache, and its PTE known and still a swap entry of it. Returns the PTE (mm, vpn),
    /// the memcg to charge (the mm's, as swap_cgroup records it) and the slot's shadow.
    fn swap_readahead_candidate(&self, slot: u32) -> Option<(u32, u32, MemcgId, Option<u64>)> {
        let s = self.swap.as_ref()?;
        let shadow = match s.get(slot) {
            SwapEnt::Shadow(sh) => Some(sh),
            SwapEnt::Swapped => None,
            SwapEnt::Free | SwapEnt::Cached(_) => return None,
        };
        let (mmid, vpn) = s.ra.as_ref()?.owner(slot)?;
        let m = self.mms.get(mmid as usize)?;
        (m.alive && m.ptes.get(vpn as usize) == Some(&pte::mk_swap(slot)))
            .then_some((mmid, vpn, m.memcg, shadow))
    }
}

impl Sim {
    /// swap_cluster_readahead() around `slot`, less the faulting slot itself (the caller
    /// reads it as any swap-in): for a window of more than one page, each slot of the
    /// aligned block that is in use and not cached gets a folio allocated on `node`,
    /// charged to the slot's memcg (mem_cgroup_swapin_charge_folio), added to the swap
    /// cache with PG_readahead (SWAP_RA), refault-tested against the slot's shadow,
    /// added to the LRU, and read (PSWPIN); then lru_add_drain(). A failed allocation or
    /// charge skips the slot, as __read_swap_cache_async() does. On a synchronous device
    /// each read is the task's time and unlocks its folio; on a block device the reads
    /// are submitted and the folios stay locked (see [`Sim::swap_readahead_unlock`]).
    pub(crate) async fn swap_cluster_readahead(&self, slot: u32, node: u32) -> Readahead {
        let mut ra = Readahead {
            folios: Vec::new(),
            done_at: 0,
        };
        let (start, end) = {
            let mut mm = self.mm.borrow_mut();
            let Some(s) = mm.swap.as_mut() else {
                return ra;
            };
            let last = s.nr_slots() as u32 - 1;
            let Some(r) = s.ra.as_deref_mut() else {
                return ra;
            };
            let mask = r.swapin_nr_pages(slot) - 1;
            if mask == 0 {
                return ra;
            }
            (slot & !mask, (slot | mask).min(last))
        };
        for offset in start..=end {
            if offset == slot {
                continue;
            }
            let Some((_, _, memcg, _)) = self.mm.borrow().swap_readahead_candidate(offset) else {
                continue;
            };
            let Some(pfn) = self.alloc_charged_page(node, memcg).await else {
                continue;
            };
            // The slot may have been read in, freed or reused while we allocated.
            let (read_ns, shadow, sync) = {
                let mut mm = self.mm.borrow_mut();
                let now_candidate = mm.swap_readahead_candidate(offset);
                let Some((mmid, vpn, _, shadow)) = now_candidate.filter(|c| c.2 == memcg) else {
                    mm.free_folio(pfn);
                    continue;
                };
                mm.swap_cache_add_read_folio(pfn, mmid, vpn, offset);
                mm.count_event(VmEvent::Pswpin, 1);
                mm.count_event(VmEvent::SwapRa, 1);
                let s = mm.swap.as_mut().expect("readahead without swap");
                s.ra.as_deref_mut()
                    .expect("readahead state")
                    .readahead
                    .insert(offset);
                let now = self.e.now();
                let done = s.read_done(now);
                let sync = s.synchronous;
                ra.done_at = ra.done_at.max(done);
                (done - now, shadow, sync)
            };
            self.e.charge(self.c.swap_cache_op);
            if let Some(s) = shadow {
                self.workingset_refault(pfn, s, true).await;
            }
            self.folio_add_lru(pfn, true).await;
            if sync {
                // swap_read_folio() on zram: the read is done when it returns.
                self.e.sleep(read_ns).await;
                let orphan = {
                    let p = &mut self.mm.borrow_mut().pages[pfn as usize];
                    p.clear(PG_LOCKED);
                    !p.test(PG_HELD)
                };
                if orphan {
                    self.folios_put_refs(&[pfn]).await;
                }
            } else {
                ra.folios.push(pfn);
            }
        }
        self.lru_add_drain().await;
        ra
    }

    /// The end of a readahead's reads on a block device: its folios unlock (one whose
    /// owner let go of it meanwhile is freed).
    pub(crate) async fn swap_readahead_unlock(&self, ra: Readahead) {
        if ra.folios.is_empty() {
            return;
        }
        let now = self.e.now();
        if ra.done_at > now {
            self.e.sleep(ra.done_at - now).await;
        }
        let orphans: Vec<Pfn> = {
            let mut mm = self.mm.borrow_mut();
            ra.folios
                .iter()
                .copied()
                .filter(|&pfn| {
                    let p = &mut mm.pages[pfn as usize];
                    p.clear(PG_LOCKED);
                    !p.test(PG_HELD)
                })
                .collect()
        };
        if !orphans.is_empty() {
            self.folios_put_refs(&orphans).await;
        }
    }
}
