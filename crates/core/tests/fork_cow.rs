//! fork() and copy-on-write of anonymous memory (mm/fork.rs, do_wp_page in memory.rs).
//!
//! Expectations follow the kernel's rules, counted by hand: fork shares every populated
//! page (one folio, mapcount 1 + children, charged once) and write-protects it; a write
//! copies the folio (a new page charged to the writer's memcg) unless the writer is its
//! only user, which reuses it in place; reclaim unmaps a shared folio from every process
//! (one swap-out, a swap count of one per PTE), and the slot is freed when its last user
//! maps it back or goes away.
use reclaimsim_core::fixture::{lru_add_drain_acquisitions, one_node_machine, run_probe, run_toml};
use reclaimsim_core::mm::memory::Fault;
use reclaimsim_core::mm::mm_types::pte;
use reclaimsim_core::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON};
use reclaimsim_core::mm::vmscan::MEMCG_RECLAIM_MAY_SWAP;
use reclaimsim_core::mm::vmstat::{NodeStat, VmEvent};
use reclaimsim_core::mm::MmStruct;
use reclaimsim_core::sim::Sim;
use std::rc::Rc;

const PAGES: u32 = 64;
const A: u16 = 1;

/// A machine with 64M of zram swap, memcg /a (id 1), and no workload running.
fn sim() -> Rc<Sim> {
    one_node_machine("64M", Some("64M"), "")
}

fn new_mm(s: &Sim) -> u32 {
    let mut mm = s.mm.borrow_mut();
    mm.mms.push(MmStruct::new(PAGES as usize, A, 0, 0));
    (mm.mms.len() - 1) as u32
}

/// Run `f` as one task on CPU 0 to its end.
fn run<F, Fut>(s: &Rc<Sim>, f: F)
where
    F: FnOnce(Rc<Sim>) -> Fut + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    run_probe(s, 0, 0, f);
}

/// A parent with every page written, and `n` children forked from it.
async fn forked(s: &Sim, n: usize) -> (u32, Vec<u32>) {
    let parent = new_mm(s);
    let children: Vec<u32> = (0..n).map(|_| new_mm(s)).collect();
    for vpn in 0..PAGES {
        s.handle_mm_fault(parent, vpn, true).await;
    }
    for &c in &children {
        assert!(s.dup_mmap(parent, c).await);
    }
    s.lru_add_drain().await;
    (parent, children)
}

/// Writes by `mmid` to `vpns`, faulting where the PTE is absent or write-protected.
async fn write(s: &Sim, mmid: u32, vpns: std::ops::Range<u32>) {
    for vpn in vpns {
        let faults = {
            let mm = s.mm.borrow();
            let m = &mm.mms[mmid as usize];
            !pte::present(m.ptes[vpn as usize]) || m.pte_wrprotected(vpn)
        };
        if faults {
            let f = s.handle_mm_fault(mmid, vpn, true).await;
            assert!(
                matches!(f, Fault::Minor | Fault::Major),
                "write fault of {mmid} at {vpn}: {f:?}"
            );
        }
    }
    s.lru_add_drain().await;
}

/// [`forked`] with two children, then every PTE made old (so that reclaim keeps no folio
/// for its young bits) and /a reclaimed by PAGES pages, swapping.
async fn forked_and_reclaimed(s: &Sim) -> (u32, Vec<u32>) {
    let (parent, kids) = forked(s, 2).await;
    {
        let mut mm = s.mm.borrow_mut();
        for m in [parent, kids[0], kids[1]] {
            for v in mm.mms[m as usize].ptes.iter_mut() {
                *v &= !pte::YOUNG;
            }
        }
    }
    s.try_to_free_mem_cgroup_pages(A, PAGES as u64, MEMCG_RECLAIM_MAY_SWAP, Some(200))
        .await;
    (parent, kids)
}

