//! Swap readahead (mm/swap_state.rs, mm/shmem.rs): swap_cluster_readahead's window
//! arithmetic against __swapin_nr_pages as the kernel writes it and swap_vma_ra_win's
//! placement of the VMA window, then sequences of faults over pages swapped out to known
//! slots, whose reads, readahead counts and hits follow from that arithmetic: shmem on a
//! kernel whose shmem reads ahead on zram (6.12) and on one that bypasses the swap cache
//! there (6.18, rule `shmem_swapin_skip_swapcache`); anonymous memory on a block device,
//! by the VMA (non-rotational) or by slots (rotational).

use reclaimsim_core::fixture::run_probe;
use reclaimsim_core::mm::memory::Fault;
use reclaimsim_core::mm::mm_types::{pte, PG_LOCKED, PG_LRU, PG_SWAPCACHE};
use reclaimsim_core::mm::swap_state::{
    __swapin_nr_pages, swap_vma_ra_win, SwapRaInfo, SwapReadahead, SwapinRa, PAGE_CLUSTER,
};
use reclaimsim_core::mm::swapfile::SwapEnt;
use reclaimsim_core::mm::vmscan::MEMCG_RECLAIM_MAY_SWAP;
use reclaimsim_core::mm::vmstat::VmEvent;
use reclaimsim_core::sim::Sim;
use reclaimsim_core::Scenario;
use std::cell::RefCell;
use std::rc::Rc;

#[test]
fn the_window_is_the_kernels_arithmetic() {
    // (prev_offset, offset, hits, max_pages, prev_win) -> pages, each worked by hand from
    // __swapin_nr_pages: pages = hits + 2; with no hits 2 only next to prev_offset, else
    // 1; with hits rounded up to a power of two of at least 4; then at most max_pages and
    // at least prev_win / 2.
    for (args, want) in [
        ((10, 11, 0, 8, 0), 2),
        ((10, 9, 0, 8, 0), 2),
        ((10, 20, 0, 8, 0), 1),
        ((10, 20, 0, 8, 1), 1),
        ((10, 20, 0, 8, 4), 2),
        ((10, 20, 0, 8, 8), 4),
        ((10, 20, 1, 8, 0), 4),
        ((10, 20, 2, 8, 0), 4),
        ((10, 20, 3, 8, 0), 8),
        ((10, 20, 30, 8, 0), 8),
        ((10, 20, 3, 2, 0), 2),
        ((0, u32::MAX, 0, 8, 0), 2),
    ] {
        let (p, o, h, m, w) = args;
        assert_eq!(__swapin_nr_pages(p, o, h, m, w), want, "{args:?}");
    }
    assert_eq!(1 << PAGE_CLUSTER, 8, "vm.page-cluster's default");
}

#[test]
fn the_window_takes_the_hits_and_keeps_the_offset_only_without_them() {
    let mut ra = SwapReadahead::new(64);
    // prev_offset starts at 0: 5 is not next to it.
    assert_eq!(ra.swapin_nr_pages(5), 1);
    assert_eq!(ra.swapin_nr_pages(6), 2);
    // No hits since: 40 is far from 6, but the last window was 2 (2 / 2 = 1).
    assert_eq!(ra.swapin_nr_pages(40), 1);
    assert_eq!(ra.swapin_nr_pages(41), 2);
}

/// A one-node machine on kernel `version` with 64M of swap on `device`, classic LRU, the
/// cgroup /a (memcg 1) and no workload running; `extra` goes into `[kernel]`. A device
/// `ssd-rotational` is an ssd that reports itself rotational.
fn machine(version: &str, device: &str, extra: &str) -> Rc<Sim> {
    let (device, rotational) = match device.strip_suffix("-rotational") {
        Some(d) => (d, true),
        None => (device, false),
    };
    let t = format!(
        r#"
duration = "1000s"
[kernel]
version = "{version}"
lru = "classic"
{extra}
[machine]
cpus = 2
memory_per_node = "64M"
[machine.swap]
size = "64M"
device = "{device}"
rotational = {rotational}
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "4K"
start = "900s"
"#
    );
    Sim::build(&Scenario::from_toml(&t).unwrap()).unwrap()
}

