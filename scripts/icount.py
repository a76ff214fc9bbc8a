"""The instruction-count benchmarks (scripts/icount, scripts/bench-compare).

Each benchmark is a built-in scenario, shortened by a few overrides, handed to the plain
release runner (crates/core/examples/run.rs) as JSON; `count` runs it under valgrind's
callgrind and reads the total of instructions executed ("Collected"). Only the standard
library is used: the script also drives builds of other revisions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

SCENARIOS = Path("python/reclaimsim/scenarios")
# Each benchmark: (built-in scenario, overrides of its top-level tables), sized so that
# all of them run in about a minute under callgrind on the 2-core machine, each still
# in reclaim for most of its run.
BENCHES = {
    "default": ("default", {"duration": "1s"}),
    # large's shape (a node filled by eight usemem processes and a sequential file
    # read) at a sixteenth of its size.
    "large": ("large", {"machine": {"memory_per_node": "4G"}, "machine.swap": {"size": "1G"},
                        "workload": [{"size": "448M"}, {"files": ["768M"]}]}),
    "seed-001": ("seed-001", {"duration": "4s", "reclaim": [{"cgroup": "/", "at": "2s", "every": "400ms", "times": 5, "bytes": "2M"}]}),
    "trace": (None, None),
}
# Growth over the baseline that fails the check.
LIMIT = 0.05
TRACE_REQUESTS, TRACE_OBJECTS = 600_000, 60_000


def trace_scenario(trace: Path) -> dict:
    """A zipf trace replayed at a memcg limit of a tenth of its objects, as `reclaimsim
    bench --vs libcachesim` replays one (python/reclaimsim/tracebench.py), smaller."""
    return {
        "name": "icount-trace", "duration": "100000s", "sample_interval": "1000s",
        "machine": {"cpus": 2, "memory_per_node": 4 << 30},
        "cgroup": [{"path": "/trace", "memory": {"max": TRACE_OBJECTS // 10 * 4096}}],
        "workload": [{"type": "trace", "name": "trace", "cgroup": "/trace", "path": str(trace.resolve())}],
    }


def inputs(work: Path, reclaimsim: str, tree: Path = Path(".")) -> dict[str, Path]:
    """The benchmarks' scenario files (JSON) under `work`, from the built-ins of `tree`."""
    work.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, (builtin, over) in BENCHES.items():
        if builtin is None:
            trace = work / "zipf.oracleGeneral"
            if not trace.exists():
                subprocess.run([reclaimsim, "trace-gen", str(trace), "--objects", str(TRACE_OBJECTS),
                                "--requests", str(TRACE_REQUESTS), "--zipf", "0.9"], check=True, capture_output=True)
            sc = trace_scenario(trace)
        else:
            src = tree / SCENARIOS / f"{builtin}.toml"
            if not src.exists():  # an older revision without this built-in
                continue
            sc = tomllib.loads(src.read_text())
            sc.pop("compare", None)
            for k, v in over.items():
                _override(sc, k, v)
        p = work / f"{name}.json"
        p.write_text(json.dumps(sc))
        out[name] = p
    return out


def _override(sc: dict, key: str, v) -> None:
    """Merge override `v` into `sc` at the dotted table path `key`: tables merge, a list of
    tables merges entry by entry into the scenario's list (the same length), anything else
    replaces."""
    *parents, last = key.split(".")
    for p in parents:
        sc = sc[p]
    cur = sc.get(last)
    if isinstance(v, dict) and isinstance(cur, dict):
        sc[last] = {**cur, **v}
    elif isinstance(v, list) and isinstance(cur, list) and len(v) == len(cur) and all(isinstance(x, dict) for x in v):
        sc[last] = [{**c, **x} for c, x in zip(cur, v)]
    else:
        sc[last] = v


class RunFailed(Exception):
    """The runner refused or failed a benchmark (an older revision may not know a field)."""


def callgrind(runner: str, scenario: Path) -> int:
    """Instructions the runner executes on `scenario`, counted by callgrind."""
    p = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", runner, str(scenario), "/dev/null"],
        capture_output=True, text=True,
    )
    m = re.search(r"Collected\s*:\s*(\d+)", p.stderr)
    if p.returncode != 0 or not m:
        err = [l for l in p.stderr.splitlines() if not l.startswith("==")]
        raise RunFailed(f"{scenario.stem}: the runner failed (exit {p.returncode}): {' '.join(err)[-300:]}")
    return int(m.group(1))


