"""Sweeps: a grid of runs in one file, run on local worker processes or a Dask cluster,
stored as a resumable Parquet dataset.

A grid names a scenario, seeds, axes (scenario fields by their `--set` path) and variant
sets. The run list is the cross product of the axes (less `exclude`d points; `zip`ped axes
move together), times the variant sets, times the seeds. Each run's identity is a hash of
its normalized scenario (the core's `validate` output, which includes the seed and the
variant switches) and its variant set's name; the store keeps one file per finished run, written to a temporary name
and renamed, so a sweep killed at any point and started again redoes only the runs that
had not finished. At the end the per-run files are gathered into `results.parquet`,
`cgroups.parquet` and `timeseries.parquet`, which polars, pandas or DuckDB open without
reclaimsim. See docs/sweeps.md.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import stat
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from . import _core
from ._core import ScenarioError
from .batch import LocalPool, probe, run_one
from .metrics import from_v1, metric, values
from .safefs import replace_atomically
from .scenario import MAX_DEPTH, apply_override, parse_key, apply_side, brief, compare_table, load_scenario, toml_literal, toml_loads, value_problem
from .term import one_line

GRID_FIELDS = ("scenario", "description", "seeds", "axes", "variant_sets", "exclude", "zip", "overrides")


def _grid_dir() -> Path:
    return Path(__file__).parent / "grids"


def builtin_grids() -> list[tuple[str, str]]:
    """(name, description) of each built-in grid."""
    out = []
    for f in sorted(_grid_dir().glob("*.toml")):
        out.append((f.stem, tomllib.loads(f.read_text()).get("description", "")))
    return out


@dataclass
class Run:
    """One run of a sweep."""

    run_id: str
    point: dict[str, Any]
    variant_set: str
    seed: int
    scenario: str  # normalized scenario JSON
    # The variant set's switches and fields (the row's `variant_switches`, so that tables
    # and plots say what the set is), and the scenario's [compare] metrics, stored
    # beside the values (`cv:pgsteal@/memcg*`: seed 001's fairness).
    switches: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()


@dataclass
class Grid:
    name: str
    scenario: str
    seeds: list[int]
    axes: dict[str, list[Any]]
    variant_sets: dict[str, dict]
    exclude: list[dict[str, Any]] = field(default_factory=list)
    zip: list[list[str]] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    base_dir: Path = Path(".")

    def describe(self) -> dict:
        """What makes the grid's runs and labels, as a store records it."""
        return {
            "scenario": self.scenario, "overrides": self.overrides, "seeds": self.seeds, "axes": self.axes,
            "variant_sets": self.variant_sets, "exclude": self.exclude, "zip": self.zip,
        }


def _err(msg: str) -> ScenarioError:
    return ScenarioError(msg)


