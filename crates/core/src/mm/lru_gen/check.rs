//! MGLRU's invariant checks: the model's counterpart of the VM_WARN_ON_ONCE checks
//! scattered through mm/vmscan.c's lru_gen sections (seq_is_valid in "shorthand helpers",
//! state_is_valid in "state change", the list and size checks of inc_min_seq, scan_folios
//! and lru_gen_exit_memcg), gathered in one place and made exhaustive.
//!
//! The kernel checks what it touches, one folio or one lruvec at a time, and only warns.
//! Here `check_lru_gen` walks a whole lruvec's generations against the frame table and
//! `check_memcg_lru` a whole node's memcg LRU against its lruvecs. `Mm::check_invariants`
//! (mm/mod.rs) runs them after each reclaim pass of a run with checking on
//! (`Sim::after_reclaim_pass`, which keeps the first violation).

use super::*;
use crate::mm::mmzone::{Lruvec, LRU_INACTIVE_FILE};
use crate::mm::vmstat::LRU_STAT;
use crate::mm::{LruvecId, NIL};

/// Check one lruvec's MGLRU state against the frame table; the first violation found.
///
/// - Each type's window max_seq - min_seq + 1 is within [MIN_NR_GENS, MAX_NR_GENS].
/// - Every folio on a generation list is of the list's type, has PG_lru and neither
///   PG_active nor PG_unevictable, and its gen counter names a generation within its type's
///   window that is not older than the list it sits on (a folio promoted by the walk waits
///   on its old list to be sorted). Lists of generations outside the window are empty;
///   each folio's position names its place on its list, and each list counts its folios.
/// - nr_pages of each (gen, type) equals the folios whose gen counter says so (with no walk
///   batch pending; without lazy promotions this is each list's length).
/// - With MGLRU on, the classic evictable lists are empty and the compatibility sizes
///   (Lruvec::nr and the NR_{IN,}ACTIVE_* items) equal the sums of the active (two
///   youngest) and inactive generations. With it off, the generation lists are empty.
pub fn check_lru_gen(frames: &Frames, lv: &Lruvec, walk_pending: bool) -> Result<(), String> {
    let g = &lv.lrugen;
    for ty in 0..ANON_AND_FILE {
        if g.min_seq[ty] > g.max_seq {
            return Err(format!(
                "type {ty}: min_seq {} > max_seq {}",
                g.min_seq[ty], g.max_seq
            ));
        }
        let n = get_nr_gens(g, ty);
        if !(MIN_NR_GENS..=MAX_NR_GENS).contains(&n) {
            return Err(format!(
                "type {ty}: {n} generations (max_seq {}, min_seq {})",
                g.max_seq, g.min_seq[ty]
            ));
        }
    }
    // The sequence number of a generation within a type's window.
    let seq_of =
        |ty: usize, gen: usize| (g.min_seq[ty]..=g.max_seq).find(|&s| lru_gen_from_seq(s) == gen);
    let mut by_gen = [[0i64; ANON_AND_FILE]; MAX_NR_GENS as usize];
    for gen in 0..MAX_NR_GENS as usize {
        for ty in 0..ANON_AND_FILE {
            check_gen_list(frames, g, gen, ty, &seq_of, &mut by_gen)?;
        }
    }
    if by_gen != g.nr_pages && !walk_pending {
        return Err(format!(
            "nr_pages {:?} but the folios' gens count {:?}",
            g.nr_pages, by_gen
        ));
    }
    if !g.enabled {
        if by_gen.iter().flatten().any(|&n| n != 0) {
            return Err("MGLRU off but generation lists hold folios".into());
        }
        return Ok(());
    }
    for lru in crate::mm::mmzone::EVICTABLE_LRUS {
        if lv.lists[lru].head != NIL {
            return Err(format!("MGLRU on but classic list {lru} holds folios"));
        }
    }
    for ty in 0..ANON_AND_FILE {
        let mut sizes = [0i64; 2];
        for (gen, n) in g.nr_pages.iter().enumerate() {
            sizes[lru_gen_is_active(g, gen) as usize] += n[ty];
        }
        for (active, &want) in sizes.iter().enumerate() {
            let lru = ty * LRU_INACTIVE_FILE + active;
            let stat = lv.stat[LRU_STAT[lru] as usize];
            if lv.nr[lru] as i64 != want || stat != want {
                return Err(format!(
                    "list {lru}: nr {} and stat {stat} but generations hold {want}",
                    lv.nr[lru] as i64
                ));
            }
        }
    }
    Ok(())
}

