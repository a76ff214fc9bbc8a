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
| ssd_read_latency | pread of an uncached page | file_read_hit, page_alloc |
| shrink_folio | MADV_PAGEOUT of a mapped clean file page | isolate_folio, pte_referenced, pte_unmap, page_free, list_op |
| zram_write | MADV_PAGEOUT of an anonymous page to zram | the clean-file reclaim path, swap_cache_op |
| zram_read | swap-in fault from zram | fault_entry, page_alloc, pte_map, swap_cache_op |

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
import tempfile
from pathlib import Path
from typing import Callable

import tomli_w

from . import _core

# (entry, path figure, subtracted entries): see the module's table.
_DERIVED = [
    ("fault_entry", "anon_fault_path", ("page_zero", "page_alloc", "pte_map")),
    ("ssd_read_latency", "file_read_miss_path", ("file_read_hit", "page_alloc")),
    ("shrink_folio", "reclaim_clean_file_path", ("isolate_folio", "pte_referenced", "pte_unmap", "page_free", "list_op")),
    ("zram_write", "swap_out_path", ("@reclaim_clean_file_path", "swap_cache_op")),
    ("zram_read", "swap_in_path", ("fault_entry", "page_alloc", "pte_map", "swap_cache_op")),
]

# Figures that are cost-table entries as measured.
_DIRECT = ("access_seq", "access_random", "page_zero", "file_read_hit", "cacheline_transfer", "atomic_rmw", "lock_uncontended")

# Path figures kept as checks only, with the model's sum for the same path.
_CHECKS = {
    "lock_handoff": ("lock_uncontended", "cacheline_transfer"),
    "zap_path": ("pte_unmap", "page_free"),
}


class CalibrateError(Exception):
    """A calibration that cannot run here (exit 2) or failed (exit 1)."""

    def __init__(self, msg: str, code: int = 1):
        super().__init__(msg)
        self.code = code


def _defaults() -> dict[str, int]:
    return {c["name"]: c["ns"] for c in json.loads(_core.cost_table_json())}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _fs_type(path: Path) -> str:
    best, kind = "", ""
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fs = line.split()[:3]
            if str(path).startswith(mnt) and len(mnt) > len(best):
                best, kind = mnt, fs
    except OSError:
        pass
    return kind


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
    say(f"cache lines between CPUs {cpus[0]} and {cpus[1]}: transfer, lock handoff, atomics")
    for f in part("cache_lines"):
        figs[f["name"]] = f
    swap_figs, why = _swap_part(part, say)
    if why:
        notes.append(why)
    for f in swap_figs:
        figs[f["name"]] = f
    return figs, notes


def _swap_part(part: Callable[[str], list[dict]], say: Callable[[str], None]) -> tuple[list[dict], str | None]:
    """The swap benchmarks through zram, set up and removed here (needs root)."""
    from .kernelrun import Swap, _active_swaps

    if os.geteuid() != 0:
        return [], "swap-out and swap-in through zram not measured: needs root (zram_write, zram_read keep their values)"
    if _active_swaps() and not any("zram" in s for s in _active_swaps()):
        return [], "swap-out and swap-in not measured: the host swaps to a non-zram device (zram_write, zram_read keep their values)"
    say("swap through zram: MADV_PAGEOUT and swap-in faults")
    notes: list = []
    try:
        swap = Swap(1 << 30, None, notes)
    except Exception as e:  # no zram on this kernel
        return [], f"swap-out and swap-in not measured: {e}"
    try:
        figs = part("swap")
    finally:
        swap.close()
    if not figs:
        return [], "swap-out and swap-in not measured: MADV_PAGEOUT swapped nothing out"
    return figs, None


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
    return costs, checks


def profile(figs: dict, notes: list[str], workdir: Path) -> dict:
    """The cost profile (a dict tomli_w writes) of a calibration on this machine."""
    costs, checks = derive(figs, _defaults())
    host = platform.node() or "host"
    when = datetime.date.today().isoformat()
    desc = (
        f"measured by reclaimsim calibrate on {host} ({_cpu_model()}, {os.cpu_count()} CPUs, "
        f"Linux {platform.release()}), {when}; page-cache file on {_fs_type(workdir) or 'an unknown filesystem'}"
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
    if _fs_type(base.resolve()) in ("tmpfs", "ramfs"):
        raise CalibrateError(f"--workdir {base}: on {_fs_type(base.resolve())}; page-cache misses need a disk filesystem", 2)
    with tempfile.TemporaryDirectory(prefix="reclaimsim-calibrate-", dir=base) as d:
        figs, notes = measure(Path(d), cpus, quick, say)
        p = profile(figs, notes, base.resolve())
    text = "# A cost profile: use it with --costs FILE or costs_profile = \"FILE\" in a scenario.\n" + tomli_w.dumps(p)
    Path(out).write_text(text)
    # The core reads it back exactly as a run will.
    from .scenario import load_scenario

    _core.cost_table_json(json.dumps(load_scenario("default", [f"costs_profile={json.dumps(str(Path(out).resolve()))}"])))
    return p


def format_profile(p: dict) -> str:
    lines = [f"{p['name']}: {p['description']}", ""]
    for k, e in p["costs"].items():
        lines.append(f"  {k:<26} {e['ns']:>9} ns  {e['source'].split(':', 1)[0]}")
    lines.append("checks (path figures, not entries):")
    for k, e in p["checks"].items():
        lines.append(f"  {k:<26} {e['ns']:>9} ns")
    return "\n".join(lines)
