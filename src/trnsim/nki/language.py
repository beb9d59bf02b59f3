"""``nki.language`` (NKI 0.3 - 0.6): dtypes, buffers, tensor creation, load/store, math.

Every function that computes issues ``nki.isa`` instructions on the running core; nothing is
computed outside the instruction stream. Sources: SDK ``nki/api/nki/language/__init__.py``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from trnsim.core.argrules import broken, shape_dims
from trnsim.core.location import kernel_location
from trnsim.core.memory import HBM, PSUM, SBUF, View
from trnsim.hw import core as _core_spec
from trnsim.nki.buffers import Buffer, hbm, private_hbm, psum, sbuf, shared_hbm  # noqa: F401
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


_Buffer = Buffer


def _buffer(buffer: Any) -> _Buffer:
    if buffer is None:
        return sbuf
    if not isinstance(buffer, _Buffer):
        raise broken("buffer", f"buffer must be nl.sbuf / nl.psum / nl.shared_hbm, got {buffer!r}")
    return buffer


# ---- creation ----------------------------------------------------------------------------


_AUTO_NAMES: dict[tuple[str, str, int], str] = {}
"""The name of an unnamed tensor, by (buffer, kernel file, line): formatted once per line."""


def ndarray(
    shape: Any, dtype: Any, buffer: Any = None, name: str = "", address: Any = None
) -> NkiTensor:
    """A new, uninitialised tensor (sentinel-filled: NaN for floats). Without a ``name`` the
    tensor is named after the kernel line that made it (errors name tensors)."""
    prog = current()
    buf = _buffer(buffer)
    if not name:
        where = (buf.name, *kernel_location())
        name = _AUTO_NAMES.get(where)
        if name is None:
            file = where[1].replace(chr(92), "/").rsplit("/", 1)[-1]
            name = _AUTO_NAMES[where] = f"{buf.name}@{file}:{where[2]}"
    if not isinstance(shape, tuple | list):
        shape = (shape,)  # NeuronCore.allocate makes the dims ints
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
# ``nl.range``: not in the NKI 0.6 API list (sdk ``nki/api/nki.language.rst``), but nki-library
# loops with it (``experimental/mxfp_subkernels/mxfp_load_utils.py``); the NKI loops deep dive
# (awsdocs-neuron ``nki/deep-dives/nki-loops``) says the static range iterators are Python
# ``range`` from NKI 0.7 on, which is what this is.
range = range


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
            raise broken("nl-operand", f"nl.{self.name} needs at least one tensor")
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
    "prelu",
    "silu",
    "gelu",
    "gelu_apprx_tanh",
    "gelu_apprx_sigmoid",
    "softplus",
    "mish",
    "erf",
    "gelu_dx",
    "gelu_apprx_sigmoid_dx",
    "silu_dx",
    "erf_dx",
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
        raise broken(
            "nl-matmul-transpose", "nl.matmul(transpose_x=False); pass x as [K, M] with True"
        )
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
        raise broken("nl-missing", f"nl.{name} is not implemented by trnsim yet")

    fn.__name__ = name
    return fn


for _n in ("gather_flattened",):
    globals()[_n] = _not_here(_n)


# ---- NKI 0.6 surface composed of existing instructions -------------------------------------


class NKIObject:
    """Base class of NKI kernel classes (``nl.NKIObject``). As the NKI language guide says,
    every such class behaves like a data class with or without ``@dataclass``: unless the
    class defines ``__init__``, it gets ``__init__(self, f1=default, ...)`` over its fields
    (annotated or plain class attributes, in order, bases first; no default means None),
    which then calls ``__post_init__``. Source: SDK ``nki/get-started/nki-language-guide.rst``,
    "Class Support"."""

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__:
            # set before @dataclass runs, which keeps an __init__ the class already has
            cls.__init__ = _nki_init(_nki_fields(cls))  # type: ignore[method-assign]


def _nki_fields(cls: type) -> list[tuple[str, Any]]:
    """(name, default) of an NKI class's fields: annotated names and plain class attributes
    (not callables, properties or dunders), bases first."""
    import dataclasses
    import inspect

    fields: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or klass is NKIObject or not issubclass(klass, NKIObject):
            continue
        names = list(inspect.get_annotations(klass))
        names += [
            n
            for n, v in klass.__dict__.items()
            if not n.startswith("__")
            and not callable(v)
            and not isinstance(v, property | staticmethod | classmethod)
        ]
        for n in names:
            v = klass.__dict__.get(n, None)
            if isinstance(v, dataclasses.Field):
                v = (
                    v
                    if v.default_factory is not dataclasses.MISSING
                    else (None if v.default is dataclasses.MISSING else v.default)
                )
            fields[n] = v
    return list(fields.items())


def _nki_init(fields: list[tuple[str, Any]]):
    import dataclasses

    names = [n for n, _ in fields]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} fields, got {len(args)}")
        unknown = set(kwargs) - set(names)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        given = dict(zip(names, args, strict=False)) | kwargs
        for n, default in fields:
            if n in given:
                v = given[n]
            elif isinstance(default, dataclasses.Field):
                v = default.default_factory()  # type: ignore[misc]
            else:
                v = default
            object.__setattr__(self, n, v)
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    return __init__


def expand_dims(x: NkiTensor, axis: int) -> NkiTensor:
    """A view with a new size-1 dim at ``axis`` (no data moves)."""
    return x.expand_dims(axis)


def broadcast_to(x: NkiTensor, shape: Any) -> NkiTensor:
    """A view of ``x`` broadcast to ``shape`` along its size-1 free dims."""
    return x.broadcast_to(shape_dims(shape))


def where(condition: NkiTensor, x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """``x`` where ``condition`` is non-zero, else ``y`` (a copy of ``y`` then a predicated
    copy of ``x``: ``nisa.tensor_copy_predicated``)."""
    from trnsim.nki import isa

    like = next(v for v in (x, y, condition) if isinstance(v, View))
    out = ndarray(condition.shape, dtype or like.dtype, sbuf)
    if isinstance(y, View):
        isa.tensor_copy(out, y)
    else:
        isa.memset(out, y)
    isa.tensor_copy_predicated(out, x, condition)
    return out


def logical_not(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """1 where ``x`` is 0, else 0."""
    from trnsim.nki import isa

    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    isa.tensor_scalar(out, x, "equal", 0.0)
    return out


def invert(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """Bitwise NOT of an integer tensor (``x ^ all-ones``)."""
    from trnsim.nki import isa

    dt = np.dtype(x.dtype)
    if dt.kind not in "iu":
        raise broken("nl-invert-dtype", f"nl.invert needs an integer tensor, got {dt}")
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    isa.tensor_scalar(out, x, "bitwise_xor", -1 if dt.kind == "i" else int(np.iinfo(dt).max))
    return out


def all(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """1 where every element along ``axis`` is non-zero, else 0 (a min-reduce of x != 0)."""
    from trnsim.nki import isa

    nz = ndarray(x.shape, float32, sbuf)
    isa.tensor_scalar(nz, x, "not_equal", 0.0)
    return _reduce("minimum")(nz, axis, dtype or uint8, keepdims)


def _free_axes(x: NkiTensor, axis: Any, fn: str) -> None:
    axes = sorted(a % x.ndim for a in (axis if isinstance(axis, tuple | list) else (axis,)))
    if axes != list(range(1, x.ndim)):
        raise broken(
            "nl-reduce-axis",
            f"nl.{fn} along axis {axis} of {list(x.shape)}: trnsim reduces along all free "
            f"dims (axes 1..{x.ndim - 1}) only",
        )


def softmax(x: NkiTensor, axis: Any, dtype: Any = None) -> NkiTensor:
    """``exp(x - max) / sum(exp(x - max))`` along the free dims (fp32 internally)."""
    from trnsim.nki import isa

    _free_axes(x, axis, "softmax")
    m = max(x, axis, float32, keepdims=True)
    e = ndarray(x.shape, float32, sbuf)
    isa.tensor_scalar(e, x, "subtract", m.reshape((x.shape[0], 1)))
    isa.activation(e, "exp", e)
    s = sum(e, axis, float32, keepdims=True)
    r = ndarray(s.shape, float32, sbuf)
    isa.reciprocal(r, s)
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    isa.tensor_scalar(out, e, "multiply", r.reshape((x.shape[0], 1)))
    return out


def var(x: NkiTensor, axis: Any, dtype: Any = None) -> NkiTensor:
    """Population variance ``mean((x - mean(x))^2)`` along the free dims (fp32 internally)."""
    from trnsim.nki import isa

    _free_axes(x, axis, "var")
    m = mean(x, axis, float32, keepdims=True)
    d = ndarray(x.shape, float32, sbuf)
    isa.tensor_scalar(d, x, "subtract", m.reshape((x.shape[0], 1)))
    isa.tensor_tensor(d, d, d, "multiply")
    return mean(d, axis, dtype or x.dtype, keepdims=True)


def rms_norm(
    x: NkiTensor,
    w: NkiTensor,
    axis: Any,
    n: int,
    epsilon: float = 1e-6,
    dtype: Any = None,
    compute_dtype: Any = None,
) -> NkiTensor:
    """``x / RMS(x) * w`` with ``RMS(x) = sqrt(sum(x^2 along axis) / n + epsilon)``, along
    the free dims; ``w`` has ``x``'s shape (or broadcasts to it along free dims)."""
    from trnsim.nki import isa

    _free_axes(x, axis, "rms_norm")
    cdt = compute_dtype or float32
    sq = ndarray(x.shape, cdt, sbuf)
    isa.tensor_tensor(sq, x, x, "multiply")
    ms = sum(sq, axis, cdt, keepdims=True).reshape((x.shape[0], 1))
    inv = ndarray(ms.shape, cdt, sbuf)
    isa.tensor_scalar(inv, ms, "multiply", 1.0 / int(n), op1="add", operand1=float(epsilon))
    isa.activation(inv, "rsqrt", inv)
    if tuple(w.shape) != tuple(x.shape):
        w = w.broadcast_to(tuple(x.shape))
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    isa.scalar_tensor_tensor(out, x, "multiply", inv, "multiply", w)
    return out


