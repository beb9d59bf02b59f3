"""nki-library's MoE router (``cases_library_moe``), run unmodified from a local checkout
against the references written here (outputs written into caller-given HBM buffers)."""

import os
from pathlib import Path

import pytest

from trnsim.conformance.cases_library_moe import CASES
from trnsim.conformance.runner import run_checkout

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_router_runs_unmodified_and_matches(name):
    _, _, results = run_checkout(LIBRARY, only=name, profile=True)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
    assert r.profile_s is not None and r.profile_s > 0
