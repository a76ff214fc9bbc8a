//! The anonymous and swap page-fault paths.
//!
//! Models mm/memory.c: handle_mm_fault -> do_anonymous_page (a zeroed private page) or
//! do_swap_page (swap cache hit = minor fault; miss = major fault reading the slot back,
//! with workingset_refault deciding activation) or, for a write to a PTE that fork
//! write-protected, do_wp_page (reuse the folio if this process is its only user, else copy
//! it). Simplified: no swap readahead for anonymous memory (one page per swapin, as on
//! zram; shmem's is shmem.rs and swap_state.rs), no THP, no zero
//! page (reads of untouched memory are treated as writes); a write fault on a swapped-in
//! folio frees its swap slot (should_try_to_free_swap), a read fault keeps it unless swap
//! is half full. A swap-in of a slot other processes' swap PTEs still refer to (a folio
//! forked processes share) maps the folio write-protected and leaves it in the swap cache;
//! a write then copies it. The copy is one `page_copy` (the page's copy and the rest of
//! wp_page_copy beyond a fault's entry, allocation and mapping), not broken down further.
//! zap_pte_range (munmap, exit) frees through free_pages_and_swap_cache, which drains the
//! local CPU's LRU batches first; a folio or swap slot other processes still use stays.

use super::filemap::NewFolio;
use super::memcontrol::KmemKind;
use super::memcontrol::StatKind;
use super::mm_types::*;
use super::swap_state::SwapinRa;
use super::swapfile::SwapEnt;
use super::vmstat::{NodeStat, VmEvent};
use super::{Mm, Pfn};
use crate::sim::Sim;

/// What a fault did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A new page or a swap-cache hit (pgfault only).
    Minor,
    /// Read from swap (pgmajfault).
    Major,
    /// VM_FAULT_OOM: no memory could be allocated or charged; the task is killed.
    Oom,
    /// The fault backed out because the PTE changed under it (do_swap_page's pte_same
    /// check failed: a munmap or another fault got there first); `major` if it read from
    /// swap. The access is retried, as the CPU re-executes the faulting instruction.
    Retry { major: bool },
}

impl Mm {
    /// Map `pfn` at `vpn` of mm `mmid` (set_pte_at plus the rss count, and NR_ANON_MAPPED
    /// when no other process maps the folio yet), write-protected if `wrprotect`.
    fn map_anon(&mut self, mmid: u32, vpn: u32, pfn: Pfn, write: bool, wrprotect: bool) {
        let first = !self.folio_shared_anon(pfn) || self.shared_mapcount_mod(pfn, true) == 0;
        let m = &mut self.mms[mmid as usize];
        m.ptes[vpn as usize] = pte::mk_present(pfn, true, write);
        m.set_wrprotect(vpn, wrprotect);
        m.sampled_note(vpn);
        m.rss += 1;
        m.pmd_mkyoung(vpn);
        if first {
            let lv = self.folio_lruvec(pfn) as usize;
            self.lruvecs[lv].mod_state(NodeStat::NrAnonMapped, 1);
        }
    }

    /// The swap PTE at `vpn` of `mmid` becomes a mapping of its slot's folio: swap_free()
    /// of the PTE's reference. Returns whether the folio is now exclusive to this process
    /// (no other swap PTE refers to the slot): mapped writable, else write-protected.
    fn swap_map_exclusive(&mut self, slot: u32) -> bool {
        let s = self.swap.as_mut().expect("swap entry without swap");
        match s.swap_count(slot) {
            Some(_) => s.swap_put(slot) == 0,
            None => true,
        }
    }
}

impl Sim {
    /// handle_mm_fault() for a non-present PTE of an anonymous area.
    pub async fn handle_mm_fault(&self, mmid: u32, vpn: u32, write: bool) -> Fault {
        self.e.charge(self.c.fault_entry);
        let (v, memcg, node) = {
            let mut mm = self.mm.borrow_mut();
            let m = &mm.mms[mmid as usize];
            let r = (m.ptes[vpn as usize], m.memcg, m.node);
            mm.count_event(VmEvent::Pgfault, 1);
            mm.count_memcg_event(r.1, VmEvent::Pgfault, 1);
            r
        };
        self.memcg_stat_update(memcg, node, StatKind::Pgfault, 1);
        let (file, text) = {
            let mm = self.mm.borrow();
            (mm.mms[mmid as usize].file, mm.mms[mmid as usize].text)
        };
        let r = if let Some(t) = text.filter(|t| vpn >= t.base) {
            self.do_read_fault(mmid, vpn, t.file, vpn - t.base, memcg, node)
                .await
        } else if let Some(f) = file {
            self.do_shared_fault(mmid, vpn, f, memcg, node).await
        } else if pte::present(v) {
            // A write to a PTE fork write-protected.
            self.do_wp_page(mmid, vpn, pte::pfn(v), memcg, node).await
        } else if pte::is_swap(v) {
            self.swapin(mmid, vpn, pte::slot(v), write, memcg, node)
                .await
        } else {
            self.do_anonymous_page(mmid, vpn, write, memcg, node).await
        };
        if let Some((debt, memcg)) = self.over_high_on_return() {
            self.mem_cgroup_handle_over_high(memcg, debt).await;
        }
        r
    }

