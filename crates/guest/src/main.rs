//! reclaimsim-guest: the init (PID 1) of `reclaimsim kernel-run --vm`'s virtual machine.
//!
//! The host (python/reclaimsim/vm.py) boots a kernel under QEMU with an initramfs that
//! holds this binary as `/init`, the kernel modules it needs and `/plan.json`: what to
//! set up and run, decided on the host (the cgroup tree with its limits, sysctls, the
//! LRU, swap, the memory.reclaim schedule, the workloads' processes). This program
//! carries the plan out, with no shell and no Python in the guest:
//!
//! 1. mount proc, sysfs, devtmpfs, a tmpfs for the live counters, cgroup2 (with the
//!    memory controller), debugfs (where the kernel has it) and the data disk (ext4, for
//!    the page-cache workloads' files);
//!    load the modules (zram, virtio_blk, and what they need) with finit_module;
//! 2. set vm.* sysctls, /sys/kernel/mm/lru_gen/enabled, zram swap (a swap header written
//!    here, then swapon); with event histograms in the plan, mount tracefs and define
//!    its kprobe events (trace.rs);
//! 3. per rep: create the cgroup tree, drop caches, snapshot /proc/vmstat, fork every
//!    workload process into its cgroup (each replays its access sequence through the
//!    reclaimsim-host crate, as the host kernel-run does), run the memory.reclaim writes
//!    from threads of this process (at the access counts the plan gives, else on their
//!    wall-clock schedule), wait, and read the
//!    deltas: /proc/vmstat, and each cgroup's memory.stat, memory.events,
//!    memory.pressure's stall totals and cpu.stat (new cgroups start at zero, so their
//!    end values are the deltas), MGLRU's
//!    /sys/kernel/debug/lru_gen (each new memcg's generations start at max_seq 3), and
//!    the rep's event histograms (triggers installed at its start, read at its end);
//! 4. write one JSON document to the second serial port (/dev/ttyS1, a file on the host)
//!    and power off. Any error becomes `{"error": ...}` there; the host also has the
//!    console (ttyS0) for a panic.
//!
//! A calibration plan (`calibrate`, vm.py `guest_costs`) does steps 1 and 2 and then,
//! instead of reps, times `reclaimsim calibrate`'s benchmarks in the guest: the figures
//! the host turns into the guest's own cost profile for the model beside it.

mod plan;
mod rep;
mod sys;
mod trace;

use serde_json::{json, Value};
use std::io::Write;

const PLAN: &str = "/plan.json";
const DATA_PORT: &str = "/dev/ttyS1";
const STARTED: &str = "reclaimsim-guest: started";

fn main() {
    let out = match run() {
        Ok(v) => v,
        Err(e) => json!({ "error": e }),
    };
    send(&out);
    sys::power_off();
}

fn run() -> Result<Value, String> {
    // The host's sign that the kernel booted as far as its init (see vm.py `boot`).
    eprintln!("{STARTED}");
    sys::mount_base()?;
    let text = std::fs::read_to_string(PLAN).map_err(|e| format!("{PLAN}: {e}"))?;
    let plan: plan::Plan = serde_json::from_str(&text).map_err(|e| format!("{PLAN}: {e}"))?;
    plan.check()?;
    if plan.probe {
        return Ok(json!({ "probe": true, "kernel": sys::uname_release() }));
    }
    sys::load_modules(&plan.modules)?;
    let setup = sys::setup(&plan)?;
    if let Some(c) = &plan.calibrate {
        return Ok(json!({
            "kernel": sys::uname_release(),
            "setup": setup,
            "calibration": calibrate(&plan, c)?,
        }));
    }
    trace::setup(&plan.kprobes, &plan.hists)?;
    let prepared = rep::prepare(&plan)?;
    let mut reps = Vec::new();
    for i in 0..plan.reps {
        eprintln!("reclaimsim-guest: rep {}/{}", i + 1, plan.reps);
        reps.push(rep::run_rep(&plan, &prepared)?);
    }
    Ok(json!({
        "kernel": sys::uname_release(),
        "version": std::fs::read_to_string("/proc/version").unwrap_or_default().trim(),
        "setup": setup,
        "reps": reps,
    }))
}

/// The cost-table primitives timed in this guest (what `reclaimsim calibrate` times on a
/// host): anonymous faults, accesses and zeroing; page-cache hits, misses and clean
/// reclaim when the plan has a data disk; swap-out and swap-in when it has zram swap.
/// Cache lines and the block device are left out: the vCPUs share one host thread under
/// TCG, and the guest's swap is zram whatever the scenario's device.
fn calibrate(plan: &plan::Plan, c: &plan::Calibrate) -> Result<Value, String> {
    use reclaimsim_host::calibrate::{run_json, Part, Sizes};
    let sizes = Sizes {
        anon_pages: c.anon_pages,
        file_pages: c.file_pages,
        reps: c.reps,
        pingpongs: 0,
    };
    let dir = std::path::Path::new(sys::WORKDIR);
    let mut parts = vec![Part::Anon];
    if plan.disk.is_some() {
        parts.push(Part::PageCache);
    }
    if plan.swap_bytes > 0 {
        parts.push(Part::Swap);
    }
    let mut figs = Vec::new();
    for part in parts {
        eprintln!("reclaimsim-guest: calibrating {part:?}");
        let text = run_json(part, dir, (0, 0), sizes)?;
        let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        figs.extend(v.as_array().cloned().unwrap_or_default());
    }
    Ok(Value::Array(figs))
}

/// Write the result to the data port, framed so the host can tell a complete document
/// from a cut one.
fn send(v: &Value) {
    let body = v.to_string();
    let framed = format!("RECLAIMSIM-BEGIN {}\n{body}\nRECLAIMSIM-END\n", body.len());
    match sys::open_raw_tty(DATA_PORT) {
        Ok(mut f) => {
            let _ = f.write_all(framed.as_bytes());
            let _ = f.flush();
            sys::tty_drain(&f);
        }
        Err(e) => eprintln!("reclaimsim-guest: {DATA_PORT}: {e}"),
    }
}
