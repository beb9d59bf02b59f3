"""nki-library's token-generation norm subkernels (``cases_library_tkg``), run unmodified from a
local checkout against the references written here; and ``Case.out_args`` (outputs written
into a caller-given buffer) on a kernel written here."""

import os
from pathlib import Path

import numpy as np
import pytest

from trnsim.conformance.cases_library_tkg import CASES, _tkg_layout
from trnsim.conformance.runner import run_checkout

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))


def test_layout_follows_the_docstring_pseudocode():
    y = np.arange(2 * 512, dtype=np.float64).reshape(2, 512)  # BxS=2, H=512: H1 = 4
    one = _tkg_layout(y, 1, False)
    assert one.shape == (128, 2, 4) and one[5, 1, 3] == y[1, 5 * 4 + 3]
    two = _tkg_layout(y, 2, False)  # each half of H: [BxS, 128, 2] -> [128, BxS, 2]
    assert two[5, 1, 1] == y[1, 5 * 2 + 1] and two[5, 1, 3] == y[1, 256 + 5 * 2 + 1]
    tp = _tkg_layout(y, 1, True)  # H viewed as (H/128, 128)
    assert tp[5, 1, 3] == y[1, 3 * 128 + 5]


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_norm_subkernels_run_unmodified_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name, profile=True)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
    assert r.profile_s is not None and r.profile_s > 0
