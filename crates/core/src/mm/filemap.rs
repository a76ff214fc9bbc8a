//! Page-cache reads.
//!
//! Models mm/filemap.c's filemap_read() for one page per read with readahead off
//! (POSIX_FADV_RANDOM): a hit copies the page and calls folio_mark_accessed; a miss
//! allocates and charges a folio, inserts it in the page cache (a shadow entry found
//! there goes to workingset_refault), adds it to the LRU, reads it from the device, then
//! marks it accessed. Each file's cache is a dense array of u64 entries:
//! 0 = empty, PAGE | pfn = resident, SHADOW | shadow = evicted.
//! Inserting an entry allocates the xarray nodes it needs (576-byte radix_tree_node slab
//! objects), charged to the reader's memcg: they take room from the LRU pages a memcg can
//! hold. Nodes stay as long as the file (evicted pages leave shadows in them).
//! Simplified: files are clean (written before the run), no readahead or large folios,
//! no truncation. The shadow-node shrinker that frees nodes of shadows only is in
//! workingset.rs (count_shadow_nodes).
//! The end of a folio's writeback (folio_end_writeback, with its rotation of a PG_reclaim
//! folio) and the wait for it (folio_wait_writeback) are here too, as in mm/filemap.c;
//! only swap writes use them, as file folios are never written back.

use super::memcontrol::{KmemKind, XA_NODE_SIZE};
use super::mm_types::*;
use super::vmstat::NodeStat;
use super::Pfn;
use crate::sim::Sim;

const PAGE: u64 = 1 << 62;
const SHADOW: u64 = 2 << 62;
const VAL: u64 = (1 << 62) - 1;

/// A page-cache entry holding a shadow.
pub fn shadow_entry(shadow: u64) -> u64 {
    SHADOW | (shadow & VAL)
}

/// A page-cache entry holding a folio.
pub fn page_entry(pfn: Pfn) -> u64 {
    PAGE | pfn as u64
}

/// The folio of a page-cache entry, if resident.
pub fn entry_page(e: u64) -> Option<Pfn> {
    (e & !VAL == PAGE).then_some((e & VAL) as Pfn)
}

/// The shadow of a page-cache entry, if evicted.
pub fn entry_shadow(e: u64) -> Option<u64> {
    (e & !VAL == SHADOW).then_some(e & VAL)
}

/// A page-cache lookup of [`Sim::filemap_read_hit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cached {
    /// Not cached: the read goes on with [`Sim::filemap_read_miss`].
    Miss,
    /// Cached and marked accessed.
    Hit,
    /// Cached; the folio must go through folio_activate.
    HitActivate(Pfn),
}

/// What [`Sim::filemap_add_folio_and_read`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewFolio {
    /// Inserted and read from the device.
    Read(Pfn),
    /// Another task inserted it while this one allocated: that folio.
    Raced(Pfn),
    /// The allocation or a charge failed.
    Oom,
}

/// What a read did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    Hit,
    Miss,
    Oom,
}

impl Sim {
    /// The node allocation of __filemap_add_folio()'s xarray store at `index`: missing
    /// nodes are charged to `memcg` as slab; false when that charge fails.
    pub async fn xa_alloc_nodes(&self, file: u32, index: u32, memcg: u16) -> bool {
        let need = self.mm.borrow().files[file as usize].xa_missing(index);
        if need == 0 {
            return true;
        }
        if !self
            .memcg_kmem_charge(memcg, need * XA_NODE_SIZE, KmemKind::SlabReclaimable)
            .await
        {
            return false;
        }
        // Another task may have created some of them while we reclaimed.
        let node = self.current_node();
        let mut mm = self.mm.borrow_mut();
        let created = mm.xa_create(file, index, node);
        for _ in 0..created {
            mm.mod_objcg_state(memcg, XA_NODE_SIZE as i64);
        }
        mm.memcg_kmem_refund(
            memcg,
            (need - created) * XA_NODE_SIZE,
            KmemKind::SlabReclaimable,
        );
        true
    }

    /// filemap_read() of page `index` of file `file` by a task charged to `memcg`.
    pub async fn filemap_read(&self, file: u32, index: u32, memcg: u16, node: u32) -> Read {
        match self.filemap_read_hit(file, index) {
            Cached::Hit => Read::Hit,
            Cached::HitActivate(pfn) => {
                self.folio_activate(pfn).await;
                Read::Hit
            }
            Cached::Miss => self.filemap_read_miss(file, index, memcg, node).await,
        }
    }

    /// The part of filemap_read() that runs when the page is cached
    /// (filemap_get_read_batch finds it): the copy is charged and the folio marked
    /// accessed, unless the previous read of this open file ended in the same folio
    /// (pos_same_folio: a re-read is not a new access). Synchronous: a caller replaying
    /// many reads runs hits without an await, and queues the folio with folio_activate
    /// when told to.
    #[inline]
    pub fn filemap_read_hit(&self, file: u32, index: u32) -> Cached {
        let mut mm = self.mm.borrow_mut();
        let f = &mut mm.files[file as usize];
        let Some(pfn) = entry_page(f.cache[index as usize]) else {
            return Cached::Miss;
        };
        let same_folio = std::mem::replace(&mut f.ra_prev_index, index) == index;
        self.e.charge(self.c.file_read_hit);
        if same_folio {
            return Cached::Hit;
        }
        if mm.folio_mark_accessed(pfn, self.e.cpu()) {
            Cached::HitActivate(pfn)
        } else {
            Cached::Hit
        }
    }

