//! Modeled kernel functions against hand-computed kernel arithmetic.

use reclaimsim_core::engine::Site;
use reclaimsim_core::mm::mmzone::*;
use reclaimsim_core::mm::vmscan::{ScanBalance, ScanControl};
use reclaimsim_core::mm::vmstat::NodeStat;
use reclaimsim_core::mm::workingset::pack_shadow;
use reclaimsim_core::sim::Sim;
use reclaimsim_core::Scenario;
use std::rc::Rc;

fn sim(swap: bool) -> Rc<Sim> {
    let swap = if swap {
        "[machine.swap]\nsize = \"1G\"\ndevice = \"zram\"\n"
    } else {
        ""
    };
    let t = format!(
        r#"
duration = "20s"
[machine]
cpus = 2
memory_per_node = "1G"
{swap}
[[cgroup]]
path = "/a"
[[cgroup]]
path = "/a/b"
[[workload]]
type = "usemem"
cgroup = "/a/b"
size = "4K"
start = "10s"
"#
    );
    Sim::build(&Scenario::from_toml(&t).unwrap()).unwrap()
}

/// The lruvec of /a/b on node 0 with the given list sizes [pages].
fn set_sizes(s: &Sim, sizes: [u64; 4]) -> u32 {
    let mut mm = s.mm.borrow_mut();
    let lv = mm.lruvec_of(2, 0);
    mm.lruvecs[lv as usize].nr[..4].copy_from_slice(&sizes);
    lv
}

#[test]
fn get_scan_count_fract_matches_kernel_arithmetic() {
    let s = sim(true);
    let lv = set_sizes(&s, [1 << 20; 4]);
    let mut sc = ScanControl::new(32, Some(1), false);
    sc.anon_cost = 100;
    sc.file_cost = 300;
    let (nr, b) = s.mm.borrow().get_scan_count(lv, &mut sc);
    assert_eq!(b, ScanBalance::Fract);
    // total = 400; anon = 500, file = 700, total = 1200;
    // ap = 60 * 1201 / 501 = 143; fp = 140 * 1201 / 701 = 239; denominator 382.
    // size >> 12 = 256: anon 256 * 143 / 382 = 95, file 256 * 239 / 382 = 160.
    assert_eq!(nr, [95, 95, 160, 160]);
}

#[test]
fn get_scan_count_early_cases() {
    // No swap: file only.
    let s = sim(false);
    let lv = set_sizes(&s, [1 << 20; 4]);
    let mut sc = ScanControl::new(32, Some(1), false);
    let (nr, b) = s.mm.borrow().get_scan_count(lv, &mut sc);
    assert_eq!((nr, b), ([0, 0, 256, 256], ScanBalance::File));
    // Priority 0 with swap: equal pressure on everything.
    let s = sim(true);
    let lv = set_sizes(&s, [1000, 2000, 3000, 4000]);
    let mut sc = ScanControl::new(32, Some(1), false);
    sc.priority = 0;
    let (nr, b) = s.mm.borrow().get_scan_count(lv, &mut sc);
    assert_eq!((nr, b), ([1000, 2000, 3000, 4000], ScanBalance::Equal));
    // cgroup reclaim with swappiness 0: file only.
    s.mm.borrow_mut().memcgs[2].swappiness = 0;
    let mut sc = ScanControl::new(32, Some(1), false);
    sc.priority = 0;
    assert_eq!(
        s.mm.borrow().get_scan_count(lv, &mut sc).1,
        ScanBalance::File
    );
    // cache_trim_mode: file only.
    s.mm.borrow_mut().memcgs[2].swappiness = 60;
    let mut sc = ScanControl::new(32, Some(1), false);
    sc.cache_trim_mode = true;
    assert_eq!(
        s.mm.borrow().get_scan_count(lv, &mut sc).1,
        ScanBalance::File
    );
}

