"""Calibration: the fit is reproducible, reported row by row, and physically sensible."""

from __future__ import annotations

import pytest

from trnsim.fabric import collective_time
from trnsim.fabric.calibration import D_ROWS, D_SYSTEM, FITTED, fit, report


def test_stored_constants_are_what_the_fit_gives():
    f = fit()
    assert f.overheads.software_s == pytest.approx(FITTED.software_s, rel=1e-3)
    assert f.overheads.link_efficiency == pytest.approx(FITTED.link_efficiency, rel=1e-3)


def test_every_row_is_reported_with_its_error():
    f = report()
    assert [r.nbytes for r in f.rows] == [row[0] for row in D_ROWS]
    for r, (_, us, _) in zip(f.rows, D_ROWS, strict=True):
        assert r.measured_s == pytest.approx(us * 1e-6)
        assert r.error == pytest.approx((r.model_s - r.measured_s) / r.measured_s)
    assert f.mape < 0.10  # the additive model follows the curve to within 10 % on average
    assert f.max_error < 0.25  # and no row is off by more than 25 %


def test_fitted_constants_are_physical():
    assert 0 < FITTED.link_efficiency <= 1
    floor = min(us for _, us, _ in D_ROWS) * 1e-6
    assert 0 < FITTED.software_s < floor  # the overhead is part of the smallest measured time


def test_published_busbw_is_reproduced_at_the_large_sizes():
    """Published busbw of the last rows within 10 % through the public API. nccom-test's "GB/s"
    column is GiB/s: 67,108,864 B / 1,214 us = 55.3e9 B/s = 51.48 GiB/s, the printed value."""
    for nbytes, _, busbw_gbs in D_ROWS[-3:]:
        r = collective_time("all-reduce", nbytes, 2, D_SYSTEM)
        assert r.busbw == pytest.approx(busbw_gbs * 2**30, rel=0.10)
