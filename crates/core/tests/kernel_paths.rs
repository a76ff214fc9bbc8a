//! One kernel path at a time, on hand-built lists (reclaimsim_core::fixture): each test
//! places folios, runs one function and checks the counters against the arithmetic of the
//! kernel function it models (derivations in the comments).

use reclaimsim_core::fixture::{run_probe, Mapped};
use reclaimsim_core::mm::mm_types::*;
use reclaimsim_core::mm::mmzone::*;
use reclaimsim_core::mm::vmscan::{ScanControl, DEACTIVATE_FILE, MEMCG_RECLAIM_MAY_SWAP};
use reclaimsim_core::mm::vmstat::NodeStat;
use reclaimsim_core::mm::vmstat::VmEvent;
use reclaimsim_core::sim::Sim;
use reclaimsim_core::Scenario;
use std::cell::RefCell;
use std::rc::Rc;

/// The memcg /a (id 1).
const A: u16 = 1;

/// A machine of one node of `mem`, `swap` of zram (or none), the cgroup /a, a workload
/// that never starts, and the periodic stats flush out of the way.
fn machine(mem: &str, swap: Option<&str>, extra: &str) -> Rc<Sim> {
    reclaimsim_core::fixture::one_node_machine(mem, swap, extra)
}

/// A file mapping of the fixture: VM_EXEC or not, by how many processes, young PTEs.
fn mapped(exec: bool, mappers: u32, young: bool) -> Mapped {
    Mapped {
        exec,
        mappers,
        young,
    }
}

fn event(s: &Sim, ev: VmEvent) -> u64 {
    s.mm.borrow().events[ev as usize]
}

fn memcg_event(s: &Sim, m: u16, ev: VmEvent) -> u64 {
    s.mm.borrow().memcgs[m as usize].vm_events[ev as usize]
}

#[test]
fn shrink_lruvec_nudges_once_toward_proportionality_then_stops() {
    let s = machine("1G", Some("1G"), "");
    s.fixture_anon_folios(A, 0, 4096, false, 0);
    s.fixture_file_folios(A, 0, 16384, PG_REFERENCED);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let reclaimed = Rc::new(std::cell::Cell::new(0));
    let r2 = reclaimed.clone();
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 4;
        s.shrink_lruvec(lv, &mut sc).await;
        r2.set(sc.nr_reclaimed);
    });
    // get_scan_count, SCAN_FRACT with no recorded cost: ap = 60 * 1 / 1 = 60,
    // fp = 140 * 1 / 1 = 140, denominator 200. Targets at priority 4:
    // anon (4096 >> 4) * 60 / 200 = 76, file (16384 >> 4) * 140 / 200 = 716.
    // Round 1 scans 32 of each and reclaims all 64 (unreferenced anon to zram, clean file):
    // the goal (32) is met. Left: anon 44, file 684; file > anon, so anon stops and
    // percentage = 44 * 100 / (76 + 1) = 57; file gets 716 * 43 / 100 - 32 = 275 more.
    // Round 2 scans 32 file; the next check finds anon at 0 and stops (v6.0+).
    // Before f53af4285d77 all 275 would have been scanned: 307 file in all.
    assert_eq!(event(&s, VmEvent::PgscanAnon), 32);
    assert_eq!(event(&s, VmEvent::PgscanFile), 64);
    assert_eq!(reclaimed.get(), 96);
    assert_eq!(memcg_event(&s, A, VmEvent::PgstealDirect), 96);
}

#[test]
fn anon_is_aged_when_swap_exists_even_if_it_is_full() {
    let s = machine("1G", Some("4K"), "");
    // The one swap slot is taken: no anon can be reclaimed, but it is still aged.
    s.mm.borrow_mut().add_to_swap_cache(0, 0).unwrap();
    s.fixture_anon_folios(A, 0, 100, true, PG_ACTIVE);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        s.shrink_lruvec(lv, &mut sc).await;
    });
    // No file and no free slot: get_scan_count scans nothing. inactive_is_low(anon):
    // 0 * 1 < 100, and can_age_anon_pages() holds (total_swap_pages > 0), so
    // shrink_active_list(SWAP_CLUSTER_MAX) deactivates 32 folios.
    assert_eq!(memcg_event(&s, A, VmEvent::Pgrefill), 32);
    assert_eq!(event(&s, VmEvent::Pgdeactivate), 32);
    let mm = s.mm.borrow();
    assert_eq!(mm.lruvecs[lv as usize].nr[LRU_INACTIVE_ANON], 32);
    assert_eq!(mm.lruvecs[lv as usize].nr[LRU_ACTIVE_ANON], 68);
}

#[test]
fn locked_folios_are_kept_without_counting_as_scanned() {
    let s = machine("1G", None, "");
    let (_, pfns) = s.fixture_file_folios(A, 0, 32, 0);
    for &p in pfns.iter().take(8) {
        s.mm.borrow_mut().pages[p as usize].set(PG_LOCKED);
    }
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let scanned = Rc::new(std::cell::Cell::new(0));
    let s2 = scanned.clone();
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
        s2.set(sc.nr_scanned);
    });
    // No swap: SCAN_FILE, all 32 at priority 0. isolate_lru_folios scans and takes all
    // 32 (pgscan), but shrink_folio_list counts nr_scanned after folio_trylock: the 8
    // locked ones are kept uncounted; the 24 others are clean and reclaimed.
    assert_eq!(event(&s, VmEvent::PgscanFile), 32);
    assert_eq!(scanned.get(), 24);
    assert_eq!(event(&s, VmEvent::PgstealFile), 24);
    assert_eq!(s.mm.borrow().lruvecs[lv as usize].nr[LRU_INACTIVE_FILE], 8);
}

#[test]
fn kswapd_counts_no_failure_when_the_node_was_balanced() {
    let s = machine("1G", None, "");
    run_probe(&s, 0, 0, move |s| async move {
        s.balance_pgdat(0).await;
    });
    assert_eq!(s.mm.borrow().nodes[0].kswapd_failures, 0);
    assert_eq!(event(&s, VmEvent::Pageoutrun), 1);
}

#[test]
fn kswapd_retries_once_without_cache_trim_mode_after_a_fruitless_run() {
    // 64 MiB: min_free_kbytes = sqrt(16 * 65536) = 1024 -> min 256 pages; delta =
    // max(64, 16384 * 10 / 10000) = 64: high = 384. 16100 folios leave 284 free.
    let s = machine("64M", None, "");
    let n = 16100u64;
    let (_, pfns) = s.fixture_file_folios(A, 0, n as u32, 0);
    for &p in &pfns {
        // Locked (reads in flight): scanned by isolation, never reclaimed.
        s.mm.borrow_mut().pages[p as usize].set(PG_LOCKED);
    }
    // The node's own kswapd would start on the unbalanced node too: keep it asleep as a
    // node given up on is, and run balance_pgdat once from the probe.
    s.mm.borrow_mut().nodes[0].kswapd_failures = 16;
    run_probe(&s, 0, 0, move |s| async move {
        s.balance_pgdat(0).await;
    });
    // Each pass of priority p (12 down to 1) scans n >> p (cache_trim_mode, then plain
    // SCAN_FILE: no swap): nothing is reclaimed and nr_scanned stays 0, so the priority
    // drops every pass. The run ends with cache_trim_mode failed and nothing reclaimed,
    // so it starts over once with no_cache_trim_mode: twice the sum.
    let once: u64 = (1..=12).map(|p| n >> p).sum();
    assert_eq!(event(&s, VmEvent::PgscanKswapd), 2 * once);
    assert_eq!(s.mm.borrow().nodes[0].kswapd_failures, 17);
}

#[test]
fn isolation_throttle_ends_when_isolation_drops_and_v1_limit_reclaim_skips_it() {
    use reclaimsim_core::mm::vmstat::NodeStat;
    const MS: u64 = 1_000_000;
    for version in [2, 1] {
        let s = machine("1G", None, &format!("cgroup_version = {version}"));
        s.fixture_file_folios(A, 0, 64, 0);
        let lv = s.mm.borrow().lruvec_of(A, 0);
        // 9 file folios isolated by others on a node with 64 inactive: 9 > 64 >> 3.
        s.mm.borrow_mut().lruvecs[lv as usize].mod_state(NodeStat::NrIsolatedFile, 9);
        // At 5 ms those are back, and a second reclaimer finds isolation under the limit.
        let s2 = s.clone();
        s.e.spawn(5 * MS, 1, async move {
            s2.mm.borrow_mut().lruvecs[lv as usize].mod_state(NodeStat::NrIsolatedFile, -9);
            let mut sc = ScanControl::new(32, Some(A), false);
            sc.priority = 0;
            s2.shrink_lruvec(lv, &mut sc).await;
        });
        let end = run_probe(&s, 0, 0, move |s| async move {
            let mut sc = ScanControl::new(32, Some(A), false);
            sc.priority = 0;
            s.shrink_lruvec(lv, &mut sc).await;
        });
        if version == 2 {
            // reclaim_throttle(ISOLATED) until wake_throttle_isolated at 5 ms, not HZ/50.
            assert!((5 * MS..6 * MS).contains(&end), "v2: ended at {end} ns");
        } else {
            // cgroup v1 limit reclaim: writeback_throttling_sane() is false, no throttle.
            assert!(end < MS, "v1: ended at {end} ns");
        }
    }
}

#[test]
fn kswapd_naps_and_counts_wmark_hits() {
    const MS: u64 = 1_000_000;
    // 64 MiB node: min 256, low 320, high 384 pages (see the cache_trim test).
    let s = machine("64M", None, "");
    run_probe(&s, 0, 10 * MS, move |s| async move {
        // kswapd started napping at 0 on a balanced node. Fill the node with folios it
        // cannot reclaim (locked) and wake it 10 ms into its 100 ms nap.
        let (_, pfns) = s.fixture_file_folios(A, 0, 16100, 0);
        for &p in &pfns {
            s.mm.borrow_mut().pages[p as usize].set(PG_LOCKED);
        }
        s.wakeup_kswapd(0);
        s.e.sleep(10_000 * MS).await;
    });
    // Woken early: one low-watermark hit. Each balance_pgdat fails (failures 1..16);
    // after runs 1..15 the node is unbalanced with failures < 16, so kswapd does not
    // nap: 15 high-watermark hits. After run 16 it naps, then sleeps for good.
    assert_eq!(event(&s, VmEvent::KswapdLowWmarkHitQuickly), 1);
    assert_eq!(event(&s, VmEvent::KswapdHighWmarkHitQuickly), 15);
    assert_eq!(event(&s, VmEvent::Pageoutrun), 16);
    assert_eq!(s.mm.borrow().nodes[0].kswapd_failures, 16);
}

