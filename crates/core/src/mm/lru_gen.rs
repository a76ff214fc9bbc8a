//! The multi-gen LRU (MGLRU, lru_gen): its synchronous core.
//!
//! Models the lru_gen half of mm/vmscan.c together with the lru_gen parts of
//! include/linux/mm_inline.h, include/linux/mmzone.h, mm/workingset.c and mm/swap.c, as of
//! v6.18. Only the work the kernel does without sleeping lives here: flag and counter
//! arithmetic, list moves under the lru_lock, the memcg LRU under its spinlock, the mm_list
//! cursor under its spinlock. The paths that sleep or take several locks in turn
//! (evict_folios, try_to_shrink_lruvec, shrink_many, the page-table walk,
//! lru_gen_look_around) live in vmscan.rs and call in here.
//!
//! # Generations
//!
//! Instead of two lists per type, each lruvec keeps up to four generations per type,
//! numbered by an ever-growing sequence number. The youngest is `max_seq`, shared by anon
//! and file; the oldest is `min_seq[type]`, one per type so that clean page cache can be
//! evicted while swap is short. A folio's generation is stored as `seq % MAX_NR_GENS`
//! (plus one, so that zero can mean "not on an MGLRU list"):
//!
//! ```text
//!             min_seq[anon]=6                                 max_seq=9
//!   anon        | seq 6 (gen 2) | seq 7 (gen 3) | seq 8 (gen 0) | seq 9 (gen 1) |
//!   file                        | seq 7 (gen 3) | seq 8 (gen 0) | seq 9 (gen 1) |
//!               <-- eviction takes the tail of min_seq      aging opens max_seq+1 -->
//!                                               |<-- "active" in /proc/vmstat -->|
//! ```
//! The window `max_seq - min_seq + 1` of each type stays within [MIN_NR_GENS, MAX_NR_GENS]
//! = [2, 4]. Two generations are the least that give a faulted-in folio a second chance: the
//! first look clears the accessed bit left by the fault, the second tells whether it was
//! used since. Those two youngest generations are reported as the active lists, the rest
//! as the inactive lists, so NR_ACTIVE_*/NR_INACTIVE_* and memory.stat keep their meaning.
//!
//! # Tiers
//!
//! Accesses through page tables are found by clearing accessed bits and promote a folio
//! straight to `max_seq` (`folio_update_gen`). Accesses through file descriptors only bump a
//! small counter in the folio (`lru_gen_inc_refs`): PG_referenced for the first, two more
//! bits for the next three, PG_workingset after that. The counter places the folio in a
//! tier, tier = order_base_2(accesses), with PG_workingset the last tier:
//!
//! ```text
//!   accesses   0,1     2      3,4     5+ (PG_workingset)
//!   tier        0      1       2       3
//! ```
//! Moving between tiers costs no lock; only eviction looks at them.
//!
//! # The PID controller
//!
//! Eviction must decide which type to take (anon or file) and which tiers to spare. It
//! compares refault rates, refaulted / (evicted + protected), per type and tier: the
//! "proportional" term is the rate in the generation being evicted, the "integral" term a
//! moving average over earlier generations (halved at each `min_seq` step). Tier 0 of a type
//! is the set point; a higher tier whose rate clearly exceeds it (gain 3 against 2) is
//! protected by moving its folios to `min_seq + 1` instead of evicting them. Between types,
//! the rates are weighed by swappiness (anon) and 200 - swappiness (file).
//!
//! # Aging and eviction
//!
//! They form a producer and a consumer. Eviction (`evict_folios`) sorts the oldest
//! generation of the chosen type: folios already promoted move to their generation,
//! protected tiers and folios under writeback move one generation up, the rest are isolated
//! and reclaimed. When the oldest generation empties, `min_seq` advances. When eviction runs
//! out of generations (only two left) or is about to, aging (`try_to_inc_max_seq`) walks
//! the page tables of the memcg's processes, promotes what it finds accessed, and opens a
//! new generation with `inc_max_seq`; if a type already has four, its oldest generation is
//! first folded into the next one (`inc_min_seq`). The walk skips page tables that a Bloom
//! filter says had too few young entries last round; the filter is filled by the walk itself
//! and by eviction's rmap walks (`lru_gen_look_around`).
//!
//! # The memcg LRU
//!
//! For global reclaim, each node keeps its memcgs' lruvecs in an LRU of their own: an old
//! and a young generation (`seq % 3` and `(seq + 1) % 3`), each sharded into 8 bins of
//! lists. Reclaim starts at a random bin of the old generation and walks it; a memcg that
//! was aged or is too small moves to the young generation, one below memory.low moves to
//! the tail once. When the old generation is empty, `seq` advances and young becomes old.
//!
//! # What is simplified
//!
//! - One zone per node, so `folios[gen][type][zone]` is `folios[gen][type]`, and every
//!   folio is one page (every size delta is 1).
//! - NR_HIST_GENS is 1 (no CONFIG_LRU_GEN_STATS).
//! - Atomic counters (evicted, refaulted) are plain integers; READ_ONCE/WRITE_ONCE ordering
//!   has no meaning in a sequential simulation.
//! - Times are virtual nanoseconds passed in by the caller; the kernel stamps generations in
//!   jiffies, so it sees coarser time (1 to 4 ms a tick).
//! - Randomness (the memcg LRU's bin) is passed in by the caller.
//! - Bloom filter keys hash (mm, PMD index) instead of the address of the PMD entry.
//! - The mm_list and the memcg LRU bins are vectors searched linearly; the RCU traversal of
//!   the hlist_nulls bins is modeled by successor look-ups (`LruGenMemcg::fifo_next`).
//! - The per-folio gen and refs live in `Frames::lru_gen`, a byte per frame.
//! - The compatibility sizes also go to `Lruvec::nr`; the kernel's __update_lru_size
//!   updates the lruvec and zone counters but not the memcg per-zone LRU sizes.
//! - Switching MGLRU on or off at run time (lru_gen_change_state, fill_evictable,
//!   drain_evictable), the debugfs interface, demotion and PMD-mapped folios are not modeled.

