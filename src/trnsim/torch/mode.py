"""The eager front end: a TorchFunctionMode + TorchDispatchMode pair over ordinary CPU tensors.

``with trn3(numerics="bf16", timing=True) as run:`` around PyTorch code:

- every ATen op is classified by ``trnsim.torch.ops.classify`` and recorded (``OpRecord``:
  module, phase, FLOPs, bytes) when ``timing`` is on;
- matmul-family ops (mm, bmm, addmm, baddbmm, convolution and its backward as GEMMs) compute
  as the Tensor engine does (``trnsim.torch.gemm``, with the session's ``Numerics``);
- other ops run in PyTorch at their dtype; with stochastic rounding their bf16/fp16 results
  are computed in fp32 and rounded stochastically (``trnsim.numerics.cast``), as
  ``NEURON_RT_STOCHASTIC_ROUNDING_EN=1`` makes every engine's narrow write;
- higher-level functions (``scaled_dot_product_attention``, ``rms_norm``, ``layer_norm``,
  ``cross_entropy``) are marked as the one kernel trnsim runs for them (``ops.KERNELS``);
  scaled-dot-product attention runs as its math (Q K^T, softmax, P V) so that its matmuls take
  the session's numerics;
- an op with no Trainium mapping runs in PyTorch and is listed (``Profile.fallbacks``); a dtype
  Trainium lacks (float64, complex) or a failing op raises ``TorchOpError`` naming the module
  and the op.

The dispatch mode is also the capture of ``trnsim.torch.compile`` and ``profile_step``
(``Capture``: the same classification and records, with or without numerics).
"""

from __future__ import annotations

import contextlib
import math
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np

from trnsim.core.blas import single_threaded_blas
from trnsim.errors import TrnsimError
from trnsim.numerics import StochasticRng, cast
from trnsim.torch import _door
from trnsim.torch.errors import TorchOpError
from trnsim.torch.gemm import gemm
from trnsim.torch.numerics import Numerics, op_seed, role_seed
from trnsim.torch.numerics import numerics as resolve_numerics
from trnsim.torch.ops import COLLECTIVE_OPS, KERNELS, classify
from trnsim.torch.profile import OpRecord

torch = _door.torch()
_dispatch = _door.submodule("torch.utils._python_dispatch")
_overrides = _door.submodule("torch.overrides")
_tracker = _door.submodule("torch.utils.module_tracker")
F = torch.nn.functional

# ---------------------------------------------------------------------------------------------
# tensors <-> NumPy (exact: the bits, never a conversion)
# ---------------------------------------------------------------------------------------------

FORMAT_OF: dict[Any, str] = {
    torch.float32: "float32",
    torch.bfloat16: "bfloat16",
    torch.float16: "float16",
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2",
}
_NP_VIEW: dict[Any, tuple[Any, Any]] = {
    torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
    torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2),
}
LACKING = (torch.float64, torch.complex64, torch.complex128)
"""Dtypes no Trainium engine computes in."""


def np_dtype(dtype: Any) -> Any:
    """The NumPy (ml_dtypes) dtype of a torch dtype."""
    if dtype in _NP_VIEW:
        return np.dtype(_NP_VIEW[dtype][1])
    return torch.empty((), dtype=dtype).numpy().dtype


def to_numpy(t: Any) -> np.ndarray:
    """A tensor's values as a NumPy array of the same format (ml_dtypes for bf16 / fp8)."""
    t = t.detach().contiguous()
    if t.dtype in _NP_VIEW:
        raw, npd = _NP_VIEW[t.dtype]
        return t.view(raw).numpy().view(npd)
    return t.numpy()


def from_numpy(a: np.ndarray, dtype: Any) -> Any:
    """A tensor of ``dtype`` holding ``a``'s bits (``a`` in that format's storage dtype)."""
    a = np.ascontiguousarray(a)
    if dtype in _NP_VIEW:
        raw, npd = _NP_VIEW[dtype]
        return torch.from_numpy(a.view(npd).view(np.dtype(str(raw).split(".")[-1]))).view(dtype)
    return torch.from_numpy(a).to(dtype)


# ---------------------------------------------------------------------------------------------
# the session: what one `with trn3(...)` records
# ---------------------------------------------------------------------------------------------


