"""reclaimsim: a deterministic simulator of the Linux kernel's page reclaim.

>>> import reclaimsim
>>> r = reclaimsim.run("default", overrides=["duration=2s"])
>>> r.vmstat["pswpout"] > 0
True
"""

import os as _os
import signal as _signal
import sys as _sys

# Started as the command (the `reclaimsim` script, or `python -m reclaimsim.cli`): a Ctrl-C
# while the modules load, before the command's own handlers are set (cli._Main.main), exits
# 130 with no traceback.
# A SIGINT the process was started with ignored stays ignored.


def exit_130_while_starting(signum, frame):
    _os._exit(130)


if (_sys.argv[:1] == ["-m"] or _os.path.basename(_sys.argv[0] if _sys.argv else "") == "reclaimsim") and (
    _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
):
    _signal.signal(_signal.SIGINT, exit_130_while_starting)

from ._core import ScenarioError, SimulationError, __version__
from .compare import compare
from .result import Result
from .scenario import builtin_scenarios, load_scenario, run
from .sweep import sweep

__all__ = [
    "Result",
    "ScenarioError",
    "SimulationError",
    "__version__",
    "builtin_scenarios",
    "compare",
    "load_scenario",
    "run",
    "sweep",
]
