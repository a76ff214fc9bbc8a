"""The kernel beside the model: what kernel-run (the host runner, kernelrun.py), kernel-run
--vm (vm.py) and kernel-compare share. The counters both sides report under one set of
names (kernel_counters for a kernel rep, sim_counters for a simulator run: /proc/vmstat,
the workloads' access counters, per-cgroup `NAME@/cgroup` rows, per-thread `#tN` rows and
each workload's time rows), the simulator's runs beside the kernel's reps (simulate, the
memcg flush phase spread over them), and the side-by-side report (assemble,
format_report) with the counters the model does not produce the kernel's way.
"""

from __future__ import annotations

import json
import signal
import statistics

from .batch import result_text, run_one
from .result import Result
from .term import printable


class KernelRunError(Exception):
    """Bad input or a missing host facility: exit 2 with this message."""


# /proc/vmstat counters compared; allocstall is the sum of allocstall_*.
VMSTAT_COUNTERS = [
    "pgscan_anon", "pgscan_file", "pgsteal_anon", "pgsteal_file",
    "pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct",
    "pswpin", "pswpout", "swap_ra", "swap_ra_hit",
    "workingset_refault_anon", "workingset_refault_file",
    "workingset_activate_anon", "workingset_activate_file",
    "workingset_restore_anon", "workingset_restore_file", "workingset_nodereclaim",
    "pgactivate", "pgdeactivate", "pgrefill", "pgrotated", "pgmajfault",
    "allocstall", "oom_kill",
]

# Counters the model does not produce the kernel's way, with the reason (shown, not hidden).
NOT_COMPARABLE = {
    "pgmajfault": "system-wide: counts every process's major faults (the workloads' own are major_faults)",
    "minor_faults": "the host counts faults of the runner itself (stacks, buffers) too",
}
CTXT_NOT_COMPARABLE = (
    "the model has no scheduler (each switch back in marks the process for MGLRU's walk, "
    "lru_gen_use_mm; the model marks it whenever it runs: mm_list.rs)"
)
# Prefix rules: counters named PREFIX@/cgroup or PREFIX#tN.
NOT_COMPARABLE_PREFIX = {
    "kernel@": "the kernel's count includes the runner process's own objects (task, stacks, mm), "
    "of which some outlive it",
    "voluntary_ctxt_switches#": CTXT_NOT_COMPARABLE,
    "nonvoluntary_ctxt_switches#": CTXT_NOT_COMPARABLE,
}


def per_thread_counters(threads: list[dict]) -> dict[str, int]:
    """hits#tN, misses#tN and elapsed_ms#tN of each workload thread, numbered in
    workload, process and thread order (the simulator's stream order; both sides give
    each thread the same access sequence). Threads of a workload run unsynchronized: when one
    gets ahead (a host CPU busy elsewhere, a vCPU descheduled, a CPU that every IO
    completion must wake from another), its share of the cgroup may fit and stop missing
    while the other waits, which the totals alone cannot tell from a reclaim difference."""
    out = {}
    for i, t in enumerate(threads):
        out[f"hits#t{i}"] = t["hits"]
        out[f"misses#t{i}"] = t["misses"]
        if "elapsed_ns" in t:
            out[f"elapsed_ms#t{i}"] = round(t["elapsed_ns"] / 1e6)
    return out


def per_access(model: dict, notes: list) -> dict:
    """The model side of kernel-run replays each access, as the kernel sees them: a
    workload with access_model = "sampled" runs per access there (docs/model.md, "Sampled
    access"), said in `notes`."""
    for w in model.get("workload", []):
        if w.get("access_model") == "sampled":
            w["access_model"] = "per_access"
            notes.append(
                f"workload {w.get('name', w.get('type'))}: its model side ran per access "
                "(access_model = \"sampled\" draws no access sequence to replay)"
            )
    return model


def workload_names(scenario: dict) -> list[str]:
    """Each workload's name in the time rows: its `name`, else its type and index
    (`usemem0`), the name the simulator's own reports give it."""
    return [w.get("name") or f"{w.get('type', 'workload')}{i}" for i, w in enumerate(scenario.get("workload", []))]


def time_rows(elapsed_ns: float, accesses: float, faults: float, name: str) -> dict[str, float]:
    """A workload's time rows: elapsed time [ms], accesses and page faults per second."""
    s = elapsed_ns / 1e9
    return {
        f"elapsed_ms@{name}": elapsed_ns / 1e6,
        f"accesses_per_s@{name}": accesses / s if s > 0 else 0.0,
        f"faults_per_s@{name}": faults / s if s > 0 else 0.0,
    }


