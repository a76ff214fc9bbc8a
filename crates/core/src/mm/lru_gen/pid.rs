//! The PID controller: the "PID controller" section of mm/vmscan.c (v6.18), on the
//! feedback counters of struct lru_gen_folio (avg_refaulted, avg_total, protected,
//! evicted, refaulted).
//!
//! Eviction must decide which type to take (anon or file) and which tiers to spare. It
//! compares refault rates, refaulted / (evicted + protected), per type and tier: the
//! "proportional" term is the rate in the generation being evicted, the "integral" term a
//! moving average over earlier generations (halved at each `min_seq` step, `reset_ctrl_pos`
//! with carryover); there is no derivative term. get_tier_idx's set point is tier 0 of a
//! type and its process variables the higher tiers; get_type_to_scan's are all tiers of
//! anon and all tiers of file, weighed by swappiness and 200 - swappiness.
//! `positive_ctrl_err` says whether the process variable refaults no more than the set
//! point (or too little to judge): then it need not be protected.
//!
//! ```text
//!   evicted[type][tier]    lru_gen_eviction (workingset.rs): a folio of that tier left
//!   refaulted[type][tier]  lru_gen_refault (workingset.rs): it came back soon
//!   protected[type][tier]  sort_folio / inc_min_seq: kept instead of evicted
//!        --reset_ctrl_pos--> avg_refaulted, avg_total (halved at each min_seq step)
//!        --read_ctrl_pos--> get_tier_idx, get_type_to_scan (eviction.rs)
//! ```
//! The two readers, get_tier_idx (which tiers to protect) and get_type_to_scan (anon or
//! file), sit in vmscan.c's "the eviction" section and in eviction.rs.
//!
//! Simplified: NR_HIST_GENS is 1 (no CONFIG_LRU_GEN_STATS), so the counters of the
//! generation being evicted are one slot; the atomic counters are plain integers.

use super::*;

/// struct ctrl_pos: refaults and total (evicted + protected) of a type's tier or tiers,
/// with the gain they are weighed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtrlPos {
    pub refaulted: u64,
    pub total: u64,
    pub gain: u64,
}

/// read_ctrl_pos(): sum the moving averages and the current generation's counters of one
/// tier, or of all tiers when `tier` is MAX_NR_TIERS.
pub fn read_ctrl_pos(lrugen: &LruGenFolio, ty: usize, tier: usize, gain: u64) -> CtrlPos {
    let hist = lru_hist_from_seq(lrugen.min_seq[ty]);
    let mut pos = CtrlPos {
        refaulted: 0,
        total: 0,
        gain,
    };
    for i in tier % MAX_NR_TIERS..=tier.min(MAX_NR_TIERS - 1) {
        pos.refaulted += lrugen.avg_refaulted[ty][i] + lrugen.refaulted[hist][ty][i];
        pos.total +=
            lrugen.avg_total[ty][i] + lrugen.protected[hist][ty][i] + lrugen.evicted[hist][ty][i];
    }
    pos
}

/// reset_ctrl_pos(): with `carryover` (min_seq of `ty` is about to advance), fold the
/// current generation's counters into the moving averages, avg = (avg + current) / 2, and
/// clear the counters (NR_HIST_GENS is 1). Without `carryover` (inc_max_seq) there is
/// nothing to do when NR_HIST_GENS is 1. Caller holds lru_lock.
pub fn reset_ctrl_pos(lrugen: &mut LruGenFolio, ty: usize, carryover: bool) {
    let clear = if carryover {
        NR_HIST_GENS == 1
    } else {
        NR_HIST_GENS > 1
    };
    if !carryover && !clear {
        return;
    }
    let seq = if carryover {
        lrugen.min_seq[ty]
    } else {
        lrugen.max_seq + 1
    };
    let hist = lru_hist_from_seq(seq);
    for tier in 0..MAX_NR_TIERS {
        if carryover {
            let sum = lrugen.avg_refaulted[ty][tier] + lrugen.refaulted[hist][ty][tier];
            lrugen.avg_refaulted[ty][tier] = sum / 2;
            let sum = lrugen.avg_total[ty][tier]
                + lrugen.protected[hist][ty][tier]
                + lrugen.evicted[hist][ty][tier];
            lrugen.avg_total[ty][tier] = sum / 2;
        }
        if clear {
            lrugen.refaulted[hist][ty][tier] = 0;
            lrugen.evicted[hist][ty][tier] = 0;
            lrugen.protected[hist][ty][tier] = 0;
        }
    }
}

