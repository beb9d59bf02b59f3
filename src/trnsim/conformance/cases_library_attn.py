"""Conformance cases: nki-library's token-generation attention (``core/attention``) and the
fused attention block (``experimental/transformer/attention_block_tkg``).

``attention_tkg`` is a subkernel taking the caller's SBUF manager (and, in some configurations,
SBUF-resident q/k and outputs): ``Case.driver`` wraps it the way the library's tests do, fresh
in each LNC program. Its reference is softmax(K q * scale + mask) V over the documented cache
layouts (flat [B, 1, s, d] or [B, 1, d, s], block cache through the active blocks table), the
active tokens written over the last s_active cache positions, replaying the kernel's
documented roundings (see ``_ATTN_TOL``). ``attention_block_tkg`` adds the QKV projection,
RoPE from given cos/sin, the KV-cache update and the output projection; its package imports
torch, so those cases are ``external`` here (tests/test_conf_attn.py runs them with that import
stubbed).

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

import functools

import ml_dtypes
import numpy as np

from trnsim.conformance.case import Call, Case
from trnsim.conformance.refs import bf16, f64, randn

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
        if swa:  # batch 0 early enough that its window starts before the cache does
            cache[0] = rng.integers(1, swa - s_active)
        if swa:  # per-query windows as the design spec draws them: [pos - W + 1, pos), the
            # start modulo the length (flat cache, wraps) or clamped to 0 (block cache)
            pos = (cache[:, None] + np.arange(s_active)[None]).astype(np.float32)
            if kw.get("block_len", 0):
                start = np.maximum(pos - swa + 1, 0).astype(np.float32)
            else:
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
        "library/gen_mask_tkg_block_kv_swa",
        "block KV cache (block_len 4) with a sliding window of 100",
        bs=2,
        q_head=2,
        s_active=2,
        s_prior=2048,
        block_len=4,
        swa=100,
    ),
    _mask_case(
        "library/gen_mask_tkg_lnc2_block_kv",
        "LNC=2, s_prior sharded, block KV cache (block_len 2), active mask",
        lnc=2,
        bs=1,
        q_head=2,
        s_active=3,
        s_prior=1024,
        block_len=2,
        active=True,
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


# ---- attention_tkg ---------------------------------------------------------------------------


def _attn_caller(kernel):
    """``attention_tkg``'s caller (its contract, as the library's tests call it): an SBUF
    manager over the whole SBUF but 16 KiB with one scope open; with ``qk_in_sb`` the HBM q and
    k_active are first copied to SBUF tiles of the same shapes; with ``out_in_sb`` /
    ``k_out_in_sb`` the kernel writes SBUF tiles that are then copied to the HBM outputs."""

    def attention_tkg_caller(
        q,
        k_active,
        v_active,
        k_prior,
        v_prior,
        mask,
        out,
        cfg,
        inv_freqs=None,
        rope_pos_ids=None,
        start_pos_ids=None,
        sink=None,
        active_blocks_table=None,
        k_out=None,
    ):
        import nki.isa as nisa
        import nki.language as nl
        from nkilib.core.utils.allocator import SbufManager
        from nkilib.core.utils.logging import Logger

        sbm = SbufManager(0, nl.tile_size.total_available_sbuf_size - 16 * 1024, Logger("SBM"))
        sbm.open_scope()

        def to_sbuf(t):
            t_sb = sbm.alloc_stack(t.shape, dtype=t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(t_sb, t)
            return t_sb

        if cfg.qk_in_sb:
            q, k_active = to_sbuf(q), to_sbuf(k_active)
        out_k = sbm.alloc_stack(out.shape, dtype=out.dtype) if cfg.out_in_sb else out
        k_out_k = k_out
        if k_out is not None and cfg.k_out_in_sb:
            k_out_k = sbm.alloc_stack(k_out.shape, dtype=k_out.dtype)
        kernel(
            q,
            k_active,
            v_active,
            k_prior,
            v_prior,
            mask,
            out_k,
            cfg,
            sbm,
            inv_freqs,
            rope_pos_ids,
            start_pos_ids,
            sink,
            active_blocks_table,
            k_out_k,
        )
        if cfg.out_in_sb:
            nisa.dma_copy(out, out_k)
        if k_out is not None and cfg.k_out_in_sb:
            nisa.dma_copy(k_out, k_out_k)
        sbm.close_scope()

    return attention_tkg_caller


def _reduce_angle(emb: np.ndarray, shift: float) -> np.ndarray:
    """``((emb + shift) % 2pi) - pi`` in fp32 steps, as ``_rope`` documents it (``_modulo``:
    ``q = round(x / y - 0.5)``, ``x - q * y``): the argument the sine sees."""
    f32 = np.float32
    two_pi = f32(2.0 * np.pi)
    x = emb + f32(shift)
    q = np.round(x * f32(1.0 / (2.0 * np.pi)) + f32(-0.5))
    return (x - q * two_pi) + f32(-np.pi)


def _rope(x: np.ndarray, pos: np.ndarray, inv_freqs: np.ndarray, rot_dtype=np.float32):
    """Rotate-half RoPE of ``x[B, N, s_active, d]`` at positions ``pos[B, s_active]``
    (``_apply_rope`` / ``_rope`` docstrings), in fp32: angle ``inv_freqs[i] * pos`` for
    i < d/2, repeated for the second half; sin and cos (as sin of angle + pi/2) of the
    range-reduced angle; ``x * cos + cat(-x2, x1) * sin``. ``_apply_rope`` keeps
    ``cat(-x2, x1) * sin`` in a tile of x's dtype: fp32 for x loaded from HBM, x's own
    (``rot_dtype``) for x given in SBUF."""
    d = x.shape[-1]
    emb = inv_freqs[:, 0][None, None, :] * pos[:, :, None].astype(np.float32)  # fp32
    emb = np.concatenate([emb, emb], axis=-1)[:, None]  # [B, 1, s_active, d]
    sin = np.sin(f64(_reduce_angle(emb, np.pi))).astype(np.float32)
    cos = np.sin(f64(_reduce_angle(emb, 1.5 * np.pi))).astype(np.float32)
    x = np.asarray(x).astype(np.float32)
    rot = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], axis=-1)
    return x * cos + (rot * sin).astype(rot_dtype).astype(np.float32)


FA_TILE = 8192  # attention_tkg_utils._FA_TILE_SIZE: s_prior above it is tiled (flash attention)


def _flash(scores: np.ndarray, v: np.ndarray, io, shards: int = 1) -> np.ndarray:
    """Flash attention over s_prior tiles of ``FA_TILE`` (the pseudocode's FA loop; the
    ``_fa_update_*`` docstrings): running max m; per tile exp(score - m) into io dtype, its
    sum and its PV product (fp32); before adding a tile, the running sum and output are
    scaled by exp(m_prev - m) (fp32); at the end output * 1 / sum. ``scores[B, H, s, sa]``.
    With s_prior sharded over ``shards`` cores each runs this on its contiguous part; on the
    last tile the running max becomes the cores' global max (``_fa_update_running_max``:
    "gather and sync global max"), the sums are added across cores and each core's output
    times 1 / global sum is added to the other's (``_gather_and_store_output``)."""
    f32 = np.float32
    n = scores.shape[2] // shards
    starts = list(range(0, n, FA_TILE))
    m = [None] * shards
    run = [None] * shards
    acc = [None] * shards
    for i, t0 in enumerate(starts):
        tiles = [scores[:, :, c * n + t0 : c * n + min(t0 + FA_TILE, n)] for c in range(shards)]
        m_new = [
            t.max(axis=2) if m[c] is None else np.maximum(m[c], t.max(axis=2))
            for c, t in enumerate(tiles)
        ]
        if shards > 1 and i == len(starts) - 1:
            m_new = [np.maximum.reduce(m_new)] * shards
        for c, t in enumerate(tiles):
            p = f64(np.exp(t - m_new[c][:, :, None]).astype(io))
            t_sum = p.sum(axis=2).astype(f32)
            vt = v[:, c * n + t0 : c * n + min(t0 + FA_TILE, n)]
            t_pv = np.einsum("bhta,btd->bhda", p, vt).astype(f32)
            if m[c] is None:
                run[c], acc[c] = t_sum, t_pv
            else:
                corr = np.exp(m[c] - m_new[c]).astype(f32)
                run[c] = run[c] * corr + t_sum
                acc[c] = acc[c] * corr[:, :, None, :] + t_pv
            m[c] = m_new[c]
    recip = f32(1) / np.add.reduce(run)
    return np.add.reduce([a * recip[:, :, None, :] for a in acc])


