//! fork(): a child process that shares its parent's anonymous memory copy-on-write.
//!
//! Models kernel/fork.c's dup_mmap() and mm/memory.c's copy_page_range() for an anonymous
//! private area. The child gets a PTE for every PTE of its parent: a present PTE is
//! write-protected in both (the folio's mapcount grows by one; the child's copy is old, as
//! copy_present_pte makes it) and a swap PTE is copied with one more reference on its slot
//! (swap_duplicate). Neither process can then write a shared page in place: the first
//! write takes do_wp_page (memory.rs), which copies the folio unless the writer has become
//! its only user. usemem --prealloc works this way: the parent maps and populates the area
//! before it forks its workers, which then share every page until each writes it.
//!
//! The rmap side follows the kernel's anon_vma chains in their simplest shape: a folio the
//! parent owns (or a shared folio read back from swap) is found through the parent, and
//! the walk visits the parent and every process forked from it at the folio's page
//! (`MmStruct::forks`); a folio a child allocates (its copy, a new page) is the child's
//! alone. Shared swap slots keep an explicit swap count (swapfile.rs).
//!
//! Simplified: one level of fork (a forked process does not fork again); the whole area is
//! one VMA and the program's text is not copied (each process maps its own, as spawned);
//! copying a PTE costs one `pte_map` (copy_pte_range's per-entry work), and the child's
//! page-table pages are charged to its memcg as they are allocated; no fork of a file
//! mapping.

use super::memcontrol::KmemKind;
use super::mm_types::*;
use super::PAGE_SIZE;
use super::{Pfn, PTRS_PER_PTE};
use crate::sim::Sim;

/// The pages of `m`'s anonymous area: its PTEs up to its text mapping, if it has one.
fn anon_area(m: &super::MmStruct) -> usize {
    m.text.map_or(m.ptes.len(), |t| t.base as usize)
}

impl Sim {
    /// dup_mmap(): give the new, empty mm `child` a copy of `parent`'s page tables, every
    /// page shared copy-on-write. False when a page-table page cannot be charged (fork
    /// fails with -ENOMEM; the caller tears down what was copied with exit_mmap).
    pub async fn dup_mmap(&self, parent: u32, child: u32) -> bool {
        {
            let mut mm = self.mm.borrow_mut();
            debug_assert!(
                mm.mms[parent as usize].fork_parent.is_none(),
                "a forked process forks again"
            );
            let n = anon_area(&mm.mms[parent as usize]);
            mm.mms[child as usize].grow(n);
            for m in [parent, child] {
                let m = &mut mm.mms[m as usize];
                if m.wrprotect.is_empty() {
                    m.wrprotect = vec![0; m.ptes.len().div_ceil(64)];
                }
            }
            if mm.mms[parent as usize].forks.is_empty() {
                // The parent's folios become shared ones now: their mapcounts start at the
                // parent's PTEs, before any is copied (reclaim may run between the PTE pages
                // copied below, and must see every mapping).
                let p = &mm.mms[parent as usize];
                let present: Vec<Pfn> = p.ptes[..anon_area(p)]
                    .iter()
                    .filter(|&&v| pte::present(v))
                    .map(|&v| pte::pfn(v))
                    .collect();
                for pfn in present {
                    mm.shared_mapcount.insert(pfn, 1);
                }
            }
            mm.mms[parent as usize].forks.push(child);
            mm.mms[child as usize].fork_parent = Some(parent);
        }
        let (tables, memcg) = {
            let mm = self.mm.borrow();
            let p = &mm.mms[parent as usize];
            let area_tables = anon_area(p).div_ceil(PTRS_PER_PTE);
            (
                p.pte_tables[..area_tables].to_vec(),
                mm.mms[child as usize].memcg,
            )
        };
        for (t, _) in tables.iter().enumerate().filter(|(_, &on)| on) {
            if !self
                .memcg_kmem_charge(memcg, PAGE_SIZE, KmemKind::Pagetables)
                .await
            {
                return false;
            }
            let lo = t * PTRS_PER_PTE;
            let copied = self.copy_pte_range(parent, child, lo);
            self.e.charge(copied * self.c.pte_map);
        }
        true
    }

    /// copy_pte_range() of the PTE page starting at `lo`: returns the PTEs copied.
    fn copy_pte_range(&self, parent: u32, child: u32, lo: usize) -> u64 {
        let mut mm = self.mm.borrow_mut();
        let mm = &mut *mm;
        let hi = (lo + PTRS_PER_PTE).min(anon_area(&mm.mms[parent as usize]));
        mm.mms[child as usize].pte_tables[lo / PTRS_PER_PTE] = true;
        let mut copied = 0;
        for vpn in lo..hi {
            let v = mm.mms[parent as usize].ptes[vpn];
            if pte::present(v) {
                // copy_present_pte(): write-protect both; the child's copy is old; the
                // folio's mapcount counts the parent's PTE and the child's.
                *mm.shared_mapcount.entry(pte::pfn(v)).or_insert(1) += 1;
                mm.mms[parent as usize].set_wrprotect(vpn as u32, true);
                mm.mms[parent as usize].sampled_note(vpn as u32);
                let c = &mut mm.mms[child as usize];
                c.ptes[vpn] = v & !pte::YOUNG;
                c.set_wrprotect(vpn as u32, true);
                c.sampled_note(vpn as u32);
                c.rss += 1;
            } else if pte::is_swap(v) {
                // copy_nonpresent_pte(): one more reference on the slot.
                let s = mm.swap.as_mut().expect("swap entry without swap");
                s.swap_duplicate(pte::slot(v), 1, 1);
                let c = &mut mm.mms[child as usize];
                c.ptes[vpn] = v;
                c.sampled_note(vpn as u32);
                c.swapents += 1;
            } else {
                continue;
            }
            copied += 1;
        }
        copied
    }
}
