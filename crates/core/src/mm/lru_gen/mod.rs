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
//! = [2, 4]. Two is the floor because a freshly faulted folio has to be looked at twice
//! before eviction may take it: one look to clear the accessed bit its fault set, another
//! to see whether anything touched it after that. Those two youngest generations are
//! reported as the active lists, the rest as the inactive lists, so
//! NR_ACTIVE_*/NR_INACTIVE_* and memory.stat keep their meaning.
//!
//! # Tiers
//!
//! Accesses through page tables are found by clearing accessed bits; the second time a
//! folio is found accessed it is promoted straight to `max_seq` (`folio_update_gen`; the
//! first time only sets PG_referenced). Accesses through file descriptors only bump a
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
//! is the set point; from the first higher tier whose rate exceeds it (weighed 3 against
//! 2), that tier and those above are protected: their folios move to `min_seq + 1` instead
//! of being evicted. Between types, the rates are weighed by swappiness (anon) and
//! 200 - swappiness (file).
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
use super::{Pfn, DEF_PRIORITY, NIL, SWAP_CLUSTER_MAX};

pub mod check;
pub mod debugfs;
pub mod folio;
pub mod memcg_lru;
pub mod mm_list;
pub mod pid;
pub mod walk;
pub mod workingset;
pub use check::*;
pub use debugfs::*;
pub use folio::*;
pub use memcg_lru::*;
pub use mm_list::*;
pub use pid::*;
pub use walk::*;
pub use workingset::*;

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
    /// The generation lists (head = young end); eviction puts misplaced folios right as
    /// it meets them.
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
// The aging and the eviction (to be moved)
// ---------------------------------------------------------------------------------------

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

/// get_tier_idx(): the highest tier eviction takes from. Tier 0 with gain 2 is the set
/// point; tiers 1, 2, 3 in turn with gain 3 until one refaults more. The 3:2 weighing leaves
/// room for noise, since folios of a higher tier were accessed at least twice as often and
/// should refault more anyway. Returns that tier - 1 (3 when none does); tiers above it are
/// protected.
pub fn get_tier_idx(lrugen: &LruGenFolio, ty: usize) -> usize {
    let sp = read_ctrl_pos(lrugen, ty, 0, 2);
    let mut tier = 1;
    while tier < MAX_NR_TIERS {
        let pv = read_ctrl_pos(lrugen, ty, tier, 3);
        if !positive_ctrl_err(&sp, &pv) {
            break;
        }
        tier += 1;
    }
    tier - 1
}

/// get_type_to_scan(): the type eviction tries first. Swappiness 0 and 1 take file, 200
/// and 201 anon (v6.18's shortcuts); in between, all tiers of anon weighed by swappiness
/// are the set point and all tiers of file weighed by 200 - swappiness the process
/// variable: file unless file refaults more.
pub fn get_type_to_scan(lrugen: &LruGenFolio, swappiness: u32) -> usize {
    if swappiness <= MIN_SWAPPINESS + 1 {
        return LRU_GEN_FILE;
    }
    if swappiness >= MAX_SWAPPINESS {
        return LRU_GEN_ANON;
    }
    let sp = read_ctrl_pos(lrugen, LRU_GEN_ANON, MAX_NR_TIERS, swappiness as u64);
    let pv = read_ctrl_pos(
        lrugen,
        LRU_GEN_FILE,
        MAX_NR_TIERS,
        (MAX_SWAPPINESS - swappiness) as u64,
    );
    positive_ctrl_err(&sp, &pv) as usize
}

// ---------------------------------------------------------------------------------------
// Aging and eviction bookkeeping
// ---------------------------------------------------------------------------------------

/// get_swappiness(): the swappiness MGLRU works with. 0 (file only) when the reclaim may
/// not swap or the memcg has fewer than MIN_LRU_BATCH swap pages left (demotion targets are
/// not modeled); else the reclaim's swappiness (sc_swappiness: memory.reclaim's override or
/// the memcg's).
pub fn get_swappiness(may_swap: bool, nr_swap_pages: u64, sc_swappiness: u32) -> u32 {
    if !may_swap || nr_swap_pages < MIN_LRU_BATCH {
        return 0;
    }
    sc_swappiness
}

/// inc_min_seq(): retire the oldest generation of `ty` (its window is MAX_NR_GENS and
/// aging needs a slot). Its folios are moved, from the tail, to the tail of the next
/// generation (or of the one the walk promoted them to), each counted as protected except
/// those whose tier bits are all set (refs 4 and workingset, lazily promoted). A type that
/// is not evictable at this swappiness keeps its folios where they are; they end up in the
/// new youngest generation (the kernel accepts this cold/hot inversion). Then the
/// controller carries over and min_seq advances. Returns false, with min_seq unchanged,
/// after moving MAX_LRU_BATCH folios: the caller drops the lru_lock, reschedules and
/// retries (inc_max_seq's restart). Caller holds lru_lock.
pub fn inc_min_seq(frames: &mut Frames, lv: &mut Lruvec, ty: usize, swappiness: u32) -> bool {
    let hist = lru_hist_from_seq(lv.lrugen.min_seq[ty]);
    let old_gen = lru_gen_from_seq(lv.lrugen.min_seq[ty]);
    if type_is_evictable(ty, swappiness) {
        let mut remaining = MAX_LRU_BATCH;
        loop {
            let pfn = lv.lrugen.folios[old_gen][ty].tail;
            if pfn == NIL {
                break;
            }
            let page = frames[pfn as usize];
            debug_assert!(!page.test(PG_UNEVICTABLE) && !page.test(PG_ACTIVE));
            let refs = lru_refs(&page, frames.lru_gen[pfn as usize]);
            let ws = page.test(PG_WORKINGSET);
            let new_gen = folio_inc_gen(frames, lv, pfn, false);
            gen_list_move(frames, &mut lv.lrugen, pfn, new_gen, true);
            if refs + ws as usize != REFS_MAXED {
                lv.lrugen.protected[hist][ty][lru_tier_from_refs(refs, ws)] += 1;
            }
            remaining -= 1;
            if remaining == 0 {
                return false;
            }
        }
    }
    reset_ctrl_pos(&mut lv.lrugen, ty, true);
    lv.lrugen.min_seq[ty] += 1;
    true
}

