//! The cost of memcg statistics updates (seed 004, mm/memcontrol.rs memcg_stat_update):
//! the spill arithmetic of each era's scheme, the cache lines the counter items share, the
//! LRU-size updates list operations make under lru_lock, and the warmup that will-it-scale
//! discards from a workload's rate.

use reclaimsim_core::fixture::run_probe;
use reclaimsim_core::mm::memcontrol::StatKind;
use reclaimsim_core::sim::Sim;
use reclaimsim_core::Scenario;
use std::rc::Rc;

/// /a/b/c: its ancestors are c, b, a and the root.
const C: u16 = 3;
const STAT_UPDATE: u64 = 10;
const ATOMIC: u64 = 100;
const TRANSFER: u64 = 1000;
const REMOTE: u64 = 3000;

fn machine(scheme: &str) -> Rc<Sim> {
    machine_with(scheme, STAT_UPDATE)
}

fn machine_with(scheme: &str, stat_update: u64) -> Rc<Sim> {
    machine_lru(scheme, stat_update, "classic")
}

fn machine_lru(scheme: &str, stat_update: u64, lru: &str) -> Rc<Sim> {
    machine_nodes(scheme, stat_update, lru, 1)
}

fn machine_nodes(scheme: &str, stat_update: u64, lru: &str, nodes: u32) -> Rc<Sim> {
    let t = format!(
        r#"
duration = "1000s"
[machine]
cpus = 4
nodes = {nodes}
memory_per_node = "64M"
[kernel]
memcg_flush_phase = "1.9s"
lru = "{lru}"
[variants]
memcg_stats = "{scheme}"
[costs]
stat_update = {stat_update}
atomic_rmw = {ATOMIC}
cacheline_transfer = {TRANSFER}
cacheline_transfer_remote = {REMOTE}
[[cgroup]]
path = "/a"
[[cgroup]]
path = "/a/b"
[[cgroup]]
path = "/a/b/c"
[[workload]]
type = "usemem"
cgroup = "/a/b/c"
size = "4K"
start = "900s"
"#
    );
    Sim::build(&Scenario::from_toml(&t).unwrap()).unwrap()
}

/// folios_put_refs() of set-up folios whose mappings are gone: only the LRU holds them.
async fn put_last_refs(s: &Rc<Sim>, pfns: &[u32]) {
    {
        let mut mm = s.mm.borrow_mut();
        for &p in pfns {
            mm.pages[p as usize].clear(reclaimsim_core::mm::mm_types::PG_OWNED);
        }
    }
    s.folios_put_refs(pfns).await
}

/// `n` updates of +1 to `kind` of /a/b/c on `cpu` at `at`; their duration.
fn updates(s: &Rc<Sim>, cpu: u32, at: u64, kind: StatKind, n: u64) -> u64 {
    updates_on(s, cpu, at, 0, kind, n)
}

/// [`updates`] of the lruvec of /a/b/c on node `nid`.
fn updates_on(s: &Rc<Sim>, cpu: u32, at: u64, nid: u32, kind: StatKind, n: u64) -> u64 {
    let end = run_probe(s, cpu, at, move |s| async move {
        for _ in 0..n {
            s.memcg_stat_update(C, nid, kind, 1);
        }
    });
    end - at
}

