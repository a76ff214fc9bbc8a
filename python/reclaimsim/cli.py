"""The `reclaimsim` command. Data goes to stdout; progress and errors to stderr.

Exit codes: 0 ok, 1 simulation error, 2 bad input (scenario, arguments, or an output path
that cannot be written), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM; 129 for
SIGHUP), each after the same cleanup. Every error is one line on stderr, never a
traceback.
"""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import stat
import sys
from pathlib import Path

import click

from . import _core
from ._core import ScenarioError, SimulationError
from .batch import Terminated, call_interruptibly, handle_termination
from .result import format_result
from .scenario import builtin_scenarios, load_scenario, run as run_scenario
from .term import one_line, printable


def _fail(msg: str, code: int = 2) -> None:
    click.echo(f"error: {one_line(msg)}", err=True)
    sys.exit(code)


class _Main(click.Group):
    """The command group, with reclaimsim's exit codes: a usage error, a bad scenario or
    a bad output path is 2, a simulation error 1, Ctrl-C 130, SIGTERM 143 (SIGHUP 129);
    each one line on stderr."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        from . import exit_130_while_starting

        if (sys.argv[1:] if args is None else list(args)) == []:
            args = ["--help"]  # bare `reclaimsim`: the usual help, exit 0
        try:
            # Start-up is over (the package's __init__): Ctrl-C unwinds from here on.
            if signal.getsignal(signal.SIGINT) is exit_130_while_starting:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            handle_termination()
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            cmd = e.ctx.command_path if e.ctx else "reclaimsim"
            _fail(f"{one_line(e.format_message())} (see `{cmd} --help`)", e.exit_code)
        except click.ClickException as e:
            _fail(e.format_message(), e.exit_code)
        except ScenarioError as e:
            _fail(str(e), 2)
        except SimulationError as e:
            _fail(str(e), 1)
        except OSError as e:
            # What the system refused late (a full disk, a directory gone): one line.
            where = f"{e.filename}: " if e.filename else ""
            _fail(f"{where}{e.strerror or e}", 1)
        except ValueError as e:
            if "null byte" not in str(e):
                raise
            _fail(f"a path or argument holds a NUL byte, which no file name can: {e}", 2)
        except (KeyboardInterrupt, click.Abort) as e:
            # click turns a KeyboardInterrupt (Terminated is one) into Abort.
            cause = e if isinstance(e, Terminated) else e.__context__
            sys.exit(128 + cause.signum if isinstance(cause, Terminated) else 130)
        sys.exit(rv if isinstance(rv, int) else 0)


def _writable(ctx, param, value):
    """Option callback: refuse, before anything runs, an output path that cannot be written.
    A path that is stdout itself (/dev/stdout, or the file stdout goes to) is taken as '-',
    which prints that output alone; a second output to stdout is refused."""
    if value is None:
        return value
    if value == "":
        raise click.BadParameter("'': the path is empty; give a file name", ctx, param)
    if value != "-":
        problem = output_problem(value)
        if problem:
            raise click.BadParameter(f"{value}: {problem}", ctx, param)
    if value == "-" or (_is_stdout(value) and not _discards(value)):
        first = ctx.meta.setdefault("reclaimsim.stdout_output", _param_label(param))
        if first != _param_label(param):
            raise click.BadParameter(f"{value}: {first} writes to stdout already; one output at most goes to stdout", ctx, param)
        _release_fifo(value)
        return "-"
    return value


def _file_output(pipes: bool):
    """Option callback for an output that is a file the command opens itself by name
    (trace-gen's trace, calibrate's profile, kernel-build's image): as `_writable`, and
    '-' is refused rather than taken for a file named '-', as is the file stdout goes to
    (stdout is not one of these outputs, and the command prints there too). With
    `pipes` False a FIFO is refused too (the command reads the file back or copies onto
    it, which a FIFO cannot take)."""

    def check(ctx, param, value):
        if value == "-":
            raise click.BadParameter("'-': this output is a file, not stdout; give a file name", ctx, param)
        if value and _is_stdout(value) and not _discards(value):
            raise click.BadParameter(f"{value}: stdout goes there, and this output is a file of its own; give another file name", ctx, param)
        if not pipes and value and _is_fifo(value):
            raise click.BadParameter(f"{value}: a FIFO; this output is read back or copied onto, so give a regular file", ctx, param)
        return _writable(ctx, param, value)

    return check


def _is_stdout(path: str) -> bool:
    """Whether `path` is the file stdout writes to (/dev/stdout, /proc/self/fd/1, or that
    file by its name)."""
    key = _stdout_key()
    return key != ("stdout",) and _file_key(path) == key


def _is_fifo(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _nonempty_path(ctx, param, value):
    """Option callback: refuse an empty path (it would mean the current directory)."""
    if value is not None and value.strip() == "":
        raise click.BadParameter(f"{value!r}: the path is empty; give a directory", ctx, param)
    return value


def output_problem(path: str) -> str | None:
    """Why `path` cannot be written as an output file, or None when it can (as far as can
    be told before writing: a filesystem can still fill up meanwhile)."""
    try:
        return _output_problem(path)
    except OSError as e:  # a directory on the way this user may not search, say
        return e.strerror.lower() if e.strerror else str(e)


def _output_problem(path: str) -> str | None:
    p = Path(path)
    parent = p.parent
    if p.is_dir():
        return "is a directory"
    if not parent.exists():
        return f"directory {str(parent)!r} does not exist"
    if not parent.is_dir():
        return f"{str(parent)!r} is not a directory"
    if p.exists() and not p.is_file():
        # A device or a pipe (/dev/stdout, /dev/null): written as it comes. A character
        # device takes an empty write first: /dev/full refuses it (ENOSPC). A pipe is
        # opened without waiting: one without a reader is refused (writing would wait
        # for one forever), one with a reader stays open until the output is written.
        mode = p.stat().st_mode
        if stat.S_ISFIFO(mode):
            return _hold_fifo(path)
        if not stat.S_ISCHR(mode):
            return None
        try:
            fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"")
            finally:
                os.close(fd)
        except OSError as e:
            return f"cannot write: {e.strerror.lower() if e.strerror else e}"
        return None
    existed = os.path.lexists(p)  # a dangling symbolic link is the user's: left as it is
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    except OSError as e:
        return e.strerror.lower() if e.strerror else str(e)
    try:
        # An empty write: a file that opens but takes no write (/proc/version as root)
        # fails it; a regular file is left as it was.
        os.write(fd, b"")
        st = os.fstatvfs(fd)
    except OSError as e:
        return f"cannot write: {e.strerror.lower() if e.strerror else e}"
    finally:
        os.close(fd)
        if not existed:
            os.unlink(p)
    if st.f_blocks and (st.f_bfree if os.geteuid() == 0 else st.f_bavail) == 0:
        return "its filesystem is full"
    return None


# FIFOs named as outputs, opened (write end, O_NONBLOCK) when their reader was found
# there: path -> descriptor. Held until the output is written, so that the reader sees no
# end of file before it, and a command that opens the path itself (trace-gen) finds the
# reader still there rather than waiting for one.
_held_fifos: dict[str, int] = {}

_NO_READER = "a FIFO with no reader (writing would wait for one forever); start its reader first"


def _open_fifo(path: str) -> int:
    """The write end of FIFO `path`, opened without waiting for a reader (ENXIO when there
    is none); the descriptor is left non-blocking."""
    return os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)


def _hold_fifo(path: str) -> str | None:
    if path in _held_fifos:
        return None
    try:
        _held_fifos[path] = _open_fifo(path)
    except OSError as e:
        if e.errno == errno.ENXIO:
            return _NO_READER
        return e.strerror.lower() if e.strerror else str(e)
    return None


def _release_fifo(path: str) -> None:
    fd = _held_fifos.pop(path, None)
    if fd is not None:
        os.close(fd)


def write_output(path: str, text: str, option: str = "--json") -> None:
    """Write an output file; a late failure (a full filesystem) is one line, exit 2, and
    leaves no truncated file behind. A FIFO is written through the descriptor `_writable`
    opened (or one opened now, refused when no reader is there): never a wait for a
    reader that may not come."""
    if path == "-":
        click.echo(text)
        return
    try:
        fd = _held_fifos.pop(path, None)
        if fd is None and _is_fifo(path):
            try:
                fd = _open_fifo(path)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    _fail(f"{option} {path}: {_NO_READER}", 2)
                raise
        if fd is not None:
            os.set_blocking(fd, True)  # the reader is there: a full pipe waits for it (Ctrl-C still stops it)
            f = os.fdopen(fd, "w")
        else:
            f = open(path, "w")
        with f:
            f.write(text)
    except OSError as e:
        if Path(path).is_file():
            Path(path).unlink(missing_ok=True)
        _fail(f"{option} {path}: cannot write: {e.strerror or e}", 2)


def _file_key(path: str) -> tuple:
    """What tells the file `path` names from others: its device and inode when it exists
    (a link or a second name leads to the same), else its absolute path with links
    resolved."""
    ino = _inode(path)
    return ("file", *ino) if ino else ("path", os.path.realpath(path))


def _stdout_key() -> tuple:
    try:
        st = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return ("stdout",)
    return ("file", st.st_dev, st.st_ino)


def _discards(path: str) -> bool:
    """Whether `path` is /dev/null, which any number of outputs may share."""
    try:
        st, null = os.stat(path), os.stat(os.devnull)
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def _param_label(p: click.Parameter) -> str:
    if isinstance(p, click.Option):
        return next((o for o in p.opts if o.startswith("--")), p.opts[0])
    return p.human_readable_name


def _distinct_outputs(outputs, inputs=()) -> None:
    """Refuse, before anything runs, an output that is one of the command's inputs (the
    scenario file, a trace, a report input: writing it would destroy it), and two outputs
    to one file (the second would overwrite the first; stdout twice `_writable` refuses).
    `outputs`: (parameter name, path or None) in the command's order; `inputs`: (what it
    is, path or None), an input only where it exists."""
    ctx = click.get_current_context()
    params = {p.name: p for p in ctx.command.params}
    ins = [(what, path, _file_key(path)) for what, path in inputs if path and _inode(path)]
    seen: list[tuple[str, tuple]] = []
    for name, path in outputs:
        if not path or path == "-":
            continue
        param = params[name]
        key = _file_key(path)
        for what, inp, ikey in ins:
            if key == ikey:
                raise click.BadParameter(
                    f"{path}: the same file as {what} {inp}, which writing would destroy; give another path", ctx, param,
                )
        for other, okey in seen:
            if key == okey and not _discards(path):
                raise click.BadParameter(f"{path}: the same file as {other}'s; give each output its own file", ctx, param)
        seen.append((_param_label(param), key))


def _inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _trace_inputs(scenario: str, sets: tuple = ()) -> list[tuple[str, str]]:
    """The trace files a scenario's trace workloads read, as inputs no output may be
    (`run s.toml --json TRACE` would destroy the trace). A scenario that does not load is
    none here: the command refuses it with its own message."""
    try:
        data = load_scenario(scenario, sets)
    except ScenarioError:
        return []
    ws = data.get("workload") if isinstance(data.get("workload"), list) else []
    return [(f"workload[{i}]'s trace", w["path"]) for i, w in enumerate(ws)
            if isinstance(w, dict) and w.get("type") == "trace" and isinstance(w.get("path"), str)]


def _costs_file(costs_sets: tuple) -> str | None:
    """The file --costs named (its callback made it a costs_profile override)."""
    return json.loads(costs_sets[0].split("=", 1)[1]) if costs_sets else None


PAGE_SIZE = 4096


def _max_memory(ctx, param, value):
    """Option callback: --max-memory as bytes, or a number with a binary suffix K, M, G
    or T (None: the core takes the memory this process may take: MemAvailable, its memory cgroup's headroom, ulimit -v)."""
    if value is None:
        return None
    v = value.strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(v[-1:], 1)
    try:
        n = float(v[:-1] if mult > 1 else v) * mult
    except ValueError:
        n = -1.0
    if not (PAGE_SIZE <= n < 2**64):
        raise click.BadParameter(
            f"{value!r}: allowed a size of at least {PAGE_SIZE} bytes (one page) and below 16 EiB, "
            "in bytes or with K, M, G or T (e.g. 8G)",
            ctx, param,
        )
    return int(n)


_max_memory_option = click.option(
    "--max-memory",
    "max_memory",
    metavar="SIZE",
    callback=_max_memory,
    help="Refuse a run whose estimated memory is above this (e.g. 8G; at least 4K, one page; default: the memory this process may take: MemAvailable, its memory cgroup's headroom, ulimit -v).",
)


def _costs_path(ctx, param, value):
    """Option callback: --costs FILE as the `costs_profile=...` override it stands for."""
    if value is None:
        return ()
    p = Path(value)
    if value == "":
        raise click.BadParameter("'': the path is empty; expected a cost profile (TOML, e.g. from `reclaimsim calibrate`)", ctx, param)
    if not p.is_file():
        what = "is a directory" if p.is_dir() else "not a regular file" if p.exists() else "no such file"
        raise click.BadParameter(f"{value}: {what}; expected a cost profile (TOML, e.g. from `reclaimsim calibrate`)", ctx, param)
    return (f"costs_profile={json.dumps(str(p.resolve()))}",)


_costs_option = click.option(
    "--costs",
    "costs_sets",
    metavar="FILE",
    callback=_costs_path,
    help="A cost profile (e.g. written by `reclaimsim calibrate`): the scenario's costs_profile. Precedence: defaults < machine.profile < this < [costs].",
)


def _progress_cb(disabled: bool):
    if disabled or not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    console = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")))
    prog = Progress(
        TextColumn("simulating"),
        BarColumn(),
        TextColumn("{task.fields[v]}"),
        console=console,
        transient=True,
    )
    task = prog.add_task("sim", total=1.0, v="")
    prog.start()

    def cb(now: int, end: int) -> None:
        prog.update(task, completed=now / max(end, 1), v=f"{now / 1e9:.2f} / {end / 1e9:.2f} s virtual")

    return cb, prog


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_core.__version__, prog_name="reclaimsim")
def main() -> None:
    """reclaimsim: a deterministic simulator of Linux page reclaim."""