use super::mm_types::*;
use super::mmzone::{ListHead, Lruvec, LRU_INACTIVE_FILE};
use super::vmstat::LRU_STAT;
use super::{Pfn, NIL};

// ---------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------

/// The fewest generations a type may have: the two a folio needs for a second chance.
pub const MIN_NR_GENS: u64 = 2;
/// The most generations a type may have (twice the categories of active/inactive).
pub const MAX_NR_GENS: u64 = 4;
/// Tiers of accesses through file descriptors: order_base_2(accesses), last = workingset.
pub const MAX_NR_TIERS: usize = 4;
/// Bits of the gen counter: order_base_2(MAX_NR_GENS + 1).
pub const LRU_GEN_WIDTH: u32 = 3;
/// Bits of the refs counter: MAX_NR_TIERS - 2.
pub const LRU_REFS_WIDTH: u32 = 2;
/// The gen counter in `Frames::lru_gen` (gen+1, 0 = not on an MGLRU list).
pub const LRU_GEN_MASK: u8 = (1 << LRU_GEN_WIDTH) - 1;
/// Where the refs counter starts in `Frames::lru_gen`.
pub const LRU_REFS_PGOFF: u32 = LRU_GEN_WIDTH;
/// The refs counter in `Frames::lru_gen`.
pub const LRU_REFS_MASK: u8 = ((1 << LRU_REFS_WIDTH) - 1) << LRU_REFS_PGOFF;
/// refs + workingset of a folio whose every tier bit is set (BIT(LRU_REFS_WIDTH) + 1): it
/// is lazily moved up without being counted as protected.
const REFS_MAXED: usize = (1 << LRU_REFS_WIDTH) + 1;
/// Smallest batch of MGLRU work (BITS_PER_LONG): isolation and skip limits, refault floor.
pub const MIN_LRU_BATCH: u64 = 64;
/// Largest batch of MGLRU work under one lock hold (MIN_LRU_BATCH * 64).
pub const MAX_LRU_BATCH: u64 = MIN_LRU_BATCH * 64;
/// Generations of history kept in protected/evicted/refaulted (1 without
/// CONFIG_LRU_GEN_STATS).
pub const NR_HIST_GENS: usize = 1;
/// Generations of the memcg LRU: old and young, plus one so a stale read does not wrap.
pub const MEMCG_NR_GENS: usize = 3;
/// Bins each memcg LRU generation is sharded into.
pub const MEMCG_NR_BINS: usize = 8;
/// log2 of the bits of each Bloom filter (m = 32768, k = 2).
pub const BLOOM_FILTER_SHIFT: u32 = 15;
/// The double-buffered Bloom filters of an lruvec's mm_state.
pub const NR_BLOOM_FILTERS: usize = 2;
/// Bits of /sys/kernel/mm/lru_gen/enabled: the core (0x0001), page-table walks (0x0002),
/// clearing the accessed bit in non-leaf PMD entries (0x0004).
pub const LRU_GEN_CORE: u32 = 0;
pub const LRU_GEN_MM_WALK: u32 = 1;
pub const LRU_GEN_NONLEAF_YOUNG: u32 = 2;
pub const NR_LRU_GEN_CAPS: u32 = 3;
/// Folio types, the second index of the generation lists (folio_is_file_lru()).
pub const LRU_GEN_ANON: usize = 0;
pub const LRU_GEN_FILE: usize = 1;
pub const ANON_AND_FILE: usize = 2;
/// Swappiness bounds: 0 = file only, 200 = anon and file at equal cost, 201 = anon only
/// (SWAPPINESS_ANON_ONLY, memory.reclaim's "swappiness=max").
pub const MIN_SWAPPINESS: u32 = 0;
pub const MAX_SWAPPINESS: u32 = 200;
pub const SWAPPINESS_ANON_ONLY: u32 = MAX_SWAPPINESS + 1;

// ---------------------------------------------------------------------------------------
// struct lru_gen_folio
// ---------------------------------------------------------------------------------------

/// struct lru_gen_folio: one lruvec's generations, lists and feedback counters.
///
/// Simplified: one zone, so the lists and sizes have no zone index; the memcg LRU's
/// hlist_nulls node is replaced by `bin` (which list of the node's memcg LRU holds this
/// lruvec, `None` when unhashed).
#[derive(Debug, Clone)]
pub struct LruGenFolio {
    /// The youngest generation; aging increments it.
    pub max_seq: u64,
    /// The oldest generation of each type; eviction increments them.
    pub min_seq: [u64; ANON_AND_FILE],
    /// Birth time of each generation [virtual ns] (the kernel stores jiffies).
    pub timestamps: [u64; MAX_NR_GENS as usize],
    /// The generation lists, head = youngest end, sorted lazily by eviction.
    pub folios: [[ListHead; ANON_AND_FILE]; MAX_NR_GENS as usize],
    /// Pages in each generation by the folios' gen counters [pages]; transiently off
    /// (even negative) while a page-table walk holds a batch (`LruGenMmWalk`).
    pub nr_pages: [[i64; ANON_AND_FILE]; MAX_NR_GENS as usize],
    /// Moving average of refaulted pages per type and tier (halved per min_seq step).
    pub avg_refaulted: [[u64; MAX_NR_TIERS]; ANON_AND_FILE],
    /// Moving average of evicted + protected pages per type and tier.
    pub avg_total: [[u64; MAX_NR_TIERS]; ANON_AND_FILE],
    /// Pages moved up instead of evicted, in the generation being evicted (lru_lock).
    pub protected: [[[u64; MAX_NR_TIERS]; ANON_AND_FILE]; NR_HIST_GENS],
    /// Pages evicted from the generation being evicted (atomic in the kernel).
    pub evicted: [[[u64; MAX_NR_TIERS]; ANON_AND_FILE]; NR_HIST_GENS],
    /// Recent refaults of pages evicted from it (atomic in the kernel).
    pub refaulted: [[[u64; MAX_NR_TIERS]; ANON_AND_FILE]; NR_HIST_GENS],
    /// Whether MGLRU owns this lruvec's evictable folios (else the classic lists do).
    pub enabled: bool,
    /// The memcg LRU generation this lruvec is in (0..MEMCG_NR_GENS).
    pub gen: u8,
    /// The memcg LRU segment: 0 (default), MEMCG_LRU_HEAD or MEMCG_LRU_TAIL.
    pub seg: u8,
    /// The memcg LRU bin whose list holds this lruvec; None = not on the memcg LRU.
    pub bin: Option<u8>,
}

