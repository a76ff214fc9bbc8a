//! Refault tokens: the lru_gen part of mm/workingset.c (v6.18): lru_gen_eviction,
//! lru_gen_test_recent and lru_gen_refault.
//!
//! With MGLRU, workingset_eviction stores in the shadow entry not the lruvec's
//! nonresident_age but a token: the min_seq of the folio's type when it was evicted and
//! its refs counter. At refault, a folio evicted less than MAX_NR_GENS generations ago
//! (measured against the max_seq of the lruvec the shadow names) counts as a recent
//! refault in the tier its token says (refaulted[type][tier], read by the PID controller,
//! pid.rs), and gets back its refs counter or, if it was in the workingset, PG_workingset.
//!
//! ```text
//!   evict:   token = min_seq[type] << LRU_REFS_WIDTH | (refs - 1)   evicted[type][tier] += 1
//!   refault: |max_seq - token seq| < MAX_NR_GENS  =>  refaulted[type][tier] += 1,
//!            PG_workingset or the refs counter restored; activated in a page fault
//! ```
//! The token is packed like a classic eviction timestamp (`workingset::pack_shadow`), with
//! the memcg id, node and PG_workingset beside it.
//!
//! Older kernels decided differently, each difference a version rule read in
//! `lru_gen_refault_decide` or `lru_gen_test_recent` (docs/versions.md): before 6.14 a
//! refault was recent only at the min_seq it was evicted at, every recent one counted an
//! activation, and one in a fault or with refs at the top was restored with every refs
//! bit; 6.1 counted only recent refaults and its activations in sort_folio. Before 6.14 the
//! token's refs also counted PG_workingset, and its workingset bit meant refs != 0.
//!
//! Simplified: the decision (`lru_gen_refault_decide`) and its effect
//! (`lru_gen_refault_apply`) are split so that the caller counts the lruvec items; the
//! counters are plain integers, not atomics.

use super::*;
use crate::mm::mmzone::Lruvec;
use crate::mm::vmstat::NodeStat;
use crate::mm::workingset::{pack_shadow, unpack_shadow, EVICTION_MASK};
use crate::mm::Pfn;
use crate::versions::Rules;

/// The bits of a token's sequence number that survive in a shadow entry: the shadow keeps
/// EVICTION_BITS of token, LRU_REFS_WIDTH of which hold refs.
pub const LRU_GEN_TOKEN_SEQ_MASK: u64 = EVICTION_MASK >> LRU_REFS_WIDTH;

/// lru_gen_eviction() (workingset_eviction with MGLRU): the shadow entry of a folio being
/// evicted, and evicted[hist][type][tier] += 1. The token is (min_seq << LRU_REFS_WIDTH) |
/// (refs - 1, at least 0), the min_seq of the folio's type in the folio's own lruvec
/// (folio_memcg's, not the reclaim target's as in the classic path; `lv` must be that
/// lruvec); it is packed with that lruvec's memcg id and node and PG_workingset exactly as
/// `workingset::pack_shadow` packs a classic eviction timestamp, so unpack_shadow reads the
/// same fields back. No nonresident_age is aged. The kernel does this without the lru_lock
/// (the counter is atomic). Rule mglru_tiers_rework (6.14): before it (6.1, 6.12) refs
/// are the counter plus PG_workingset, and the shadow's workingset bit is refs != 0.
pub fn lru_gen_eviction(frames: &Frames, lv: &mut Lruvec, pfn: Pfn, rules: &Rules) -> u64 {
    let page = frames[pfn as usize];
    let ty = folio_type(&page);
    let refs = folio_lru_refs(frames, pfn, rules);
    let ws = if rules.mglru_tiers_rework {
        page.test(PG_WORKINGSET)
    } else {
        refs != 0
    };
    let min_seq = lv.lrugen.min_seq[ty];
    let token = (min_seq << LRU_REFS_WIDTH) | refs.saturating_sub(1) as u64;
    lv.lrugen.evicted[lru_hist_from_seq(min_seq)][ty][refs_tier(refs, ws, rules)] += 1;
    pack_shadow(lv.memcg, lv.node, token, ws)
}

