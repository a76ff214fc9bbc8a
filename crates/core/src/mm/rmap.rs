//! The reverse map: which PTEs map a folio, the walks over them (folio_referenced,
//! try_to_unmap), and the TLB flushes after unmapping.
//!
//! Models mm/rmap.c, with the mapcount helpers of include/linux/mm.h (folio_mapped,
//! folio_mapcount) and vma_address() of mm/internal.h. There are no anon_vma or
//! address_space interval trees: a folio's owner and index name its candidate PTEs
//! directly (mm_types.rs). An anonymous folio has one, in its owner's page table, plus
//! one per process forked from the owner (the anon_vma chain, fork.rs); a file folio has
//! one per process mapping its file, all at the same virtual page. The walk visits those
//! page tables in order and stops early only where the kernel's does (a shared anonymous
//! folio's walk ends once it met every mapping its mapcount counts). Simplified: no
//! large folios (one PTE per mapping), no KSM, no migration or device-private entries,
//! no VM_LOCKED mappings (try_to_unmap never fails here), and a folio's mapcount is kept
//! only for shared anonymous folios (`Mm::shared_mapcount`) and mapped file folios
//! (`private`); a folio one process owns reads its one PTE instead.
//!
//! ## TLB flushes after unmapping
//!
//! The IPIs that make reclaim of a multi-threaded process slower than reclaim of a
//! single-threaded one.
//!
//! When the kernel clears a present PTE, every CPU that may still cache the translation
//! must drop it before the page is reused. The local CPU does so with one instruction;
//! other CPUs running the same address space get an inter-processor interrupt, and the
//! initiator waits until each has flushed (flush_tlb_multi). try_to_unmap_one defers this
//! when another CPU is involved (should_defer_flush, set_tlb_ubc_flush_pending): the
//! reclaiming task collects the pending flush in its tlbflush_unmap_batch and sends one
//! round of IPIs for many folios at the end of shrink_folio_list (try_to_unmap_flush).
//! Except for a dirty folio whose PTE was writable: before pageout writes it, the flush is
//! done at once (try_to_unmap_flush_dirty), so that no CPU can write the page through a
//! stale TLB entry while it is under IO. Anonymous folios on their way to swap are such
//! folios, so reclaiming a process whose other threads run elsewhere costs one shootdown
//! per swapped-out folio. zap_pte_range (munmap, MADV_DONTNEED) flushes its range once, at
//! tlb_finish_mmu.
//!
//! On the reference machine (2 vCPUs) the shootdowns were most of the time of two threads'
//! swap faults under a memcg limit (docs/fidelity.md); a shootdown's cost
//! (`tlb_flush_ipi`) is measured by `reclaimsim calibrate` as the difference between
//! zapping one page with and without a thread of the same process running on the other
//! CPU.
//!
//! Simplified: the CPUs a flush reaches are those of the mm's other live threads, each
//! taken as running it (the kernel skips CPUs that went idle in lazy-TLB mode; the
//! workloads modeled are CPU-bound). The kernel's reclaim flush (arch_tlbbatch_flush)
//! goes to every non-lazy CPU of the mm's mm_cpumask, whichever mm it runs now, and since
//! Linux 6.14 x86 that mask keeps the CPUs the mm ran on before (trimmed at most once a
//! second), so a single-threaded process that migrated is shot down too; the model's
//! tasks never migrate (`kernel-run --pin` pins the kernel's tasks to the same CPUs,
//! crates/host/src/affinity.rs). One shootdown costs the initiator the same for
//! one target as for many (the IPIs go out together and the waits overlap). Each
//! interrupted thread loses `tlb_flush_ipi_target` (the interrupt and flush_tlb_func on
//! its CPU), taken before it next runs or, under a spinlock (spin_lock_irq turns
//! interrupts off), after the release ([`crate::engine::Engine::interrupt`]), so two
//! threads that reclaim each other's folios pay both ends of every shootdown; the
//! initiator does not wait longer when the target has interrupts off (the kernel's
//! lru_lock is taken with spin_lock_irq), and two threads of the mm sharing one CPU are
//! each charged the handler; a PTE counts
//! as writable when it is dirty (the modeled workloads map their pages by writing them);
//! dirty file folios are not written back by reclaim here, so only anonymous folios flush
//! before pageout.

use super::mm_types::*;
use super::vmstat::NodeStat;
use super::{Mm, MmStruct, Pfn, RMAP_PREFETCH_MMS};
use crate::engine::TaskId;
use crate::sim::Sim;

impl Mm {
    /// folio_referenced(): walk the reverse map, test and clear young PTE bits; returns
    /// the number of young PTEs (an anonymous folio has one candidate PTE, a mapped file
    /// folio one per process mapping its file). Whether a young mapping was VM_EXEC is
    /// [`Mm::folio_exec`] (the kernel returns the VMAs' flags beside the count).
    pub fn folio_referenced(&mut self, pfn: Pfn) -> u32 {
        self.folio_referenced_mms(pfn, None)
    }

