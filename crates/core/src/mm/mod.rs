//! The memory-management model, under kernel names.
//!
//! One file per kernel file it models (this one: the types of include/linux/mm.h and
//! mm_types.h that hold the state: struct mm_struct, the page cache of a file, [`Mm`]):
//!
//! | file             | kernel file                    | holds                                              |
//! |------------------|--------------------------------|----------------------------------------------------|
//! | `mm_types.rs`    | include/linux/mm_types.h, page-flags.h | struct page (the frame table), PTE encoding |
//! | `mm_inline.rs`   | include/linux/mm_inline.h      | folio_lru_list, lruvec_add/del_folio, update_lru_size |
//! | `mmzone.rs`      | include/linux/mmzone.h         | pglist_data (node), lruvec, LRU lists               |
//! | `vmstat.rs`      | mm/vmstat.c, vm_event_item.h   | counter enums and their /proc/vmstat names          |
//! | `page_alloc.rs`  | mm/page_alloc.c                | watermarks, allocation slow path, freeing           |
//! | `vmscan.rs`      | mm/vmscan.c                    | kswapd, direct and memcg reclaim, shrink_*          |
//! | `rmap.rs`        | mm/rmap.c                      | rmap walks (folio_referenced, try_to_unmap), TLB flush batching |
//! | `workingset.rs`  | mm/workingset.c                | shadow entries, refault distance, activation        |
//! | `lru_gen/`       | mm/vmscan.c (lru_gen), mm_inline.h | MGLRU, one file per section of vmscan.c (see its mod.rs) |
//! | `swap.rs`        | mm/swap.c                      | per-CPU LRU batches, mark_accessed, lru_note_cost   |
//! | `swapfile.rs`    | mm/swapfile.c, swap_state.c    | swap slots and the swap cache's slot table, folio_free_swap |
//! | `swap_state.rs`  | mm/swap_state.c                | a folio leaving the swap cache, swap readahead (cluster and VMA) |
//! | `shmem.rs`       | mm/shmem.c                     | which shmem swap-ins read ahead (shmem_swapin_folio) |
//! | `slub.rs`        | mm/slub.c                      | the radix_tree_node slabs shadow nodes live in, discard |
//! | `memcontrol.rs`  | mm/memcontrol.c, page_counter.c| memcg tree, charge, protection, iteration, stats    |
//! | `memory.rs`      | mm/memory.c                    | the anon and swap page-fault paths, zap_pte_range   |
//! | `fork.rs`        | kernel/fork.c, mm/memory.c     | dup_mmap, copy_page_range (copy-on-write sharing)   |
//! | `gup.rs`         | mm/gup.c                       | MAP_POPULATE through get_user_pages                 |
//! | `filemap.rs`     | mm/filemap.c                   | page-cache reads, folio_end_writeback               |
//! | `oom_kill.rs`    | mm/oom_kill.c                  | victim selection and teardown                       |
//! | `lru_lines.rs`   | (none: the cache lines of list operations) | which CPU last wrote each line under lru_lock |
//! | `check.rs`       | (none: VM_BUG_ON-style checks) | the model's invariants, in one pass                 |
//! | `sampled_access.rs` | (none: the MMU's accessed bits) | a memoryless workload's young bits, drawn when read |
//!
//! The block layer's plug (block/blk-core.c), which reclaim uses, is `engine/blk.rs`.
//!
//! All state lives in [`Mm`]; the async kernel paths are methods of [`crate::sim::Sim`] that
//! borrow it between synchronization points and never across an `.await`.

pub mod check;
pub mod filemap;
pub mod fork;
pub mod gup;
pub mod lru_gen;
pub mod lru_lines;
pub mod memcontrol;
pub mod memory;
pub mod mm_inline;
pub mod mm_types;
pub mod mmzone;
pub mod oom_kill;
pub mod page_alloc;
pub mod rmap;
pub mod sampled_access;
pub mod shmem;
pub mod slub;
pub mod swap;
pub mod swap_state;
pub mod swapfile;
pub mod trace_vmscan;
pub mod vmscan;
pub mod vmstat;
pub mod workingset;

use crate::engine::TaskId;
use memcontrol::Memcg;
use mmzone::{Lruvec, PgData};
use swap::CpuBatches;
use swapfile::SwapInfo;
use vmstat::NR_VM_EVENTS;

