//! The multi-gen LRU (MGLRU, lru_gen).
//!
//! Models the lru_gen sections of mm/vmscan.c together with the lru_gen parts of
//! include/linux/mm_inline.h, include/linux/mmzone.h, mm/workingset.c and mm/swap.c, as of
//! v6.18. One file per section of vmscan.c, named after its banner, or per other kernel
//! file; each opens with what it models and what it simplifies:
//!
//! | file            | models                                                            |
//! |-----------------|-------------------------------------------------------------------|
//! | `mod.rs`        | vmscan.c "shorthand helpers", "initialization"; lru_gen_folio     |
//! | `folio.rs`      | mm_inline.h, swap.c (lru_gen_inc_refs): a folio's gen and refs    |
//! | `walk.rs`       | vmscan.c "Bloom filters", "rmap/PT walk feedback", and the        |
//! |                 | page-table walk of "the aging"                                    |
//! | `mm_list.rs`    | vmscan.c "mm_struct list"                                         |
//! | `pid.rs`        | vmscan.c "PID controller"                                         |
//! | `aging.rs`      | vmscan.c "the aging": the generations (inc_min_seq, inc_max_seq)  |
//! | `protection.rs` | vmscan.c "working set protection" (min_ttl, lru_gen_age_node)     |
//! | `memcg_lru.rs`  | vmscan.c "memcg LRU"                                              |
//! | `eviction.rs`   | vmscan.c "the eviction" (sort_folio to lru_gen_shrink_node)       |
//! | `v6_1.rs`       | 6.1's eviction loop, should_abort_scan and lru_gen_age_node       |
//! | `debugfs.rs`    | vmscan.c "debugfs interface": /sys/kernel/debug/lru_gen           |
//! | `workingset.rs` | workingset.c (lru_gen): refault tokens                            |
//! | `check.rs`      | the invariants the kernel's VM_WARN_ON_ONCE checks look at        |
//!
//! vmscan.c's "state change" and "sysfs interface" sections are not modeled: MGLRU's
//! capabilities (/sys/kernel/mm/lru_gen/enabled) and min_ttl are set once, from the
//! scenario (`Mm::lru_gen_caps`, `Mm::lru_gen_min_ttl`).
//!
//! What the kernel does without sleeping (flag and counter arithmetic, list moves under
//! the lru_lock, the memcg LRU under its spinlock, the mm_list cursor under its spinlock)
//! is plain functions on the state it touches; the paths that sleep or take locks in turn
//! are async methods of `Sim`, in the file of their section. Where one kernel function has
//! both, the synchronous part is a private helper beside it (`lru_gen_rotate_memcg_locked`,
//! `get_nr_to_scan_decide`, `get_swappiness_decide`).
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
//! Throughout (each file names its own simplifications):
//! - One zone per node, so `folios[gen][type][zone]` is `folios[gen][type]`, and every
//!   folio is one page (every size delta is 1).
//! - NR_HIST_GENS is 1 (no CONFIG_LRU_GEN_STATS).
//! - Atomic counters (evicted, refaulted) are plain integers; READ_ONCE/WRITE_ONCE ordering
//!   has no meaning in a sequential simulation.
//! - Times are virtual nanoseconds passed in by the caller; the kernel stamps generations in
//!   jiffies, so it sees coarser time (1 to 4 ms a tick).
//! - Randomness (the memcg LRU's bin) is drawn by the `Sim` caller and passed in to the
//!   synchronous core (memcg_lru.rs).
//! - Switching MGLRU on or off at run time (lru_gen_change_state, fill_evictable,
//!   drain_evictable), demotion and PMD-mapped folios are not modeled.

use super::mm_types::*;
use super::mmzone::LRU_INACTIVE_FILE;
use super::vmscan::ScanControl;
use super::{LruvecId, Mm};

pub mod aging;
pub mod check;
pub mod debugfs;
pub mod eviction;
pub mod folio;
pub mod list;
pub mod memcg_lru;
pub mod mm_list;
pub mod pid;
pub mod protection;
pub mod v6_1;
pub mod walk;
pub mod workingset;
pub use aging::*;
pub use check::*;
pub use debugfs::*;
pub use eviction::*;
pub use folio::*;
pub use memcg_lru::*;
pub use mm_list::*;
pub use pid::*;
pub use protection::*;
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
/// The gen counter in `Page::lru_gen` (gen+1, 0 = not on an MGLRU list).
pub const LRU_GEN_MASK: u8 = (1 << LRU_GEN_WIDTH) - 1;
/// Where the refs counter starts in `Page::lru_gen`.
pub const LRU_REFS_PGOFF: u32 = LRU_GEN_WIDTH;
/// The refs counter in `Page::lru_gen`.
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
    /// it meets them. See list.rs.
    pub folios: [[list::GenList; ANON_AND_FILE]; MAX_NR_GENS as usize],
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
            folios: Default::default(),
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

