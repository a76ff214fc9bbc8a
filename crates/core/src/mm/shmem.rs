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

use super::Mm;

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

    /// Does a shmem swap-in from device `s` read ahead on this kernel (shmem_swapin_folio
    /// through shmem_swapin_cluster)?
    pub(super) fn shmem_reads_ahead_on(&self, s: &super::swapfile::SwapInfo) -> bool {
        !(self.rules.shmem_swapin_skip_swapcache && s.synchronous)
    }

    /// The area of `mmid` is shmem. If its swap-ins read ahead, the swap device starts
    /// recording each slot's PTE for cluster readahead (swap_state.rs), from now on.
    pub fn mark_shmem(&mut self, mmid: u32) {
        self.mms[mmid as usize].shmem = true;
        let Some(s) = self.swap.as_ref() else {
            return;
        };
        if self.shmem_reads_ahead_on(s) {
            let s = self.swap.as_mut().unwrap();
            let slots = s.nr_slots();
            s.ra.track_owners(slots);
        }
    }
}