    /// folio_referenced() that also lists, in `young_mms`, the mms whose PTE was young:
    /// MGLRU's folio_referenced_one runs lru_gen_look_around in each of those mappings.
    pub fn folio_referenced_mms(&mut self, pfn: Pfn, mut young_mms: Option<&mut Vec<u32>>) -> u32 {
        let n = self.folio_nr_mappers(pfn);
        if n == 0 {
            return 0;
        }
        // A shared anonymous folio's walk ends once it has met every mapping (the
        // kernel's pra.mapcount), at once if there is none.
        let mut left = if self.folio_shared_anon(pfn) {
            self.folio_mapcount(pfn)
        } else {
            u32::MAX
        };
        let vpn = self.folio_vpn(pfn) as usize;
        let mut young = 0;
        for k in 0..n {
            if left == 0 {
                break;
            }
            let mmid = self.folio_rmap_mm(pfn, k);
            self.mms[mmid as usize].sampled_sync(vpn as u32, vpn as u32 + 1);
            let pte_v = &mut self.mms[mmid as usize].ptes[vpn];
            if pte::present(*pte_v) && pte::pfn(*pte_v) == pfn {
                left -= 1;
                if *pte_v & pte::YOUNG != 0 {
                    *pte_v &= !pte::YOUNG;
                    young += 1;
                    if let Some(v) = young_mms.as_deref_mut() {
                        v.push(mmid);
                    }
                }
            }
        }
        young
    }

    /// Is the folio a page of a VM_EXEC file mapping (a program's text)?
    pub fn folio_exec(&self, pfn: Pfn) -> bool {
        let p = &self.pages[pfn as usize];
        p.test(PG_OWNED) && p.is_file_lru() && self.files[p.owner() as usize].exec
    }

    /// Prefetch the PTEs folio_referenced / try_to_unmap will read for `pfn` (the reverse
    /// map's candidates) and, for a page-cache folio, the mapping slot __remove_mapping
    /// will write its shadow to, so loops over isolated folios overlap those cache misses.
    #[inline]
    pub fn prefetch_rmap(&self, pfn: Pfn) {
        let p = &self.pages[pfn as usize];
        if p.test(PG_OWNED) && p.is_file_lru() {
            if let Some(slot) = self.files[p.owner() as usize].cache.get(p.index as usize) {
                super::prefetch(slot);
            }
        }
        // Every candidate PTE of the walk (a shared anonymous folio has one per process of
        // its fork family), up to RMAP_PREFETCH_MMS of them; whether any maps the folio is
        // not asked (a mapcount lookup costs more than the prefetch it would save).
        let n = self.folio_nr_mappers(pfn).min(RMAP_PREFETCH_MMS);
        if n > 0 {
            let i = self.folio_vpn(pfn) as usize;
            for k in 0..n {
                if let Some(v) = self.mms[self.folio_rmap_mm(pfn, k) as usize].ptes.get(i) {
                    super::prefetch(v);
                }
            }
        }
    }

    /// folio_mapped(): does any candidate PTE map the folio? (A shared anonymous folio's
    /// mapcount says so at once.)
    pub fn folio_mapped(&self, pfn: Pfn) -> bool {
        if self.folio_shared_anon(pfn) {
            return self.shared_mapcount.contains_key(&pfn);
        }
        let n = self.folio_nr_mappers(pfn);
        if n == 0 {
            return false;
        }
        let vpn = self.folio_vpn(pfn) as usize;
        (0..n).any(|k| {
            let v = self.mms[self.folio_rmap_mm(pfn, k) as usize].ptes[vpn];
            pte::present(v) && pte::pfn(v) == pfn
        })
    }

    /// How many processes the rmap walk visits for the folio: the owner of an anonymous
    /// folio and the processes forked from it (its anon_vma chain; fork.rs), every mapper
    /// of a file folio that has PTEs (mapcount > 0).
    #[inline]
    pub(crate) fn folio_nr_mappers(&self, pfn: Pfn) -> usize {
        let p = &self.pages[pfn as usize];
        if !p.test(PG_OWNED) {
            0
        } else if !p.is_file_lru() {
            1 + self.mms[p.owner() as usize].forks.len()
        } else if p.private == 0 {
            0
        } else {
            self.files[p.owner() as usize].mappers.len()
        }
    }

    /// The `k`-th process of the folio's rmap walk (k < folio_nr_mappers).
    #[inline(always)]
    pub(crate) fn folio_rmap_mm(&self, pfn: Pfn, k: usize) -> u32 {
        let p = &self.pages[pfn as usize];
        if p.is_file_lru() {
            self.files[p.owner() as usize].mappers[k]
        } else if k == 0 {
            p.owner()
        } else {
            self.mms[p.owner() as usize].forks[k - 1]
        }
    }