#[test]
fn direct_reclaim_below_half_the_min_watermark_waits_for_kswapd() {
    // 64 MiB node: min 256 pages. Fill it to 100 free (<= 128), then a direct
    // reclaimer throttles (PGSCAN_DIRECT_THROTTLE) until kswapd, woken by it, brings
    // free pages back above 128; above that nobody is throttled.
    for (fill, throttled) in [(16384 - 100, 1), (16384 - 200, 0)] {
        let s = machine("64M", None, "");
        let steal_before = Rc::new(std::cell::Cell::new(u64::MAX));
        let sb = steal_before.clone();
        run_probe(&s, 0, 1_000_000, move |s| async move {
            s.fixture_file_folios(A, 0, fill, 0);
            s.try_to_free_pages(0).await;
            sb.set(s.mm.borrow().events[VmEvent::PgstealDirect as usize]);
        });
        assert_eq!(event(&s, VmEvent::PgscanDirectThrottle), throttled);
        if throttled == 1 {
            // It was let go once kswapd had brought free pages above min / 2 = 128.
            assert!(steal_before.get() < u64::MAX);
            assert!(event(&s, VmEvent::PgstealKswapd) >= 129 - 100);
        }
    }
}

#[test]
fn memory_high_reclaims_and_throttles_a_page_cache_reader() {
    // A reader of a 64 MiB file in /a with memory.high = 16 MiB (4096 pages): each read
    // that charges while /a is over high adds the charge batch (64) to the reader's debt,
    // paid on return from read() by reclaim_high (MEMCG_HIGH event, memcg reclaim).
    let t = r#"
duration = "2s"
[machine]
cpus = 2
memory_per_node = "1G"
[kernel]
memcg_flush_phase = "1.9s"
[[cgroup]]
path = "/a"
memory.high = "16M"
[[workload]]
type = "file_read"
cgroup = "/a"
files = ["64M"]
pattern = "seq"
passes = 1
"#;
    let s = Sim::build(&Scenario::from_toml(t).unwrap()).unwrap();
    s.e.run_until(2_000_000_000, 1 << 20, &mut |_| true);
    let mm = s.mm.borrow();
    let a = &mm.memcgs[A as usize];
    assert!(a.events[1] > 0, "memory.events high = {}", a.events[1]);
    assert!(a.vm_events[VmEvent::PgstealDirect as usize] > 0);
    // A charge batch of 64 that starts at or below high ends at most 64 above it, and
    // its debt is paid on return from that read.
    assert!(a.peak <= 4096 + 64, "memory.peak {} pages", a.peak);
}

#[test]
fn a_memory_high_debt_past_one_batch_is_paid_before_returning_to_user() {
    let s = machine("1G", None, "");
    s.fixture_file_folios(A, 0, 200, 0);
    s.mm.borrow_mut().memcgs[A as usize].high = 100;
    let events = Rc::new(std::cell::RefCell::new(Vec::new()));
    let ev = events.clone();
    run_probe(&s, 0, 0, move |s| async move {
        // Charges inside one system call: no return to user mode in between.
        for _ in 0..65 {
            assert!(s.try_charge_memcg(A, 1).await);
            ev.borrow_mut()
                .push(s.mm.borrow().memcgs[A as usize].events[1]);
        }
    });
    // Charge 1 takes a batch of 64 over high: debt 64, not more than MEMCG_CHARGE_BATCH.
    // Charges 2..64 come from the stock. Charge 65 takes another batch: debt 128 > 64,
    // so __mem_cgroup_handle_over_high runs right away (reclaim_high counts MEMCG_HIGH
    // once per pass, and passes repeat while reclaim makes progress).
    let ev = events.borrow();
    assert_eq!(ev[63], 0);
    assert!(ev[64] >= 1);
}

#[test]
fn folio_mark_accessed_activates_off_lru_folios_only_in_the_local_lru_add_batch() {
    let s = machine("1G", None, "");
    let (_, pfns) = s.fixture_file_folios(A, 0, 3, 0);
    let mut mm = s.mm.borrow_mut();
    // Take the three off their list: one into CPU 0's lru_add batch, one into CPU 1's,
    // one isolated by a reclaimer.
    for &p in &pfns {
        let lv = mm.folio_lruvec(p);
        let reclaimsim_core::mm::Mm { pages, lruvecs, .. } = &mut *mm;
        reclaimsim_core::mm::mm_inline::lruvec_del_folio_untracked(
            pages,
            &mut lruvecs[lv as usize],
            p,
        );
        pages[p as usize].clear(PG_LRU);
    }
    let (local, remote, isolated) = (pfns[0], pfns[1], pfns[2]);
    mm.pages[local as usize].set(PG_INBATCH);
    mm.batches[0].lru_add.push(local);
    mm.pages[remote as usize].set(PG_INBATCH);
    mm.batches[1].lru_add.push(remote);
    mm.pages[isolated as usize].set(PG_ISOLATED);
    for &p in &pfns {
        // Two accesses from CPU 0: referenced, then "activate".
        assert!(!mm.folio_mark_accessed(p, 0));
        assert!(!mm.folio_mark_accessed(p, 0));
        // Either way PG_referenced is consumed by the second access.
        assert!(!mm.pages[p as usize].test(PG_REFERENCED));
    }
    assert!(mm.pages[local as usize].test(PG_ACTIVE));
    assert!(!mm.pages[remote as usize].test(PG_ACTIVE));
    assert!(!mm.pages[isolated as usize].test(PG_ACTIVE));
}

#[test]
fn rereading_the_folio_just_read_is_not_a_new_access() {
    let s = machine("1G", None, "");
    let (file, pfns) = s.fixture_file_folios(A, 0, 8, 0);
    run_probe(&s, 0, 0, move |s| async move {
        // pos_same_folio: the second read of page 5 starts in the folio the first one
        // ended in, so only the first marks it accessed (PG_referenced). Reading page 6
        // and then page 5 again is a second access: activation.
        for page in [5, 5] {
            s.filemap_read(file, page, A, 0).await;
        }
        let p5 = s.mm.borrow().pages[pfns[5] as usize];
        assert!(p5.test(PG_REFERENCED) && !p5.test(PG_INBATCH));
        for page in [6, 5] {
            s.filemap_read(file, page, A, 0).await;
        }
        let p5 = s.mm.borrow().pages[pfns[5] as usize];
        assert!(!p5.test(PG_REFERENCED) && p5.test(PG_INBATCH));
    });
}

#[test]
fn a_page_read_in_is_referenced_and_activated_when_read_again() {
    // filemap_read() of an uncached page reads it in, then marks it accessed:
    // PG_referenced. Read again after another page (not the folio the last read ended
    // in), folio_mark_accessed finds it referenced and inactive: folio_activate, and
    // PG_referenced cleared. The page read once stays inactive and referenced.
    let s = machine("1G", None, "");
    let file = {
        let mut mm = s.mm.borrow_mut();
        mm.files.push(reclaimsim_core::mm::File::new(2, A, None));
        (mm.files.len() - 1) as u32
    };
    run_probe(&s, 0, 0, move |s| async move {
        for page in [0, 1, 0] {
            s.filemap_read(file, page, A, 0).await;
        }
        s.lru_add_drain().await;
    });
    let mm = s.mm.borrow();
    let flags = |i: usize| {
        let pfn = reclaimsim_core::mm::filemap::entry_page(mm.files[file as usize].cache[i]);
        mm.pages[pfn.expect("cached") as usize].flags & (PG_ACTIVE | PG_REFERENCED)
    };
    assert_eq!(flags(0), PG_ACTIVE);
    assert_eq!(flags(1), PG_REFERENCED);
    // Both folios were still in this CPU's lru_add batch: __lru_cache_activate_folio sets
    // PG_active there, and only lru_activate (a folio on an LRU) counts PGACTIVATE.
    assert_eq!(event(&s, VmEvent::Pgactivate), 0);
}

#[test]
fn oom_badness_counts_page_tables() {
    let s = machine("1G", None, "");
    let (p1, _) = s.fixture_anon_folios(A, 0, 100, true, 0);
    let (p2, _) = s.fixture_anon_folios(A, 0, 99, true, 0);
    {
        // Two PTE pages, charged as the fault path charges them.
        let mut mm = s.mm.borrow_mut();
        mm.mms[p2 as usize].pte_tables = vec![true; 2];
        mm.page_counter_try_charge(A, 2).unwrap();
        let m = &mut mm.memcgs[A as usize];
        m.kmem_pages += 2;
        m.pagetables_bytes += 2 * 4096;
    }
    run_probe(&s, 0, 0, move |s| async move {
        assert!(s.mutex_trylock_oom());
        assert!(s.out_of_memory(None).await);
    });
    // oom_badness: 100 + 0 + 0 against 99 + 0 + 2 page-table pages.
    let mm = s.mm.borrow();
    assert!(mm.mms[p1 as usize].alive);
    assert!(!mm.mms[p2 as usize].alive);
}

