"""NumPy references shared by the conformance cases (written here from the documentation).

Each computes in float64 (or float32 where the kernel's documented accumulation is fp32) and
returns the output in the kernel's documented output dtype.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

bf16 = np.dtype(ml_dtypes.bfloat16)


def randn(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """Standard normal values, rounded to ``dtype``."""
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def f64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def matmul_t(lhs_t: np.ndarray, rhs: np.ndarray, dtype: Any) -> np.ndarray:
    """``lhsT.T @ rhs`` with fp32-exact products, rounded once to ``dtype``."""
    return (f64(lhs_t).T @ f64(rhs)).astype(np.float32).astype(dtype)
