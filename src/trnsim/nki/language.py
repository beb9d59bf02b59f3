"""``nki.language`` (NKI 0.3 - 0.6): dtypes, buffers, tensor creation, load/store, math.

Every function that computes issues ``nki.isa`` instructions on the running core; nothing is
computed outside the instruction stream. Sources: SDK ``nki/api/nki/language/__init__.py``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from trnsim.core.location import fail
from trnsim.core.memory import HBM, PSUM, SBUF, View
from trnsim.hw import core as _core_spec
from trnsim.nki.context import current, current_or_none
from trnsim.nki.tensor import NkiTensor
from trnsim.numerics import get_format

# ---- dtypes (NumPy / ml_dtypes dtypes; tf32 and the packed x4 types are numerics Formats) ----
bool_ = np.dtype(np.uint8)
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
float16, float32 = np.dtype(np.float16), np.dtype(np.float32)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
tfloat32 = get_format("tfloat32")
float8_e4m3fn_x4 = get_format("float8_e4m3fn_x4")
float8_e5m2_x4 = get_format("float8_e5m2_x4")
float4_e2m1fn_x4 = get_format("float4_e2m1fn_x4")
fp32 = np.finfo(np.float32)

# ---- buffers -----------------------------------------------------------------------------


class _Buffer:
    def __init__(self, name: str, memory: str) -> None:
        self.name, self.memory = name, memory

    def __repr__(self) -> str:
        return f"nl.{self.name}"


sbuf = _Buffer("sbuf", SBUF)
psum = _Buffer("psum", PSUM)
shared_hbm = _Buffer("shared_hbm", HBM)
private_hbm = _Buffer("private_hbm", HBM)
hbm = private_hbm


def _buffer(buffer: Any) -> _Buffer:
    if buffer is None:
        return sbuf
    if not isinstance(buffer, _Buffer):
        raise fail("buffer", f"buffer must be nl.sbuf / nl.psum / nl.shared_hbm, got {buffer!r}")
    return buffer


# ---- creation ----------------------------------------------------------------------------


def ndarray(
    shape: Any, dtype: Any, buffer: Any = None, name: str = "", address: Any = None
) -> NkiTensor:
    """A new, uninitialised tensor (sentinel-filled: NaN for floats)."""
    prog = current()
    buf = _buffer(buffer)
    shape = tuple([int(s) for s in (shape if isinstance(shape, tuple | list) else (shape,))])
    if buf is shared_hbm and prog.launch.lnc > 1:
        # The programs of an LNC launch share their shared_hbm tensors: the i-th shared_hbm
        # allocation of every program is the same tensor.
        with prog.launch.lock:
            seq = prog.shared_seq
            prog.shared_seq += 1
            if seq not in prog.launch.shared:
                prog.launch.shared[seq] = prog.core.allocate(shape, dtype, HBM, name=name)
            return NkiTensor.wrap(prog.launch.shared[seq])
    return prog.core.allocate(  # type: ignore[return-value]
        shape, dtype, buf.memory, name=name, address=address, view_type=NkiTensor
    )


def zeros(shape: Any, dtype: Any, buffer: Any = None, name: str = "") -> NkiTensor:
    return full(shape, 0, dtype, buffer, name)


def ones(shape: Any, dtype: Any, buffer: Any = None, name: str = "") -> NkiTensor:
    return full(shape, 1, dtype, buffer, name)


def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = None, name: str = "") -> NkiTensor:
    from trnsim.nki import isa

    t = ndarray(shape, dtype, buffer, name)
    if t.on_chip:
        isa.memset(t, fill_value)
    else:
        tmp = ndarray(shape, dtype, sbuf)
        isa.memset(tmp, fill_value)
        isa.dma_copy(t, tmp)
    return t


def zeros_like(x: NkiTensor, dtype: Any = None, buffer: Any = None) -> NkiTensor:
    return zeros(x.shape, dtype or x.dtype, buffer)


def empty_like(x: NkiTensor, dtype: Any = None, buffer: Any = None) -> NkiTensor:
    return ndarray(x.shape, dtype or x.dtype, buffer)


# ---- loops (all unrolled Python ranges in NKI 0.3+) ----------------------------------------

affine_range = sequential_range = static_range = range


def ds(start: int, size: int) -> slice:
    return slice(start, start + size)


# ---- SPMD / LNC ---------------------------------------------------------------------------


def program_id(axis: int = 0) -> int:
    return current().program_id if axis == 0 else 0


def num_programs(axes: int = 0) -> int:
    return current().launch.lnc if axes == 0 else 1


def program_ndim() -> int:
    return 1


def device_print(prefix: str, x: Any) -> None:
    """Print a tensor's current value (decoded) at this point of the run."""
    prog = current()
    if isinstance(x, View) and not prog.core.functional:
        val: Any = f"<{x.fmt.name}{list(x.shape)}: no data in a timing-only run>"
    else:
        prog.core.sync()  # the deferred data work up to here (trnsim.core.deferred)
        val = prog.core.read(x) if isinstance(x, View) else x
    line = f"{prefix}{val}"
    prog.launch.printed.append(line)
    print(line)