# Seeds are u64 in the core.
SEED = click.IntRange(0, 2**64 - 1)


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses NaN (which passes every range comparison) and
    the infinities (1e309 included): every float option here means a finite number."""

    def convert(self, value, param, ctx):
        # Finite first, so that inf gets this message and not the range's.
        rv = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(rv):
            bounds = []
            if self.min is not None:
                bounds.append(f"{'>' if self.min_open else '>='} {self.min:g}")
            if self.max is not None:
                bounds.append(f"{'<' if self.max_open else '<='} {self.max:g}")
            self.fail(f"{value}: allowed a finite number {' and '.join(bounds)}".rstrip(), param, ctx)
        return super().convert(rv, param, ctx)


def _observe_set(ctx, param, value):
    return () if value is None else (f"observe={value}",)


_observe_option = click.option(
    "--observe", type=click.Choice(["none", "perf-lock", "perf-lock-bpf"]), callback=_observe_set,
    help="Who watches lock contention (default: the scenario's observe, else none): perf-lock is "
    "`perf lock record -a`, perf-lock-bpf `perf lock contention -b -a`; each traced event costs the "
    "kernel what the cost table says, and the result shows what the observer reads beside the truth.",
)


def _json_option(what: str):
    return click.option(
        "--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), callback=_writable,
        help=f"Write {what} as JSON here ('-' = stdout); checked writable before anything runs.",
    )


@main.command()
@click.argument("scenario", default="default")
@click.option("--seed", type=SEED, help="Override the scenario's seed.")
@_json_option("the result")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field, e.g. machine.cpus=64 or cgroup[1].memory.max=1G.")
@click.option("--all", "show_all", is_flag=True, help="Also print the zero /proc/vmstat events, memory.stat items and observed lock rows (nr_* items, memory.events and every lock row always print), and each thread of workloads with more than 16.")
@click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")
@click.option("--full-scale", is_flag=True, help="Run a scaled-down seed experiment at the seed's size.")
@_observe_option
@_costs_option
@_max_memory_option
def run(scenario, seed, json_path, sets, show_all, no_progress, full_scale, observe, costs_sets, max_memory):
    """Run SCENARIO (a TOML file, a JSON file as `validate` prints, or a built-in name; default: `default`)."""
    _distinct_outputs(
        [("json_path", json_path)],
        [("the scenario", scenario), ("--costs", _costs_file(costs_sets)), *_trace_inputs(scenario, sets)],
    )
    cb, prog = _progress_cb(no_progress)
    try:
        r = run_scenario(
            scenario, seed=seed, overrides=sets + observe + costs_sets, progress=cb, full_scale=full_scale,
            max_memory=max_memory,
        )
    finally:
        if prog:
            prog.stop()
    if json_path:
        write_output(json_path, r.to_json())
        if json_path == "-":
            return
    click.echo(format_result(r, show_all))


@main.command(name="compare")
@click.argument("scenario")
@click.option("--a", "a", metavar="SWITCHES", help="Variant switches of side A, e.g. rotation_cost=false (default: the scenario's [compare].a).")
@click.option("--b", "b", metavar="SWITCHES", help="Variant switches of side B (default: the scenario's [compare].b).")
@click.option("--seeds", type=click.IntRange(1, 1000), help="Seeds per side (default: the scenario's, else 3).")
@click.option("--metric", "metrics", multiple=True, help="A metric to compare (repeatable); default: the scenario's [compare].metrics, else the built-in list (pgscan_*, pgsteal_*, workingset_refault_*, pswpin/out, allocstall_normal, kswapd_cpu_ns, lock wait and acquisitions).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field.")
@click.option("--jobs", type=click.IntRange(1, 256), help="Parallel runs (default: CPUs).")
@click.option("--full-scale", is_flag=True, help="Run a scaled-down seed experiment at the seed's size.")
@_observe_option
@_costs_option
@_json_option("the comparison")
@click.option("--html", "html_path", metavar="FILE", callback=_writable, help="Also write the comparison's plots as an HTML page (as `report` does).")
def compare_cmd(scenario, a, b, seeds, metrics, sets, jobs, full_scale, observe, costs_sets, json_path, html_path):
    """Run SCENARIO under variant sets A and B over several seeds and compare.

    Metrics (the names a sweep's columns have too, docs/results.md): /proc/vmstat names,
    end_ns, KEY@/cgroup (memory.stat), FIELD@workload (a workload's numeric fields,
    per_process_ops@W as will-it-scale reports it, a trace workload's trace.FIELD@W, for
    short miss_ratio@W), kswapd_cpu_ns, reclaim_cpu_ns, direct_reclaim_ns, direct_reclaims,
    direct_reclaim_latency_ns, lock_wait_total_ns, lock_acquisitions,
    lru_lock_wait_total_ns, lru_lock_hold_total_ns, lock_wait_ns@CALLER,
    lock_hold_ns@CALLER, lock_acquisitions@CALLER (all locks at CALLER; one lock's:
    lru_lock_wait_ns@CALLER, cost_lock_acquisitions@CALLER, ...), the tracepoint counters
    (mm_lru_insertion, mm_lru_insertion_dead, lru_add_dead_filtered), lru_add_dead_share,
    proactive_accuracy, proactive_latency_ns, proactive_ns_per_page; across cgroups
    cv:KEY@/glob* (stddev over mean, %) and sum:KEY@/glob*; add /s or /min for rates per
    virtual second or minute; perf.NAME of a lock value is what the observer reads
    (perf.lock_wait_ns@CALLER, perf.lru_lock_wait_total_ns). An observed comparison
    (--observe, or the scenario's observe) also runs the pair unobserved and prints it.

    A and B (--a/--b, or the scenario's [compare] a and b) are switches
    (rotation_cost=false) or scenario fields by their --set path (kernel.lru=mglru).
    """
    _distinct_outputs(
        [("json_path", json_path), ("html_path", html_path)],
        [("the scenario", scenario), ("--costs", _costs_file(costs_sets)), *_trace_inputs(scenario, sets)],
    )
    from .compare import compare, format_compare

    c = compare(
        scenario, a=a, b=b, seeds=seeds, overrides=sets + observe + costs_sets, metrics=list(metrics) or None, jobs=jobs,
        full_scale=full_scale,
    )
    if json_path:
        write_output(json_path, json.dumps(c, indent=2))
    if html_path:
        from .report import compare_figures, page

        write_output(html_path, page([(f"compare {c['scenario']}", compare_figures(c))]), "--html")
    if json_path == "-":
        return
    click.echo(format_compare(c))


@main.command(name="sweep")
@click.argument("grid")
@click.option("--out", "out", type=click.Path(file_okay=False), callback=_nonempty_path, help="The store's directory (default: sweep-GRIDNAME).")
@click.option("--workers", type=click.IntRange(1, 1024), help="Local worker processes (default: CPUs).")
@click.option("--scheduler", metavar="ADDRESS", help="Run on a Dask distributed cluster, e.g. tcp://HOST:8786 (the workers need reclaimsim installed).")
@click.option("--dry-run", is_flag=True, help="Print the run count and an estimated time; run nothing.")
@click.option("--retry-failed", is_flag=True, help="Run again the runs stored with an error.")
@click.option("--reuse-other-versions", is_flag=True, help="Reuse runs stored by another reclaimsim version.")
@click.option("--reuse-other-grid", is_flag=True, help="Resume a store that another grid made: reuse the runs this grid also has, relabelled with this grid's axis values (without it, such a store is refused).")
@click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")
@click.option("--html", "html_path", metavar="FILE", callback=_writable, help="Also write the sweep's plots as an HTML page (as `report OUT` does).")
def sweep_cmd(grid, out, workers, scheduler, dry_run, retry_failed, reuse_other_versions, reuse_other_grid, no_progress, html_path):
    """Run a grid of scenarios into a resumable Parquet store (docs/sweeps.md).

    GRID is a TOML file or a built-in grid (`reclaimsim grids`): a scenario, seeds, axes
    (scenario fields by their --set path, each a list of values) and variant sets (default:
    the scenario's [compare] a and b). Runs already stored are not run again; a sweep
    stopped by Ctrl-C or a kill resumes where it was. The table is OUT/results.parquet.
    """
    _distinct_outputs([("html_path", html_path)], [("the grid", grid)])
    from .sweep import estimate, execute, load_grid, plan, results

    g = load_grid(grid)
    runs = plan(g)
    outdir = Path(out or f"sweep-{g.name}")
    nworkers = workers or os.cpu_count() or 1
    if dry_run:
        click.echo(estimate(runs, nworkers, scheduler))
        return
    cb, prog = _sweep_progress(len(runs), no_progress)
    try:
        p = execute(
            runs, outdir, workers=nworkers, scheduler=scheduler, retry_failed=retry_failed,
            reuse_other_versions=reuse_other_versions, on_progress=cb, grid=g.describe(),
            reuse_other_grid=reuse_other_grid,
        )
    except KeyboardInterrupt:
        if prog:
            prog.stop()
        click.echo(f"sweep: interrupted; finished runs are stored in {outdir}; run again to resume", err=True)
        raise
    finally:
        if prog:
            prog.stop()
    if p.redone:
        click.echo(f"sweep: {len(p.redone)} stored run file(s) were damaged and the runs done again: {', '.join(p.redone[:5])}", err=True)
    df = results(outdir)
    click.echo(
        f"sweep {g.name}: {p.total} runs ({p.reused} stored before, {p.total - p.reused} run now, "
        f"{p.failed} failed); table {outdir / 'results.parquet'} ({df.height} rows, {df.width} columns)"
    )
    if html_path:
        from .report import build_html

        write_output(html_path, build_html([str(outdir)]), "--html")
        click.echo(f"report: {html_path}")


def _sweep_progress(total: int, disabled: bool):
    if disabled or not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")))
    prog = Progress(
        TextColumn("sweep"), BarColumn(), TextColumn("{task.completed}/{task.total} done"),
        TextColumn("{task.fields[running]} running, {task.fields[failed]} failed"), TimeRemainingColumn(),
        console=console, transient=True,
    )
    task = prog.add_task("sweep", total=total, running=0, failed=0)
    prog.start()

    def cb(p) -> None:
        prog.update(task, completed=p.done, running=p.running, failed=p.failed)

    return cb, prog


@main.command(name="report")
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--output", "output", metavar="FILE", required=True, callback=_writable, help="The HTML file to write.")
def report_cmd(inputs, output):
    """Write one self-contained HTML page of plots from INPUTS: run JSON files (`run
    --json`), compare JSON files (`compare --json`) and sweep directories.

    Runs: LRU list sizes and scan/steal/refault rates per cgroup over virtual time, the lock
    table per call site, per-memcg pgsteal and refaults. Compares: each metric A vs B with
    its spread over seeds, the lock table A vs B. Sweeps: each metric against each axis
    (mean and std over seeds, a line per variant set), and heat maps over two axes.
    """
    _distinct_outputs([("output", output)], [("the input", i) for i in inputs])
    from .report import build_html

    write_output(output, build_html(list(inputs)), "--output")
    if output != "-":  # on stdout the page goes alone
        click.echo(f"report: {output}")


@main.command()
def grids():
    """List the built-in sweep grids."""
    from .sweep import builtin_grids

    for name, desc in builtin_grids():
        click.echo(f"{name:<16} {desc}")


@main.command()
@click.argument("version", required=False)
def versions(version):
    """List the kernel versions the model can be (kernel.version) and their rules; with
    VERSION, that version's rules and their commits."""
    from .versions import format_versions

    try:
        click.echo(format_versions(version))
    except ValueError as e:
        _fail(str(e))


@main.command(name="kernel-run")
@click.argument("scenario")
@click.option("--seed", type=SEED, help="Override the scenario's seed.")
@click.option("--reps", type=click.IntRange(1, 100), default=3, show_default=True, help="Runs on the kernel (mean and CV over them).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field.")
@_json_option("the side-by-side report")
@click.option("--workdir", type=click.Path(file_okay=False), help="An existing directory (a disk filesystem, not tmpfs; default /var/tmp) in which the run makes a private directory for the file_read workloads' files; nothing else in it is touched. Host runs only.")
@click.option("--swapfile", type=click.Path(dir_okay=False), help="Swap to this new file (created, then removed) when the scenario has swap and the host has none: needed for machine.swap.device = \"ssd\", else used when zram is missing. An existing file is refused unless it is an active swap or one kernel-run made. Host runs only.")
@click.option("--vm", is_flag=True, help="Boot a kernel under QEMU and run there (cgroup v2, the scenario's LRU, memory.reclaim schedules); nothing on the host changes.")
@click.option("--kernel", "kernel_image", type=click.Path(dir_okay=False), help="With --vm: the kernel to boot: debian-6.1, debian-6.12 (the default) or debian-7.3 (Debian's cloud kernels, pinned and fetched into the cache), or a bzImage file.")
@click.option("--kernel-version", metavar="VERSION", help="The modeled kernel version (6.1, 6.12, 6.18, 7.3) the model runs as beside the kernel; default: the one its release string names, or the nearest lower (docs/versions.md). For a custom kernel whose release string does not say.")
@click.option("--accel", type=click.Choice(["auto", "kvm", "tcg"]), default="auto", show_default=True, help="With --vm: QEMU's accelerator; auto probes KVM once and caches the answer.")
@click.option("--timeout", type=FiniteFloatRange(10, 86400), default=1800, show_default=True, help="With --vm: stop a guest that has not finished after this many seconds.")
@click.option("--reclaim-timing", type=click.Choice(["progress", "wall"]), default="progress", show_default=True, help="With --vm: make each memory.reclaim write when the workloads reach the accesses the simulator had done by its due time (progress), or at its wall-clock due time (wall).")
@click.option("--model-costs", type=click.Choice(["guest", "table"]), default="guest", show_default=True, help="With --vm: the model's costs: the guest's own (guest: timed by one boot of the kernel without reps, as `reclaimsim calibrate` times a host, and cached), or the scenario's cost table (table). A TCG guest runs several times slower than hardware while its clock keeps the host's pace.")
@click.option("--all", "show_all", is_flag=True, help="Print counters that are zero on both sides too.")
@click.option("--pin", is_flag=True, help="Pin each workload thread to the CPU the simulator gives it (sched_setaffinity; each worker process is forked on its CPUs), as the model has no scheduler. Host runs only.")
@click.option("--perf-lock", is_flag=True, help="Record `perf lock contention` during the reps (linux-perf, root) and print it per caller beside the model's lock table; adds tracepoint overhead to the kernel's time rows. Host runs only.")
@click.option("--trace-hist", "trace_hist", multiple=True, metavar="SUBSYS:EVENT:KEYS[:VALS][ if FILTER]", help="With --vm: count the kernel event's hits per key over each rep with a hist trigger (e.g. workqueue:workqueue_execute_start:function.sym), and sum the fields VALS; rows hist:EVENT{KEY=VALUE}[.FIELD], kernel side only.")
@click.option("--kprobe", "kprobes", multiple=True, metavar="'NAME SYMBOL [ARGS]'", help="With --vm: define the kprobe event kprobes:NAME on SYMBOL (tracing/kprobe_events syntax, e.g. 'prio vmpressure_prio prio=%dx:s32') for --trace-hist.")
@_costs_option
def kernel_run_cmd(scenario, seed, reps, sets, json_path, workdir, swapfile, vm, kernel_image, kernel_version, accel, timeout, reclaim_timing, model_costs, show_all, pin, perf_lock, trace_hist, kprobes, costs_sets):
    """Run SCENARIO's workloads on a real kernel, in real memory cgroups, and print the
    kernel's counters beside the simulator's for the same scenario and seed.

    Without --vm, on this machine's kernel: needs root and a memory cgroup controller (v2,
    else v1); the cgroups, swap and files it creates are removed afterwards, also after an
    error or Ctrl-C. With --vm, in a QEMU guest (TCG runs the workloads 2-7x slower than
    the host; the model then runs with the guest's own costs, timed by one boot of the
    kernel: --model-costs): cgroup v2 with per-cgroup rows, the scenario's LRU, its
    memory.reclaim schedule. Workloads must end by themselves (usemem repeat, file_read passes or
    accesses).

    Beside the counters, each workload's time rows: elapsed_ms, accesses_per_s and
    faults_per_s, wall time on the kernel and virtual time in the model (whose costs
    --costs FILE, e.g. from `reclaimsim calibrate`, sets; with --vm the guest's own
    replace it unless --model-costs table).
    """
    _distinct_outputs(
        [("json_path", json_path)],
        [("the scenario", scenario), ("--costs", _costs_file(costs_sets)), ("--kernel", kernel_image)],
    )
    from .kernelrun import kernel_run
    from .sidebyside import KernelRunError, format_report

    def say(msg: str) -> None:
        click.echo(f"kernel-run: {msg}", err=True)

    if not vm:
        given = click.get_current_context().get_parameter_source("timeout") != click.core.ParameterSource.DEFAULT
        for name, value in (
            ("--kernel", kernel_image),
            ("--timeout", timeout if given else None),
            ("--accel", None if accel == "auto" else accel),
            ("--reclaim-timing", None if reclaim_timing == "progress" else reclaim_timing),
            ("--model-costs", None if model_costs == "guest" else model_costs),
            ("--trace-hist", trace_hist[0] if trace_hist else None),
            ("--kprobe", kprobes[0] if kprobes else None),
        ):
            if value is not None:
                _fail(f"{name} {value}: only with --vm (this machine's kernel runs without it)")
    elif workdir or swapfile or perf_lock or pin:
        flag = "--workdir" if workdir else "--swapfile" if swapfile else "--perf-lock" if perf_lock else "--pin"
        _fail(f"{flag}: not with --vm (the guest has its own disk, zram and no perf, and places its tasks itself)")
    if kernel_version is not None:
        from .versions import names

        if kernel_version not in names():
            _fail(f"--kernel-version {printable(kernel_version)!r}: allowed {', '.join(names())}")
    try:
        data = load_scenario(scenario, sets + costs_sets)
        if seed is not None:
            data["seed"] = seed
        if vm:
            from .vm import kernel_run_vm

            rep = kernel_run_vm(
                data, reps, kernel_image, accel, timeout, say, reclaim_timing, kernel_version, model_costs, trace_hist, kprobes,
            )
        else:
            rep = kernel_run(data, reps, workdir, swapfile, say, perf_lock, pin, kernel_version)
    except KernelRunError as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"kernel-run: {e}", 1)
    _report(rep, json_path, lambda: format_report(rep, show_all))
    if rep.get("cut_short"):
        _fail(f"kernel-run: {rep['cut_short']}; the rows are not comparable", 1)


def _report(rep: dict, json_path: str | None, text) -> None:
    """Write the report as JSON to --json's path (stdout for -, then nothing else), and
    print its text form `text()` unless it went to stdout."""
    if json_path:
        write_output(json_path, json.dumps(rep, indent=2))
        if json_path == "-":
            return
    click.echo(text())


@main.command(name="kernel-compare")
@click.argument("scenario")
@click.option("--kernel-a", required=True, metavar="IMAGE", help="Kernel A: a bzImage (e.g. kernel-build without the patch), or debian-6.1, debian-6.12 (also 'debian') or debian-7.3.")
@click.option("--kernel-b", required=True, metavar="IMAGE", help="Kernel B: a bzImage (e.g. kernel-build with the patch), or a Debian kernel as for --kernel-a.")
@click.option("--reps", type=click.IntRange(2, 100), default=3, show_default=True, help="Boots per kernel, interleaved A, B, A, B...")
@click.option("--a", "a", metavar="SWITCHES", help="The model's side A (default: the scenario's [compare] a), e.g. rotation_cost=true.")
@click.option("--b", "b", metavar="SWITCHES", help="The model's side B (default: the scenario's [compare] b), matching what kernel B changes.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field.")
@click.option("--accel", type=click.Choice(["auto", "kvm", "tcg"]), default="auto", show_default=True, help="QEMU's accelerator; auto probes KVM once and caches the answer.")
@click.option("--timeout", type=FiniteFloatRange(10, 86400), default=1800, show_default=True, help="Stop a guest that has not finished after this many seconds.")
@click.option("--model-costs", type=click.Choice(["guest", "table"]), default="guest", show_default=True, help="Each model side's costs: its kernel's guest's own (guest: timed by one boot of that kernel without reps, cached), or the scenario's cost table (table).")
@_json_option("both A/Bs")
def kernel_compare_cmd(scenario, kernel_a, kernel_b, reps, a, b, sets, accel, timeout, model_costs, json_path):
    """Boot two kernels under QEMU, run SCENARIO on each (kernel-run --vm), and print the
    real A/B beside the simulator's A/B of the scenario's [compare] switch sets: per
    counter, each side's mean and std, %change and Welch's mark, and whether the model's
    change goes the kernels' way."""
    _distinct_outputs(
        [("json_path", json_path)], [("the scenario", scenario), ("--kernel-a", kernel_a), ("--kernel-b", kernel_b)],
    )
    from .kernelcompare import format_kernel_compare, kernel_compare
    from .sidebyside import KernelRunError

    def say(msg: str) -> None:
        click.echo(f"kernel-compare: {msg}", err=True)

    try:
        data = load_scenario(scenario, sets)
        rep = kernel_compare(data, kernel_a, kernel_b, reps, accel, timeout, a, b, say, model_costs)
    except KernelRunError as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"kernel-compare: {e}", 1)
    _report(rep, json_path, lambda: format_kernel_compare(rep))


@main.command(name="kernel-build")
@click.argument("source")
@click.option("--patch", "patches", multiple=True, metavar="FILE", help="A patch to apply (patch -p1), in order (repeatable).")
@click.option("--config-fragment", "fragments", multiple=True, metavar="FILE", help="Kconfig lines (CONFIG_X=y) merged after the built-in ones (repeatable).")
@click.option("-o", "--output", "out", required=True, metavar="IMAGE", callback=_file_output(pipes=False), help="Where the bzImage goes (a file); its .config goes to IMAGE.config.")
@click.option("--jobs", type=click.IntRange(1, 1024), default=os.cpu_count() or 1, show_default=True, help="Parallel make jobs.")
def kernel_build_cmd(source, patches, fragments, out, jobs):
    """Build an x86-64 bzImage of the kernel in SOURCE, optionally patched, for booting
    under QEMU.

    SOURCE is a kernel source tree, or `debian` (`debian:VERSION`, VERSION 6.1, 6.12 or
    7.3, default 6.12): Debian's linux-source package of the same release as that
    version's pinned kernel (kernel-run --vm --kernel debian-VERSION), downloaded and
    unpacked once into the cache ($RECLAIMSIM_CACHE, else $XDG_CACHE_HOME/reclaimsim, else
    ~/.cache/reclaimsim).
    SOURCE itself is never written: the build works on a copy (hard links) with the
    patches applied.

    The configuration is tinyconfig plus what the VM runner needs, all built in (serial
    console, initramfs, virtio disk, ext4, zram swap, memory cgroups, MGLRU, THP), then
    each --config-fragment; an option Kconfig drops is an error. The image is cached by
    source, patches and fragments: the same build again only copies it, and a build with
    other patches on the same source and fragments recompiles only what they change.

    Exit codes: 2 for a source, patch or fragment that cannot be used or a missing build
    tool; 1 when the download or the compile fails (the log's path is in the message).
    """
    _distinct_outputs(
        [("out", out), ("out", f"{out}.config")],
        [*(("--patch", p) for p in patches), *(("--config-fragment", f) for f in fragments)],
    )
    from .kernelbuild import KernelBuildError, build, check_inputs, source_from_arg

    def say(msg: str) -> None:
        click.echo(f"kernel-build: {msg}", err=True)

    try:
        check_inputs(patches, fragments)
        src = source_from_arg(source, say)
        build(src, [Path(p) for p in patches], [Path(f) for f in fragments], Path(out), jobs, say)
    except KernelBuildError as e:
        _fail(str(e), e.code)
    except OSError as e:
        _fail(f"kernel-build: {e}", 1)
    click.echo(out)


@main.command(name="trace-gen")
@click.argument("out", type=click.Path(dir_okay=False), callback=_file_output(pipes=True))
@click.option("--objects", type=click.IntRange(1, 2**32 - 1), default=1_000_000, show_default=True, help="Distinct 4 KiB objects.")
@click.option("--requests", type=click.IntRange(1, 2**64 - 1), default=20_000_000, show_default=True)
@click.option("--zipf", "theta", type=FiniteFloatRange(0, min_open=True), default=0.9, show_default=True, help="Zipf exponent.")
@click.option("--seed", type=SEED, default=1, show_default=True)
def trace_gen(out, objects, requests, theta, seed):
    """Write a zipf trace in libCacheSim's oracleGeneral format to the file OUT (zstd if
    OUT ends in .zst), or to a FIFO that has its reader; not to stdout ('-' is refused)."""
    existed = Path(out).exists()
    try:
        n = call_interruptibly(_core.trace_gen, out, objects, requests, theta, seed)
    except BaseException:
        # No partial trace is left behind (a reader would take it for a short one).
        if not existed and Path(out).is_file():
            Path(out).unlink(missing_ok=True)
        raise
    finally:
        _release_fifo(out)  # the trace is written: the reader may see its end now
    size = f"{n} bytes before zstd compression" if out.endswith(".zst") else f"{n} bytes"
    click.echo(f"{out}: {requests} requests over {objects} objects, zipf {theta} ({size})")


@main.command()
def scenarios():
    """List the built-in scenarios."""
    for name, desc in builtin_scenarios():
        click.echo(f"{name:<16} {desc}")


@main.command()
@click.argument("scenario", required=False)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field (e.g. machine.profile=NAME).")
@_costs_option
@_json_option("the table")
def costs(scenario, sets, costs_sets, json_path):
    """Print the cost table: each entry's value [ns], where it comes from and what it is.

    Without SCENARIO, the built-in defaults (with --set or --costs but no SCENARIO, those
    applied to the `default` scenario). With one, the table its run uses and each
    value's origin; precedence, lowest first: the defaults, the scenario's
    machine.profile (a built-in hardware profile, `reclaimsim profiles`), its
    costs_profile or --costs FILE (e.g. from `reclaimsim calibrate`), its own [costs].
    """
    _distinct_outputs([("json_path", json_path)], [("the scenario", scenario), ("--costs", _costs_file(costs_sets))])
    if (sets or costs_sets) and scenario is None:
        scenario = "default"
    # An empty SCENARIO is refused (by load_scenario) as run refuses it, not taken for none.
    text = json.dumps(load_scenario(scenario, sets + costs_sets)) if scenario is not None else None
    table = json.loads(_core.cost_table_json(text))
    if json_path:
        write_output(json_path, json.dumps(table, indent=2))
        if json_path == "-":
            return
    for c in table:
        o = c["origin"]
        origin = o["layer"] + (f" {o['from']}" if o["from"] else "")
        click.echo(f"{c['name']:<26} {c['ns']:>9} ns  {printable(origin):<24} {c['doc']}")
        if o["source"]:
            click.echo(f"{'':<41}source: {printable(o['source'])}")


@main.command()
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), callback=_file_output(pipes=False), help="Where to write the cost profile (a TOML file).")
@click.option("--workdir", type=click.Path(file_okay=False), help="Directory for the page-cache benchmark's file: a disk filesystem (default /var/tmp).")
@click.option("--cpus", default="0,1", show_default=True, metavar="A,B", help="The two CPUs of the cache-line benchmarks.")
@click.option("--quick", is_flag=True, help="Smaller regions and fewer repetitions (seconds instead of a minute; noisier).")
def calibrate(out, workdir, cpus, quick):
    """Measure this machine's costs and write a cost profile.

    Native microbenchmarks on the running kernel: anonymous faults with zeroing, resident
    accesses, zap (MADV_DONTNEED), page-cache hits and misses, reclaim of clean file
    pages and swap-out/swap-in through zram (MADV_PAGEOUT; root: zram is set up and removed
    as kernel-run does), a cache-line transfer between two CPUs, a contended spinlock
    handoff, an atomic. Entries a benchmark times alone are written as measured; a kernel
    path gives the one entry of its sum no other benchmark measures (each entry's source
    says which). As root with a memory cgroup, a timed reclaim-bound run on the kernel and
    in the model gives pte_referenced, the per-folio work of limit reclaim. Apply the
    profile with --costs FILE or costs_profile = "FILE".
    """
    from .calibrate import CalibrateError, calibrate as run_calibrate, format_profile

    try:
        a, b = (int(x) for x in cpus.split(","))
    except ValueError:
        _fail(f"--cpus {cpus!r}: expected two CPU numbers A,B (e.g. 0,1)")
    try:
        # In the main thread: Ctrl-C lands between benchmarks (seconds each), so the zram
        # swap is always taken down again.
        p = run_calibrate(out, workdir, (a, b), quick, lambda m: click.echo(f"calibrate: {m}", err=True))
    except CalibrateError as e:
        _fail(str(e), e.code)
    except OSError as e:
        _fail(f"calibrate: {e}", 1)
    click.echo(format_profile(p))
    click.echo(f"written to {out}", err=True)