/// lru_gen_test_recent(): was the folio of this token (the shadow's eviction field) evicted
/// less than MAX_NR_GENS generations ago? `max_seq` is that of the lruvec the shadow names
/// (memcg id, node; the kernel falls back to the root memcg's lruvec when the id is gone);
/// it is truncated to the token's width, and the distance taken either way (abs_diff).
/// Rule mglru_refault_recent_window (6.14): before it (6.1, 6.12) a refault is recent only
/// if the folio's type still has the min_seq it was evicted at (`min_seq`, that lruvec's
/// min_seq of the folio's type, truncated the same way).
pub fn lru_gen_test_recent(token: u64, max_seq: u64, min_seq: u64, rules: &Rules) -> bool {
    if !rules.mglru_refault_recent_window {
        return token >> LRU_REFS_WIDTH == min_seq & LRU_GEN_TOKEN_SEQ_MASK;
    }
    (max_seq & LRU_GEN_TOKEN_SEQ_MASK).abs_diff(token >> LRU_REFS_WIDTH) < MAX_NR_GENS
}

/// What lru_gen_refault() does for a refaulting folio, decided from its shadow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LruGenRefault {
    /// WORKINGSET_REFAULT_{ANON,FILE} += 1. False when the shadow's lruvec is not the
    /// folio's own: then nothing at all happens.
    pub count_refault: bool,
    /// Evicted recently (lru_gen_test_recent): the fields below apply.
    pub recent: bool,
    /// refaulted[hist][type][tier] += 1, tier from the token's refs and the workingset bit.
    pub tier: usize,
    /// WORKINGSET_ACTIVATE += 1: refaulting in a page fault (lru_gen_in_fault), where
    /// folio_add_lru sets PG_active (6.14 to 7.1; see `lru_gen_refault_decide`).
    pub activate: bool,
    /// PG_workingset is set and WORKINGSET_RESTORE += 1: the shadow's workingset bit
    /// (6.14 on); in a fault or at the top tier before.
    pub restore: bool,
    /// The refs counter is set to this: refs - 1 for a recent refault that is not
    /// restored (6.14 on; PG_referenced is not set, so it counts only once something sets
    /// it), every refs bit with a restore before 6.14.
    pub refs_counter: Option<u8>,
}

impl LruGenRefault {
    /// The lruvec items to add 1 to, on the shadow's (= the folio's) lruvec.
    pub fn items(&self, file: bool) -> impl Iterator<Item = NodeStat> {
        let (refault, activate, restore) = if file {
            (
                NodeStat::WorkingsetRefaultFile,
                NodeStat::WorkingsetActivateFile,
                NodeStat::WorkingsetRestoreFile,
            )
        } else {
            (
                NodeStat::WorkingsetRefaultAnon,
                NodeStat::WorkingsetActivateAnon,
                NodeStat::WorkingsetRestoreAnon,
            )
        };
        [
            (self.count_refault, refault),
            (self.activate, activate),
            (self.restore, restore),
        ]
        .into_iter()
        .filter_map(|(yes, item)| yes.then_some(item))
    }
}

