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


def test_a_full_filesystem_fails_cleanly_after_the_run(tmp_path):
    # /dev/full accepts the open and fails every write with ENOSPC.
    p = cli("run", write(tmp_path, "s.toml", SMALL), "--json", "/dev/full")
    assert p.returncode == 2, p.stderr
    assert "--json /dev/full: cannot write: No space left on device" in one_error_line(p)
    assert Path("/dev/full").exists()


def test_json_check_leaves_no_file_behind(tmp_path):
    # The writability check creates no file when the run then fails.
    out = tmp_path / "out.json"
    p = cli("run", "no-such-scenario", "--json", str(out))
    assert p.returncode == 2 and not out.exists()


def test_trace_gen_refuses_an_unwritable_output_before_writing(tmp_path):
    line = one_error_line(cli("trace-gen", str(tmp_path)))
    assert "is a directory" in line