def _attn_tkg_ref(
    q,
    k_active,
    v_active,
    k_prior,
    v_prior,
    mask,
    out,
    cfg,
    inv_freqs=None,
    rope_pos_ids=None,
    start_pos_ids=None,
    sink=None,
    active_blocks_table=None,
    k_out=None,
    lnc=1,
    **_,
):
    io = q.dtype
    b, h, sa, s, d = cfg.bs, cfg.q_head, cfg.s_active, cfg.curr_sprior, cfg.d_head
    if cfg.qk_in_sb:  # [d, B*H*s_active] and [d, B*s_active] -> [B, N, s_active, d]
        q = q.reshape(d, b, h, sa).transpose(1, 2, 3, 0)
        k_active = k_active.reshape(d, b, 1, sa).transpose(1, 2, 3, 0)
    if cfg.fuse_rope:  # RoPE'd (fp32) into io-dtype SBUF tiles; then q *= 1/sqrt(d)
        rot = io if cfg.qk_in_sb else np.float32
        qr = _rope(q, rope_pos_ids, inv_freqs, rot).astype(io)
        qs = (f64(qr) * (1 / np.sqrt(d))).astype(io)  # "Q is scaled with 1/sqrt(d_head)"
        kr = _rope(k_active, rope_pos_ids, inv_freqs, rot).astype(io)  # [B, 1, s_active, d]
    else:  # "Q is scaled with 1/sqrt(d_head) iff. cfg.fuse_rope"
        qs, kr = q, k_active
    k_new = f64(kr)[:, 0]
    if active_blocks_table is not None:  # batch b's token i*block_len + j: block table[b, i]
        kk = f64(k_prior)[active_blocks_table.astype(np.int64)].reshape(b, s, d)
        vv = f64(v_prior)[active_blocks_table.astype(np.int64)].reshape(b, s, d)
    else:
        kp = f64(k_prior)[:b, 0]
        kk = kp[:, :s] if cfg.tp_k_prior else kp[:, :, :s].transpose(0, 2, 1)  # [B, s, d]
        vv = f64(v_prior)[:b, 0, :s].copy()
        kk = kk.copy()
    kk[:, s - sa :] = k_new  # active tokens sit at the end of the prior buffer
    vv[:, s - sa :] = f64(v_active)[:, 0]
    if cfg.use_pos_id:  # prior mask from positions, the given active mask on the last s_active
        tok = np.arange(s)[:, None, None, None]
        if start_pos_ids is None:  # gen_mask_tkg: token < the batch's (first) position
            m = tok < rope_pos_ids[None, :, None, :1]
        else:  # per-query window [start, end), wrapping when start > end
            st, en = start_pos_ids[None, :, None, :], rope_pos_ids[None, :, None, :]
            m = np.where(st <= en, (tok >= st) & (tok < en), (tok >= st) | (tok < en))
        m = np.broadcast_to(m, (s, b, h, sa)).copy()
        m[s - sa :] = mask.astype(bool)
    else:
        m = mask.astype(bool)
    scores = np.einsum("btd,bhad->bhta", kk, f64(qs))
    scores = np.where(m.transpose(1, 2, 0, 3), scores, -np.inf)
    if sink is not None:  # one more logit per head
        sk = np.broadcast_to(f64(sink).reshape(1, h, 1, 1), (b, h, 1, sa))
        scores = np.concatenate([scores, sk], axis=2)
    # scores in fp32 (PSUM); exp(score - max) written to an io-dtype tile that both the sum
    # and the PV matmul read; the PV sums (fp32) are scaled by 1 / sum
    scores = f64(scores.astype(np.float32))
    # "Batch sharding: Used when batch is even AND (s_prior < 256 OR b*q_head*s_active > 128);
    # Sequence sharding: Used when s_prior >= 256 and batch sharding criteria not met"
    batch_sharded = b % 2 == 0 and (s < 256 or b * h * sa > 128)
    shards = 2 if lnc == 2 and not batch_sharded and s >= 256 else 1
    if s // shards <= FA_TILE:
        mx = scores.max(axis=2, keepdims=True)
        p = f64(np.exp(scores - mx).astype(io))
        if sink is not None:  # the sink's exp(sink - max) joins the fp32 sum unrounded
            p[:, :, s:] = np.exp(f64((scores[:, :, s:] - mx).astype(np.float32))).astype(np.float32)
        o = np.einsum("bhta,btd->bhda", p[:, :, :s], vv) / p.sum(axis=2)[:, :, None]
    else:
        o = _flash(scores, vv, io, shards)
    o = o.astype(io)  # [B, H, d, s_active]
    if cfg.out_in_sb:  # [d, B*H*s_active]
        o = o.transpose(2, 0, 1, 3).reshape(d, b * h * sa)
    if not cfg.fuse_rope:
        return o
    k_o = kr.transpose(0, 1, 3, 2)  # k_out [B, 1, d, s_active]
    if cfg.k_out_in_sb:  # [d, B*s_active]
        k_o = k_o[:, 0].transpose(1, 0, 2).reshape(d, b * sa)
    return o, k_o


