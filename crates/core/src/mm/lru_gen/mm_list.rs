//! The mm_struct list: the "mm_struct list" section of mm/vmscan.c (v6.18), with
//! struct lru_gen_mm_list and struct lru_gen_mm_state (include/linux/mmzone.h).
//!
//! Each memcg keeps a list of the address spaces of its processes (lru_gen_add_mm at fork
//! and exec, lru_gen_del_mm at exit). Aging iterates it once per generation: each lruvec
//! (memcg and node) has a cursor (`LruGenMmState::head`) that the walkers of that lruvec
//! share, so that concurrent agings split the list between them instead of walking it
//! twice, and `LruGenMmState::seq` counts the completed iterations, one behind max_seq
//! until the walk that finishes the list may open the next generation. An mm is walked
//! only if it ran on the node since the last walk (its bitmap bit, set by
//! lru_gen_use_mm), or if it is new to the walker (added after the previous iteration
//! ended: `LruGenMmState::tail`), or when the walk is forced.
//!
//! ```text
//!   fifo: mm 10 -> mm 11 -> mm 12 -> mm 13 -> (fifo)
//!                            ^head              ^tail: added since the last iteration
//! ```
//! Simplified: the list is a vector searched linearly, and a cursor is an mm id or the
//! list head (`MmCursor`) instead of a list_head pointer; an mm counts as used when one of
//! its tasks runs (workload/task.rs `Runner::flush`: at its start, after every sleep, at
//! every quantum of user time and on every entry to the kernel) rather than at each
//! context switch, which the model has no scheduler for; it is handed over at the next
//! walk (`Mm::lru_gen_collect_uses`). The kernel's busy tasks are switched back in every
//! 0.3 to 10 ms (measured by kernel-run), the model's mark comes every quantum (2 µs): the
//! two differ where two agings come microseconds apart, the second of which the kernel
//! makes without walking the mm (docs/fidelity.md, "Anonymous memory on MGLRU before
//! 6.14"); the mm_list lock is never
//! contended (the walk yields in virtual-time order instead, walk.rs); lru_gen_migrate_mm
//! (a task moving to another memcg) is not modeled.

use super::*;
use crate::mm::Mm;

/// The mm walk statistics (lru_gen_mm_walk.mm_stats, lru_gen_mm_state.stats).
pub const MM_LEAF_TOTAL: usize = 0;
pub const MM_LEAF_YOUNG: usize = 1;
pub const MM_NONLEAF_FOUND: usize = 2;
pub const MM_NONLEAF_ADDED: usize = 3;
pub const NR_MM_STATS: usize = 4;

/// A position in an mm_list (the kernel's list_head pointers of lru_gen_mm_state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmCursor {
    /// NULL: no iteration yet (or reset by iterate_mm_list_nowalk).
    Null,
    /// &mm_list->fifo: the list head itself, before the first and after the last mm.
    Fifo,
    /// An mm on the list.
    Mm(u32),
}

/// struct lru_gen_mm_state: one lruvec's iteration over its memcg's mm_list, and its Bloom
/// filters. Guarded by the mm_list lock; the filters are read and set without it.
#[derive(Debug, Clone)]
pub struct LruGenMmState {
    /// Catches up with max_seq each time an iteration over the mm_list completes.
    pub seq: u64,
    /// The mm the running iteration handed out last; it resumes from the next one.
    pub head: MmCursor,
    /// Where the previous iteration ended: Fifo while no mm was added since, else the first
    /// mm added since. Mms from there on are new to the walker and walked whatever their
    /// bitmaps say (Null: no iteration yet, all are new).
    pub tail: MmCursor,
    /// The double-buffered filters (2^BLOOM_FILTER_SHIFT bits each), allocated on first
    /// reset; a missing filter lets everything through.
    pub filters: [Option<Box<[u64]>>; NR_BLOOM_FILTERS],
    /// Walk statistics, indexed by MM_* (debugfs).
    pub stats: [[u64; NR_MM_STATS]; NR_HIST_GENS],
}

impl Default for LruGenMmState {
    fn default() -> Self {
        Self::new()
    }
}