/// Bytes in a base page (PAGE_SIZE); the simulator has no large folios yet.
pub const PAGE_SIZE: u64 = 4096;
/// Units of scanning and reclaim (SWAP_CLUSTER_MAX).
pub const SWAP_CLUSTER_MAX: u64 = 32;
/// Reclaim priorities count down from here; a pass scans size >> priority.
pub const DEF_PRIORITY: i32 = 12;
/// Retries of the allocator, memcg charge and memory.reclaim (MAX_RECLAIM_RETRIES).
pub const MAX_RECLAIM_RETRIES: u32 = 16;
/// memcg charge batch and stat flush batch (MEMCG_CHARGE_BATCH).
pub const MEMCG_CHARGE_BATCH: u64 = 64;
/// Per-CPU LRU batch capacity (folio_batch, v6.10 on; rule folio_batch_size_31).
pub const FOLIO_BATCH_SIZE: usize = 31;
/// Per-CPU LRU batch capacity before v6.10 (pagevec's PAGEVEC_SIZE).
pub const PAGEVEC_SIZE: usize = 15;
/// BLK_MAX_REQUEST_COUNT: requests a plug holds before it is flushed (one device).
pub const BLK_MAX_REQUEST_COUNT: usize = 32;
/// Index of a memcg (the root is 0).
pub type MemcgId = u16;
/// Index of a lruvec in [`Mm::lruvecs`].
pub type LruvecId = u32;
/// A page frame number: index into the frame table.
pub type Pfn = u32;
/// "No page" in links and lookups.
pub const NIL: u32 = u32::MAX;

/// A process address space: one anonymous area (usemem) with its page table.
pub struct MmStruct {
    /// PTEs of the area, indexed by virtual page number (see `mm_types::pte`).
    pub ptes: Vec<u32>,
    /// The memcg the process is charged to.
    pub memcg: MemcgId,
    /// Home node (first CPU's node): pages are allocated there first.
    pub node: u32,
    /// Resident anon pages (MM_ANONPAGES).
    pub rss: u64,
    /// Swap entries (MM_SWAPENTS).
    pub swapents: u64,
    /// Workload index, for OOM reports.
    pub workload: u32,
    /// False once exited or OOM-killed.
    pub alive: bool,
    /// Killed by the OOM killer (tsk_is_oom_victim), and its memory gone since
    /// (MMF_OOM_SKIP): an OOM finding a victim without the latter waits for it.
    pub oom_victim: bool,
    pub oom_skip: bool,
    /// Tasks (threads) of this process.
    pub tasks: Vec<TaskId>,
    /// A file mapped MAP_SHARED over the whole area (page i of the area = page i of the
    /// file); None = anonymous memory.
    pub file: Option<u32>,
    /// Which PTE pages (one per 512 virtual pages) exist; freed with the mm.
    pub pte_tables: Vec<bool>,
    /// The accessed bits of the non-leaf PMD entries above the PTE pages, one bit per PTE
    /// page (set with any of its PTEs' young bits; MGLRU's walk tests and clears them).
    pub pmd_young: Vec<u64>,
    /// Ran since MGLRU's last look at it (lru_gen_use_mm).
    pub lru_gen_used: bool,
    /// The program's text: a file mapped VM_EXEC after the area (see [`TextMap`]).
    pub text: Option<TextMap>,
    /// The processes forked from this one that share its anonymous folios (fork.rs): an
    /// anonymous folio owned by this mm may be mapped by each of them at the same page
    /// (the anon_vma chain of the kernel's rmap walk). Empty for an mm never forked.
    pub forks: Vec<u32>,
    /// The process this one was forked from (its anon_vma root), if any.
    pub fork_parent: Option<u32>,
    /// PTEs write-protected for copy-on-write, one bit per page (the PTE's cleared RW
    /// bit; meaningful while the PTE is present). Empty for an mm never forked, whose
    /// anonymous PTEs are all writable.
    pub wrprotect: Vec<u64>,
    /// The area's accessed bits drawn when read, for a usemem area with
    /// `access_model = "sampled"` (sampled_access.rs); None for every other area.
    pub sampled: Option<Box<sampled_access::SampledArea>>,
    /// The area is a shared anonymous mapping (shmem): its swap-ins read ahead as
    /// shmem_swapin_folio's do (shmem.rs), not as do_swap_page's.
    pub shmem: bool,
    /// The VMA's swap readahead state (vma->swap_readahead_info, swap_state.rs).
    pub swap_ra_info: swap_state::SwapRaInfo,
}

/// A process's executable text: pages `base..base + pages` of its PTEs map pages
/// `0..pages` of the text file `file` (MAP_PRIVATE, PROT_EXEC, never written): the code its
/// access loop runs, every page of it on every access. `base` and `pages` repeat the
/// file's `map_base` and size so that an access reads the mm alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextMap {
    pub file: u32,
    pub base: u32,
    pub pages: u32,
}

impl MmStruct {
    /// A new, empty address space of `pages` pages (mm_alloc + one anonymous VMA).
    pub fn new(pages: usize, memcg: MemcgId, node: u32, workload: u32) -> Self {
        MmStruct {
            ptes: mm_types::zeroed_table(pages),
            memcg,
            node,
            rss: 0,
            swapents: 0,
            workload,
            alive: true,
            oom_victim: false,
            oom_skip: false,
            tasks: Vec::new(),
            file: None,
            pte_tables: vec![false; pages.div_ceil(PTRS_PER_PTE)],
            pmd_young: vec![0; pages.div_ceil(PTRS_PER_PTE).div_ceil(64)],
            lru_gen_used: false,
            text: None,
            forks: Vec::new(),
            fork_parent: None,
            wrprotect: Vec::new(),
            sampled: None,
            shmem: false,
            swap_ra_info: Default::default(),
        }
    }

