//! struct page (the frame table) and the PTE encoding.
//!
//! Models include/linux/mm_types.h and include/linux/page-flags.h for base pages only (every
//! folio is order 0: no large folios, no THP). A frame is in four tables:
//!
//! ```text
//!   Page:    flags u16 | memcg u16 | owner u24 | lru_gen u8 | index u32 | private u32
//!                                                                           (16 bytes)
//!            lru_gen: bits 0-2 gen+1 | bits 3-4 refs | bits 5-7 unused
//!   LruLink: lru.prev u32 | lru.next u32 (classic lists, unevictable list)   (8 bytes)
//!   lru_pos: the folio's place on its MGLRU generation list (lru_gen/list.rs) (4 bytes)
//!   line_cpu: the CPU that last wrote the struct page line under lru_lock + 1 (1 byte)
//! ```
//! The tables are allocated zeroed and a page of one costs memory only once written, so
//! a frame costs 25 bytes with the classic LRU (the links) and 21 with MGLRU (the
//! position, plus its entry in a generation's array), not both.
//! The list links live apart from the rest (struct page keeps them together): unlinking a
//! folio writes its two neighbours, which are anywhere in the table, and a links-only
//! table is a third of the size, so those neighbours are far more often in cache.
//! `lru_gen` holds the two MGLRU fields the kernel keeps in folio->flags (Page.flags has
//! no bits left, so they take the top byte of a 32-bit owner, which 24 bits hold: at most
//! 16M mms and files, `scenario::MAX_FILES`). In the frame's own line, the scan of a
//! generation list, the aging walk and look-around read a folio's flags, memcg and
//! generation with one miss, where a byte table beside it cost a second random line per
//! folio (docs/bench.md). The generation counter (LRU_GEN_MASK: gen+1 while the folio is on one of
//! lrugen->folios[], 0 otherwise) and the tier counter of accesses through file
//! descriptors beyond the first (LRU_REFS_MASK, meaningful only while PG_referenced is
//! set). Only MGLRU writes it, and a freed frame must have it zero again, as the kernel
//! clears both fields at free (PAGE_FLAGS_CHECK_AT_PREP). See `lru_gen/folio.rs`.
//! `owner` is the mm (anon) or file (page cache) the folio belongs to, `index` its page offset
//! there (folio->index; on a free frame, the next frame of its node's free stack); together they are the reverse map: an anonymous folio is mapped by
//! exactly one PTE, `mms[owner].ptes[index]` (no fork sharing, no KSM); a file folio by one
//! PTE in each process mapping its file, at `map_base + index` (`files[owner].mappers`:
//! the MAP_SHARED file of a usemem area, or a program's text). `private` is the
//! swap slot while an anon folio is in the swap cache, and a file folio's mapcount. The page refcount is not kept as a number: its
//! holders are flags (`PG_HELD`): `PG_OWNED` (the page table or page-cache reference),
//! `PG_INBATCH` (a per-CPU LRU batch), `PG_ISOLATED` (a reclaimer), `PG_WRITEBACK` and
//! `PG_LOCKED` (a new folio's allocating task, or IO in flight). No holder left means refcount zero: the last one to let go
//! frees the folio, and `PG_DYING` marks it so nobody takes a new reference meanwhile.

