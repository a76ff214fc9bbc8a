//! Populating a mapping through get_user_pages (mm/gup.c).
//!
//! mmap(MAP_POPULATE), which usemem's --prefault uses, and madvise(MADV_POPULATE_WRITE)
//! do not touch the pages from user space: __mm_populate walks the range with
//! __get_user_pages, which faults each missing page in (faultin_page -> handle_mm_fault,
//! a write fault for a private writable mapping, so the PTE is young and dirty as after a
//! user write on x86) and then looks the page up again (follow_page_pte). Population
//! asks for FOLL_TOUCH, and FOLL_TOUCH marks the folio accessed: folio_mark_accessed sets
//! PG_referenced on the new folio. So a populated page carries two references where a
//! touched one carries one, and the classic LRU's first reference check activates it
//! (folio_check_references: a young PTE on a folio already referenced) instead of giving
//! it one more trip round the inactive list. With MGLRU the touch counts toward the
//! folio's tier instead (lru_gen_inc_refs).
//!
//! Simplified: the fault is the model's handle_mm_fault (its cost is a user fault's,
//! entry included, where GUP calls the fault handler directly); only the anonymous
//! private case is modeled, the one usemem uses.

use super::mm_types::pte;
use crate::sim::Sim;

impl Sim {
    /// follow_page_pte()'s FOLL_TOUCH on page `vpn` of `mmid` after population faulted it
    /// in: folio_mark_accessed on the folio the PTE maps (the dirty half of FOLL_TOUCH has
    /// nothing to do: the write fault left the PTE dirty). A folio that is on an LRU and
    /// was referenced already is queued for activation (folio_activate). Nothing when
    /// the page is not mapped (reclaim took it before the look-up: GUP would fault it
    /// again; the model leaves it to the next access).
    pub async fn follow_page_touch(&self, mmid: u32, vpn: u32) {
        let v = self.mm.borrow().mms[mmid as usize].ptes[vpn as usize];
        if !pte::present(v) {
            return;
        }
        let pfn = pte::pfn(v);
        if self.mm.borrow_mut().folio_mark_accessed(pfn, self.e.cpu()) {
            self.folio_activate(pfn).await;
        }
    }
}