    /// filemap_read() of a page [`Sim::filemap_read_hit`] has just found not cached (no
    /// await in between), up to the return to user space, where a memory.high debt the
    /// read's charges ran up is paid (mem_cgroup_handle_over_high).
    pub async fn filemap_read_miss(&self, file: u32, index: u32, memcg: u16, node: u32) -> Read {
        // The miss path of filemap_read(): allocate, charge, insert and read a new folio.
        let read = 'read: {
            let same_folio = {
                let mut mm = self.mm.borrow_mut();
                std::mem::replace(&mut mm.files[file as usize].ra_prev_index, index) == index
            };
            let (pfn, read) = match self
                .filemap_add_folio_and_read(file, index, memcg, node, false)
                .await
            {
                NewFolio::Oom => break 'read Read::Oom,
                NewFolio::Raced(other) => (other, Read::Hit),
                NewFolio::Read(pfn) => (pfn, Read::Miss),
            };
            self.e.charge(self.c.file_read_hit);
            if !same_folio && self.mm.borrow_mut().folio_mark_accessed(pfn, self.e.cpu()) {
                self.folio_activate(pfn).await;
            }
            read
        };
        if let Some((debt, memcg)) = self.over_high_on_return() {
            self.mem_cgroup_handle_over_high(memcg, debt).await;
        }
        read
    }

    /// A missing page-cache folio, brought in (page_cache_sync_ra's one page +
    /// filemap_read_folio): allocate and charge it to `memcg`, insert it (a shadow found
    /// there goes to workingset_refault), add it to the LRU and read it from the file's
    /// device, the task sleeping on the folio lock until the read completes. `in_fault`
    /// is lru_gen_in_fault(): true under a page fault (filemap_fault, which
    /// handle_mm_fault's lru_gen_enter_fault marks for a VMA with recency, as the model's
    /// text mappings all are), false for read(); with MGLRU it decides whether a recent
    /// refault counts WORKINGSET_ACTIVATE and whether folio_add_lru sets PG_active.
    pub(crate) async fn filemap_add_folio_and_read(
        &self,
        file: u32,
        index: u32,
        memcg: u16,
        node: u32,
        in_fault: bool,
    ) -> NewFolio {
        debug_assert!(
            entry_page(self.mm.borrow().files[file as usize].cache[index as usize]).is_none()
        );
        let Some(pfn) = self.alloc_charged_page(node, memcg).await else {
            return NewFolio::Oom;
        };
        // Another task may have brought it in while we reclaimed.
        let entry = self.mm.borrow().files[file as usize].cache[index as usize];
        if let Some(other) = entry_page(entry) {
            self.mm.borrow_mut().free_folio(pfn);
            return NewFolio::Raced(other);
        }
        // __filemap_add_folio(): the xarray store allocates any missing nodes, charged to
        // the reader's memcg (radix_tree_node slab objects are __GFP_ACCOUNT). Most stores
        // find their nodes in place: only a store that needs some awaits the charge.
        let need_nodes = self.mm.borrow().files[file as usize].xa_missing(index) > 0;
        if need_nodes && !self.xa_alloc_nodes(file, index, memcg).await {
            self.mm.borrow_mut().free_folio(pfn);
            return NewFolio::Oom;
        }
        {
            let mut mm = self.mm.borrow_mut();
            let p = &mut mm.pages[pfn as usize];
            p.set(PG_OWNED | PG_LOCKED);
            p.set_owner(file);
            p.index = index;
            mm.page_cache_store(file, index, page_entry(pfn));
            let lv = mm.folio_lruvec(pfn) as usize;
            mm.lruvecs[lv].mod_state(NodeStat::NrFilePages, 1);
        }
        if let Some(s) = entry_shadow(entry) {
            self.workingset_refault(pfn, s, in_fault).await;
        }
        self.folio_add_lru(pfn, in_fault).await;
        let done = self
            .mm
            .borrow_mut()
            .file_dev
            .submit_read(self.e.now())
            .done_at;
        self.e.sleep(done - self.e.now()).await;
        // The completion wakes the reader, from another CPU if the interrupt is there.
        let wakeup = (self.mm.borrow_mut().file_dev).read_wakeup(self.cpus_occupied.get());
        if wakeup > 0 {
            self.e.sleep(wakeup).await;
        }
        // The read completed: unlock the folio (it was safe from reclaim while locked).
        self.mm.borrow_mut().pages[pfn as usize].clear(PG_LOCKED);
        NewFolio::Read(pfn)
    }

    /// folio_end_writeback() for a swap write: clear PG_writeback; a folio marked
    /// PG_reclaim rotates to the inactive tail; a folio whose owner went away during the
    /// IO is freed (writeback held its last reference).
    pub(crate) async fn folio_end_writeback(&self, pfn: Pfn) {
        let (rotate, orphan) = {
            let mut mm = self.mm.borrow_mut();
            let lvf = mm.folio_lruvec(pfn) as usize;
            mm.lruvecs[lvf].mod_state(NodeStat::NrWriteback, -1);
            let p = &mut mm.pages[pfn as usize];
            p.clear(PG_WRITEBACK);
            (p.test_clear(PG_RECLAIM), !p.test(PG_OWNED))
        };
        if orphan {
            self.folio_put_last(pfn).await;
        } else if rotate {
            self.folio_rotate_reclaimable(pfn).await;
        }
        // folio_wake_bit(PG_writeback), when the folio has waiters.
        if self.folio_wait.active() {
            self.wake_up_all(&self.folio_wait);
        }
    }

    /// folio_wait_writeback(): sleep until the folio's writeback ends (its bio completion
    /// wakes the folio wait queue). Simplified: one queue for all folios, so a waiter may
    /// wake for another folio and sleeps again.
    pub(crate) async fn folio_wait_writeback(&self, pfn: Pfn) {
        while self.mm.borrow().pages[pfn as usize].test(PG_WRITEBACK) {
            let wq = self.folio_wait.clone();
            self.wait_event_timeout(&wq, None).await;
        }
    }
}