#[test]
fn a_batch_spills_past_32_into_the_local_and_every_ancestors_atomic() {
    // 42a300353577's __mod_memcg_state: the 33rd update makes |x| = 33 > MEMCG_CHARGE_BATCH
    // and spills into the memcg's local atomic and the hierarchical atomics of c, b, a and
    // the root: 5 atomics per counter family; a state item is a memcg and a lruvec counter.
    let cold = 33 * STAT_UPDATE;
    let s = machine("batched_local");
    assert_eq!(
        updates(&s, 0, 1_000_000, StatKind::FileMapped, 32),
        32 * STAT_UPDATE
    );
    let s = machine("batched_local");
    assert_eq!(
        updates(&s, 0, 1_000_000, StatKind::FileMapped, 33),
        cold + 10 * ATOMIC
    );
    // An event (PGFAULT) is a memcg counter only.
    let s = machine("batched_local");
    assert_eq!(
        updates(&s, 0, 1_000_000, StatKind::Pgfault, 33),
        cold + 5 * ATOMIC
    );
    // The fix keeps the local counter per CPU: only the 4 hierarchical atomics per family.
    let s = machine("percpu_local");
    assert_eq!(
        updates(&s, 0, 1_000_000, StatKind::FileMapped, 33),
        cold + 8 * ATOMIC
    );
    // rstat: 64 updates before stats_updates of each of the 4 levels is written.
    let s = machine("rstat");
    assert_eq!(
        updates(&s, 0, 1_000_000, StatKind::FileMapped, 63),
        63 * STAT_UPDATE
    );
    let s = machine("rstat");
    assert_eq!(
        updates(&s, 0, 1_000_000, StatKind::FileMapped, 64),
        64 * STAT_UPDATE + 4 * ATOMIC
    );
}

#[test]
fn items_share_a_line_only_where_the_kernels_arrays_put_them_together() {
    let s = machine("batched_local");
    let cold = 33 * STAT_UPDATE;
    // CPU 0 spills NR_FILE_MAPPED and NR_INACTIVE_FILE.
    updates(&s, 0, 1_000_000, StatKind::FileMapped, 33);
    updates(&s, 0, 2_000_000, StatKind::LruInactiveFile, 33);
    // PGFAULT's lines are its own: CPU 1 takes them cold.
    assert_eq!(
        updates(&s, 1, 3_000_000, StatKind::Pgfault, 33),
        cold + 5 * ATOMIC
    );
    // NR_ACTIVE_FILE sits next to NR_INACTIVE_FILE (the first node_stat_items): each of
    // the 10 lines CPU 1 writes was CPU 0's.
    assert_eq!(
        updates(&s, 1, 4_000_000, StatKind::LruActiveFile, 33),
        cold + 10 * (TRANSFER + ATOMIC)
    );
    // NR_FILE_MAPPED again, now from CPU 1: the same 10 lines move.
    assert_eq!(
        updates(&s, 1, 5_000_000, StatKind::FileMapped, 33),
        cold + 10 * (TRANSFER + ATOMIC)
    );
    // PGPGIN and NR_ANON_MAPPED have lines of their own too: CPU 2 takes them cold, where
    // the LRU sizes' and NR_FILE_MAPPED's lines are CPU 1's now.
    assert_eq!(
        updates(&s, 2, 6_000_000, StatKind::Pgpgin, 33),
        cold + 5 * ATOMIC
    );
    assert_eq!(
        updates(&s, 2, 7_000_000, StatKind::AnonMapped, 33),
        cold + 10 * ATOMIC
    );
    // PGPGOUT is PGPGIN's neighbour (the first two vm_event_items).
    assert_eq!(
        updates(&s, 3, 8_000_000, StatKind::Pgpgout, 33),
        cold + 5 * (TRANSFER + ATOMIC)
    );
}

