//! The generation lists, lrugen->folios[gen][type], and include/linux/list.h's operations
//! on them (list_add, list_add_tail, list_del), held as arrays.
//!
//! The kernel links a folio into its generation through folio->lru. Eviction walks the
//! oldest generation from its tail, and where aging has promoted most folios lazily
//! (folio_update_gen rewrites only the gen counter) it moves nearly every folio it meets
//! to another list: millions of folios per memory.reclaim write at seed 001's full scale.
//! Walked through links, each step waits for the previous folio's links to come from
//! memory, a dependent miss that no prefetch shortens. Held as an array of pfns, the walk
//! reads the array in order and prefetches the folios any distance ahead.
//!
//! A list is a double-ended queue of pfns, the head (young end) at the front and the tail
//! (where eviction starts) at the back. Each folio on a list knows its *position*
//! (`Frames::lru_pos`: the list's generation in the top two bits, below them its place
//! counted from a fixed origin, so that adding at either end moves no other folio's
//! place). Deleting at an end pops; deleting in the middle leaves a hole. Holes side by
//! side form a run, and the two entries at a run's ends hold its length, so the folios
//! next to any entry (list_del's prev and next, whose struct page lines the lock holder
//! writes: lru_lines.rs) are found in O(1); a run that reaches an end goes with it, so
//! the first and last entries are always folios. When holes outnumber folios by
//! [`COMPACT_SLACK`], the list is rewritten without them and its folios renumbered.
//!
//! The order of the folios, the neighbours of every operation and so every result are
//! those of linked lists; only the memory layout differs. A folio's entry and position
//! take the 8 bytes its links took (plus the holes and the arrays' spare room); the links
//! stay with the classic LRU and the unevictable list.

use crate::mm::{Pfn, NIL};
use std::collections::VecDeque;

/// An entry that is a hole, not a folio; at a run's ends the low bits hold the run's
/// length.
const HOLE: u32 = 1 << 31;

/// Bits of a position's place; the two above hold the list's generation.
const PLACE_BITS: u32 = 30;
const PLACE_MASK: u32 = (1 << PLACE_BITS) - 1;

/// A list is rewritten without its holes when they outnumber its folios by this many.
pub const COMPACT_SLACK: usize = 4096;

/// A full list's array grows by 1/GROWTH of its entries.
const GROWTH: usize = 4;

/// A list gives back room only above this many entries of it.
const KEEP_ROOM: usize = 1024;

/// One generation list of one type (struct list_head lrugen->folios[gen][type][zone],
/// one zone).
#[derive(Debug, Clone, Default)]
pub struct GenList {
    /// The entries, head first: pfns, and holes (`HOLE`).
    q: VecDeque<u32>,
    /// The place of `q[0]`.
    front: u32,
    /// Folios on the list.
    len: usize,
}

/// The generation a position names (the list the folio is on).
#[inline]
pub fn pos_gen(pos: u32) -> usize {
    (pos >> PLACE_BITS) as usize
}

impl GenList {
    /// Folios on the list.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// list_empty().
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first folio (the young end), NIL when empty.
    #[inline]
    pub fn head(&self) -> Pfn {
        self.q.front().copied().unwrap_or(NIL)
    }

    /// The last folio (the next one eviction meets), NIL when empty.
    #[inline]
    pub fn tail(&self) -> Pfn {
        self.q.back().copied().unwrap_or(NIL)
    }

    /// The entry `d` places before the tail when it is a folio (for prefetching ahead of
    /// a walk from the tail).
    #[inline]
    pub fn before_tail(&self, d: usize) -> Option<Pfn> {
        let i = self.q.len().checked_sub(d + 1)?;
        let v = self.q[i];
        (v & HOLE == 0).then_some(v)
    }

