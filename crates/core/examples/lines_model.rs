//! The model's side of calibrate's contended-line benchmark with local work between
//! rounds (crates/host/examples/lines_sweep.rs, `gap_sweep`): N CPUs of one node, each
//! doing `gap` ns of its own work and then a lock xadd on each of k shared lines in turn,
//! through the engine's line servers (engine/coherence.rs). Prints, per gap, the
//! per-thread round time with one and with two lines, to set beside the host's figures.
//!
//! `cargo run --release -p reclaimsim-core --example lines_model -- THREADS TRANSFER_NS
//! ATOMIC_NS [GAP ...]`, a GAP being a fixed time in ns (`500`) or the mean of
//! exponentially distributed ones (`e500`: the host example's 4096 draws, thread i
//! starting at draw i * 4096 / THREADS, as there).

use reclaimsim_core::engine::coherence::CacheLine;
use reclaimsim_core::engine::rng::fixed_exponential_draws;
use reclaimsim_core::engine::{Engine, EngineCosts};
use std::cell::RefCell;
use std::rc::Rc;

/// The per-thread round time [ns] of `threads` CPUs doing `rounds` rounds of work (taken
/// in turn from `gaps`) and one RMW on each of `k` lines.
fn round_ns(threads: u32, k: usize, gaps: &[u64], transfer: u64, atomic: u64, rounds: u64) -> f64 {
    let costs = EngineCosts {
        lock_uncontended: 0,
        cacheline_transfer: transfer,
        cacheline_transfer_remote: transfer,
        cacheline_transfer_smt: transfer,
        atomic_rmw: atomic,
        home_agent_occupancy: 0,
    };
    let e = Rc::new(Engine::new(costs, vec![0; threads as usize]));
    let lines = Rc::new(RefCell::new(vec![CacheLine::homed(0); k]));
    let end = Rc::new(RefCell::new(0u64));
    let gaps: Rc<[u64]> = gaps.into();
    for cpu in 0..threads {
        let (e2, lines, end, gaps) = (e.clone(), lines.clone(), end.clone(), gaps.clone());
        e.spawn(0, cpu, async move {
            let mut g = cpu as usize * gaps.len() / threads as usize;
            for _ in 0..rounds {
                e2.charge(gaps[g]);
                g = (g + 1) % gaps.len();
                for l in 0..k {
                    e2.sync().await;
                    let c = e2.rmw_line(&mut lines.borrow_mut()[l]);
                    e2.charge(c);
                }
            }
            let mut t = end.borrow_mut();
            *t = (*t).max(e2.now());
        });
    }
    e.run_until(u64::MAX / 2, 1 << 20, &mut |_| true);
    let t = *end.borrow();
    t as f64 / rounds as f64
}

fn num(a: &str) -> u64 {
    a.parse().unwrap_or_else(|_| {
        eprintln!("lines_model: not a number: {a}");
        std::process::exit(2)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: lines_model THREADS TRANSFER_NS ATOMIC_NS [GAP ...] (GAP: 500 or e500)");
        std::process::exit(2);
    }
    let (threads, transfer, atomic) = (num(&args[0]) as u32, num(&args[1]), num(&args[2]));
    let gaps: Vec<String> = if args.len() > 3 {
        args[3..].to_vec()
    } else {
        ["0", "100", "250", "500", "1000", "2000"]
            .map(String::from)
            .to_vec()
    };
    println!("gap_ns\tround_1_line\tround_2_lines");
    for g in gaps {
        let draws = match g.strip_prefix('e') {
            Some(mean) => fixed_exponential_draws(num(mean) as f64, 4096),
            None => vec![num(&g)],
        };
        let one = round_ns(threads, 1, &draws, transfer, atomic, 20_000);
        let two = round_ns(threads, 2, &draws, transfer, atomic, 20_000);
        println!("{g}\t{one:.1}\t{two:.1}");
    }
}