#[test]
fn get_scan_count_scales_by_memory_low() {
    let s = sim(true);
    let lv = set_sizes(&s, [800, 0, 0, 0]);
    {
        let mut mm = s.mm.borrow_mut();
        mm.memcgs[2].usage = 1000;
        mm.memcgs[2].elow = 500;
    }
    let mut sc = ScanControl::new(32, Some(1), false);
    sc.priority = 0;
    let (nr, _) = s.mm.borrow().get_scan_count(lv, &mut sc);
    // protection = low (memcg_low_reclaim unset): 800 - 800 * 500 / 1001 = 401.
    assert_eq!(nr[LRU_INACTIVE_ANON], 401);
    assert!(sc.memcg_low_skipped);
    // A tiny list still gets SWAP_CLUSTER_MAX.
    let lv = set_sizes(&s, [10, 0, 0, 0]);
    let mut sc = ScanControl::new(32, Some(1), false);
    sc.priority = 0;
    assert_eq!(s.mm.borrow().get_scan_count(lv, &mut sc).0[0], 32);
}

#[test]
fn lru_note_cost_weights_io_walks_ancestors_and_halves() {
    let s = sim(true);
    let lv = {
        let mut mm = s.mm.borrow_mut();
        // 400 pages on the leaf: after an rstat flush every level's hierarchical LRU
        // size is 400, so the halving threshold is 100.
        let lv = mm.lruvec_of(2, 0);
        mm.lruvecs[lv as usize].stat[NodeStat::NrInactiveFile as usize] = 400;
        mm.flush_stats(0);
        lv
    };
    let s2 = s.clone();
    s.e.spawn(1000, 0, async move {
        // cost = 2 IOs * 32 + 5 rotations = 69.
        s2.lru_note_cost(lv, true, 2, 5, Site::ShrinkLruvec).await;
        s2.lru_note_cost(lv, false, 0, 10, Site::ShrinkLruvec).await;
        // 69 + 69 + 10 = 148 > 100: both halve to 69 and 5.
        s2.lru_note_cost(lv, true, 2, 5, Site::ShrinkLruvec).await;
    });
    s.e.run_until(1_000_000, 1 << 20, &mut |_| true);
    let mm = s.mm.borrow();
    for m in [2u16, 1, 0] {
        let l = &mm.lruvecs[mm.lruvec_of(m, 0) as usize];
        assert_eq!((l.file_cost, l.anon_cost), (69, 5), "memcg {m}");
    }
    let sites = s.e.lock_stats();
    let n = |site: Site| {
        sites
            .iter()
            .find(|x| x.1 == site)
            .map_or(0, |x| x.2.acquisitions)
    };
    assert_eq!(n(Site::ShrinkLruvec), 3);
    assert_eq!(n(Site::LruNoteCost), 6, "two parent levels per call");
}

#[test]
fn refault_distance_decides_activation() {
    for swap in [false, true] {
        let s = sim(swap);
        let mut mm = s.mm.borrow_mut();
        let lv = mm.lruvec_of(2, 0) as usize;
        {
            let l = &mut mm.lruvecs[lv];
            l.nonresident_age = 10_000;
            l.stat_flushed[NodeStat::NrActiveFile as usize] = 300;
            l.stat_flushed[NodeStat::NrInactiveFile as usize] = 200;
            l.stat_flushed[NodeStat::NrActiveAnon as usize] = 1000;
            l.stat_flushed[NodeStat::NrInactiveAnon as usize] = 50;
        }
        // File refault: workingset = active file (+ both anon lists with swap).
        let file_ws = if swap { 300 + 1000 + 50 } else { 300 };
        let sh = |d: u64| pack_shadow(2, 0, 10_000 - d, false);
        assert!(mm.workingset_test_recent(sh(file_ws), true, 0));
        assert!(!mm.workingset_test_recent(sh(file_ws + 1), true, 0));
        // Anon refault: active file + inactive file (+ active anon with swap).
        let anon_ws = if swap { 300 + 200 + 1000 } else { 300 + 200 };
        assert!(mm.workingset_test_recent(sh(anon_ws), false, 0));
        assert!(!mm.workingset_test_recent(sh(anon_ws + 1), false, 0));
    }
}