    /// Bring the accessed bits of pages `[lo, hi)` of a sampled area up to date before
    /// the kernel reads them (sampled_access.rs); nothing for any other area.
    #[inline]
    pub fn sampled_sync(&mut self, lo: u32, hi: u32) {
        if let Some(sa) = self.sampled.as_deref_mut() {
            sa.sync(lo, hi, &mut self.ptes, &mut self.pmd_young);
        }
    }

    /// The PTE at `vpn` or its write protection changed: a sampled area keeps its
    /// faulting pages (sampled_access.rs); nothing for any other area.
    #[inline]
    pub fn sampled_note(&mut self, vpn: u32) {
        if let Some(sa) = self.sampled.as_deref_mut() {
            sa.note(vpn, &mut self.ptes, &self.wrprotect, &mut self.pmd_young);
        }
    }

    /// Does an access to `vpn` fault ([`mm_types::pte::access_faults`] on its PTE and write
    /// protection)?
    #[inline]
    pub fn access_faults(&self, vpn: u32, write: bool) -> bool {
        mm_types::pte::access_faults(self.ptes[vpn as usize], write, self.pte_wrprotected(vpn))
    }

    /// Is the PTE at `vpn` write-protected (a write takes do_wp_page)?
    #[inline]
    pub fn pte_wrprotected(&self, vpn: u32) -> bool {
        self.wrprotect
            .get(vpn as usize / 64)
            .is_some_and(|w| w & (1 << (vpn % 64)) != 0)
    }

    /// Set or clear the write protection of the PTE at `vpn` (pte_wrprotect /
    /// pte_mkwrite); a no-op on an mm never forked, where every PTE is writable.
    #[inline]
    pub fn set_wrprotect(&mut self, vpn: u32, on: bool) {
        if let Some(w) = self.wrprotect.get_mut(vpn as usize / 64) {
            if on {
                *w |= 1 << (vpn % 64);
            } else {
                *w &= !(1 << (vpn % 64));
            }
        }
    }

    /// Set the accessed bit of the non-leaf PMD entry above `vpn` (the hardware sets it
    /// when it walks to a PTE).
    #[inline]
    pub fn pmd_mkyoung(&mut self, vpn: u32) {
        let t = vpn as usize / PTRS_PER_PTE;
        if let Some(w) = self.pmd_young.get_mut(t / 64) {
            *w |= 1 << (t % 64);
        }
    }

    /// find_vma(): the pages `[vm_start, vm_end)` of the VMA holding `vpn`, the text
    /// mapping or the area before it (an mm has at most these two).
    pub fn vma_bounds(&self, vpn: u32) -> (u64, u64) {
        match self.text {
            Some(t) if vpn >= t.base => (t.base as u64, (t.base + t.pages) as u64),
            Some(t) => (0, t.base as u64),
            None => (0, self.ptes.len() as u64),
        }
    }

    /// Extend the area to `pages` pages (a trace workload's area grows with its objects).
    pub fn grow(&mut self, pages: usize) {
        if pages > self.ptes.len() {
            mm_types::grow_table(&mut self.ptes, pages);
            self.pte_tables.resize(pages.div_ceil(PTRS_PER_PTE), false);
            self.pmd_young
                .resize(pages.div_ceil(PTRS_PER_PTE).div_ceil(64), 0);
            if !self.wrprotect.is_empty() {
                self.wrprotect.resize(pages.div_ceil(64), 0);
            }
        }
    }

    /// Whether a PTE page must be allocated for `vpn` (__pte_alloc); marks it present.
    pub fn pte_alloc(&mut self, vpn: u32) -> bool {
        let t = &mut self.pte_tables[vpn as usize / PTRS_PER_PTE];
        !std::mem::replace(t, true)
    }
}

/// Hint the CPU to load the cache line at `p`; no effect on results.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults and has no architectural effect.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// How far ahead reclaim's per-folio loops prefetch the PTE the rmap walk will read.
pub const RMAP_PREFETCH: usize = 4;

/// At most this many processes' PTEs are prefetched for one folio's rmap walk.
pub const RMAP_PREFETCH_MMS: usize = 32;

/// PTEs per page-table page (x86-64).
pub const PTRS_PER_PTE: usize = 512;

/// XA_CHUNK_SHIFT: an xarray node has 64 slots.
pub const XA_CHUNK_SHIFT: u32 = 6;

