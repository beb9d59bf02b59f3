"""trnsim.numerics: bit-accurate number formats, rounding, MX block scaling, M:N sparsity.

Imports nothing of trnsim but ``trnsim.errors``. See ``formats`` (the one table of formats),
``rounding`` (cast, RNE and stochastic rounding), ``packing`` (NKI x4 types), ``mx`` (OCP MX
quantize / dequantize / matmul golden), ``nvfp4`` (NVIDIA NVFP4 quantize / dequantize) and
``sparsity`` (Trainium M:N patterns).
"""

from trnsim.numerics import nvfp4
from trnsim.numerics.formats import ALIASES, ALL_FORMATS, FORMATS, Format, get_format
from trnsim.numerics.mx import MXArray, dequantize, mx_matmul, quantize
from trnsim.numerics.packing import pack_x4, unpack_x4
from trnsim.numerics.rng import StochasticRng
from trnsim.numerics.rounding import (
    DEFAULT_SATURATE,
    ROUNDINGS,
    cast,
    decode_reference,
    encode_reference,
    to_float32,
)
from trnsim.numerics.sparsity import PATTERNS, SparsityError, check, compress, expand, prune

__all__ = [
    "ALIASES",
    "ALL_FORMATS",
    "DEFAULT_SATURATE",
    "FORMATS",
    "PATTERNS",
    "ROUNDINGS",
    "Format",
    "MXArray",
    "SparsityError",
    "StochasticRng",
    "cast",
    "check",
    "compress",
    "decode_reference",
    "dequantize",
    "encode_reference",
    "expand",
    "get_format",
    "mx_matmul",
    "nvfp4",
    "pack_x4",
    "prune",
    "quantize",
    "to_float32",
    "unpack_x4",
]