def load_transpose2d(src: NkiTensor, dtype: Any = None) -> NkiTensor:
    """A 2-D HBM tensor ``[A, B]`` loaded transposed into a new SBUF tile ``[B, A]`` (one
    ``dma_copy`` reading ``src`` through its transposed view)."""
    from trnsim.nki import isa

    if src.on_chip or src.ndim != 2:
        raise broken(
            "load-transpose2d",
            f"nl.load_transpose2d needs a 2-D HBM tensor, got {src.memory} {list(src.shape)}",
        )
    out = ndarray((src.shape[1], src.shape[0]), dtype or src.dtype, sbuf)
    isa.dma_copy(out, src.permute(1, 0))
    return out


def dynamic_range(start: Any, stop: Any = None, step: int = 1) -> range:
    """A loop on device with run-time bounds. trnsim runs kernels eagerly, so a bound is its
    value when the loop starts: a Python integer or a register (``nisa.register_*``, anything
    with ``__index__``); the step must be a compile-time positive integer, as documented."""
    if stop is None:
        start, stop = 0, start
    return _run_time_range("nl.dynamic_range", start, stop, step)


def _run_time_range(what: str, start: Any, stop: Any, step: Any) -> range:
    """The iterations of a device loop (``dynamic_range``, ``fori_loop``): bounds are ints or
    registers (their values when the loop starts), the step a compile-time positive int."""
    bounds = []
    for v in (start, stop):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise broken(
                "dynamic-range-bound", f"{what} bound must be an integer or a register, got {v!r}"
            )
        bounds.append(v.__index__())
    if not isinstance(step, int | np.integer) or isinstance(step, bool) or step <= 0:
        raise broken(
            "dynamic-range-step",
            f"{what} step must be a compile-time positive int (not a register), got {step!r}",
        )
    return range(bounds[0], bounds[1], int(step))


