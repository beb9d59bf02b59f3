"""A transposing (element-strided) DMA, ``nl.load_transpose2d``: one descriptor holds the stride
pattern, so the engine pays ``DmaSpec.element_s`` per element (a figure fitted on trn1, see
``trnsim.hw.catalog``), not a descriptor per element; a plain load and a ``[P, 1]`` column keep
their descriptor per row."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.core import costs
from trnsim.hw import core
from trnsim.nki.benchmark import record

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

TRN1 = "gen2"


@nki.jit
def transposed_rows(x):
    """x: [256, 64] fp32 in HBM; each 128-row block is read transposed ([64, 128] in SBUF) and
    stored back in that layout."""
    out = nl.ndarray((2, 64, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.load_transpose2d(x[i * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]])
        nl.store(out[i], value=t)
    return out


@nki.jit
def columns(x):
    """x: [128, 4] fp32; column 0 as a [128, 1] tile (one element per partition)."""
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x[:, 0:1]))
    return out


def _loads(ins):
    return [i for i in ins if i.opcode.value == "dma_copy" and i.src[0].memory == "hbm"]


def test_load_transpose2d_pays_element_s_per_element_not_a_descriptor():
    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    np.testing.assert_array_equal(
        tnki.run(transposed_rows, x).outputs, x.reshape(2, 128, 64).transpose(0, 2, 1)
    )
    ins = record(transposed_rows, x, target=TRN1)
    loads = _loads(ins)
    assert len(loads) == 2
    spec = core(TRN1)
    model = costs.DmaModel.for_core(spec)
    for ld in loads:
        assert costs.element_strided(ld.dst + ld.src)
        c = costs.dma_cost(ld, model)
        nbytes = 128 * 64 * 4
        assert c.nbytes == nbytes and c.row_bytes == 4  # one element contiguous in HBM
        work = 128 * 64 * spec.dma.element_s + nbytes / spec.dma.engine_bw
        assert c.engines == 8  # 64 partitions, 8 per engine
        assert c.duration_s == pytest.approx(work / 8)
        # a descriptor per element (the cost before) is 5x slower on trn1
        per_descriptor = (128 * 64 * spec.dma.descriptor_s + nbytes / spec.dma.engine_bw) / 8
        assert per_descriptor > 4 * c.duration_s
    # the stores write [64, 128] rows contiguously: not element-strided
    stores = [i for i in ins if i.opcode.value == "dma_copy" and i.dst[0].memory == "hbm"]
    assert stores and not any(costs.element_strided(s.dst + s.src) for s in stores)


def test_a_column_load_keeps_a_descriptor_per_partition():
    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    ins = record(columns, x, target=TRN1)
    (ld,) = _loads(ins)
    assert not costs.element_strided(ld.dst + ld.src)
    spec = core(TRN1)
    c = costs.dma_cost(ld, costs.DmaModel.for_core(spec))
    assert c.duration_s == pytest.approx(
        (128 * spec.dma.descriptor_s + 128 * 4 / spec.dma.engine_bw) / 16
    )


@pytest.mark.parametrize("target", ["gen3", "gen4"])
def test_without_a_figure_an_element_costs_a_descriptor(target):
    """No public figure for NeuronCore-v3/v4 (their DMA-transpose hardware is not modelled):
    the element cost is the descriptor cost, as before."""
    spec = core(target)
    assert spec.dma.element_s == spec.dma.descriptor_s
    x = np.zeros((256, 64), np.float32)
    ld = _loads(record(transposed_rows, x, target=target))[0]
    model = costs.DmaModel.for_core(spec)
    c = costs.dma_cost(ld, model)
    assert c.duration_s == pytest.approx(
        (128 * 64 * spec.dma.descriptor_s + 128 * 64 * 4 / spec.dma.engine_bw) / 8
    )
