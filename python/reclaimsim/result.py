"""The result of a run: the core's JSON (docs/results.md), with DataFrame views."""

from __future__ import annotations

import json
from typing import Any


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
