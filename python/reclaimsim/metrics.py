"""Names of the values in a run's result, one scheme for compare (`--metric`), sweep (the
value columns of results.parquet) and report (docs/results.md, "Names of values").

A name is a /proc/vmstat counter (`pgscan_anon`), a figure of the whole run
(`kswapd_cpu_ns`, `lock_wait_total_ns`, `end_ns`), or `KEY@WHERE`: KEY of a cgroup
(`pgsteal@/memcg1`, memory.stat), of a workload (`throughput@web`, `trace.miss_ratio@replay`)
or of a lock call site (`lock_wait_ns@shrink_node`, `lru_lock_acquisitions@shrink_node`);
compare adds aggregates over cgroups (`cv:KEY@/glob*`, `sum:KEY@/glob*`) and rates (`/s`,
`/min`). `metric` reads any name off a result; `values` gives every value a sweep stores,
each under the name `metric` reads it back by. Sweep stores written before this scheme
(store version 1: `vmstat.NAME`, `workload.W.FIELD`, `lock.LOCK.CALLER.FIELD`) are read
with `from_v1` renaming their columns.
"""

from __future__ import annotations

import re
from typing import Any

from . import _core
from ._core import ScenarioError

# Per-caller lock values, LOCK_FIELD@CALLER: LOCK is `lock` (every lock taken at CALLER)
# or a lock's name (`lru_lock`, `cost_lock`); FIELD names the lock table's column.
_LOCK_KEY = re.compile(r"(lock|\w+_lock)_(wait_ns|hold_ns|acquisitions|contended)")
_LOCK_FIELDS = {
    "wait_ns": "total_wait_ns", "hold_ns": "total_hold_ns", "acquisitions": "acquisitions", "contended": "contended",
}
# What `perf lock contention` reads of an observed run (`perf.NAME`): waits and contentions.
_PERF_TOTALS = ("lock_wait_total_ns", "lru_lock_wait_total_ns")


