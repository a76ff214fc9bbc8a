//! The swap cache seen from a folio: taking a folio out of it, and swap readahead.
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
//! Swap readahead. A swap-in that does not bypass the swap cache reads its neighbours
//! with it (swapin_readahead), in one of two ways:
//! - swap_cluster_readahead(), for shmem (shmem_swapin_cluster, shmem.rs) and for
//!   anonymous memory when a rotational device is swapped on: the aligned block of slots
//!   around the faulting one. Its size is swapin_nr_pages(): a window of `hits + 2`
//!   rounded up to a power of two of at least 4 (hits: faults that found a PG_readahead
//!   folio in the swap cache since the last window), 1 without hits unless the fault is
//!   next to the previous one, at most 1 << page_cluster, and no less than half the last
//!   window. Which PTE a slot serves is what the model needs to set its folio up (owner
//!   and index); the kernel keeps only the memcg (swap_cgroup), so the model records both
//!   when reclaim gives a folio its slot, in runs where this readahead can run only.
//! - swap_vma_readahead(), for anonymous memory otherwise (swap_use_vma_readahead): the
//!   swap PTEs around the faulting page, in its VMA and its PMD. The window is the same
//!   arithmetic over page numbers with the VMA's own state (swap_readahead_info: the last
//!   fault's page, its window, the hits since), starting at the fault when it follows the
//!   previous one, ending there when it precedes it, centred otherwise (swap_vma_ra_win).
//!
//! Each page read ahead is a locked swap-cache folio (charged to the memcg the slot was
//! charged to, refault-tested against its shadow, put on the LRU with PG_readahead) whose
//! read is submitted with the faulting one's. A later fault that finds such a folio is a
//! minor fault; it clears PG_readahead and counts a hit (SWAP_RA_HIT), in the VMA's state
//! or the global one. An anonymous swap-in from a synchronous device (zram) of a slot one
//! process uses reads its page alone (do_swap_page's SWP_SYNCHRONOUS_IO path). Simplified:
//! the faulting page is read after its neighbours (the kernel reads the window in order);
//! the readahead folios unlock when their reads complete on zram, and when the faulting
//! read completes on a block device (the kernel unlocks each at its own completion, no
//! later on a device that serves reads in order); page_cluster is its default (3); a
//! process's area is one VMA.

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

/// vma->swap_readahead_info: the page of the VMA's last swap fault that missed the swap
/// cache or hit it (None before the first), that miss's window, and the readahead hits
/// since. The kernel packs them in one word (the address, then PAGE_SHIFT / 2 bits each
/// of window and hits) and starts at 0, an address no fault of the area has: None here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapRaInfo {
    pub prev: Option<u32>,
    pub win: u32,
    pub hits: u32,
}

/// SWAP_RA_HITS_MAX: the hits the packed word holds (6 bits).
pub const SWAP_RA_HITS_MAX: u32 = 63;

/// SWAP_RA_ORDER_CEILING: VMA readahead's window is at most 1 << min(page_cluster, this).
pub const SWAP_RA_ORDER_CEILING: u32 = 5;

/// PTRS_PER_PTE: VMA readahead stays within the faulting page's PMD.
const PTRS_PER_PTE: u32 = 512;