#[test]
fn mglru_should_abort_scan_stops_root_reclaim_at_its_target_and_never_memcg_reclaim() {
    // lru_gen_shrink_lruvec's should_abort_scan(): memcg reclaim never aborts (fairness
    // within the subtree); root reclaim aborts once nr_reclaimed reaches
    // max(nr_to_reclaim, compact_gap(0) = 2); kswapd also once the zone is balanced.
    let s = sim(false);
    let mm = s.mm.borrow();
    let lv = mm.lruvec_of(2, 0);
    let at = |target: Option<u16>, reclaimed: u64| {
        let mut sc = ScanControl::new(32, target, false);
        sc.nr_reclaimed = reclaimed;
        mm.should_abort_scan(lv, &sc)
    };
    assert!(!at(None, 31) && at(None, 32));
    assert!(
        !at(Some(0), 31) && at(Some(0), 32),
        "the root memcg's reclaim is root reclaim"
    );
    assert!(
        !at(Some(2), 32) && !at(Some(2), 1_000),
        "memcg reclaim of /a/b goes on"
    );
    let mut sc = ScanControl::new(1, None, false);
    sc.nr_reclaimed = 1;
    assert!(
        !mm.should_abort_scan(lv, &sc),
        "at least compact_gap(0) = 2 pages"
    );
    sc.nr_reclaimed = 2;
    assert!(mm.should_abort_scan(lv, &sc));
}

#[test]
fn look_around_covers_a_batch_around_the_pte_inside_its_page_table() {
    use reclaimsim_core::mm::lru_gen::look_around_window;
    // lru_gen_look_around(): start = max(addr & PMD_MASK, vm_start), end = min(addr |
    // ~PMD_MASK, vm_end - 1) + 1 (512 PTEs a table), then MIN_LRU_BATCH (64) of them:
    // centred on the address, or the table's first or last 64 within 32 of either end.
    // The second table of a 2048-page area (PTEs 512..1024):
    assert_eq!(look_around_window(522, 0, 2048), Some((512, 576))); // 10 from its start
    assert_eq!(look_around_window(1012, 0, 2048), Some((960, 1024))); // 12 from its end
    assert_eq!(look_around_window(712, 0, 2048), Some((680, 744))); // centred
    assert_eq!(look_around_window(544, 0, 2048), Some((512, 576))); // 32 from the start
                                                                    // An area ending inside the table: 512..600 is 88 PTEs, more than a batch.
    assert_eq!(look_around_window(590, 0, 600), Some((536, 600)));
    // A table of fewer than 64 PTEs is taken whole; one of one PTE is not looked at.
    assert_eq!(look_around_window(520, 0, 540), Some((512, 540)));
    assert_eq!(look_around_window(512, 0, 513), None);
    assert_eq!(look_around_window(3, 0, 512), Some((0, 64)));
    // A VMA starting inside the table (a 14-page text mapping after a 600-page area) keeps
    // the window to itself, and the area's window stops where the text begins.
    assert_eq!(look_around_window(605, 600, 614), Some((600, 614)));
    assert_eq!(look_around_window(599, 0, 600), Some((536, 600)));
    // A text mapping at 2048 (an 8M area), 70 pages: the batch from its start.
    assert_eq!(look_around_window(2050, 2048, 2118), Some((2048, 2112)));
}

#[test]
fn an_mm_with_text_has_two_vmas_the_area_and_the_text_after_it() {
    use reclaimsim_core::mm::{MmStruct, TextMap};
    // find_vma(): a 600-page area at 0 alone is one VMA; with 14 pages of text mapped at
    // 600 the area ends where the text begins, and the text ends at 614.
    let mut m = MmStruct::new(600, 1, 0, 0);
    assert_eq!(m.vma_bounds(5), (0, 600));
    m.grow(614);
    m.text = Some(TextMap {
        file: 0,
        base: 600,
        pages: 14,
    });
    assert_eq!(m.vma_bounds(0), (0, 600));
    assert_eq!(m.vma_bounds(599), (0, 600));
    assert_eq!(m.vma_bounds(600), (600, 614));
    assert_eq!(m.vma_bounds(613), (600, 614));
}

/// /a/b's 32 inactive file folios (clean, unmapped, unreferenced; the first `locked` of
/// them locked, so shrink_folio_list keeps them) reclaimed by one shrink_lruvec of /a/b at
/// priority 0 on the kernel `kernel` (a [kernel] table's lines). Returns the lru_lock
/// acquisitions per call site and each level's file_cost (/a/b, /a, root).
fn putback_holds(kernel: &str, locked: usize) -> (Vec<(Site, u64)>, [u64; 3]) {
    putback_holds_of(kernel, locked, 0)
}