    /// pmd_none(): the 2 MiB region of `vpn` has no PTE page yet (pte_alloc() then calls
    /// __pte_alloc, [`Sim::pte_alloc_new`]; apart so that the common fault builds no future).
    #[inline]
    fn pmd_none(&self, mmid: u32, vpn: u32) -> bool {
        !self.mm.borrow().mms[mmid as usize].pte_tables[vpn as usize / super::PTRS_PER_PTE]
    }

    /// __pte_alloc(): the first fault in a 2 MiB region allocates its PTE page, charged to
    /// the memcg as kernel memory (it is on no LRU). False when the charge fails.
    async fn pte_alloc_new(&self, mmid: u32, vpn: u32, memcg: super::MemcgId) -> bool {
        let idx = vpn as usize / super::PTRS_PER_PTE;
        debug_assert!(
            !self.mm.borrow().mms[mmid as usize].pte_tables[idx],
            "__pte_alloc of a region with a PTE page"
        );
        let bytes = super::PAGE_SIZE;
        if !self
            .memcg_kmem_charge(memcg, bytes, KmemKind::Pagetables)
            .await
        {
            return false;
        }
        let mut mm = self.mm.borrow_mut();
        // The page table's NR_PAGETABLE + 1 (pagetable_pte_ctor), a statistics update.
        mm.memcg_rstat_updated(memcg, 1);
        if !mm.mms[mmid as usize].pte_alloc(vpn) {
            // Another thread of the process populated it while we reclaimed: pte_free
            // (NR_PAGETABLE - 1).
            mm.memcg_rstat_updated(memcg, 1);
            mm.memcg_kmem_uncharge(self.e.cpu(), memcg, bytes, KmemKind::Pagetables);
        }
        true
    }

    /// Allocate and charge a page for `memcg` (alloc_pages + mem_cgroup_charge).
    pub async fn alloc_charged_page(&self, node: u32, memcg: super::MemcgId) -> Option<Pfn> {
        // Reclaim's read-ahead: one step per allocation (more, in a row, only stall on
        // the step before; see Mm::lru_prefetch_step).
        let lv = self.mm.borrow().lruvec_of(memcg, node);
        self.mm.borrow_mut().lru_prefetch_step(lv);
        // __alloc_pages(): the fast path, else the slow path.
        self.e.sync().await;
        let pfn = match self.alloc_page_fast(node) {
            Some(p) => p,
            None => self.alloc_pages_slowpath(node).await?,
        };
        if !self.try_charge_memcg(memcg, 1).await {
            self.mm.borrow_mut().free_uncharged(pfn);
            return None;
        }
        {
            let mut mm = self.mm.borrow_mut();
            mm.pages[pfn as usize].memcg = memcg;
            // mem_cgroup_charge_statistics(): PGPGIN, a statistics update (rule
            // memcg_v1_charge_statistics: 6.1; later kernels build it with cgroup v1 only).
            if mm.rules.memcg_v1_charge_statistics {
                mm.memcg_rstat_updated(memcg, 1);
            }
        }
        self.memcg_stat_update(memcg, node, StatKind::Pgpgin, 1);
        Some(pfn)
    }