/// A process of /a with 32 pages, shmem if `shmem`, every page swapped out by reclaim of
/// the memcg; returns it and each page's slot.
fn swapped_out(s: &Rc<Sim>, shmem: bool) -> (u32, Vec<u32>) {
    let (mmid, _) = s.fixture_anon_folios(1, 0, 32, false, 0);
    if shmem {
        s.mm.borrow_mut().mark_shmem(mmid);
    }
    run_probe(s, 0, 0, |s| async move {
        for _ in 0..20 {
            s.try_to_free_mem_cgroup_pages(1, 32, MEMCG_RECLAIM_MAY_SWAP, None)
                .await;
            // A block device's writeback ends meanwhile; the next pass frees the folios.
            s.e.sleep(1_000_000).await;
        }
    });
    let mm = s.mm.borrow();
    let slots: Vec<u32> = mm.mms[mmid as usize]
        .ptes
        .iter()
        .map(|&v| {
            assert!(pte::is_swap(v), "every page swapped out");
            pte::slot(v)
        })
        .collect();
    for &slot in &slots {
        assert!(matches!(
            mm.swap.as_ref().unwrap().get(slot),
            SwapEnt::Shadow(_)
        ));
    }
    (mmid, slots)
}

/// What a sequence of write faults did: each fault's outcome, and pswpin, swap_ra,
/// swap_ra_hit and pgmajfault over it.
struct Faults {
    faults: Vec<Fault>,
    pswpin: u64,
    ra: u64,
    hits: u64,
    majors: u64,
}

/// Write faults by `mmid`, one after the other, on the pages swapped to `at_slots`.
fn fault_slots(s: &Rc<Sim>, mmid: u32, slots: &[u32], at_slots: &[u32]) -> Faults {
    let vpns: Vec<u32> = at_slots
        .iter()
        .map(|t| slots.iter().position(|x| x == t).expect("a slot in use") as u32)
        .collect();
    fault_vpns(s, mmid, &vpns)
}

/// Write faults by `mmid`, one after the other, on its pages `vpns`.
fn fault_vpns(s: &Rc<Sim>, mmid: u32, vpns: &[u32]) -> Faults {
    let vpns = vpns.to_vec();
    let ev = |s: &Sim, e: VmEvent| s.mm.borrow().events[e as usize];
    let before = [
        VmEvent::Pswpin,
        VmEvent::SwapRa,
        VmEvent::SwapRaHit,
        VmEvent::Pgmajfault,
    ]
    .map(|e| ev(s, e));
    let out = Rc::new(RefCell::new(Vec::new()));
    let o2 = out.clone();
    let t0 = s.e.now() + 1_000_000;
    run_probe(s, 0, t0, move |s| async move {
        for vpn in vpns {
            let f = s.handle_mm_fault(mmid, vpn, true).await;
            o2.borrow_mut().push(f);
        }
    });
    let after = [
        VmEvent::Pswpin,
        VmEvent::SwapRa,
        VmEvent::SwapRaHit,
        VmEvent::Pgmajfault,
    ]
    .map(|e| ev(s, e));
    let faults = out.borrow().clone();
    Faults {
        faults,
        pswpin: after[0] - before[0],
        ra: after[1] - before[1],
        hits: after[2] - before[2],
        majors: after[3] - before[3],
    }
}

/// Slots whose neighbours in the blocks used below are all in use: the 32 pages were
/// swapped out to 32 consecutive slots from 0.
fn assert_consecutive(slots: &[u32]) {
    let mut sorted = slots.to_vec();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..32).collect::<Vec<u32>>());
}

/// The fault sequence: slot 5 (prev_offset is 0: window 1), 6 (next to 5: window 2, block
/// 6-7 reads 7 ahead), 7 (a hit: minor), 12 (one hit: 3 -> 4, block 12-15 reads 13-15
/// ahead; prev_offset stays 6), 20 (no hits, not next to 6, but the last window was 4:
/// 2, block 20-21 reads 21 ahead).
const SEQUENCE: [u32; 5] = [5, 6, 7, 12, 20];