fn pfn_at(s: &Sim, mmid: u32, vpn: u32) -> Option<u32> {
    let v = s.mm.borrow().mms[mmid as usize].ptes[vpn as usize];
    pte::present(v).then(|| pte::pfn(v))
}

/// Anonymous pages charged to /a (memory.stat anon) and mapped folios (NR_ANON_MAPPED).
fn anon(s: &Sim) -> (u64, i64) {
    let mm = s.mm.borrow();
    let lv = &mm.lruvecs[mm.memcgs[A as usize].lruvecs[0] as usize];
    let charged = lv.nr[LRU_INACTIVE_ANON] + lv.nr[LRU_ACTIVE_ANON];
    (
        charged,
        mm.node_page_state(0, NodeStat::NrAnonMapped) as i64,
    )
}

#[test]
fn fork_shares_every_page_once_and_write_protects_it() {
    let s = sim();
    run(&s, |s| async move {
        let (parent, kids) = forked(&s, 2).await;
        let mm = s.mm.borrow();
        for vpn in 0..PAGES {
            let p = pfn_at(&s, parent, vpn).unwrap();
            for &c in &kids {
                assert_eq!(pfn_at(&s, c, vpn), Some(p), "page {vpn} shared");
                assert!(mm.mms[c as usize].pte_wrprotected(vpn));
                // copy_present_pte makes the child's copy old.
                assert_eq!(mm.mms[c as usize].ptes[vpn as usize] & pte::YOUNG, 0);
            }
            assert!(mm.mms[parent as usize].pte_wrprotected(vpn));
            assert_eq!(mm.folio_mapcount(p), 3);
        }
        for &c in &kids {
            assert_eq!(mm.mms[c as usize].rss, PAGES as u64);
        }
        drop(mm);
        // One folio per page, charged and counted once.
        assert_eq!(anon(&s), (PAGES as u64, PAGES as i64));
    });
}

#[test]
fn a_write_copies_a_shared_page_and_the_last_user_reuses_it() {
    let s = sim();
    run(&s, |s| async move {
        let (parent, kids) = forked(&s, 2).await;
        let old: Vec<u32> = (0..PAGES).map(|v| pfn_at(&s, parent, v).unwrap()).collect();
        // Child 0 writes pages 0..16: 16 copies.
        write(&s, kids[0], 0..16).await;
        for vpn in 0..16 {
            let new = pfn_at(&s, kids[0], vpn).unwrap();
            assert_ne!(new, old[vpn as usize]);
            assert!(!s.mm.borrow().mms[kids[0] as usize].pte_wrprotected(vpn));
            assert_eq!(s.mm.borrow().folio_mapcount(old[vpn as usize]), 2);
        }
        assert_eq!(anon(&s), (PAGES as u64 + 16, PAGES as i64 + 16));
        assert_eq!(s.mm.borrow().mms[kids[0] as usize].rss, PAGES as u64);
        // Child 1 writes page 0 (a copy: the parent still maps it), then the parent, now
        // its only user, writes it in place. Its PTE is made old and clean first (as
        // reclaim's look and a writeback would leave it): wp_page_reuse makes it young and
        // dirty again.
        write(&s, kids[1], 0..1).await;
        s.mm.borrow_mut().mms[parent as usize].ptes[0] &= !(pte::YOUNG | pte::DIRTY);
        write(&s, parent, 0..1).await;
        assert_eq!(pfn_at(&s, parent, 0), Some(old[0]));
        let v = s.mm.borrow().mms[parent as usize].ptes[0];
        assert_eq!(v & (pte::YOUNG | pte::DIRTY), pte::YOUNG | pte::DIRTY);
        assert!(!s.mm.borrow().mms[parent as usize].pte_wrprotected(0));
        assert_eq!(anon(&s), (PAGES as u64 + 17, PAGES as i64 + 17));
        // Child 0 exits: its 16 copies go; the pages it shared stay with the others.
        s.exit_mmap(kids[0]).await;
        assert_eq!(anon(&s), (PAGES as u64 + 1, PAGES as i64 + 1));
        assert_eq!(s.mm.borrow().folio_mapcount(old[20]), 2);
    });
}

