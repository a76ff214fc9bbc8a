//! Population through get_user_pages (mm/gup.rs): MAP_POPULATE's FOLL_TOUCH.
//!
//! Expectations follow the kernel's rules, counted by hand: a populated page is faulted
//! in (young PTE) and its folio marked accessed (PG_referenced), so the first reference
//! check activates it (folio_check_references: referenced_ptes = 1 and the folio was
//! referenced); a page only written by its process has the young PTE alone and gets one
//! more trip round the inactive list (FOLIOREF_KEEP, with PG_referenced now set).
use reclaimsim_core::fixture::{one_node_machine, run_probe, run_toml};
use reclaimsim_core::mm::mm_types::{pte, PG_ACTIVE, PG_REFERENCED};
use reclaimsim_core::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON};
use reclaimsim_core::mm::vmscan::ScanControl;
use reclaimsim_core::mm::vmstat::VmEvent;
use reclaimsim_core::mm::MmStruct;
use reclaimsim_core::sim::Sim;
use std::rc::Rc;

const A: u16 = 1;

/// A machine with zram swap and memcg /a, and process `mmid` of 32 pages in /a whose
/// pages 0..16 were populated (fault + FOLL_TOUCH) and 16..32 written by the process.
fn populated_and_touched() -> (Rc<Sim>, u32) {
    let s = one_node_machine("64M", Some("64M"), "");
    let mmid = {
        let mut mm = s.mm.borrow_mut();
        mm.mms.push(MmStruct::new(32, A, 0, 0));
        (mm.mms.len() - 1) as u32
    };
    run_probe(&s, 0, 0, move |s| async move {
        for vpn in 0..32 {
            s.handle_mm_fault(mmid, vpn, true).await;
            if vpn < 16 {
                s.follow_page_touch(mmid, vpn).await;
            }
        }
        s.lru_add_drain().await;
    });
    (s, mmid)
}

fn pfns(s: &Sim, mmid: u32, vpns: std::ops::Range<u32>) -> Vec<u32> {
    let mm = s.mm.borrow();
    vpns.map(|v| pte::pfn(mm.mms[mmid as usize].ptes[v as usize]))
        .collect()
}

#[test]
fn population_marks_the_folio_referenced_and_a_write_does_not() {
    let (s, mmid) = populated_and_touched();
    let mm = s.mm.borrow();
    let flags = |v: u32| {
        let p = mm.pages[pte::pfn(mm.mms[mmid as usize].ptes[v as usize]) as usize];
        p.flags & (PG_REFERENCED | PG_ACTIVE)
    };
    // folio_mark_accessed's first call on a folio: PG_referenced only, no activation.
    assert!((0..16).all(|v| flags(v) == PG_REFERENCED));
    assert!((16..32).all(|v| flags(v) == 0));
}

#[test]
fn the_first_reference_check_activates_a_populated_page_and_keeps_a_written_one() {
    let (s, mmid) = populated_and_touched();
    let lv = s.mm.borrow().lruvec_of(A, 0);
    run_probe(&s, 0, 0, move |s| async move {
        let mut sc = ScanControl::new(32, Some(A), false);
        sc.priority = 0;
        s.shrink_lruvec(lv, &mut sc).await;
    });
    let mm = s.mm.borrow();
    // Swap and no file pages: anon only, the 32 inactive anon folios in one chunk.
    assert_eq!(mm.events[VmEvent::PgscanAnon as usize], 32);
    assert_eq!(mm.events[VmEvent::PgstealAnon as usize], 0);
    assert_eq!(mm.events[VmEvent::Pgactivate as usize], 16);
    assert_eq!(mm.lruvecs[lv as usize].nr[LRU_ACTIVE_ANON], 16);
    assert_eq!(mm.lruvecs[lv as usize].nr[LRU_INACTIVE_ANON], 16);
    drop(mm);
    let (populated, written) = (pfns(&s, mmid, 0..16), pfns(&s, mmid, 16..32));
    let mm = s.mm.borrow();
    assert!(populated
        .iter()
        .all(|&p| mm.pages[p as usize].test(PG_ACTIVE)));
    // FOLIOREF_KEEP: the young PTE sets PG_referenced for the next trip.
    assert!(written
        .iter()
        .all(|&p| mm.pages[p as usize].flags & (PG_ACTIVE | PG_REFERENCED) == PG_REFERENCED));
}

/// Four processes of 16M each under a 32M limit, zram swap, populated (MAP_POPULATE) or
/// not, for 300 ms: the number of OOM kills.
fn oom_kills_of_four_areas(prefault: bool) -> usize {
    let t = format!(
        r#"
name = "populate-over-limit"
seed = 1
duration = "300ms"
[machine]
cpus = 4
memory_per_node = "4G"
[machine.swap]
size = "1G"
device = "zram"
[[cgroup]]
path = "/w"
memory.max = "32M"
[[workload]]
type = "usemem"
cgroup = "/w"
processes = 4
size = "16M"
prefault = {prefault}
random = true
repeat = 1
"#
    );
    run_toml(&t, true)["oom_kills"].as_array().unwrap().len()
}

#[test]
fn populating_four_areas_over_the_limit_oom_kills_and_writing_them_does_not() {
    // This machine's kernel (6.18, cgroup v1, scripts/fork-cow/run.sh private 16 4 32 on a
    // swap file): one OOM kill in each of 3 runs. Every populated page is activated at its
    // first reference check, the inactive list runs empty, and shrink_lruvec's aging of
    // the active list waits on the memcg's flushed statistics (inactive_is_low), which
    // populating at fault speed outruns. The kill's report flushes them (dump_header), so
    // reclaim then ages the active list and the other three swap. Faulted in by the
    // random writes instead, the pages get one more trip on the inactive list and are
    // swapped from the start.
    assert_eq!(oom_kills_of_four_areas(true), 1);
    assert_eq!(oom_kills_of_four_areas(false), 0);
}
