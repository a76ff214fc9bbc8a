//! The plan the host sends in `/plan.json` (built by python/reclaimsim/vm.py `guest_plan`).
//! Everything kernel-specific is decided on the host; the guest only carries it out.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Only boot and answer (the `--accel auto` probe).
    #[serde(default)]
    pub probe: bool,
    /// Only set up (modules, swap, disk) and time the cost-table primitives, no reps:
    /// the guest's own cost profile, for the model beside it (vm.py `guest_costs`).
    #[serde(default)]
    pub calibrate: Option<Calibrate>,
    /// The normalized scenario, as JSON text (what reclaimsim-host replays).
    #[serde(default)]
    pub scenario: String,
    #[serde(default)]
    pub reps: u32,
    /// Module files in the initramfs, in load order (dependencies first).
    #[serde(default)]
    pub modules: Vec<String>,
    /// Files under /proc/sys or /sys with the value to write, in order
    /// (e.g. "/proc/sys/vm/swappiness" = "60", "/sys/kernel/mm/lru_gen/enabled" = "y").
    #[serde(default)]
    pub writes: Vec<(String, String)>,
    /// The value /sys/kernel/mm/lru_gen/enabled must have: "y"/"n", or absent to leave it.
    #[serde(default)]
    pub lru_gen: Option<String>,
    /// zram swap size [bytes]; 0 = no swap.
    #[serde(default)]
    pub swap_bytes: u64,
    /// The block device holding an empty ext4 filesystem for the workloads' files.
    #[serde(default)]
    pub disk: Option<String>,
    /// The cgroup tree (parents before children) with interface files to write.
    #[serde(default)]
    pub cgroups: Vec<Cgroup>,
    /// Processes to fork per workload.
    #[serde(default)]
    pub procs: Vec<Procs>,
    /// memory.reclaim writes.
    #[serde(default)]
    pub reclaim: Vec<Reclaim>,
    /// kprobe events to define, as lines of tracing/kprobe_events ("p:NAME SYMBOL ARGS").
    #[serde(default)]
    pub kprobes: Vec<String>,
    /// Event histograms to take over each rep (trace.rs).
    #[serde(default)]
    pub hists: Vec<Hist>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hist {
    /// The event's directory under tracing/events, e.g. "workqueue/workqueue_execute_start".
    pub event: String,
    /// The trigger, e.g. "hist:keys=function.sym if ..." (removed with a leading "!").
    pub trigger: String,
}

impl Plan {
    /// What serde cannot check: one access threshold per write.
    pub fn check(&self) -> Result<(), String> {
        for (i, r) in self.reclaim.iter().enumerate() {
            if let Some(th) = &r.after_accesses {
                if th.len() as u64 != r.times {
                    return Err(format!(
                        "plan.reclaim[{i}].after_accesses: {} thresholds for {} writes",
                        th.len(),
                        r.times
                    ));
                }
            }
        }
        for (i, h) in self.hists.iter().enumerate() {
            let parts: Vec<&str> = h.event.split('/').collect();
            let name_ok =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if parts.len() != 2 || !parts.iter().all(|s| name_ok(s)) {
                return Err(format!(
                    "plan.hists[{i}].event: {:?} is not SUBSYSTEM/EVENT",
                    h.event
                ));
            }
            if !h.trigger.starts_with("hist:") || h.trigger.contains('\n') {
                return Err(format!(
                    "plan.hists[{i}].trigger: {:?} is not one hist trigger line",
                    h.trigger
                ));
            }
        }
        if let Some((i, k)) = self
            .kprobes
            .iter()
            .enumerate()
            .find(|(_, k)| k.contains('\n'))
        {
            return Err(format!("plan.kprobes[{i}]: {k:?} is more than one line"));
        }
        Ok(())
    }
}

/// The sizes of a calibration in the guest (reclaimsim-host's `calibrate::Sizes`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibrate {
    /// Anonymous region of the fault, access and swap benchmarks [pages].
    pub anon_pages: usize,
    /// The page-cache file [pages], on the data disk (no disk: no page-cache figures).
    pub file_pages: usize,
    /// Repetitions of each benchmark (the median is kept).
    pub reps: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cgroup {
    /// Path under the cgroup2 mount, e.g. "/reader".
    pub path: String,
    /// Interface files and values, in order ("memory.max" = "67108864").
    #[serde(default)]
    pub files: Vec<(String, String)>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Procs {
    pub workload: usize,
    pub count: u32,
    pub threads: u32,
    pub cgroup: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reclaim {
    pub cgroup: String,
    /// Due time of the first write after the workloads start [ns].
    pub at_ns: u64,
    pub every_ns: u64,
    pub times: u64,
    /// The text written to memory.reclaim.
    pub buffer: String,
    /// When given, write k is made once the workloads have done this many accesses in
    /// all (the simulator's count at its due time) instead of at its wall-clock due time.
    #[serde(default)]
    pub after_accesses: Option<Vec<u64>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(hists: &str, kprobes: &str) -> Plan {
        let text = format!(r#"{{"hists": {hists}, "kprobes": {kprobes}}}"#);
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn a_hist_names_an_event_directory_and_one_trigger_line() {
        let ok = r#"[{"event": "kprobes/prio", "trigger": "hist:keys=prio"},
                     {"event": "workqueue/workqueue_execute_start", "trigger": "hist:keys=function.sym"}]"#;
        assert!(plan(ok, "[]").check().is_ok());
        for bad in [
            r#"[{"event": "../../x", "trigger": "hist:keys=prio"}]"#,
            r#"[{"event": "sched/sched_switch/x", "trigger": "hist:keys=prio"}]"#,
            r#"[{"event": "sched/", "trigger": "hist:keys=prio"}]"#,
        ] {
            let e = plan(bad, "[]").check().unwrap_err();
            assert!(e.contains("plan.hists[0].event"), "{e}");
        }
        let two_lines = r#"[{"event": "kprobes/prio", "trigger": "hist:keys=prio\nx"}]"#;
        assert!(plan(two_lines, "[]")
            .check()
            .unwrap_err()
            .contains("trigger"));
        let not_hist = r#"[{"event": "kprobes/prio", "trigger": "traceoff"}]"#;
        assert!(plan(not_hist, "[]")
            .check()
            .unwrap_err()
            .contains("trigger"));
        let kprobe = r#"["p:a f\nx"]"#;
        assert!(plan("[]", kprobe)
            .check()
            .unwrap_err()
            .contains("plan.kprobes[0]"));
    }
}