/// swap_vma_ra_win(): the window of a swap fault at page `faddr` of a VMA of `vma_pages`
/// pages, with the VMA's readahead state `info`: (win, start, end), the pages
/// [start, end) to read, and the state it leaves (the fault, its window, no hits). The
/// window is __swapin_nr_pages over page numbers; it starts at the fault when the fault
/// follows the previous one, ends at it when it precedes it, and is otherwise centred on
/// it ((win - 1) / 2 pages before); then clamped to the VMA and to the fault's PMD.
pub fn swap_vma_ra_win(
    info: SwapRaInfo,
    faddr: u32,
    vma_pages: u32,
) -> (u32, u32, u32, SwapRaInfo) {
    let max_win = 1 << PAGE_CLUSTER.min(SWAP_RA_ORDER_CEILING);
    // No previous fault: a page that is next to nothing.
    let prev = info.prev.unwrap_or(faddr.wrapping_add(2));
    let win = __swapin_nr_pages(prev, faddr, info.hits, max_win, info.win);
    let after = SwapRaInfo {
        prev: Some(faddr),
        win,
        hits: 0,
    };
    if win == 1 {
        return (1, faddr, faddr + 1, after);
    }
    let (f, w) = (faddr as i64, win as i64);
    let left = if info.prev.is_some_and(|p| faddr == p.wrapping_add(1)) {
        f
    } else if info.prev.is_some_and(|p| p == faddr.wrapping_add(1)) {
        f - w + 1
    } else {
        f - (w - 1) / 2
    };
    let right = left + w;
    let pmd = f & !(PTRS_PER_PTE as i64 - 1);
    let start = left.max(0).max(pmd);
    let end = right.min(vma_pages as i64).min(pmd + PTRS_PER_PTE as i64);
    (win, start as u32, end as u32, after)
}

/// Swap readahead's state: swapin_nr_pages()'s statics (cluster readahead's window), the
/// folios with PG_readahead, and, where cluster readahead runs, each slot's PTE.
#[derive(Default)]
pub struct SwapReadahead {
    /// swapin_readahead_hits.
    hits: u32,
    /// swapin_nr_pages()'s prev_offset.
    prev_offset: u32,
    /// last_readahead_pages.
    last_pages: u32,
    /// Per slot, the PTE that refers to it: (mm + 1) << 32 | vpn, 0 when unknown. Empty
    /// (no slot known) unless cluster readahead can run: a rotational device's anonymous
    /// swap-ins, or shmem's.
    owner: Vec<u64>,
    /// The slots whose swap-cache folio has PG_readahead.
    readahead: rustc_hash::FxHashSet<u32>,
}

impl SwapReadahead {
    /// The state of a swap of `slots` slots that records their PTEs.
    pub fn new(slots: u64) -> Self {
        let mut ra = Self::default();
        ra.track_owners(slots);
        ra
    }

    /// Record each slot's PTE from now on (8 bytes a slot), once.
    pub fn track_owners(&mut self, slots: u64) {
        if self.owner.is_empty() {
            self.owner = crate::mm::mm_types::zeroed_table(slots as usize);
        }
    }

    /// Are the slots' PTEs recorded?
    pub fn tracks_owners(&self) -> bool {
        !self.owner.is_empty()
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
        let v = *self.owner.get(slot as usize)?;
        (v != 0).then(|| ((v >> 32) as u32 - 1, v as u32))
    }
}

/// Which readahead a swap-in that missed the swap cache does first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapinRa {
    /// None: one page (do_swap_page's SWP_SYNCHRONOUS_IO path, a hit, no swap).
    None,
    /// swap_cluster_readahead(): the aligned block of slots around the faulting one.
    Cluster,
    /// swap_vma_readahead(): the swap PTEs around the faulting page.
    Vma,
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
        if s.ra.tracks_owners() {
            let p = &self.pages[pfn as usize];
            s.ra.owner[slot as usize] = (p.owner() as u64 + 1) << 32 | p.index as u64;
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
        p.set_owner(owner);
        p.index = vpn;
        p.private = slot;
        self.swap_cache_add_swapin(slot, pfn);
        let lv = self.folio_lruvec(pfn) as usize;
        self.lruvecs[lv].mod_state(NodeStat::NrSwapcache, 1);
        // NR_FILE_PAGES counts the swap cache per node only (node_stat_mod_folio).
        self.lruvecs[lv].mod_node_state(NodeStat::NrFilePages, 1);
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
        self.lruvecs[lv].mod_node_state(NodeStat::NrFilePages, -1);
        self.pages[pfn as usize].clear(PG_SWAPCACHE);
    }
}