impl LruGenMmState {
    /// As lru_gen_init_lruvec() leaves it: seq = MIN_NR_GENS, one behind max_seq.
    pub fn new() -> Self {
        LruGenMmState {
            seq: MIN_NR_GENS,
            head: MmCursor::Null,
            tail: MmCursor::Null,
            filters: [None, None],
            stats: [[0; NR_MM_STATS]; NR_HIST_GENS],
        }
    }
}

/// One mm on an mm_list, with its mm->lru_gen.bitmap (bit n%64: used on node n since the
/// node's walker last cleared it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LruGenMm {
    pub mm: u32,
    pub bitmap: u64,
}

/// struct lru_gen_mm_list: a memcg's mms, in the order they were added. Guarded by its
/// spinlock. Simplified: a vector searched linearly.
#[derive(Debug, Clone, Default)]
pub struct LruGenMmList {
    pub fifo: Vec<LruGenMm>,
}

impl LruGenMmList {
    fn pos(&self, mm: u32) -> Option<usize> {
        self.fifo.iter().position(|e| e.mm == mm)
    }

    /// The list node after `c` (->next), wrapping to Fifo after the last mm.
    fn next_of(&self, c: MmCursor) -> MmCursor {
        let i = match c {
            MmCursor::Null | MmCursor::Fifo => 0,
            MmCursor::Mm(mm) => self.pos(mm).map_or(self.fifo.len(), |i| i + 1),
        };
        self.fifo
            .get(i)
            .map_or(MmCursor::Fifo, |e| MmCursor::Mm(e.mm))
    }

    /// The list node before `mm` (->prev), Fifo before the first.
    fn prev_of(&self, mm: u32) -> MmCursor {
        match self.pos(mm) {
            Some(i) if i > 0 => MmCursor::Mm(self.fifo[i - 1].mm),
            _ => MmCursor::Fifo,
        }
    }
}

/// lru_gen_add_mm() (fork, exec): append `mm` to its memcg's list, with a clear bitmap
/// (lru_gen_init_mm). For every node's state whose last iteration ended at the list's end,
/// `mm` is the first addition since: its tail moves to it, so the next iteration force-scans
/// from there. `states` are the memcg's lruvecs' mm_states, one per node.
pub fn lru_gen_add_mm<'a>(
    list: &mut LruGenMmList,
    states: impl IntoIterator<Item = &'a mut LruGenMmState>,
    mm: u32,
) {
    debug_assert!(list.pos(mm).is_none(), "mm {mm} added twice");
    for s in states {
        if s.tail == MmCursor::Fifo {
            s.tail = MmCursor::Mm(mm);
        }
    }
    list.fifo.push(LruGenMm { mm, bitmap: 0 });
}

/// lru_gen_del_mm() (exit, memcg migration): take `mm` off the list; an iteration standing
/// on it continues from its predecessor, and a tail on it moves to its successor.
pub fn lru_gen_del_mm<'a>(
    list: &mut LruGenMmList,
    states: impl IntoIterator<Item = &'a mut LruGenMmState>,
    mm: u32,
) {
    let Some(i) = list.pos(mm) else {
        return;
    };
    for s in states {
        if s.head == MmCursor::Mm(mm) {
            s.head = list.prev_of(mm);
        }
        if s.tail == MmCursor::Mm(mm) {
            s.tail = list.next_of(MmCursor::Mm(mm));
        }
    }
    list.fifo.remove(i);
}

/// reset_mm_stats(): add the walk's statistics to the state's (NR_HIST_GENS is 1, so `last`
/// clears nothing). Under the mm_list lock.
fn reset_mm_stats(state: &mut LruGenMmState, walk: &mut LruGenMmWalk) {
    let hist = lru_hist_from_seq(walk.seq);
    for i in 0..NR_MM_STATS {
        state.stats[hist][i] += walk.mm_stats[i];
        walk.mm_stats[i] = 0;
    }
}