    /// Is the folio anonymous and owned by a process that has forked (its rmap walk
    /// visits the whole fork family, and its mapcount is kept in `shared_mapcount`)?
    #[inline]
    pub fn folio_shared_anon(&self, pfn: Pfn) -> bool {
        let p = &self.pages[pfn as usize];
        p.test(PG_OWNED) && !p.is_file_lru() && !self.mms[p.owner() as usize].forks.is_empty()
    }

    /// One more (`up`) or one less PTE maps the shared anonymous folio `pfn`: the _mapcount
    /// increment of folio_add_anon_rmap_pte() and folio_try_dup_anon_rmap_pte() (fork) and
    /// the decrement of folio_remove_rmap_pte(); returns the mapcount before. Simplified: a
    /// map entry only while the count is above zero (the kernel keeps the counter in the
    /// folio), and none for folios one process owns (their one candidate PTE says it).
    pub fn shared_mapcount_mod(&mut self, pfn: Pfn, up: bool) -> u32 {
        let c = self.shared_mapcount.entry(pfn).or_insert(0);
        let before = *c;
        if up {
            *c += 1;
        } else {
            debug_assert!(before > 0, "mapcount of folio {pfn} underflows");
            *c -= 1;
            if *c == 0 {
                self.shared_mapcount.remove(&pfn);
            }
        }
        before
    }

    /// folio_mapcount(): how many PTEs map the folio (the rmap walk's hits).
    pub fn folio_mapcount(&self, pfn: Pfn) -> u32 {
        if self.folio_shared_anon(pfn) {
            return self.shared_mapcount.get(&pfn).copied().unwrap_or(0);
        }
        let vpn = self.folio_vpn(pfn) as usize;
        (0..self.folio_nr_mappers(pfn))
            .filter(|&k| {
                let v = self.mms[self.folio_rmap_mm(pfn, k) as usize].ptes[vpn];
                pte::present(v) && pte::pfn(v) == pfn
            })
            .count() as u32
    }

    /// The virtual page at which the folio's candidate PTEs sit (vma_address()): an
    /// anonymous folio's index; a file folio's index past its file's mapping base.
    pub(crate) fn folio_vpn(&self, pfn: Pfn) -> u32 {
        let p = &self.pages[pfn as usize];
        if p.is_file_lru() {
            p.index + self.files[p.owner() as usize].map_base
        } else {
            p.index
        }
    }
}

impl Sim {
    /// try_to_unmap() of a mapped file folio: clear each mapper's PTE (NR_FILE_MAPPED
    /// drops per PTE), queue each mm's TLB flush, and leave the mapcount at zero.
    pub(crate) fn try_to_unmap_file(&self, mm: &mut Mm, pfn: Pfn, ubc: &mut TlbUbc) {
        let p = mm.pages[pfn as usize];
        let f = p.owner() as usize;
        let vpn = (p.index + mm.files[f].map_base) as usize;
        let lvf = mm.folio_lruvec(pfn) as usize;
        for k in 0..mm.files[f].mappers.len() {
            let mmid = mm.files[f].mappers[k];
            let v = mm.mms[mmid as usize].ptes[vpn];
            if !(pte::present(v) && pte::pfn(v) == pfn) {
                continue;
            }
            mm.mms[mmid as usize].ptes[vpn] = 0;
            mm.mms[mmid as usize].sampled_note(vpn as u32);
            mm.lruvecs[lvf].mod_state(NodeStat::NrFileMapped, -1);
            self.e.charge(self.c.pte_unmap);
            self.set_tlb_ubc_flush_pending(ubc, &mm.mms[mmid as usize], mmid, false);
        }
        mm.pages[pfn as usize].private = 0;
    }