impl Mm {
    /// swap_cache_get_folio()'s readahead accounting, for a fault of `mmid` at `vpn` that
    /// found `slot`'s folio in the swap cache: a folio read ahead loses PG_readahead and
    /// counts SWAP_RA_HIT. With VMA readahead (no rotational swap) an anonymous fault's
    /// VMA remembers the fault's page and counts the hit; a shmem fault (no VMA) or one
    /// with cluster readahead feeds the global window's hits instead.
    pub fn swap_cache_readahead_hit(&mut self, mmid: u32, vpn: u32, slot: u32) {
        let Some(s) = self.swap.as_mut() else {
            return;
        };
        let readahead = !s.ra.readahead.is_empty() && s.ra.readahead.remove(&slot);
        let m = &mut self.mms[mmid as usize];
        if !m.shmem && !s.rotational {
            let info = &mut m.swap_ra_info;
            if readahead {
                info.hits = (info.hits + 1).min(SWAP_RA_HITS_MAX);
            }
            info.prev = Some(vpn);
        } else if readahead {
            s.ra.hits += 1;
        }
        if readahead {
            self.count_event(VmEvent::SwapRaHit, 1);
        }
    }

    /// Which readahead a swap-in of `mmid`'s `slot` does before its own read: none for a
    /// swap-cache hit; for shmem, shmem_swapin_cluster's where the kernel reads ahead
    /// (shmem.rs); for anonymous memory, none on a synchronous device when one process
    /// uses the slot (do_swap_page's SWP_SYNCHRONOUS_IO path), else swapin_readahead's
    /// choice: by slots on a rotational device, by the VMA otherwise.
    pub fn swapin_readahead_mode(&self, mmid: u32, slot: u32) -> SwapinRa {
        let Some(s) = self.swap.as_ref() else {
            return SwapinRa::None;
        };
        if matches!(s.get(slot), SwapEnt::Cached(_)) {
            return SwapinRa::None;
        }
        if self.mms[mmid as usize].shmem {
            return if self.shmem_reads_ahead_on(s) {
                SwapinRa::Cluster
            } else {
                SwapinRa::None
            };
        }
        if s.synchronous && s.swap_count(slot).is_none_or(|c| c <= 1) {
            SwapinRa::None
        } else if s.rotational {
            SwapinRa::Cluster
        } else {
            SwapinRa::Vma
        }
    }

    /// __read_swap_cache_async()'s test of a neighbouring slot: in use, not in the swap
    /// cache, and its PTE known and still a swap entry of it. Returns the PTE (mm, vpn),
    /// the memcg to charge (the mm's, as swap_cgroup records it) and the slot's shadow.
    fn swap_readahead_candidate(&self, slot: u32) -> Option<(u32, u32, MemcgId, Option<u64>)> {
        let s = self.swap.as_ref()?;
        let shadow = swap_readahead_shadow(s, slot)?;
        let (mmid, vpn) = s.ra.owner(slot)?;
        let m = self.mms.get(mmid as usize)?;
        (m.alive && m.ptes.get(vpn as usize) == Some(&pte::mk_swap(slot)))
            .then_some((mmid, vpn, m.memcg, shadow))
    }

    /// swap_vma_readahead()'s test of page `vpn` of `mmid`: its PTE a swap entry of
    /// `slot`, in use and not cached. Returns the folio's owner (the anon_vma root for a
    /// slot other processes share, as do_swap_page), `vpn`, the memcg and the shadow.
    fn swap_vma_candidate(
        &self,
        mmid: u32,
        vpn: u32,
        slot: u32,
    ) -> Option<(u32, u32, MemcgId, Option<u64>)> {
        let m = self.mms.get(mmid as usize)?;
        if !m.alive || m.ptes.get(vpn as usize) != Some(&pte::mk_swap(slot)) {
            return None;
        }
        let s = self.swap.as_ref()?;
        let shadow = swap_readahead_shadow(s, slot)?;
        let shared = s.swap_count(slot).is_some_and(|c| c > 1);
        let owner = match m.fork_parent {
            Some(root) if shared => root,
            _ => mmid,
        };
        Some((owner, vpn, m.memcg, shadow))
    }
}