#[test]
fn a_memcg_oom_kills_once_for_two_tasks_that_hit_the_limit_together() {
    let s = machine("1G", None, "");
    let (p1, _) = s.fixture_anon_folios(A, 0, 100, true, 0);
    let (p2, _) = s.fixture_anon_folios(A, 0, 0, true, 0);
    s.mm.borrow_mut().memcgs[A as usize].max = 100;
    let ok = Rc::new(std::cell::Cell::new(0));
    let ok2 = ok.clone();
    let s2 = s.clone();
    // Two charges at once in a full memcg whose memory cannot be reclaimed (no swap).
    s.e.spawn(0, 1, async move {
        if s2.try_charge_memcg(A, 1).await {
            ok2.set(ok2.get() + 1);
        }
    });
    let ok3 = ok.clone();
    run_probe(&s, 0, 0, move |s| async move {
        if s.try_charge_memcg(A, 1).await {
            ok3.set(ok3.get() + 1);
        }
        s.e.sleep(1_000_000_000).await;
    });
    // The first OOM kills p1 (100 pages); the second waits on oom_lock, then finds
    // room (mem_cgroup_margin) or p1 still exiting, and retries its charge instead.
    let mm = s.mm.borrow();
    assert_eq!(mm.events[VmEvent::OomKill as usize], 1);
    assert!(!mm.mms[p1 as usize].alive && mm.mms[p2 as usize].alive);
    assert_eq!(ok.get(), 2);
}

#[test]
fn the_allocator_keeps_invoking_the_oom_killer_while_it_makes_progress() {
    // 64 MiB node, min 256 pages. 16000 locked file folios and five processes of 50
    // unreclaimable anon pages (no swap) leave 134 free. Each kill frees 50: 184, 234,
    // 284 > 256, so the allocation succeeds after the third kill.
    let s = machine("64M", None, "");
    let (_, pfns) = s.fixture_file_folios(A, 0, 16000, 0);
    for &p in &pfns {
        s.mm.borrow_mut().pages[p as usize].set(PG_LOCKED);
    }
    for _ in 0..5 {
        s.fixture_anon_folios(A, 0, 50, true, 0);
    }
    let got = Rc::new(std::cell::Cell::new(false));
    let g = got.clone();
    run_probe(&s, 0, 0, move |s| async move {
        // __alloc_pages(): below the low watermark the fast path fails; the slow path
        // succeeds after the kills.
        s.e.sync().await;
        g.set(s.alloc_page_fast(0).is_none() && s.alloc_pages_slowpath(0).await.is_some());
    });
    assert!(got.get());
    assert_eq!(event(&s, VmEvent::OomKill), 3);
}

#[test]
fn memory_swap_max_limits_swap_out_and_anon_scanning() {
    let s = machine("1G", Some("1G"), "");
    s.fixture_anon_folios(A, 0, 32, false, 0);
    s.mm.borrow_mut().memcgs[A as usize].swap_max = 10;
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        sc.swappiness = Some(201); // SWAPPINESS_ANON_ONLY: scan anon alone
        s.shrink_lruvec(lv, &mut sc).await;
    });
    // 32 unreferenced anon folios: the first 10 get a slot charged under swap.max and go
    // out (zram: freed at once); the other 22 find no room under the limit
    // (mem_cgroup_try_charge_swap fails) and are activated.
    {
        let mm = s.mm.borrow();
        assert_eq!(mm.events[VmEvent::Pswpout as usize], 10);
        assert_eq!(mm.memcgs[A as usize].swap_hier, 10);
        assert_eq!(
            mm.memcgs[A as usize].vm_events[VmEvent::Pgactivate as usize],
            22
        );
        // Now full: no swap space for /a, and its swap counts as full (10 * 2 >= 10).
        assert_eq!(mm.mem_cgroup_get_nr_swap_pages(A), 0);
        assert!(mm.mem_cgroup_swap_full(A));
        assert!(!mm.mem_cgroup_swap_full(0));
    }
    // get_scan_count then scans file only for /a: can_reclaim_anon_pages is false.
    let mut sc = ScanControl::new(32, Some(A), false);
    let (_, balance) = s.mm.borrow().get_scan_count(lv, &mut sc);
    assert_eq!(balance, reclaimsim_core::mm::vmscan::ScanBalance::File);
}