/// On an LRU list (PG_lru).
pub const PG_LRU: u16 = 1 << 0;
/// On an active list (PG_active).
pub const PG_ACTIVE: u16 = 1 << 1;
/// Referenced once by a buffered access since last checked (PG_referenced).
pub const PG_REFERENCED: u16 = 1 << 2;
/// Was part of the workingset when evicted or deactivated (PG_workingset).
pub const PG_WORKINGSET: u16 = 1 << 3;
/// Anonymous (or shmem): backed by swap (PG_swapbacked).
pub const PG_SWAPBACKED: u16 = 1 << 4;
/// In the swap cache (PG_swapcache); `private` holds the slot.
pub const PG_SWAPCACHE: u16 = 1 << 5;
/// Content differs from its backing store (PG_dirty).
pub const PG_DIRTY: u16 = 1 << 6;
/// Under writeback IO (PG_writeback).
pub const PG_WRITEBACK: u16 = 1 << 7;
/// Rotate to the inactive tail when writeback ends (PG_reclaim).
pub const PG_RECLAIM: u16 = 1 << 8;
/// On the unevictable list (PG_unevictable).
pub const PG_UNEVICTABLE: u16 = 1 << 9;
/// Held by its owner: mapped by a PTE or in a page cache (the owner's refcount).
pub const PG_OWNED: u16 = 1 << 10;
/// Held by a per-CPU LRU batch (the batch's refcount).
pub const PG_INBATCH: u16 = 1 << 11;
/// Allocated (not on a free list).
pub const PG_ALLOCATED: u16 = 1 << 12;
/// Locked (PG_locked) by the task that allocated it until it is set up, and during its
/// read IO: reclaim's trylock fails and keeps it.
pub const PG_LOCKED: u16 = 1 << 13;
/// Its refcount reached zero and it is being freed: folio_try_get fails on it.
pub const PG_DYING: u16 = 1 << 14;
/// Taken off its LRU by a reclaimer (the isolation reference of isolate_lru_folios).
pub const PG_ISOLATED: u16 = 1 << 15;
/// Every holder of a reference besides the LRU itself.
pub const PG_HELD: u16 = PG_INBATCH | PG_OWNED | PG_WRITEBACK | PG_LOCKED | PG_ISOLATED;

/// One frame of the frame table. All-zero is a never-used free frame, so the table can be
/// allocated zeroed and costs no RSS until a frame is first used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Zeroable)]
#[repr(C)]
pub struct Page {
    pub flags: u16,
    pub memcg: u16,
    /// `owner`'s low 16 and high 8 bits (see `Page::owner`).
    owner_lo: u16,
    owner_hi: u8,
    /// MGLRU's gen+1 and refs (the kernel's LRU_GEN_MASK and LRU_REFS_MASK bits of
    /// folio->flags); see `lru_gen/folio.rs`.
    pub lru_gen: u8,
    pub index: u32,
    pub private: u32,
}

const _: () = assert!(std::mem::size_of::<Page>() == 16);

/// A frame's LRU list links (folio->lru), meaningful while PG_lru is set; NIL ends a list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Zeroable)]
#[repr(C)]
pub struct LruLink {
    pub prev: u32,
    pub next: u32,
}

/// The frame table: the frames and their LRU links, both indexed by pfn. It derefs to the
/// frames, so `frames[pfn]` is the Page.
pub struct Frames {
    pages: Vec<Page>,
    pub links: Vec<LruLink>,
    /// A folio's position on its MGLRU generation list (lru_gen/list.rs), meaningful
    /// while the folio is on one; MGLRU keeps its lists there instead of in `links`.
    pub lru_pos: Vec<u32>,
    /// The CPU that last wrote the frame's struct page line under an lru_lock, plus one
    /// (0: unknown); see `lru_lines.rs`.
    pub line_cpu: Vec<u8>,
}

impl Frames {
    /// `n` never-used frames, allocated zeroed (calloc: frames the process never writes
    /// are never made resident).
    pub fn zeroed(n: usize) -> Self {
        Frames {
            pages: zeroed_table(n),
            links: zeroed_table(n),
            lru_pos: zeroed_table(n),
            line_cpu: zeroed_table(n),
        }
    }
}

/// A table of `n` zeroed items (calloc: pages never written cost no memory); from
/// [`HUGE_TABLE_MIN`] bytes on, its whole 2 MiB stretches the host may back with
/// transparent huge pages (madvise MADV_HUGEPAGE: a hint; with THP off or unsupported the
/// table is as before).
///
/// The model's big tables (frames, PTEs, swap maps) are read at random pfns, slots and
/// virtual pages. Huge pages trade a cost paid once per byte for a gain per random read:
/// the kernel zeroes a whole 2 MiB page at its first touch (on the reference VM four
/// to six times the time per byte of 4 KiB faults: `large`, whose tables of a few hundred
/// MB are filled once and read mostly in order, paid a second of system time for no
/// user time saved), while each random read of a table whose own 4 KiB page-table
/// entries (2 MiB of them per GiB) outgrow the core's caches misses the TLB and walks to
/// memory. Seed 001 at full scale (268M frames: a 4.3 GB frame table) spent a third less
/// time in its memory.reclaim phase with huge pages on one machine and about the same on
/// another (docs/bench.md). Contents and results do not change.
pub fn zeroed_table<T: bytemuck::Zeroable>(n: usize) -> Vec<T> {
    let v: Vec<T> = bytemuck::allocation::zeroed_vec(n);
    let bytes = std::mem::size_of_val(v.as_slice());
    if bytes >= HUGE_TABLE_MIN {
        advise_huge_pages(v.as_ptr() as usize, bytes);
    }
    v
}

