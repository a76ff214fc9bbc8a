//! Contended cache lines across thread counts, for a host with more cores than this
//! project's reference machine: the figures behind docs/fidelity.md's "Lines that share a
//! home agent" table.
//!
//! `cargo run --release -p reclaimsim-host --example lines_sweep > lines.json` prints one
//! JSON object: the host's cores (sysfs sibling sets) and nodes; the ping-pong from the
//! first CPU to every other one (half a round trip, ns); `lines_in_turn` (calibrate's
//! contended-line benchmark) for 1, 2 and 4 lines at 2, 4, 8, ... threads one per core,
//! and with every hardware thread; and calibrate's own cache-line part (run_json), SMT
//! figures included. Nothing is derived here: it only measures.

use reclaimsim_core::engine::rng::fixed_exponential_draws;
use reclaimsim_host::affinity;
use reclaimsim_host::calibrate::{
    lines_in_turn, local_work, pingpong, run_in_turn, run_json, Part, Sizes,
};
use reclaimsim_host::smt::host_cores;
use serde_json::{json, Value};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

fn median_ns(reps: usize, f: impl Fn() -> Result<(f64, u64), String>) -> Result<Value, String> {
    let mut v = Vec::new();
    for _ in 0..reps {
        let (ns, ops) = f()?;
        v.push(ns / ops.max(1) as f64);
    }
    v.sort_by(f64::total_cmp);
    Ok(json!({"median": v[v.len() / 2], "min": v[0], "max": v[v.len() - 1]}))
}

/// One and two lines in turn on every core, with local work before each round, fixed or
/// exponentially distributed: the per-thread round time against the same work alone (no
/// shared line).
fn gap_sweep(cpus: &[u32], reps: usize) -> Result<Value, String> {
    affinity::pin_thread(cpus[0]);
    let steps = 10_000_000u64;
    let t = Instant::now();
    local_work(steps);
    let step_ns = t.elapsed().as_nanos() as f64 / steps as f64;
    let mut out = Vec::new();
    let fixed = [0.0, 100.0, 250.0, 500.0, 1000.0, 2000.0].map(|g| ("fixed", g));
    let random = [500.0, 1000.0, 2000.0, 4000.0].map(|g| ("exponential", g));
    for (kind, gap_ns) in fixed.into_iter().chain(random) {
        let gaps: Vec<u64> = match kind {
            "fixed" if gap_ns == 0.0 => Vec::new(),
            "fixed" => vec![(gap_ns / step_ns).round() as u64],
            _ => fixed_exponential_draws(gap_ns / step_ns, 4096),
        };
        let n = if gap_ns >= 500.0 { 20_000 } else { 100_000 };
        let alone = median_ns(reps, || {
            let t = Instant::now();
            for i in 0..n as usize {
                if !gaps.is_empty() {
                    local_work(gaps[i % gaps.len()]);
                }
            }
            Ok((t.elapsed().as_nanos() as f64, n))
        })?;
        let mut row = json!({"gap": kind, "gap_ns": gap_ns, "work_alone_ns": alone});
        for k in [1usize, 2] {
            // Own 128-byte slots, as calibrate's lines.
            let slots: Vec<Box<[AtomicU64; 16]>> = (0..k).map(|_| Box::default()).collect();
            let refs: Vec<&AtomicU64> = slots.iter().map(|s| &s[0]).collect();
            // Per-thread round time: the wall over the rounds of one thread.
            let r = median_ns(reps, || {
                let (ns, _) = run_in_turn(cpus, &refs, n, &gaps)?;
                Ok((ns, n))
            })?;
            row[format!("round_ns_{k}_lines")] = r;
        }
        out.push(row);
    }
    Ok(json!({"threads": cpus.len(), "step_ns": step_ns, "rows": out}))
}

fn nodes() -> Vec<Value> {
    let mut out = Vec::new();
    for n in 0..64 {
        let p = format!("/sys/devices/system/node/node{n}/cpulist");
        if let Ok(t) = std::fs::read_to_string(p) {
            out.push(json!({"node": n, "cpus": t.trim()}));
        }
    }
    out
}

fn main() -> Result<(), String> {
    let cpus = affinity::allowed_cpus();
    let cores = host_cores(&cpus);
    let firsts: Vec<u32> = cores.iter().map(|c| c[0]).collect();
    let reps = 5;
    let n = 100_000u64;
    let mut row = Vec::new();
    for &c in cpus.iter().skip(1) {
        let r = median_ns(reps, || pingpong(cpus[0] as usize, c as usize, n / 4))?;
        row.push(json!({"cpu": c, "ns": r}));
    }
    // pingpong pinned this thread; what follows reads the allowed set again.
    affinity::set_allowed(&cpus);
    let mut sweep = Vec::new();
    let mut counts: Vec<usize> = std::iter::successors(Some(2usize), |t| Some(t * 2))
        .take_while(|&t| t < firsts.len())
        .collect();
    counts.push(firsts.len());
    for (set, label) in [
        (&firsts, "one thread per core"),
        (&cpus, "every hardware thread"),
    ] {
        let mut ts = counts.clone();
        if set.len() > firsts.len() {
            ts = vec![set.len()];
        }
        for &t in &ts {
            for k in [1usize, 2, 4] {
                let who = &set[..t.min(set.len())];
                let r = median_ns(reps, || lines_in_turn(who, k, n))?;
                sweep.push(
                    json!({"threads": who.len(), "placement": label, "lines": k, "ns_per_op": r}),
                );
            }
        }
    }
    let gaps = gap_sweep(&firsts, reps)?;
    affinity::set_allowed(&cpus);
    let b = *firsts.get(1).unwrap_or(&cpus[0]) as usize;
    let s = Sizes {
        anon_pages: 4096,
        file_pages: 2048,
        reps,
        pingpongs: 200_000,
    };
    let cal: Value = serde_json::from_str(&run_json(
        Part::CacheLines,
        std::path::Path::new("/tmp"),
        (cpus[0] as usize, b),
        s,
    )?)
    .map_err(|e| e.to_string())?;
    let out = json!({
        "cpus": cpus, "cores": cores, "nodes": nodes(),
        "pingpong_from_first": row, "lines_in_turn": sweep, "gap_sweep": gaps, "calibrate_cache_lines": cal,
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
    );
    Ok(())
}