impl File {
    /// An empty page cache of `pages` pages charged to `memcg`.
    pub fn new(pages: usize, memcg: MemcgId, mapped_by: Option<u32>) -> Self {
        let mut xa_nodes = Vec::new();
        let mut span = pages.max(1);
        loop {
            span = span.div_ceil(1 << XA_CHUNK_SHIFT);
            xa_nodes.push(vec![slub::NO_SLAB; span]);
            if span == 1 {
                break;
            }
        }
        File {
            cache: vec![0; pages],
            leaves: XaLeaves::new(pages),
            xa_nodes,
            memcg,
            ra_prev_index: u32::MAX,
            mappers: mapped_by.into_iter().collect(),
            map_base: 0,
            exec: false,
        }
    }

    /// A program's text file of `pages` pages, mapped VM_EXEC at `base` by the processes
    /// that run it (added with [`Mm::map_text`]).
    pub fn text(pages: usize, memcg: MemcgId, base: u32) -> Self {
        let mut f = File::new(pages, memcg, None);
        f.map_base = base;
        f.exec = true;
        f
    }

    /// Extend the file to `pages` pages (a trace workload's file grows with its objects):
    /// more entries, more nodes per level, and new levels on top when the tree deepens.
    pub fn grow(&mut self, pages: usize) {
        if pages <= self.cache.len() {
            return;
        }
        mm_types::grow_table(&mut self.cache, pages);
        self.leaves.grow(pages);
        let mut span = pages;
        let mut level = 0;
        loop {
            span = span.div_ceil(1 << XA_CHUNK_SHIFT);
            if level == self.xa_nodes.len() {
                self.xa_nodes.push(vec![slub::NO_SLAB; span]);
            } else if self.xa_nodes[level].len() < span {
                self.xa_nodes[level].resize(span, slub::NO_SLAB);
            }
            level += 1;
            if span == 1 {
                break;
            }
        }
    }

    /// Store `entry` at `index` (0 = empty, a page or a shadow entry), keeping the leaf
    /// node's counts (workingset_update_node). Returns how the leaf's membership of the
    /// shadow-node list changed.
    pub fn set_entry(&mut self, index: u32, entry: u64) -> ShadowNode {
        let old = std::mem::replace(&mut self.cache[index as usize], entry);
        let is_shadow = |e: u64| filemap::entry_shadow(e).is_some();
        self.leaves.update(
            index,
            (old != 0, is_shadow(old)),
            (entry != 0, is_shadow(entry)),
        )
    }

    /// Is the leaf node a node of shadow entries only, with this stamp?
    pub fn leaf_shadow_only(&self, leaf: u32, gen: u32) -> bool {
        self.leaves.shadow_only(leaf, gen)
    }

    /// How many xarray nodes a store at `index` would allocate.
    pub fn xa_missing(&self, index: u32) -> u64 {
        let mut n = 0;
        for (level, nodes) in self.xa_nodes.iter().enumerate() {
            if nodes[index as usize >> (XA_CHUNK_SHIFT as usize * (level + 1))] != slub::NO_SLAB {
                break;
            }
            n += 1;
        }
        n
    }

    /// xas_create() for `index`: the xarray nodes the store must allocate (the node holding
    /// the entry and any missing ancestors), each from `cachep` on `node`.
    pub fn xa_create(&mut self, index: u32, cachep: &mut slub::KmemCache, node: u32) -> u64 {
        let mut new = 0;
        for (level, nodes) in self.xa_nodes.iter_mut().enumerate() {
            let i = index as usize >> (XA_CHUNK_SHIFT as usize * (level + 1));
            if nodes[i] != slub::NO_SLAB {
                break; // present, and so are its ancestors
            }
            nodes[i] = cachep.alloc(node);
            new += 1;
        }
        new
    }

    /// xas_delete_node() after shadow_lru_isolate emptied leaf `leaf`: the leaf is freed,
    /// then each ancestor left with no child. Returns (nodes freed, slab pages freed).
    pub fn xa_delete_leaf(&mut self, leaf: u32, cachep: &mut slub::KmemCache) -> (u64, u64) {
        let (mut nodes, mut pages) = (0, 0);
        let mut i = leaf as usize;
        for level in 0..self.xa_nodes.len() {
            if level > 0 {
                let children = &self.xa_nodes[level - 1];
                let first = i << XA_CHUNK_SHIFT;
                let last = (first + (1 << XA_CHUNK_SHIFT)).min(children.len());
                if children[first..last].iter().any(|&c| c != slub::NO_SLAB) {
                    break;
                }
            }
            let slab = std::mem::replace(&mut self.xa_nodes[level][i], slub::NO_SLAB);
            if slab == slub::NO_SLAB {
                break;
            }
            pages += cachep.free(slab);
            nodes += 1;
            i >>= XA_CHUNK_SHIFT;
        }
        (nodes, pages)
    }
}

