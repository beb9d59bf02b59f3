"""A NeuronCore executing instructions for a target generation, recording the stream.

``NeuronCore.execute(op, dst, src, attrs)`` checks the rules (``trnsim.core.rules``; a
signature that passed once is not re-checked, see ``rules.Checker``), appends one
``Instruction`` to ``record``, and (unless ``functional=False``, a timing-only run that
skips the data) runs the executor of the op. The checker and the executor receive that same
record as a ``LiveInstruction`` (equal to it, plus the live views and the attributes as
passed; ``trnsim.core.live``). An executor: decode the operands to float32, call the
semantics function (``trnsim.core.semantics``, the specification), cast on write through
``trnsim.numerics`` with the run's rounding mode ("rne", or "stochastic" like
``NEURON_RT_STOCHASTIC_ROUNDING_EN=1`` on hardware).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from math import prod
from typing import Any

import numpy as np

from trnsim import numerics
from trnsim.core import indirect
from trnsim.core import semantics as S
from trnsim.core.accel.decode import AccMemo, DecodeCache
from trnsim.core.accel.deferred import Deferred
from trnsim.core.argrules import broken, shape_dims
from trnsim.core.instruction import Instruction
from trnsim.core.isa import AUTO_ENGINE, AUTO_ENGINE_ATTR, DEFAULT_ENGINE, Engine, Op
from trnsim.core.live import LiveInstruction, live_from
from trnsim.core.location import kernel_location, warn
from trnsim.core.memory import (
    HBM,
    PSUM,
    SBUF,
    Hbm,
    OnChipMemory,
    Storage,
    View,
    start_accumulation,
    user_dtype,
)
from trnsim.core.options import CoreOptions
from trnsim.core.rules import Checker, check
from trnsim.core.spec import (
    DATA,
    DST,
    DST_SCALE,
    INDEX,
    MOVING,
    MOVING_SCALE,
    PREDICATE,
    REDUCE_RES,
    SPECS,
    SRC,
    SRC_SEEDS,
    STATIONARY,
    STATIONARY_SCALE,
)
from trnsim.hw import CoreSpec, core
from trnsim.numerics import Format, get_format

F32 = np.float32
_FULL_MARK = {1: 0x01, 2: 0x0101, 4: 0x01010101, 8: 0x0101010101010101}


def resolve_target(target: str | CoreSpec) -> CoreSpec:
    return target if isinstance(target, CoreSpec) else core(target)


class NeuronCore:
    """One emulated NeuronCore: SBUF, PSUM, a view of the shared HBM, and the record."""

    def __init__(
        self,
        target: str | CoreSpec = "gen4",
        *,
        index: int = 0,
        hbm: Hbm | None = None,
        rounding: str = "rne",
        seed: int = 0,
        functional: bool = True,
        options: CoreOptions | None = None,
    ) -> None:
        self.spec = resolve_target(target)
        self.options = opts = options if options is not None else CoreOptions()
        self.index = index
        s = self.spec
        self.sbuf = OnChipMemory(
            SBUF, s.partitions, s.sbuf_bytes_per_partition, core=index, generation_name=s.name
        )
        self.psum = OnChipMemory(
            PSUM,
            s.partitions,
            s.psum_bytes_per_partition,
            core=index,
            bank_bytes=s.psum_bank_bytes,
            generation_name=s.name,
        )
        self.hbm = hbm if hbm is not None else Hbm(2**40, "hbm")
        if rounding not in numerics.ROUNDINGS:
            raise broken("rounding", f"rounding {rounding!r} not in {sorted(numerics.ROUNDINGS)}")
        self.rounding = rounding
        self.rng = numerics.StochasticRng(seed) if rounding == "stochastic" else None
        self.functional = functional
        # Vector-engine XORWOW state [partitions, 4, 6] (rand2 / rand_set_state / rand_get_state)
        self.rng_state = S.xorwow_seed_state(seed, index, s.partitions)
        # Vector-engine max accumulator of select_reduce (reduce_cmd reset_reduce / reduce)
        self.vector_acc: np.ndarray | None = None
        # Scalar-engine reduce_regs of activation / activate2 (reduce_cmd); None: never set
        self.scalar_regs: np.ndarray | None = None
        self.record: list[Instruction] = []
        self.lock = threading.Lock()
        self.checker = Checker()
        # the accelerators (trnsim.core.accel), off in the plain interpreter
        self.decode = DecodeCache(self.read) if opts.accelerated else None
        self.acc_memo = AccMemo() if opts.accelerated else None
        self.deferred: Deferred | None = None
        self._frozen: dict[tuple, tuple[tuple[str, Any], ...]] = {}
        self.sbuf.fill_sentinel = self.psum.fill_sentinel = functional
        # A front end's hook, called with (op, dst, src, attrs) before each instruction is
        # checked and recorded: the legacy front end's allocator (trnsim.nki.legacy.allocator)
        # makes the operands' tiles resident there (refilling spilled ones) and notes the uses
        self.observer: Callable[[Op, dict, dict, dict], None] | None = None

    # ---- allocation -----------------------------------------------------------------------

    def allocate(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        memory: str,
        *,
        name: str = "",
        address: tuple[int, int] | None = None,
        view_type: type[View] = View,
        fill: bool = True,
        offset: int | None = None,
    ) -> View:
        """A fresh tensor (sentinel-filled) in ``memory`` (``"sbuf"``, ``"psum"``, ``"hbm"``),
        as a ``view_type`` (a front end's View subclass). ``fill=False``: the caller writes
        every byte of an HBM tensor itself (no sentinel fill). ``offset``: an SBUF/PSUM byte
        offset the caller chose for an automatic placement (``OnChipMemory.allocate``)."""
        try:
            fmt = _FORMATS[dtype]
        except KeyError:
            fmt = _FORMATS[dtype] = get_format(dtype)
        except TypeError:  # an unhashable dtype argument
            fmt = get_format(dtype)
        shape = shape_dims(shape)  # whole numbers >= 0: 64.5 is refused, never truncated
        isz = fmt.dtype.itemsize
        if memory in (SBUF, PSUM):
            if not shape:
                shape = (1,)
            free = prod(shape[1:])
            mem = self.sbuf if memory == SBUF else self.psum
            deferred = self.deferred
            if deferred is None:
                alloc = mem.allocate(
                    shape[0], free * isz, align=isz, name=name, address=address, offset=offset
                )
            else:  # the sentinel fill runs in program order, behind the deferred data work
                deferred.raise_pending()
                alloc = mem.allocate(
                    shape[0], free * isz, align=isz, name=name, address=address, fill=False,
                    offset=offset,
                )  # fmt: skip
                if mem.fill_sentinel:
                    deferred.fill(mem, alloc)
            storage = Storage(alloc, fmt, shape)
            strides = (1, *_c_strides(shape[1:]))
        else:
            n = prod(shape)
            alloc = self.hbm.allocate(n * isz, name=name, fill=fill)
            storage = Storage(alloc, fmt, shape)
            strides = _c_strides(shape)
        # a fresh allocation is in bounds by construction
        return view_type.trusted(storage, shape, strides, 0, 0, fmt, user_dtype(fmt), True)

    # ---- deferred data work (trnsim.core.accel.deferred) ------------------------------------

    @property
    def fast_paths(self) -> bool:
        """Whether the fast paths (``trnsim.core.accel.decode``) are on."""
        return self.decode is not None

    def start_async(self) -> None:
        """With ``CoreOptions(deferred=True)``: run the data work on other threads until
        ``finish`` (``trnsim.core.accel.deferred``). Not in timing-only runs (no data), nor
        with stochastic rounding."""
        if self.options.deferred and self.deferred is None and self.functional and self.rng is None:
            self.deferred = Deferred(self, EXECUTORS, _psum_accumulate)

    def sync(self) -> None:
        """Wait for the deferred work (raising the first failure among it)."""
        if self.deferred is not None:
            self.deferred.sync()

    def finish(self) -> None:
        """Wait for the deferred work and stop its threads (raising a failure)."""
        deferred, self.deferred = self.deferred, None
        try:
            if deferred is not None:
                deferred.close()
        finally:
            if self.decode is not None:
                self.decode.release()

    # ---- execution ------------------------------------------------------------------------

    def execute(
        self,
        op: Op,
        dst: dict[str, View],
        src: dict[str, View],
        attrs: dict[str, Any] | None = None,
        engine: Engine | None = None,
    ) -> None:
        if attrs is None:
            attrs = {}
        observer = self.observer
        if observer is not None:
            observer(op, dst, src, attrs)
        deferred = self.deferred
        if deferred is not None:
            deferred.raise_pending()
        budget = self.options.max_instructions
        if budget is not None and len(self.record) >= budget:
            raise broken(
                "instruction-budget",
                f"{op.value} would be instruction {len(self.record) + 1} of core {self.index}, "
                f"more than {budget:,} instructions (the budget is {budget:,}: "
                "--max-instructions, CoreOptions.max_instructions)",
            )
        chosen = engine or DEFAULT_ENGINE[op]  # (rule engine: one of the spec's choices)
        if engine is None and op in AUTO_ENGINE:  # the compiler's pick: the timing model's
            attrs = {**attrs, AUTO_ENGINE_ATTR: True}
        # rules.check, with the verdict cached per signature (rules.Checker): bounds of each
        # operand first (dst then src), then the rules unless an equal call passed before.
        # Views of other kinds (indirect views describe themselves) take the plain path.
        signature: list[Any] = [op, chosen, None]
        dst_ops = []
        src_ops = []
        plain = True
        for r, v in dst.items():
            if not (_PLAIN_VIEW.get(type(v)) or _plain_view(type(v))):
                plain = False
                break
            if not v.inbounds:
                v.check_bounds()
            d = v.described(r)
            dst_ops.append(d[0])
            signature.append(d[1])
        if plain:
            for r, v in src.items():
                if not (_PLAIN_VIEW.get(type(v)) or _plain_view(type(v))):
                    plain = False
                    break
                if not v.inbounds:
                    v.check_bounds()
                d = v.described(r)
                src_ops.append(d[0])
                signature.append(d[1])
        # the record's fields; ``ins``: the same record with its live views (LiveInstruction),
        # built when the checker or an executor needs it
        ins = None
        ti = None
        if plain:
            frozen = signature[2] = _freeze_attrs(attrs, self._frozen)
            key = tuple(signature)
            file, line = kernel_location()
            fields = (op, chosen, tuple(dst_ops), tuple(src_ops), frozen, file, line, self.index)
            if not self.checker.known(key):
                ins = live_from(fields, dst, src, attrs, self.spec)
                self.checker.check_rules(ins, key)
        else:
            for operands in (dst, src):
                for role, v in operands.items():
                    if not isinstance(v, View):
                        raise broken(
                            "operand-tensor",
                            f"{op.value} {role} must be a tensor, got {type(v).__name__}",
                        )
            # tensor indirection (.indirect views): checks, index operands (trnsim.core.indirect);
            # the check reads the live views only, so it runs before the operands are described
            # (describing notes the use of each allocation, as after a plain check)
            ti = indirect.prepare(op, chosen, dst, src, attrs, self.spec)
            frozen = _freeze_attrs(attrs, self._frozen)
            file, line = kernel_location()
            fields = (op, chosen, (), (), frozen, file, line, self.index)
            check(live_from(fields, dst, src, attrs, self.spec))
            dst_ops = [v.operand(r) for r, v in dst.items()]
            src_ops = [v.operand(r) for r, v in src.items()]
            fields = (op, chosen, tuple(dst_ops), tuple(src_ops), frozen, file, line, self.index)
        self.record.append(tuple.__new__(Instruction, fields))  # = Instruction(*fields)
        if self.functional:
            if ins is None:
                ins = live_from(fields, dst, src, attrs, self.spec)
            if deferred is not None:
                if plain and not _views_in(attrs):
                    deferred.submit(ins, (file, line))
                    return
                self.sync()  # offsets read from data, or views with their own addressing
            if ti:
                indirect.run(self, ins, ti, EXECUTORS[op])
            else:
                EXECUTORS[op](self, ins)

    def depend(self, pos: int, producers: tuple[int, ...]) -> None:
        """Instruction ``pos`` of this core's record starts after each of ``producers``
        (earlier positions) ends: an explicit dependency (``NkiInstruction.depends_on``),
        kept as its ``after`` attribute for the timing model (``timing.AFTER``)."""
        rec = self.record[pos]
        attrs = dict(rec.attrs)
        after = tuple(sorted(set(attrs.get("after", ())) | set(producers)))
        attrs["after"] = after
        self.record[pos] = rec._replace(attrs=tuple(sorted(attrs.items())))

    # ---- data helpers ---------------------------------------------------------------------

    def read(self, v: View) -> np.ndarray:
        """Decode to float32 (packed x4 words unpack to 4 values along a new last axis)."""
        raw = v.array()
        fmt = v.fmt
        if fmt.kind == "packed":
            vals = numerics.to_float32(np.ascontiguousarray(raw), fmt)
            return vals.reshape(*raw.shape, 4)
        if raw.dtype == F32:
            return raw
        return raw.astype(F32)

    def read_transposed(self, v: View) -> np.ndarray:
        """``read(v)`` as ``[P, F]`` (free dims flattened), transposed to a C-contiguous
        ``[F, P]`` float32 array: the same values, in the layout the tensor engine's
        specification copies the stationary tile into. Stored words are transposed before
        they are decoded (cheaper than transposing the float32 values: half the bytes or
        fewer); a decode is exact, so the order changes no bit."""
        raw = v.array()
        fmt = v.fmt
        if fmt.kind == "packed" or raw.dtype == F32:
            return np.ascontiguousarray(_p2(self.read(v)).T)
        # gathered row by row first (partitions lie far apart in memory), transposed in cache
        words = np.ascontiguousarray(_p2(raw).view(f"u{raw.dtype.itemsize}"))
        return np.ascontiguousarray(words.T).view(raw.dtype).astype(F32)

    def read_raw(self, v: View) -> np.ndarray:
        return v.array()

    def acc_open(self, v: View) -> bool:
        """Whether every element of the PSUM view ``v`` is in an open accumulation group
        (all marks full); with the fast paths, remembered per view until the marks change.
        Every mark byte is 0 or 1 (marks are only ever set to 0 or ``_FULL_MARK``, or copied),
        so no element's mark exceeds the full one, and "all full" is "the least is full" (one
        reduction, no temporary)."""
        memo = self.acc_memo
        if memo is not None and memo.known_open(v):
            return True
        marks = v.acc_array()
        if marks.size and marks.min() != _FULL_MARK[v.itemsize]:
            return False
        if memo is not None:
            memo.remember(v)
        return True

    def _remember_open(self, v: View) -> None:
        if self.acc_memo is not None:
            self.acc_memo.remember(v)

    def write(self, v: View, values: np.ndarray, *, mark_acc: bool = False) -> None:
        """Cast float32 ``values`` to ``v``'s format (run's rounding) and store them."""
        out = v.array()
        vals = np.asarray(values)
        if vals.dtype != v.fmt.dtype or v.fmt.name == "tfloat32":
            vals = self.cast(vals, v.fmt)
        alloc = v.storage.alloc
        vals = vals.reshape(out.shape) if vals.size == out.size else vals
        if alloc.kind == HBM and self.hbm.race is not None:
            self.hbm.race.store(self.index, alloc, out, vals)  # (trnsim.core.races)
        else:
            out[...] = vals
        alloc.version += 1
        if alloc.kind == PSUM:
            v.acc_array()[...] = _FULL_MARK[v.itemsize] if mark_acc else 0
            alloc.marks_version += 1
            if mark_acc:
                self._remember_open(v)

    def write_raw(self, v: View, values: np.ndarray) -> None:
        out = v.array()
        alloc = v.storage.alloc
        if alloc.kind == HBM and self.hbm.race is not None:
            self.hbm.race.store(self.index, alloc, out, np.asarray(values).reshape(out.shape))
        else:
            out[...] = np.asarray(values).reshape(out.shape)
        alloc.version += 1
        if alloc.kind == PSUM:
            v.acc_array()[...] = 0
            alloc.marks_version += 1

    def cast(self, values: np.ndarray, fmt: Format) -> np.ndarray:
        if self.rounding == "stochastic" and fmt.kind != "int":
            with self.lock:
                return numerics.cast(values, fmt, rounding="stochastic", rng=self.rng)
        return numerics.cast(values, fmt)

    def operand_value(self, x: Any) -> Any:
        """A scalar operand as float32, or a [P, 1] View decoded to float32."""
        if isinstance(x, View):
            return self.read(x).reshape(x.partitions, -1)
        return x


def _views_in(attrs: dict[str, Any]) -> bool:
    return any(isinstance(v, View) for v in attrs.values())


_PLAIN_VIEW: dict[type, bool] = {}
"""Per view class: whether it is a plain strided view (describes, bounds-checks and addresses
itself as ``View`` does). Others (the indirect views of ``trnsim.core.indirect``) take the
plain, uncached path of ``execute``."""


def _plain_view(cls: type) -> bool:
    if not issubclass(cls, View):  # not a tensor: execute's operand-tensor error
        return False
    plain = all(
        getattr(cls, name) is getattr(View, name)
        for name in ("operand", "described", "check_bounds", "array", "acc_array")
    )
    _PLAIN_VIEW[cls] = plain
    return plain


_FORMATS: dict[Any, Format] = {}
"""Memo of ``get_format`` for the dtype arguments ``allocate`` sees (NumPy dtypes, names)."""


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = _STRIDES.get(shape)
    if strides is None:
        out, acc = [], 1
        for d in reversed(shape):
            out.append(acc)
            acc *= d
        strides = tuple(reversed(out))
        if len(_STRIDES) < 4096:
            _STRIDES[shape] = strides
    return strides


_STRIDES: dict[tuple[int, ...], tuple[int, ...]] = {}
"""Memo of ``_c_strides`` (kernels allocate the same few tile shapes over and over)."""


_PLAIN = frozenset({bool, int, float, str, type(None)})


FROZEN_MEMO_ENTRIES = 4096
"""Distinct attribute sets a core remembers frozen (then it forgets them all at once)."""


def _freeze_attrs(
    attrs: dict[str, Any], memo: dict[tuple, tuple[tuple[str, Any], ...]]
) -> tuple[tuple[str, Any], ...]:
    """The attributes as sorted ``(name, value)`` pairs with hashable values. ``memo`` (one
    per core, so it lives no longer than the core's record) is keyed by the items and their
    types, so True, 1 and 1.0 stay apart; unhashable attributes skip it."""
    items = tuple(attrs.items())
    key = (items, tuple([type(v) for v in attrs.values()]))
    try:
        return memo[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable value
        key = None
    plain = _PLAIN
    frozen = tuple(sorted([(k, v if type(v) in plain else _freeze(v)) for k, v in items]))
    if key is not None:
        if len(memo) >= FROZEN_MEMO_ENTRIES:
            memo.clear()
        memo[key] = frozen
    return frozen


def _freeze(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.ndarray):
        return tuple(v.reshape(-1).tolist())
    if isinstance(v, np.generic):
        return v.item()
    return v


# ---------------------------------------------------------------------------------------------
# Executors: decode -> semantics -> cast on write. One per op.
# ---------------------------------------------------------------------------------------------

Executor = Callable[[NeuronCore, LiveInstruction], None]
EXECUTORS: dict[Op, Executor] = {}


def executor(op: Op) -> Callable[[Executor], Executor]:
    def reg(fn: Executor) -> Executor:
        EXECUTORS[op] = fn
        return fn

    return reg


def _p2(x: np.ndarray) -> np.ndarray:
    return x.reshape(x.shape[0], -1)


def _psum_accumulate(nc: NeuronCore, dst: View, result: np.ndarray, accumulate: Any) -> None:
    """Matmul write into PSUM: overwrite, accumulate, or auto (per element: first write
    overwrites, later writes accumulate). Accumulation is in fp32."""
    result = result.reshape(dst.shape)
    start_accumulation(dst.storage.alloc)  # per-tensor auto mode over reused addresses
    # fast path (same bits as the general path below): an fp32 accumulation group that is
    # already open everywhere adds in place, no decode / cast / re-mark round trip
    if accumulate is not False and dst.fmt.name == "float32" and nc.acc_open(dst):
        out = dst.array()
        out += result
        dst.storage.alloc.version += 1
        return
    if accumulate is False:
        nc.write(dst, result, mark_acc=True)
        return
    old = nc.read(dst)
    if accumulate is True:
        if np.isnan(old).any() and not (dst.acc_array() != 0).all():
            warn(
                "psum-uninitialized-accumulate",
                f"nc_matmul accumulate=True into uninitialised PSUM {list(dst.shape)}",
            )
        nc.write(dst, old + result, mark_acc=True)
        return
    marks = dst.acc_array()
    full = _FULL_MARK[dst.itemsize]
    if (marks == full).all():
        nc.write(dst, old + result, mark_acc=True)
    elif not marks.any():
        nc.write(dst, result, mark_acc=True)
    else:
        nc.write(dst, np.where(marks == full, old + result, result), mark_acc=True)


@executor(Op.NC_MATMUL)
def _nc_matmul(nc: NeuronCore, c: LiveInstruction) -> None:
    st, mv, dst = c.src_views[STATIONARY], c.src_views[MOVING], c.dst_views[DST]
    if c.args.get("is_transpose"):
        nc.write_raw(dst, S.nc_transpose(nc.read_raw(st)).reshape(dst.shape))
        return
    double = c.args.get("perf_mode") == "double_row"
    decode = nc.decode
    if decode is not None and not double:
        # the same values, decoded once per write of the tile, the stationary one already in
        # the layout the specification copies it into (so its copies are no-ops)
        res = S.nc_matmul(decode.read(st, transposed=True), decode.read(mv), False)
    elif double:
        res = S.nc_matmul(nc.read(st), nc.read(mv), double)
    else:
        # the stationary tile decoded straight into the layout the specification copies it
        # into (its [K, M] view is the transpose of a contiguous [M, K]; the copy is a no-op)
        res = S.nc_matmul(nc.read_transposed(st).T, nc.read(mv), False)
    _psum_accumulate(nc, dst, res, c.args.get("accumulate"))


@executor(Op.NC_MATMUL_MX)
def _nc_matmul_mx(nc: NeuronCore, c: LiveInstruction) -> None:
    st, mv = c.src_views[STATIONARY], c.src_views[MOVING]
    k = st.partitions
    rows = S.mx_scale_rows(k)
    scales = []
    for role in (STATIONARY_SCALE, MOVING_SCALE):
        raw = _p2(nc.read_raw(c.src_views[role]).view(np.uint8))[rows]
        scales.append(np.exp2(raw.astype(np.float64) - 127))
    a = nc.read(st).reshape(k, -1, 4)
    b = nc.read(mv).reshape(k, -1, 4)
    res = S.nc_matmul_mx(a, b, scales[0], scales[1])
    _psum_accumulate(nc, c.dst_views[DST], res, c.args.get("accumulate"))


@executor(Op.NC_TRANSPOSE)
def _nc_transpose(nc: NeuronCore, c: LiveInstruction) -> None:
    dst = c.dst_views[DST]
    nc.write_raw(dst, S.nc_transpose(nc.read_raw(c.src_views[DATA])))


@executor(Op.QUANTIZE_MX)
def _quantize_mx(nc: NeuronCore, c: LiveInstruction) -> None:
    src, dst, scale = c.src_views[SRC], c.dst_views[DST], c.dst_views[DST_SCALE]
    elem = dst.fmt.element
    assert elem is not None
    vals, codes = S.quantize_mx(_p2(nc.read(src)), elem.emax, elem.max)
    packed = numerics.cast(vals, dst.fmt, saturate=True)
    nc.write_raw(dst, packed)
    out = _p2(nc.read_raw(scale)).view(np.uint8).copy()
    out[S.mx_scale_rows(src.partitions), : codes.shape[1]] = codes
    nc.write_raw(scale, out.view(scale.fmt.dtype))


def _reduce_into(nc: NeuronCore, c: LiveInstruction, red: np.ndarray | None) -> None:
    res = c.dst_views.get(REDUCE_RES)
    if res is not None and red is not None:
        nc.write(res, red)


def _scalar_reduce(nc: NeuronCore, c: LiveInstruction, red: np.ndarray | None, rows: int) -> None:
    """activation / activate2: ``reduce_cmd`` ``idle`` (the default) writes this
    instruction's reduction to ``reduce_res`` as before; any other command updates the
    Scalar engine's ``reduce_regs`` and ``reduce_res`` reads them out."""
    cmd = c.args.get("reduce_cmd", "idle")
    if cmd == "idle":
        _reduce_into(nc, c, red)
        return
    nc.scalar_regs = S.scalar_reduce_regs(cmd, c.args.get("reduce_op"), red, nc.scalar_regs, rows)
    res = c.dst_views.get(REDUCE_RES)
    if res is not None:
        nc.write(res, nc.scalar_regs)


@executor(Op.ACTIVATION)
def _activation(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    bias = c.src_views.get("bias")
    scale = c.src_views.get("scale")
    out, red = S.activation(
        a["op"],
        nc.read(c.src_views[DATA]),
        None if bias is None else nc.read(bias),
        nc.read(scale) if scale is not None else a.get("scale", 1.0),
        a.get("reduce_op"),
    )
    nc.write(c.dst_views[DST], out)
    _scalar_reduce(nc, c, red, out.shape[0])


@executor(Op.ACTIVATE2)
def _activate2(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    imm = [
        nc.operand_value(c.src_views[k]) if k in c.src_views else a.get(k)
        for k in ("imm0", "imm1", "relu_param")
    ]
    out, red = S.activate2(
        a["op"],
        nc.read(c.src_views[DATA]),
        a["op0"],
        imm[0],
        a["op1"],
        imm[1],
        a.get("reverse0", False),
        a.get("reverse1", False),
        a.get("reduce_op"),
        0.0 if imm[2] is None else imm[2],
    )
    nc.write(c.dst_views[DST], out)
    _scalar_reduce(nc, c, red, out.shape[0])


@executor(Op.EXPONENTIAL)
def _exponential(nc: NeuronCore, c: LiveInstruction) -> None:
    mx = c.src_views.get("max_value")
    out, sums = S.exponential(
        nc.read(c.src_views[SRC]), nc.read(mx) if mx is not None else c.args.get("max_value", 0.0)
    )
    nc.write(c.dst_views[DST], out)
    _reduce_into(nc, c, sums + F32(c.args.get("reduce_init", 0.0)))


def _is_int(v: View) -> bool:
    return v.fmt.kind == "int"


@executor(Op.TENSOR_TENSOR)
def _tensor_tensor(nc: NeuronCore, c: LiveInstruction) -> None:
    op = c.args["op"]
    d1, d2, dst = c.src_views["data1"], c.src_views["data2"], c.dst_views[DST]
    if op in S.BITVEC_OPS:
        a, b = _p2(nc.read_raw(d1)), _p2(nc.read_raw(d2))
        nc.write_raw(dst, S.tensor_tensor(op, a, b.astype(a.dtype)).astype(dst.fmt.dtype))
        return
    if c.engine == Engine.GPSIMD and all(_is_int(v) for v in (d1, d2, dst)):
        a, b = _p2(nc.read_raw(d1)).astype(np.int64), _p2(nc.read_raw(d2)).astype(np.int64)
        nc.write(dst, S.tensor_tensor(op, a, b))
        return
    nc.write(dst, S.tensor_tensor(op, _p2(nc.read(d1)), _p2(nc.read(d2))))


@executor(Op.TENSOR_SCALAR)
def _tensor_scalar(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    data, dst = c.src_views[DATA], c.dst_views[DST]
    ops = {a.get("op0"), a.get("op1")}
    bitvec = bool(ops & set(S.BITVEC_OPS))
    x = _p2(nc.read_raw(data)) if bitvec else _p2(nc.read(data))
    o0 = (
        nc.operand_value(c.src_views["operand0"])
        if "operand0" in c.src_views
        else a.get("operand0")
    )
    o1 = (
        nc.operand_value(c.src_views["operand1"])
        if "operand1" in c.src_views
        else a.get("operand1")
    )
    if bitvec:
        o0 = None if o0 is None else np.asarray(o0).astype(x.dtype)
        o1 = None if o1 is None else np.asarray(o1).astype(x.dtype)
        out = S.tensor_scalar(x, a["op0"], o0, a.get("reverse0", False), a.get("op1"), o1)
        nc.write_raw(dst, out.astype(dst.fmt.dtype))
        return
    out = S.tensor_scalar(
        x, a["op0"], o0, a.get("reverse0", False), a.get("op1"), o1, a.get("reverse1", False)
    )
    nc.write(dst, out)


@executor(Op.TENSOR_REDUCE)
def _tensor_reduce(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    data, dst = c.src_views[DATA], c.dst_views[DST]
    op = a["op"]
    x = nc.read_raw(data) if op in S.BITVEC_OPS else nc.read(data)
    out = S.tensor_reduce(op, x, tuple(a["axis"]), a.get("negate", False), a.get("keepdims", False))
    if op in S.BITVEC_OPS:
        nc.write_raw(dst, out.astype(dst.fmt.dtype))
    else:
        nc.write(dst, out.astype(F32))


@executor(Op.TENSOR_PARTITION_REDUCE)
def _tensor_partition_reduce(nc: NeuronCore, c: LiveInstruction) -> None:
    nc.write(
        c.dst_views[DST], S.tensor_partition_reduce(c.args["op"], _p2(nc.read(c.src_views[DATA])))
    )


def _copy(nc: NeuronCore, src: View, dst: View) -> None:
    """Bit-accurate when the formats match, else via fp32 (tensor_copy / dma_copy docstrings)."""
    if src.fmt.name == dst.fmt.name:
        nc.write_raw(dst, nc.read_raw(src).reshape(dst.shape))
    elif src.fmt.kind == "int" and dst.fmt.kind == "int":
        nc.write(dst, nc.read_raw(src).astype(np.int64).reshape(dst.shape))
    else:
        nc.write(dst, nc.read(src).reshape(dst.shape))


@executor(Op.TENSOR_COPY)
def _tensor_copy(nc: NeuronCore, c: LiveInstruction) -> None:
    if "dynamic" in c.args:  # a dynamic offset within each partition (trnsim.core.indirect, 7)
        c = indirect.resolve_dynamic(nc, c)
    via = c.args.get("dtype")
    dst = c.dst_views[DST]
    if via is not None and via != dst.fmt.name:  # tutorials' dtype=: cast to it on the way
        fmt = get_format(via)
        vals = numerics.to_float32(nc.cast(nc.read(c.src_views[SRC]), fmt), fmt)
        nc.write(dst, vals.reshape(dst.shape))
        return
    _copy(nc, c.src_views[SRC], dst)


@executor(Op.TENSOR_COPY_PREDICATED)
def _tensor_copy_predicated(nc: NeuronCore, c: LiveInstruction) -> None:
    dst = c.dst_views[DST]
    src = c.src_views.get(SRC)
    sval = _p2(nc.read_raw(src)) if src is not None else c.args["src"]
    out = S.tensor_copy_predicated(
        _p2(nc.read_raw(dst)),
        sval,
        _p2(nc.read_raw(c.src_views[PREDICATE])),
        c.args.get("reverse_pred", False),
    )
    if src is None:
        nc.write(dst, out.astype(F32) if dst.fmt.kind != "int" else out)
    else:
        nc.write_raw(dst, out)


@executor(Op.TENSOR_TENSOR_SCAN)
def _tensor_tensor_scan(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    init = nc.operand_value(c.src_views["initial"]) if "initial" in c.src_views else a["initial"]
    out = S.tensor_tensor_scan(
        nc.read(c.src_views["data0"]),
        nc.read(c.src_views["data1"]),
        init,
        a["op0"],
        a["op1"],
        a.get("reverse0", False),
        a.get("reverse1", False),
    )
    nc.write(c.dst_views[DST], out)


@executor(Op.SCALAR_TENSOR_TENSOR)
def _scalar_tensor_tensor(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    o0 = nc.operand_value(c.src_views["operand0"]) if "operand0" in c.src_views else a["operand0"]
    out = S.scalar_tensor_tensor(
        _p2(nc.read(c.src_views[DATA])),
        a["op0"],
        o0,
        a["op1"],
        _p2(nc.read(c.src_views["operand1"])),
        a.get("reverse0", False),
        a.get("reverse1", False),
    )
    nc.write(c.dst_views[DST], out)


@executor(Op.MEMSET)
def _memset(nc: NeuronCore, c: LiveInstruction) -> None:
    dst = c.dst_views[DST]
    value = c.args["value"]
    if dst.fmt.kind == "packed":  # only 0 (rule memset-value)
        nc.write_raw(dst, np.zeros(dst.shape, dtype=dst.fmt.dtype))
        return
    nc.write(dst, np.full(dst.shape, value, dtype=np.float64 if dst.fmt.kind == "int" else F32))


@executor(Op.IOTA)
def _iota(nc: NeuronCore, c: LiveInstruction) -> None:
    a, dst = c.args, c.dst_views[DST]
    vals = S.iota(
        dst.partitions, list(a["pattern"]), a.get("offset", 0), a.get("channel_multiplier", 0)
    )
    nc.write(dst, vals.astype(np.int64) if dst.fmt.kind == "int" else vals.astype(F32))


@executor(Op.RECIPROCAL)
def _reciprocal(nc: NeuronCore, c: LiveInstruction) -> None:
    nc.write(c.dst_views[DST], S.reciprocal(nc.read(c.src_views[DATA])))


@executor(Op.BN_STATS)
def _bn_stats(nc: NeuronCore, c: LiveInstruction) -> None:
    nc.write(c.dst_views[DST], S.bn_stats(nc.read(c.src_views[DATA])))


@executor(Op.BN_AGGR)
def _bn_aggr(nc: NeuronCore, c: LiveInstruction) -> None:
    nc.write(c.dst_views[DST], S.bn_aggr(_p2(nc.read(c.src_views[DATA]))))


@executor(Op.MAX8)
def _max8(nc: NeuronCore, c: LiveInstruction) -> None:
    nc.write(c.dst_views[DST], S.max8(nc.read(c.src_views[SRC])))


@executor(Op.NC_FIND_INDEX8)
def _find_index8(nc: NeuronCore, c: LiveInstruction) -> None:
    out = S.nc_find_index8(nc.read(c.src_views[DATA]), nc.read(c.src_views["vals"]))
    dst = c.dst_views[DST]
    if dst.fmt.kind == "int":
        nc.write_raw(dst, out.astype(dst.fmt.dtype))
    else:
        nc.write(dst, out.astype(F32))


@executor(Op.AFFINE_SELECT)
def _affine_select(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    out = S.affine_select(
        nc.read(c.src_views[DATA]),
        list(a["pattern"]),
        a.get("offset", 0),
        a.get("channel_multiplier", 0),
        a["cmp_op"],
        a["on_false_value"],
    )
    nc.write(c.dst_views[DST], out)


@executor(Op.RANGE_SELECT)
def _range_select(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    out, red = S.range_select(
        nc.read(c.src_views["on_true_tile"]),
        a["comp_op0"],
        a["comp_op1"],
        _p2(nc.read(c.src_views["bound0"])),
        _p2(nc.read(c.src_views["bound1"])),
        a.get("range_start", 0.0),
        a["on_false_value"],
    )
    nc.write(c.dst_views[DST], out)
    _reduce_into(nc, c, red)


@executor(Op.SELECT_REDUCE)
def _select_reduce(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    on_false = (
        nc.operand_value(c.src_views["on_false"]) if "on_false" in c.src_views else a["on_false"]
    )
    out, red = S.select_reduce(
        nc.read_raw(c.src_views[PREDICATE]),
        nc.read(c.src_views["on_true"]),
        on_false,
        a.get("reverse_pred", False),
    )
    nc.write(c.dst_views[DST], out)
    cmd = a.get("reduce_cmd", "idle")
    if cmd == "reduce":
        if nc.vector_acc is None or nc.vector_acc.shape != red.shape:
            raise broken(
                "select-reduce-continue",
                "select_reduce reduce_cmd=reduce continues an accumulation, but no "
                f"reset_reduce of {red.shape[0]} partitions came before it",
            )
        red = np.maximum(nc.vector_acc, red)
    if cmd in ("reduce", "reset_reduce"):
        nc.vector_acc = red
    _reduce_into(nc, c, red)


@executor(Op.RAND2)
def _rand2(nc: NeuronCore, c: LiveInstruction) -> None:
    a, dst = c.args, c.dst_views[DST]
    lo = nc.operand_value(c.src_views["min"]) if "min" in c.src_views else a["min"]
    hi = nc.operand_value(c.src_views["max"]) if "max" in c.src_views else a["max"]
    p0, n = dst.partition_start, dst.free_size
    state = nc.rng_state[p0 : p0 + dst.partitions]
    vals, nc.rng_state[p0 : p0 + dst.partitions] = S.rand2(state, n, lo, hi)
    if dst.fmt.kind == "int":
        vals = np.floor(vals).astype(np.int64)  # the integer part (documented trnsim choice)
    nc.write(dst, vals)


@executor(Op.RAND_SET_STATE)
def _rand_set_state(nc: NeuronCore, c: LiveInstruction) -> None:
    src = c.src_views[SRC_SEEDS]
    p0 = src.partition_start
    words = _p2(nc.read_raw(src)).astype(np.uint32)
    nc.rng_state[p0 : p0 + src.partitions] = words.reshape(
        src.partitions, S.XORWOW_GENERATORS, S.XORWOW_WORDS
    )


@executor(Op.RAND_GET_STATE)
def _rand_get_state(nc: NeuronCore, c: LiveInstruction) -> None:
    dst = c.dst_views[DST]
    p0 = dst.partition_start
    nc.write_raw(dst, nc.rng_state[p0 : p0 + dst.partitions].reshape(dst.partitions, -1))


@executor(Op.LOCAL_GATHER)
def _local_gather(nc: NeuronCore, c: LiveInstruction) -> None:
    a = c.args
    out = S.local_gather(
        nc.read_raw(c.src_views["src_buffer"]),
        nc.read_raw(c.src_views[INDEX]),
        a.get("group", nc.spec.partitions // 8),
        a.get("num_elem_per_idx", 1),
        a.get("num_valid_indices"),
    )
    nc.write_raw(c.dst_views[DST], out)


@executor(Op.DMA_COPY)
def _dma_copy(nc: NeuronCore, c: LiveInstruction) -> None:
    if "indirect" in c.args:  # gather / scatter through an index tile (trnsim.core.indirect)
        indirect.execute(nc, c)
        return
    _copy(nc, c.src_views[SRC], c.dst_views[DST])


@executor(Op.DMA_TRANSPOSE)
def _dma_transpose(nc: NeuronCore, c: LiveInstruction) -> None:
    src = c.src_views[SRC]
    axes = c.args.get("axes") or tuple({2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}[len(src.shape)])
    nc.write_raw(c.dst_views[DST], S.dma_transpose(nc.read_raw(src), tuple(axes)))


@executor(Op.DMA_COMPUTE)
def _dma_compute(nc: NeuronCore, c: LiveInstruction) -> None:
    if "indirect" in c.args:  # read-modify-write through vector_offset (trnsim.core.indirect)
        indirect.execute_rmw(nc, c)
        return
    dst = c.dst_views[DST]
    op = c.args.get("reduce_op", "add")
    acc = None
    for role in sorted(r for r in c.src_views if r.startswith("src")):
        x = nc.read(c.src_views[role]).reshape(dst.shape)
        acc = x if acc is None else S.alu(op, acc, x)
    assert acc is not None
    nc.write(dst, acc)


def _generic(nc: NeuronCore, c: LiveInstruction) -> None:
    """The executor of a ``run="generic"`` spec entry: the semantics function gets each source
    by role name (``[P, F]`` float32, raw values for a ``raw`` role; a scalar given for a
    ``scalar`` role as a number), each attribute by name, ``shape`` (the dst's ``[P, F]``) and
    ``state`` (the Vector engine's XORWOW state of the dst's lanes, or of all lanes without a
    dst) if it asks for them; it returns the dst's values, the new state, or both."""
    entry = SPECS[c.opcode]
    fn = entry.semantics
    assert fn is not None
    wants = _PARAMS.get(fn)
    if wants is None:
        wants = _PARAMS[fn] = frozenset(inspect.signature(fn).parameters)
    kw: dict[str, Any] = {}
    dst = c.dst_views.get(DST)
    for role in entry.operands:
        if role.dst:
            continue
        v = c.src_views.get(role.name)
        if v is None:
            if role.name in c.args:
                kw[role.name] = c.args[role.name]
            elif role.optional:
                kw[role.name] = None
            continue
        kw[role.name] = _p2(nc.read_raw(v) if role.raw else nc.read(v))
    for a in entry.attrs:
        if a.name in wants:
            kw[a.name] = c.args.get(a.name, a.default)
    lanes = slice(0, nc.spec.partitions)
    if dst is not None:
        lanes = slice(dst.partition_start, dst.partition_start + dst.partitions)
        if "shape" in wants:
            kw["shape"] = (dst.partitions, dst.free_size)
    if "state" in wants:
        kw["state"] = nc.rng_state[lanes]
    if "shape" in wants and dst is None and c.dst_views:  # no ``dst`` role: the first destination
        first = next(iter(c.dst_views.values()))
        kw["shape"] = (first.partitions, first.free_size)
    if "acc" in wants:  # the Vector engine's accumulator registers (reduce_cmd)
        kw["acc"] = nc.vector_acc
    if "dsts" in wants:  # which optional destinations the call gave
        kw["dsts"] = frozenset(c.dst_views)
    if "old" in wants:  # the dst's current raw values (an instruction leaving some unmodified)
        assert dst is not None
        kw["old"] = _p2(nc.read_raw(dst))
    res = fn(**kw)
    if "state" in wants:
        if dst is None:
            nc.rng_state[lanes] = res
            return
        res, nc.rng_state[lanes] = res
    if "acc" in wants:
        res, nc.vector_acc = res
    if isinstance(res, dict):  # several destinations: values by role name
        for name, values in res.items():
            view = c.dst_views.get(name)
            if view is not None:
                _write_role(nc, entry, name, view, values)
        return
    assert dst is not None
    role = entry.role(DST)
    if role is not None and role.raw:
        nc.write_raw(dst, np.asarray(res).astype(dst.fmt.dtype))
    else:
        nc.write(dst, res)


def _write_role(nc: NeuronCore, entry: Any, name: str, view: View, values: Any) -> None:
    role = entry.role(name)
    if role is not None and role.raw:
        nc.write_raw(view, np.asarray(values).astype(view.fmt.dtype).reshape(view.shape))
    else:
        nc.write(view, np.asarray(values).reshape(view.shape))


_PARAMS: dict[Callable[..., Any], frozenset[str]] = {}


def _sync_noop(nc: NeuronCore, c: LiveInstruction) -> None:
    """Barriers and send/receive are carried out by the launcher (LNC=2 threads)."""


for _op in (Op.CORE_BARRIER, Op.SENDRECV):
    EXECUTORS[_op] = _sync_noop
for _op in (
    Op.ALL_REDUCE,
    Op.ALL_GATHER,
    Op.REDUCE_SCATTER,
    Op.ALL_TO_ALL,
    Op.COLLECTIVE_PERMUTE,
    Op.COLLECTIVE_PERMUTE_IMPLICIT,
    Op.ALL_GATHER_V,
    Op.ALL_TO_ALL_V,
):
    EXECUTORS[_op] = _sync_noop  # nki.collectives: exchanged by trnsim.nki.collectives


def _not_implemented(op: Op) -> Executor:
    def run(nc: NeuronCore, c: LiveInstruction) -> None:
        raise broken("executor-missing", f"{op.value} is not implemented by the trnsim core yet")

    return run


for _op in Op:
    if SPECS[_op].run == "generic":
        EXECUTORS.setdefault(_op, _generic)
    EXECUTORS.setdefault(_op, _not_implemented(_op))