def metric(r: dict, name: str) -> float:
    """The value named `name` in a result (JSON dict); the names are docs/results.md's
    ("Names of values"). A /proc/vmstat counter (`pgscan_anon`); `end_ns`;
    `KEY@/cgroup/path` (memory.stat); `FIELD@workload` (workload field, e.g.
    `throughput@web`, a trace workload's request-level `trace.FIELD@NAME`, for short
    `FIELD@NAME` where the workload has no field of that name (`miss_ratio@NAME`), or
    `per_process_ops@NAME`, throughput per task as will-it-scale reports it); `kswapd_cpu_ns`,
    `direct_reclaim_ns`; `proactive_accuracy` (memory.reclaim's reclaimed over requested
    bytes, in percent), `proactive_latency_ns` (mean write time) and `proactive_ns_per_page`
    (the writers' time per reclaimed page); `lock_wait_total_ns` (all locks),
    `lru_lock_wait_total_ns`, `lru_lock_hold_total_ns`, `lock_acquisitions`,
    `lock_wait_ns@CALLER`, `lock_hold_ns@CALLER` (time held by acquisitions at CALLER, as
    lockstat's holdtime), `lock_acquisitions@CALLER`, and the same of one lock
    (`lru_lock_wait_ns@CALLER`, `cost_lock_acquisitions@CALLER`); tracepoint counters (`mm_lru_insertion`,
    `mm_lru_insertion_dead`, `lru_add_dead_filtered`); `lru_add_dead_share` (percent of
    lru_add folios that were dead when inserted); across cgroups, `cv:KEY@/glob*` (the
    population stddev over the mean of memory.stat KEY over the cgroups whose path matches
    the glob, in percent: seed 001's fairness) and `sum:KEY@/glob*`; any of them with `/s`
    (per virtual second) or `/min` (per virtual minute). `perf.NAME` is what the run's
    observer (`observe`, not `none`) reads of lock value NAME: the waits and contentions of
    the traced acquisitions only (`perf.lock_wait_ns@CALLER`, `perf.lock_contended@CALLER`,
    `perf.lru_lock_wait_total_ns`)."""
    if name.startswith("perf."):
        return _observed(r, name)
    secs = r["end_ns"] / 1e9
    for agg in ("cv:", "sum:"):
        if name.startswith(agg):
            return _across_cgroups(r, name, agg[:-1], name[len(agg):])
    for suffix, per in (("/s", 1.0), ("/min", 60.0)):
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if base.endswith(("/s", "/min")):
                raise ScenarioError(f"metric {name!r}: one rate suffix at most (/s or /min)")
            return metric(r, base) / max(secs, 1e-12) * per
    if "@" in name:
        key, _, where = name.partition("@")
        if where.startswith("/"):
            for c in r["cgroups"]:
                if c["path"] == where:
                    if key not in c["memory.stat"]:
                        raise ScenarioError(
                            f"metric {name!r}: memory.stat has no {key!r}; keys: {', '.join(c['memory.stat'])}"
                        )
                    return float(c["memory.stat"][key])
            paths = ", ".join(c["path"] for c in r["cgroups"])
            raise ScenarioError(f"metric {name!r}: no cgroup {where!r}; cgroups: {paths}")
        lock = _LOCK_KEY.fullmatch(key)
        if lock:
            which, col = lock[1], _LOCK_FIELDS[lock[2]]
            sites = _core.lock_sites()
            if where not in sites:
                raise ScenarioError(f"metric {name!r}: no lock call site {where!r}; callers: {', '.join(sites)}")
            return float(sum(l[col] for l in r["locks"] if l["caller"] == where and which in ("lock", l["name"])))
        for w in r["workloads"]:
            if w["name"] == where and key.startswith("trace."):
                t = w.get("trace") or {}
                if key[len("trace."):] not in t:
                    what = f"request-level figures: {', '.join(t)}" if t else "no request-level figures (not a trace workload)"
                    raise ScenarioError(f"metric {name!r}: workload {where!r} has {what}")
                return float(t[key[len("trace."):]])
            if w["name"] == where:
                if key == "per_process_ops":
                    # will-it-scale's figure: operations per second per task.
                    return float(w["throughput"]) / max(w["tasks"], 1)
                numeric = {k: v for k, v in w.items() if isinstance(v, (int, float))}
                if key in numeric:
                    return float(numeric[key])
                if key in (w.get("trace") or {}):
                    # Trace workloads: request-level figures (miss_ratio, requests, ...).
                    return float(w["trace"][key])
                fields = sorted(numeric) + ["per_process_ops"] + sorted((w.get("trace") or {}).keys())
                raise ScenarioError(f"metric {name!r}: workload {where!r} has no {key!r}; fields: {', '.join(fields)}")
        names = ", ".join(w["name"] for w in r["workloads"])
        raise ScenarioError(f"metric {name!r}: no workload {where!r} (a cgroup path starts with /); workloads: {names}")
    if name == "end_ns":
        return float(r["end_ns"])
    if name == "kswapd_cpu_ns":
        return float(sum(r["reclaim"]["kswapd_cpu_ns"]))
    if name == "reclaim_cpu_ns":
        # kswapd's reclaim time plus every task's direct reclaim time.
        return float(sum(r["reclaim"]["kswapd_cpu_ns"]) + r["reclaim"]["direct_reclaim_ns"])
    if name == "direct_reclaim_latency_ns":
        # Allocation latency: time per direct reclaim (global and memcg).
        n = r["reclaim"]["direct_reclaims"]
        return float(r["reclaim"]["direct_reclaim_ns"]) / n if n else 0.0
    if name in ("proactive_accuracy", "proactive_latency_ns", "proactive_ns_per_page"):
        p = r.get("proactive")
        if not p:
            raise ScenarioError(f"metric {name!r}: the scenario has no [[reclaim]] schedule")
        if name == "proactive_latency_ns":
            return float(p["latency_ns"]["mean"])
        if name == "proactive_ns_per_page":
            # Reclaim CPU per reclaimed page: the writers' time in memory.reclaim.
            busy = p["latency_ns"]["mean"] * p["writes"]
            pages = p["reclaimed_bytes"] / 4096
            return busy / pages if pages else 0.0
        # Seed 001's accuracy: what memory.reclaim reclaimed over what it was asked for.
        return 100.0 * p["reclaimed_bytes"] / p["requested_bytes"] if p["requested_bytes"] else 0.0
    if name in ("direct_reclaim_ns", "direct_reclaims"):
        return float(r["reclaim"][name])
    if name == "lock_wait_total_ns":
        return float(sum(l["total_wait_ns"] for l in r["locks"]))
    if name == "lru_lock_wait_total_ns":
        return float(sum(l["total_wait_ns"] for l in r["locks"] if l["name"] == "lru_lock"))
    if name == "lru_lock_hold_total_ns":
        return float(sum(l["total_hold_ns"] for l in r["locks"] if l["name"] == "lru_lock"))
    if name == "lock_acquisitions":
        return float(sum(l["acquisitions"] for l in r["locks"]))
    if name == "lru_add_dead_share":
        # Dead folios inserted by lru_add drains, in percent of the folios drained.
        t = r["trace"]
        total = t["mm_lru_insertion"] + t["lru_add_dead_filtered"]
        return 100.0 * t["mm_lru_insertion_dead"] / total if total else 0.0
    if name in r["vmstat"]:
        return float(r["vmstat"][name])
    if name in r["trace"]:
        return float(r["trace"][name])
    raise ScenarioError(
        f"metric {name!r}: not a vmstat counter nor a known metric; see `reclaimsim compare --help`"
    )