def _attn_tkg_inputs(
    b, h, sa, s, full, d, dtype=bf16, kv_dtype=None, sink=False, swa=0, block_len=0, **flags
):
    kv = dtype if kv_dtype is None else kv_dtype  # K, V (active and cache) dtype

    def make(rng):
        from nkilib.core.attention.attention_tkg_utils import AttnTKGConfig

        cfg = AttnTKGConfig(b, h, sa, s, full, d, block_len, **flags)
        if cfg.qk_in_sb:  # the caller copies them to SBUF as they are
            q = randn(rng, (d, b * h * sa), dtype)
            k_active = randn(rng, (d, b * sa), kv)
        else:
            q = randn(rng, (b, h, sa, d), dtype)
            k_active = randn(rng, (b, 1, sa, d), kv)
        v_active = randn(rng, (b, 1, sa, d), kv)
        table = None
        if block_len:  # a cache of full // block_len blocks per batch, in shuffled order
            n_blocks = b * full // block_len
            k_prior = randn(rng, (n_blocks, block_len, d), kv)
            v_prior = randn(rng, (n_blocks, block_len, d), kv)
            table = rng.permutation(n_blocks)[: b * s // block_len].reshape(b, -1)
            table = table.astype(np.uint32)
        else:
            kshape = (b, 1, full, d) if cfg.tp_k_prior else (b, 1, d, full)
            k_prior = randn(rng, kshape, kv)
            v_prior = randn(rng, (b, 1, full, d), kv)
        pos = rng.integers(1, s - sa, size=b)
        if swa:  # batch 0 early enough that its windows wrap around the cache
            pos[0] = rng.integers(1, swa - sa)
        rope_pos = (pos[:, None] + np.arange(sa)[None]).astype(np.float32)  # token a at pos + a
        start_pos = None
        if swa:  # windows of swa tokens in the circular cache (wrap for early positions)
            start_pos = np.mod(rope_pos - swa + 1, s).astype(np.float32)
        causal = (np.arange(sa)[:, None] <= np.arange(sa)[None]).astype(np.uint8)  # key <= query
        if cfg.use_pos_id:
            mask = np.ascontiguousarray(np.broadcast_to(causal[:, None, None], (sa, b, h, sa)))
        else:  # pre-generated [s_prior, B, H, s_active], tokens in order
            tok = np.arange(s)[:, None, None, None]
            mask = np.broadcast_to(tok < pos[None, :, None, None], (s, b, h, sa)).astype(np.uint8)
            mask[s - sa :] = causal[:, None, None]
        inv_freqs = rng.random((d // 2, 1)).astype(np.float32) if cfg.fuse_rope else None
        out = np.zeros((d, b * h * sa) if cfg.out_in_sb else (b, h, d, sa), dtype)
        k_out = None
        if cfg.fuse_rope:
            k_out = np.zeros((d, b * sa) if cfg.k_out_in_sb else (b, 1, d, sa), dtype)
        sk = randn(rng, (h, 1), np.float32) if sink else None
        args = (
            q,
            k_active,
            v_active,
            k_prior,
            v_prior,
            mask,
            out,
            cfg,
            inv_freqs,
            rope_pos,
            start_pos,
            sk,
            table,
            k_out,
        )
        return Call(args)

    return make


def _attn_case(name, notes, lnc=1, rtol=0.0, atol=0.0, **shape) -> Case:
    fuse = shape.get("fuse_rope", False)
    return Case(
        name,
        REPO,
        ATTN + "attention_tkg.py",
        "attention_tkg",
        _attn_tkg_inputs(**shape),
        functools.partial(_attn_tkg_ref, lnc=lnc),
        grid=(lnc,) if lnc > 1 else None,
        out_args=(6, 13) if fuse else (6,),
        driver=_attn_caller,
        rtol=rtol,
        atol=atol,
        notes=notes,
    )


BF16_ULP = 2.0**-7  # one bf16 ulp relative to the binade's lower end
F32_ULP = 2.0**-23
_ATTN_TOL = (
    "The reference replays the kernel's documented roundings: RoPE in fp32 with the range "
    "reduction _rope documents (rotate_half * sin kept in q's dtype when q is given in SBUF), "
    "q and k rounded to the io dtype (q then scaled by 1/sqrt(d) into it), scores in fp32, "
    "exp(score - max) into an io-dtype tile that the sum and the PV matmul read, a sink's "
    "exp(sink - max) added to that sum in fp32, (P V) / sum rounded to the io dtype (flash "
    "attention: per-tile running max, sum and output rescaled in fp32); bf16 cases match bit "
    "for bit on seeds 0-2. Tolerance: one ulp of the io dtype relative (the hardware's exp/sin "
    "last bits are unspecified) plus s_prior * 4 * 2^-24 absolute: the fp32 PV sum's order is "
    "unspecified, s_prior terms whose |p v| / sum(p) add up to at most max|v| ~ 4 (normal "
    "draws) give at most that much apart, which matters only where the weighted average "
    "cancels to near zero"
)
COMMON = dict(b=2, h=2, sa=3, s=256, full=512, d=64)


def _attn(name, notes, **kw) -> Case:
    shape = {**COMMON, **kw}
    ulp = F32_ULP if shape.get("dtype") == np.float32 else BF16_ULP  # one ulp of the output
    return _attn_case(
        name, notes + ". " + _ATTN_TOL, rtol=ulp, atol=shape["s"] * 4 * 2.0**-24, **shape
    )


CASES += [
    _attn(
        "library/attention_tkg",
        "bf16 B=2 H=2 s_active=3 s_prior=256 (cache buffer 512) d=64; fused RoPE, mask made "
        "from position ids, K prior [B, 1, s, d]",
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
    ),
    _attn(
        "library/attention_tkg_k_dT",
        "as library/attention_tkg with K prior [B, 1, d, s] (tp_k_prior=False)",
        tp_k_prior=False,
        use_pos_id=True,
        fuse_rope=True,
    ),
    _attn(
        "library/attention_tkg_mask_in",
        "pre-generated mask [s_prior, B, H, s_active] (use_pos_id=False)",
        tp_k_prior=True,
        use_pos_id=False,
        fuse_rope=True,
    ),
    _attn(
        "library/attention_tkg_sink",
        "with an attention sink [H, 1] (one more logit per head in the softmax)",
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
        sink=True,
    ),
    _attn(
        "library/attention_tkg_swa",
        "sliding window of 64 tokens (start_pos_ids; windows wrap for early positions)",
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
        swa=64,
    ),
    _attn(
        "library/attention_tkg_nonstrided",
        "strided_mm1=False (K tiles of consecutive tokens)",
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
        strided_mm1=False,
    ),
    _attn(
        "library/attention_tkg_d128_sa1",
        "d=128, s_active=1, B=4, H=4, s_prior=512",
        b=4,
        h=4,
        sa=1,
        s=512,
        full=512,
        d=128,
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
    ),
    _attn(
        "library/attention_tkg_lnc2",
        "LNC=2, s_prior sharded (B=2, B*H*s_active <= 128, s_prior >= 256)",
        lnc=2,
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
    ),
    _attn(
        "library/attention_tkg_qk_sb",
        "q, k_active given in SBUF without RoPE (qk_in_sb; q unscaled), mask made in-kernel",
        tp_k_prior=True,
        use_pos_id=True,
        qk_in_sb=True,
    ),
    _attn(
        "library/attention_tkg_all_sb",
        "q, k in SBUF, fused RoPE, out and k_out left in SBUF ([d, B*H*s_active], [d, B*s_active])",
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
        qk_in_sb=True,
        k_out_in_sb=True,
        out_in_sb=True,
    ),
    _attn(
        "library/attention_tkg_flash",
        "s_prior=8704 > 8K: flash attention over two s_prior tiles (8192 + 512) with running "
        "max and sum; B=1 H=2 s_active=2",
        b=1,
        h=2,
        sa=2,
        s=8704,
        full=8704,
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
    ),
    _attn(
        "library/attention_tkg_lnc2_flash",
        "LNC=2, s_prior sharded, s_prior=16640: each core's 8320 > 8K tokens run flash "
        "attention (8192 + 128) and the cores exchange running max, sum and output; "
        "B=1 H=2 s_active=2",
        lnc=2,
        b=1,
        h=2,
        sa=2,
        s=16640,
        full=16640,
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
    ),
    _attn(
        "library/attention_tkg_block_kv",
        "block KV cache: 16-token blocks [n_blocks, 16, d] picked by a shuffled active blocks "
        "table [B, 16] (needs q, k in SBUF, K not strided)",
        block_len=16,
        tp_k_prior=True,
        strided_mm1=False,
        use_pos_id=True,
        qk_in_sb=True,
    ),
    _attn(
        "library/attention_tkg_block_kv_rope",
        "block KV cache with fused RoPE, 32-token blocks, s_prior=512",
        s=512,
        full=512,
        block_len=32,
        tp_k_prior=True,
        strided_mm1=False,
        use_pos_id=True,
        qk_in_sb=True,
        fuse_rope=True,
    ),
    _attn(
        "library/attention_tkg_fp32_sink",
        "fp32 q, K, V with a sink, B=4 H=4 s_active=1 (the library's fp32 sink tests); every "
        "rounding above is then to fp32",
        b=4,
        h=4,
        sa=1,
        dtype=np.float32,
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
        sink=True,
    ),
    _attn(
        "library/attention_tkg_lnc2_sink",
        "LNC=2, s_prior sharded, with a sink (the max and sum are exchanged between the cores)",
        lnc=2,
        s=512,
        tp_k_prior=True,
        use_pos_id=True,
        fuse_rope=True,
        sink=True,
    ),
    _attn(
        "library/attention_tkg_lnc2_block_kv",
        "LNC=2, s_prior sharded, block KV cache (16-token blocks, s_prior=512)",
        lnc=2,
        s=512,
        block_len=16,
        tp_k_prior=True,
        strided_mm1=False,
        use_pos_id=True,
        qk_in_sb=True,
    ),
    _attn(
        "library/attention_tkg_fp8_kv",
        "FP8 KV cache: K, V (cache and active) float8_e4m3, q bf16 in SBUF, no RoPE (the "
        "kernel's FP8 constraints); fp8 values are exact in the bf16/fp32 arithmetic",
        kv_dtype=np.dtype(ml_dtypes.float8_e4m3),
        tp_k_prior=True,
        use_pos_id=True,
        qk_in_sb=True,
    ),
    _attn(
        "library/attention_tkg_lnc2_batch",
        "LNC=2, batch sharded (s_prior=128 < 256; fused RoPE needs an unsharded batch, so q, k in "
        "SBUF without RoPE)",
        lnc=2,
        s=128,
        full=256,
        tp_k_prior=True,
        use_pos_id=True,
        qk_in_sb=True,
    ),
]


# ---- attention_block_tkg (experimental/transformer) --------------------------------------------

BLOCK = "src/nkilib_src/nkilib/experimental/transformer/attention_block_tkg.py"


def _rope_halves(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """``RoPE_sbuf`` (contiguous halves) on ``x[..., d]`` with ``cos``/``sin`` [..., d/2]:
    ``out1 = x1 cos - x2 sin``, ``out2 = x2 cos + x1 sin``, each product and each sum
    rounded to x's dtype (its docstring's formula; the intermediates are x-dtype tiles)."""
    io = x.dtype
    h = x.shape[-1] // 2
    x1, x2 = f64(x[..., :h]), f64(x[..., h:])
    c, s = f64(cos), f64(sin)

    def r(v):
        return f64(v.astype(io))

    o1 = r(r(x1 * c) - r(x2 * s))
    o2 = r(r(x2 * c) + r(x1 * s))
    return np.concatenate([o1, o2], axis=-1).astype(io)


def _qkv_tkg(x: np.ndarray, w: np.ndarray, lnc: int = 1) -> np.ndarray:
    """``qkv_tkg``'s projection ``x[BxS, H] @ w[H, I]`` as its ``_process_h_block`` /
    ``_accumulate_psum_to_output`` docstrings describe it: H viewed as (128, H1) (h = h0 * H1 +
    h1); with B*S <= 32 the PE array is tiled 4 ways (``array_tiling_factor``), tile f summing
    (fp32) the h1 = f mod 4 slices; the output tile (x's dtype) starts at zero and each tile's
    sum is added to it in turn, rounding each time. With LNC=2 each core does this over its
    contiguous half of H (``_input_load``: H as (shards, 128, H1 / shards)) and the two
    results are added (``_compute_qkv_i_block``: sendrecv, then add, rounding). One H block
    per core (H <= 2048), no bias."""
    if lnc > 1:
        half = x.shape[1] // lnc
        parts = [
            _qkv_tkg(x[:, c * half : (c + 1) * half], w[c * half : (c + 1) * half])
            for c in range(lnc)
        ]
        out = parts[0]
        for part in parts[1:]:
            out = (f64(out) + f64(part)).astype(x.dtype)
        return out
    io = x.dtype
    bxs, hid = x.shape
    h1 = hid // 128
    assert hid <= 2048 and bxs <= 32, "the reference models one H block and 32-wide tiling"
    factor = 4 if h1 % 4 == 0 else 1
    xs = f64(x).reshape(bxs, 128, h1)
    ws = f64(w).reshape(128, h1, -1)
    out = np.zeros((bxs, w.shape[1]), io)
    for f in range(factor):
        part = np.einsum("bpk,pki->bi", xs[:, :, f::factor], ws[:, f::factor]).astype(np.float32)
        out = (f64(out) + f64(part)).astype(io)
    return out


def _block_ref_lnc(lnc: int):
    def ref(*args, **kw):
        return _block_ref(*args, lnc=lnc, **kw)

    return ref


def _block_ref(
    X,
    W_qkv,
    cos,
    sin,
    K_cache,
    V_cache,
    attention_mask,
    update_cache=False,
    kv_cache_update_idx=None,
    W_out=None,
    lnc=1,
    **kw,
):
    """The docstring's pseudocode, stages 1-3 (no norms, no cache update, no projection):
    QKV = X @ W_qkv (``_qkv_tkg``); Q heads, K, V split in that order;
    RoPE on Q and K; Q *= 1/sqrt(d) (into X's dtype); attention_tkg with K/V cache
    [B, 1, S_max_ctx, d] whose last S_tkg of S_ctx positions are the new K, V. Returns the
    kernel's (out [B, q_heads, d, S_tkg], K_out [d, B, S_tkg], V_out [B, 1, S_tkg, d])."""
    io = X.dtype
    b, st, _ = X.shape
    d = K_cache.shape[-1]
    s_ctx = attention_mask.shape[0]
    qh = W_qkv.shape[1] // d - 2
    qkv = _qkv_tkg(X.reshape(b * st, -1), W_qkv, lnc).reshape(b, st, qh + 2, d)
    cs = cos.transpose(1, 2, 0)[:, :, None]  # [B, S_tkg, 1, d/2]
    sn = sin.transpose(1, 2, 0)[:, :, None]
    q = _rope_halves(qkv[:, :, :qh], cs, sn)  # [B, S_tkg, qh, d]
    k = _rope_halves(qkv[:, :, qh : qh + 1], cs, sn)[:, :, 0]  # [B, S_tkg, d]
    v = qkv[:, :, qh + 1]
    qs = (f64(q) * (1 / np.sqrt(d))).astype(io)
    kk = f64(K_cache)[:, 0, :s_ctx].copy()
    vv = f64(V_cache)[:, 0, :s_ctx].copy()
    kk[:, s_ctx - st :] = f64(k)
    vv[:, s_ctx - st :] = f64(v)
    scores = np.einsum("btd,bahd->bhta", kk, f64(qs))
    scores = np.where(attention_mask.astype(bool).transpose(1, 2, 0, 3), scores, -np.inf)
    scores = f64(scores.astype(np.float32))
    p = f64(np.exp(scores - scores.max(axis=2, keepdims=True)).astype(io))
    o = (np.einsum("bhta,btd->bhda", p, vv) / p.sum(axis=2)[:, :, None]).astype(io)
    if W_out is not None:  # output_projection_tkg: out[b * S + s, :] = attn[b, :, s] @ W_out
        rows = f64(o).transpose(0, 3, 1, 2).reshape(b * st, qh * d)
        o = (rows @ f64(W_out)).astype(np.float32).astype(io)
    if not update_cache:
        return o, k.transpose(2, 0, 1), v[:, None]
    k_new, v_new = K_cache.copy(), V_cache.copy()  # S_tkg tokens written from each batch's index
    for i in range(b):
        at = int(kv_cache_update_idx[i, 0])
        k_new[i, 0, at : at + st] = k[i]
        v_new[i, 0, at : at + st] = v[i]
    return o, k_new, v_new


def _block_inputs(b, st, hid, qh, d, s_ctx, s_max, update=False, proj=False):
    def make(rng):
        from nkilib.core.utils.common_types import QuantizationType

        x = rng.uniform(-1, 1, (b, st, hid)).astype(bf16)
        w = (rng.standard_normal((hid, (qh + 2) * d)) / np.sqrt(hid)).astype(bf16)
        cos = rng.uniform(-1, 1, (d // 2, b, st)).astype(bf16)
        sin = rng.uniform(-1, 1, (d // 2, b, st)).astype(bf16)
        k_cache = rng.uniform(-1, 1, (b, 1, s_max, d)).astype(bf16)
        v_cache = rng.uniform(-1, 1, (b, 1, s_max, d)).astype(bf16)
        pos = rng.integers(1, s_ctx - st, size=b)
        tok = np.arange(s_ctx)[:, None, None, None]
        mask = np.broadcast_to(tok < pos[None, :, None, None], (s_ctx, b, qh, st)).astype(np.uint8)
        mask[s_ctx - st :] = (np.arange(st)[:, None] <= np.arange(st)[None])[:, None, None]
        none = QuantizationType.NONE
        kw = dict(
            X=x,
            X_hidden_dim_actual=None,
            rmsnorm_X_enabled=False,
            rmsnorm_X_eps=None,
            rmsnorm_X_gamma=None,
            W_qkv=w,
            bias_qkv=None,
            quantization_type_qkv=none,
            weight_dequant_scale_qkv=None,
            input_dequant_scale_qkv=None,
            rmsnorm_QK_pre_rope_enabled=False,
            rmsnorm_QK_pre_rope_eps=1e-5,
            rmsnorm_QK_pre_rope_W_Q=None,
            rmsnorm_QK_pre_rope_W_K=None,
            cos=cos,
            sin=sin,
            rope_contiguous_layout=True,
            rmsnorm_QK_post_rope_enabled=False,
            rmsnorm_QK_post_rope_eps=1e-5,
            rmsnorm_QK_post_rope_W_Q=None,
            rmsnorm_QK_post_rope_W_K=None,
            K_cache_transposed=False,
            active_blocks_table=None,
            K_cache=k_cache,
            V_cache=v_cache,
            attention_mask=mask,
            sink=None,
            update_cache=False,
            kv_cache_update_idx=None,
            W_out=None,
            bias_out=None,
            quantization_type_out=none,
            weight_dequant_scale_out=None,
            input_dequant_scale_out=None,
            transposed_out=False,
            out_in_sb=False,
        )
        if update:  # the new tokens go where each batch's cache ends (pos)
            kw.update(update_cache=True, kv_cache_update_idx=pos[:, None].astype(np.uint32))
        if proj:
            w_out = (rng.standard_normal((qh * d, hid)) * 0.5).astype(bf16)
            kw.update(W_out=w_out)
        return Call((), kw)

    return make


CASES += [
    Case(
        "library/attention_block_tkg",
        REPO,
        BLOCK,
        "attention_block_tkg",
        _block_inputs(b=2, st=2, hid=512, qh=4, d=64, s_ctx=256, s_max=512),
        _block_ref,
        rtol=BF16_ULP,
        atol=256 * 4 * 2.0**-24,
        notes="bf16 B=2 S_tkg=2 H=512 q_heads=4 d=64 S_ctx=256 (cache 512): QKV projection, "
        "RoPE from given cos/sin, attention over the K/V cache; no norms, no cache update, no "
        "output projection. The reference replays the documented roundings (QKV in bf16, "
        "RoPE's bf16 products and sums, q/sqrt(d), attention as in library/attention_tkg); "
        "tolerance as there: one bf16 ulp plus S_ctx * 4 * 2^-24 absolute. Outcome "
        "external here: the package's __init__ (experimental/transformer/__init__.py) imports "
        "transformer_tkg_torch, which imports torch; with that import stubbed "
        "(tests/test_conf_attn.py) the kernel matches the reference bit for bit.",
    ),
]

CASES += [
    Case(
        "library/attention_block_tkg_update_proj",
        REPO,
        BLOCK,
        "attention_block_tkg",
        _block_inputs(b=2, st=2, hid=512, qh=4, d=64, s_ctx=256, s_max=512, update=True, proj=True),
        _block_ref,
        rtol=BF16_ULP,
        atol=256 * 4 * 2.0**-24,
        notes="as library/attention_block_tkg, plus the KV cache update (each batch's S_tkg new "
        "K, V written at kv_cache_update_idx; the updated caches returned) and the output "
        "projection [B*S_tkg, q_heads*d] @ W_out [q_heads*d, H] (fp32 sums, one rounding). "
        "External for the same torch import.",
    ),
    Case(
        "library/attention_block_tkg_lnc2",
        REPO,
        BLOCK,
        "attention_block_tkg",
        _block_inputs(b=2, st=2, hid=512, qh=4, d=64, s_ctx=256, s_max=512, update=True, proj=True),
        _block_ref_lnc(2),
        grid=(2,),
        rtol=BF16_ULP,
        atol=256 * 4 * 2.0**-24,
        notes="library/attention_block_tkg_update_proj on LNC=2: each core projects its half "
        "of H and the two bf16 results are added (qkv_tkg). External for the same torch "
        "import; with it stubbed, bit-exact but for one output-projection value one bf16 ulp "
        "apart (fp32 sum order) on seed 0.",
    ),
]