#[test]
fn reclaim_unmaps_a_shared_folio_everywhere_and_its_slot_lives_until_its_last_user() {
    let s = sim();
    run(&s, |s| async move {
        let before = s.mm.borrow().events[VmEvent::Pswpout as usize];
        let (parent, kids) = forked_and_reclaimed(&s).await;
        let slot_of = |m: u32, vpn: u32| {
            let v = s.mm.borrow().mms[m as usize].ptes[vpn as usize];
            pte::is_swap(v).then(|| pte::slot(v))
        };
        let gone: Vec<u32> = (0..PAGES)
            .filter(|&v| slot_of(parent, v).is_some())
            .collect();
        assert!(!gone.is_empty(), "reclaim swapped out nothing");
        let v0 = gone[0];
        let slot = slot_of(parent, v0).unwrap();
        {
            let mm = s.mm.borrow();
            // Every process's PTE became the same swap entry; one write per folio.
            for &c in &kids {
                assert_eq!(slot_of(c, v0), Some(slot));
            }
            assert_eq!(mm.swap.as_ref().unwrap().swap_count(slot), Some(3));
            assert_eq!(
                mm.events[VmEvent::Pswpout as usize] - before,
                gone.len() as u64
            );
            assert_eq!(mm.memcgs[A as usize].swap_usage, gone.len() as u64);
        }
        let pswpin = s.mm.borrow().events[VmEvent::Pswpin as usize];
        // Child 0 writes the page: one read, mapped then copied; the swap-cache folio
        // stays for the other two users.
        write(&s, kids[0], v0..v0 + 1).await;
        assert_eq!(
            s.mm.borrow().swap.as_ref().unwrap().swap_count(slot),
            Some(2)
        );
        // Child 1: a swap-cache hit and a copy; the parent, last user: a hit, reused, and
        // the slot freed.
        write(&s, kids[1], v0..v0 + 1).await;
        write(&s, parent, v0..v0 + 1).await;
        let mm = s.mm.borrow();
        assert_eq!(mm.events[VmEvent::Pswpin as usize] - pswpin, 1);
        assert_eq!(mm.memcgs[A as usize].swap_usage, gone.len() as u64 - 1);
        let cached = pfn_at(&s, parent, v0).unwrap();
        assert!(!mm.folio_swapped(cached));
        assert!(!mm.mms[parent as usize].pte_wrprotected(v0));
        assert_ne!(pfn_at(&s, kids[0], v0), Some(cached));
        assert_ne!(pfn_at(&s, kids[1], v0), Some(cached));
    });
}

#[test]
fn exiting_drops_one_reference_per_swap_pte() {
    let s = sim();
    run(&s, |s| async move {
        let (parent, kids) = forked_and_reclaimed(&s).await;
        let swapped = s.mm.borrow().memcgs[A as usize].swap_usage;
        assert!(swapped >= 32, "reclaim swapped out {swapped} pages");
        // Two of three users exit: every slot is still in use by the third.
        s.exit_mmap(kids[0]).await;
        s.exit_mmap(kids[1]).await;
        assert_eq!(s.mm.borrow().memcgs[A as usize].swap_usage, swapped);
        // The parent, now each slot's only user, reads a page back: mapped writable and
        // clean, the slot kept (a read frees it only when swap is half full).
        let v0 = (0..PAGES)
            .find(|&v| pte::is_swap(s.mm.borrow().mms[parent as usize].ptes[v as usize]))
            .unwrap();
        s.handle_mm_fault(parent, v0, false).await;
        {
            let mm = s.mm.borrow();
            let v = mm.mms[parent as usize].ptes[v0 as usize];
            assert!(pte::present(v) && v & pte::DIRTY == 0);
            assert!(!mm.mms[parent as usize].pte_wrprotected(v0));
            assert_eq!(mm.memcgs[A as usize].swap_usage, swapped);
        }
        // The last one exits: all slots are freed, and all pages.
        s.exit_mmap(parent).await;
        assert_eq!(s.mm.borrow().memcgs[A as usize].swap_usage, 0);
        assert_eq!(anon(&s), (0, 0));
    });
}