/// get_next_mm(): the mm at the cursor is walked if forced or used on this node since the
/// last walk (its bitmap bit, which is then cleared), and if it can still be pinned
/// (`mm_alive`: mmget_not_zero).
fn get_next_mm(
    list: &mut LruGenMmList,
    walk: &LruGenMmWalk,
    mm: u32,
    node: u32,
    mm_alive: &impl Fn(u32) -> bool,
) -> Option<u32> {
    let i = list.pos(mm)?;
    let e = &mut list.fifo[i];
    let key = node % u64::BITS;
    if !walk.force_scan && e.bitmap & (1 << key) == 0 {
        return None;
    }
    e.bitmap &= !(1 << key);
    mm_alive(mm).then_some(mm)
}

/// iterate_mm_list(): hand the next mm to walk for `walk.seq` on `node`, after `prev` (the
/// mm the caller just walked, which the kernel mmputs here). Returns (last, next mm): last
/// is true when this call finished the iteration (state.seq advanced to walk.seq; the caller
/// may then inc_max_seq). A stale walk (walk.seq <= state.seq) gets (false, None). Mms added
/// since the previous iteration, and every mm after them, are forced (walk.force_scan is set
/// and stays set). The first mm of an iteration resets the Bloom filter of walk.seq + 1.
/// Under the mm_list lock except for that reset.
pub fn iterate_mm_list(
    list: &mut LruGenMmList,
    state: &mut LruGenMmState,
    walk: &mut LruGenMmWalk,
    node: u32,
    prev: Option<u32>,
    mm_alive: impl Fn(u32) -> bool,
) -> (bool, Option<u32>) {
    debug_assert!(state.seq + 1 >= walk.seq);
    let mut first = false;
    let mut last = false;
    let mut mm = None;
    if walk.seq > state.seq {
        if state.head == MmCursor::Null {
            state.head = MmCursor::Fifo;
        }
        first = state.head == MmCursor::Fifo;
        loop {
            state.head = list.next_of(state.head);
            let MmCursor::Mm(cur) = state.head else {
                state.seq += 1;
                last = true;
                break;
            };
            if state.tail == MmCursor::Null || state.tail == state.head {
                state.tail = list.next_of(state.head);
                walk.force_scan = true;
            }
            mm = get_next_mm(list, walk, cur, node, &mm_alive);
            if mm.is_some() {
                break;
            }
        }
    }
    if prev.is_some() || last {
        reset_mm_stats(state, walk);
    }
    if mm.is_some() && first {
        reset_bloom_filter(state, walk.seq + 1);
    }
    (last, mm)
}

/// iterate_mm_list_nowalk() (aging without page-table walks): count an iteration for `seq`
/// if none was yet, forgetting the cursor. Returns whether the caller may inc_max_seq.
pub fn iterate_mm_list_nowalk(state: &mut LruGenMmState, seq: u64) -> bool {
    debug_assert!(state.seq + 1 >= seq);
    if seq <= state.seq {
        return false;
    }
    state.head = MmCursor::Null;
    state.tail = MmCursor::Null;
    state.seq += 1;
    true
}

impl Mm {
    /// lru_gen_use_mm() (context_switch() to a task of `mm`): the mm ran, so every node's
    /// walker is to look at it. Recorded in the mm and handed to its memcg's list at the
    /// next walk (`lru_gen_collect_uses`), which sets the bitmap's every node bit.
    pub fn lru_gen_use_mm(&mut self, mm: u32) {
        if let Some(m) = self.mms.get_mut(mm as usize) {
            m.lru_gen_used = true;
        }
    }

