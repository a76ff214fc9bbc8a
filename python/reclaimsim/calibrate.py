"""`reclaimsim calibrate`: measure this machine's cost-table entries and write a cost profile.

The native microbenchmarks (crates/host/src/calibrate.rs) time primitives from user space
on the running kernel. Some are one cost-table entry each (a page-cache hit, a cache-line
transfer, an atomic); others are a kernel path that the model charges as a sum of entries
(an anonymous fault is fault entry, allocation, zeroing and mapping). A path gives the one
entry of its sum that no other benchmark measures, by subtracting the others: measured
ones first, the table's current values for the rest (named in the entry's `source`).

| entry | from | subtracted |
|---|---|---|
| fault_entry | first touch of an anonymous page | page_zero, page_alloc, pte_map |
| page_copy | first write to a page a forked child still maps | fault_entry, page_alloc, pte_map |
| ssd_read_latency | pread of an uncached page | file_read_hit, page_alloc |
| shrink_folio | MADV_PAGEOUT of a mapped clean file page | isolate_folio, pte_unmap, page_free, list_op |
| zram_write | MADV_PAGEOUT of an anonymous page to zram | the clean-file reclaim path, swap_cache_op |
| zram_read | swap-in fault from zram | fault_entry, page_alloc, pte_map, swap_cache_op |
| tlb_flush_ipi | one page zapped per madvise while a thread of the process runs on the other CPU | the same without that thread (its flush is local) |

`perf_lock_record_event` is measured as is: `perf bench syscall basic` (a native getppid()
loop) with `perf record` attached to syscalls:sys_enter_getppid under perf lock record's
own options (`-R -m 1024 -c 1 --synth task --call-graph fp,8`), less the loop without it:
what one tracepoint sample with its call chain costs the CPU that fires it
(crates/core/src/engine/perf_lock.rs). Needs root and linux-perf; without them the entry
keeps its default and the profile says why.

Three checks time contended lines: one thread per CPU, all doing a lock xadd on the same
one, two or four lines in turn (`contended_line_1`, `contended_lines_2`,
`contended_lines_4`: wall time over all threads' rounds). One line alone is no pace for
the others: its owner often does several operations before the line is taken away, where
with two or more in turn nearly every operation is a transfer (on a 16-core single-node
VM: 26 ns an operation for one line, 69 ns a round for two, 91 for four). Where the CPUs
span two or more nodes, two more time two lines in turn homed on one node and on two
(`contended_lines_2_one_home`, `contended_lines_2_two_homes`): the same transfers, one
home agent or two, so what the first costs more is the coupling the model has as a home
agent per node (crates/core/src/engine/coherence.rs), and `home_agent_occupancy` is
derived from it (`home_agent`); on one node nothing crosses and the entry keeps its
default, said in the profile. With two CPUs there is no queue behind a line, only a
ping-pong: the figures need a machine with the cores to say more.

Where the host has SMT siblings, six more figures (crates/host/src/smt.rs): an integer
loop and a pointer chase on one hardware thread alone and beside its sibling running the
same (`smt_alu_alone`/`smt_alu_shared`, `smt_chase_alone`/`smt_chase_shared`: what a thread
loses to a busy sibling, kept as checks: the model's siblings do not share the core's
units), the ping-pong between two siblings (`cacheline_transfer_smt`, the entry a scenario
with `machine.threads_per_core` > 1 charges for a line between siblings) and the
contended line with one thread per core (`contended_line_1_cores`, a check).

The same shootdown benchmark gives `tlb_flush_ipi_target` as measured: what each
shootdown takes from the CPU it interrupts. The thread spinning on the other CPU reads the
clock in a loop and sums the gaps longer than 250 ns (time its CPU spent in the interrupt);
less the gaps of an equally long spin while no page is zapped (timer ticks, the host),
divided by the shootdowns it received.

The block device under the working directory gives three entries as measured, through
O_DIRECT on a written file: `ssd_write_latency` (one 4 KiB write at a time) and
`ssd_read_interval`, `ssd_write_interval` (the time per IO of 16 threads reading, then
writing, at once: 1 / the device's IOPS at that load). The model's device serves reads
and writes in one queue, so these two also set how a mix of swap-ins and swap-outs
saturates it. Two more figures time one read at a time from a thread pinned to each of
the two CPUs (`direct_read_cpu_a`, `direct_read_cpu_b`, kept as checks): a device whose
completion interrupt goes to one CPU wakes a reader on the other across CPUs, and their
difference is `ssd_remote_wakeup`, what a reader off the interrupt's CPU waits more per
read (crates/core/src/engine/blkdev.rs). A difference within the two figures' spread (the
larger spread times the faster figure) is noise, as on a device with a completion queue
per CPU: the entry is then 0.

One entry comes from a timed reclaim-bound run instead: `pte_referenced`, the per-PTE step
of folio_referenced's rmap walk, which MADV_PAGEOUT skips (it reclaims without looking at
references). `reclaim_bound` replays a memcg-limited anonymous case on the kernel (two
threads writing a 64M area sequentially in a 40M memory cgroup, zram swap: not one of the
calib-* acceptance cases) and in the model with the profile measured so far, and with
pte_referenced 1 us higher; the model's elapsed time is linear in the entry, so the value
at which it equals the kernel's is read off the two runs. The kernel's time is the median
of 15 reps, and the profile's source gives their range: the entry moves by about 1 us per
40 ms of it (the two threads scan in parallel). Two threads, one per CPU of a two-vCPU virtual machine, leave no CPU idle for
a thread to migrate to: with one thread the case's time was bimodal there (15 reps:
339-361 ms or 475-680 ms, in proportions that changed from one minute to the next; medians
385, 552 and 590 ms within 30 minutes), with two it spread over 435-477 ms (medians 456
and 453 ms). Everything else the kernel does
per scanned folio under limit reclaim that the table does not name (try_charge_memcg's
reclaim entry, the anon_vma walk) is thereby charged to this entry, per reference check.
The area is faulted in by its first pass, not populated: MAP_POPULATE marks every folio
accessed, and an area populated beyond the limit is OOM-killed on both sides (each folio
is activated at its first check). A run that ends in an OOM kill on either side times the
kill, not reclaim, so it gives no value and the profile says why.

The path figures themselves are kept in the profile's `[checks]` table beside the model's
sum for the same path, so a reader sees what was decomposed. The swap benchmarks need root
and zram (set up and removed here, as kernel-run does); without them those entries keep
their defaults and the profile says why.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

import tomli_w

from . import _core
from .kernelrun import fstype

# (entry, path figure, subtracted entries): see the module's table.
_DERIVED = [
    ("fault_entry", "anon_fault_path", ("page_zero", "page_alloc", "pte_map")),
    # do_wp_page's copy: the same fault, a copy where the first touch clears.
    ("page_copy", "cow_fault_path", ("fault_entry", "page_alloc", "pte_map")),
    ("ssd_read_latency", "file_read_miss_path", ("file_read_hit", "page_alloc")),
    # MADV_PAGEOUT reclaims without a reference check: no pte_referenced on this path.
    ("shrink_folio", "reclaim_clean_file_path", ("isolate_folio", "pte_unmap", "page_free", "list_op")),
    ("zram_write", "swap_out_path", ("@reclaim_clean_file_path", "swap_cache_op")),
    ("zram_read", "swap_in_path", ("fault_entry", "page_alloc", "pte_map", "swap_cache_op")),
    # One TLB shootdown: the flush of the same one-page zap, to a CPU running the process.
    ("tlb_flush_ipi", "zap_page_shared_path", ("@zap_page_path",)),
]

# Figures that are cost-table entries as measured.
_DIRECT = (
    "access_seq", "access_random", "page_zero", "file_read_hit", "cacheline_transfer", "atomic_rmw", "lock_uncontended",
    "ssd_write_latency", "ssd_read_interval", "ssd_write_interval", "tlb_flush_ipi_target", "perf_lock_record_event",
    "cacheline_transfer_smt",
)

# Path figures kept as checks only, with the model's sum for the same path.
_CHECKS = {
    "lock_handoff": ("lock_uncontended", "cacheline_transfer"),
    "zap_path": ("pte_unmap", "page_free"),
}


# Contended lines (crates/host/src/calibrate.rs, contended_lines): every CPU on one, two,
# four shared lines in turn, and where the CPUs span nodes two lines homed on one node and
# on two; kept as checks. The homed pair gives `home_agent_occupancy` (home_agent). On
# two CPUs they are a ping-pong, with no queue behind a line.
_LINE_CHECKS = (
    "contended_line_1", "contended_lines_2", "contended_lines_4",
    "contended_lines_2_one_home", "contended_lines_2_two_homes",
)
# SMT siblings (crates/host/src/smt.rs), where the host has them: a loop alone and beside
# its sibling's, a line contended by one thread per core. Checks: the model's siblings
# share line transfers only (`cacheline_transfer_smt`, an entry), not the core's units.
_SMT_CHECKS = (
    "smt_alu_alone", "smt_alu_shared", "smt_chase_alone", "smt_chase_shared",
    "contended_line_1_cores",
)
# Two lines in turn within this share of one line's time per round: no coupling measured.
_COUPLING_NOISE = 0.10


def cross_node_share(cpu_nodes: list[int]) -> float:
    """The share of a saturated line's handoffs that cross nodes when one thread per CPU
    of `cpu_nodes` (each CPU's node) takes it in no particular order: the chance that two
    threads drawn at random sit on different nodes, 1 - sum of each node's share squared."""
    n = len(cpu_nodes)
    if n == 0:
        return 0.0
    return 1.0 - sum((cpu_nodes.count(x) / n) ** 2 for x in set(cpu_nodes))


def home_agent(figs: dict, cpu_nodes: list[int]) -> tuple[dict | None, str | None]:
    """`home_agent_occupancy` from the homed contended-line checks: (entry, note).

    The same threads take two lines in turn twice: both lines homed on one node
    (`contended_lines_2_one_home`, t_one) and one on each of two nodes
    (`contended_lines_2_two_homes`, t_two). With two or more lines in turn nearly every
    operation is a transfer, so both runs move the same lines between the same CPUs and
    differ only in how many home agents order the cross-node transfers. Under the model
    (engine/coherence.rs), each transfer occupying its line's agent for h and a share r of
    them crossing nodes (r: cross_node_share), a round takes t_one = max(S, 2 r h) and
    t_two = max(S, r h), S the lines' own pace. So t_one past t_two (by more than the noise)
    gives h = t_one / (2 r), and one within it says the agent is not what limits (0).

    One line's figure (`contended_line_1`) is no control: a lone saturated line lets its
    owner do several operations before it is taken away, which two lines in turn do not
    (measured on one node, 16 CPUs: 26 ns an operation for one line, 69 ns a round for
    two), so the round past one line's pace is there with no agent at all."""
    r = cross_node_share(cpu_nodes)
    if len(set(cpu_nodes)) < 2 or r <= 0:
        return None, (
            "home_agent_occupancy not measured: the CPUs used are on one node, so no line "
            "transfer crosses nodes (the contended-line checks stay as checks)"
        )
    one, two = "contended_lines_2_one_home", "contended_lines_2_two_homes"
    if one not in figs or two not in figs:
        return None, None
    t1, t2 = figs[one]["ns"], figs[two]["ns"]
    nodes = len(set(cpu_nodes))
    head = (
        f"derived: {len(cpu_nodes)} threads on {nodes} nodes (cross-node share of handoffs "
        f"r = {r:.3f}); two lines in turn homed on one node {t1:.0f} ns a round, on two nodes {t2:.0f} ns"
    )
    if t1 <= t2 * (1 + _COUPLING_NOISE):
        return {"ns": 0, "source": f"{head}: within {_COUPLING_NOISE:.0%}, so the agent does not limit (0)"}, None
    h = t1 / (2 * r)
    return {"ns": max(round(h), 1), "source": f"{head}: t_one / (2 r) = {h:.0f} ns (engine/coherence.rs)"}, None


def _cpu_nodes() -> list[int]:
    """The node of each CPU this process may run on (sysfs; node 0 for all without it)."""
    allowed = sorted(os.sched_getaffinity(0))
    node_of: dict[int, int] = {}
    for d in Path("/sys/devices/system/node").glob("node[0-9]*"):
        try:
            text = (d / "cpulist").read_text().strip()
        except OSError:
            continue
        for part in filter(None, text.split(",")):
            lo, _, hi = part.partition("-")
            for c in range(int(lo), int(hi or lo) + 1):
                node_of[c] = int(d.name[4:])
    return [node_of.get(c, 0) for c in allowed]

# The device's read latency from each of the two CPUs: kept as checks, and their
# difference is ssd_remote_wakeup (see the module's text).
_PER_CPU_READS = ("direct_read_cpu_a", "direct_read_cpu_b")


class CalibrateError(Exception):
    """A calibration that cannot run here (exit 2) or failed (exit 1)."""

    def __init__(self, msg: str, code: int = 1):
        super().__init__(msg)
        self.code = code


def table_costs() -> dict[str, int]:
    """The cost table's built-in values [ns], by entry name."""
    return {c["name"]: c["ns"] for c in json.loads(_core.cost_table_json())}


def cpu_model() -> str:
    """This machine's CPU model, as /proc/cpuinfo names it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def measure(workdir: Path, cpus: tuple[int, int], quick: bool, say: Callable[[str], None]) -> tuple[dict, list[str]]:
    """Run the microbenchmarks; returns ({figure name: figure}, notes)."""
    anon_pages, file_pages, reps, pp = (4096, 2048, 3, 20_000) if quick else (65536, 8192, 5, 200_000)
    notes: list[str] = []
    figs: dict[str, dict] = {}

    def part(name: str) -> list[dict]:
        return json.loads(_core.host_calibrate_json(name, str(workdir), cpus[0], cpus[1], anon_pages, file_pages, reps, pp))

    say(f"anonymous memory: faults, accesses, zeroing, zap ({anon_pages * 4 >> 10} MiB, {reps} repetitions)")
    for f in part("anon"):
        figs[f["name"]] = f
    say(f"page cache in {workdir}: hits, misses, clean reclaim ({file_pages * 4 >> 10} MiB file)")
    for f in part("page_cache"):
        figs[f["name"]] = f
    say(f"the block device under {workdir} (O_DIRECT): write latency, read and write throughput")
    device = part("device")
    if not device:
        notes.append(f"ssd_write_latency, ssd_read_interval, ssd_write_interval not measured: {fstype(str(workdir)) or 'the filesystem'} refuses O_DIRECT")
    for f in device:
        figs[f["name"]] = f
    say(f"cache lines between CPUs {cpus[0]} and {cpus[1]}: transfer, lock handoff, atomics")
    for f in part("cache_lines"):
        figs[f["name"]] = f
    swap_figs, why = _swap_part(part, say)
    if why:
        notes.append(why)
    for f in swap_figs:
        figs[f["name"]] = f
    say("a tracepoint sample under perf lock record's options (perf_lock_record_event)")
    try:
        from .perflock import event_cost

        f = event_cost(*((100_000, 3) if quick else (1_000_000, 5)))
        figs[f["name"]] = f
    except (OSError, subprocess.TimeoutExpired) as e:
        notes.append(f"perf_lock_record_event not measured: {e}")
    return figs, notes


def _swap_part(part: Callable[[str], list[dict]], say: Callable[[str], None]) -> tuple[list[dict], str | None]:
    """The swap benchmarks through zram, set up and removed here (needs root)."""
    from .kernelrun import Swap, active_swaps

    if os.geteuid() != 0:
        return [], "swap-out and swap-in through zram not measured: needs root (zram_write, zram_read keep their values)"
    if active_swaps() and not any("zram" in s for s in active_swaps()):
        return [], "swap-out and swap-in not measured: the host swaps to a non-zram device (zram_write, zram_read keep their values)"
    say("swap through zram: MADV_PAGEOUT and swap-in faults")
    notes: list = []
    try:
        swap = Swap(1 << 30, None, notes)
    except Exception as e:  # no zram on this kernel
        return [], f"swap-out and swap-in not measured: {e}"
    try:
        figs = part("swap")
    except OSError as e:
        return [], f"swap-out and swap-in not measured: {e}"
    finally:
        swap.close()
    if not figs:
        return [], "swap-out and swap-in not measured: MADV_PAGEOUT swapped nothing out"
    return figs, None


# The reclaim-bound case of `reclaim_bound` (kept out of the calib-* acceptance cases).
RECLAIM_CASE = {
    "name": "calibrate-reclaim",
    "description": "calibrate: two threads writing 64M sequentially (3 passes, the first faulting each page in) in a 40M memcg, zram swap",
    "duration": "600s",
    "machine": {"cpus": 2, "memory_per_node": "4G", "swap": {"size": "256M", "device": "zram"}},
    "cgroup": [{"path": "/reclaim", "memory": {"max": "40M"}}],
    "workload": [{"type": "usemem", "name": "usemem", "cgroup": "/reclaim", "size": "64M", "threads": 2, "prefault": False, "repeat": 3}],
}

# Kernel reps of the reclaim-bound case (half a second each).
RECLAIM_REPS = 15

# The step of pte_referenced between the two model runs [ns].
_SLOPE_STEP = 1000


def solve_linear(v0: float, t0: float, t1: float, step: float, target: float) -> float | None:
    """The x with T(x) = target for T linear through (v0, t0) and (v0 + step, t1); None
    when T does not grow with x."""
    slope = (t1 - t0) / step
    if slope <= 0:
        return None
    return v0 + (target - t0) / slope


def oom_verdict(kernel_kills: list, model_kills: float) -> str | None:
    """Why a timed run cannot calibrate anything when a side ended in an OOM kill (its
    time is then the time to the kill), or None. `kernel_kills` holds the OOM-killed
    processes of each kernel rep, `model_kills` the model's mean over its runs."""
    k = sum(1 for n in kernel_kills if n)
    if not k and not model_kills:
        return None
    return (
        f"the case was OOM-killed in {k} of {len(kernel_kills)} kernel reps and the model killed "
        f"{model_kills:g} processes per run, so its time is not reclaim's"
    )


def reclaim_bound(
    profile_path: Path, cgroup_version: int, say: Callable[[str], None], reps: int
) -> tuple[dict | None, str | None]:
    """`pte_referenced` from the reclaim-bound case (see the module doc): ({"ns", "source"},
    None), or (None, why) when a side was OOM-killed or the model's time does not depend
    on the entry."""
    from . import kernelrun
    from .sidebyside import simulate

    sc = json.loads(json.dumps(RECLAIM_CASE))
    sc["kernel"] = {"cgroup_version": cgroup_version}
    sc["costs_profile"] = str(profile_path)
    say(f"reclaim-bound case on the kernel and in the model ({reps} reps): {sc['description']}")
    rep = kernelrun.kernel_run(sc, reps, str(profile_path.parent))
    rows = {r["name"]: r for r in rep["counters"]}
    kills = rows["oom_killed_processes"]
    why = oom_verdict(kills["kernel_values"], kills["sim"])
    if why:
        return None, why
    # The median rep: on a virtual machine a rep can be slowed by a migration between
    # vCPUs, and the entry moves by about 1 us per 40 ms of the kernel's time.
    times = rows["elapsed_ms@usemem"]["kernel_values"]
    tk = statistics.median(times)
    t0 = rows["elapsed_ms@usemem"]["sim"]
    scans = rows["pgscan_anon"]["kernel_mean"]
    table = {c["name"]: c for c in json.loads(_core.cost_table_json(json.dumps(sc)))}
    v0 = table["pte_referenced"]["ns"]
    sc1 = dict(sc, costs={"pte_referenced": v0 + _SLOPE_STEP})
    norm = json.loads(_core.validate_json(json.dumps(sc1)))
    sims1 = simulate(norm, reps)
    why = oom_verdict([], statistics.fmean(r["oom_killed_processes"] for r in sims1))
    if why:
        return None, why
    t1 = statistics.fmean(r["elapsed_ms@usemem"] for r in sims1)
    x = solve_linear(v0, t0, t1, _SLOPE_STEP, tk)
    if x is None:
        return None, "the model's time did not grow with pte_referenced"
    ns = max(round(x), 1)
    floor = "" if x >= 1 else f" (the solution was {x:.0f} ns, floored at 1)"
    entry = {
        "ns": ns,
        "source": (
            f"derived from a timed reclaim-bound run: {RECLAIM_CASE['description']}; kernel elapsed "
            f"{tk:.0f} ms (median of {reps}, {min(times):.0f}..{max(times):.0f} ms; pgscan_anon {scans:.0f}), "
            f"model {t0:.0f} ms with pte_referenced "
            f"{v0} ns and {t1:.0f} ms with {v0 + _SLOPE_STEP} ns; the model's time equals the kernel's at "
            f"{x:.0f} ns{floor}. Carries the per-folio work of limit reclaim the table does not name."
        ),
    }
    return entry, None


def derive(figs: dict, base: dict[str, int]) -> tuple[dict, dict]:
    """Cost-table entries and checks from the figures. `base` is the table the
    subtractions use for entries no benchmark measured. Returns (costs, checks), each
    name -> {"ns", "source"}."""
    costs: dict[str, dict] = {}
    value = dict(base)

    def how(f: dict) -> str:
        return f"{f['how']}; median of repetitions of {f['ops']} operations (spread {f['spread'] * 100:.0f}%)"

    for name in _DIRECT:
        if name in figs:
            f = figs[name]
            ns = max(round(f["ns"]), 1)
            costs[name] = {"ns": ns, "source": f"measured: {how(f)}"}
            value[name] = ns
    for name, path, minus in _DERIVED:
        if path not in figs:
            continue
        f = figs[path]
        terms = []
        sub = 0.0
        for m in minus:
            if m.startswith("@"):
                v = figs[m[1:]]["ns"] if m[1:] in figs else None
                if v is None:
                    break
                terms.append(f"{m[1:]} {v:.0f}")
            else:
                v = value[m]
                terms.append(f"{m} {v}{'' if m in costs else ' (table)'}")
            sub += v
        else:
            raw = f["ns"] - sub
            ns = max(round(raw), 1)
            floor = "" if raw >= 1 else f"; the difference was {raw:.0f} ns, floored at 1"
            costs[name] = {
                "ns": ns,
                "source": f"derived: {path} {f['ns']:.0f} ns minus {' + '.join(terms)}{floor}. {path}: {how(f)}",
            }
            value[name] = ns
    checks = {}
    for name, parts in _CHECKS.items():
        if name in figs:
            f = figs[name]
            model = sum(value[p] for p in parts)
            checks[name] = {
                "ns": max(round(f["ns"]), 1),
                "source": f"measured: {how(f)}; the model's sum ({' + '.join(parts)}) is {model} ns",
            }
    for _, path, _ in _DERIVED:
        if path in figs:
            checks[path] = {"ns": max(round(figs[path]["ns"]), 1), "source": f"measured: {how(figs[path])}"}
    for name in (*_LINE_CHECKS, *_SMT_CHECKS):
        if name in figs:
            checks[name] = {"ns": max(round(figs[name]["ns"]), 1), "source": f"measured: {how(figs[name])}"}
    if all(n in figs for n in _PER_CPU_READS):
        for name in _PER_CPU_READS:
            checks[name] = {"ns": max(round(figs[name]["ns"]), 1), "source": f"measured: {how(figs[name])}"}
        costs["ssd_remote_wakeup"] = remote_wakeup(*(figs[n] for n in _PER_CPU_READS))
    return costs, checks


def remote_wakeup(a: dict, b: dict) -> dict:
    """ssd_remote_wakeup from the reads pinned to each CPU: their difference, or 0 when
    it is within their spread (the larger spread times the faster read)."""
    (slow, s_name), (fast, f_name) = sorted([(a, "direct_read_cpu_a"), (b, "direct_read_cpu_b")],
                                            key=lambda x: -x[0]["ns"])
    diff = slow["ns"] - fast["ns"]
    noise = max(a["spread"], b["spread"]) * fast["ns"]
    terms = f"{s_name} {slow['ns']:.0f} ns minus {f_name} {fast['ns']:.0f} ns"
    if diff <= noise:
        return {"ns": 0, "source": (
            f"derived: {terms} is {diff:.0f} ns, within the reads' spread ({noise:.0f} ns): a read completes "
            "where its reader runs, from either CPU (a completion queue per CPU)")}
    return {"ns": round(diff), "source": (
        f"derived: {terms}: a reader off the CPU that the device's completion interrupt arrives at is "
        "woken across CPUs")}


def profile(figs: dict, notes: list[str], workdir: Path) -> dict:
    """The cost profile (a dict tomli_w writes) of a calibration on this machine."""
    costs, checks = derive(figs, table_costs())
    agent, why = home_agent(figs, _cpu_nodes())
    if agent is not None:
        costs["home_agent_occupancy"] = agent
    if why:
        notes = [*notes, why]
    host = platform.node() or "host"
    when = datetime.date.today().isoformat()
    desc = (
        f"measured by reclaimsim calibrate on {host} ({cpu_model()}, {os.cpu_count()} CPUs, "
        f"Linux {platform.release()}), {when}; page-cache file on {fstype(str(workdir)) or 'an unknown filesystem'}"
    )
    if notes:
        desc += "; " + "; ".join(notes)
    return {"name": f"calibrated-{host}", "description": desc, "costs": costs, "checks": checks}


def calibrate(out: str, workdir: str | None, cpus: tuple[int, int], quick: bool, say: Callable[[str], None]) -> dict:
    """Measure, derive and write the profile to `out` (TOML); returns it."""
    ncpu = os.cpu_count() or 1
    for c in cpus:
        if not 0 <= c < ncpu:
            raise CalibrateError(f"--cpus {cpus[0]},{cpus[1]}: CPU {c} does not exist; allowed 0..{ncpu - 1}", 2)
    if cpus[0] == cpus[1] and ncpu > 1:
        raise CalibrateError(f"--cpus {cpus[0]},{cpus[1]}: two different CPUs are needed for a cache-line transfer", 2)
    base = Path(workdir) if workdir else Path("/var/tmp")
    if not base.is_dir():
        raise CalibrateError(f"--workdir {base}: not a directory", 2)
    if fstype(str(base)) in ("tmpfs", "ramfs"):
        raise CalibrateError(f"--workdir {base}: on {fstype(str(base))}; page-cache misses need a disk filesystem", 2)
    with tempfile.TemporaryDirectory(prefix="reclaimsim-calibrate-", dir=base) as d:
        figs, notes = measure(Path(d), cpus, quick, say)
        p = profile(figs, notes, base.resolve())
        _add_reclaim_bound(p, Path(d), 1 if quick else RECLAIM_REPS, say)
    text = "# A cost profile: use it with --costs FILE or costs_profile = \"FILE\" in a scenario.\n" + tomli_w.dumps(p)
    Path(out).write_text(text)
    # The core reads it back exactly as a run will.
    from .scenario import load_scenario

    _core.cost_table_json(json.dumps(load_scenario("default", [f"costs_profile={json.dumps(str(Path(out).resolve()))}"])))
    return p


def _add_reclaim_bound(p: dict, d: Path, reps: int, say: Callable[[str], None]) -> None:
    """Add `pte_referenced` from the reclaim-bound run to profile `p`, or say in its
    description why it was not measured."""
    from . import kernelrun
    from .sidebyside import KernelRunError

    why = None
    if os.geteuid() != 0:
        why = "needs root"
    else:
        try:
            version = kernelrun.check_host().version
        except KernelRunError as e:
            why = str(e)
    if why is None:
        interim = d / "interim.toml"
        interim.write_text(tomli_w.dumps(p))
        try:
            e, why = reclaim_bound(interim, version, say, reps)
        except (KernelRunError, OSError) as err:
            e, why = None, str(err)
        if e is not None:
            p["costs"]["pte_referenced"] = e
            return
    p["description"] += f"; pte_referenced not measured (reclaim-bound run: {why})"


def format_profile(p: dict) -> str:
    lines = [f"{p['name']}: {p['description']}", ""]
    for k, e in p["costs"].items():
        lines.append(f"  {k:<26} {e['ns']:>9} ns  {e['source'].split(':', 1)[0]}")
    lines.append("checks (path figures, not entries):")
    for k, e in p["checks"].items():
        lines.append(f"  {k:<26} {e['ns']:>9} ns")
    return "\n".join(lines)