#[test]
fn a_6_12_shmem_swapin_reads_ahead_on_zram() {
    let s = machine("6.12", "zram", "");
    let (mmid, slots) = swapped_out(&s, true);
    assert_consecutive(&slots);
    // Another shmem process starting later keeps the slots' records of the first.
    {
        let mut mm = s.mm.borrow_mut();
        let later = mm.mm_alloc(reclaimsim_core::mm::MmStruct::new(4, 1, 0, 0));
        mm.mark_shmem(later);
    }
    let f = fault_slots(&s, mmid, &slots, &SEQUENCE);
    use Fault::*;
    assert_eq!(f.faults, vec![Major, Major, Minor, Major, Major]);
    assert_eq!(f.pswpin, 1 + 2 + 4 + 2);
    assert_eq!(f.ra, 1 + 3 + 1);
    assert_eq!(f.hits, 1);
    assert_eq!(f.majors, 4);
    // The folios read ahead and not faulted yet: in the swap cache, unmapped, on the LRU,
    // unlocked, charged to the process's memcg.
    let mm = s.mm.borrow();
    for slot in [13, 14, 15, 21] {
        let SwapEnt::Cached(pfn) = mm.swap.as_ref().unwrap().get(slot) else {
            panic!("slot {slot} not read ahead");
        };
        let p = mm.pages[pfn as usize];
        assert!(p.test(PG_SWAPCACHE) && p.test(PG_LRU) && !p.test(PG_LOCKED));
        assert_eq!((p.memcg, p.private), (1, slot));
        let vpn = slots.iter().position(|&x| x == slot).unwrap();
        assert_eq!(mm.mms[mmid as usize].ptes[vpn], pte::mk_swap(slot));
    }
    mm.check_invariants().unwrap();
}

#[test]
fn a_6_18_shmem_swapin_on_zram_reads_one_page() {
    let s = machine("6.18", "zram", "");
    let (mmid, slots) = swapped_out(&s, true);
    let f = fault_slots(&s, mmid, &slots, &SEQUENCE);
    assert_eq!(f.faults, vec![Fault::Major; 5]);
    assert_eq!((f.pswpin, f.ra, f.hits, f.majors), (5, 0, 0, 5));
}

#[test]
fn the_rule_alone_turns_6_12s_readahead_off_and_6_18s_on() {
    let on = machine("6.12", "zram", "rules.shmem_swapin_skip_swapcache = true");
    let (mmid, slots) = swapped_out(&on, true);
    let f = fault_slots(&on, mmid, &slots, &SEQUENCE);
    assert_eq!((f.pswpin, f.ra), (5, 0));
    let off = machine("6.18", "zram", "rules.shmem_swapin_skip_swapcache = false");
    let (mmid, slots) = swapped_out(&off, true);
    let f = fault_slots(&off, mmid, &slots, &SEQUENCE);
    assert_eq!((f.pswpin, f.ra, f.hits), (9, 5, 1));
}

#[test]
fn anonymous_memory_does_not_read_ahead() {
    let s = machine("6.12", "zram", "");
    let (mmid, slots) = swapped_out(&s, false);
    let f = fault_slots(&s, mmid, &slots, &SEQUENCE);
    assert_eq!((f.pswpin, f.ra, f.majors), (5, 0, 5));
}

#[test]
fn which_swapins_read_ahead() {
    // shmem: with the rule only a block device, without it any device (cluster). Anonymous
    // memory: never on zram for a slot one process uses; on a block device by the VMA,
    // or by slots when it is rotational, whatever the version.
    use SwapinRa::*;
    for (version, device, want_shmem, want_anon) in [
        ("6.12", "zram", Cluster, None),
        ("6.12", "ssd", Cluster, Vma),
        ("6.18", "zram", None, None),
        ("6.18", "ssd", Cluster, Vma),
        ("6.18", "ssd-rotational", Cluster, Cluster),
        ("7.3", "zram", None, None),
        ("6.1", "zram", Cluster, None),
        ("6.1", "ssd-rotational", Cluster, Cluster),
    ] {
        let s = machine(version, device, "");
        let (shmem, anon) = {
            let mut mm = s.mm.borrow_mut();
            let a = mm.mm_alloc(reclaimsim_core::mm::MmStruct::new(4, 1, 0, 0));
            let b = mm.mm_alloc(reclaimsim_core::mm::MmStruct::new(4, 1, 0, 0));
            mm.mark_shmem(a);
            assert_eq!(mm.shmem_swapin_reads_ahead(a), want_shmem == Cluster);
            (
                mm.swapin_readahead_mode(a, 0),
                mm.swapin_readahead_mode(b, 0),
            )
        };
        assert_eq!((shmem, anon), (want_shmem, want_anon), "{version} {device}");
        // The slots' PTEs (8 bytes a slot) are recorded only where cluster readahead runs.
        let kept = s.mm.borrow().swap.as_ref().unwrap().ra.tracks_owners();
        assert_eq!(
            kept,
            want_shmem == Cluster || want_anon == Cluster,
            "{version} {device}"
        );
    }
}