def load_grid(grid: str | Path | dict) -> Grid:
    """Read a grid (a TOML file, a built-in grid name or a dict) and check its shape."""
    base = Path(".")
    name = "grid"
    if isinstance(grid, dict):
        data = dict(grid)
    else:
        s = str(grid)
        p = Path(s)
        if p.is_file():
            try:
                data = toml_loads(p.read_text())
            except OSError as e:
                raise _err(f"grid {s}: cannot read: {e.strerror or e}") from None
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
                raise _err(f"grid {s}: not a TOML file: {e}") from None
            except RecursionError:
                raise _err(f"grid {s}: not a TOML file: nested too deeply") from None
            base, name = p.parent, p.stem
        else:
            f = _grid_dir() / f"{s}.toml"
            if not f.is_file():
                names = ", ".join(n for n, _ in builtin_grids())
                raise _err(f"grid {s!r}: no such file and no built-in grid of that name; built-ins: {names}")
            data = toml_loads(f.read_text())
            name = s
    for k in data:
        if k not in GRID_FIELDS:
            raise _err(f"grid field {k!r}: unknown; allowed: {', '.join(GRID_FIELDS)}")
    _check_grid_values(data)
    if not isinstance(data.get("scenario"), str) or not data["scenario"]:
        raise _err("grid field 'scenario': required, a built-in scenario name or a path")
    scenario = data["scenario"]
    if (base / scenario).is_file():
        scenario = str(base / scenario)
    seeds = data.get("seeds", 3)
    if type(seeds) is int:
        if not 1 <= seeds <= 1000:
            raise _err(f"grid field 'seeds': {seeds}: allowed 1 to 1000, or a list of seeds")
        seeds = list(range(1, seeds + 1))
    elif not (isinstance(seeds, list) and seeds and all(type(x) is int and 0 <= x < 2**64 for x in seeds)):
        raise _err(f"grid field 'seeds': {seeds!r}: an integer from 1 to 1000 or a non-empty list of seeds")
    if len(set(seeds)) != len(seeds):
        raise _err(f"grid field 'seeds': {seeds!r}: a seed is listed twice")
    axes = data.get("axes", {})
    if not isinstance(axes, dict):
        raise _err("grid field 'axes': a table of FIELD = [values]")
    axes = _canonical_axes(axes)
    for k, v in axes.items():
        if not isinstance(v, list) or not v:
            raise _err(f"grid axis {k!r}: {v!r}: a non-empty list of values")
        if len({json.dumps(x, sort_keys=True) for x in v}) != len(v):
            raise _err(f"grid axis {k!r}: {v!r}: a value is listed twice")
    vsets = data.get("variant_sets")
    if vsets is not None and (not isinstance(vsets, dict) or not vsets or not all(isinstance(x, dict) for x in vsets.values())):
        raise _err("grid field 'variant_sets': a table of NAME = { switch = value, ... }")
    zips = data.get("zip", [])
    if not (isinstance(zips, list) and all(isinstance(z, list) and len(z) >= 2 for z in zips)):
        raise _err("grid field 'zip': a list of lists of two or more axis names")
    zips = [[_axis_ref(a, axes, "zip") for a in z] for z in zips]
    seen: set[str] = set()
    for z in zips:
        for a in z:
            if a not in axes:
                raise _err(f"grid field 'zip': {a!r} is not an axis; axes: {', '.join(axes)}")
            if a in seen:
                raise _err(f"grid field 'zip': axis {a!r} is in two groups")
            seen.add(a)
        lens = {len(axes[a]) for a in z}
        if len(lens) != 1:
            raise _err(f"grid field 'zip': axes {z} have different lengths {[len(axes[a]) for a in z]}")
    excl = data.get("exclude", [])
    if not (isinstance(excl, list) and all(isinstance(e, dict) and e for e in excl)):
        raise _err("grid field 'exclude': a list of tables { axis = value, ... }")
    excl = [{_axis_ref(a, axes, "exclude"): v for a, v in e.items()} for e in excl]
    ov = data.get("overrides", [])
    if not (isinstance(ov, list) and all(isinstance(x, str) for x in ov)):
        raise _err('grid field \'overrides\': a list of "KEY=VALUE" strings')
    return Grid(name, scenario, seeds, axes, vsets or {}, excl, zips, ov, base)


def canonical_key(key: str, origin: str) -> str:
    """A `--set` path in one spelling: `machine.cpus` for ` machine.cpus` or
    `machine . cpus`, `cgroup[1].memory.max` for `cgroup[01].memory.max`."""
    parts = parse_key(".".join(t.strip() for t in key.split(".")), origin)
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _canonical_axes(axes: dict) -> dict:
    """The axes under their canonical paths; two spellings of one path are refused."""
    out: dict[str, Any] = {}
    first: dict[str, str] = {}
    for k, v in axes.items():
        c = canonical_key(str(k), f"grid axis {k!r}")
        if c in out:
            raise _err(f"grid axis {k!r}: the same field as axis {first[c]!r} ({c}); list each field once")
        out[c], first[c] = v, k
    return out


def _axis_ref(a: str, axes: dict, field_name: str) -> str:
    """An axis named in `zip` or `exclude`, in its canonical spelling."""
    try:
        c = canonical_key(str(a), f"grid field {field_name!r}: {a!r}")
    except ScenarioError:
        c = None
    if c not in axes:
        raise _err(f"grid field {field_name!r}: {a!r} is not an axis; axes: {', '.join(axes)}")
    return c