/// [`putback_holds`] of folios with the page flags `flags`.
fn putback_holds_of(kernel: &str, locked: usize, flags: u16) -> (Vec<(Site, u64)>, [u64; 3]) {
    use reclaimsim_core::mm::mm_types::PG_LOCKED;
    let t = format!(
        "duration = \"20s\"\n[machine]\ncpus = 2\nmemory_per_node = \"1G\"\n[kernel]\n{kernel}\n\
         [[cgroup]]\npath = \"/a\"\n[[cgroup]]\npath = \"/a/b\"\n[[workload]]\ntype = \"usemem\"\n\
         cgroup = \"/a/b\"\nsize = \"4K\"\nstart = \"10s\"\n"
    );
    let s = Sim::build(&Scenario::from_toml(&t).unwrap()).unwrap();
    let (_, pfns) = s.fixture_file_folios(2, 0, 32, flags);
    for &p in &pfns[..locked] {
        s.mm.borrow_mut().pages[p as usize].set(PG_LOCKED);
    }
    let lv = {
        let mut mm = s.mm.borrow_mut();
        // Every level's hierarchical LRU size reads 32: lru_note_cost halves above 8.
        mm.flush_stats(0);
        mm.lruvec_of(2, 0)
    };
    shrink_lruvec_at_priority_0(&s, lv);
    let mm = s.mm.borrow();
    let cost = [2u16, 1, 0].map(|m| mm.lruvecs[mm.lruvec_of(m, 0) as usize].file_cost);
    let sites =
        s.e.lock_stats()
            .iter()
            .map(|x| (x.1, x.2.acquisitions))
            .collect();
    (sites, cost)
}

/// The lru_lock holds of shrink_inactive_list's putback and lru_note_cost, per version.
/// Holds: isolation (shrink_inactive_list) in every version; the putback
/// (move_folios_to_lru) before 7.x always, in 7.x (which locks inside move_folios_to_lru)
/// only for a non-empty list, that is when folios were kept; then for the cost,
/// nr_pageout * 32 + (scanned - reclaimed):
/// - 6.1 and 6.12: lru_note_cost after the putback, one hold per level (3) whatever the
///   cost;
/// - 6.18 (lru_note_cost_unlock_irq): /a/b's level inside the putback hold; a cost of 0
///   ends there, else /a and the root in their own holds (2);
/// - 7.2 (7.3 without seed 000's vmstat_scan_cost; move_folios_to_lru_self_locking): the
///   lruvec's lock taken again in shrink_lruvec, even at 0, then as 6.18;
/// - 7.3: no cost hold at all.
#[test]
fn putback_and_lru_note_cost_take_each_versions_holds() {
    let n =
        |sites: &[(Site, u64)], site: Site| sites.iter().find(|x| x.0 == site).map_or(0, |x| x.1);
    let v72 = "version = \"7.3\"\nrules.vmstat_scan_cost = false";
    let cases = [
        // (kernel, kept, [MoveFoliosToLru, ShrinkLruvec, LruNoteCost] holds, file_cost
        // per level)
        ("version = \"6.1\"", 0, [1, 0, 3], [0; 3]),
        ("version = \"6.12\"", 0, [1, 0, 3], [0; 3]),
        ("version = \"6.18\"", 0, [1, 0, 0], [0; 3]),
        (v72, 0, [0, 1, 0], [0; 3]),
        ("version = \"7.3\"", 0, [0, 0, 0], [0; 3]),
        // 8 kept: 8 rotations of cost (none before 6.2's rotation_cost, 6.1), exactly the
        // halving threshold, so every level keeps 8.
        ("version = \"6.1\"", 8, [1, 0, 3], [0; 3]),
        ("version = \"6.12\"", 8, [1, 0, 3], [8; 3]),
        ("version = \"6.18\"", 8, [1, 0, 2], [8; 3]),
        (v72, 8, [1, 1, 2], [8; 3]),
        ("version = \"7.3\"", 8, [1, 0, 0], [0; 3]),
    ];
    for (kernel, locked, [putback, shrink_lruvec, note], cost) in cases {
        let (sites, got) = putback_holds(kernel, locked);
        let what = format!("{kernel:?} with {locked} kept: {sites:?}");
        assert_eq!(n(&sites, Site::ShrinkInactiveList), 1, "{what}");
        assert_eq!(n(&sites, Site::MoveFoliosToLru), putback, "{what}");
        assert_eq!(n(&sites, Site::ShrinkLruvec), shrink_lruvec, "{what}");
        assert_eq!(n(&sites, Site::LruNoteCost), note, "{what}");
        assert_eq!(got, cost, "{what}");
    }
}

