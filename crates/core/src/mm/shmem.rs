//! Shared anonymous memory: what of mm/shmem.c the model has.
//!
//! A usemem area with `mapping = "shmem"` (MAP_SHARED of /dev/zero, fio's mmap engine) is
//! anonymous memory to the model: swap-backed folios on the anon LRU, one PTE each, every
//! touch a write. Where the kernel's shmem takes a path of its own that changes what
//! reclaim sees, the mm is marked (`MmStruct::shmem`) and the path asks here.
//!
//! The swap-in. shmem_swapin_folio() looks the entry up in the swap cache
//! (swap_cache_get_folio, with no VMA: a hit feeds the global readahead window) and on a
//! miss, until 6.14, always reads through shmem_swapin_cluster() ->
//! swap_cluster_readahead(), whatever the device: on zram too, where an anonymous fault
//! reads the one page and bypasses the swap cache (do_swap_page's SWP_SYNCHRONOUS_IO
//! path). From 6.14 a shmem swap-in from a synchronous device bypasses the swap cache as
//! well and reads one page (shmem_swap_alloc_folio); a block device still reads ahead.
//! The rule `shmem_swapin_skip_swapcache` says which; the readahead itself is
//! swap_state.rs. Simplified: no shmem inode (the swap entry is the PTE, as for anon), no
//! large folios or large swap entries, and memory.stat counts these folios as anon.

use super::memory::Fault;
use super::mm_types::pte;
use super::swapfile::SwapEnt;
use super::{MemcgId, Mm};
use crate::sim::Sim;

impl Mm {
    /// Does a swap-in of `mmid` read ahead? Its mm must be shmem, and the device one that
    /// shmem_swapin_folio() reads through swap_cluster_readahead(): any device without
    /// the rule `shmem_swapin_skip_swapcache` (6.1, 6.12), a block device with it.
    pub fn shmem_swapin_reads_ahead(&self, mmid: u32) -> bool {
        self.mms[mmid as usize].shmem
            && self
                .swap
                .as_ref()
                .is_some_and(|s| self.shmem_reads_ahead_on(s))
    }

    /// Does a shmem swap-in from device `s` read ahead on this kernel?
    fn shmem_reads_ahead_on(&self, s: &super::swapfile::SwapInfo) -> bool {
        !(self.rules.shmem_swapin_skip_swapcache && s.synchronous)
    }

    /// The area of `mmid` is shmem. If its swap-ins read ahead, the swap device starts
    /// keeping the readahead state (swap_state.rs), from now on.
    pub fn mark_shmem(&mut self, mmid: u32) {
        self.mms[mmid as usize].shmem = true;
        let Some(s) = self.swap.as_ref() else {
            return;
        };
        if self.shmem_reads_ahead_on(s) && s.ra.is_none() {
            let ra = super::swap_state::SwapReadahead::new(s.nr_slots());
            self.swap.as_mut().unwrap().ra = Some(Box::new(ra));
        }
    }
}

impl Sim {
    /// shmem_swapin_folio() of a swap entry whose swap-in reads ahead
    /// ([`Mm::shmem_swapin_reads_ahead`]): a folio already in the swap cache is taken as
    /// do_swap_page takes it (a minor fault, a readahead hit); on a miss,
    /// swap_cluster_readahead() reads the neighbouring slots first, then the faulting
    /// one is read as any swap-in (a major fault) unless its PTE changed meanwhile.
    /// Simplified: the faulting slot is read after its neighbours (the kernel reads the
    /// block in order), and the fault's remaining steps are do_swap_page's.
    pub(super) async fn shmem_swapin_folio(
        &self,
        mmid: u32,
        vpn: u32,
        slot: u32,
        write: bool,
        memcg: MemcgId,
        node: u32,
    ) -> Fault {
        let cached = {
            let mm = self.mm.borrow();
            matches!(
                mm.swap.as_ref().map(|s| s.get(slot)),
                Some(SwapEnt::Cached(_))
            )
        };
        if cached {
            return self.do_swap_page(mmid, vpn, slot, write, memcg, node).await;
        }
        let ra = self.swap_cluster_readahead(slot, node).await;
        let same = self.mm.borrow().mms[mmid as usize].ptes[vpn as usize] == pte::mk_swap(slot);
        let r = if same {
            self.do_swap_page(mmid, vpn, slot, write, memcg, node).await
        } else {
            Fault::Retry { major: false }
        };
        self.swap_readahead_unlock(ra).await;
        r
    }
}
