//! The memcg LRU: the "memcg LRU" section of mm/vmscan.c (v6.18), on the memcg_lru field
//! of struct pglist_data and the gen/seg/list fields of struct lru_gen_folio
//! (include/linux/mmzone.h, whose comment on MEMCG_NR_GENS describes it).
//!
//! For global reclaim, each node keeps its memcgs' lruvecs in an LRU of their own: an old
//! and a young generation (`seq % 3` and `(seq + 1) % 3`), each sharded into 8 bins of
//! lists. Reclaim starts at a random bin of the old generation and walks it (shrink_many,
//! in eviction.rs); a memcg that was aged or is too small moves to the young generation,
//! one below memory.low moves to the tail once. When the old generation is empty, `seq`
//! advances and young becomes old.
//!
//! ```text
//!   fifo[get_memcg_gen(seq)][0..8]       old: shrink_many walks it from a random bin
//!   fifo[get_memcg_gen(seq + 1)][0..8]   young: MEMCG_LRU_YOUNG appends here
//!   fifo[get_memcg_gen(seq + 2)][0..8]   empty (a stale reader's generation)
//! ```
//!
//! Simplified: the bins are vectors searched linearly, and the RCU traversal of the
//! hlist_nulls bins is modeled by successor look-ups (`LruGenMemcg::fifo_next`). The
//! random bin is drawn by the caller (`Sim::memcg_lru_bin`, from `engine::streams::MEMCG_LRU_STREAM`) and
//! passed in. Memcgs are never offlined in a run (every memcg is online and pinnable), so
//! lru_gen_offline_memcg, lru_gen_release_memcg and lru_gen_soft_reclaim are modeled for
//! their own sake; nothing in a run calls them.

use super::*;
use crate::engine::Site;
use crate::mm::{LruvecId, Mm};
use crate::sim::Sim;

/// lru_gen_rotate_memcg() operations; HEAD and TAIL are also the values of
/// `LruGenFolio::seg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MemcgLruOp {
    /// MEMCG_LRU_NOP: shrink_one's "leave it where it is".
    Nop = 0,
    /// MEMCG_LRU_HEAD: head of a random bin of its generation, segment head (soft limit).
    Head = 1,
    /// MEMCG_LRU_TAIL: tail of a random bin of its generation, segment tail (one more
    /// chance: below memory.low, offline or too small).
    Tail = 2,
    /// MEMCG_LRU_OLD: head of a random bin of the old generation (offlining).
    Old = 3,
    /// MEMCG_LRU_YOUNG: tail of a random bin of the young generation (aged, below min,
    /// second attempt).
    Young = 4,
}

/// `LruGenFolio::seg` of a memcg moved to a bin's head by MEMCG_LRU_HEAD.
pub const MEMCG_LRU_HEAD: u8 = MemcgLruOp::Head as u8;
/// `LruGenFolio::seg` of a memcg moved to a bin's tail by MEMCG_LRU_TAIL.
pub const MEMCG_LRU_TAIL: u8 = MemcgLruOp::Tail as u8;

/// get_memcg_gen(): the memcg LRU generation of a sequence number; the old generation is
/// get_memcg_gen(seq), the young one get_memcg_gen(seq + 1).
#[inline]
pub fn get_memcg_gen(seq: u64) -> usize {
    (seq % MEMCG_NR_GENS as u64) as usize
}

/// get_memcg_bin(): a bin index modulo MEMCG_NR_BINS.
#[inline]
pub fn get_memcg_bin(bin: usize) -> usize {
    bin % MEMCG_NR_BINS
}

/// get_random_u32_below(MEMCG_NR_BINS), drawn from the caller's stream.
pub fn random_bin(rng: &mut impl rand::Rng) -> usize {
    rng.random_range(0..MEMCG_NR_BINS)
}