def _observed(r: dict, name: str) -> float:
    """`perf.NAME`: lock value NAME as the run's observer reads it (each lock row's
    `observed` columns in place of the truth)."""
    inner = name[len("perf."):]
    observe = (r.get("scenario") or {}).get("observe", "none")
    if observe == "none":
        raise ScenarioError(
            f"metric {name!r}: the run is not observed (observe = none); perf.* metrics need "
            "observe = perf-lock or perf-lock-bpf (--observe)"
        )
    base = re.sub(r"/(s|min)$", "", inner)
    key = base.partition("@")[0]
    lock = _LOCK_KEY.fullmatch(key)
    if not (base in _PERF_TOTALS or (lock and "@" in base and lock[2] in ("wait_ns", "contended"))):
        raise ScenarioError(
            f"metric {name!r}: perf lock contention reads waits and contentions only: "
            "perf.lock_wait_ns@CALLER, perf.lock_contended@CALLER (or one lock's, perf.lru_lock_wait_ns@CALLER), "
            "perf.lock_wait_total_ns, perf.lru_lock_wait_total_ns"
        )
    view = {**r, "locks": [{"name": l["name"], "caller": l["caller"], **l["observed"]} for l in r["locks"]]}
    return metric(view, inner)


def _across_cgroups(r: dict, name: str, agg: str, spec: str) -> float:
    """`cv` or `sum` of a memory.stat key over the cgroups matching a path glob."""
    import fnmatch

    key, _, glob = spec.partition("@")
    if not glob:
        raise ScenarioError(f"metric {name!r}: expected {agg}:KEY@/cgroup/glob or {agg}:FIELD@workload-glob")
    vals = []
    if not glob.startswith("/"):
        # Workloads by name.
        for w in r["workloads"]:
            if fnmatch.fnmatchcase(w["name"], glob):
                if not isinstance(w.get(key), (int, float)):
                    raise ScenarioError(f"metric {name!r}: workload {w['name']!r} has no numeric {key!r}")
                vals.append(float(w[key]))
        if not vals:
            names = ", ".join(w["name"] for w in r["workloads"])
            raise ScenarioError(f"metric {name!r}: no workload matches {glob!r}; workloads: {names}")
    for c in r["cgroups"] if glob.startswith("/") else []:
        if fnmatch.fnmatchcase(c["path"], glob):
            if key not in c["memory.stat"]:
                raise ScenarioError(f"metric {name!r}: memory.stat has no {key!r}; keys: {', '.join(c['memory.stat'])}")
            vals.append(float(c["memory.stat"][key]))
    if not vals:
        paths = ", ".join(c["path"] for c in r["cgroups"])
        raise ScenarioError(f"metric {name!r}: no cgroup matches {glob!r}; cgroups: {paths}")
    return aggregate(vals, agg)