    /// do_shared_fault(): a write fault on a MAP_SHARED file mapping. The folio comes from
    /// the page cache (filemap_fault); a missing one is allocated, charged, inserted (a
    /// shadow there goes to workingset_refault) and added to the LRU, zero-filled like a
    /// new tmpfs page (no read IO). finish_fault maps it and counts NR_FILE_MAPPED.
    /// Simplified: writes through the mapping do not dirty the folio (no writeback model).
    async fn do_shared_fault(
        &self,
        mmid: u32,
        vpn: u32,
        file: u32,
        memcg: u16,
        node: u32,
    ) -> Fault {
        if self.pmd_none(mmid, vpn) && !self.pte_alloc_new(mmid, vpn, memcg).await {
            return Fault::Oom;
        }
        let entry = self.mm.borrow().files[file as usize].cache[vpn as usize];
        let pfn = match super::filemap::entry_page(entry) {
            Some(p) => p,
            None => {
                let Some(pfn) = self.alloc_charged_page(node, memcg).await else {
                    return Fault::Oom;
                };
                if !self.xa_alloc_nodes(file, vpn, memcg).await {
                    self.mm.borrow_mut().free_folio(pfn);
                    return Fault::Oom;
                }
                {
                    let mut mm = self.mm.borrow_mut();
                    let p = &mut mm.pages[pfn as usize];
                    p.set(PG_OWNED);
                    p.set_owner(file);
                    p.index = vpn;
                    mm.page_cache_store(file, vpn, super::filemap::page_entry(pfn));
                    let lv = mm.folio_lruvec(pfn) as usize;
                    mm.lruvecs[lv].mod_state(NodeStat::NrFilePages, 1);
                }
                self.e.charge(self.c.page_zero);
                if let Some(s) = super::filemap::entry_shadow(entry) {
                    self.workingset_refault(pfn, s, true).await;
                }
                self.folio_add_lru(pfn, true).await;
                self.mm.borrow_mut().pages[pfn as usize].clear(PG_LOCKED);
                pfn
            }
        };
        // Killed meanwhile, or the folio was reclaimed while we slept: retry later.
        if let Some(m) = self.finish_fault_file(mmid, vpn, pfn, true) {
            let nid = self.mm.borrow().pfn_node(pfn);
            self.memcg_stat_update(m, nid, StatKind::FileMapped, 1);
        }
        Fault::Minor
    }

    /// do_read_fault(): a fault on page `index` of the program's text, a private read-only
    /// VM_EXEC file mapping. filemap_fault finds the folio in the page cache (a minor
    /// fault: another process of the program brought it in, or reclaim only unmapped it)
    /// or reads it in, charged to the faulting task's memcg (a major fault: PGMAJFAULT),
    /// inside handle_mm_fault's lru_gen_enter_fault (with MGLRU the new folio gets
    /// PG_active from folio_add_lru, and a recent refault counts WORKINGSET_ACTIVATE);
    /// finish_fault maps it young and counts NR_FILE_MAPPED. Simplified: no fault-around
    /// (the kernel maps up to 16 cached neighbours with it) and no mmap read-around; a
    /// folio another task is still reading is mapped without waiting for its lock, as
    /// filemap_read's hits are.
    async fn do_read_fault(
        &self,
        mmid: u32,
        vpn: u32,
        file: u32,
        index: u32,
        memcg: u16,
        node: u32,
    ) -> Fault {
        if self.pmd_none(mmid, vpn) && !self.pte_alloc_new(mmid, vpn, memcg).await {
            return Fault::Oom;
        }
        let entry = self.mm.borrow().files[file as usize].cache[index as usize];
        let (pfn, major) = match super::filemap::entry_page(entry) {
            Some(p) => (p, false),
            None => match self
                .filemap_add_folio_and_read(file, index, memcg, node, true)
                .await
            {
                NewFolio::Read(p) => (p, true),
                NewFolio::Raced(p) => (p, false),
                NewFolio::Oom => return Fault::Oom,
            },
        };
        if major {
            let mut mm = self.mm.borrow_mut();
            mm.count_event(VmEvent::Pgmajfault, 1);
            mm.count_memcg_event(memcg, VmEvent::Pgmajfault, 1);
        }
        match self.finish_fault_file(mmid, vpn, pfn, false) {
            Some(m) => {
                let nid = self.mm.borrow().pfn_node(pfn);
                self.memcg_stat_update(m, nid, StatKind::FileMapped, 1);
                if major {
                    Fault::Major
                } else {
                    Fault::Minor
                }
            }
            // Reclaimed between the read and the mapping, or killed meanwhile: the access
            // faults again, or ends as the caller finds the task dead.
            None => Fault::Retry { major },
        }
    }