/// Virtual time dup_mmap takes for a parent of 1100 pages (three PTE pages) with pages
/// 600..700 never written, on a machine whose `pte_map` is `pte_map` ns; checks that the
/// child maps exactly the parent's pages.
fn fork_time(pte_map: u64) -> u64 {
    let s = one_node_machine(
        "64M",
        Some("64M"),
        &format!("\n[costs]\npte_map = {pte_map}\n"),
    );
    let (parent, child) = {
        let mut mm = s.mm.borrow_mut();
        mm.mms.push(MmStruct::new(1100, A, 0, 0));
        mm.mms.push(MmStruct::new(1100, A, 0, 0));
        ((mm.mms.len() - 2) as u32, (mm.mms.len() - 1) as u32)
    };
    let took = std::rc::Rc::new(std::cell::Cell::new(0));
    let t2 = took.clone();
    run(&s, move |s| async move {
        for vpn in (0..1100).filter(|v| !(600..700).contains(v)) {
            s.handle_mm_fault(parent, vpn, true).await;
        }
        let t0 = s.e.now();
        assert!(s.dup_mmap(parent, child).await);
        t2.set(s.e.now() - t0);
    });
    let mm = s.mm.borrow();
    for vpn in 0..1100u32 {
        let (p, c) = (pfn_at(&s, parent, vpn), pfn_at(&s, child, vpn));
        assert_eq!(c, p, "page {vpn}");
        assert_eq!(p.is_some(), !(600..700).contains(&vpn));
    }
    assert_eq!(mm.mms[child as usize].pte_tables, vec![true; 3]);
    took.get()
}

#[test]
fn fork_copies_every_pte_page_and_charges_one_pte_map_per_copied_entry() {
    // 1000 PTEs copied at one pte_map each: 2000 ns more each with pte_map 3000 than 1000.
    assert_eq!(fork_time(3000) - fork_time(1000), 1000 * 2000);
}

fn drains(s: &Sim) -> u64 {
    lru_add_drain_acquisitions(s)
}

/// The drains of one write by the first of `children` to a page its parent faulted just
/// before forking them, whose folio still sits in CPU 0's lru_add batch.
fn wp_drains(children: usize) -> u64 {
    let s = sim();
    let out = Rc::new(std::cell::Cell::new(u64::MAX));
    let o2 = out.clone();
    run(&s, move |s| async move {
        let parent = new_mm(&s);
        let kids: Vec<u32> = (0..children).map(|_| new_mm(&s)).collect();
        s.handle_mm_fault(parent, 0, true).await;
        for &c in &kids {
            assert!(s.dup_mmap(parent, c).await);
        }
        let old = pfn_at(&s, parent, 0).unwrap();
        assert!(
            !s.mm.borrow().folio_test_lru(old),
            "the folio is in the batch"
        );
        let d0 = drains(&s);
        assert_eq!(s.handle_mm_fault(kids[0], 0, true).await, Fault::Minor);
        assert_ne!(pfn_at(&s, kids[0], 0), Some(old), "copied");
        o2.set(drains(&s) - d0);
    });
    out.get()
}

#[test]
fn a_copy_drains_the_batches_only_while_the_refcount_could_allow_reuse() {
    // Two mappings and the batch's reference: 3, drained; three mappings: 4, not.
    assert_eq!(wp_drains(1), 1);
    assert_eq!(wp_drains(2), 0);
}