def kernel_time_counters(processes: list[dict], names: list[str]) -> dict[str, float]:
    """The kernel side's time rows, in wall time: a workload's elapsed time is its longest
    thread's (its processes start together), its rates are its totals over that time."""
    out = {}
    for wi, name in enumerate(names):
        threads = [t for p in processes if p.get("workload") == wi for t in p["threads"]]
        if not threads:
            continue
        elapsed = max(t.get("elapsed_ns", 0) for t in threads)
        acc = sum(t["accesses"] for t in threads)
        faults = sum(t["major_faults"] + t["minor_faults"] for t in threads)
        out.update(time_rows(elapsed, acc, faults, name))
    return out


def sim_time_counters(result, names: list[str]) -> dict[str, float]:
    """The simulator's time rows, in virtual time (a workload's runtime_ns: from its first
    task's start to its last one's end)."""
    out = {}
    for name, w in zip(names, result.workloads):
        out.update(time_rows(w["runtime_ns"], w["accesses"], w["major_faults"] + w["minor_faults"], name))
    return out


def why_not_comparable(name: str) -> str | None:
    if name in NOT_COMPARABLE:
        return NOT_COMPARABLE[name]
    return _prefix_reason(NOT_COMPARABLE_PREFIX, name)


def _prefix_reason(reasons: dict[str, str], name: str) -> str | None:
    """The reason of the first prefix of `reasons` that `name` starts with."""
    return next((why for prefix, why in reasons.items() if name.startswith(prefix)), None)

# FLUSH_TIME of mm/memcontrol.c (2 * HZ) [ns].
FLUSH_TIME_NS = 2_000_000_000

# Below this many events a difference is host noise (other processes, the runner itself).
NOISE_FLOOR = 64

# Counters the fidelity work holds to 5%.
KEY_COUNTERS = {
    "misses", "major_faults", "pgscan_anon", "pgscan_file", "pgsteal_anon", "pgsteal_file",
    "pswpin", "pswpout", "workingset_refault_anon", "workingset_refault_file",
}





# Per-cgroup counters of cgroup v2's memory.stat and memory.events, as NAME@/cgroup rows
# (kernel-run --vm; a v1 host has no per-memcg reclaim counters).
CG_STAT_COUNTERS = [
    "pgscan", "pgsteal", "pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct",
    "pgscan_proactive", "pgsteal_proactive",
    "workingset_refault_anon", "workingset_refault_file",
    "workingset_activate_anon", "workingset_activate_file",
    "workingset_restore_anon", "workingset_restore_file", "workingset_nodereclaim",
    "pgrefill", "pgactivate", "pgdeactivate", "pgmajfault",
]
CG_EVENTS = ["high", "max", "oom", "oom_kill"]

# Where a cgroup's time went, as the guest kernel accounts it (kernel-run --vm): the stall
# totals of memory.pressure (PSI: time a task of the cgroup waited in memory reclaim or
# on a refault of its working set; `some`, at least one task; `full`, all of its non-idle
# tasks) and cpu.stat's CPU time, user and system, all in microseconds in the files.
# Rows the kernel alone has.
CG_TIME_ROWS = {
    "memory.pressure.some_ms": ("memory.pressure", "some"),
    "memory.pressure.full_ms": ("memory.pressure", "full"),
    "cpu.stat.user_ms": ("cpu.stat", "user_usec"),
    "cpu.stat.system_ms": ("cpu.stat", "system_usec"),
}
KERNEL_ONLY_PREFIX = {
    "memory.pressure.": "the model keeps no pressure stall information (PSI): the kernel's time in reclaim "
    "and refault waits, to set beside the model's time rows",
    "cpu.stat.": "the model does not split a task's time into user and system CPU time",
}


def cgroup_time_rows(path: str, files: dict) -> dict[str, float]:
    """A cgroup's CG_TIME_ROWS from its files as the guest read them (`files`: file name to
    its parsed fields), in milliseconds; a file or field the kernel lacks gives no row. A
    cgroup created for the rep starts at zero, so its totals are the rep's."""
    out = {}
    for row, (file, field) in CG_TIME_ROWS.items():
        v = files.get(file, {}).get(field)
        if v is not None:
            out[f"{row}@{path}"] = v / 1e3
    return out