# ---- tile sizes (from the target's CoreSpec) ----------------------------------------------


class _TileSize:
    """``nl.tile_size``: the target's tile limits (read from ``trnsim.hw``)."""

    def _spec(self):
        prog = current_or_none()
        return prog.core.spec if prog else _core_spec("gen4")

    @property
    def pmax(self) -> int:
        return self._spec().partitions

    @property
    def psum_fmax(self) -> int:
        return self._spec().psum_bank_bytes // np.dtype(np.float32).itemsize

    @property
    def gemm_stationary_fmax(self) -> int:
        return self._spec().tensor.stationary_fmax

    @property
    def gemm_moving_fmax(self) -> int:
        # One PSUM bank of fp32 (512): the documented value; v4's nc_matmul accepts more.
        return self.psum_fmax

    @property
    def bn_stats_fmax(self) -> int:
        return self.psum_fmax

    @property
    def psum_num_banks(self) -> int:
        return self._spec().psum_banks

    @property
    def total_available_sbuf_size(self) -> int:
        return self._spec().sbuf_bytes_per_partition


tile_size = _TileSize()

# ---- operators: callable tokens (nl.add(x, y) computes; nisa.*(op=nl.add) names the ALU op) --


class _Op:
    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind
        self.__name__ = name

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __call__(self, x: Any, y: Any = None, dtype: Any = None, **kw: Any) -> NkiTensor:
        from trnsim.nki import isa

        if self.kind == "binary":
            if isinstance(x, View) and isinstance(y, View):
                out = ndarray(x.shape, dtype or x.dtype, sbuf)
                isa.tensor_tensor(out, x, y, self)
                return out
            if isinstance(x, View):
                out = ndarray(x.shape, dtype or x.dtype, sbuf)
                isa.tensor_scalar(out, x, self, float(y))
                return out
            if isinstance(y, View):
                out = ndarray(y.shape, dtype or y.dtype, sbuf)
                isa.tensor_scalar(out, y, self, float(x), reverse0=True)
                return out
            raise fail("operand", f"nl.{self.name} needs at least one tensor")
        out = ndarray(x.shape, dtype or x.dtype, sbuf)
        isa.activation(out, self, x)
        return out


_BINARY = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "power",
    "abs_max",
    "abs_min",
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "left_shift",
    "right_shift",
    "fmod",
    "mod",
]
_UNARY = [
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "square",
    "abs",
    "negative",
    "sign",
    "tanh",
    "sin",
    "cos",
    "tan",
    "arctan",
    "ceil",
    "floor",
    "trunc",
    "sigmoid",
    "relu",
    "silu",
    "gelu",
    "gelu_apprx_tanh",
    "gelu_apprx_sigmoid",
    "softplus",
    "mish",
    "erf",
    "copy",
    "identity",
]
for _n in _BINARY:
    globals()[_n] = _Op(_n, "binary")
for _n in _UNARY:
    globals()[_n] = _Op(_n, "unary")
bypass = _Op("bypass", "unary")


def copy(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    from trnsim.nki import isa

    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    isa.tensor_copy(out, x)
    return out


copy.name = "copy"  # type: ignore[attr-defined]

# ---- memory -------------------------------------------------------------------------------


def load(src: NkiTensor, dtype: Any = None) -> NkiTensor:
    """HBM -> a new SBUF tile (dma_copy)."""
    from trnsim.nki import isa

    out = ndarray(src.shape, dtype or src.dtype, sbuf)
    isa.dma_copy(out, src)
    return out


def store(dst: NkiTensor, value: NkiTensor) -> None:
    """SBUF -> HBM (dma_copy)."""
    from trnsim.nki import isa

    isa.dma_copy(dst, value)


# ---- matmul, transpose, reductions ---------------------------------------------------------


def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False) -> NkiTensor:
    """``x.T @ y`` into a new fp32 PSUM tile (only ``transpose_x=True`` is supported, as in
    NKI 0.3+: ``x`` is already ``[K, M]``)."""
    from trnsim.nki import isa

    if not transpose_x:
        raise fail("not-implemented", "nl.matmul(transpose_x=False); pass x as [K, M] with True")
    out = ndarray((x.free_size, y.free_size), float32, psum)
    isa.nc_matmul(out, x, y)
    return out