class Session:
    """State of one capture: the numerics (None: PyTorch's own, as in shapes-only runs), the
    records, the module tracker and the current high-level kernel."""

    def __init__(self, policy: Numerics | None, record: bool, group_ranks: Any = None) -> None:
        self.numerics = policy
        self.record = record
        self.records: list[OpRecord] = []
        self.tracker = _tracker.ModuleTracker()
        self.kernel: str = ""
        self.group = -1
        self._groups = 0
        self.group_ranks = group_ranks  # process group -> (ranks, stride), profile_step
        self.producer: dict[int, tuple[Any, int]] = {}  # id(tensor) -> (weakref, record)
        self.module_override: str | None = None  # compiled graphs: the node's module
        self.phase_override: str | None = None  # compiled graphs: forward or backward

    def producer_of(self, t: Any) -> int:
        entry = self.producer.get(id(t))
        if entry is None or entry[0]() is not t:
            return -1
        return entry[1]

    def produced(self, outs: list[Any], index: int) -> None:
        for t in outs:
            with contextlib.suppress(TypeError):
                self.producer[id(t)] = (weakref.ref(t), index)

    def module(self) -> str:
        if self.module_override is not None:
            return self.module_override
        parents = [p for p in self.tracker.parents if p != "Global"]
        return max(parents, key=lambda p: (p.count("."), len(p))) if parents else ""

    @contextlib.contextmanager
    def in_kernel(self, name: str) -> Iterator[None]:
        """Ops run inside form one kernel (a high-level function mapped to one NKI kernel)."""
        outer = (self.kernel, self.group)
        self._groups += 1
        self.kernel, self.group = name, self._groups
        try:
            yield
        finally:
            self.kernel, self.group = outer


def _phase() -> str:
    return "backward" if torch._C._current_autograd_node() is not None else "forward"


def _is_fake(x: Any) -> bool:
    return type(x).__name__ == "FakeTensor"


