//! do_swap_page racing zap_pte_range: a munmap of the page while its swap-in read is in
//! flight. The kernel rechecks the PTE under the page-table lock after the read
//! (pte_same) and backs out when it changed; the fault must not map the folio into the
//! unmapped range nor drop the process's swap-entry count a second time.

//!
//! And its drain of the LRU batches: a write fault on a folio taken through the swap
//! cache that is not on an LRU (its read-in just queued it in this CPU's lru_add batch)
//! drains the batches first, so that the refcount check for exclusive ownership does not
//! count the batch's reference. Every such swap-in takes the lru_lock once, at
//! lru_add_drain_cpu. A read fault does not; nor does a swap-in from a synchronous device
//! (zram), which in the kernel skips the swap cache for an entry one process uses.
use reclaimsim_core::fixture::lru_add_drain_acquisitions;
use reclaimsim_core::mm::memory::Fault;
use reclaimsim_core::mm::mm_types::pte;
use reclaimsim_core::mm::MmStruct;
use reclaimsim_core::sim::Sim;
use reclaimsim_core::Scenario;
use std::cell::Cell;
use std::rc::Rc;

/// A machine with an SSD swap (asynchronous reads, 80 us) and no workload running (the
/// scenario's only one starts at 10 s; the tests run the engine for a few ms).
fn sim() -> Rc<Sim> {
    sim_on("ssd")
}

/// [`sim`] with swap on `device`.
fn sim_on(device: &str) -> Rc<Sim> {
    let t = format!(
        r#"
duration = "20s"
[machine]
cpus = 2
memory_per_node = "64M"
[machine.swap]
size = "64M"
device = "{device}"
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "4K"
start = "10s"
"#
    );
    Sim::build(&Scenario::from_toml(&t).unwrap()).unwrap()
}

/// A process of memcg /a (id 1) with page 0 swapped out (its slot holds a shadow).
fn swapped_out_process(s: &Sim) -> (u32, u32) {
    let mut mm = s.mm.borrow_mut();
    mm.mms.push(MmStruct::new(16, 1, 0, 0));
    let mmid = (mm.mms.len() - 1) as u32;
    let slot = mm.add_to_swap_cache(0, 0).unwrap();
    mm.swap_cache_set_shadow(slot, 0);
    mm.mms[mmid as usize].ptes[0] = pte::mk_swap(slot);
    mm.mms[mmid as usize].swapents = 1;
    mm.memcgs[1].swap_usage = 1;
    (mmid, slot)
}

/// A write fault on page 0 by a thread of `mmid` on CPU 0 at t=0; then its CPU's LRU
/// batches are drained (the folio of a swap-in goes to the lru_add batch before the read).
fn write_fault(s: &Rc<Sim>, mmid: u32) -> Rc<Cell<Option<Fault>>> {
    let fault = Rc::new(Cell::new(None));
    let (s2, f2) = (s.clone(), fault.clone());
    s.e.spawn_tagged(0, 0, mmid, async move {
        f2.set(Some(s2.handle_mm_fault(mmid, 0, true).await));
        s2.lru_add_drain().await;
    });
    fault
}

#[test]
fn a_munmap_during_the_swapin_read_makes_the_fault_back_out() {
    let s = sim();
    let (mmid, _) = swapped_out_process(&s);
    let fault = write_fault(&s, mmid);
    // 10 us later, while the 80 us read is in flight, another thread unmaps the page.
    {
        let s2 = s.clone();
        s.e.spawn_tagged(10_000, 1, mmid, async move {
            s2.zap_pte_range(mmid, 0, 1).await;
        });
    }
    s.e.run_until(1_000_000, 1 << 20, &mut |_| true);
    assert_eq!(fault.get(), Some(Fault::Retry { major: true }));
    let mm = s.mm.borrow();
    let m = &mm.mms[mmid as usize];
    // The zap dropped the one swap entry; the fault did not drop it again, nor map the
    // folio into the range that is gone.
    assert_eq!(m.swapents, 0);
    assert_eq!(m.ptes[0], 0);
    assert_eq!(m.rss, 0);
    // The slot and the folio read into it are freed.
    assert_eq!(mm.swap.as_ref().unwrap().nr_used(), 0);
    assert_eq!(mm.memcgs[1].swap_usage, 0);
    assert_eq!(
        mm.used_frames, 0,
        "the folio read for the gone PTE is freed"
    );
    mm.check_invariants().unwrap();
}

#[test]
fn without_a_munmap_the_swapin_maps_the_page() {
    let s = sim();
    let (mmid, _) = swapped_out_process(&s);
    let fault = write_fault(&s, mmid);
    s.e.run_until(1_000_000, 1 << 20, &mut |_| true);
    assert_eq!(fault.get(), Some(Fault::Major));
    let mm = s.mm.borrow();
    let m = &mm.mms[mmid as usize];
    assert_eq!(m.swapents, 0);
    assert!(pte::present(m.ptes[0]));
    assert_eq!(m.rss, 1);
    // A write fault frees the swap slot (should_try_to_free_swap).
    assert_eq!(mm.swap.as_ref().unwrap().nr_used(), 0);
    assert_eq!(mm.used_frames, 1);
}