    /// finish_fault() for a page-cache folio: map it at `vpn` (young; dirty for a write),
    /// count the PTE in its mapcount and NR_FILE_MAPPED. Returns the folio's memcg for
    /// the memcg statistic, or None when the task was killed or the folio left the page
    /// cache while the task slept.
    fn finish_fault_file(&self, mmid: u32, vpn: u32, pfn: Pfn, write: bool) -> Option<u16> {
        let mut mm = self.mm.borrow_mut();
        if !mm.mms[mmid as usize].alive || !mm.pages[pfn as usize].test(PG_OWNED) {
            return None;
        }
        mm.mms[mmid as usize].ptes[vpn as usize] = pte::mk_present(pfn, true, write);
        mm.mms[mmid as usize].sampled_note(vpn);
        mm.mms[mmid as usize].pmd_mkyoung(vpn);
        mm.pages[pfn as usize].private += 1;
        let lv = mm.folio_lruvec(pfn) as usize;
        mm.lruvecs[lv].mod_state(NodeStat::NrFileMapped, 1);
        self.e.charge(self.c.pte_map);
        Some(mm.pages[pfn as usize].memcg)
    }

    /// do_anonymous_page(): a zeroed private page.
    async fn do_anonymous_page(
        &self,
        mmid: u32,
        vpn: u32,
        write: bool,
        memcg: u16,
        node: u32,
    ) -> Fault {
        if self.pmd_none(mmid, vpn) && !self.pte_alloc_new(mmid, vpn, memcg).await {
            return Fault::Oom;
        }
        let Some(pfn) = self.alloc_charged_page(node, memcg).await else {
            return Fault::Oom;
        };
        self.e.charge(self.c.page_zero + self.c.pte_map);
        {
            let mut mm = self.mm.borrow_mut();
            if !mm.mms[mmid as usize].alive {
                // Killed while we slept in reclaim: drop the page.
                mm.free_folio(pfn);
                return Fault::Oom;
            }
            let p = &mut mm.pages[pfn as usize];
            p.set(PG_SWAPBACKED | PG_OWNED);
            p.set_owner(mmid);
            p.index = vpn;
            mm.map_anon(mmid, vpn, pfn, write, false);
            mm.pages[pfn as usize].clear(PG_LOCKED);
        }
        let nid = self.mm.borrow().pfn_node(pfn);
        self.memcg_stat_update(memcg, nid, StatKind::AnonMapped, 1);
        self.folio_add_lru(pfn, true).await;
        Fault::Minor
    }

    /// The swap-in of the swap PTE of `slot` at `vpn`: swapin_readahead() where the
    /// kernel reads ahead (swap_state.rs: the cluster of slots around it, or the VMA's
    /// swap PTEs around the page; shmem_swapin_folio's cluster for shmem), then
    /// do_swap_page() reads the faulting page unless its PTE changed meanwhile, and the
    /// folios read ahead from a block device unlock when their reads complete.
    /// Simplified: the faulting page is read after its neighbours (the kernel reads the
    /// window in order).
    async fn swapin(
        &self,
        mmid: u32,
        vpn: u32,
        slot: u32,
        write: bool,
        memcg: u16,
        node: u32,
    ) -> Fault {
        let mode = self.mm.borrow().swapin_readahead_mode(mmid, slot);
        let ra = match mode {
            SwapinRa::None => return self.do_swap_page(mmid, vpn, slot, write, memcg, node).await,
            SwapinRa::Cluster => self.swap_cluster_readahead(slot, node).await,
            SwapinRa::Vma => self.swap_vma_readahead(mmid, vpn, node).await,
        };
        let same = self.mm.borrow().mms[mmid as usize].ptes[vpn as usize] == pte::mk_swap(slot);
        let r = if same {
            self.do_swap_page(mmid, vpn, slot, write, memcg, node).await
        } else {
            Fault::Retry { major: false }
        };
        self.swap_readahead_unlock(ra).await;
        r
    }