/// The leaf nodes of an xarray (the page cache's or the swap cache's), 64 slots each:
/// per leaf its entries and how many of them are shadows (xa_node's count and
/// nr_values), and how often it joined the shadow-node list (a stamp telling current list
/// entries from stale ones). workingset_update_node() puts a leaf on the list when every
/// entry it holds is a shadow, and takes it off when it holds a folio again or nothing.
pub struct XaLeaves {
    count: Vec<u8>,
    values: Vec<u8>,
    gen: Vec<u32>,
}

impl XaLeaves {
    /// The leaves of an xarray of `slots` indices, all empty.
    pub fn new(slots: usize) -> Self {
        let n = slots.div_ceil(1 << XA_CHUNK_SHIFT);
        XaLeaves {
            count: vec![0; n],
            values: vec![0; n],
            gen: vec![0; n],
        }
    }

    /// Room for `slots` indices.
    pub fn grow(&mut self, slots: usize) {
        let n = slots.div_ceil(1 << XA_CHUNK_SHIFT);
        self.count.resize(n, 0);
        self.values.resize(n, 0);
        self.gen.resize(n, 0);
    }

    /// The entry at `index` changed from `old` to `new`, each given as (present, a
    /// shadow): workingset_update_node() on its leaf.
    #[inline]
    pub fn update(&mut self, index: u32, old: (bool, bool), new: (bool, bool)) -> ShadowNode {
        let leaf = (index >> XA_CHUNK_SHIFT) as usize;
        let (c, v) = (&mut self.count[leaf], &mut self.values[leaf]);
        let before = *c > 0 && *c == *v;
        *c = *c + new.0 as u8 - old.0 as u8;
        *v = *v + new.1 as u8 - old.1 as u8;
        let after = *c > 0 && *c == *v;
        match (before, after) {
            (false, true) => {
                self.gen[leaf] = self.gen[leaf].wrapping_add(1);
                ShadowNode::Joined(leaf as u32, self.gen[leaf])
            }
            (true, false) => ShadowNode::Left,
            _ => ShadowNode::Unchanged,
        }
    }

    /// Is the leaf a node of shadow entries only, with this stamp?
    pub fn shadow_only(&self, leaf: u32, gen: u32) -> bool {
        let l = leaf as usize;
        self.gen[l] == gen && self.count[l] > 0 && self.count[l] == self.values[l]
    }
}

/// How a page-cache store changed its leaf node's place on the shadow-node list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowNode {
    Unchanged,
    /// The leaf now holds shadow entries only: (leaf, stamp) joins the list.
    Joined(u32, u32),
    /// The leaf holds a page again (or nothing): it leaves the list.
    Left,
}

/// A file: its page cache (one slot per page index; see `filemap`).
pub struct File {
    pub cache: Vec<u64>,
    /// The page cache's leaf xarray nodes (their place on the shadow-node list).
    pub leaves: XaLeaves,
    /// The page-cache xarray's nodes, per level (0 = the nodes holding the entries, each
    /// covering 64 indices): the radix_tree_node slab each sits in (slub.rs), NO_SLAB
    /// where there is none. A node lives until the shadow shrinker frees it or, for an
    /// upper node, its last child.
    pub xa_nodes: Vec<Vec<u32>>,
    pub memcg: MemcgId,
    /// file_ra_state.prev_pos of the open file reading it, in pages: the page the last
    /// read() ended in (u32::MAX before the first). Each file is opened once, by its
    /// workload, and its threads share the open file, as kernel-run's runner does.
    pub ra_prev_index: u32,
    /// The processes that map the file (MAP_SHARED over a usemem area, or a program's
    /// text), each with page i of the file at virtual page `map_base + i`: the reverse map
    /// of its pages (a mapped file folio's `private` counts its PTEs).
    pub mappers: Vec<u32>,
    pub map_base: u32,
    /// Mapped PROT_EXEC (VM_EXEC): reclaim keeps its referenced folios active.
    pub exec: bool,
}

/// Counters derived from kernel tracepoints, reported under `trace`.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct TraceCounters {
    /// mm_lru_insertion events of the lru_add batch drain (folios added to an LRU).
    pub mm_lru_insertion: u64,
    /// ... of which the folio was dead: its only reference was the batch's (seed 003).
    pub mm_lru_insertion_dead: u64,
    /// Dead folios freed at the drain without being inserted (lru_add_dead_filter).
    pub lru_add_dead_filtered: u64,
}