def fori_loop(lower: Any, upper: Any, body_fun: Any, step: int = 1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)``, a counted device loop: the bounds
    are ints or registers (read when the loop starts), ``step`` a compile-time positive int,
    and ``body_fun`` receives the iteration value as a register, by value (writing it does not
    change the loop). Returns None; the body's effects are its writes to memory."""
    from trnsim.nki.isa import VirtualRegister

    for i in _run_time_range("nl.fori_loop", lower, upper, step):
        body_fun(VirtualRegister(i))


def while_loop(init: Any, body_fun: Any) -> None:
    """``r = init; while r != 0: r = body_fun(r)``, a device loop on a condition register,
    tested before each iteration: ``body_fun`` receives the condition's value as a register,
    by value, and returns the register holding the next condition. Returns None."""
    from trnsim.nki.isa import VirtualRegister

    cond = _loop_register(init, "nl.while_loop init")
    while cond.value != 0:
        cond = _loop_register(body_fun(VirtualRegister(cond.value)), "nl.while_loop body result")


def _loop_register(x: Any, what: str) -> Any:
    from trnsim.nki.isa import VirtualRegister

    if not isinstance(x, VirtualRegister):
        raise broken(
            "loop-register",
            f"{what} must be an nki.isa register (register_alloc), got {type(x).__name__} {x!r}",
        )
    return x


class no_reorder:
    """``with nl.no_reorder():``: keep the block's instructions in program order. trnsim
    issues every engine's instructions in program order already, so the block runs as is."""

    def __enter__(self) -> no_reorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def shared_constant(constant: Any, dtype: Any = None) -> NkiTensor:
    """A shared-HBM tensor holding ``constant`` (a NumPy array or the path of a ``.npy``
    file), loaded with the kernel like its inputs (SDK: embedded in the binary, loaded to HBM
    at model load). ``dtype`` (a trnsim extension) converts it first."""
    if isinstance(constant, str | bytes) or hasattr(constant, "__fspath__"):
        constant = np.load(constant)
    arr = np.asarray(constant)
    t = ndarray(arr.shape, dtype if dtype is not None else arr.dtype, shared_hbm)
    prog = current()
    if prog.core.functional:  # a timing-only run moves no data
        prog.core.sync()
        t.array()[...] = arr.astype(t.fmt.dtype)
    return t


def shared_identity_matrix(n: int, dtype: Any = uint8, dst: NkiTensor | None = None) -> NkiTensor:
    """An ``n x n`` identity matrix in SBUF (``dst`` if given): a shared constant in HBM,
    loaded with one ``dma_copy``."""
    from trnsim.nki import isa

    n = int(n)
    const = shared_constant(np.identity(n), dtype)
    out = dst if dst is not None else ndarray((n, n), dtype, sbuf)
    isa.dma_copy(out, const)
    return out


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