# MGLRU: a memcg's lruvec starts at max_seq MIN_NR_GENS + 1 (lru_gen_init_lruvec) and
# each aging (inc_max_seq) adds one, so a memcg made for the run has aged max_seq - 3
# times on each node when the run ends.
LRU_GEN_FIRST_MAX_SEQ = 3


def parse_lru_gen(text: str) -> dict[tuple[str, int], int]:
    """max_seq of each (memcg path, node) in the text of /sys/kernel/debug/lru_gen (a
    `memcg ID PATH` line, then per node a ` node NID` line and one line per generation
    from the oldest to max_seq, its sequence number first)."""
    out: dict[tuple[str, int], int] = {}
    path, node = None, None
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "memcg":
            path, node = (f[2] if len(f) > 2 else ""), None
        elif f[0] == "node":
            node = int(f[1])
        elif path is not None and node is not None and f[0].isdigit():
            out[(path, node)] = max(out.get((path, node), 0), int(f[0]))
    return out


def inc_max_seq_rows(max_seqs: dict[tuple[str, int], int], paths: list[str]) -> dict[str, int]:
    """`inc_max_seq@PATH`: the agings of each of `paths` (max_seq - 3), summed over the
    nodes it has generations on; none for a path the file does not list."""
    out: dict[str, int] = {}
    for (path, _node), seq in max_seqs.items():
        if path in paths:
            out[f"inc_max_seq@{path}"] = out.get(f"inc_max_seq@{path}", 0) + seq - LRU_GEN_FIRST_MAX_SEQ
    return out


def sim_max_seqs(lru_gen: dict | None) -> dict[tuple[str, int], int]:
    """max_seq of each (cgroup, node) in a result's `lru_gen` table (its debugfs file at
    the run's end)."""
    if not lru_gen:
        return {}
    cols = lru_gen["columns"]
    ci, ni, si = cols.index("cgroup"), cols.index("node"), cols.index("seq")
    out: dict[tuple[str, int], int] = {}
    for row in lru_gen["rows"]:
        key = (row[ci], row[ni])
        out[key] = max(out.get(key, 0), row[si])
    return out


def kernel_counters(
    processes: list[dict], vm_delta: dict, settled: dict, cg_stats: dict | None = None, names: list[str] | None = None
) -> dict:
    """One kernel rep's counters under kernel-run's names (sim_counters' names): the
    workload processes' access counters (`processes`: each with its threads, or "killed"),
    the /proc/vmstat deltas, each cgroup's settled (file, anon, kernel) bytes and, given
    `cg_stats` ({path: (memory.stat, memory.events)}), its per-cgroup counters; given the
    workloads' `names`, their time rows (kernel_time_counters)."""
    threads = [t for p in processes for t in p["threads"]]
    c = {k: sum(t[k] for t in threads) for k in ("accesses", "hits", "misses", "major_faults", "minor_faults")}
    c.update(per_thread_counters(threads))
    # How often each thread was switched out and back in (a killed one's are not known).
    for i, t in enumerate(threads):
        for k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            c[f"{k}#t{i}"] = t.get(k, 0)
    vm = dict(vm_delta)
    vm["allocstall"] = sum(v for k, v in vm_delta.items() if k.startswith("allocstall_"))
    for k in VMSTAT_COUNTERS:
        c[k] = vm.get(k, 0)
    for path, (file_b, anon_b, kernel_b) in settled.items():
        c[f"file@{path}"] = file_b
        c[f"anon@{path}"] = anon_b
        c[f"kernel@{path}"] = kernel_b
        if cg_stats is not None:
            st, ev = cg_stats[path]
            for k in CG_STAT_COUNTERS:
                if k in st:
                    c[f"{k}@{path}"] = st[k]
            for k in CG_EVENTS:
                c[f"memory.events.{k}@{path}"] = ev.get(k, 0)
    c["oom_killed_processes"] = sum(1 for p in processes if p.get("killed") == signal.SIGKILL)
    if names is not None:
        c.update(kernel_time_counters(processes, names))
    return c