/// The parent of one child writes page 0 after the child has copied it (mapcount 1 again)
/// while its folio waits in the lru_activate batch of CPU `queued_on` (folio_activate from
/// a task there); `batch_clears` is rule lru_batch_clears_pg_lru. Returns (whether the
/// parent reused the folio, drains of the write).
fn wp_with_queued_folio(queued_on: u32, batch_clears: bool) -> (bool, u64) {
    let s = sim();
    s.mm.borrow_mut().rules.lru_batch_clears_pg_lru = batch_clears;
    let (parent, old) = {
        let ids = Rc::new(std::cell::Cell::new((0, 0)));
        let i2 = ids.clone();
        run(&s, move |s| async move {
            let (parent, kids) = forked(&s, 1).await;
            write(&s, kids[0], 0..1).await;
            i2.set((parent, pfn_at(&s, parent, 0).unwrap()));
        });
        ids.get()
    };
    assert_eq!(s.mm.borrow().folio_mapcount(old), 1, "the child copied");
    let t = s.e.now();
    let t = run_probe(&s, queued_on, t, move |s| async move {
        s.folio_activate(old).await;
    });
    let out = Rc::new(std::cell::Cell::new((false, 0)));
    let o2 = out.clone();
    run_probe(&s, 0, t, move |s| async move {
        let d0 = drains(&s);
        assert_eq!(s.handle_mm_fault(parent, 0, true).await, Fault::Minor);
        o2.set((pfn_at(&s, parent, 0) == Some(old), drains(&s) - d0));
    });
    out.get()
}

#[test]
fn a_folio_queued_for_activation_is_copied_while_a_batch_holds_it() {
    // wp_can_reuse_anon_folio: refcount = 1 mapping + 1 batch. Every modeled version keeps
    // PG_lru on the queued folio, so nothing is drained and 2 > 1 + 0 (no swap cache):
    // copied, wherever it is queued.
    assert_eq!(wp_with_queued_folio(0, false), (false, 0));
    assert_eq!(wp_with_queued_folio(1, false), (false, 0));
    // 6.11-6.16: PG_lru is clear, the refcount 2 <= 3, so lru_add_drain runs: the local
    // batch takes the lru_lock once and lets go, and the folio is reused; with the folio
    // in CPU 1's batch, CPU 0's drain finds nothing to do and the reference stays: copied.
    assert_eq!(wp_with_queued_folio(0, true), (true, 1));
    assert_eq!(wp_with_queued_folio(1, true), (false, 0));
}