    /// try_to_unmap() of a mapped anonymous folio in the swap cache: each PTE the rmap
    /// walk finds mapping it becomes the swap entry (its dirty bit moves to the folio),
    /// queueing its mm's TLB flush. The slot's swap count counts the PTEs replaced when
    /// it is explicit (a folio of forked processes; swapfile.rs).
    pub(crate) fn try_to_unmap_anon(&self, mm: &mut Mm, pfn: Pfn, ubc: &mut TlbUbc) {
        let pg = mm.pages[pfn as usize];
        let slot = pg.private;
        let vpn = pg.index as usize;
        let mut replaced = 0;
        let family = mm.folio_shared_anon(pfn);
        let mapcount = if family {
            mm.shared_mapcount.remove(&pfn).unwrap_or(0)
        } else {
            u32::MAX
        };
        for k in 0..mm.folio_nr_mappers(pfn) {
            if replaced == mapcount {
                break;
            }
            let mmid = mm.folio_rmap_mm(pfn, k) as usize;
            let v = mm.mms[mmid].ptes[vpn];
            if !(pte::present(v) && pte::pfn(v) == pfn) {
                continue;
            }
            mm.mms[mmid].ptes[vpn] = pte::mk_swap(slot);
            mm.mms[mmid].sampled_note(vpn as u32);
            mm.mms[mmid].rss -= 1;
            mm.mms[mmid].swapents += 1;
            if v & pte::DIRTY != 0 {
                mm.pages[pfn as usize].set(PG_DIRTY);
            }
            self.e.charge(self.c.pte_unmap);
            let dirty = v & pte::DIRTY != 0;
            self.set_tlb_ubc_flush_pending(ubc, &mm.mms[mmid], mmid as u32, dirty);
            replaced += 1;
        }
        debug_assert!(
            !family || replaced == mapcount,
            "folio {pfn}: mapcount {mapcount}, {replaced} PTEs"
        );
        let lvf = mm.folio_lruvec(pfn) as usize;
        mm.lruvecs[lvf].mod_state(NodeStat::NrAnonMapped, -1);
        let s = mm.swap.as_mut().expect("swapcache folio without swap");
        if family || s.swap_count(slot).is_some() {
            s.swap_duplicate(slot, 0, replaced);
        }
    }
}

/// The reclaiming task's pending TLB flush (the kernel's tlbflush_unmap_batch).
#[derive(Debug, Default)]
pub struct TlbUbc {
    /// A PTE another CPU may cache was cleared and not flushed yet.
    flush_required: bool,
    /// One of those PTEs was writable (try_to_unmap_flush_dirty must flush).
    writable: bool,
    /// The threads the flush will interrupt, with their address space (the kernel's
    /// batch cpumask): (task, mm id).
    targets: Vec<(TaskId, u32)>,
}

impl Sim {
    /// The other live threads of address space `mmid`, on CPUs other than this one: the
    /// CPUs a flush of it must reach.
    fn tlb_flush_target_tasks<'a>(
        &'a self,
        mm: &'a MmStruct,
        mmid: u32,
    ) -> impl Iterator<Item = TaskId> + 'a {
        let me = self.e.cpu();
        mm.tasks
            .iter()
            .copied()
            .filter(move |&t| self.e.task_cpu_tagged(t, mmid).is_some_and(|c| c != me))
    }

    /// One round of shootdown IPIs: the initiator waits for it (`tlb_flush_ipi`), and
    /// each target that still runs the mm spends `tlb_flush_ipi_target` in the handler.
    fn shootdown(&self, targets: impl Iterator<Item = (TaskId, u32)>) {
        self.e.charge(self.c.tlb_flush_ipi);
        for (t, mmid) in targets {
            if self.e.task_cpu_tagged(t, mmid).is_some() {
                self.e.interrupt(t, self.c.tlb_flush_ipi_target);
            }
        }
    }

    /// set_tlb_ubc_flush_pending(): try_to_unmap_one cleared a present PTE of `mmid`. With
    /// another CPU running the mm the flush is deferred into `ubc` (should_defer_flush);
    /// else it is the local flush that `pte_unmap` already charges.
    pub fn set_tlb_ubc_flush_pending(
        &self,
        ubc: &mut TlbUbc,
        mm: &MmStruct,
        mmid: u32,
        writable: bool,
    ) {
        for t in self.tlb_flush_target_tasks(mm, mmid) {
            ubc.flush_required = true;
            ubc.writable |= writable;
            if !ubc.targets.contains(&(t, mmid)) {
                ubc.targets.push((t, mmid));
            }
        }
    }

    /// try_to_unmap_flush(): one round of shootdown IPIs for every flush `ubc` holds.
    pub fn try_to_unmap_flush(&self, ubc: &mut TlbUbc) {
        if ubc.flush_required {
            self.shootdown(ubc.targets.drain(..));
        }
        ubc.flush_required = false;
        ubc.writable = false;
        ubc.targets.clear();
    }

    /// try_to_unmap_flush_dirty(): flush now if a writable PTE was cleared, before a dirty
    /// folio goes to pageout.
    pub fn try_to_unmap_flush_dirty(&self, ubc: &mut TlbUbc) {
        if ubc.writable {
            self.try_to_unmap_flush(ubc);
        }
    }

    /// tlb_finish_mmu()'s flush of a zapped range of `mmid` that cleared present PTEs:
    /// one shootdown when another CPU runs the mm.
    pub fn flush_tlb_mm_range(&self, mm: &MmStruct, mmid: u32) {
        let mut targets = self.tlb_flush_target_tasks(mm, mmid).peekable();
        if targets.peek().is_some() {
            self.shootdown(targets.map(|t| (t, mmid)));
        }
    }
}