    /// Hand the mm_list the uses recorded since the last walk (lru_gen_use_mm). An mm
    /// whose sampled threads are writing (mm/sampled_access.rs) ran all along: a
    /// per-access thread would have marked it at every write.
    pub(crate) fn lru_gen_collect_uses(&mut self, memcg: usize) {
        let Mm { mm_lists, mms, .. } = self;
        for e in mm_lists[memcg].fifo.iter_mut() {
            let m = &mut mms[e.mm as usize];
            let writing = m.sampled.as_ref().is_some_and(|sa| sa.writing > 0);
            if std::mem::take(&mut m.lru_gen_used) || writing {
                e.bitmap = !0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mm_list_iteration() {
        let mut list = LruGenMmList::default();
        let mut s = LruGenMmState::new();
        for mm in [10, 11, 12] {
            lru_gen_add_mm(&mut list, [&mut s], mm);
        }
        let alive = |_| true;
        // Round 1 for seq 3 (state seq 2): no previous iteration (tail NULL), so every mm
        // is forced despite clear bitmaps. The first resets the filter of seq 4 (filter 0).
        let mut w = LruGenMmWalk::new(3, 60, false);
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, None, alive),
            (false, Some(10))
        );
        assert!(w.force_scan);
        assert!(s.filters[0].is_some() && s.filters[1].is_none());
        w.mm_stats[MM_LEAF_TOTAL] = 5;
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, Some(10), alive),
            (false, Some(11))
        );
        assert_eq!(
            s.stats[0][MM_LEAF_TOTAL], 5,
            "stats folded when handing out the next"
        );
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, Some(11), alive),
            (false, Some(12))
        );
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, Some(12), alive),
            (true, None)
        );
        assert_eq!((s.seq, s.head, s.tail), (3, MmCursor::Fifo, MmCursor::Fifo));
        // A stale walker for seq 3 gets nothing.
        let mut stale = LruGenMmWalk::new(3, 60, false);
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut stale, 0, None, alive),
            (false, None)
        );
        // Between rounds: 12 runs; 13 is added, the first since the iteration ended.
        let i = list.pos(12).unwrap();
        list.fifo[i].bitmap = !0; // lru_gen_use_mm's effect, handed over

        lru_gen_add_mm(&mut list, [&mut s], 13);
        assert_eq!(s.tail, MmCursor::Mm(13));
        // Round 2 for seq 4: 10 and 11 were not used (their node-0 bits were cleared in
        // round 1): skipped. 12 was used: walked, not forced. 13 is new: forced.
        let mut w = LruGenMmWalk::new(4, 60, false);
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, None, alive),
            (false, Some(12))
        );
        assert!(!w.force_scan);
        assert_eq!(
            list.fifo[2].bitmap, !1,
            "node 0's bit cleared, the others kept"
        );
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, Some(12), alive),
            (false, Some(13))
        );
        assert!(w.force_scan);
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, Some(13), alive),
            (true, None)
        );
        assert_eq!(s.seq, 4);
        // Round 3 for seq 5, forced: deleting the mm the cursor stands on moves the cursor
        // back; an mm that cannot be pinned is passed over.
        let mut w = LruGenMmWalk::new(5, 60, true);
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, None, alive),
            (false, Some(10))
        );
        lru_gen_del_mm(&mut list, [&mut s], 10);
        assert_eq!(s.head, MmCursor::Fifo);
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, None, alive),
            (false, Some(11))
        );
        let not_12 = |mm| mm != 12;
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, Some(11), not_12),
            (false, Some(13))
        );
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, Some(13), alive),
            (true, None)
        );
        // Deleting the mm a tail stands on moves the tail to its successor: the tail of the
        // iteration that just ended is the list's end (Fifo); 14 becomes the first
        // addition since, and when it goes again the tail is back at the end.
        assert_eq!(s.tail, MmCursor::Fifo);
        lru_gen_add_mm(&mut list, [&mut s], 14);
        assert_eq!(s.tail, MmCursor::Mm(14));
        lru_gen_del_mm(&mut list, [&mut s], 14);
        assert_eq!(s.tail, MmCursor::Fifo);
        // Mid-list: a new iteration has tail 12 after handing out 11; deleting 12 moves the
        // tail to 13.
        let mut w = LruGenMmWalk::new(6, 60, false);
        s.tail = MmCursor::Null;
        assert_eq!(
            iterate_mm_list(&mut list, &mut s, &mut w, 0, None, alive),
            (false, Some(11))
        );
        assert_eq!(s.tail, MmCursor::Mm(12));
        lru_gen_del_mm(&mut list, [&mut s], 12);
        assert_eq!(s.tail, MmCursor::Mm(13));
        // Without page-table walks: one count per seq, cursor forgotten.
        assert!(iterate_mm_list_nowalk(&mut s, 6));
        assert!(!iterate_mm_list_nowalk(&mut s, 6));
        assert_eq!((s.seq, s.head, s.tail), (6, MmCursor::Null, MmCursor::Null));
    }
}