#[test]
fn fork_duplicates_the_slots_of_swapped_pages_and_faults_map_them_as_their_users_allow() {
    let s = sim();
    run(&s, |s| async move {
        let parent = new_mm(&s);
        let child = new_mm(&s);
        for vpn in 0..PAGES {
            s.handle_mm_fault(parent, vpn, true).await;
        }
        s.lru_add_drain().await;
        for v in s.mm.borrow_mut().mms[parent as usize].ptes.iter_mut() {
            *v &= !pte::YOUNG;
        }
        s.try_to_free_mem_cgroup_pages(A, PAGES as u64, MEMCG_RECLAIM_MAY_SWAP, Some(200))
            .await;
        let swapped = s.mm.borrow().mms[parent as usize].swapents;
        assert!(swapped >= 32, "reclaim swapped out {swapped} pages");
        assert!(s.dup_mmap(parent, child).await);
        let v0 = (0..PAGES)
            .find(|&v| pte::is_swap(s.mm.borrow().mms[parent as usize].ptes[v as usize]))
            .unwrap();
        let slot = pte::slot(s.mm.borrow().mms[parent as usize].ptes[v0 as usize]);
        {
            let mm = s.mm.borrow();
            assert_eq!(mm.mms[child as usize].swapents, swapped);
            assert_eq!(mm.mms[child as usize].ptes[v0 as usize], pte::mk_swap(slot));
            assert_eq!(mm.swap.as_ref().unwrap().swap_count(slot), Some(2));
        }
        // The child reads it: the parent's swap PTE still names the slot, so the folio is
        // mapped write-protected, clean.
        s.handle_mm_fault(child, v0, false).await;
        {
            let mm = s.mm.borrow();
            let v = mm.mms[child as usize].ptes[v0 as usize];
            assert!(pte::present(v) && v & pte::DIRTY == 0);
            assert!(mm.mms[child as usize].pte_wrprotected(v0));
            assert_eq!(mm.swap.as_ref().unwrap().swap_count(slot), Some(1));
        }
        // The parent reads it too: its swap PTE was the slot's last reference, but the
        // child maps the folio, so it is mapped write-protected as well, clean, and the
        // slot kept (a read frees it only when swap is half full).
        s.handle_mm_fault(parent, v0, false).await;
        let shared = {
            let mm = s.mm.borrow();
            let v = mm.mms[parent as usize].ptes[v0 as usize];
            assert!(pte::present(v) && v & pte::DIRTY == 0);
            assert!(mm.mms[parent as usize].pte_wrprotected(v0));
            assert_eq!(mm.swap.as_ref().unwrap().swap_count(slot), Some(0));
            assert_eq!(mm.folio_mapcount(pte::pfn(v)), 2);
            pte::pfn(v)
        };
        // The parent writes: a copy (the child still maps the folio); then the child, now
        // its only user, reuses it in place, which frees the slot.
        let before = s.mm.borrow().memcgs[A as usize].swap_usage;
        s.handle_mm_fault(parent, v0, true).await;
        assert_ne!(pfn_at(&s, parent, v0), Some(shared));
        s.handle_mm_fault(child, v0, true).await;
        assert_eq!(pfn_at(&s, child, v0), Some(shared));
        assert!(!s.mm.borrow().mms[child as usize].pte_wrprotected(v0));
        assert_eq!(s.mm.borrow().memcgs[A as usize].swap_usage, before - 1);
    });
}

/// Found by the property test: reclaim that runs while a fork copies its PTE pages (the
/// child's page-table charge reclaims) must see the parent's folios as mapped; the shared
/// mapcounts are set up before the first page is copied. The invariants (check_invariants:
/// every shared folio's mapcount and every slot's swap count recounted) hold throughout.
#[test]
fn reclaim_during_a_fork_sees_the_parents_mappings() {
    let t = r#"
duration = "60ms"
seed = 0
sample_interval = "10ms"
[machine]
nodes = 1
cpus = 16
memory_per_node = "32M"
[kernel]
lru = "mglru"
[variants]
mglru_memcg_iter = true
[machine.swap]
size = "256M"
device = "ssd"
[[cgroup]]
path = "/c0"
memory.max = "12M"
memory.high = "12M"
[[cgroup]]
path = "/c0/c1"
memory.max = "11M"
memory.high = "11M"
[[workload]]
type = "file_read"
cgroup = "/c0/c1"
threads = 1
files = ["29M"]
pattern = "seq"
passes = 0
[[workload]]
type = "usemem"
cgroup = "/c0"
processes = 1
size = "33M"
random = true
repeat = 0
prealloc = true
prefault = true
"#;
    // run_toml panics on an invariant the checked run finds broken.
    run_toml(t, true);
}

/// The drains of a write by the child to a page of the parent that reclaim swapped out
/// after the fork: the child reads it back first (a swap-in: the folio goes to CPU 0's
/// lru_add batch, in the swap cache, mapped write-protected), and with `parent_reads` the
/// parent maps it from the swap cache too; then the child writes it, which copies it.
fn swapcache_wp_drains(parent_reads: bool) -> u64 {
    let s = sim();
    let out = Rc::new(std::cell::Cell::new(u64::MAX));
    let o2 = out.clone();
    run(&s, move |s| async move {
        let (parent, kids) = forked_and_reclaimed(&s).await;
        let c = kids[0];
        s.exit_mmap(kids[1]).await;
        let v0 = (0..PAGES)
            .find(|&v| pte::is_swap(s.mm.borrow().mms[parent as usize].ptes[v as usize]))
            .unwrap();
        s.handle_mm_fault(c, v0, false).await;
        if parent_reads {
            s.handle_mm_fault(parent, v0, false).await;
        }
        let old = pfn_at(&s, c, v0).unwrap();
        assert!(
            !s.mm.borrow().folio_test_lru(old),
            "the folio is in the batch"
        );
        let d0 = drains(&s);
        let mapped = anon(&s).1;
        s.handle_mm_fault(c, v0, true).await;
        assert_ne!(pfn_at(&s, c, v0), Some(old), "copied");
        // The copy is mapped; the old folio is unmapped unless the parent maps it too.
        assert_eq!(anon(&s).1, mapped + if parent_reads { 1 } else { 0 });
        o2.set(drains(&s) - d0);
    });
    out.get()
}