impl Default for LruGenFolio {
    fn default() -> Self {
        Self::new()
    }
}

impl LruGenFolio {
    /// A disabled lruvec's lru_gen_folio, as lru_gen_init_lruvec() leaves it at time 0.
    pub fn new() -> Self {
        Self::init(false, 0)
    }

    /// lru_gen_init_lruvec(): max_seq starts at MIN_NR_GENS + 1 and both min_seq at 0, so
    /// each type starts with the full window of MAX_NR_GENS generations, all born `now`.
    pub fn init(enabled: bool, now: u64) -> Self {
        LruGenFolio {
            max_seq: MIN_NR_GENS + 1,
            min_seq: [0; ANON_AND_FILE],
            timestamps: [now; MAX_NR_GENS as usize],
            folios: [[ListHead::default(); ANON_AND_FILE]; MAX_NR_GENS as usize],
            nr_pages: [[0; ANON_AND_FILE]; MAX_NR_GENS as usize],
            avg_refaulted: [[0; MAX_NR_TIERS]; ANON_AND_FILE],
            avg_total: [[0; MAX_NR_TIERS]; ANON_AND_FILE],
            protected: [[[0; MAX_NR_TIERS]; ANON_AND_FILE]; NR_HIST_GENS],
            evicted: [[[0; MAX_NR_TIERS]; ANON_AND_FILE]; NR_HIST_GENS],
            refaulted: [[[0; MAX_NR_TIERS]; ANON_AND_FILE]; NR_HIST_GENS],
            enabled,
            gen: 0,
            seg: 0,
            bin: None,
        }
    }
}

/// lru_gen_from_seq(): the list index of a sequence number.
#[inline]
pub fn lru_gen_from_seq(seq: u64) -> usize {
    (seq % MAX_NR_GENS) as usize
}

/// lru_hist_from_seq(): the history slot of a sequence number (always 0 here).
#[inline]
pub fn lru_hist_from_seq(seq: u64) -> usize {
    (seq % NR_HIST_GENS as u64) as usize
}

/// get_nr_gens(): the window of a type, max_seq - min_seq + 1.
#[inline]
pub fn get_nr_gens(lrugen: &LruGenFolio, ty: usize) -> u64 {
    lrugen.max_seq + 1 - lrugen.min_seq[ty]
}

/// lru_gen_is_active(): is `gen` one of the two youngest generations?
#[inline]
pub fn lru_gen_is_active(lrugen: &LruGenFolio, gen: usize) -> bool {
    gen == lru_gen_from_seq(lrugen.max_seq) || gen == lru_gen_from_seq(lrugen.max_seq - 1)
}

/// The type of a folio: LRU_GEN_FILE unless swap-backed (folio_is_file_lru()).
#[inline]
pub fn folio_type(page: &Page) -> usize {
    page.is_file_lru() as usize
}

/// The classic list the compatibility size of (type, gen) goes to (lru_gen_update_size()).
#[inline]
fn compat_lru(lrugen: &LruGenFolio, ty: usize, gen: usize) -> usize {
    ty * LRU_INACTIVE_FILE + lru_gen_is_active(lrugen, gen) as usize
}

/// Is a type evictable at this swappiness (for_each_evictable_type())? Anon needs
/// swappiness above 0; file needs it at most MAX_SWAPPINESS.
#[inline]
pub fn type_is_evictable(ty: usize, swappiness: u32) -> bool {
    if ty == LRU_GEN_FILE {
        swappiness <= MAX_SWAPPINESS
    } else {
        swappiness != MIN_SWAPPINESS
    }
}

/// evictable_min_seq(): the oldest min_seq among the evictable types.
#[inline]
pub fn evictable_min_seq(min_seq: [u64; ANON_AND_FILE], swappiness: u32) -> u64 {
    let first = (swappiness == 0) as usize;
    let last = (swappiness <= MAX_SWAPPINESS) as usize;
    min_seq[first].min(min_seq[last])
}

// ---------------------------------------------------------------------------------------
// Per-folio state: Frames::lru_gen and the flags
// ---------------------------------------------------------------------------------------

/// The gen counter of a byte: None when not on an MGLRU list (the kernel's -1).
#[inline]
fn byte_gen(b: u8) -> Option<usize> {
    match b & LRU_GEN_MASK {
        0 => None,
        g => Some(g as usize - 1),
    }
}

/// The refs counter of a byte (0..=3).
#[inline]
fn byte_refs(b: u8) -> u8 {
    (b & LRU_REFS_MASK) >> LRU_REFS_PGOFF
}

/// Store gen+1 (0 for None) and keep the refs counter.
#[inline]
fn set_byte_gen(frames: &mut Frames, pfn: Pfn, gen: Option<usize>) {
    let b = &mut frames.lru_gen[pfn as usize];
    *b = (*b & !LRU_GEN_MASK) | gen.map_or(0, |g| g as u8 + 1);
}

/// Store the refs counter and keep the gen counter.
#[inline]
fn set_byte_refs(frames: &mut Frames, pfn: Pfn, refs: u8) {
    let b = &mut frames.lru_gen[pfn as usize];
    *b = (*b & !LRU_REFS_MASK) | ((refs << LRU_REFS_PGOFF) & LRU_REFS_MASK);
}

/// Clear LRU_REFS_FLAGS: the refs counter and PG_referenced.
#[inline]
fn clear_refs_flags(frames: &mut Frames, pfn: Pfn) {
    set_byte_refs(frames, pfn, 0);
    frames[pfn as usize].clear(PG_REFERENCED);
}

/// folio_lru_gen(): the folio's generation, None (the kernel's -1) when it is not on an
/// MGLRU list.
#[inline]
pub fn folio_lru_gen(frames: &Frames, pfn: Pfn) -> Option<usize> {
    byte_gen(frames.lru_gen[pfn as usize])
}