/// All mm state of the simulated machine.
pub struct Mm {
    /// The frame table, indexed by pfn. Node n owns [n * node_pages, (n + 1) * node_pages).
    pub pages: mm_types::Frames,
    pub node_pages: u64,
    pub nodes: Vec<PgData>,
    pub lruvecs: Vec<Lruvec>,
    pub memcgs: Vec<Memcg>,
    /// css pre-order of the memcg tree (root first).
    pub memcg_preorder: Vec<MemcgId>,
    pub mms: Vec<MmStruct>,
    pub files: Vec<File>,
    pub swap: Option<SwapInfo>,
    /// The mapcount (folio->_mapcount + 1) of each mapped anonymous folio whose owner has
    /// forked (fork.rs), so that folio_mapped() of a shared folio is a look-up, as in the
    /// kernel, and the rmap walk stops when it has found every mapping. A folio one
    /// process owns has one candidate PTE and needs no count.
    pub shared_mapcount: rustc_hash::FxHashMap<Pfn, u32>,
    /// Per-CPU LRU batches, indexed by CPU id (workload CPUs, then one kthread CPU per node).
    pub batches: Vec<CpuBatches>,
    /// Per-CPU memcg charge stock (memcg_stock_pcp).
    pub stock: Vec<memcontrol::MemcgStock>,
    /// refill_stock's victim draws of a full multi-memcg stock (6.18's
    /// get_random_u32_below), seeded per run.
    pub stock_rng: crate::engine::rng::Rng,
    /// Global vm events (/proc/vmstat event counters).
    pub events: [u64; NR_VM_EVENTS],
    pub vm_swappiness: u32,
    pub memory_recursiveprot: bool,
    /// lru_gen's capability bits (/sys/kernel/mm/lru_gen/enabled; 0 = classic LRU) and
    /// min_ttl [ns].
    pub lru_gen_caps: u32,
    pub lru_gen_min_ttl: u64,
    /// MGLRU's per-lruvec mm walk state (lru_gen_mm_state, indexed by lruvec) and per-memcg
    /// mm lists (lru_gen_mm_list, indexed by memcg); empty with the classic LRU.
    pub mm_state: Vec<lru_gen::LruGenMmState>,
    pub mm_lists: Vec<lru_gen::LruGenMmList>,
    /// Page-table walks in progress per lruvec: their batched promotions are not in
    /// nr_pages yet (checked invariants allow for it).
    pub lru_gen_walks: Vec<u32>,
    /// The memory controller is on the unified hierarchy (cgroup v2;
    /// cgroup_subsys_on_dfl(memory_cgrp_subsys)); false = cgroup v1.
    pub memory_cgrp_on_dfl: bool,
    pub nr_cpus: u32,
    /// Highest number of frames in use at once (for the bytes-per-page benchmark).
    pub peak_used_frames: u64,
    pub used_frames: u64,
    /// OOM kills: (time, memcg, mm).
    pub oom_log: Vec<(u64, MemcgId, u32)>,
    /// oom_rs, the rate limit of the OOM reports.
    pub oom_rs: oom_kill::RateLimit,
    /// memcg event updates (count_memcg_events) since the last flush of the root,
    /// machine-wide; with every lruvec's `rstat_updates`, rstat's machine-wide count.
    pub stats_updates: u64,
    /// Virtual time of the last memcg stats flush.
    pub last_flush: u64,
    /// Per-CPU state of the modeled memcg statistics updates (seed 004).
    pub stat_pcpu: memcontrol::StatPcpu,
    /// Counter updates of list operations and frees, for the Sim to apply.
    pub stat_pending: memcontrol::StatPending,
    /// Tracepoint-derived counters (not /proc/vmstat items).
    pub trace: TraceCounters,
    /// The vmscan tracepoints' hist table (trace_vmscan.rs); None unless the scenario asks
    /// for it (`tracepoints`).
    pub trace_hist: Option<trace_vmscan::TraceHist>,
    /// The device holding the files (page-cache misses read from it).
    pub file_dev: crate::engine::blkdev::BlockDevice,
    /// Batch references beyond the first (PG_INBATCH) of folios queued more than once.
    pub batch_refs: rustc_hash::FxHashMap<Pfn, u32>,
    /// Folios of batches taken out for draining and not yet released (still PG_INBATCH);
    /// kept only while invariants are checked (`track_draining`), the check's sole reader.
    pub draining: Vec<Pfn>,
    pub track_draining: bool,
    /// Spare folio lists (isolation lists, batches, folios to free), reused so the
    /// reclaim and batch paths do not allocate.
    pub pfn_vecs: Vec<Vec<Pfn>>,
    /// The cache lines list operations write under lru_lock, and their last writers.
    pub lines: lru_lines::LineTracker,
    /// radix_tree_node_cachep: the slabs the page cache's xarray nodes sit in.
    pub radix_tree_node_cachep: slub::KmemCache,
    /// The kernel version's modeled rules (kernel.version, then kernel.rules), read
    /// where their paths run.
    pub rules: crate::versions::Rules,
}

/// Capacity of a fresh spare folio list: a reclaim chunk or a per-CPU batch fits.
const PFN_VEC_CAPACITY: usize = 64;

impl Mm {
    /// lru_gen_enabled(): is the multi-gen LRU on?
    #[inline]
    pub fn lru_gen_enabled(&self) -> bool {
        self.lru_gen_caps & (1 << lru_gen::LRU_GEN_CORE) != 0
    }