#[test]
fn the_vma_window_is_placed_as_swap_vma_ra_win_places_it() {
    let info = |prev: Option<u32>, win, hits| SwapRaInfo { prev, win, hits };
    // (state, fault, VMA pages) -> (window, start, end), each worked by hand: the window
    // from __swapin_nr_pages; it starts at a fault that follows the previous one, ends at
    // one that precedes it, else begins (win - 1) / 2 pages before it; then clamped to
    // the VMA, to page 0 and to the fault's PMD (512 pages).
    for (st, f, pages, want) in [
        // First fault: no previous page, no hits: one page.
        (info(None, 0, 0), 5, 1000, (1, 5, 6)),
        // After 5: 2 pages from 6.
        (info(Some(5), 1, 0), 6, 1000, (2, 6, 8)),
        // Before 10: 2 pages ending at 9.
        (info(Some(10), 1, 0), 9, 1000, (2, 8, 10)),
        // One hit after 7: 4 pages from 8.
        (info(Some(7), 2, 1), 8, 1000, (4, 8, 12)),
        // Far from 8, no hits, last window 4: 2 pages, none before (1 / 2 = 0).
        (info(Some(8), 4, 0), 20, 1000, (2, 20, 22)),
        // Three hits, far: 8 pages, 3 before.
        (info(Some(100), 2, 3), 50, 1000, (8, 47, 55)),
        // The VMA ends at 52.
        (info(Some(100), 2, 3), 50, 52, (8, 47, 52)),
        // The fault's PMD starts at 512.
        (info(Some(100), 2, 3), 513, 1000, (8, 512, 518)),
        // Not below page 0.
        (info(Some(100), 2, 3), 1, 1000, (8, 0, 6)),
        // Thirty hits: at most 1 << page_cluster.
        (info(Some(100), 2, 30), 50, 1000, (8, 47, 55)),
    ] {
        let (w, a, b, after) = swap_vma_ra_win(st, f, pages);
        assert_eq!((w, a, b), want, "{st:?} at {f}");
        assert_eq!(
            after,
            info(Some(f), w, 0),
            "the state left by {st:?} at {f}"
        );
    }
}

/// The anonymous fault sequence, by page: 5 (first fault: window 1), 6 (after 5: pages
/// 6-7, reads 7 ahead), 7 (a hit: minor; the VMA counts it), 8 (after 7 with one hit:
/// 4 pages 8-11, reads 9-11 ahead), 20 (far from 8, no hits, last window 4: 2 pages
/// 20-21, reads 21 ahead).
const VMA_SEQUENCE: [u32; 5] = [5, 6, 7, 8, 20];

#[test]
fn an_anonymous_swapin_from_a_block_device_reads_ahead_by_the_vma() {
    let s = machine("6.18", "ssd", "");
    let (mmid, _) = swapped_out(&s, false);
    let f = fault_vpns(&s, mmid, &VMA_SEQUENCE);
    use Fault::*;
    assert_eq!(f.faults, vec![Major, Major, Minor, Major, Major]);
    assert_eq!(
        (f.pswpin, f.ra, f.hits, f.majors),
        (1 + 2 + 4 + 2, 1 + 3 + 1, 1, 4)
    );
    let mm = s.mm.borrow();
    assert_eq!(
        mm.mms[mmid as usize].swap_ra_info,
        SwapRaInfo {
            prev: Some(20),
            win: 2,
            hits: 0
        }
    );
    for vpn in [9, 10, 11, 21] {
        let v = mm.mms[mmid as usize].ptes[vpn];
        assert!(pte::is_swap(v), "page {vpn} still a swap PTE");
        let SwapEnt::Cached(pfn) = mm.swap.as_ref().unwrap().get(pte::slot(v)) else {
            panic!("page {vpn} not read ahead");
        };
        let p = mm.pages[pfn as usize];
        assert!(p.test(PG_SWAPCACHE) && p.test(PG_LRU) && !p.test(PG_LOCKED));
        assert_eq!((p.memcg, p.owner(), p.index), (1, mmid, vpn as u32));
    }
    mm.check_invariants().unwrap();
}