def grid_size(g: "Grid") -> int:
    """The number of runs of the grid before exclusions: points (zipped axes move
    together) times variant sets times seeds, computed without listing them."""
    zipped = {a for z in g.zip for a in z}
    n = 1
    for z in g.zip:
        n *= len(g.axes[z[0]])
    for a, vals in g.axes.items():
        if a not in zipped:
            n *= len(vals)
    return n * _nsets(g) * len(g.seeds)


def _nsets(g: "Grid") -> int:
    """The grid's variant sets, or 2 when it names none (compare's a and b, at most)."""
    return len(g.variant_sets) or 2


# The most runs a grid may have (before exclusions): planning validates each run's
# scenario, about a millisecond each, and holds them all in memory.
MAX_RUNS = 100_000


def _check_grid_values(data: dict) -> None:
    """Refuse what no scenario field takes and JSON cannot carry (a TOML date or time,
    NaN, an infinity, nesting deeper than a scenario's), naming the axis and its value,
    else the grid field."""
    axes = data.get("axes")
    for k, vals in axes.items() if isinstance(axes, dict) else []:
        for v in vals if isinstance(vals, list) else []:
            bad = value_problem(v, MAX_DEPTH - 1)
            if bad:
                sub, shown, what = bad
                inner = f" (its {_at(sub)} = {shown})" if sub and shown is not None else ""
                raise _err(f"grid axis {k!r} value {shown if not sub else brief(v)}{inner}: {what}")
    for k, v in data.items():
        bad = value_problem(v, MAX_DEPTH - 1)
        if bad:
            sub, shown, what = bad
            raise _err(f"grid field {k!r}{_at(sub)}" + (f" = {shown}" if shown is not None else "") + f": {what}")


def _at(sub: list) -> str:
    s = "".join(f"[{x!r}]" for x in sub[:8])
    return s + ("..." if len(sub) > 8 else "")


def _points(g: Grid) -> list[dict[str, Any]]:
    """The grid's points: the cross product of the axes (zipped axes move together), less
    the excluded ones."""
    groups: list[list[str]] = [list(z) for z in g.zip]
    zipped = {a for z in g.zip for a in z}
    groups += [[a] for a in g.axes if a not in zipped]
    choices = [[dict(zip(grp, vals)) for vals in zip(*(g.axes[a] for a in grp))] for grp in groups]
    out = []
    for combo in itertools.product(*choices):
        pt: dict[str, Any] = {}
        for c in combo:
            pt.update(c)
        if any(all(pt.get(a) == v for a, v in e.items()) for e in g.exclude):
            continue
        out.append({a: pt[a] for a in g.axes})
    return out


def _identity(scenario_json: str, variant_set: str) -> str:
    """A run's identity: its normalized scenario (seed and switches included) and the name
    of its variant set (two sets with the same switches are still two rows)."""
    return hashlib.sha256(f"{variant_set}\0{scenario_json}".encode()).hexdigest()[:20]


def _apply_point(base: dict, pt: dict[str, Any], base_path: str = "") -> tuple[dict, str]:
    """The scenario at a grid point, and its normalized form (sorted JSON). Every axis is set before the core validates, so axes
    that only make sense together (zipped CPUs and processes) are judged together; a
    refusal names the axis whose field the core names, else the whole point."""
    d = json.loads(json.dumps(base))
    for axis, v in pt.items():
        try:
            apply_override(d, f"{axis}={toml_literal(v)}")
        except ScenarioError as e:
            raise _err(f"grid axis {axis!r} value {v!r}: {e}") from None
    try:
        if not str(base_path).endswith(".json"):  # a person's TOML: durations need units
            _core.check_units_json(json.dumps(d))
        norm = _core.validate_json(json.dumps(d))
    except ScenarioError as e:
        msg = str(e)
        named = [a for a in pt if msg.startswith(f"scenario.{a}:") or msg.startswith(f"scenario.{a} ")]
        named = named or [a for a in pt if f"scenario.{a}" in msg]
        if len(named) == 1:
            raise _err(f"grid axis {named[0]!r} value {pt[named[0]]!r}: {msg}") from None
        raise _err(f"grid point {pt}: {msg}") from None
    return d, json.dumps(json.loads(norm), sort_keys=True)


