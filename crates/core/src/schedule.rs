//! Proactive reclaim on a schedule: the `[[reclaim]]` entries of a scenario.
//!
//! Each entry is a user-space agent (a shell loop, a memory-tiering daemon) writing to one
//! cgroup's memory.reclaim: a user task, not a kthread, on a CPU of its own (the lowest CPU
//! no workload task uses; see [`crate::scenario::Scenario::reclaim_cpus`]), so the reclaim
//! it does is charged to that CPU and its node's zonelist is walked first. The k-th write
//! is due at `at + k * every`; a write still running when the next is due delays it, and
//! the next starts the moment it returns. Each write runs user_proactive_reclaim() and is
//! logged with its virtual start time, how long it took, what it returned and the
//! accesses the workloads had issued by its start.
//!
//! The `[[lru_gen]]` entries work the same way: a user task per entry (on the free CPUs
//! after the `[[reclaim]]` writers') writes its command to /sys/kernel/debug/lru_gen at
//! each due time (lru_gen_seq_write()), with the generation read from debugfs just before
//! when the entry gives none.
//!
//! Simplified: the write(2) itself (syscall entry, kernfs, copying the buffer) costs
//! nothing; only the reclaim it does takes time.

use crate::engine::Time;
use crate::mm::lru_gen::LruGenCommand;
use crate::mm::memcontrol::{Errno, ProactiveReclaim};
use crate::mm::LruvecId;
use crate::mm::MemcgId;
use crate::scenario::{LruGenSchedule, ReclaimSchedule, Scenario, PAGE_SIZE};
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
    /// The accesses the scenario's workloads had issued, all together, when it started
    /// (kernel-run --vm makes the guest's write at this count).
    pub accesses: u64,
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
            let accesses = self.tallies.borrow().iter().map(|t| t.accesses.get()).sum();
            self.schedules.borrow_mut()[idx].in_flight = Some(t0);
            let out: ProactiveReclaim = self.user_proactive_reclaim(&buf, memcg).await;
            let rec = WriteRecord {
                t_ns: t0,
                duration_ns: self.e.now() - t0,
                requested: out.nr_to_reclaim,
                reclaimed: out.nr_reclaimed,
                calls: out.calls.len() as u32,
                result: out.result,
                accesses,
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
    let mut m = serde_json::Map::new();
    m.insert("writes".into(), json!(lat.len()));
    m.insert("failures".into(), json!(failures));
    m.insert("requested_bytes".into(), json!(requested * PAGE_SIZE));
    m.insert("reclaimed_bytes".into(), json!(reclaimed * PAGE_SIZE));
    m.insert("latency_ns".into(), latency(lat));
    m
}

/// Mean, p50, p99 and max of write durations.
fn latency(mut lat: Vec<u64>) -> Value {
    lat.sort_unstable();
    let n = lat.len() as u64;
    json!({
        "mean": lat.iter().sum::<u64>().checked_div(n).unwrap_or(0),
        "p50": percentile(&lat, 50),
        "p99": percentile(&lat, 99),
        "max": lat.last().copied().unwrap_or(0),
    })
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
                        },
                        w.accesses
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
                    "result",
                    "accesses"
                ]),
            );
            m.insert("log".into(), json!(log));
            Value::Object(m)
        })
        .collect();
    total.insert("schedules".into(), json!(schedules));
    Some(Value::Object(total))
}

// ---------------------------------------------------------------------------------------
// [[lru_gen]]: /sys/kernel/debug/lru_gen writes
// ---------------------------------------------------------------------------------------

/// One debugfs write as the writer saw it, with the lruvec's generations around it.
#[derive(Debug, Clone)]
pub struct LruGenWriteRecord {
    /// When the write started, and how long it took [ns, virtual time].
    pub t_ns: Time,
    pub duration_ns: Time,
    /// The line written.
    pub line: String,
    pub result: Result<(), Errno>,
    /// max_seq and min_seq ([anon, file]) of the lruvec before and after.
    pub max_seq: [u64; 2],
    pub min_seq_before: [u64; 2],
    pub min_seq_after: [u64; 2],
    /// Pages the eviction reclaimed (0 for "+").
    pub reclaimed: u64,
}

/// The writes of one `[[lru_gen]]` entry.
#[derive(Debug, Clone, Default)]
pub struct LruGenLog {
    /// Finished writes, in order.
    pub writes: Vec<LruGenWriteRecord>,
    /// Start time of a write still running when the run ended.
    pub in_flight: Option<Time>,
}

/// Start the writer task of every `[[lru_gen]]` entry of a validated scenario.
pub fn spawn_lru_gen_schedules(sim: &Rc<Sim>, sc: &Scenario) {
    if sc.lru_gens.is_empty() {
        return;
    }
    let cpus = sc
        .lru_gen_cpus()
        .expect("a validated scenario has a free CPU per schedule entry");
    *sim.lru_gen_logs.borrow_mut() = vec![LruGenLog::default(); sc.lru_gens.len()];
    for (i, (g, cpu)) in sc.lru_gens.iter().zip(cpus).enumerate() {
        let (memcg, lv) = {
            let mm = sim.mm.borrow();
            let m = mm
                .memcgs
                .iter()
                .find(|m| m.path == g.cgroup)
                .map(|m| m.id)
                .expect("a validated scenario names existing cgroups");
            (m, mm.lruvec_of(m, g.node))
        };
        let (s, g) = (sim.clone(), g.clone());
        sim.e.spawn(g.at.0, cpu, async move {
            s.lru_gen_writer(i, &g, memcg as u32 + 1, lv).await;
        });
    }
}

