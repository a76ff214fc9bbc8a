//! SMT siblings: what a hardware thread loses when the other thread of its core runs.
//!
//! Two hardware threads of one core share its execution units, caches and the line buffers
//! that a cache-line transfer goes through. A host profile with more CPUs than cores (seed
//! 004's full scale runs 192 processes on 96 cores of four sockets) gives each process a
//! hardware thread, not a core, so how much slower one runs beside a busy sibling, and how
//! cheap a line is between siblings, are hardware figures the model would need. These
//! benchmarks measure them where the host has siblings (sysfs' thread_siblings_list):
//!
//! - `smt_alu_alone` / `smt_alu_shared`: an integer loop with independent operations (port
//!   bound) on one sibling while the other idles, then on both at once: ns per iteration
//!   of each thread. Their ratio is the slowdown of code limited by execution units.
//! - `smt_chase_alone` / `smt_chase_shared`: a dependent pointer chase through a random
//!   cycle of 8 MiB per thread (latency bound, as reclaim's walks over cold struct pages
//!   are), alone and beside the sibling's own chase.
//! - `cacheline_transfer_smt`: the ping-pong of `cacheline_transfer`, between two siblings
//!   of one core (the line stays in the core's own caches).
//! - `contended_line_1_cores`: `contended_line_1` with one thread per core, to set beside
//!   the figure with every hardware thread.
//!
//! `cacheline_transfer_smt` is a cost-table entry (what a line between the threads of one
//! core costs where a scenario has `machine.threads_per_core` > 1, engine/coherence.rs in
//! the core crate); the others are kept as checks in the profile, since the model's
//! siblings share no execution units. A host without siblings gives none.

use crate::affinity;
use crate::calibrate::{
    figure, lines_in_turn, median_spread, on_two_cpus, pingpong, repeat, spin_until, Figure, Line,
    Sizes, SPIN_LIMIT,
};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Parse a sysfs CPU list ("0,48" or "0-1"); None when malformed.
pub fn parse_cpulist(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (u32, u32) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
        if hi < lo {
            return None;
        }
        out.extend(lo..=hi);
    }
    Some(out)
}

/// The sibling sets of `cpus` as sysfs gives them: for each CPU its core's hardware
/// threads, keeping those in `cpus`; each core once, in the order of its first CPU.
pub fn cores_of(cpus: &[u32], siblings: impl Fn(u32) -> Option<Vec<u32>>) -> Vec<Vec<u32>> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for &c in cpus {
        if seen.contains(&c) {
            continue;
        }
        let mut core: Vec<u32> = siblings(c)
            .unwrap_or_else(|| vec![c])
            .into_iter()
            .filter(|s| cpus.contains(s))
            .collect();
        if !core.contains(&c) {
            core.push(c);
        }
        core.sort_unstable();
        seen.extend(core.iter().copied());
        out.push(core);
    }
    out
}

fn sysfs_siblings(cpu: u32) -> Option<Vec<u32>> {
    let p = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
    parse_cpulist(&std::fs::read_to_string(p).ok()?)
}

/// This host's cores among the CPUs this process may use.
pub fn host_cores(cpus: &[u32]) -> Vec<Vec<u32>> {
    cores_of(cpus, sysfs_siblings)
}

/// `n` iterations of an integer loop of independent operations (four chains).
fn alu_loop(n: u64) -> u64 {
    let (mut a, mut b, mut c, mut d) = (1u64, 2u64, 3u64, 4u64);
    for i in 0..n {
        a = a.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(i);
        b = b.rotate_left(7) ^ i;
        c = c.wrapping_add(i).wrapping_mul(3);
        d ^= d >> 3 ^ i;
    }
    black_box(a ^ b ^ c ^ d)
}

/// A random cycle over `n` slots (each slot the index of the next).
fn chase_cycle(n: usize, seed: u64) -> Vec<u32> {
    let order = crate::calibrate::shuffled(n, seed);
    let mut next = vec![0u32; n];
    for w in 0..n {
        next[order[w]] = order[(w + 1) % n] as u32;
    }
    next
}

/// `n` steps of the chase through `next`.
fn chase(next: &[u32], n: u64) -> u64 {
    let mut i = 0u32;
    for _ in 0..n {
        i = next[i as usize];
    }
    black_box(i as u64)
}

/// Run `work` on CPU `a` alone, then on `a` and its sibling `b` at once: (alone, shared)
/// wall time [ns] of `a`'s run (the shared run from when both are ready).
fn alone_and_shared(
    (a, b): (u32, u32),
    work: Arc<dyn Fn() -> u64 + Send + Sync>,
) -> Result<(f64, f64), String> {
    affinity::pin_thread(a);
    let t = Instant::now();
    black_box(work());
    let alone = t.elapsed().as_nanos() as f64;
    let deadline = Instant::now() + SPIN_LIMIT;
    let go = Arc::new(Line(AtomicU64::new(0)));
    let (g2, w2) = (go.clone(), work.clone());
    let peer = move || {
        spin_until(&g2.0, 1, deadline)?;
        black_box(w2());
        Ok(())
    };
    let mine = || {
        go.0.store(1, Ordering::Release);
        black_box(work());
        Ok(())
    };
    let shared = on_two_cpus((a as usize, b as usize), deadline, peer, mine)?;
    Ok((alone, shared))
}