/// struct lru_gen_memcg: a node's LRU of memcg lruvecs for global reclaim. Each list is an
/// hlist_nulls in the kernel, whose end marker carries its generation; guarded by the
/// memcg_lru.lock spinlock.
#[derive(Debug, Clone)]
pub struct LruGenMemcg {
    /// The old generation is get_memcg_gen(seq); it advances when that generation empties.
    pub seq: u64,
    /// Lruvecs in each generation.
    pub nr_memcgs: [u64; MEMCG_NR_GENS],
    /// The lists, by generation and bin, front = head.
    pub fifo: [[std::collections::VecDeque<LruvecId>; MEMCG_NR_BINS]; MEMCG_NR_GENS],
}

impl Default for LruGenMemcg {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a walk of a memcg LRU list stands: on an entry, or at a list's end marker, which
/// carries the generation of the list it ends (get_nulls_value()).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemcgLruPos {
    Entry(LruvecId),
    Nulls(usize),
}

impl LruGenMemcg {
    /// lru_gen_init_pgdat(): empty lists, seq 0.
    pub fn new() -> Self {
        LruGenMemcg {
            seq: 0,
            nr_memcgs: [0; MEMCG_NR_GENS],
            fifo: std::array::from_fn(|_| std::array::from_fn(|_| Default::default())),
        }
    }

    /// hlist_nulls_del of `lv` from the list its lrugen says holds it.
    fn unlink(&mut self, lv: LruvecId, gen: usize, bin: usize) {
        let list = &mut self.fifo[gen][bin];
        let i = list.iter().position(|&x| x == lv);
        debug_assert!(
            i.is_some(),
            "lruvec {lv} not on memcg LRU list [{gen}][{bin}]"
        );
        if let Some(i) = i {
            list.remove(i);
        }
    }

    /// The first entry of fifo[gen][bin] (hlist_nulls_for_each_entry_rcu's start).
    pub fn fifo_first(&self, gen: usize, bin: usize) -> MemcgLruPos {
        self.fifo[gen][bin]
            .front()
            .map_or(MemcgLruPos::Nulls(gen), |&x| MemcgLruPos::Entry(x))
    }

    /// The successor of `lv` in the list that holds it now (`lrugen` is lv's): what an RCU
    /// walk reads from lv's next pointer. If lv moved to another list since the walk
    /// reached it, the walk continues there and ends at that list's marker, whose
    /// generation tells shrink_many to restart.
    ///
    /// The order shrink_many needs, per bin: start at `fifo_first(gen, bin)`; at each
    /// entry y, first apply the op pending for the previous entry
    /// (`lru_gen_rotate_memcg`), then skip y if its generation is not `gen`
    /// (`shrink_many_skip`), release it if its memcg cannot be pinned (take
    /// `fifo_next(y)` before `lru_gen_release_memcg`: the kernel keeps the stale next
    /// pointer), else shrink_one(y) gives y's op, and the next position is `fifo_next(y)`
    /// read before that op is applied. After the loop apply the last op; if it stopped on
    /// should_abort_scan, return; at `Nulls(g)` with g != gen restart the same bin; else go
    /// to bin + 1 (mod MEMCG_NR_BINS) until back at the first bin.
    ///
    /// Simplified: an lruvec released by someone else (unhashed) has no remembered
    /// successor here; the walk ends at its generation's marker.
    pub fn fifo_next(&self, lv: LruvecId, lrugen: &LruGenFolio) -> MemcgLruPos {
        let gen = lrugen.gen as usize;
        let Some(bin) = lrugen.bin else {
            return MemcgLruPos::Nulls(gen);
        };
        let list = &self.fifo[gen][bin as usize];
        match list.iter().position(|&x| x == lv) {
            Some(i) => list
                .get(i + 1)
                .map_or(MemcgLruPos::Nulls(gen), |&x| MemcgLruPos::Entry(x)),
            None => MemcgLruPos::Nulls(gen),
        }
    }