@main.command()
@_json_option("the profiles")
def profiles(json_path):
    """List the built-in hardware profiles (machine.profile = NAME) and their sourced figures."""
    ps = json.loads(_core.profiles_json())
    if json_path:
        write_output(json_path, json.dumps(ps, indent=2))
        if json_path == "-":
            return
    if not ps:
        click.echo("no hardware profiles are built in")
    for p in ps:
        click.echo(f"{p['name']:<20} {printable(p['description'])}")
        for k, e in p["costs"].items():
            click.echo(f"    {k:<26} {e['ns']:>9} ns  {printable(e['source'])}")


@main.command()
@click.argument("scenario")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field, as run's --set does.")
@click.option("--full-scale", is_flag=True, help="Print a scaled-down seed experiment at the seed's size, as run --full-scale runs it.")
@_costs_option
@_max_memory_option
def validate(scenario, sets, full_scale, costs_sets, max_memory):
    """Validate SCENARIO and print it normalized, as JSON (defaults filled in, some fields left at their default omitted, a workload's empty `name` named at run time by its type and position, as usemem0; `run` takes it back as a .json file)."""
    from .compare import check_compare_table

    data = load_scenario(scenario, sets + costs_sets, full_scale)
    text = json.dumps(data)
    norm = json.loads(_core.validate_json(text, max_memory))
    check_compare_table(data)  # what compare would refuse of its [compare] table
    click.echo(json.dumps(norm, indent=2))
    # The run's estimated memory (the budget `run` checks), on stderr.
    est = json.loads(_core.estimate_memory_json(text))
    big = max(est["terms"], key=lambda t: t["bytes"])
    click.echo(
        f"estimated memory: {est['total'] / 2**20:.1f} MiB (largest: {big['name']}, {big['bytes'] / 2**20:.1f} MiB)",
        err=True,
    )