def sim_counters(result, per_cgroup: bool = False, names: list[str] | None = None) -> dict[str, float]:
    """The simulator's values of the counters kernel-run collects (with `per_cgroup`,
    also each cgroup's memory.stat and memory.events counters)."""
    out = {}
    for k in ("accesses", "hits", "misses", "major_faults", "minor_faults"):
        out[k] = sum(w[k] for w in result.workloads)
    vm = result.vmstat
    for k in VMSTAT_COUNTERS:
        out[k] = vm.get(k, 0)
    for c in result.cgroups:
        st = c["memory.stat"]
        out[f"file@{c['path']}"] = st.get("file", 0)
        out[f"anon@{c['path']}"] = st.get("anon", 0)
        out[f"kernel@{c['path']}"] = st.get("kernel", 0)
        if per_cgroup:
            for k in CG_STAT_COUNTERS:
                out[f"{k}@{c['path']}"] = st.get(k, 0)
            for k in CG_EVENTS:
                out[f"memory.events.{k}@{c['path']}"] = c["memory.events"].get(k, 0)
    if per_cgroup:
        paths = [c["path"] for c in result.cgroups]
        out.update(inc_max_seq_rows(sim_max_seqs(result.data.get("lru_gen")), paths))
    out["oom_killed_processes"] = len(result.oom_kills)
    out.update(per_thread_counters([t for w in result.workloads for t in w.get("threads", [])]))
    out.update(sim_time_counters(result, names or [w["name"] for w in result.workloads]))
    return out


# ---------------------------------------------------------------------------------------
# the simulator's side and the report


def simulate(
    norm: dict, runs: int, progress=None, per_cgroup: bool = False, locks: list | None = None,
    tracepoints: list | None = None,
) -> list[dict]:
    """The simulator's counters for the scenario, once per kernel rep.

    The kernel's periodic memcg flush has an arbitrary phase relative to a workload's
    start, and decisions that read flushed statistics (inactive_is_low, the refault
    activation test) depend on it; the kernel's reps sample it at random. Unless the
    scenario pins `kernel.memcg_flush_phase`, the simulator's runs spread it evenly over
    the 2 s period, with the same seed (the same access sequences) in each. With `locks`
    (a list), each run's lock table is appended to it; with `tracepoints`, each run's
    tracepoint table (the scenario's `tracepoints`; [] without)."""
    out = []
    pinned = norm["kernel"].get("memcg_flush_phase") is not None
    for i in range(1 if pinned else runs):
        d = json.loads(json.dumps(norm))
        if not pinned:
            d["kernel"]["memcg_flush_phase"] = int((i + 0.5) * FLUSH_TIME_NS / runs)
        if progress:
            progress(f"simulating ({i + 1}/{1 if pinned else runs})")
        r = Result(result_text(*run_one(json.dumps(d))[:2]))
        out.append(sim_counters(r, per_cgroup, workload_names(norm)))
        if locks is not None:
            locks.append(r.locks)
        if tracepoints is not None:
            tracepoints.append(r.data.get("tracepoints") or [])
    return out



# The time rows (wall time on the kernel, virtual time in the model).
TIME_ROWS = ("elapsed_ms@", "accesses_per_s@", "faults_per_s@", "elapsed_ms#")


def is_time_row(name: str) -> bool:
    return name.startswith(TIME_ROWS)


def assemble(
    norm: dict, reps_out: list[dict], sims: list[dict], notes: list, cgroup_version: int, kernel: str,
    time_not_comparable: str | None = None, kernel_only: dict[str, str] | None = None, **extra,
) -> dict:
    """The side-by-side report from the kernel's reps and the simulator's runs: one row
    per counter the kernel side has, with mean, CV, the simulator's mean and the
    difference. With `time_not_comparable` (why), the time rows are marked not
    comparable (a guest under QEMU's TCG runs slower than any hardware the costs
    describe). `kernel_only`: rows the model has no value for, with the reason, by name
    or by a name they extend ("hist:E" covers "hist:E{...}" and "hist:E.F"): not
    comparable, and no difference."""
    rows = []
    names = list(reps_out[0]["counters"])
    cut = cut_short(reps_out, sims)
    for name in names:
        vals = [r["counters"][name] for r in reps_out]
        mean = statistics.fmean(vals)
        cv = statistics.pstdev(vals) / mean if mean else 0.0
        svals = [x.get(name, 0) for x in sims]
        s = statistics.fmean(svals)
        scv = statistics.pstdev(svals) / s if s else 0.0
        if mean:
            diff = (s - mean) / mean * 100.0
        else:
            diff = 0.0 if s == 0 else None
        alone = _extended_reason(kernel_only or {}, name) or _prefix_reason(KERNEL_ONLY_PREFIX, name)
        if alone:
            diff = None  # the model has no such row: its 0 is no value
        why_not = why_not_comparable(name) or alone
        if why_not is None and cut and name not in ("oom_kill", "oom_killed_processes"):
            why_not = cut
        if why_not is None and time_not_comparable and is_time_row(name):
            why_not = time_not_comparable
        comparable = why_not is None
        row = {
            "name": name,
            "kernel_mean": mean,
            "kernel_cv": cv,
            "kernel_values": vals,
            "sim": s,
            "sim_cv": scv,
            "diff_pct": diff,
            "comparable": comparable,
        }
        if not comparable:
            row["why_not"] = why_not
        rows.append(row)
    return {
        "scenario": norm.get("name") or "scenario",
        "seed": norm["seed"],
        "reps": len(reps_out),
        "cgroup_version": cgroup_version,
        "kernel": printable(kernel),
        "wall_s": [r["wall_s"] for r in reps_out],
        "notes": notes,
        **extra,
        "cut_short": cut,
        "counters": rows,
    }