/// 6400 file pages of /a, one file, all reclaimed: 100 leaf nodes holding shadow entries
/// only; the statistics flushed after the reclaim (count_shadow_nodes reads them) and the
/// shrinker's tracepoints counted from then on (`tracepoints = true`). Returns the file
/// and /a's lruvec.
fn shadow_nodes_only(s: &Rc<Sim>) -> (u32, reclaimsim_core::mm::LruvecId) {
    let (file, _) = s.fixture_file_folios(A, 0, 6400, 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(6400, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    s.mm.borrow_mut().flush_stats(0);
    s.mm.borrow_mut().trace_hist = Some(Default::default());
    (file, lv)
}

#[test]
fn the_shadow_node_shrinker_frees_nodes_of_shadows_beyond_the_limit() {
    use reclaimsim_core::mm::vmstat::NodeStat;
    let s = machine("1G", None, "");
    // 100 full leaf nodes (6400 pages) of one file, all reclaimed: 100 nodes holding
    // shadow entries only. /a then has no LRU pages and 103 xarray nodes of slab (100
    // leaves, 2 above them, 1 root: 59,328 bytes = 14 pages), so count_shadow_nodes
    // allows 14 >> 3 = 1 node and 99 are freeable.
    let (file, lv) = shadow_nodes_only(&s);
    assert_eq!(s.mm.borrow().memcgs[A as usize].nr_shadow_nodes, 100);
    assert_eq!(s.mm.borrow_mut().count_shadow_nodes(A, 0), 99);
    let nodereclaim =
        |s: &Sim| s.mm.borrow().lruvecs[lv as usize].stat[NodeStat::WorkingsetNodereclaim as usize];
    // do_shrink_slab with seeks = 0 at priority 0: delta = 99 / 2 = 49 per call, plus
    // what was deferred. Call 1 and 2: 49, then 98 to scan, below both a batch (128) and
    // the freeable count: nothing scanned, all deferred. Call 3: 98 + 49 = 147: one
    // batch of 128 walks the list and frees all 100 nodes.
    for (call, freed) in [(1, 0), (2, 0), (3, 100)] {
        run_probe(&s, 0, 0, move |s| async move {
            s.shrink_slab(A, 0, 0);
        });
        assert_eq!(nodereclaim(&s), freed, "after call {call}");
    }
    assert_eq!(s.mm.borrow().memcgs[A as usize].nr_shadow_nodes, 0);
    // do_shrink_slab's two tracepoints over the three calls, from the arithmetic above:
    // start (nr taken, freeable, delta, total_scan) = (0, 99, 49, 49), (49, 99, 49, 98),
    // (98, 99, 49, 147); end (nr taken, deferred left, freed, scan not done) =
    // (0, 49, 0, 49), (49, 98, 0, 98), (98, 98 + 49 - 128 = 19, 100, 147 - 128 = 19).
    let table = s.mm.borrow().trace_hist.as_ref().unwrap().report();
    assert_eq!(
        table,
        vec![
            serde_json::json!({"event": "mm_shrink_slab_start", "shrink": "scan_shadow_nodes",
                "nid": 0, "priority": 0, "hitcount": 3, "nr_objects_to_shrink": 147,
                "cache_items": 297, "delta": 147, "total_scan": 294}),
            serde_json::json!({"event": "mm_shrink_slab_end", "shrink": "scan_shadow_nodes",
                "nid": 0, "hitcount": 3, "unused_scan": 147, "new_scan": 166, "retval": 100,
                "total_scan": 166}),
        ]
    );
    // The refault of a page whose shadow went with its node is not detected.
    run_probe(&s, 0, 0, move |s| async move {
        s.filemap_read(file, 7, A, 0).await;
    });
    let mm = s.mm.borrow();
    assert_eq!(
        mm.lruvecs[lv as usize].stat[NodeStat::WorkingsetRefaultFile as usize],
        0
    );
}

#[test]
fn the_shadow_shrinker_defers_what_it_does_not_scan_scaled_by_priority_and_capped() {
    use reclaimsim_core::mm::vmstat::NodeStat;
    // As above: 100 nodes of shadows only, 99 of them freeable.
    let s = machine("1G", None, "");
    let (_, lv) = shadow_nodes_only(&s);
    let nodereclaim =
        |s: &Sim| s.mm.borrow().lruvecs[lv as usize].stat[NodeStat::WorkingsetNodereclaim as usize];
    // At DEF_PRIORITY the deferred work counts for nr >> 12 = 0: each call's scan is its
    // delta, 49, below a batch and the freeable count, so nothing is scanned and the
    // deferred work grows by 49 a call, 49, 98, 147, 196, until capped at twice the
    // freeable count: min(245, 198).
    for (call, deferred) in [(1, 49), (2, 98), (3, 147), (4, 196), (5, 198)] {
        run_probe(&s, 0, 0, move |s| async move {
            s.shrink_slab(A, 0, 12);
        });
        assert_eq!(nodereclaim(&s), 0, "call {call}");
        assert_eq!(
            s.mm.borrow().memcgs[A as usize].shadow_deferred,
            deferred,
            "after call {call}"
        );
    }
    // At priority 1: 198 >> 1 + 49 = 148 to scan: one batch of 128 frees the 100 nodes
    // (each a list operation of the shrinker's time), 20 left undone, and the deferred
    // work is 198 + 49 - 128 = 119.
    let spent = Rc::new(std::cell::Cell::new(0));
    let sp = spent.clone();
    run_probe(&s, 0, 0, move |s| async move {
        let t0 = s.e.now();
        s.shrink_slab(A, 0, 1);
        sp.set(s.e.now() - t0);
    });
    assert_eq!(nodereclaim(&s), 100);
    assert_eq!(spent.get(), 100 * s.c.list_op);
    assert_eq!(s.mm.borrow().memcgs[A as usize].shadow_deferred, 119);
    let table = s.mm.borrow().trace_hist.as_ref().unwrap().report();
    let row = |event: &str, priority: Option<i64>| {
        table
            .iter()
            .find(|r| r["event"] == event && priority.is_none_or(|p| r["priority"] == p))
            .cloned()
            .unwrap()
    };
    let start = row("mm_shrink_slab_start", Some(1));
    assert_eq!(
        (
            start["hitcount"].as_u64(),
            start["nr_objects_to_shrink"].as_u64(),
            start["total_scan"].as_u64()
        ),
        (Some(1), Some(198), Some(148))
    );
    let start12 = row("mm_shrink_slab_start", Some(12));
    assert_eq!(start12["total_scan"].as_u64(), Some(5 * 49));
    let end = row("mm_shrink_slab_end", None);
    assert_eq!(
        (
            end["hitcount"].as_u64(),
            end["retval"].as_u64(),
            end["new_scan"].as_u64()
        ),
        (Some(6), Some(100), Some(49 + 98 + 147 + 196 + 198 + 119))
    );
}

/// 6400 file pages of /a at `version`, the memcg statistics flushed with them resident,
/// all 6400 reclaimed, then three shadow-shrinker calls at priority 0 at time `at`: the
/// WORKINGSET_NODERECLAIM after them.
fn shadow_nodes_freed_after_a_flush(version: &str, at: u64) -> i64 {
    use reclaimsim_core::mm::vmstat::NodeStat;
    let s = machine("1G", None, &format!("version = \"{version}\""));
    s.fixture_file_folios(A, 0, 6400, 0);
    s.mm.borrow_mut().flush_stats(0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(6400, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    assert_eq!(s.mm.borrow().memcgs[A as usize].nr_shadow_nodes, 100);
    for _ in 0..3 {
        run_probe(&s, 0, at, move |s| async move {
            s.shrink_slab(A, 0, 0);
        });
    }
    let mm = s.mm.borrow();
    mm.lruvecs[lv as usize].stat[NodeStat::WorkingsetNodereclaim as usize]
}

#[test]
fn the_shadow_shrinker_weighs_the_nodes_against_the_flushed_lru_sizes() {
    // The last flush saw /a's 6400 pages. count_shadow_nodes reads the flushed local LRU
    // sizes (lruvec_page_state_local): 6400 pages and 14 of slab allow 6414 >> 3 = 801
    // nodes, so none of the 100 is freeable, though the lists are empty now. On 6.12 and
    // 6.18 its flush is ratelimited: at once after the reclaim nothing is flushed.
    for v in ["6.12", "6.18"] {
        assert_eq!(shadow_nodes_freed_after_a_flush(v, 0), 0, "{v}");
    }
    // 6.1 sums the per-CPU counters, the lists' sizes now: 0 pages and 14 of slab allow
    // one node, and the three calls free all 100 as in the test above (deferred,
    // deferred, one batch).
    assert_eq!(shadow_nodes_freed_after_a_flush("6.1", 0), 100);
    // 5 s later the periodic flush is late (2 * FLUSH_TIME), and 6.18 flushes too.
    assert_eq!(shadow_nodes_freed_after_a_flush("6.18", 5_000_000_000), 100);
}

/// 6400 file pages of /a, one file (100 leaves, 2 nodes above them and the root: 103
/// xarray nodes), all reclaimed at `version`, then three reclaim passes of `target` at
/// priority 0, 5 s later (statistics flushed on every version). Returns the passes'
/// nr_reclaimed, the slab pages their shadow shrinker freed, /a's slab bytes left and the
/// radix_tree_node slabs left.
fn slab_credit(version: &str, target: u16) -> (u64, u64, u64, u64) {
    let s = machine("1G", None, &format!("version = \"{version}\""));
    s.fixture_file_folios(A, 0, 6400, 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(6400, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    let out = Rc::new(std::cell::Cell::new((0, 0)));
    let o = out.clone();
    run_probe(&s, 0, 5_000_000_000, move |s| async move {
        let mut sc = ScanControl::new(32, Some(target), false);
        sc.priority = 0;
        let mut emptied = 0;
        for _ in 0..3 {
            s.shrink_node(0, &mut sc).await;
            emptied += s.mm.borrow().memcgs[A as usize].shadow_nodes.is_empty() as u64;
        }
        o.set((sc.nr_reclaimed, emptied));
    });
    let (reclaimed, emptied) = out.get();
    assert!(emptied > 0, "the shrinker did not empty the list");
    let mm = s.mm.borrow();
    let c = &mm.radix_tree_node_cachep;
    (
        reclaimed,
        c.nr_objects(),
        mm.memcgs[A as usize].slab_reclaimable_bytes,
        c.nr_slabs(),
    )
}

#[test]
fn slab_pages_the_shadow_shrinker_frees_count_as_reclaimed_by_version() {
    // The 103 nodes were allocated in index order, 14 to a 2-page slab: slab 0 holds leaf
    // 0, the first upper node, the root and leaves 1-11; slabs 1-3 leaves 12-53; slab 4
    // leaves 54-64, the second upper node (allocated with leaf 64) and leaves 65-66;
    // slabs 5-6 leaves 67-94; slab 7, the cpu slab, leaves 95-99. The shrinker frees
    // the leaves oldest first (0..99), each upper node with its last leaf, the root last.
    // Slabs 1, 2 and 3 empty with 2, 3 and 4 partial slabs on the node (fewer than
    // min_partial, 5): kept. Slabs 5 and 6 empty with 6: discarded, 4 pages. Leaf 99 frees
    // the second upper node, emptying slab 4 among 6 partial slabs: discarded, 2 pages.
    // The root empties slab 0 among 4: kept. The cpu slab stays. 6 pages, 5 slabs left.
    // 6.1 credits them to every reclaim; from 6.5 only root reclaim counts them. Nothing
    // is left on the LRU, so the slab pages are all that is reclaimed.
    for (version, target, credited) in [
        ("6.1", A, 6),
        ("6.12", A, 0),
        ("6.12", 0, 6),
        ("6.18", 0, 6),
    ] {
        let (reclaimed, objects, slab_bytes, slabs) = slab_credit(version, target);
        assert_eq!(
            (reclaimed, objects, slab_bytes, slabs),
            (credited, 0, 0, 5),
            "{version} target {target}"
        );
    }
}

/// 6400 anon pages of /a swapped out to zram at `version`, then the shadow shrinker run
/// twice for /a and twice for the root at priority 0, then page 7 swapped back in. Returns
/// the root's shadow nodes before, its WORKINGSET_NODERECLAIM after each call, and /a's
/// WORKINGSET_REFAULT_ANON and pswpin after the swap-in.
fn swap_shadows_at(version: &str) -> (u64, Vec<i64>, i64, u64) {
    use reclaimsim_core::mm::vmstat::NodeStat;
    let s = machine("1G", Some("1G"), &format!("version = \"{version}\""));
    let (mmid, _) = s.fixture_anon_folios(A, 0, 6400, false, 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(6400, Some(A), false);
        sc.priority = 0;
        sc.swappiness = Some(201); // SWAPPINESS_ANON_ONLY
        s.shrink_lruvec(lv, &mut sc).await;
    });
    assert_eq!(event(&s, VmEvent::Pswpout), 6400);
    let before = s.mm.borrow().memcgs[0].nr_shadow_nodes;
    let root_lv = s.mm.borrow().lruvec_of(0, 0);
    let mut nodereclaim = Vec::new();
    for m in [A, A, 0, 0] {
        run_probe(&s, 0, 0, move |s| async move {
            s.shrink_slab(m, 0, 0);
        });
        let mm = s.mm.borrow();
        nodereclaim
            .push(mm.lruvecs[root_lv as usize].stat[NodeStat::WorkingsetNodereclaim as usize]);
    }
    run_probe(&s, 0, 0, move |s| async move {
        s.handle_mm_fault(mmid, 7, false).await;
    });
    let mm = s.mm.borrow();
    let refaults = mm.lruvecs[lv as usize].stat[NodeStat::WorkingsetRefaultAnon as usize];
    (
        before,
        nodereclaim,
        refaults,
        mm.events[VmEvent::Pswpin as usize],
    )
}

#[test]
fn the_root_shadow_shrinker_frees_swap_cache_leaves_on_6_12_only() {
    // 6.12: slots 0..6399 hold shadows only, 100 leaves of 64 on the root's list (the swap
    // cache's nodes are no memcg's). /a's shrinker never sees them. The root has no LRU
    // pages or slab of its own, so all 100 are freeable: do_shrink_slab with seeks = 0
    // takes delta = 50 at the first root call (below a batch and the freeable count:
    // deferred), 50 + 50 = 100 at the second, which scans and frees all 100. The page
    // swapped back in finds no shadow: a major fault, no refault.
    let (before, nodereclaim, refaults, pswpin) = swap_shadows_at("6.12");
    assert_eq!(before, 100);
    assert_eq!(nodereclaim, vec![0, 0, 0, 100]);
    assert_eq!((refaults, pswpin), (0, 1));
    // 6.1 (no update callback on the swap cache) and 6.18 (the swap table): the swap
    // shadows are on no list, nothing is freed and the swap-in is a refault.
    for v in ["6.1", "6.18"] {
        let (before, nodereclaim, refaults, pswpin) = swap_shadows_at(v);
        assert_eq!(before, 0, "{v}");
        assert_eq!(nodereclaim, vec![0, 0, 0, 0], "{v}");
        assert_eq!((refaults, pswpin), (1, 1), "{v}");
    }
}

/// Four CPUs, the memcgs /a (1) and /b (2), and a workload that starts too late to
/// matter.
const TWO_MEMCGS: &str = r#"
duration = "10s"
[machine]
cpus = 4
memory_per_node = "1G"
[[cgroup]]
path = "/a"
[[cgroup]]
path = "/b"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "4K"
start = "9s"
"#;

#[test]
fn a_ratelimited_flush_flushes_the_target_subtree_only() {
    use reclaimsim_core::mm::vmstat::NodeStat;
    let s = Sim::build(&Scenario::from_toml(TWO_MEMCGS).unwrap()).unwrap();
    let (a, b) = (1u16, 2u16);
    let mut mm = s.mm.borrow_mut();
    let (la, lb) = (mm.lruvec_of(a, 0) as usize, mm.lruvec_of(b, 0) as usize);
    mm.lruvecs[la].mod_state(NodeStat::NrInactiveFile, 10);
    mm.lruvecs[lb].mod_state(NodeStat::NrInactiveFile, 20);
    // 300 updates in /a: above MEMCG_CHARGE_BATCH * 4 CPUs = 256; none in /b.
    mm.count_memcg_event(a, VmEvent::Pgfault, 300);
    let now = 5_000_000_000; // the periodic flush is more than 2 * FLUSH_TIME late
    mm.flush_stats_ratelimited(b, now);
    assert_eq!(
        mm.lruvecs[lb].page_state(NodeStat::NrInactiveFile),
        0,
        "/b: nothing to flush"
    );
    mm.flush_stats_ratelimited(a, now);
    assert_eq!(mm.lruvecs[la].page_state(NodeStat::NrInactiveFile), 10);
    // Outside /a's subtree nothing changed, and the root was not flushed.
    assert_eq!(mm.lruvecs[lb].page_state(NodeStat::NrInactiveFile), 0);
    let root = mm.lruvec_of(0, 0) as usize;
    assert_eq!(mm.lruvecs[root].page_state(NodeStat::NrInactiveFile), 0);
    assert_eq!(mm.last_flush, 0);
    // A flush of the root (the target of global reclaim) takes everything.
    mm.flush_stats_ratelimited(0, now);
    assert_eq!(mm.lruvecs[root].page_state(NodeStat::NrInactiveFile), 30);
    assert_eq!(mm.last_flush, now);
}

#[test]
fn a_6_1_flush_counts_the_machines_updates_and_flushes_every_memcg() {
    use reclaimsim_core::mm::vmstat::NodeStat;
    // Rule memcg_flush_global_threshold (6.1): stats_flush_threshold counts the updates of
    // every memcg, and __mem_cgroup_flush_stats flushes from the root. /a holds 10
    // inactive file pages and /b 20 (unflushed); the periodic flush is late.
    let flush = |global: bool, in_a: u64, in_b: u64, ask: u16| -> [u64; 3] {
        let s = Sim::build(&Scenario::from_toml(TWO_MEMCGS).unwrap()).unwrap();
        let mut mm = s.mm.borrow_mut();
        mm.rules.memcg_flush_global_threshold = global;
        let (a, b) = (A, A + 1);
        let (la, lb) = (mm.lruvec_of(a, 0) as usize, mm.lruvec_of(b, 0) as usize);
        mm.lruvecs[la].mod_state(NodeStat::NrInactiveFile, 10);
        mm.lruvecs[lb].mod_state(NodeStat::NrInactiveFile, 20);
        mm.count_memcg_event(a, VmEvent::Pgfault, in_a);
        mm.count_memcg_event(b, VmEvent::Pgfault, in_b);
        mm.flush_stats_ratelimited(ask, 5_000_000_000);
        let root = mm.lruvec_of(0, 0) as usize;
        [la, lb, root].map(|l| mm.lruvecs[l].page_state(NodeStat::NrInactiveFile))
    };
    // 150 updates in each: neither subtree is above MEMCG_CHARGE_BATCH * 4 CPUs = 256, the
    // machine's 300 are. A flush asked for /b: 6.12 flushes nothing, 6.1 everything.
    assert_eq!(flush(false, 150, 150, A + 1), [0, 0, 0]);
    assert_eq!(flush(true, 150, 150, A + 1), [10, 20, 30]);
    // 300 in /a alone: a flush asked for /a flushes /a's subtree only, or (6.1) all.
    assert_eq!(flush(false, 300, 0, A), [10, 0, 0]);
    assert_eq!(flush(true, 300, 0, A), [10, 20, 30]);
    // 200 in all: under the threshold either way.
    assert_eq!(flush(true, 100, 100, A), [0, 0, 0]);
}

#[test]
fn the_lru_gen_debugfs_file_lists_each_generation() {
    let s = machine("1G", Some("1G"), "lru = \"mglru\"");
    // lru_gen_init_lruvec: max_seq = 3, min_seq = [0, 0]. Page cache that is not in the
    // workingset joins the oldest generation, max_seq + 1 - MAX_NR_GENS = 0; anon not in
    // the swap cache joins max_seq + 1 - MIN_NR_GENS = 2.
    s.fixture_file_folios(A, 0, 300, 0);
    s.fixture_anon_folios(A, 0, 100, false, 0);
    let mm = s.mm.borrow();
    let rows: Vec<_> = mm
        .lru_gen_debugfs(5_000_000)
        .iter()
        .map(|r| mm.lru_gen_row_json(r))
        .collect();
    let a: Vec<Vec<u64>> = rows
        .iter()
        .filter(|r| r[1] == "/a")
        .map(|r| {
            let r = r.as_array().unwrap();
            vec![
                r[0].as_u64().unwrap(),
                r[3].as_u64().unwrap(),
                r[4].as_u64().unwrap(),
                r[5].as_u64().unwrap(),
                r[6].as_u64().unwrap(),
            ]
        })
        .collect();
    // (memcg id, seq, age_ms, nr_anon, nr_file): /a is memcg id 2 (the root is 1); every
    // generation was born at 0, 5 ms ago.
    assert_eq!(
        a,
        vec![
            vec![2, 0, 5, 0, 300],
            vec![2, 1, 5, 0, 0],
            vec![2, 2, 5, 100, 0],
            vec![2, 3, 5, 0, 0]
        ]
    );
    // The report's section, written row by row, is the JSON of the same rows: the file
    // at the end, and each sample's rows led by its time.
    let mut samples = reclaimsim_core::mm::lru_gen::LruGenSamples::default();
    samples.sample(1_000_000, &mm);
    samples.sample(2_000_000, &mm);
    let timed = |t: u64| -> Vec<serde_json::Value> {
        let at = mm.lru_gen_debugfs(t);
        at.iter()
            .map(|r| {
                let mut v = vec![serde_json::json!(t)];
                v.extend(mm.lru_gen_row_json(r).as_array().unwrap().iter().cloned());
                serde_json::Value::Array(v)
            })
            .collect()
    };
    let end: Vec<_> = mm
        .lru_gen_debugfs(5_000_000)
        .iter()
        .map(|r| mm.lru_gen_row_json(r))
        .collect();
    let sampled = [timed(1_000_000), timed(2_000_000)].concat();
    let want = serde_json::json!({
        "columns": ["memcg_id", "cgroup", "node", "seq", "age_ms", "nr_anon", "nr_file"],
        "rows": end,
        "timeseries": {
            "columns": ["t_ns", "memcg_id", "cgroup", "node", "seq", "age_ms", "nr_anon", "nr_file"],
            "rows": sampled,
        },
    });
    let got = serde_json::to_string(&samples.report(&mm, 5_000_000)).unwrap();
    assert_eq!(got, want.to_string());
    // With the classic LRU there is no such file, and the section is null.
    let c = machine("1G", None, "");
    assert!(c.mm.borrow().lru_gen_debugfs(0).is_empty());
    let mut none = reclaimsim_core::mm::lru_gen::LruGenSamples::default();
    assert_eq!(
        serde_json::to_string(&none.report(&c.mm.borrow(), 0)).unwrap(),
        "null"
    );
}

/// A machine whose TLB shootdown costs 1 ms (`tlb_flush_ipi`): each shows in the virtual
/// time of the task that sends it, and nothing else costs as much.
fn ipi_machine() -> Rc<Sim> {
    machine("1G", Some("1G"), "\n[costs]\ntlb_flush_ipi = 1000000\n")
}

/// A thread of process `mmid` that stays alive on `cpu` (sleeping), as the other thread of
/// a two-threaded workload is, and `tag` the owner the engine records for it.
fn other_thread(s: &Rc<Sim>, mmid: u32, cpu: u32, tag: u32) {
    let s2 = s.clone();
    let id = s.e.spawn_tagged(0, cpu, tag, async move {
        loop {
            s2.e.sleep(1_000_000_000).await;
        }
    });
    s.mm.borrow_mut().mms[mmid as usize].tasks.push(id);
}

/// The virtual time limit reclaim of 32 unreferenced, dirty anonymous folios of one
/// process takes on CPU 0, with the process's other thread on `peer` (None: no other
/// thread; Some((cpu, tag))).
fn reclaim_time(peer: Option<(u32, u32)>) -> (u64, u64) {
    let s = ipi_machine();
    let (mmid, _) = s.fixture_anon_folios(A, 0, 32, false, 0);
    if let Some((cpu, tag)) = peer {
        other_thread(&s, mmid, cpu, if tag == u32::MAX { mmid } else { tag });
    }
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let t = run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    (t, event(&s, VmEvent::Pswpout))
}

#[test]
fn swapping_out_a_folio_of_a_process_running_elsewhere_costs_one_shootdown_each() {
    // Priority 0 scans all 32 inactive anon folios; none is young, so each goes to swap:
    // try_to_unmap defers its flush (another CPU runs the mm), and the dirty folio's
    // pageout needs it done first (try_to_unmap_flush_dirty): 32 shootdowns, and nothing
    // left for the batch flush at the end of shrink_folio_list.
    let (alone, out_alone) = reclaim_time(None);
    let (shared, out_shared) = reclaim_time(Some((1, u32::MAX)));
    assert_eq!((out_alone, out_shared), (32, 32));
    assert_eq!(shared - alone, 32 * 1_000_000);
    // The other thread on the reclaiming CPU itself: a local flush, in pte_unmap.
    let (same_cpu, _) = reclaim_time(Some((0, u32::MAX)));
    assert_eq!(same_cpu, alone);
    // A task of another process on CPU 1 (an engine id listed but owned by another mm, as
    // a reused id would be) runs nothing of this mm.
    let (other_mm, _) = reclaim_time(Some((1, 12345)));
    assert_eq!(other_mm, alone);
}

/// When the other thread of a process, sleeping in 1 s steps on CPU 1, wakes (its first
/// two wakes), after limit reclaim on CPU 0 swapped out 32 dirty anonymous folios of the
/// process at time 0, with a shootdown costing its target `target_ns`.
fn peer_wakes_after_reclaim(target_ns: u64) -> Vec<u64> {
    let costs = format!("\n[costs]\ntlb_flush_ipi = 1000000\ntlb_flush_ipi_target = {target_ns}\n");
    let s = machine("1G", Some("1G"), &costs);
    let (mmid, _) = s.fixture_anon_folios(A, 0, 32, false, 0);
    let wakes = Rc::new(RefCell::new(Vec::new()));
    let (s2, w2) = (s.clone(), wakes.clone());
    let id = s.e.spawn_tagged(0, 1, mmid, async move {
        loop {
            s2.e.sleep(1_000_000_000).await;
            w2.borrow_mut().push(s2.e.now());
        }
    });
    s.mm.borrow_mut().mms[mmid as usize].tasks.push(id);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    assert_eq!(event(&s, VmEvent::Pswpout), 32);
    // Let the peer wake twice (a probe that does nothing, at 2.5 s).
    run_probe(&s, 0, 2_500_000_000, |_| async {});
    let w = wakes.borrow().clone();
    w
}

#[test]
fn each_shootdown_takes_tlb_flush_ipi_target_from_the_thread_it_interrupts() {
    const S: u64 = 1_000_000_000;
    // Without a handler cost the peer wakes on time.
    assert_eq!(peer_wakes_after_reclaim(0), vec![S, 2 * S]);
    // With 3 ms per shootdown received: the 32 swap-outs' shootdowns (one each, before
    // each pageout) delay its first wake by 96 ms, and the next one sleeps 1 s from there.
    let shift = 32 * 3_000_000;
    assert_eq!(
        peer_wakes_after_reclaim(3_000_000),
        vec![S + shift, 2 * S + shift]
    );
}

#[test]
fn zapping_a_range_flushes_once_when_another_cpu_runs_the_mm() {
    // The time of a first zap of 16 anon pages, and of a second zap of the same range.
    let zap_times = |peer: bool| {
        let s = ipi_machine();
        let (mmid, _) = s.fixture_anon_folios(A, 0, 16, true, 0);
        if peer {
            other_thread(&s, mmid, 1, mmid);
        }
        let first = run_probe(&s, 0, 0, move |s| async move {
            s.zap_pte_range(mmid, 0, 16).await;
        });
        let at = first + 1_000_000_000;
        let second = run_probe(&s, 0, at, move |s| async move {
            // Zapped again: no present PTE is cleared, so nothing is flushed.
            s.zap_pte_range(mmid, 0, 16).await;
        });
        (first, second - at)
    };
    // tlb_finish_mmu flushes the 16 cleared PTEs in one shootdown; the second zap none.
    let ((p1, p2), (a1, a2)) = (zap_times(true), zap_times(false));
    assert_eq!((p1 - a1, p2 - a2), (1_000_000, 0));
}

#[test]
fn seed_000_folded_costs_halve_once_above_a_quarter_of_the_lru() {
    // With vmstat_scan_cost, prepare_scan_control folds the cost counters' deltas (none
    // here) into anon_cost and file_cost, then halves both when their sum exceeds a
    // quarter of the lruvec's pages: 1000 + 600 > 100 / 4, so 500 and 300. Reclaim itself
    // only bumps counters in this mode, so nothing else moves them.
    let s = machine("1G", Some("1G"), "\n[variants]\nvmstat_scan_cost = true\n");
    s.fixture_anon_folios(A, 0, 100, false, 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    {
        let mut mm = s.mm.borrow_mut();
        mm.lruvecs[lv as usize].anon_cost = 1000;
        mm.lruvecs[lv as usize].file_cost = 600;
    }
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        s.shrink_node(0, &mut sc).await;
    });
    let mm = s.mm.borrow();
    let l = &mm.lruvecs[lv as usize];
    assert_eq!((l.anon_cost, l.file_cost), (500, 300));
}

/// Two passes of limit reclaim over 32 unreferenced dirty anonymous folios on a disk swap
/// device whose writes take 1 ms: (pgsteal_anon, pgactivate, when the second pass ended).
fn second_pass_over_writeback(cgroup_version: u32) -> (u64, u64, u64) {
    let extra = format!(
        "cgroup_version = {cgroup_version}\n[machine.swap]\nsize = \"1G\"\ndevice = \"ssd\"\n\
         [costs]\nssd_write_latency = 1000000\nssd_write_interval = 1000\n"
    );
    let s = machine("1G", None, &extra);
    s.fixture_anon_folios(A, 0, 32, false, 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let end = run_probe(&s, 0, 0, move |s| async move {
        for _ in 0..2 {
            let mut sc = ScanControl::new(32, Some(A), false);
            sc.priority = 0;
            s.shrink_lruvec(lv, &mut sc).await;
        }
    });
    (
        event(&s, VmEvent::PgstealAnon),
        event(&s, VmEvent::Pgactivate),
        end,
    )
}

#[test]
fn v1_limit_reclaim_waits_for_the_writeback_it_started_and_v2_activates() {
    const MS: u64 = 1_000_000;
    // Pass 1 writes all 32 out (pageout marks each PG_reclaim; an asynchronous write keeps
    // it, under writeback, back on the inactive list): nothing freed yet. Pass 2, well
    // within the 1 ms the writes take, meets each under writeback with PG_reclaim.
    // cgroup v1 (writeback_throttling_sane() false): case 3, wait, then free all 32; the
    // last write ends at 1 ms + 31 intervals of 1 us after the first.
    let (stolen, activated, end) = second_pass_over_writeback(1);
    assert_eq!((stolen, activated), (32, 0));
    assert!(end >= MS + 31_000, "v1: ended at {end} ns");
    // cgroup v2: case 2, each is activated and nothing is waited for.
    let (stolen, activated, end) = second_pass_over_writeback(2);
    assert_eq!((stolen, activated), (0, 32));
    assert!(end < MS, "v2: ended at {end} ns");
}

#[test]
fn plugged_swap_writes_reach_the_device_after_putback_so_every_one_rotates() {
    // 40 unreferenced dirty anonymous folios, one limit reclaim pass at priority 0 on an
    // SSD whose writes take 1 ns, each folio costing 10 us of shrink_folio_list (so the
    // bio completions, 1 ns after submission, get to run while the pass goes on).
    // shrink_lruvec plugs: the first chunk's 32 writes wait in the plug until the 33rd is
    // added (during the second chunk, after the first chunk's putback), the last 8 until
    // blk_finish_plug. So each write completes with its folio back on the inactive list,
    // and folio_end_writeback rotates all 40 (pgrotated). Unplugged, a write can complete
    // while its folio is still isolated (the completion context runs when the pass yields),
    // and that folio does not rotate.
    let extra = "[machine.swap]\nsize = \"1G\"\ndevice = \"ssd\"\n\
                 [costs]\nssd_write_latency = 1\nssd_write_interval = 1\nshrink_folio = 10000\n";
    let s = machine("1G", None, extra);
    s.fixture_anon_folios(A, 0, 40, false, 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(64, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
        assert!(sc.plug.is_none(), "blk_finish_plug ends the plug");
        // Let the completions run, then drain this CPU's lru_move_tail batch (it moves and
        // counts the rotations 31 at a time).
        s.e.sleep(1_000_000).await;
        s.lru_add_drain().await;
    });
    assert_eq!(event(&s, VmEvent::Pswpout), 40);
    assert_eq!(event(&s, VmEvent::Pgrotated), 40);
}

#[test]
fn a_plug_flushed_into_a_full_device_queue_sleeps_per_request() {
    // The same 40 folios, writes of 1 ms of device service each and a device queue of 2
    // requests. Submitting a plug's writes, the reclaimer sleeps in submit_bio whenever
    // the queue is full: request k (0-based) starts service at k ms after the first and
    // may be queued once the request two ahead of it started, at (k - 1) ms. The 40th is
    // queued at 38 ms after the first flush, which comes within the first millisecond.
    let extra = "[machine.swap]\nsize = \"1G\"\ndevice = \"ssd\"\n\
                 [costs]\nssd_write_latency = 1\nssd_write_interval = 1000000\n";
    let s = machine("1G", None, extra);
    s.mm.borrow_mut().swap.as_mut().unwrap().dev.queue_depth = 2;
    s.fixture_anon_folios(A, 0, 40, false, 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let end = run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(64, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    const MS: u64 = 1_000_000;
    assert!((38 * MS..39 * MS).contains(&end), "ended at {end} ns");
    assert_eq!(event(&s, VmEvent::Pswpout), 40);
}

#[test]
fn shrink_lruvec_inside_a_plug_leaves_its_writes_to_the_outer_plug() {
    // blk_start_plug inside a plug does nothing and its blk_finish_plug submits nothing:
    // 16 folios written out by shrink_lruvec stay in the caller's plug (fewer than the 32
    // that would flush it) until the caller finishes it.
    let extra = "[machine.swap]\nsize = \"1G\"\ndevice = \"ssd\"\n";
    let s = machine("1G", None, extra);
    s.fixture_anon_folios(A, 0, 16, false, 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        let outer = s.blk_start_plug(&mut sc);
        assert!(outer);
        s.shrink_lruvec(lv, &mut sc).await;
        assert_eq!(sc.plug.as_ref().map(Vec::len), Some(16));
        s.blk_finish_plug(&mut sc, outer).await;
        assert_eq!(sc.plug, None);
    });
    assert_eq!(event(&s, VmEvent::Pswpout), 16);
}

#[test]
fn a_young_text_folio_is_activated_at_once_and_a_plain_mapped_one_gets_one_more_trip() {
    // folio_check_references() on a folio with one young PTE and no PG_referenced: a
    // VM_EXEC file folio is activated at once; any other gets PG_referenced and is kept on
    // the inactive list (FOLIOREF_KEEP), to be activated if it is used again.
    let s = machine("1G", None, "");
    let (_, text_mm, text) = s.fixture_mapped_file_folios(A, 0, 16, mapped(true, 1, true), 0);
    let (_, _, plain) = s.fixture_mapped_file_folios(A, 0, 16, mapped(false, 1, true), 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    // No swap: SCAN_FILE, the 32 inactive file folios at priority 0, one chunk.
    assert_eq!(event(&s, VmEvent::PgscanFile), 32);
    assert_eq!(event(&s, VmEvent::PgstealFile), 0);
    assert_eq!(event(&s, VmEvent::Pgactivate), 16);
    let mm = s.mm.borrow();
    assert_eq!(mm.lruvecs[lv as usize].nr[LRU_ACTIVE_FILE], 16);
    assert_eq!(mm.lruvecs[lv as usize].nr[LRU_INACTIVE_FILE], 16);
    assert!(text.iter().all(|&p| mm.pages[p as usize].test(PG_ACTIVE)));
    assert!(plain
        .iter()
        .all(|&p| mm.pages[p as usize].flags & (PG_ACTIVE | PG_REFERENCED) == PG_REFERENCED));
    // The rmap walk cleared the young bits it found.
    let base = reclaimsim_core::fixture::MAPPED_FILE_BASE as usize;
    assert!(mm.mms[text_mm[0] as usize].ptes[base..]
        .iter()
        .all(|&v| pte::present(v) && v & pte::YOUNG == 0));
}

#[test]
fn a_file_folio_two_processes_map_is_referenced_twice_and_unmapped_from_both() {
    // folio_referenced() counts each young PTE: two mappings of a folio make
    // referenced_ptes = 2, which activates even a non-executable folio. An unreferenced
    // folio mapped twice is unmapped from both processes (try_to_unmap walks every VMA)
    // and freed; NR_FILE_MAPPED drops by one per PTE.
    let s = machine("1G", None, "");
    let (_, _, hot) = s.fixture_mapped_file_folios(A, 0, 8, mapped(false, 2, true), 0);
    let (_, cold_mms, _) = s.fixture_mapped_file_folios(A, 0, 8, mapped(false, 2, false), 0);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let mapped = |s: &Sim| s.mm.borrow().lruvecs[lv as usize].stat[NodeStat::NrFileMapped as usize];
    assert_eq!(mapped(&s), 32);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    assert_eq!(event(&s, VmEvent::PgscanFile), 16);
    assert_eq!(event(&s, VmEvent::Pgactivate), 8);
    assert_eq!(event(&s, VmEvent::PgstealFile), 8);
    assert_eq!(mapped(&s), 16);
    let mm = s.mm.borrow();
    assert!(hot.iter().all(|&p| mm.pages[p as usize].test(PG_ACTIVE)));
    for m in cold_mms {
        assert!(mm.mms[m as usize].ptes.iter().all(|&v| v == 0));
    }
}

#[test]
fn shrink_active_list_keeps_referenced_text_active_and_counts_it_rotated() {
    // shrink_active_list(): a referenced VM_EXEC file folio goes back on the active list
    // (nr_rotated); a referenced plain mapped folio and an unreferenced text folio are
    // deactivated. lru_note_cost(lruvec, file, 0, nr_rotated) adds 8 to file_cost
    // (cost = 32 * 0 + 8) on the memcg's lruvec and its parent's, then halves both costs
    // since 8 > lrusize / 4 = 24 / 4: file_cost 4 on each.
    let s = machine("1G", None, "");
    let (_, _, hot) = s.fixture_mapped_file_folios(A, 0, 8, mapped(true, 1, true), PG_ACTIVE);
    s.fixture_mapped_file_folios(A, 0, 8, mapped(false, 1, true), PG_ACTIVE);
    s.fixture_mapped_file_folios(A, 0, 8, mapped(true, 1, false), PG_ACTIVE);
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let root = s.mm.borrow().lruvec_of(0, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        sc.may_deactivate = DEACTIVATE_FILE;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    // SCAN_FILE at priority 0: the 24 active file folios in one chunk.
    assert_eq!(memcg_event(&s, A, VmEvent::Pgrefill), 24);
    assert_eq!(event(&s, VmEvent::Pgdeactivate), 16);
    let mm = s.mm.borrow();
    assert_eq!(mm.lruvecs[lv as usize].nr[LRU_ACTIVE_FILE], 8);
    assert_eq!(mm.lruvecs[lv as usize].nr[LRU_INACTIVE_FILE], 16);
    assert!(hot
        .iter()
        .all(|&p| mm.pages[p as usize].flags & (PG_ACTIVE | PG_WORKINGSET) == PG_ACTIVE));
    assert_eq!(mm.lruvecs[lv as usize].file_cost, 4);
    assert_eq!(mm.lruvecs[root as usize].file_cost, 4);
}

/// Limit reclaim of 32 pages from /a whose 64 anonymous folios are all active while the
/// last statistics flush saw them inactive, with `text` young text folios on its active
/// file list. Returns (pgdeactivate, pgsteal, active anon left).
fn stale_flush_limit_reclaim(text: u32) -> (u64, u64, u64) {
    let s = machine("1G", Some("1G"), "");
    s.fixture_anon_folios(A, 0, 64, false, PG_ACTIVE);
    if text > 0 {
        s.fixture_mapped_file_folios(A, 0, text, mapped(true, 1, true), PG_ACTIVE);
    }
    let lv = s.mm.borrow().lruvec_of(A, 0);
    {
        let mut mm = s.mm.borrow_mut();
        let f = &mut mm.lruvecs[lv as usize].stat_flushed;
        f[NodeStat::NrInactiveAnon as usize] = 64;
        f[NodeStat::NrActiveAnon as usize] = 0;
    }
    run_probe(&s, 0, 0, move |s| async move {
        s.try_to_free_mem_cgroup_pages(A, 32, MEMCG_RECLAIM_MAY_SWAP, None)
            .await;
    });
    let active = s.mm.borrow().lruvecs[lv as usize].nr[LRU_ACTIVE_ANON];
    (
        event(&s, VmEvent::Pgdeactivate),
        memcg_event(&s, A, VmEvent::PgstealDirect),
        active,
    )
}

#[test]
fn text_on_the_file_list_lets_limit_reclaim_force_deactivation_past_stale_statistics() {
    // inactive_is_low() reads the flushed sizes (inactive 64, active 0): no anon
    // deactivation, and the refault test finds nothing new. shrink_lruvec's loop runs only
    // while inactive anon or a file list has a target; the lists' real sizes give
    // inactive anon 0. Without file folios no pass reaches the active anon list, nothing
    // sets skipped_deactivate, and do_try_to_free_pages gives up with nothing done (the
    // charge then fails: an OOM kill).
    assert_eq!(stale_flush_limit_reclaim(0), (0, 0, 64));
    // With 3 text folios, do_try_to_free_pages makes three passes from priority 12 (the
    // first two scan nothing above priority 0, where every target has a 3 >> p of 0 or a
    // fraction of it that rounds to 0):
    // 1. At priority 0 (SCAN_EQUAL) the active file target is 3, so the loop runs:
    //    shrink_list(active anon) is skipped (skipped_deactivate), and the young text
    //    rotates (inactive file 0 < active 3: file deactivation allowed).
    // 2. Nothing reclaimed: the memcg_full_walk retry. At priority 0 the text, not touched
    //    since, is deactivated (3).
    // 3. Still nothing: the force_deactivate retry. At priority 0 one chunk of 32 active
    //    anon folios is deactivated, and the 3 text folios, now inactive and unreferenced,
    //    are reclaimed: 3 > 0 ends the call, and the 32 inactive anon folios are there for
    //    try_charge_memcg's next round.
    assert_eq!(stale_flush_limit_reclaim(3), (35, 3, 32));
}

/// 32 clean inactive file folios, the 8 oldest queued on CPU 0's lru_activate batch (a
/// second read's folio_activate); then `isolate` them from the tail as shrink_inactive_list
/// does, drain the batch while they are off the list, and put them back. `batch_clears` is
/// rule lru_batch_clears_pg_lru. Returns (taken, PGACTIVATE after the drain, the queued
/// folios still held by a batch after it, active file folios after the putback, lru_lock
/// acquisitions of the drain).
fn isolate_while_queued(batch_clears: bool) -> (u64, u64, usize, u64, u64) {
    let rule = format!("rules = {{ lru_batch_clears_pg_lru = {batch_clears} }}");
    let s = machine("1G", None, &rule);
    let (_, pfns) = s.fixture_file_folios(A, 0, 32, 0);
    let queued: Vec<_> = pfns[..8].to_vec();
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let out = Rc::new(RefCell::new((0, 0, 0, 0, 0)));
    let o2 = out.clone();
    run_probe(&s, 0, 0, move |s| async move {
        for &p in &queued {
            s.folio_activate(p).await;
        }
        let mut list = Vec::new();
        let (taken, _) =
            s.mm.borrow_mut()
                .isolate_lru_folios(32, lv, &mut list, LRU_INACTIVE_FILE);
        let d0 = reclaimsim_core::fixture::lru_add_drain_acquisitions(&s);
        s.lru_add_drain().await;
        let drain_locks = reclaimsim_core::fixture::lru_add_drain_acquisitions(&s) - d0;
        let held = {
            let mm = s.mm.borrow();
            queued
                .iter()
                .filter(|&&p| mm.pages[p as usize].test(PG_INBATCH))
                .count()
        };
        let activated = event(&s, VmEvent::Pgactivate);
        let mut dead = Vec::new();
        s.mm.borrow_mut().move_folios_to_lru(lv, &list, &mut dead);
        assert!(dead.is_empty(), "every folio is still in the page cache");
        let active = s.mm.borrow().lruvecs[lv as usize].nr[LRU_ACTIVE_FILE];
        *o2.borrow_mut() = (taken, activated, held, active, drain_locks);
    });
    let r = *out.borrow();
    r
}

#[test]
fn reclaim_may_isolate_a_folio_queued_for_activation_and_the_drain_then_skips_it() {
    // Every modeled version (6.1, 6.12.95, 6.18, 7.x): folio_activate leaves PG_lru set,
    // so isolate_lru_folios takes all 32; lru_activate's folio_test_clear_lru fails on the
    // 8 isolated ones (nothing activated) and folios_put drops the batch's references; the
    // putback puts all 32 on the inactive list. The drain skips them before taking the
    // lru_lock (folio_batch_move_lru tests PG_lru first): no acquisition.
    assert_eq!(isolate_while_queued(false), (32, 0, 0, 0, 0));
    // 6.11-6.16: the batch cleared PG_lru, isolation leaves the 8 on the list (24 taken)
    // and the drain activates them under one acquisition (one lruvec).
    assert_eq!(isolate_while_queued(true), (24, 8, 0, 8, 1));
}

/// shrink_lruvec at priority 0 on CPU 0 over 32 clean inactive file folios, the 8 oldest
/// queued for activation on CPU 1 (shrink_inactive_list's lru_add_drain drains CPU 0's
/// batches only); then CPU 1 drains. Returns (sc.nr_scanned, PGSTEAL_FILE, PGACTIVATE,
/// active file folios).
fn reclaim_with_queued_folios(batch_clears: bool) -> (u64, u64, u64, u64) {
    let rule = format!("rules = {{ lru_batch_clears_pg_lru = {batch_clears} }}");
    let s = machine("1G", None, &rule);
    let (_, pfns) = s.fixture_file_folios(A, 0, 32, 0);
    reclaim_queued(&s, pfns, LRU_ACTIVE_FILE, VmEvent::PgstealFile)
}

/// [`reclaim_with_queued_folios`] on `pfns` of `s`, counting `steal` and the folios on
/// `active` at the end.
fn reclaim_queued(
    s: &Rc<Sim>,
    pfns: Vec<u32>,
    active: usize,
    steal: VmEvent,
) -> (u64, u64, u64, u64) {
    let queued: Vec<_> = pfns[..8].to_vec();
    let lv = s.mm.borrow().lruvec_of(A, 0);
    let t = run_probe(s, 1, 0, move |s| async move {
        for &p in &queued {
            s.folio_activate(p).await;
        }
    });
    let scanned = Rc::new(std::cell::Cell::new(0));
    let s2 = scanned.clone();
    let t = run_probe(s, 0, t, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
        s2.set(sc.nr_scanned);
    });
    run_probe(s, 1, t, |s| async move { s.lru_add_drain().await });
    let active = s.mm.borrow().lruvecs[lv as usize].nr[active];
    (
        scanned.get(),
        event(s, steal),
        event(s, VmEvent::Pgactivate),
        active,
    )
}

#[test]
fn a_folio_isolated_while_queued_cannot_be_freed_for_the_batch_reference() {
    // Every modeled version: the 8 queued folios are isolated with the rest (nr_scanned
    // 32) but __remove_mapping's refcount freeze fails on the batch's reference: 24 freed,
    // 8 put back, where the drain finds PG_lru again and activates them.
    assert_eq!(reclaim_with_queued_folios(false), (32, 24, 8, 8));
    // 6.11-6.16: never isolated (nr_scanned 24); the same 24 freed and 8 activated.
    assert_eq!(reclaim_with_queued_folios(true), (24, 24, 8, 8));
}

#[test]
fn an_anon_folio_isolated_while_queued_is_unmapped_but_not_written() {
    // 32 dirty anon folios with old PTEs on zram. Every modeled version: all 32 isolated,
    // each gets a swap slot and is unmapped; pageout's is_page_cache_freeable() fails on
    // the 8 queued ones (PAGE_KEEP): 24 written and freed (PSWPOUT 24), 8 back on the list
    // in the swap cache, which CPU 1's drain then activates.
    let run = |batch_clears: bool| {
        let rule = format!("rules = {{ lru_batch_clears_pg_lru = {batch_clears} }}");
        let s = machine("1G", Some("64M"), &rule);
        let (_, pfns) = s.fixture_anon_folios(A, 0, 32, false, 0);
        let queued = pfns[..8].to_vec();
        let r = reclaim_queued(&s, pfns, LRU_ACTIVE_ANON, VmEvent::PgstealAnon);
        let mm = s.mm.borrow();
        let cached = queued
            .iter()
            .filter(|&&p| {
                let pg = mm.pages[p as usize];
                pg.test(PG_SWAPCACHE) && pg.test(PG_OWNED) && !mm.folio_mapped(p)
            })
            .count();
        (r, event(&s, VmEvent::Pswpout), cached)
    };
    assert_eq!(run(false), ((32, 24, 8, 8), 24, 8));
    // 6.11-6.16: the 8 are never isolated (still mapped, no slot); the same 24 go.
    assert_eq!(run(true), ((24, 24, 8, 8), 24, 0));
}

#[test]
fn a_folio_can_be_queued_for_activation_twice_unless_the_batch_clears_pg_lru() {
    // folio_activate takes any inactive folio with PG_lru: every modeled version queues
    // it again (a second batch reference); the drain's second lru_activate finds it
    // active and does nothing, so PGACTIVATE counts once and both references go. In
    // 6.11-6.16 the first queueing cleared PG_lru and the second is refused.
    let run = |batch_clears: bool| {
        let rule = format!("rules = {{ lru_batch_clears_pg_lru = {batch_clears} }}");
        let s = machine("1G", None, &rule);
        let (_, pfns) = s.fixture_file_folios(A, 0, 1, 0);
        let p = pfns[0];
        let out = Rc::new(RefCell::new((0, 0, 0, false)));
        let o2 = out.clone();
        run_probe(&s, 0, 0, move |s| async move {
            s.folio_activate(p).await;
            s.folio_activate(p).await;
            let (queued, refs) = {
                let mm = s.mm.borrow();
                (mm.batches[0].lru_activate.len(), mm.folio_batch_refs(p))
            };
            s.lru_add_drain().await;
            let mm = s.mm.borrow();
            *o2.borrow_mut() = (
                queued,
                refs,
                mm.folio_batch_refs(p),
                mm.pages[p as usize].test(PG_ACTIVE),
            );
        });
        let r = *out.borrow();
        (r, event(&s, VmEvent::Pgactivate))
    };
    assert_eq!(run(false), ((2, 2, 0, true), 1));
    assert_eq!(run(true), ((1, 1, 0, true), 1));
}

#[test]
fn only_an_unlocked_clean_folio_on_the_lru_is_queued_to_rotate() {
    // folio_rotate_reclaimable: not a locked, dirty or unevictable folio, nor one off the
    // LRU; the others go to the lru_move_tail batch.
    let s = machine("1G", None, "");
    let (_, pfns) = s.fixture_file_folios(A, 0, 4, 0);
    {
        let mut mm = s.mm.borrow_mut();
        mm.pages[pfns[0] as usize].set(PG_LOCKED);
        mm.pages[pfns[1] as usize].set(PG_DIRTY);
        mm.pages[pfns[2] as usize].set(PG_UNEVICTABLE);
    }
    let queued = Rc::new(RefCell::new(Vec::new()));
    let q2 = queued.clone();
    run_probe(&s, 0, 0, move |s| async move {
        for &p in &pfns {
            s.folio_rotate_reclaimable(p).await;
        }
        *q2.borrow_mut() = s.mm.borrow().batches[0].lru_move_tail.clone();
    });
    assert_eq!(queued.borrow().len(), 1);
}

/// Page `index` of a new 8-page program text charged to /a, mapped by one new process at
/// MAPPED_FILE_BASE, none of it cached; `shadow`, if any, left in its page-cache slot.
/// Faults `index` in and returns the folio with the lruvec's max_seq and the file
/// min_seq at the fault (MGLRU on).
fn text_fault(shadow: bool, index: u32) -> (Rc<Sim>, u32, u64, u64) {
    use reclaimsim_core::fixture::MAPPED_FILE_BASE;
    use reclaimsim_core::mm::lru_gen::{LRU_GEN_FILE, LRU_REFS_WIDTH};
    use reclaimsim_core::mm::{File, MmStruct};
    let s = machine("64M", None, "lru = \"mglru\"");
    let (file, mmid, lv) = {
        let mut mm = s.mm.borrow_mut();
        mm.files.push(File::text(8, A, MAPPED_FILE_BASE));
        let file = (mm.files.len() - 1) as u32;
        let mmid = mm.mm_alloc(MmStruct::new(MAPPED_FILE_BASE as usize, A, 0, 0));
        mm.map_text(mmid, file);
        (file, mmid, mm.lruvec_of(A, 0))
    };
    let seqs = {
        let mm = s.mm.borrow();
        let g = &mm.lruvecs[lv as usize].lrugen;
        (g.max_seq, g.min_seq[LRU_GEN_FILE])
    };
    if shadow {
        // lru_gen_eviction's token of a folio evicted from the current oldest generation
        // with no refs: (min_seq << LRU_REFS_WIDTH) | 0, within MAX_NR_GENS of max_seq.
        let token = seqs.1 << LRU_REFS_WIDTH;
        let entry = reclaimsim_core::mm::filemap::shadow_entry(
            reclaimsim_core::mm::workingset::pack_shadow(A, 0, token, false),
        );
        s.mm.borrow_mut().page_cache_store(file, index, entry);
    }
    run_probe(&s, 0, 1_000_000, move |s| async move {
        s.handle_mm_fault(mmid, MAPPED_FILE_BASE + index, false)
            .await;
        s.lru_add_drain().await;
    });
    let pfn = {
        let mm = s.mm.borrow();
        reclaimsim_core::mm::filemap::entry_page(mm.files[file as usize].cache[index as usize])
            .expect("the fault brought the page in")
    };
    (s, pfn, seqs.0, seqs.1)
}

#[test]
fn a_text_page_faulted_in_starts_young_on_mglru() {
    use reclaimsim_core::mm::lru_gen::{folio_lru_gen, lru_gen_from_seq, MIN_NR_GENS};
    // filemap_fault runs under handle_mm_fault's lru_gen_enter_fault (a text VMA has
    // recency): folio_add_lru sets PG_active, and lru_gen_folio_seq puts an active folio
    // without PG_workingset MIN_NR_GENS below max_seq + 1, i.e. at max_seq - 1; read()'s
    // misses (not in a fault) go to the oldest generations instead.
    let (s, pfn, max_seq, _) = text_fault(false, 3);
    let gen = folio_lru_gen(&s.mm.borrow().pages, pfn);
    assert_eq!(gen, Some(lru_gen_from_seq(max_seq + 1 - MIN_NR_GENS)));
}

#[test]
fn a_recent_text_refault_under_a_fault_counts_an_activation() {
    // lru_gen_refault: a refault whose token is within MAX_NR_GENS of max_seq is recent;
    // in a page fault it counts WORKINGSET_ACTIVATE (folio_add_lru activates the folio),
    // besides WORKINGSET_REFAULT. Not workingset in the shadow: no restore.
    let (s, pfn, _, _) = text_fault(true, 5);
    let mm = s.mm.borrow();
    let lv = mm.folio_lruvec(pfn) as usize;
    let st = |i: NodeStat| mm.lruvecs[lv].stat[i as usize];
    assert_eq!(st(NodeStat::WorkingsetRefaultFile), 1);
    assert_eq!(st(NodeStat::WorkingsetActivateFile), 1);
    assert_eq!(st(NodeStat::WorkingsetRestoreFile), 0);
}