/// try_to_inc_min_seq(): advance the min_seq of each evictable type past its empty oldest
/// generations, keeping at least MIN_NR_GENS. When both types are evictable, neither may
/// get ahead of max_seq - MIN_NR_GENS while the other lags behind it, so that anon and file
/// stay within reach of each other. Returns whether any min_seq advanced. Caller holds
/// lru_lock.
pub fn try_to_inc_min_seq(lrugen: &mut LruGenFolio, swappiness: u32) -> bool {
    let mut min_seq = lrugen.min_seq;
    for (ty, seq) in min_seq.iter_mut().enumerate() {
        if !type_is_evictable(ty, swappiness) {
            continue;
        }
        while *seq + MIN_NR_GENS <= lrugen.max_seq
            && lrugen.folios[lru_gen_from_seq(*seq)][ty].head == NIL
        {
            *seq += 1;
        }
    }
    if swappiness != 0 && swappiness <= MAX_SWAPPINESS {
        let seq = lrugen.max_seq - MIN_NR_GENS;
        let (anon, file) = (LRU_GEN_ANON, LRU_GEN_FILE);
        if min_seq[anon] > seq && min_seq[file] < seq {
            min_seq[anon] = seq;
        } else if min_seq[file] > seq && min_seq[anon] < seq {
            min_seq[file] = seq;
        }
    }
    let mut success = false;
    for (ty, &seq) in min_seq.iter().enumerate() {
        if !type_is_evictable(ty, swappiness) || seq <= lrugen.min_seq[ty] {
            continue;
        }
        reset_ctrl_pos(lrugen, ty, true);
        lrugen.min_seq[ty] = seq;
        success = true;
    }
    success
}

/// What inc_max_seq() did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncMaxSeq {
    /// `seq` is no longer max_seq: someone else aged this lruvec (the kernel's false).
    Stale,
    /// inc_min_seq spent its batch; drop the lru_lock, reschedule, call again.
    Busy,
    /// max_seq advanced (the kernel's true).
    Done,
}

/// inc_max_seq(): open a new youngest generation. A type at MAX_NR_GENS first retires its
/// oldest (inc_min_seq). The generation max_seq - 1 stops counting as active and the one
/// about to become max_seq + 1 starts (it can still hold folios of a type that was not
/// evictable, see inc_min_seq), so their sizes swap sides in the compatibility counts. The
/// new generation is born at `now` [virtual ns; the kernel uses jiffies]. Caller holds
/// lru_lock.
pub fn inc_max_seq(
    frames: &mut Frames,
    lv: &mut Lruvec,
    seq: u64,
    swappiness: u32,
    now: u64,
) -> IncMaxSeq {
    if seq != lv.lrugen.max_seq {
        return IncMaxSeq::Stale;
    }
    for ty in 0..ANON_AND_FILE {
        if get_nr_gens(&lv.lrugen, ty) == MAX_NR_GENS && !inc_min_seq(frames, lv, ty, swappiness) {
            return IncMaxSeq::Busy;
        }
    }
    let prev = lru_gen_from_seq(lv.lrugen.max_seq - 1);
    let next = lru_gen_from_seq(lv.lrugen.max_seq + 1);
    for ty in 0..ANON_AND_FILE {
        let delta = lv.lrugen.nr_pages[prev][ty] - lv.lrugen.nr_pages[next][ty];
        if delta != 0 {
            update_lru_size(lv, ty * LRU_INACTIVE_FILE, delta);
            update_lru_size(lv, ty * LRU_INACTIVE_FILE + 1, -delta);
        }
    }
    for ty in 0..ANON_AND_FILE {
        reset_ctrl_pos(&mut lv.lrugen, ty, false);
    }
    lv.lrugen.timestamps[next] = now;
    lv.lrugen.max_seq += 1;
    IncMaxSeq::Done
}

/// should_run_aging(): returns (need_aging, evictable pages). Aging is required when the
/// oldest evictable generation is fewer than MIN_NR_GENS below max_seq (only the two
/// youngest are left, which eviction may not take; the size is then 0), and due when it
/// is exactly MIN_NR_GENS below (three left: eviction can take one more). The size sums
/// nr_pages, a negative count as 0, over all generations of the evictable types.
pub fn should_run_aging(lrugen: &LruGenFolio, max_seq: u64, swappiness: u32) -> (bool, u64) {
    let oldest = evictable_min_seq(lrugen.min_seq, swappiness);
    if oldest + MIN_NR_GENS > max_seq {
        return (true, 0);
    }
    let mut size = 0u64;
    for ty in 0..ANON_AND_FILE {
        if !type_is_evictable(ty, swappiness) {
            continue;
        }
        for seq in lrugen.min_seq[ty]..=max_seq {
            size += lrugen.nr_pages[lru_gen_from_seq(seq)][ty].max(0) as u64;
        }
    }
    (oldest + MIN_NR_GENS == max_seq, size)
}

/// What get_nr_to_scan() asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NrToScan {
    /// -1: stop, and the lruvec should be rotated (below memory.min, or just aged).
    Stop,
    /// Scan up to this many pages (0 stops without rotating).
    Scan(u64),
    /// Aging is due: try_to_inc_max_seq(max_seq, swappiness, false); on success the
    /// answer is `Stop` (-1), else `Scan(0)`.
    Aging { max_seq: u64 },
}

/// get_nr_to_scan(): how much try_to_shrink_lruvec may scan. Below memory.min: stop. A
/// deleted (offline) memcg has all its pages scanned. Otherwise the size is scaled by
/// memory.low/min (`protect`: apply_proportional_protection, since v6.16 also for MGLRU)
/// and, unless aging is due outside DEF_PRIORITY, shifted by the priority.
pub fn get_nr_to_scan(
    lrugen: &LruGenFolio,
    swappiness: u32,
    below_min: bool,
    online: bool,
    priority: i32,
    protect: impl FnOnce(u64) -> u64,
) -> NrToScan {
    if below_min {
        return NrToScan::Stop;
    }
    let max_seq = lrugen.max_seq;
    let (aging, nr) = should_run_aging(lrugen, max_seq, swappiness);
    if nr != 0 && !online {
        return NrToScan::Scan(nr);
    }
    let nr = protect(nr);
    if !aging || priority == DEF_PRIORITY {
        return NrToScan::Scan(nr >> priority.clamp(0, 63));
    }
    NrToScan::Aging { max_seq }
}

/// apply_proportional_protection() (mm/vmscan.c, shared by get_scan_count and, since
/// v6.16, get_nr_to_scan): scale `scan` down by the protected share of the memcg's usage.
/// memory.low counts unless this is the pass that overrides it (`memcg_low_reclaim`) or min
/// is larger; then memory.min. At least SWAP_CLUSTER_MAX stays. Returns the scaled count
/// and whether memory.low was honoured (sc->memcg_low_skipped = 1).
pub fn apply_proportional_protection(
    scan: u64,
    min: u64,
    low: u64,
    usage: u64,
    memcg_low_reclaim: bool,
) -> (u64, bool) {
    if min == 0 && low == 0 {
        return (scan, false);
    }
    let (protection, low_skipped) = if !memcg_low_reclaim && low > min {
        (low, true)
    } else {
        (min, false)
    };
    let usage = usage.max(protection);
    let cut = (scan as u128 * protection as u128 / (usage as u128 + 1)) as u64;
    ((scan - cut).max(SWAP_CLUSTER_MAX), low_skipped)
}