/// folio_lru_refs() on a page and its byte: accesses through file descriptors, counting
/// PG_referenced as the first; 0 when PG_referenced is clear (the counter is then stale).
#[inline]
pub fn lru_refs(page: &Page, byte: u8) -> usize {
    if !page.test(PG_REFERENCED) {
        return 0;
    }
    byte_refs(byte) as usize + 1
}

/// folio_lru_refs(): see `lru_refs`.
#[inline]
pub fn folio_lru_refs(frames: &Frames, pfn: Pfn) -> usize {
    lru_refs(&frames[pfn as usize], frames.lru_gen[pfn as usize])
}

/// lru_tier_from_refs(): workingset folios are in the last tier, the rest in
/// order_base_2(refs): refs 0 and 1 -> 0, 2 -> 1, 3 and 4 -> 2.
#[inline]
pub fn lru_tier_from_refs(refs: usize, workingset: bool) -> usize {
    debug_assert!(refs <= 1 << LRU_REFS_WIDTH);
    if workingset {
        return MAX_NR_TIERS - 1;
    }
    // order_base_2(n) = ceil(log2(n)), and 0 for n <= 1.
    if refs <= 1 {
        0
    } else {
        (usize::BITS - (refs - 1).leading_zeros()) as usize
    }
}

/// lru_gen_inc_refs() (folio_mark_accessed with MGLRU, mm/swap.c): one access through a
/// file descriptor. The first sets PG_referenced (and restarts the counter), the next three
/// step the counter, and the one after that sets PG_workingset. Unevictable folios are
/// left alone. No lock: the kernel does it with atomic flag operations.
pub fn lru_gen_inc_refs(frames: &mut Frames, pfn: Pfn) {
    let page = frames[pfn as usize];
    if page.test(PG_UNEVICTABLE) {
        return;
    }
    if !page.test(PG_REFERENCED) {
        set_byte_refs(frames, pfn, 0);
        frames[pfn as usize].set(PG_REFERENCED);
        return;
    }
    let refs = byte_refs(frames.lru_gen[pfn as usize]);
    if refs == (1 << LRU_REFS_WIDTH) - 1 {
        frames[pfn as usize].set(PG_WORKINGSET);
        return;
    }
    set_byte_refs(frames, pfn, refs + 1);
}

/// lru_gen_set_refs() (folio_check_references in the eviction's rmap walk, and
/// lru_gen_look_around without a page-table walk): a young PTE was found. A folio seen
/// young for the first time only gets PG_referenced (second chance); one seen before
/// (referenced or workingset) loses its refs flags, gets PG_workingset, and is to be
/// activated: returns true (FOLIOREF_ACTIVATE), false otherwise (FOLIOREF_KEEP).
pub fn lru_gen_set_refs(frames: &mut Frames, pfn: Pfn) -> bool {
    let page = frames[pfn as usize];
    if !page.test(PG_REFERENCED) && !page.test(PG_WORKINGSET) {
        set_byte_refs(frames, pfn, 0);
        frames[pfn as usize].set(PG_REFERENCED);
        return false;
    }
    clear_refs_flags(frames, pfn);
    frames[pfn as usize].set(PG_WORKINGSET);
    true
}

/// folio_update_gen() (the page-table walk found a young PTE): like lru_gen_set_refs, a
/// folio seen for the first time only gets PG_referenced. Otherwise its gen counter is set
/// to `gen` (the walk's max_seq generation) without moving it on the lists, its refs flags
/// are cleared and PG_workingset set. Returns the previous generation, or None when only
/// PG_referenced was set or the folio is off the MGLRU lists (isolated). The caller
/// accounts the move (update_batch_size, or lru_gen_update_size under the lru_lock); the
/// folio stays physically on its old list until eviction or inc_min_seq sorts it.
pub fn folio_update_gen(frames: &mut Frames, pfn: Pfn, gen: usize) -> Option<usize> {
    debug_assert!(gen < MAX_NR_GENS as usize);
    let page = frames[pfn as usize];
    if !page.test(PG_REFERENCED) && !page.test(PG_WORKINGSET) {
        set_byte_refs(frames, pfn, 0);
        frames[pfn as usize].set(PG_REFERENCED);
        return None;
    }
    let old = folio_lru_gen(frames, pfn)?;
    set_byte_gen(frames, pfn, Some(gen));
    clear_refs_flags(frames, pfn);
    frames[pfn as usize].set(PG_WORKINGSET);
    Some(old)
}

/// folio_inc_gen() (eviction's protection, inc_min_seq's folding): move a folio of the
/// oldest generation to the next one, clearing its refs flags (so lru_gen_inc_refs starts
/// over) and, when `reclaiming`, setting PG_reclaim so folio_end_writeback rotates it. A
/// folio the page-table walk already promoted keeps its generation. Returns the new
/// generation; the caller moves the folio to that list. Caller holds lru_lock.
pub fn folio_inc_gen(frames: &mut Frames, lv: &mut Lruvec, pfn: Pfn, reclaiming: bool) -> usize {
    let ty = folio_type(&frames[pfn as usize]);
    let old_gen = lru_gen_from_seq(lv.lrugen.min_seq[ty]);
    let cur = folio_lru_gen(frames, pfn);
    debug_assert!(
        cur.is_some(),
        "pfn {pfn}: folio_inc_gen off the MGLRU lists"
    );
    if let Some(g) = cur {
        if g != old_gen {
            return g;
        }
    }
    let new_gen = (old_gen + 1) % MAX_NR_GENS as usize;
    set_byte_gen(frames, pfn, Some(new_gen));
    clear_refs_flags(frames, pfn);
    if reclaiming {
        frames[pfn as usize].set(PG_RECLAIM);
    }
    lru_gen_update_size(lv, ty, Some(old_gen), Some(new_gen));
    new_gen
}

// ---------------------------------------------------------------------------------------
// Sizes, placement and the generation lists
// ---------------------------------------------------------------------------------------

