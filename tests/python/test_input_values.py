"""Values that parsed but meant something else: a kernel version written as a number, a
key or a switch given twice, stacked rate suffixes, numbers no reclaimsim output holds.
Each is refused with one line naming it, never taken silently."""

import json

import pytest

from reclaimsim.metrics import metric
from reclaimsim.scenario import ScenarioError, load_scenario, parse_switches
from test_cli_errors import SMALL, cli, one_error_line, write


@pytest.mark.parametrize("how", ["set", "toml"])
def test_a_kernel_version_written_as_a_number_keeps_its_digits(how, tmp_path):
    # 6.10 and 6.1 are one float; as versions they are two kernels, and 6.10 is not modeled.
    def version(v):
        if how == "set":
            return cli("validate", write(tmp_path, "s.toml", SMALL), "--set", f"kernel.version={v}")
        return cli("validate", write(tmp_path, "s.toml", SMALL + f"[kernel]\nversion = {v}\n"))

    for v in ("6.10", "7.30"):
        p = version(v)
        assert p.returncode == 2, p.stdout
        line = one_error_line(p)
        assert f"scenario.kernel.version: {v}: not a modeled kernel version" in line, line
    for v in ("6.1", "6.12", "7.3"):
        p = version(v)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["kernel"]["version"] == v


def test_a_compare_side_keeps_the_versions_digits(tmp_path):
    p = cli("compare", write(tmp_path, "s.toml", SMALL), "--a", "kernel.version=6.1", "--b", "kernel.version=6.10",
            "--seeds", "1")
    assert p.returncode == 2
    assert "6.10: not a modeled kernel version" in one_error_line(p)


def test_a_switch_given_twice_in_one_side_is_refused():
    with pytest.raises(ScenarioError, match="rotation_cost is given twice"):
        parse_switches("rotation_cost=false,rotation_cost=true")
    assert parse_switches("rotation_cost=false, lru_add_dead_filter=true") == {
        "rotation_cost": False, "lru_add_dead_filter": True}


def test_a_json_scenario_with_a_key_given_twice_is_refused(tmp_path):
    f = write(tmp_path, "s.json", '{"duration": 1000000, "seed": 1, "seed": 99}')
    with pytest.raises(ScenarioError, match="key 'seed' given twice in one object"):
        load_scenario(f)
    p = cli("validate", f)
    assert p.returncode == 2 and "given twice" in one_error_line(p)


def test_validate_refuses_a_compare_table_whose_sides_are_the_same(tmp_path):
    p = cli("validate", write(tmp_path, "s.toml", SMALL + "[compare]\na = { rotation_cost = false }\n"
                              "b = { rotation_cost = false }\n"))
    assert p.returncode == 2
    assert "scenario.compare: a and b are the same variant set" in one_error_line(p)


def test_one_rate_suffix_at_most():
    r = {"end_ns": 2_000_000_000, "vmstat": {"pgfault": 10}}
    assert metric(r, "pgfault/s") == 5.0
    assert metric(r, "pgfault/min") == 300.0
    for name in ("pgfault/s/s", "pgfault/min/s", "pgfault/s/min"):
        with pytest.raises(ScenarioError, match="one rate suffix at most"):
            metric(r, name)


def test_report_refuses_numbers_no_output_holds(tmp_path):
    run = tmp_path / "run.json"
    p = cli("run", write(tmp_path, "s.toml", SMALL), "--set", "sample_interval=1ms", "--json", str(run), "--no-progress")
    assert p.returncode == 0, p.stderr
    good = json.loads(run.read_text())
    cols = good["timeseries"]["columns"]
    pgscan = cols.index("pgscan")
    assert good["timeseries"]["rows"], "the run has samples"

    def case(name, change):
        d = json.loads(json.dumps(good))
        change(d)
        (tmp_path / name).write_text(json.dumps(d))  # json.dumps writes NaN as NaN
        return str(tmp_path / name)

    def negative(d):
        d["timeseries"]["rows"][0][pgscan] = -1

    def nan(d):
        d["timeseries"]["rows"][0][pgscan] = float("nan")

    compare = {"a": {}, "b": {}, "scenario": "s", "seeds": 3, "locks": [],
               "metrics": [{"name": "pgscan_anon", "a_mean": 1.0, "a_std": 0.5, "b_mean": 2.0, "b_std": 0.5}]}

    def cmp(change):
        d = json.loads(json.dumps(compare))
        change(d)
        return d

    cases = {
        case("neg.json", negative): "timeseries.rows[0] column pgscan: -1, expected a number >= 0",
        case("nan.json", nan): "NaN is not a number",
        case("schema.json", lambda d: d.update(schema_version=99)): "schema_version: 99; this reclaimsim reads 1",
        write(tmp_path, "std.json", json.dumps(cmp(lambda d: d["metrics"][0].update(b_std=-5)))):
            "metrics[0].b_std: -5, expected a standard deviation >= 0",
        write(tmp_path, "seeds.json", json.dumps(cmp(lambda d: d.update(seeds=0)))):
            "seeds: 0, expected a whole number of seeds >= 1",
    }
    for arg, named in cases.items():
        p = cli("report", arg, "-o", str(tmp_path / "o.html"))
        assert p.returncode == 2, (arg, p.stderr[-500:])
        line = one_error_line(p)
        assert arg in line and named in line, line
        assert not (tmp_path / "o.html").exists()
    # The run itself is drawn.
    p = cli("report", str(run), "-o", str(tmp_path / "o.html"))
    assert p.returncode == 0, p.stderr