/// The size from which [`zeroed_table`] advises huge pages.
pub const HUGE_TABLE_MIN: usize = 1 << 30;

/// A zeroed table of `n` items whose whole 2 MiB stretches are advised, whatever its size.
fn zeroed_huge_table<T: bytemuck::Zeroable>(n: usize) -> Vec<T> {
    let v: Vec<T> = bytemuck::allocation::zeroed_vec(n);
    advise_huge_pages(v.as_ptr() as usize, std::mem::size_of_val(v.as_slice()));
    v
}

/// Vec::resize of a table to `n` elements with zeros, for tables that grow during a run
/// (a trace replay's page cache, id map and PTEs): once the table reaches a huge page, each
/// reallocation goes to a new zeroed table of at least twice the capacity whose whole
/// 2 MiB stretches are advised, so the table keeps to huge pages (a Vec's own reallocation
/// moves the old 4 KiB pages along). These tables are read at random once per request,
/// so they take huge pages from 2 MiB on (the replay of a 20M-request trace over 1M
/// objects, 8 MB tables, ran in 0.94 of the time). Contents and results are those of
/// Vec::resize.
pub fn grow_table<T: bytemuck::Zeroable + Copy>(v: &mut Vec<T>, n: usize) {
    if n <= v.len() {
        return;
    }
    if n > v.capacity() && std::mem::size_of::<T>() * n >= HUGE_PAGE {
        let mut t: Vec<T> = zeroed_huge_table(n.max(v.capacity() * 2));
        t[..v.len()].copy_from_slice(v);
        t.truncate(n);
        *v = t;
    } else {
        v.resize(n, T::zeroed());
    }
}

/// The host's huge page (x86-64, and arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