#[test]
fn lruvec_counters_spill_into_the_lines_of_their_nodes_lruvecs() {
    // Two nodes, CPUs 0-1 on node 0 and 2-3 on node 1. A state item spills into the
    // memcg's lines (struct mem_cgroup, one per cgroup) and into those of the lruvec of
    // the page's node (struct mem_cgroup_per_node), whose hierarchical walk goes up the
    // ancestors' lruvecs of that node (parent_nodeinfo).
    let s = machine_nodes("batched_local", STAT_UPDATE, "classic", 2);
    let cold = 33 * STAT_UPDATE;
    assert_eq!(
        updates_on(&s, 0, 1_000_000, 0, StatKind::FileMapped, 33),
        cold + 10 * ATOMIC
    );
    // Node 1's CPU 2 on node 1's lruvec: the memcg's 5 lines come from node 0, the
    // lruvec's 5 (c, b, a and the root's lruvecs of node 1) are cold.
    assert_eq!(
        updates_on(&s, 2, 2_000_000, 1, StatKind::FileMapped, 33),
        cold + 5 * (REMOTE + ATOMIC) + 5 * ATOMIC
    );
    // CPU 1, back on node 0: the memcg's lines are on node 1 now, node 0's lruvec lines
    // are still CPU 0's.
    assert_eq!(
        updates_on(&s, 1, 3_000_000, 0, StatKind::FileMapped, 33),
        cold + 5 * (REMOTE + ATOMIC) + 5 * (TRANSFER + ATOMIC)
    );
    // CPU 3 on node 1: the memcg's lines come from CPU 1 on node 0 again, node 1's
    // lruvec lines from CPU 2 on its own node.
    assert_eq!(
        updates_on(&s, 3, 4_000_000, 1, StatKind::FileMapped, 33),
        cold + 5 * (REMOTE + ATOMIC) + 5 * (TRANSFER + ATOMIC)
    );
    // Each node's lruvec has its own per-CPU batch (lruvec_stat_cpu): 20 updates on node
    // 0's lruvec and 13 on node 1's bring the memcg's batch to 33 (5 atomics), neither
    // lruvec's.
    let s = machine_nodes("batched_local", STAT_UPDATE, "classic", 2);
    let took = updates_on(&s, 0, 1_000_000, 0, StatKind::FileMapped, 20)
        + updates_on(&s, 0, 2_000_000, 1, StatKind::FileMapped, 13);
    assert_eq!(took, cold + 5 * ATOMIC);
}

#[test]
fn list_operations_update_the_lru_size_inside_the_lock_hold() {
    // Two lru_add drains on one CPU, of 20 and 13 new anon folios: update_lru_size
    // (NR_INACTIVE_ANON) reaches 33 in the second hold and spills; batched_local writes 2
    // more atomics there (the memcg's and the lruvec's local counters) than percpu_local.
    let drains = |scheme: &str| {
        let s = machine(scheme);
        let (_, pfns) = s.fixture_anon_folios(C, 0, 33, false, 0);
        let mut took = Vec::new();
        for (batch, at) in [(0..20, 1_000_000), (20..33, 2_000_000)] {
            s.fixture_to_lru_add_batch(0, &pfns[batch]);
            let end = run_probe(&s, 0, at, |s| async move { s.lru_add_drain().await });
            took.push(end - at);
        }
        took
    };
    let (a, b) = (drains("batched_local"), drains("percpu_local"));
    assert_eq!(a[0], b[0], "no spill in the first hold: {a:?} {b:?}");
    assert_eq!(a[1] - b[1], 2 * ATOMIC, "{a:?} {b:?}");
}

#[test]
fn freeing_folios_takes_them_off_the_lru_size() {
    // 20 folios added (NR_INACTIVE_ANON +20 on CPU 0's batch) then freed off the LRU by
    // folios_put_refs on the same CPU: the -20 brings the per-CPU delta back to 0, so no
    // spill in either scheme, and the two schemes cost the same. (Counted the wrong way,
    // the delta would reach 40 and batched_local would write 2 more atomics.)
    let run = |scheme: &str| {
        let s = machine(scheme);
        let (_, pfns) = s.fixture_anon_folios(C, 0, 20, false, 0);
        s.fixture_to_lru_add_batch(0, &pfns);
        run_probe(&s, 0, 1_000_000, |s| async move { s.lru_add_drain().await });
        let end = run_probe(&s, 0, 2_000_000, move |s| async move {
            put_last_refs(&s, &pfns).await
        });
        end - 2_000_000
    };
    assert_eq!(run("batched_local"), run("percpu_local"));
}

