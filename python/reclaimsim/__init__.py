"""reclaimsim: a deterministic simulator of the Linux kernel's page reclaim.

>>> import reclaimsim
>>> r = reclaimsim.run("default", overrides=["duration=2s"])
>>> r.vmstat["pswpout"] > 0
True
"""

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