/// lru_gen_refault()'s decision (workingset_refault with MGLRU): `same_lruvec` is whether
/// the shadow's lruvec is the refaulting folio's, `seqs` that lruvec's max_seq and the
/// min_seq of the folio's type, `in_fault` lru_gen_in_fault(). Called without the lru_lock,
/// before the folio is added to an LRU. As 6.18 has it: WORKINGSET_REFAULT for every
/// refault on its own lruvec; a recent one counts in its tier, WORKINGSET_ACTIVATE in a
/// fault, and the shadow's workingset bit gives PG_workingset and WORKINGSET_RESTORE, or
/// else the refs counter back. The version rules, each read here:
/// - mglru_refault_recent_window (6.14): see `lru_gen_test_recent`.
/// - mglru_refault_counts_all (6.4): before it (6.1) only a recent refault counts
///   WORKINGSET_REFAULT, and none counts WORKINGSET_ACTIVATE (sort_folio does, for
///   protected folios: rule mglru_v61_sort_counts_activate).
/// - mglru_refault_activate_in_fault (6.14): before it every recent refault counts
///   WORKINGSET_ACTIVATE.
/// - mglru_refault_activate_workingset (7.2): only one whose shadow says workingset.
/// - mglru_refault_restore_rework (6.14): before it a recent refault in a fault, or one
///   whose refs (the token's counter plus the workingset bit) reach BIT(LRU_REFS_WIDTH) - 1,
///   gets every refs bit and PG_workingset and counts WORKINGSET_RESTORE; no other gets
///   its refs back.
///
/// - mglru_tiers_rework (6.14): before it the refs are the token's counter plus the
///   shadow's workingset bit (which lru_gen_eviction set for refs != 0), its tier
///   order_base_2(refs + 1).
pub fn lru_gen_refault_decide(
    shadow: u64,
    same_lruvec: bool,
    seqs: (u64, u64),
    in_fault: bool,
    rules: &Rules,
) -> LruGenRefault {
    let (_, _, token, workingset) = unpack_shadow(shadow);
    let recent = same_lruvec && lru_gen_test_recent(token, seqs.0, seqs.1, rules);
    let counter = (token & ((1 << LRU_REFS_WIDTH) - 1)) as usize;
    let refs = counter + 1;
    // Rule mglru_tiers_rework: before 6.14 the refs are the counter plus the shadow's
    // workingset bit, tiered as order_base_2(refs + 1).
    let tier = if rules.mglru_tiers_rework {
        lru_tier_from_refs(refs, workingset)
    } else {
        lru_tier_from_refs_v612(counter + workingset as usize)
    };
    let activate = if !rules.mglru_refault_counts_all {
        false
    } else if !rules.mglru_refault_activate_in_fault {
        recent
    } else {
        recent && in_fault && (workingset || !rules.mglru_refault_activate_workingset)
    };
    let (restore, refs_counter) = if rules.mglru_refault_restore_rework {
        (
            recent && workingset,
            (recent && !workingset).then_some(refs as u8 - 1),
        )
    } else {
        // The kernel's refs here is the token's counter plus the workingset bit.
        let stall = recent && (in_fault || refs - 1 + workingset as usize >= REFS_STALL);
        (stall, stall.then_some(((1 << LRU_REFS_WIDTH) - 1) as u8))
    };
    LruGenRefault {
        count_refault: same_lruvec && (recent || rules.mglru_refault_counts_all),
        recent,
        tier,
        activate,
        restore,
        refs_counter,
    }
}

/// BIT(LRU_REFS_WIDTH) - 1: before 6.14 a refault with this many refs counts as a stall
/// (a folio read this often through file descriptors would have been protected).
const REFS_STALL: usize = (1 << LRU_REFS_WIDTH) - 1;