    /// shrink_many's `if (gen != READ_ONCE(lrugen->gen)) continue;`: from `pos`, skip the
    /// entries whose lruvec is in another generation than `gen`. Call after applying the
    /// pending op, as the kernel reads the successors after it.
    pub fn shrink_many_skip<'a>(
        &self,
        mut pos: MemcgLruPos,
        gen: usize,
        lrugen_of: impl Fn(LruvecId) -> &'a LruGenFolio,
    ) -> MemcgLruPos {
        while let MemcgLruPos::Entry(x) = pos {
            let g = lrugen_of(x);
            if g.gen as usize == gen {
                break;
            }
            pos = self.fifo_next(x, g);
        }
        pos
    }

    /// The lruvecs of fifo[gen][bin] from the head, as they are now.
    pub fn bin_members(&self, gen: usize, bin: usize) -> impl Iterator<Item = LruvecId> + '_ {
        self.fifo[gen][bin].iter().copied()
    }
}

impl Sim {
    /// A random memcg LRU bin from the run's stream.
    pub(super) fn memcg_lru_bin(&self) -> usize {
        random_bin(&mut *self.lru_gen_rng.borrow_mut())
    }

    /// lru_gen_rotate_memcg(): take the node's memcg_lru.lock, draw a bin and move the
    /// lruvec (`lru_gen_rotate_memcg_locked`). MEMCG_LRU_NOP does nothing.
    pub(super) async fn lru_gen_rotate_memcg(&self, lv: LruvecId, op: MemcgLruOp) {
        if op == MemcgLruOp::Nop {
            return;
        }
        let node = self.mm.borrow().lruvecs[lv as usize].node as usize;
        let lock = self.mm.borrow().nodes[node].memcg_lru_lock;
        self.e.lock(lock, Site::LruGenRotateMemcg).await;
        let bin = self.memcg_lru_bin();
        {
            let mut mm = self.mm.borrow_mut();
            let Mm { nodes, lruvecs, .. } = &mut *mm;
            let lrugen = &mut lruvecs[lv as usize].lrugen;
            lru_gen_rotate_memcg_locked(&mut nodes[node].memcg_lru, lv, lrugen, op, bin);
        }
        self.e.charge(self.c.list_op);
        self.e.unlock(lock);
    }
}

/// lru_gen_rotate_memcg()'s work under the memcg_lru lock (irqsave): move an lruvec within
/// its node's memcg LRU (see MemcgLruOp), to bin `bin` (get_random_u32_below(MEMCG_NR_BINS)
/// in the kernel: `random_bin`). When its old generation was the old one and it was the
/// last there, seq advances: young becomes old.
pub(super) fn lru_gen_rotate_memcg_locked(
    mlru: &mut LruGenMemcg,
    lv: LruvecId,
    lrugen: &mut LruGenFolio,
    op: MemcgLruOp,
    bin: usize,
) {
    let Some(old_bin) = lrugen.bin else {
        debug_assert!(false, "lruvec {lv} rotated while off the memcg LRU");
        return;
    };
    let old = lrugen.gen as usize;
    let mut seg = 0;
    let mut new = old;
    match op {
        MemcgLruOp::Head => seg = MEMCG_LRU_HEAD,
        MemcgLruOp::Tail => seg = MEMCG_LRU_TAIL,
        MemcgLruOp::Old => new = get_memcg_gen(mlru.seq),
        MemcgLruOp::Young => new = get_memcg_gen(mlru.seq + 1),
        MemcgLruOp::Nop => debug_assert!(false, "MEMCG_LRU_NOP is not rotated"),
    }
    lrugen.seg = seg;
    lrugen.gen = new as u8;
    mlru.unlink(lv, old, old_bin as usize);
    let bin = get_memcg_bin(bin);
    if matches!(op, MemcgLruOp::Head | MemcgLruOp::Old) {
        mlru.fifo[new][bin].push_front(lv);
    } else {
        mlru.fifo[new][bin].push_back(lv);
    }
    lrugen.bin = Some(bin as u8);
    mlru.nr_memcgs[old] -= 1;
    mlru.nr_memcgs[new] += 1;
    if mlru.nr_memcgs[old] == 0 && old == get_memcg_gen(mlru.seq) {
        mlru.seq += 1;
    }
}