def plan(g: Grid) -> list[Run]:
    """Every run of the grid, each scenario validated by the core. A bad axis value is
    refused here, naming the axis and the value, before any run starts."""
    base = load_scenario(g.scenario, g.overrides)
    spec = compare_table(base)
    base.pop("compare", None)
    vsets = g.variant_sets or (
        {"A": dict(spec["a"]), "B": dict(spec["b"])} if "a" in spec and "b" in spec else {"default": {}}
    )
    _core.validate_json(json.dumps(base))
    size = grid_size(g)
    if size > MAX_RUNS:
        raise _err(
            f"grid of {size:,} runs ({' x '.join(f'{len(v)} {a}' for a, v in g.axes.items())}, "
            f"{_nsets(g)} variant sets, {len(g.seeds)} seeds): allowed at most {MAX_RUNS:,}; "
            "split it into several grids"
        )
    points = _points(g)
    if not points:
        raise _err(f"grid field 'exclude': {brief(g.exclude)}: excludes every point of the axes; nothing to run")
    runs = []
    seen: dict[str, dict] = {}
    for pt in points:
        d, norm = _apply_point(base, pt, g.scenario)
        _check_distinct(seen, norm, pt)
        for name, vs in vsets.items():
            try:
                side = apply_side(d, vs)
                norm = json.loads(_core.validate_json(json.dumps(side)))
            except ScenarioError as e:
                raise _err(f"grid variant set {name!r} at {pt}: {e}") from None
            for seed in g.seeds:
                norm["seed"] = seed
                text = json.dumps(norm, sort_keys=True)
                runs.append(Run(_identity(text, name), pt, name, seed, text, vs, tuple(spec.get("metrics", ()))))
    return runs


def _check_distinct(seen: dict[str, dict], norm: str, pt: dict) -> None:
    """Refuse a point whose scenario another point already gives: two spellings of one
    value (`16M` and `16777216`), which would run once under two labels."""
    other = seen.setdefault(norm, pt)
    if other is pt:
        return
    diff = [a for a in pt if pt[a] != other[a]]
    a = diff[0] if diff else next(iter(pt), "?")
    raise _err(
        f"grid axis {a!r}: values {brief(other.get(a))} and {brief(pt.get(a))} give the same scenario "
        "(one value written two ways); list it once"
    )