// ---------------------------------------------------------------------------------------
// Shorthand helpers
// ---------------------------------------------------------------------------------------

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

impl Mm {
    /// get_swappiness(): 0 (file only) when the reclaim may not swap or the memcg has
    /// fewer than MIN_LRU_BATCH swap slots left; else memory.reclaim's swappiness= or the
    /// memcg's (sc_swappiness).
    pub fn lru_gen_swappiness(&self, lv: LruvecId, sc: &ScanControl) -> u32 {
        let memcg = self.lruvecs[lv as usize].memcg;
        let sw = sc
            .swappiness
            .unwrap_or_else(|| self.mem_cgroup_swappiness(memcg));
        get_swappiness_decide(sc.may_swap, self.mem_cgroup_get_nr_swap_pages(memcg), sw)
    }
}

/// get_swappiness()'s decision (see `Mm::lru_gen_swappiness`): the swappiness MGLRU works
/// with. 0 (file only) when the reclaim may not swap or the memcg has fewer than
/// MIN_LRU_BATCH swap pages left (demotion targets are not modeled); else the reclaim's
/// swappiness (sc_swappiness: memory.reclaim's override or the memcg's).
fn get_swappiness_decide(may_swap: bool, nr_swap_pages: u64, sc_swappiness: u32) -> u32 {
    if !may_swap || nr_swap_pages < MIN_LRU_BATCH {
        return 0;
    }
    sc_swappiness
}

// ---------------------------------------------------------------------------------------
// Initialization
// ---------------------------------------------------------------------------------------

impl Mm {
    /// lru_gen_init_lruvec() for every lruvec, lru_gen_init_memcg(), and
    /// lru_gen_online_memcg() for every memcg in creation order (the root first), each
    /// drawing one random bin for all its nodes. Called once at boot with MGLRU on.
    pub fn lru_gen_init(&mut self, rng: &mut crate::engine::rng::Rng) {
        for lv in self.lruvecs.iter_mut() {
            lv.lrugen = LruGenFolio::init(true, 0);
        }
        self.mm_state = (0..self.lruvecs.len())
            .map(|_| LruGenMmState::new())
            .collect();
        self.mm_lists = (0..self.memcgs.len())
            .map(|_| LruGenMmList::default())
            .collect();
        self.lru_gen_walks = vec![0; self.lruvecs.len()];
        for m in 0..self.memcgs.len() {
            let bin = random_bin(rng);
            for n in 0..self.nodes.len() {
                let lv = self.memcgs[m].lruvecs[n];
                let Mm { nodes, lruvecs, .. } = self;
                lru_gen_online_memcg(
                    &mut nodes[n].memcg_lru,
                    lv,
                    &mut lruvecs[lv as usize].lrugen,
                    bin,
                );
            }
        }
    }
}

/// Fixtures shared by the unit tests of the lru_gen files.
#[cfg(test)]
mod test_util {
    use super::*;
    use crate::mm::mmzone::Lruvec;
    use crate::mm::Pfn;

    pub(super) const ANON: u16 = PG_SWAPBACKED | PG_ALLOCATED;
    pub(super) const FILE: u16 = PG_ALLOCATED;

    /// The rules of Linux 6.12 (the refs encoding and promotion before 6.14).
    pub(super) fn v6_12() -> crate::versions::Rules {
        crate::versions::Rules::of(crate::versions::KernelVersion::V6_12)
    }

    /// Generations max_seq 7, min_seq [anon, file] as given (the placement tests' window).
    pub(super) fn window(min_seq: [u64; ANON_AND_FILE]) -> LruGenFolio {
        let mut g = LruGenFolio::init(true, 0);
        g.max_seq = 7;
        g.min_seq = min_seq;
        g
    }

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

    /// The pfns of a list from head to tail (each checked against its position).
    pub(super) fn list(frames: &Frames, l: &super::list::GenList) -> Vec<Pfn> {
        let v: Vec<Pfn> = l.iter().collect();
        for &p in &v {
            assert!(
                l.holds(&frames.lru_pos, p),
                "pfn {p} not where its position says"
            );
        }
        v
    }

    pub(super) fn page(flags: u16) -> Page {
        Page::with_flags(flags)
    }
}