/// lru_gen_online_memcg() for one node: the new memcg's lruvec joins the tail of bin `bin`
/// of the old generation (the kernel draws one bin for all nodes). Its segment is left as
/// it is (0 for a new lruvec). Caller holds the memcg_lru lock.
pub fn lru_gen_online_memcg(
    mlru: &mut LruGenMemcg,
    lv: LruvecId,
    lrugen: &mut LruGenFolio,
    bin: usize,
) {
    debug_assert!(lrugen.bin.is_none(), "lruvec {lv} onlined twice");
    let gen = get_memcg_gen(mlru.seq);
    let bin = get_memcg_bin(bin);
    lrugen.gen = gen as u8;
    mlru.fifo[gen][bin].push_back(lv);
    lrugen.bin = Some(bin as u8);
    mlru.nr_memcgs[gen] += 1;
}

/// lru_gen_offline_memcg() for one node: MEMCG_LRU_OLD, so global reclaim scrapes it soon.
pub fn lru_gen_offline_memcg(
    mlru: &mut LruGenMemcg,
    lv: LruvecId,
    lrugen: &mut LruGenFolio,
    bin: usize,
) {
    lru_gen_rotate_memcg_locked(mlru, lv, lrugen, MemcgLruOp::Old, bin);
}

/// lru_gen_release_memcg() for one node (the memcg is being freed, or shrink_many could not
/// pin it): off the memcg LRU; seq advances if that emptied the old generation. Nothing if
/// already off. Caller holds the memcg_lru lock.
pub fn lru_gen_release_memcg(mlru: &mut LruGenMemcg, lv: LruvecId, lrugen: &mut LruGenFolio) {
    let Some(bin) = lrugen.bin else {
        return;
    };
    let gen = lrugen.gen as usize;
    mlru.unlink(lv, gen, bin as usize);
    lrugen.bin = None;
    mlru.nr_memcgs[gen] -= 1;
    if mlru.nr_memcgs[gen] == 0 && gen == get_memcg_gen(mlru.seq) {
        mlru.seq += 1;
    }
}