def estimate(runs: list[Run], workers: int, scheduler: Any = None) -> str:
    """`--dry-run`'s line: the run count, and a time estimate from two probes of the first
    run, cut to 1% and 2% of its virtual time: a fixed part (building the machine) and a
    part per virtual second, extrapolated to the whole run."""
    first = json.loads(runs[0].scenario)

    def timed(frac: int) -> tuple[float, str, str]:
        kind, text, wall = probe(first, first["duration"] // frac)
        return wall, kind, text

    t1, _, _ = timed(100)
    t2, kind, text = timed(50)
    per_pct = max(t2 - t1, 0.0)
    wall = max(t1 - per_pct, 0.0) + 100 * per_pct
    where = f"a Dask cluster at {scheduler}" if scheduler else f"{workers} local workers"
    est = wall * len(runs) / (1 if scheduler else min(workers, len(runs)))
    note = "" if kind == "ok" else f" (the probe failed: {one_line(text)})"
    return (
        f"{len(runs)} runs; about {wall:.1f} s each (probes of 1% and 2% of the first run's virtual "
        f"time), about {est / 60:.1f} min on {where}{note}"
    )


# ---------------------------------------------------------------------------------------
# The store
# ---------------------------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import version

    return version("reclaimsim")


# The store's format, in each row's store_version column: 2 names the value columns as
# metrics.values does (`pgscan_anon`, `throughput@web`); 1 (rows without the column) named
# them `vmstat.pgscan_anon`, `workload.web.throughput`, and is read through upgrade().
STORE_VERSION = 2


def _flat_row(run: Run, r: dict | None, wall: float, error: str | None, version: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": run.run_id,
        "scenario": json.loads(run.scenario)["name"],
        "variant_set": run.variant_set,
        "variant_switches": ", ".join(f"{k}={toml_literal(v)}" for k, v in run.switches.items()) or "the scenario's own",
        "seed": run.seed,
        "scenario_hash": hashlib.sha256(run.scenario.encode()).hexdigest()[:20],
        "reclaimsim_version": version,
        "store_version": STORE_VERSION,
        "wall_s": wall,
        "error": error,
    }
    for axis, v in run.point.items():
        row[axis] = _cell(v)
    if r is not None:
        row.update(values(r))
        for m in run.metrics:
            if m not in row:
                try:
                    row[m] = metric(r, m)
                except ScenarioError:
                    pass  # a metric this run's result cannot give (compare refuses it before running)
    return row


def upgrade(df):
    """A results table (polars DataFrame) of any store version as version STORE_VERSION:
    a version-1 table's value columns renamed (metrics.from_v1) and its store_version
    column added after reclaimsim_version."""
    import polars as pl

    if "store_version" in df.columns:
        return df
    names = {c: from_v1(c) for c in df.columns}
    taken = set(df.columns)
    df = df.rename({c: n for c, n in names.items() if n != c and n not in taken})
    cols = list(df.columns)
    at = cols.index("reclaimsim_version") + 1 if "reclaimsim_version" in cols else len(cols)
    df = df.with_columns(pl.lit(STORE_VERSION, dtype=pl.Int64).alias("store_version"))
    return df.select(cols[:at] + ["store_version"] + cols[at:])


def _cgroup_rows(run: Run, r: dict) -> list[dict[str, Any]]:
    rows = []
    for c in r["cgroups"]:
        row = {"run_id": run.run_id, "cgroup": c["path"]}
        for k, v in c.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[k] = v
        for k, v in c["memory.stat"].items():
            row[f"memory.stat.{k}"] = v
        for k, v in c["memory.events"].items():
            row[f"memory.events.{k}"] = v
        rows.append(row)
    return rows


def _timeseries_rows(run: Run, r: dict) -> list[dict[str, Any]]:
    ts = r["timeseries"]
    cols = ts["columns"]
    return [{"run_id": run.run_id, **dict(zip(cols, row))} for row in ts["rows"]]


class Store:
    """DIR/runs/<id>.parquet (one row each, the journal), DIR/cgroups/<id>.parquet,
    DIR/timeseries/<id>.parquet; a run counts as stored once its runs/ file exists, and
    that file is written last, by rename."""

    def __init__(self, out: Path):
        self.out = out

    def prepare(self) -> None:
        """Create the directory and check it takes files, before any run starts."""
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.out, prefix=".probe."):
                pass
        except OSError as e:
            raise _err(f"--out {self.out}: cannot write the store there: {e.strerror or e}") from None

    def _write(self, sub: str, run_id: str, rows: list[dict]) -> None:
        import polars as pl

        (self.out / sub).mkdir(parents=True, exist_ok=True)
        overrides = {"error": pl.String} if rows and "error" in rows[0] else None
        df = pl.DataFrame(rows, infer_schema_length=None, schema_overrides=overrides)
        _write_parquet(self.out / sub / f"{run_id}.parquet", df)

    def stored(self) -> dict[str, dict]:
        """run_id -> {error, reclaimsim_version} of every stored run. A run file that is
        damaged (truncated, not Parquet, without the columns) counts as not stored: the run
        is done again and its file replaced (noted in `self.redone`). An entry that is no
        regular file (a directory, a FIFO, a device) is refused, naming it."""
        import polars as pl

        out: dict[str, dict] = {}
        self.redone: list[str] = []
        for f in sorted((self.out / "runs").glob("*.parquet")):
            st = os.lstat(f)
            if not stat.S_ISREG(st.st_mode):
                raise _err(f"sweep store {self.out}: {f} is not a regular file (a run's Parquet file was expected); remove it")
            try:
                df = pl.read_parquet(f, columns=["run_id", "error", "reclaimsim_version"])
                rows = list(df.iter_rows(named=True))
            except Exception:  # polars raises several kinds for a damaged file
                self.redone.append(f.stem)
                continue
            for row in rows:
                out[row["run_id"]] = row
        return out

    GRID_FILE = "grid.json"

    def check_grid(self, grid: dict, reuse_other_grid: bool) -> list[dict]:
        """The grids recorded in the store with `grid` (its canonical description) last,
        written nowhere yet (record_grids writes them); a store of another grid is refused
        unless `reuse_other_grid`."""
        path = self.out / self.GRID_FILE
        grids: list[dict] = []
        if path.exists():
            try:
                grids = json.loads(path.read_text())["grids"]
                assert isinstance(grids, list) and all(isinstance(x, dict) for x in grids)
            except (OSError, ValueError, KeyError, TypeError, AssertionError):
                raise _err(f"sweep store {self.out}: {path} is damaged; remove it to start the store anew") from None
        if grids and grids[-1] == grid:
            return grids
        if grids and not reuse_other_grid:
            raise _err(
                f"--out {self.out}: the store holds another grid's runs ({_grid_change(grids[-1], grid)}); "
                "give another --out, or --reuse-other-grid to reuse its runs that this grid also has "
                "(relabelled with this grid's axis values)"
            )
        return grids + [grid]

    def record_grids(self, grids: list[dict]) -> None:
        """Write the store's grid record (check_grid's list)."""
        data = json.dumps({"grids": grids}, indent=1).encode()
        path = self.out / self.GRID_FILE
        if not path.exists() or path.read_bytes() != data:
            replace_atomically(path, lambda f: f.write(data))

    def put(self, run: Run, kind: str, text: str, wall: float, version: str) -> None:
        if kind == "ok":
            r = json.loads(text)
            self._write("cgroups", run.run_id, _cgroup_rows(run, r))
            ts = _timeseries_rows(run, r)
            if ts:
                self._write("timeseries", run.run_id, ts)
            self._write("runs", run.run_id, [_flat_row(run, r, wall, None, version)])
        else:
            self._write("runs", run.run_id, [_flat_row(run, None, wall, f"{kind}: {text}", version)])

    def gather(self, runs: list[Run], old_axes: Iterable[str] = ()) -> None:
        """Write results.parquet, cgroups.parquet and timeseries.parquet of these runs, in
        their order (the grid's: points, then variant sets, then seeds). Each row carries
        this grid's axis values: columns of the axes of other grids recorded in the store
        (`old_axes`) are dropped, so a run reused under a new grid is relabelled."""
        import polars as pl

        point = {r.run_id: r.point for r in runs}
        drop = set(old_axes) - {a for r in runs[:1] for a in r.point}
        for sub, name in (("runs", "results"), ("cgroups", "cgroups"), ("timeseries", "timeseries")):
            dfs = []
            for run_id in point:
                f = self.out / sub / f"{run_id}.parquet"
                if not f.is_file():
                    continue
                try:
                    df = pl.read_parquet(f)
                except Exception:
                    raise _err(f"sweep store {self.out}: {f} is damaged (not a Parquet file); remove it and run the sweep again to redo that run") from None
                if sub == "runs":
                    df = upgrade(df).drop([c for c in df.columns if c in drop])
                    df = df.with_columns(*(pl.lit(_cell(v)).alias(a) for a, v in point[run_id].items()))
                dfs.append(df)
            df = pl.concat(dfs, how="diagonal_relaxed") if dfs else pl.DataFrame({"run_id": []}, schema={"run_id": pl.String})
            self.out.mkdir(parents=True, exist_ok=True)
            _write_parquet(self.out / f"{name}.parquet", df)