    /// do_swap_page(): bring a swapped-out page back, from the swap cache if it is still
    /// there (minor), else from the device (major: pswpin, read latency, refault check).
    ///
    /// A write fault on a folio taken through the swap cache drains this CPU's LRU batches
    /// first when the folio is not on an LRU (it usually sits in the lru_add batch its
    /// read-in just put it in): the kernel does so to drop the batch's reference before it
    /// checks the refcount for exclusive ownership, so every write swap-in from an
    /// asynchronous device takes the lru_lock at lru_add_drain_cpu. A swap-in from a
    /// synchronous device (zram) of an entry only one process uses skips the swap cache
    /// (SWP_SYNCHRONOUS_IO) and does not drain; the model reads it through the swap cache
    /// all the same (simplified) but skips the drain as the kernel does.
    pub(super) async fn do_swap_page(
        &self,
        mmid: u32,
        vpn: u32,
        slot: u32,
        write: bool,
        memcg: u16,
        node: u32,
    ) -> Fault {
        let ent = self
            .mm
            .borrow()
            .swap
            .as_ref()
            .map_or(SwapEnt::Free, |s| s.get(slot));
        if let SwapEnt::Cached(pfn) = ent {
            self.mm
                .borrow_mut()
                .swap_cache_readahead_hit(mmid, vpn, slot);
            if write && !self.mm.borrow().folio_test_lru(pfn) {
                self.lru_add_drain().await;
                // The entry may have gone while the drain waited for the lock, or reclaim
                // may have taken the folio out of the swap cache (the kernel holds a
                // reference and rechecks folio->swap under the folio lock).
                let mm = self.mm.borrow();
                if mm.mms[mmid as usize].ptes[vpn as usize] != pte::mk_swap(slot)
                    || mm.swap.as_ref().map(|s| s.get(slot)) != Some(SwapEnt::Cached(pfn))
                {
                    return Fault::Retry { major: false };
                }
            }
            let exclusive = self.map_swapped_folio(mmid, vpn, slot, pfn, write);
            if write && !exclusive {
                return self.do_wp_page(mmid, vpn, pfn, memcg, node).await;
            }
            return Fault::Minor;
        }
        let shadow = match ent {
            SwapEnt::Shadow(s) => Some(s),
            _ => None,
        };
        let Some(pfn) = self.alloc_charged_page(node, memcg).await else {
            return Fault::Oom;
        };
        let orig_pte = pte::mk_swap(slot);
        let read_ns = {
            let mut mm = self.mm.borrow_mut();
            if !mm.mms[mmid as usize].alive {
                mm.free_folio(pfn);
                return Fault::Oom;
            }
            if mm.mms[mmid as usize].ptes[vpn as usize] != orig_pte {
                // The entry went while we allocated (a munmap freed the slot): the swapin
                // finds no entry and do_swap_page backs out (pte_same fails).
                mm.free_folio(pfn);
                return Fault::Retry { major: false };
            }
            mm.count_event(VmEvent::Pgmajfault, 1);
            mm.count_memcg_event(memcg, VmEvent::Pgmajfault, 1);
            mm.count_event(VmEvent::Pswpin, 1);
            // A slot other processes' swap PTEs refer to reads in a folio they share: its
            // rmap walk starts at the anon_vma root, the process they were forked from.
            let shared = mm
                .swap
                .as_ref()
                .unwrap()
                .swap_count(slot)
                .is_some_and(|c| c > 1);
            let owner = match mm.mms[mmid as usize].fork_parent {
                Some(root) if shared => root,
                _ => mmid,
            };
            mm.swap_cache_add_read_folio(pfn, owner, vpn, slot);
            let s = mm.swap.as_mut().expect("swap entry without swap");
            s.read_done(self.e.now()) - self.e.now()
        };
        self.e.charge(self.c.swap_cache_op);
        if let Some(s) = shadow {
            self.workingset_refault(pfn, s, true).await;
        }
        self.folio_add_lru(pfn, true).await;
        // swap_read_folio(): the task sleeps on the folio lock until the read completes;
        // the locked folio cannot be reclaimed meanwhile.
        self.e.sleep(read_ns).await;
        let wakeup = {
            let mut mm = self.mm.borrow_mut();
            let s = mm.swap.as_mut().expect("swap entry without swap");
            s.read_wakeup(self.cpus_occupied.get())
        };
        if wakeup > 0 {
            self.e.sleep(wakeup).await;
        }
        let orphan = {
            let mut mm = self.mm.borrow_mut();
            mm.pages[pfn as usize].clear(PG_LOCKED);
            !mm.mms[mmid as usize].alive
        };
        if orphan {
            // Killed during the read: exit_mmap dropped the mapping side; drop ours.
            self.folio_put_last(pfn).await;
            return Fault::Oom;
        }
        // A synchronous device skips the swap cache for a slot one process uses.
        let skips_cache = self
            .mm
            .borrow()
            .swap
            .as_ref()
            .is_some_and(|s| s.synchronous && s.swap_count(slot).is_none_or(|c| c <= 1));
        if write && !skips_cache && !self.mm.borrow().folio_test_lru(pfn) {
            self.lru_add_drain().await;
        }
        // pte_same() under the page-table lock: a munmap during the read zapped the swap
        // entry (and took the folio out of the swap cache); back out, dropping our
        // reference (out_nomap), and let the access fault again.
        if self.mm.borrow().mms[mmid as usize].ptes[vpn as usize] != orig_pte {
            self.folio_put_last(pfn).await;
            return Fault::Retry { major: true };
        }
        if self.mm.borrow().swap.as_ref().map(|s| s.get(slot)) != Some(SwapEnt::Cached(pfn)) {
            // Reclaim took the folio while the drain waited for the lock (the kernel's
            // folio lock and reference keep it): read it again.
            return Fault::Retry { major: true };
        }
        let exclusive = self.map_swapped_folio(mmid, vpn, slot, pfn, write);
        if write && !exclusive {
            self.do_wp_page(mmid, vpn, pfn, memcg, node).await;
        }
        Fault::Major
    }

