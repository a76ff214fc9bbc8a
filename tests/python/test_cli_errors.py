"""Bad input to every subcommand: exit 2 and one line on stderr naming the field or file,
the value and what is allowed; never a traceback. And outputs that cannot be written,
refused before the run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[1] / "traces"


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True, **kw)


def one_error_line(p):
    """The one line a refusal prints (asserting there is exactly one, and no traceback)."""
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: "), p.stderr
    return lines[0]


def write(tmp_path, name, text, mode="w"):
    f = tmp_path / name
    if isinstance(text, bytes):
        f.write_bytes(text)
    else:
        f.write_text(text)
    return str(f)


SMALL = """
name = "small"
duration = "50ms"
[machine]
cpus = 2
memory_per_node = "256M"
[[cgroup]]
path = "/a"
memory.max = "32M"
[[workload]]
type = "usemem"
name = "u"
cgroup = "/a"
size = "16M"
"""


@pytest.mark.parametrize(
    "args, needles",
    [
        # The command itself.
        (["rnu"], ["No such command 'rnu'", "reclaimsim"]),
        # run
        (["run", "--seed", "-1"], ["--seed", "-1", "0<=x<=18446744073709551615"]),
        (["run", "--seed", str(2**64)], ["--seed", str(2**64)]),
        (["run", "file-fits", "--set", "duration=1979-05-27T07:32:00Z"], ["scenario.duration", "1979-05-27", "date"]),
        (["run", "file-fits", "--set", "kernel.swappiness=nan"], ["scenario.kernel.swappiness", "nan", "finite"]),
        (["run", "file-fits", "--set", "compare.seeds=0"], ["scenario.compare.seeds", "1 to 1000"]),
        # compare
        (["compare", "seed-003", "--seeds", "0"], ["--seeds", "0", "1<=x<=1000"]),
        (["compare", "seed-003", "--metric", "pgscan_bogus"], ["pgscan_bogus", "not a vmstat counter"]),
        (["compare", "seed-003", "--metric", "pgscan@/nope"], ["no cgroup '/nope'", "cgroups: /"]),
        (["compare", "seed-003", "--metric", "bogus@/"], ["memory.stat has no 'bogus'", "pgscan"]),
        (["compare", "seed-003", "--metric", "name@hog"], ["workload 'hog' has no 'name'", "throughput"]),
        (["compare", "seed-003", "--b", "rotation_cost=maybe"], ["side B", "rotation_cost"]),
        (["compare", "seed-003", "--set", "compare.seeds=many"], ["scenario.compare.seeds", '"many"', "1 to 1000"]),
        (["compare", "seed-003", "--set", "compare.a=1"], ["scenario.compare.a = 1", "table of variant switches"]),
        (["compare", "seed-003", "--set", "compare.metrics=\"pgscan_anon\""], ["scenario.compare.metrics", "list of metric names"]),
        (["compare", "seed-003", "--set", "compare.bogus=1"], ["scenario.compare.bogus", "allowed: a, b, seeds, metrics, full_scale"]),
        (["compare", "seed-003", "--set", "compare=5"], ["scenario.compare = 5", "expected a table"]),
        # kernel-run (more in test_kernelrun.py)
        (["kernel-run", "calib-uniform", "--reps", "101"], ["--reps", "101", "1<=x<=100"]),
        (["kernel-run", "calib-uniform", "--vm", "--perf-lock"], ["--perf-lock", "not with --vm"]),
        (["kernel-run", "calib-uniform", "--vm", "--pin"], ["--pin", "not with --vm"]),
        (["kernel-run", "calib-uniform", "--costs", "/dev/null"], ["--costs", "/dev/null: not a regular file"]),
        # calibrate (more in test_calibrate.py)
        (["calibrate"], ["Missing option", "-o"]),
        (["calibrate", "-o", "x.toml", "--cpus", "1"], ["--cpus", "'1'", "two CPU numbers"]),
        # costs, profiles
        (["costs", "no-such-scenario"], ["no-such-scenario", "built-ins:"]),
        (["costs", "default", "--set", "machine.profile=cray"], ["scenario.machine.profile", '"cray"', "laptop"]),
        (["profiles", "extra"], ["unexpected extra argument (extra)"]),
        # trace-gen
        (["trace-gen", "t.oracleGeneral", "--objects", "0"], ["--objects", "0", "1<=x<=4294967295"]),
        (["trace-gen", "t.oracleGeneral", "--zipf", "0"], ["--zipf", "0.0", "x>0"]),
        (["trace-gen", "no/such/dir/t.oracleGeneral"], ["no/such/dir/t.oracleGeneral", "directory 'no/such/dir' does not exist"]),
        # scenarios, costs: no arguments
        (["scenarios", "extra"], ["unexpected extra argument (extra)"]),
        (["costs", "--bogus"], ["No such option", "--bogus"]),
        # validate
        (["validate", "no-such-scenario"], ["no-such-scenario", "built-ins: calib-anon-cpu, calib-anon-random"]),
        (["validate", "file-fits", "--set", "machine.cpus=0"], ["scenario.machine.cpus"]),
        # bench
        (["bench", "--scenario", "no-such-scenario"], ["no-such-scenario", "built-ins:"]),
        (["bench", "--capacity-pages", "100"], ["--capacity-pages goes with --vs libcachesim"]),
        (["bench", "--vs", "cachelib"], ["--vs", "cachelib", "'libcachesim'"]),
        (["bench", "--vs", "libcachesim", "x.oracleGeneral", "--scenario", "default"], ["--scenario does not go with --vs"]),
        (["bench", "--vs", "libcachesim", str(TRACES / "small.csv")], ["small.csv", "looks like csv"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles, tmp_path):
    p = cli(*args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    for n in needles:
        assert n in line, line


def test_scenario_files_that_are_not_scenarios(tmp_path):
    cases = [
        (write(tmp_path, "latin1.toml", 'name = "caf\xe9"\n'.encode("latin-1")), ["latin1.toml", "0xe9", "offset 11", "UTF-8"]),
        (write(tmp_path, "date.toml", SMALL.replace('duration = "50ms"', "duration = 1979-05-27")), ["scenario.duration", "1979-05-27"]),
        (write(tmp_path, "inf.toml", SMALL + "[kernel]\nswappiness = inf\n"), ["scenario.kernel.swappiness", "inf"]),
        (write(tmp_path, "deep.toml", "a = " + "[" * 100000 + "]" * 100000 + "\n"), ["deep.toml", "invalid TOML"]),
        (write(tmp_path, "cmp.toml", SMALL + "[compare]\nseeds = 2.5\n"), ["scenario.compare.seeds = 2.5", "1 to 1000"]),
        (str(tmp_path), [str(tmp_path), "is a directory"]),
    ]
    for path, needles in cases:
        for cmd in ("run", "validate", "compare"):
            p = cli(cmd, path)
            assert p.returncode == 2, (cmd, path, p.stderr)
            line = one_error_line(p)
            for n in needles:
                assert n in line, (cmd, line)


def test_unreadable_scenario_file(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    f = Path(write(tmp_path, "secret.toml", SMALL))
    f.chmod(0)
    line = one_error_line(cli("run", str(f)))
    assert "secret.toml: cannot read: permission denied" in line.lower()


@pytest.mark.parametrize("cmd", [["run", "SMALL"], ["compare", "SMALL", "--b", "rotation_cost=false"],
                                 ["kernel-run", "SMALL"], ["bench"]])
def test_json_into_a_missing_directory_is_refused_before_the_run(cmd, tmp_path):
    small = write(tmp_path, "s.toml", SMALL)
    args = [small if a == "SMALL" else a for a in cmd]
    t = time.monotonic()
    p = cli(*args, "--json", str(tmp_path / "missing" / "out.json"))
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "--json" in line and f"directory '{tmp_path / 'missing'}' does not exist" in line
    assert "simulating" not in p.stderr


def test_json_onto_a_directory_or_an_unwritable_file(tmp_path):
    line = one_error_line(cli("run", "file-fits", "--json", str(tmp_path)))
    assert str(tmp_path) in line and "is a directory" in line
    # /proc files take no such write, whoever asks.
    p = cli("run", "file-fits", "--json", "/proc/version")
    assert p.returncode == 2
    assert "/proc/version" in one_error_line(p)
    if os.geteuid() != 0:
        ro = Path(write(tmp_path, "ro.json", "{}"))
        ro.chmod(0o444)
        line = one_error_line(cli("run", "file-fits", "--json", str(ro)))
        assert "ro.json: permission denied" in line


def test_a_device_that_takes_no_write_is_refused_before_the_run(tmp_path):
    # /dev/full accepts the open and fails every write with ENOSPC, an empty one too: the
    # check refuses it before the scenario is even read (here one the core would refuse).
    p = cli("run", write(tmp_path, "s.toml", SMALL), "--set", "machine.cpus=0", "--json", "/dev/full")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "--json" in line and "/dev/full: cannot write: no space left on device" in line, line
    assert p.stdout == ""
    assert Path("/dev/full").exists()


def test_json_check_leaves_no_file_behind(tmp_path):
    # The writability check creates no file when the run then fails.
    out = tmp_path / "out.json"
    p = cli("run", "no-such-scenario", "--json", str(out))
    assert p.returncode == 2 and not out.exists()


def test_trace_gen_refuses_an_unwritable_output_before_writing(tmp_path):
    line = one_error_line(cli("trace-gen", str(tmp_path)))
    assert "is a directory" in line


# ---- --set keys, values and nesting: one parser for --set, costs --set, compare --a/--b,
# sweep axes and [compare].full_scale (scenario.py parse_key and apply_override) ----------


@pytest.mark.parametrize(
    "args, needles",
    [
        # Only ASCII digits are an index ('²'.isdigit() and int('١') == 1 in Python).
        (["validate", "file-fits", "--set", "cgroup[²].path=/x"], ["--set 'cgroup[²].path=/x'", "index '²' is not a number (digits 0-9)"]),
        (["validate", "file-fits", "--set", "cgroup[١].path=/x"], ["--set 'cgroup[١].path=/x'", "index '١' is not a number"]),
        (["costs", "file-fits", "--set", "cgroup[²].path=/x"], ["--set 'cgroup[²].path=/x'", "index '²' is not a number"]),
        (["compare", "seed-003", "--a", "cgroup[²].path=/x"], ["side A", "cgroup[²].path", "index '²' is not a number"]),
        # Malformed keys: unbalanced brackets, text after one.
        (["validate", "file-fits", "--set", "cgroup[0.memory.max=1G"], ["--set 'cgroup[0.memory.max=1G'", "'cgroup[0' is malformed", "NAME[INDEX]"]),
        (["validate", "file-fits", "--set", "cgroup]0[.memory.max=1G"], ["'cgroup]0[' is malformed"]),
        (["validate", "file-fits", "--set", "cgroup[0]x.memory.max=1G"], ["'cgroup[0]x' is malformed"]),
        (["validate", "file-fits", "--set", "cgroup[].memory.max=1G"], ["index '' is not a number"]),
    ],
)
def test_set_keys_take_ascii_indices_and_balanced_brackets_only(args, needles, tmp_path):
    p = cli(*args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    for n in needles:
        assert n in line, line


def test_a_full_scale_key_is_parsed_as_set_keys_are(tmp_path):
    sc = write(tmp_path, "s.toml", SMALL + '[compare]\nfull_scale = ["cgroup[²].memory.max=1G"]\n')
    for cmd in (["validate", sc], ["run", sc, "--full-scale"]):
        p = cli(*cmd)
        assert p.returncode == 2, p.stderr
        line = one_error_line(p)
        assert "scenario.compare.full_scale[0] = 'cgroup[²].memory.max=1G'" in line and "index '²' is not a number" in line, line


def test_nesting_too_deep_is_one_line_not_a_recursion_error(tmp_path):
    key = ".".join(["a"] * 1200)
    cases = [
        # A --set key of 1200 parts.
        (["--set", f"{key}=1"], ["--set 'a.a.a.a", "key nested too deeply"]),
        # A --set value of 600 nested arrays (tomllib recurses).
        (["--set", "seed=" + "[" * 600 + "]" * 600], ["--set 'seed=[[[[", "nested too deeply"]),
        # A value nested beyond what a scenario takes, though TOML reads it.
        (["--set", "seed=" + "[" * 100 + "]" * 100], ["scenario.seed[0][0]", "nested too deeply"]),
    ]
    for extra, needles in cases:
        p = cli("validate", "file-fits", *extra)
        assert p.returncode == 2, p.stderr[-500:]
        line = one_error_line(p)
        for n in needles:
            assert n in line, line
    # Scenario files: a table header of 990 parts, a dotted key of 1000 (tomllib reads
    # both without recursing; the value checks must not recurse either).
    for name, text in (("header.toml", "[" + ".".join(["a"] * 990) + "]\n"), ("dotted.toml", ".".join(["a"] * 1000) + " = 1\n")):
        p = cli("validate", write(tmp_path, name, text))
        assert p.returncode == 2, p.stderr[-500:]
        line = one_error_line(p)
        assert "scenario.a.a.a.a" in line and "nested too deeply" in line, line


def test_a_set_value_with_more_toml_after_a_newline_is_not_cut_short():
    # `v = 5\nmachine.cpus=3` is two TOML keys: the value is the whole text, a string.
    p = cli("validate", "file-fits", "--set", "seed=5\nmachine.cpus=3")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "scenario.seed" in line and "machine.cpus=3" in line, line


@pytest.mark.parametrize("side", ["rotation_cost=1979-05-27", "kernel.swappiness=1979-05-27"])
def test_a_compare_side_of_a_toml_date_names_the_field(side):
    p = cli("compare", "seed-003", "--b", side)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    field = "scenario.variants.rotation_cost" if side.startswith("rotation") else "scenario.kernel.swappiness"
    assert f"{field} = 1979-05-27" in line and "date" in line, line


# ---- float options: NaN passes click's FloatRange, and --zipf has no upper bound ---------


@pytest.mark.parametrize(
    "args, needles",
    [
        (["bench", "--vs", "libcachesim", "--capacity-ratio", "nan", str(TRACES / "small.oracleGeneral.zst")],
         ["--capacity-ratio", "nan: allowed a finite number > 0 and <= 1"]),
        # Formerly a hang (an infinite exponent).
        (["trace-gen", "t.oracleGeneral", "--zipf", "inf", "--objects", "10", "--requests", "1"],
         ["--zipf", "inf: allowed a finite number > 0"]),
        (["trace-gen", "t.oracleGeneral", "--zipf", "1e309", "--objects", "10", "--requests", "1"],
         ["--zipf", "1e309: allowed a finite number > 0"]),
        (["trace-gen", "t.oracleGeneral", "--zipf", "nan", "--objects", "10", "--requests", "1"],
         ["--zipf", "nan: allowed a finite number > 0"]),
        # An infinity beyond a range's bound gets the same words, not the range's.
        (["kernel-run", "file-fits", "--vm", "--timeout", "inf"],
         ["--timeout", "inf: allowed a finite number >= 10 and <= 86400"]),
        (["bench", "--vs", "libcachesim", "--capacity-ratio", "inf", str(TRACES / "small.oracleGeneral.zst")],
         ["--capacity-ratio", "inf: allowed a finite number > 0 and <= 1"]),
    ],
)
def test_float_options_refuse_nan_and_infinities(args, needles, tmp_path):
    p = cli(*args, cwd=tmp_path, timeout=300)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    for n in needles:
        assert n in line, line
    assert not (tmp_path / "t.oracleGeneral").exists()


def _invoke(monkeypatch, args):
    """The CLI in this process (so that a stub can stand for booting), with its one error line."""
    from click.testing import CliRunner

    from reclaimsim import cli as cli_mod

    monkeypatch.setattr(cli_mod, "handle_termination", lambda: None)
    r = CliRunner().invoke(cli_mod.main, args)
    assert r.exit_code == 2, (r.output, r.exception)
    lines = [l for l in r.stderr.splitlines() if l.strip() and not l.startswith("kernel-")]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["kernel-run", "calib-zipf", "--vm", "--timeout", "nan"],
        ["kernel-compare", "calib-zipf", "--kernel-a", "debian", "--kernel-b", "debian", "--b", "rotation_cost=false", "--timeout", "nan"],
    ],
)
def test_a_nan_timeout_is_refused_before_any_work(args, monkeypatch):
    from reclaimsim import kernelcompare, vm

    def started(*a, **k):
        raise AssertionError("work started with a NaN timeout")

    monkeypatch.setattr(vm, "kernel_run_vm", started)
    monkeypatch.setattr(kernelcompare, "kernel_compare", started)
    line = _invoke(monkeypatch, args)
    assert "--timeout" in line and "nan: allowed a finite number >= 10 and <= 86400" in line, line


def test_kernel_compare_checks_the_model_switches_before_any_boot(monkeypatch):
    from reclaimsim import kernelcompare, vm

    booted = []

    def boot(*a, **k):
        booted.append(a)
        raise AssertionError("a kernel was fetched or booted")

    monkeypatch.setattr(kernelcompare, "_kernel", boot)
    monkeypatch.setattr(vm, "run_in_vm", boot)
    line = _invoke(monkeypatch, ["kernel-compare", "calib-zipf", "--kernel-a", "debian", "--kernel-b", "debian", "--a", "foo=1"])
    assert not booted
    assert "model side A (--a)" in line and "scenario.variants.foo" in line and "unknown field" in line, line


# ---- paths that are not regular files, and paths that are empty ------------------------


def test_bench_refuses_a_trace_that_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        # Formerly a hang (reading a FIFO without a writer, or /dev/zero).
        p = cli("bench", "--vs", "libcachesim", path, timeout=300)
        assert p.returncode == 2, p.stderr
        line = one_error_line(p)
        assert f"trace {path}: not a regular file" in line, line


def test_a_trace_workload_path_that_is_not_a_regular_file_says_so(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in ((str(tmp_path), "is a directory"), ("/dev/zero", "not a regular file"), (str(fifo), "not a regular file")):
        sc = write(tmp_path, "t.toml", SMALL.replace('type = "usemem"', 'type = "trace"').replace('size = "16M"', f'path = "{path}"'))
        p = cli("validate", sc)
        assert p.returncode == 2, p.stderr
        line = one_error_line(p)
        assert f'scenario.workload[0].path: "{path}": {what}' in line, line


@pytest.mark.parametrize("option, needles", [("--json", ["--json", "'': the path is empty"]),
                                             ("--costs", ["--costs", "'': the path is empty", "cost profile"])])
def test_an_empty_path_is_called_empty(option, needles):
    p = cli("run", "file-fits", option, "")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    for n in needles:
        assert n in line, line
    assert "directory" not in line, line


def test_a_proc_file_is_not_called_a_full_filesystem():
    p = cli("run", "file-fits", "--json", "/proc/version")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "/proc/version: " in line and "full" not in line, line
    if os.geteuid() == 0:  # root opens it: the empty write fails
        assert "/proc/version: cannot write: input/output error" in line, line


# ---- [compare] entries that compare would refuse, refused by validate --------------------


@pytest.mark.parametrize(
    "table, needles",
    [
        ('full_scale = ["machine.cpus"]', ["scenario.compare.full_scale[0] = 'machine.cpus'", "KEY=VALUE"]),
        ('full_scale = ["duration=1s", "workload[5].size=1G"]', ["scenario.compare.full_scale[1] = 'workload[5].size=1G'", "scenario.workload[5] does not exist"]),
        ('metrics = ["pgscan_anon", "pgscan_bogus"]', ["scenario.compare.metrics[1] = 'pgscan_bogus'", "not a vmstat counter"]),
        ('metrics = ["name@u"]', ["scenario.compare.metrics[0] = 'name@u'", "workload 'u' has no 'name'"]),
        ("a = { bogus = 1 }", ["scenario.compare.a", "scenario.variants.bogus", "unknown field"]),
    ],
)
def test_validate_refuses_compare_entries_that_compare_would_refuse(table, needles, tmp_path):
    p = cli("validate", write(tmp_path, "s.toml", SMALL + "[compare]\n" + table + "\n"))
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    for n in needles:
        assert n in line, line


def _as_nobody(*args):
    """The CLI run as the unprivileged user nobody (setpriv), or None when nobody cannot
    run it here (the project's tree or environment not readable by others)."""
    import shutil

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if subprocess.run([*pre, sys.executable, "-c", "import reclaimsim.cli"], capture_output=True).returncode != 0:
        return None
    return subprocess.run([*pre, sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("kind", ["unreadable", "read-only"])
def test_outputs_and_inputs_a_user_cannot_reach_are_exit_2(kind):
    import shutil
    import tempfile

    # Under /tmp itself: pytest's own directory is private to root.
    tmp_path = Path(tempfile.mkdtemp(prefix="reclaimsim-test-nobody-", dir="/tmp"))
    try:
        _check_unreachable(tmp_path, kind)
    finally:
        shutil.rmtree(tmp_path)


def _check_unreachable(tmp_path: Path, kind: str) -> None:
    os.chmod(tmp_path, 0o755)
    d = tmp_path / kind
    d.mkdir()
    os.chmod(d, 0o000 if kind == "unreadable" else 0o555)
    cases = [
        ["run", "default", "--set", "duration=100ms", "--json", str(d / "x.json")],
        ["compare", "default", "--seeds", "1", "--set", "duration=100ms", "--json", str(d / "c.json")],
        ["sweep", "seed-002-mix", "--out", str(d / "s")],
        ["report", "/dev/null", "-o", str(d / "r.html")],
        ["trace-gen", str(d / "t.oracleGeneral"), "--requests", "10"],
    ]
    if kind == "unreadable":
        cases.append(["report", str(d / "x.json"), "-o", str(tmp_path / "r.html")])
    for args in cases:
        p = _as_nobody(*args)
        if p is None:
            pytest.skip("needs root and a tree the user nobody can read (to run the CLI as nobody)")
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, (args, p.stderr)


# ---------------------------------------------------------------------------------------
# Durations a person writes need a unit; the memory budget is what this process may take.

@pytest.mark.parametrize("how", ["toml", "set", "sweep"])
def test_a_duration_without_a_unit_is_refused_where_a_person_wrote_it(how, tmp_path):
    # `duration = 5` reads as five seconds; as nanoseconds it would be a silently empty run.
    if how == "toml":
        p = cli("run", write(tmp_path, "s.toml", SMALL.replace('duration = "50ms"', "duration = 5")))
    elif how == "set":
        p = cli("run", "default", "--set", "duration=5")
    else:
        g = write(tmp_path, "g.toml", 'scenario = "default"\nseeds = 1\n[axes]\n"duration" = [5]\n'
                  "[variant_sets]\nA = {}\n")
        p = cli("sweep", g, "--out", str(tmp_path / "s"), "--dry-run")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "duration" in line and "5: a duration needs a unit" in line and '"5s"' in line, line


def test_a_bare_zero_and_scenario_json_nanoseconds_are_durations(tmp_path):
    # 0 needs no unit; JSON (what validate prints) holds nanoseconds and reads back as such.
    p = cli("validate", write(tmp_path, "s.toml", 'warmup = 0\n' + SMALL))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["duration"] == 50_000_000  # 50 ms in ns
    back = cli("validate", write(tmp_path, "s.json", p.stdout), "--set", "warmup=10ms")
    assert back.returncode == 0, back.stderr
    again = json.loads(back.stdout)
    assert again["duration"] == 50_000_000 and again["warmup"] == 10_000_000


def _in_memcg_v1(limit: int):
    """A preexec_fn that moves the child into a new cgroup v1 memory group limited to
    `limit` bytes, and the group's directory; None where there is no such hierarchy or
    no right to make one."""
    mount = Path("/sys/fs/cgroup/memory")
    own = next((l.split(":", 2)[2] for l in Path("/proc/self/cgroup").read_text().splitlines()
                if "memory" in l.split(":")[1].split(",")), None)
    if os.geteuid() != 0 or own is None or not (mount / "memory.limit_in_bytes").exists():
        return None, None
    d = mount / own.lstrip("/") / f"rsim-budget-test-{os.getpid()}"
    d.mkdir()
    (d / "memory.limit_in_bytes").write_text(str(limit))
    return (lambda: (d / "cgroup.procs").write_text(str(os.getpid()))), d


def test_the_budget_is_the_memory_cgroups_headroom_not_the_machines():
    # `large` estimates about 480 MiB; in a memcg of 300M it would be OOM-killed (exit 137).
    pre, d = _in_memcg_v1(300 << 20)
    if pre is None:
        pytest.skip("needs root and a cgroup v1 memory hierarchy")
    try:
        for cmd in ("validate", "run"):
            p = cli(cmd, "large", preexec_fn=pre, timeout=120)
            assert p.returncode == 2, p.stderr
            line = one_error_line(p)
            assert "the headroom of the memory cgroup" in line and "above the" in line, line
    finally:
        d.rmdir()


def test_the_budget_is_the_address_space_limit_less_the_process(tmp_path):
    # 6T of usemem: 6 GiB of page tables in the estimate, under `ulimit -v` of 4 GiB.
    import resource

    s = write(tmp_path, "big.toml", SMALL.replace('size = "16M"', 'size = "6T"').replace('memory.max = "32M"', ""))
    limit = 4 << 30
    p = cli("validate", s, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "ulimit -v" in line and "page tables of workload[0]" in line, line
    # The headroom is the limit less the process's own size (tens of MiB: shown as 4.0).
    allowed = float(line.split("above the ")[1].split(" GiB")[0])
    assert 3.0 < allowed <= 4.0, line


# ---------------------------------------------------------------------------------------
# Outputs that would destroy an input, clash with each other or wait forever; options
# that would be silently ignored; values refused one way here and another way there.

def _clobber_cases(tmp_path):
    s = write(tmp_path, "s.toml", SMALL)
    run_json = write(tmp_path, "r.json", "{}")
    trace = write(tmp_path, "t.oracleGeneral", (TRACES / "small.oracleGeneral").read_bytes())
    prof = write(tmp_path, "prof.toml", "[costs]\n")
    link = tmp_path / "link.toml"
    link.symlink_to("s.toml")
    hard = tmp_path / "hard.toml"
    os.link(s, hard)
    # A trace the scenario's workload reads (its path relative to the scenario).
    ts = write(tmp_path, "ts.toml", 'duration = "1s"\n[machine]\ncpus = 2\nmemory_per_node = "64M"\n'
               '[[workload]]\ntype = "trace"\npath = "t.oracleGeneral"\n')
    return [
        (["run", s, "--json", s], "--json", s),
        (["run", s, "--json", str(link)], "--json", s),  # the same file through a link
        (["run", str(hard), "--json", s], "--json", s),  # ... or a second name of it
        (["run", "s.toml", "--json", "./s.toml"], "--json", s),
        (["run", "default", "--costs", prof, "--json", prof], "--json", prof),
        (["costs", s, "--json", s], "--json", s),
        (["validate", s], None, s),  # no output: nothing to refuse
        (["compare", s, "--b", "rotation_cost=false", "--html", s], "--html", s),
        (["compare", s, "--b", "rotation_cost=false", "--json", s], "--json", s),
        (["report", "-o", run_json, run_json], "--output", run_json),
        (["bench", "--vs", "libcachesim", trace, "--json", trace], "--json", trace),
        (["kernel-run", s, "--json", s], "--json", s),
        (["run", ts, "--json", trace], "--json", trace),
        (["compare", ts, "--b", "rotation_cost=false", "--html", trace], "--html", trace),
    ]


def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path):
    for args, option, victim in _clobber_cases(tmp_path):
        before = Path(victim).read_bytes()
        p = cli(*args, "--set", "duration=20ms") if args[0] == "validate" else cli(*args, cwd=tmp_path)
        if option is None:
            assert p.returncode == 0, (args, p.stderr)
            continue
        assert p.returncode == 2, (args, p.stderr)
        line = one_error_line(p)
        assert option in line and "the same file as" in line and "give another path" in line, (args, line)
        assert Path(victim).read_bytes() == before, args
        assert "simulating" not in p.stderr


@pytest.mark.parametrize("outputs, needles", [
    (["--json", "-", "--html", "-"], ["--html", "-: --json writes to stdout already", "one output at most"]),
    (["--json", "-", "--html", "/dev/stdout"], ["--html", "/dev/stdout: --json writes to stdout already"]),
    (["--json", "OUT", "--html", "OUT"], ["--html", "out.x: the same file as --json's", "each output its own file"]),
])
def test_two_outputs_to_stdout_or_to_one_file_are_refused(outputs, needles, tmp_path):
    out = str(tmp_path / "out.x")
    s = write(tmp_path, "s.toml", SMALL)
    p = cli("compare", s, "--b", "rotation_cost=false", "--seeds", "2", *[out if o == "OUT" else o for o in outputs])
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    for n in needles:
        assert n in line, line
    assert p.stdout == "" and not Path(out).exists()
    # /dev/null twice discards both, as asked.
    p = cli("compare", s, "--b", "rotation_cost=false", "--seeds", "2", "--json", "/dev/null", "--html", "/dev/null")
    assert p.returncode == 0, p.stderr


def test_bench_refuses_a_capacity_in_pages_and_a_ratio_both():
    trace = str(TRACES / "small.oracleGeneral")
    p = cli("bench", "--capacity-pages", "10", "--capacity-ratio", "0.5", "--vs", "libcachesim", trace)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "--capacity-ratio 0.5" in line and "--capacity-pages" in line and "one of them" in line, line
    # The ratio's default does not count as given.
    p = cli("bench", "--capacity-pages", "10", "--vs", "libcachesim", str(TRACES / "small.csv"))
    assert p.returncode == 2 and "looks like csv" in one_error_line(p)
    # --sweep has its own grid: a --vs option beside it would be ignored as silently.
    p = cli("bench", "--sweep", "--repeat", "3")
    assert p.returncode == 2, p.stderr
    assert "--repeat goes with --vs libcachesim TRACE, not with --sweep" in one_error_line(p)


def _fifo_cases(tmp_path):
    s = write(tmp_path, "s.toml", SMALL)
    return [
        ["run", s, "--json", "FIFO"],
        ["costs", "--json", "FIFO"],
        ["profiles", "--json", "FIFO"],
        ["report", "-o", "FIFO", write(tmp_path, "r.json", "{}")],
        ["compare", s, "--b", "rotation_cost=false", "--html", "FIFO"],
        ["trace-gen", "FIFO", "--requests", "100", "--objects", "10"],
        ["bench", "--json", "FIFO"],
    ]


def test_an_output_fifo_without_a_reader_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in _fifo_cases(tmp_path):
        p = cli(*[str(fifo) if a == "FIFO" else a for a in args], timeout=60)
        assert p.returncode == 2, (args, p.stderr)
        line = one_error_line(p)
        assert f"{fifo}: a FIFO with no reader" in line and "start its reader first" in line, (args, line)
        assert "simulating" not in p.stderr
    # A profile calibrate reads back, an image kernel-build copies: a FIFO is no such file.
    for args in (["calibrate", "-o", str(fifo)], ["kernel-build", "/nonexistent", "-o", str(fifo)]):
        p = cli(*args, timeout=60)
        assert p.returncode == 2, (args, p.stderr)
        line = one_error_line(p)
        assert f"{fifo}: a FIFO" in line and "give a regular file" in line, (args, line)


def _through_fifo(fifo: Path, *args):
    """The command `args` run with a reader already on `fifo`; (its result, what it wrote
    there). What it writes must fit in the pipe's buffer (64 KiB)."""
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader, there before the writer
    hold = os.open(fifo, os.O_WRONLY)  # no end of file until the command has written
    try:
        p = cli(*args, timeout=60)
        os.close(hold)
        hold = -1
        os.set_blocking(rfd, True)
        data = b""
        while b := os.read(rfd, 1 << 16):
            data += b
    finally:
        if hold >= 0:
            os.close(hold)
        os.close(rfd)
    return p, data


def test_an_output_fifo_with_a_reader_and_dev_stdout_are_written(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    p, data = _through_fifo(fifo, "profiles", "--json", str(fifo))
    assert p.returncode == 0, p.stderr
    assert json.loads(data) == json.loads(cli("profiles", "--json", "-").stdout)
    p, data = _through_fifo(fifo, "trace-gen", str(fifo), "--requests", "100", "--objects", "10")
    assert p.returncode == 0 and len(data) == 100 * 24, p.stderr
    # /dev/stdout on a pipe (here the one subprocess reads) is a FIFO with its reader.
    p = cli("costs", "--json", "/dev/stdout")
    assert p.returncode == 0 and json.loads(p.stdout), p.stderr


@pytest.mark.parametrize("value", ["0", "0.5", "4095", "1K", "3.9K", "-4K", "nan", "inf", "1e30T", "eight"])
def test_max_memory_below_one_page_or_malformed_is_refused_by_the_option(value):
    p = cli("validate", "default", "--max-memory", value)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert f"Invalid value for '--max-memory': {value!r}" in line and "at least 4096 bytes" in line, line


def test_max_memory_of_a_page_or_more_is_taken_by_the_option():
    # A page is a budget the option takes; the run's estimate is then above it.
    p = cli("validate", "default", "--max-memory", "4K")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "--max-memory" in line and "Invalid value" not in line and "above the 4.0 KiB allowed" in line, line
    assert cli("validate", "default", "--max-memory", "8G").returncode == 0


def test_costs_refuses_an_empty_scenario_as_run_does():
    for args in (["costs", ""], ["costs", "", "--set", "machine.cpus=4"], ["run", ""]):
        p = cli(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert "scenario '': give a TOML file or a built-in name" in one_error_line(p), args


@pytest.mark.parametrize("args, needles", [
    (["trace-gen", "-", "--requests", "10"], ["OUT", "'-': this output is a file, not stdout; give a file name"]),
    (["calibrate", "-o", "-"], ["--output", "'-': this output is a file, not stdout"]),
    (["kernel-build", "/nonexistent", "-o", "-"], ["--output", "'-': this output is a file, not stdout"]),
    # stdout by another name: the trace would be mixed with trace-gen's own line there.
    (["trace-gen", "/dev/stdout", "--requests", "10"], ["OUT", "/dev/stdout: stdout goes there", "give another file name"]),
])
def test_a_dash_is_no_file_name_for_outputs_that_are_files(args, needles, tmp_path):
    p = cli(*args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    for n in needles:
        assert n in line, line
    assert list(tmp_path.iterdir()) == [] and p.stdout == ""


def test_an_output_to_stdout_goes_there_alone(tmp_path):
    # The report's page on stdout (by '-' or by /dev/stdout) is not followed by its
    # "report: PATH" line, as run --json - prints the JSON alone.
    r = str(tmp_path / "r.json")
    assert cli("run", write(tmp_path, "s.toml", SMALL), "--json", r).returncode == 0
    for out in ("-", "/dev/stdout"):
        p = cli("report", r, "-o", out)
        assert p.returncode == 0, p.stderr
        assert p.stdout.rstrip().endswith("</html>") and "report: " not in p.stdout, p.stdout[-200:]