/// One generation list of `check_lru_gen`.
fn check_gen_list(
    frames: &Frames,
    g: &LruGenFolio,
    gen: usize,
    ty: usize,
    seq_of: &impl Fn(usize, usize) -> Option<u64>,
    by_gen: &mut [[i64; ANON_AND_FILE]; MAX_NR_GENS as usize],
) -> Result<(), String> {
    let list = &g.folios[gen][ty];
    let list_seq = seq_of(ty, gen);
    let mut count = 0usize;
    for p in list.iter() {
        count += 1;
        if p as usize >= frames.len() {
            return Err(format!("gen {gen} type {ty}: pfn {p} past the frame table"));
        }
        let page = &frames[p as usize];
        let at = format!("pfn {p} on gen {gen} type {ty}");
        let pos = frames.lru_pos[p as usize];
        if super::list::pos_gen(pos) != gen || !list.holds(&frames.lru_pos, p) {
            return Err(format!("{at}: its position {pos:#x} names another place"));
        }
        if folio_type(page) != ty {
            return Err(format!("{at}: folio of the other type"));
        }
        if !page.test(PG_LRU) || page.test(PG_ACTIVE | PG_UNEVICTABLE) {
            return Err(format!("{at}: flags {:#x}", page.flags));
        }
        let Some(ls) = list_seq else {
            return Err(format!("{at}: the list's generation is outside the window"));
        };
        let Some(bg) = byte_gen(frames[p as usize].lru_gen) else {
            return Err(format!("{at}: gen counter 0"));
        };
        match seq_of(ty, bg) {
            None => {
                return Err(format!(
                    "{at}: gen {bg} outside [{}, {}]",
                    g.min_seq[ty], g.max_seq
                ))
            }
            Some(bs) if bs < ls => return Err(format!("{at}: gen {bg} older than its list")),
            Some(_) => by_gen[bg][ty] += 1,
        }
    }
    if count != list.len() {
        return Err(format!(
            "gen {gen} type {ty}: {count} folios on the list, which counts {}",
            list.len()
        ));
    }
    Ok(())
}