/// madvise(MADV_HUGEPAGE) over the whole 2 MiB stretches of `[start, start + len)`.
fn advise_huge_pages(start: usize, len: usize) {
    let first = start.next_multiple_of(HUGE_PAGE);
    let last = (start + len) / HUGE_PAGE * HUGE_PAGE;
    #[cfg(target_os = "linux")]
    if last > first {
        // SAFETY: advice over memory the table owns; it changes no contents, and a
        // refusal (no THP in this kernel) leaves the table as it was.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_HUGEPAGE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (first, last);
}

impl std::ops::Deref for Frames {
    type Target = [Page];
    #[inline]
    fn deref(&self) -> &[Page] {
        &self.pages
    }
}

impl std::ops::DerefMut for Frames {
    #[inline]
    fn deref_mut(&mut self) -> &mut [Page] {
        &mut self.pages
    }
}

/// Mms and files a frame can name as its owner: `Page::owner` is 24 bits.
pub const MAX_OWNERS: u32 = 1 << 24;

impl Page {
    /// A frame with these flags and every other field zero.
    #[inline]
    pub fn with_flags(flags: u16) -> Page {
        Page {
            flags,
            ..Page::default()
        }
    }
    /// The mm (anon) or file (page cache) the folio belongs to.
    #[inline]
    pub fn owner(&self) -> u32 {
        self.owner_lo as u32 | (self.owner_hi as u32) << 16
    }
    /// Set the owner (below MAX_OWNERS: the scenario's limits keep mm and file ids there).
    #[inline]
    pub fn set_owner(&mut self, owner: u32) {
        debug_assert!(owner < MAX_OWNERS, "owner {owner} over 24 bits");
        self.owner_lo = owner as u16;
        self.owner_hi = (owner >> 16) as u8;
    }
    #[inline]
    pub fn test(&self, f: u16) -> bool {
        self.flags & f != 0
    }
    #[inline]
    pub fn set(&mut self, f: u16) {
        self.flags |= f;
    }
    #[inline]
    pub fn clear(&mut self, f: u16) {
        self.flags &= !f;
    }
    /// Test and clear (folio_test_clear_*).
    #[inline]
    pub fn test_clear(&mut self, f: u16) -> bool {
        let r = self.flags & f != 0;
        self.flags &= !f;
        r
    }
}

/// PTE encoding (u32): present = bit 31 with the pfn in bits 0..=28 and young (bit 30) and
/// dirty (bit 29); a swap entry = bit 30 alone with the slot in bits 0..=29; 0 = none.
pub mod pte {
    pub const PRESENT: u32 = 1 << 31;
    pub const YOUNG: u32 = 1 << 30;
    pub const DIRTY: u32 = 1 << 29;
    pub const SWAP: u32 = 1 << 30;
    pub const PFN_MASK: u32 = (1 << 29) - 1;
    pub const SLOT_MASK: u32 = (1 << 30) - 1;

    #[inline]
    pub fn present(p: u32) -> bool {
        p & PRESENT != 0
    }
    #[inline]
    pub fn pfn(p: u32) -> u32 {
        p & PFN_MASK
    }
    #[inline]
    pub fn is_swap(p: u32) -> bool {
        p & PRESENT == 0 && p & SWAP != 0
    }
    #[inline]
    pub fn slot(p: u32) -> u32 {
        p & SLOT_MASK
    }
    #[inline]
    pub fn mk_present(pfn: u32, young: bool, dirty: bool) -> u32 {
        PRESENT | pfn | if young { YOUNG } else { 0 } | if dirty { DIRTY } else { 0 }
    }
    #[inline]
    pub fn mk_swap(slot: u32) -> u32 {
        SWAP | slot
    }
    /// Does an access through PTE `p` fault, as the MMU decides: the PTE is not present
    /// (handle_pte_fault's do_anonymous_page, do_swap_page or do_fault), or the access is a
    /// write and the PTE write-protected (its do_wp_page). A write to a present writable
    /// PTE, or a read of a present one, only sets the accessed (and dirty) bits.
    #[inline]
    pub fn access_faults(p: u32, write: bool, wrprotected: bool) -> bool {
        !present(p) || (write && wrprotected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_faults_on_a_missing_pte_and_a_write_on_a_write_protected_one() {
        let mut m = crate::mm::MmStruct::new(4, 1, 0, 0);
        m.ptes[1] = pte::mk_present(7, false, false);
        m.ptes[2] = pte::mk_present(8, false, false);
        m.wrprotect = vec![0; 1]; // as fork leaves it
        m.set_wrprotect(2, true);
        m.ptes[3] = pte::mk_swap(5);
        for (vpn, read, write) in [
            (0, true, true),
            (1, false, false),
            (2, false, true),
            (3, true, true),
        ] {
            assert_eq!(m.access_faults(vpn, false), read, "read of {vpn}");
            assert_eq!(m.access_faults(vpn, true), write, "write of {vpn}");
        }
    }

    /// The owner takes 24 bits and the generation byte the 8 above them: writing one never
    /// changes the other, over the owner's whole range.
    #[test]
    fn the_owner_and_the_generation_byte_share_a_word_without_touching_each_other() {
        let mut p = Page::with_flags(PG_LRU);
        for owner in [0, 1, 0xffff, 0x1_0000, 0xab_cdef, MAX_OWNERS - 1] {
            for byte in [0u8, 0x5a, 0xff] {
                p.lru_gen = byte;
                p.set_owner(owner);
                assert_eq!((p.owner(), p.lru_gen), (owner, byte));
                p.lru_gen = !byte;
                assert_eq!((p.owner(), p.lru_gen), (owner, !byte));
            }
        }
        assert_eq!((p.flags, p.memcg, p.index, p.private), (PG_LRU, 0, 0, 0));
    }

    /// The VmFlags line of the mapping of /proc/self/smaps that holds `addr`.
    fn vm_flags_at(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = lo <= addr && addr < hi;
                        continue;
                    }
                }
            }
            if inside && line.starts_with("VmFlags:") {
                return line.to_string();
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn a_table_from_a_gib_is_zeroed_and_its_whole_huge_pages_advised() {
        // A GiB and 6 MiB of bytes: calloc maps it, and nothing is touched but what the
        // checks read (one 4 KiB page per look, or one huge page).
        let t: Vec<u8> = zeroed_table(HUGE_TABLE_MIN + (6 << 20));
        assert_eq!(t.len(), HUGE_TABLE_MIN + (6 << 20));
        assert!(t[..4096]
            .iter()
            .chain(&t[t.len() - 4096..])
            .all(|&x| x == 0));
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            return; // a kernel without THP refuses the advice, and the table is as before
        }
        let start = t.as_ptr() as usize;
        let end = start + t.len();
        // madvise splits the mapping: the whole 2 MiB stretches carry VM_HUGEPAGE ("hg"),
        // the first and the last of them included ...
        let first = start.next_multiple_of(HUGE_PAGE);
        let last = end / HUGE_PAGE * HUGE_PAGE;
        assert!(last >= first + HUGE_PAGE);
        assert!(vm_flags_at(first).contains(" hg"), "{}", vm_flags_at(first));
        assert!(vm_flags_at(last - 1).contains(" hg"));
        // ... and nothing outside them: the part stretches at either end stay as they were.
        if first > start {
            assert!(!vm_flags_at(first - 1).contains(" hg"));
        }
        if end > last {
            assert!(!vm_flags_at(last).contains(" hg"));
        }
        // Below a GiB a table is not advised, though it spans whole huge pages (6 MiB),
        // and neither is one smaller than a huge page.
        let mid: Vec<u64> = zeroed_table(3 << 18);
        let at = (mid.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
        assert!(!vm_flags_at(at).contains(" hg"), "{}", vm_flags_at(at));
        let small: Vec<u32> = zeroed_table(1000);
        assert!(!vm_flags_at(small.as_ptr() as usize).contains(" hg"));
    }

    #[test]
    fn a_growing_table_keeps_its_contents_and_moves_to_advised_memory_past_a_huge_page() {
        let counting = |t: &[u64], upto: usize| {
            t[..upto]
                .iter()
                .enumerate()
                .all(|(i, &x)| x == i as u64 + 1)
        };
        // Below a huge page it grows as Vec::resize does.
        let mut t: Vec<u64> = (1..=1000).collect();
        grow_table(&mut t, 1500);
        assert_eq!(t.len(), 1500);
        assert!(counting(&t, 1000));
        assert!(t[1000..].iter().all(|&x| x == 0));
        // Growing past 2 MiB (262,144 u64; here to 8 MB) reallocates, the contents copied
        // and the rest zero.
        grow_table(&mut t, 1_000_000);
        assert_eq!(t.len(), 1_000_000);
        assert!(t.capacity() >= 1_000_000);
        assert!(counting(&t, 1000));
        assert!(t[1000..].iter().all(|&x| x == 0));
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            // Its first whole huge page is advised.
            let first = (t.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
            assert!(vm_flags_at(first).contains(" hg"), "{}", vm_flags_at(first));
        }
        // One past a full capacity: at least twice the capacity, as Vec's growth gives.
        t[999_999] = 7;
        let cap = t.capacity();
        grow_table(&mut t, cap + 1);
        assert_eq!(t.len(), cap + 1);
        assert!(t.capacity() >= 2 * cap, "{} < 2 x {cap}", t.capacity());
        assert!(counting(&t, 1000));
        assert_eq!(t[999_999], 7);
        assert!(t[1_000_000..].iter().all(|&x| x == 0));
        // Up to exactly its capacity it stays where it is, zeros appended.
        let at = t.as_ptr();
        let c = t.capacity();
        grow_table(&mut t, c);
        assert_eq!(t.as_ptr(), at);
        assert_eq!(t.len(), c);
        assert_eq!(t[999_999], 7);
        assert!(t[1_000_000..].iter().all(|&x| x == 0));
        // A shorter length is a no-op (Vec::resize would truncate; the tables only grow).
        grow_table(&mut t, 10);
        assert_eq!(t.len(), c);
    }
}