def aggregate(vals: list[float], agg: str) -> float:
    """`sum` of VALS, or `cv`: their population standard deviation over their mean, in
    percent (0 when the mean is 0)."""
    import statistics

    if agg == "sum":
        return sum(vals)
    mean = statistics.fmean(vals)
    return 100.0 * statistics.pstdev(vals) / mean if mean else 0.0


def across_cgroup_counters(counters: dict, name: str) -> float | None:
    """A `cv:KEY@/glob` or `sum:KEY@/glob` over a flat counter dict with `KEY@/path` keys
    (kernel-run's and kernel-compare's per-cgroup rows); None when NAME is not such an
    aggregate or no key matches."""
    import fnmatch

    agg, sep, spec = name.partition(":")
    key, _, glob = spec.partition("@")
    if not sep or agg not in ("cv", "sum") or not glob.startswith("/"):
        return None
    vals = [float(v) for k, v in counters.items()
            if k.startswith(key + "@/") and fnmatch.fnmatchcase(k[len(key) + 1:], glob)]
    return aggregate(vals, agg) if vals else None


def values(r: dict) -> dict[str, Any]:
    """Every value of a result that a sweep stores (results.parquet's value columns), by
    name, in this order: end_ns, the vmstat counters, each workload's numeric fields and
    request-level trace figures, each lock and call site's wait and acquisitions, the
    total lock wait. metric(r, name) reads each back (as a float)."""
    out: dict[str, Any] = {"end_ns": r["end_ns"]}
    out.update(r["vmstat"])
    for w in r["workloads"]:
        for k, v in w.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"{k}@{w['name']}"] = v
        for k, v in (w.get("trace") or {}).items():
            out[f"trace.{k}@{w['name']}"] = v
    total = 0
    for lk in r["locks"]:
        for col, field in (("total_wait_ns", "wait_ns"), ("acquisitions", "acquisitions")):
            key = f"{lk['name']}_{field}@{lk['caller']}"
            out[key] = out.get(key, 0) + lk[col]
        total += lk["total_wait_ns"]
    out["lock_wait_total_ns"] = total
    for lk in r["locks"]:
        # An observed run: what perf lock contention read, beside the truth above.
        if "observed" in lk:
            for col, field in (("total_wait_ns", "wait_ns"), ("contended", "contended")):
                key = f"perf.{lk['name']}_{field}@{lk['caller']}"
                out[key] = out.get(key, 0) + lk["observed"][col]
    return out


def from_v1(column: str) -> str:
    """The name of a value column of a version-1 sweep store (before this scheme):
    `vmstat.NAME` -> `NAME`, `workload.W.FIELD` -> `FIELD@W`, `workload.W.trace.FIELD` ->
    `trace.FIELD@W`, `lock.LOCK.CALLER.FIELD` -> `LOCK_FIELD@CALLER`; any other column
    (the run's identity, its axes, `end_ns`, `lock_wait_total_ns`) keeps its name."""
    if column.startswith("vmstat."):
        return column[len("vmstat."):]
    if column.startswith("workload."):
        where, _, key = column[len("workload."):].rpartition(".")
        if where.endswith(".trace"):
            return f"trace.{key}@{where[: -len('.trace')]}"
        return f"{key}@{where}" if where else column
    if column.startswith("lock."):
        parts = column[len("lock."):].split(".")
        if len(parts) >= 3:
            return f"{parts[0]}_{parts[-1]}@{'.'.join(parts[1:-1])}"
    return column


def unit(name: str) -> str:
    """The unit of a stored value, for a plot's axis: ns, accesses/s, pages (a vmstat
    counter; events for allocstall), or none (counts of a workload or a lock)."""
    if name.startswith("cv:"):
        return "% (stddev over mean across cgroups)"
    key = name.partition("@")[0].removeprefix("sum:")
    if key.endswith("_ns"):
        return "ns"
    if key == "throughput":
        return "accesses/s"
    if "@" in name:
        return ""
    return "events" if name.startswith("allocstall") else "pages"