#[test]
fn a_hold_updates_the_lru_size_once_per_run_of_one_list() {
    // The number of update calls a hold makes, from the time they take at two per-update
    // costs. An lru_add drain of 20 folios: one summed NR_INACTIVE_ANON update
    // (update_lru_sizes-like). An activation drain of 10: each folio leaves the inactive
    // list and joins the active one, alternating items, so 20 updates.
    let calls = |activate: bool| {
        let took = |cost: u64| {
            let s = machine_with("percpu_local", cost);
            let (_, pfns) = s.fixture_anon_folios(C, 0, if activate { 10 } else { 20 }, false, 0);
            if !activate {
                s.fixture_to_lru_add_batch(0, &pfns);
            }
            let end = run_probe(&s, 0, 1_000_000, move |s| async move {
                if activate {
                    for &p in &pfns {
                        s.folio_activate(p).await;
                    }
                }
                s.lru_add_drain().await
            });
            end - 1_000_000
        };
        (took(1010) - took(10)) / 1000
    };
    assert_eq!(calls(false), 1);
    assert_eq!(calls(true), 20);
}

#[test]
fn freeing_a_run_of_one_memcgs_folios_is_one_lru_size_and_one_pgpgout_update() {
    // folios_put_refs of 20 LRU folios of /a/b/c: the lock hold's NR_INACTIVE_ANON -20, then
    // uncharge_batch's PGPGOUT +20 after it: two update calls.
    let took = |cost: u64| {
        let s = machine_with("percpu_local", cost);
        let (_, pfns) = s.fixture_anon_folios(C, 0, 20, false, 0);
        let end = run_probe(&s, 0, 1_000_000, move |s| async move {
            put_last_refs(&s, &pfns).await
        });
        end - 1_000_000
    };
    assert_eq!((took(1010) - took(10)) / 1000, 2);
}

#[test]
fn each_cpu_memcg_and_item_batches_on_its_own() {
    // 20 + 13 updates spill when they meet in one per-CPU batch (33 > 32), and not when
    // they are split between two CPUs, two items or two memcgs.
    let s = machine("batched_local");
    updates(&s, 0, 1_000_000, StatKind::FileMapped, 20);
    assert_eq!(
        updates(&s, 1, 2_000_000, StatKind::FileMapped, 13),
        13 * STAT_UPDATE
    );
    assert_eq!(
        updates(&s, 0, 3_000_000, StatKind::AnonMapped, 13),
        13 * STAT_UPDATE
    );
    let in_b = run_probe(&s, 0, 4_000_000, |s| async move {
        for _ in 0..13 {
            s.memcg_stat_update(C - 1, 0, StatKind::FileMapped, 1);
        }
    });
    assert_eq!(in_b - 4_000_000, 13 * STAT_UPDATE);
    // The same CPU, item and memcg: the 33rd spills (10 atomics, lines cold).
    assert_eq!(
        updates(&s, 0, 5_000_000, StatKind::FileMapped, 13),
        13 * STAT_UPDATE + 10 * ATOMIC
    );
}

/// `n` updates of +1 to `kind` of memcg `m` on `cpu` at `at`; their duration.
fn updates_of(s: &Rc<Sim>, m: u16, cpu: u32, at: u64, kind: StatKind, n: u64) -> u64 {
    let end = run_probe(s, cpu, at, move |s| async move {
        for _ in 0..n {
            s.memcg_stat_update(m, 0, kind, 1);
        }
    });
    end - at
}

#[test]
fn no_two_cpu_memcg_item_triples_share_a_batch() {
    // Pairs of (CPU, memcg, item) that sit next to each other in the per-CPU arrays: /a/b
    // on CPU 1 and /a/b/c on CPU 0; /a/b/c's NR_FILE_MAPPED and /a/b's NR_INACTIVE_ANON on
    // one CPU. Below the batch each, together above it: no update may spill.
    const B: u16 = C - 1;
    let s = machine("batched_local");
    updates_of(&s, B, 1, 1_000_000, StatKind::FileMapped, 20);
    assert_eq!(
        updates_of(&s, C, 0, 2_000_000, StatKind::FileMapped, 13),
        13 * STAT_UPDATE
    );
    let s = machine("batched_local");
    updates_of(&s, C, 0, 1_000_000, StatKind::FileMapped, 20);
    assert_eq!(
        updates_of(&s, B, 0, 2_000_000, StatKind::LruInactiveAnon, 13),
        13 * STAT_UPDATE
    );
    // The root's counters on CPU 0, the first batch of all.
    assert_eq!(
        updates_of(&s, 0, 0, 3_000_000, StatKind::FileMapped, 1),
        STAT_UPDATE
    );
    // rstat's per-CPU update counts, 64 to a flush: 40 + 30 split the same ways, and
    // between two CPUs of one memcg.
    let s = machine("rstat");
    updates_of(&s, C, 1, 500_000, StatKind::FileMapped, 40);
    updates_of(&s, B, 0, 700_000, StatKind::FileMapped, 40);
    updates_of(&s, B, 1, 1_000_000, StatKind::FileMapped, 40);
    assert_eq!(
        updates_of(&s, C, 0, 2_000_000, StatKind::FileMapped, 30),
        30 * STAT_UPDATE
    );
    // One CPU and memcg: the 64th update flushes into the 4 levels' stats_updates.
    assert_eq!(
        updates_of(&s, C, 0, 3_000_000, StatKind::Pgfault, 34),
        34 * STAT_UPDATE + 4 * ATOMIC
    );
}