/// fls_long(): the 1-based index of the highest set bit, 0 for 0.
#[inline]
fn fls_long(x: u64) -> i32 {
    (u64::BITS - x.leading_zeros()) as i32
}

/// set_initial_priority() (lru_gen_shrink_node, lru_gen_age_node): at DEF_PRIORITY with
/// at least MIN_LRU_BATCH to reclaim, start at the priority where (reclaimable >> priority)
/// is about nr_to_reclaim: fls(reclaimable) - 1 - fls(nr_to_reclaim - 1), clamped to
/// [DEF_PRIORITY / 2, DEF_PRIORITY]. `reclaimable` is the node's NR_INACTIVE_FILE, plus
/// NR_INACTIVE_ANON when anon can be reclaimed. Returns the priority to use.
pub fn set_initial_priority(priority: i32, nr_to_reclaim: u64, reclaimable: u64) -> i32 {
    if priority != DEF_PRIORITY || nr_to_reclaim < MIN_LRU_BATCH {
        return priority;
    }
    let p = fls_long(reclaimable) - 1 - fls_long(nr_to_reclaim - 1);
    p.clamp(DEF_PRIORITY / 2, DEF_PRIORITY)
}

/// lruvec_is_sizable(): are the evictable generations big enough to be worth a pass? For
/// an online memcg, (total >> priority) != 0; offline, any page at all.
pub fn lruvec_is_sizable(
    lrugen: &LruGenFolio,
    swappiness: u32,
    online: bool,
    priority: i32,
) -> bool {
    let mut total = 0u64;
    for ty in 0..ANON_AND_FILE {
        if !type_is_evictable(ty, swappiness) {
            continue;
        }
        for seq in lrugen.min_seq[ty]..=lrugen.max_seq {
            total += lrugen.nr_pages[lru_gen_from_seq(seq)][ty].max(0) as u64;
        }
    }
    if online {
        total >> priority.clamp(0, 63) != 0
    } else {
        total != 0
    }
}

/// The min_ttl test of lruvec_is_reclaimable(): was the oldest evictable generation born
/// more than `min_ttl` ago (time_is_before_jiffies(birth + min_ttl))? Times in virtual ns;
/// the kernel compares jiffies. The caller also requires !below_min and
/// `lruvec_is_sizable`.
pub fn lru_gen_oldest_expired(
    lrugen: &LruGenFolio,
    swappiness: u32,
    min_ttl: u64,
    now: u64,
) -> bool {
    let gen = lru_gen_from_seq(evictable_min_seq(lrugen.min_seq, swappiness));
    lrugen.timestamps[gen].saturating_add(min_ttl) < now
}

/// sort_folio()'s verdict on a folio at the tail of the oldest generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortFolio {
    /// No longer evictable: off MGLRU, PG_unevictable, onto the unevictable list
    /// (UNEVICTABLE_PGCULLED).
    Unevictable,
    /// The page-table walk promoted it: move to the head of its generation.
    Promoted { gen: usize },
    /// A tier above tier_idx, or all tier bits set: folio_inc_gen, head of min_seq + 1;
    /// `tier` is counted in protected[hist][type][tier] unless all bits were set.
    Protected { tier: Option<usize> },
    /// Cannot be taken now (PG_lru clear: someone else holds it off the LRU; a zone above
    /// reclaim_idx cannot happen with one zone): folio_inc_gen, tail of min_seq + 1.
    Ineligible,
    /// Under writeback, or dirty file: folio_inc_gen with PG_reclaim, head of min_seq + 1.
    /// A dirty file folio adds to sc->nr.file_taken, and to sc->nr.unqueued_dirty when not
    /// under writeback.
    Writeback {
        file_taken: bool,
        unqueued_dirty: bool,
    },
    /// Not sorted: try isolate_folio.
    Isolate,
}

impl SortFolio {
    /// sort_folio()'s return value: true when the folio was sorted (counted in PGREFILL).
    pub fn sorted(&self) -> bool {
        !matches!(self, SortFolio::Isolate)
    }
}

/// sort_folio()'s decision, a pure function of the folio's flags and byte: `evictable` is
/// folio_evictable(), `on_lru` whether the kernel's PG_lru would be set (in the project:
/// PG_LRU and not PG_INBATCH). The checks run in the kernel's order.
pub fn sort_folio_decide(
    lrugen: &LruGenFolio,
    page: &Page,
    byte: u8,
    tier_idx: usize,
    evictable: bool,
    on_lru: bool,
) -> SortFolio {
    let ty = folio_type(page);
    let refs = lru_refs(page, byte);
    let ws = page.test(PG_WORKINGSET);
    let tier = lru_tier_from_refs(refs, ws);
    if !evictable {
        return SortFolio::Unevictable;
    }
    let min_gen = lru_gen_from_seq(lrugen.min_seq[ty]);
    match byte_gen(byte) {
        Some(gen) if gen != min_gen => return SortFolio::Promoted { gen },
        _ => {}
    }
    let maxed = refs + ws as usize == REFS_MAXED;
    if tier > tier_idx || maxed {
        return SortFolio::Protected {
            tier: (!maxed).then_some(tier),
        };
    }
    if !on_lru {
        return SortFolio::Ineligible;
    }
    let (dirty, writeback) = (page.test(PG_DIRTY), page.test(PG_WRITEBACK));
    let file_dirty = ty == LRU_GEN_FILE && dirty;
    if writeback || file_dirty {
        return SortFolio::Writeback {
            file_taken: file_dirty,
            unqueued_dirty: file_dirty && !writeback,
        };
    }
    SortFolio::Isolate
}