#[test]
fn the_swap_cache_counts_in_the_refcount_that_decides_the_drain() {
    // One mapping, the swap cache and the batch: 3, drained (and copied: the parent's swap
    // PTE still names the slot). Two mappings, the swap cache and the batch: 4, not.
    assert_eq!(swapcache_wp_drains(false), 1);
    assert_eq!(swapcache_wp_drains(true), 0);
}

/// Virtual time of one copy-on-write fault with cost entry `entry` set to `ns`.
fn cow_time(entry: &str, ns: u64) -> u64 {
    let s = one_node_machine("64M", Some("64M"), &format!("\n[costs]\n{entry} = {ns}\n"));
    let took = Rc::new(std::cell::Cell::new(0));
    let t2 = took.clone();
    run(&s, move |s| async move {
        let (_, kids) = forked(&s, 2).await;
        let t0 = s.e.now();
        s.handle_mm_fault(kids[0], 0, true).await;
        t2.set(s.e.now() - t0);
    });
    took.get()
}

#[test]
fn a_copy_costs_one_page_copy_one_pte_map_and_no_clear() {
    // wp_page_copy copies the old page into the new one (copy_mc_user_highpage): one
    // page_copy per copy; the new page is not also cleared.
    assert_eq!(
        cow_time("page_copy", 3000) - cow_time("page_copy", 1000),
        2000
    );
    assert_eq!(cow_time("page_zero", 3000), cow_time("page_zero", 1000));
    // And one pte_map, for the new PTE (set_pte_at of the copy).
    assert_eq!(cow_time("pte_map", 3000) - cow_time("pte_map", 1000), 2000);
}

#[test]
fn reclaim_unmaps_only_the_ptes_that_map_the_shared_folio() {
    let s = sim();
    run(&s, |s| async move {
        let (parent, kids) = forked(&s, 2).await;
        // Child 0 copies every page; the shared folios stay with the parent and child 1.
        write(&s, kids[0], 0..PAGES).await;
        let mms = [parent, kids[0], kids[1]];
        for m in mms {
            for v in s.mm.borrow_mut().mms[m as usize].ptes.iter_mut() {
                *v &= !pte::YOUNG;
            }
        }
        s.try_to_free_mem_cgroup_pages(A, PAGES as u64, MEMCG_RECLAIM_MAY_SWAP, Some(200))
            .await;
        let mm = s.mm.borrow();
        let mut shared_out = 0;
        for vpn in 0..PAGES as usize {
            let (p, c0, c1) = (
                mm.mms[parent as usize].ptes[vpn],
                mm.mms[kids[0] as usize].ptes[vpn],
                mm.mms[kids[1] as usize].ptes[vpn],
            );
            // The parent and child 1 share one folio, so one PTE value for both; child 0's
            // copy is its own: never that folio, nor its slot.
            assert_eq!(p, c1, "page {vpn}");
            assert_ne!(
                c0 & !(pte::YOUNG | pte::DIRTY),
                p & !(pte::YOUNG | pte::DIRTY),
                "page {vpn}"
            );
            shared_out += pte::is_swap(p) as u64;
        }
        assert!(shared_out > 0, "reclaim swapped out no shared folio");
        for m in mms {
            let mm_s = &mm.mms[m as usize];
            assert_eq!(mm_s.rss + mm_s.swapents, PAGES as u64, "mm {m}");
        }
    });
}