    /// The folios from head to tail.
    pub fn iter(&self) -> impl Iterator<Item = Pfn> + '_ {
        self.q.iter().copied().filter(|v| v & HOLE == 0)
    }

    #[inline]
    fn position(gen: usize, place: u32) -> u32 {
        ((gen as u32) << PLACE_BITS) | (place & PLACE_MASK)
    }

    /// The index in `q` of the entry at position `pos`.
    #[inline]
    fn index(&self, pos: u32) -> usize {
        (pos.wrapping_sub(self.front) & PLACE_MASK) as usize
    }

    /// Whether `pfn` is this list's entry at the position `pos` says.
    pub fn holds(&self, pos: &[u32], pfn: Pfn) -> bool {
        let i = self.index(pos[pfn as usize]);
        self.q.get(i) == Some(&pfn)
    }

    /// list_add(): link `pfn` at the head of this list, generation `gen`. Returns the folio
    /// after it (NIL: none).
    #[inline]
    pub fn add(&mut self, pos: &mut [u32], gen: usize, pfn: Pfn) -> Pfn {
        debug_assert!(pfn & HOLE == 0, "pfn {pfn} beyond the lists' range");
        let next = self.head();
        self.front = self.front.wrapping_sub(1) & PLACE_MASK;
        self.grow();
        self.q.push_front(pfn);
        pos[pfn as usize] = Self::position(gen, self.front);
        self.len += 1;
        next
    }

    /// list_add_tail(): link `pfn` at the tail. Returns the folio before it (NIL: none).
    #[inline]
    pub fn add_tail(&mut self, pos: &mut [u32], gen: usize, pfn: Pfn) -> Pfn {
        debug_assert!(pfn & HOLE == 0, "pfn {pfn} beyond the lists' range");
        let prev = self.tail();
        let place = self.front.wrapping_add(self.q.len() as u32);
        self.grow();
        self.q.push_back(pfn);
        pos[pfn as usize] = Self::position(gen, place);
        self.len += 1;
        prev
    }

    /// Make room for one more entry, a quarter more at a time (not double), so that the
    /// spare room is at most a quarter of the entries.
    #[inline]
    fn grow(&mut self) {
        if self.q.len() == self.q.capacity() {
            self.q.reserve_exact(self.q.len() / GROWTH + 16);
        }
    }

    /// Give back room once the entries fill less than half of it, keeping a quarter of
    /// them spare: a list drained by eviction does not hold the room of its peak while
    /// younger generations grow.
    #[inline]
    fn shrink(&mut self) {
        let (len, cap) = (self.q.len(), self.q.capacity());
        if cap > KEEP_ROOM && len < cap / 2 {
            self.q.shrink_to(len + len / GROWTH);
        }
    }

    /// The folios before and after the one at index `i` (NIL past the ends).
    #[inline]
    fn neighbours_at(&self, i: usize) -> (Pfn, Pfn) {
        let prev = match i.checked_sub(1).map(|j| self.q[j]) {
            None => NIL,
            Some(v) if v & HOLE == 0 => v,
            Some(v) => self.q[i - 1 - (v & !HOLE) as usize],
        };
        let next = match self.q.get(i + 1) {
            None => NIL,
            Some(&v) if v & HOLE == 0 => v,
            Some(&v) => self.q[i + 1 + (v & !HOLE) as usize],
        };
        (prev, next)
    }

    /// The folios before and after `pfn`, which is on this list (NIL past the ends).
    pub fn neighbours(&self, pos: &[u32], pfn: Pfn) -> (Pfn, Pfn) {
        let i = self.index(pos[pfn as usize]);
        debug_assert_eq!(self.q.get(i), Some(&pfn), "pfn {pfn} is not on the list");
        self.neighbours_at(i)
    }

    /// The length of the run of holes that starts (or ends) with the entry at `i`, 0 when
    /// it is a folio or past the ends.
    #[inline]
    fn run_at(&self, i: usize) -> usize {
        match self.q.get(i) {
            Some(&v) if v & HOLE != 0 => (v & !HOLE) as usize,
            _ => 0,
        }
    }

    /// list_del(): unlink `pfn`, which is on this list. Returns the folios that were
    /// before and after it (NIL past the ends).
    #[inline]
    pub fn del(&mut self, pos: &mut [u32], pfn: Pfn) -> (Pfn, Pfn) {
        let i = self.index(pos[pfn as usize]);
        debug_assert_eq!(self.q.get(i), Some(&pfn), "pfn {pfn} is not on the list");
        let around = self.neighbours_at(i);
        self.len -= 1;
        let last = self.q.len() - 1;
        if self.len == 0 {
            // Its room is small already: the deletion at an end before this one left
            // one entry, and `shrink` gave back all but KEEP_ROOM.
            self.q.clear();
        } else if i == last {
            let n = 1 + self.run_at(last - 1);
            self.q.truncate(self.q.len() - n);
            self.shrink();
        } else if i == 0 {
            let n = 1 + self.run_at(1);
            self.q.drain(..n);
            self.front = self.front.wrapping_add(n as u32) & PLACE_MASK;
            self.shrink();
        } else {
            let (l, r) = (self.run_at(i - 1), self.run_at(i + 1));
            let run = HOLE | (l + 1 + r) as u32;
            self.q[i] = run;
            self.q[i - l] = run;
            self.q[i + r] = run;
            if self.q.len() - self.len > self.len + COMPACT_SLACK {
                self.compact(pos);
            }
        }
        around
    }

    /// Rewrite the list without its holes, the folios keeping their order and the place
    /// of the first.
    fn compact(&mut self, pos: &mut [u32]) {
        let mut q = VecDeque::with_capacity(self.len);
        for pfn in self.q.iter().copied().filter(|v| v & HOLE == 0) {
            let gen = pos_gen(pos[pfn as usize]);
            let place = self.front.wrapping_add(q.len() as u32);
            pos[pfn as usize] = Self::position(gen, place);
            q.push_back(pfn);
        }
        self.q = q;
    }

    /// Entries, holes included (for the checks).
    pub fn entries(&self) -> usize {
        self.q.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Linked lists as the kernel keeps them, the oracle: each a Vec from head to tail,
    /// whose neighbours of an entry are the entries beside it.
    struct Oracle(Vec<Vec<Pfn>>);

    impl Oracle {
        fn find(&self, pfn: Pfn) -> Option<(usize, usize)> {
            self.0
                .iter()
                .enumerate()
                .find_map(|(g, l)| l.iter().position(|&p| p == pfn).map(|i| (g, i)))
        }

        fn around(&self, g: usize, i: usize) -> (Pfn, Pfn) {
            let l = &self.0[g];
            let prev = if i == 0 { NIL } else { l[i - 1] };
            (prev, l.get(i + 1).copied().unwrap_or(NIL))
        }
    }

    /// Every list (of generation `gens[i]`) against the oracle: its folios in order, its
    /// ends, its count, each folio's position and neighbours.
    fn agree(
        lists: &[GenList],
        gens: &[usize],
        pos: &[u32],
        oracle: &Oracle,
    ) -> Result<(), TestCaseError> {
        for (g, (l, o)) in lists.iter().zip(&oracle.0).enumerate() {
            prop_assert_eq!(&l.iter().collect::<Vec<_>>(), o);
            prop_assert_eq!(l.len(), o.len());
            prop_assert_eq!(l.head(), o.first().copied().unwrap_or(NIL));
            prop_assert_eq!(l.tail(), o.last().copied().unwrap_or(NIL));
            prop_assert_eq!(l.before_tail(0), o.last().copied());
            for (i, &p) in o.iter().enumerate() {
                prop_assert_eq!(pos_gen(pos[p as usize]), gens[g]);
                prop_assert!(l.holds(pos, p));
                prop_assert_eq!(l.neighbours(pos, p), oracle.around(g, i));
            }
        }
        Ok(())
    }

    /// One step of the property test: (which folio, which list, at the tail?).
    type Op = (u32, usize, bool);

    /// Run `ops` over two lists (generations 0 and 2, as a folio moves between
    /// generations): a folio on no list is added (at the head, or the tail), one on a list
    /// is deleted, the neighbours list_del reports checked against the oracle's.
    fn run(ops: &[Op], pfns: u32) -> Result<(), TestCaseError> {
        let gens = [0usize, 2];
        let mut lists = vec![GenList::default(), GenList::default()];
        let mut oracle = Oracle(vec![vec![], vec![]]);
        let mut pos = vec![0u32; pfns as usize];
        for &(pfn, which, tail) in ops {
            match oracle.find(pfn) {
                Some((w, i)) => {
                    let want = oracle.around(w, i);
                    prop_assert_eq!(gens[w], pos_gen(pos[pfn as usize]));
                    prop_assert_eq!(lists[w].del(&mut pos, pfn), want);
                    oracle.0[w].remove(i);
                }
                None if tail => {
                    let want = oracle.0[which].last().copied().unwrap_or(NIL);
                    prop_assert_eq!(lists[which].add_tail(&mut pos, gens[which], pfn), want);
                    oracle.0[which].push(pfn);
                }
                None => {
                    let want = oracle.0[which].first().copied().unwrap_or(NIL);
                    prop_assert_eq!(lists[which].add(&mut pos, gens[which], pfn), want);
                    oracle.0[which].insert(0, pfn);
                }
            }
            agree(&lists, &gens, &pos, &oracle)?;
            for l in &lists {
                prop_assert!(l.entries() <= 2 * l.len() + COMPACT_SLACK + 1);
            }
        }
        Ok(())
    }

    proptest! {
        /// Adds at either end and deletes anywhere, over two lists, agree with linked
        /// lists at every step.
        #[test]
        fn lists_agree_with_linked_lists(
            ops in proptest::collection::vec((0u32..40, 0usize..2, any::<bool>()), 0..400),
        ) {
            run(&ops, 40)?;
        }
    }

    /// A list whose middle is deleted in a shuffled order is compacted once the holes
    /// outnumber its folios by COMPACT_SLACK, keeping its order and neighbours; deleting
    /// all but the ends leaves two entries.
    #[test]
    fn holes_are_compacted_and_the_order_kept() {
        let n = 3 * COMPACT_SLACK as u32;
        let mut ops: Vec<Op> = (0..n).map(|p| (p, 0, true)).collect();
        // The middle, in a fixed shuffle (multiplication by a unit mod n - 2).
        let mid = n - 2;
        ops.extend((0..mid).map(|k| (1 + (k as u64 * 7919 % mid as u64) as u32, 0, false)));
        let mut lists = vec![GenList::default()];
        let mut oracle = Oracle(vec![vec![]]);
        let mut pos = vec![0u32; n as usize];
        let mut max_entries = 0;
        for (i, &(pfn, _, _)) in ops.iter().enumerate() {
            if i < n as usize {
                lists[0].add_tail(&mut pos, 0, pfn);
                oracle.0[0].push(pfn);
            } else {
                let j = oracle.0[0].iter().position(|&p| p == pfn).unwrap();
                assert_eq!(lists[0].del(&mut pos, pfn), oracle.around(0, j));
                oracle.0[0].remove(j);
            }
            max_entries = max_entries.max(lists[0].entries());
            assert!(lists[0].entries() <= 2 * lists[0].len() + COMPACT_SLACK + 1);
        }
        agree(&lists, &[0], &pos, &oracle).unwrap();
        assert_eq!(lists[0].iter().collect::<Vec<_>>(), vec![0, n - 1]);
        assert_eq!(max_entries, n as usize);
        // With S = COMPACT_SLACK and n = 3S folios, the k-th deletion leaves k holes and
        // n - k folios: compacted at the first k with k > n - k + S, k = 2S + 1, which
        // leaves S - 1 folios and no hole; the S - 3 deletions after it leave S - 3 holes
        // beside the last two folios.
        let s = COMPACT_SLACK;
        assert_eq!(lists[0].entries(), 2 + (s - 3), "compacted once");
    }

    /// A list's array grows by a quarter, and a list drained from its tail to under half
    /// its room gives the room back but a quarter of its entries (memory and copying
    /// only: no result depends on it).
    #[test]
    fn drained_lists_give_room_back() {
        // Not a power of two, which doubling would reach exactly.
        let n = 4 * KEEP_ROOM + 1;
        let mut l = GenList::default();
        let mut pos = vec![0u32; n];
        for p in 0..n as u32 {
            let before = l.q.capacity();
            l.add(&mut pos, 1, p);
            let after = l.q.capacity();
            // Each growth is by a quarter at once, not an entry at a time.
            assert!(after == before || after >= before + before / GROWTH);
        }
        let cap = l.q.capacity();
        assert!(cap >= n && cap <= n + n / GROWTH + 16, "room {cap} for {n}");
        // Eviction takes the tail: the first added.
        for p in 0..(n / 2 + 1) as u32 {
            l.del(&mut pos, p);
        }
        let (len, cap) = (l.q.len(), l.q.capacity());
        assert_eq!(len, n - (n / 2 + 1));
        // After each deletion at an end the entries fill at least half the room (else it
        // shrank to a quarter more than them); the room of the full list was 2.5 times
        // these entries.
        assert!(cap >= len && cap <= 2 * len, "room {cap} for {len}");
        for p in (n / 2 + 1) as u32..n as u32 - 1 {
            l.del(&mut pos, p);
        }
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![n as u32 - 1]);
        // Each shrink leaves 5/8 of the room it found (a quarter more than the half it
        // fell under), and only room above KEEP_ROOM shrinks: the last one left between
        // 5/8 of KEEP_ROOM and KEEP_ROOM, however few the entries.
        let cap = l.q.capacity();
        assert!(
            cap > KEEP_ROOM / 2 && cap <= KEEP_ROOM,
            "room {cap} for one"
        );
    }

    /// Positions wrap around their 30 bits: a list added at the head more often than
    /// that keeps working (its places count down from the origin).
    #[test]
    fn places_wrap() {
        let mut l = GenList {
            front: 1,
            ..GenList::default()
        };
        let mut pos = vec![0u32; 4];
        l.add(&mut pos, 3, 0);
        l.add(&mut pos, 3, 1);
        l.add(&mut pos, 3, 2);
        assert_eq!(pos[0] & PLACE_MASK, 0);
        assert_eq!(pos[1] & PLACE_MASK, PLACE_MASK, "place 0 - 1 wraps");
        assert_eq!(pos[2] & PLACE_MASK, PLACE_MASK - 1);
        assert_eq!(pos_gen(pos[2]), 3);
        assert_eq!(l.del(&mut pos, 1), (2, 0));
        assert_eq!(l.neighbours(&pos, 2), (NIL, 0));
        assert_eq!(l.del(&mut pos, 2), (NIL, 0));
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![0]);
        assert!(l.holds(&pos, 0) && !l.holds(&pos, 2));
    }
}