/// shrink_active_list's holds: /a/b's 32 active file folios (no program text among them,
/// so none rotates and l_active stays empty) all deactivated by one call. Isolation and
/// one putback hold for both lists in 6.1 to 6.18 (6.1 and 6.12 note no cost without
/// rotations; 6.18's lru_note_cost_unlock_irq ends the hold at a cost of 0); 7.2 puts
/// back l_inactive in a hold of its own and takes the lock again for the cost (3); 7.3
/// has no cost hold.
#[test]
fn shrink_active_list_takes_each_versions_holds() {
    use reclaimsim_core::mm::mm_types::PG_ACTIVE;
    let v72 = "version = \"7.3\"\nrules.vmstat_scan_cost = false";
    for (kernel, holds) in [
        ("version = \"6.1\"", 2),
        ("version = \"6.12\"", 2),
        ("version = \"6.18\"", 2),
        (v72, 3),
        ("version = \"7.3\"", 2),
    ] {
        let (sites, _) = putback_holds_of(kernel, 0, PG_ACTIVE);
        let got: Vec<(Site, u64)> = sites
            .into_iter()
            .filter(|x| matches!(x.0, Site::ShrinkActiveList | Site::LruNoteCost))
            .collect();
        assert_eq!(got, vec![(Site::ShrinkActiveList, holds)], "{kernel:?}");
    }
}

#[test]
fn reclaiming_page_cache_takes_each_folio_off_nr_file_pages_once() {
    // __remove_mapping -> filemap_unaccount_folio: NR_FILE_PAGES - 1 on the folio's lruvec
    // (memcg-accounted) for each page-cache folio freed; the 32 clean, unmapped inactive
    // folios of /a/b all go at priority 0 (as putback_holds reclaims them), so /a/b's
    // NR_FILE_PAGES ends at 32 - pgsteal = 0, and nothing else moved it.
    let t = "duration = \"20s\"\n[machine]\ncpus = 2\nmemory_per_node = \"1G\"\n\
             [[cgroup]]\npath = \"/a\"\n[[cgroup]]\npath = \"/a/b\"\n[[workload]]\ntype = \"usemem\"\n\
             cgroup = \"/a/b\"\nsize = \"4K\"\nstart = \"10s\"\n";
    let s = Sim::build(&Scenario::from_toml(t).unwrap()).unwrap();
    s.fixture_file_folios(2, 0, 32, 0);
    let lv = {
        let mut mm = s.mm.borrow_mut();
        mm.flush_stats(0);
        mm.lruvec_of(2, 0)
    };
    let file_pages =
        |s: &Sim| s.mm.borrow().lruvecs[lv as usize].stat[NodeStat::NrFilePages as usize];
    assert_eq!(file_pages(&s), 32);
    shrink_lruvec_at_priority_0(&s, lv);
    let left = s.mm.borrow().lruvecs[lv as usize].stat[NodeStat::NrInactiveFile as usize];
    assert_eq!(left, 0, "every folio reclaimed");
    assert_eq!(file_pages(&s), 0);
}

/// One shrink_lruvec of 32 pages for memcg 2 at priority 0, with may_deactivate as
/// prepare_scan_control sets it when the inactive lists are low, run to its end.
fn shrink_lruvec_at_priority_0(s: &Rc<Sim>, lv: reclaimsim_core::mm::LruvecId) {
    let s2 = s.clone();
    s.e.spawn(1000, 0, async move {
        let mut sc = ScanControl::new(32, Some(2), false);
        sc.priority = 0;
        sc.may_deactivate = 3;
        s2.shrink_lruvec(lv, &mut sc).await;
    });
    s.e.run_until(1_000_000, 1 << 20, &mut |_| true);
}