    /// should_walk_mmu(): does aging walk the page tables (lru_gen caps 0x2)?
    #[inline]
    pub fn should_walk_mmu(&self) -> bool {
        self.lru_gen_caps & (1 << lru_gen::LRU_GEN_MM_WALK) != 0
    }

    /// xas_create() for `index` of `file`, its missing nodes allocated from
    /// radix_tree_node_cachep on `node` (File::xa_create): how many were created.
    pub fn xa_create(&mut self, file: u32, index: u32, node: u32) -> u64 {
        let Mm {
            files,
            radix_tree_node_cachep,
            ..
        } = self;
        files[file as usize].xa_create(index, radix_tree_node_cachep, node)
    }

    /// The node a frame belongs to.
    #[inline]
    pub fn pfn_node(&self, pfn: Pfn) -> u32 {
        if self.nodes.len() == 1 {
            return 0;
        }
        (pfn as u64 / self.node_pages) as u32
    }

    /// An empty folio list from the spare ones (give it back with `put_pfn_vec`).
    #[inline]
    pub fn pfn_vec(&mut self) -> Vec<Pfn> {
        self.pfn_vecs
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(PFN_VEC_CAPACITY))
    }

    /// Return a folio list to the spares.
    #[inline]
    pub fn put_pfn_vec(&mut self, mut v: Vec<Pfn>) {
        v.clear();
        if self.pfn_vecs.len() < 64 {
            self.pfn_vecs.push(v);
        }
    }

    /// The lruvec of (memcg, node): mem_cgroup_lruvec().
    #[inline]
    pub fn lruvec_of(&self, memcg: MemcgId, node: u32) -> LruvecId {
        self.memcgs[memcg as usize].lruvecs[node as usize]
    }

    /// folio_lruvec(): the lruvec a folio belongs to.
    #[inline]
    pub fn folio_lruvec(&self, pfn: Pfn) -> LruvecId {
        let p = &self.pages[pfn as usize];
        self.lruvec_of(p.memcg, self.pfn_node(pfn))
    }

    /// mm_init() + lru_gen_add_mm(): a new address space joins the table and, with MGLRU,
    /// its memcg's mm_list. Returns its id.
    /// Map text file `file` into mm `mmid` at the file's `map_base`, right after the
    /// area (execve's mapping of the program; its pages are faulted in when first run).
    pub fn map_text(&mut self, mmid: u32, file: u32) {
        let f = &mut self.files[file as usize];
        let (base, pages) = (f.map_base, f.cache.len() as u32);
        f.mappers.push(mmid);
        let m = &mut self.mms[mmid as usize];
        assert_eq!(m.ptes.len() as u32, base, "text maps right after the area");
        m.grow((base + pages) as usize);
        m.text = Some(TextMap { file, base, pages });
    }

    pub fn mm_alloc(&mut self, m: MmStruct) -> u32 {
        let memcg = m.memcg as usize;
        self.mms.push(m);
        let mmid = (self.mms.len() - 1) as u32;
        if self.lru_gen_enabled() {
            let lvs = self.memcgs[memcg].lruvecs.clone();
            let Mm {
                mm_lists, mm_state, ..
            } = self;
            let states = mm_state
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| lvs.contains(&(*i as LruvecId)))
                .map(|(_, s)| s);
            lru_gen::lru_gen_add_mm(&mut mm_lists[memcg], states, mmid);
        }
        mmid
    }

    /// lru_gen_del_mm() at exit: the address space leaves its memcg's mm_list.
    pub fn mm_release_lru_gen(&mut self, mmid: u32) {
        if !self.lru_gen_enabled() {
            return;
        }
        let memcg = self.mms[mmid as usize].memcg as usize;
        let lvs = self.memcgs[memcg].lruvecs.clone();
        let Mm {
            mm_lists, mm_state, ..
        } = self;
        let states = mm_state
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| lvs.contains(&(*i as LruvecId)))
            .map(|(_, s)| s);
        lru_gen::lru_gen_del_mm(&mut mm_lists[memcg], states, mmid);
    }

    #[inline]
    pub fn count_event(&mut self, ev: vmstat::VmEvent, n: u64) {
        self.events[ev as usize] += n;
    }

    /// mod_lruvec_state() for an event-like item (refaults, activations): `n` more on the
    /// lruvec, a statistics update for its memcg's flush threshold (Lruvec::mod_state).
    pub fn mod_lruvec_state(&mut self, lv: LruvecId, item: vmstat::NodeStat, n: u64) {
        if n == 0 {
            return;
        }
        self.lruvecs[lv as usize].mod_state(item, n as i64);
    }

    /// count_memcg_events(): a memcg's local event counter.
    #[inline]
    pub fn count_memcg_event(&mut self, memcg: MemcgId, ev: vmstat::VmEvent, n: u64) {
        self.memcgs[memcg as usize].vm_events[ev as usize] += n;
        self.memcg_rstat_updated(memcg, n);
    }
}