def _write_parquet(path: Path, df) -> None:
    """Write `df` to `path` whole or not at all (replace_atomically). The table is encoded
    in memory first, so that a full disk is the OSError of the file's write (one line),
    not polars' error around it."""
    import io

    buf = io.BytesIO()
    df.write_parquet(buf)
    replace_atomically(path, lambda f: f.write(buf.getvalue()))


def _cell(v: Any) -> Any:
    """An axis value as a table cell (tables and lists as JSON text)."""
    return v if isinstance(v, (int, float, str, bool)) else json.dumps(v)


def _grid_change(old: dict, new: dict) -> str:
    """What differs between two recorded grids, in a few words."""
    diff = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return "its " + ", ".join(diff) + " differ" if diff else "another grid"


# ---------------------------------------------------------------------------------------
# Executors
# ---------------------------------------------------------------------------------------


class _DaskPool:
    """A Dask distributed cluster (`--scheduler tcp://HOST:PORT`, or a Client)."""

    def __init__(self, scheduler: Any):
        try:
            from distributed import Client
        except ImportError:
            raise _err("--scheduler: dask.distributed is not installed (pip install 'reclaimsim[dask]')") from None
        if isinstance(scheduler, str):
            try:
                self.client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as e:
                raise _err(
                    f"--scheduler {scheduler!r}: cannot reach the Dask scheduler ({e}); give its address, e.g. tcp://HOST:8786"
                ) from None
            self.own = True
        else:
            self.client, self.own = scheduler, False

    def submit(self, scenario_json: str):
        return self.client.submit(run_one, scenario_json, pure=False)

    @staticmethod
    def result(future) -> tuple[str, str, float]:
        return future.result()

    def wait_any(self, futures: list, timeout: float) -> set:
        from distributed import wait as dask_wait

        try:
            return set(dask_wait(futures, timeout=timeout, return_when="FIRST_COMPLETED").done)
        except TimeoutError:
            return set()

    def close(self, cancel: bool, pending: list) -> None:
        if cancel and pending:
            self.client.cancel(pending)
        if self.own:
            self.client.close()


