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
        _close_pipes(proc)


def _close_pipes(proc) -> None:
    """A test that timed out left its pipes open: closed here, not by a later test's
    garbage collection (a ResourceWarning blamed on that test)."""
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


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



# --- start-up, dead workers, a dead parent, a full disk -----------------------------


def test_ctrl_c_while_the_command_starts_is_exit_130_without_a_traceback():
    # From the moment the package's code runs (its compiled core is mapped), through the
    # imports (about 0.2 s) and into the command: never a traceback, and 130 whenever the
    # command did not finish first. (Before that the interpreter's own start-up runs, which
    # no package can reach.)
    for delay in (0.0, 0.01, 0.02, 0.04, 0.06, 0.09, 0.13, 0.2):
        proc = subprocess.Popen([sys.executable, "-m", "reclaimsim.cli", "validate", "default"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + GUARD_S
        while "_core" not in _maps(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=GUARD_S)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
        # (-SIGINT: it landed while the interpreter was exiting, after the command.)
        assert proc.returncode in (0, 130, -signal.SIGINT), (delay, proc.returncode, err)


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _busy_workers(args):
    proc = subprocess.Popen([sys.executable, "-m", "reclaimsim.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + GUARD_S
    while busiest(proc.pid, True) < 1.0:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "never got busy"
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("cmd", ["compare", "sweep"])
def test_a_worker_killed_outright_is_one_line_not_a_hang(cmd, tmp_path):
    if cmd == "compare":
        args = ["compare", "default", "--b", "rotation_cost=false", "--seeds", "2", "--jobs", "2",
                "--set", "duration=3600s", "--metric", "pgscan_anon"]
    else:
        g = tmp_path / "g.toml"
        g.write_text('scenario = "default"\nseeds = 2\noverrides = ["duration=3600s"]\n'
                     '[variant_sets]\nA = {}\n')
        args = ["sweep", str(g), "--out", str(tmp_path / "s"), "--workers", "2", "--no-progress"]
    proc = _busy_workers(args)
    try:
        victim = max(descendants(proc.pid), key=cpu_seconds)
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=GUARD_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _close_pipes(proc)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "a worker process died" in err and len(err.strip().splitlines()) == 1, err


def _workers(pid: int) -> list[int]:
    out = []
    for k in descendants(pid):
        try:
            if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes():
                out.append(k)
        except FileNotFoundError:
            pass
    return out


@pytest.mark.parametrize("cmd", ["compare", "sweep"])
def test_a_worker_killed_while_it_starts_is_one_line_not_a_hang(cmd, tmp_path):
    """The pool's executor misses a worker that dies while it is being started (it waits
    on the workers it knew before); the other worker's hour-long run must not be waited
    for."""
    g = tmp_path / "g.toml"
    g.write_text('scenario = "default"\nseeds = 2\noverrides = ["duration=3600s"]\n[variant_sets]\nA = {}\n')
    args = {"compare": ["compare", "default", "--b", "rotation_cost=false", "--seeds", "2", "--jobs", "2",
                        "--set", "duration=3600s", "--metric", "pgscan_anon"],
            "sweep": ["sweep", str(g), "--out", str(tmp_path / "s"), "--workers", "2", "--no-progress"]}[cmd]
    with subprocess.Popen([sys.executable, "-m", "reclaimsim.cli", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            deadline = time.monotonic() + GUARD_S
            while len(ws := _workers(proc.pid)) < 2:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "never started two workers"
                time.sleep(0.002)
            os.kill(max(ws), signal.SIGKILL)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 1, err
    assert "a worker process died" in err and len(err.strip().splitlines()) == 1, err


def test_workers_and_the_resource_tracker_die_with_a_parent_killed_outright():
    proc = _busy_workers(["compare", "default", "--b", "rotation_cost=false", "--seeds", "2", "--jobs", "2",
                          "--set", "duration=3600s", "--metric", "pgscan_anon"])
    kids = descendants(proc.pid)
    assert kids
    proc.kill()  # SIGKILL to the command alone, not its group
    proc.communicate()
    assert_gone(kids)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs")
def test_a_full_disk_during_a_sweep_is_one_line_and_leaves_no_temporary_file(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)], check=True)
    try:
        g = tmp_path / "g.toml"
        g.write_text('scenario = "default"\nseeds = 4\noverrides = ["duration=300ms", "sample_interval=10ms"]\n'
                     '[variant_sets]\nA = {}\n')
        p = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "sweep", str(g), "--out", str(mnt / "s"),
                            "--workers", "1", "--no-progress"], capture_output=True, text=True, timeout=GUARD_S)
        assert p.returncode == 1, p.stderr
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "No space left on device" in p.stderr
        left = [str(f) for f in mnt.rglob("*") if f.name.endswith(".tmp")]
        assert left == []
    finally:
        subprocess.run(["umount", str(mnt)])


def test_a_submit_to_a_pool_broken_by_a_dead_worker_is_the_one_line_error():
    """Deterministic form of the race above: once a worker has died the executor refuses
    new jobs with BrokenProcessPool at submit; the pool answers with its one-line error,
    the same as for a job that was running when the worker died."""
    import json
    from concurrent.futures import wait
    from concurrent.futures.process import BrokenProcessPool

    from reclaimsim._core import SimulationError
    from reclaimsim.batch import LocalPool
    from reclaimsim.scenario import load_scenario

    pool = LocalPool(1)
    try:
        first = pool.submit(json.dumps(load_scenario("default", ["duration=3600s"])))
        deadline = time.monotonic() + GUARD_S
        while not (procs := list(pool.pool._processes.values())):
            assert time.monotonic() < deadline, "the pool never started its worker"
            time.sleep(0.01)
        os.kill(procs[0].pid, signal.SIGKILL)
        wait([first], timeout=GUARD_S)
        assert isinstance(first.exception(timeout=0), BrokenProcessPool)
        with pytest.raises(SimulationError, match="^a worker process died") as e:
            pool.submit("{}")
        assert "\n" not in str(e.value)
        assert e.value.__suppress_context__, "the BrokenProcessPool traceback would show"
    finally:
        pool.close(cancel=True)