    /// do_swap_page()'s mapping of the swap-cache folio `pfn` of `slot` at `vpn`: writable
    /// (and dirty on a write) when this process is now its only user (no other swap PTE
    /// names the slot, no other process maps the folio), else write-protected
    /// (the caller's write then goes to do_wp_page); the slot is freed on a write or when
    /// swap is half full, unless other processes' swap PTEs still refer to it. Returns
    /// whether the folio was exclusive.
    fn map_swapped_folio(&self, mmid: u32, vpn: u32, slot: u32, pfn: Pfn, write: bool) -> bool {
        let mut mm = self.mm.borrow_mut();
        // Exclusive: no swap PTE names the slot any more and no process maps the folio (a
        // sharer may have mapped it from the swap cache already).
        let last = mm.swap_map_exclusive(slot);
        let exclusive = last && !mm.folio_mapped(pfn);
        mm.map_anon(mmid, vpn, pfn, write && exclusive, !exclusive);
        mm.mms[mmid as usize].swapents -= 1;
        self.e.charge(self.c.pte_map);
        if write || mm.mem_cgroup_swap_full(mm.pages[pfn as usize].memcg) {
            mm.folio_free_swap(pfn);
        }
        exclusive
    }

    /// do_wp_page() on an anonymous folio: a write to a PTE that fork write-protected.
    /// wp_can_reuse_anon_folio() reuses the folio when this process maps it alone, no
    /// per-CPU batch holds it and no other process's swap PTE refers to its slot (the PTE
    /// becomes writable, the slot is freed); before that check it drains this CPU's LRU
    /// batches if the folio lacks PG_lru (`folio_test_lru`) and its refcount could still be
    /// low enough to reuse (mapcount, swap cache and batch references at most 3).
    /// Simplified: reclaim's isolation reference is not counted. Otherwise wp_page_copy():
    /// a new page, charged to this process's memcg, takes the copy and the PTE (flushed
    /// from other CPUs running the mm); the old folio loses this mapping and is freed if
    /// nothing else holds it.
    ///
    /// An `async move` block rather than an `async fn`: the async fn's first poll copied
    /// its arguments with a 16-byte load that waited on the caller's narrower stores (a
    /// store-forwarding stall, most of this function's time in `default` with the plain
    /// release build; docs/bench.md).
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn stalls on its arguments (above)"
    )]
    pub fn do_wp_page(
        &self,
        mmid: u32,
        vpn: u32,
        pfn: Pfn,
        memcg: u16,
        node: u32,
    ) -> impl std::future::Future<Output = Fault> + '_ {
        async move {
            // The PTE still maps the folio (its young bit may change meanwhile).
            let still = |mm: &super::Mm| {
                let v = mm.mms[mmid as usize].ptes[vpn as usize];
                pte::present(v) && pte::pfn(v) == pfn
            };
            let (mapcount, swapcache, on_lru, batch_refs) = {
                let mm = self.mm.borrow();
                let p = mm.pages[pfn as usize];
                let lru = mm.folio_test_lru(pfn);
                (
                    mm.folio_mapcount(pfn),
                    p.test(PG_SWAPCACHE),
                    lru,
                    mm.folio_batch_refs(pfn),
                )
            };
            // The folio's refcount: its mappings, the swap cache's and the batches' references.
            let refs = mapcount + swapcache as u32 + batch_refs;
            if !on_lru && refs <= 3 {
                self.lru_add_drain().await;
                if !still(&self.mm.borrow()) {
                    return Fault::Retry { major: false };
                }
            }
            let reusable = {
                let mm = self.mm.borrow();
                // Another CPU's batch (or, with PG_lru set, this one's: nothing drained) still
                // holds a reference: folio_ref_count() > 1 + swapcache.
                mapcount == 1 && mm.folio_batch_refs(pfn) == 0 && !mm.folio_swapped(pfn)
            };
            if reusable {
                // wp_page_reuse()
                let mut mm = self.mm.borrow_mut();
                mm.folio_free_swap(pfn);
                let m = &mut mm.mms[mmid as usize];
                m.ptes[vpn as usize] |= pte::YOUNG | pte::DIRTY;
                m.set_wrprotect(vpn, false);
                m.sampled_note(vpn);
                self.e.charge(self.c.pte_map);
                return Fault::Minor;
            }
            let Some(new) = self.alloc_charged_page(node, memcg).await else {
                return Fault::Oom;
            };
            self.e.charge(self.c.page_copy + self.c.pte_map);
            let old_unmapped = {
                let mut mm = self.mm.borrow_mut();
                if !mm.mms[mmid as usize].alive || !still(&mm) {
                    // Killed, or reclaim took the old folio while we allocated.
                    mm.free_folio(new);
                    return if mm.mms[mmid as usize].alive {
                        Fault::Retry { major: false }
                    } else {
                        Fault::Oom
                    };
                }
                let p = &mut mm.pages[new as usize];
                p.set(PG_SWAPBACKED | PG_OWNED);
                p.set_owner(mmid);
                p.index = vpn;
                mm.mms[mmid as usize].rss -= 1;
                mm.map_anon(mmid, vpn, new, true, false);
                mm.pages[new as usize].clear(PG_LOCKED);
                // Only a forked process's folio is ever mapped write-protected.
                debug_assert!(mm.folio_shared_anon(pfn), "do_wp_page on folio {pfn}");
                let old_unmapped = mm.shared_mapcount_mod(pfn, false) == 1;
                if old_unmapped {
                    let lv = mm.folio_lruvec(pfn) as usize;
                    mm.lruvecs[lv].mod_state(NodeStat::NrAnonMapped, -1);
                }
                old_unmapped
            };
            self.flush_tlb_mm_range(&self.mm.borrow().mms[mmid as usize], mmid);
            let (new_nid, old) = {
                let mm = self.mm.borrow();
                (
                    mm.pfn_node(new),
                    (mm.pages[pfn as usize].memcg, mm.pfn_node(pfn)),
                )
            };
            self.memcg_stat_update(memcg, new_nid, StatKind::AnonMapped, 1);
            self.folio_add_lru(new, true).await;
            if old_unmapped {
                self.memcg_stat_update(old.0, old.1, StatKind::AnonMapped, -1);
                let free = {
                    let mut mm = self.mm.borrow_mut();
                    let p = &mut mm.pages[pfn as usize];
                    // The swap cache keeps a folio whose slot other processes still use.
                    let free = !p.test(PG_SWAPCACHE) && p.test(PG_OWNED);
                    if free {
                        p.clear(PG_OWNED);
                    }
                    free
                };
                if free {
                    self.folios_put_refs(&[pfn]).await;
                }
            }
            Fault::Minor
        }
    }
}

