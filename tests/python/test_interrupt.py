"""Ctrl-C in the middle of a run: exit 130, no traceback, no worker left behind, no
partial output. Each command runs in its own session and gets SIGINT on its whole process
group, as a terminal's Ctrl-C sends it. The timeouts are guards against a hang, not
measurements (the latency is in docs/bench.md's territory, not a test's)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

GUARD_S = 120


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = [int(x) for x in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
        for k in kids:
            out += [k] + descendants(k)
    return out


def busiest(pid: int, in_child: bool) -> float:
    """The most CPU seconds any of the process's descendants (and itself, unless
    `in_child`) has used."""
    pids = descendants(pid) + ([] if in_child else [pid])
    return max([cpu_seconds(p) for p in pids] + [0.0])


def interrupt_when_busy(args, busy_cpu_s=1.5, in_child=False, sig=None, **kw):
    """Start the CLI, wait until it (or one of its children; with `in_child`, a child) has
    used `busy_cpu_s` of CPU (past imports and setup, inside the work), send SIGINT to its
    process group; with `sig`, send that signal to the command's process alone, as
    `kill PID` does."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "reclaimsim.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        # The CLI keeps a SIGHUP it was started with ignored (nohup's): under a nohup'd
        # test run the command must still start with the default, as from a terminal.
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL), **kw,
    )
    try:
        deadline = time.monotonic() + GUARD_S
        while busiest(proc.pid, in_child) < busy_cpu_s:
            assert proc.poll() is None, f"ended before it was interrupted: {proc.communicate()}"
            assert time.monotonic() < deadline, "never got busy"
            time.sleep(0.05)
        kids = descendants(proc.pid)
        if sig is None:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=GUARD_S)
        return proc.returncode, out, err, kids
    finally:
        # A hang must not outlive the test (the group is the command's own session).
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def assert_gone(pids):
    for pid in pids:
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"process {pid} outlived the interrupt")


# Ctrl-C (SIGINT to the process group) exits 130; `kill` (SIGTERM, SIGHUP to the command
# alone) exits 128 + the signal, after the same cleanup.
SIGNALS = [(None, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]


@pytest.mark.parametrize("sig,code", SIGNALS)
def test_run_exits_with_the_signals_code(sig, code):
    rc, out, err, _ = interrupt_when_busy(["run", "default", "--set", "duration=3600s", "--no-progress"], sig=sig)
    assert rc == code, err
    assert "Traceback" not in err and "error" not in err
    assert out == ""


@pytest.mark.parametrize("sig,code", SIGNALS[:2])
def test_compare_with_workers_exits_and_stops_them(sig, code):
    # With SIGTERM only the command gets the signal: its cleanup must stop the workers.
    rc, _, err, kids = interrupt_when_busy(
        ["compare", "default", "--b", "rotation_cost=false", "--seeds", "2", "--jobs", "2",
         "--set", "duration=3600s", "--metric", "pgscan_anon"],
        in_child=True, sig=sig,
    )
    assert rc == code, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert kids, "the workers were running"
    assert_gone(kids)


def test_bench_exits_130():
    rc, _, err, kids = interrupt_when_busy(["bench", "--scenario", "large"], busy_cpu_s=1.0)
    assert rc == 130, err
    assert "Traceback" not in err, err
    assert_gone(kids)


@pytest.mark.parametrize("sig,code", SIGNALS[:2])
def test_trace_gen_exits_and_leaves_no_partial_trace(tmp_path, sig, code):
    out = tmp_path / "big.oracleGeneral"
    rc, _, err, _ = interrupt_when_busy(["trace-gen", str(out), "--requests", str(10**12)], sig=sig)
    assert rc == code, err
    assert "Traceback" not in err
    assert not out.exists()