/// __update_lru_size(): the compatibility size of a classic list, in `Lruvec::nr` and its
/// NR_{IN,}ACTIVE_* item. `nr` wraps while a walk batch holds the count transiently
/// negative, as the kernel's long counters go negative.
#[inline]
pub fn update_lru_size(lv: &mut Lruvec, lru: usize, delta: i64) {
    lv.nr[lru] = lv.nr[lru].wrapping_add_signed(delta);
    lv.stat[LRU_STAT[lru] as usize] += delta;
}

/// lru_gen_update_size(): move one page of type `ty` from generation `old` to `new` (None
/// = off the lists) in nr_pages and in the compatibility sizes: an addition counts in the
/// active or inactive list of its generation, a deletion uncounts, and a move from an
/// inactive to an active generation moves the page between the two. A move from active to
/// inactive never happens here (demotion goes through isolation). Caller holds lru_lock.
pub fn lru_gen_update_size(lv: &mut Lruvec, ty: usize, old: Option<usize>, new: Option<usize>) {
    debug_assert!(old.is_some() || new.is_some());
    if let Some(o) = old {
        lv.lrugen.nr_pages[o][ty] -= 1;
    }
    if let Some(n) = new {
        lv.lrugen.nr_pages[n][ty] += 1;
    }
    let g = &lv.lrugen;
    match (old, new) {
        (None, Some(n)) => {
            let lru = compat_lru(g, ty, n);
            update_lru_size(lv, lru, 1);
        }
        (Some(o), None) => {
            let lru = compat_lru(g, ty, o);
            update_lru_size(lv, lru, -1);
        }
        (Some(o), Some(n)) => {
            let (was, is) = (lru_gen_is_active(g, o), lru_gen_is_active(g, n));
            debug_assert!(
                !(was && !is),
                "demotion of gen {o} to {n} without isolation"
            );
            if !was && is {
                update_lru_size(lv, ty * LRU_INACTIVE_FILE, -1);
                update_lru_size(lv, ty * LRU_INACTIVE_FILE + 1, 1);
            }
        }
        (None, None) => {}
    }
}

/// lru_gen_folio_seq(): the generation a folio joins when added to the lists.
///
/// - PG_active (set only while off the lists, e.g. faulted in, or activated by reclaim):
///   the youngest, or the second youngest unless PG_workingset;
/// - `reclaiming` (lruvec_add_folio_tail: rotated at writeback end): the oldest;
/// - anon not in the swap cache, or PG_reclaim with dirty or writeback: the second youngest,
///   since it cannot be evicted right away;
/// - otherwise (page cache, swap cache): the oldest, or the second oldest with
///   PG_workingset.
///
/// The result is never below the type's min_seq (a narrow window clamps "oldest" up).
pub fn lru_gen_folio_seq(lrugen: &LruGenFolio, page: &Page, reclaiming: bool) -> u64 {
    let ws = page.test(PG_WORKINGSET) as u64;
    let gen = if page.test(PG_ACTIVE) {
        MIN_NR_GENS - ws
    } else if reclaiming {
        MAX_NR_GENS
    } else if (!page.is_file_lru() && !page.test(PG_SWAPCACHE))
        || (page.test(PG_RECLAIM) && (page.test(PG_DIRTY) || page.test(PG_WRITEBACK)))
    {
        MIN_NR_GENS
    } else {
        MAX_NR_GENS - ws
    };
    // max_seq >= MIN_NR_GENS + 1 and gen <= MAX_NR_GENS: no underflow.
    (lrugen.max_seq + 1 - gen).max(lrugen.min_seq[folio_type(page)])
}

/// list_add(): link at the head (young end).
fn list_add(links: &mut [LruLink], head: &mut ListHead, pfn: Pfn) {
    let old = head.head;
    links[pfn as usize] = LruLink {
        prev: NIL,
        next: old,
    };
    if old != NIL {
        links[old as usize].prev = pfn;
    } else {
        head.tail = pfn;
    }
    head.head = pfn;
}

/// list_add_tail(): link at the tail (the next one eviction takes).
fn list_add_tail(links: &mut [LruLink], head: &mut ListHead, pfn: Pfn) {
    let old = head.tail;
    links[pfn as usize] = LruLink {
        prev: old,
        next: NIL,
    };
    if old != NIL {
        links[old as usize].next = pfn;
    } else {
        head.head = pfn;
    }
    head.tail = pfn;
}

/// list_del() from whichever generation list of type `ty` holds the folio. The folio's gen
/// counter does not say which (a promoted folio waits on its old list to be sorted), so an
/// end of a list is found by comparing the four lists' ends.
fn gen_list_del(links: &mut [LruLink], lrugen: &mut LruGenFolio, ty: usize, pfn: Pfn) {
    let LruLink { prev, next } = links[pfn as usize];
    if prev != NIL {
        links[prev as usize].next = next;
    } else {
        let l = lrugen.folios.iter_mut().find(|l| l[ty].head == pfn);
        debug_assert!(l.is_some(), "pfn {pfn}: first of no list");
        if let Some(l) = l {
            l[ty].head = next;
        }
    }
    if next != NIL {
        links[next as usize].prev = prev;
    } else {
        let l = lrugen.folios.iter_mut().find(|l| l[ty].tail == pfn);
        debug_assert!(l.is_some(), "pfn {pfn}: last of no list");
        if let Some(l) = l {
            l[ty].tail = prev;
        }
    }
    links[pfn as usize] = LruLink {
        prev: NIL,
        next: NIL,
    };
}

/// list_move() / list_move_tail() of a folio to the head (or tail) of generation `gen`.
fn gen_list_move(frames: &mut Frames, lrugen: &mut LruGenFolio, pfn: Pfn, gen: usize, tail: bool) {
    let ty = folio_type(&frames[pfn as usize]);
    gen_list_del(&mut frames.links, lrugen, ty, pfn);
    let head = &mut lrugen.folios[gen][ty];
    if tail {
        list_add_tail(&mut frames.links, head, pfn);
    } else {
        list_add(&mut frames.links, head, pfn);
    }
}