/// sort_folio(): decide (see `sort_folio_decide`) and carry it out on the lists, except the
/// UNEVICTABLE_PGCULLED event and the sc->nr counts, which are the caller's. `evictable` is
/// folio_evictable(). Caller holds lru_lock.
pub fn sort_folio(
    frames: &mut Frames,
    lv: &mut Lruvec,
    pfn: Pfn,
    tier_idx: usize,
    evictable: bool,
) -> SortFolio {
    let page = frames[pfn as usize];
    let on_lru = page.test(PG_LRU) && !page.test(PG_INBATCH);
    let byte = frames.lru_gen[pfn as usize];
    let verdict = sort_folio_decide(&lv.lrugen, &page, byte, tier_idx, evictable, on_lru);
    match verdict {
        SortFolio::Unevictable => {
            lru_gen_del_folio(frames, lv, pfn, true);
            frames[pfn as usize].set(PG_UNEVICTABLE);
            super::mmzone::lruvec_add_folio(frames, lv, pfn);
        }
        SortFolio::Promoted { gen } => gen_list_move(frames, &mut lv.lrugen, pfn, gen, false),
        SortFolio::Protected { tier } => {
            let gen = folio_inc_gen(frames, lv, pfn, false);
            gen_list_move(frames, &mut lv.lrugen, pfn, gen, false);
            if let Some(t) = tier {
                let ty = folio_type(&page);
                let hist = lru_hist_from_seq(lv.lrugen.min_seq[ty]);
                lv.lrugen.protected[hist][ty][t] += 1;
            }
        }
        SortFolio::Ineligible => {
            let gen = folio_inc_gen(frames, lv, pfn, false);
            gen_list_move(frames, &mut lv.lrugen, pfn, gen, true);
        }
        SortFolio::Writeback { .. } => {
            let gen = folio_inc_gen(frames, lv, pfn, true);
            gen_list_move(frames, &mut lv.lrugen, pfn, gen, false);
        }
        SortFolio::Isolate => {}
    }
    verdict
}

/// isolate_folio(): take an unsorted folio off the lists for shrink_folio_list. Refused
/// (false, nothing changed) when the reclaim may not do IO (`gfp_io` false, no __GFP_IO)
/// and the folio is dirty or anon outside the swap cache; when folio_try_get fails
/// (PG_DYING); when PG_lru cannot be cleared (not PG_LRU, or held by a per-CPU batch:
/// PG_INBATCH). Otherwise PG_LRU is cleared and PG_ISOLATED set (the isolation reference),
/// the refs counter is dropped unless PG_referenced, PG_reclaim is cleared, and the folio
/// leaves MGLRU as reclaiming (no PG_active). "Anon" is swap-backed here (no lazyfree).
/// Caller holds lru_lock; MGLRU does not count NR_ISOLATED_*.
pub fn isolate_folio(frames: &mut Frames, lv: &mut Lruvec, pfn: Pfn, gfp_io: bool) -> bool {
    let page = frames[pfn as usize];
    let anon_unswapped = page.test(PG_SWAPBACKED) && !page.test(PG_SWAPCACHE);
    if !gfp_io && (page.test(PG_DIRTY) || anon_unswapped) {
        return false;
    }
    if page.test(PG_DYING) || !page.test(PG_LRU) || page.test(PG_INBATCH) {
        return false;
    }
    let p = &mut frames[pfn as usize];
    p.clear(PG_LRU | PG_RECLAIM);
    p.set(PG_ISOLATED);
    if !page.test(PG_REFERENCED) {
        set_byte_refs(frames, pfn, 0);
    }
    let ok = lru_gen_del_folio(frames, lv, pfn, true);
    debug_assert!(ok, "pfn {pfn} isolated off no MGLRU list");
    true
}

/// evict_folios()' putback step for a folio shrink_folio_list kept (after the retry
/// check): if it would be added back to the oldest generation (lru_gen_folio_seq with
/// reclaiming false equals the type's min_seq, both read at that moment), clear its refs
/// flags and set PG_active so that it lands in a young generation instead. Returns whether
/// it did. The kernel does this without the lru_lock.
pub fn evict_folios_keep_off_oldest(frames: &mut Frames, lrugen: &LruGenFolio, pfn: Pfn) -> bool {
    let page = frames[pfn as usize];
    let min_seq = lrugen.min_seq[folio_type(&page)];
    if lru_gen_folio_seq(lrugen, &page, false) != min_seq {
        return false;
    }
    clear_refs_flags(frames, pfn);
    frames[pfn as usize].set(PG_ACTIVE);
    true
}

/// Fixtures shared by the unit tests of the lru_gen files.
#[cfg(test)]
mod test_util {
    use super::*;

    pub(super) const ANON: u16 = PG_SWAPBACKED | PG_ALLOCATED;
    pub(super) const FILE: u16 = PG_ALLOCATED;

    /// An enabled lruvec with its initial window (max_seq 3, min_seq 0 and 0).
    pub(super) fn lruvec() -> Lruvec {
        let mut lv = Lruvec::new(0, 0, 0, 0);
        lv.lrugen.enabled = true;
        lv
    }

    pub(super) fn frames(flags: &[u16]) -> Frames {
        let mut f = Frames::zeroed(flags.len());
        for (i, &fl) in flags.iter().enumerate() {
            f[i].flags = fl;
        }
        f
    }

    /// The pfns of a list from head to tail.
    pub(super) fn list(frames: &Frames, head: &ListHead) -> Vec<Pfn> {
        let mut v = vec![];
        let mut p = head.head;
        while p != NIL {
            v.push(p);
            p = frames.links[p as usize].next;
        }
        v
    }

