//! TLB flushes after unmapping: the IPIs that make reclaim of a multi-threaded process
//! slower than reclaim of a single-threaded one.
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

use super::MmStruct;
use crate::engine::TaskId;
use crate::sim::Sim;

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
