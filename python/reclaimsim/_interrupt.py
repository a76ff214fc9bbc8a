"""Ctrl-C during long calls that do not look at Python's signals.

A compiled call that releases the GIL (the core's trace_gen and trace_count, libCacheSim's
replay) runs until it returns; Python raises KeyboardInterrupt only after it. Run in a
helper thread, it leaves the main thread waiting where a signal is seen at once: Ctrl-C
raises KeyboardInterrupt there, and the helper thread (a daemon) ends with the process.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


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