# bench's options that only mean something with --vs, and the one that only means
# something without it.
_VS_ONLY = ("capacity_pages", "capacity_ratio", "policies", "repeat")


@main.command()
@click.argument("trace", required=False, type=click.Path(dir_okay=False))
@click.option("--scenario", "names", multiple=True, help="Built-ins (or scenario files) to measure (default: default and large).")
@click.option("--vs", "versus", type=click.Choice(["libcachesim"]), help="Replay TRACE here and in another simulator, side by side.")
@click.option("--capacity-pages", type=click.IntRange(1), help="--vs: cache size in 4 KiB pages (default: --capacity-ratio of the objects).")
@click.option("--capacity-ratio", type=FiniteFloatRange(0, 1, min_open=True), default=0.1, show_default=True, help="--vs: cache size as a fraction of the trace's distinct objects (not with --capacity-pages).")
@click.option("--policies", is_flag=True, help="--vs: also show the miss ratios of libCacheSim's Clock, SLRU, 2Q, ARC and S3-FIFO (not timed).")
@click.option("--repeat", type=click.IntRange(1), default=1, show_default=True, help="--vs: run both sides this many times, alternated, and keep each side's fastest run.")
@click.option("--sweep", "sweep_bench", is_flag=True, help="Time a 16-run sweep on 1 and 2 local workers and a 2-worker Dask LocalCluster: speedups and the overhead per run.")
@_json_option("the figures")
@click.pass_context
def bench(ctx, trace, names, versus, capacity_pages, capacity_ratio, policies, repeat, sweep_bench, json_path):
    """Measure speed and memory: events per wall second, virtual/wall ratio, RSS per page.

    Each scenario runs in its own process so its peak RSS is its own; the first row is
    the bare interpreter with the package imported, as a baseline.

    With --vs libcachesim TRACE: the same trace through reclaimsim's full kernel model (a
    trace workload in a cgroup of the capacity) and libCacheSim's LRU, one core each:
    requests per second of both, their ratio, and both miss ratios.
    """
    given = lambda name: ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    _distinct_outputs([("json_path", json_path)], [("the trace", trace), *(("--scenario", n) for n in names)])
    if capacity_pages is not None and given("capacity_ratio"):
        # Either sets the cache size: the ratio would be silently ignored.
        _fail(f"--capacity-ratio {capacity_ratio:g}: not with --capacity-pages {capacity_pages} (both set the cache size); give one of them")
    if sweep_bench:
        if versus or trace or names:
            _fail("--sweep goes alone (its grid is built in)")
        for name in _VS_ONLY:
            if given(name):
                _fail(f"--{name.replace('_', '-')} goes with --vs libcachesim TRACE, not with --sweep")
        import tempfile

        from .sweep import bench_sweep, format_bench_sweep

        with tempfile.TemporaryDirectory(prefix="reclaimsim-bench-") as d:
            b = bench_sweep(Path(d))
        if json_path:
            write_output(json_path, json.dumps(b, indent=2))
            if json_path == "-":
                return
        click.echo(format_bench_sweep(b))
        return
    if versus:
        from .bench import BenchError
        from .tracebench import bench_vs_libcachesim, format_bench

        if not trace:
            _fail("--vs libcachesim needs a TRACE (e.g. made by `reclaimsim trace-gen`)")
        if names:
            _fail("--scenario does not go with --vs (the scenario is the trace's own)")
        try:
            b = bench_vs_libcachesim(trace, capacity_pages, capacity_ratio, policies, repeat)
        except BenchError as e:
            _fail(str(e))
        if json_path:
            write_output(json_path, json.dumps(b, indent=2))
            if json_path == "-":
                return
        click.echo(format_bench(b))
        return
    if trace:
        _fail("a TRACE argument goes with --vs libcachesim")
    for name in _VS_ONLY:
        if given(name):
            _fail(f"--{name.replace('_', '-')} goes with --vs libcachesim TRACE")
    names = names or ("default", "large")
    for n in names:
        load_scenario(n)  # a name that is no scenario is refused before anything is measured
    from .bench import BenchError, format_measures, measure

    try:
        rows = [measure(None)] + [measure(n) for n in names]
    except BenchError as e:
        _fail(str(e), e.code)
    if json_path == "-":
        write_output(json_path, json.dumps(rows, indent=2))
        return
    click.echo(format_measures(rows))
    if json_path:
        write_output(json_path, json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