/// lru_gen_add_folio() (lruvec_add_folio, and lruvec_add_folio_tail with `reclaiming`): put
/// a folio on the generation lru_gen_folio_seq picks, at the head, or at the tail when
/// `reclaiming` so it is the next to go. Clears PG_active and sets PG_lru (the project's
/// lruvec_add_folio sets PG_lru too). Returns false, touching nothing, for an unevictable
/// folio or a lruvec with MGLRU off: the caller then uses the classic lists. Caller holds
/// lru_lock.
pub fn lru_gen_add_folio(frames: &mut Frames, lv: &mut Lruvec, pfn: Pfn, reclaiming: bool) -> bool {
    debug_assert!(
        folio_lru_gen(frames, pfn).is_none(),
        "pfn {pfn} added twice"
    );
    let page = frames[pfn as usize];
    if page.test(PG_UNEVICTABLE) || !lv.lrugen.enabled {
        return false;
    }
    let ty = folio_type(&page);
    let gen = lru_gen_from_seq(lru_gen_folio_seq(&lv.lrugen, &page, reclaiming));
    set_byte_gen(frames, pfn, Some(gen));
    frames[pfn as usize].clear(PG_ACTIVE);
    frames[pfn as usize].set(PG_LRU);
    lru_gen_update_size(lv, ty, None, Some(gen));
    let head = &mut lv.lrugen.folios[gen][ty];
    if reclaiming {
        list_add_tail(&mut frames.links, head, pfn);
    } else {
        list_add(&mut frames.links, head, pfn);
    }
    true
}

/// lru_gen_del_folio() (lruvec_del_folio, isolate_folio): take a folio off the MGLRU
/// lists. Unless `reclaiming`, a folio of an active generation leaves with PG_active so
/// that it comes back active (folio_migrate_flags). Leaves PG_lru to the caller. Returns
/// false when the folio is not on the MGLRU lists. Caller holds lru_lock.
pub fn lru_gen_del_folio(frames: &mut Frames, lv: &mut Lruvec, pfn: Pfn, reclaiming: bool) -> bool {
    let Some(gen) = folio_lru_gen(frames, pfn) else {
        return false;
    };
    let page = frames[pfn as usize];
    debug_assert!(!page.test(PG_ACTIVE) && !page.test(PG_UNEVICTABLE));
    let ty = folio_type(&page);
    if !reclaiming && lru_gen_is_active(&lv.lrugen, gen) {
        frames[pfn as usize].set(PG_ACTIVE);
    }
    set_byte_gen(frames, pfn, None);
    lru_gen_update_size(lv, ty, Some(gen), None);
    gen_list_del(&mut frames.links, &mut lv.lrugen, ty, pfn);
    true
}

/// Take a folio off its generation list without uncounting it: scan_folios parks the
/// folios it could not isolate on a private list (list_move to `moved`) until the zone is
/// done. Put them back with `lru_gen_list_splice`.
pub fn lru_gen_list_unlink(frames: &mut Frames, lrugen: &mut LruGenFolio, pfn: Pfn) {
    let ty = folio_type(&frames[pfn as usize]);
    gen_list_del(&mut frames.links, lrugen, ty, pfn);
}

