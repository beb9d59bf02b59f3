"""Embedding lookup and embedding row update with indirect DMA (gather / scatter).

``embedding_gather(table [V, D] bf16, token_ids [N, 1] int32) -> [N, D] fp32``: each tile of
128 token ids is DMA'd into SBUF, then one ``dma_copy`` gathers the 128 table rows they name
(``table.ap(..., vector_offset=ids, indirect_dim=0)``: the indices are read at run time) and
converts bf16 to fp32 on the way (DMA dtype conversion).

``embedding_update(table [V, D] fp32, token_ids [N, 1] int32, delta [N, D] fp32) -> [V, D]``:
``out = table; out[ids] += delta`` (ids unique, as a sparse optimizer step would use): gather
the rows, add on the Vector engine, scatter them back with ``vector_offset`` on the ``dst``.

Source of the API: SDK ``nki/api/nki/isa/__init__.py`` ``dma_copy`` docstring ("Indirect
gather/scatter example"); trnsim's rules: ``trnsim.core.indirect``.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

KERNEL = "embedding_gather"
TOLERANCE = {"rtol": 0.0, "atol": 0.0}  # a gather and an fp32 add are exact
TOLERANCE_embedding_update = {"rtol": 0.0, "atol": 0.0}


def _ids_tile(token_ids, i, P):
    ids = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ids, src=token_ids[i * P : (i + 1) * P, :])
    return ids


@nki.jit
def embedding_gather(table, token_ids):
    D = table.shape[1]
    N = token_ids.shape[0]
    P = nl.tile_size.pmax
    out = nl.ndarray((N, D), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(N // P):
        ids = _ids_tile(token_ids, i, P)
        rows = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(
            dst=rows, src=table.ap(pattern=[[D, P], [1, D]], vector_offset=ids, indirect_dim=0)
        )
        nisa.dma_copy(dst=out[i * P : (i + 1) * P, :], src=rows)
    return out


@nki.jit
def embedding_update(table, token_ids, delta):
    V, D = table.shape
    N = token_ids.shape[0]
    P = nl.tile_size.pmax
    out = nl.ndarray((V, D), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=table)
    for i in nl.affine_range(N // P):
        ids = _ids_tile(token_ids, i, P)
        rows = nl.ndarray((P, D), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(
            dst=rows, src=out.ap(pattern=[[D, P], [1, D]], vector_offset=ids, indirect_dim=0)
        )
        d = nl.ndarray((P, D), dtype=delta.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=delta[i * P : (i + 1) * P, :])
        nisa.tensor_tensor(dst=rows, data1=rows, data2=d, op=nl.add)
        nisa.dma_copy(
            dst=out.ap(pattern=[[D, P], [1, D]], vector_offset=ids, indirect_dim=0), src=rows
        )
    return out


def make_inputs_embedding_gather(rng, V=1000, D=64, N=256):
    table = rng.standard_normal((V, D)).astype(ml_dtypes.bfloat16)
    ids = rng.integers(0, V, (N, 1)).astype(np.int32)
    return table, ids


def golden_embedding_gather(table, token_ids):
    return table[token_ids[:, 0]].astype(np.float32)


def make_inputs_embedding_update(rng, V=1000, D=64, N=256):
    table = rng.standard_normal((V, D)).astype(np.float32)
    ids = rng.permutation(V)[:N].reshape(N, 1).astype(np.int32)  # unique rows
    delta = (rng.standard_normal((N, D)) * 0.1).astype(np.float32)
    return table, ids, delta


def golden_embedding_update(table, token_ids, delta):
    out = table.copy()
    out[token_ids[:, 0]] += delta
    return out


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    args = make_inputs_embedding_gather(rng)
    print("gather exact:", np.array_equal(embedding_gather(*args), golden_embedding_gather(*args)))
    args = make_inputs_embedding_update(rng)
    print("update exact:", np.array_equal(embedding_update(*args), golden_embedding_update(*args)))