def transpose(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    from trnsim.nki import isa

    out = ndarray((x.free_size, x.partitions), x.dtype, psum)
    isa.nc_transpose(out, x)
    return out


def _reduce(name: str):
    def fn(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
        from trnsim.nki import isa

        axes = tuple(axis) if isinstance(axis, tuple | list) else (axis,)
        axes = tuple(a % x.ndim for a in axes)
        shape = [1 if d in axes else n for d, n in enumerate(x.shape)]
        if not keepdims:
            shape = [n for d, n in enumerate(shape) if d not in axes or d == 0]
        out = ndarray(tuple(shape), dtype or x.dtype, sbuf)
        isa.tensor_reduce(out, name, x, axes, keepdims=keepdims)
        return out

    return fn


sum = _reduce("add")
max = _reduce("maximum")
min = _reduce("minimum")
prod = _reduce("multiply")


def mean(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    from trnsim.nki import isa

    s = sum(x, axis, float32, keepdims)
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    n = int(np.prod([x.shape[a] for a in axes]))
    out = ndarray(s.shape, dtype or x.dtype, sbuf)
    isa.tensor_scalar(out, s, "multiply", 1.0 / n)
    return out


def _not_here(name: str):
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise fail("not-implemented", f"nl.{name} is not implemented by trnsim yet")

    fn.__name__ = name
    return fn


for _n in (
    "softmax",
    "rms_norm",
    "var",
    "all",
    "rand",
    "load_transpose2d",
    "gather_flattened",
    "shared_constant",
    "shared_identity_matrix",
    "dropout",
    "where",
    "fori_loop",
    "while_loop",
    "dynamic_range",
):
    globals()[_n] = _not_here(_n)


def is_psum(x: View) -> bool:
    return x.memory == PSUM


def is_sbuf(x: View) -> bool:
    return x.memory == SBUF


def is_hbm(x: View) -> bool:
    return x.memory == HBM


def is_on_chip(x: View) -> bool:
    return x.on_chip


# ---- random numbers (issue 12: nisa.rng / rand2 / dropout / set_rng_seed) -----------------------


def random_seed(seed: NkiTensor) -> None:
    """``nl.random_seed(seed)``: seed the Vector engine's PRNG from a [1, 1] 32-bit SBUF/PSUM
    tensor (``nisa.set_rng_seed``); the same seed gives the same ``rand`` / ``dropout`` values."""
    from trnsim.nki import isa

    isa.set_rng_seed(seed)


def rand(shape: Any, dtype: Any, buffer: Any = None, name: str = "") -> NkiTensor:
    """``nl.rand``: a new tensor of uniform values in [0, 1) from the Vector engine's PRNG:
    ``nisa.rand2(t, 0, 1)`` on NeuronCore-v4, else ``nisa.rng`` bits ``u`` as ``(u >> 8) *
    2^-24`` (the same values from the same state); an HBM tensor is filled through SBUF."""
    from trnsim.nki import isa

    buf = _buffer(buffer)
    tile = ndarray(shape, dtype, sbuf if buf.memory == HBM else buf, name=name)
    if current().core.spec.generation >= 4:
        isa.rand2(tile, 0.0, 1.0)
    else:
        bits = ndarray(shape, uint32, sbuf)
        isa.rng(bits)
        isa.tensor_scalar(bits, bits, "right_shift", 8)
        isa.tensor_scalar(tile, bits, "multiply", 2.0**-24)
    if buf.memory != HBM:
        return tile
    out = ndarray(shape, dtype, buf, name=name)
    isa.dma_copy(out, tile)
    return out


def dropout(x: NkiTensor, rate: Any, dtype: Any = None) -> NkiTensor:
    """``nl.dropout``: ``x`` with each element zeroed with probability ``rate`` (a number or a
    ``(P, 1)`` tile) by ``nisa.dropout``, cast to ``dtype`` if given."""
    from trnsim.nki import isa

    out = ndarray(x.shape, x.dtype, sbuf)
    isa.dropout(out, x, rate)
    if dtype is None or get_format(dtype).name == x.fmt.name:
        return out
    res = ndarray(x.shape, dtype, sbuf)
    isa.tensor_copy(res, out)
    return res