def _extended_reason(reasons: dict[str, str], name: str) -> str | None:
    for base, why in reasons.items():
        if name == base or name.startswith((base + "{", base + ".")):
            return why
    return None


def cut_short(reps_out: list[dict], sims: list[dict]) -> str | None:
    """Why the kernel's rows cannot be set beside the model's, or None: a kernel rep in
    which a workload process was OOM-killed (SIGKILL) more often than in the model's runs
    ended early, so its counters cover other work than the model's."""
    sim_kills = max((x.get("oom_killed_processes", 0) for x in sims), default=0)
    bad = [i + 1 for i, r in enumerate(reps_out) if r["counters"].get("oom_killed_processes", 0) > sim_kills]
    if not bad:
        return None
    reps = ", ".join(map(str, bad))
    return (f"the kernel side ended early: a workload process was OOM-killed in rep{'s' if len(bad) > 1 else ''} {reps} "
            f"of {len(reps_out)} (the model's runs: {sim_kills} kills), so its counters cover less work")


def off_by_more_than_5pct(row: dict) -> bool:
    """A key counter that disagrees by more than 5% and more than the noise floor."""
    d = row["diff_pct"]
    if abs(row["sim"] - row["kernel_mean"]) < NOISE_FLOOR:
        return False
    return d is None or abs(d) > 5


def format_report(rep: dict, show_all: bool = False) -> str:
    lines = [
        f"# kernel-run: {rep['scenario']}  seed={rep['seed']}  reps={rep['reps']}  "
        f"kernel {rep['kernel']}" + (f" (model: {rep['model_version']})" if rep.get("model_version") else "")
        + f"  cgroup v{rep['cgroup_version']}  "
        f"wall {', '.join(f'{w:.1f}' for w in rep['wall_s'])} s"
    ]
    for n in rep["notes"]:
        lines.append(f"note: {n}")
    if rep.get("cut_short"):
        lines.append(f"NOT COMPARABLE: {rep['cut_short']}; every row but the kills is marked")
    shown = [r for r in rep["counters"] if show_all or r["kernel_mean"] != 0 or r["sim"] != 0]
    # The name column fits the longest name shown (event histogram rows are long), up to 72.
    w = min(72, max([28] + [len(r["name"]) for r in shown]))
    lines.append(f"{'counter':<{w}} {'kernel mean':>14} {'cv':>7} {'sim mean':>14} {'cv':>7} {'diff':>9}")
    said = set()
    for r in shown:
        d = r["diff_pct"]
        ds = "n/a" if d is None else f"{d:+.1f}%"
        flag = ""
        if not r["comparable"]:
            why = "the kernel side ended early" if r["why_not"] == rep.get("cut_short") else r["why_not"]
            # A reason is given in full once; the rows after it that share it say so.
            flag = f"  (not comparable: {'as above' if why in said else why})"
            said.add(why)
        elif r["name"] in KEY_COUNTERS and off_by_more_than_5pct(r):
            flag = "  !"
        lines.append(
            f"{r['name']:<{w}} {r['kernel_mean']:>14.0f} {r['kernel_cv']:>7.3f} {r['sim']:>14.0f} {r['sim_cv']:>7.3f} {ds:>9}{flag}"
        )
    if any(r["comparable"] and r["name"] in KEY_COUNTERS and off_by_more_than_5pct(r) for r in rep["counters"]):
        lines.append(f"! = a key counter more than 5% and {NOISE_FLOOR} events from the kernel's mean")
    if rep.get("locks") is not None:
        from .perflock import format_rows

        lines += ["", *format_rows(rep["locks"])]
    return "\n".join(lines)
