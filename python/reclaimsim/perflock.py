"""`perf lock contention` on the host during kernel-run's reps, beside the model's lock table.

The host kernel has the lock:contention_begin/end tracepoints; `perf lock record -a` (Debian's
linux-perf) records them system-wide while a rep runs, and `perf lock contention` sums them
per caller (symbol+offset of the function that waited). The model names its lock sites after
the kernel function that takes the lock (crates/core/src/engine/mod.rs, `call_sites!`), so a
kernel row maps onto a model row when its symbol is that name. Without a debug vmlinux,
inlined callers cannot be told apart (shrink_inactive_list's isolation is reported under the
function it was inlined into), and locks the model does not have (zram's, the swap
allocator's, the page table's) have no model row: those rows are shown as unmapped, never
dropped.

Recording adds tracepoint overhead to every contended lock, so it is opt-in
(`kernel-run --perf-lock`) and the report says that the time rows of such a run include it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path

from .term import printable

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}

# One row of `perf lock contention`'s default table:
#   contended   total wait     max wait     avg wait         type   caller
_ROW = re.compile(
    r"^\s*(\d+)\s+([\d.]+)\s+(ns|us|ms|s)\s+([\d.]+)\s+(ns|us|ms|s)\s+([\d.]+)\s+(ns|us|ms|s)\s+(\S+)\s+(\S+)\s*$"
)


def parse(text: str) -> list[dict]:
    """The rows of `perf lock contention`'s table: caller (symbol+offset), symbol, type,
    contended, total_wait_ns, max_wait_ns. Lines that are not rows are skipped."""
    rows = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        n, tw, tu, mw, mu, _aw, _au, kind, caller = m.groups()
        caller = printable(caller)  # perf's text, shown as text
        rows.append({
            "caller": caller,
            "symbol": caller.split("+", 1)[0],
            "type": kind,
            "contended": int(n),
            "total_wait_ns": round(float(tw) * _UNITS[tu]),
            "max_wait_ns": round(float(mw) * _UNITS[mu]),
        })
    return rows


def unavailable() -> str | None:
    """Why `perf lock` cannot record here, or None."""
    if shutil.which("perf") is None:
        return "perf is not installed (Debian: apt-get install linux-perf)"
    if os.geteuid() != 0:
        return "perf lock record -a needs root"
    events = Path("/sys/kernel/tracing/events/lock/contention_begin")
    if not events.exists():
        if Path("/sys/kernel/tracing").is_dir() and not any(Path("/sys/kernel/tracing").iterdir()):
            subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
        if not events.exists():
            return "the kernel has no lock:contention_begin tracepoint (or tracefs cannot be mounted)"
    return None


# perf lock record's options (tools/perf/builtin-lock.c, __cmd_record): every event a
# sample with its raw data and an 8-frame frame-pointer call chain of kernel and user frames.
RECORD_OPTIONS = ["-R", "-m", "1024", "-c", "1", "--synth", "task", "--call-graph", "fp,8"]
# A tracepoint that a process can hit at will: `perf bench syscall basic` loops on
# getppid(), each call firing it once.
PROBE_EVENT = "syscalls:sys_enter_getppid"
_USECS = re.compile(r"([\d.]+)\s+usecs/op")


def event_cost(calls: int = 1_000_000, reps: int = 5) -> dict:
    """What one tracepoint sample costs the CPU that fires it under perf lock record's
    options (the `perf_lock_record_event` entry): `perf bench syscall basic` (a native
    getppid() loop) with `perf record -e PROBE_EVENT RECORD_OPTIONS` attached, less the
    same loop without it, the two alternated `reps` times (medians). The lock tracepoints
    fire only under contention, which a process cannot cause on demand; the sample's path
    (perf_tp_event, the call chain, the ring buffer) is the same for any tracepoint, and
    the loop's user stack is shallow, as a C workload's is. Returns a calibrate figure
    ({name, ns, how, ops, spread}); raises OSError when perf cannot record."""
    import tempfile

    why = unavailable()
    if why:
        raise OSError(why)
    if not Path(f"/sys/kernel/tracing/events/{PROBE_EVENT.replace(':', '/')}").exists():
        raise OSError(f"the kernel has no {PROBE_EVENT} tracepoint")
    loop = ["perf", "bench", "syscall", "basic", "--loop", str(calls)]
    bare, traced = [], []
    with tempfile.TemporaryDirectory(prefix="reclaimsim-perf-") as d:
        rec = ["perf", "record", "-q", "-o", f"{d}/probe.data", "-e", PROBE_EVENT, *RECORD_OPTIONS, "--", *loop]
        for _ in range(reps):
            for cmd, out in ((loop, bare), (rec, traced)):
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                m = _USECS.search(p.stdout)
                if p.returncode != 0 or not m:
                    raise OSError(f"{' '.join(cmd[:4])} failed: {(p.stderr or p.stdout).strip()[-300:]}")
                out.append(float(m[1]) * 1000)
    b, t = statistics.median(bare), statistics.median(traced)
    spread = max((max(x) - min(x)) / statistics.median(x) for x in (bare, traced))
    return {
        "name": "perf_lock_record_event",
        "ns": t - b,
        "ops": calls,
        "spread": spread,
        "how": (
            f"perf bench syscall basic (getppid) under perf record -e {PROBE_EVENT} {' '.join(RECORD_OPTIONS)}, "
            f"{t:.0f} ns per call, less without it, {b:.0f} ns"
        ),
    }


def paravirt_spinlocks(log: str | None = None) -> bool:
    """Does the running kernel use paravirtual spinlocks (a KVM guest whose boot log says
    "kvm-guest: PV spinlocks enabled")? Then every waiter is queued and traced
    (`machine.paravirt_spinlocks`). `log` is the kernel log's text (default: `dmesg`)."""
    if log is None:
        try:
            log = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
    return "PV spinlocks enabled" in log