#[test]
fn usemem_prealloc_populates_once_in_the_parent_and_each_worker_copies_every_page() {
    // usemem --prealloc --prefault, 2 workers, one sequential pass over 4M (1024 pages),
    // no limit: the parent's MAP_POPULATE faults each page once (1024) and marks it
    // accessed; each worker's first write to a page it shares with the parent copies it
    // (the parent keeps its mapping, so no worker is ever the only user): 2 * 1024. No
    // swap-in and no reclaim.
    let t = r#"
name = "prealloc"
seed = 1
duration = "10s"
[machine]
cpus = 4
memory_per_node = "1G"
[[workload]]
type = "usemem"
processes = 2
size = "4M"
prealloc = true
prefault = true
repeat = 1
"#;
    let r = run_toml(t, true);
    assert_eq!(r["vmstat"]["pgfault"], 1024 + 2 * 1024);
    assert_eq!(r["vmstat"]["pgmajfault"], 0);
    assert_eq!(r["vmstat"]["pgscan_anon"], 0);
    // The parent's populate and the workers' pass: 1024 + 2 * 1024 accesses.
    assert_eq!(r["workloads"][0]["accesses"], 3 * 1024);
}

/// Two threads of one child write page 0 at the same moment, on CPUs 0 and 1, while the
/// page is still shared with the parent. wp_page_copy allocates the copy before it takes
/// the page-table lock and checks pte_same(): the thread that finds the PTE already
/// replaced by the other's copy frees its page and lets the access fault again.
#[test]
fn of_two_threads_copying_one_page_at_once_one_maps_its_copy_and_the_other_retries() {
    let s = sim();
    let ids = Rc::new(std::cell::Cell::new((0, 0, 0)));
    let i2 = ids.clone();
    run(&s, move |s| async move {
        let parent = new_mm(&s);
        let child = new_mm(&s);
        s.handle_mm_fault(parent, 0, true).await;
        assert!(s.dup_mmap(parent, child).await);
        i2.set((parent, child, pfn_at(&s, parent, 0).unwrap()));
    });
    let (parent, child, old) = ids.get();
    let t = s.e.now();
    let faults = Rc::new(std::cell::RefCell::new(Vec::new()));
    for cpu in [0, 1] {
        let (s2, f2) = (s.clone(), faults.clone());
        s.e.spawn_tagged(t, cpu, child, async move {
            let f = s2.handle_mm_fault(child, 0, true).await;
            f2.borrow_mut().push(f);
        });
    }
    s.e.stop.set(false);
    s.e.run_until(t + 10_000_000, 1 << 20, &mut |_| true);
    let mut faults = faults.borrow().clone();
    faults.sort_by_key(|f| format!("{f:?}"));
    assert_eq!(faults, vec![Fault::Minor, Fault::Retry { major: false }]);
    let copy = pfn_at(&s, child, 0).expect("the child maps its copy");
    assert_ne!(copy, old);
    assert!(!s.mm.borrow().mms[child as usize].pte_wrprotected(0));
    assert_eq!(pfn_at(&s, parent, 0), Some(old));
    let mm = s.mm.borrow();
    // The old folio keeps the parent's mapping only; the child counts one page.
    assert_eq!(mm.folio_mapcount(old), 1);
    assert_eq!(mm.folio_mapcount(copy), 1);
    assert_eq!(mm.mms[child as usize].rss, 1);
    drop(mm);
    // The loser's page was freed: with both CPUs' batches drained, /a's lists hold the
    // old folio and the copy, and both are mapped (NR_ANON_MAPPED).
    for cpu in [0, 1] {
        let t = s.e.now();
        run_probe(&s, cpu, t, |s| async move { s.lru_add_drain().await });
    }
    assert_eq!(anon(&s), (2, 2));
}
