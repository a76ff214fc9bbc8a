"""The Python package's modules share only public names: no module of python/reclaimsim
imports another's `_`-prefixed name (nor reaches one through a sibling module it
imported), so each mechanism has one place and a private helper can change without
breaking a neighbour. The compiled core, `_core`, is the package's own extension and
exempt as a module name."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "reclaimsim"
SIBLINGS = {p.stem for p in PACKAGE.glob("*.py")} | {"_core"}
EXEMPT = {"_core"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in EXEMPT


def _sibling(node: ast.ImportFrom) -> str | None:
    """The package module an import is from (`from .x import`, `from reclaimsim.x
    import`), "" for the package itself (`from . import x`), None for anything else."""
    if node.level == 1:
        return node.module or ""
    if node.level == 0 and node.module and (node.module == "reclaimsim" or node.module.startswith("reclaimsim.")):
        return node.module.removeprefix("reclaimsim").removeprefix(".")
    return None


def private_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found, modules = [], set()
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom):
            mod = _sibling(node)
            if mod is None:
                continue
            if any(_private(part) for part in mod.split(".") if part):
                found.append(f"{where}: from {'.' * node.level}{mod} (a private module)")
            for alias in node.names:
                if mod == "" and alias.name in SIBLINGS:
                    modules.add(alias.asname or alias.name)
                    if _private(alias.name):
                        found.append(f"{where}: imports the private module {alias.name}")
                elif _private(alias.name):
                    found.append(f"{where}: imports {alias.name} from {mod or 'the package'}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("reclaimsim.") and any(_private(p) for p in alias.name.split(".")):
                    found.append(f"{where}: imports {alias.name}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and _private(node.attr)):
            found.append(f"{path.name}:{node.lineno}: uses {node.value.id}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    files = sorted(PACKAGE.glob("*.py"))
    assert len(files) > 10
    found = [f for p in files for f in private_uses(p)]
    assert found == [], "\n".join(found)


def test_the_check_finds_each_kind_of_use(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(
        "from .compare import _fmt, metric\n"
        "from ._interrupt import Terminated\n"
        "from . import vm, _core\n"
        "from reclaimsim.scenario import _short\n"
        "import reclaimsim._private\n"
        "def f():\n"
        "    return vm._has_proactive_counters(0), _core.run_json('')\n"
    )
    found = private_uses(p)
    assert len(found) == 5, found
    assert any("_fmt" in f for f in found) and any("_interrupt" in f for f in found)
    assert any("_short" in f for f in found) and any("vm._has_proactive_counters" in f for f in found)
