"""Calibration: the stored fit reproduces its published error; no per-row factors."""

import pytest

from trnsim.perf import calibrate


@pytest.fixture(scope="module")
def rep():
    return calibrate.report()


def test_every_row_is_reported(rep):
    assert sum(r.table in ("B", "B2") for r in rep.rows) == len(calibrate.TRAIN_ROWS) == 20
    assert sum(r.table == "C" for r in rep.rows) == 2 * len(calibrate.INFER_ROWS) == 72


def test_mape_within_published_bounds(rep):
    # The figures published in benchmarks/RESULTS.md (regression guard, 1 point slack).
    assert rep.model == "table"  # the default on Trn1
    assert rep.mape("B2") < 0.095
    assert rep.mape("B") < 0.125
    assert rep.mape("C", "TPOT ms") < 0.06
    assert rep.mape("C", "TTFT ms") < 0.275


def test_roofline_stays_selectable_with_its_own_fit():
    roof = calibrate.report(model="roofline")
    assert roof.model == "roofline"
    assert roof.mape("B2") < 0.12
    assert roof.mape("B") < 0.125  # 15.0% before the Tensor-engine tile padding
    assert roof.mape("C", "TPOT ms") < 0.06
    assert roof.mape("C", "TTFT ms") < 0.27


def test_table_derived_dp():
    row = calibrate.TRAIN_ROWS[1]  # Llama-3.1-70B, 32 nodes, TP32 PP8 -> DP4
    assert row.dp == 4


def test_nelder_mead_finds_a_quadratic_minimum():
    import numpy as np

    x = calibrate.nelder_mead(lambda v: float(((v - 3.0) ** 2).sum()), np.zeros(2), iters=300)
    assert x == pytest.approx([3.0, 3.0], abs=1e-3)
