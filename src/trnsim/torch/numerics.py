"""Numerics policies of the PyTorch front end: how a matmul's operands and results are rounded.

A ``Numerics`` names the format the Tensor engine reads matmul operands in, the rounding mode
(round-to-nearest-even or stochastic, like ``NEURON_RT_STOCHASTIC_ROUNDING_EN=1``) and the seed
of the stochastic bits. Everything numeric is done by ``trnsim.numerics`` (``cast``,
``mx.quantize``) and ``trnsim.core.semantics`` (``nc_matmul``, ``nc_matmul_mx``); this module
only says which of them applies (``trnsim.torch.gemm`` applies them).

Policies (``NUMERICS``; ``numerics(name)`` looks one up):

- ``native``: operands in the tensors' own dtype (a bf16 model multiplies bf16 operands);
- ``fp32``, ``bf16``, ``fp16``, ``fp8`` (float8_e4m3fn, the OCP E4M3 of NeuronCore-v4),
  ``fp8_e5m2``: operands rounded to that format first (fake-quantisation, as a numerics study
  of an fp32 model does), products accumulated in fp32 in PSUM;
- ``mxfp8`` (E4M3 elements) and ``mxfp4`` (E2M1 elements): both operands quantised to MX with
  blocks of 32 along the contraction dimension and NKI's scale rule (``quantize_mx``: one more
  than OCP's, so no element saturates; ``trnsim.numerics.mx``), multiplied by
  ``nc_matmul_mx``.

Stochastic rounding draws its bits from ``trnsim.numerics.StochasticRng``; the seed of each op
is a pure function of the policy's seed, the op's name and its operands' bytes
(``op_seed``), so eager and compiled runs, which may order ops differently, round alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.numerics import ROUNDINGS

MX_OPERANDS: dict[str, str] = {"mxfp8": "float8_e4m3fn", "mxfp4": "float4_e2m1fn"}
"""MX operand policy -> element format (``trnsim.numerics.mx.MX_ELEMENT_FORMATS``)."""

SCALE_RULE = "nki"
"""MX scale rule of ``quantize_mx`` (NKI 0.5.0+; ``trnsim.numerics.mx`` module docstring)."""


@dataclass(frozen=True, slots=True)
class Numerics:
    """How matmuls round.

    Attributes:
        name: the policy's name (``NUMERICS`` key, or ``custom``).
        operands: the operand format (a ``trnsim.numerics`` format name, ``mxfp8``/``mxfp4``),
            or None for the tensors' own dtype.
        rounding: ``rne`` or ``stochastic`` (operand rounding, the fp32 PSUM result written in
            a narrower dtype, and, in the eager mode, every bf16/fp16 result of other ops).
        seed: the stochastic-rounding seed (``op_seed``).
    """

    name: str
    operands: str | None
    rounding: str = "rne"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rounding not in ROUNDINGS:
            raise ConfigError(
                f"numerics rounding {self.rounding!r} is not one of {', '.join(ROUNDINGS)}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer):
            raise ConfigError(f"numerics seed must be an int, got {self.seed!r}")

    @property
    def mx(self) -> bool:
        return self.operands in MX_OPERANDS

    @property
    def stochastic(self) -> bool:
        return self.rounding == "stochastic"

    def describe(self) -> str:
        ops = self.operands or "the tensors' own dtype"
        sr = f"stochastic rounding (seed {self.seed})" if self.stochastic else "RNE"
        return f"{self.name}: matmul operands in {ops}, fp32 PSUM accumulation, {sr}"


NUMERICS: dict[str, Numerics] = {
    n.name: n
    for n in (
        Numerics("native", None),
        Numerics("fp32", "float32"),
        Numerics("bf16", "bfloat16"),
        Numerics("fp16", "float16"),
        Numerics("fp8", "float8_e4m3fn"),
        Numerics("fp8_e5m2", "float8_e5m2"),
        Numerics("mxfp8", "mxfp8"),
        Numerics("mxfp4", "mxfp4"),
    )
}


def numerics(
    spec: str | Numerics = "native", rounding: str | None = None, seed: int | None = None
) -> Numerics:
    """A policy by name (``NUMERICS``) or as given, with ``rounding`` / ``seed`` overriding."""
    if isinstance(spec, Numerics):
        base = spec
    else:
        key = str(spec).lower().replace("-", "_")
        if key not in NUMERICS:
            raise UnknownNameError(
                f"no numerics policy {spec!r}; valid: {', '.join(NUMERICS)} (or a Numerics)"
            )
        base = NUMERICS[key]
    changes = {}
    if rounding is not None:
        changes["rounding"] = rounding
    if seed is not None:
        changes["seed"] = seed
    return replace(base, **changes) if changes else base


def op_seed(seed: int, op: str, *arrays: np.ndarray) -> int:
    """The stochastic-rounding seed of one op: a 63-bit hash (BLAKE2b) of the policy's seed,
    the op's name and each operand's shape, dtype and bytes. Deterministic, and independent of
    the order ops run in."""
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{seed}|{op}".encode())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"|{a.shape}|{a.dtype}|".encode())
        h.update(a.view(np.uint8).reshape(-1).data if a.size else b"")
    return int.from_bytes(h.digest(), "little") >> 1


def role_seed(seed: int, role: int) -> int:
    """The seed of one role of an op (0: operand A, 1: operand B, 2: the result)."""
    h = hashlib.blake2b(f"{seed}|role{role}".encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little") >> 1
