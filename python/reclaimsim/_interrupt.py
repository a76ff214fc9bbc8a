"""Ctrl-C during long calls that do not look at Python's signals, and SIGTERM/SIGHUP
handled as Ctrl-C is.

A compiled call that releases the GIL (the core's trace_gen and trace_count, libCacheSim's
replay) runs until it returns; Python raises KeyboardInterrupt only after it. Run in a
helper thread, it leaves the main thread waiting where a signal is seen at once: Ctrl-C
raises KeyboardInterrupt there, and the helper thread (a daemon) ends with the process.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable


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