#[cfg(test)]
mod xarray_nodes {
    use super::slub::{KmemCache, NO_SLAB};
    use super::File;

    #[test]
    fn a_leaf_freed_takes_its_ancestors_once_they_have_no_child() {
        // 64 * 64 * 2 = 8192 pages: 128 leaves, 2 nodes above them, 1 root.
        let mut f = File::new(8192, 1, None);
        let mut c = KmemCache::default();
        assert_eq!(
            f.xa_nodes.iter().map(Vec::len).collect::<Vec<_>>(),
            [128, 2, 1]
        );
        // A store at index 0 creates the leaf, its parent and the root; one at 64 only
        // its leaf; one at 4096 its leaf and the second parent.
        assert_eq!(f.xa_missing(0), 3);
        assert_eq!(f.xa_create(0, &mut c, 0), 3);
        assert_eq!(f.xa_create(64, &mut c, 0), 1);
        assert_eq!((f.xa_missing(4096), f.xa_create(4096, &mut c, 0)), (2, 2));
        assert_eq!(c.nr_objects(), 6);
        // Leaf 64 goes first, with parent 1 (its only child); the root keeps parent 0.
        assert_eq!(f.xa_delete_leaf(64, &mut c).0, 2);
        assert_eq!((f.xa_nodes[1][1], f.xa_missing(4096)), (NO_SLAB, 2));
        // Leaf 0 goes; its parent still has leaf 1.
        assert_eq!(f.xa_delete_leaf(0, &mut c).0, 1);
        assert_ne!(f.xa_nodes[1][0], NO_SLAB);
        // Leaf 1 goes, and with it parent 0 and the root: nothing is left.
        assert_eq!(f.xa_delete_leaf(1, &mut c).0, 3);
        assert_eq!((c.nr_objects(), f.xa_missing(0)), (0, 3));
        // One slab held all six, and it is the cpu slab: no page came back.
        assert_eq!(c.nr_slabs(), 1);
    }

    #[test]
    fn the_pages_a_delete_returns_are_those_of_the_slabs_it_discards() {
        // 65536 pages: 1024 leaves, 16 nodes above them, a root; all 1041 nodes in 75
        // slabs, then every leaf freed in order, which frees everything.
        let mut f = File::new(65536, 1, None);
        let mut c = KmemCache::default();
        for leaf in 0..1024 {
            f.xa_create(leaf << 6, &mut c, 0);
        }
        assert_eq!((c.nr_objects(), c.nr_slabs()), (1041, 75));
        let (mut nodes, mut pages) = (0, 0);
        for leaf in 0..1024 {
            let (n, p) = f.xa_delete_leaf(leaf, &mut c);
            nodes += n;
            pages += p;
        }
        assert_eq!((nodes, c.nr_objects()), (1041, 0));
        // An emptied slab is kept only while fewer than min_partial (5) slabs are
        // listed, and stays listed: at most 5 of them and the cpu slab are left. Every
        // other slab's 2 pages came back through the deletes.
        assert!(c.nr_slabs() <= 6, "{}", c.nr_slabs());
        assert_eq!(pages, 2 * (75 - c.nr_slabs()));
    }

    #[test]
    fn a_grown_file_has_the_levels_of_its_new_size() {
        let lens = |f: &File| f.xa_nodes.iter().map(Vec::len).collect::<Vec<_>>();
        let mut c = KmemCache::default();
        let mut f = File::new(64, 1, None);
        assert_eq!(lens(&f), [1]);
        f.xa_create(0, &mut c, 0);
        // 4097 pages: 65 leaves, 2 nodes above them, a root; the old leaf keeps its slab.
        f.grow(4097);
        assert_eq!(lens(&f), [65, 2, 1]);
        assert_ne!(f.xa_nodes[0][0], NO_SLAB);
        assert!(f.xa_nodes[0][1..].iter().all(|&s| s == NO_SLAB));
        assert_eq!(f.xa_missing(4096), 3);
        // Growing to fewer pages changes nothing.
        f.grow(100);
        assert_eq!(lens(&f), [65, 2, 1]);
    }
}

#[cfg(test)]
mod layering {
    /// The mm model sits below the scenario and the workloads: sim.rs fills mm's own
    /// parameters from the scenario, and nothing under mm/ names either module.
    #[test]
    fn mm_imports_neither_scenario_nor_workload() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/mm");
        let mut dirs = vec![root];
        let mut files = 0;
        let mut bad = Vec::new();
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                files += 1;
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    let named = ["scenario", "workload"].iter().any(|m| {
                        code.contains(&format!("crate::{m}"))
                            || code.contains(&format!("super::{m}"))
                            || (code.contains("crate::{") && code.contains(m))
                    });
                    if named {
                        bad.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
                    }
                }
            }
        }
        assert!(files > 20, "found only {files} files under src/mm");
        assert!(
            bad.is_empty(),
            "mm names the scenario or workloads:\n{}",
            bad.join("\n")
        );
    }
}