/// Check a node's memcg LRU against its lruvecs: `lruvecs` gives each lruvec of the node
/// with its lru_gen_folio and whether it should be on the memcg LRU (its memcg is online,
/// or offline and not yet released). Every listed lruvec appears once, in the list its
/// gen and bin name, and should be there; every one that should is; nr_memcgs counts each
/// generation; only the old and young generations are populated; segments are 0, HEAD or
/// TAIL.
pub fn check_memcg_lru<'a>(
    mlru: &LruGenMemcg,
    lruvecs: impl IntoIterator<Item = (LruvecId, &'a LruGenFolio, bool)>,
) -> Result<(), String> {
    let mut listed = std::collections::BTreeMap::new();
    let mut count = [0u64; MEMCG_NR_GENS];
    for (gen, bins) in mlru.fifo.iter().enumerate() {
        for (bin, list) in bins.iter().enumerate() {
            for &lv in list {
                if listed.insert(lv, (gen, bin)).is_some() {
                    return Err(format!("lruvec {lv} twice on the memcg LRU"));
                }
                count[gen] += 1;
            }
        }
    }
    if count != mlru.nr_memcgs {
        return Err(format!(
            "nr_memcgs {:?} but the lists hold {count:?}",
            mlru.nr_memcgs
        ));
    }
    let third = get_memcg_gen(mlru.seq + 2);
    if count[third] != 0 {
        return Err(format!(
            "memcg LRU generation {third} is neither old nor young but holds {}",
            count[third]
        ));
    }
    let mut seen = 0;
    for (lv, g, expected) in lruvecs {
        if g.seg > MEMCG_LRU_TAIL {
            return Err(format!("lruvec {lv}: segment {}", g.seg));
        }
        match (listed.get(&lv), expected) {
            (Some(&(gen, bin)), true) => {
                if g.gen as usize != gen || g.bin != Some(bin as u8) {
                    return Err(format!(
                        "lruvec {lv} in fifo[{gen}][{bin}] but says gen {} bin {:?}",
                        g.gen, g.bin
                    ));
                }
                seen += 1;
            }
            (Some(_), false) => {
                return Err(format!("lruvec {lv} on the memcg LRU but should not be"))
            }
            (None, true) => return Err(format!("lruvec {lv} missing from the memcg LRU")),
            (None, false) if g.bin.is_some() => {
                return Err(format!("lruvec {lv} off the lists but has a bin"))
            }
            (None, false) => {}
        }
    }
    if seen != listed.len() {
        return Err(format!(
            "{} unknown lruvecs on the memcg LRU",
            listed.len() - seen
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::lru_gen::test_util::*;
    use crate::mm::vmstat::NodeStat;
    use crate::versions::DEFAULT_RULES;

    /// A valid enabled lruvec: file folios 0, 1 in gen 0, 2 promoted by the walk to gen 3
    /// but still on gen 0's list, anon 3 in gen 2.
    fn valid_state() -> (Frames, Lruvec) {
        let mut f = frames(&[FILE, FILE, FILE | PG_REFERENCED, ANON]);
        let mut lv = lruvec();
        for pfn in 0..4 {
            lru_gen_add_folio(&mut f, &mut lv, pfn, false, &DEFAULT_RULES);
        }
        let mut w = LruGenMmWalk::new(3, 60, false);
        walk_update_folio(&mut f, Some(&mut w), 2, 3, &DEFAULT_RULES);
        reset_batch_size(&mut w, &mut lv);
        (f, lv)
    }

    fn assert_err(r: Result<(), String>, what: &str) {
        match r {
            Ok(()) => panic!("corruption not caught: expected {what}"),
            Err(e) => assert!(e.contains(what), "expected {what:?}, got {e:?}"),
        }
    }

    #[test]
    fn check_lru_gen_accepts_valid_states() {
        let (f, lv) = valid_state();
        check_lru_gen(&f, &lv, false).unwrap();
        // Through inc_max_seq twice (gen 0 folded, the promoted folio sorted to gen 3).
        let (mut f, mut lv) = valid_state();
        assert_eq!(
            inc_max_seq(&mut f, &mut lv, 3, 60, 1, &DEFAULT_RULES),
            IncMaxSeq::Done
        );
        check_lru_gen(&f, &lv, false).unwrap();
        assert_eq!(list(&f, &lv.lrugen.folios[3][LRU_GEN_FILE]), vec![2]);
        assert_eq!(
            inc_max_seq(&mut f, &mut lv, 4, 60, 2, &DEFAULT_RULES),
            IncMaxSeq::Done
        );
        check_lru_gen(&f, &lv, false).unwrap();
        // min_seq 2 and 2, max_seq 5: files 0, 1 and anon 3 in gen 2, file 2 in gen 3.
        assert_eq!(
            sort_folio(&mut f, &mut lv, 0, (3, true), &DEFAULT_RULES),
            SortFolio::Isolate
        );
        assert!(isolate_folio(&mut f, &mut lv, 1, true, &DEFAULT_RULES));
        check_lru_gen(&f, &lv, false).unwrap();
        // Put back as reclaiming (writeback rotation): seq 5 - 4 + 1 = 2, the tail of gen 2.
        assert!(lru_gen_add_folio(&mut f, &mut lv, 1, true, &DEFAULT_RULES));
        assert_eq!(folio_lru_gen(&f, 1), Some(2));
        assert_eq!(lv.lrugen.folios[2][LRU_GEN_FILE].tail(), 1);
        check_lru_gen(&f, &lv, false).unwrap();
        // A disabled, empty lruvec.
        check_lru_gen(&f, &Lruvec::new(0, 0, 0, 0), false).unwrap();
    }

    #[test]
    fn check_lru_gen_catches_corruption() {
        let f_ = LRU_GEN_FILE;
        let (f, mut lv) = valid_state();
        lv.lrugen.nr_pages[0][f_] += 1;
        assert_err(check_lru_gen(&f, &lv, false), "nr_pages");
        // Window too small (1) and too large (5).
        let (f, mut lv) = valid_state();
        lv.lrugen.min_seq[f_] = 3;
        assert_err(check_lru_gen(&f, &lv, false), "1 generations");
        let (f, mut lv) = valid_state();
        lv.lrugen.max_seq = 4;
        assert_err(check_lru_gen(&f, &lv, false), "5 generations");
        // min_seq past the folios of gen 0: the list is outside the window.
        let (f, mut lv) = valid_state();
        lv.lrugen.min_seq[f_] = 1;
        assert_err(check_lru_gen(&f, &lv, false), "outside the window");
        // A gen counter older than the list the folio is on (gen 0 on gen 3's list).
        let (mut f, mut lv) = valid_state();
        lru_gen_list_unlink(&mut f, &mut lv.lrugen, 0);
        lru_gen_list_splice(&mut f, &mut lv.lrugen, 3, &[0]);
        assert_err(check_lru_gen(&f, &lv, false), "older than its list");
        // Compatibility sizes off, in nr and in the stat item.
        let (f, mut lv) = valid_state();
        lv.nr[LRU_INACTIVE_FILE] += 1;
        assert_err(check_lru_gen(&f, &lv, false), "list 2: nr 3");
        let (f, mut lv) = valid_state();
        lv.stat[NodeStat::NrActiveAnon as usize] -= 1;
        assert_err(check_lru_gen(&f, &lv, false), "list 1");
        // Flags: PG_active on a listed folio; a swap-backed folio on a file list.
        let (mut f, lv) = valid_state();
        f[0].set(PG_ACTIVE);
        assert_err(check_lru_gen(&f, &lv, false), "flags");
        let (mut f, lv) = valid_state();
        f[1].set(PG_SWAPBACKED);
        assert_err(check_lru_gen(&f, &lv, false), "other type");
        // A position one place off, and one naming another generation's list.
        let (mut f, lv) = valid_state();
        f.lru_pos[0] ^= 1;
        assert_err(check_lru_gen(&f, &lv, false), "names another place");
        let (mut f, lv) = valid_state();
        f.lru_pos[1] ^= 2 << 30;
        assert_err(check_lru_gen(&f, &lv, false), "names another place");
        // A folio with a clear gen counter on a list.
        let (mut f, lv) = valid_state();
        f[1].lru_gen &= !LRU_GEN_MASK;
        assert_err(check_lru_gen(&f, &lv, false), "gen counter 0");
        // Classic lists must be empty with MGLRU on; generation lists with it off.
        let (f, mut lv) = valid_state();
        let mut other = frames(&[FILE]);
        crate::mm::mm_inline::lruvec_add_folio_untracked(&mut other, &mut lv, 0);
        assert_err(check_lru_gen(&f, &lv, false), "classic list");
        let (f, mut lv) = valid_state();
        lv.lrugen.enabled = false;
        assert_err(check_lru_gen(&f, &lv, false), "MGLRU off");
    }

    #[test]
    fn check_memcg_lru_cases() {
        use MemcgLruOp::*;
        let mut m = LruGenMemcg::new();
        let mut g: Vec<LruGenFolio> = (0..4).map(|_| LruGenFolio::new()).collect();
        for lv in 1..4 {
            lru_gen_online_memcg(&mut m, lv, &mut g[lv as usize], lv as usize);
        }
        lru_gen_rotate_memcg_locked(&mut m, 2, &mut g[2], Young, 0);
        lru_gen_rotate_memcg_locked(&mut m, 3, &mut g[3], Tail, 4);
        let all = |g: &[LruGenFolio], expect: [bool; 4]| -> Vec<(LruvecId, LruGenFolio, bool)> {
            (0..4)
                .map(|i| (i as LruvecId, g[i].clone(), expect[i]))
                .collect()
        };
        let check = |m: &LruGenMemcg, v: &[(LruvecId, LruGenFolio, bool)]| {
            check_memcg_lru(m, v.iter().map(|(id, g, e)| (*id, g, *e)))
        };
        let expect = [false, true, true, true];
        check(&m, &all(&g, expect)).unwrap();
        // Count off.
        let mut bad = m.clone();
        bad.nr_memcgs[0] += 1;
        assert_err(check(&bad, &all(&g, expect)), "nr_memcgs");
        // An lruvec that says another generation than its list.
        let mut g2 = g.clone();
        g2[2].gen = 0;
        assert_err(check(&m, &all(&g2, expect)), "says gen 0");
        // Online but missing; released but still listed.
        assert_err(check(&m, &all(&g, [true, true, true, true])), "missing");
        assert_err(
            check(&m, &all(&g, [false, true, false, true])),
            "should not be",
        );
        // A listed lruvec nobody knows.
        assert_err(check(&m, &all(&g, expect)[1..3]), "unknown");
        // The generation that is neither old (0) nor young (1) must be empty.
        let mut bad = m.clone();
        bad.fifo[2][0].push_back(9);
        bad.nr_memcgs[2] += 1;
        assert_err(check(&bad, &all(&g, expect)), "neither old nor young");
    }
}
