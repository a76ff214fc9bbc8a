"""The cost table's layers through the CLI: `reclaimsim costs` shows each value and its
origin, `--costs FILE` and a scenario's relative costs_profile apply a profile, and bad
profiles are refused with one line."""

import json
import subprocess
import sys

import pytest


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True, **kw)


PROFILE = """name = "mine"
[costs]
fault_entry = { ns = 777, source = "timed by hand" }
access_seq = { ns = 5, source = "timed by hand" }
"""


def table(p):
    assert p.returncode == 0, p.stderr
    return {c["name"]: c for c in json.loads(p.stdout)}


def test_costs_shows_each_layer_and_its_origin(tmp_path):
    (tmp_path / "p.toml").write_text(PROFILE)
    defaults = table(cli("costs", "--json", "-"))
    t = table(cli("costs", "default", "--costs", "p.toml", "--set", "machine.profile=laptop",
                  "--set", "costs.access_seq=6", "--json", "-", cwd=tmp_path))
    assert (t["fault_entry"]["ns"], t["fault_entry"]["origin"]["layer"]) == (777, "costs_profile")
    assert t["fault_entry"]["origin"]["from"] == str(tmp_path / "p.toml")
    assert t["fault_entry"]["origin"]["source"] == "timed by hand"
    # [costs] beats the file.
    assert (t["access_seq"]["ns"], t["access_seq"]["origin"]["layer"]) == (6, "costs")
    # The laptop profile's own figure, where the file says nothing.
    laptop = {p["name"]: p for p in json.loads(cli("profiles", "--json", "-").stdout)}["laptop"]
    assert t["zram_write"]["ns"] == laptop["costs"]["zram_write"]["ns"] != defaults["zram_write"]["ns"]
    assert t["zram_write"]["origin"] == {"layer": "machine.profile", "from": "laptop",
                                         "source": laptop["costs"]["zram_write"]["source"]}
    assert t["page_zero"]["ns"] == defaults["page_zero"]["default_ns"]
    assert t["page_zero"]["origin"]["layer"] == "default"


def test_a_scenario_names_its_profile_relative_to_itself(tmp_path):
    (tmp_path / "p.toml").write_text(PROFILE)
    d = tmp_path / "sub"
    d.mkdir()
    (tmp_path / "s.toml").write_text('costs_profile = "p.toml"\nduration = "10ms"\n[machine]\ncpus = 2\n'
                                     'memory_per_node = "64M"\n[[workload]]\ntype = "usemem"\nsize = "1M"\n')
    t = table(cli("costs", str(tmp_path / "s.toml"), "--json", "-", cwd=d))
    assert t["fault_entry"]["ns"] == 777
    r = cli("run", str(tmp_path / "s.toml"), "--json", "-", cwd=d)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["costs"]["fault_entry"] == {"ns": 777, "origin": f"costs_profile {tmp_path / 'p.toml'}"}


@pytest.mark.parametrize("body, needles", [
    ('name = "x"\n[costs]\nfault_entr = { ns = 1, source = "s" }\n', ["scenario.costs_profile", "costs.fault_entr", "unknown cost name", "fault_entry"]),
    ('name = "x"\n[costs]\nfault_entry = 5\n', ["scenario.costs_profile", "not a cost profile"]),
    ("not toml [", ["scenario.costs_profile", "not a cost profile"]),
])
def test_bad_profiles_are_one_line_exit_2(tmp_path, body, needles):
    (tmp_path / "p.toml").write_text(body)
    for cmd in (["run", "default"], ["costs", "default"], ["compare", "seed-003"]):
        p = cli(*cmd, "--costs", "p.toml", cwd=tmp_path)
        assert p.returncode == 2, (cmd, p.stderr)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
        for n in needles:
            assert n in lines[0], (cmd, lines[0])


def test_missing_profile_file_and_unknown_hardware_profile(tmp_path):
    p = cli("run", "default", "--costs", "nope.toml", cwd=tmp_path)
    assert p.returncode == 2 and "nope.toml" in p.stderr and "no such file" in p.stderr, p.stderr
    p = cli("run", "default", "--costs", "/dev/null")
    assert p.returncode == 2 and "/dev/null: not a regular file" in p.stderr, p.stderr
    p = cli("costs", "default", "--costs", str(tmp_path))
    assert p.returncode == 2 and "is a directory" in p.stderr, p.stderr
    p = cli("run", "default", "--set", "machine.profile=cray")
    assert p.returncode == 2, p.stderr
    assert "scenario.machine.profile" in p.stderr and '"cray"' in p.stderr and "laptop" in p.stderr, p.stderr
