"""The result of a run: the core's JSON (docs/results.md), with DataFrame views."""

from __future__ import annotations

import json
from typing import Any

from .perflock import perf_caller
from .stats import fmt_ns
from .versions import rules_in_force


class Result:
    """One run's output. Attributes mirror the JSON's top-level keys."""

    def __init__(self, text: str):
        self._text = text
        d = json.loads(text)
        self.data: dict[str, Any] = d
        self.scenario: dict = d["scenario"]
        self.end_ns: int = d["end_ns"]
        self.vmstat: dict[str, int] = d["vmstat"]
        self.cgroups: list[dict] = d["cgroups"]
        self.locks: list[dict] = d["locks"]
        self.workloads: list[dict] = d["workloads"]
        self.oom_kills: list[dict] = d["oom_kills"]
        self.reclaim: dict = d["reclaim"]
        self.timeseries: dict = d["timeseries"]
        self.engine: dict = d["engine"]

    def to_json(self) -> str:
        """The core's JSON text, byte for byte."""
        return self._text

    def cgroup(self, path: str) -> dict:
        for c in self.cgroups:
            if c["path"] == path:
                return c
        raise KeyError(f"no cgroup {path!r}; cgroups: {', '.join(c['path'] for c in self.cgroups)}")

    def timeseries_df(self):
        """The time series as a polars DataFrame (one row per cgroup per sample)."""
        import polars as pl

        ts = self.timeseries
        return pl.DataFrame(ts["rows"], schema=ts["columns"], orient="row")

    def locks_df(self):
        """The lock-contention table as a polars DataFrame."""
        import polars as pl

        cols = ["name", "caller", "acquisitions", "contended", "total_wait_ns", "max_wait_ns", "avg_wait_ns", "total_hold_ns"]
        return pl.DataFrame([[l[c] for c in cols] for l in self.locks], schema=cols, orient="row")