/// The SMT figures of this host's first core with two allowed hardware threads; empty
/// when none has (no SMT, or only one thread of each core allowed).
pub fn smt_figures(cpus: &[u32], s: Sizes) -> Result<Vec<Figure>, String> {
    let cores = host_cores(cpus);
    let Some(pair) = cores.iter().find(|c| c.len() >= 2).map(|c| (c[0], c[1])) else {
        return Ok(Vec::new());
    };
    let saved = affinity::allowed_cpus();
    let r = smt_pair(pair, &cores, s);
    if !saved.is_empty() {
        affinity::set_allowed(&saved);
    }
    r
}

fn smt_pair((a, b): (u32, u32), cores: &[Vec<u32>], s: Sizes) -> Result<Vec<Figure>, String> {
    let mut out = Vec::new();
    let n = s.pingpongs * 100;
    let alu: Arc<dyn Fn() -> u64 + Send + Sync> = Arc::new(move || alu_loop(n));
    let ring = Arc::new(chase_cycle(2 << 20, 0x5eed));
    let steps = s.pingpongs * 10;
    let r2 = ring.clone();
    let walk: Arc<dyn Fn() -> u64 + Send + Sync> = Arc::new(move || chase(&r2, steps));
    for (work, iters, alone_name, shared_name, what) in [
        (
            alu,
            n,
            "smt_alu_alone",
            "smt_alu_shared",
            "an integer loop of four independent chains (execution-unit bound)",
        ),
        (
            walk,
            steps,
            "smt_chase_alone",
            "smt_chase_shared",
            "a dependent pointer chase through a random 8 MiB cycle (latency bound)",
        ),
    ] {
        let mut alone = Vec::new();
        let mut shared = Vec::new();
        for _ in 0..s.reps.max(1) {
            let (x, y) = alone_and_shared((a, b), work.clone())?;
            alone.push(x / iters as f64);
            shared.push(y / iters as f64);
        }
        let (ns, spread) = median_spread(alone);
        out.push(Figure {
            name: alone_name,
            ns,
            spread,
            ops: iters,
            how: format!("{what} on CPU {a} while its sibling {b} idles: ns per iteration"),
        });
        let (ns, spread) = median_spread(shared);
        out.push(Figure { name: shared_name, ns, spread, ops: iters, how: format!("{what} on CPU {a} while its sibling {b} runs the same: ns per iteration of CPU {a}") });
    }
    let r = repeat(s.reps, || pingpong(a as usize, b as usize, s.pingpongs))?;
    out.push(figure("cacheline_transfer_smt", r, &format!("ping-pong of one cache line between CPUs {a} and {b}, hardware threads of one core: half a round trip")));
    let firsts: Vec<u32> = cores.iter().map(|c| c[0]).collect();
    if firsts.len() >= 2 {
        let r = repeat(s.reps, || lines_in_turn(&firsts, 1, s.pingpongs))?;
        out.push(figure("contended_line_1_cores", r, &format!("{} threads, one per core (the first hardware thread of each), each doing a lock xadd on one shared line: wall time over all threads' operations", firsts.len())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cpulist("0,48\n"), Some(vec![0, 48]));
        assert_eq!(parse_cpulist("2-3"), Some(vec![2, 3]));
        assert_eq!(parse_cpulist("0-1,4"), Some(vec![0, 1, 4]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("x"), None);
    }

    #[test]
    fn cores_group_siblings_once_and_keep_only_allowed_threads() {
        // Linux's x86 numbering: CPU c and c + 4 are one core's threads on 4 cores.
        let sib = |c: u32| Some(vec![c % 4, c % 4 + 4]);
        assert_eq!(
            cores_of(&[0, 1, 4, 5, 6], sib),
            vec![vec![0, 4], vec![1, 5], vec![6]]
        );
        // No topology: every CPU its own core.
        assert_eq!(cores_of(&[0, 1], |_| None), vec![vec![0], vec![1]]);
    }

    #[test]
    fn the_chase_is_one_cycle_through_every_slot() {
        let next = chase_cycle(1000, 7);
        let mut seen = vec![false; 1000];
        let mut i = 0usize;
        for _ in 0..1000 {
            assert!(!seen[i], "slot {i} visited twice before the cycle closed");
            seen[i] = true;
            i = next[i] as usize;
        }
        assert_eq!(i, 0);
        assert!(seen.iter().all(|&v| v));
    }
}