#[test]
fn with_mglru_a_folio_leaves_the_lru_size_it_joined() {
    // MGLRU: a new folio joins the youngest generation (an active one), and
    // lru_gen_del_folio leaves PG_active on it; the add and the delete must still update
    // one item. Two cycles of 20 folios added and freed on one CPU keep the LRU size's
    // per-CPU delta at 0 or 20: no spill. Only PGPGOUT (an event: 20, then 40) spills in
    // the second cycle, where batched_local writes its local atomic too. (Counted on two
    // items, the inactive size would reach 40 and spill: 2 more atomics.)
    let cycles = |scheme: &str| {
        let s = machine_lru(scheme, STAT_UPDATE, "mglru");
        let mut took = 0;
        for (i, at) in [1_000_000u64, 3_000_000].into_iter().enumerate() {
            let (_, pfns) = s.fixture_anon_folios(C, 0, 20, false, 0);
            s.fixture_to_lru_add_batch(0, &pfns);
            let pf = pfns.clone();
            let mid = run_probe(&s, 0, at, |s| async move { s.lru_add_drain().await });
            let end = run_probe(&s, 0, at + 1_000_000, move |s| async move {
                put_last_refs(&s, &pf).await
            });
            if i == 1 {
                took = (mid - at) + (end - at - 1_000_000);
            }
        }
        took
    };
    assert_eq!(cycles("batched_local") - cycles("percpu_local"), ATOMIC);
}

#[test]
fn unmapping_takes_pages_off_the_mapped_counters() {
    // 20 pages mapped on CPU 0 (their faults' +20 to NR_ANON_MAPPED or NR_FILE_MAPPED),
    // then unmapped there by zap_pte_range: the -20 brings the per-CPU deltas back to 0,
    // so no spill in either scheme and both cost the same. (Counted the wrong way the
    // delta would reach 40, past 32, and batched_local would write 2 more atomics.)
    use reclaimsim_core::fixture::{Mapped, MAPPED_FILE_BASE};
    let run = |scheme: &str, file: bool| {
        let s = machine(scheme);
        let (mmid, lo, kind) = if file {
            let how = Mapped {
                exec: false,
                mappers: 1,
                young: false,
            };
            let (_, mms, _) = s.fixture_mapped_file_folios(C, 0, 20, how, 0);
            (mms[0], MAPPED_FILE_BASE, StatKind::FileMapped)
        } else {
            let (mmid, _) = s.fixture_anon_folios(C, 0, 20, true, 0);
            (mmid, 0, StatKind::AnonMapped)
        };
        let end = run_probe(&s, 0, 1_000_000, move |s| async move {
            s.memcg_stat_update(C, 0, kind, 20);
            s.zap_pte_range(mmid, lo, lo + 20).await;
        });
        end - 1_000_000
    };
    for file in [false, true] {
        assert_eq!(
            run("batched_local", file),
            run("percpu_local", file),
            "file {file}"
        );
    }
}