impl Sim {
    /// The agent of one `[[lru_gen]]` entry: sleep until each write is due (or go on at
    /// once when late), read the generation if the entry gives none, write, log.
    async fn lru_gen_writer(&self, idx: usize, g: &LruGenSchedule, memcg_id: u32, lv: LruvecId) {
        for k in 0..g.times {
            let Some(due) = g.due(k) else { break };
            let now = self.e.now();
            if due > now {
                self.e.sleep(due - now).await;
            }
            let t0 = self.e.now();
            self.lru_gen_logs.borrow_mut()[idx].in_flight = Some(t0);
            let c = self.lru_gen_command(g, memcg_id, lv);
            let before = self.lru_gen_seqs(lv);
            let out = self.lru_gen_seq_write(&c).await;
            let after = self.lru_gen_seqs(lv);
            let rec = LruGenWriteRecord {
                t_ns: t0,
                duration_ns: self.e.now() - t0,
                line: g.line(memcg_id, c.seq),
                result: out.result,
                max_seq: [before.0, after.0],
                min_seq_before: before.1,
                min_seq_after: after.1,
                reclaimed: out.nr_reclaimed,
            };
            let mut logs = self.lru_gen_logs.borrow_mut();
            logs[idx].in_flight = None;
            logs[idx].writes.push(rec);
        }
    }

    /// The command an entry writes now: its generation, or the one debugfs shows.
    fn lru_gen_command(&self, g: &LruGenSchedule, memcg_id: u32, lv: LruvecId) -> LruGenCommand {
        let field = g.swappiness_field();
        let seq = g
            .gen
            .unwrap_or_else(|| self.mm.borrow().lru_gen_current_gen(g.cmd, lv, field));
        LruGenCommand {
            cmd: g.cmd,
            memcg_id,
            nid: g.node,
            seq,
            swappiness: field,
            opt: g.opt_field(),
        }
    }

    /// (max_seq, min_seq) of an lruvec.
    fn lru_gen_seqs(&self, lv: LruvecId) -> (u64, [u64; 2]) {
        let mm = self.mm.borrow();
        let g = &mm.lruvecs[lv as usize].lrugen;
        (g.max_seq, g.min_seq)
    }
}

/// Columns of an `[[lru_gen]]` entry's log.
const LRU_GEN_LOG_COLUMNS: [&str; 11] = [
    "t_ns",
    "duration_ns",
    "command",
    "result",
    "max_seq_before",
    "max_seq_after",
    "min_seq_anon_before",
    "min_seq_file_before",
    "min_seq_anon_after",
    "min_seq_file_after",
    "reclaimed_pages",
];

/// Count, failures, pages reclaimed and write latency of a set of debugfs writes.
fn lru_gen_summary<'a>(
    writes: impl Iterator<Item = &'a LruGenWriteRecord>,
) -> serde_json::Map<String, Value> {
    let (mut lat, mut failures, mut reclaimed) = (Vec::new(), 0u64, 0u64);
    for w in writes {
        lat.push(w.duration_ns);
        failures += w.result.is_err() as u64;
        reclaimed += w.reclaimed;
    }
    let mut m = serde_json::Map::new();
    m.insert("writes".into(), json!(lat.len()));
    m.insert("failures".into(), json!(failures));
    m.insert("reclaimed_pages".into(), json!(reclaimed));
    m.insert("latency_ns".into(), latency(lat));
    m
}

/// One log row of a debugfs write.
fn lru_gen_row(w: &LruGenWriteRecord) -> Value {
    json!([
        w.t_ns,
        w.duration_ns,
        w.line,
        w.result.map_or_else(|e| e.name(), |()| "ok"),
        w.max_seq[0],
        w.max_seq[1],
        w.min_seq_before[0],
        w.min_seq_before[1],
        w.min_seq_after[0],
        w.min_seq_after[1],
        w.reclaimed,
    ])
}

/// The report's `lru_gen_writes` section (None without `[[lru_gen]]` entries): totals
/// over all entries, then per entry its schedule, totals and every write.
pub fn lru_gen_report(sim: &Sim, sc: &Scenario) -> Option<Value> {
    if sc.lru_gens.is_empty() {
        return None;
    }
    let logs = sim.lru_gen_logs.borrow();
    let mut total = lru_gen_summary(logs.iter().flat_map(|l| l.writes.iter()));
    let schedules: Vec<Value> = sc
        .lru_gens
        .iter()
        .zip(logs.iter())
        .map(|(g, l)| {
            let mut m = serde_json::Map::new();
            m.insert("cmd".into(), json!(g.cmd));
            m.insert("cgroup".into(), json!(g.cgroup));
            m.insert("node".into(), json!(g.node));
            m.extend(lru_gen_summary(l.writes.iter()));
            m.insert("in_flight_since_ns".into(), json!(l.in_flight));
            m.insert("log_columns".into(), json!(LRU_GEN_LOG_COLUMNS));
            m.insert("log".into(), l.writes.iter().map(lru_gen_row).collect());
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