@dataclass
class Progress:
    total: int
    done: int = 0
    failed: int = 0
    running: int = 0
    reused: int = 0
    # Runs whose stored file was damaged and which were done again.
    redone: list[str] = field(default_factory=list)


def execute(
    runs: list[Run],
    out: Path,
    *,
    workers: int = 1,
    scheduler: Any = None,
    retry_failed: bool = False,
    reuse_other_versions: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    grid: dict | None = None,
    reuse_other_grid: bool = False,
) -> Progress:
    """Run every run of `runs` not already stored in `out`; store each as it ends. With
    `grid` (Grid.describe()), the store records it and refuses another grid's store
    unless `reuse_other_grid` (Store.check_grid)."""
    store = Store(out)
    try:
        grids = store.check_grid(grid, reuse_other_grid) if grid is not None else []
    except PermissionError as e:
        raise _err(f"--out {out}: cannot read the store there: {e.strerror}") from None
    version = _version()
    stored = store.stored()

    def reusable(run: Run) -> bool:
        s = stored.get(run.run_id)
        if s is None or (s["error"] and retry_failed):
            return False
        return s["reclaimsim_version"] == version or reuse_other_versions

    todo = [r for r in runs if not reusable(r)]
    prog = Progress(total=len(runs), reused=len(runs) - len(todo), redone=list(store.redone))
    prog.done = prog.reused
    prog.failed = sum(1 for r in runs if reusable(r) and stored[r.run_id]["error"])
    if on_progress:
        on_progress(prog)
    # A cluster that cannot be reached is refused before anything is written.
    dask = _DaskPool(scheduler) if todo and scheduler is not None else None
    try:
        store.prepare()
        if grids:
            store.record_grids(grids)
    except BaseException:
        if dask:
            dask.close(False, [])
        raise
    if todo:
        pool = dask or LocalPool(max(1, workers))
        pending: dict = {}
        cancel = True
        try:
            _drive(pool, pending, todo, store, version, prog, on_progress)
            cancel = False
        finally:
            pool.close(cancel, list(pending))
    store.gather(runs, {a for g in grids[:-1] for a in g.get("axes", {})})
    return prog


def _drive(pool, pending: dict, todo: list[Run], store: Store, version: str, prog: Progress, on_progress) -> None:
    """Submit the runs, a bounded number in flight (a huge grid is not queued at once),
    and store each as it ends."""
    limit = 64
    it = iter(todo)
    while True:
        while len(pending) < limit:
            run = next(it, None)
            if run is None:
                break
            pending[pool.submit(run.scenario)] = run
        if not pending:
            return
        prog.running = min(len(pending), limit)
        if on_progress:
            on_progress(prog)
        for f in pool.wait_any(list(pending), 0.5):
            run = pending.pop(f)
            kind, text, wall = pool.result(f)
            store.put(run, kind, text, wall, version)
            prog.done += 1
            prog.failed += kind != "ok"
        if on_progress:
            on_progress(prog)