fn drains(s: &Sim) -> u64 {
    lru_add_drain_acquisitions(s)
}

/// A fault on page 0 by a thread of the process on CPU 0; returns the fault's outcome,
/// whether the folio ended on an LRU (not in a batch), and the lru_lock acquisitions at
/// lru_add_drain_cpu.
fn swap_in(device: &str, write: bool) -> (Option<Fault>, bool, u64) {
    let s = sim_on(device);
    let (mmid, _) = swapped_out_process(&s);
    let fault = Rc::new(Cell::new(None));
    let (s2, f2) = (s.clone(), fault.clone());
    s.e.spawn_tagged(0, 0, mmid, async move {
        f2.set(Some(s2.handle_mm_fault(mmid, 0, write).await));
    });
    s.e.run_until(1_000_000, 1 << 20, &mut |_| true);
    let on_lru = {
        let mm = s.mm.borrow();
        let pfn = pte::pfn(mm.mms[mmid as usize].ptes[0]);
        mm.folio_test_lru(pfn)
    };
    (fault.get(), on_lru, drains(&s))
}

#[test]
fn a_write_swapin_from_a_disk_drains_the_batch_that_holds_its_folio() {
    assert_eq!(swap_in("ssd", true), (Some(Fault::Major), true, 1));
}

#[test]
fn a_read_swapin_leaves_its_folio_in_the_batch() {
    assert_eq!(swap_in("ssd", false), (Some(Fault::Major), false, 0));
}

#[test]
fn a_write_swapin_from_zram_does_not_drain() {
    assert_eq!(swap_in("zram", true), (Some(Fault::Major), false, 0));
}

/// A fault (`write` or read) on page 0 that finds its folio in the swap cache while the
/// folio is still in the lru_add batch: a read swap-in maps the folio and leaves it in the
/// swap cache and in the batch; its PTE then goes back to the swap entry (as try_to_unmap
/// leaves it), so the next fault is a minor one on a folio off the LRU. Returns that
/// fault's outcome, whether the folio ended on an LRU, and the acquisitions at
/// lru_add_drain_cpu.
fn cached_fault(write: bool) -> (Option<Fault>, bool, u64) {
    let s = sim_on("zram");
    let (mmid, _) = swapped_out_process(&s);
    let s2 = s.clone();
    s.e.spawn_tagged(0, 0, mmid, async move {
        s2.handle_mm_fault(mmid, 0, false).await;
    });
    s.e.run_until(1_000_000, 1 << 20, &mut |_| true);
    let pfn = {
        let mut mm = s.mm.borrow_mut();
        let pfn = pte::pfn(mm.mms[mmid as usize].ptes[0]);
        assert!(!mm.folio_test_lru(pfn), "the read leaves it in the batch");
        let slot = mm.pages[pfn as usize].private;
        let m = &mut mm.mms[mmid as usize];
        m.ptes[0] = pte::mk_swap(slot);
        m.rss -= 1;
        m.swapents += 1;
        pfn
    };
    let fault = Rc::new(Cell::new(None));
    let (s2, f2) = (s.clone(), fault.clone());
    s.e.spawn_tagged(2_000_000, 0, mmid, async move {
        f2.set(Some(s2.handle_mm_fault(mmid, 0, write).await));
    });
    s.e.run_until(3_000_000, 1 << 20, &mut |_| true);
    let on_lru = s.mm.borrow().folio_test_lru(pfn);
    (fault.get(), on_lru, drains(&s))
}

#[test]
fn a_write_fault_on_a_swap_cache_folio_still_in_the_batch_drains_it() {
    // Found in the swap cache: the drain applies on zram too.
    assert_eq!(cached_fault(true), (Some(Fault::Minor), true, 1));
}

#[test]
fn a_read_fault_on_a_swap_cache_folio_leaves_the_batch_alone() {
    assert_eq!(cached_fault(false), (Some(Fault::Minor), false, 0));
}

#[test]
fn folio_test_lru_of_a_batched_folio_follows_the_version() {
    use reclaimsim_core::mm::mm_types::{Page, PG_INBATCH, PG_LRU};
    use reclaimsim_core::mm::swap::folio_test_lru;
    use reclaimsim_core::versions::{KernelVersion, Rules};
    let with = |f: u16, rules: &Rules| {
        let mut p = Page::default();
        p.set(f);
        folio_test_lru(&p, rules)
    };
    let kept = Rules::of(KernelVersion::default());
    let mut cleared = kept;
    assert!(cleared.set("lru_batch_clears_pg_lru", true));
    // On a list: yes. Off every list (isolated, or in the lru_add batch): no. On a list
    // and queued for activation or rotation: yes in every modeled version, no in
    // 6.11-6.16, which cleared PG_lru at queueing.
    for rules in [&kept, &cleared] {
        assert!(with(PG_LRU, rules));
        assert!(!with(0, rules) && !with(PG_INBATCH, rules));
    }
    assert!(with(PG_LRU | PG_INBATCH, &kept));
    assert!(!with(PG_LRU | PG_INBATCH, &cleared));
}