def format_result(r: Result, show_all: bool = False) -> str:
    """A run's text summary (`reclaimsim run`): /proc/vmstat, each cgroup's memory.stat and
    memory.events, the lock table, the workloads, reclaim; counters that are zero only
    with `show_all`."""
    sc = r.scenario
    m = sc["machine"]
    lines: list[str] = []
    out = lines.append
    out(
        f"# reclaimsim: {sc.get('name') or 'scenario'}  seed={sc['seed']}  virtual={r.end_ns / 1e9:.3f} s  "
        f"nodes={m['nodes']} cpus={m['cpus']} memory/node={m['memory_per_node'] >> 20}M"
    )
    out("\n## /proc/vmstat")
    for k, v in r.vmstat.items():
        if v or show_all or k.startswith("nr_"):
            out(f"{k} {v}")
    for c in r.cgroups:
        out(f"\n## {c['path']}  memory.current {c['memory.current']}  memory.max {c['memory.max']}")
        out("### memory.stat")
        for k, v in c["memory.stat"].items():
            if v or show_all:
                out(f"{k} {v}")
        out("### memory.events")
        for k, v in c["memory.events"].items():
            out(f"{k} {v}")
    observe = r.scenario.get("observe", "none")
    rules = rules_in_force(r.scenario)

    def caller(l: dict) -> str:
        # As perf names it on this kernel, with the model's site where that differs.
        c = perf_caller(l["caller"], rules)
        return c if c == l["caller"] else f"{c} [model: {l['caller']}]"

    if observe != "none":
        # What the observer prints: the traced waiters only (the pending-bit spinner is not).
        out(f"\n## lock contention as {observe} reads it (perf lock contention columns)")
        out(f"{'contended':>10} {'total wait':>12} {'max wait':>12} {'avg wait':>12} {'type':>12}   caller")
        for l in sorted(r.locks, key=lambda l: -l["observed"]["total_wait_ns"]):
            o = l["observed"]
            if o["contended"] or show_all:
                out(
                    f"{o['contended']:>10} {fmt_ns(o['total_wait_ns']):>12} {fmt_ns(o['max_wait_ns']):>12} "
                    f"{fmt_ns(o['avg_wait_ns']):>12} {'spinlock':>12}   {caller(l)} ({l['name']})"
                )
        out(f"\n## lock contention under {observe}, every waiter (the truth of this observed run)")
    else:
        out("\n## lock contention (perf lock contention columns)")
    out(f"{'contended':>10} {'total wait':>12} {'max wait':>12} {'avg wait':>12} {'type':>12}   caller")
    for l in r.locks:
        out(
            f"{l['contended']:>10} {fmt_ns(l['total_wait_ns']):>12} {fmt_ns(l['max_wait_ns']):>12} "
            f"{fmt_ns(l['avg_wait_ns']):>12} {'spinlock':>12}   {caller(l)} ({l['name']}, {l['acquisitions']} acquisitions)"
        )
    out("\n## workloads")
    out(f"{'name':<12} {'type':<10} {'cgroup':<16} {'tasks':>5} {'accesses':>12} {'hits':>12} {'misses':>10} {'accesses/s':>14}")
    for w in r.workloads:
        out(
            f"{w['name']:<12} {w['type']:<10} {w['cgroup']:<16} {w['tasks']:>5} {w['accesses']:>12} "
            f"{w['hits']:>12} {w['misses']:>10} {w['throughput']:>14.0f}" + ("  OOM-killed" if w["oom_killed"] else "")
        )
    for w in r.workloads:
        threads = w.get("threads", [])
        # Each thread of a workload that has several (up to 16, or all with --all): one
        # that ran ahead while another thrashed shows here, not in the totals.
        if 1 < len(threads) and (len(threads) <= 16 or show_all):
            for t in threads:
                out(
                    f"  {w['name']} thread {t['stream']}: {t['accesses']} accesses, {t['hits']} hits, "
                    f"{t['misses']} misses, {fmt_ns(t['elapsed_ns'])} from start to last access"
                )
    for w in r.workloads:
        t = w.get("trace")
        if t:
            out(
                f"trace {w['name']}: {t['requests']} requests, {t['hits']} hits, {t['misses']} misses, "
                f"miss ratio {t['miss_ratio']:.4f} ({t['objects']} objects, {t['pages']} pages)"
            )
    rc = r.reclaim
    out(
        f"\nkswapd CPU {_per_node(rc['kswapd_cpu_ns'])}, direct reclaim {rc['direct_reclaims']} calls "
        f"{fmt_ns(rc['direct_reclaim_ns'])}, OOM kills {len(r.oom_kills)}"
    )
    for s in (r.data.get("proactive") or {}).get("schedules", []):
        lat = s["latency_ns"]
        out(
            f"memory.reclaim {s['cgroup']} \"{s['buffer']}\": {s['writes']} writes, {s['failures']} failed, "
            f"{s['reclaimed_bytes'] >> 20}M of {s['requested_bytes'] >> 20}M reclaimed; write time mean "
            f"{fmt_ns(lat['mean'])} p50 {fmt_ns(lat['p50'])} p99 {fmt_ns(lat['p99'])} max {fmt_ns(lat['max'])}"
        )
    for s in (r.data.get("lru_gen_writes") or {}).get("schedules", []):
        lat = s["latency_ns"]
        out(
            f"lru_gen \"{s['cmd']}\" {s['cgroup']} node {s['node']}: {s['writes']} writes, {s['failures']} failed, "
            f"{s['reclaimed_pages']} pages reclaimed; write time mean {fmt_ns(lat['mean'])} max {fmt_ns(lat['max'])}"
        )
    return "\n".join(lines)


def _per_node(ns: list[int]) -> str:
    """kswapd's CPU time: one figure on one node, else each node's (node 0 first)."""
    if len(ns) == 1:
        return fmt_ns(ns[0])
    return ", ".join(fmt_ns(x) for x in ns) + " (per node)"