#[test]
fn an_anonymous_swapin_from_a_rotational_device_reads_ahead_by_slots() {
    // The same slots and windows as shmem's (SEQUENCE), the hits feeding the global window.
    let s = machine("6.18", "ssd-rotational", "");
    let (mmid, slots) = swapped_out(&s, false);
    assert_consecutive(&slots);
    let f = fault_slots(&s, mmid, &slots, &SEQUENCE);
    use Fault::*;
    assert_eq!(f.faults, vec![Major, Major, Minor, Major, Major]);
    assert_eq!((f.pswpin, f.ra, f.hits, f.majors), (9, 5, 1, 4));
    // The VMA's state is not used.
    assert_eq!(
        s.mm.borrow().mms[mmid as usize].swap_ra_info,
        SwapRaInfo::default()
    );
}

#[test]
fn a_rotational_zram_is_refused() {
    let t = r#"
duration = "1s"
[machine]
cpus = 1
memory_per_node = "64M"
[machine.swap]
size = "64M"
device = "zram"
rotational = true
[[workload]]
type = "usemem"
size = "4K"
"#;
    let e = Scenario::from_toml(t)
        .and_then(|sc| Sim::build(&sc).map(|_| ()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("scenario.machine.swap.rotational") && e.contains("ssd"),
        "{e}"
    );
}

#[test]
fn a_block_device_reads_ahead_on_6_18_and_unlocks_the_folios_when_the_reads_complete() {
    let s = machine("6.18", "ssd", "");
    let (mmid, slots) = swapped_out(&s, true);
    assert_consecutive(&slots);
    let f = fault_slots(&s, mmid, &slots, &SEQUENCE);
    use Fault::*;
    assert_eq!(f.faults, vec![Major, Major, Minor, Major, Major]);
    assert_eq!((f.pswpin, f.ra, f.hits, f.majors), (9, 5, 1, 4));
    let mm = s.mm.borrow();
    for slot in [13, 14, 15, 21] {
        let SwapEnt::Cached(pfn) = mm.swap.as_ref().unwrap().get(slot) else {
            panic!("slot {slot} not read ahead");
        };
        assert!(
            !mm.pages[pfn as usize].test(PG_LOCKED),
            "slot {slot} still locked"
        );
    }
    mm.check_invariants().unwrap();
}

#[test]
fn the_swap_cache_is_in_the_nodes_file_pages_and_not_in_a_memcgs() {
    // add_to_swap_cache and its removals count NR_FILE_PAGES per node only
    // (node_stat_mod_folio) and NR_SWAPCACHE per lruvec: with no page cache anywhere,
    // /proc/vmstat's nr_file_pages is exactly nr_swapcached, and an anonymous memcg's
    // memory.stat shows file 0 beside its swapcached.
    let t = r#"
duration = "3s"
seed = 3
[machine]
cpus = 2
memory_per_node = "512M"
[machine.swap]
size = "256M"
device = "ssd"
[[cgroup]]
path = "/anon"
memory.max = "16M"
[[workload]]
type = "usemem"
cgroup = "/anon"
size = "24M"
random = true
repeat = 0
"#;
    let r = reclaimsim_core::fixture::run_toml(t, true);
    let vm = |k: &str| {
        r["vmstat"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("vmstat {k}"))
    };
    let cg = r["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "/anon")
        .expect("/anon")["memory.stat"]
        .clone();
    assert!(
        vm("nr_swapcached") > 0,
        "the run left folios in the swap cache"
    );
    assert_eq!(vm("nr_file_pages"), vm("nr_swapcached"));
    assert_eq!(cg["file"].as_u64(), Some(0));
    assert_eq!(cg["swapcached"].as_u64(), Some(vm("nr_swapcached") * 4096));
}