/// lru_gen_soft_reclaim() (a v1 memcg over its soft limit): MEMCG_LRU_HEAD unless already
/// in the head segment.
pub fn lru_gen_soft_reclaim(
    mlru: &mut LruGenMemcg,
    lv: LruvecId,
    lrugen: &mut LruGenFolio,
    bin: usize,
) {
    if lrugen.seg != MEMCG_LRU_HEAD {
        lru_gen_rotate_memcg_locked(mlru, lv, lrugen, MemcgLruOp::Head, bin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcg_lru_rotations_and_seq_advance() {
        use MemcgLruOp::*;
        let mut m = LruGenMemcg::new();
        let mut g: Vec<LruGenFolio> = (0..5).map(|_| LruGenFolio::new()).collect();
        let fifo =
            |m: &LruGenMemcg, gen: usize, bin: usize| m.bin_members(gen, bin).collect::<Vec<_>>();
        // Onlining appends to the old generation (seq 0 -> gen 0).
        lru_gen_online_memcg(&mut m, 1, &mut g[1], 0);
        lru_gen_online_memcg(&mut m, 2, &mut g[2], 0);
        lru_gen_online_memcg(&mut m, 3, &mut g[3], 1);
        assert_eq!((fifo(&m, 0, 0), fifo(&m, 0, 1)), (vec![1, 2], vec![3]));
        assert_eq!(m.nr_memcgs, [3, 0, 0]);
        // HEAD: head of bin 1 of its own generation, segment head.
        lru_gen_rotate_memcg_locked(&mut m, 1, &mut g[1], Head, 1);
        assert_eq!((fifo(&m, 0, 0), fifo(&m, 0, 1)), (vec![2], vec![1, 3]));
        assert_eq!((g[1].gen, g[1].seg), (0, MEMCG_LRU_HEAD));
        // TAIL to bin 9 = bin 1: tail, segment tail.
        lru_gen_rotate_memcg_locked(&mut m, 2, &mut g[2], Tail, 9);
        assert_eq!(fifo(&m, 0, 1), vec![1, 3, 2]);
        assert_eq!((g[2].gen, g[2].seg, g[2].bin), (0, MEMCG_LRU_TAIL, Some(1)));
        assert_eq!(m.nr_memcgs, [3, 0, 0]);
        // YOUNG: tail of gen (0 + 1) % 3 = 1, segment reset.
        lru_gen_rotate_memcg_locked(&mut m, 3, &mut g[3], Young, 5);
        lru_gen_rotate_memcg_locked(&mut m, 1, &mut g[1], Young, 5);
        assert_eq!(fifo(&m, 1, 5), vec![3, 1]);
        assert_eq!((g[1].gen, g[1].seg), (1, 0));
        assert_eq!((m.nr_memcgs, m.seq), ([1, 2, 0], 0));
        // The last one leaves the old generation: seq advances, gen 1 is now old.
        lru_gen_rotate_memcg_locked(&mut m, 2, &mut g[2], Young, 2);
        assert_eq!((m.nr_memcgs, m.seq), ([0, 3, 0], 1));
        // OLD now means gen 1 (its own): to the head of bin 2.
        lru_gen_rotate_memcg_locked(&mut m, 3, &mut g[3], Old, 2);
        assert_eq!((fifo(&m, 1, 2), fifo(&m, 1, 5)), (vec![3, 2], vec![1]));
        assert_eq!((m.nr_memcgs, m.seq), ([0, 3, 0], 1));
        // A new memcg joins the old generation, now 1, at the tail.
        lru_gen_online_memcg(&mut m, 4, &mut g[4], 2);
        assert_eq!(fifo(&m, 1, 2), vec![3, 2, 4]);
        // Release: off the list; again: nothing.
        lru_gen_release_memcg(&mut m, 2, &mut g[2]);
        lru_gen_release_memcg(&mut m, 2, &mut g[2]);
        assert_eq!((fifo(&m, 1, 2), g[2].bin), (vec![3, 4], None));
        assert_eq!(m.nr_memcgs, [0, 3, 0]);
        // Offline: OLD, head of bin 6.
        lru_gen_offline_memcg(&mut m, 4, &mut g[4], 6);
        assert_eq!((fifo(&m, 1, 6), fifo(&m, 1, 2)), (vec![4], vec![3]));
        // Soft limit: HEAD once; already in the head segment, not again.
        lru_gen_soft_reclaim(&mut m, 3, &mut g[3], 7);
        lru_gen_soft_reclaim(&mut m, 3, &mut g[3], 0);
        assert_eq!((fifo(&m, 1, 7), g[3].bin), (vec![3], Some(7)));
        // All to young (gen 2): seq advances when the last leaves gen 1.
        lru_gen_rotate_memcg_locked(&mut m, 1, &mut g[1], Young, 0);
        lru_gen_rotate_memcg_locked(&mut m, 4, &mut g[4], Young, 0);
        assert_eq!(m.seq, 1);
        lru_gen_rotate_memcg_locked(&mut m, 3, &mut g[3], Young, 0);
        assert_eq!((m.nr_memcgs, m.seq), ([0, 0, 3], 2));
        assert_eq!(fifo(&m, 2, 0), vec![1, 4, 3]);
        // Releasing the last of the old generation advances seq too.
        for lv in [1, 4, 3] {
            lru_gen_release_memcg(&mut m, lv, &mut g[lv as usize]);
        }
        assert_eq!((m.nr_memcgs, m.seq), ([0, 0, 0], 3));
        // Bins drawn from a seeded stream stay in range.
        use rand::SeedableRng;
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        assert!((0..100).all(|_| random_bin(&mut rng) < MEMCG_NR_BINS));
    }

    #[test]
    fn memcg_lru_seq_advances_only_when_the_old_gen_empties() {
        use MemcgLruOp::*;
        let mut m = LruGenMemcg::new();
        let mut g: Vec<LruGenFolio> = (0..3).map(|_| LruGenFolio::new()).collect();
        lru_gen_online_memcg(&mut m, 1, &mut g[1], 0);
        lru_gen_online_memcg(&mut m, 2, &mut g[2], 0);
        lru_gen_rotate_memcg_locked(&mut m, 2, &mut g[2], Young, 0);
        assert_eq!(m.nr_memcgs, [1, 1, 0]);
        // 2 leaves the young generation (1) empty by going back to old (0): young is not
        // the old generation, seq stays.
        lru_gen_rotate_memcg_locked(&mut m, 2, &mut g[2], Old, 0);
        assert_eq!((m.nr_memcgs, m.seq), ([2, 0, 0], 0));
        // Likewise when the young generation's last member is released.
        lru_gen_rotate_memcg_locked(&mut m, 2, &mut g[2], Young, 0);
        lru_gen_release_memcg(&mut m, 2, &mut g[2]);
        assert_eq!((m.nr_memcgs, m.seq), ([1, 0, 0], 0));
        // HEAD and TAIL keep the generation: the old one never empties through them.
        lru_gen_rotate_memcg_locked(&mut m, 1, &mut g[1], Tail, 3);
        assert_eq!((m.nr_memcgs, m.seq), ([1, 0, 0], 0));
    }

    #[test]
    fn memcg_lru_walk_order_skip_and_nulls() {
        use MemcgLruOp::*;
        use MemcgLruPos::*;
        let mut m = LruGenMemcg::new();
        let mut g: Vec<LruGenFolio> = (0..4).map(|_| LruGenFolio::new()).collect();
        for lv in 1..4 {
            lru_gen_online_memcg(&mut m, lv, &mut g[lv as usize], 0);
        }
        assert_eq!(m.fifo_first(0, 0), Entry(1));
        assert_eq!(m.fifo_first(0, 4), Nulls(0));
        assert_eq!(m.fifo_next(1, &g[1]), Entry(2));
        assert_eq!(m.fifo_next(3, &g[3]), Nulls(0));
        // The walk stood on 1 and got YOUNG: it reads 1's successor before rotating.
        let pos = m.fifo_next(1, &g[1]);
        lru_gen_rotate_memcg_locked(&mut m, 1, &mut g[1], Young, 3);
        assert_eq!(pos, Entry(2));
        // While it shrinks 2, someone else moves 2 to the young generation behind 1: 2's
        // successor is now the end of fifo[1][3], a gen-1 marker: restart.
        lru_gen_rotate_memcg_locked(&mut m, 2, &mut g[2], Young, 3);
        assert_eq!(m.fifo_next(2, &g[2]), Nulls(1));
        // Walking gen 0 but on a gen-1 list: both entries skipped, ending at its marker.
        assert_eq!(
            m.shrink_many_skip(Entry(1), 0, |x| &g[x as usize]),
            Nulls(1)
        );
        assert_eq!(
            m.shrink_many_skip(Entry(3), 0, |x| &g[x as usize]),
            Entry(3)
        );
        // A TAIL rotation to the same bin puts a visited entry behind the rest: met again.
        let mut m = LruGenMemcg::new();
        let mut g: Vec<LruGenFolio> = (0..4).map(|_| LruGenFolio::new()).collect();
        for lv in 1..4 {
            lru_gen_online_memcg(&mut m, lv, &mut g[lv as usize], 0);
        }
        let mut order = vec![];
        let mut pos = m.fifo_first(0, 0);
        let mut pending: Option<LruvecId> = None;
        while let Entry(y) = pos {
            if let Some(x) = pending.take() {
                lru_gen_rotate_memcg_locked(&mut m, x, &mut g[x as usize], Tail, 0);
            }
            order.push(y);
            if y == 1 && g[1].seg != MEMCG_LRU_TAIL {
                pending = Some(1);
            }
            pos = m.fifo_next(y, &g[y as usize]);
        }
        assert_eq!((order, pos), (vec![1, 2, 3, 1], Nulls(0)));
    }
}
