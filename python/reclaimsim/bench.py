"""`reclaimsim bench`: the speed and memory of scenarios, each measured in its own process
(events per wall second, virtual over wall time, peak RSS per simulated page). The trace
replay beside libCacheSim is tracebench's; the sweep benchmark is sweep's."""

from __future__ import annotations

import json
import subprocess
import sys


class BenchError(Exception):
    """A benchmark that cannot run or failed: exit `code` (2 for bad input or a missing
    optional dependency, 1 for a failed run) with this message."""

    def __init__(self, msg: str, code: int = 2):
        super().__init__(msg)
        self.code = code


# The child process of one measurement: runs a scenario (or nothing, for "-") and prints
# its figures as JSON; its exit code says what went wrong.
_CHILD = r"""
import json, resource, sys, time
import reclaimsim
name = sys.argv[1]
if name == "-":
    print(json.dumps({"wall_s": 0, "end_ns": 0, "events": 0, "pages": 1,
                      "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
else:
    t = time.perf_counter()
    try:
        r = reclaimsim.run(name)
    except KeyboardInterrupt:
        sys.exit(130)
    except (reclaimsim.ScenarioError, reclaimsim.SimulationError) as e:
        print(e, file=sys.stderr)
        sys.exit(2 if isinstance(e, reclaimsim.ScenarioError) else 1)
    wall = time.perf_counter() - t
    e = r.engine
    print(json.dumps({"wall_s": wall, "end_ns": r.end_ns, "events": e["polls"] + e["events"],
                      "pages": e["simulated_pages"],
                      "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def measure(name: str | None) -> dict:
    """One row of `reclaimsim bench`: the scenario `name` (None: the bare interpreter with the
    package imported, the baseline) run in its own process, so that its peak RSS is its own."""
    p = subprocess.run([sys.executable, "-c", _CHILD, name or "-"], capture_output=True, text=True)
    if p.returncode in (130, -2):
        raise KeyboardInterrupt
    if p.returncode != 0:
        raise BenchError(f"bench of {name}: {p.stderr.strip() or f'exit code {p.returncode}'}", 2 if p.returncode == 2 else 1)
    d = json.loads(p.stdout)
    wall = max(d["wall_s"], 1e-9)
    return {
        "scenario": name or "(python)",
        "wall_s": d["wall_s"],
        "virtual_s": d["end_ns"] / 1e9,
        "virtual_per_wall": (d["end_ns"] / 1e9) / wall if name else 0.0,
        "events_per_wall_s": d["events"] / wall if name else 0.0,
        "peak_rss_bytes": d["rss"],
        "rss_bytes_per_page": d["rss"] / d["pages"] if name else 0.0,
    }


def format_measures(rows: list[dict]) -> str:
    """The table of `reclaimsim bench`."""
    lines = [f"{'scenario':<12} {'wall s':>8} {'virtual s':>10} {'virt/wall':>10} {'events/s':>12} {'peak RSS':>12} {'B/page':>8}"]
    for r in rows:
        lines.append(
            f"{r['scenario']:<12} {r['wall_s']:>8.2f} {r['virtual_s']:>10.2f} {r['virtual_per_wall']:>10.2f} "
            f"{r['events_per_wall_s']:>12.0f} {r['peak_rss_bytes'] >> 20:>10}M {r['rss_bytes_per_page']:>8.1f}"
        )
    if any(r["scenario"] == "(python)" for r in rows):
        lines.append("(python): the interpreter with reclaimsim imported and nothing run, the baseline of the peak RSS column")
    return "\n".join(lines)
