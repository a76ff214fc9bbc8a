//! Proactive reclaim on a schedule: the `[[reclaim]]` entries of a scenario.
//!
//! Each entry is a user-space agent (a shell loop, a memory-tiering daemon) writing to one
//! cgroup's memory.reclaim: a user task, not a kthread, on a CPU of its own (the lowest CPU
//! no workload task uses; see [`crate::scenario::Scenario::reclaim_cpus`]), so the reclaim
//! it does is charged to that CPU and its node's zonelist is walked first. The k-th write
//! is due at `at + k * every`; a write still running when the next is due delays it, and
//! the next starts the moment it returns. Each write runs user_proactive_reclaim() and is
//! logged with its virtual start time, how long it took and what it returned.
//!
//! Simplified: the write(2) itself (syscall entry, kernfs, copying the buffer) costs
//! nothing; only the reclaim it does takes time.

use crate::engine::Time;
use crate::mm::memcontrol::{Errno, ProactiveReclaim};
use crate::mm::MemcgId;
use crate::scenario::{ReclaimSchedule, Scenario, PAGE_SIZE};
use crate::sim::Sim;
use serde_json::{json, Value};
use std::rc::Rc;

/// One memory.reclaim write as the agent saw it.
#[derive(Debug, Clone)]
pub struct WriteRecord {
    /// When the write started [ns].
    pub t_ns: Time,
    /// How long it took, in virtual time [ns].
    pub duration_ns: Time,
    /// Pages asked for and reclaimed, and how many reclaim calls it made.
    pub requested: u64,
    pub reclaimed: u64,
    pub calls: u32,
    pub result: Result<(), Errno>,
}

/// The writes of one `[[reclaim]]` entry.
#[derive(Debug, Clone, Default)]
pub struct ScheduleLog {
    /// Finished writes, in order.
    pub writes: Vec<WriteRecord>,
    /// Start time of a write still running when the run ended.
    pub in_flight: Option<Time>,
}

/// Start the writer task of every `[[reclaim]]` entry of a validated scenario.
pub fn spawn_reclaim_schedules(sim: &Rc<Sim>, sc: &Scenario) {
    if sc.reclaims.is_empty() {
        return;
    }
    let cpus = sc
        .reclaim_cpus()
        .expect("a validated scenario has a free CPU per [[reclaim]] entry");
    *sim.schedules.borrow_mut() = vec![ScheduleLog::default(); sc.reclaims.len()];
    for (i, (r, cpu)) in sc.reclaims.iter().zip(cpus).enumerate() {
        let memcg = {
            let mm = sim.mm.borrow();
            mm.memcgs
                .iter()
                .find(|m| m.path == r.cgroup)
                .map(|m| m.id)
                .expect("a validated scenario names existing cgroups")
        };
        let (s, r) = (sim.clone(), r.clone());
        sim.e.spawn(r.at.0, cpu, async move {
            s.memory_reclaim_writer(i, &r, memcg).await;
        });
    }
}

impl Sim {
    /// The agent of one `[[reclaim]]` entry: sleep until each write is due (or go on at
    /// once when late), write, log.
    async fn memory_reclaim_writer(&self, idx: usize, r: &ReclaimSchedule, memcg: MemcgId) {
        let buf = r.buffer();
        for k in 0..r.times {
            let Some(due) = r.due(k) else { break };
            let now = self.e.now();
            if due > now {
                self.e.sleep(due - now).await;
            }
            let t0 = self.e.now();
            self.schedules.borrow_mut()[idx].in_flight = Some(t0);
            let out: ProactiveReclaim = self.user_proactive_reclaim(&buf, memcg).await;
            let rec = WriteRecord {
                t_ns: t0,
                duration_ns: self.e.now() - t0,
                requested: out.nr_to_reclaim,
                reclaimed: out.nr_reclaimed,
                calls: out.calls.len() as u32,
                result: out.result,
            };
            let mut logs = self.schedules.borrow_mut();
            logs[idx].in_flight = None;
            logs[idx].writes.push(rec);
        }
    }
}

/// Nearest-rank percentile `p` (0..=100) of sorted values (none: 0).
fn percentile(sorted: &[u64], p: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as u64).div_ceil(100).max(1);
    sorted[rank as usize - 1]
}

/// Count, failures, bytes and write latency of a set of writes.
fn summary<'a>(writes: impl Iterator<Item = &'a WriteRecord>) -> serde_json::Map<String, Value> {
    let mut lat = Vec::new();
    let (mut failures, mut requested, mut reclaimed) = (0u64, 0u64, 0u64);
    for w in writes {
        lat.push(w.duration_ns);
        failures += w.result.is_err() as u64;
        requested += w.requested;
        reclaimed += w.reclaimed;
    }
    lat.sort_unstable();
    let n = lat.len() as u64;
    let mut m = serde_json::Map::new();
    m.insert("writes".into(), json!(n));
    m.insert("failures".into(), json!(failures));
    m.insert("requested_bytes".into(), json!(requested * PAGE_SIZE));
    m.insert("reclaimed_bytes".into(), json!(reclaimed * PAGE_SIZE));
    m.insert(
        "latency_ns".into(),
        json!({
            "mean": lat.iter().sum::<u64>().checked_div(n).unwrap_or(0),
            "p50": percentile(&lat, 50),
            "p99": percentile(&lat, 99),
            "max": lat.last().copied().unwrap_or(0),
        }),
    );
    m
}

/// The report's `proactive` section (None without `[[reclaim]]` entries): totals over all
/// entries, then per entry its schedule, totals and every write.
pub fn report(sim: &Sim, sc: &Scenario) -> Option<Value> {
    if sc.reclaims.is_empty() {
        return None;
    }
    let logs = sim.schedules.borrow();
    let mut total = summary(logs.iter().flat_map(|l| l.writes.iter()));
    let schedules: Vec<Value> = sc
        .reclaims
        .iter()
        .zip(logs.iter())
        .map(|(r, l)| {
            let mut m = serde_json::Map::new();
            m.insert("cgroup".into(), json!(r.cgroup));
            m.insert("buffer".into(), json!(r.buffer()));
            m.extend(summary(l.writes.iter()));
            m.insert("in_flight_since_ns".into(), json!(l.in_flight));
            let log: Vec<Value> = l
                .writes
                .iter()
                .map(|w| {
                    json!([
                        w.t_ns,
                        w.duration_ns,
                        w.requested * PAGE_SIZE,
                        w.reclaimed * PAGE_SIZE,
                        w.calls,
                        match w.result {
                            Ok(()) => "ok",
                            Err(e) => e.name(),
                        }
                    ])
                })
                .collect();
            m.insert(
                "log_columns".into(),
                json!([
                    "t_ns",
                    "duration_ns",
                    "requested_bytes",
                    "reclaimed_bytes",
                    "calls",
                    "result"
                ]),
            );
            m.insert("log".into(), json!(log));
            Value::Object(m)
        })
        .collect();
    total.insert("schedules".into(), json!(schedules));
    Some(Value::Object(total))
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=200).collect();
        // rank = ceil(p * n / 100): p50 of 200 -> 100th, p99 -> 198th.
        assert_eq!(percentile(&v, 50), 100);
        assert_eq!(percentile(&v, 99), 198);
        assert_eq!(percentile(&v, 100), 200);
        assert_eq!(percentile(&[7], 99), 7);
        assert_eq!(percentile(&[3, 9], 50), 3);
        assert_eq!(percentile(&[], 50), 0);
    }
}