def results(out: str | Path):
    """The sweep's table (polars DataFrame) from DIR/results.parquet, a store of an earlier
    version's with its columns under today's names (upgrade)."""
    import polars as pl

    return upgrade(pl.read_parquet(Path(out) / "results.parquet"))


def sweep(
    grid: str | Path | dict,
    out: str | Path = "sweep-out",
    *,
    workers: int | None = None,
    scheduler: Any = None,
    retry_failed: bool = False,
    reuse_other_versions: bool = False,
    reuse_other_grid: bool = False,
):
    """Run a grid (a TOML file, a built-in grid name or a dict) into the store at `out`
    and return the results table as a polars DataFrame. `scheduler`: a Dask scheduler
    address or a distributed.Client; else `workers` local processes (default: CPUs)."""
    g = load_grid(grid)
    runs = plan(g)
    execute(
        runs,
        Path(out),
        workers=workers or os.cpu_count() or 1,
        scheduler=scheduler,
        retry_failed=retry_failed,
        reuse_other_versions=reuse_other_versions,
        grid=g.describe(),
        reuse_other_grid=reuse_other_grid,
    )
    return results(out)


# ---------------------------------------------------------------------------------------
# The benchmark (`reclaimsim bench --sweep`)
# ---------------------------------------------------------------------------------------

BENCH_GRID = {
    "scenario": "default",
    "seeds": 2,
    "overrides": ["duration=10s"],
    "axes": {"machine.cpus": [32, 40], "kernel.swappiness": [60, 100]},
    "variant_sets": {"A": {"rotation_cost": False}, "B": {"rotation_cost": True}},
}


def bench_sweep(workdir: Path, dask: bool = True) -> dict:
    """Time a grid of 16 runs of about a second each: one local worker, two local
    workers, and (with distributed installed) a two-worker Dask LocalCluster. Returns the
    wall times, the parallel speedups and the sweep machinery's overhead per run (the
    one-worker sweep's wall time less the runs' own, over the runs)."""
    import shutil

    import polars as pl

    runs = plan(load_grid(BENCH_GRID))
    out: dict[str, Any] = {"runs": len(runs)}

    def timed(name: str, **kw) -> float:
        d = workdir / name
        shutil.rmtree(d, ignore_errors=True)
        t = time.perf_counter()
        execute(runs, d, **kw)
        wall = time.perf_counter() - t
        out[f"{name}_wall_s"] = wall
        out[f"{name}_run_wall_s"] = float(pl.read_parquet(d / "results.parquet")["wall_s"].sum())
        return wall

    t1 = timed("local1", workers=1)
    t2 = timed("local2", workers=2)
    out["local2_over_local1"] = t2 / t1
    out["overhead_per_run_s"] = (t1 - out["local1_run_wall_s"]) / len(runs)
    out["overhead_share_of_run"] = out["overhead_per_run_s"] / (out["local1_run_wall_s"] / len(runs))
    if dask:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            return out
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, Client(c) as cl:
            cl.submit(run_one, runs[0].scenario, pure=False).result()  # workers warmed up, as a pool is
            td = timed("dask2", scheduler=cl)
        out["dask2_over_local1"] = td / t1
    return out


def format_bench_sweep(b: dict) -> str:
    """bench_sweep's figures as one line."""
    return (
        f"sweep of {b['runs']} runs: 1 worker {b['local1_wall_s']:.1f} s (runs {b['local1_run_wall_s']:.1f} s), "
        f"2 workers {b['local2_wall_s']:.1f} s ({b['local2_over_local1']:.2f}x)"
        + (f", Dask 2 workers {b['dask2_wall_s']:.1f} s ({b['dask2_over_local1']:.2f}x)" if "dask2_wall_s" in b else "")
        + f"; overhead per run {b['overhead_per_run_s'] * 1e3:.0f} ms ({100 * b['overhead_share_of_run']:.1f}% of a run)"
    )