/// list_splice(&moved, head) in scan_folios: put the folios parked with
/// `lru_gen_list_unlink` back at the head of generation `gen`, given in the order they were
/// parked; the last parked ends up first, as the kernel's head-inserted `moved` list does.
pub fn lru_gen_list_splice(
    frames: &mut Frames,
    lrugen: &mut LruGenFolio,
    gen: usize,
    parked: &[Pfn],
) {
    for &pfn in parked {
        let ty = folio_type(&frames[pfn as usize]);
        list_add(&mut frames.links, &mut lrugen.folios[gen][ty], pfn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON, LRU_UNEVICTABLE};
    use crate::mm::vmstat::NodeStat;

    const ANON: u16 = PG_SWAPBACKED | PG_ALLOCATED;
    const FILE: u16 = PG_ALLOCATED;

    /// An enabled lruvec with its initial window (max_seq 3, min_seq 0 and 0).
    fn lruvec() -> Lruvec {
        let mut lv = Lruvec::new(0, 0, 0, 0);
        lv.lrugen.enabled = true;
        lv
    }

    fn frames(flags: &[u16]) -> Frames {
        let mut f = Frames::zeroed(flags.len());
        for (i, &fl) in flags.iter().enumerate() {
            f[i].flags = fl;
        }
        f
    }

    /// The pfns of a list from head to tail.
    fn list(frames: &Frames, head: &ListHead) -> Vec<Pfn> {
        let mut v = vec![];
        let mut p = head.head;
        while p != NIL {
            v.push(p);
            p = frames.links[p as usize].next;
        }
        v
    }

    fn page(flags: u16) -> Page {
        Page {
            flags,
            ..Page::default()
        }
    }

    #[test]
    fn placement_follows_lru_gen_folio_seq() {
        // max_seq 7, min_seq anon 4 (window 4), file 5 (window 3). seq = max_seq - gen + 1
        // with gen 2 - ws when active, 4 when reclaiming, 2 for anon outside the swap cache
        // or reclaim+dirty/writeback, else 4 - ws; then max(seq, min_seq[type]).
        let mut g = LruGenFolio::init(true, 0);
        g.max_seq = 7;
        g.min_seq = [4, 5];
        let seq = |flags, reclaiming| lru_gen_folio_seq(&g, &page(flags), reclaiming);
        // Active: 7 - 2 + 1 = 6; active and workingset: 7 - 1 + 1 = 7.
        assert_eq!(seq(FILE | PG_ACTIVE, false), 6);
        assert_eq!(seq(FILE | PG_ACTIVE | PG_WORKINGSET, false), 7);
        // Active wins over reclaiming.
        assert_eq!(seq(ANON | PG_ACTIVE, true), 6);
        // Reclaiming: 7 - 4 + 1 = 4 for anon (min 4); file clamps up to its min_seq 5.
        assert_eq!(seq(ANON | PG_SWAPCACHE, true), 4);
        assert_eq!(seq(FILE, true), 5);
        // Reclaiming ignores workingset: still 4.
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_WORKINGSET, true), 4);
        // Anon outside the swap cache: 7 - 2 + 1 = 6, with or without workingset.
        assert_eq!(seq(ANON, false), 6);
        assert_eq!(seq(ANON | PG_WORKINGSET, false), 6);
        // PG_reclaim with dirty, or with writeback: 6. PG_reclaim alone: default.
        assert_eq!(seq(FILE | PG_RECLAIM | PG_DIRTY, false), 6);
        assert_eq!(seq(FILE | PG_RECLAIM | PG_WRITEBACK, false), 6);
        assert_eq!(
            seq(FILE | PG_DIRTY, false),
            5,
            "dirty without PG_reclaim: default"
        );
        assert_eq!(seq(FILE | PG_RECLAIM, false), 5);
        // Default: 7 - 4 + 1 = 4, anon in swap cache keeps 4, file clamps to 5.
        assert_eq!(seq(ANON | PG_SWAPCACHE, false), 4);
        assert_eq!(seq(FILE, false), 5);
        // Default with workingset: 7 - 3 + 1 = 5 for both.
        assert_eq!(seq(ANON | PG_SWAPCACHE | PG_WORKINGSET, false), 5);
        assert_eq!(seq(FILE | PG_WORKINGSET, false), 5);
    }

    #[test]
    fn add_folio_head_tail_and_compat_sizes() {
        // Initial window: max_seq 3, so gens 3 and 2 are active, 1 and 0 inactive.
        let mut f = frames(&[ANON, FILE, FILE, FILE | PG_ACTIVE]);
        let mut lv = lruvec();
        // Anon outside the swap cache: seq 3 - 2 + 1 = 2 -> gen 2, active.
        assert!(lru_gen_add_folio(&mut f, &mut lv, 0, false));
        // Clean file: seq 3 - 4 + 1 = 0 -> gen 0, inactive; pfn 1 at the head, then pfn 2
        // at the tail (reclaiming), so the list reads 1, 2.
        assert!(lru_gen_add_folio(&mut f, &mut lv, 1, false));
        assert!(lru_gen_add_folio(&mut f, &mut lv, 2, true));
        // Active file: seq 2 -> gen 2; PG_active is cleared, PG_lru set.
        assert!(lru_gen_add_folio(&mut f, &mut lv, 3, false));
        assert!(!f[3].test(PG_ACTIVE) && f[3].test(PG_LRU));
        assert_eq!(folio_lru_gen(&f, 0), Some(2));
        assert_eq!(folio_lru_gen(&f, 1), Some(0));
        assert_eq!(folio_lru_gen(&f, 3), Some(2));
        assert_eq!(list(&f, &lv.lrugen.folios[0][LRU_GEN_FILE]), vec![1, 2]);
        assert_eq!(lv.lrugen.nr_pages[2], [1, 1]);
        assert_eq!(lv.lrugen.nr_pages[0], [0, 2]);
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 0);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 2);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE + 1], 1);
        assert_eq!(lv.stat[NodeStat::NrActiveAnon as usize], 1);
        assert_eq!(lv.stat[NodeStat::NrInactiveFile as usize], 2);
        assert_eq!(lv.stat[NodeStat::NrActiveFile as usize], 1);
    }

    #[test]
    fn add_folio_refuses_unevictable_and_disabled() {
        let mut f = frames(&[FILE | PG_UNEVICTABLE, FILE]);
        let mut lv = lruvec();
        assert!(!lru_gen_add_folio(&mut f, &mut lv, 0, false));
        lv.lrugen.enabled = false;
        assert!(!lru_gen_add_folio(&mut f, &mut lv, 1, false));
        assert_eq!(f.lru_gen[0..2], [0, 0]);
        assert_eq!(lv.nr, [0; 5]);
        assert!(!f[1].test(PG_LRU));
        assert_eq!(lv.nr[LRU_UNEVICTABLE], 0);
    }

    #[test]
    fn del_folio_sets_active_unless_reclaiming() {
        // Both go to gen 2 (active at max_seq 3).
        let mut f = frames(&[ANON, ANON, FILE]);
        let mut lv = lruvec();
        for pfn in 0..3 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false);
        }
        assert!(lru_gen_del_folio(&mut f, &mut lv, 0, false));
        assert!(f[0].test(PG_ACTIVE), "leaves an active generation active");
        assert!(lru_gen_del_folio(&mut f, &mut lv, 1, true));
        assert!(!f[1].test(PG_ACTIVE), "reclaiming: not reactivated");
        // The file folio is in gen 0, inactive: no PG_active either way.
        assert!(lru_gen_del_folio(&mut f, &mut lv, 2, false));
        assert!(!f[2].test(PG_ACTIVE));
        assert!(
            !lru_gen_del_folio(&mut f, &mut lv, 2, false),
            "not on a list"
        );
        assert_eq!(lv.nr, [0; 5]);
        assert_eq!(lv.lrugen.nr_pages, [[0; 2]; 4]);
        for l in lv.lrugen.folios.iter().flatten() {
            assert_eq!((l.head, l.tail), (NIL, NIL));
        }
    }

    #[test]
    fn tier_from_refs() {
        // order_base_2: 0 and 1 -> 0, 2 -> 1, 3 and 4 -> 2; workingset -> MAX_NR_TIERS - 1.
        let tiers: Vec<usize> = (0..=4).map(|r| lru_tier_from_refs(r, false)).collect();
        assert_eq!(tiers, vec![0, 0, 1, 2, 2]);
        for r in 0..=4 {
            assert_eq!(lru_tier_from_refs(r, true), 3);
        }
        // folio_lru_refs: the counter only counts with PG_referenced.
        let refs_byte = 3 << LRU_REFS_PGOFF;
        assert_eq!(lru_refs(&page(FILE), refs_byte), 0);
        assert_eq!(lru_refs(&page(FILE | PG_REFERENCED), 0), 1);
        assert_eq!(lru_refs(&page(FILE | PG_REFERENCED), refs_byte), 4);
        assert_eq!(
            lru_refs(&page(FILE | PG_REFERENCED), 1 << LRU_REFS_PGOFF | 2),
            2
        );
    }

    #[test]
    fn inc_refs_steps_to_workingset() {
        // Accesses: 1st sets PG_referenced (refs 1), 2nd-4th step the counter (refs 2, 3,
        // 4), the 5th sets PG_workingset; tiers 0, 1, 2, 2, then 3.
        let mut f = frames(&[FILE]);
        f.lru_gen[0] = 2 << LRU_REFS_PGOFF | 3; // a stale counter and gen 2
        let mut seen = vec![];
        for _ in 0..6 {
            lru_gen_inc_refs(&mut f, 0);
            let ws = f[0].test(PG_WORKINGSET);
            seen.push((folio_lru_refs(&f, 0), ws));
        }
        assert_eq!(
            seen,
            vec![
                (1, false),
                (2, false),
                (3, false),
                (4, false),
                (4, true),
                (4, true)
            ]
        );
        assert_eq!(
            folio_lru_gen(&f, 0),
            Some(2),
            "the gen counter is untouched"
        );
        // Unevictable folios are not counted.
        let mut u = frames(&[FILE | PG_UNEVICTABLE]);
        lru_gen_inc_refs(&mut u, 0);
        assert!(!u[0].test(PG_REFERENCED));
    }

    #[test]
    fn set_refs_second_chance_then_activate() {
        let mut f = frames(&[FILE, FILE | PG_WORKINGSET]);
        f.lru_gen[0] = 3 << LRU_REFS_PGOFF;
        // First young PTE: PG_referenced only, counter restarted, keep.
        assert!(!lru_gen_set_refs(&mut f, 0));
        assert!(f[0].test(PG_REFERENCED) && !f[0].test(PG_WORKINGSET));
        assert_eq!(byte_refs(f.lru_gen[0]), 0);
        // Second: refs flags cleared, workingset set, activate.
        f.lru_gen[0] |= 2 << LRU_REFS_PGOFF;
        assert!(lru_gen_set_refs(&mut f, 0));
        assert!(!f[0].test(PG_REFERENCED) && f[0].test(PG_WORKINGSET));
        assert_eq!(byte_refs(f.lru_gen[0]), 0);
        // Workingset alone is enough to activate.
        assert!(lru_gen_set_refs(&mut f, 1));
    }

    #[test]
    fn update_gen_promotes_only_on_second_sighting() {
        let mut f = frames(&[FILE, FILE]);
        f.lru_gen[0] = 1 + 1; // gen 1
        assert_eq!(folio_update_gen(&mut f, 0, 3), None);
        assert!(f[0].test(PG_REFERENCED));
        assert_eq!(
            folio_lru_gen(&f, 0),
            Some(1),
            "first sighting does not move it"
        );
        f.lru_gen[0] |= 1 << LRU_REFS_PGOFF;
        assert_eq!(folio_update_gen(&mut f, 0, 3), Some(1));
        assert_eq!(folio_lru_gen(&f, 0), Some(3));
        assert!(f[0].test(PG_WORKINGSET) && !f[0].test(PG_REFERENCED));
        assert_eq!(byte_refs(f.lru_gen[0]), 0);
        // Referenced but isolated (gen 0 in the byte): nothing to promote.
        f[1].set(PG_REFERENCED);
        assert_eq!(folio_update_gen(&mut f, 1, 3), None);
        assert_eq!(f.lru_gen[1], 0);
    }

    #[test]
    fn inc_gen_moves_oldest_up_and_keeps_promoted() {
        // max_seq 3, min_seq 0: gen 0 -> gen 1, both inactive: no compat move.
        let mut f = frames(&[FILE | PG_REFERENCED, FILE]);
        let mut lv = lruvec();
        lru_gen_add_folio(&mut f, &mut lv, 0, false);
        lru_gen_add_folio(&mut f, &mut lv, 1, false);
        f.lru_gen[0] |= 2 << LRU_REFS_PGOFF;
        assert_eq!(folio_inc_gen(&mut f, &mut lv, 0, true), 1);
        assert_eq!(folio_lru_gen(&f, 0), Some(1));
        assert!(!f[0].test(PG_REFERENCED) && f[0].test(PG_RECLAIM));
        assert_eq!(byte_refs(f.lru_gen[0]), 0);
        assert_eq!(lv.lrugen.nr_pages[0][1], 1);
        assert_eq!(lv.lrugen.nr_pages[1][1], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 2);
        // A folio the walk promoted to gen 3 keeps it and nothing is counted.
        f.lru_gen[1] = (f.lru_gen[1] & !LRU_GEN_MASK) | 4;
        assert_eq!(folio_inc_gen(&mut f, &mut lv, 1, false), 3);
        assert_eq!(lv.lrugen.nr_pages[0][1], 1);
        // With min_seq 1 (window 3), gen 1 -> gen 2 is a move from inactive to active.
        lv.lrugen.min_seq = [1, 1];
        assert_eq!(folio_inc_gen(&mut f, &mut lv, 0, false), 2);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE + 1], 1);
    }

    #[test]
    fn list_unlink_and_splice_order() {
        // Four clean file folios added at the head of gen 0: list 3, 2, 1, 0.
        let mut f = frames(&[FILE; 4]);
        let mut lv = lruvec();
        for pfn in 0..4 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false);
        }
        // Park 0 then 1 (taken from the tail, as scan_folios does), splice them back: the
        // kernel's `moved` list is 1, 0 and goes in front: 1, 0, 3, 2.
        lru_gen_list_unlink(&mut f, &mut lv.lrugen, 0);
        lru_gen_list_unlink(&mut f, &mut lv.lrugen, 1);
        assert_eq!(list(&f, &lv.lrugen.folios[0][1]), vec![3, 2]);
        assert_eq!(lv.lrugen.nr_pages[0][1], 4, "parked folios stay counted");
        lru_gen_list_splice(&mut f, &mut lv.lrugen, 0, &[0, 1]);
        assert_eq!(list(&f, &lv.lrugen.folios[0][1]), vec![1, 0, 3, 2]);
        assert_eq!(lv.lrugen.folios[0][1].tail, 2);
    }
}