def wall(runner: str, scenario: Path, repeat: int = 3) -> float:
    """The best of `repeat` native runs' wall time [s]."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.monotonic()
        if subprocess.run([runner, str(scenario), "/dev/null"], capture_output=True).returncode != 0:
            raise RunFailed(f"{scenario.stem}: the runner failed")
        best = min(best, time.monotonic() - t0)
    return best


def read_baseline(path: Path) -> dict:
    return tomllib.loads(path.read_text()) if path.exists() else {"counts": {}, "update": []}


def write_baseline(path: Path, base: dict, counts: dict[str, int], reason: str) -> None:
    updates = base.get("update", []) + [{"date": datetime.date.today().isoformat(), "reason": reason}]
    lines = [
        "# Instructions each speed benchmark executes (scripts/icount; callgrind's total,",
        "# the plain release runner built with the pinned toolchain). CI fails when one grows",
        f"# more than {LIMIT:.0%} over these. An update says, below, why the new cost is worth it.",
        "",
        "[counts]",
        *(f"{k} = {v}" for k, v in counts.items()),
        "",
    ]
    for u in updates:
        lines += ["[[update]]", f"date = {json.dumps(u['date'])}", f"reason = {json.dumps(u['reason'])}", ""]
    path.write_text("\n".join(lines))


def cmd_count(a) -> int:
    files = inputs(Path(a.work), a.reclaimsim)
    base = read_baseline(Path(a.baseline))
    counts, worse = {}, []
    print(f"{'benchmark':<10} {'instructions':>16} {'baseline':>16} {'change':>8}")
    for name, f in files.items():
        t0 = time.monotonic()
        try:
            n = counts[name] = callgrind(a.runner, f)
        except RunFailed as e:
            sys.exit(f"icount: {e}")
        b = base["counts"].get(name)
        ch = f"{(n - b) / b:+.1%}" if b else "new"
        if b and n > b * (1 + LIMIT):
            worse.append(f"{name} {ch}")
        print(f"{name:<10} {n:>16,} {b or 0:>16,} {ch:>8}   ({time.monotonic() - t0:.0f} s under callgrind)", flush=True)
    if a.update:
        write_baseline(Path(a.baseline), base, counts, a.update)
        print(f"baseline written to {a.baseline}")
        return 0
    missing = [k for k in files if k not in base["counts"]]
    if worse or missing:
        why = (f"grew more than {LIMIT:.0%}: {', '.join(worse)}" if worse else "") + (
            f"{'; ' if worse else ''}not in the baseline: {', '.join(missing)}" if missing else "")
        print(f"icount: {why}. Make it cheaper, or run `bash scripts/icount --update \"REASON\"` "
              "with the reason the cost is worth it.", file=sys.stderr)
        return 1
    return 0


def cmd_compare(a) -> int:
    # Each side runs its own revision's built-ins: a scenario file of the working tree may
    # name a field an older runner refuses (kernel.version, say). Where the two files
    # differ, the row is marked and the differing top-level tables named below.
    files_b = inputs(Path(a.work), a.reclaimsim)
    files_a = inputs(Path(a.work) / "rev", a.reclaimsim, tree=Path(a.tree_a))
    print(f"{'benchmark':<10} {'instr ' + a.label_a:>22} {'instr ' + a.label_b:>22} {'ratio':>7} "
          f"{'wall ' + a.label_a:>14} {'wall ' + a.label_b:>14} {'ratio':>7}")
    notes = []
    for name, fb in files_b.items():
        fa = files_a.get(name)
        if fa is None:
            print(f"{name:<10} n/a: {a.label_a} has no built-in {BENCHES[name][0]}", flush=True)
            continue
        differs = _differing_tables(fa, fb)
        mark = "*" if differs else " "
        if differs:
            notes.append(f"* {name}: the scenarios differ in {', '.join(differs)} (each side ran its own)")
        try:
            ia, ib = callgrind(a.runner_a, fa), callgrind(a.runner_b, fb)
            # Alternated, best of three each.
            wa = wb = float("inf")
            for _ in range(3):
                wa, wb = min(wa, wall(a.runner_a, fa, 1)), min(wb, wall(a.runner_b, fb, 1))
        except RunFailed as e:
            print(f"{name:<9}{mark} n/a: {e}", flush=True)
            continue
        print(f"{name:<9}{mark} {ia:>22,} {ib:>22,} {ib / ia:>7.3f} {wa:>13.3f}s {wb:>13.3f}s {wb / wa:>7.3f}", flush=True)
    for n in notes:
        print(n)
    return 0


def _same_trace_same_path(sc: dict) -> dict:
    """The scenario with each trace workload's path replaced by its file's SHA-256: each
    side generates the trace in its own work directory, and the same trace is the same
    input wherever it lies."""
    import hashlib

    for w in sc.get("workload", []):
        if w.get("type") == "trace" and Path(w.get("path", "")).is_file():
            w["path"] = hashlib.sha256(Path(w["path"]).read_bytes()).hexdigest()
    return sc


def _differing_tables(fa: Path, fb: Path) -> list[str]:
    """The dotted paths (tables one level down) where two scenario files differ."""
    a, b = _same_trace_same_path(json.loads(fa.read_text())), _same_trace_same_path(json.loads(fb.read_text()))
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            out += [f"{k}.{j}" for j in sorted(set(x) | set(y)) if x.get(j) != y.get(j)]
        else:
            out.append(k)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(prog="scripts/icount.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("count")
    c.add_argument("--runner", required=True)
    c.add_argument("--work", required=True)
    c.add_argument("--reclaimsim", required=True)
    c.add_argument("--baseline", required=True)
    c.add_argument("--update")
    k = sub.add_parser("compare")
    for x in ("--runner-a", "--runner-b", "--label-a", "--label-b", "--tree-a", "--work", "--reclaimsim"):
        k.add_argument(x, required=True)
    a = ap.parse_args()
    return cmd_count(a) if a.cmd == "count" else cmd_compare(a)


if __name__ == "__main__":
    sys.exit(main())
