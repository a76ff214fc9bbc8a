//! The registry of random streams: every stream id a run (or a tool beside it) draws from,
//! in one place.
//!
//! A stream is `rng::stream(seed, id)`: the scenario seed and a stable id select a PCG
//! generator of its own (rng.rs), so adding a consumer never perturbs another's draws as
//! long as the ids differ. The workload tasks take the low ids, one per task in creation
//! order from [`FIRST_TASK_STREAM`] (workload/access.rs's `task_stream`, sim.rs's spawning);
//! the fixed consumers of a run count down from `u64::MAX`, far above any task count.
//!
//! Changing an id changes the draws and so the output of every run that uses it; the
//! values here are the ones the simulator has always used. Two of them are shared, which
//! [`tests::ids_are_distinct_except_the_documented_sharing`] pins down:
//!
//! - [`DAMON_STREAM`] equals [`MEMCG_LRU_STREAM`]: a DAMON trace replay on the multi-gen
//!   LRU draws its page offsets from a generator seeded like the memcg LRU's bins. The two
//!   are separate generators, so neither disturbs the other's sequence, but their draws are
//!   the same numbers. Giving DAMON an id of its own would change those runs' output.
//! - [`TRACE_GEN_STREAM`] and [`UNSEEDED_DEVICE_STREAM`] equal [`FIRST_TASK_STREAM`]: the
//!   first is drawn by `reclaimsim trace-gen`, a tool and not a run, and the second is a
//!   block device's placeholder before its run seeds it (with seed 0, never drawn from in a
//!   run), so neither meets a task's stream.

/// The first workload task's stream; task `k` (in creation order, workload by workload;
/// usemem process-major, then thread) draws from `FIRST_TASK_STREAM + k`: its accesses.
pub const FIRST_TASK_STREAM: u64 = 0;

/// The phase of the periodic memcg stats flush (sim.rs): where in its period it first runs.
pub const FLUSH_PHASE_STREAM: u64 = u64::MAX - 1;

/// MGLRU's memcg LRU bins (lru_gen/memcg_lru.rs: get_random_u32_below(MEMCG_NR_BINS) when a
/// memcg joins a generation, and where a global reclaim walk starts).
pub const MEMCG_LRU_STREAM: u64 = u64::MAX - 2;

/// A DAMON trace's replay (trace/damon.rs): the pages drawn within each accessed region.
/// The same id as [`MEMCG_LRU_STREAM`] (see the header).
pub const DAMON_STREAM: u64 = u64::MAX - 2;

/// The swap device's submitting CPU of each read (blkdev.rs's placement draw).
pub const SWAP_DEV_STREAM: u64 = u64::MAX - 3;

/// The file device's submitting CPU of each read (blkdev.rs's placement draw).
pub const FILE_DEV_STREAM: u64 = u64::MAX - 4;

/// refill_stock's victim of a full multi-memcg charge stock (memcontrol.rs:
/// get_random_u32_below(NR_MEMCG_STOCK), 6.16 to 6.18).
pub const MEMCG_STOCK_STREAM: u64 = u64::MAX - 5;

/// `reclaimsim trace-gen` (trace/oracle_general.rs): the permutation of object ids of a
/// generated trace, with the seed given to the tool. Not a run's stream.
pub const TRACE_GEN_STREAM: u64 = 0;

/// A block device's placement draws before its run seeds them (`BlockDevice::new`, with
/// seed 0); replaced by [`SWAP_DEV_STREAM`] or [`FILE_DEV_STREAM`] in a run.
pub const UNSEEDED_DEVICE_STREAM: u64 = 0;

/// Every fixed stream id, by name.
pub const ALL: [(&str, u64); 9] = [
    ("FIRST_TASK_STREAM", FIRST_TASK_STREAM),
    ("FLUSH_PHASE_STREAM", FLUSH_PHASE_STREAM),
    ("MEMCG_LRU_STREAM", MEMCG_LRU_STREAM),
    ("DAMON_STREAM", DAMON_STREAM),
    ("SWAP_DEV_STREAM", SWAP_DEV_STREAM),
    ("FILE_DEV_STREAM", FILE_DEV_STREAM),
    ("MEMCG_STOCK_STREAM", MEMCG_STOCK_STREAM),
    ("TRACE_GEN_STREAM", TRACE_GEN_STREAM),
    ("UNSEEDED_DEVICE_STREAM", UNSEEDED_DEVICE_STREAM),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_except_the_documented_sharing() {
        // The groups of names that share an id, as the header documents.
        let shared: [&[&str]; 2] = [
            &["MEMCG_LRU_STREAM", "DAMON_STREAM"],
            &[
                "FIRST_TASK_STREAM",
                "TRACE_GEN_STREAM",
                "UNSEEDED_DEVICE_STREAM",
            ],
        ];
        let group = |n: &str| shared.iter().position(|g| g.contains(&n));
        for (i, &(a, x)) in ALL.iter().enumerate() {
            for &(b, y) in &ALL[i + 1..] {
                let same_group = group(a).is_some() && group(a) == group(b);
                assert_eq!(x == y, same_group, "{a} = {x}, {b} = {y}");
            }
        }
        // The values runs have always used (changing one changes their output).
        assert_eq!(FLUSH_PHASE_STREAM, u64::MAX - 1);
        assert_eq!(MEMCG_LRU_STREAM, u64::MAX - 2);
        assert_eq!(SWAP_DEV_STREAM, u64::MAX - 3);
        assert_eq!(FILE_DEV_STREAM, u64::MAX - 4);
        assert_eq!(MEMCG_STOCK_STREAM, u64::MAX - 5);
        assert_eq!(FIRST_TASK_STREAM, 0);
        // The fixed streams of a run lie above any task's (a run has fewer than 2^32 tasks).
        let lowest_fixed = [
            FLUSH_PHASE_STREAM,
            MEMCG_LRU_STREAM,
            SWAP_DEV_STREAM,
            FILE_DEV_STREAM,
            MEMCG_STOCK_STREAM,
        ];
        assert!(lowest_fixed
            .iter()
            .all(|&s| s > FIRST_TASK_STREAM + u32::MAX as u64));
    }
}