def _tensors(tree: Any) -> list[Any]:
    return [x for x in torch.utils._pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _nbytes(t: Any) -> float:
    return float(t.numel() * t.element_size())


# ---------------------------------------------------------------------------------------------
# matmul family on the Tensor engine
# ---------------------------------------------------------------------------------------------


def _seed(pol: Numerics, op: str, *arrays: np.ndarray) -> int:
    return op_seed(pol.seed, op, *arrays) if pol.stochastic else 0


def _out_format(dtype: Any, op: str) -> str:
    if dtype not in FORMAT_OF:
        raise TrnsimError(f"a {dtype} result: Trainium's Tensor engine writes fp32/bf16/fp16/fp8")
    return FORMAT_OF[dtype]


def _finish(acc: np.ndarray, dtype: Any, pol: Numerics, seed: int) -> Any:
    """fp32 values (a PSUM result plus an epilogue) written in ``dtype``."""
    fmt = _out_format(dtype, "")
    if fmt == "float32":
        return torch.from_numpy(np.ascontiguousarray(acc, dtype=np.float32))
    rng = StochasticRng(role_seed(seed, 3)) if pol.stochastic else None
    return from_numpy(cast(acc.astype(np.float32), fmt, rounding=pol.rounding, rng=rng), dtype)


def _mm(pol: Numerics, op: str, a: Any, b: Any, out_dtype: Any, epilogue: bool) -> Any:
    A, B = to_numpy(a), to_numpy(b)
    seed = _seed(pol, op, A, B)
    fmt = "float32" if epilogue else _out_format(out_dtype, op)
    return gemm(A, B, pol, fmt, seed=seed), seed


def _bmm(pol: Numerics, op: str, a: Any, b: Any, out_dtype: Any, epilogue: bool) -> Any:
    A, B = to_numpy(a), to_numpy(b)
    seed = _seed(pol, op, A, B)
    fmt = "float32" if epilogue else _out_format(out_dtype, op)
    return gemm(A, B, pol, fmt, seed=seed), seed


def _epilogue(pol, res, seed, bias, beta, alpha, dtype):
    acc = res.astype(np.float32)
    if alpha != 1:
        acc = acc * np.float32(alpha)
    if beta != 0:
        acc = acc + np.float32(beta) * to_numpy(bias.to(torch.float32)).astype(np.float32)
    return _finish(acc, dtype, pol, seed)


def _conv_2d(args: tuple, x_at: int, w_at: int) -> tuple:
    """The convolution's tensors and parameters as a 2-D convolution (1-D: height 1), after
    checking it is one trnsim maps to GEMMs."""
    x, w = args[x_at], args[w_at]
    stride, padding, dilation, transposed = args[x_at + 3 : x_at + 7] if x_at == 0 else args[4:8]
    groups = args[8] if x_at == 0 else args[9]
    if transposed or groups != 1 or x.dim() not in (3, 4):
        raise TrnsimError(
            "trnsim maps 1-D and 2-D convolutions with groups=1 (not transposed) to GEMMs; "
            f"got a {x.dim() - 2}-D convolution, groups={groups}, transposed={transposed}"
        )
    one_d = x.dim() == 3
    if one_d:
        x, w = x.unsqueeze(2), w.unsqueeze(2)
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
    return x, w, tuple(stride), tuple(padding), tuple(dilation), one_d


def _conv_gemm(pol: Numerics, op: str, args: tuple) -> Any:
    """``aten.convolution`` as GEMMs: im2col (``unfold``), then one batched GEMM
    ``W[O, C kh kw] @ cols[n][C kh kw, L]`` with the bias added to the fp32 PSUM result."""
    x, w, stride, padding, dilation, one_d = _conv_2d(args, 0, 1)
    bias = args[2]
    n, o = x.shape[0], w.shape[0]
    kh, kw = w.shape[2:]
    cols = F.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
    wm = w.reshape(o, -1).expand(n, o, -1)
    res, seed = _bmm(pol, op, wm, cols, x.dtype, epilogue=bias is not None)
    if bias is not None:
        out = _epilogue(pol, res, seed, bias.reshape(1, o, 1), 1, 1, x.dtype)
    else:
        out = from_numpy(res, x.dtype)
    oh = (x.shape[2] + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = out.reshape(n, o, oh, ow)
    return out.squeeze(2) if one_d else out


def _conv_backward(pol: Numerics, op: str, args: tuple) -> Any:
    """``aten.convolution_backward`` as GEMMs: the input gradient ``W^T @ dY`` per image then
    col2im (``fold``: the overlapping sums in PyTorch), the weight gradient one GEMM
    ``dY[O, n L] @ cols[n L, C kh kw]``, the bias gradient a reduction."""
    grad = args[0]
    x, w, stride, padding, dilation, one_d = _conv_2d(args, 1, 2)
    mask = args[10]
    g = grad.unsqueeze(2) if one_d else grad
    n, o = x.shape[0], w.shape[0]
    kh, kw = w.shape[2:]
    gm = g.reshape(n, o, -1)
    dx = dw = db = None
    if mask[0]:
        wt = w.reshape(o, -1).t().expand(n, -1, o)
        gcols, _ = _bmm(pol, op + "[input]", wt, gm, x.dtype, epilogue=False)
        dx = F.fold(from_numpy(gcols, x.dtype), x.shape[2:], (kh, kw), dilation=dilation,
                    padding=padding, stride=stride)  # fmt: skip
        dx = dx.squeeze(2) if one_d else dx
    if mask[1]:
        cols = F.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
        a = gm.permute(1, 0, 2).reshape(o, -1)
        b = cols.permute(0, 2, 1).reshape(-1, cols.shape[1])
        res, _ = _mm(pol, op + "[weight]", a, b, w.dtype, epilogue=False)
        dw = from_numpy(res, w.dtype).reshape(w.shape)
        dw = dw.squeeze(2) if one_d else dw
    if mask[2]:
        db = grad.sum(dim=[d for d in range(grad.dim()) if d != 1])
    return dx, dw, db


def _matmul(pol: Numerics, name: str, func: Any, args: tuple, kwargs: dict) -> Any:
    op = name.split("::")[-1]
    if op == "mm":
        a, b = args
        res, _ = _mm(pol, name, a, b, a.dtype, False)
        return from_numpy(res, a.dtype)
    if op == "bmm":
        a, b = args
        res, _ = _bmm(pol, name, a, b, a.dtype, False)
        return from_numpy(res, a.dtype)
    if op in ("addmm", "baddbmm"):
        bias, a, b = args[:3]
        beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
        alpha = kwargs.get("alpha", args[4] if len(args) > 4 else 1)
        fn = _mm if op == "addmm" else _bmm
        res, seed = fn(pol, name, a, b, a.dtype, True)
        return _epilogue(pol, res, seed, bias, beta, alpha, a.dtype)
    if op == "convolution":
        return _conv_gemm(pol, name, tuple(args))
    if op == "convolution_backward":
        return _conv_backward(pol, name, tuple(args))
    return func(*args, **kwargs)


# ---------------------------------------------------------------------------------------------
# other ops with stochastic rounding of narrow results
# ---------------------------------------------------------------------------------------------

_NARROW = (torch.bfloat16, torch.float16)


def _sr_vector(pol: Numerics, name: str, func: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``func`` in fp32 on fp32 copies of its bf16/fp16 inputs and round its results to
    the inputs' dtype stochastically (when every floating input shares that dtype)."""
    flat, spec = torch.utils._pytree.tree_flatten((args, kwargs))
    floats = [x for x in flat if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if name == "aten::_to_copy":  # a conversion: its target dtype
        narrow = kwargs.get("dtype")
    elif name == "aten::copy_":  # a copy into a tensor: that tensor's dtype
        narrow = args[0].dtype
    else:  # an op computing in its inputs' common dtype
        dtypes = {x.dtype for x in floats}
        narrow = dtypes.pop() if len(dtypes) == 1 else None
    if narrow not in _NARROW:
        return func(*args, **kwargs)
    copies: dict[int, Any] = {}
    new = []
    for x in flat:
        if isinstance(x, torch.Tensor) and x.dtype in _NARROW:
            c = x.to(torch.float32)
            copies[id(c)] = x
            new.append(c)
        else:
            new.append(x)
    a2, k2 = torch.utils._pytree.tree_unflatten(new, spec)
    if name == "aten::_to_copy":
        k2 = dict(k2, dtype=torch.float32)
    out = func(*a2, **k2)
    arrays = [to_numpy(x) for x in floats]
    seed = op_seed(pol.seed, name, *arrays)

    def narrowed(t: Any, i: int) -> Any:
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            return t
        rng = StochasticRng(role_seed(seed, 20 + i))
        vals = cast(to_numpy(t), FORMAT_OF[narrow], rounding="stochastic", rng=rng)
        res = from_numpy(vals, narrow).reshape(t.shape)
        orig = copies.get(id(t))
        if orig is not None:  # an in-place op: its result goes back into the input
            orig.copy_(res)
            return orig
        return res

    if isinstance(out, tuple | list):
        return type(out)(narrowed(t, i) for i, t in enumerate(out))
    return narrowed(out, 0)


# ---------------------------------------------------------------------------------------------
# records: FLOPs and bytes of each op
# ---------------------------------------------------------------------------------------------


def describe(sess: Session, func: Any, name: str, kind: str, args: tuple, out: Any) -> OpRecord:
    ins, outs = _tensors(args), _tensors(out)
    byts = sum(_nbytes(t) for t in ins) + sum(_nbytes(t) for t in outs)
    elems = float(sum(t.numel() for t in outs))
    dtype = str(outs[0].dtype).replace("torch.", "") if outs else ""
    rec = OpRecord(
        module=sess.module(),
        op=name,
        kind=kind,
        phase=sess.phase_override or _phase(),
        bytes=byts,
        elems=elems,
        dtype=dtype,
        kernel=sess.kernel or KERNELS.get(name, ""),
        group=sess.group,
    )
    op = name.split("::")[-1]
    if kind == "matmul" and len(ins) >= 2:
        if op in ("mm", "addmm"):
            a, b = (ins[-2], ins[-1])
            rec.mmk = (1, a.shape[0], a.shape[1], b.shape[1])
        elif op in ("bmm", "baddbmm"):
            a, b = (ins[-2], ins[-1])
            rec.mmk = (a.shape[0], a.shape[1], a.shape[2], b.shape[2])
        elif op == "convolution" and outs:
            x, w = ins[0], ins[1]
            per = math.prod(w.shape[1:])
            rec.mmk = (x.shape[0], w.shape[0], per, math.prod(outs[0].shape[2:]))
        elif op == "convolution_backward":  # input and weight gradients: two GEMMs
            g, w = ins[0], ins[2]
            rec.mmk = (2 * g.shape[0], math.prod(w.shape[1:]), w.shape[0], math.prod(g.shape[2:]))
        if rec.mmk:
            c, m, k, n = rec.mmk
            rec.flops = 2.0 * c * m * k * n
    elif kind == "collective":
        rec.collective = _collective(sess, name, args, ins)
    return rec


def _collective(sess: Session, name: str, args: tuple, ins: list) -> tuple[str, int, int, float]:
    """(op, ranks, rank stride, nccl-tests bytes) of a collective call."""
    kind = COLLECTIVE_OPS[name]
    ranks, stride = 1, 1
    if sess.group_ranks is not None:
        ranks, stride = sess.group_ranks(name, args)
    size = _nbytes(ins[0]) if ins else 0.0
    if kind == "all-gather" and ins:
        # the output is the gathered buffer: nccl-tests size of an all-gather
        size = max(_nbytes(t) for t in ins)
        if name.startswith("_c10d_functional"):
            size = _nbytes(ins[0]) * ranks
    return kind, ranks, stride, size


def kernel_record(sess: Any, name: str, res: Any, args: tuple, out: Any, target: Any) -> OpRecord:
    """The record of one kernel call: timed by scheduling its own instruction stream."""
    from trnsim.core.timing import schedule
    from trnsim.nki.simulate import resolve_target

    prof = schedule(res.instructions, resolve_target(target))
    sched = prof.schedule
    instrs: tuple[tuple[str, str, float, float], ...] = ()
    if sched is not None:
        instrs = tuple(
            (sched.track_names[sched.track[i]], ins.opcode.value, sched.start[i], sched.end[i])
            for i, ins in enumerate(sched.instructions[:4000])
        )
    ins, outs = _tensors(args), _tensors(out)
    rec = OpRecord(
        module=sess.module(),
        op=f"nki::{name}",
        kind="kernel",
        phase=_phase(),
        flops=prof.flops,
        bytes=float(sum(t.numel() * t.element_size() for t in ins + outs)),
        elems=float(sum(t.numel() for t in outs)),
        dtype=str(outs[0].dtype).replace("torch.", "") if outs else "",
        kernel=f"NKI kernel {name}",
        seconds=prof.total_s,
        source="the kernel's instructions on the timing model",
        instructions=instrs,
    )
    return rec


# ---------------------------------------------------------------------------------------------
# the two modes
# ---------------------------------------------------------------------------------------------


def _in_sharding_propagation() -> bool:
    """True inside DTensor's sharding propagation, which runs ops on fake tensors of the
    global shapes to infer output metadata (``torch/distributed/tensor/_sharding_prop.py``):
    those ops are not work any rank does."""
    f = sys._getframe(2)
    for _ in range(4):  # the propagator calls the op directly (OpOverload.__call__ between)
        if f is None:
            return False
        if f.f_code.co_filename.endswith("_sharding_prop.py"):
            return True
        f = f.f_back
    return False


_PLAIN = {torch.Tensor, torch.nn.Parameter}
for _m in ("torch._subclasses.fake_tensor",):
    _PLAIN.add(_door.submodule(_m).FakeTensor)


class Capture(_dispatch.TorchDispatchMode):
    """The dispatch mode: classify, compute (with numerics), record."""

    def __init__(self, sess: Session) -> None:
        super().__init__()
        self.sess = sess

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None):
        kwargs = kwargs or {}
        if any(t not in _PLAIN for t in types):
            # a tensor subclass (DTensor): let it run first; the local ops it issues on its
            # shards come back here with their real (per-rank) shapes
            return NotImplemented
        sess = self.sess
        if sess.group_ranks is not None and _in_sharding_propagation():
            return func(*args, **kwargs)  # DTensor's shape inference on global shapes
        name = func._schema.name
        tags = [t.name for t in func.tags]
        kind = classify(name, tags, func.is_view)
        if kind == "free":
            out = func(*args, **kwargs)
            if sess.record:  # a view's result stands for what it views
                srcs = [sess.producer_of(t) for t in _tensors((args, kwargs))]
                srcs = [i for i in srcs if i >= 0]
                if srcs:
                    sess.produced(_tensors(out), srcs[0])
            return out
        ins = _tensors((args, kwargs))
        fake = any(_is_fake(t) for t in ins)
        pol = sess.numerics
        try:
            for t in ins:
                if t.dtype in LACKING:
                    raise TrnsimError(
                        f"{t.dtype} has no Trainium engine that computes in it (fp32, bf16, "
                        "fp16, fp8, MX and integers up to 32 bits); cast the model with "
                        ".float() or .bfloat16()"
                    )
            if pol is not None and not fake and kind == "matmul":
                out = _matmul(pol, name, func, args, kwargs)
            elif pol is not None and not fake and pol.stochastic and kind == "vector":
                out = _sr_vector(pol, name, func, args, kwargs)
            else:
                out = func(*args, **kwargs)
        except TorchOpError:
            raise
        except TrnsimError as exc:
            raise TorchOpError(sess.module(), name, str(exc)) from None
        if sess.record:
            if kind == "kernel":  # a custom op of trnsim.torch.kernels: its kernel's run
                from trnsim.torch.ops import KERNEL_OPS

                wrapper: Any = KERNEL_OPS[name]
                run_ = wrapper.last_run
                if fake:  # shapes only: the kernel recorded timing-only on empty arrays
                    from trnsim.nki.simulate import record_run

                    run_ = record_run(
                        wrapper.kernel, *(np.empty(t.shape, np_dtype(t.dtype)) for t in ins)
                    )
                rec = kernel_record(sess, name, run_, tuple(args), out, wrapper.target)
            else:
                rec = describe(sess, func, name, kind, args, out)
            srcs = sorted({i for i in (sess.producer_of(t) for t in ins) if i >= 0})
            rec.inputs = tuple(srcs)
            for i in srcs:
                sess.records[i].users += 1
            sess.records.append(rec)
            sess.produced(_tensors(out), len(sess.records) - 1)
        return out


_HIGH_LEVEL = {
    F.scaled_dot_product_attention: "scaled_dot_product_attention",
    F.layer_norm: "layer_norm",
    F.cross_entropy: "cross_entropy",
}
if hasattr(F, "rms_norm"):
    _HIGH_LEVEL[F.rms_norm] = "rms_norm"


def sdpa_math(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
    """Scaled-dot-product attention as its math (the flash-attention kernel's arithmetic):
    ``softmax(Q K^T * scale + mask) V``; its matmuls take the session's numerics."""
    if dropout_p:
        raise TrnsimError("scaled_dot_product_attention with dropout_p > 0 is not mapped")
    if kw.get("enable_gqa"):
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * s
    L, S_ = q.shape[-2], k.shape[-2]
    if is_causal:
        mask = torch.ones(L, S_, dtype=torch.bool).tril(diagonal=S_ - L)
        scores = scores.masked_fill(~mask, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, dim=-1) @ v


class Functions(_overrides.TorchFunctionMode):
    """The function mode: high-level functions become one kernel each (``ops.KERNELS``)."""

    def __init__(self, sess: Session) -> None:
        super().__init__()
        self.sess = sess

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None):
        kwargs = kwargs or {}
        label = _HIGH_LEVEL.get(func)
        if label is None:
            return func(*args, **kwargs)
        name = KERNELS.get(label, label)
        if label == "scaled_dot_product_attention" and kwargs.get("is_causal"):
            name += ", causal"
        with self.sess.in_kernel(name):
            if label == "scaled_dot_product_attention":
                return sdpa_math(*args, **kwargs)
            return func(*args, **kwargs)


class Trn3:
    """What ``with trn3(...) as run`` gives: ``run.records``, ``run.profile()``."""

    def __init__(self, sess: Session, timing: Any) -> None:
        self.session = sess
        self.timing = timing

    @property
    def records(self) -> list[OpRecord]:
        return self.session.records

    @property
    def fallbacks(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.session.records:
            if r.kind == "fallback":
                key = f"{r.module or '(top level)'}: {r.op}"
                out[key] = out.get(key, 0) + 1
        return out

    def profile(self, fuse: bool = False, **kw: Any):
        """The layered ``Profile`` of everything run so far (needs ``timing=True``): op by op
        (eager), or with ``fuse=True`` grouped by the compile backend's fusion rules (as
        TorchNeuron's Adaptive Eager Execution fuses queued ops). ``kw``: ``chip``,
        ``ranks_per_chip``, ``kernel_timing`` ... of ``trnsim.torch.costs.time_records``."""
        from trnsim.torch.costs import time_records
        from trnsim.torch.profile import fuse as fuse_records

        if not self.session.record:
            raise TrnsimError("this run was not timed: use trn3(..., timing=True)")
        if fuse:
            fuse_records(self.session.records)
        return time_records(self.session.records, numerics=self.session.numerics, **kw)


@contextlib.contextmanager
def trn3(
    numerics: str | Numerics = "native",
    *,
    rounding: str | None = None,
    seed: int | None = None,
    timing: bool = False,
) -> Iterator[Trn3]:
    """Run PyTorch code as Trainium3 runs it (module docstring). ``numerics``: a policy name
    (``trnsim.torch.numerics.NUMERICS``) or a ``Numerics``; ``rounding`` / ``seed`` override its
    own; ``timing=True`` records every op for ``run.profile()``."""
    pol = resolve_numerics(numerics, rounding=rounding, seed=seed)
    sess = Session(pol, record=timing)
    # one BLAS thread for the tile products (trnsim.core.blas: many small sgemms)
    with single_threaded_blas(), sess.tracker, Functions(sess), Capture(sess):
        yield Trn3(sess, timing)
