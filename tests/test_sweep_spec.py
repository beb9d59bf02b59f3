"""Sweep specs, the pending-points policy, Pareto fronts and result tables (trnsim.sweep),
each without running a verb."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from trnsim.errors import UsageError
from trnsim.sweep import spec as specs
from trnsim.sweep.engine import pending
from trnsim.sweep.pareto import front
from trnsim.sweep.spec import SpecError, parse, point_id
from trnsim.sweep.table import Table
from trnsim.sweep.verbs import argv, lookup

TRAIN = {"verb": "train", "fixed": {"model": "llama-3.1-8b"}}


def _spec(**extra):
    return parse({**TRAIN, **extra}, "s.json")


# ---- points --------------------------------------------------------------------------------


def test_grid_is_the_cartesian_product_in_spec_order_with_fixed_values():
    s = _spec(grid={"chips": [64, 128], "tp": [1, 2, 4]})
    assert [p.as_dict() for p in s.points][:3] == [
        {"model": "llama-3.1-8b", "chips": 64, "tp": 1},
        {"model": "llama-3.1-8b", "chips": 64, "tp": 2},
        {"model": "llama-3.1-8b", "chips": 64, "tp": 4},
    ]
    assert len(s.points) == 6 and s.params == ("model", "chips", "tp")
    assert s.columns[:4] == ("point", "model", "chips", "tp")


def test_constraints_prune_points_and_are_counted():
    s = _spec(grid={"chips": [64, 128], "tp": [1, 2, 4, 8]}, constraints=["tp * 16 <= chips"])
    assert s.pruned == 1  # tp 8 on 64 chips
    assert all(p.as_dict()["tp"] * 16 <= p.as_dict()["chips"] for p in s.points)


def test_listed_points_join_the_grid_and_a_parameter_they_lack_is_none_in_constraints():
    s = _spec(
        grid={"chips": [64]},
        points=[{"chips": 256, "pp": 2}],
        constraints=["pp is None or pp <= 2"],
    )
    assert [p.as_dict().get("pp") for p in s.points] == [None, 2]
    assert s.params == ("model", "chips", "pp")


def test_flag_spellings_are_one_parameter_and_argv_uses_the_verbs_flags():
    s = _spec(grid={"global-batch": [512]}, fixed={"model": "llama-3.1-8b", "no_sp": True})
    assert s.params == ("model", "no_sp", "global_batch")
    cmd = argv("train", s.points[0].as_dict())
    assert cmd == ["--model=llama-3.1-8b", "--no-sp", "--global-batch=512", "--json"]


def test_profile_positionals_and_make_inputs_arguments():
    s = parse(
        {"verb": "profile", "fixed": {"file": "k.py"}, "grid": {"arg.M": [128, 256]}}, "p.json"
    )
    assert argv("profile", s.points[1].as_dict()) == ["--arg=M=256", "--json", "--", "k.py"]


def test_sampling_is_seeded_distinct_and_draws_ranges():
    data = {
        **TRAIN,
        "grid": {"chips": [64, 128, 256], "global_batch": {"min": 64, "max": 4096, "log": True,
                                                           "integer": True}},
        "sample": {"n": 10, "seed": 7},
    }  # fmt: skip
    a, b = parse(data, "s"), parse(data, "s")
    assert [p.id for p in a.points] == [p.id for p in b.points]
    assert len({p.id for p in a.points}) == 10
    gb = [p.as_dict()["global_batch"] for p in a.points]
    assert all(isinstance(g, int) and 64 <= g <= 4096 for g in gb)
    other = parse({**data, "sample": {"n": 10, "seed": 8}}, "s")
    assert [p.id for p in other.points] != [p.id for p in a.points]


def test_sampling_a_small_grid_returns_every_point_once():
    s = _spec(grid={"tp": [1, 2]}, sample={"n": 50, "seed": 0})
    assert sorted(p.as_dict()["tp"] for p in s.points) == [1, 2]


def test_point_ids_depend_on_the_values_alone():
    assert point_id({"a": 1, "b": "x"}) == point_id({"b": "x", "a": 1})
    assert point_id({"a": 1}) != point_id({"a": 2})


# ---- bad specs: one line naming the rule ---------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"grid": {"tpp": [1]}}, "train has no parameter 'tpp' (did you mean tp"),
        ({"grid": {"tp": []}}, "grid tp has no values"),
        ({"grid": {"tp": ["four"]}}, "tp: 'four' is not a number"),
        ({"grid": {"tp": [1.5]}}, "must be a whole number"),
        ({"grid": {"precision": ["bf17"]}}, "'bf17' is not one of"),
        ({"grid": {"no_sp": [3]}}, "3 is not true or false"),
        ({"grid": {"json": [True]}}, "cannot be swept"),
        ({"grid": {"tp": [1]}, "constraints": ["chipz > 1"]}, "names 'chipz'"),
        ({"grid": {"tp": [1]}, "constraints": ["__import__('os')"]}, "only min, max and abs"),
        ({"grid": {"tp": [1, 2]}, "constraints": ["tp > 8"]}, "every one of the 2 points"),
        ({"grid": {"tp": {"min": 1, "max": 8}}}, "ranges need sample"),
        ({"gird": {"tp": [1]}}, "unknown key 'gird'"),
        ({"grid": {"tp": [1]}, "pareto": {"x": "tp", "y": "mfu"}}, "lower or a higher tp"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_rule(extra, needle):
    with pytest.raises(SpecError) as info:
        _spec(**extra)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unsweepable_verb_lists_the_sweepable_ones():
    with pytest.raises(
        SpecError, match="sweepable verbs: train, infer, serve, collective, profile"
    ):
        parse({"verb": "plan"}, "s")


def test_a_spec_file_that_is_not_json_names_its_line(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"verb": "train",\n "grid": [}')
    with pytest.raises(SpecError, match=r"s\.json:2: not valid JSON"):
        specs.load(p)


def test_yaml_specs_and_relative_files_resolve_against_the_spec(tmp_path):
    (tmp_path / "k.py").write_text("# kernel\n")
    p = tmp_path / "s.yaml"
    p.write_text("verb: profile\nfixed: {file: k.py}\noutput: out.csv\n")
    s = specs.load(p)
    assert s.output == str(tmp_path / "out.csv")
    assert s.job(s.points[0]).argv[-1] == str((tmp_path / "k.py").resolve())
    assert s.points[0].as_dict() == {"file": "k.py"}  # the table keeps the value as written


# ---- the policy and Pareto fronts ------------------------------------------------------------


def test_pending_skips_what_the_table_has_and_retries_failures_when_asked():
    done = {"a": "ok", "b": "failed"}
    assert pending(["a", "b", "c"], done, retry_failed=False) == ["c"]
    assert pending(["a", "b", "c"], done, retry_failed=True) == ["b", "c"]


def test_pareto_front_keeps_the_points_nothing_beats_on_both():
    # (cost, throughput): cheaper is better, faster is better
    xy = [(1.0, 10.0), (2.0, 30.0), (2.0, 20.0), (3.0, 25.0), (4.0, 40.0), (1.0, 10.0)]
    assert front(xy, "min", "max") == [0, 1, 4]
    assert front(xy, "max", "max") == [4]
    assert front(xy, "min", "min") == [0]


def test_every_verb_declares_the_direction_of_its_headline_metrics():
    assert lookup("train").metric("tokens_per_s").better == "max"
    assert lookup("infer").metric("usd_per_million_tokens").better == "min"
    assert lookup("collective").metric("busbw_Bps").better == "max"
    assert lookup("profile").metric("total_s").better == "min"


# ---- tables --------------------------------------------------------------------------------

COLS = ("point", "tp", "status", "exit", "error", "x")


def _row(pid, tp, x, status="ok"):
    return {"point": pid, "tp": tp, "status": status, "exit": 0, "error": "", "x": x}


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_a_table_streams_rows_resumes_and_ends_in_spec_order(tmp_path, suffix):
    path = tmp_path / f"t{suffix}"
    t = Table(path, COLS)
    t.append(_row("b", 2, 0.1))
    t.append(_row("a", 1, 1 / 3))
    t.close()
    again = Table(path, COLS)
    assert again.done == {"b": "ok", "a": "ok"}
    again.append(_row("c", 3, None, "failed"))
    again.finish({"a": 0, "b": 1, "c": 2})
    final = Table(path, COLS)
    assert [r["point"] for r in final.rows] == ["a", "b", "c"]
    x = final.rows[0]["x"]
    assert float(x) == 1 / 3  # floats round-trip exactly, in every format


def test_a_row_cut_short_by_a_crash_is_dropped_and_its_point_reruns(tmp_path):
    path = tmp_path / "t.csv"
    t = Table(path, COLS)
    t.append(_row("a", 1, 0.5))
    t.close()
    with open(path, "a") as f:
        f.write("b,2,ok,0,,0.2")  # no newline: the write was cut
    again = Table(path, COLS)
    assert again.repaired and again.done == {"a": "ok"}
    with open(path) as f:
        assert [r[0] for r in csv.reader(f)] == ["point", "a"]


def test_a_table_of_another_sweep_is_refused_before_any_work(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"point": "a", "pp": 1}) + "\n")
    with pytest.raises(UsageError, match=r"holds another sweep's table.*--fresh"):
        Table(path, COLS)
    Table(path, COLS, fresh=True)  # --fresh starts it over
    assert path.read_text() == ""


def test_a_retried_point_replaces_its_row(tmp_path):
    path = tmp_path / "t.csv"
    t = Table(path, COLS)
    t.append(_row("a", 1, None, "failed"))
    t.append(_row("a", 1, 0.25))
    assert Table(path, COLS).done == {"a": "ok"}


# ---- examples -------------------------------------------------------------------------------

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples" / "sweeps").iterdir())


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_spec_loads_and_every_point_has_a_command(path):
    s = specs.load(path)
    assert s.points and not s.sampled
    for p in s.points:
        cmd = s.job(p).argv
        assert cmd[-1] == "--json" or "--" in cmd
    if s.verb.name == "profile":  # the kernel file is found next to the spec
        assert Path(s.job(s.points[0]).argv[-1]).is_file()
