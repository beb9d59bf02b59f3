"""Conformance cases: nki-library's token-generation attention (``core/attention``).

``gen_mask_tkg_hbm`` (the HBM wrapper of ``gen_mask_tkg``, in the same file) returns the mask
as ``[s_prior, B, H, s_active]`` float32 whose rows are the kernel's K-cache layout, written
here from the docstrings: the output is ``[n_tile, 128]`` rows (``n_tile = s_prior / 128``),
row ``(f, p)`` holding SBUF element ``[p, f]`` of the mask, and element ``[p, f]`` is the
mask of token
- flat cache, strided MM1 (``block_len == 0``): ``p * n_tile + f`` (iota with
  ``channel_multiplier = n_tile``);
- block cache: ``fold * 128 * block_len + p * block_len + j`` for ``f = fold * block_len + j``
  (the docstring's shuffling formula).
A token's mask is 1.0 where ``token < pos_ids[b, a]`` (standard), or, with ``start_pos``, where
``start <= token < end`` when ``start <= end`` and ``token >= start or token < end`` when the
window wraps (``start > end``, design spec section 3). With an ``active_mask``
``[s_active, B, H, s_active]``, the last ``s_active`` tokens take ``active_mask[k]`` instead.
Masks are 0/1, so they are compared exactly.
"""

from __future__ import annotations

import numpy as np

from trnsim.conformance.case import Call, Case

REPO = "nki-library"
ATTN = "src/nkilib_src/nkilib/core/attention/"
P = 128  # SBUF partitions (nl.tile_size.pmax)


# ---- gen_mask_tkg ----------------------------------------------------------------------------


def _token_of_row(s_prior: int, block_len: int) -> np.ndarray:
    """The cache token each output row of ``gen_mask_tkg_hbm`` holds (see the module doc)."""
    n_tile = s_prior // P
    f, p = np.meshgrid(np.arange(n_tile), np.arange(P), indexing="ij")  # row = f * P + p
    if block_len == 0:
        tok = p * n_tile + f
    else:
        fold, j = f // block_len, f % block_len
        tok = fold * P * block_len + p * block_len + j
    return tok.reshape(-1)


def _mask_ref(
    pos_ids, bs, q_head, s_active, s_prior, start_pos_hbm=None, block_len=0, active_mask=None, **_
):
    tok = _token_of_row(s_prior, block_len)[:, None, None]  # [s_prior, 1, 1]
    end = np.asarray(pos_ids, np.float64).reshape(bs, s_active)[None]  # [1, B, s_active]
    if start_pos_hbm is None:
        m = tok < end
    else:
        start = np.asarray(start_pos_hbm, np.float64).reshape(bs, s_active)[None]
        m = np.where(start <= end, (tok >= start) & (tok < end), (tok >= start) | (tok < end))
    out = np.broadcast_to(m[:, :, None, :], (s_prior, bs, q_head, s_active)).astype(np.float32)
    if active_mask is not None:
        for k in range(s_active):
            out[tok[:, 0, 0] == s_prior - s_active + k] = active_mask[k]
    return out


def _mask_inputs(bs, q_head, s_active, s_prior, swa: int = 0, active: bool = False, **kw):
    def make(rng):
        cache = rng.integers(1, s_prior - s_active, size=bs)
        if swa:  # per-query windows as the design spec draws them: [pos - W + 1, pos) mod len
            pos = (cache[:, None] + np.arange(s_active)[None]).astype(np.float32)
            start = np.mod(pos - swa + 1, s_prior).astype(np.float32)
            kw["start_pos_hbm"] = start.reshape(1, bs * s_active)
        else:
            pos = np.repeat(cache, s_active).astype(np.float32)
        if active:  # causal over the active tokens: query a sees active keys k <= a
            causal = (np.arange(s_active)[:, None] <= np.arange(s_active)[None]).astype(np.float32)
            kw["active_mask"] = np.ascontiguousarray(
                np.broadcast_to(causal[:, None, None, :], (s_active, bs, q_head, s_active))
            )
        return Call((pos.reshape(1, bs * s_active), bs, q_head, s_active, s_prior), dict(kw))

    return make


def _mask_case(name, notes, lnc=1, **shape) -> Case:
    return Case(
        name,
        REPO,
        ATTN + "gen_mask_tkg.py",
        "gen_mask_tkg_hbm",
        _mask_inputs(**shape),
        _mask_ref,
        grid=(lnc,) if lnc > 1 else None,
        rtol=0.0,
        atol=0.0,
        notes="0/1 masks compared exactly. " + notes,
    )


CASES: list[Case] = [
    _mask_case(
        "library/gen_mask_tkg",
        "flat cache, strided MM1: B=4, H=2, s_active=3, s_prior=512",
        bs=4,
        q_head=2,
        s_active=3,
        s_prior=512,
    ),
    _mask_case(
        "library/gen_mask_tkg_active",
        "flat cache with a causal active mask on the last s_active tokens",
        bs=2,
        q_head=2,
        s_active=4,
        s_prior=1024,
        active=True,
    ),
    _mask_case(
        "library/gen_mask_tkg_swa",
        "sliding window W=100 (windows wrap for early positions)",
        bs=4,
        q_head=1,
        s_active=3,
        s_prior=512,
        swa=100,
    ),
    _mask_case(
        "library/gen_mask_tkg_block_kv",
        "block KV cache, block_len 4 (no resize: 2048 / 4 blocks is a multiple of 128)",
        bs=2,
        q_head=2,
        s_active=2,
        s_prior=2048,
        block_len=4,
    ),
    _mask_case(
        "library/gen_mask_tkg_lnc2",
        "LNC=2, s_prior sharded (B=1): each core writes its half of the tiles",
        lnc=2,
        bs=1,
        q_head=2,
        s_active=3,
        s_prior=1024,
        active=True,
    ),
    _mask_case(
        "library/gen_mask_tkg_lnc2_batch",
        "LNC=2, batch sharded (B=8, B*H*s_active > 128)",
        lnc=2,
        bs=8,
        q_head=8,
        s_active=3,
        s_prior=512,
        active=True,
    ),
]
