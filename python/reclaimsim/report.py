"""`reclaimsim report`: one self-contained HTML file of plots from a run's JSON, a compare
JSON or a sweep directory. plotly draws the figures; its JavaScript is embedded once in the
page, so the file opens without a network. Every figure is titled with the kernel's names
and its units.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ._core import ScenarioError
from .metrics import unit
from .sweep import upgrade

LRU_LISTS = ["inactive_anon", "active_anon", "inactive_file", "active_file"]
RATES = ["pgscan", "pgsteal", "workingset_refault_anon", "workingset_refault_file"]
# Sweep metrics plotted when present and not all zero (names as metrics.py gives them).
SWEEP_METRICS = [
    "pgscan_direct",
    "pgsteal_direct",
    "pgscan_kswapd",
    "pgsteal_kswapd",
    "workingset_refault_anon",
    "workingset_refault_file",
    "pswpout",
    "allocstall",
    "lock_wait_total_ns",
]


def _go():
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        raise ScenarioError("report: plotly is not installed (pip install plotly)") from None
    return go, make_subplots


def load_input(path: str) -> tuple[str, Any]:
    """(kind, data) of a report input: "run" (a run's JSON), "compare" (a compare JSON) or
    "sweep" (a sweep directory's results, cgroups and time series). What the figures read
    is checked here: a refusal names the file and what is missing or wrong."""
    p = Path(path)
    try:
        p.stat()
    except OSError as e:  # a directory on the way that this user may not search
        if not isinstance(e, FileNotFoundError):
            raise ScenarioError(f"report input {path}: cannot read: {e.strerror or e}") from None
    if p.is_dir():
        f = p / "results.parquet"
        if not f.is_file():
            raise ScenarioError(f"report input {path}: a directory without results.parquet (not a sweep store)")
        return "sweep", _load_sweep_table(f)
    if not p.is_file():
        what = "not a regular file" if p.exists() else "no such file or directory"
        raise ScenarioError(f"report input {path}: {what}")
    try:
        data = json.loads(p.read_text(), parse_constant=_no_constant)
    except _Constant as e:
        raise ScenarioError(f"report input {path}: not JSON as reclaimsim writes it: {e} is not a number") from None
    except OSError as e:
        raise ScenarioError(f"report input {path}: cannot read: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ScenarioError(f"report input {path}: not JSON ({e})") from None
    except RecursionError:
        raise ScenarioError(f"report input {path}: not JSON (nested too deeply)") from None
    if isinstance(data, dict) and "vmstat" in data and "timeseries" in data:
        _check_run(data, path)
        return "run", data
    if isinstance(data, dict) and {"a", "b", "metrics", "locks"} <= data.keys():
        _check_compare(data, path)
        return "compare", data
    raise ScenarioError(
        f"report input {path}: neither a run's JSON (`run --json`) nor a compare JSON (`compare --json`)"
    )


# The columns every sweep's results.parquet has (sweep.py's rows).
SWEEP_COLUMNS = ("run_id", "scenario", "variant_set", "seed", "error")


def _load_sweep_table(f: Path):
    import polars as pl

    try:
        df = pl.read_parquet(f)
    except (pl.exceptions.PolarsError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ScenarioError(f"report input {f}: not a readable Parquet file ({first})") from None
    missing = [c for c in SWEEP_COLUMNS if c not in df.columns]
    if missing:
        raise ScenarioError(
            f"report input {f}: not a sweep's table: no column {', '.join(missing)} (columns: {_cols(df.columns)})"
        )
    return upgrade(df)  # a store of an earlier version: its columns under today's names


def _cols(names: list[str]) -> str:
    s = ", ".join(names) or "none"
    return s if len(s) <= 80 else s[:77] + "..."


_NUM = (int, float)

# The result JSON's schema_version this report reads (report.rs SCHEMA_VERSION).
SCHEMA_VERSION = 1


class _Constant(Exception):
    pass


def _no_constant(name: str):
    """json.loads's hook for NaN and the infinities, which Python's reader takes and no
    reclaimsim output holds."""
    raise _Constant(name)


def _shape(v: Any) -> str:
    if isinstance(v, bool):
        return "a boolean"
    return {dict: "a table", list: "a list", str: "a string", int: "a number", float: "a number",
            type(None): "null"}.get(type(v), type(v).__name__)


class _Check:
    """Field checks of one report input: a refusal names the file and the field."""

    def __init__(self, path: str, kind: str):
        self.path, self.kind = path, kind

    def fail(self, where: str, what: str) -> None:
        raise ScenarioError(f"report input {self.path}: {where}: {what} (not {self.kind})")

    def get(self, d: dict, key: str, types, expected: str, where: str = "") -> Any:
        at = f"{where}.{key}" if where else key
        if key not in d:
            self.fail(at, "missing")
        v = d[key]
        if not isinstance(v, types) or (types is _NUM and isinstance(v, bool)):
            self.fail(at, f"{_shape(v)}, expected {expected}")
        return v

    def records(self, d: dict, key: str, fields: dict[str, tuple]) -> list:
        """d[key] as a list of tables, each with these fields (name -> (types, expected))."""
        rows = self.get(d, key, list, "a list of tables")
        for i, r in enumerate(rows):
            if not isinstance(r, dict):
                self.fail(f"{key}[{i}]", f"{_shape(r)}, expected a table")
            for f, (types, expected) in fields.items():
                self.get(r, f, types, expected, f"{key}[{i}]")
        return rows


def _check_run(r: dict, path: str) -> None:
    """What run_figures reads of a run's JSON."""
    c = _Check(path, "a run's JSON as `run --json` writes it")
    if r.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        c.fail("schema_version", f"{r['schema_version']!r}; this reclaimsim reads {SCHEMA_VERSION}")
    c.get(r, "scenario", dict, "a table")
    ts = c.get(r, "timeseries", dict, "a table")
    cols = c.get(ts, "columns", list, "a list of column names", "timeseries")
    rows = c.get(ts, "rows", list, "a list of rows", "timeseries")
    if rows:
        need = ["t_ns", "cgroup", *LRU_LISTS, *RATES]
        missing = [k for k in need if k not in cols]
        if missing:
            c.fail("timeseries.columns", f"no {', '.join(missing)}")
        interval = c.get(ts, "interval_ns", _NUM, "a number of ns", "timeseries")
        if not interval > 0:
            c.fail("timeseries.interval_ns", f"{interval}, expected a number of ns > 0")
        for i, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != len(cols):
                got = f"{len(row)} values" if isinstance(row, list) else _shape(row)
                c.fail(f"timeseries.rows[{i}]", f"{got}, expected a list of {len(cols)} values (one per column)")
            for k, v in zip(cols, row):
                if k != "cgroup" and k in need and (not isinstance(v, _NUM) or isinstance(v, bool)):
                    c.fail(f"timeseries.rows[{i}] column {k}", f"{_shape(v)}, expected a number")
                if k != "cgroup" and k in need and v < 0:
                    c.fail(f"timeseries.rows[{i}] column {k}", f"{v}, expected a number >= 0 (a size, a count or a time)")
    num = (_NUM, "a number")
    c.records(r, "locks", {"name": (str, "a string"), "caller": (str, "a string"), "acquisitions": num,
                           "total_wait_ns": num})
    for i, cg in enumerate(c.records(r, "cgroups", {"path": (str, "a string"), "memory.stat": (dict, "a table")})):
        for k in ("pgsteal", "workingset_refault_anon", "workingset_refault_file"):
            if k in cg["memory.stat"]:
                c.get(cg["memory.stat"], k, _NUM, "a number", f"cgroups[{i}].memory.stat")


def _check_compare(d: dict, path: str) -> None:
    """What compare_figures reads of a compare JSON."""
    c = _Check(path, "a compare JSON as `compare --json` writes it")
    c.get(d, "a", dict, "a table of switches")
    c.get(d, "b", dict, "a table of switches")
    num = (_NUM, "a number")
    ms = c.records(d, "metrics", {"name": (str, "a string"), "a_mean": num, "a_std": num, "b_mean": num, "b_std": num})
    locks = c.records(d, "locks", {"site": (str, "a string"), "a_total_wait_ns": num, "b_total_wait_ns": num})
    if ms or locks:
        c.get(d, "scenario", (str, int, float), "a name")
    for i, m in enumerate(ms):
        for k in ("a_std", "b_std"):
            if m[k] < 0:
                c.fail(f"metrics[{i}].{k}", f"{m[k]}, expected a standard deviation >= 0")
    if ms:
        seeds = c.get(d, "seeds", _NUM, "a number of seeds")
        if seeds < 1 or seeds != int(seeds):
            c.fail("seeds", f"{seeds}, expected a whole number of seeds >= 1")


def _ts_by_cgroup(r: dict) -> dict[str, dict[str, list]]:
    ts = r["timeseries"]
    cols = ts["columns"]
    out: dict[str, dict[str, list]] = {}
    for row in ts["rows"]:
        d = dict(zip(cols, row))
        c = out.setdefault(d["cgroup"], {k: [] for k in cols})
        for k in cols:
            c[k].append(d[k])
    return out


def run_figures(r: dict, label: str = "") -> list:
    go, make_subplots = _go()
    figs = []
    per = _ts_by_cgroup(r)
    name = r["scenario"].get("name", "")
    pre = f"{label}{name}: " if name or label else ""
    if per:
        f = make_subplots(rows=2, cols=2, subplot_titles=[f"{l} [MiB]" for l in LRU_LISTS])
        for i, lst in enumerate(LRU_LISTS):
            for cg, s in per.items():
                f.add_trace(
                    go.Scatter(x=[t / 1e9 for t in s["t_ns"]], y=[v / 2**20 for v in s[lst]], name=cg,
                               legendgroup=cg, showlegend=i == 0, mode="lines"),
                    row=i // 2 + 1, col=i % 2 + 1,
                )
        f.update_xaxes(title_text="virtual time [s]")
        f.update_layout(title=f"{pre}LRU list sizes per cgroup (memory.stat) over virtual time", height=620)
        figs.append(f)
        f = make_subplots(rows=2, cols=2, subplot_titles=[f"{k} [pages/s]" for k in RATES])
        interval = r["timeseries"]["interval_ns"] / 1e9
        for i, k in enumerate(RATES):
            for cg, s in per.items():
                # The time series holds counters as deltas over each interval.
                rate = [v / interval for v in s[k]]
                f.add_trace(
                    go.Scatter(x=[t / 1e9 for t in s["t_ns"]], y=rate, name=cg, legendgroup=cg,
                               showlegend=i == 0, mode="lines"),
                    row=i // 2 + 1, col=i % 2 + 1,
                )
        f.update_xaxes(title_text="virtual time [s]")
        f.update_layout(title=f"{pre}scan, steal and refault rates per cgroup [pages/s]", height=620)
        figs.append(f)
    locks = [l for l in r["locks"] if l["acquisitions"]]
    if locks:
        f = go.Figure(
            go.Bar(x=[f"{l['name']} @ {l['caller']}" for l in locks], y=[l["total_wait_ns"] / 1e6 for l in locks],
                   name="total wait")
        )
        f.update_layout(title=f"{pre}lock contention per call site: total wait [ms] (perf lock contention)",
                        yaxis_title="total wait [ms]", xaxis_title="lock @ caller")
        figs.append(f)
    cgs = [c for c in r["cgroups"] if c["path"] != "/"]
    if cgs:
        f = go.Figure()
        for key, title in (("pgsteal", "pgsteal"), ("workingset_refault_anon", "workingset_refault_anon"),
                           ("workingset_refault_file", "workingset_refault_file")):
            f.add_trace(go.Bar(x=[c["path"] for c in cgs], y=[c["memory.stat"].get(key, 0) for c in cgs], name=title))
        f.update_layout(title=f"{pre}per-memcg pgsteal and workingset refaults [pages] (memory.stat)",
                        barmode="group", yaxis_title="pages", xaxis_title="memcg")
        figs.append(f)
    return figs


def compare_figures(c: dict) -> list:
    go, make_subplots = _go()
    a = ", ".join(f"{k}={v}" for k, v in c["a"].items()) or "A"
    b = ", ".join(f"{k}={v}" for k, v in c["b"].items()) or "B"
    figs = []
    ms = c["metrics"]
    if ms:
        cols = 3
        rows = (len(ms) + cols - 1) // cols
        f = make_subplots(rows=rows, cols=cols, subplot_titles=[m["name"] for m in ms])
        for i, m in enumerate(ms):
            for side, lab, color in (("a", f"A: {a}", "#1f77b4"), ("b", f"B: {b}", "#ff7f0e")):
                f.add_trace(
                    go.Bar(x=[side.upper()], y=[m[f"{side}_mean"]], error_y=dict(type="data", array=[m[f"{side}_std"]]),
                           name=lab, legendgroup=side, showlegend=i == 0, marker_color=color),
                    row=i // cols + 1, col=i % cols + 1,
                )
        f.update_layout(title=f"{c['scenario']}: A vs B, mean and std over {c['seeds']} seeds (each metric in its own unit)",
                        height=280 * rows)
        figs.append(f)
    if c["locks"]:
        sites = [l["site"] for l in c["locks"]]
        f = go.Figure([
            go.Bar(x=sites, y=[l["a_total_wait_ns"] / 1e6 for l in c["locks"]], name=f"A: {a}"),
            go.Bar(x=sites, y=[l["b_total_wait_ns"] / 1e6 for l in c["locks"]], name=f"B: {b}"),
        ])
        f.update_layout(title=f"{c['scenario']}: lock contention per call site, total wait [ms], mean over seeds",
                        barmode="group", yaxis_title="total wait [ms]", xaxis_title="caller")
        figs.append(f)
    return figs


def _independent(df, x: str, y: str) -> bool:
    """Whether axis y takes more than one value at some value of axis x (not zipped)."""
    import polars as pl

    return len(df) > 0 and df.group_by(x).agg(pl.col(y).n_unique())[y].max() > 1


def sweep_figures(df, axes: list[str] | None = None, metrics: list[str] | None = None) -> list:
    import polars as pl

    go, _ = _go()
    ok = df.filter(pl.col("error").is_null()) if "error" in df.columns else df
    fixed = {"run_id", "scenario", "variant_set", "variant_switches", "seed", "scenario_hash", "reclaimsim_version",
             "store_version", "wall_s", "error"}
    if axes is None:
        # The axes come before the values (a sweep's rows: identity, axes, then end_ns and
        # the values, the vmstat counters first).
        first_value = next((i for i, c in enumerate(ok.columns)
                            if c == "end_ns" or "@" in c or c in SWEEP_METRICS or c.startswith("vmstat.")), len(ok.columns))
        axes = [c for c in ok.columns[:first_value] if c not in fixed]
    if metrics is None:
        # The scenario's own [compare] metrics across cgroups first (seed 001's fairness).
        metrics = [c for c in ok.columns if c.startswith(("cv:", "sum:"))]
        metrics += [m for m in SWEEP_METRICS if m in ok.columns and ok[m].sum() != 0]
        metrics += [c for c in ok.columns if c.startswith("throughput@")]
    # What each variant set is, in the legends ("A: mglru_memcg_iter=false").
    what = {}
    if "variant_switches" in ok.columns:
        what = {vs: sw for vs, sw in ok.select("variant_set", "variant_switches").unique(maintain_order=True).rows()}
    set_label = lambda vs: f"{vs}: {what[vs]}" if vs in what else str(vs)
    figs = []
    name = ok["scenario"][0] if len(ok) and "scenario" in ok.columns else "sweep"
    if not axes:
        # A grid of variant sets and seeds only: each metric per variant set.
        for m in metrics:
            g = ok.group_by("variant_set", maintain_order=True).agg(
                pl.col(m).mean().alias("mean"), pl.col(m).std().fill_null(0).alias("std"))
            f = go.Figure(go.Bar(x=[set_label(v) for v in g["variant_set"]], y=g["mean"].to_list(),
                                 error_y=dict(type="data", array=g["std"].to_list())))
            u = unit(m)
            f.update_layout(title=f"{name}: {m}{f' [{u}]' if u else ''} per variant set, mean and std over seeds",
                            xaxis_title="variant set", yaxis_title=m)
            figs.append(f)
    for m in metrics:
        for ax in axes:
            # Axes that vary on their own split the lines; an axis zipped with this one
            # (one value per value of it) does not.
            others = [a for a in axes if a != ax and _independent(ok, ax, a)]
            g = (ok.group_by(["variant_set", *others, ax], maintain_order=True)
                 .agg(pl.col(m).mean().alias("mean"), pl.col(m).std().fill_null(0).alias("std")))
            f = go.Figure()
            keys = g.select(["variant_set", *others]).unique(maintain_order=True).rows()
            for key in keys:
                sub = g.filter(pl.all_horizontal([pl.col(c) == v for c, v in zip(["variant_set", *others], key)]))
                label = ", ".join([set_label(key[0])] + [f"{a}={v}" for a, v in zip(others, key[1:])])
                f.add_trace(go.Scatter(x=[str(x) for x in sub[ax]], y=sub["mean"],
                                       error_y=dict(type="data", array=sub["std"].to_list()),
                                       mode="lines+markers", name=label))
            u = unit(m)
            f.update_layout(title=f"{name}: {m} [{u}] against {ax}, mean and std over seeds" if u else
                            f"{name}: {m} against {ax}, mean and std over seeds",
                            xaxis_title=ax, yaxis_title=f"{m} [{u}]" if u else m)
            figs.append(f)
    pairs = [(x, y) for i, x in enumerate(axes) for y in axes[i + 1:] if _independent(ok, x, y)]
    if pairs:
        x, y = pairs[0]
        for m in metrics[:4]:
            for vs in ok["variant_set"].unique(maintain_order=True):
                g = ok.filter(pl.col("variant_set") == vs).group_by([x, y]).agg(pl.col(m).mean().alias("mean"))
                # In the grid's order (the order of first appearance).
                xs = ok[x].unique(maintain_order=True).to_list()
                ys = ok[y].unique(maintain_order=True).to_list()
                z = [[next((r["mean"] for r in g.iter_rows(named=True) if r[x] == xv and r[y] == yv), None) for xv in xs]
                     for yv in ys]
                f = go.Figure(go.Heatmap(x=[str(v) for v in xs], y=[str(v) for v in ys], z=z, colorbar=dict(title=unit(m))))
                f.update_layout(title=f"{name}: {m} [{unit(m)}], variant set {set_label(vs)}: mean over seeds by {x} and {y}",
                                xaxis_title=x, yaxis_title=y)
                figs.append(f)
    return figs


def _figures(kind: str, data: Any, path: str = "") -> list:
    if kind == "run":
        return run_figures(data)
    if kind == "compare":
        return compare_figures(data)
    import polars as pl

    try:
        return sweep_figures(data)
    except pl.exceptions.PolarsError as e:
        # A table with the columns of a sweep but not their types.
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ScenarioError(f"report input {path}: its results.parquet is not a sweep's table ({first})") from None


def page(sections: list[tuple[str, list]]) -> str:
    """An HTML page of (heading, figures) sections, plotly's JavaScript embedded once."""
    from plotly.offline import get_plotlyjs

    parts = []
    n = 0
    for heading, figs in sections:
        divs = []
        for f in figs:
            f.update_layout(template="plotly_white")
            divs.append(f.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot{n}",
                                  config={"displaylogo": False}))
            n += 1
        parts.append(f"<section><h2>{html.escape(heading)}</h2>\n" + "\n".join(divs) + "</section>")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>reclaimsim report</title>\n"
        "<style>body{font-family:sans-serif;margin:1em 2em}section{margin-bottom:2em}</style>\n"
        f"<script type=\"text/javascript\">{get_plotlyjs()}</script></head>\n<body><h1>reclaimsim report</h1>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


def build_html(inputs: list[str]) -> str:
    """The report page for these inputs (each a run JSON, a compare JSON or a sweep dir);
    every input is read before anything is drawn, so a bad one fails first."""
    loaded = [(path, *load_input(path)) for path in inputs]
    return page([(f"{path} ({kind})", _figures(kind, data, path)) for path, kind, data in loaded])