#[test]
fn folios_put_refs_frees_after_dropping_the_lru_lock() {
    // folios_put_refs unlinks each LRU folio under lru_lock and frees the batch
    // (mem_cgroup_uncharge_folios, free_unref_folios) once the lock is dropped: a dearer
    // page free lengthens the call by its cost per folio, and the lock's hold not at all.
    let run = |page_free: u64| {
        let t = format!(
            "duration = \"1000s\"\n[machine]\ncpus = 2\nmemory_per_node = \"64M\"\n\
             [costs]\npage_free = {page_free}\n[[cgroup]]\npath = \"/a\"\n\
             [[workload]]\ntype = \"usemem\"\ncgroup = \"/a\"\nsize = \"4K\"\nstart = \"900s\"\n"
        );
        let s = Sim::build(&Scenario::from_toml(&t).unwrap()).unwrap();
        let (_, pfns) = s.fixture_anon_folios(1, 0, 20, false, 0);
        let end = run_probe(&s, 0, 1_000_000, move |s| async move {
            put_last_refs(&s, &pfns).await
        });
        let hold =
            s.e.lock_stats()
                .iter()
                .find(|x| x.1 == reclaimsim_core::engine::Site::FoliosPutRefs)
                .map(|x| (x.2.acquisitions, x.2.total_hold))
                .expect("folios_put_refs took the lru_lock");
        (end - 1_000_000, hold)
    };
    let (took, (n, hold)) = run(80);
    let (took_dear, (n_dear, hold_dear)) = run(1080);
    assert_eq!((n, n_dear), (1, 1), "one hold for one lruvec's run of 20");
    assert_eq!(hold_dear, hold, "the frees are outside the hold");
    assert_eq!(
        took_dear - took,
        20 * 1000,
        "each of the 20 frees costs page_free"
    );
}

#[test]
fn an_unmap_frees_its_folios_a_folio_batch_per_lru_lock_hold() {
    // free_pages_and_swap_cache fills a folio_batch (31) and hands each full one, and the
    // rest, to folios_put_refs: 100 folios of one lruvec take the lock 4 times (31, 31,
    // 31, 7), not once for the whole range.
    use reclaimsim_core::engine::Site;
    use reclaimsim_core::mm::MmStruct;
    let s = machine("percpu_local");
    let mmid = s.mm.borrow_mut().mm_alloc(MmStruct::new(100, C, 0, 0));
    run_probe(&s, 0, 1_000_000, move |s| async move {
        for vpn in 0..100 {
            s.handle_mm_fault(mmid, vpn, true).await;
        }
        s.lru_add_drain().await;
        s.zap_pte_range(mmid, 0, 100).await;
    });
    let puts =
        s.e.lock_stats()
            .iter()
            .filter(|x| x.1 == Site::FoliosPutRefs)
            .map(|x| x.2.acquisitions)
            .sum::<u64>();
    assert_eq!(puts, 4);
}

#[test]
fn a_root_charge_takes_no_stock_and_writes_no_counter_line() {
    // try_charge() returns at once for the root memcg: /a/b/c's first page charges a
    // batch of MEMCG_CHARGE_BATCH (64) up the hierarchy and stocks 63 on the CPU; a root
    // task's page on the same CPU then leaves that stock alone (a charge of its own
    // would refill the stock with the root's remainder, draining /a/b/c's) and costs no
    // counter-line write: no time at all.
    let s = machine("percpu_local");
    let root_before = s.mm.borrow().memcgs[0].usage;
    let took = |s: &Rc<Sim>, m: u16, at: u64| {
        run_probe(s, 0, at, move |s| async move {
            assert!(s.try_charge_memcg(m, 1).await);
        }) - at
    };
    took(&s, C, 1_000_000);
    assert_eq!(s.mm.borrow().stocked(C), 63);
    assert_eq!(took(&s, 0, 2_000_000), 0);
    let mm = s.mm.borrow();
    assert_eq!(mm.stocked(C), 63, "the root's charge left /a/b/c's stock");
    assert_eq!(mm.stocked(0), 0);
    assert_eq!(
        mm.memcgs[0].usage,
        root_before + 64 + 1,
        "the batch, and the one page"
    );
}
