"""Profiles a user can hold against neuron-profile (issue 27, item 6): HBM bytes read and
written, spill save and reload bytes, hardware FLOPs as the profiler counts them, engine and
DMA active time, under neuron-profile's names; ``dma_bw`` named for what it is."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from test_timing_costs import hbm, instr, matmul, opnd
from trnsim.core import costs
from trnsim.core.isa import SPILL_ATTR, Engine, Op
from trnsim.core.timing import schedule


def test_hardware_flops_count_fp32_matmuls_twice_and_transposes_once():
    """neuron-profile of trainium-kernel-fusion's fp32 attention (hw.sources.TKF_PROFILES):
    hardware_flops = 2 x (2 K M N) per fp32 matmul + 2 P F P per transpose."""
    bf16, fp32 = matmul(), matmul(dtype="float32")
    tr = instr(
        Op.NC_TRANSPOSE,
        Engine.TENSOR,
        [opnd("dst", "psum", 128, 128, "float32")],
        [opnd("data", free=128, dtype="float32")],
    )
    assert costs.hardware_flops(bf16) == (2 * 128 * 128 * 512, 0.0)
    assert costs.hardware_flops(fp32) == (2 * 2 * 128 * 128 * 512, 0.0)
    assert costs.hardware_flops(tr) == (2 * 128**3, 2 * 128**3)
    p = schedule([bf16, fp32, tr], "gen3")
    assert p.hardware_flops == 3 * 2 * 128 * 128 * 512 + 2 * 128**3
    assert p.transpose_flops == 2 * 128**3
    assert p.flops == 2 * 2 * 128 * 128 * 512  # useful FLOPs: transposes none, fp32 once


def test_trainium_kernel_fusion_profile_figures_are_reproduced_by_the_counting_rule():
    """The baseline fp32 attention at seq 1024 (neuron-profile summary: hardware_flops
    1,375,731,712, transpose_flops 301,989,888): QK 8x2 matmuls of 512 columns, PV 8x8 of 128,
    8 V transposes and 64 P transposes of 128 x 128, all fp32."""
    qk = matmul(n_mv=512, dtype="float32")
    pv = matmul(n_mv=128, dtype="float32")
    tr = instr(
        Op.NC_TRANSPOSE,
        Engine.TENSOR,
        [opnd("dst", "psum", 128, 128, "float32")],
        [opnd("data", free=128, dtype="float32")],
    )
    hw = 16 * costs.hardware_flops(qk)[0] + 64 * costs.hardware_flops(pv)[0]
    tr_f = 72 * costs.hardware_flops(tr)[1]
    assert tr_f == 301_989_888
    assert hw + tr_f == 1_375_731_712


def test_hbm_read_write_and_spill_bytes():
    load = instr(Op.DMA_COPY, Engine.DMA, [opnd("dst", free=512)], [hbm("src", 128, 512)])
    store = instr(
        Op.DMA_COPY, Engine.DMA, [hbm("dst", 128, 512, offset=2**22)], [opnd("src", free=512)]
    )
    save = store._replace(attrs=((SPILL_ATTR, "save"),), dst=(hbm("dst", 128, 512, offset=2**23),))
    reload = load._replace(
        attrs=((SPILL_ATTR, "reload"),), src=(hbm("src", 128, 512, offset=2**23),)
    )
    p = schedule([load, store, save, reload], "gen3")
    tile = 128 * 512 * 2
    assert p.hbm_read_bytes == 2 * tile and p.hbm_write_bytes == 2 * tile
    assert p.spill_save_bytes == tile and p.spill_reload_bytes == tile
    npf = p.neuron_profile()
    assert npf["spill_save_bytes"] == tile and npf["hbm_read_bytes"] == 2 * tile
    assert 0 < npf["dma_active_time_percent"] <= 1
    assert npf["dma_active_time"] == pytest.approx(p.engine("dma").busy_s)


def test_legacy_spills_are_counted_as_spill_traffic():
    import trnsim.nki as tnki
    from test_nki_legacy_spill import _inputs, all_products_then_sums

    lhs_t, rhs = _inputs(100, ml_dtypes.bfloat16)
    res = tnki.run(all_products_then_sums, lhs_t, rhs, target="gen2")
    p = schedule(res.instructions, "gen2")
    # spills to HBM (neuron-profile counts those; a PSUM tile spilled to SBUF is on chip)
    saved = sum(
        i.dst[0].nbytes
        for i in res.instructions
        if i.attr(SPILL_ATTR) == "save" and i.dst[0].memory == "hbm"
    )
    assert p.spill_save_bytes == saved > 0
    assert p.spill_reload_bytes > 0
    assert p.hbm_write_bytes >= p.spill_save_bytes + 128 * 100 * 4  # spills + the output


def test_profile_json_names_the_dma_bandwidth_and_carries_the_neuron_profile_block(tmp_path):
    from trnsim.cli.main import main

    kernel = tmp_path / "k.py"
    kernel.write_text(
        "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n"
        "@nki.jit\ndef k(x):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(t, x)\n"
        "    nisa.dma_copy(out, t)\n"
        "    return out\n\n"
        "def make_inputs(rng):\n    return (np.ones((128, 1024), np.float32),)\n"
    )
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["profile", str(kernel), "--json", "--target", "gen3"]) == 0
    out = json.loads(buf.getvalue())
    assert "hbm_bw" not in out and out["dma_bw"] == pytest.approx(16 * 23e9)
    npf = out["neuron_profile"]
    assert npf["hbm_read_bytes"] == npf["hbm_write_bytes"] == 128 * 1024 * 4
    for key in ("total_time", "spill_save_bytes", "hardware_flops", "dma_active_time_percent"):
        assert key in npf
    assert out["launch_s"] > 0 and out["total_s"] > out["launch_s"]


def test_mbu_is_relative_to_the_dma_bandwidth():
    big = [
        instr(
            Op.DMA_COPY,
            Engine.DMA,
            [opnd("dst", free=8192, offset=i * 16384)],
            [hbm("src", 128, 8192, offset=i * 2**24)],
        )
        for i in range(8)
    ]
    p = schedule(big, "gen3", launch_s=0.0)
    moved = sum(i.src[0].nbytes for i in big)
    assert p.mbu == pytest.approx(moved / p.total_s / p.dma_bw)
    assert 0.8 < p.mbu <= 1.0
    np.testing.assert_allclose(p.dma_bw, 16 * 23e9)
