//! CPU placement: which CPU each task of the scenario runs on (each task owns one; no
//! time sharing is modeled), parsed from `cpus` lists or taken from the lowest free CPUs.

use super::Scenario;
use crate::error::{quoted, Error, Result};

/// Parse a CPU list like "0-3,8,10-11" of a machine with `ncpus` CPUs: every CPU must
/// exist and appear once (ranges are checked before they are expanded), and no item
/// between commas is empty ("1,,0", "0,").
pub fn parse_cpu_list(s: &str, ncpus: u32) -> std::result::Result<Vec<u32>, String> {
    let mut out = Vec::new();
    if s.trim().is_empty() {
        return Err("the CPU list is empty".into());
    }
    let mut seen = vec![false; ncpus as usize];
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(
                "an empty item between commas: write CPU numbers and ranges separated by single commas, like \"0-3,8\"".into(),
            );
        }
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let bad = || {
            format!(
                "{} is not a CPU number or range (like \"0-3,8\")",
                quoted(part)
            )
        };
        let a: u32 = a.parse().map_err(|_| bad())?;
        let b: u32 = b.parse().map_err(|_| bad())?;
        if b < a {
            return Err(format!("range {} is reversed", quoted(part)));
        }
        if b >= ncpus {
            return Err(format!(
                "CPU {b} does not exist: allowed 0..={}",
                ncpus.saturating_sub(1)
            ));
        }
        for c in a..=b {
            if std::mem::replace(&mut seen[c as usize], true) {
                return Err(format!(
                    "CPU {c} is listed twice: each task needs its own CPU"
                ));
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err("the CPU list is empty".into());
    }
    Ok(out)
}

impl Scenario {
    /// The CPUs of every workload's tasks, in task order: its `cpus` list (the first
    /// nr_tasks of them), else the lowest CPUs no other workload takes. Errors name the
    /// field; the run places tasks with this very function.
    pub fn placements(&self) -> Result<Vec<Vec<u32>>> {
        let ncpu = self.machine.cpus;
        let mut taken = vec![false; ncpu as usize];
        let mut out: Vec<Option<Vec<u32>>> = Vec::with_capacity(self.workloads.len());
        for (i, w) in self.workloads.iter().enumerate() {
            let at = format!("scenario.workload[{i}].cpus");
            let n = w.nr_tasks();
            match &w.common().cpus {
                Some(cl) => {
                    let cpus = parse_cpu_list(cl, ncpu)
                        .map_err(|e| Error::scenario(&at, format!("{}: {e}", quoted(cl))))?;
                    if (cpus.len() as u64) < n {
                        return Err(Error::scenario(
                            at,
                            format!("{} lists {} CPUs for {n} tasks: each task needs its own CPU (time sharing is not modeled)", quoted(cl), cpus.len()),
                        ));
                    }
                    let mine: Vec<u32> = cpus.into_iter().take(n as usize).collect();
                    for &c in &mine {
                        if std::mem::replace(&mut taken[c as usize], true) {
                            return Err(Error::scenario(
                                at,
                                format!("CPU {c} is already taken by another workload's task"),
                            ));
                        }
                    }
                    out.push(Some(mine));
                }
                None => out.push(None),
            }
        }
        let free = taken.iter().filter(|t| !**t).count() as u64;
        let wanted: u64 = self
            .workloads
            .iter()
            .filter(|w| w.common().cpus.is_none())
            .map(|w| w.nr_tasks())
            .sum();
        if wanted > free {
            return Err(Error::scenario(
                "scenario.machine.cpus",
                format!("{ncpu} CPUs leave {free} free for {wanted} unplaced tasks: each task needs its own CPU"),
            )
            .with_hint("raise machine.cpus or lower the workloads' processes/threads"));
        }
        let mut next = 0usize;
        Ok(out
            .into_iter()
            .zip(&self.workloads)
            .map(|(o, w)| {
                o.unwrap_or_else(|| {
                    let mut v = Vec::with_capacity(w.nr_tasks() as usize);
                    while (v.len() as u64) < w.nr_tasks() {
                        if !std::mem::replace(&mut taken[next], true) {
                            v.push(next as u32);
                        }
                        next += 1;
                    }
                    v
                })
            })
            .collect())
    }

    /// The CPUs of each workload's tasks, as the workloads are spawned, and which CPUs
    /// are taken: [`Scenario::placements`], which validation checked (explicit `cpus`
    /// lists first, then every other workload, in order, on the lowest CPUs still free).
    /// A scenario whose placement does not fit (refused by validation) places nothing.
    pub fn workload_cpus(&self) -> (Vec<Vec<u32>>, Vec<bool>) {
        let placement = self
            .placements()
            .unwrap_or_else(|_| vec![Vec::new(); self.workloads.len()]);
        let mut taken = vec![false; self.machine.cpus as usize];
        for &c in placement.iter().flatten() {
            taken[c as usize] = true;
        }
        (placement, taken)
    }

    /// The lowest `n` CPUs no workload task takes ([`Scenario::workload_cpus`]); None when
    /// fewer are free.
    fn free_cpus(&self, n: usize) -> Option<Vec<u32>> {
        let (_, taken) = self.workload_cpus();
        let free: Vec<u32> = (0..self.machine.cpus)
            .filter(|&c| !taken[c as usize])
            .take(n)
            .collect();
        (free.len() == n).then_some(free)
    }

    /// The CPU of each `[[reclaim]]` entry's writer task: the lowest free CPUs, in entry
    /// order. None when too few are free.
    pub fn reclaim_cpus(&self) -> Option<Vec<u32>> {
        self.free_cpus(self.reclaims.len())
    }

    /// The CPU of each `[[lru_gen]]` entry's writer task: the free CPUs after those of the
    /// `[[reclaim]]` entries, in entry order (every writer has a CPU of its own). None
    /// when too few are free.
    pub fn lru_gen_cpus(&self) -> Option<Vec<u32>> {
        let mut cpus = self.free_cpus(self.reclaims.len() + self.lru_gens.len())?;
        Some(cpus.split_off(self.reclaims.len()))
    }
}