/// lru_gen_refault()'s effect on the lruvec and the folio: the refaulted counter (hist of
/// the type's current min_seq) and PG_workingset or the refs counter. The caller counts
/// `r.items()`.
pub fn lru_gen_refault_apply(
    frames: &mut Frames,
    lrugen: &mut LruGenFolio,
    pfn: Pfn,
    r: &LruGenRefault,
) {
    if !r.recent {
        return;
    }
    let ty = folio_type(&frames[pfn as usize]);
    lrugen.refaulted[lru_hist_from_seq(lrugen.min_seq[ty])][ty][r.tier] += 1;
    if r.restore {
        frames[pfn as usize].set(PG_WORKINGSET);
    }
    if let Some(c) = r.refs_counter {
        set_byte_refs(frames, pfn, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::lru_gen::test_util::*;
    use crate::versions::DEFAULT_RULES;

    #[test]
    fn eviction_token_round_trip_and_recent_boundary() {
        let f_ = LRU_GEN_FILE;
        // File folio with refs 3 (PG_referenced + counter 2), lruvec of memcg 5, node 1,
        // file min_seq 9: token = 9 << 2 | (3 - 1) = 38; shadow = 38 << 20 | 5 << 4 | 1 << 1
        // = 39845888 + 80 + 2 = 39845970 (workingset.rs layout).
        let mut f = frames(&[
            FILE | PG_REFERENCED,
            FILE,
            FILE | PG_REFERENCED | PG_WORKINGSET,
        ]);
        f[0].lru_gen = 2 << LRU_REFS_PGOFF;
        f[2].lru_gen = 3 << LRU_REFS_PGOFF;
        let mut lv = Lruvec::new(5, 1, 0, 0);
        lv.lrugen.min_seq[f_] = 9;
        let s = lru_gen_eviction(&f, &mut lv, 0, &DEFAULT_RULES);
        assert_eq!(s, 39_845_970);
        assert_eq!(unpack_shadow(s), (5, 1, 38, false));
        assert_eq!(lv.lrugen.evicted[0][f_], [0, 0, 1, 0], "refs 3: tier 2");
        // refs 0 stores 0 (max(refs - 1, 0)); workingset with refs 4 stores 3, tier 3.
        assert_eq!(
            unpack_shadow(lru_gen_eviction(&f, &mut lv, 1, &DEFAULT_RULES)).2,
            36
        );
        assert_eq!(
            unpack_shadow(lru_gen_eviction(&f, &mut lv, 2, &DEFAULT_RULES)),
            (5, 1, 39, true)
        );
        assert_eq!(lv.lrugen.evicted[0][f_], [1, 0, 1, 1]);
        // Recent while |max_seq - 9| < 4.
        assert!(lru_gen_test_recent(38, 12, 9, &DEFAULT_RULES));
        assert!(!lru_gen_test_recent(38, 13, 10, &DEFAULT_RULES));
        assert!(lru_gen_test_recent(38, 6, 3, &DEFAULT_RULES));
        assert!(!lru_gen_test_recent(38, 5, 2, &DEFAULT_RULES));
        // Sequence numbers beyond the token's 40 bits: both sides are truncated. min_seq
        // 2^40 + 9 packs to 9 (the shadow keeps 42 bits of token), max_seq 2^40 + 12
        // compares as 12.
        lv.lrugen.min_seq[f_] = (1 << 40) + 9;
        let (_, _, token, _) = unpack_shadow(lru_gen_eviction(&f, &mut lv, 0, &DEFAULT_RULES));
        assert_eq!(token, 38);
        assert!(lru_gen_test_recent(
            token,
            (1 << 40) + 12,
            9,
            &DEFAULT_RULES
        ));
        assert!(!lru_gen_test_recent(
            token,
            (1 << 40) + 13,
            9,
            &DEFAULT_RULES
        ));
    }

    #[test]
    fn refault_decisions_and_effects() {
        use NodeStat::*;
        // Token 9 << 2 | 2 (refs 3), no workingset; one with workingset and refs 1.
        let plain = pack_shadow(5, 1, 38, false);
        let ws = pack_shadow(5, 1, 36, true);
        // Another lruvec's shadow: nothing, not even the refault count.
        let r = lru_gen_refault_decide(plain, false, (12, 9), true, &DEFAULT_RULES);
        assert!(!r.count_refault && !r.recent && r.items(true).count() == 0);
        // Too old (|13 - 9| = 4): only the refault.
        let r = lru_gen_refault_decide(plain, true, (13, 10), true, &DEFAULT_RULES);
        assert!(r.count_refault && !r.recent && !r.activate);
        assert_eq!(
            r.items(true).collect::<Vec<_>>(),
            vec![WorkingsetRefaultFile]
        );
        // Recent, in a fault: tier of refs 3 = 2, activate, counter back to 2.
        let r = lru_gen_refault_decide(plain, true, (12, 9), true, &DEFAULT_RULES);
        assert_eq!(
            (r.recent, r.tier, r.activate, r.restore),
            (true, 2, true, false)
        );
        assert_eq!(r.refs_counter, Some(2));
        assert_eq!(
            r.items(false).collect::<Vec<_>>(),
            vec![WorkingsetRefaultAnon, WorkingsetActivateAnon]
        );
        // Recent workingset, not in a fault (read): tier 3, restore, no activation.
        let w = lru_gen_refault_decide(ws, true, (10, 9), false, &DEFAULT_RULES);
        assert_eq!(
            (w.tier, w.activate, w.restore, w.refs_counter),
            (3, false, true, None)
        );
        assert_eq!(
            w.items(true).collect::<Vec<_>>(),
            vec![WorkingsetRefaultFile, WorkingsetRestoreFile]
        );
        // Effects on a new (off-LRU) anon folio and its lruvec.
        let mut f = frames(&[ANON, FILE]);
        let mut g = LruGenFolio::init(true, 0);
        lru_gen_refault_apply(&mut f, &mut g, 0, &r);
        assert_eq!(g.refaulted[0][LRU_GEN_ANON], [0, 0, 1, 0]);
        assert_eq!(f[0].lru_gen, 2 << LRU_REFS_PGOFF);
        assert!(!f[0].test(PG_REFERENCED | PG_WORKINGSET));
        lru_gen_refault_apply(&mut f, &mut g, 1, &w);
        assert_eq!(g.refaulted[0][LRU_GEN_FILE], [0, 0, 0, 1]);
        assert!(f[1].test(PG_WORKINGSET) && f[1].lru_gen == 0);
        // Not recent: no effect.
        let old = lru_gen_refault_decide(plain, true, (13, 10), true, &DEFAULT_RULES);
        lru_gen_refault_apply(&mut f, &mut g, 0, &old);
        assert_eq!(g.refaulted[0][LRU_GEN_ANON], [0, 0, 1, 0]);
    }

    #[test]
    fn refault_activates_only_workingset_from_7_2() {
        use crate::versions::{KernelVersion, Rules};
        use NodeStat::*;
        let v7_3 = Rules::of(KernelVersion::V7_3);
        let plain = pack_shadow(5, 1, 38, false);
        let ws = pack_shadow(5, 1, 36, true);
        // A recent refault in a fault of a folio evicted outside the working set: 6.18
        // counts WORKINGSET_ACTIVATE, 7.2 only the refault (and sets the counter).
        let r = lru_gen_refault_decide(plain, true, (12, 9), true, &v7_3);
        assert_eq!(
            (r.recent, r.activate, r.refs_counter),
            (true, false, Some(2))
        );
        assert_eq!(
            r.items(false).collect::<Vec<_>>(),
            vec![WorkingsetRefaultAnon]
        );
        // A workingset one in a fault: activate and restore in both.
        let w = lru_gen_refault_decide(ws, true, (10, 9), true, &v7_3);
        assert_eq!(
            w.items(true).collect::<Vec<_>>(),
            vec![
                WorkingsetRefaultFile,
                WorkingsetActivateFile,
                WorkingsetRestoreFile
            ]
        );
        // Not in a fault: never an activation.
        assert!(!lru_gen_refault_decide(ws, true, (10, 9), false, &v7_3).activate);
        // The rule alone, on 6.18.
        let mut only = Rules::of(KernelVersion::V6_18);
        only.set("mglru_refault_activate_workingset", true);
        assert!(!lru_gen_refault_decide(plain, true, (12, 9), true, &only).activate);
    }

    #[test]
    fn eviction_token_before_6_14_counts_pg_workingset_in_refs() {
        // 6.12's lru_gen_eviction: refs = counter + PG_workingset, token = min_seq << 2 |
        // max(refs - 1, 0), the shadow's workingset bit refs != 0, evicted in tier
        // order_base_2(refs + 1). File min_seq 9 of memcg 5 on node 1.
        let r = v6_12();
        let f_ = LRU_GEN_FILE;
        let mut f = frames(&[FILE | PG_WORKINGSET, FILE, FILE | PG_WORKINGSET]);
        // pfn 0: refs 3 (counter 2 + PG_workingset): token 9 << 2 | 2 = 38, tier 2;
        // pfn 1: refs 1 (counter 1): token 36, workingset bit set, tier 1;
        // pfn 2: refs 1 from PG_workingset alone: token 36, workingset bit, tier 1.
        f[0].lru_gen = 2 << LRU_REFS_PGOFF;
        f[1].lru_gen = 1 << LRU_REFS_PGOFF;
        let mut lv = Lruvec::new(5, 1, 0, 0);
        lv.lrugen.min_seq[f_] = 9;
        let tokens: Vec<_> = (0..3)
            .map(|pfn| unpack_shadow(lru_gen_eviction(&f, &mut lv, pfn, &r)))
            .collect();
        assert_eq!(
            tokens,
            [(5, 1, 38, true), (5, 1, 36, true), (5, 1, 36, true)]
        );
        assert_eq!(lv.lrugen.evicted[0][f_], [0, 2, 1, 0]);
        // A folio with no refs at all: token 36 and no workingset bit, tier 0.
        let plain = frames(&[FILE]);
        let s = lru_gen_eviction(&plain, &mut lv, 0, &r);
        assert_eq!(unpack_shadow(s), (5, 1, 36, false));
        assert_eq!(lv.lrugen.evicted[0][f_], [1, 2, 1, 0]);
        // At refault the tier comes back from the token: counter + bit = the evicted refs.
        for (pfn, tier) in [(0, 2), (1, 1)] {
            let s = lru_gen_eviction(&f, &mut lv, pfn, &r);
            assert_eq!(
                lru_gen_refault_decide(s, true, (10, 9), false, &r).tier,
                tier
            );
        }
        assert_eq!(lru_gen_refault_decide(s, true, (10, 9), false, &r).tier, 0);
    }

    #[test]
    fn refaults_before_6_14_are_recent_at_the_eviction_min_seq() {
        use crate::versions::{KernelVersion, Rules};
        let v6_12 = Rules::of(KernelVersion::V6_12);
        // Token 38: evicted at min_seq 9. 6.12 compares with the type's min_seq now.
        assert!(lru_gen_test_recent(38, 12, 9, &v6_12));
        assert!(lru_gen_test_recent(38, 11, 9, &v6_12));
        // min_seq moved on to 10: not recent on 6.12, while 6.18 (|12 - 9| = 3 < 4) says
        // recent.
        assert!(!lru_gen_test_recent(38, 12, 10, &v6_12));
        assert!(lru_gen_test_recent(38, 12, 10, &DEFAULT_RULES));
        // The same truncation of both sides: min_seq 2^40 + 9 matches token seq 9.
        assert!(lru_gen_test_recent(38, 0, (1 << 40) + 9, &v6_12));
    }

    #[test]
    fn refault_accounting_of_6_1_and_6_12() {
        use crate::versions::{KernelVersion, Rules};
        use NodeStat::*;
        let (v6_1, v6_12) = (
            Rules::of(KernelVersion::V6_1),
            Rules::of(KernelVersion::V6_12),
        );
        // Token 38 = seq 9, counter 2; 36 = seq 9, counter 0.
        let plain = pack_shadow(5, 1, 38, false);
        let plain0 = pack_shadow(5, 1, 36, false);
        let ws = pack_shadow(5, 1, 38, true);
        // 6.12, a read (not a fault), recent: a refault and an activation; refs 2 + 0 < 3:
        // no restore and no refs back.
        let r = lru_gen_refault_decide(plain, true, (12, 9), false, &v6_12);
        assert_eq!(
            (r.recent, r.activate, r.restore, r.refs_counter),
            (true, true, false, None)
        );
        assert_eq!(
            r.items(true).collect::<Vec<_>>(),
            vec![WorkingsetRefaultFile, WorkingsetActivateFile]
        );
        // Counter 2 plus the workingset bit = 3 = BIT(LRU_REFS_WIDTH) - 1: a stall, restored
        // with every refs bit.
        let w = lru_gen_refault_decide(ws, true, (12, 9), false, &v6_12);
        assert_eq!((w.restore, w.refs_counter), (true, Some(3)));
        assert_eq!(
            w.items(true).collect::<Vec<_>>(),
            vec![
                WorkingsetRefaultFile,
                WorkingsetActivateFile,
                WorkingsetRestoreFile
            ]
        );
        // In a fault every recent refault is a stall, whatever its refs.
        let f = lru_gen_refault_decide(plain0, true, (12, 9), true, &v6_12);
        assert_eq!(
            (f.activate, f.restore, f.refs_counter),
            (true, true, Some(3))
        );
        // Not recent (min_seq 10): only the refault.
        let o = lru_gen_refault_decide(plain0, true, (12, 10), true, &v6_12);
        assert_eq!(
            o.items(false).collect::<Vec<_>>(),
            vec![WorkingsetRefaultAnon]
        );
        // 6.1: a refault that is not recent counts nothing; a recent one a refault and no
        // activation (sort_folio counts those).
        let o = lru_gen_refault_decide(plain0, true, (12, 10), true, &v6_1);
        assert_eq!(o.items(false).count(), 0);
        let r = lru_gen_refault_decide(plain0, true, (12, 9), true, &v6_1);
        assert_eq!(
            r.items(false).collect::<Vec<_>>(),
            vec![WorkingsetRefaultAnon, WorkingsetRestoreAnon]
        );
        // The restore's effect: PG_workingset and the refs counter at 3.
        let mut fr = frames(&[ANON]);
        let mut g = LruGenFolio::init(true, 0);
        g.min_seq[LRU_GEN_ANON] = 9;
        lru_gen_refault_apply(&mut fr, &mut g, 0, &r);
        assert!(fr[0].test(PG_WORKINGSET) && !fr[0].test(PG_REFERENCED));
        assert_eq!(fr[0].lru_gen, 3 << LRU_REFS_PGOFF);
        assert_eq!(
            g.refaulted[lru_hist_from_seq(9)][LRU_GEN_ANON],
            [1, 0, 0, 0]
        );
    }
}