/// A slot readahead may read: in use and not in the swap cache; Some(its shadow).
fn swap_readahead_shadow(s: &SwapInfo, slot: u32) -> Option<Option<u64>> {
    match s.get(slot) {
        SwapEnt::Shadow(sh) => Some(Some(sh)),
        SwapEnt::Swapped => Some(None),
        SwapEnt::Free | SwapEnt::Cached(_) => None,
    }
}

impl Sim {
    /// swap_cluster_readahead() around `slot`, less the faulting slot itself (the caller
    /// reads it as any swap-in): for a window of more than one page, each slot of the
    /// aligned block that is in use and not cached, whose PTE is recorded, is read ahead
    /// ([`Sim::swap_readahead_folio`]); then lru_add_drain().
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
            let mask = s.ra.swapin_nr_pages(slot) - 1;
            if mask == 0 {
                return ra;
            }
            (slot & !mask, (slot | mask).min(last))
        };
        for offset in start..=end {
            if offset != slot {
                let test = move |mm: &Mm| mm.swap_readahead_candidate(offset);
                self.swap_readahead_folio(offset, node, &mut ra, test).await;
            }
        }
        self.lru_add_drain().await;
        ra
    }

    /// swap_vma_readahead() for a fault of `mmid` at `vpn`, less the faulting page itself
    /// (the caller reads it): the window of swap_vma_ra_win() over the VMA's state (the
    /// area is one VMA), and each page of it whose PTE is a swap entry in use and not
    /// cached is read ahead ([`Sim::swap_readahead_folio`]), in address order; then
    /// lru_add_drain(). Simplified: the kernel reads the faulting page in the same pass,
    /// in its place; here it is read after the others.
    pub(crate) async fn swap_vma_readahead(&self, mmid: u32, vpn: u32, node: u32) -> Readahead {
        let mut ra = Readahead {
            folios: Vec::new(),
            done_at: 0,
        };
        let (start, end) = {
            let mut mm = self.mm.borrow_mut();
            let m = &mut mm.mms[mmid as usize];
            let (win, start, end, after) =
                swap_vma_ra_win(m.swap_ra_info, vpn, m.ptes.len() as u32);
            m.swap_ra_info = after;
            if win == 1 {
                return ra;
            }
            (start, end)
        };
        for v in start..end {
            let entry = self.mm.borrow().mms[mmid as usize].ptes[v as usize];
            if v == vpn || !pte::is_swap(entry) {
                continue;
            }
            let slot = pte::slot(entry);
            let test = move |mm: &Mm| mm.swap_vma_candidate(mmid, v, slot);
            self.swap_readahead_folio(slot, node, &mut ra, test).await;
        }
        self.lru_add_drain().await;
        ra
    }

    /// __read_swap_cache_async() of a neighbouring `slot` that `test` finds readable (its
    /// PTE's mm and page, memcg and shadow): a folio allocated on `node` and charged to
    /// the slot's memcg (mem_cgroup_swapin_charge_folio), added to the swap cache with
    /// PG_readahead (SWAP_RA), refault-tested against the slot's shadow, added to the LRU
    /// and read (PSWPIN). A failed allocation or charge skips the slot, as does a slot
    /// `test` no longer finds readable once the allocation returns. On a synchronous
    /// device the read is the task's time and unlocks the folio; on a block device it is
    /// submitted and the folio stays locked in `ra` (see [`Sim::swap_readahead_unlock`]).
    async fn swap_readahead_folio(
        &self,
        slot: u32,
        node: u32,
        ra: &mut Readahead,
        test: impl Fn(&Mm) -> Option<(u32, u32, MemcgId, Option<u64>)>,
    ) {
        let Some((_, _, memcg, _)) = test(&self.mm.borrow()) else {
            return;
        };
        let Some(pfn) = self.alloc_charged_page(node, memcg).await else {
            return;
        };
        // The slot may have been read in, freed or reused while we allocated.
        let (read_ns, shadow, sync) = {
            let mut mm = self.mm.borrow_mut();
            let Some((owner, vpn, _, shadow)) = test(&mm).filter(|c| c.2 == memcg) else {
                mm.free_folio(pfn);
                return;
            };
            mm.swap_cache_add_read_folio(pfn, owner, vpn, slot);
            mm.count_event(VmEvent::Pswpin, 1);
            mm.count_event(VmEvent::SwapRa, 1);
            let s = mm.swap.as_mut().expect("readahead without swap");
            s.ra.readahead.insert(slot);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::one_node_machine;
    use crate::mm::MmStruct;

    /// A fresh mm of /a and the counters of swap_ra_hit.
    fn setup(shmem: bool, rotational: bool) -> (std::rc::Rc<Sim>, u32) {
        let s = one_node_machine("64M", Some("64M"), "");
        let mmid = {
            let mut mm = s.mm.borrow_mut();
            mm.swap.as_mut().unwrap().rotational = rotational;
            let id = mm.mm_alloc(MmStruct::new(64, 1, 0, 0));
            if shmem {
                mm.mark_shmem(id);
            }
            mm.swap.as_mut().unwrap().ra.readahead.insert(5);
            id
        };
        (s, mmid)
    }

    fn hits(s: &Sim) -> u64 {
        s.mm.borrow().events[VmEvent::SwapRaHit as usize]
    }

    #[test]
    fn a_hit_on_a_folio_not_read_ahead_counts_nothing_but_moves_the_vmas_page() {
        let (s, mmid) = setup(false, false);
        s.mm.borrow_mut().swap_cache_readahead_hit(mmid, 12, 7);
        let mm = s.mm.borrow();
        assert_eq!(hits(&s), 0);
        assert!(mm.swap.as_ref().unwrap().ra.readahead.contains(&5));
        let want = SwapRaInfo {
            prev: Some(12),
            win: 0,
            hits: 0,
        };
        assert_eq!(mm.mms[mmid as usize].swap_ra_info, want);
    }

    #[test]
    fn a_hit_on_a_folio_read_ahead_counts_once_in_the_vma_or_the_global_window() {
        // (shmem, rotational) -> the hit goes to the VMA's state, else to the global one.
        for (shmem, rotational, in_vma) in [
            (false, false, true),
            (true, false, false),
            (false, true, false),
        ] {
            let (s, mmid) = setup(shmem, rotational);
            s.mm.borrow_mut().swap_cache_readahead_hit(mmid, 3, 5);
            s.mm.borrow_mut().swap_cache_readahead_hit(mmid, 3, 5);
            assert_eq!(
                hits(&s),
                1,
                "{shmem} {rotational}: PG_readahead cleared by the first"
            );
            let mm = s.mm.borrow();
            let sw = mm.swap.as_ref().unwrap();
            assert!(!sw.ra.readahead.contains(&5));
            let info = mm.mms[mmid as usize].swap_ra_info;
            assert_eq!(info.hits, in_vma as u32, "{shmem} {rotational}");
            assert_eq!(info.prev, in_vma.then_some(3), "{shmem} {rotational}");
            assert_eq!(sw.ra.hits, !in_vma as u32, "{shmem} {rotational}");
        }
    }

    #[test]
    fn a_cached_slot_reads_nothing_ahead_and_a_shared_zram_slot_reads_by_the_vma() {
        // zram (the fixture's device), anonymous memory.
        let (s, mmid) = setup(false, false);
        let mut mm = s.mm.borrow_mut();
        assert_eq!(mm.swapin_readahead_mode(mmid, 9), SwapinRa::None);
        // Two swap PTEs name slot 9 (fork): swapin_readahead, by the VMA.
        mm.swap.as_mut().unwrap().swap_duplicate(9, 1, 1);
        assert_eq!(mm.swapin_readahead_mode(mmid, 9), SwapinRa::Vma);
        // Its folio in the swap cache: a hit, nothing read.
        let _ = mm.swap.as_mut().unwrap().set_cached(9, 0);
        assert_eq!(mm.swapin_readahead_mode(mmid, 9), SwapinRa::None);
        // On a rotational device the same shared slot reads by slots.
        mm.swap.as_mut().unwrap().rotational = true;
        mm.swap.as_mut().unwrap().swap_duplicate(10, 1, 1);
        assert_eq!(mm.swapin_readahead_mode(mmid, 10), SwapinRa::Cluster);
    }

    #[test]
    fn a_vma_readahead_candidate_is_a_swap_pte_of_a_slot_in_use_and_not_cached() {
        use crate::mm::mm_types::pte;
        let (s, mmid) = setup(false, false);
        let mut mm = s.mm.borrow_mut();
        let root = mm.mm_alloc(MmStruct::new(64, 1, 0, 0));
        let sw = mm.swap.as_mut().unwrap();
        let (slot, _) = sw.alloc_slot(0, 0).unwrap();
        mm.mms[mmid as usize].ptes[3] = pte::mk_swap(slot);
        let shadow = |mm: &Mm| swap_readahead_shadow(mm.swap.as_ref().unwrap(), slot);
        // In the swap cache (as alloc_slot leaves it): nothing to read.
        assert_eq!(shadow(&mm), None);
        assert_eq!(mm.swap_vma_candidate(mmid, 3, slot), None);
        // Evicted with a shadow: read, refault-tested against it.
        let _ = mm.swap.as_mut().unwrap().set_shadow(slot, 42);
        assert_eq!(shadow(&mm), Some(Some(42)));
        assert_eq!(
            mm.swap_vma_candidate(mmid, 3, slot),
            Some((mmid, 3, 1, Some(42)))
        );
        // Its shadow dropped: read, no refault test.
        let _ = mm.swap.as_mut().unwrap().clear_shadow(slot);
        assert_eq!(shadow(&mm), Some(None));
        // Another page, or another slot at this page: not this entry.
        assert_eq!(mm.swap_vma_candidate(mmid, 4, slot), None);
        assert_eq!(mm.swap_vma_candidate(mmid, 3, slot + 1), None);
        // A slot other processes share, in a forked mm: the folio belongs to the root.
        mm.swap.as_mut().unwrap().swap_duplicate(slot, 1, 1);
        assert_eq!(
            mm.swap_vma_candidate(mmid, 3, slot),
            Some((mmid, 3, 1, None))
        );
        mm.mms[mmid as usize].fork_parent = Some(root);
        assert_eq!(
            mm.swap_vma_candidate(mmid, 3, slot),
            Some((root, 3, 1, None))
        );
        // One swap PTE left (an explicit count of 1), forked or not: the faulting mm's.
        mm.swap.as_mut().unwrap().swap_put(slot);
        assert_eq!(mm.swap.as_ref().unwrap().swap_count(slot), Some(1));
        assert_eq!(
            mm.swap_vma_candidate(mmid, 3, slot),
            Some((mmid, 3, 1, None))
        );
        // A process that exited reads nothing.
        mm.mms[mmid as usize].alive = false;
        assert_eq!(mm.swap_vma_candidate(mmid, 3, slot), None);
        // A freed slot is no candidate.
        let _ = mm.swap.as_mut().unwrap().free_slot(slot);
        assert_eq!(shadow(&mm), None);
    }

    #[test]
    fn the_vmas_hits_stop_at_what_the_packed_word_holds() {
        let (s, mmid) = setup(false, false);
        for slot in 100..200 {
            s.mm.borrow_mut()
                .swap
                .as_mut()
                .unwrap()
                .ra
                .readahead
                .insert(slot);
            s.mm.borrow_mut().swap_cache_readahead_hit(mmid, 1, slot);
        }
        assert_eq!(
            s.mm.borrow().mms[mmid as usize].swap_ra_info.hits,
            SWAP_RA_HITS_MAX
        );
        assert_eq!(hits(&s), 100);
    }
}