    pub(super) fn page(flags: u16) -> Page {
        Page {
            flags,
            ..Page::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;
    use crate::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON, LRU_UNEVICTABLE};

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
    fn get_tier_idx_cases() {
        let f = LRU_GEN_FILE;
        // No refaults anywhere: every tier is positive, tier_idx 3 (nothing protected).
        let mut g = LruGenFolio::init(true, 0);
        assert_eq!(get_tier_idx(&g, f), 3);
        // Set point tier 0: refaulted 5 + 5 = 10, total 500 + 300 + 200 = 1000, gain 2.
        g.avg_refaulted[f][0] = 5;
        g.refaulted[0][f][0] = 5;
        g.avg_total[f][0] = 500;
        g.protected[0][f][0] = 300;
        g.evicted[0][f][0] = 200;
        // Tier 1: refaulted 30 + 40 = 70, total 50 + 30 + 20 = 100, gain 3.
        // 70 * 1064 * 2 = 148960 > 11 * 100 * 3 = 3300: negative, tier_idx 0. (Without
        // the average, 40 < 64 refaults would have passed.)
        g.avg_refaulted[f][1] = 30;
        g.refaulted[0][f][1] = 40;
        g.avg_total[f][1] = 50;
        g.protected[0][f][1] = 30;
        g.evicted[0][f][1] = 20;
        assert_eq!(get_tier_idx(&g, f), 0);
        assert_eq!(get_tier_idx(&g, LRU_GEN_ANON), 3, "types are separate");
        // Tier 1 down to 63 refaults: positive; tier 2 with 200 of 300:
        // 200 * 1064 * 2 = 425600 > 11 * 300 * 3 = 9900: negative, tier_idx 1.
        g.refaulted[0][f][1] = 33;
        g.refaulted[0][f][2] = 200;
        g.evicted[0][f][2] = 300;
        assert_eq!(get_tier_idx(&g, f), 1);
        // Gains 2 (set point) against 3: sp = (0, 0): tier 1 with 64 refaults of T is
        // positive iff 64 * 64 * 2 = 8192 <= 3 * T, i.e. T >= 2731.
        let mut g = LruGenFolio::init(true, 0);
        g.refaulted[0][f][1] = 64;
        g.evicted[0][f][1] = 2731;
        assert_eq!(get_tier_idx(&g, f), 3);
        g.evicted[0][f][1] = 2730;
        assert_eq!(get_tier_idx(&g, f), 0);
    }

    #[test]
    fn get_type_to_scan_cases() {
        let (a, f) = (LRU_GEN_ANON, LRU_GEN_FILE);
        let mut g = LruGenFolio::init(true, 0);
        // No refaults: file (pv) has fewer than 64, positive: file.
        assert_eq!(get_type_to_scan(&g, 2), f);
        // Anon set point (0, 0) with gain sw; file (64 refaults in tier 1, 4096 total in
        // tier 3, so all tiers are summed) with gain 200 - sw. Positive iff
        // 64 * 64 * sw <= 1 * 4096 * (200 - sw), i.e. sw <= 100.
        g.refaulted[0][f][1] = 64;
        g.avg_total[f][3] = 4096;
        // sw 60: 245760 <= 573440; sw 100: equal; sw 101: 413696 > 405504; sw 140:
        // 573440 > 245760.
        assert_eq!(get_type_to_scan(&g, 60), f);
        assert_eq!(get_type_to_scan(&g, 100), f);
        assert_eq!(get_type_to_scan(&g, 101), a);
        assert_eq!(get_type_to_scan(&g, 140), a);
        // The shortcuts: 0 and 1 always file, 200 and 201 always anon.
        assert_eq!(get_type_to_scan(&g, 0), f);
        assert_eq!(get_type_to_scan(&g, 1), f);
        g.refaulted[0][a][0] = 1 << 20;
        g.refaulted[0][f][1] = 0;
        assert_eq!(
            get_type_to_scan(&g, 199),
            f,
            "anon refaults: the PID says file"
        );
        assert_eq!(get_type_to_scan(&g, 200), a);
        assert_eq!(get_type_to_scan(&g, 201), a);
    }

    #[test]
    fn inc_max_seq_folds_oldest_and_moves_compat_sizes() {
        let f_ = LRU_GEN_FILE;
        // max_seq 3: gens 2, 3 active. pfn 0 anon -> gen 2; pfn 1 file -> gen 0;
        // pfn 2 file workingset -> seq 1, gen 1; pfns 3, 4 file -> gen 0 (list 4, 3, 1).
        let mut f = frames(&[ANON, FILE, FILE | PG_WORKINGSET, FILE, FILE]);
        let mut lv = lruvec();
        for pfn in 0..5 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false);
        }
        // Then pfn 3 gets all its tier bits (refs 4 + workingset = 5) and pfn 4 refs 2.
        f[3].set(PG_REFERENCED | PG_WORKINGSET);
        f.lru_gen[3] |= 3 << LRU_REFS_PGOFF;
        f[4].set(PG_REFERENCED);
        f.lru_gen[4] |= 1 << LRU_REFS_PGOFF;
        // Averages of 9 make the protected counts visible after the carry-over halves.
        lv.lrugen.avg_total[f_] = [9; 4];
        assert_eq!(inc_max_seq(&mut f, &mut lv, 3, 60, 100), IncMaxSeq::Done);
        // Both windows were 4: anon gen 0 empty -> min 1; file gen 0 folded into gen 1
        // from the tail, each to the tail: gen 1 = 2, 1, 3, 4.
        assert_eq!(lv.lrugen.min_seq, [1, 1]);
        assert_eq!(lv.lrugen.max_seq, 4);
        assert_eq!(list(&f, &lv.lrugen.folios[1][f_]), vec![2, 1, 3, 4]);
        // Protected: pfn 1 tier 0, pfn 4 tier 1 (refs 2), pfn 3 not counted (maxed);
        // carried over: (9 + 1) / 2 = 5 for tiers 0 and 1, 9 / 2 = 4 for tiers 2 and 3.
        assert_eq!(lv.lrugen.avg_total[f_], [5, 5, 4, 4]);
        assert!(!f[3].test(PG_REFERENCED) && f[3].test(PG_WORKINGSET));
        assert!(!f[4].test(PG_REFERENCED));
        // Compat: prev = gen 2 (seq 2) stops being active, next = gen 0 (seq 4) starts:
        // anon delta = 1 - 0 moves the anon folio to inactive; file delta = 0 - 0.
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 1);
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 0);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 4);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE + 1], 0);
        assert_eq!(lv.lrugen.timestamps, [100, 0, 0, 0]);
        // A stale seq does nothing.
        assert_eq!(inc_max_seq(&mut f, &mut lv, 3, 60, 150), IncMaxSeq::Stale);
        assert_eq!(lv.lrugen.max_seq, 4);
        // Again at seq 4: windows 4 again; file gen 1 -> gen 2 from the tail: 4, 3, 1, 2.
        assert_eq!(inc_max_seq(&mut f, &mut lv, 4, 60, 200), IncMaxSeq::Done);
        assert_eq!(lv.lrugen.min_seq, [2, 2]);
        assert_eq!(lv.lrugen.max_seq, 5);
        assert_eq!(list(&f, &lv.lrugen.folios[2][f_]), vec![4, 3, 1, 2]);
        // prev = gen 3, next = gen 1: both empty, no compat move.
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 1);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 4);
        assert_eq!(lv.lrugen.timestamps, [100, 200, 0, 0]);
    }

    #[test]
    fn inc_max_seq_keeps_unevictable_type_in_place() {
        // Swappiness 0: anon is not evictable. pfn 0 anon in the swap cache -> gen 0.
        let mut f = frames(&[ANON | PG_SWAPCACHE, FILE]);
        let mut lv = lruvec();
        lru_gen_add_folio(&mut f, &mut lv, 0, false);
        lru_gen_add_folio(&mut f, &mut lv, 1, false);
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 1);
        assert_eq!(inc_max_seq(&mut f, &mut lv, 3, 0, 7), IncMaxSeq::Done);
        // Anon's min_seq advanced without moving the folio; it is now in gen 0 = seq 4,
        // the youngest: prev = gen 2 (0 pages), next = gen 0 (1 page), delta -1 makes it
        // active.
        assert_eq!(lv.lrugen.min_seq, [1, 1]);
        assert_eq!(folio_lru_gen(&f, 0), Some(0));
        assert_eq!(list(&f, &lv.lrugen.folios[0][LRU_GEN_ANON]), vec![0]);
        assert_eq!(lv.nr[LRU_INACTIVE_ANON], 0);
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 1);
        assert_eq!(folio_lru_gen(&f, 1), Some(1), "file is evictable and moves");
    }

    #[test]
    fn inc_min_seq_yields_after_max_lru_batch() {
        // 4096 file folios in gen 0: inc_min_seq moves all of them, and the 4096th spends
        // the batch, so it reports false before advancing min_seq; the retry finds gen 0
        // empty and finishes.
        let n = MAX_LRU_BATCH as usize;
        let mut f = frames(&vec![FILE; n]);
        let mut lv = lruvec();
        for pfn in 0..n as u32 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false);
        }
        assert_eq!(inc_max_seq(&mut f, &mut lv, 3, 60, 0), IncMaxSeq::Busy);
        assert_eq!(lv.lrugen.min_seq, [1, 0]);
        assert_eq!(lv.lrugen.max_seq, 3);
        assert_eq!(lv.lrugen.nr_pages[1][LRU_GEN_FILE], n as i64);
        assert_eq!(inc_max_seq(&mut f, &mut lv, 3, 60, 0), IncMaxSeq::Done);
        assert_eq!(lv.lrugen.min_seq, [1, 1]);
        // All 4096 counted as protected in tier 0, then halved: 2048.
        assert_eq!(lv.lrugen.avg_total[LRU_GEN_FILE][0], 2048);
    }

    #[test]
    fn try_to_inc_min_seq_cases() {
        let (a, f) = (LRU_GEN_ANON, LRU_GEN_FILE);
        // max_seq 5, min_seq 2 and 2. Anon: seqs 2, 3 empty, 4 (gen 0) not; file: seq 2
        // (gen 2) not empty. Only the list heads are read.
        let mut base = LruGenFolio::init(true, 0);
        base.max_seq = 5;
        base.min_seq = [2, 2];
        base.folios[0][a].head = 7;
        base.folios[2][f].head = 8;
        base.avg_refaulted = [[10; 4]; 2];
        // Swappiness 60: anon would reach 4 (stops when 4 + 2 > 5), but file lags at 2 <
        // max_seq - 2 = 3, so anon is held at 3.
        let mut g = base.clone();
        assert!(try_to_inc_min_seq(&mut g, 60));
        assert_eq!(g.min_seq, [3, 2]);
        assert_eq!(g.avg_refaulted[a], [5; 4], "carried over");
        assert_eq!(g.avg_refaulted[f], [10; 4]);
        // Swappiness 0: anon is not evictable and file cannot move.
        let mut g = base.clone();
        assert!(!try_to_inc_min_seq(&mut g, 0));
        assert_eq!(g.min_seq, [2, 2]);
        // Swappiness 201: file is not evictable; anon goes to 4 unheld.
        let mut g = base.clone();
        assert!(try_to_inc_min_seq(&mut g, 201));
        assert_eq!(g.min_seq, [4, 2]);
        // File runs ahead (seqs 2, 3 empty, 4 not) while anon lags at 2 (not empty):
        // with both evictable, file is held at max_seq - 2 = 3; with swappiness 0 anon does
        // not count and file reaches 4.
        let mut ahead = LruGenFolio::init(true, 0);
        ahead.max_seq = 5;
        ahead.min_seq = [2, 2];
        ahead.folios[2][a].head = 7;
        ahead.folios[0][f].head = 8;
        let mut g = ahead.clone();
        assert!(try_to_inc_min_seq(&mut g, 60));
        assert_eq!(g.min_seq, [2, 3]);
        let mut g = ahead.clone();
        assert!(try_to_inc_min_seq(&mut g, 0));
        assert_eq!(g.min_seq, [2, 4]);
        // Empty lists stop at max_seq - MIN_NR_GENS + 1 = 4 (two gens left).
        let mut g = LruGenFolio::init(true, 0);
        g.max_seq = 5;
        g.min_seq = [2, 2];
        assert!(try_to_inc_min_seq(&mut g, 60));
        assert_eq!(g.min_seq, [4, 4]);
    }

    #[test]
    fn should_run_aging_and_get_nr_to_scan() {
        let mut g = LruGenFolio::init(true, 0);
        g.max_seq = 5;
        // seq 2 = gen 2, seq 3 = gen 3, seq 4 = gen 0, seq 5 = gen 1.
        g.nr_pages[2] = [1000, 0];
        g.nr_pages[3] = [10, 20];
        g.nr_pages[0] = [1, 2];
        g.nr_pages[1] = [100, -5];
        g.min_seq = [3, 3];
        // Oldest 3 + 2 == 5: due; anon 10 + 1 + 100, file 20 + 2 + 0 (negative) = 133.
        assert_eq!(should_run_aging(&g, 5, 60), (true, 133));
        g.min_seq = [4, 4];
        assert_eq!(
            should_run_aging(&g, 5, 60),
            (true, 0),
            "4 + 2 > 5: must age"
        );
        g.min_seq = [2, 3];
        // Oldest 2: not due; anon seqs 2..=5: 1111, file seqs 3..=5: 22.
        assert_eq!(should_run_aging(&g, 5, 60), (false, 1133));
        assert_eq!(
            should_run_aging(&g, 5, 0),
            (true, 22),
            "file only, oldest 3"
        );
        assert_eq!(should_run_aging(&g, 5, 201), (false, 1111), "anon only");

        // get_nr_to_scan on the same lruvec (not due, 1133 pages).
        assert_eq!(get_nr_to_scan(&g, 60, true, true, 4, |n| n), NrToScan::Stop);
        // Offline: everything, protection not applied.
        assert_eq!(
            get_nr_to_scan(&g, 60, false, false, 4, |_| 0),
            NrToScan::Scan(1133)
        );
        // Online: protected to 566, >> 4 = 35.
        assert_eq!(
            get_nr_to_scan(&g, 60, false, true, 4, |n| n / 2),
            NrToScan::Scan(35)
        );
        // Due (min_seq 3): at DEF_PRIORITY, 133 >> 12 = 0; below it, aging.
        g.min_seq = [3, 3];
        assert_eq!(
            get_nr_to_scan(&g, 60, false, true, 12, |n| n),
            NrToScan::Scan(0)
        );
        assert_eq!(
            get_nr_to_scan(&g, 60, false, true, 11, |n| n),
            NrToScan::Aging { max_seq: 5 }
        );
        // Must age with nothing evictable: offline does not short-cut a size of 0.
        g.min_seq = [4, 4];
        assert_eq!(
            get_nr_to_scan(&g, 60, false, false, 11, |n| n),
            NrToScan::Aging { max_seq: 5 }
        );
    }

    #[test]
    fn set_initial_priority_cases() {
        // Only at DEF_PRIORITY with at least MIN_LRU_BATCH to reclaim.
        assert_eq!(set_initial_priority(11, 1 << 10, 1 << 20), 11);
        assert_eq!(set_initial_priority(12, 63, 1 << 20), 12);
        // fls(1 << 20) = 21, fls(1023) = 10: 21 - 1 - 10 = 10.
        assert_eq!(set_initial_priority(12, 1024, 1 << 20), 10);
        // Rounds reclaimable down: fls((1 << 20) - 1) = 20 -> 9.
        assert_eq!(set_initial_priority(12, 1024, (1 << 20) - 1), 9);
        // Rounds nr_to_reclaim up: fls(1024) = 11 -> 9.
        assert_eq!(set_initial_priority(12, 1025, 1 << 20), 9);
        // Clamped to 12 above: fls(1 << 40) - 1 - fls(63) = 41 - 1 - 6 = 34.
        assert_eq!(set_initial_priority(12, 64, 1 << 40), 12);
        // Clamped to 6 below: 7 - 1 - 6 = 0, and 0 - 1 - 6 = -7.
        assert_eq!(set_initial_priority(12, 64, 100), 6);
        assert_eq!(set_initial_priority(12, 64, 0), 6);
        // Just inside: fls(1 << 13) - 1 - fls(63) = 14 - 1 - 6 = 7.
        assert_eq!(set_initial_priority(12, 64, 1 << 13), 7);
    }

    #[test]
    fn apply_proportional_protection_cases() {
        // No protection: unchanged.
        assert_eq!(
            apply_proportional_protection(1000, 0, 0, 1000, false),
            (1000, false)
        );
        // memory.low 500 of usage 1000: 1000 - 1000 * 500 / 1001 = 1000 - 499 = 501.
        assert_eq!(
            apply_proportional_protection(1000, 0, 500, 1000, false),
            (501, true)
        );
        // low equal to min: min counts, low is not reported skipped: 1000 - 499 = 501.
        assert_eq!(
            apply_proportional_protection(1000, 500, 500, 1000, false),
            (501, false)
        );
        // The low-overriding pass uses min (0): unchanged, low not skipped.
        assert_eq!(
            apply_proportional_protection(1000, 0, 500, 1000, true),
            (1000, false)
        );
        // min 900 of 1000: 40 - 40 * 900 / 1001 = 40 - 35 = 5, raised to SWAP_CLUSTER_MAX.
        assert_eq!(
            apply_proportional_protection(40, 900, 0, 1000, false),
            (32, false)
        );
        // Usage below protection counts as the protection: 1000 - 1000 * 800 / 801 = 1.
        assert_eq!(
            apply_proportional_protection(1000, 800, 0, 10, false),
            (32, false)
        );
    }

    #[test]
    fn sort_folio_verdicts_and_moves() {
        let f_ = LRU_GEN_FILE;
        let mut flags = vec![FILE; 10];
        flags[6] = ANON | PG_SWAPCACHE;
        flags[7] = ANON | PG_SWAPCACHE;
        let mut f = frames(&flags);
        let mut lv = lruvec();
        // All land in gen 0 (the oldest; max_seq 3, min_seq 0).
        for pfn in 0..10 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false);
            assert_eq!(folio_lru_gen(&f, pfn), Some(0));
        }
        // pfn 0: promoted by the walk to gen 3 (accounted as reset_batch_size would).
        f[0].set(PG_REFERENCED);
        assert_eq!(folio_update_gen(&mut f, 0, 3), Some(0));
        lru_gen_update_size(&mut lv, f_, Some(0), Some(3));
        // pfn 1: refs 3 (tier 2); pfn 2: refs 4 + workingset; pfn 3: in a batch;
        // pfn 4 dirty; pfn 5 dirty under writeback; pfn 6 anon under writeback; pfn 7
        // dirty anon; pfn 8 clean; pfn 9 no longer evictable.
        f[1].set(PG_REFERENCED);
        f.lru_gen[1] |= 2 << LRU_REFS_PGOFF;
        f[2].set(PG_REFERENCED | PG_WORKINGSET);
        f.lru_gen[2] |= 3 << LRU_REFS_PGOFF;
        f[3].set(PG_INBATCH);
        f[4].set(PG_DIRTY);
        f[5].set(PG_DIRTY | PG_WRITEBACK);
        f[6].set(PG_WRITEBACK);
        f[7].set(PG_DIRTY);
        let decide = |f: &Frames, lv: &Lruvec, pfn: u32, tier_idx, evictable| {
            let p = f[pfn as usize];
            let on_lru = p.test(PG_LRU) && !p.test(PG_INBATCH);
            sort_folio_decide(
                &lv.lrugen,
                &p,
                f.lru_gen[pfn as usize],
                tier_idx,
                evictable,
                on_lru,
            )
        };
        assert_eq!(decide(&f, &lv, 0, 0, true), SortFolio::Promoted { gen: 3 });
        assert_eq!(
            decide(&f, &lv, 1, 1, true),
            SortFolio::Protected { tier: Some(2) }
        );
        // Tier 2 is not above tier_idx 2: no protection, and clean: isolate.
        assert_eq!(decide(&f, &lv, 1, 2, true), SortFolio::Isolate);
        assert_eq!(
            decide(&f, &lv, 2, 3, true),
            SortFolio::Protected { tier: None }
        );
        assert_eq!(decide(&f, &lv, 3, 3, true), SortFolio::Ineligible);
        let wb = |file_taken, unqueued_dirty| SortFolio::Writeback {
            file_taken,
            unqueued_dirty,
        };
        assert_eq!(decide(&f, &lv, 4, 3, true), wb(true, true));
        assert_eq!(decide(&f, &lv, 5, 3, true), wb(true, false));
        assert_eq!(decide(&f, &lv, 6, 3, true), wb(false, false));
        assert_eq!(
            decide(&f, &lv, 7, 3, true),
            SortFolio::Isolate,
            "dirty anon"
        );
        assert_eq!(decide(&f, &lv, 8, 3, true), SortFolio::Isolate);
        assert_eq!(decide(&f, &lv, 9, 3, false), SortFolio::Unevictable);
        // Unevictable comes first, even for a promoted folio.
        assert_eq!(decide(&f, &lv, 0, 3, false), SortFolio::Unevictable);

        // Carry them out: pfn 0 to the head of gen 3; 1, 2 (head), 3 (tail), 4, 5 (head)
        // into gen 1: 5, 4, 2, 1, 3.
        assert!(sort_folio(&mut f, &mut lv, 0, 1, true).sorted());
        assert_eq!(list(&f, &lv.lrugen.folios[3][f_]), vec![0]);
        for pfn in 1..6 {
            assert!(sort_folio(&mut f, &mut lv, pfn, 1, true).sorted());
        }
        assert_eq!(list(&f, &lv.lrugen.folios[1][f_]), vec![5, 4, 2, 1, 3]);
        assert_eq!(list(&f, &lv.lrugen.folios[0][f_]), vec![9, 8]);
        assert_eq!(
            lv.lrugen.protected[0][f_],
            [0, 0, 1, 0],
            "only pfn 1, tier 2"
        );
        assert!(f[4].test(PG_RECLAIM) && f[5].test(PG_RECLAIM) && !f[1].test(PG_RECLAIM));
        assert!(!f[1].test(PG_REFERENCED) && byte_refs(f.lru_gen[1]) == 0);
        assert_eq!(lv.lrugen.nr_pages[1][f_], 5);
        assert_eq!(lv.lrugen.nr_pages[0][f_], 2);
        assert!(!sort_folio(&mut f, &mut lv, 8, 1, true).sorted());
        // pfn 9: onto the classic unevictable list.
        assert_eq!(
            sort_folio(&mut f, &mut lv, 9, 1, false),
            SortFolio::Unevictable
        );
        assert!(f[9].test(PG_UNEVICTABLE) && f.lru_gen[9] & LRU_GEN_MASK == 0);
        assert_eq!(lv.nr[LRU_UNEVICTABLE], 1);
        assert_eq!(lv.lrugen.nr_pages[0][f_], 1);
        assert_eq!(list(&f, &lv.lrugen.folios[0][f_]), vec![8]);
    }

    #[test]
    fn isolate_folio_cases() {
        let mut f = frames(&[ANON, FILE | PG_DIRTY, FILE, FILE, FILE, FILE]);
        let mut lv = lruvec();
        for pfn in 0..6 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false);
        }
        // Without __GFP_IO: anon outside the swap cache and dirty folios stay.
        assert!(!isolate_folio(&mut f, &mut lv, 0, false));
        assert!(!isolate_folio(&mut f, &mut lv, 1, false));
        // Dying (folio_try_get fails) or in a batch (PG_lru held): stay.
        f[2].set(PG_DYING);
        assert!(!isolate_folio(&mut f, &mut lv, 2, true));
        f[3].set(PG_INBATCH);
        assert!(!isolate_folio(&mut f, &mut lv, 3, true));
        assert_eq!(lv.lrugen.nr_pages[0][LRU_GEN_FILE], 5);
        // The anon folio is in gen 2, active: isolated without PG_active.
        assert!(isolate_folio(&mut f, &mut lv, 0, true));
        assert!(!f[0].test(PG_ACTIVE | PG_LRU) && f[0].test(PG_ISOLATED));
        assert_eq!(lv.nr[LRU_ACTIVE_ANON], 0);
        // Referenced: the refs counter is kept; PG_reclaim goes.
        f[4].set(PG_REFERENCED | PG_RECLAIM);
        f.lru_gen[4] |= 2 << LRU_REFS_PGOFF;
        assert!(isolate_folio(&mut f, &mut lv, 4, true));
        assert_eq!(f.lru_gen[4], 2 << LRU_REFS_PGOFF, "gen cleared, refs kept");
        assert!(!f[4].test(PG_RECLAIM));
        // Not referenced: the stale counter goes too.
        f.lru_gen[5] |= 3 << LRU_REFS_PGOFF;
        assert!(isolate_folio(&mut f, &mut lv, 5, true));
        assert_eq!(f.lru_gen[5], 0);
        assert_eq!(lv.nr[LRU_INACTIVE_FILE], 3);
        assert_eq!(list(&f, &lv.lrugen.folios[0][LRU_GEN_FILE]), vec![3, 2, 1]);
    }

    #[test]
    fn keep_off_oldest_after_reclaim() {
        // max_seq 3, min_seq 0 and 0: a clean file folio would go back to seq 0, the
        // oldest: it gets PG_active and loses its refs flags.
        let mut f = frames(&[FILE | PG_REFERENCED, FILE | PG_WORKINGSET, ANON]);
        f.lru_gen[0] = 2 << LRU_REFS_PGOFF;
        let mut g = LruGenFolio::init(true, 0);
        assert!(evict_folios_keep_off_oldest(&mut f, &g, 0));
        assert!(f[0].test(PG_ACTIVE) && !f[0].test(PG_REFERENCED));
        assert_eq!(f.lru_gen[0], 0);
        // Workingset goes to seq 1, anon outside swap cache to seq 2: left alone.
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 1));
        assert!(!evict_folios_keep_off_oldest(&mut f, &g, 2));
        // With file min_seq 1, seq 1 is the oldest: clamped, so marked.
        g.min_seq[LRU_GEN_FILE] = 1;
        assert!(evict_folios_keep_off_oldest(&mut f, &g, 1));
        assert!(f[1].test(PG_ACTIVE));
    }

    #[test]
    fn swappiness_size_and_ttl_helpers() {
        assert_eq!(get_swappiness(false, 1000, 60), 0);
        assert_eq!(
            get_swappiness(true, 63, 60),
            0,
            "fewer than MIN_LRU_BATCH swap pages"
        );
        assert_eq!(get_swappiness(true, 64, 60), 60);
        assert_eq!(get_swappiness(true, 64, 201), 201);
        let mut g = LruGenFolio::init(true, 0);
        // Window seqs 0..=3: 100 pages in all.
        g.nr_pages[0] = [40, 20];
        g.nr_pages[3] = [30, 10];
        assert!(lruvec_is_sizable(&g, 60, true, 6), "100 >> 6 = 1");
        assert!(!lruvec_is_sizable(&g, 60, true, 7), "100 >> 7 = 0");
        assert!(lruvec_is_sizable(&g, 60, false, 12), "offline: any page");
        assert!(!lruvec_is_sizable(&g, 0, true, 5), "file only: 30 >> 5 = 0");
        assert!(!lruvec_is_sizable(
            &LruGenFolio::init(true, 0),
            60,
            false,
            0
        ));
        // Oldest evictable generation born at 1000 (file only: min_seq file = 1).
        g.min_seq = [0, 1];
        g.timestamps = [5, 1000, 0, 0];
        assert!(
            !lru_gen_oldest_expired(&g, 0, 500, 1500),
            "not before: equal"
        );
        assert!(lru_gen_oldest_expired(&g, 0, 500, 1501));
        assert!(
            lru_gen_oldest_expired(&g, 60, 500, 506),
            "anon gen 0 born at 5"
        );
    }
}