class Recorder:
    """`perf lock record -a` from start() to stop(); stop() returns the contention rows."""

    def __init__(self, path: Path):
        self.path = path
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["perf", "lock", "record", "-a", "-o", str(self.path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        # perf writes its header once the events are set up; wait for it (bounded), then
        # a little more, so that a short rep is recorded from its start.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.path.exists() and self.path.stat().st_size > 0:
                break
            time.sleep(0.02)
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
            self.proc = None
            raise OSError(f"perf lock record exited at once: {err[-300:]}")
        time.sleep(0.3)

    def stop(self) -> list[dict]:
        if self.proc is None:
            return []
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=120)
            self.proc = None
            out = subprocess.run(
                ["perf", "lock", "contention", "-i", str(self.path), "-E", "1000"],
                capture_output=True, text=True, timeout=300,
            )
        except subprocess.TimeoutExpired as e:
            self.stop_quietly()
            raise OSError(f"perf did not finish: {' '.join(map(str, e.cmd))} still running after {e.timeout:.0f} s") from None
        self.path.unlink(missing_ok=True)
        if out.returncode != 0:
            raise OSError(f"perf lock contention failed: {(out.stderr or err.decode(errors='replace')).strip()[-300:]}")
        # perf 6.1 prints the table on stderr; later ones on stdout.
        return parse(out.stdout + "\n" + out.stderr)


    def stop_quietly(self) -> None:
        """End a recording that stop() did not (an error in the rep): no report."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.path.unlink(missing_ok=True)


# Model sites that perf may report under another function: the one that takes the lock,
# where a build leaves it out of line, or the one a site's function is inlined into. When
# perf reports that function and never the site itself, the site's figures join the
# function's row. This machine's 6.18 reports folio_batch_move_lru for the drains of
# lru_add_drain_cpu, where the seed 000 host's build reports lru_add_drain_cpu+0x34, and
# lru_note_cost_refault for workingset_refault's cost (the seed's: workingset_refault+0x167);
# both builds inline shrink_inactive_list (one call site, in shrink_list, itself inlined)
# into shrink_lruvec, so its isolation and, before 7.x's self-locking putback
# (move_folios_to_lru_self_locking), its putback are shrink_lruvec's (the seed's
# shrink_lruvec+0x770 is that function's lock for lru_note_cost_unlock_irq).
# Functions inlined into their caller in every build seen (perf_caller).
INLINED = {"shrink_inactive_list": "shrink_lruvec"}

TAKEN_IN = {
    "lru_add_drain_cpu": "folio_batch_move_lru",
    "workingset_refault": "lru_note_cost_refault",
    "shrink_inactive_list": INLINED["shrink_inactive_list"],
    # 6.x's putback lock, taken in shrink_inactive_list (the host's version).
    "move_folios_to_lru": INLINED["shrink_inactive_list"],
}


def perf_caller(site: str, rules: dict[str, bool]) -> str:
    """The caller `perf lock contention` names for the model's lock site `site` on a kernel
    with `rules` in force (versions.rules_in_force): the first frame outside the lock
    functions, after inlining, where that is not the site's own name. shrink_inactive_list
    has one call site (shrink_list, itself inlined into shrink_lruvec) and is inlined
    there in every build seen (this machine's 6.18, seed 000's 7.x, whose
    shrink_lruvec+0x770 is its lock for lru_note_cost_unlock_irq): its isolation, and its
    putback until move_folios_to_lru takes the lock for itself
    (`move_folios_to_lru_self_locking`), are shrink_lruvec's. The other sites are named
    after the function perf names (prepare_scan_control's snapshot is `shrink_node`);
    where a build leaves the function that takes a lock out of line, kernel-run joins
    the rows (TAKEN_IN)."""
    if site == "move_folios_to_lru" and not rules.get("move_folios_to_lru_self_locking"):
        site = "shrink_inactive_list"  # the lock is taken there, before the call
    return INLINED.get(site, site)


def side_by_side(kernel_reps: list[list[dict]], sim_runs: list[list[dict]]) -> list[dict]:
    """Per caller: the kernel's mean per rep (rows of one symbol summed) beside the model's
    mean per run (its lock rows of that call site summed over lock classes). A kernel
    symbol with no model site is `mapped: False`; model sites the kernel never reported
    contended appear with zero kernel figures; a site the kernel reports under the function
    that takes its lock (TAKEN_IN) joins that function's row, `model_sites` naming both.
    Sorted by the larger total wait."""

    def per_rep(reps: list[list[dict]], key: str) -> dict[str, tuple[float, float]]:
        names = {r[key] for rows in reps for r in rows}
        out = {}
        for n in names:
            cont = [sum(r["contended"] for r in rows if r[key] == n) for rows in reps]
            wait = [sum(r["total_wait_ns"] for r in rows if r[key] == n) for rows in reps]
            out[n] = (statistics.fmean(cont), statistics.fmean(wait))
        return out

    # An observed model run (observe = perf-lock) has what its perf lock would read beside
    # the truth: the kernel's side is what perf read, so the model's is too.
    sim_runs = [[{**r, **r["observed"]} if "observed" in r else r for r in rows] for rows in sim_runs]
    k = per_rep(kernel_reps, "symbol") if kernel_reps else {}
    s = per_rep(sim_runs, "caller") if sim_runs else {}
    sites = {name: [name] for name in s}
    for site, func in TAKEN_IN.items():
        if site in s and site not in k and func in k:
            fc, fw = s.get(func, (0.0, 0.0))
            sc, sw = s.pop(site)
            s[func] = (fc + sc, fw + sw)
            sites[func] = sites.get(func, [func]) + sites.pop(site)
    rows = []
    for name in sorted(set(k) | set(s)):
        kc, kw = k.get(name, (0.0, 0.0))
        sc, sw = s.get(name, (0.0, 0.0))
        rows.append({
            "caller": name, "mapped": name in s, "model_sites": sites.get(name, []),
            "kernel_contended": kc, "kernel_wait_ns": kw, "sim_contended": sc, "sim_wait_ns": sw,
        })
    rows.sort(key=lambda r: -max(r["kernel_wait_ns"], r["sim_wait_ns"]))
    return rows


def format_rows(rows: list[dict], limit: int = 25) -> list[str]:
    lines = [
        "## lock contention per caller (kernel: perf lock contention, mean per rep; model: what its perf lock reads, virtual time)",
        f"{'caller':<32} {'kernel contended':>16} {'kernel wait ms':>15} {'sim contended':>14} {'sim wait ms':>12}",
    ]
    for r in rows[:limit]:
        tag = "" if r["mapped"] else "  (no model site)"
        if len(r.get("model_sites", [])) > 1:
            tag = "  (model: " + " + ".join(r["model_sites"]) + ")"
        lines.append(
            f"{r['caller']:<32} {r['kernel_contended']:>16.0f} {r['kernel_wait_ns'] / 1e6:>15.3f} "
            f"{r['sim_contended']:>14.0f} {r['sim_wait_ns'] / 1e6:>12.3f}{tag}"
        )
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more callers (--json has them all)")
    return lines
