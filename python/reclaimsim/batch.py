"""Running scenarios: the one function a worker runs, the local worker pool compare and
sweep share, probe runs of a scenario cut short, and the signals.

Signals: Ctrl-C raises KeyboardInterrupt in the main thread; SIGTERM and SIGHUP raise
Terminated there (handle_termination), which unwinds the same way, so every cleanup that
runs on Ctrl-C (kernel-run's cgroups, swap and workers, a sweep's store, a pool's worker
processes) runs on `kill` too. Workers ignore SIGINT: a terminal's Ctrl-C reaches the whole
process group, and the parent alone decides, terminating them.

A compiled call that releases the GIL (the core's trace_gen and trace_count, libCacheSim's
replay) runs until it returns; Python raises KeyboardInterrupt only after it. Run in a
helper thread (call_interruptibly), it leaves the main thread waiting where a signal is
seen at once: Ctrl-C raises KeyboardInterrupt there, and the helper thread (a daemon) ends
with the process.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from . import _core
from ._core import ScenarioError, SimulationError

# ---------------------------------------------------------------------------------------
# Signals


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: unwinds as Ctrl-C does, so every cleanup that runs on Ctrl-C
    (kernel-run's cgroups, swap and workers, a sweep's store) runs on `kill` too; the
    command exits 128 + the signal's number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: Any) -> None:
    raise Terminated(signum)


def handle_termination() -> None:
    """Make SIGTERM and SIGHUP raise Terminated in the main thread. A signal the
    process was started with ignored (nohup's SIGHUP) stays ignored."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _raise_terminated)


def call_interruptibly(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), with Ctrl-C raising KeyboardInterrupt promptly in the calling thread."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # handed to the caller, raised there
            out["error"] = e

    t = threading.Thread(target=target, name=getattr(fn, "__name__", "call"), daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.1)
    if "error" in out:
        raise out["error"]
    return out["value"]


def ignore_sigint(parent: int | None = None) -> None:
    """A worker's initializer: Ctrl-C is left to the parent, which terminates the workers;
    with `parent` (its pid), the worker also dies with it (die_with_parent)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent exits (prctl PR_SET_PDEATHSIG), or exit now if
    the parent `parent` has already gone: a parent killed outright (kill -9) cannot stop its
    workers, QEMU or perf, which would otherwise run on (and, for a local pool's workers,
    keep multiprocessing's resource tracker alive). Usable as a subprocess preexec_fn
    through `functools.partial`."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def child_of_this_process():
    """A subprocess preexec_fn: the child dies with this process (die_with_parent)."""
    import functools

    return functools.partial(die_with_parent, os.getpid())


# ---------------------------------------------------------------------------------------
# One run: the function every worker executes (a local pool's, a Dask cluster's)


def run_one(scenario_json: str) -> tuple[str, str, float]:
    """Run one scenario: ("ok", result JSON, wall seconds) or (error class name, message,
    wall seconds).

    Errors travel back as text: the core's exception classes are not picklable, and a
    worker's error must reach the user as its own message."""
    t = time.perf_counter()
    try:
        return "ok", _core.run_json(scenario_json), time.perf_counter() - t
    except (ScenarioError, SimulationError) as e:
        return type(e).__name__, str(e), time.perf_counter() - t


_ERRORS = {"ScenarioError": ScenarioError, "SimulationError": SimulationError}


def result_text(kind: str, text: str) -> str:
    """The result JSON of a run_one answer, or its error raised with its own class and
    message."""
    if kind != "ok":
        raise _ERRORS[kind](text)
    return text


# ---------------------------------------------------------------------------------------
# The local pool


class _without_main:
    """While it holds, `__main__` is an empty module, so that a worker started by spawn
    does not import the caller's script: workers need only reclaimsim, and a script that
    calls reclaimsim.sweep() or compare() at its top level, with no
    `if __name__ == "__main__":` guard, would otherwise run again in each worker."""

    def __enter__(self) -> None:
        import sys
        import types

        self.main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")

    def __exit__(self, *exc) -> None:
        import sys

        if self.main is not None:
            sys.modules["__main__"] = self.main


class LocalPool:
    """Long-lived worker processes (a simulation is single-threaded), started by spawn and
    ignoring Ctrl-C; close(cancel=True) terminates them."""

    def __init__(self, workers: int):
        self.pool = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=ignore_sigint,
            initargs=(os.getpid(),),
        )

    def submit(self, scenario_json: str) -> Future:
        """Queue a run. A worker that died while the jobs were still being queued breaks
        the pool at once: the same one-line error as one that dies later."""
        # The pool starts its workers as jobs come: without the caller's main module (see
        # _without_main).
        try:
            with _without_main():
                return self.pool.submit(run_one, scenario_json)
        except BrokenProcessPool:
            raise self._died() from None

    def wait_any(self, futures: list, timeout: float) -> set:
        done = wait(futures, return_when=FIRST_COMPLETED, timeout=timeout).done
        if not done:
            self._check_workers()
        return done

    def result(self, future: Future) -> tuple[str, str, float]:
        """run_one's answer; a worker that died (killed by a signal, out of memory) is a
        SimulationError of one line, not the pool's traceback nor a wait for ever."""
        while not wait([future], timeout=0.5).done:
            self._check_workers()
        try:
            return future.result()
        except BrokenProcessPool:
            raise self._died() from None

    def _check_workers(self) -> None:
        """The executor misses a worker that dies while it is being started (it waits on
        the workers it knew before the submit that started this one), and then waits for
        the others' runs, an hour's perhaps. Workers exit only when the pool closes, so
        one that has ended is one that died."""
        for p in list((getattr(self.pool, "_processes", None) or {}).values()):
            if p.exitcode is not None:
                raise self._died()

    @staticmethod
    def _died() -> SimulationError:
        return SimulationError(
            "a worker process died before returning its run (killed by a signal or by the OOM killer?)"
        )

    def close(self, cancel: bool, pending: list = ()) -> None:
        if cancel:
            for p in list((getattr(self.pool, "_processes", None) or {}).values()):
                p.terminate()
        self.pool.shutdown(wait=True, cancel_futures=cancel)


def run_all(jobs: list[str], workers: int) -> list[str]:
    """Run every job (scenario JSON), `workers` at a time (one: in this process); the
    result texts in job order. The first error in job order is raised with its own class
    and message; an error, Ctrl-C or SIGTERM stops the workers."""
    if workers <= 1:
        return [result_text(*run_one(j)[:2]) for j in jobs]
    pool = LocalPool(workers)
    cancel = True
    try:
        futures = [pool.submit(j) for j in jobs]
        texts = [result_text(*pool.result(f)[:2]) for f in futures]
        cancel = False
    finally:
        pool.close(cancel)
    return texts


# ---------------------------------------------------------------------------------------
# Probes


def probe(data: dict, duration_ns: int, sample_interval: int | None = None) -> tuple[str, str, float]:
    """A run of the scenario `data` cut to `duration_ns` of virtual time (scenario.shortened:
    its result has every counter, cgroup, workload and tracepoint the full run has), with
    `sample_interval` if given: run_one's answer. The scenario is validated first (a
    refusal raises ScenarioError)."""
    from .scenario import shortened

    d = shortened(json.loads(_core.validate_json(json.dumps(data))), duration_ns)
    if sample_interval is not None:
        d["sample_interval"] = sample_interval
    return run_one(json.dumps(d))
