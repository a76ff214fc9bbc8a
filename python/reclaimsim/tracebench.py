"""`reclaimsim bench --vs libcachesim TRACE`: the same trace through reclaimsim's full
kernel model and through libCacheSim's LRU, at the same capacity, on one core.

The reclaimsim side is an ordinary run: one `trace` workload in a cgroup whose
memory.max is the capacity in pages (kernel memory such as the page cache's xarray nodes
is charged there too, as on the kernel), on a machine large enough that only the cgroup
limit reclaims. Requests per second are requests over the wall time of the run (or of
libCacheSim's process_trace). With `repeat` > 1 the two sides alternate that many times
and each keeps its fastest run: on a shared machine noise only ever adds time.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import re
import sys
import time

from . import _core
from .batch import call_interruptibly
from .bench import BenchError

LIBCACHESIM_FORMATS = {
    "oracle_general": "ORACLE_GENERAL_TRACE",
    "oracle_general_zst": "ORACLE_GENERAL_TRACE",
    "text": "PLAIN_TXT_TRACE",
}


def trace_scenario(trace: str, capacity_pages: int, pages: int, fmt: str = "auto") -> dict:
    """A scenario replaying `trace` in a cgroup limited to `capacity_pages`."""
    node = max(4 << 30, (pages + capacity_pages) * 4096 * 2)
    node = ((node + (1 << 20) - 1) >> 20) << 20
    return {
        "name": "trace-bench",
        "duration": "100000s",
        "sample_interval": "1000s",
        "machine": {"cpus": 2, "memory_per_node": node},
        "cgroup": [{"path": "/trace", "memory": {"max": capacity_pages * 4096}}],
        "workload": [{"type": "trace", "name": "trace", "cgroup": "/trace", "path": trace, "format": fmt}],
    }


def _detect(trace: str) -> str:
    name = trace.lower()
    if name.endswith(".zst"):
        return "oracle_general_zst"
    if name.endswith(".txt"):
        return "text"
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".json"):
        return "damon"
    return "oracle_general"


# Policies whose miss ratios are shown beside LRU's for context (not timed).
OTHER_POLICIES = ("Clock", "SLRU", "TwoQ", "ARC", "S3FIFO")


def _comment_line(trace: str) -> int | None:
    """The number of the first line of a text trace that starts with '#', or None."""
    with open(trace, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            hit = re.search(rb"(?m)^[ \t\r]*#", m)
            return None if hit is None else m[: hit.start()].count(b"\n") + 1


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (C code's stderr) for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _libcachesim_objects(trace: str, fmt: str, objects: int, pages: int, lcs) -> int:
    """Check that libCacheSim reads the objects reclaimsim does; returns the bytes of one
    page in libCacheSim's units (its text reader makes every object 1 byte, so a cache of
    N pages is N bytes there; oracleGeneral objects keep their sizes: N pages are N * 4096
    bytes, the same objects only if every object is a whole number of 4 KiB pages)."""
    if fmt == "text":
        line = _comment_line(trace)
        if line is not None:
            raise BenchError(
                f"{trace}: line {line} is a '#' comment, which libCacheSim's text reader cannot read "
                "(it stops the process); remove the comment lines to compare"
            )
    reader = lcs.TraceReader(trace, getattr(lcs.TraceType, LIBCACHESIM_FORMATS[fmt]))
    with _quiet_stderr():  # libCacheSim logs its progress there
        wss_objects, wss_bytes = call_interruptibly(reader.get_working_set_size)
    if wss_objects != objects:
        raise BenchError(
            f"{trace}: libCacheSim reads {wss_objects} distinct objects, reclaimsim {objects}: "
            "the two would not replay the same trace"
        )
    page = 1 if fmt == "text" else 4096
    if wss_bytes != pages * page:
        raise BenchError(
            f"{trace}: its objects are not whole 4 KiB pages ({objects} objects of {wss_bytes} bytes in all, "
            f"{pages} pages in reclaimsim): the two caches would not hold the same objects"
        )
    return page


def bench_vs_libcachesim(
    trace: str,
    capacity_pages: int | None,
    capacity_ratio: float,
    others: bool = False,
    repeat: int = 1,
) -> dict:
    if os.path.exists(trace) and not os.path.isfile(trace):
        # A FIFO or a device: reading it would wait, or never end.
        raise BenchError(f"trace {trace}: not a regular file; expected a trace (e.g. made by `reclaimsim trace-gen`)")
    try:
        import libcachesim as lcs
    except ImportError:
        raise BenchError(
            "--vs libcachesim needs the libcachesim package: bash scripts/install '.[libcachesim]' "
            "in the project (or pip install 'reclaimsim[libcachesim]')"
        ) from None
    fmt = _detect(trace)
    if fmt not in LIBCACHESIM_FORMATS:
        raise BenchError(
            f"{trace}: libCacheSim reads oracleGeneral (.zst too) and plain text here; "
            f"this looks like {fmt}"
        )
    requests, objects, pages = call_interruptibly(_core.trace_count, trace, fmt)
    if requests == 0:
        raise BenchError(f"{trace}: the trace has no requests")
    page = _libcachesim_objects(trace, fmt, objects, pages, lcs)
    if capacity_pages is None:
        capacity_pages = max(1, int(objects * capacity_ratio))

    sc = json.dumps(trace_scenario(trace, capacity_pages, pages, fmt))
    rs_walls, lcs_walls = [], []
    ts = obj_miss_ratio = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = json.loads(_core.run_json(sc, None))  # looks at Ctrl-C itself
        rs_walls.append(time.perf_counter() - t0)
        t = r["workloads"][0]["trace"]
        if ts is not None and t != ts:
            raise BenchError(f"{trace}: reclaimsim's replay differed between repeats")
        ts = t

        reader = lcs.TraceReader(trace, getattr(lcs.TraceType, LIBCACHESIM_FORMATS[fmt]))
        cache = lcs.LRU(capacity_pages * page)
        t0 = time.perf_counter()
        obj_miss_ratio, _byte_miss_ratio = call_interruptibly(cache.process_trace, reader)
        lcs_walls.append(time.perf_counter() - t0)
    rs_wall, lcs_wall = min(rs_walls), min(lcs_walls)

    rs_rps = ts["requests"] / rs_wall
    lcs_rps = requests / lcs_wall
    other = {}
    if others:
        for name in OTHER_POLICIES:
            rd = lcs.TraceReader(trace, getattr(lcs.TraceType, LIBCACHESIM_FORMATS[fmt]))
            other[name] = call_interruptibly(getattr(lcs, name)(capacity_pages * page).process_trace, rd)[0]
    return {
        "trace": trace,
        "requests": requests,
        "objects": objects,
        "capacity_pages": capacity_pages,
        "reclaimsim_rps": rs_rps,
        "libcachesim_rps": lcs_rps,
        "ratio": rs_rps / lcs_rps,
        "reclaimsim_miss_ratio": ts["miss_ratio"],
        "libcachesim_miss_ratio": obj_miss_ratio,
        "reclaimsim_wall_s": rs_wall,
        "libcachesim_wall_s": lcs_wall,
        "repeat": repeat,
        "reclaimsim_walls_s": rs_walls,
        "libcachesim_walls_s": lcs_walls,
        "libcachesim_other_miss_ratios": other,
    }


def format_bench(b: dict) -> str:
    return "\n".join(
        [
            f"# {b['trace']}: {b['requests']} requests, {b['objects']} objects, capacity {b['capacity_pages']} pages",
            f"{'':<15} {'requests/s':>14} {'miss ratio':>11} {'wall s':>8}",
            f"{'reclaimsim':<15} {b['reclaimsim_rps']:>14.0f} {b['reclaimsim_miss_ratio']:>11.4f} {b['reclaimsim_wall_s']:>8.2f}",
            f"{'libCacheSim LRU':<15} {b['libcachesim_rps']:>14.0f} {b['libcachesim_miss_ratio']:>11.4f} {b['libcachesim_wall_s']:>8.2f}",
            f"ratio (reclaimsim / libCacheSim): {b['ratio']:.2f}"
            + (f" (fastest of {b['repeat']} alternated runs each)" if b.get("repeat", 1) > 1 else ""),
        ]
        + [
            f"libCacheSim {name:<8} miss ratio {mr:.4f} (context, not timed)"
            for name, mr in b.get("libcachesim_other_miss_ratios", {}).items()
        ]
    )