/// positive_ctrl_err(): true when the process variable refaults no more than the set
/// point, pv.refaulted / pv.total <= sp.refaulted / sp.total weighed by the gains (with
/// MIN_LRU_BATCH added to sp.total and 1 to sp.refaulted against small samples), or when it
/// has too few refaults to judge (fewer than MIN_LRU_BATCH). Products wrap like the
/// kernel's unsigned long.
pub fn positive_ctrl_err(sp: &CtrlPos, pv: &CtrlPos) -> bool {
    pv.refaulted < MIN_LRU_BATCH
        || pv
            .refaulted
            .wrapping_mul(sp.total + MIN_LRU_BATCH)
            .wrapping_mul(sp.gain)
            <= (sp.refaulted + 1)
                .wrapping_mul(pv.total)
                .wrapping_mul(pv.gain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_ctrl_err_cases() {
        let pos = |refaulted, total, gain| CtrlPos {
            refaulted,
            total,
            gain,
        };
        // Fewer than MIN_LRU_BATCH refaults: always positive, however bad the rate.
        assert!(positive_ctrl_err(&pos(0, 1, 1), &pos(63, 63, 200)));
        // pv.refaulted * (sp.total + 64) * sp.gain <= (sp.refaulted + 1) * pv.total * pv.gain
        // 64 * (1000 + 64) * 2 = 136192 against 11 * 1000 * 3 = 33000: negative.
        assert!(!positive_ctrl_err(&pos(10, 1000, 2), &pos(64, 1000, 3)));
        // 11 * 10000 * 3 = 330000 >= 136192: positive.
        assert!(positive_ctrl_err(&pos(10, 1000, 2), &pos(64, 10000, 3)));
        // Equality is positive: 64 * 64 * 1 = 4096 = 1 * 4096 * 1; one less is not.
        assert!(positive_ctrl_err(&pos(0, 0, 1), &pos(64, 4096, 1)));
        assert!(!positive_ctrl_err(&pos(0, 0, 1), &pos(64, 4095, 1)));
        // Gains on the right sides: 64 * 64 * 2 = 8192 <= 1 * 4096 * 3 = 12288 is
        // positive; with the gains swapped, 12288 <= 8192 would not be.
        assert!(positive_ctrl_err(&pos(0, 0, 2), &pos(64, 4096, 3)));
        assert!(!positive_ctrl_err(&pos(0, 0, 3), &pos(64, 4096, 2)));
    }

    #[test]
    fn reset_ctrl_pos_carries_over_halves() {
        let (a, f) = (LRU_GEN_ANON, LRU_GEN_FILE);
        let mut g = LruGenFolio::init(true, 0);
        g.avg_refaulted[a][2] = 10;
        g.refaulted[0][a][2] = 7;
        g.avg_total[a][2] = 100;
        g.protected[0][a][2] = 30;
        g.evicted[0][a][2] = 21;
        g.avg_refaulted[a][0] = 3;
        g.avg_total[a][0] = 1;
        g.refaulted[0][f][0] = 5;
        let before = g.clone();
        // Without carryover and NR_HIST_GENS 1: nothing at all.
        reset_ctrl_pos(&mut g, a, false);
        assert_eq!(format!("{g:?}"), format!("{before:?}"));
        reset_ctrl_pos(&mut g, a, true);
        // (10 + 7) / 2 = 8; (100 + 30 + 21) / 2 = 75; (3 + 0) / 2 = 1; (1 + 0) / 2 = 0.
        assert_eq!(g.avg_refaulted[a], [1, 0, 8, 0]);
        assert_eq!(g.avg_total[a], [0, 0, 75, 0]);
        assert_eq!(g.refaulted[0][a], [0; 4]);
        assert_eq!(g.protected[0][a], [0; 4]);
        assert_eq!(g.evicted[0][a], [0; 4]);
        assert_eq!(g.refaulted[0][f][0], 5, "the other type is untouched");
    }
}