impl Mm {
    /// Free a frame that was allocated but never charged (a failed charge).
    pub fn free_uncharged(&mut self, pfn: Pfn) {
        // Charge it to the root for the symmetric uncharge in free_folio.
        let _ = self.page_counter_try_charge(0, 1);
        self.pages[pfn as usize].memcg = 0;
        self.release_frame(pfn);
    }
}

/// Append `key` to a list of (key, run length), extending the last run when it is `key`.
fn push_run<K: PartialEq>(runs: &mut Vec<(K, u32)>, key: K) {
    match runs.last_mut() {
        Some((k, n)) if *k == key => *n += 1,
        _ => runs.push((key, 1)),
    }
}

impl Sim {
    /// zap_pte_range() over [lo, hi) of mm `mmid` (munmap, exit): clear the PTEs, drop swap
    /// entries and swap-cache folios, and free the folios through
    /// free_pages_and_swap_cache(), which first drains this CPU's LRU batches and then
    /// hands them to folios_put_refs a folio_batch (31) at a time, so the lru_lock is
    /// taken once per 31 folios (6.1's release_pages re-takes it every SWAP_CLUSTER_MAX,
    /// 32: modeled as 31, and its frees come after all its holds). A folio still
    /// sitting in another CPU's lru_add batch keeps only that batch's reference: it is dead
    /// there until the batch drains (seed 003). Clearing present PTEs ends in one TLB
    /// flush of the range (tlb_finish_mmu), a shootdown when other CPUs run the mm.
    pub async fn zap_pte_range(&self, mmid: u32, lo: u32, hi: u32) {
        let mut folios: Vec<Pfn> = Vec::new();
        // The nodes of the unmapped anon folios, and (memcg, node) of the file ones, in
        // order, as runs of equal keys: an exit of a large mm keeps a few runs, not an
        // entry per page.
        let mut anon_unmapped: Vec<(u32, u32)> = Vec::new();
        let mut file_unmapped: Vec<((u16, u32), u32)> = Vec::new();
        let memcg_id = self.mm.borrow().mms[mmid as usize].memcg;
        let mut cleared = false;
        {
            let mut mm = self.mm.borrow_mut();
            let memcg = mm.mms[mmid as usize].memcg as usize;
            for vpn in lo..hi {
                // Only PTEs in use are written: a large area's never-touched page table
                // stays untouched (no host memory).
                let slot = &mut mm.mms[mmid as usize].ptes[vpn as usize];
                if *slot == 0 {
                    continue;
                }
                let v = std::mem::take(slot);
                mm.mms[mmid as usize].sampled_note(vpn);
                if pte::present(v) && mm.pages[pte::pfn(v) as usize].is_file_lru() {
                    // A shared file page: unmap it; it stays in the page cache.
                    let pfn = pte::pfn(v);
                    mm.pages[pfn as usize].private -= 1;
                    let lv = mm.folio_lruvec(pfn) as usize;
                    mm.lruvecs[lv].mod_state(NodeStat::NrFileMapped, -1);
                    push_run(
                        &mut file_unmapped,
                        (mm.pages[pfn as usize].memcg, mm.pfn_node(pfn)),
                    );
                } else if pte::present(v) {
                    let pfn = pte::pfn(v);
                    mm.mms[mmid as usize].rss -= 1;
                    mm.mms[mmid as usize].set_wrprotect(vpn, false);
                    cleared = true;
                    if mm.folio_shared_anon(pfn) && mm.shared_mapcount_mod(pfn, false) > 1 {
                        // Other processes still map the folio (fork sharing).
                        continue;
                    }
                    let lv = mm.folio_lruvec(pfn) as usize;
                    mm.lruvecs[lv].mod_state(NodeStat::NrAnonMapped, -1);
                    push_run(&mut anon_unmapped, mm.pfn_node(pfn));
                    if !mm.folio_swapped(pfn) {
                        mm.delete_from_swap_cache(pfn);
                        mm.pages[pfn as usize].clear(PG_OWNED);
                        folios.push(pfn);
                    }
                } else if pte::is_swap(v) {
                    mm.mms[mmid as usize].swapents -= 1;
                    let slot = pte::slot(v);
                    let s = mm.swap.as_mut();
                    if s.as_ref().and_then(|s| s.swap_count(slot)).is_some()
                        && s.is_some_and(|s| s.swap_put(slot) > 0)
                    {
                        // Other processes' swap PTEs still refer to the slot.
                        continue;
                    }
                    match mm.swap.as_ref().map_or(SwapEnt::Free, |s| s.get(slot)) {
                        SwapEnt::Cached(pfn) if mm.folio_mapped(pfn) => {
                            // Another process mapped the shared folio back; it keeps it.
                        }
                        SwapEnt::Cached(pfn) => {
                            mm.delete_from_swap_cache(pfn);
                            mm.pages[pfn as usize].clear(PG_OWNED);
                            folios.push(pfn);
                        }
                        SwapEnt::Shadow(_) | SwapEnt::Swapped => {
                            mm.swap_free_slot(slot);
                            mm.mem_cgroup_uncharge_swap(memcg as super::MemcgId);
                        }
                        SwapEnt::Free => {}
                    }
                }
            }
        }
        self.e.charge(folios.len() as u64 * self.c.pte_unmap);
        if cleared || !file_unmapped.is_empty() {
            // tlb_finish_mmu(): the cleared present PTEs, flushed once for the range.
            self.flush_tlb_mm_range(&self.mm.borrow().mms[mmid as usize], mmid);
        }
        for (nid, n) in anon_unmapped {
            for _ in 0..n {
                self.memcg_stat_update(memcg_id, nid, StatKind::AnonMapped, -1);
            }
        }
        for ((m, nid), n) in file_unmapped {
            for _ in 0..n {
                self.memcg_stat_update(m, nid, StatKind::FileMapped, -1);
            }
        }
        // free_pages_and_swap_cache(): the drain, then folios_put_refs of each
        // folio_batch it fills (FOLIO_BATCH_SIZE folios): one lru_lock hold per batch.
        self.lru_add_drain().await;
        for batch in folios.chunks(super::FOLIO_BATCH_SIZE) {
            self.folios_put_refs(batch).await;
        }
    }
}
